//! [`Deserializer`]: Hessian bytes straight into Rust types, bounded by [`Limits`].
//!
//! Back references (`0x51 n`) are read by reading the referenced list, map or object again
//! from its recorded offset: every value of such a replay counts against
//! [`Limits::max_nodes`] and its text against [`Limits::max_bytes`], so refs cannot amplify
//! past the budget; a ref to a value still being read (a cycle) is an error, except a
//! `cause` field that refers to its own object (Java's "no cause" in a `Throwable`), which
//! reads as `null`.

use ::serde::de::{self, Deserialize, DeserializeSeed, IntoDeserializer, Visitor};
use ::serde::forward_to_deserialize_any;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::error::{Error, Result};
use super::java::{BIG_DECIMAL, DATE};
use crate::Limits;
use crate::bignum;
use crate::tag::*;

/// Typed reads: what `deserialize_any` reads, in the raw form (bytes as bytes, objects as
/// their fields).
macro_rules! forward_raw {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                self.deserialize_ignored_any(visitor)
            }
        )*
    };
}

/// The most 32-bit word operations one deserializer spends rendering `BigInteger`s as
/// decimal (in `deserialize_any`), as `to_json` does.
const BIGNUM_WORK: u64 = 16 * (bignum::MAX_WORDS as u64) * (bignum::MAX_WORDS as u64);

/// Reads typed values from one Hessian 2.0 stream in a byte slice: class definitions, type
/// names and back references are shared by the values read one after another, as in one
/// `Hessian2Input`. [`Deserializer::read`] reads the next value; [`Deserializer::position`]
/// tells how many bytes were consumed.
///
/// It is also a `serde::Deserializer` (`T::deserialize(&mut de)`). After an error, stop
/// reading from it.
#[derive(Debug)]
pub struct Deserializer<'de> {
    input: &'de [u8],
    pos: usize,
    limits: Limits,
    depth: usize,
    nodes: usize,
    bytes: usize,
    classes: Vec<Class>,
    /// Type names seen (only their number matters: type refs are checked against it).
    types: usize,
    /// Lists, maps and objects by ref number: (offset of their tag, complete).
    refs: Vec<(usize, bool)>,
    /// Nonzero while reading a back reference again: nothing new is numbered or defined.
    replaying: usize,
    bignum_work: u64,
}

#[derive(Debug)]
struct Class {
    name: String,
    fields: Vec<String>,
}

/// How `deserialize_any` presents values: `Json` as this crate's JSON mapping does (what a
/// `serde_json::Value` or an untagged enum sees), `Raw` for typed reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Json,
    Raw,
}

enum Text<'de> {
    Borrowed(&'de str),
    Owned(String),
}

enum Bin<'de> {
    Borrowed(&'de [u8]),
    Owned(Vec<u8>),
}

impl<'de> Deserializer<'de> {
    /// A deserializer with the limits for its input's size ([`Limits::for_input`]).
    pub fn new(input: &'de [u8]) -> Self {
        Self::with_limits(input, Limits::for_input(input.len()))
    }

    /// A deserializer with the given limits.
    pub fn with_limits(input: &'de [u8], limits: Limits) -> Self {
        Deserializer {
            input,
            pos: 0,
            limits,
            depth: 0,
            nodes: 0,
            bytes: 0,
            classes: Vec::new(),
            types: 0,
            refs: Vec::new(),
            replaying: 0,
            bignum_work: BIGNUM_WORK,
        }
    }

