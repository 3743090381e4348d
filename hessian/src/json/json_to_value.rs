//! JSON → [`Value`], by the declared Java type or untyped.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde_json::Value as Json;

use super::error::MappingError;
use super::java_type::JType;
use crate::bignum;
use crate::value::{List, Map, Object, Value};

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
