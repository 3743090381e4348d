//! The typed serde path of `switchman-hessian` against Java's hessian-lite (Dubbo 3.3's
//! `hessian2`), through the Java peers' `vectors` program: Java's bytes decoded straight into
//! Rust types mirroring the Java values (`User`, `Color`, `BigDecimal`, a Throwable, ...),
//! and Rust values encoded with `to_vec` decoded by Java to what was meant; where the Rust
//! type maps to the same Java form, the bytes are Java's own, byte for byte.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchman_hessian::serde::java;
use switchman_hessian::{from_slice, to_vec};
use switchman_integration_tests::java_peer::{self, vectors_decode, vectors_encode};

/// `io.switchman.peers.User`, fields in the order hessian-lite writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.User")]
struct User {
    attributes: HashMap<String, Attr>,
    tags: Vec<String>,
    #[serde(with = "java::date")]
    created: SystemTime,
    active: bool,
    score: f64,
    age: i32,
    name: String,
    id: i64,
}

/// A value of `Map<String, Object>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Attr {
    Int(i32),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Color")]
#[allow(clippy::upper_case_acronyms)]
enum Color {
    RED,
    GREEN,
    BLUE,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Decimal(#[serde(with = "java::big_decimal")] String);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Date(#[serde(with = "java::date")] SystemTime);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Bytes(#[serde(with = "java::bytes")] Vec<u8>);

/// Any `java.lang.Throwable`: its message and cause (`None` when Java's cause is itself).
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Throwable {
    #[serde(rename = "detailMessage")]
    message: Option<String>,
    cause: Option<Box<Throwable>>,
}

fn ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// `User.sample(id)` of the Java peers.
fn sample(id: i64) -> User {
    User {
        attributes: HashMap::from([("n".to_string(), Attr::Int(id as i32))]),
        tags: vec![format!("t{id}")],
        created: ms(1_700_000_000_000 + id as u64),
        active: id % 2 == 0,
        score: id as f64 * 1.5,
        age: 20 + id as i32,
        name: format!("u{id}"),
        id,
    }
}

/// The vector `user` of `Vectors.java`.
fn ann() -> User {
    User {
        attributes: HashMap::from([
            ("level".to_string(), Attr::Int(3)),
            ("vip".to_string(), Attr::Bool(true)),
        ]),
        tags: vec!["a".into(), "b".into()],
        created: ms(1_700_000_000_123),
        active: true,
        score: 4.5,
        age: 33,
        name: "Ann".into(),
        id: 7,
    }
}

fn binary_20000() -> Vec<u8> {
    (0..20_000).map(|i| (i % 251) as u8).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Java's bytes of each vector, by name.
fn java_bytes(encoded: &Value) -> HashMap<String, Vec<u8>> {
    encoded["vectors"]
        .as_array()
        .expect("a vectors array")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().expect("a name").to_string(),
                unhex(v["hex"].as_str().expect("hex")),
            )
        })
        .collect()
}

