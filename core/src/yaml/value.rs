//! The untyped YAML tree ([`Value`], [`Mapping`], [`Number`]): what [`super::from_str`] gives
//! for `T = Value`, and a deserializer to read typed values out of it ([`super::from_value`]).

use std::fmt;

use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// A YAML number: an integer that fits 64 bits, or a float.
#[derive(Clone, Copy, PartialEq)]
pub struct Number(N);

#[derive(Clone, Copy, PartialEq)]
enum N {
    PosInt(u64),
    NegInt(i64),
    Float(f64),
}

impl Number {
    /// The number as an `i64`, if it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        match self.0 {
            N::PosInt(u) => i64::try_from(u).ok(),
            N::NegInt(i) => Some(i),
            N::Float(_) => None,
        }
    }

    /// The number as a `u64`, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self.0 {
            N::PosInt(u) => Some(u),
            _ => None,
        }
    }

    /// The number as an `f64` (integers converted).
    pub fn as_f64(&self) -> f64 {
        match self.0 {
            N::PosInt(u) => u as f64,
            N::NegInt(i) => i as f64,
            N::Float(f) => f,
        }
    }

    /// Whether the number is a float (`1.0`, `2e3`), not an integer.
    pub fn is_float(&self) -> bool {
        matches!(self.0, N::Float(_))
    }

    fn from_i64(i: i64) -> Self {
        match u64::try_from(i) {
            Ok(u) => Number(N::PosInt(u)),
            Err(_) => Number(N::NegInt(i)),
        }
    }
}

impl From<i64> for Number {
    fn from(i: i64) -> Self {
        Number::from_i64(i)
    }
}

impl From<u64> for Number {
    fn from(u: u64) -> Self {
        Number(N::PosInt(u))
    }
}

impl From<f64> for Number {
    fn from(f: f64) -> Self {
        Number(N::Float(f))
    }
}

/// As YAML writes it: `1`, `-2`, `1.0`, `1e20`.
impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            N::PosInt(u) => write!(f, "{u}"),
            N::NegInt(i) => write!(f, "{i}"),
            N::Float(x) if x.is_nan() => f.write_str(".nan"),
            N::Float(x) if x.is_infinite() => f.write_str(if x < 0.0 { "-.inf" } else { ".inf" }),
            // Debug is the shortest text that reads back, with `.0` on whole numbers.
            N::Float(x) => write!(f, "{x:?}"),
        }
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Number({self})")
    }
}

/// An untyped YAML document: what [`from_str`](super::from_str) gives for `T = Value`.
#[derive(Clone, PartialEq, Default)]
pub enum Value {
    /// `~`, `null`, or nothing.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer or a float.
    Number(Number),
    /// Any other scalar.
    String(String),
    /// A sequence.
    Sequence(Vec<Value>),
    /// A mapping, in document order.
    Mapping(Mapping),
}

impl Value {
    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The string, if this is a [`Value::String`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The integer, if this is a [`Value::Number`] that is an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// The items, if this is a [`Value::Sequence`].
    pub fn as_sequence(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Sequence(s) => Some(s),
            _ => None,
        }
    }

    /// The entries, if this is a [`Value::Mapping`].
    pub fn as_mapping(&self) -> Option<&Mapping> {
        match self {
            Value::Mapping(m) => Some(m),
            _ => None,
        }
    }

    /// `self[key]` when this is a mapping with a string key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_mapping().and_then(|m| m.get(key))
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("Null"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Number(n) => fmt::Debug::fmt(n, f),
            Value::String(s) => write!(f, "String({s:?})"),
            Value::Sequence(items) => {
                f.write_str("Sequence ")?;
                f.debug_list().entries(items).finish()
            }
            Value::Mapping(m) => fmt::Debug::fmt(m, f),
        }
    }
}

/// Compact flow YAML (`{a: [1, x]}`), strings quoted when they would not read back as
/// the same plain string; for messages.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => write!(f, "{n}"),
            Value::String(s) => {
                let plain = !s.is_empty()
                    && s.chars().all(|c| {
                        c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@')
                    })
                    && !s.ends_with(':')
                    && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
                    && !matches!(
                        s.to_ascii_lowercase().as_str(),
                        "true" | "false" | "null" | "~"
                    );
                if plain {
                    f.write_str(s)
                } else {
                    write!(f, "{s:?}")
                }
            }
            Value::Sequence(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Mapping(m) => {
                f.write_str("{")?;
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A YAML mapping: its entries in document order (keys are unique: a document with a
/// duplicate key is refused).
#[derive(Clone, PartialEq, Default)]
pub struct Mapping {
    entries: Vec<(Value, Value)>,
}

impl Mapping {
    /// An empty mapping.
    pub fn new() -> Self {
        Mapping::default()
    }

    /// The value of the string key `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// Whether the string key `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The entries in document order.
    pub fn iter(&self) -> std::slice::Iter<'_, (Value, Value)> {
        self.entries.iter()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds an entry (replacing the value of an equal key).
    pub fn insert(&mut self, key: Value, value: Value) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
    }
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Mapping ")?;
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

impl<'a> IntoIterator for &'a Mapping {
    type Item = (&'a Value, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Value, Value)>,
        fn(&'a (Value, Value)) -> (&'a Value, &'a Value),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl IntoIterator for Mapping {
    type Item = (Value, Value);
    type IntoIter = std::vec::IntoIter<(Value, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'de> de::Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Number(Number::from_i64(i)))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::Number(Number(N::PosInt(u))))
    }

    fn visit_i128<E>(self, i: i128) -> Result<Value, E> {
        Ok(Value::Number(match i64::try_from(i) {
            Ok(i) => Number::from_i64(i),
            Err(_) => match u64::try_from(i) {
                Ok(u) => Number(N::PosInt(u)),
                Err(_) => Number(N::Float(i as f64)),
            },
        }))
    }

    fn visit_u128<E>(self, u: u128) -> Result<Value, E> {
        Ok(Value::Number(match u64::try_from(u) {
            Ok(u) => Number(N::PosInt(u)),
            Err(_) => Number(N::Float(u as f64)),
        }))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Number(Number(N::Float(f))))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Value, E> {
        String::from_utf8(b.to_vec())
            .map(Value::String)
            .map_err(|_| E::custom("binary data that is not UTF-8"))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        de::Deserialize::deserialize(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        de::Deserialize::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        // No `size_hint` preallocation: the hint is the document's, not ours to trust.
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Sequence(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // Duplicate keys were refused by the parser (DuplicateKeyPolicy::Error): no
        // quadratic re-check here.
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry()? {
            entries.push((k, v));
        }
        Ok(Value::Mapping(Mapping { entries }))
    }
}

/// A [`Value`] read as a typed value ([`from_value`](super::from_value)).
impl<'de> Deserializer<'de> for Value {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::Number(Number(N::PosInt(u))) => visitor.visit_u64(u),
            Value::Number(Number(N::NegInt(i))) => visitor.visit_i64(i),
            Value::Number(Number(N::Float(f))) => visitor.visit_f64(f),
            Value::String(s) => visitor.visit_string(s),
            Value::Sequence(items) => {
                let mut seq = de::value::SeqDeserializer::new(items.into_iter());
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Mapping(m) => {
                let mut map = de::value::MapDeserializer::new(m.entries.into_iter());
                let out = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(other),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self {
            Value::String(s) => s
                .into_deserializer()
                .deserialize_enum(name, variants, visitor),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl IntoDeserializer<'_, de::value::Error> for Value {
    type Deserializer = Value;

    fn into_deserializer(self) -> Value {
        self
    }
}
