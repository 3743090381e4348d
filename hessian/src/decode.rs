//! The decoder: bounded, never panics on any input.

use std::fmt;

use crate::tag::*;
use crate::value::{List, Map, Object, Value};

/// Bounds on what one [`Decoder`] produces from untrusted bytes. Every length field is checked
/// against them and against the input that remains before anything is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lists, maps and objects nested in one another, a back reference's copy included
    /// (default 64). The decoder recurses once per level.
    pub max_depth: usize,
    /// Elements of one list, entries of one map, UTF-16 units of one string, bytes of one
    /// binary (default 16 Mi).
    pub max_len: usize,
    /// Values produced by the stream, every element of a copied back reference included
    /// (default 4 Mi).
    pub max_nodes: usize,
    /// Class definitions, and type names of lists and maps, in the stream (default 4096).
    pub max_classes: usize,
    /// Lists, maps and objects in the stream: the values a back reference can name
    /// (default 1 Mi).
    pub max_refs: usize,
    /// Bytes of text and binary in the produced values, counting every copy: an object's class
    /// and field names once per instance, a typed list's or map's type name once per list or
    /// map, the data inside each copied back reference (default 256 MiB).
    pub max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 64,
            max_len: 16 << 20,
            max_nodes: 4 << 20,
            max_classes: 4096,
            max_refs: 1 << 20,
            max_bytes: 256 << 20,
        }
    }
}

/// Values a back reference may add per input byte, beyond the input's own (see
/// [`Limits::for_input`]).
pub const NODES_PER_BYTE: usize = 8;
/// Bytes of text a back reference or repeated class and field names may add per input byte
/// (an instance of a class with one field can be 2 bytes, its names 100).
pub const TEXT_PER_BYTE: usize = 64;

impl Limits {
    /// The default limits, with what one stream may produce budgeted in proportion to its
    /// `len` bytes: at most [`NODES_PER_BYTE`] values and [`TEXT_PER_BYTE`] bytes of text per
    /// input byte, plus 64 Ki values and 1 MiB of text, and never more than the defaults.
    ///
    /// Without back references every value takes at least one input byte, and text is about
    /// its own size (class and field names repeated per instance aside), so what Java sends
    /// fits; what does not is amplification: a few kilobytes of references to a shared list,
    /// which [`Limits::default`] alone would let grow to 4 Mi values (hundreds of megabytes).
    /// [`Decoder::new`] and [`from_bytes`](crate::from_bytes) use these.
    pub fn for_input(len: usize) -> Limits {
        let d = Limits::default();
        Limits {
            max_nodes: d
                .max_nodes
                .min(len.saturating_mul(NODES_PER_BYTE).saturating_add(64 << 10)),
            max_bytes: d
                .max_bytes
                .min(len.saturating_mul(TEXT_PER_BYTE).saturating_add(1 << 20)),
            ..d
        }
    }
}

/// Why the bytes are not a Hessian value (or not within [`Limits`]), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    what: String,
    offset: usize,
}

impl DecodeError {
    fn new(what: impl Into<String>, offset: usize) -> Self {
        DecodeError {
            what: what.into(),
            offset,
        }
    }

    pub(crate) fn trailing(offset: usize) -> Self {
        DecodeError::new("bytes after the value", offset)
    }

