//! JSON ↔ [`Value`], for generic invocations that take JSON arguments and give JSON results.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde_json::Value as Json;

use crate::bignum;
use crate::value::{List, Map, Object, Value};

/// Why a JSON value cannot be an argument of the Java type asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingError {
    /// Path segments from the innermost out (`[2]`, `.name`).
    path: Vec<String>,
    message: String,
}

impl MappingError {
    fn new(message: impl Into<String>) -> Self {
        MappingError {
            path: Vec::new(),
            message: message.into(),
        }
    }

    fn at(mut self, segment: String) -> Self {
        self.path.push(segment);
        self
    }

    /// Where in the JSON value the error is, as `$`, `$[1].name`, ...
    pub fn path(&self) -> String {
        let mut p = String::from("$");
        for s in self.path.iter().rev() {
            p.push_str(s);
        }
        p
    }

    /// What is wrong, without the path.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path(), self.message)
        }
    }
}

impl std::error::Error for MappingError {}

/// A Java type as the mapping understands it.
#[derive(Debug, Clone, PartialEq)]
enum JType {
    /// `java.lang.Object`, unknown `java.*` types, no type: the JSON decides.
    Any(Option<String>),
    Bool(bool),
    /// Integral types written as a Hessian int: name, primitive, range.
    Int(&'static str, bool, i64, i64),
    Long(bool),
    /// `double` / `float` (float: true), primitive.
    Double(bool, bool),
    Char(bool),
    Str,
    Date,
    BigDecimal,
    BigInteger,
    /// Classes hessian-lite writes with its StringValueSerializer (`java.util.UUID`).
    StringValue(String),
    Bytes,
    Chars,
    /// An array: element type, Hessian array type name.
    Array(Box<JType>, String),
    /// A collection (written like an `ArrayList`), its element type.
    Collection(String, Box<JType>),
    /// A map (written like a `HashMap`), key and value types.
    Map(String, Box<JType>, Box<JType>),
    /// A class outside `java.*` / `javax.*`: a bean, or an enum when given a string.
    Class(String),
}

impl JType {
    fn parse(s: &str) -> Result<JType, MappingError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(MappingError::new("empty Java type name"));
        }
        if s.starts_with('[') {
            return Self::parse_descriptor(s);
        }
        if let Some(elem) = s.strip_suffix("[]").or_else(|| s.strip_suffix("...")) {
            return Ok(Self::array_of(Self::parse(elem)?));
        }
        let (base, args) = match s.find('<') {
            Some(i) if s.ends_with('>') => (s[..i].trim(), split_args(&s[i + 1..s.len() - 1])?),
            Some(_) => return Err(MappingError::new(format!("bad Java type name {s:?}"))),
            None => (s, Vec::new()),
        };
        let arg = |i: usize| -> Result<JType, MappingError> {
            match args.get(i) {
                Some(a) => Self::parse(a),
                None => Ok(JType::Any(None)),
            }
        };
        Ok(match base {
            "java.lang.Object" | "Object" => JType::Any(None),
            "boolean" => JType::Bool(true),
            "java.lang.Boolean" | "Boolean" => JType::Bool(false),
            "int" => JType::Int("int", true, i32::MIN.into(), i32::MAX.into()),
            "java.lang.Integer" | "Integer" => {
                JType::Int("java.lang.Integer", false, i32::MIN.into(), i32::MAX.into())
            }
            "short" => JType::Int("short", true, i16::MIN.into(), i16::MAX.into()),
            "java.lang.Short" | "Short" => {
                JType::Int("java.lang.Short", false, i16::MIN.into(), i16::MAX.into())
            }
            "byte" => JType::Int("byte", true, i8::MIN.into(), i8::MAX.into()),
            "java.lang.Byte" | "Byte" => {
                JType::Int("java.lang.Byte", false, i8::MIN.into(), i8::MAX.into())
            }
            "long" => JType::Long(true),
            "java.lang.Long" | "Long" => JType::Long(false),
            "double" => JType::Double(false, true),
            "java.lang.Double" | "Double" => JType::Double(false, false),
            "float" => JType::Double(true, true),
            "java.lang.Float" | "Float" => JType::Double(true, false),
            "char" => JType::Char(true),
            "java.lang.Character" | "Character" => JType::Char(false),
            "java.lang.String" | "String" | "java.lang.CharSequence" => JType::Str,
            "java.util.Date" => JType::Date,
            "java.math.BigDecimal" => JType::BigDecimal,
            "java.math.BigInteger" => JType::BigInteger,
            "java.util.UUID" => JType::StringValue(base.to_owned()),
            "java.lang.Iterable" | "java.util.Hashtable" | "java.util.Properties" => {
                if base == "java.lang.Iterable" {
                    JType::Collection(base.to_owned(), Box::new(arg(0)?))
                } else {
                    JType::Map(base.to_owned(), Box::new(arg(0)?), Box::new(arg(1)?))
                }
            }
            _ if is_java(base) => {
                let simple = base.rsplit('.').next().unwrap_or(base);
                let util = base.starts_with("java.util.");
                if util
                    && [
                        "List",
                        "Set",
                        "Collection",
                        "Queue",
                        "Deque",
                        "Vector",
                        "Stack",
                    ]
                    .iter()
                    .any(|k| simple.ends_with(k))
                {
                    JType::Collection(base.to_owned(), Box::new(arg(0)?))
                } else if util && simple.ends_with("Map") {
                    JType::Map(base.to_owned(), Box::new(arg(0)?), Box::new(arg(1)?))
                } else {
                    JType::Any(Some(base.to_owned()))
                }
            }
            _ => JType::Class(base.to_owned()),
        })
    }

    /// `[I`, `[Ljava.lang.String;`, `[[J`: the JVM's names of array classes.
    fn parse_descriptor(s: &str) -> Result<JType, MappingError> {
        let dims = s.bytes().take_while(|&b| b == b'[').count();
        let rest = &s[dims..];
        let elem = match rest {
            "Z" => "boolean",
            "B" => "byte",
            "C" => "char",
            "S" => "short",
            "I" => "int",
            "J" => "long",
            "F" => "float",
            "D" => "double",
            _ => match rest.strip_prefix('L').and_then(|r| r.strip_suffix(';')) {
                Some(name) if !name.is_empty() => name,
                _ => return Err(MappingError::new(format!("bad Java array type {s:?}"))),
            },
        };
        let mut t = Self::parse(elem)?;
        for _ in 0..dims {
            t = Self::array_of(t);
        }
        Ok(t)
    }

    fn array_of(elem: JType) -> JType {
        match elem {
            JType::Int("byte", true, ..) => JType::Bytes,
            JType::Char(true) => JType::Chars,
            e => {
                let name = format!("[{}", e.component_name());
                JType::Array(Box::new(e), name)
            }
        }
    }

    /// The name hessian-lite gives this type as an array component (`ArraySerializer`,
    /// `BasicSerializer`): `int`, `string`, `object`, `date`, `[int`, else the class name.
    fn component_name(&self) -> String {
        match self {
            JType::Any(None) => "object".into(),
            JType::Any(Some(n))
            | JType::StringValue(n)
            | JType::Collection(n, _)
            | JType::Map(n, ..)
            | JType::Class(n) => n.clone(),
            JType::Bool(true) => "boolean".into(),
            JType::Bool(false) => "java.lang.Boolean".into(),
            JType::Int(name, ..) => (*name).into(),
            JType::Long(true) => "long".into(),
            JType::Long(false) => "java.lang.Long".into(),
            JType::Double(false, true) => "double".into(),
            JType::Double(false, false) => "java.lang.Double".into(),
            JType::Double(true, true) => "float".into(),
            JType::Double(true, false) => "java.lang.Float".into(),
            JType::Char(true) => "char".into(),
            JType::Char(false) => "java.lang.Character".into(),
            JType::Str => "string".into(),
            JType::Date => "date".into(),
            JType::BigDecimal => "java.math.BigDecimal".into(),
            JType::BigInteger => "java.math.BigInteger".into(),
            JType::Bytes => "[byte".into(),
            JType::Chars => "[char".into(),
            JType::Array(_, name) => name.clone(),
        }
    }

    fn name(&self) -> String {
        match self {
            JType::Any(None) => "java.lang.Object".into(),
            JType::Str => "java.lang.String".into(),
            JType::Date => "java.util.Date".into(),
            JType::Bytes => "byte[]".into(),
            JType::Chars => "char[]".into(),
            JType::Array(e, _) => format!("{}[]", e.name()),
            other => other.component_name(),
        }
    }

    fn is_primitive(&self) -> bool {
        matches!(
            self,
            JType::Bool(true)
                | JType::Int(_, true, ..)
                | JType::Long(true)
                | JType::Double(_, true)
                | JType::Char(true)
        )
    }
}

