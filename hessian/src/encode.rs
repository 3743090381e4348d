//! The encoder: the bytes hessian-lite's `Hessian2Output` writes.

use std::collections::HashMap;

use crate::tag::*;
use crate::value::{List, Map, Object, Value};

/// The size of `Hessian2Output`'s buffer. Only binary chunking depends on it (see [`Encoder`]).
const JAVA_BUFFER: usize = 8 * 1024;

/// Writes one Hessian 2.0 stream: the class definitions and the type names written into it
/// are shared by every value appended, as in one `Hessian2Output` (one Dubbo request or
/// response body).
///
/// The bytes are those hessian-lite writes for the same Java values: the shortest compact
/// forms as `Hessian2Output` chooses them, strings in chunks of 0x8000 UTF-16 code units,
/// each class definition once then compact instance references, type names once then type
/// references. `Hessian2Output` cuts a binary into chunks where its 8 KiB buffer fills up, so
/// the encoder keeps track of where that buffer would be to cut at the same places.
///
/// A [`Value::List`] without a class is written as Java writes an `ArrayList` (a fixed-length
/// untyped list), a [`Value::Map`] without a class as Java writes a `HashMap` (`H ... Z`), an
/// empty class name counts as none, and a [`Value::Ref`] as a Hessian ref (`0x51 n`).
#[derive(Debug, Default)]
pub struct Encoder {
    out: JavaOut<Vec<u8>>,
    /// Class definitions written: name → (field names, index).
    classes: HashMap<String, Vec<(Vec<String>, usize)>>,
    class_count: usize,
    /// Type names written (lists, maps): name → type reference.
    types: HashMap<String, usize>,
}

impl Encoder {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one value.
    pub fn write(&mut self, v: &Value) {
        match v {
            Value::Null => self.write_null(),
            Value::Bool(b) => self.write_bool(*b),
            Value::Int(i) => self.write_int(*i),
            Value::Long(l) => self.write_long(*l),
            Value::Double(d) => self.write_double(*d),
            Value::String(s) => self.write_str(s),
            Value::Binary(b) => self.write_binary(b),
            Value::Date(ms) => self.write_date(*ms),
            Value::List(l) => self.write_list(l),
            Value::Map(m) => self.write_map(m),
            Value::Object(o) => self.write_object(o),
            Value::Ref(n) => self.write_ref(*n),
        }
    }

    /// Appends a string (`Hessian2Output.writeString`).
    pub fn write_str(&mut self, s: &str) {
        self.out.write_str(s);
    }

    /// Appends `null` (`writeNull`).
    pub fn write_null(&mut self) {
        self.out.write_null();
    }

    /// Appends a boolean (`writeBoolean`).
    pub fn write_bool(&mut self, b: bool) {
        self.out.write_bool(b);
    }

    /// Appends an `int` (`writeInt`).
    pub fn write_int(&mut self, v: i32) {
        self.out.write_int(v);
    }

    /// Appends a `long` (`writeLong`).
    pub fn write_long(&mut self, v: i64) {
        self.out.write_long(v);
    }

    /// Appends a `double` (`writeDouble`), with its choices: an exact int in -128..=127 or
    /// -32768..=32767 as a byte or a short (0.0 and 1.0 as one byte, -0.0 as 0.0), a value
    /// that 0.001 times an int gives back exactly as that int (0x5f), else the 64 bits.
    pub fn write_double(&mut self, v: f64) {
        self.out.write_double(v);
    }

    /// Appends a `java.util.Date` of `ms` milliseconds since the epoch (`writeUTCDate`):
    /// whole minutes that fit 32 bits as 0x4b, else 0x4a and the 64-bit milliseconds.
    pub fn write_date(&mut self, ms: i64) {
        self.out.write_date(ms);
    }

    /// Appends a `byte[]` (`writeBytes`), cut into chunks where `Hessian2Output`'s buffer
    /// would fill up.
    pub fn write_binary(&mut self, data: &[u8]) {
        self.out.write_binary(data);
    }

    /// Appends a back reference to the `n`-th list/map/object of the stream (`writeRef`).
    pub fn write_ref(&mut self, n: usize) {
        self.out.write_ref(n);
    }

    /// The number of bytes written so far.
    pub fn len(&self) -> usize {
        self.out.buf.len()
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.out.buf.is_empty()
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.out.buf
    }

