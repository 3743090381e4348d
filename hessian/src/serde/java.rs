//! Field-level overrides for the Java types a Rust type alone cannot tell, as serde `with`
//! modules:
//!
//! | module | Rust field | Java field | written as |
//! | --- | --- | --- | --- |
//! | [`date`] | `SystemTime`, `i64` (ms since the epoch), `Option` of either | `java.util.Date` | a Hessian date |
//! | [`big_decimal`] | `String`, `Option<String>` (decimal text) | `java.math.BigDecimal` | object `java.math.BigDecimal {value}`, the text as `BigDecimal.toString()` prints it |
//! | [`set`] | `HashSet<T>`, `BTreeSet<T>`, `Vec<T>`, `Option` of one | `java.util.Set` | typed list `java.util.HashSet` |
//! | [`bytes`] | `Vec<u8>` | `byte[]` | a Hessian binary (as `serde_bytes` does) |
//!
//! ```
//! use std::collections::HashSet;
//! use std::time::SystemTime;
//! use serde::{Deserialize, Serialize};
//! use switchman_hessian::serde::java;
//!
//! #[derive(Serialize, Deserialize)]
//! #[serde(rename = "org.example.Order", rename_all = "camelCase")]
//! struct Order {
//!     #[serde(with = "java::date")]
//!     created_at: SystemTime,
//!     #[serde(with = "java::date")]
//!     shipped_at: Option<i64>,
//!     #[serde(with = "java::big_decimal")]
//!     total: String,
//!     #[serde(with = "java::set")]
//!     tags: HashSet<String>,
//!     #[serde(with = "java::bytes")]
//!     signature: Vec<u8>,
//! }
//! ```
//!
//! Each module writes through a newtype struct of a reserved name that this crate's
//! serializer and deserializer recognise; any other serde format sees the plain value
//! (a date as milliseconds, a decimal as its text, a set as a sequence, bytes as bytes), as
//! this crate's JSON mapping gives them.

/// The newtype name [`date`] writes through.
pub(crate) const DATE: &str = "$switchman_hessian::java.util.Date";
/// The newtype name [`big_decimal`] writes through.
pub(crate) const BIG_DECIMAL: &str = "$switchman_hessian::java.math.BigDecimal";
/// The newtype name [`set`] writes through.
pub(crate) const SET: &str = "$switchman_hessian::java.util.Set";

/// `java.util.Date`: a [`SystemTime`](std::time::SystemTime) or an `i64` of milliseconds since
/// the epoch, or an `Option` of either (`null` ↔ `None`). Reads a Hessian date, or a long or
/// int of milliseconds.
pub mod date {
    use std::fmt;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use ::serde::de::{self, Deserializer, Visitor};
    use ::serde::ser::{self, Serializer};

    use super::DATE;

    /// A Rust type that can stand for a `java.util.Date`.
    pub trait JavaDate: Sized {
        /// Milliseconds since the epoch, `None` for `null`.
        fn to_millis(&self) -> Result<Option<i64>, String>;
        /// From milliseconds since the epoch (`None`: `null`).
        fn from_millis(ms: Option<i64>) -> Result<Self, String>;
    }

    impl JavaDate for i64 {
        fn to_millis(&self) -> Result<Option<i64>, String> {
            Ok(Some(*self))
        }
        fn from_millis(ms: Option<i64>) -> Result<Self, String> {
            ms.ok_or_else(|| "null for a date that is not an Option".to_string())
        }
    }

    impl JavaDate for SystemTime {
        fn to_millis(&self) -> Result<Option<i64>, String> {
            let ms = match self.duration_since(UNIX_EPOCH) {
                Ok(d) => i128::try_from(d.as_millis()).ok(),
                // Before the epoch: the floor, as Java's millisecond clock.
                Err(e) => {
                    let d = e.duration();
                    let whole = i128::try_from(d.as_millis()).ok();
                    let frac = d.as_nanos() % 1_000_000 != 0;
                    whole.map(|w| -w - i128::from(frac))
                }
            };
            ms.and_then(|ms| i64::try_from(ms).ok())
                .map(Some)
                .ok_or_else(|| format!("{self:?} is out of java.util.Date's range"))
        }
        fn from_millis(ms: Option<i64>) -> Result<Self, String> {
            let ms = ms.ok_or_else(|| "null for a date that is not an Option".to_string())?;
            let t = if ms >= 0 {
                UNIX_EPOCH.checked_add(Duration::from_millis(ms.unsigned_abs()))
            } else {
                UNIX_EPOCH.checked_sub(Duration::from_millis(ms.unsigned_abs()))
            };
            t.ok_or_else(|| format!("{ms} ms is out of SystemTime's range"))
        }
    }

    impl JavaDate for Option<i64> {
        fn to_millis(&self) -> Result<Option<i64>, String> {
            Ok(*self)
        }
        fn from_millis(ms: Option<i64>) -> Result<Self, String> {
            Ok(ms)
        }
    }

    impl JavaDate for Option<SystemTime> {
        fn to_millis(&self) -> Result<Option<i64>, String> {
            match self {
                Some(t) => t.to_millis(),
                None => Ok(None),
            }
        }
        fn from_millis(ms: Option<i64>) -> Result<Self, String> {
            ms.map(|ms| SystemTime::from_millis(Some(ms))).transpose()
        }
    }

