//! A Java-compatible Hessian 2.0 codec: the serialization of Dubbo's `dubbo://` protocol
//! (Dubbo's default, hessian2, is Alibaba's hessian-lite).
//!
//! - [`Value`]: one decoded value (with [`List`], [`Map`], [`Object`]).
//! - [`Encoder`]: writes the bytes hessian-lite's `Hessian2Output` writes for the same value,
//!   compact forms and chunking included.
//! - [`Decoder`]: reads every Hessian 2.0 form, bounded by [`Limits`]: untrusted bytes give a
//!   [`DecodeError`], never a panic or an allocation the input does not pay for.
//! - [`to_vec`] / [`from_slice`] / [`Serializer`] / [`Deserializer`]: typed Rust values
//!   straight to and from Hessian with serde, mapped to Java types as in [`mod@serde`].
//! - [`from_json`] / [`to_json`]: the JSON mapping of generic invocations, with Java's forms of
//!   `BigDecimal`, `BigInteger`, enums, `Date` and `Throwable` ([`java_exception`]).
//!
//! ```
//! use switchman_hessian::{Decoder, Encoder, Value};
//!
//! let mut enc = Encoder::new();
//! enc.write(&Value::list(vec![Value::Int(1), Value::string("a")]));
//! let bytes = enc.into_bytes();
//! assert_eq!(bytes, [0x7a, 0x91, 0x01, b'a']);
//! let mut dec = Decoder::new(&bytes);
//! assert_eq!(dec.read().unwrap(), Value::list(vec![Value::Int(1), Value::string("a")]));
//! assert!(dec.is_at_end());
//! ```
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod bignum;
mod decode;
mod encode;
mod json;
pub mod serde;
mod tag;
mod utf16;
mod value;

pub use crate::serde::{
    Deserializer, Serializer, from_slice, from_slice_with_limits, to_vec, to_writer,
};
pub use decode::{DecodeError, Decoder, Limits, NODES_PER_BYTE, TEXT_PER_BYTE};
pub use encode::Encoder;
pub use json::{
    JavaException, MappingError, from_json, generic_from_json, java_exception, to_json,
};
pub use value::{List, Map, Object, Value};

/// `v` alone as a Hessian stream.
pub fn to_bytes(v: &Value) -> Vec<u8> {
    let mut enc = Encoder::new();
    enc.write(v);
    enc.into_bytes()
}

/// The one value that `bytes` hold: an error if they hold less, or more.
pub fn from_bytes(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut dec = Decoder::new(bytes);
    let v = dec.read()?;
    if !dec.is_at_end() {
        return Err(DecodeError::trailing(dec.position()));
    }
    Ok(v)
}
