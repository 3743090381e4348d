//! The public entry points, and one value by its tag: scalars, lists, maps, objects.

use super::cursor::Decoder;
use super::error::{DecodeError, Result};
use super::limits::Limits;
use super::tree::{Body, PREALLOCATE, Slot};
use crate::tag::*;
use crate::value::Value;

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
}
