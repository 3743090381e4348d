//! The typed serde path: its bytes against the `Value` encoder's (which the Java vectors
//! check byte for byte), round trips, refs, and hostile input.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::serde::{Deserialize, Serialize};
use proptest::prelude::*;
use serde_json::json;

use super::java;
use super::{Deserializer, Error, Serializer, from_slice, from_slice_with_limits, to_vec};
use crate::{Encoder, Limits, Value, from_bytes, to_bytes, to_json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Address")]
struct Address {
    city: String,
    zip: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Color")]
#[allow(clippy::upper_case_acronyms)]
enum Color {
    RED,
    GREEN,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "org.example.Person", rename_all = "camelCase")]
struct Person {
    id: i64,
    full_name: String,
    age: i32,
    small: i8,
    short: i16,
    byte: u8,
    word: u16,
    unsigned: u32,
    big: u64,
    score: f64,
    ratio: f32,
    active: bool,
    initial: char,
    nickname: Option<String>,
    boxed: Option<i32>,
    tags: Vec<String>,
    attrs: BTreeMap<String, i32>,
    home: Address,
    others: Vec<Address>,
    color: Color,
    #[serde(with = "java::date")]
    created: SystemTime,
    #[serde(with = "java::date")]
    updated: Option<i64>,
    #[serde(with = "java::big_decimal")]
    price: String,
    #[serde(with = "java::set")]
    roles: BTreeSet<String>,
    #[serde(with = "java::bytes")]
    avatar: Vec<u8>,
    nothing: (),
}

fn person() -> Person {
    Person {
        id: 1 << 40,
        full_name: "Ann Lee".into(),
        age: 33,
        small: -5,
        short: 1234,
        byte: 200,
        word: 60000,
        unsigned: 4_000_000_000,
        big: 9_000_000_000,
        score: 4.5,
        ratio: 0.1,
        active: true,
        initial: 'é',
        nickname: None,
        boxed: Some(7),
        tags: vec!["a".into(), "b".into()],
        attrs: BTreeMap::from([("level".into(), 3), ("rank".into(), -1)]),
        home: Address {
            city: "Oslo".into(),
            zip: Some(150),
        },
        others: vec![
            Address {
                city: "Rome".into(),
                zip: None,
            },
            Address {
                city: "Lima".into(),
                zip: Some(15001),
            },
        ],
        color: Color::GREEN,
        created: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        updated: Some(1_700_000_040_000),
        price: "12345.6789".into(),
        roles: BTreeSet::from(["admin".into(), "dev".into()]),
        avatar: vec![1, 2, 3],
        nothing: (),
    }
}

fn address_value(a: &Address) -> Value {
    Value::object(
        "org.example.Address",
        vec![
            ("city", Value::string(&a.city)),
            ("zip", a.zip.map_or(Value::Null, Value::Int)),
        ],
    )
}

/// The `Value` Java would build for `person()`, as the `Value` encoder writes it.
fn person_value(p: &Person) -> Value {
    Value::object(
        "org.example.Person",
        vec![
            ("id", Value::Long(p.id)),
            ("fullName", Value::string(&p.full_name)),
            ("age", Value::Int(p.age)),
            ("small", Value::Int(p.small.into())),
            ("short", Value::Int(p.short.into())),
            ("byte", Value::Int(p.byte.into())),
            ("word", Value::Int(p.word.into())),
            ("unsigned", Value::Long(p.unsigned.into())),
            ("big", Value::Long(p.big as i64)),
            ("score", Value::Double(p.score)),
            // Java's float 0.1f widened: Double.parseDouble("0.1").
            ("ratio", Value::Double(0.1)),
            ("active", Value::Bool(p.active)),
            ("initial", Value::string(p.initial.to_string())),
            ("nickname", Value::Null),
            ("boxed", Value::Int(7)),
            (
                "tags",
                Value::list(p.tags.iter().map(Value::string).collect()),
            ),
            (
                "attrs",
                Value::map(
                    p.attrs
                        .iter()
                        .map(|(k, v)| (Value::string(k), Value::Int(*v)))
                        .collect(),
                ),
            ),
            ("home", address_value(&p.home)),
            (
                "others",
                Value::list(p.others.iter().map(address_value).collect()),
            ),
            (
                "color",
                Value::object("org.example.Color", vec![("name", Value::string("GREEN"))]),
            ),
            ("created", Value::Date(1_700_000_000_123)),
            ("updated", Value::Date(1_700_000_040_000)),
            (
                "price",
                Value::object(
                    "java.math.BigDecimal",
                    vec![("value", Value::string("12345.6789"))],
                ),
            ),
            (
                "roles",
                Value::typed_list(
                    "java.util.HashSet",
                    p.roles.iter().map(Value::string).collect(),
                ),
            ),
            ("avatar", Value::Binary(p.avatar.clone())),
            ("nothing", Value::Null),
        ],
    )
}

#[test]
fn every_default_mapping_writes_the_value_encoders_bytes() {
    let p = person();
    let typed = to_vec(&p).unwrap();
    assert_eq!(typed, to_bytes(&person_value(&p)));
    let back: Person = from_slice(&typed).unwrap();
    assert_eq!(back, p);
}

#[test]
fn a_list_of_structs_shares_one_class_definition() {
    let list: Vec<Address> = (0..20)
        .map(|i| Address {
            city: format!("c{i}"),
            zip: (i % 2 == 0).then_some(i),
        })
        .collect();
    let typed = to_vec(&list).unwrap();
    assert_eq!(
        typed,
        to_bytes(&Value::list(list.iter().map(address_value).collect()))
    );
    // One `C` only.
    assert_eq!(typed.iter().filter(|&&b| b == b'C').count(), 1);
    let back: Vec<Address> = from_slice(&typed).unwrap();
    assert_eq!(back, list);
}

#[test]
fn several_values_in_one_stream_share_classes_and_read_back_one_by_one() {
    let a = Address {
        city: "x".into(),
        zip: None,
    };
    let mut body = vec![0xda, 0xbb];
    let mut ser = Serializer::new(&mut body);
    ser.write("2.0.2").unwrap();
    ser.write(&a).unwrap();
    ser.write(&a).unwrap();
    ser.write(&HashMap::from([("path", "p")])).unwrap();
    let stream = &body[2..];
    let mut enc = Encoder::new();
    enc.write_str("2.0.2");
    enc.write(&address_value(&a));
    enc.write(&address_value(&a));
    enc.write(&Value::map(vec![(
        Value::string("path"),
        Value::string("p"),
    )]));
    assert_eq!(stream, enc.as_bytes());

    let mut de = Deserializer::new(stream);
    assert_eq!(de.read::<String>().unwrap(), "2.0.2");
    assert_eq!(de.position(), 6);
    assert_eq!(de.read::<Address>().unwrap(), a);
    assert_eq!(de.read::<Address>().unwrap(), a);
    assert_eq!(
        de.read::<HashMap<String, String>>().unwrap(),
        HashMap::from([("path".to_string(), "p".to_string())])
    );
    assert!(de.is_at_end());
}

#[test]
fn a_repeated_enum_constant_is_a_ref_as_java_writes_it() {
    let v = vec![Color::RED, Color::GREEN, Color::RED];
    let bytes = to_vec(&v).unwrap();
    let mut expect = Encoder::new();
    expect.write(&Value::list(vec![
        Value::object("org.example.Color", vec![("name", Value::string("RED"))]),
        Value::object("org.example.Color", vec![("name", Value::string("GREEN"))]),
        // The list is ref 0, RED ref 1.
        Value::Ref(1),
    ]));
    assert_eq!(bytes, expect.into_bytes());
    assert_eq!(from_slice::<Vec<Color>>(&bytes).unwrap(), v);
}

#[test]
fn enum_variants_with_data_and_strings_for_enums() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Shape {
        Dot,
        Circle(f64),
        Rect { w: i32, h: i32 },
        Pair(i32, String),
    }
    let v = vec![
        Shape::Dot,
        Shape::Circle(1.5),
        Shape::Rect { w: 2, h: 3 },
        Shape::Pair(1, "x".into()),
    ];
    let bytes = to_vec(&v).unwrap();
    assert_eq!(from_slice::<Vec<Shape>>(&bytes).unwrap(), v);
    // A Java enum may come as a plain string too.
    assert_eq!(
        from_slice::<Color>(&to_bytes(&Value::string("RED"))).unwrap(),
        Color::RED
    );
}

