//! `Ser`, the `serde::Serializer` face of a [`Serializer`]: what each serde data model
//! type is written as (the `java::*` requests included).

use std::io::Write as _;

use ::serde::ser::{self, Serialize};

use super::compound::{Compound, StructSer};
use super::{HASH_SET, Pending, Ser};
use crate::serde::error::{Error, Result};
use crate::serde::java::{BIG_DECIMAL, DATE, SET};

/// What Java writes for a `float`: the double of its decimal text
/// (`Double.parseDouble(String.valueOf(f))`).
fn float_as_double(f: f32) -> f64 {
    if !f.is_finite() {
        return f64::from(f);
    }
    let mut buf = [0u8; 64];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    if write!(cursor, "{f}").is_err() {
        return f64::from(f);
    }
    let n = cursor.position() as usize;
    std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::from(f))
}

impl<'s, 'a> Ser<'s, 'a> {
    fn take(&mut self) -> Pending {
        std::mem::take(&mut self.0.pending)
    }

    fn plain(&mut self, what: &str) -> Result<()> {
        match self.take() {
            Pending::None | Pending::Set => Ok(()),
            Pending::Date => Err(Error::new(format!(
                "java::date takes milliseconds (an i64), not {what}"
            ))),
            Pending::Decimal => Err(Error::new(format!(
                "java::big_decimal takes decimal text, not {what}"
            ))),
        }
    }
}