#[test]
fn java_bytes_decode_straight_into_rust_types() {
    if java_peer::skipped("java_bytes_decode_straight_into_rust_types") {
        return;
    }
    let java = java_bytes(&vectors_encode());
    let get = |name: &str| java.get(name).unwrap_or_else(|| panic!("no vector {name}"));

    assert_eq!(from_slice::<User>(get("user")).unwrap(), ann());
    assert_eq!(
        from_slice::<Vec<User>>(get("user_list")).unwrap(),
        vec![sample(1), sample(2)]
    );
    assert_eq!(from_slice::<Color>(get("enum_red")).unwrap(), Color::RED);
    assert_eq!(
        from_slice::<Decimal>(get("big_decimal")).unwrap(),
        Decimal("12345.6789".into())
    );
    assert_eq!(
        from_slice::<Value>(get("big_integer")).unwrap(),
        json!("123456789012345678901234567890")
    );
    // The second element is a ref to the first.
    assert_eq!(
        from_slice::<Vec<Vec<String>>>(get("same_list_twice")).unwrap(),
        vec![vec!["r".to_string()], vec!["r".to_string()]]
    );
    assert_eq!(
        from_slice::<Date>(get("date_ms")).unwrap(),
        Date(ms(1_700_000_000_123))
    );
    assert_eq!(
        from_slice::<Date>(get("date_minute")).unwrap(),
        Date(ms(1_700_000_040_000))
    );
    assert_eq!(
        from_slice::<String>(get("string_emoji")).unwrap(),
        "\u{1f600} x \u{1d11e}"
    );
    assert_eq!(
        from_slice::<String>(get("string_70000")).unwrap(),
        "c".repeat(70_000)
    );
    assert_eq!(
        from_slice::<Bytes>(get("binary_20000")).unwrap(),
        Bytes(binary_20000())
    );
    assert_eq!(
        from_slice::<Vec<i32>>(get("list_int_array")).unwrap(),
        [1, 2, 3]
    );
    assert_eq!(
        from_slice::<(Vec<i32>, Vec<String>)>(get("list_nested")).unwrap(),
        (vec![1, 2], vec!["x".to_string()])
    );
    assert_eq!(
        from_slice::<Vec<String>>(get("list_linked")).unwrap(),
        ["p", "q"]
    );
    assert_eq!(
        from_slice::<BTreeMap<i32, String>>(get("map_int_keys")).unwrap(),
        BTreeMap::from([(1, "one".to_string()), (2, "two".to_string())])
    );
    assert_eq!(
        from_slice::<BTreeMap<String, String>>(get("map_treemap")).unwrap(),
        BTreeMap::from([("k".to_string(), "v".to_string())])
    );
    assert_eq!(from_slice::<i32>(get("int_min")).unwrap(), i32::MIN);
    assert_eq!(from_slice::<i64>(get("long_min")).unwrap(), i64::MIN);
    assert_eq!(from_slice::<u64>(get("long_max")).unwrap(), i64::MAX as u64);
    assert_eq!(
        from_slice::<f64>(get("double_pi")).unwrap(),
        std::f64::consts::PI
    );
    assert_eq!(from_slice::<Option<i32>>(get("null")).unwrap(), None);
    let e = from_slice::<Throwable>(get("exception_cause")).unwrap();
    assert_eq!(e.message.as_deref(), Some("outer"));
    let cause = e.cause.expect("a cause");
    assert_eq!(cause.message.as_deref(), Some("inner"));
    assert_eq!(cause.cause, None, "Java's cause of itself reads as none");
    assert_eq!(
        from_slice::<Throwable>(get("exception_demo"))
            .unwrap()
            .message
            .as_deref(),
        Some("boom")
    );
}