#[test]
fn out_of_range_numbers_are_errors_never_wraps() {
    assert!(to_vec(&u64::MAX).is_err());
    assert!(to_vec(&(i64::MAX as u64 + 1)).is_err());
    assert_eq!(
        to_vec(&(i64::MAX as u64)).unwrap(),
        to_bytes(&Value::Long(i64::MAX))
    );
    assert!(to_vec(&i128::MAX).is_err());
    assert!(to_vec(&'😀').is_err());
    let big = to_bytes(&Value::Int(300));
    assert!(from_slice::<i8>(&big).is_err());
    assert!(from_slice::<u8>(&big).is_err());
    assert_eq!(from_slice::<i16>(&big).unwrap(), 300);
    assert!(from_slice::<u32>(&to_bytes(&Value::Int(-1))).is_err());
    assert_eq!(from_slice::<f64>(&to_bytes(&Value::Int(3))).unwrap(), 3.0);
    assert!(from_slice::<i32>(&to_bytes(&Value::Double(1.5))).is_err());
}

#[test]
fn floats_are_widened_as_java_widens_them() {
    for f in [0.1f32, 3.3, 1e-7, 16777217.0, f32::MAX, -0.0] {
        let d: f64 = f.to_string().parse().unwrap();
        assert_eq!(to_vec(&f).unwrap(), to_bytes(&Value::Double(d)), "{f}");
    }
}

