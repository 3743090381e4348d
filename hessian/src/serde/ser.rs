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

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Arc;

use ::serde::ser::{self, Serialize};

use super::error::{Error, Result};
use super::java::{BIG_DECIMAL, DATE, SET};
use crate::bignum;
use crate::tag::*;

/// The size of `Hessian2Output`'s buffer: binaries are cut into chunks where it fills.
const JAVA_BUFFER: usize = 8 * 1024;

/// A class's field names, in the order written.
type Fields = Arc<[&'static str]>;

/// The Java class of a set (`java::set`).
const HASH_SET: &str = "java.util.HashSet";

thread_local! {
    /// Field names of the structs this thread serialized: (name, field count) → names.
    static LEARNED: RefCell<HashMap<(&'static str, usize), Fields>> = RefCell::new(HashMap::new());
}

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
    out: &'a mut Vec<u8>,
    /// Where `Hessian2Output`'s buffer offset would be.
    java_offset: usize,
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
            out,
            java_offset: 0,
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
        if !err.need_shape {
            return Err(err);
        }
        // Learn the field names of every struct in the value, then write it again.
        let mut probe = Probe::default();
        value.serialize(&mut probe)?;
        let shapes = probe.finish()?;
        // (A thread being torn down has no cache: every value is then probed.)
        let _ = LEARNED.try_with(|l| {
            let mut l = l.borrow_mut();
            for (name, fields) in &shapes {
                l.insert((*name, fields.len()), fields.clone());
            }
        });
        self.sequence = Some((shapes, 0));
        let second = value.serialize(Ser(self));
        self.sequence = None;
        second.map_err(|e| {
            self.restore(&snap);
            if e.need_shape {
                Error::new("the value serialized differently the second time")
            } else {
                e
            }
        })
    }

    /// The bytes of the buffer (those before the stream included).
    pub fn bytes(&self) -> &[u8] {
        self.out
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            len: self.out.len(),
            java_offset: self.java_offset,
            classes: self.classes.len(),
            types: self.types.len(),
            refs: self.refs,
            enums: self.enums.len(),
        }
    }

    fn restore(&mut self, s: &Snapshot) {
        self.out.truncate(s.len);
        self.java_offset = s.java_offset;
        self.classes.truncate(s.classes);
        self.types.truncate(s.types);
        self.refs = s.refs;
        self.enums.truncate(s.enums);
        self.pending = Pending::None;
    }

    // ----- the bytes, as Hessian2Output writes them --------------------------------------

    fn put(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
        self.java_offset += bytes.len();
    }

    /// `if (SIZE <= offset + 16) flushBuffer()`
    fn flush_le16(&mut self) {
        if JAVA_BUFFER <= self.java_offset + 16 {
            self.java_offset = 0;
        }
    }

    /// `if (SIZE < offset + 16) flushBuffer()`
    fn flush_lt16(&mut self) {
        if JAVA_BUFFER < self.java_offset + 16 {
            self.java_offset = 0;
        }
    }

    /// `if (SIZE < offset + 32) flushBuffer()`
    fn flush_lt32(&mut self) {
        if JAVA_BUFFER < self.java_offset + 32 {
            self.java_offset = 0;
        }
    }

    fn write_null(&mut self) {
        self.flush_le16();
        self.put(&[BC_NULL]);
    }

    fn write_bool(&mut self, b: bool) {
        self.flush_lt16();
        self.put(&[if b { BC_TRUE } else { BC_FALSE }]);
    }

    fn write_int(&mut self, v: i32) {
        self.flush_le16();
        if (INT_DIRECT_MIN..=INT_DIRECT_MAX).contains(&v) {
            self.put(&[(v + i32::from(BC_INT_ZERO)) as u8]);
        } else if (INT_BYTE_MIN..=INT_BYTE_MAX).contains(&v) {
            self.put(&[(i32::from(BC_INT_BYTE_ZERO) + (v >> 8)) as u8, v as u8]);
        } else if (INT_SHORT_MIN..=INT_SHORT_MAX).contains(&v) {
            self.put(&[
                (i32::from(BC_INT_SHORT_ZERO) + (v >> 16)) as u8,
                (v >> 8) as u8,
                v as u8,
            ]);
        } else {
            let b = v.to_be_bytes();
            self.put(&[BC_INT, b[0], b[1], b[2], b[3]]);
        }
    }

    fn write_len(&mut self, len: usize) -> Result<()> {
        let n = i32::try_from(len).map_err(|_| Error::new(format!("length {len} over 2^31")))?;
        self.write_int(n);
        Ok(())
    }

    fn write_long(&mut self, v: i64) {
        self.flush_le16();
        if (LONG_DIRECT_MIN..=LONG_DIRECT_MAX).contains(&v) {
            self.put(&[(v + i64::from(BC_LONG_ZERO)) as u8]);
        } else if (LONG_BYTE_MIN..=LONG_BYTE_MAX).contains(&v) {
            self.put(&[(i64::from(BC_LONG_BYTE_ZERO) + (v >> 8)) as u8, v as u8]);
        } else if (LONG_SHORT_MIN..=LONG_SHORT_MAX).contains(&v) {
            self.put(&[
                (i64::from(BC_LONG_SHORT_ZERO) + (v >> 16)) as u8,
                (v >> 8) as u8,
                v as u8,
            ]);
        } else if let Ok(i) = i32::try_from(v) {
            let b = i.to_be_bytes();
            self.put(&[BC_LONG_INT, b[0], b[1], b[2], b[3]]);
        } else {
            self.put(&[BC_LONG]);
            self.put(&v.to_be_bytes());
        }
    }

    fn write_double(&mut self, v: f64) {
        self.flush_le16();
        // Java's (int) cast: truncating, saturating, NaN → 0; Rust's `as` is the same.
        let int_value = v as i32;
        if f64::from(int_value) == v {
            match int_value {
                0 => return self.put(&[BC_DOUBLE_ZERO]),
                1 => return self.put(&[BC_DOUBLE_ONE]),
                -0x80..=0x7f => return self.put(&[BC_DOUBLE_BYTE, int_value as u8]),
                -0x8000..=0x7fff => {
                    return self.put(&[BC_DOUBLE_SHORT, (int_value >> 8) as u8, int_value as u8]);
                }
                _ => {}
            }
        }
        let mills = (v * 1000.0) as i32;
        if 0.001 * f64::from(mills) == v {
            let b = mills.to_be_bytes();
            return self.put(&[BC_DOUBLE_MILL, b[0], b[1], b[2], b[3]]);
        }
        let bits = if v.is_nan() {
            0x7ff8_0000_0000_0000
        } else {
            v.to_bits()
        };
        self.put(&[BC_DOUBLE]);
        self.put(&bits.to_be_bytes());
    }

    fn write_date(&mut self, ms: i64) {
        self.flush_lt32();
        if ms % 60_000 == 0
            && let Ok(m) = i32::try_from(ms / 60_000)
        {
            let b = m.to_be_bytes();
            return self.put(&[BC_DATE_MINUTE, b[0], b[1], b[2], b[3]]);
        }
        self.put(&[BC_DATE]);
        self.put(&ms.to_be_bytes());
    }

    fn write_str(&mut self, s: &str) {
        self.flush_le16();
        // The common case: ASCII that fits one chunk and does not reach the buffer's end.
        if s.len() <= STRING_CHUNK
            && s.is_ascii()
            && self.java_offset + 3 + s.len() + 16 < JAVA_BUFFER
        {
            self.string_header(s.len());
            self.put(s.as_bytes());
            return;
        }
        let units = s.encode_utf16().count();
        let mut rest = s;
        let mut left = units;
        while left > STRING_CHUNK {
            // A chunk does not end in a high surrogate.
            let (sub, bytes) = chunk_of(rest, STRING_CHUNK);
            self.flush_le16();
            self.put(&[BC_STRING_CHUNK, (sub >> 8) as u8, sub as u8]);
            self.print(&rest[..bytes]);
            rest = &rest[bytes..];
            left -= sub;
        }
        self.flush_le16();
        self.string_header(left);
        self.print(rest);
    }

    fn string_header(&mut self, len: usize) {
        if len <= STRING_DIRECT_MAX {
            self.put(&[BC_STRING_DIRECT + len as u8]);
        } else if len <= STRING_SHORT_MAX {
            self.put(&[BC_STRING_SHORT + (len >> 8) as u8, len as u8]);
        } else {
            self.put(&[BC_STRING, (len >> 8) as u8, len as u8]);
        }
    }

    /// `printString`: each UTF-16 unit in one to three bytes (a surrogate in three), with the
    /// buffer check before each unit.
    fn print(&mut self, s: &str) {
        for c in s.chars() {
            let mut units = [0u16; 2];
            for &u in c.encode_utf16(&mut units).iter() {
                self.flush_le16();
                if u < 0x80 {
                    self.put(&[u as u8]);
                } else if u < 0x800 {
                    self.put(&[0xc0 | (u >> 6) as u8, 0x80 | (u & 0x3f) as u8]);
                } else {
                    self.put(&[
                        0xe0 | (u >> 12) as u8,
                        0x80 | ((u >> 6) & 0x3f) as u8,
                        0x80 | (u & 0x3f) as u8,
                    ]);
                }
            }
        }
    }

    fn write_binary(&mut self, data: &[u8]) {
        let size = JAVA_BUFFER;
        let mut rest = data;
        while size.saturating_sub(self.java_offset + 3) < rest.len() {
            let mut sub = size.saturating_sub(self.java_offset + 3);
            if sub < 16 {
                self.java_offset = 0;
                sub = (size - 3).min(rest.len());
            }
            self.put(&[BC_BINARY_CHUNK, (sub >> 8) as u8, sub as u8]);
            self.put(&rest[..sub]);
            rest = &rest[sub..];
            self.java_offset = 0;
        }
        self.flush_lt16();
        let len = rest.len();
        if len <= BINARY_DIRECT_MAX {
            self.put(&[BC_BINARY_DIRECT + len as u8]);
        } else if len <= BINARY_SHORT_MAX {
            self.put(&[BC_BINARY_SHORT + (len >> 8) as u8, len as u8]);
        } else {
            self.put(&[BC_BINARY, (len >> 8) as u8, len as u8]);
        }
        self.put(rest);
    }

    fn write_ref(&mut self, n: usize) {
        self.flush_lt16();
        self.put(&[BC_REF]);
        self.write_int(i32::try_from(n).unwrap_or(i32::MAX));
    }

    fn write_type(&mut self, t: &'static str) {
        self.flush_lt32();
        if let Some(i) = self.types.iter().position(|&x| x == t) {
            self.write_int(i32::try_from(i).unwrap_or(i32::MAX));
        } else {
            self.types.push(t);
            self.write_str(t);
        }
    }

    /// A list's start: fixed (`len` known) or variable, typed or not.
    fn list_begin(&mut self, len: Option<usize>, class: Option<&'static str>) -> Result<()> {
        self.flush_lt32();
        self.refs += 1;
        match (len, class) {
            (Some(n), None) if n <= LIST_DIRECT_MAX => {
                self.put(&[BC_LIST_DIRECT_UNTYPED + n as u8])
            }
            (Some(n), Some(c)) if n <= LIST_DIRECT_MAX => {
                self.put(&[BC_LIST_DIRECT + n as u8]);
                self.write_type(c);
            }
            (Some(n), None) => {
                self.put(&[BC_LIST_FIXED_UNTYPED]);
                self.write_len(n)?;
            }
            (Some(n), Some(c)) => {
                self.put(&[BC_LIST_FIXED]);
                self.write_type(c);
                self.write_len(n)?;
            }
            (None, None) => self.put(&[BC_LIST_VARIABLE_UNTYPED]),
            (None, Some(c)) => {
                self.put(&[BC_LIST_VARIABLE]);
                self.write_type(c);
            }
        }
        Ok(())
    }

    fn map_begin(&mut self) {
        self.flush_lt32();
        self.refs += 1;
        self.put(&[BC_MAP_UNTYPED]);
    }

    fn end(&mut self) {
        self.flush_lt32();
        self.put(&[BC_END]);
    }

    /// The index of the class `name` with exactly `fields`, its definition written if new.
    fn class_of(&mut self, name: &'static str, fields: &[&'static str]) -> usize {
        if let Some(i) = self
            .classes
            .iter()
            .position(|(n, f)| *n == name && **f == *fields)
        {
            return i;
        }
        self.define(name, Arc::from(fields))
    }

    fn define(&mut self, name: &'static str, fields: Fields) -> usize {
        self.flush_lt32();
        self.put(&[BC_CLASS_DEF]);
        self.write_str(name);
        self.write_int(fields.len() as i32);
        for f in fields.iter() {
            self.write_str(f);
        }
        self.classes.push((name, fields));
        self.classes.len() - 1
    }

    /// An instance's start (after its class definition).
    fn instance(&mut self, class: usize) {
        self.flush_lt32();
        self.refs += 1;
        if class <= OBJECT_DIRECT_MAX {
            self.put(&[BC_OBJECT_DIRECT + class as u8]);
        } else {
            self.put(&[BC_OBJECT]);
            self.write_int(i32::try_from(class).unwrap_or(i32::MAX));
        }
    }

    /// A struct's class: known in this stream, learned on this thread, or told by the
    /// sequence of a second attempt; else the first attempt stops (`need_shape`).
    fn struct_class(&mut self, name: &'static str, len: usize) -> Result<usize> {
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

    fn write_enum(&mut self, class: &'static str, name: &'static str) {
        if let Some(&(_, _, r)) = self
            .enums
            .iter()
            .find(|(c, n, _)| *c == class && *n == name)
        {
            return self.write_ref(r);
        }
        let r = self.refs;
        let c = self.class_of(class, &["name"]);
        self.instance(c);
        self.write_str(name);
        self.enums.push((class, name, r));
    }

    fn write_big_decimal(&mut self, text: &str) -> Result<()> {
        let canonical = bignum::canonical_decimal(text)
            .ok_or_else(|| Error::new(format!("{text:?} is not a java.math.BigDecimal")))?;
        let c = self.class_of("java.math.BigDecimal", &["value"]);
        self.instance(c);
        self.write_str(&canonical);
        Ok(())
    }
}