#[test]
fn rust_values_encode_to_what_java_decodes_as_meant() {
    if java_peer::skipped("rust_values_encode_to_what_java_decodes_as_meant") {
        return;
    }
    let java = java_bytes(&vectors_encode());
    // (name, our bytes, whether they are Java's own byte for byte)
    let ours: Vec<(&str, Vec<u8>, bool)> = vec![
        ("null", to_vec(&None::<i32>).unwrap(), true),
        ("bool_true", to_vec(&true).unwrap(), true),
        ("int_m2048", to_vec(&-2048i32).unwrap(), true),
        ("int_max", to_vec(&i32::MAX).unwrap(), true),
        ("long_2p31", to_vec(&2_147_483_648u64).unwrap(), true),
        ("long_min", to_vec(&i64::MIN).unwrap(), true),
        ("double_pi", to_vec(&std::f64::consts::PI).unwrap(), true),
        ("double_0_001", to_vec(&0.001f64).unwrap(), true),
        (
            "string_unicode",
            to_vec("h\u{e9}llo w\u{f6}rld \u{4e2d}\u{6587}").unwrap(),
            true,
        ),
        (
            "string_emoji",
            to_vec("\u{1f600} x \u{1d11e}").unwrap(),
            true,
        ),
        ("string_70000", to_vec(&"c".repeat(70_000)).unwrap(), true),
        (
            "binary_20000",
            to_vec(&Bytes(binary_20000())).unwrap(),
            true,
        ),
        (
            "date_ms",
            to_vec(&Date(ms(1_700_000_000_123))).unwrap(),
            true,
        ),
        (
            "date_minute",
            to_vec(&Date(ms(1_700_000_040_000))).unwrap(),
            true,
        ),
        ("list_untyped", to_vec(&(1i32, "a", true)).unwrap(), true),
        ("list_empty", to_vec(&Vec::<i32>::new()).unwrap(), true),
        (
            "list_20",
            to_vec(&(0..20).collect::<Vec<i32>>()).unwrap(),
            true,
        ),
        (
            "list_nested",
            to_vec(&(vec![1i32, 2], vec!["x"])).unwrap(),
            true,
        ),
        ("enum_red", to_vec(&Color::RED).unwrap(), true),
        (
            "big_decimal",
            to_vec(&Decimal("12345.6789".into())).unwrap(),
            true,
        ),
        (
            "map_empty",
            to_vec(&HashMap::<String, i32>::new()).unwrap(),
            true,
        ),
        // Java writes these as a LinkedHashMap / TreeMap / LinkedList / a ref (`M type`,
        // typed list, `0x51`); ours are a HashMap / an ArrayList / a copy, equal in content.
        (
            "map_int_keys",
            to_vec(&BTreeMap::from([(1i32, "one"), (2, "two")])).unwrap(),
            false,
        ),
        (
            "map_treemap",
            to_vec(&BTreeMap::from([("k", "v")])).unwrap(),
            false,
        ),
        ("list_linked", to_vec(&["p", "q"]).unwrap(), false),
        (
            "same_list_twice",
            to_vec(&vec![vec!["r"], vec!["r"]]).unwrap(),
            false,
        ),
        ("user", to_vec(&ann()).unwrap(), false),
        (
            "user_list",
            to_vec(&vec![sample(1), sample(2)]).unwrap(),
            false,
        ),
    ];
    for (name, bytes, same) in &ours {
        let theirs = java
            .get(*name)
            .unwrap_or_else(|| panic!("no vector {name}"));
        if *same {
            assert_eq!(hex(bytes), hex(theirs), "{name}: Java's bytes");
        } else {
            assert_ne!(
                hex(bytes),
                hex(theirs),
                "{name}: expected to differ in form"
            );
        }
    }
    let input = json!({
        "vectors": ours
            .iter()
            .map(|(name, bytes, _)| json!({"name": name, "hex": hex(bytes)}))
            .collect::<Vec<_>>()
    });
    let verdicts = vectors_decode(&input);
    let verdicts = verdicts["vectors"].as_array().expect("a vectors array");
    assert_eq!(verdicts.len(), ours.len());
    for v in verdicts {
        assert!(v.get("error").is_none(), "Java failed to decode: {v}");
        assert_eq!(v["equal"], true, "Java decoded another value: {v}");
    }
    // Java's User from our bytes is a User, not a map.
    let user = verdicts
        .iter()
        .find(|v| v["name"] == "user")
        .expect("the user verdict");
    assert_eq!(user["class"], "io.switchman.peers.User");
}

// ----- one case per row of hessian/README.md's mapping table, both ways ------------------------

/// A newtype struct: its field (`long`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Id(i64);

/// `io.switchman.peers.Empty`, a class without fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Empty")]
struct Empty;

/// An enum with data: no Java form, a map of one entry (`H variant value Z`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Circle(f64),
}

/// A `java.util.Date` held as milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct DateMs(#[serde(with = "java::date")] i64);

/// A `java.util.Set` (typed list `java.util.HashSet`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Set(#[serde(with = "java::set")] BTreeSet<String>);

/// `io.switchman.peers.Prims`: every primitive, and every nullable form as an `Option`, in the
/// order hessian-lite writes them (primitives and `java.lang` types first, the list reversed).
/// No primitive `float` field: hessian-lite 4.0.4 reads one with `Unsafe.putDouble`, which
/// garbles it and a neighbouring field even from Java's own bytes (see Prims.java); the
/// boxed `Float` (`bf`) and a top-level `Float` are the `f32` cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Prims")]
struct Prims {
    bytes: Option<Bytes>,
    #[serde(with = "java::big_decimal")]
    dec: Option<String>,
    #[serde(with = "java::date")]
    date: Option<SystemTime>,
    str: Option<String>,
    bz: Option<bool>,
    bc: Option<char>,
    bd: Option<f64>,
    bf: Option<f32>,
    bl: Option<i64>,
    bi: Option<i32>,
    bs: Option<i16>,
    bb: Option<i8>,
    z: bool,
    c: char,
    d: f64,
    l: i64,
    i: i32,
    s: i16,
    b: i8,
}