impl<'s, 'a> ser::Serializer for Ser<'s, 'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'s, 'a>;
    type SerializeTuple = Compound<'s, 'a>;
    type SerializeTupleStruct = Compound<'s, 'a>;
    type SerializeTupleVariant = Compound<'s, 'a>;
    type SerializeMap = Compound<'s, 'a>;
    type SerializeStruct = StructSer<'s, 'a>;
    type SerializeStructVariant = Compound<'s, 'a>;

    fn serialize_bool(mut self, v: bool) -> Result<()> {
        self.plain("a bool")?;
        self.0.out.write_bool(v);
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<()> {
        self.serialize_i32(i32::from(v))
    }

    fn serialize_i16(self, v: i16) -> Result<()> {
        self.serialize_i32(i32::from(v))
    }

    fn serialize_i32(mut self, v: i32) -> Result<()> {
        if self.0.pending == Pending::Date {
            self.take();
            self.0.out.write_date(i64::from(v));
            return Ok(());
        }
        self.plain("an int")?;
        self.0.out.write_int(v);
        Ok(())
    }

    fn serialize_i64(mut self, v: i64) -> Result<()> {
        if self.take() == Pending::Date {
            self.0.out.write_date(v);
        } else {
            self.0.out.write_long(v);
        }
        Ok(())
    }

    fn serialize_i128(self, v: i128) -> Result<()> {
        let l =
            i64::try_from(v).map_err(|_| Error::new(format!("{v} does not fit a Java long")))?;
        self.serialize_i64(l)
    }

    fn serialize_u8(self, v: u8) -> Result<()> {
        self.serialize_i32(i32::from(v))
    }

    fn serialize_u16(self, v: u16) -> Result<()> {
        self.serialize_i32(i32::from(v))
    }

    fn serialize_u32(self, v: u32) -> Result<()> {
        self.serialize_i64(i64::from(v))
    }

    fn serialize_u64(self, v: u64) -> Result<()> {
        let l =
            i64::try_from(v).map_err(|_| Error::new(format!("{v} does not fit a Java long")))?;
        self.serialize_i64(l)
    }

    fn serialize_u128(self, v: u128) -> Result<()> {
        let l =
            i64::try_from(v).map_err(|_| Error::new(format!("{v} does not fit a Java long")))?;
        self.serialize_i64(l)
    }

    fn serialize_f32(mut self, v: f32) -> Result<()> {
        self.plain("a float")?;
        self.0.out.write_double(float_as_double(v));
        Ok(())
    }

    fn serialize_f64(mut self, v: f64) -> Result<()> {
        self.plain("a double")?;
        self.0.out.write_double(v);
        Ok(())
    }

    fn serialize_char(mut self, v: char) -> Result<()> {
        self.plain("a char")?;
        if v.len_utf16() != 1 {
            return Err(Error::new(format!(
                "{v:?} is outside the BMP: not a Java char (use a String)"
            )));
        }
        let mut buf = [0u8; 4];
        self.0.out.write_str(v.encode_utf8(&mut buf));
        Ok(())
    }

    fn serialize_str(mut self, v: &str) -> Result<()> {
        if self.0.pending == Pending::Decimal {
            self.take();
            return self.0.write_big_decimal(v);
        }
        self.plain("a string")?;
        self.0.out.write_str(v);
        Ok(())
    }

    fn serialize_bytes(mut self, v: &[u8]) -> Result<()> {
        self.plain("bytes")?;
        self.0.out.write_binary(v);
        Ok(())
    }

    fn serialize_none(mut self) -> Result<()> {
        self.take();
        self.0.out.write_null();
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        // A `java::*` request passes through to the value.
        value.serialize(self)
    }

    fn serialize_unit(mut self) -> Result<()> {
        self.plain("()")?;
        self.0.out.write_null();
        Ok(())
    }

    fn serialize_unit_struct(mut self, name: &'static str) -> Result<()> {
        self.plain("a unit struct")?;
        let c = self.0.class_of(name, &[]);
        self.0.instance(c);
        Ok(())
    }

    fn serialize_unit_variant(
        mut self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.plain("an enum")?;
        self.0.write_enum(name, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<()> {
        match name {
            DATE => self.0.pending = Pending::Date,
            BIG_DECIMAL => self.0.pending = Pending::Decimal,
            SET => self.0.pending = Pending::Set,
            _ => {}
        }
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        self.plain("an enum")?;
        self.0.map_begin();
        self.0.out.write_str(variant);
        value.serialize(Ser(&mut *self.0))?;
        self.0.end();
        Ok(())
    }

    fn serialize_seq(mut self, len: Option<usize>) -> Result<Compound<'s, 'a>> {
        let class = match self.take() {
            Pending::Set => Some(HASH_SET),
            Pending::None => None,
            Pending::Date => return Err(Error::new("java::date takes milliseconds, not a list")),
            Pending::Decimal => {
                return Err(Error::new(
                    "java::big_decimal takes decimal text, not a list",
                ));
            }
        };
        self.0.list_begin(len, class)?;
        Ok(Compound {
            ser: self.0,
            ends: usize::from(len.is_none()),
        })
    }

    fn serialize_tuple(mut self, len: usize) -> Result<Compound<'s, 'a>> {
        self.plain("a tuple")?;
        self.0.list_begin(Some(len), None)?;
        Ok(Compound {
            ser: self.0,
            ends: 0,
        })
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'s, 'a>> {
        self.serialize_tuple(len)
    }

    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'s, 'a>> {
        self.plain("an enum")?;
        self.0.map_begin();
        self.0.out.write_str(variant);
        self.0.list_begin(Some(len), None)?;
        Ok(Compound {
            ser: self.0,
            ends: 1,
        })
    }

    fn serialize_map(mut self, _len: Option<usize>) -> Result<Compound<'s, 'a>> {
        self.plain("a map")?;
        self.0.map_begin();
        Ok(Compound {
            ser: self.0,
            ends: 1,
        })
    }

    fn serialize_struct(mut self, name: &'static str, len: usize) -> Result<StructSer<'s, 'a>> {
        self.plain("a struct")?;
        let class = self.0.struct_class(name, len)?;
        self.0.instance(class);
        Ok(StructSer {
            ser: self.0,
            class,
            next: 0,
        })
    }

    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'s, 'a>> {
        self.plain("an enum")?;
        self.0.map_begin();
        self.0.out.write_str(variant);
        self.0.map_begin();
        Ok(Compound {
            ser: self.0,
            ends: 2,
        })
    }
}
