//! The one way Switchman reads YAML: rules and configurators from a config centre, migration
//! rules, static registry files, cluster configuration.
//!
//! Whoever can write to a shared registry writes the text every consumer parses, so each
//! document is bounded before and while it is read ([`Limits`], defaults in brackets):
//!
//! - **size** ([`MAX_BYTES`], 256 KiB): longer text is refused before parsing;
//! - **depth** ([`MAX_DEPTH`], 64): sequences and mappings nested deeper, aliases expanded;
//! - **nodes** ([`MAX_NODES`], 100,000): scalars, sequences and mappings in the document
//!   *after* alias expansion, so `x: &a [0,0,…]` with `y: [*a,*a,…]` (n×m nodes from n+m
//!   bytes) is refused as soon as the count passes the limit, in milliseconds and with
//!   memory proportional to the limit, not to n×m;
//! - **text** (four times the size limit, 1 MiB): scalar bytes after alias expansion, so an
//!   alias of a long string cannot be repeated into gigabytes either.
//!
//! An error names the input (`what`, e.g. `condition rule demo.Greeter.condition-router`)
//! and, when a limit ran out, which one ([`YamlError::limit`]).
//!
//! Parsing is [serde-saphyr](https://docs.rs/serde-saphyr) (pure Rust, no `unsafe` in
//! parsing), configured to read scalars as YAML 1.2's core schema, as serde_yaml did: only
//! `true`/`false` are booleans (callers that want YAML 1.1's `yes`/`on` read them from
//! strings), `010` and `1_000` stay strings, `.inf`/`.nan` are strings, duplicate keys are
//! errors, `<<` merge keys are merged (as SnakeYAML, and so Dubbo, does) and tags are ignored.
//! [`Value`] is the untyped document tree for callers that inspect YAML by hand.

use std::fmt;

use serde::de::{
    self, DeserializeOwned, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde_saphyr::budget::BudgetBreach;

/// Default [`Limits::max_bytes`]: 256 KiB.
pub const MAX_BYTES: usize = 256 * 1024;
/// Default [`Limits::max_depth`].
pub const MAX_DEPTH: usize = 64;
/// Default [`Limits::max_nodes`].
pub const MAX_NODES: usize = 100_000;

/// Bounds on one YAML document. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest text accepted, in bytes (checked before parsing).
    pub max_bytes: usize,
    /// Deepest nesting of sequences and mappings, aliases expanded.
    pub max_depth: usize,
    /// Most nodes (scalars, sequences, mappings), each node an alias repeats counted again.
    pub max_nodes: usize,
}

impl Limits {
    /// [`MAX_BYTES`], [`MAX_DEPTH`], [`MAX_NODES`]: for anything a registry or config centre
    /// serves.
    pub const DEFAULT: Limits = Limits {
        max_bytes: MAX_BYTES,
        max_depth: MAX_DEPTH,
        max_nodes: MAX_NODES,
    };

    /// Most scalar bytes after alias expansion: four times [`Limits::max_bytes`].
    pub const fn max_text_bytes(&self) -> usize {
        self.max_bytes.saturating_mul(4)
    }