fn is_java(name: &str) -> bool {
    name.starts_with("java.") || name.starts_with("javax.")
}

/// Splits generic arguments at top-level commas.
fn split_args(s: &str) -> Result<Vec<String>, MappingError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_owned());
                continue;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(MappingError::new(format!("bad generic arguments <{s}>")));
        }
        cur.push(c);
    }
    out.push(cur.trim().to_owned());
    // `?`, `? extends X`: the bound, or anything.
    Ok(out
        .into_iter()
        .map(|a| match a.strip_prefix("? extends ") {
            Some(b) => b.trim().to_owned(),
            None if a.starts_with('?') || a.len() == 1 => "java.lang.Object".to_owned(),
            None => a,
        })
        .collect())
}

/// Short JSON text of `json` for messages.
fn show(json: &Json) -> String {
    let s = json.to_string();
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn mismatch(t: &JType, want: &str, json: &Json) -> MappingError {
    MappingError::new(format!(
        "{} takes {want}, not {} {}",
        t.name(),
        kind(json),
        show(json)
    ))
}

/// `json` as an argument of a Dubbo generic call (`$invoke`, `GenericService`): objects
/// become untyped maps with string keys (a `"class"` member stays a member, as Dubbo's
/// `PojoUtils.realize` expects), arrays untyped lists, scalars as [`from_json`] maps them
/// untyped. The provider converts the maps by its real parameter types.
pub fn generic_from_json(json: &Json) -> Result<Value, MappingError> {
    Ok(match json {
        Json::Object(m) => {
            let mut entries = Vec::with_capacity(m.len());
            for (k, v) in m {
                entries.push((Value::String(k.clone()), generic_from_json(v)?));
            }
            Value::Map(Map {
                class: None,
                entries,
            })
        }
        Json::Array(a) => Value::List(List {
            class: None,
            items: a.iter().map(generic_from_json).collect::<Result<_, _>>()?,
        }),
        scalar => from_json(scalar, None)?,
    })
}

/// `json` as an argument of Java type `java_type` (a Java type name as in a method signature:
/// "int", "long", "double", "boolean", "java.lang.String", "java.lang.Integer", "java.util.List",
/// "java.util.Map", "java.util.Date", "java.math.BigDecimal", "int[]", "java.lang.String[]",
/// "com.foo.User", ...; None = untyped/Object).
///
/// JVM array names (`[I`, `[Ljava.lang.String;`) and generic arguments
/// (`java.util.List<java.lang.Long>`, `java.util.Map<java.lang.Integer, java.lang.String>`) are
/// understood too: the elements, keys and values are converted with their types.
pub fn from_json(json: &Json, java_type: Option<&str>) -> Result<Value, MappingError> {
    let t = match java_type {
        Some(name) => JType::parse(name)?,
        None => JType::Any(None),
    };
    convert(json, &t)
}

fn convert(json: &Json, t: &JType) -> Result<Value, MappingError> {
    if json.is_null() {
        if t.is_primitive() {
            return Err(MappingError::new(format!(
                "{} is a primitive type: null is not a value of it",
                t.name()
            )));
        }
        return Ok(Value::Null);
    }
    match t {
        JType::Any(_) => untyped(json),
        JType::Bool(_) => match json {
            Json::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(mismatch(t, "a boolean", json)),
        },
        JType::Int(_, _, min, max) => {
            let i = integral(t, json)?;
            if i < i128::from(*min) || i > i128::from(*max) {
                return Err(MappingError::new(format!(
                    "{} is out of range for {} ({min}..={max})",
                    show(json),
                    t.name()
                )));
            }
            Ok(Value::Int(i as i32))
        }
        JType::Long(_) => {
            let i = integral(t, json)?;
            i64::try_from(i).map(Value::Long).map_err(|_| {
                MappingError::new(format!("{} is out of range for {}", show(json), t.name()))
            })
        }
        JType::Double(float, _) => match json {
            Json::Number(n) => {
                let d = n.as_f64().unwrap_or(f64::NAN);
                if *float {
                    // What Java writes for a float: Double.parseDouble(String.valueOf(f)).
                    let f = d as f32;
                    Ok(Value::Double(f.to_string().parse().unwrap_or(f64::from(f))))
                } else {
                    Ok(Value::Double(d))
                }
            }
            _ => Err(mismatch(t, "a number", json)),
        },
        JType::Char(_) => match json {
            Json::String(s) if s.encode_utf16().count() == 1 => Ok(Value::String(s.clone())),
            _ => Err(mismatch(t, "a string of one (UTF-16) character", json)),
        },
        JType::Str | JType::Chars => match json {
            Json::String(s) => Ok(Value::String(s.clone())),
            _ => Err(mismatch(t, "a string", json)),
        },
        JType::Date => match json {
            Json::Number(_) => Ok(Value::Date(i64::try_from(integral(t, json)?).map_err(
                |_| MappingError::new(format!("{} is out of range for a date", show(json))),
            )?)),
            _ => Err(mismatch(
                t,
                "milliseconds since the epoch (a whole number)",
                json,
            )),
        },
        JType::BigDecimal => {
            let text = match json {
                Json::Number(n) => n.to_string(),
                Json::String(s) => s.trim().to_owned(),
                _ => return Err(mismatch(t, "a number or a decimal string", json)),
            };
            match bignum::canonical_decimal(&text) {
                Some(s) => Ok(big_decimal(s)),
                None => Err(mismatch(t, "a decimal number", json)),
            }
        }
        JType::BigInteger => {
            let text = match json {
                Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                    (Some(i), _, _) => i.to_string(),
                    (_, Some(u), _) => u.to_string(),
                    (_, _, Some(f)) if f.is_finite() && f.fract() == 0.0 => format!("{f:.0}"),
                    _ => return Err(mismatch(t, "a whole number", json)),
                },
                Json::String(s) => s.trim().to_owned(),
                _ => return Err(mismatch(t, "a whole number or a string of digits", json)),
            };
            match bignum::parse_integer(&text) {
                Some((negative, magnitude)) => Ok(big_integer(negative, &magnitude)),
                None => Err(mismatch(t, "a whole number", json)),
            }
        }
        JType::StringValue(class) => match json {
            Json::String(s) => Ok(Value::object(
                class.clone(),
                vec![("value", Value::String(s.clone()))],
            )),
            _ => Err(mismatch(t, "a string", json)),
        },
        JType::Bytes => match json {
            Json::String(s) => STANDARD
                .decode(s.trim())
                .or_else(|_| STANDARD_NO_PAD.decode(s.trim()))
                .map(Value::Binary)
                .map_err(|_| mismatch(t, "base64 text or an array of bytes", json)),
            Json::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item.as_i64() {
                        Some(b @ -128..=255) => out.push(b as u8),
                        _ => {
                            return Err(MappingError::new(format!(
                                "byte[] takes numbers in -128..=255, not {}",
                                show(item)
                            ))
                            .at(format!("[{i}]")));
                        }
                    }
                }
                Ok(Value::Binary(out))
            }
            _ => Err(mismatch(t, "base64 text or an array of bytes", json)),
        },
        JType::Array(elem, name) => match json {
            Json::Array(items) => Ok(Value::List(List {
                class: Some(name.clone()),
                items: convert_items(items, elem)?,
            })),
            _ => Err(mismatch(t, "an array", json)),
        },
        JType::Collection(_, elem) => match json {
            Json::Array(items) => Ok(Value::List(List {
                class: None,
                items: convert_items(items, elem)?,
            })),
            _ => Err(mismatch(t, "an array", json)),
        },
        JType::Map(_, key, value) => match json {
            Json::Object(members) => {
                let mut entries = Vec::with_capacity(members.len());
                for (k, v) in members {
                    let seg = || format!(".{k}");
                    let key = convert_key(k, key).map_err(|e| e.at(seg()))?;
                    let value = convert(v, value).map_err(|e| e.at(seg()))?;
                    entries.push((key, value));
                }
                Ok(Value::Map(Map {
                    class: None,
                    entries,
                }))
            }
            _ => Err(mismatch(t, "an object", json)),
        },
        JType::Class(class) => match json {
            Json::Object(members) => match members.get("class") {
                Some(Json::String(_)) => untyped(json),
                _ => object_fields(class.clone(), members.iter()),
            },
            // An enum constant, as hessian-lite's EnumSerializer writes it.
            Json::String(s) => Ok(Value::object(
                class.clone(),
                vec![("name", Value::String(s.clone()))],
            )),
            _ => Err(mismatch(
                t,
                "an object (or a string, for an enum constant)",
                json,
            )),
        },
    }
}