    /// Reads the next value as a `T`.
    pub fn read<T: Deserialize<'de>>(&mut self) -> Result<T> {
        T::deserialize(&mut *self).map_err(|e| e.or_at(self.pos))
    }

    /// The offset of the next byte to read: the bytes consumed so far.
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

    // ----- raw bytes ----------------------------------------------------------------------

    fn eof(&self) -> Error {
        Error::at("unexpected end of input", self.input.len())
    }

    fn remaining(&self) -> usize {
        self.input.len().saturating_sub(self.pos)
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self.input.get(self.pos).ok_or_else(|| self.eof())?;
        self.pos += 1;
        Ok(b)
    }

    fn peek(&self) -> Result<u8> {
        self.input.get(self.pos).copied().ok_or_else(|| self.eof())
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8]> {
        let input: &'de [u8] = self.input;
        let end = self.pos.checked_add(n).filter(|&e| e <= input.len());
        let end = end.ok_or_else(|| self.eof())?;
        let s = &input[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    fn u16(&mut self) -> Result<usize> {
        Ok(usize::from(u16::from_be_bytes(self.array::<2>()?)))
    }

    // ----- accounting ---------------------------------------------------------------------

    fn charge(&mut self, nodes: usize, bytes: usize, at: usize) -> Result<()> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > self.limits.max_nodes {
            return Err(Error::at(
                format!("more than {} values (max_nodes)", self.limits.max_nodes),
                at,
            ));
        }
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.limits.max_bytes {
            return Err(Error::at(
                format!(
                    "more than {} bytes of text and binary (max_bytes)",
                    self.limits.max_bytes
                ),
                at,
            ));
        }
        Ok(())
    }

    fn check_len(&self, len: usize, available: usize, at: usize) -> Result<()> {
        if len > self.limits.max_len {
            return Err(Error::at(
                format!(
                    "length {len} is over the limit {} (max_len)",
                    self.limits.max_len
                ),
                at,
            ));
        }
        if len > available {
            return Err(Error::at(
                format!("length {len} is more than the {available} bytes left"),
                at,
            ));
        }
        Ok(())
    }

    // ----- tags, numbers, text ------------------------------------------------------------

    /// The tag of the next value (class definitions before it read), counted as one value.
    fn value_tag(&mut self) -> Result<(u8, usize)> {
        loop {
            let at = self.pos;
            let tag = self.byte()?;
            if tag == BC_CLASS_DEF {
                self.class_def(at)?;
                continue;
            }
            self.charge(1, 0, at)?;
            return Ok((tag, at));
        }
    }

    fn int_after(&mut self, tag: u8, at: usize) -> Result<i32> {
        match tag {
            0x80..=0xbf => Ok(i32::from(tag) - i32::from(BC_INT_ZERO)),
            0xc0..=0xcf => {
                let b = self.byte()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_BYTE_ZERO)) << 8) + i32::from(b))
            }
            0xd0..=0xd7 => {
                let [b1, b2] = self.array::<2>()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_SHORT_ZERO)) << 16)
                    + (i32::from(b1) << 8)
                    + i32::from(b2))
            }
            BC_INT => Ok(i32::from_be_bytes(self.array::<4>()?)),
            other => Err(Error::at(
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

    /// A length: an int, not negative, within `max_len` and the input left (each element
    /// takes at least a byte).
    fn read_len(&mut self) -> Result<usize> {
        let at = self.pos;
        let n = self.read_int()?;
        let n = usize::try_from(n).map_err(|_| Error::at("negative length", at))?;
        self.check_len(n, self.remaining(), at)?;
        Ok(n)
    }

    fn long_after(&mut self, tag: u8) -> Result<i64> {
        Ok(match tag {
            0xd8..=0xef => i64::from(tag) - i64::from(BC_LONG_ZERO),
            0xf0..=0xff => {
                let b = self.byte()?;
                ((i64::from(tag) - i64::from(BC_LONG_BYTE_ZERO)) << 8) + i64::from(b)
            }
            0x38..=0x3f => {
                let [b1, b2] = self.array::<2>()?;
                ((i64::from(tag) - i64::from(BC_LONG_SHORT_ZERO)) << 16)
                    + (i64::from(b1) << 8)
                    + i64::from(b2)
            }
            BC_LONG_INT => i64::from(i32::from_be_bytes(self.array::<4>()?)),
            _ => i64::from_be_bytes(self.array::<8>()?),
        })
    }

    fn double_after(&mut self, tag: u8) -> Result<f64> {
        Ok(match tag {
            BC_DOUBLE_ZERO => 0.0,
            BC_DOUBLE_ONE => 1.0,
            BC_DOUBLE_BYTE => f64::from(self.byte()? as i8),
            BC_DOUBLE_SHORT => f64::from(i16::from_be_bytes(self.array::<2>()?)),
            BC_DOUBLE_MILL => 0.001 * f64::from(i32::from_be_bytes(self.array::<4>()?)),
            _ => f64::from_bits(u64::from_be_bytes(self.array::<8>()?)),
        })
    }

    fn date_after(&mut self, tag: u8) -> Result<i64> {
        if tag == BC_DATE {
            Ok(i64::from_be_bytes(self.array::<8>()?))
        } else {
            Ok(i64::from(i32::from_be_bytes(self.array::<4>()?)) * 60_000)
        }
    }

    /// A string chunk header after its tag: (UTF-16 units, whether it is the last chunk).
    fn string_chunk(&mut self, tag: u8, at: usize) -> Result<(usize, bool)> {
        Ok(match tag {
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
                return Err(Error::at(
                    format!("expected a string, found tag 0x{other:02x}"),
                    at,
                ));
            }
        })
    }

    /// A string whose tag was just read: borrowed from the input when it is one chunk of
    /// plain UTF-8 (no surrogates), else decoded.
    fn string_after(&mut self, tag: u8, at: usize) -> Result<Text<'de>> {
        let (len, last) = self.string_chunk(tag, at)?;
        self.check_len(len, self.remaining(), at)?;
        if last {
            let start = self.pos;
            let input: &'de [u8] = self.input;
            let mut end = start;
            let mut plain = true;
            if input[start..start + len].is_ascii() {
                end = start + len;
            } else {
                for _ in 0..len {
                    let Some(&b0) = input.get(end) else {
                        plain = false;
                        break;
                    };
                    let w = match b0 {
                        0x00..=0x7f => 1,
                        0xc0..=0xdf => 2,
                        // 0xed 0xa0..: a surrogate, Java's way of writing non-BMP chars.
                        0xed if input.get(end + 1).is_some_and(|&b| b >= 0xa0) => {
                            plain = false;
                            break;
                        }
                        0xe0..=0xef => 3,
                        _ => {
                            plain = false;
                            break;
                        }
                    };
                    end += w;
                }
            }
            if plain
                && end <= input.len()
                && let Ok(s) = std::str::from_utf8(&input[start..end])
            {
                self.pos = end;
                self.charge(0, s.len(), at)?;
                return Ok(Text::Borrowed(s));
            }
        }
        let s = self.string_units(len, last, at)?;
        self.charge(0, s.len(), at)?;
        Ok(Text::Owned(s))
    }

    /// A string decoded unit by unit from its first chunk's body on.
    fn string_units(&mut self, mut len: usize, mut last: bool, at: usize) -> Result<String> {
        let mut s = String::new();
        let mut total = 0usize;
        let mut high: Option<(u16, usize)> = None;
        loop {
            total += len;
            self.check_len(total, total - len + self.remaining(), at)?;
            s.reserve(len);
            for _ in 0..len {
                let unit_at = self.pos;
                let unit = self.utf8_unit()?;
                match (high.take(), unit) {
                    (Some((h, _)), 0xdc00..=0xdfff) => {
                        let c =
                            0x10000 + ((u32::from(h) - 0xd800) << 10) + (u32::from(unit) - 0xdc00);
                        s.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                    (Some((_, h_at)), _) => {
                        return Err(Error::at("unpaired high surrogate", h_at));
                    }
                    (None, 0xd800..=0xdbff) => high = Some((unit, unit_at)),
                    (None, 0xdc00..=0xdfff) => {
                        return Err(Error::at("unpaired low surrogate", unit_at));
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
            (len, last) = self.string_chunk(tag, chunk_at).map_err(|_| {
                Error::at(
                    format!("expected a string chunk, found tag 0x{tag:02x}"),
                    chunk_at,
                )
            })?;
        }
        if let Some((_, h_at)) = high {
            return Err(Error::at("unpaired high surrogate", h_at));
        }
        Ok(s)
    }

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
                Err(Error::at("bad UTF-8 continuation byte", p))
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
            Err(Error::at(format!("bad UTF-8 lead byte 0x{b0:02x}"), at))
        }
    }

    fn binary_chunk(&mut self, tag: u8, at: usize) -> Result<(usize, bool)> {
        Ok(match tag {
            0x20..=0x2f => (usize::from(tag - BC_BINARY_DIRECT), true),
            0x34..=0x37 => {
                let b = self.byte()?;
                (
                    (usize::from(tag - BC_BINARY_SHORT) << 8) + usize::from(b),
                    true,
                )
            }
            BC_BINARY_CHUNK => (self.u16()?, false),
            BC_BINARY => (self.u16()?, true),
            other => {
                return Err(Error::at(
                    format!("expected a binary chunk, found tag 0x{other:02x}"),
                    at,
                ));
            }
        })
    }

    fn binary_after(&mut self, tag: u8, at: usize) -> Result<Bin<'de>> {
        let (mut len, mut last) = self.binary_chunk(tag, at)?;
        if last {
            self.check_len(len, self.remaining(), at)?;
            let b = self.take(len)?;
            self.charge(0, len, at)?;
            return Ok(Bin::Borrowed(b));
        }
        let mut out = Vec::new();
        loop {
            self.check_len(out.len() + len, out.len() + self.remaining(), at)?;
            let b = self.take(len)?;
            out.extend_from_slice(b);
            if last {
                break;
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = self.binary_chunk(tag, chunk_at)?;
        }
        self.charge(0, out.len(), at)?;
        Ok(Bin::Owned(out))
    }

    fn name(&mut self) -> Result<String> {
        let at = self.pos;
        let tag = self.byte()?;
        Ok(match self.string_after(tag, at)? {
            Text::Borrowed(s) => s.to_owned(),
            Text::Owned(s) => s,
        })
    }

    // ----- what the stream shares ---------------------------------------------------------

    fn class_def(&mut self, at: usize) -> Result<()> {
        if self.replaying == 0 && self.classes.len() >= self.limits.max_classes {
            return Err(Error::at(
                format!(
                    "more than {} class definitions (max_classes)",
                    self.limits.max_classes
                ),
                at,
            ));
        }
        let name = self.name()?;
        let len = self.read_len()?;
        let mut fields = Vec::with_capacity(len.min(256));
        for _ in 0..len {
            fields.push(self.name()?);
        }
        if self.replaying == 0 {
            self.classes.push(Class { name, fields });
        }
        Ok(())
    }

    /// A list's or map's type: a name (counted) or a reference to one seen before.
    fn skip_type(&mut self) -> Result<()> {
        let at = self.pos;
        let tag = self.byte()?;
        match tag {
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                self.string_after(tag, at)?;
                if self.replaying == 0 {
                    if self.types >= self.limits.max_classes {
                        return Err(Error::at(
                            format!(
                                "more than {} type names (max_classes)",
                                self.limits.max_classes
                            ),
                            at,
                        ));
                    }
                    self.types += 1;
                }
                Ok(())
            }
            0x80..=0xd7 | BC_INT => {
                let i = self.int_after(tag, at)?;
                if usize::try_from(i).is_ok_and(|i| i < self.types) {
                    Ok(())
                } else {
                    Err(Error::at(
                        format!("type reference {i} out of range ({} types)", self.types),
                        at,
                    ))
                }
            }
            other => Err(Error::at(
                format!("expected a type name, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    /// Enters a list, map or object whose tag is at `at`: depth, and its ref number.
    fn open(&mut self, at: usize) -> Result<()> {
        if self.depth >= self.limits.max_depth {
            return Err(Error::at(
                format!("nested deeper than {} (max_depth)", self.limits.max_depth),
                at,
            ));
        }
        if self.replaying == 0 {
            if self.refs.len() >= self.limits.max_refs {
                return Err(Error::at(
                    format!(
                        "more than {} lists, maps and objects (max_refs)",
                        self.limits.max_refs
                    ),
                    at,
                ));
            }
            self.refs.push((at, false));
        }
        self.depth += 1;
        Ok(())
    }

    fn close(&mut self, at: usize) {
        self.depth -= 1;
        if self.replaying == 0
            && let Ok(i) = self.refs.binary_search_by_key(&at, |r| r.0)
        {
            self.refs[i].1 = true;
        }
    }

    /// The ref number of the container whose tag is at `at`.
    fn ref_number(&self, at: usize) -> Option<usize> {
        self.refs.binary_search_by_key(&at, |r| r.0).ok()
    }

    /// After a `0x51` tag: the offset of the complete value it refers to.
    fn ref_target(&mut self, at: usize) -> Result<usize> {
        let n = self.read_int()?;
        let Some(&(target, done)) = usize::try_from(n).ok().and_then(|i| self.refs.get(i)) else {
            return Err(Error::at(
                format!(
                    "ref {n} out of range ({} values to refer to)",
                    self.refs.len()
                ),
                at,
            ));
        };
        if !done {
            return Err(Error::at(
                format!("ref {n} to a value still being read (a cycle)"),
                at,
            ));
        }
        Ok(target)
    }

    /// Reads the value at `target` again with `f`, then goes on after the ref.
    fn replay<T>(&mut self, target: usize, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let back = self.pos;
        self.pos = target;
        self.replaying += 1;
        let r = f(self);
        self.replaying -= 1;
        self.pos = back;
        r
    }

    /// Whether the next bytes are `0x51 n`, a ref to the container at `at`: consumed if so.
    fn self_ref(&mut self, at: usize) -> Result<bool> {
        let Some(me) = self.ref_number(at) else {
            return Ok(false);
        };
        if self.peek()? != BC_REF {
            return Ok(false);
        }
        let start = self.pos;
        self.pos += 1;
        let is_me = self.read_int().ok() == i32::try_from(me).ok();
        if is_me {
            self.charge(1, 0, start)?;
        } else {
            self.pos = start;
        }
        Ok(is_me)
    }

    // ----- values -------------------------------------------------------------------------

    fn any_with<V: Visitor<'de>>(
        &mut self,
        tag: u8,
        at: usize,
        visitor: V,
        mode: Mode,
    ) -> Result<V::Value> {
        match tag {
            BC_NULL => visitor.visit_unit(),
            BC_TRUE => visitor.visit_bool(true),
            BC_FALSE => visitor.visit_bool(false),
            0x80..=0xd7 | BC_INT => visitor.visit_i32(self.int_after(tag, at)?),
            0xd8..=0xff | 0x38..=0x3f | BC_LONG_INT | BC_LONG => {
                visitor.visit_i64(self.long_after(tag)?)
            }
            BC_DOUBLE_ZERO | BC_DOUBLE_ONE | BC_DOUBLE_BYTE | BC_DOUBLE_SHORT | BC_DOUBLE_MILL
            | BC_DOUBLE => visitor.visit_f64(self.double_after(tag)?),
            BC_DATE | BC_DATE_MINUTE => visitor.visit_i64(self.date_after(tag)?),
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                match self.string_after(tag, at)? {
                    Text::Borrowed(s) => visitor.visit_borrowed_str(s),
                    Text::Owned(s) => visitor.visit_string(s),
                }
            }
            0x20..=0x2f | 0x34..=0x37 | BC_BINARY_CHUNK | BC_BINARY => {
                let b = self.binary_after(tag, at)?;
                match (mode, b) {
                    (Mode::Json, Bin::Borrowed(b)) => visitor.visit_string(STANDARD.encode(b)),
                    (Mode::Json, Bin::Owned(b)) => visitor.visit_string(STANDARD.encode(b)),
                    (Mode::Raw, Bin::Borrowed(b)) => visitor.visit_borrowed_bytes(b),
                    (Mode::Raw, Bin::Owned(b)) => visitor.visit_byte_buf(b),
                }
            }
            BC_LIST_VARIABLE => {
                self.skip_type()?;
                self.list(None, at, visitor)
            }
            BC_LIST_FIXED => {
                self.skip_type()?;
                let len = self.read_len()?;
                self.list(Some(len), at, visitor)
            }
            BC_LIST_VARIABLE_UNTYPED => self.list(None, at, visitor),
            BC_LIST_FIXED_UNTYPED => {
                let len = self.read_len()?;
                self.list(Some(len), at, visitor)
            }
            0x70..=0x77 => {
                self.skip_type()?;
                self.list(Some(usize::from(tag - BC_LIST_DIRECT)), at, visitor)
            }
            0x78..=0x7f => self.list(Some(usize::from(tag - BC_LIST_DIRECT_UNTYPED)), at, visitor),
            BC_MAP_UNTYPED => self.map(at, visitor, mode),
            BC_MAP => {
                self.skip_type()?;
                self.map(at, visitor, mode)
            }
            0x60..=0x6f => self.object(usize::from(tag - BC_OBJECT_DIRECT), at, visitor, mode),
            BC_OBJECT => {
                let index_at = self.pos;
                let index = self.read_int()?;
                let index = usize::try_from(index)
                    .map_err(|_| Error::at("negative class index", index_at))?;
                self.object(index, at, visitor, mode)
            }
            BC_REF => {
                let target = self.ref_target(at)?;
                self.replay(target, |d| {
                    let (tag, at) = d.value_tag()?;
                    d.any_with(tag, at, visitor, mode)
                })
            }
            BC_END => Err(Error::at("unexpected end marker 'Z'", at)),
            other => Err(Error::at(format!("unknown tag 0x{other:02x}"), at)),
        }
    }

    fn list<V: Visitor<'de>>(
        &mut self,
        len: Option<usize>,
        at: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.open(at)?;
        if let Some(n) = len {
            self.check_len(n, self.remaining(), at)?;
            if n > self.limits.max_nodes.saturating_sub(self.nodes) {
                return Err(Error::at(
                    format!(
                        "{n} elements would be more than {} values (max_nodes)",
                        self.limits.max_nodes
                    ),
                    at,
                ));
            }
        }
        let mut access = ListAccess {
            de: self,
            left: len,
            count: 0,
            at,
        };
        let v = visitor.visit_seq(&mut access)?;
        match len {
            Some(_) if access.left != Some(0) => {
                return Err(Error::at(
                    "the list has more elements than the Rust type takes",
                    self.pos,
                ));
            }
            Some(_) => {}
            None => {
                if self.peek()? != BC_END {
                    return Err(Error::at(
                        "the list has more elements than the Rust type takes",
                        self.pos,
                    ));
                }
                self.pos += 1;
            }
        }
        self.close(at);
        Ok(v)
    }

    fn map<V: Visitor<'de>>(&mut self, at: usize, visitor: V, mode: Mode) -> Result<V::Value> {
        self.open(at)?;
        let mut access = MapAccess {
            de: self,
            mode,
            count: 0,
            at,
        };
        let v = visitor.visit_map(&mut access)?;
        if self.peek()? != BC_END {
            return Err(Error::at(
                "the map has more entries than the Rust type takes",
                self.pos,
            ));
        }
        self.pos += 1;
        self.close(at);
        Ok(v)
    }

    fn object<V: Visitor<'de>>(
        &mut self,
        class: usize,
        at: usize,
        visitor: V,
        mode: Mode,
    ) -> Result<V::Value> {
        let Some(def) = self.classes.get(class) else {
            return Err(Error::at(
                format!(
                    "class reference {class} out of range ({} definitions)",
                    self.classes.len()
                ),
                at,
            ));
        };
        let len = def.fields.len();
        let kind = if mode == Mode::Json {
            Kind::of(def)
        } else {
            Kind::Plain
        };
        if mode == Mode::Json {
            let names = def.name.len() + def.fields.iter().map(String::len).sum::<usize>();
            self.charge(0, names, at)?;
        }
        self.open(at)?;
        self.check_len(len, self.remaining(), at)?;
        let v = match kind {
            Kind::OneValue => {
                // BigDecimal, UUID, File, an enum: the one field is the value.
                let v = de::Deserializer::deserialize_any(&mut *self, visitor)?;
                self.close(at);
                return Ok(v);
            }
            Kind::BigInteger => {
                let text = self.big_integer(class, at)?;
                self.close(at);
                return visitor.visit_string(text);
            }
            Kind::Plain | Kind::Throwable => {
                let mut access = ObjectAccess {
                    de: self,
                    class,
                    next: 0,
                    len,
                    at,
                    class_key: mode == Mode::Json,
                    json: mode == Mode::Json,
                    throwable: kind == Kind::Throwable,
                };
                let v = visitor.visit_map(&mut access)?;
                let next = access.next;
                for _ in next..len {
                    de::IgnoredAny::deserialize(&mut *self)?;
                }
                v
            }
        };
        self.close(at);
        Ok(v)
    }

    /// A `java.math.BigInteger`'s decimal text from its fields `signum` and `mag`.
    fn big_integer(&mut self, class: usize, at: usize) -> Result<String> {
        let mut signum = 0i64;
        let mut mag: Vec<i64> = Vec::new();
        for i in 0..self.classes[class].fields.len() {
            match self.classes[class].fields[i].as_str() {
                "signum" => signum = i64::deserialize(&mut *self)?,
                "mag" => mag = Vec::deserialize(&mut *self)?,
                _ => {
                    de::IgnoredAny::deserialize(&mut *self)?;
                }
            }
        }
        let cost = (mag.len() as u64).pow(2);
        if mag.len() > bignum::MAX_WORDS || cost > self.bignum_work {
            return Err(Error::at(
                "a java.math.BigInteger too long to render as decimal",
                at,
            ));
        }
        self.bignum_work -= cost;
        let words: Vec<u32> = mag.iter().map(|&w| w as u32).collect();
        let digits = bignum::to_decimal(&words);
        Ok(if signum < 0 && digits != "0" {
            format!("-{digits}")
        } else {
            digits
        })
    }
}