    /// The offset of the byte at fault (the input's length when it ended too soon).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// What is wrong, without the offset.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hessian: {} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for DecodeError {}

type Result<T> = std::result::Result<T, DecodeError>;

/// Elements reserved ahead of decoding them; a longer list grows as its elements arrive.
const PREALLOCATE: usize = 1024;

/// Where a decoded value sits until the top-level value is complete.
#[derive(Debug)]
enum Slot {
    Leaf(Value),
    /// A container decoded here.
    Node(usize),
    /// A back reference to a complete container: a copy of it.
    Copy(usize),
    /// A back reference to a container still being decoded: [`Value::Ref`].
    Cycle(usize),
}

#[derive(Debug)]
enum Body {
    /// Still being decoded.
    Open,
    List {
        class: Option<String>,
        items: Vec<Slot>,
    },
    Map {
        class: Option<String>,
        entries: Vec<(Slot, Slot)>,
    },
    Object {
        class: usize,
        fields: Vec<Slot>,
    },
}

/// One list, map or object of the stream, numbered as Hessian refs number them.
#[derive(Debug)]
struct Node {
    body: Body,
    /// Values in its materialised form (itself included).
    nodes: usize,
    /// Text and binary bytes in its materialised form.
    bytes: usize,
    /// Nesting depth of its materialised form (1 for a container of scalars).
    depth: usize,
}

#[derive(Debug)]
struct ClassDef {
    name: String,
    fields: Vec<String>,
    bytes: usize,
}

/// Reads one Hessian 2.0 stream from a byte slice: class definitions, type names and back
/// references are shared by the values read one after another, as in one `Hessian2Input`.
///
/// A back reference to a value already complete gives a copy of it (charged to
/// [`Limits::max_nodes`] and [`Limits::max_bytes`] in full, so chains of references cannot
/// blow up); one to a value still being decoded gives [`Value::Ref`]. After an error the
/// decoder's position and tables are unspecified: stop reading from it.
#[derive(Debug)]
pub struct Decoder<'a> {
    input: &'a [u8],
    pos: usize,
    limits: Limits,
    classes: Vec<ClassDef>,
    types: Vec<String>,
    nodes: Vec<Node>,
    produced_nodes: usize,
    produced_bytes: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder with the limits for its input's size ([`Limits::for_input`]).
    pub fn new(input: &'a [u8]) -> Self {
        Self::with_limits(input, Limits::for_input(input.len()))
    }

    /// A decoder with the given limits.
    pub fn with_limits(input: &'a [u8], limits: Limits) -> Self {
        Decoder {
            input,
            pos: 0,
            limits,
            classes: Vec::new(),
            types: Vec::new(),
            nodes: Vec::new(),
            produced_nodes: 0,
            produced_bytes: 0,
        }
    }

    /// Reads the next value.
    pub fn read(&mut self) -> Result<Value> {
        let slot = self.read_slot(0)?;
        Ok(self.materialize(&slot))
    }

    /// The offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub fn is_at_end(&self) -> bool {
        self.pos >= self.input.len()
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn remaining(&self) -> usize {
        self.input.len().saturating_sub(self.pos)
    }