fn convert_items(items: &[Json], elem: &JType) -> Result<Vec<Value>, MappingError> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| convert(v, elem).map_err(|e| e.at(format!("[{i}]"))))
        .collect()
}

/// A JSON member name as a map key of type `t`: numbers and booleans parsed from the text.
fn convert_key(k: &str, t: &JType) -> Result<Value, MappingError> {
    match t {
        JType::Int(..)
        | JType::Long(_)
        | JType::Double(..)
        | JType::Date
        | JType::BigDecimal
        | JType::BigInteger => {
            let n: Json = serde_json::from_str(k.trim())
                .ok()
                .filter(Json::is_number)
                .ok_or_else(|| {
                    MappingError::new(format!("map key {k:?} is not a number for {}", t.name()))
                })?;
            convert(&n, t)
        }
        JType::Bool(_) => match k {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(MappingError::new(format!(
                "map key {k:?} is not a boolean for {}",
                t.name()
            ))),
        },
        _ => convert(&Json::String(k.to_owned()), t),
    }
}

fn untyped(json: &Json) -> Result<Value, MappingError> {
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => match i32::try_from(i) {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Long(i),
            },
            (None, Some(f)) => Value::Double(f),
            (None, None) => Value::Double(f64::NAN),
        },
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::List(List {
            class: None,
            items: convert_items(items, &JType::Any(None))?,
        }),
        Json::Object(members) => match members.get("class") {
            // {"class": "java.util.Date", "value": ms} and the like: a typed value where the
            // type is not known from outside (an Object parameter, a bean's field).
            Some(Json::String(class))
                if members.len() == 2
                    && members.contains_key("value")
                    && VALUE_CLASSES.contains(&class.as_str()) =>
            {
                convert(&members["value"], &JType::parse(class)?)
                    .map_err(|e| e.at(".value".into()))?
            }
            Some(Json::String(class)) => object_fields(
                class.clone(),
                members.iter().filter(|(k, _)| k.as_str() != "class"),
            )?,
            _ => {
                let mut entries = Vec::with_capacity(members.len());
                for (k, v) in members {
                    let v = untyped(v).map_err(|e| e.at(format!(".{k}")))?;
                    entries.push((Value::String(k.clone()), v));
                }
                Value::Map(Map {
                    class: None,
                    entries,
                })
            }
        },
    })
}

