//! Call arguments as Java text: `String.valueOf` of the Java object a JSON argument becomes.
//!
//! Dubbo reads arguments as text in two places: `ConsistentHashLoadBalance` hashes
//! `String.valueOf(args[i])` over `hash.arguments`, and condition rules match
//! `arguments[i]` against it. The Java object is what the provider-side type makes of the
//! value, so the same JSON has different texts: `5` passed as a `double` is `5.0`, `["a","b"]`
//! passed as a `java.util.List` is `[a, b]`. [`write_java_text`] renders a JSON value for a
//! declared Java type (`Invocation::parameter_types[i]`; `None` = untyped) the way Java would,
//! for the object Switchman's Hessian mapping sends for that type:
//!
//! | JSON | declared type | text |
//! |---|---|---|
//! | string | any but the number types below | as is (`vip`) |
//! | `null` | any | `null` |
//! | `true` / `false` | any | `true` / `false` |
//! | number | `double`, `float` (and boxes) | `Double.toString` / `Float.toString`: `5.0`, `0.1`, `1.0E10`, `1.0E-4` |
//! | whole number (`5`, `5.0`) | `byte` `short` `int` `long` (and boxes), `BigInteger` | decimal: `5` |
//! | number, or decimal string | `java.math.BigDecimal` | `BigDecimal.toString`: `1.50`, `1E+10`, `1E-7` |
//! | integer | none, `Object` | `Integer`/`Long`: `42` |
//! | other number | none, `Object` | `Double`: `1.5`, `1.0E10` |
//! | array | none, `List`, `Collection`, ... | `[a, b]`, elements rendered by the generic argument (`List<Double>`) or untyped |
//! | array | `Set`, `HashSet` | `[a, b]` in `HashSet` order, duplicates dropped |
//! | object | none, `Map`, `HashMap` | `{k1=v1, k2=v2}` in `HashMap` order |
//! | object | `LinkedHashMap`; `TreeMap`, `SortedMap` | in the JSON object's order; sorted by key |
//!
//! `HashMap` order is Java's exactly for keys whose `hashCode` is known here (strings,
//! numbers, booleans, and lists/sets/maps of them): a table of 16 buckets growing at 0.75 load,
//! bucket `(h ^ h >>> 16) & (n - 1)`, insertion order within a bucket, a ninth key in one
//! bucket growing a table smaller than 64. The JSON object's own order is the insertion order
//! (the order Switchman's Hessian writer sends the entries in: serde_json's, sorted by name
//! unless its `preserve_order` feature is on). Keys of a `Map<Integer, V>` (or another number
//! or boolean key type) are parsed from the member names, as the Hessian mapping does.
//!
//! # Deliberate deviations
//!
//! - **Java arrays** (`java.lang.String[]`, `int[]`, `[Ljava.lang.String;`): Java's
//!   `String.valueOf(array)` is `[Ljava.lang.String;@1b6d3586`, an identity hash that differs
//!   from JVM to JVM; here an array renders like a `List` (`[a, b]`).
//! - **POJOs** (any other class; `java.util.Date`): `Object.toString` is `Class@hash` unless
//!   the class overrides it, which cannot be known here; the value renders as compact JSON
//!   (`{"id":1}`), a string (an enum constant) as is, a number (a `Date`'s milliseconds) in
//!   decimal.
//! - A `HashMap`/`HashSet` whose keys include one without a known `hashCode` (a POJO, an array,
//!   a `BigDecimal`, a `BigInteger` past 128 bits) renders in the JSON order; so do other map
//!   and set classes (`Hashtable`, `ConcurrentHashMap`, `EnumSet`). A `HashMap` bucket holding
//!   more than 8 keys in a table of at least 64 buckets (Java makes it a red-black tree, of
//!   colliding keys only) keeps insertion order within that bucket. A `TreeMap`/`TreeSet`
//!   whose keys do not compare (mixed classes) renders in the JSON order.
//! - A value the declared type cannot hold (a string for a `double`, `5.5` for an `int`)
//!   renders untyped; Java would fail the call instead.
//! - Floating-point digits are the shortest that read back (JDK 19+); see
//!   [`write_java_double`] for older JDKs.
//!
//! # Bounds
//!
//! Arguments come from callers and rules from registries, so rendering is bounded: collections
//! nested deeper than [`MAX_DEPTH`] render as `...`, and a text longer than [`MAX_TEXT`] bytes is
//! cut there (at a character boundary) and ends with `...`. A string argument itself is never
//! cut. Nothing here panics.