#[test]
fn strings_long_and_outside_the_bmp_match_the_value_encoder() {
    for s in [
        String::new(),
        "h\u{e9}llo".to_string(),
        "😀 x 𝄞".to_string(),
        "a".repeat(70_000),
        format!("{}😀{}", "b".repeat(0x7fff), "c".repeat(40_000)),
        "é".repeat(9000),
    ] {
        let bytes = to_vec(&s).unwrap();
        assert_eq!(bytes, to_bytes(&Value::string(&s)), "{}", s.len());
        assert_eq!(from_slice::<String>(&bytes).unwrap(), s);
        // Borrowed where it can be.
        if s.is_ascii() && s.len() < 1024 {
            assert_eq!(from_slice::<&str>(&bytes).unwrap(), s);
        }
    }
}

#[test]
fn binaries_are_cut_where_javas_buffer_fills() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename = "B")]
    struct B {
        name: String,
        #[serde(with = "java::bytes")]
        data: Vec<u8>,
    }
    for n in [0, 15, 16, 1023, 1024, 8189, 8190, 20_000, 70_000] {
        let b = B {
            name: "x".repeat(n % 300),
            data: (0..n).map(|i| (i % 251) as u8).collect(),
        };
        let bytes = to_vec(&b).unwrap();
        let v = Value::object(
            "B",
            vec![
                ("name", Value::string(&b.name)),
                ("data", Value::Binary(b.data.clone())),
            ],
        );
        assert_eq!(bytes, to_bytes(&v), "{n}");
        assert_eq!(from_slice::<B>(&bytes).unwrap(), b);
        // Without `java::bytes` a Vec<u8> still reads a binary.
        #[derive(Deserialize)]
        struct Plain {
            data: Vec<u8>,
        }
        assert_eq!(from_slice::<Plain>(&bytes).unwrap().data, b.data);
    }
}

#[test]
fn sets_dates_and_decimals() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename = "S")]
    struct S {
        #[serde(with = "java::set")]
        ids: HashSet<i64>,
        #[serde(with = "java::set")]
        maybe: Option<Vec<String>>,
        #[serde(with = "java::date")]
        before_epoch: SystemTime,
        #[serde(with = "java::date")]
        never: Option<SystemTime>,
        #[serde(with = "java::big_decimal")]
        exp: String,
        #[serde(with = "java::big_decimal")]
        none: Option<String>,
    }
    let s = S {
        ids: HashSet::from([5]),
        maybe: None,
        before_epoch: UNIX_EPOCH - Duration::from_millis(60_000),
        never: None,
        exp: "1E+3".into(),
        none: None,
    };
    let bytes = to_vec(&s).unwrap();
    let v = Value::object(
        "S",
        vec![
            (
                "ids",
                Value::typed_list("java.util.HashSet", vec![Value::Long(5)]),
            ),
            ("maybe", Value::Null),
            ("beforeEpoch", Value::Date(-60_000)),
            ("never", Value::Null),
            (
                "exp",
                Value::object(
                    "java.math.BigDecimal",
                    vec![("value", Value::string("1E+3"))],
                ),
            ),
            ("none", Value::Null),
        ],
    );
    // serde's field names are the Rust ones here (no rename_all).
    let v = match v {
        Value::Object(mut o) => {
            o.fields[2].0 = "before_epoch".into();
            Value::Object(o)
        }
        other => other,
    };
    assert_eq!(bytes, to_bytes(&v));
    assert_eq!(from_slice::<S>(&bytes).unwrap(), s);
    // Decimal text is put in Java's form; bad text is an error.
    #[derive(Serialize)]
    struct D(#[serde(with = "java::big_decimal")] String);
    assert_eq!(
        to_vec(&D("1e3".into())).unwrap(),
        to_vec(&D("1E+3".into())).unwrap()
    );
    assert!(to_vec(&D("12x".into())).is_err());
    // Other formats see the plain values.
    assert_eq!(
        serde_json::to_value(&s).unwrap()["before_epoch"],
        json!(-60_000)
    );
}

