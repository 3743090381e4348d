//! The `deserialize_*` dispatch: what each serde data model type reads (options, sequences
//! from lists or binaries, newtypes with the `java::*` names, enums from strings, enum
//! objects or one-entry maps); the rest goes through `deserialize_any`'s raw form.

use ::serde::de::{self, Deserialize, DeserializeSeed, IntoDeserializer, Visitor};

use super::{Bin, Deserializer, Mode, Text};
use crate::serde::error::{Error, Result};
use crate::serde::java::{BIG_DECIMAL, DATE};
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

/// Integers: an int or a long read here (as `deserialize_any` presents them: `visit_i32`,
/// `visit_i64`), anything else as `deserialize_any`'s raw form.
macro_rules! forward_number {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
                let (tag, at) = self.value_tag()?;
                match tag {
                    0x80..=0xd7 | BC_INT => visitor.visit_i32(self.int_after(tag, at)?),
                    0xd8..=0xff | 0x38..=0x3f | BC_LONG_INT | BC_LONG => {
                        visitor.visit_i64(self.long_after(tag)?)
                    }
                    _ => self.any_with(tag, at, visitor, Mode::Raw),
                }
            }
        )*
    };
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
                match tag {
                    BC_DATE | BC_DATE_MINUTE => visitor.visit_i64(self.date_after(tag)?),
                    _ => self.any_with(tag, at, visitor, Mode::Raw),
                }
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
                let opened = self.open(at)?;
                let mut name = None;
                for i in 0..fields {
                    if self.classes[class].fields[i] == "name" {
                        name = Some(String::deserialize(&mut *self)?);
                    } else {
                        de::IgnoredAny::deserialize(&mut *self)?;
                    }
                }
                self.close(opened);
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
                let opened = self.open(at)?;
                let v = visitor.visit_enum(MapVariant { de: &mut *self })?;
                if self.byte()? != BC_END {
                    return Err(Error::at(
                        "an enum variant is a map of exactly one entry",
                        self.pos - 1,
                    ));
                }
                self.close(opened);
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
        deserialize_i128 deserialize_u128 deserialize_f32 deserialize_char
        deserialize_bytes deserialize_byte_buf deserialize_unit
        deserialize_map deserialize_identifier
    }

    forward_number! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
    }

    // The common scalars read the forms they expect here and leave the rest (and every
    // error) to `any_with`, which presents them the same way.

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        match tag {
            BC_TRUE => visitor.visit_bool(true),
            BC_FALSE => visitor.visit_bool(false),
            _ => self.any_with(tag, at, visitor, Mode::Raw),
        }
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        match tag {
            BC_DOUBLE_ZERO | BC_DOUBLE_ONE | BC_DOUBLE_BYTE | BC_DOUBLE_SHORT | BC_DOUBLE_MILL
            | BC_DOUBLE => visitor.visit_f64(self.double_after(tag)?),
            _ => self.any_with(tag, at, visitor, Mode::Raw),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        match tag {
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                match self.string_after(tag, at)? {
                    Text::Borrowed(s) => visitor.visit_borrowed_str(s),
                    Text::Owned(s) => visitor.visit_string(s),
                }
            }
            _ => self.any_with(tag, at, visitor, Mode::Raw),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
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
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let (tag, at) = self.value_tag()?;
        match tag {
            0x60..=0x6f => {
                self.struct_object(usize::from(tag - BC_OBJECT_DIRECT), at, fields, visitor)
            }
            BC_OBJECT => {
                let index_at = self.pos;
                let class = usize::try_from(self.read_int()?)
                    .map_err(|_| Error::at("negative class index", index_at))?;
                self.struct_object(class, at, fields, visitor)
            }
            _ => self.any_with(tag, at, visitor, Mode::Raw),
        }
    }
}