/// `Prims.sample()` of the Java peers.
fn prims() -> Prims {
    Prims {
        bytes: Some(Bytes(vec![0, 1, 255])),
        dec: Some("-0.000120".into()),
        date: Some(ms(1_700_000_040_000)),
        str: Some("s".into()),
        bz: Some(false),
        bc: Some('x'),
        bd: Some(1e300),
        bf: Some(0.3),
        bl: Some(-9),
        bi: Some(48),
        bs: Some(-32768),
        bb: Some(127),
        z: true,
        c: '\u{e9}',
        d: -2.5,
        l: 1 << 40,
        i: -70_000,
        s: 1000,
        b: -5,
    }
}

/// `Prims.nulls()`: every nullable field null, the primitives Java's defaults.
fn prims_nulls() -> Prims {
    Prims {
        bytes: None,
        dec: None,
        date: None,
        str: None,
        bz: None,
        bc: None,
        bd: None,
        bf: None,
        bl: None,
        bi: None,
        bs: None,
        bb: None,
        z: false,
        c: '\0',
        d: 0.0,
        l: 0,
        i: 0,
        s: 0,
        b: 0,
    }
}

/// `io.switchman.peers.Derived extends Base`: one flat class definition, the superclass's
/// fields (`id`, `name`, `since`) among the subclass's in hessian-lite's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Derived")]
struct Derived {
    #[serde(with = "java::date")]
    since: Option<SystemTime>,
    color: Option<Color>,
    roles: Option<Vec<String>>,
    name: Option<String>,
    id: i64,
    level: i32,
}

/// `io.switchman.peers.Generics`: generic collections and arrays as fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Generics", rename_all = "camelCase")]
struct Generics {
    by_id: Option<BTreeMap<i64, User>>,
    second: Option<Color>,
    first: Option<Color>,
    colors: Option<Vec<Color>>,
    strings: Option<Vec<String>>,
    longs: Option<Vec<i64>>,
    array: Option<Vec<User>>,
    #[serde(with = "java::set")]
    names: Option<BTreeSet<String>>,
    index: Option<BTreeMap<String, Vec<i64>>>,
    users: Option<Vec<User>>,
}

/// `Generics.sample()` of the Java peers.
fn generics() -> Generics {
    Generics {
        by_id: Some(BTreeMap::from([(4, sample(4))])),
        second: Some(Color::GREEN),
        first: Some(Color::BLUE),
        colors: Some(vec![Color::RED, Color::BLUE, Color::RED]),
        strings: Some(vec!["x".into(), "y".into()]),
        longs: Some(vec![5, -1]),
        array: Some(vec![sample(3)]),
        names: Some(BTreeSet::from(["a".into(), "b".into(), "c".into()])),
        index: Some(BTreeMap::from([
            ("a".to_string(), vec![1, 2]),
            ("b".to_string(), vec![]),
        ])),
        users: Some(vec![sample(1), sample(2)]),
    }
}

fn generics_nulls() -> Generics {
    Generics {
        by_id: None,
        second: None,
        first: None,
        colors: None,
        strings: None,
        longs: None,
        array: None,
        names: None,
        index: None,
        users: None,
    }
}

/// `io.switchman.peers.Node`: a chain as an owned value; Java's cycles cannot be one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Node")]
struct Node {
    next: Option<Box<Node>>,
    name: String,
}

/// A list of lists of ..., for Java's list that contains itself.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Nested(Vec<Nested>);

/// The vector `refs_after_forms`: a BigDecimal, a Set, a byte[], a Date, then BLUE twice.
type AfterForms = (Decimal, Set, Bytes, Date, Color, Color);

fn after_forms() -> AfterForms {
    (
        Decimal("1.5".into()),
        Set(BTreeSet::from(["s".into()])),
        Bytes(vec![7]),
        Date(ms(1_700_000_000_123)),
        Color::BLUE,
        Color::BLUE,
    )
}