/// Found by the `hessian_serde` fuzz target: a `BigDecimal` of text `06.50` read as
/// `"06.50"` but wrote back `6.50`, and text Java's `new BigDecimal(..)` rejects read fine
/// (then could not be written). Reading now gives Java's form, and bad text is an error.
#[test]
fn a_big_decimal_reads_in_javas_form_and_bad_text_is_an_error() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct D(#[serde(with = "java::big_decimal")] Option<String>);
    let decimal = |text: &str| {
        to_bytes(&Value::object(
            "java.math.BigDecimal",
            vec![("value", Value::string(text))],
        ))
    };
    for (wire, read) in [
        (decimal("06.50"), "6.50"),
        (decimal("1e3"), "1E+3"),
        (decimal("-0.0000001"), "-1E-7"),
        (to_bytes(&Value::string("+12")), "12"),
        (to_bytes(&Value::Long(5)), "5"),
    ] {
        let d: D = from_slice(&wire).unwrap();
        assert_eq!(d.0.as_deref(), Some(read));
        let again = to_vec(&d).unwrap();
        assert_eq!(from_slice::<D>(&again).unwrap(), d, "round trip of {read}");
    }
    assert_eq!(from_slice::<D>(&to_bytes(&Value::Null)).unwrap(), D(None));
    for bad in [
        decimal("12x"),
        decimal(""),
        to_bytes(&Value::string("abc")),
        to_bytes(&Value::Double(f64::NAN)),
    ] {
        let e = from_slice::<D>(&bad).unwrap_err();
        assert!(e.what().contains("not a java.math.BigDecimal"), "{e}");
        assert!(e.offset().is_some_and(|at| at <= bad.len()), "{e}");
    }
}

#[test]
fn unknown_fields_are_skipped_and_missing_ones_take_defaults() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct Narrow {
        city: String,
        #[serde(default)]
        country: String,
    }
    let bytes = to_vec(&vec![
        Address {
            city: "a".into(),
            zip: Some(1),
        };
        3
    ])
    .unwrap();
    let v: Vec<Narrow> = from_slice(&bytes).unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[2].city, "a");
    assert_eq!(v[2].country, "");
    // A missing field without a default is an error.
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Strict {
        country: String,
    }
    let e = from_slice::<Vec<Strict>>(&bytes).unwrap_err();
    assert!(e.to_string().contains("country"), "{e}");
    // A struct reads a map too.
    let m = to_bytes(&Value::map(vec![
        (Value::string("city"), Value::string("m")),
        (Value::string("extra"), Value::list(vec![Value::Int(1)])),
    ]));
    assert_eq!(from_slice::<Narrow>(&m).unwrap().city, "m");
}

#[test]
fn skip_serializing_if_gives_each_shape_its_class_definition() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename = "K")]
    struct K {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        a: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        b: Option<i32>,
    }
    let v = vec![
        K {
            a: Some(1),
            b: None,
        },
        K {
            a: None,
            b: Some(2),
        },
        K {
            a: Some(3),
            b: None,
        },
        K { a: None, b: None },
    ];
    let bytes = to_vec(&v).unwrap();
    let expect = Value::list(vec![
        Value::object("K", vec![("a", Value::Int(1))]),
        Value::object("K", vec![("b", Value::Int(2))]),
        Value::object("K", vec![("a", Value::Int(3))]),
        Value::object::<&str>("K", vec![]),
    ]);
    assert_eq!(bytes, to_bytes(&expect));
    assert_eq!(from_slice::<Vec<K>>(&bytes).unwrap(), v);
}