/// The byte length of the first `units` UTF-16 units of `s`, one less where that would end
/// in a high surrogate: (units, bytes).
fn chunk_of(s: &str, units: usize) -> (usize, usize) {
    let mut n = 0;
    for (i, c) in s.char_indices() {
        let w = c.len_utf16();
        if n + w > units {
            return (n, i);
        }
        n += w;
        if n == units {
            return (n, i + c.len_utf8());
        }
    }
    (n, s.len())
}

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

/// The serde face of a [`Serializer`] (private: [`Serializer::write`] is the way in, as it
/// retries a value whose structs are not known yet).
struct Ser<'s, 'a>(&'s mut Serializer<'a>);

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
        self.0.write_bool(v);
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
            self.0.write_date(i64::from(v));
            return Ok(());
        }
        self.plain("an int")?;
        self.0.write_int(v);
        Ok(())
    }

    fn serialize_i64(mut self, v: i64) -> Result<()> {
        if self.take() == Pending::Date {
            self.0.write_date(v);
        } else {
            self.0.write_long(v);
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
        self.0.write_double(float_as_double(v));
        Ok(())
    }

    fn serialize_f64(mut self, v: f64) -> Result<()> {
        self.plain("a double")?;
        self.0.write_double(v);
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
        self.0.write_str(v.encode_utf8(&mut buf));
        Ok(())
    }

    fn serialize_str(mut self, v: &str) -> Result<()> {
        if self.0.pending == Pending::Decimal {
            self.take();
            return self.0.write_big_decimal(v);
        }
        self.plain("a string")?;
        self.0.write_str(v);
        Ok(())
    }

    fn serialize_bytes(mut self, v: &[u8]) -> Result<()> {
        self.plain("bytes")?;
        self.0.write_binary(v);
        Ok(())
    }

    fn serialize_none(mut self) -> Result<()> {
        self.take();
        self.0.write_null();
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        // A `java::*` request passes through to the value.
        value.serialize(self)
    }

    fn serialize_unit(mut self) -> Result<()> {
        self.plain("()")?;
        self.0.write_null();
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
        self.0.write_str(variant);
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
        self.0.write_str(variant);
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
        self.0.write_str(variant);
        self.0.map_begin();
        Ok(Compound {
            ser: self.0,
            ends: 2,
        })
    }
}

/// A list, map or enum variant being written: `ends` end markers (`Z`) close it.
#[derive(Debug)]
struct Compound<'s, 'a> {
    ser: &'s mut Serializer<'a>,
    ends: usize,
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
        self.ser.write_str(key);
        value.serialize(Ser(&mut *self.ser))
    }

    fn end(self) -> Result<()> {
        self.close();
        Ok(())
    }
}

/// A struct being written: its fields must come in its class definition's order.
#[derive(Debug)]
struct StructSer<'s, 'a> {
    ser: &'s mut Serializer<'a>,
    class: usize,
    next: usize,
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

// ----- the probe: every struct's field names, in the order the structs start --------------

#[derive(Default)]
struct Probe {
    shapes: Vec<(&'static str, Option<Fields>)>,
}

impl Probe {
    fn finish(self) -> Result<Vec<(&'static str, Fields)>> {
        self.shapes
            .into_iter()
            .map(|(n, f)| f.map(|f| (n, f)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::new("a struct did not end"))
    }
}

struct ProbeStruct<'p> {
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