    fn byte(&mut self) -> Result<u8> {
        match self.input.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(DecodeError::new(
                "unexpected end of input",
                self.input.len(),
            )),
        }
    }

    fn peek(&self) -> Result<u8> {
        self.input
            .get(self.pos)
            .copied()
            .ok_or_else(|| DecodeError::new("unexpected end of input", self.input.len()))
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.pos.checked_add(N).filter(|&e| e <= self.input.len());
        match end {
            Some(end) => {
                let mut out = [0u8; N];
                out.copy_from_slice(&self.input[self.pos..end]);
                self.pos = end;
                Ok(out)
            }
            None => Err(DecodeError::new(
                "unexpected end of input",
                self.input.len(),
            )),
        }
    }

    fn u16(&mut self) -> Result<usize> {
        Ok(usize::from(u16::from_be_bytes(self.bytes::<2>()?)))
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.bytes::<4>()?))
    }

    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.bytes::<8>()?))
    }

    fn charge(&mut self, nodes: usize, bytes: usize, at: usize) -> Result<()> {
        self.produced_nodes = self.produced_nodes.saturating_add(nodes);
        if self.produced_nodes > self.limits.max_nodes {
            return Err(DecodeError::new(
                format!("more than {} values (max_nodes)", self.limits.max_nodes),
                at,
            ));
        }
        self.produced_bytes = self.produced_bytes.saturating_add(bytes);
        if self.produced_bytes > self.limits.max_bytes {
            return Err(DecodeError::new(
                format!(
                    "more than {} bytes of text and binary (max_bytes)",
                    self.limits.max_bytes
                ),
                at,
            ));
        }
        Ok(())
    }

    /// Whether `n` more values fit in [`Limits::max_nodes`].
    fn check_nodes_left(&self, n: usize, at: usize) -> Result<()> {
        if n > self.limits.max_nodes.saturating_sub(self.produced_nodes) {
            return Err(DecodeError::new(
                format!(
                    "{n} elements would be more than {} values (max_nodes)",
                    self.limits.max_nodes
                ),
                at,
            ));
        }
        Ok(())
    }

    fn leaf(&mut self, v: Value, at: usize) -> Result<Slot> {
        let bytes = match &v {
            Value::String(s) => s.len(),
            Value::Binary(b) => b.len(),
            _ => 0,
        };
        self.charge(1, bytes, at)?;
        Ok(Slot::Leaf(v))
    }

    /// One value at nesting depth `depth` (the number of containers around it).
    fn read_slot(&mut self, depth: usize) -> Result<Slot> {
        loop {
            let at = self.pos;
            let tag = self.byte()?;
            let v = match tag {
                BC_NULL => Value::Null,
                BC_TRUE => Value::Bool(true),
                BC_FALSE => Value::Bool(false),

                0x80..=0xbf | 0xc0..=0xcf | 0xd0..=0xd7 | BC_INT => {
                    Value::Int(self.int_after(tag, at)?)
                }

                0xd8..=0xef => Value::Long(i64::from(tag) - i64::from(BC_LONG_ZERO)),
                0xf0..=0xff => {
                    let b = self.byte()?;
                    Value::Long(
                        ((i64::from(tag) - i64::from(BC_LONG_BYTE_ZERO)) << 8) + i64::from(b),
                    )
                }
                0x38..=0x3f => {
                    let [b1, b2] = self.bytes::<2>()?;
                    Value::Long(
                        ((i64::from(tag) - i64::from(BC_LONG_SHORT_ZERO)) << 16)
                            + (i64::from(b1) << 8)
                            + i64::from(b2),
                    )
                }
                BC_LONG_INT => Value::Long(i64::from(self.i32()?)),
                BC_LONG => Value::Long(self.i64()?),

                BC_DOUBLE_ZERO => Value::Double(0.0),
                BC_DOUBLE_ONE => Value::Double(1.0),
                BC_DOUBLE_BYTE => Value::Double(f64::from(self.byte()? as i8)),
                BC_DOUBLE_SHORT => Value::Double(f64::from(i16::from_be_bytes(self.bytes::<2>()?))),
                BC_DOUBLE_MILL => Value::Double(0.001 * f64::from(self.i32()?)),
                BC_DOUBLE => Value::Double(f64::from_bits(self.i64()? as u64)),

                BC_DATE => Value::Date(self.i64()?),
                BC_DATE_MINUTE => Value::Date(i64::from(self.i32()?) * 60_000),

                0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                    Value::String(self.string_after(tag, at)?)
                }

                0x20..=0x2f | 0x34..=0x37 | BC_BINARY_CHUNK | BC_BINARY => {
                    Value::Binary(self.binary_after(tag, at)?)
                }

                BC_LIST_VARIABLE => {
                    let class = self.read_type()?;
                    return self.read_list(class, None, depth, at);
                }
                BC_LIST_FIXED => {
                    let class = self.read_type()?;
                    let len = self.read_len()?;
                    return self.read_list(class, Some(len), depth, at);
                }
                BC_LIST_VARIABLE_UNTYPED => return self.read_list(None, None, depth, at),
                BC_LIST_FIXED_UNTYPED => {
                    let len = self.read_len()?;
                    return self.read_list(None, Some(len), depth, at);
                }
                0x70..=0x77 => {
                    let class = self.read_type()?;
                    let len = usize::from(tag - BC_LIST_DIRECT);
                    return self.read_list(class, Some(len), depth, at);
                }
                0x78..=0x7f => {
                    let len = usize::from(tag - BC_LIST_DIRECT_UNTYPED);
                    return self.read_list(None, Some(len), depth, at);
                }

                BC_MAP_UNTYPED => return self.read_map(None, depth, at),
                BC_MAP => {
                    let class = self.read_type()?;
                    return self.read_map(class, depth, at);
                }

                BC_CLASS_DEF => {
                    self.read_class_def(at)?;
                    // The definition prefixes a value (normally the first instance).
                    continue;
                }
                0x60..=0x6f => {
                    let index = usize::from(tag - BC_OBJECT_DIRECT);
                    return self.read_object(index, depth, at);
                }
                BC_OBJECT => {
                    let index_at = self.pos;
                    let index = self.read_int()?;
                    let index = usize::try_from(index)
                        .map_err(|_| DecodeError::new("negative class index", index_at))?;
                    return self.read_object(index, depth, at);
                }

                BC_REF => return self.read_ref(depth, at),

                BC_END => return Err(DecodeError::new("unexpected end marker 'Z'", at)),
                other => {
                    return Err(DecodeError::new(format!("unknown tag 0x{other:02x}"), at));
                }
            };
            return self.leaf(v, at);
        }
    }

    /// An int whose tag was just read.
    fn int_after(&mut self, tag: u8, at: usize) -> Result<i32> {
        match tag {
            0x80..=0xbf => Ok(i32::from(tag) - i32::from(BC_INT_ZERO)),
            0xc0..=0xcf => {
                let b = self.byte()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_BYTE_ZERO)) << 8) + i32::from(b))
            }
            0xd0..=0xd7 => {
                let [b1, b2] = self.bytes::<2>()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_SHORT_ZERO)) << 16)
                    + (i32::from(b1) << 8)
                    + i32::from(b2))
            }
            BC_INT => self.i32(),
            other => Err(DecodeError::new(
                format!("expected an int, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    fn read_int(&mut self) -> Result<i32> {
        let at = self.pos;
        let tag = self.byte()?;
        self.int_after(tag, at)
    }

    /// A list length: an int, not negative, within `max_len` and the input left (each element
    /// takes at least one byte).
    fn read_len(&mut self) -> Result<usize> {
        let at = self.pos;
        let len = self.read_int()?;
        let len = usize::try_from(len).map_err(|_| DecodeError::new("negative length", at))?;
        self.check_len(len, self.remaining(), at)?;
        Ok(len)
    }

    fn check_len(&self, len: usize, available: usize, at: usize) -> Result<()> {
        if len > self.limits.max_len {
            return Err(DecodeError::new(
                format!(
                    "length {len} is over the limit {} (max_len)",
                    self.limits.max_len
                ),
                at,
            ));
        }
        if len > available {
            return Err(DecodeError::new(
                format!("length {len} is more than the {available} bytes left"),
                at,
            ));
        }
        Ok(())
    }

    /// A string whose first tag was just read: its chunks.
    fn string_after(&mut self, tag: u8, at: usize) -> Result<String> {
        let (mut len, mut last) = match tag {
            0x00..=0x1f => (usize::from(tag - BC_STRING_DIRECT), true),
            0x30..=0x33 => {
                let b = self.byte()?;
                (
                    (usize::from(tag - BC_STRING_SHORT) << 8) + usize::from(b),
                    true,
                )
            }
            BC_STRING_CHUNK => (self.u16()?, false),
            BC_STRING => (self.u16()?, true),
            other => {
                return Err(DecodeError::new(
                    format!("expected a string, found tag 0x{other:02x}"),
                    at,
                ));
            }
        };
        let mut s = String::new();
        let mut total = 0usize;
        let mut high: Option<(u16, usize)> = None;
        loop {
            total += len;
            // Each UTF-16 unit takes one to three bytes.
            self.check_len(total, total - len + self.remaining(), at)?;
            s.reserve(len);
            for _ in 0..len {
                let unit_at = self.pos;
                let unit = self.utf8_unit()?;
                match (high.take(), unit) {
                    (Some((h, _)), 0xdc00..=0xdfff) => {
                        let c =
                            0x10000 + ((u32::from(h) - 0xd800) << 10) + (u32::from(unit) - 0xdc00);
                        // Always a valid scalar value: 0x10000..=0x10ffff.
                        s.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                    (Some((_, h_at)), _) => {
                        return Err(DecodeError::new("unpaired high surrogate", h_at));
                    }
                    (None, 0xd800..=0xdbff) => high = Some((unit, unit_at)),
                    (None, 0xdc00..=0xdfff) => {
                        return Err(DecodeError::new("unpaired low surrogate", unit_at));
                    }
                    (None, u) => {
                        s.push(char::from_u32(u32::from(u)).unwrap_or(char::REPLACEMENT_CHARACTER))
                    }
                }
            }
            if last {
                break;
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = match tag {
                BC_STRING_CHUNK => (self.u16()?, false),
                BC_STRING => (self.u16()?, true),
                0x00..=0x1f => (usize::from(tag - BC_STRING_DIRECT), true),
                0x30..=0x33 => {
                    let b = self.byte()?;
                    (
                        (usize::from(tag - BC_STRING_SHORT) << 8) + usize::from(b),
                        true,
                    )
                }
                other => {
                    return Err(DecodeError::new(
                        format!("expected a string chunk, found tag 0x{other:02x}"),
                        chunk_at,
                    ));
                }
            };
        }
        if let Some((_, h_at)) = high {
            return Err(DecodeError::new("unpaired high surrogate", h_at));
        }
        Ok(s)
    }

    /// One UTF-16 unit in Hessian's UTF-8: one to three bytes, surrogates encoded on their own.
    fn utf8_unit(&mut self) -> Result<u16> {
        let at = self.pos;
        let b0 = self.byte()?;
        if b0 < 0x80 {
            return Ok(u16::from(b0));
        }
        let cont = |d: &mut Self| -> Result<u16> {
            let p = d.pos;
            let b = d.byte()?;
            if b & 0xc0 == 0x80 {
                Ok(u16::from(b & 0x3f))
            } else {
                Err(DecodeError::new("bad UTF-8 continuation byte", p))
            }
        };
        if b0 & 0xe0 == 0xc0 {
            let b1 = cont(self)?;
            Ok((u16::from(b0 & 0x1f) << 6) | b1)
        } else if b0 & 0xf0 == 0xe0 {
            let b1 = cont(self)?;
            let b2 = cont(self)?;
            Ok((u16::from(b0 & 0x0f) << 12) | (b1 << 6) | b2)
        } else {
            Err(DecodeError::new(
                format!("bad UTF-8 lead byte 0x{b0:02x}"),
                at,
            ))
        }
    }

    /// A binary whose first tag was just read: its chunks.
    fn binary_after(&mut self, tag: u8, at: usize) -> Result<Vec<u8>> {
        let (mut len, mut last) = match tag {
            0x20..=0x2f => (usize::from(tag - BC_BINARY_DIRECT), true),
            0x34..=0x37 => {
                let b = self.byte()?;
                (
                    (usize::from(tag - BC_BINARY_SHORT) << 8) + usize::from(b),
                    true,
                )
            }
            BC_BINARY_CHUNK => (self.u16()?, false),
            _ => (self.u16()?, true),
        };
        let mut out = Vec::new();
        loop {
            let total = out.len() + len;
            self.check_len(total, out.len() + self.remaining(), at)?;
            out.extend_from_slice(&self.input[self.pos..self.pos + len]);
            self.pos += len;
            if last {
                return Ok(out);
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = match tag {
                BC_BINARY_CHUNK => (self.u16()?, false),
                BC_BINARY => (self.u16()?, true),
                0x20..=0x2f => (usize::from(tag - BC_BINARY_DIRECT), true),
                0x34..=0x37 => {
                    let b = self.byte()?;
                    (
                        (usize::from(tag - BC_BINARY_SHORT) << 8) + usize::from(b),
                        true,
                    )
                }
                other => {
                    return Err(DecodeError::new(
                        format!("expected a binary chunk, found tag 0x{other:02x}"),
                        chunk_at,
                    ));
                }
            };
        }
    }

    /// A list's or map's type: a string (remembered) or an int naming one seen before. An
    /// empty name is no type.
    fn read_type(&mut self) -> Result<Option<String>> {
        let at = self.pos;
        let tag = self.byte()?;
        match tag {
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                let name = self.string_after(tag, at)?;
                if self.types.len() >= self.limits.max_classes {
                    return Err(DecodeError::new(
                        format!(
                            "more than {} type names (max_classes)",
                            self.limits.max_classes
                        ),
                        at,
                    ));
                }
                self.types.push(name.clone());
                Ok(Some(name).filter(|n| !n.is_empty()))
            }
            0x80..=0xd7 | BC_INT => {
                let i = self.int_after(tag, at)?;
                let name = usize::try_from(i)
                    .ok()
                    .and_then(|i| self.types.get(i))
                    .ok_or_else(|| {
                        DecodeError::new(
                            format!(
                                "type reference {i} out of range ({} types)",
                                self.types.len()
                            ),
                            at,
                        )
                    })?;
                Ok(Some(name.clone()).filter(|n| !n.is_empty()))
            }
            other => Err(DecodeError::new(
                format!("expected a type name, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    fn read_name(&mut self) -> Result<String> {
        let at = self.pos;
        let tag = self.byte()?;
        self.string_after(tag, at)
    }

    fn read_class_def(&mut self, at: usize) -> Result<()> {
        if self.classes.len() >= self.limits.max_classes {
            return Err(DecodeError::new(
                format!(
                    "more than {} class definitions (max_classes)",
                    self.limits.max_classes
                ),
                at,
            ));
        }
        let name = self.read_name()?;
        let len = self.read_len()?;
        let mut fields = Vec::with_capacity(len.min(PREALLOCATE));
        let mut bytes = name.len();
        for _ in 0..len {
            let f = self.read_name()?;
            bytes += f.len();
            fields.push(f);
        }
        self.classes.push(ClassDef {
            name,
            fields,
            bytes,
        });
        Ok(())
    }

    /// Opens a container: numbers it for refs and checks the depth.
    fn open(&mut self, depth: usize, at: usize) -> Result<usize> {
        if depth >= self.limits.max_depth {
            return Err(DecodeError::new(
                format!("nested deeper than {} (max_depth)", self.limits.max_depth),
                at,
            ));
        }
        if self.nodes.len() >= self.limits.max_refs {
            return Err(DecodeError::new(
                format!(
                    "more than {} lists, maps and objects (max_refs)",
                    self.limits.max_refs
                ),
                at,
            ));
        }
        self.nodes.push(Node {
            body: Body::Open,
            nodes: 1,
            bytes: 0,
            depth: 1,
        });
        Ok(self.nodes.len() - 1)
    }

    /// Closes a container: its body and the size and depth of its materialised form.
    fn close(&mut self, index: usize, body: Body, own_bytes: usize) {
        let mut nodes = 1usize;
        let mut bytes = own_bytes;
        let mut depth = 0usize;
        let mut add = |s: &Slot, all: &[Node]| {
            let (n, b, d) = match s {
                Slot::Leaf(Value::String(v)) => (1, v.len(), 0),
                Slot::Leaf(Value::Binary(v)) => (1, v.len(), 0),
                Slot::Leaf(_) | Slot::Cycle(_) => (1, 0, 0),
                Slot::Node(i) | Slot::Copy(i) => (all[*i].nodes, all[*i].bytes, all[*i].depth),
            };
            nodes = nodes.saturating_add(n);
            bytes = bytes.saturating_add(b);
            depth = depth.max(d);
        };
        match &body {
            Body::List { items, .. } => items.iter().for_each(|s| add(s, &self.nodes)),
            Body::Map { entries, .. } => entries.iter().for_each(|(k, v)| {
                add(k, &self.nodes);
                add(v, &self.nodes);
            }),
            Body::Object { fields, .. } => fields.iter().for_each(|s| add(s, &self.nodes)),
            Body::Open => {}
        }
        let node = &mut self.nodes[index];
        node.body = body;
        node.nodes = nodes;
        node.bytes = bytes;
        node.depth = depth + 1;
    }

    fn read_list(
        &mut self,
        class: Option<String>,
        len: Option<usize>,
        depth: usize,
        at: usize,
    ) -> Result<Slot> {
        let index = self.open(depth, at)?;
        let own_bytes = class.as_ref().map_or(0, String::len);
        self.charge(1, own_bytes, at)?;
        let items = match len {
            Some(len) => {
                // Each element takes at least one byte and counts as one value.
                self.check_len(len, self.remaining(), at)?;
                self.check_nodes_left(len, at)?;
                let mut items = Vec::with_capacity(len.min(PREALLOCATE));
                for _ in 0..len {
                    items.push(self.read_slot(depth + 1)?);
                }
                items
            }
            None => {
                let mut items = Vec::new();
                while self.peek()? != BC_END {
                    if items.len() >= self.limits.max_len {
                        return Err(DecodeError::new(
                            format!("list longer than {} (max_len)", self.limits.max_len),
                            at,
                        ));
                    }
                    items.push(self.read_slot(depth + 1)?);
                }
                self.pos += 1;
                items
            }
        };
        self.close(index, Body::List { class, items }, own_bytes);
        Ok(Slot::Node(index))
    }

    fn read_map(&mut self, class: Option<String>, depth: usize, at: usize) -> Result<Slot> {
        let index = self.open(depth, at)?;
        let own_bytes = class.as_ref().map_or(0, String::len);
        self.charge(1, own_bytes, at)?;
        let mut entries = Vec::new();
        while self.peek()? != BC_END {
            if entries.len() >= self.limits.max_len {
                return Err(DecodeError::new(
                    format!("map longer than {} (max_len)", self.limits.max_len),
                    at,
                ));
            }
            let k = self.read_slot(depth + 1)?;
            let v = self.read_slot(depth + 1)?;
            entries.push((k, v));
        }
        self.pos += 1;
        self.close(index, Body::Map { class, entries }, own_bytes);
        Ok(Slot::Node(index))
    }

    fn read_object(&mut self, class: usize, depth: usize, at: usize) -> Result<Slot> {
        let Some(def) = self.classes.get(class) else {
            return Err(DecodeError::new(
                format!(
                    "class reference {class} out of range ({} definitions)",
                    self.classes.len()
                ),
                at,
            ));
        };
        let (len, own_bytes) = (def.fields.len(), def.bytes);
        let index = self.open(depth, at)?;
        self.charge(1, own_bytes, at)?;
        self.check_len(len, self.remaining(), at)?;
        self.check_nodes_left(len, at)?;
        let mut fields = Vec::with_capacity(len.min(PREALLOCATE));
        for _ in 0..len {
            fields.push(self.read_slot(depth + 1)?);
        }
        self.close(index, Body::Object { class, fields }, own_bytes);
        Ok(Slot::Node(index))
    }

    fn read_ref(&mut self, depth: usize, at: usize) -> Result<Slot> {
        let n = self.read_int()?;
        let node = usize::try_from(n).ok().filter(|&i| i < self.nodes.len());
        let Some(i) = node else {
            return Err(DecodeError::new(
                format!(
                    "ref {n} out of range ({} values to refer to)",
                    self.nodes.len()
                ),
                at,
            ));
        };
        if matches!(self.nodes[i].body, Body::Open) {
            self.charge(1, 0, at)?;
            return Ok(Slot::Cycle(i));
        }
        let (nodes, bytes, d) = (
            self.nodes[i].nodes,
            self.nodes[i].bytes,
            self.nodes[i].depth,
        );
        if depth + d > self.limits.max_depth {
            return Err(DecodeError::new(
                format!(
                    "ref {n} copied here would nest deeper than {} (max_depth)",
                    self.limits.max_depth
                ),
                at,
            ));
        }
        self.charge(nodes, bytes, at)?;
        Ok(Slot::Copy(i))
    }

    fn materialize(&self, slot: &Slot) -> Value {
        match slot {
            Slot::Leaf(v) => v.clone(),
            Slot::Cycle(i) => Value::Ref(*i),
            Slot::Node(i) | Slot::Copy(i) => match &self.nodes[*i].body {
                Body::List { class, items } => Value::List(List {
                    class: class.clone(),
                    items: items.iter().map(|s| self.materialize(s)).collect(),
                }),
                Body::Map { class, entries } => Value::Map(Map {
                    class: class.clone(),
                    entries: entries
                        .iter()
                        .map(|(k, v)| (self.materialize(k), self.materialize(v)))
                        .collect(),
                }),
                Body::Object { class, fields } => {
                    let def = &self.classes[*class];
                    Value::Object(Object {
                        class: def.name.clone(),
                        fields: def
                            .fields
                            .iter()
                            .zip(fields)
                            .map(|(name, s)| (name.clone(), self.materialize(s)))
                            .collect(),
                    })
                }
                // Not reachable: a slot names only closed nodes once its read returned.
                Body::Open => Value::Ref(*i),
            },
        }
    }
}