/// How `deserialize_any` shows an object (this crate's JSON mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    /// `java.math.BigDecimal`, `java.util.UUID`, `java.io.File` (`value`), an enum (`name`).
    OneValue,
    BigInteger,
    Throwable,
}

impl Kind {
    fn of(def: &Class) -> Kind {
        let has = |f: &str| def.fields.iter().any(|x| x == f);
        match (def.name.as_str(), def.fields.as_slice()) {
            ("java.math.BigDecimal" | "java.util.UUID" | "java.io.File", [f]) if f == "value" => {
                Kind::OneValue
            }
            ("java.math.BigInteger", _) if has("signum") && has("mag") => Kind::BigInteger,
            _ if has("detailMessage") || (has("stackTrace") && has("cause")) => Kind::Throwable,
            (_, [f]) if f == "name" => Kind::OneValue,
            _ => Kind::Plain,
        }
    }
}

/// The fields of a Throwable left out of its JSON form.
const THROWABLE_SKIPPED: [&str; 2] = ["stackTrace", "suppressedExceptions"];

struct ListAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    left: Option<usize>,
    count: usize,
    at: usize,
}

impl<'de> de::SeqAccess<'de> for ListAccess<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        match &mut self.left {
            Some(0) => return Ok(None),
            Some(n) => *n -= 1,
            None => {
                if self.de.peek()? == BC_END {
                    return Ok(None);
                }
                if self.count >= self.de.limits.max_len {
                    return Err(Error::at(
                        format!("list longer than {} (max_len)", self.de.limits.max_len),
                        self.at,
                    ));
                }
            }
        }
        self.count += 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    /// What a fixed list declares, at most 1024 (a declared length is at most the bytes
    /// left, each element taking one; serde caps its preallocation further).
    fn size_hint(&self) -> Option<usize> {
        self.left.map(|n| n.min(1024))
    }
}