/// Classes a JSON object `{"class": C, "value": v}` names as the typed value `v` (`from_json(v,
/// Some(C))`) where no Java type is given.
const VALUE_CLASSES: [&str; 5] = [
    "java.util.Date",
    "java.math.BigDecimal",
    "java.math.BigInteger",
    "java.util.UUID",
    "java.lang.Long",
];

fn object_fields<'j>(
    class: String,
    members: impl Iterator<Item = (&'j String, &'j Json)>,
) -> Result<Value, MappingError> {
    let mut fields = Vec::new();
    for (k, v) in members {
        let v = untyped(v).map_err(|e| e.at(format!(".{k}")))?;
        fields.push((k.clone(), v));
    }
    Ok(Value::Object(Object { class, fields }))
}

/// A whole JSON number (a float with no fraction counts), for an integral type.
fn integral(t: &JType, json: &Json) -> Result<i128, MappingError> {
    let Json::Number(n) = json else {
        return Err(mismatch(t, "a whole number", json));
    };
    if let Some(i) = n.as_i64() {
        return Ok(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Ok(u.into());
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => Ok(f as i128),
        _ => Err(mismatch(t, "a whole number", json)),
    }
}

/// `java.math.BigDecimal` as hessian-lite writes it (StringValueSerializer): an object of one
/// field `value`, its `toString()`.
fn big_decimal(text: String) -> Value {
    Value::object("java.math.BigDecimal", vec![("value", Value::String(text))])
}

/// `java.math.BigInteger` as hessian-lite writes it: its fields, in the order
/// hessian-lite's field serializer lists them (reversed), the cached ones zero.
fn big_integer(negative: bool, magnitude: &[u32]) -> Value {
    let signum = if magnitude.is_empty() {
        0
    } else if negative {
        -1
    } else {
        1
    };
    let mag = magnitude
        .iter()
        .map(|&w| Value::Int(w as i32))
        .collect::<Vec<_>>();
    Value::object(
        "java.math.BigInteger",
        vec![
            ("mag", Value::typed_list("[int", mag)),
            ("firstNonzeroIntNumPlusTwo", Value::Int(0)),
            ("lowestSetBitPlusTwo", Value::Int(0)),
            ("bitLengthPlusOne", Value::Int(0)),
            ("bitCountPlusOne", Value::Int(0)),
            ("signum", Value::Int(signum)),
        ],
    )
}

/// `v` as JSON: numbers, strings, arrays and objects; `Binary` as base64 text, `Date` as
/// milliseconds, an object as `{"class": ..., fields...}`; `BigDecimal`/`BigInteger`/`UUID` as
/// their decimal (string) text, an enum constant as its name, a `Throwable` as
/// `{"class", "message", "cause"}` (no stack trace); a [`Value::Ref`] (a cycle) as `null`.
///
/// Rendering `BigInteger` magnitudes as decimal is quadratic in their length, and back
/// references can repeat one number many times: one `to_json` spends at most 16 Mi word
/// operations on it (sixteen numbers of the longest rendered length, 1024 words, about 9,900
/// digits); a `BigInteger` past that budget, or longer than that length,
/// is given in its Java form (`{"class", "signum", "mag", ...}`), which loses nothing.
pub fn to_json(v: &Value) -> Json {
    let mut work = BIGNUM_WORK;
    json(v, &mut work)
}

/// The most word operations one [`to_json`] spends rendering `BigInteger`s as decimal.
pub(crate) const BIGNUM_WORK: u64 = 16 * (bignum::MAX_WORDS as u64) * (bignum::MAX_WORDS as u64);

fn json(v: &Value, work: &mut u64) -> Json {
    match v {
        Value::Null | Value::Ref(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Long(l) => Json::from(*l),
        Value::Double(d) => serde_json::Number::from_f64(*d).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::String(s.clone()),
        Value::Binary(b) => Json::String(STANDARD.encode(b)),
        Value::Date(ms) => Json::from(*ms),
        Value::List(l) => Json::Array(l.items.iter().map(|i| json(i, work)).collect()),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in &m.entries {
                let key = match k {
                    Value::String(s) => s.clone(),
                    other => json(other, work).to_string(),
                };
                out.insert(key, json(v, work));
            }
            Json::Object(out)
        }
        Value::Object(o) => object_json(o, work),
    }
}

fn object_json(o: &Object, work: &mut u64) -> Json {
    match o.class.as_str() {
        "java.math.BigDecimal" | "java.util.UUID" | "java.io.File" => {
            if let [(name, Value::String(s))] = &o.fields[..]
                && name == "value"
            {
                return Json::String(s.clone());
            }
        }
        "java.math.BigInteger" => {
            if let Some(s) = big_integer_text(o, work) {
                return Json::String(s);
            }
        }
        _ => {}
    }
    if is_throwable(o) {
        let mut out = serde_json::Map::new();
        out.insert("class".into(), Json::String(o.class.clone()));
        out.insert(
            "message".into(),
            o.field("detailMessage")
                .map_or(Json::Null, |m| json(m, work)),
        );
        let cause = match o.field("cause") {
            Some(c @ Value::Object(co)) if is_throwable(co) => json(c, work),
            _ => Json::Null,
        };
        out.insert("cause".into(), cause);
        for (k, v) in &o.fields {
            if !THROWABLE_FIELDS.contains(&k.as_str()) && !out.contains_key(k) {
                out.insert(k.clone(), json(v, work));
            }
        }
        return Json::Object(out);
    }
    // hessian-lite's EnumSerializer: a class of the single field `name`.
    if let [(name, Value::String(s))] = &o.fields[..]
        && name == "name"
    {
        return Json::String(s.clone());
    }
    let mut out = serde_json::Map::new();
    out.insert("class".into(), Json::String(o.class.clone()));
    for (k, v) in &o.fields {
        if k != "class" {
            out.insert(k.clone(), json(v, work));
        }
    }
    Json::Object(out)
}

/// The decimal text of a `java.math.BigInteger` object (`signum`, `mag`), when it is at most
/// [`bignum::MAX_WORDS`] long and its rendering fits in what is left of `work` (taken from it).
fn big_integer_text(o: &Object, work: &mut u64) -> Option<String> {
    let signum = o.field("signum")?.as_i64()?;
    let mag = o.field("mag")?.items()?;
    let cost = (mag.len() as u64).pow(2);
    if mag.len() > bignum::MAX_WORDS || cost > *work {
        return None;
    }
    *work -= cost;
    let words = mag
        .iter()
        .map(|w| match w {
            Value::Int(i) => Some(*i as u32),
            _ => None,
        })
        .collect::<Option<Vec<u32>>>()?;
    let digits = bignum::to_decimal(&words);
    Some(if signum < 0 && digits != "0" {
        format!("-{digits}")
    } else {
        digits
    })
}

/// `java.lang.Throwable`'s own fields, left out of its JSON form (but `detailMessage` and
/// `cause`, given as `message` and `cause`).
const THROWABLE_FIELDS: [&str; 4] = [
    "detailMessage",
    "cause",
    "stackTrace",
    "suppressedExceptions",
];

fn is_throwable(o: &Object) -> bool {
    o.field("detailMessage").is_some()
        || (o.field("stackTrace").is_some() && o.field("cause").is_some())
}

/// A decoded `java.lang.Throwable`: class, message and cause chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaException {
    /// The exception's class.
    pub class: String,
    /// Its `detailMessage`.
    pub message: Option<String>,
    /// Its cause, when it has one other than itself.
    pub cause: Option<Box<JavaException>>,
}

