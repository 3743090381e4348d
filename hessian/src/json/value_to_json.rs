//! [`Value`] → JSON.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value as Json;

use super::exception::{THROWABLE_FIELDS, is_throwable};
use crate::bignum;
use crate::value::{Object, Value};

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