struct MapAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    mode: Mode,
    count: usize,
    at: usize,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.de.peek()? == BC_END {
            return Ok(None);
        }
        if self.count >= self.de.limits.max_len {
            return Err(Error::at(
                format!("map longer than {} (max_len)", self.de.limits.max_len),
                self.at,
            ));
        }
        self.count += 1;
        match self.mode {
            Mode::Json => seed.deserialize(JsonKey(&mut *self.de)).map(Some),
            Mode::Raw => seed.deserialize(&mut *self.de).map(Some),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.de)
    }
}

struct ObjectAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    class: usize,
    next: usize,
    len: usize,
    at: usize,
    /// A `"class"` member to give first (JSON form).
    class_key: bool,
    /// The JSON form.
    json: bool,
    /// The JSON form of a Throwable: `message`, `cause`, no stack trace.
    throwable: bool,
}

impl<'de> de::MapAccess<'de> for ObjectAccess<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.class_key {
            return seed.deserialize("class".into_deserializer()).map(Some);
        }
        loop {
            if self.next >= self.len {
                return Ok(None);
            }
            let name = self.de.classes[self.class].fields[self.next].as_str();
            if self.throwable {
                if THROWABLE_SKIPPED.contains(&name) {
                    self.next += 1;
                    de::IgnoredAny::deserialize(&mut *self.de)?;
                    continue;
                }
                if name == "detailMessage" {
                    return seed.deserialize("message".into_deserializer()).map(Some);
                }
            }
            // A Java field named `class` would clash with the JSON form's member.
            if self.json && name == "class" {
                self.next += 1;
                de::IgnoredAny::deserialize(&mut *self.de)?;
                continue;
            }
            let key: de::value::StrDeserializer<'_, Error> = name.into_deserializer();
            return seed.deserialize(key).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        if self.class_key {
            self.class_key = false;
            let name: de::value::StrDeserializer<'_, Error> = self.de.classes[self.class]
                .name
                .as_str()
                .into_deserializer();
            return seed.deserialize(name);
        }
        let is_cause = self
            .de
            .classes
            .get(self.class)
            .and_then(|c| c.fields.get(self.next))
            .is_some_and(|f| f == "cause");
        self.next += 1;
        if is_cause && self.de.self_ref(self.at)? {
            // A Throwable without a cause refers to itself.
            return seed.deserialize(().into_deserializer());
        }
        seed.deserialize(&mut *self.de)
    }
}