impl fmt::Display for JavaException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => write!(f, "{}: {m}", self.class),
            None => f.write_str(&self.class),
        }
    }
}

impl std::error::Error for JavaException {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

/// A decoded java.lang.Throwable (any object with a `detailMessage` field, or Java's usual throwable shape), with its cause chain (stopping at a self-reference / Ref).
pub fn java_exception(v: &Value) -> Option<JavaException> {
    let Value::Object(o) = v else {
        return None;
    };
    if !is_throwable(o) {
        return None;
    }
    let message = o
        .field("detailMessage")
        .and_then(|m| m.str().map(str::to_owned));
    let cause = match o.field("cause") {
        Some(c) => java_exception(c).map(Box::new),
        None => None,
    };
    // A generic call's exception arrives wrapped in Dubbo's GenericException, which names the
    // original class and message: that is what the caller threw.
    if o.class.ends_with(".rpc.service.GenericException")
        && let Some(class) = o
            .field("exceptionClass")
            .and_then(|c| c.str())
            .filter(|c| !c.is_empty())
    {
        return Some(JavaException {
            class: class.to_string(),
            message: o
                .field("exceptionMessage")
                .and_then(|m| m.str().map(str::to_owned))
                .or(message),
            cause,
        });
    }
    Some(JavaException {
        class: o.class.clone(),
        message,
        cause,
    })
}