use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use serde_json::{Map, Number, Value};

mod number;
mod order;
#[cfg(test)]
mod tests;
mod types;

use number::{Decimal, StackBuf, parse_integer};
pub use number::{write_java_double, write_java_float};
use order::{
    Arranged, big_integer_hash, double_hash, float_hash, hash_order, insertion_order, long_hash,
    sorted_order, string_hash, utf16_cmp,
};
use types::{JType, Order};

/// Collections nested deeper than this render as [`ELLIPSIS`].
pub const MAX_DEPTH: usize = 32;
/// The most bytes of text one argument renders to (a string argument itself is never cut);
/// past it the text ends with [`ELLIPSIS`].
pub const MAX_TEXT: usize = 64 * 1024;
/// What stands for a cut text or a too-deep collection.
pub const ELLIPSIS: &str = "...";

/// Writes `value` as Java's `String.valueOf` would for the object the declared Java type
/// `java_type` makes of it (`None`: untyped). See the [module docs](self) for the rules.
///
/// Strings, numbers, lists, POJOs and maps of up to 12 string keys are written without
/// allocating; sets and larger maps allocate their ordering.
/// Errors only when `out` does.
pub fn write_java_text(
    out: &mut dyn fmt::Write,
    value: &Value,
    java_type: Option<&str>,
) -> fmt::Result {
    let obj = resolve(value, JType::of(java_type));
    if let Obj::Str(s) = obj {
        return out.write_str(s);
    }
    render_bounded(out, &obj)
}

/// [`write_java_text`] into a new `String`.
pub fn java_text(value: &Value, java_type: Option<&str>) -> String {
    let mut s = String::new();
    let _ = write_java_text(&mut s, value, java_type);
    s
}

/// Calls `f` with [`java_text`] of `value`: a string is passed as is, other texts are formatted
/// into a 128-byte stack buffer, so strings and numbers never allocate; a longer text is
/// formatted again into a `String`.
pub fn with_java_text<R>(value: &Value, java_type: Option<&str>, f: impl FnOnce(&str) -> R) -> R {
    let obj = resolve(value, JType::of(java_type));
    match obj {
        Obj::Str(s) => return f(s),
        Obj::Null => return f("null"),
        Obj::Bool(b) => return f(if b { "true" } else { "false" }),
        _ => {}
    }
    let mut buf = StackBuf::<128>::new();
    if render_bounded(&mut buf, &obj).is_ok() {
        return f(buf.as_str());
    }
    let mut s = String::new();
    let _ = render_bounded(&mut s, &obj);
    f(&s)
}

fn render_bounded(out: &mut dyn fmt::Write, obj: &Obj<'_>) -> fmt::Result {
    let mut b = Bounded {
        inner: out,
        left: MAX_TEXT,
        cut: false,
    };
    match render(&mut b, obj, 0) {
        Err(_) if b.cut => Ok(()),
        r => r,
    }
}

/// A writer that stops after [`MAX_TEXT`] bytes: it writes what fits (to a character
/// boundary), then [`ELLIPSIS`], then fails every write so rendering stops.
struct Bounded<'w> {
    inner: &'w mut dyn fmt::Write,
    left: usize,
    cut: bool,
}

impl fmt::Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.cut {
            return Err(fmt::Error);
        }
        if s.len() <= self.left {
            self.left -= s.len();
            return self.inner.write_str(s);
        }
        let mut end = self.left;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.inner.write_str(&s[..end])?;
        self.inner.write_str(ELLIPSIS)?;
        self.cut = true;
        self.left = 0;
        Err(fmt::Error)
    }
}