#[test]
fn refs_read_the_referenced_value_again() {
    // [l, l] with l = ["r"]: 0x7a, 0x79 "r", 0x51 1.
    let bytes = [0x7a, 0x79, 0x01, b'r', 0x51, 0x91];
    assert_eq!(
        from_slice::<Vec<Vec<String>>>(&bytes).unwrap(),
        vec![vec!["r".to_string()], vec!["r".to_string()]]
    );
    assert_eq!(
        from_slice::<serde_json::Value>(&bytes).unwrap(),
        json!([["r"], ["r"]])
    );
    // A ref to an object, inside a struct, after a class definition.
    let a = Value::object(
        "A",
        vec![("city", Value::string("z")), ("zip", Value::Null)],
    );
    let mut e = Encoder::new();
    e.write(&Value::list(vec![a, Value::Ref(1)]));
    let v: Vec<Address> = from_slice(e.as_bytes()).unwrap();
    assert_eq!(v[0], v[1]);
    assert_eq!(v[1].city, "z");
}

#[test]
fn refs_number_every_container_and_name_the_complete_ones() {
    // [a, [7], ref 1 (a), ref 2 ([7])]: the outer list is 0, `a` 1, `[7]` 2.
    let a = Value::object(
        "A",
        vec![("city", Value::string("z")), ("zip", Value::Int(5))],
    );
    let mut e = Encoder::new();
    e.write(&Value::list(vec![
        a,
        Value::list(vec![Value::Int(7)]),
        Value::Ref(1),
        Value::Ref(2),
    ]));
    let (a1, l1, a2, l2): (Address, Vec<i32>, Address, Vec<i32>) =
        from_slice(e.as_bytes()).unwrap();
    assert_eq!((&a1, &l1), (&a2, &l2));
    assert_eq!((a1.city.as_str(), a1.zip, l1), ("z", Some(5), vec![7]));
    // A ref past the containers numbered so far.
    let mut e = Encoder::new();
    e.write(&Value::list(vec![Value::list(vec![]), Value::Ref(2)]));
    let err = from_slice::<Vec<Vec<i32>>>(e.as_bytes()).unwrap_err();
    assert!(err.what().contains("out of range"), "{err}");
}

#[test]
fn names_and_text_that_are_not_ascii_match_and_borrow_when_they_can() {
    // A class and fields named outside ASCII, one outside the BMP (a surrogate pair on the
    // wire, so decoded rather than borrowed).
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename = "org.example.\u{dc}ber")]
    struct W {
        #[serde(rename = "n\u{1f600}")]
        n: String,
        #[serde(rename = "\u{e9}t\u{e9}")]
        e: Vec<i32>,
        plain: i64,
    }
    let w = W {
        n: "h\u{e9}llo \u{1f600}".into(),
        e: vec![1, 2],
        plain: -3,
    };
    // Two of them: the second reads the class definition's names again.
    let bytes = to_vec(&[&w, &w]).unwrap();
    let back = from_slice::<Vec<W>>(&bytes).unwrap();
    assert_eq!(back.len(), 2);
    assert!(back.iter().all(|b| *b == w), "{back:?}");
    // One chunk without surrogates is borrowed, ASCII or not; with one it cannot be.
    assert_eq!(
        from_slice::<&str>(&to_vec("h\u{e9}llo").unwrap()).unwrap(),
        "h\u{e9}llo"
    );
    assert!(from_slice::<&str>(&to_vec("\u{1f600}").unwrap()).is_err());
    assert_eq!(
        from_slice::<String>(&to_vec("\u{1f600}").unwrap()).unwrap(),
        "\u{1f600}"
    );
}

#[test]
fn a_ref_to_a_value_still_being_read_is_an_error() {
    // l = [l]
    let e = from_slice::<serde_json::Value>(&[0x79, 0x51, 0x90]).unwrap_err();
    assert!(e.what().contains("cycle"), "{e}");
    assert_eq!(e.offset(), Some(1));
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Node {
        next: Option<Box<Node>>,
    }
    // o = N { next: o }
    let bytes = [
        b'C', 0x01, b'N', 0x91, 0x04, b'n', b'e', b'x', b't', 0x60, 0x51, 0x90,
    ];
    let e = from_slice::<Node>(&bytes).unwrap_err();
    assert!(e.what().contains("cycle"), "{e}");
}