/// A map key in the JSON form: a number, boolean or null key becomes its JSON text.
struct JsonKey<'a, 'de>(&'a mut Deserializer<'de>);

impl<'de> de::Deserializer<'de> for JsonKey<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let tag = self.0.peek()?;
        let text = match tag {
            BC_NULL
            | BC_TRUE
            | BC_FALSE
            | 0x80..=0xff
            | 0x38..=0x3f
            | BC_INT
            | BC_LONG_INT
            | BC_LONG
            | BC_DOUBLE_ZERO..=BC_DOUBLE_MILL
            | BC_DOUBLE
            | BC_DATE
            | BC_DATE_MINUTE => {
                let v = serde_json::Value::deserialize(&mut *self.0)?;
                v.to_string()
            }
            _ => return de::Deserializer::deserialize_any(self.0, visitor),
        };
        visitor.visit_string(text)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The elements of a binary, for a sequence of bytes (`Vec<u8>` without `java::bytes`).
struct ByteSeq<'b> {
    bytes: &'b [u8],
}

impl<'de> de::SeqAccess<'de> for ByteSeq<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some((&b, rest)) = self.bytes.split_first() else {
            return Ok(None);
        };
        self.bytes = rest;
        seed.deserialize(b.into_deserializer()).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.bytes.len())
    }
}