#[test]
fn every_mapping_row_java_to_rust() {
    if java_peer::skipped("every_mapping_row_java_to_rust") {
        return;
    }
    let java = java_bytes(&vectors_encode());
    let get = |name: &str| java.get(name).unwrap_or_else(|| panic!("no vector {name}"));

    // bool
    assert!(from_slice::<bool>(get("bool_true")).unwrap());
    assert!(!from_slice::<bool>(get("bool_false")).unwrap());
    // byte, short, int into i8, i16, i32, u8, u16
    assert_eq!(from_slice::<i8>(get("byte_m5")).unwrap(), -5);
    assert_eq!(from_slice::<i16>(get("short_1000")).unwrap(), 1000);
    assert_eq!(from_slice::<u8>(get("int_47")).unwrap(), 47);
    assert_eq!(from_slice::<u16>(get("int_2047")).unwrap(), 2047);
    assert!(from_slice::<u8>(get("int_2047")).is_err(), "out of range");
    assert!(from_slice::<u16>(get("int_m16")).is_err(), "negative");
    // long into i64, u32, u64, i128
    assert_eq!(from_slice::<u32>(get("long_2p31")).unwrap(), 2_147_483_648);
    assert_eq!(
        from_slice::<i128>(get("long_min")).unwrap(),
        i64::MIN as i128
    );
    // float (Java writes a Float as a double) and char (a string of one char)
    assert_eq!(from_slice::<f32>(get("float_1_1")).unwrap(), 1.1);
    assert_eq!(from_slice::<char>(get("char_z")).unwrap(), 'z');
    // null: (), Option
    from_slice::<()>(get("null")).unwrap();
    assert_eq!(from_slice::<Option<String>>(get("null")).unwrap(), None);
    // newtype struct, unit struct, enum with data (a Java map of one entry)
    assert_eq!(from_slice::<Id>(get("long_2047")).unwrap(), Id(2047));
    assert_eq!(from_slice::<Empty>(get("empty")).unwrap(), Empty);
    assert_eq!(
        from_slice::<Shape>(get("map_variant")).unwrap(),
        Shape::Circle(2.5)
    );
    // sequences: a String[], a Set into a set and into a Vec, a list of enum constants (refs)
    assert_eq!(
        from_slice::<Vec<String>>(get("list_string_array")).unwrap(),
        ["a", "b"]
    );
    assert_eq!(
        from_slice::<Set>(get("set_abc")).unwrap(),
        Set(BTreeSet::from(["a".into(), "b".into(), "c".into()]))
    );
    assert_eq!(
        from_slice::<HashSet<String>>(get("set_one")).unwrap(),
        HashSet::from(["s".to_string()])
    );
    assert_eq!(
        from_slice::<Vec<String>>(get("list_abc")).unwrap(),
        ["a", "b", "c"]
    );
    assert_eq!(
        from_slice::<Vec<Color>>(get("enum_list")).unwrap(),
        [Color::RED, Color::GREEN, Color::RED]
    );
    // byte[]
    assert_eq!(
        from_slice::<Bytes>(get("binary_3")).unwrap(),
        Bytes(vec![1, 2, 3])
    );
    assert_eq!(
        from_slice::<Bytes>(get("binary_empty")).unwrap(),
        Bytes(vec![])
    );
    // every primitive and box, filled and null
    assert_eq!(from_slice::<Prims>(get("prims")).unwrap(), prims());
    assert_eq!(
        from_slice::<Prims>(get("prims_nulls")).unwrap(),
        prims_nulls()
    );
    // inheritance
    assert_eq!(
        from_slice::<Derived>(get("derived")).unwrap(),
        Derived {
            since: Some(ms(1_700_000_000_123)),
            color: Some(Color::GREEN),
            roles: Some(vec!["admin".into(), "ops".into()]),
            name: Some("sub".into()),
            id: 9,
            level: 4,
        }
    );
    // generic collections, arrays of POJOs and longs, a Set, enum refs; and all null
    assert_eq!(from_slice::<Generics>(get("generics")).unwrap(), generics());
    assert_eq!(
        from_slice::<Generics>(get("generics_nulls")).unwrap(),
        generics_nulls()
    );
    // a chain of objects; refs after values of every form
    assert_eq!(
        from_slice::<Node>(get("node_chain")).unwrap(),
        Node {
            next: Some(Box::new(Node {
                next: None,
                name: "b".into()
            })),
            name: "a".into()
        }
    );
    assert_eq!(
        from_slice::<AfterForms>(get("refs_after_forms")).unwrap(),
        after_forms()
    );
}