/// The Java object a JSON value becomes for a declared type.
#[derive(Debug, Clone, Copy)]
enum Obj<'a> {
    Null,
    Bool(bool),
    /// `Integer`, `Short`, `Byte`.
    Int(i64),
    Long(i64),
    Double(f64),
    Float(f32),
    /// `BigInteger` of a JSON number.
    BigInt(i128),
    /// `BigInteger` of a whole JSON number past 128 bits.
    BigIntF(f64),
    /// `BigInteger` of a string: sign, digits without leading zeros.
    BigIntText(bool, &'a str),
    /// `BigDecimal` of a JSON number (of its text as serde_json prints it).
    DecNum(&'a Number),
    /// `BigDecimal` of a string.
    Dec(Decimal<'a>),
    Str(&'a str),
    /// A collection: items, order, a set?, element type.
    Seq(&'a [Value], Order, bool, JType<'a>),
    /// A map: members, order, key and value types.
    Map(&'a Map<String, Value>, Order, JType<'a>, JType<'a>),
    /// A Java array: items, element type.
    Array(&'a [Value], JType<'a>),
    /// A POJO: rendered as compact JSON.
    Json(&'a Value),
}

/// Classes `{"class": C, "value": v}` names as the typed value `v` where no type is declared
/// (as the Hessian mapping reads them).
const VALUE_CLASSES: [&str; 5] = [
    "java.util.Date",
    "java.math.BigDecimal",
    "java.math.BigInteger",
    "java.util.UUID",
    "java.lang.Long",
];

/// A whole JSON number (a float with no fraction counts).
fn integral(n: &Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => Some(f as i128),
        _ => None,
    }
}

fn resolve<'a>(v: &'a Value, t: JType<'a>) -> Obj<'a> {
    let typed = match (t, v) {
        (_, Value::Null) => Some(Obj::Null),
        (JType::Str, Value::String(s)) => Some(Obj::Str(s)),
        (JType::Bool, Value::Bool(b)) => Some(Obj::Bool(*b)),
        (JType::Int(min, max), Value::Number(n)) => integral(n)
            .filter(|i| (i128::from(min)..=i128::from(max)).contains(i))
            .map(|i| Obj::Int(i as i64)),
        (JType::Long, Value::Number(n)) => integral(n)
            .and_then(|i| i64::try_from(i).ok())
            .map(Obj::Long),
        (JType::BigInteger, Value::Number(n)) => match (integral(n), n.as_f64()) {
            (Some(i), _) => Some(Obj::BigInt(i)),
            (None, Some(f)) if f.is_finite() && f.fract() == 0.0 => Some(Obj::BigIntF(f)),
            _ => None,
        },
        (JType::BigInteger, Value::String(s)) => {
            parse_integer(s.trim()).map(|(neg, digits)| Obj::BigIntText(neg, digits))
        }
        (JType::Double, Value::Number(n)) => n.as_f64().map(Obj::Double),
        (JType::Float, Value::Number(n)) => n.as_f64().map(|f| Obj::Float(f as f32)),
        (JType::BigDecimal, Value::Number(n)) => Some(Obj::DecNum(n)),
        (JType::BigDecimal, Value::String(s)) => Decimal::parse(s.trim()).map(Obj::Dec),
        (JType::Collection(order, set, elem), Value::Array(items)) => {
            Some(Obj::Seq(items, order, set, JType::of(elem)))
        }
        (JType::Map(order, k, val), Value::Object(m)) => {
            Some(Obj::Map(m, order, JType::of(k), JType::of(val)))
        }
        (JType::Array(elem), Value::Array(items)) => Some(Obj::Array(items, JType::parse(elem))),
        (JType::Class, Value::Object(m)) if !matches!(m.get("class"), Some(Value::String(_))) => {
            Some(Obj::Json(v))
        }
        // An enum constant's name, a UUID's text.
        (JType::Class, Value::String(s)) => Some(Obj::Str(s)),
        _ => None,
    };
    typed.unwrap_or_else(|| untyped(v))
}

/// What the JSON is without a declared type (Hessian's untyped mapping).
fn untyped(v: &Value) -> Obj<'_> {
    match v {
        Value::Null => Obj::Null,
        Value::Bool(b) => Obj::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) if i32::try_from(i).is_ok() => Obj::Int(i),
            Some(i) => Obj::Long(i),
            None => Obj::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Obj::Str(s),
        Value::Array(items) => Obj::Seq(items, Order::Insertion, false, JType::Any),
        Value::Object(m) => match m.get("class") {
            Some(Value::String(class)) => match m.get("value") {
                Some(inner)
                    if m.len() == 2
                        && VALUE_CLASSES.contains(&class.as_str())
                        && !inner.is_object()
                        && !inner.is_array() =>
                {
                    resolve(inner, JType::parse(class))
                }
                _ => Obj::Json(v),
            },
            _ => Obj::Map(m, Order::Hash, JType::Any, JType::Any),
        },
    }
}

/// A map key (a JSON member name) as the declared key type reads it: numbers and booleans
/// parsed from the name; `None` for a string key.
fn key_value(k: &str, t: JType<'_>) -> Option<Value> {
    match t {
        JType::Int(..)
        | JType::Long
        | JType::BigInteger
        | JType::Double
        | JType::Float
        | JType::BigDecimal => serde_json::from_str::<Number>(k.trim())
            .ok()
            .map(Value::Number),
        JType::Bool => match k {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => None,
    }
}

fn render(out: &mut Bounded<'_>, obj: &Obj<'_>, depth: usize) -> fmt::Result {
    match *obj {
        Obj::Null => out.write_str("null"),
        Obj::Bool(b) => out.write_str(if b { "true" } else { "false" }),
        Obj::Int(i) | Obj::Long(i) => write!(out, "{i}"),
        Obj::Double(d) => write_java_double(out, d),
        Obj::Float(f) => write_java_float(out, f),
        Obj::BigInt(i) => write!(out, "{i}"),
        Obj::BigIntF(f) => write!(out, "{f:.0}"),
        Obj::BigIntText(negative, digits) => {
            if negative {
                out.write_str("-")?;
            }
            out.write_str(digits)
        }
        Obj::DecNum(n) => {
            let mut b = StackBuf::<64>::new();
            match write!(b, "{n}")
                .ok()
                .and_then(|_| Decimal::parse(b.as_str()))
            {
                Some(d) => d.write(out),
                None => write!(out, "{n}"),
            }
        }
        Obj::Dec(d) => d.write(out),
        Obj::Str(s) => out.write_str(s),
        Obj::Seq(items, order, set, elem) => {
            if depth >= MAX_DEPTH {
                return out.write_str(ELLIPSIS);
            }
            if order == Order::Insertion && !set {
                return render_list(out, items, elem, depth);
            }
            let objs: Vec<Obj<'_>> = items.iter().map(|v| resolve(v, elem)).collect();
            let arranged = arrange(&objs, order, depth);
            out.write_str("[")?;
            for (n, &(k, _)) in arranged.pairs.iter().enumerate() {
                if n > 0 {
                    out.write_str(", ")?;
                }
                render(out, &objs[k], depth + 1)?;
            }
            out.write_str("]")
        }
        Obj::Array(items, elem) => {
            if depth >= MAX_DEPTH {
                return out.write_str(ELLIPSIS);
            }
            render_list(out, items, elem, depth)
        }
        Obj::Map(m, order, kt, vt) => {
            if depth >= MAX_DEPTH {
                return out.write_str(ELLIPSIS);
            }
            if !parses_keys(kt) {
                // String keys, all distinct: nothing to merge, and the common orders need no
                // allocation.
                if order == Order::Insertion {
                    return render_entries(out, m.iter(), vt, depth);
                }
                if order == Order::Hash
                    && let Some((slots, n)) = small_hash_order(m)
                {
                    return render_entries(out, slots[..n].iter().filter_map(|s| s.1), vt, depth);
                }
            }
            let owned: Vec<Option<Value>> = m.keys().map(|k| key_value(k, kt)).collect();
            let keys: Vec<Obj<'_>> = m
                .keys()
                .zip(&owned)
                .map(|(k, o)| o.as_ref().map_or(Obj::Str(k), |v| resolve(v, kt)))
                .collect();
            let values: Vec<Obj<'_>> = m.values().map(|v| resolve(v, vt)).collect();
            let pairs = arrange(&keys, order, depth).pairs;
            out.write_str("{")?;
            for (n, &(k, v)) in pairs.iter().enumerate() {
                if n > 0 {
                    out.write_str(", ")?;
                }
                render(out, &keys[k], depth + 1)?;
                out.write_str("=")?;
                render(out, &values[v], depth + 1)?;
            }
            out.write_str("}")
        }
        Obj::Json(v) => write_json(out, v, depth),
    }
}

/// Whether a map's keys are parsed from the member names (numbers, booleans) rather than
/// taken as strings.
fn parses_keys(t: JType<'_>) -> bool {
    matches!(
        t,
        JType::Int(..)
            | JType::Long
            | JType::BigInteger
            | JType::Double
            | JType::Float
            | JType::BigDecimal
            | JType::Bool
    )
}

/// Maps of at most this many string keys are ordered on the stack.
const SMALL_MAP: usize = 12;

/// A member of a small map, with its `HashMap` bucket.
type Slot<'m> = (u8, Option<(&'m String, &'m Value)>);

/// `HashMap` order of a map of at most [`SMALL_MAP`] string keys, without allocating: 16
/// buckets (12 keys do not grow the table), by bucket then insertion. `None` when the map is
/// larger or 9 keys share a bucket (Java grows the table then).
fn small_hash_order(m: &Map<String, Value>) -> Option<([Slot<'_>; SMALL_MAP], usize)> {
    if m.len() > SMALL_MAP {
        return None;
    }
    let mut slots: [Slot<'_>; SMALL_MAP] = [(0, None); SMALL_MAP];
    let mut counts = [0u8; 16];
    for (i, (k, v)) in m.iter().enumerate() {
        let h = string_hash(k);
        let bucket = ((h ^ ((h as u32) >> 16) as i32) & 15) as u8;
        counts[usize::from(bucket)] += 1;
        if counts[usize::from(bucket)] > 8 {
            return None;
        }
        slots[i] = (bucket, Some((k, v)));
    }
    let n = m.len();
    // Insertion sort: stable, in place.
    for i in 1..n {
        let mut j = i;
        while j > 0 && slots[j - 1].0 > slots[j].0 {
            slots.swap(j - 1, j);
            j -= 1;
        }
    }
    Some((slots, n))
}

/// `{k1=v1, k2=v2}` of string keys in the given order.
fn render_entries<'m>(
    out: &mut Bounded<'_>,
    entries: impl Iterator<Item = (&'m String, &'m Value)>,
    vt: JType<'_>,
    depth: usize,
) -> fmt::Result {
    out.write_str("{")?;
    for (n, (k, v)) in entries.enumerate() {
        if n > 0 {
            out.write_str(", ")?;
        }
        out.write_str(k)?;
        out.write_str("=")?;
        render(out, &resolve(v, vt), depth + 1)?;
    }
    out.write_str("}")
}

fn render_list(
    out: &mut Bounded<'_>,
    items: &[Value],
    elem: JType<'_>,
    depth: usize,
) -> fmt::Result {
    out.write_str("[")?;
    for (n, v) in items.iter().enumerate() {
        if n > 0 {
            out.write_str(", ")?;
        }
        render(out, &resolve(v, elem), depth + 1)?;
    }
    out.write_str("]")
}

/// The iteration order of a set's elements or a map's keys (`keys` at `depth + 1`).
fn arrange(keys: &[Obj<'_>], order: Order, depth: usize) -> Arranged {
    let eq = |a: usize, b: usize| java_equals(&keys[a], &keys[b], depth + 1);
    if order == Order::Sorted
        && let Some(a) = sorted_order(keys.len(), |a, b| compare(&keys[a], &keys[b]))
    {
        return a;
    }
    let hashes: Vec<Option<i32>> = keys.iter().map(|k| hash_code(k, depth + 1)).collect();
    if order == Order::Hash && hashes.iter().all(Option::is_some) {
        let hashes: Vec<i32> = hashes.into_iter().flatten().collect();
        return hash_order(&hashes, eq);
    }
    insertion_order(&hashes, eq)
}

/// Java's `hashCode` of the object, when it is known here.
fn hash_code(obj: &Obj<'_>, depth: usize) -> Option<i32> {
    Some(match *obj {
        Obj::Null => 0,
        Obj::Bool(b) => {
            if b {
                1231
            } else {
                1237
            }
        }
        Obj::Int(i) => i as i32,
        Obj::Long(i) => long_hash(i),
        Obj::Double(d) => double_hash(d),
        Obj::Float(f) => float_hash(f),
        Obj::BigInt(i) => big_integer_hash(i),
        Obj::Str(s) => string_hash(s),
        Obj::Seq(items, _, set, elem) => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let objs: Vec<Obj<'_>> = items.iter().map(|v| resolve(v, elem)).collect();
            if set {
                // The sum over distinct elements.
                let hashes: Vec<Option<i32>> =
                    objs.iter().map(|o| hash_code(o, depth + 1)).collect();
                let distinct =
                    insertion_order(&hashes, |a, b| java_equals(&objs[a], &objs[b], depth + 1));
                let mut h = 0i32;
                for (k, _) in distinct.pairs {
                    h = h.wrapping_add(hashes[k]?);
                }
                h
            } else {
                let mut h = 1i32;
                for o in &objs {
                    h = h.wrapping_mul(31).wrapping_add(hash_code(o, depth + 1)?);
                }
                h
            }
        }
        Obj::Map(m, _, kt, vt) => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let owned: Vec<Option<Value>> = m.keys().map(|k| key_value(k, kt)).collect();
            let keys: Vec<Obj<'_>> = m
                .keys()
                .zip(&owned)
                .map(|(k, o)| o.as_ref().map_or(Obj::Str(k), |v| resolve(v, kt)))
                .collect();
            let values: Vec<Obj<'_>> = m.values().map(|v| resolve(v, vt)).collect();
            let hashes: Vec<Option<i32>> = keys.iter().map(|o| hash_code(o, depth + 1)).collect();
            let distinct =
                insertion_order(&hashes, |a, b| java_equals(&keys[a], &keys[b], depth + 1));
            let mut h = 0i32;
            for (k, v) in distinct.pairs {
                h = h.wrapping_add(hashes[k]? ^ hash_code(&values[v], depth + 1)?);
            }
            h
        }
        Obj::BigIntF(_)
        | Obj::BigIntText(..)
        | Obj::DecNum(_)
        | Obj::Dec(_)
        | Obj::Array(..)
        | Obj::Json(_) => return None,
    })
}

/// The Java class an object compares `equals` within.
fn class_tag(obj: &Obj<'_>) -> u8 {
    match obj {
        Obj::Null => 0,
        Obj::Bool(_) => 1,
        Obj::Int(_) => 2,
        Obj::Long(_) => 3,
        Obj::Double(_) => 4,
        Obj::Float(_) => 5,
        Obj::BigInt(_) | Obj::BigIntF(_) | Obj::BigIntText(..) => 6,
        Obj::DecNum(_) | Obj::Dec(_) => 7,
        Obj::Str(_) => 8,
        Obj::Seq(_, _, false, _) => 9,
        Obj::Seq(_, _, true, _) => 10,
        Obj::Map(..) => 11,
        Obj::Array(..) => 12,
        Obj::Json(_) => 13,
    }
}

/// Java's `equals`, for objects with equal hashes: the same class and the same text.
fn java_equals(a: &Obj<'_>, b: &Obj<'_>, depth: usize) -> bool {
    if class_tag(a) != class_tag(b) {
        return false;
    }
    if let (Obj::Str(x), Obj::Str(y)) = (a, b) {
        return x == y;
    }
    let text = |o: &Obj<'_>| {
        let mut s = String::new();
        let mut b = Bounded {
            inner: &mut s,
            left: MAX_TEXT,
            cut: false,
        };
        let _ = render(&mut b, o, depth);
        s
    };
    text(a) == text(b)
}

/// Natural order (`compareTo`) of two keys, `None` when Java would not compare them.
fn compare(a: &Obj<'_>, b: &Obj<'_>) -> Option<Ordering> {
    Some(match (a, b) {
        (Obj::Str(x), Obj::Str(y)) => utf16_cmp(x, y),
        (Obj::Int(x), Obj::Int(y)) | (Obj::Long(x), Obj::Long(y)) => x.cmp(y),
        (Obj::Double(x), Obj::Double(y)) => x.total_cmp(y),
        (Obj::Float(x), Obj::Float(y)) => x.total_cmp(y),
        (Obj::Bool(x), Obj::Bool(y)) => x.cmp(y),
        (Obj::BigInt(x), Obj::BigInt(y)) => x.cmp(y),
        _ => return None,
    })
}

/// Compact JSON (as serde_json prints it), nested arrays and objects past [`MAX_DEPTH`] as
/// [`ELLIPSIS`].
fn write_json(out: &mut Bounded<'_>, v: &Value, depth: usize) -> fmt::Result {
    match v {
        Value::Null => out.write_str("null"),
        Value::Bool(b) => out.write_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write!(out, "{n}"),
        Value::String(s) => write_json_str(out, s),
        Value::Array(items) => {
            if depth >= MAX_DEPTH {
                return out.write_str(ELLIPSIS);
            }
            out.write_str("[")?;
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.write_str(",")?;
                }
                write_json(out, item, depth + 1)?;
            }
            out.write_str("]")
        }
        Value::Object(m) => {
            if depth >= MAX_DEPTH {
                return out.write_str(ELLIPSIS);
            }
            out.write_str("{")?;
            for (n, (k, item)) in m.iter().enumerate() {
                if n > 0 {
                    out.write_str(",")?;
                }
                write_json_str(out, k)?;
                out.write_str(":")?;
                write_json(out, item, depth + 1)?;
            }
            out.write_str("}")
        }
    }
}

fn write_json_str(out: &mut Bounded<'_>, s: &str) -> fmt::Result {
    out.write_str("\"")?;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.write_str(&s[start..i])?;
        if esc.is_empty() {
            write!(out, "\\u{:04x}", b)?;
        } else {
            out.write_str(esc)?;
        }
        start = i + 1;
    }
    out.write_str(&s[start..])?;
    out.write_str("\"")
}
