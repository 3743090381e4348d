//! Typed values straight to and from Hessian 2.0 with serde: no [`Value`](crate::Value) or
//! JSON in between.
//!
//! - [`to_vec`] / [`to_writer`]: one value as a stream; [`Serializer`] appends several values
//!   to one stream (a `dubbo://` body: its strings, then the arguments, sharing class
//!   definitions and type names).
//! - [`from_slice`] / [`from_slice_with_limits`]: the one value the bytes hold;
//!   [`Deserializer`] reads values one after another and tells how many bytes it consumed.
//!
//! The bytes are those hessian-lite (Dubbo 3.3's `hessian2`) writes for the Java value the
//! Rust type stands for, by this mapping:
//!
//! | Rust | Java | Hessian |
//! | --- | --- | --- |
//! | `bool` | `boolean` / `Boolean` | `T` / `F` |
//! | `i8`, `i16`, `i32`, `u8`, `u16` | `byte`, `short`, `int` (Java writes all three as int) | int |
//! | `i64`, `u32`; `u64`, `i128`, `u128` in `i64`'s range (else an error, never a wrap) | `long` | long |
//! | `f64`; `f32` (widened as Java widens a `float`: the double of its decimal text) | `double`, `float` | double |
//! | `char` (in the BMP, else an error) | `char` | a string of one char |
//! | `String`, `&str` | `String` | string |
//! | `Option<T>` | the boxed type (`Option<i32>` → `Integer`) | `N` or `T` |
//! | `()` | `null` | `N` |
//! | `Vec<T>`, slices, arrays, `HashSet`, `BTreeSet`, tuples | `java.util.List` (`ArrayList`) | untyped fixed list (`0x78+n` / `X n`), as Java writes an `ArrayList` |
//! | `HashMap`, `BTreeMap` | `java.util.Map` (`HashMap`) | untyped map `H ... Z`, as Java writes a `HashMap` |
//! | struct (`#[serde(rename = "org.example.User")]`) | the class named by the serde name | class definition once per stream (the serde field names, in declaration order), then instances `0x60+n` / `O n` |
//! | unit struct | a class without fields | an object of no fields |
//! | newtype struct | its field | its field |
//! | enum, unit variant (`#[serde(rename = "org.example.Color")]`) | a Java enum (serde's enum name is the class, the variant the constant) | object of the enum class, one field `name`; later uses of the same constant in the stream as refs (`0x51 n`), as Java writes them |
//! | enum, variant with data | (no Java form) | map of one entry `{variant: value}` |
//! | bytes (`serialize_bytes`: `serde_bytes`, [`java::bytes`]) | `byte[]` | binary |
//!
//! Overrides for what a Rust type cannot tell, as `#[serde(with = "...")]` modules in
//! [`java`]: [`java::date`] (`java.util.Date` from `SystemTime` or `i64` ms),
//! [`java::big_decimal`] (`java.math.BigDecimal` from decimal text), [`java::set`]
//! (`java.util.HashSet`, typed list), [`java::bytes`] (`byte[]` from `Vec<u8>`).
//! `Integer` vs `int` is `Option<i32>` vs `i32`. `short`, `byte` and `float` need nothing:
//! the wire has only int and double, and Java narrows when it reads into the field.
//!
//! Fields: Java reads an object's fields by name, so Rust's field order does not change
//! what Java reads; hessian-lite writes a class's fields primitives and `java.lang` types
//! first and the whole list reversed, so declare the Rust fields in that order for bytes
//! identical to Java's. A subclass is one flat class definition holding its superclasses'
//! fields too: write them all in one Rust struct. `#[serde(flatten)]` makes serde write a
//! map (no class name), which Java reads only into a field declared with the concrete class.
//! `skip_serializing_if` works (the instance gets its own class definition), but Java sets a
//! missing field to its default.
//!
//! Reading: every form hessian-lite writes (compact numbers, chunked strings and
//! binaries, typed and untyped lists and maps of fixed and variable length, class
//! definitions and instances, back references, `null`); an object's fields the Rust struct
//! lacks are skipped, and a Rust field missing from the stream takes its serde default
//! (`#[serde(default)]`, `Option`) or is an error; a struct reads any class (by field
//! names) or a map. Numbers read into any Rust integer type they fit (range-checked by
//! serde), ints and longs into floats, a date into an `i64` of milliseconds.
//! `deserialize_any` (`serde_json::Value`, untagged enums) gives this crate's JSON mapping
//! ([`to_json`](crate::to_json)): binaries as base64 text, dates as milliseconds, objects as
//! `{"class": ..., fields}`, `BigDecimal`/`BigInteger`/`UUID` as text, enum constants as
//! their name, a Throwable as `{"class", "message", "cause", ...}`.
//!
//! Untrusted input is bounded by [`Limits`] as in [`Decoder`](crate::Decoder):
//! sizes are checked against the limits and the input left before anything is allocated;
//! a back reference is read again from the referenced value's offset, each replay counted
//! against `max_nodes`/`max_bytes`/`max_depth` (so refs cannot amplify); a ref to a value
//! still being read (a cycle) is an error, except a Throwable's `cause` referring to its
//! own object (Java's "no cause"), which reads as `null`.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, PartialEq, Serialize, Deserialize)]
//! #[serde(rename = "org.example.User")]
//! struct User {
//!     id: i64,
//!     name: String,
//!     nickname: Option<String>,
//! }
//!
//! let u = User { id: 7, name: "Ann".into(), nickname: None };
//! let bytes = switchman_hessian::to_vec(&u).unwrap();
//! assert_eq!(&bytes[..2], b"C\x10"); // class definition "org.example.User"
//! let back: User = switchman_hessian::from_slice(&bytes).unwrap();
//! assert_eq!(back, u);
//! ```

mod de;
mod error;
pub mod java;
mod ser;

#[cfg(test)]
mod tests;

pub use de::Deserializer;
pub use error::Error;
pub use ser::Serializer;

use crate::Limits;

/// `value` alone as a Hessian stream.
pub fn to_vec<T: ::serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    Serializer::new(&mut out).write(value)?;
    Ok(out)
}

/// Writes `value` alone as a Hessian stream to `w`.
pub fn to_writer<W: std::io::Write, T: ::serde::Serialize + ?Sized>(
    mut w: W,
    value: &T,
) -> Result<(), Error> {
    let bytes = to_vec(value)?;
    w.write_all(&bytes)
        .map_err(|e| Error::new(format!("writing: {e}")))
}

/// The one value `bytes` hold, as a `T`, with the limits for their size
/// ([`Limits::for_input`]): an error if they hold less, or more.
pub fn from_slice<'de, T: ::serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    from_slice_with_limits(bytes, Limits::for_input(bytes.len()))
}

/// [`from_slice`] with the given limits.
pub fn from_slice_with_limits<'de, T: ::serde::Deserialize<'de>>(
    bytes: &'de [u8],
    limits: Limits,
) -> Result<T, Error> {
    let mut de = Deserializer::with_limits(bytes, limits);
    let v = de.read()?;
    if !de.is_at_end() {
        return Err(Error::at("bytes after the value", de.position()));
    }
    Ok(v)
}