#[test]
fn every_mapping_row_rust_to_java() {
    if java_peer::skipped("every_mapping_row_rust_to_java") {
        return;
    }
    let java = java_bytes(&vectors_encode());
    // (name, our bytes, whether they are Java's own byte for byte)
    let ours: Vec<(&str, Vec<u8>, bool)> = vec![
        ("bool_false", to_vec(&false).unwrap(), true),
        ("byte_m5", to_vec(&-5i8).unwrap(), true),
        ("short_1000", to_vec(&1000i16).unwrap(), true),
        ("int_47", to_vec(&47u8).unwrap(), true),
        ("int_2047", to_vec(&2047u16).unwrap(), true),
        ("long_2p31", to_vec(&2_147_483_648u32).unwrap(), true),
        ("long_max", to_vec(&(i64::MAX as u64)).unwrap(), true),
        ("long_min", to_vec(&(i64::MIN as i128)).unwrap(), true),
        ("long_2p31", to_vec(&2_147_483_648u128).unwrap(), true),
        ("date_ms", to_vec(&DateMs(1_700_000_000_123)).unwrap(), true),
        ("float_1_1", to_vec(&1.1f32).unwrap(), true),
        ("char_z", to_vec(&'z').unwrap(), true),
        ("null", to_vec(&()).unwrap(), true),
        ("long_2047", to_vec(&Id(2047)).unwrap(), true),
        ("empty", to_vec(&Empty).unwrap(), true),
        ("map_variant", to_vec(&Shape::Circle(2.5)).unwrap(), true),
        (
            "list_abc",
            to_vec(&BTreeSet::from(["a", "b", "c"])).unwrap(),
            true,
        ),
        ("list_abc", to_vec(&["a", "b", "c"][..]).unwrap(), true),
        (
            "set_abc",
            to_vec(&Set(BTreeSet::from(["a".into(), "b".into(), "c".into()]))).unwrap(),
            true,
        ),
        (
            "set_one",
            to_vec(&Set(BTreeSet::from(["s".into()]))).unwrap(),
            true,
        ),
        (
            "enum_list",
            to_vec(&[Color::RED, Color::GREEN, Color::RED]).unwrap(),
            true,
        ),
        ("binary_3", to_vec(&Bytes(vec![1, 2, 3])).unwrap(), true),
        ("binary_empty", to_vec(&Bytes(vec![])).unwrap(), true),
        ("prims_nulls", to_vec(&prims_nulls()).unwrap(), true),
        (
            "derived",
            to_vec(&Derived {
                since: Some(ms(1_700_000_000_123)),
                color: Some(Color::GREEN),
                roles: Some(vec!["admin".into(), "ops".into()]),
                name: Some("sub".into()),
                id: 9,
                level: 4,
            })
            .unwrap(),
            true,
        ),
        ("generics_nulls", to_vec(&generics_nulls()).unwrap(), true),
        (
            "node_chain",
            to_vec(&Node {
                next: Some(Box::new(Node {
                    next: None,
                    name: "b".into(),
                })),
                name: "a".into(),
            })
            .unwrap(),
            true,
        ),
        ("refs_after_forms", to_vec(&after_forms()).unwrap(), true),
        ("prims", to_vec(&prims()).unwrap(), true),
        // Java writes arrays as typed lists (`[string`, `[long`, `[io.switchman.peers.User`)
        // and a shared object as a ref; ours are untyped lists and copies. Java reads them back.
        ("generics", to_vec(&generics()).unwrap(), false),
        (
            "shared_user",
            to_vec(&vec![sample(5), sample(5)]).unwrap(),
            false,
        ),
    ];
    for (name, bytes, same) in &ours {
        let theirs = java
            .get(*name)
            .unwrap_or_else(|| panic!("no vector {name}"));
        if *same {
            assert_eq!(hex(bytes), hex(theirs), "{name}: Java's bytes");
        } else {
            assert_ne!(
                hex(bytes),
                hex(theirs),
                "{name}: expected to differ in form"
            );
        }
    }
    // Out of Java's range: an error, never a wrap or a lossy char.
    assert!(to_vec(&u64::MAX).is_err());
    assert!(to_vec(&(i64::MAX as i128 + 1)).is_err());
    assert!(to_vec(&'\u{1f600}').is_err());

    // Java decodes each to the Java value of that name. A top-level byte, short, float and
    // char come back from Java's own bytes as Integer, Double and String (the typed fields of
    // `prims` are the check for those), so they are compared by bytes only, above.
    let by_bytes_only = ["byte_m5", "short_1000", "float_1_1", "char_z"];
    let decoded: Vec<&(&str, Vec<u8>, bool)> = ours
        .iter()
        .filter(|(name, _, _)| !by_bytes_only.contains(name))
        .collect();
    let input = json!({
        "vectors": decoded
            .iter()
            .map(|(name, bytes, _)| json!({"name": name, "hex": hex(bytes)}))
            .collect::<Vec<_>>()
    });
    let verdicts = vectors_decode(&input);
    let verdicts = verdicts["vectors"].as_array().expect("a vectors array");
    assert_eq!(verdicts.len(), decoded.len());
    for v in verdicts {
        assert!(v.get("error").is_none(), "Java failed to decode: {v}");
        assert_eq!(v["equal"], true, "Java decoded another value: {v}");
    }
    let class = |name: &str| {
        verdicts
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("the {name} verdict"))["class"]
            .clone()
    };
    assert_eq!(class("prims"), "io.switchman.peers.Prims");
    assert_eq!(class("derived"), "io.switchman.peers.Derived");
    assert_eq!(class("generics"), "io.switchman.peers.Generics");
    assert_eq!(class("empty"), "io.switchman.peers.Empty");
    assert_eq!(class("node_chain"), "io.switchman.peers.Node");
    assert_eq!(class("set_abc"), "java.util.HashSet");
}