    /// Writes `v` as a `java.util.Date`.
    pub fn serialize<T: JavaDate, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        match v.to_millis().map_err(<S::Error as ser::Error>::custom)? {
            Some(ms) => s.serialize_newtype_struct(DATE, &ms),
            None => s.serialize_none(),
        }
    }

    /// Reads a `java.util.Date` (or milliseconds) into `T`.
    pub fn deserialize<'de, T: JavaDate, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let ms = d.deserialize_option(OptionMillis)?;
        T::from_millis(ms).map_err(<D::Error as de::Error>::custom)
    }

    struct OptionMillis;

    impl<'de> Visitor<'de> for OptionMillis {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a java.util.Date or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_newtype_struct(DATE, Millis).map(Some)
        }
    }

    pub(crate) struct Millis;

    impl<'de> Visitor<'de> for Millis {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a java.util.Date (milliseconds since the epoch)")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("{v} ms is out of range")))
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<i64, D::Error> {
            d.deserialize_i64(self)
        }
    }
}

/// `java.math.BigDecimal`: decimal text in a `String` (or `Option<String>`). Written as
/// hessian-lite writes a `BigDecimal` (an object of one field `value`, its `toString()`: the
/// text is checked and put in that form, `1e3` → `1E+3`); reads that object, a string, or a
/// number (as its text).
pub mod big_decimal {
    use std::fmt;

    use ::serde::de::{self, Deserializer, Visitor};
    use ::serde::ser::Serializer;

    use super::BIG_DECIMAL;

    /// A Rust type that can stand for a `java.math.BigDecimal`.
    pub trait JavaBigDecimal: Sized {
        /// The decimal text, `None` for `null`.
        fn text(&self) -> Option<&str>;
        /// From the decimal text (`None`: `null`).
        fn from_text(text: Option<String>) -> Result<Self, String>;
    }

    impl JavaBigDecimal for String {
        fn text(&self) -> Option<&str> {
            Some(self)
        }
        fn from_text(text: Option<String>) -> Result<Self, String> {
            text.ok_or_else(|| "null for a BigDecimal that is not an Option".to_string())
        }
    }

    impl JavaBigDecimal for Option<String> {
        fn text(&self) -> Option<&str> {
            self.as_deref()
        }
        fn from_text(text: Option<String>) -> Result<Self, String> {
            Ok(text)
        }
    }

    /// Writes `v` as a `java.math.BigDecimal`.
    pub fn serialize<T: JavaBigDecimal, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        match v.text() {
            Some(t) => s.serialize_newtype_struct(BIG_DECIMAL, t),
            None => s.serialize_none(),
        }
    }

    /// Reads a `java.math.BigDecimal` (or a string or number) into `T`: the text as Java's
    /// `new BigDecimal(text).toString()` gives it (what it writes back), an error when it is
    /// not a decimal (as Java's `new BigDecimal(text)` throws).
    pub fn deserialize<'de, T: JavaBigDecimal, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let text = d
            .deserialize_option(OptionText)?
            .map(|t| {
                crate::bignum::canonical_decimal(&t)
                    .ok_or_else(|| format!("{t:?} is not a java.math.BigDecimal"))
            })
            .transpose()
            .map_err(<D::Error as de::Error>::custom)?;
        T::from_text(text).map_err(<D::Error as de::Error>::custom)
    }

    struct OptionText;

    impl<'de> Visitor<'de> for OptionText {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a java.math.BigDecimal or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_newtype_struct(BIG_DECIMAL, Text).map(Some)
        }
    }

    struct Text;

    impl<'de> Visitor<'de> for Text {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a java.math.BigDecimal")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            d.deserialize_any(self)
        }
    }
}

/// `java.util.Set`: any sequence (`HashSet`, `BTreeSet`, `Vec`, or an `Option` of one) is
/// written as the typed list `java.util.HashSet`, as Java writes a `HashSet`; anything a
/// sequence reads from is read.
pub mod set {
    use ::serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::SET;

    /// Writes `v` as a `java.util.HashSet`.
    pub fn serialize<T: Serialize + ?Sized, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_newtype_struct(SET, v)
    }

    /// Reads `T` as it reads itself.
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// `byte[]`: a `Vec<u8>` written as a Hessian binary (not a list of ints); reads a binary,
/// a list of numbers 0..=255 or -128..=127, or a string's bytes.
pub mod bytes {
    use std::fmt;

    use ::serde::de::{self, Deserializer, SeqAccess, Visitor};
    use ::serde::ser::Serializer;

    /// Writes `v` as a `byte[]`.
    pub fn serialize<T: AsRef<[u8]> + ?Sized, S: Serializer>(
        v: &T,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v.as_ref())
    }

    /// Reads a `byte[]` into a `Vec<u8>`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(Bytes)
    }

    struct Bytes;

    impl<'de> Visitor<'de> for Bytes {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte[]")
        }
        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
            Ok(v.as_bytes().to_vec())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<i16>()? {
                let b = u8::try_from(b)
                    .or_else(|_| i8::try_from(b).map(|b| b as u8))
                    .map_err(|_| de::Error::custom(format!("{b} is not a byte")))?;
                out.push(b);
            }
            Ok(out)
        }
    }
}