/// An enum read from a string or an enum object: its constant's name.
struct UnitVariant(String);

impl<'de> de::EnumAccess<'de> for UnitVariant {
    type Error = Error;
    type Variant = UnitOnly;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, UnitOnly)> {
        let d: de::value::StringDeserializer<Error> = self.0.into_deserializer();
        Ok((seed.deserialize(d)?, UnitOnly))
    }
}

struct UnitOnly;

impl<'de> de::VariantAccess<'de> for UnitOnly {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _: T) -> Result<T::Value> {
        Err(de::Error::custom("a Java enum constant has no value"))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value> {
        Err(de::Error::custom("a Java enum constant has no value"))
    }

    fn struct_variant<V: Visitor<'de>>(self, _: &'static [&'static str], _: V) -> Result<V::Value> {
        Err(de::Error::custom("a Java enum constant has no value"))
    }
}

/// An enum variant with a value: a map of one entry, `{variant: value}`.
struct MapVariant<'a, 'de> {
    de: &'a mut Deserializer<'de>,
}

impl<'de> de::EnumAccess<'de> for MapVariant<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        let v = seed.deserialize(&mut *self.de)?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for MapVariant<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<()> {
        de::IgnoredAny::deserialize(&mut *self.de).map(|_| ())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_seq(&mut *self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_map(&mut *self.de, visitor)
    }
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        self.any_with(tag, at, visitor, Mode::Json)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        self.any_with(tag, at, visitor, Mode::Raw)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.peek()? == BC_NULL {
            let at = self.pos;
            self.pos += 1;
            self.charge(1, 0, at)?;
            return visitor.visit_none();
        }
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        match tag {
            0x20..=0x2f | 0x34..=0x37 | BC_BINARY_CHUNK | BC_BINARY => {
                match self.binary_after(tag, at)? {
                    Bin::Borrowed(b) => visitor.visit_seq(ByteSeq { bytes: b }),
                    Bin::Owned(b) => visitor.visit_seq(ByteSeq { bytes: &b }),
                }
            }
            BC_REF => {
                let target = self.ref_target(at)?;
                self.replay(target, |d| d.deserialize_seq(visitor))
            }
            _ => self.any_with(tag, at, visitor, Mode::Raw),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        // `null`, or an object of any class (its fields skipped).
        de::IgnoredAny::deserialize(&mut *self)?;
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        match name {
            DATE => {
                let (tag, at) = self.value_tag()?;
                self.any_with(tag, at, visitor, Mode::Raw)
            }
            BIG_DECIMAL => {
                let (tag, at) = self.value_tag()?;
                self.any_with(tag, at, visitor, Mode::Json)
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        match tag {
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                let name = match self.string_after(tag, at)? {
                    Text::Borrowed(s) => s.to_owned(),
                    Text::Owned(s) => s,
                };
                visitor.visit_enum(UnitVariant(name))
            }
            0x60..=0x6f | BC_OBJECT => {
                let class = if tag == BC_OBJECT {
                    let index_at = self.pos;
                    usize::try_from(self.read_int()?)
                        .map_err(|_| Error::at("negative class index", index_at))?
                } else {
                    usize::from(tag - BC_OBJECT_DIRECT)
                };
                let Some(def) = self.classes.get(class) else {
                    return Err(Error::at(
                        format!(
                            "class reference {class} out of range ({} definitions)",
                            self.classes.len()
                        ),
                        at,
                    ));
                };
                let fields = def.fields.len();
                self.open(at)?;
                let mut name = None;
                for i in 0..fields {
                    if self.classes[class].fields[i] == "name" {
                        name = Some(String::deserialize(&mut *self)?);
                    } else {
                        de::IgnoredAny::deserialize(&mut *self)?;
                    }
                }
                self.close(at);
                let name = name.ok_or_else(|| {
                    Error::at(
                        format!(
                            "an object of {} has no field `name` for an enum",
                            self.classes[class].name
                        ),
                        at,
                    )
                })?;
                visitor.visit_enum(UnitVariant(name))
            }
            BC_MAP_UNTYPED | BC_MAP => {
                if tag == BC_MAP {
                    self.skip_type()?;
                }
                self.open(at)?;
                let v = visitor.visit_enum(MapVariant { de: &mut *self })?;
                if self.byte()? != BC_END {
                    return Err(Error::at(
                        "an enum variant is a map of exactly one entry",
                        self.pos - 1,
                    ));
                }
                self.close(at);
                Ok(v)
            }
            BC_REF => {
                let target = self.ref_target(at)?;
                self.replay(target, |d| d.deserialize_enum(_name, _variants, visitor))
            }
            other => Err(Error::at(
                format!(
                    "expected an enum (a string, an enum object or a map), found tag 0x{other:02x}"
                ),
                at,
            )),
        }
    }

    forward_raw! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_bytes deserialize_byte_buf deserialize_unit
        deserialize_map deserialize_identifier
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_ignored_any(visitor)
    }
}