    /// The stream's bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out.buf
    }

    fn write_list(&mut self, l: &List) {
        let class = l.class.as_deref().filter(|c| !c.is_empty());
        let len = l.items.len();
        // writeListBegin
        self.out.flush_if(Flush::Lt32);
        if len <= LIST_DIRECT_MAX {
            match class {
                Some(c) => {
                    self.out.put(&[BC_LIST_DIRECT + len as u8]);
                    self.write_type(c);
                }
                None => self.out.put(&[BC_LIST_DIRECT_UNTYPED + len as u8]),
            }
        } else {
            match class {
                Some(c) => {
                    self.out.put(&[BC_LIST_FIXED]);
                    self.write_type(c);
                }
                None => self.out.put(&[BC_LIST_FIXED_UNTYPED]),
            }
            self.write_int(i32::try_from(len).unwrap_or(i32::MAX));
        }
        for item in &l.items {
            self.write(item);
        }
    }

    fn write_map(&mut self, m: &Map) {
        self.out.flush_if(Flush::Lt32);
        match m.class.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => {
                self.out.put(&[BC_MAP]);
                self.write_type(c);
            }
            None => self.out.put(&[BC_MAP_UNTYPED]),
        }
        for (k, v) in &m.entries {
            self.write(k);
            self.write(v);
        }
        self.out.flush_if(Flush::Lt32);
        self.out.put(&[BC_END]);
    }

    fn write_object(&mut self, o: &Object) {
        let known = self.classes.get(&o.class).and_then(|defs| {
            defs.iter()
                .find(|(names, _)| {
                    names.len() == o.fields.len()
                        && names.iter().zip(&o.fields).all(|(a, (b, _))| a == b)
                })
                .map(|(_, i)| *i)
        });
        let index = match known {
            Some(i) => i,
            None => {
                let i = self.class_count;
                self.class_count += 1;
                self.classes
                    .entry(o.class.clone())
                    .or_default()
                    .push((o.fields.iter().map(|(k, _)| k.clone()).collect(), i));
                self.out.flush_if(Flush::Lt32);
                self.out.put(&[BC_CLASS_DEF]);
                self.write_str(&o.class);
                self.write_int(i32::try_from(o.fields.len()).unwrap_or(i32::MAX));
                for (name, _) in &o.fields {
                    self.write_str(name);
                }
                i
            }
        };
        self.out.flush_if(Flush::Lt32);
        if index <= OBJECT_DIRECT_MAX {
            self.out.put(&[BC_OBJECT_DIRECT + index as u8]);
        } else {
            self.out.put(&[BC_OBJECT]);
            self.write_int(i32::try_from(index).unwrap_or(i32::MAX));
        }
        for (_, v) in &o.fields {
            self.write(v);
        }
    }

    /// A list's or map's type: the name the first time, its index afterwards.
    fn write_type(&mut self, t: &str) {
        self.out.flush_if(Flush::Lt32);
        if let Some(&i) = self.types.get(t) {
            self.write_int(i32::try_from(i).unwrap_or(i32::MAX));
        } else {
            let i = self.types.len();
            self.types.insert(t.to_owned(), i);
            self.write_str(t);
        }
    }
}

/// The scalar writes of `Hessian2Output`, shared by [`Encoder`] and the serde
/// [`Serializer`](crate::Serializer): the bytes appended to `buf` (a `Vec<u8>` or a borrowed
/// one), and where `Hessian2Output`'s buffer offset would be, to check the buffer where Java
/// does (binaries and long strings are cut where it fills up).
#[derive(Debug, Default)]
pub(crate) struct JavaOut<B> {
    pub(crate) buf: B,
    /// Where `Hessian2Output`'s buffer offset would be.
    pub(crate) java_offset: usize,
}

impl<B: AsMut<Vec<u8>>> JavaOut<B> {
    pub(crate) fn new(buf: B) -> Self {
        JavaOut {
            buf,
            java_offset: 0,
        }
    }