/// Runs `f` on another thread and gives its result, failing the test if it takes 30 s: a
/// decoder that loops on a cycle fails here instead of hanging the suite.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("decoding ended within 30 s")
}

#[test]
fn java_object_graphs_rust_cannot_own_give_bounded_errors() {
    if java_peer::skipped("java_object_graphs_rust_cannot_own_give_bounded_errors") {
        return;
    }
    let java = java_bytes(&vectors_encode());
    let get = |name: &str| {
        java.get(name)
            .unwrap_or_else(|| panic!("no vector {name}"))
            .clone()
    };

    // A node that is its own next, two nodes in a ring, a list that contains itself: a ref to
    // a value still being read, an error naming the cycle, into Rust types and into Value.
    for name in ["node_self", "node_pair"] {
        let bytes = get(name);
        let e = bounded(move || from_slice::<Node>(&bytes).map(|_| ()))
            .expect_err(&format!("{name} is a cycle"));
        assert!(e.to_string().contains("cycle"), "{name}: {e}");
        let bytes = get(name);
        let e = bounded(move || from_slice::<Value>(&bytes).map(|_| ()))
            .expect_err(&format!("{name} is a cycle"));
        assert!(e.to_string().contains("cycle"), "{name} as Value: {e}");
    }
    let bytes = get("list_self");
    let e = bounded(move || from_slice::<Nested>(&bytes).map(|_| ())).expect_err("a cycle");
    assert!(e.to_string().contains("cycle"), "list_self: {e}");
    let bytes = get("list_self");
    let e = bounded(move || from_slice::<Value>(&bytes).map(|_| ())).expect_err("a cycle");
    assert!(e.to_string().contains("cycle"), "list_self as Value: {e}");

    // An object shared, not cyclic: copies.
    assert_eq!(
        from_slice::<Vec<User>>(&get("shared_user")).unwrap(),
        vec![sample(5), sample(5)]
    );
    // Sharing that doubles 48 times (2^48 leaves in 151 bytes): the limits stop it.
    let bytes = get("refs_exponential");
    assert!(bytes.len() < 200, "{} bytes", bytes.len());
    let e = bounded(move || from_slice::<Value>(&bytes).map(|_| ())).expect_err("bounded");
    assert!(e.to_string().contains("max_"), "refs_exponential: {e}");
}