/// A `RuntimeException("boom")` as Java writes one without a cause: its `cause` field refers
/// to the object itself.
fn self_caused_throwable() -> Vec<u8> {
    to_bytes(&Value::object(
        "java.lang.RuntimeException",
        vec![
            (
                "stackTrace",
                Value::typed_list("[java.lang.StackTraceElement", vec![]),
            ),
            ("cause", Value::Ref(0)),
            ("detailMessage", Value::string("boom")),
        ],
    ))
}

#[test]
fn a_throwable_without_a_cause_reads_its_cause_as_null() {
    #[derive(Debug, Deserialize)]
    struct Throwable {
        #[serde(rename = "detailMessage")]
        message: Option<String>,
        cause: Option<Box<Throwable>>,
    }
    let bytes = self_caused_throwable();
    let v: Throwable = from_slice(&bytes).unwrap();
    assert_eq!(v.message.as_deref(), Some("boom"));
    assert!(v.cause.is_none());
    assert_eq!(
        from_slice::<serde_json::Value>(&bytes).unwrap(),
        to_json(&from_bytes(&bytes).unwrap())
    );
}

/// How a struct's visitor was fed: by position or by field name.
#[derive(Debug, PartialEq)]
enum Fed {
    Seq(Vec<serde_json::Value>),
    Map(Vec<String>),
}

/// Deserializes as a struct with the given field names and tells how its visitor was fed.
fn fed(bytes: &[u8], fields: &'static [&'static str]) -> Result<Fed, Error> {
    struct V;
    impl<'de> de::Visitor<'de> for V {
        type Value = Fed;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a struct")
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Fed, A::Error> {
            let mut v = Vec::new();
            while let Some(x) = seq.next_element::<serde_json::Value>()? {
                v.push(x);
            }
            Ok(Fed::Seq(v))
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Fed, A::Error> {
            let mut k = Vec::new();
            while let Some((key, _)) = map.next_entry::<String, de::IgnoredAny>()? {
                k.push(key);
            }
            Ok(Fed::Map(k))
        }
    }
    let mut d = Deserializer::new(bytes);
    de::Deserializer::deserialize_struct(&mut d, "S", fields, V)
}

#[test]
fn a_struct_naming_the_class_fields_in_order_is_read_by_position() {
    let a = Address {
        city: "x".into(),
        zip: Some(7),
    };
    let bytes = to_vec(&vec![a.clone(), a.clone()]).unwrap();
    // Both objects of the list (the second reuses the class and its comparison).
    let mut d = Deserializer::new(&bytes);
    let v: Vec<Address> = d.read().unwrap();
    assert_eq!(v, vec![a.clone(), a.clone()]);
    let one = to_vec(&a).unwrap();
    assert_eq!(
        fed(&one, &["city", "zip"]).unwrap(),
        Fed::Seq(vec![json!("x"), json!(7)])
    );
    // Another order, fewer or more names: by name, as before.
    for fields in [&["zip", "city"][..], &["city"], &["city", "zip", "country"]] {
        assert_eq!(
            fed(&one, fields).unwrap(),
            Fed::Map(vec!["city".into(), "zip".into()]),
            "{fields:?}"
        );
    }
    // One stream, one class, read into two structs in turn: each its own way.
    #[derive(Debug, PartialEq, Deserialize)]
    struct Reversed {
        zip: Option<i32>,
        city: String,
    }
    let both = to_vec(&(a.clone(), a.clone())).unwrap();
    let mut d = Deserializer::new(&both);
    let (first, second) = de::Deserializer::deserialize_tuple(&mut d, 2, TwoWays).unwrap();
    assert_eq!(first, a);
    assert_eq!(
        second,
        Reversed {
            zip: Some(7),
            city: "x".into()
        }
    );
    struct TwoWays;
    impl<'de> de::Visitor<'de> for TwoWays {
        type Value = (Address, Reversed);
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("two")
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
            let a: Address = s.next_element()?.unwrap();
            let r: Reversed = s.next_element()?.unwrap();
            Ok((a, r))
        }
    }
    // `O` with the class index as an int (a stream's 17th class on): by position too.
    let o = [b'C', 0x01, b'A', 0x91, 0x01, b'a', b'O', 0x90, 0x95];
    assert_eq!(fed(&o, &["a"]).unwrap(), Fed::Seq(vec![json!(5)]));
    #[derive(Debug, PartialEq, Deserialize)]
    struct A {
        a: i32,
    }
    assert_eq!(from_slice::<A>(&o).unwrap(), A { a: 5 });
    assert!(from_slice::<A>(&[b'O', 0x90, 0x95]).is_err());
}