    #[inline]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        self.buf.as_mut().extend_from_slice(bytes);
        self.java_offset += bytes.len();
    }

    /// The buffer checks before each of `Hessian2Output`'s writes.
    #[inline]
    pub(crate) fn flush_if(&mut self, check: Flush) {
        let full = match check {
            Flush::Le16 => JAVA_BUFFER <= self.java_offset + 16,
            Flush::Lt16 => JAVA_BUFFER < self.java_offset + 16,
            Flush::Lt32 => JAVA_BUFFER < self.java_offset + 32,
        };
        if full {
            self.java_offset = 0;
        }
    }

    /// `writeNull`.
    #[inline]
    pub(crate) fn write_null(&mut self) {
        self.flush_if(Flush::Le16);
        self.put(&[BC_NULL]);
    }

    /// `writeBoolean`.
    #[inline]
    pub(crate) fn write_bool(&mut self, b: bool) {
        self.flush_if(Flush::Lt16);
        self.put(&[if b { BC_TRUE } else { BC_FALSE }]);
    }

    /// `writeInt`.
    #[inline]
    pub(crate) fn write_int(&mut self, v: i32) {
        self.flush_if(Flush::Le16);
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

    /// `writeLong`.
    #[inline]
    pub(crate) fn write_long(&mut self, v: i64) {
        self.flush_if(Flush::Le16);
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

    /// `writeDouble` (see [`Encoder::write_double`]).
    pub(crate) fn write_double(&mut self, v: f64) {
        self.flush_if(Flush::Le16);
        // Java's (int) cast: truncation, saturating, NaN → 0; Rust's `as` does the same.
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
        // Double.doubleToLongBits: every NaN as the canonical one.
        let bits = if v.is_nan() {
            0x7ff8_0000_0000_0000
        } else {
            v.to_bits()
        };
        self.put(&[BC_DOUBLE]);
        self.put(&bits.to_be_bytes());
    }

    /// `writeUTCDate` (see [`Encoder::write_date`]).
    pub(crate) fn write_date(&mut self, ms: i64) {
        self.flush_if(Flush::Lt32);
        if ms % 60_000 == 0
            && let Ok(m) = i32::try_from(ms / 60_000)
        {
            let b = m.to_be_bytes();
            return self.put(&[BC_DATE_MINUTE, b[0], b[1], b[2], b[3]]);
        }
        self.put(&[BC_DATE]);
        self.put(&ms.to_be_bytes());
    }

    /// `writeString`: chunks of 0x8000 UTF-16 units (a chunk does not end in a high
    /// surrogate), each unit as `printString` writes it.
    pub(crate) fn write_str(&mut self, s: &str) {
        self.flush_if(Flush::Le16);
        // The common case: ASCII that fits one chunk and does not reach the buffer's end (no
        // buffer check inside would fire, so the bytes go in at once).
        if s.len() <= STRING_CHUNK
            && s.is_ascii()
            && self.java_offset + 3 + s.len() + 16 < JAVA_BUFFER
        {
            self.string_header(s.len());
            self.put(s.as_bytes());
            return;
        }
        let mut rest = s;
        let mut left = s.encode_utf16().count();
        while left > STRING_CHUNK {
            let (sub, bytes) = chunk_of(rest, STRING_CHUNK);
            self.flush_if(Flush::Le16);
            self.put(&[BC_STRING_CHUNK, (sub >> 8) as u8, sub as u8]);
            self.print(&rest[..bytes]);
            rest = &rest[bytes..];
            left -= sub;
        }
        self.flush_if(Flush::Le16);
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
                self.flush_if(Flush::Le16);
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

    /// `writeBytes`: cut into chunks where `Hessian2Output`'s buffer would fill up (Java's
    /// signed int arithmetic).
    pub(crate) fn write_binary(&mut self, data: &[u8]) {
        let size = JAVA_BUFFER as i64;
        let mut rest = data;
        while size - self.java_offset as i64 - 3 < rest.len() as i64 {
            let mut sub = size - self.java_offset as i64 - 3;
            if sub < 16 {
                self.java_offset = 0;
                sub = (size - 3).min(rest.len() as i64);
            }
            let sub = sub as usize;
            self.put(&[BC_BINARY_CHUNK, (sub >> 8) as u8, sub as u8]);
            self.put(&rest[..sub]);
            rest = &rest[sub..];
            self.java_offset = 0;
        }
        self.flush_if(Flush::Lt16);
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

    /// `writeRef`: a back reference to the `n`-th list, map or object of the stream.
    pub(crate) fn write_ref(&mut self, n: usize) {
        self.flush_if(Flush::Lt16);
        self.put(&[BC_REF]);
        self.write_int(i32::try_from(n).unwrap_or(i32::MAX));
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

/// `Hessian2Output`'s buffer checks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Flush {
    /// `if (SIZE <= offset + 16) flushBuffer()`
    Le16,
    /// `if (SIZE < offset + 16) flushBuffer()`
    Lt16,
    /// `if (SIZE < offset + 32) flushBuffer()` (also `flushIfFull`)
    Lt32,
}
