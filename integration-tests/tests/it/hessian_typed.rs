//! The typed serde path of `switchman-hessian` against Java's hessian-lite (Dubbo 3.3's
//! `hessian2`), through the Java peers' `vectors` program: Java's bytes decoded straight into
//! Rust types mirroring the Java values (`User`, `Color`, `BigDecimal`, a Throwable, ...),
//! and Rust values encoded with `to_vec` decoded by Java to what was meant; where the Rust
//! type maps to the same Java form, the bytes are Java's own, byte for byte.

use std::collections::{BTreeMap, HashMap};
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