#[test]
fn a_struct_whose_aliases_make_it_name_the_class_fields_is_an_error_not_a_shifted_read() {
    // FIELDS is ["a", "b", "c"] (the alias included) but the struct takes two values: read
    // by position, `c` would get `b`'s value. By name, `b` would duplicate `a`.
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Aliased {
        #[serde(alias = "b")]
        a: String,
        c: String,
    }
    let bytes = to_bytes(&Value::object(
        "p.Abc",
        vec![
            ("a", Value::string("1")),
            ("b", Value::string("2")),
            ("c", Value::string("3")),
        ],
    ));
    let e = from_slice::<Aliased>(&bytes).unwrap_err();
    assert!(e.what().contains("read by position"), "{e}");
}

#[test]
fn a_throwable_read_by_position_reads_its_own_cause_as_null() {
    #[derive(Debug, Deserialize)]
    struct Throwable {
        #[serde(rename = "stackTrace")]
        _stack_trace: de::IgnoredAny,
        cause: Option<Box<Throwable>>,
        #[serde(rename = "detailMessage")]
        message: Option<String>,
    }
    let bytes = self_caused_throwable();
    assert_eq!(
        fed(&bytes, &["stackTrace", "cause", "detailMessage"]).unwrap(),
        Fed::Seq(vec![json!([]), json!(null), json!("boom")])
    );
    let v: Throwable = from_slice(&bytes).unwrap();
    assert_eq!(v.message.as_deref(), Some("boom"));
    assert!(v.cause.is_none());
}

/// `deserialize_any` gives the JSON mapping: every Java vector, as `to_json` gives it.
#[test]
fn any_gives_the_json_mapping_of_every_java_vector() {
    let file: serde_json::Value =
        serde_json::from_str(include_str!("../../tests/vectors/java-dubbo-3.3.json")).unwrap();
    let vectors = file["vectors"].as_array().unwrap();
    assert!(vectors.len() > 60);
    for v in vectors {
        let bytes = unhex(v["hex"].as_str().unwrap());
        let ours: serde_json::Value =
            from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", v["name"]));
        let theirs = to_json(&from_bytes(&bytes).unwrap());
        assert_eq!(ours, theirs, "{}", v["name"]);
    }
}

#[test]
fn truncations_are_errors_with_an_offset() {
    let bytes = to_vec(&person()).unwrap();
    for n in 0..bytes.len() {
        let e = from_slice::<Person>(&bytes[..n]).unwrap_err();
        assert!(e.offset().is_some_and(|o| o <= n), "{n}: {e}");
        let _ = from_slice::<serde_json::Value>(&bytes[..n]).unwrap_err();
    }
    let e = from_slice::<Person>(&[bytes.clone(), vec![0x90]].concat()).unwrap_err();
    assert_eq!(e.offset(), Some(bytes.len()));
}

#[test]
fn deep_nesting_is_bounded() {
    let mut bytes = vec![0x79; 100_000];
    bytes.push(0x90);
    let e = from_slice::<serde_json::Value>(&bytes).unwrap_err();
    assert!(e.what().contains("max_depth"), "{e}");
    let e = from_slice::<de::IgnoredAny>(&bytes).unwrap_err();
    assert!(e.what().contains("max_depth"), "{e}");
}

#[test]
fn huge_declared_lengths_are_refused_before_allocating() {
    for bytes in [
        vec![0x58, 0x49, 0x7f, 0xff, 0xff, 0xff, 0x90],
        vec![
            0x56, 0x04, b'[', b'i', b'n', b't', 0x49, 0x7f, 0xff, 0xff, 0xff,
        ],
        vec![b'S', 0xff, 0xff, b'a'],
        vec![b'B', 0xff, 0xff, 1],
        vec![b'R', 0xff, 0xff],
        vec![b'C', 0x01, b'X', 0x49, 0x7f, 0xff, 0xff, 0xff],
    ] {
        assert!(
            from_slice::<serde_json::Value>(&bytes).is_err(),
            "{bytes:x?}"
        );
        assert!(from_slice::<Vec<String>>(&bytes).is_err(), "{bytes:x?}");
    }
    // Within the limits, against a lower max_len.
    let limits = Limits {
        max_len: 4,
        ..Limits::default()
    };
    let bytes = to_vec(&vec![1, 2, 3, 4, 5]).unwrap();
    assert!(from_slice_with_limits::<Vec<i32>>(&bytes, limits).is_err());
    assert!(from_slice_with_limits::<Vec<i32>>(&bytes, Limits::default()).is_ok());
}