    fn options(&self) -> serde_saphyr::Options {
        let max_nodes = self.max_nodes.max(1);
        let mut budget = serde_saphyr::Budget::default();
        budget.max_depth = self.max_depth;
        budget.max_nodes = max_nodes;
        // Every node is at most a start and an end event: the node count runs out first,
        // and the error names it.
        budget.max_events = max_nodes.saturating_mul(3).saturating_add(64);
        budget.max_aliases = max_nodes;
        budget.max_anchors = max_nodes;
        budget.max_merge_keys = max_nodes;
        budget.max_total_scalar_bytes = self.max_text_bytes();
        // An anchor inside an anchor is recorded once for each: bounded like the document.
        budget.max_recorded_anchor_events = max_nodes.saturating_mul(2);
        budget.max_recorded_anchor_bytes = self.max_text_bytes();
        // The node count bounds what aliases cost; the ratio heuristic would only refuse
        // documents that repeat one anchor often and cheaply (`metadata: *common`).
        budget.enforce_alias_anchor_ratio = false;
        let mut options = serde_saphyr::Options::default();
        options.budget = Some(budget);
        options.alias_limits.max_total_replayed_events = max_nodes.saturating_mul(2);
        options.alias_limits.max_replay_stack_depth = self.max_depth;
        options.strict_booleans = true;
        options.leading_zero_numbers_as_strings = true;
        options.underscored_numbers_as_strings = true;
        options.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::AsString;
        options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
        options.merge_keys = serde_saphyr::MergeKeyPolicy::Merge;
        options.with_snippet = false;
        options
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Which of the [`Limits`] a document ran over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_bytes`].
    Bytes,
    /// [`Limits::max_depth`].
    Depth,
    /// [`Limits::max_nodes`].
    Nodes,
    /// [`Limits::max_text_bytes`].
    Text,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Bytes => "size",
            Limit::Depth => "depth",
            Limit::Nodes => "node",
            Limit::Text => "text",
        })
    }
}

/// A YAML document that was refused: not YAML, not the shape asked for, or over a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    what: String,
    limit: Option<Limit>,
    message: String,
    line: Option<usize>,
    column: Option<usize>,
}

impl YamlError {
    /// What was being read (the `what` given to [`from_str`]).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The limit that ran out, if that is why the document was refused.
    pub fn limit(&self) -> Option<Limit> {
        self.limit
    }

    /// What was wrong, without [`YamlError::what`] and the position.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// [`YamlError::message`] and the position: the error without [`YamlError::what`], for
    /// callers whose own message already names the input.
    pub fn detail(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{} (line {l}, column {c})", self.message),
            (Some(l), None) => format!("{} (line {l})", self.message),
            _ => self.message.clone(),
        }
    }

    /// 1-based line of the problem, when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// 1-based column of the problem, when known.
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    fn new(what: &str, limit: Option<Limit>, message: String) -> Self {
        YamlError {
            what: what.to_string(),
            limit,
            message,
            line: None,
            column: None,
        }
    }

    fn from_saphyr(what: &str, limits: &Limits, err: &serde_saphyr::Error) -> Self {
        use serde_saphyr::Error as E;
        let mut inner = err;
        while let E::WithSnippet { error, .. } | E::AliasError { error, .. } = inner {
            inner = error;
        }
        let nodes = || {
            (
                Some(Limit::Nodes),
                format!(
                    "over the YAML node limit: more than {} nodes with aliases expanded",
                    limits.max_nodes
                ),
            )
        };
        let depth = || {
            (
                Some(Limit::Depth),
                format!(
                    "over the YAML depth limit: nested deeper than {} with aliases expanded",
                    limits.max_depth
                ),
            )
        };
        let text = || {
            (
                Some(Limit::Text),
                format!(
                    "over the YAML text limit: more than {} bytes of scalars with aliases expanded",
                    limits.max_text_bytes()
                ),
            )
        };
        let (limit, message) = match inner {
            E::Budget { breach, .. } => match breach {
                BudgetBreach::Depth { .. } => depth(),
                BudgetBreach::ScalarBytes { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
                    text()
                }
                BudgetBreach::Nodes { .. }
                | BudgetBreach::Events { .. }
                | BudgetBreach::Aliases { .. }
                | BudgetBreach::Anchors { .. }
                | BudgetBreach::MergeKeys { .. }
                | BudgetBreach::RecordedAnchorEvents { .. }
                | BudgetBreach::AliasAnchorRatio { .. } => nodes(),
                _ => (None, plain_message(inner)),
            },
            E::AliasReplayLimitExceeded { .. }
            | E::AliasExpansionLimitExceeded { .. }
            | E::AliasReplayCounterOverflow { .. } => nodes(),
            E::AliasReplayStackDepthExceeded { .. } => depth(),
            _ => (None, plain_message(inner)),
        };
        let mut e = YamlError::new(what, limit, message);
        if let Some(loc) = err.location().filter(|l| l.line() > 0) {
            e.line = usize::try_from(loc.line()).ok();
            e.column = usize::try_from(loc.column()).ok().filter(|c| *c > 0);
        }
        e
    }
}

/// The error's own words in serde-saphyr's user-facing wording, without the location (we add
/// ours) and without control characters (the text can quote hostile input), at most 300 bytes.
fn plain_message(err: &serde_saphyr::Error) -> String {
    use serde_saphyr::MessageFormatter;
    let words = serde_saphyr::UserMessageFormatter.format_message(err);
    let mut out: String = words
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > 300 {
        let mut cut = 300;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.detail())
    }
}

impl std::error::Error for YamlError {}

impl From<YamlError> for crate::Error {
    fn from(e: YamlError) -> Self {
        crate::Error::bad_config(e.to_string())
    }
}

/// Reads one YAML document into `T` within [`Limits::DEFAULT`]. `what` names the input in
/// errors (`"condition rule demo.Greeter.condition-router"`, a file path, ...).
pub fn from_str<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, YamlError> {
    from_str_with(text, what, &Limits::DEFAULT)
}

/// [`from_str`] with other limits.
pub fn from_str_with<T: DeserializeOwned>(
    text: &str,
    what: &str,
    limits: &Limits,
) -> Result<T, YamlError> {
    if text.len() > limits.max_bytes {
        return Err(YamlError::new(
            what,
            Some(Limit::Bytes),
            format!(
                "over the YAML size limit: {} bytes, the limit is {}",
                text.len(),
                limits.max_bytes
            ),
        ));
    }
    serde_saphyr::from_str_with_options(text, limits.options())
        .map_err(|e| YamlError::from_saphyr(what, limits, &e))
}

/// Reads a value out of a [`Value`] (a record in a list read as [`Value`]s, so that one bad
/// record is reported on its own). Errors are serde's words (`missing field ...`).
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    T::deserialize(value).map_err(|e| e.to_string())
}

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

/// An untyped YAML document: what [`from_str`] gives for `T = Value`.
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

/// A [`Value`] read as a typed value ([`from_value`]).
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

#[cfg(test)]
mod tests;
