//! [`Serializer`]: Rust values straight to the bytes hessian-lite writes for the same Java
//! values (no [`Value`](crate::Value) in between).
//!
//! Hessian writes a class definition (its field names) before the first instance of a
//! class, but serde hands a serializer a struct's field names one at a time, after its
//! name. So the serializer learns each struct's field names: per stream from the class
//! definitions written, per thread from the structs serialized before (a small map keyed by
//! the struct's name and field count). A struct not known yet makes the value's first
//! attempt stop; the serializer then takes the bytes back, walks the value once to record
//! every struct's field names, and writes it again. That happens once per struct shape per
//! thread (and again only for a `skip_serializing_if` struct whose fields vary).
//!
//! Here: the [`Serializer`] and its retry. `dispatch`: what each serde type is written as;
//! `compound`: lists, maps, structs; `stream`: lengths, type names, class definitions,
//! instances, enum constants; `shape`: learning structs' field names (the per-thread cache
//! and the probe). The scalar writes (numbers, dates, strings and binaries in chunks) are
//! the [`Encoder`](crate::Encoder)'s own (`crate::encode::JavaOut`).

mod compound;
mod dispatch;
mod shape;
mod stream;

use std::sync::Arc;

use ::serde::ser::Serialize;

use super::error::{Error, Result};
use crate::encode::JavaOut;
use shape::Probe;

/// The serde face of a [`Serializer`] (private: [`Serializer::write`] is the way in, as it
/// retries a value whose structs are not known yet). Its `serde::Serializer` is in
/// `dispatch`, the sequences, maps and structs it opens in `compound`.
struct Ser<'s, 'a>(&'s mut Serializer<'a>);

/// A class's field names, in the order written.
type Fields = Arc<[&'static str]>;

/// The Java class of a set (`java::set`).
const HASH_SET: &str = "java.util.HashSet";

/// Writes typed values into one Hessian 2.0 stream, appended to a `Vec<u8>`: class
/// definitions and list type names are shared by every value written, as in one
/// `Hessian2Output` (one `dubbo://` request or response body).
///
/// ```
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// #[serde(rename = "org.example.User")]
/// struct User { id: i64, name: String }
///
/// let mut body = Vec::new();
/// let mut ser = switchman_hessian::Serializer::new(&mut body);
/// ser.write("2.0.2").unwrap();
/// ser.write(&User { id: 1, name: "a".into() }).unwrap();
/// ser.write(&User { id: 2, name: "b".into() }).unwrap(); // the class definition is shared
/// assert_eq!(&body[..6], b"\x052.0.2");
/// ```
#[derive(Debug)]
pub struct Serializer<'a> {
    /// The bytes, with where `Hessian2Output`'s buffer offset would be.
    out: JavaOut<&'a mut Vec<u8>>,
    /// Class definitions written, by index.
    classes: Vec<(&'static str, Fields)>,
    /// Type names written (typed lists), by index.
    types: Vec<&'static str>,
    /// Lists, maps and objects written: the next one's ref number.
    refs: usize,
    /// Enum constants written (class, name, ref): Java writes a constant's later
    /// occurrences as refs to its first.
    enums: Vec<(&'static str, &'static str, usize)>,
    /// A `java::*` module's request for the next value.
    pending: Pending,
    /// While writing a value again after learning its structs: their field names in order.
    sequence: Option<(Vec<(&'static str, Fields)>, usize)>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Pending {
    #[default]
    None,
    Date,
    Decimal,
    Set,
}

/// Where a [`Serializer`] was before a value: what [`Serializer::write`] puts back when the
/// value fails.
struct Snapshot {
    len: usize,
    java_offset: usize,
    classes: usize,
    types: usize,
    refs: usize,
    enums: usize,
}

impl<'a> Serializer<'a> {
    /// A new stream, appended to `out` (which may hold bytes already, e.g. a header: they are
    /// not part of the stream).
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Serializer {
            out: JavaOut::new(out),
            classes: Vec::new(),
            types: Vec::new(),
            refs: 0,
            enums: Vec::new(),
            pending: Pending::None,
            sequence: None,
        }
    }

    /// Appends one value. On an error nothing of the value stays in the buffer, and the
    /// stream can go on.
    pub fn write<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let snap = self.snapshot();
        let first = value.serialize(Ser(self));
        let err = match first {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        self.restore(&snap);
        if !err.is_need_shape() {
            return Err(err);
        }
        // Learn the field names of every struct in the value, then write it again.
        let mut probe = Probe::default();
        value.serialize(&mut probe)?;
        let shapes = probe.finish()?;
        shape::learn(&shapes);
        self.sequence = Some((shapes, 0));
        let second = value.serialize(Ser(self));
        self.sequence = None;
        second.map_err(|e| {
            self.restore(&snap);
            if e.is_need_shape() {
                Error::new("the value serialized differently the second time")
            } else {
                e
            }
        })
    }

    /// The bytes of the buffer (those before the stream included).
    pub fn bytes(&self) -> &[u8] {
        self.out.buf
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            len: self.out.buf.len(),
            java_offset: self.out.java_offset,
            classes: self.classes.len(),
            types: self.types.len(),
            refs: self.refs,
            enums: self.enums.len(),
        }
    }

    fn restore(&mut self, s: &Snapshot) {
        self.out.buf.truncate(s.len);
        self.out.java_offset = s.java_offset;
        self.classes.truncate(s.classes);
        self.types.truncate(s.types);
        self.refs = s.refs;
        self.enums.truncate(s.enums);
        self.pending = Pending::None;
    }
}