/// Each list refers to the previous one twice: 2^n values from a few bytes.
#[test]
fn ref_amplification_is_charged_to_max_nodes() {
    // An outer variable list (ref 0) of L1 = [0, 0] (ref 1), then L(i+1) = [Li, Li].
    let mut stream = vec![0x57, 0x7a, 0x90, 0x90];
    for i in 1..=40u8 {
        stream.extend_from_slice(&[0x7a, 0x51, 0x90 + i, 0x51, 0x90 + i]);
    }
    stream.push(b'Z');
    assert!(stream.len() < 256);
    let e = from_slice::<serde_json::Value>(&stream).unwrap_err();
    assert!(e.what().contains("max_nodes"), "{e}");
    let e = from_slice::<de::IgnoredAny>(&stream).unwrap_err();
    assert!(e.what().contains("max_nodes"), "{e}");
    let e = from_slice::<Vec<serde_json::Value>>(&stream).unwrap_err();
    assert!(e.what().contains("max_nodes"), "{e}");
}

#[test]
fn bad_refs_and_class_indexes_are_errors() {
    for bytes in [
        vec![0x51, 0x90],
        vec![0x79, 0x51, 0x95],
        vec![0x60],
        vec![b'O', 0x80],
        vec![0x72, 0x91, 0x90, 0x90],
        vec![b'Z'],
        vec![0x41],
    ] {
        assert!(
            from_slice::<serde_json::Value>(&bytes).is_err(),
            "{bytes:x?}"
        );
    }
}

#[test]
fn garbage_never_panics() {
    let seed = to_vec(&person()).unwrap();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..3000 {
        let mut b = seed.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % b.len();
            b[i] = (x >> 32) as u8;
        }
        let _ = from_slice::<Person>(&b);
        let _ = from_slice::<serde_json::Value>(&b);
    }
}

#[test]
fn errors_say_what_and_where() {
    let e: Error = from_slice::<String>(&[0x90]).unwrap_err();
    assert!(e.to_string().starts_with("hessian: "), "{e}");
    assert_eq!(e.offset(), Some(1));
}

use ::serde::de;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "p.Gen")]
struct Gen {
    a: i32,
    b: i64,
    c: String,
    d: Option<f64>,
    #[serde(with = "java::bytes")]
    e: Vec<u8>,
    f: Vec<String>,
    g: BTreeMap<String, i32>,
    h: Vec<Option<bool>>,
    i: Option<Box<Gen>>,
}

fn gen_leaf() -> impl Strategy<Value = Gen> {
    (
        any::<i32>(),
        any::<i64>(),
        ".{0,40}",
        proptest::option::of(any::<f64>().prop_filter("not NaN", |f| !f.is_nan())),
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::collection::vec(".{0,8}", 0..10),
        proptest::collection::btree_map(".{0,6}", any::<i32>(), 0..5),
        proptest::collection::vec(proptest::option::of(any::<bool>()), 0..5),
    )
        .prop_map(|(a, b, c, d, e, f, g, h)| Gen {
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            i: None,
        })
}

proptest! {
    #[test]
    fn generated_structs_round_trip_and_match_the_value_path(
        outer in gen_leaf(),
        inner in proptest::option::of(gen_leaf()),
    ) {
        let g = Gen { i: inner.map(Box::new), ..outer };
        let bytes = to_vec(&g).unwrap();
        let back: Gen = from_slice(&bytes).unwrap();
        prop_assert_eq!(&back, &g);
        // The Value decoder reads the same bytes to the same JSON.
        let via_value = to_json(&from_bytes(&bytes).unwrap());
        let via_any: serde_json::Value = from_slice(&bytes).unwrap();
        prop_assert_eq!(via_any, via_value);
    }
}
