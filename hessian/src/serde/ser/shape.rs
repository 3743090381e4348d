//! Learning structs' field names: the per-thread cache of shapes (`LEARNED`), a struct's
//! class from the stream, the cache or a second attempt's sequence, and the [`Probe`] that
//! walks a value once to record every struct's field names (see the module docs of
//! [`ser`](super)).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use ::serde::ser::{self, Serialize};

use super::{Fields, Serializer};
use crate::serde::error::{Error, Result};

thread_local! {
    /// Field names of the structs this thread serialized: (name, field count) → names.
    static LEARNED: RefCell<HashMap<(&'static str, usize), Fields>> = RefCell::new(HashMap::new());
}

/// Remembers `shapes` on this thread (a thread being torn down has no cache: every value is
/// then probed).
pub(super) fn learn(shapes: &[(&'static str, Fields)]) {
    let _ = LEARNED.try_with(|l| {
        let mut l = l.borrow_mut();
        for (name, fields) in shapes {
            l.insert((*name, fields.len()), fields.clone());
        }
    });
}

impl Serializer<'_> {
    /// A struct's class: known in this stream, learned on this thread, or told by the
    /// sequence of a second attempt; else the first attempt stops (`need_shape`).
    pub(super) fn struct_class(&mut self, name: &'static str, len: usize) -> Result<usize> {
        if let Some((seq, i)) = &mut self.sequence {
            let Some((n, fields)) = seq.get(*i).cloned() else {
                return Err(Error::need_shape());
            };
            *i += 1;
            if n != name {
                return Err(Error::need_shape());
            }
            return Ok(self.class_of(name, &fields));
        }
        if let Some(i) = self
            .classes
            .iter()
            .position(|(n, f)| *n == name && f.len() == len)
        {
            return Ok(i);
        }
        match LEARNED
            .try_with(|l| l.borrow().get(&(name, len)).cloned())
            .ok()
            .flatten()
        {
            Some(fields) => Ok(self.define(name, fields)),
            None => Err(Error::need_shape()),
        }
    }
}

// ----- the probe: every struct's field names, in the order the structs start --------------

#[derive(Default)]
pub(super) struct Probe {
    shapes: Vec<(&'static str, Option<Fields>)>,
}

impl Probe {
    pub(super) fn finish(self) -> Result<Vec<(&'static str, Fields)>> {
        self.shapes
            .into_iter()
            .map(|(n, f)| f.map(|f| (n, f)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::new("a struct did not end"))
    }
}

pub(super) struct ProbeStruct<'p> {
    probe: &'p mut Probe,
    slot: usize,
    names: Vec<&'static str>,
}

impl<'p> ser::Serializer for &'p mut Probe {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = ProbeStruct<'p>;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, _: bool) -> Result<()> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<()> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<()> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<()> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<()> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<()> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<()> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<()> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<()> {
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<()> {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<()> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<()> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<()> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<()> {
        Ok(())
    }
    fn serialize_none(self) -> Result<()> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<()> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<()> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self> {
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self> {
        Ok(self)
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<ProbeStruct<'p>> {
        self.shapes.push((name, None));
        Ok(ProbeStruct {
            slot: self.shapes.len() - 1,
            probe: self,
            names: Vec::with_capacity(len.min(64)),
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self> {
        Ok(self)
    }
}

impl ser::SerializeSeq for &mut Probe {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Probe {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for &mut Probe {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for &mut Probe {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeMap for &mut Probe {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Probe {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeStruct for ProbeStruct<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.names.push(key);
        value.serialize(&mut *self.probe)
    }
    fn end(self) -> Result<()> {
        self.probe.shapes[self.slot].1 = Some(Arc::from(self.names));
        Ok(())
    }
}
