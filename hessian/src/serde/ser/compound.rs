//! The compound serializers: lists, maps, tuples and enum variants with data
//! ([`Compound`]), and structs ([`StructSer`]), whose fields must follow their class
//! definition.

use ::serde::ser::{self, Serialize};

use super::{Ser, Serializer};
use crate::serde::error::{Error, Result};

/// A list, map or enum variant being written: `ends` end markers (`Z`) close it.
#[derive(Debug)]
pub(super) struct Compound<'s, 'a> {
    pub(super) ser: &'s mut Serializer<'a>,
    pub(super) ends: usize,
}

impl Compound<'_, '_> {
    fn close(self) {
        for _ in 0..self.ends {
            self.ser.end();
        }
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        key.serialize(Ser(&mut *self.ser))
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.ser.out.write_str(key);
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

/// A struct being written: its fields must come in its class definition's order.
#[derive(Debug)]
pub(super) struct StructSer<'s, 'a> {
    pub(super) ser: &'s mut Serializer<'a>,
    pub(super) class: usize,
    pub(super) next: usize,
}

impl ser::SerializeStruct for StructSer<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        if self.ser.classes[self.class].1.get(self.next) != Some(&key) {
            return Err(Error::need_shape());
        }
        self.next += 1;
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        if self.next != self.ser.classes[self.class].1.len() {
            return Err(Error::need_shape());
        }
        Ok(())
    }
}
