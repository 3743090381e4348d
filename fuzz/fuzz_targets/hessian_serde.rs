//! The serde deserializer (`switchman_hessian::from_slice`, `Deserializer`): any bytes give a
//! value or an error whose offset is within the input, never a panic, into a realistic typed
//! struct (nested struct, `Vec`, `HashMap`, `Option`, a Java enum, a date, a `BigDecimal`, a
//! set, a `byte[]`), into `serde_json::Value` (`deserialize_any`, the JSON mapping) and into a
//! `Vec<i64>`; a stream read value after value. A struct that decodes encodes (`to_vec`) to
//! bytes that decode to the same struct.
#![no_main]

use std::collections::{BTreeSet, HashMap};

use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};
use switchman_hessian::serde::{Error, java};
use switchman_hessian::{Deserializer, from_slice, to_vec};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Color")]
enum Color {
    Red,
    Green,
    Blue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Item")]
struct Item {
    sku: String,
    qty: i32,
    price: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Address")]
struct Address {
    city: String,
    zip: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Order")]
struct Order {
    id: i64,
    active: bool,
    note: Option<String>,
    color: Color,
    maybe_color: Option<Color>,
    #[serde(with = "java::date")]
    created: i64,
    #[serde(with = "java::date")]
    shipped: Option<i64>,
    #[serde(with = "java::big_decimal")]
    total: String,
    #[serde(with = "java::set")]
    tags: BTreeSet<String>,
    #[serde(with = "java::bytes")]
    signature: Vec<u8>,
    address: Address,
    items: Vec<Item>,
    attrs: HashMap<String, i64>,
    lines: Option<Vec<Option<Item>>>,
    small: u8,
}

/// Whether `o` holds a NaN (not equal to itself).
fn has_nan(o: &Order) -> bool {
    o.items
        .iter()
        .chain(o.lines.iter().flatten().flatten())
        .any(|i| i.price.is_some_and(f64::is_nan))
}

fn check_offset(e: &Error, len: usize) {
    let at = e.offset();
    assert!(
        at.is_some_and(|at| at <= len),
        "error without an offset in the input: {e:?}"
    );
}

fn decode<'de, T: Deserialize<'de>>(data: &'de [u8]) -> Option<T> {
    match from_slice::<T>(data) {
        Ok(v) => Some(v),
        Err(e) => {
            check_offset(&e, data.len());
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(order) = decode::<Order>(data) {
        let bytes = to_vec(&order).expect("a decoded struct encodes");
        let again: Order = from_slice(&bytes).expect("our own bytes decode");
        if !has_nan(&order) {
            assert_eq!(again, order, "round trip");
        }
        let bytes2 = to_vec(&again).expect("encodes again");
        let third: Order = from_slice(&bytes2).expect("decode again");
        if !has_nan(&again) {
            assert_eq!(third, again);
        }
    }
    let _ = decode::<serde_json::Value>(data);
    if let Some(v) = decode::<Vec<i64>>(data) {
        let bytes = to_vec(&v).expect("a list encodes");
        assert_eq!(from_slice::<Vec<i64>>(&bytes).expect("decodes"), v);
    }
    let _ = decode::<Vec<Option<Item>>>(data);
    let _ = decode::<HashMap<String, Color>>(data);

    // A stream: JSON values one after another, as a body's arguments are read.
    let mut de = Deserializer::new(data);
    while !de.is_at_end() {
        let before = de.position();
        match de.read::<serde_json::Value>() {
            Ok(_) => assert!(de.position() > before, "a read consumed nothing"),
            Err(e) => {
                check_offset(&e, data.len());
                break;
            }
        }
    }
    // A `dubbo://` request body's shape: strings, then typed arguments.
    let mut de = Deserializer::new(data);
    for i in 0..8 {
        let before = de.position();
        let r = match i % 4 {
            0 => de.read::<String>().map(drop),
            1 => de.read::<Order>().map(drop),
            2 => de.read::<Vec<i64>>().map(drop),
            _ => de.read::<Option<Address>>().map(drop),
        };
        match r {
            Ok(()) => assert!(de.position() > before, "a read consumed nothing"),
            Err(e) => {
                check_offset(&e, data.len());
                break;
            }
        }
    }
});
