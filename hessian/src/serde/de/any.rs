//! `deserialize_any`: every value by its tag, as this crate's JSON mapping shows it (`Json`)
//! or raw for typed reads (`Raw`); lists and maps, and a JSON map's keys as text.

use ::serde::de::{self, Deserialize, DeserializeSeed, Visitor};
use ::serde::forward_to_deserialize_any;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{Bin, Deserializer, Mode, Text};
use crate::serde::error::{Error, Result};
use crate::tag::*;

impl<'de> Deserializer<'de> {
    // ----- values -------------------------------------------------------------------------

    pub(super) fn any_with<V: Visitor<'de>>(
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

    pub(super) fn list<V: Visitor<'de>>(
        &mut self,
        len: Option<usize>,
        at: usize,
        visitor: V,
    ) -> Result<V::Value> {
        let opened = self.open(at)?;
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
        self.close(opened);
        Ok(v)
    }

    pub(super) fn map<V: Visitor<'de>>(
        &mut self,
        at: usize,
        visitor: V,
        mode: Mode,
    ) -> Result<V::Value> {
        let opened = self.open(at)?;
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
        self.close(opened);
        Ok(v)
    }
}

pub(super) struct ListAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    left: Option<usize>,
    count: usize,
    at: usize,
}

impl<'de> de::SeqAccess<'de> for ListAccess<'_, 'de> {
    type Error = Error;

    #[inline]
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

pub(super) struct MapAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    mode: Mode,
    count: usize,
    at: usize,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, 'de> {
    type Error = Error;

    #[inline]
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

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.de)
    }
}

/// A map key in the JSON form: a number, boolean or null key becomes its JSON text.
pub(super) struct JsonKey<'a, 'de>(&'a mut Deserializer<'de>);

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
