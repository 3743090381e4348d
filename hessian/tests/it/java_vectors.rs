//! Test vectors: the bytes Java's Dubbo (hessian-lite) writes for known Java values.
//!
//! `vectors/handwritten.json` holds vectors spelled out by hand from the Hessian 2.0 grammar
//! and hessian-lite's `Hessian2Output`; `vectors/java-dubbo-3.3.json`, when present, holds the
//! bytes the Java peer (`integration-tests/peers/java`, `Vectors.java`) wrote. Each vector is
//! decoded and compared with the expected value, and the expected value is encoded and
//! compared with the bytes.
//!
//! With `SWITCHMAN_JAVA_PEERS` set (the built Java peers, see
//! integration-tests/peers/java/README.md) the Java side also decodes what this crate encodes.

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};
use switchman_hessian::{
    Decoder, Encoder, JavaException, Value, from_json, java_exception, to_json,
};

/// What a vector must decode to.
enum Expect {
    /// This value, which also encodes to the vector's bytes.
    Value(Value),
    /// Decodes to the first; the second (with back references) encodes to the bytes.
    EncodedAs(Value, Value),
    /// Only checked by a function (values whose Java form holds what a [`Value`] cannot
    /// rebuild, such as stack traces).
    Check(fn(&Value) -> Result<(), String>),
}

fn s(v: &str) -> Value {
    Value::string(v)
}

/// Mirrors `User`'s constructor (io.switchman.peers.User).
#[allow(clippy::too_many_arguments)]
fn user(
    id: i64,
    name: &str,
    age: i32,
    score: f64,
    active: bool,
    created: i64,
    tags: &[&str],
    attributes: Vec<(&str, Value)>,
) -> Value {
    // hessian-lite's field order: the declared order, primitives and java.lang types first,
    // then reversed.
    Value::object(
        "io.switchman.peers.User",
        vec![
            (
                "attributes",
                Value::typed_map(
                    "java.util.LinkedHashMap",
                    attributes.into_iter().map(|(k, v)| (s(k), v)).collect(),
                ),
            ),
            ("tags", Value::list(tags.iter().map(|t| s(t)).collect())),
            ("created", Value::Date(created)),
            ("active", Value::Bool(active)),
            ("score", Value::Double(score)),
            ("age", Value::Int(age)),
            ("name", s(name)),
            ("id", Value::Long(id)),
        ],
    )
}

fn sample_user(id: i64) -> Value {
    user(
        id,
        &format!("u{id}"),
        20 + id as i32,
        id as f64 * 1.5,
        id % 2 == 0,
        1_700_000_000_000 + id,
        &[&format!("t{id}")],
        vec![("n", Value::Int(id as i32))],
    )
}

fn exception_check(v: &Value, want: JavaException, want_json: Json) -> Result<(), String> {
    let got = java_exception(v).ok_or_else(|| format!("not a Throwable: {v:?}"))?;
    if got != want {
        return Err(format!("java_exception: got {got:?}, want {want:?}"));
    }
    let j = to_json(v);
    if j != want_json {
        return Err(format!("to_json: got {j}, want {want_json}"));
    }
    Ok(())
}

fn expected() -> Vec<(&'static str, Expect)> {
    use Expect::Value as V;
    let mut t: Vec<(&'static str, Expect)> = vec![
        ("null", V(Value::Null)),
        ("bool_true", V(Value::Bool(true))),
        ("bool_false", V(Value::Bool(false))),
        ("int_0", V(Value::Int(0))),
        ("int_m16", V(Value::Int(-16))),
        ("int_47", V(Value::Int(47))),
        ("int_48", V(Value::Int(48))),
        ("int_m2048", V(Value::Int(-2048))),
        ("int_2047", V(Value::Int(2047))),
        ("int_m262144", V(Value::Int(-262_144))),
        ("int_262143", V(Value::Int(262_143))),
        ("int_262144", V(Value::Int(262_144))),
        ("int_max", V(Value::Int(i32::MAX))),
        ("int_min", V(Value::Int(i32::MIN))),
        ("long_0", V(Value::Long(0))),
        ("long_m8", V(Value::Long(-8))),
        ("long_15", V(Value::Long(15))),
        ("long_16", V(Value::Long(16))),
        ("long_m2048", V(Value::Long(-2048))),
        ("long_2047", V(Value::Long(2047))),
        ("long_m262144", V(Value::Long(-262_144))),
        ("long_262143", V(Value::Long(262_143))),
        ("long_int32", V(Value::Long(2_147_483_647))),
        ("long_2p31", V(Value::Long(2_147_483_648))),
        ("long_max", V(Value::Long(i64::MAX))),
        ("long_min", V(Value::Long(i64::MIN))),
        ("double_0", V(Value::Double(0.0))),
        ("double_1", V(Value::Double(1.0))),
        ("double_m128", V(Value::Double(-128.0))),
        ("double_127", V(Value::Double(127.0))),
        ("double_m32768", V(Value::Double(-32768.0))),
        ("double_32767", V(Value::Double(32767.0))),
        ("double_12_25", V(Value::Double(12.25))),
        ("double_pi", V(Value::Double(std::f64::consts::PI))),
        ("double_0_001", V(Value::Double(0.001))),
        ("double_1e300", V(Value::Double(1e300))),
        ("string_empty", V(s(""))),
        ("string_hello", V(s("hello"))),
        ("string_31", V(s(&"a".repeat(31)))),
        ("string_32", V(s(&"a".repeat(32)))),
        ("string_1023", V(s(&"b".repeat(1023)))),
        ("string_1024", V(s(&"b".repeat(1024)))),
        ("string_70000", V(s(&"c".repeat(70000)))),
        ("string_unicode", V(s("héllo wörld 中文"))),
        ("string_emoji", V(s("😀 x 𝄞"))),
        ("binary_empty", V(Value::Binary(vec![]))),
        ("binary_3", V(Value::Binary(vec![1, 2, 3]))),
        (
            "binary_20000",
            V(Value::Binary((0..20000).map(|i| (i % 251) as u8).collect())),
        ),
        ("date_ms", V(Value::Date(1_700_000_000_123))),
        ("date_minute", V(Value::Date(1_700_000_040_000))),
        (
            "list_untyped",
            V(Value::list(vec![Value::Int(1), s("a"), Value::Bool(true)])),
        ),
        ("list_empty", V(Value::list(vec![]))),
        (
            "list_int_array",
            V(Value::typed_list(
                "[int",
                vec![Value::Int(1), Value::Int(2), Value::Int(3)],
            )),
        ),
        (
            "list_string_array",
            V(Value::typed_list("[string", vec![s("a"), s("b")])),
        ),
        ("list_20", V(Value::list((0..20).map(Value::Int).collect()))),
        (
            "list_nested",
            V(Value::list(vec![
                Value::list(vec![Value::Int(1), Value::Int(2)]),
                Value::list(vec![s("x")]),
            ])),
        ),
        (
            "list_linked",
            V(Value::typed_list(
                "java.util.LinkedList",
                vec![s("p"), s("q")],
            )),
        ),
        (
            "map_untyped",
            V(Value::typed_map(
                "java.util.LinkedHashMap",
                vec![(s("a"), Value::Int(1)), (s("b"), s("x"))],
            )),
        ),
        ("map_empty", V(Value::map(vec![]))),
        (
            "map_int_keys",
            V(Value::typed_map(
                "java.util.LinkedHashMap",
                vec![(Value::Int(1), s("one")), (Value::Int(2), s("two"))],
            )),
        ),
        (
            "map_treemap",
            V(Value::typed_map(
                "java.util.TreeMap",
                vec![(s("k"), s("v"))],
            )),
        ),
        (
            "user",
            V(user(
                7,
                "Ann",
                33,
                4.5,
                true,
                1_700_000_000_123,
                &["a", "b"],
                vec![("level", Value::Int(3)), ("vip", Value::Bool(true))],
            )),
        ),
        (
            "user_list",
            V(Value::list(vec![sample_user(1), sample_user(2)])),
        ),
        (
            "same_list_twice",
            Expect::EncodedAs(
                Value::list(vec![Value::list(vec![s("r")]), Value::list(vec![s("r")])]),
                Value::list(vec![Value::list(vec![s("r")]), Value::Ref(1)]),
            ),
        ),
        (
            "enum_red",
            V(Value::object(
                "io.switchman.peers.Color",
                vec![("name", s("RED"))],
            )),
        ),
        (
            "big_decimal",
            V(from_json(&json!("12345.6789"), Some("java.math.BigDecimal")).unwrap()),
        ),
        (
            "big_integer",
            V(from_json(
                &json!("123456789012345678901234567890"),
                Some("java.math.BigInteger"),
            )
            .unwrap()),
        ),
        (
            "exception_demo",
            Expect::Check(|v| {
                exception_check(
                    v,
                    JavaException {
                        class: "io.switchman.peers.DemoException".into(),
                        message: Some("boom".into()),
                        cause: None,
                    },
                    json!({"class": "io.switchman.peers.DemoException", "message": "boom", "cause": null}),
                )
            }),
        ),
        (
            "exception_cause",
            Expect::Check(|v| {
                exception_check(
                    v,
                    JavaException {
                        class: "java.lang.RuntimeException".into(),
                        message: Some("outer".into()),
                        cause: Some(Box::new(JavaException {
                            class: "java.lang.IllegalStateException".into(),
                            message: Some("inner".into()),
                            cause: None,
                        })),
                    },
                    json!({
                        "class": "java.lang.RuntimeException",
                        "message": "outer",
                        "cause": {
                            "class": "java.lang.IllegalStateException",
                            "message": "inner",
                            "cause": null
                        }
                    }),
                )
            }),
        ),
    ];
    t.shrink_to_fit();
    t
}

/// Extra JSON checks of some vectors' decoded values.
fn json_of(name: &str) -> Option<Json> {
    Some(match name {
        "big_decimal" => json!("12345.6789"),
        "big_integer" => json!("123456789012345678901234567890"),
        "enum_red" => json!("RED"),
        "date_ms" => json!(1_700_000_000_123_i64),
        "binary_3" => json!("AQID"),
        _ => return None,
    })
}

fn unhex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first differing byte of two encodings, for messages.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let window = |v: &[u8]| hex(&v[i.saturating_sub(4).min(v.len())..(i + 12).min(v.len())]);
    format!(
        "lengths {} and {}, first difference at byte {i}: ...{}... vs ...{}...",
        a.len(),
        b.len(),
        window(a),
        window(b)
    )
}

fn short(v: &Value) -> String {
    let s = format!("{v:?}");
    if s.len() > 300 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(300).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

/// The Java peers' vectors of the typed (serde) mapping table: checked both ways by
/// `integration-tests`' `it::hessian_typed` (into Rust types), not by this `Value`-path table.
/// Any other vector this table does not know is a failure.
const TYPED_ONLY: &[&str] = &[
    "byte_m5",
    "short_1000",
    "float_1_1",
    "char_z",
    "prims",
    "prims_nulls",
    "empty",
    "enum_list",
    "map_variant",
    "set_one",
    "set_abc",
    "derived",
    "generics",
    "generics_nulls",
    "node_chain",
    "list_abc",
    "refs_after_forms",
    "node_self",
    "node_pair",
    "list_self",
    "shared_user",
    "refs_exponential",
];

/// Checks every vector of `json` (`{"vectors": [{"name", "hex"}]}`) whose name the table
/// knows; returns the names checked. Panics listing every disagreement.
fn check_vectors(json: &Json) -> Vec<String> {
    let table = expected();
    let vectors = json["vectors"].as_array().expect("a \"vectors\" array");
    let mut failures = Vec::new();
    let mut checked = Vec::new();
    for vector in vectors {
        let name = vector["name"].as_str().expect("a vector name");
        let Some((_, expect)) = table.iter().find(|(n, _)| *n == name) else {
            if !TYPED_ONLY.contains(&name) {
                failures.push(format!("{name}: no expected value for this vector"));
            }
            continue;
        };
        let bytes = match unhex(vector["hex"].as_str().expect("a vector hex")) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{name}: bad hex: {e}"));
                continue;
            }
        };
        checked.push(name.to_owned());
        let mut dec = Decoder::new(&bytes);
        let decoded = match dec.read() {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: decode: {e}"));
                continue;
            }
        };
        if !dec.is_at_end() {
            failures.push(format!(
                "{name}: {} bytes left after the value",
                bytes.len() - dec.position()
            ));
        }
        let (want, encode) = match expect {
            Expect::Value(v) => (Some(v), Some(v)),
            Expect::EncodedAs(v, e) => (Some(v), Some(e)),
            Expect::Check(f) => {
                if let Err(e) = f(&decoded) {
                    failures.push(format!("{name}: {e}"));
                }
                (None, None)
            }
        };
        if let Some(want) = want
            && &decoded != want
        {
            failures.push(format!(
                "{name}: decoded {}, want {}",
                short(&decoded),
                short(want)
            ));
        }
        if let Some(enc) = encode {
            let mut e = Encoder::new();
            e.write(enc);
            let ours = e.into_bytes();
            if ours != bytes {
                failures.push(format!(
                    "{name}: encoded bytes differ from the vector's: {}",
                    first_difference(&ours, &bytes)
                ));
            }
        }
        if let Some(j) = json_of(name) {
            let got = to_json(&decoded);
            if got != j {
                failures.push(format!("{name}: to_json gave {got}, want {j}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors disagree:\n{}",
        failures.len(),
        vectors.len(),
        failures.join("\n")
    );
    checked
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn load(path: &Path) -> Json {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn handwritten_vectors() {
    let json = load(&vectors_dir().join("handwritten.json"));
    let count = json["vectors"].as_array().map_or(0, Vec::len);
    // Not a test that passes on an empty or truncated file.
    assert!(count >= 40, "handwritten.json has only {count} vectors");
    let checked = check_vectors(&json);
    assert_eq!(checked.len(), count);
}

#[test]
fn java_dubbo_vectors() {
    let path = vectors_dir().join("java-dubbo-3.3.json");
    if !path.exists() {
        eprintln!("{} is not there yet: skipped", path.display());
        return;
    }
    let json = load(&path);
    let checked = check_vectors(&json);
    let missing: Vec<&str> = expected()
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !checked.iter().any(|c| c == n))
        .collect();
    assert!(
        missing.is_empty(),
        "the Java vectors lack {missing:?} (dubbo {})",
        json["dubbo_version"]
    );
}

/// The Java peers' classpath, when `SWITCHMAN_JAVA_PEERS` names their build
/// (`scripts/install-java-peers` prints it: `switchman-java-peers.jar` and `lib/`).
fn java_peers() -> Option<String> {
    let dir = PathBuf::from(std::env::var_os("SWITCHMAN_JAVA_PEERS")?);
    let jar = dir.join("switchman-java-peers.jar");
    assert!(
        jar.exists(),
        "SWITCHMAN_JAVA_PEERS={} has no switchman-java-peers.jar",
        dir.display()
    );
    Some(format!("{}:{}/lib/*", jar.display(), dir.display()))
}

fn run_java(classpath: &str, mode: &str, stdin: Option<String>) -> Json {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("java")
        // The JVM flags of integration-tests/src/java_peer/flags.rs: a quick start, little memory.
        .args([
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Xmx256m",
            "-XX:-UsePerfData",
            "-cp",
            classpath,
            "io.switchman.peers.Main",
            "vectors",
            mode,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java runs");
    let input = stdin.unwrap_or_default();
    let mut pipe = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("java ends");
    writer
        .join()
        .expect("writer")
        .expect("java reads its input");
    assert!(
        out.status.success(),
        "java vectors {mode}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // The JSON document is the last line (logging may come before it).
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("java vectors {mode} printed {text:?}: {e}"))
}

/// With the Java peers built: Java's bytes decode to the expected values, and Java decodes
/// the bytes this crate writes (the expected values, and the re-encoded exceptions) to its own.
#[test]
fn java_peers_agree() {
    let Some(classpath) = java_peers() else {
        eprintln!("SWITCHMAN_JAVA_PEERS is not set: skipped");
        return;
    };
    let theirs = run_java(&classpath, "encode", None);
    let checked = check_vectors(&theirs);
    assert_eq!(checked.len(), expected().len(), "checked {checked:?}");

    let mut ours = Vec::new();
    for (name, expect) in expected() {
        let bytes = match expect {
            Expect::Value(v) | Expect::EncodedAs(_, v) => {
                let mut e = Encoder::new();
                e.write(&v);
                e.into_bytes()
            }
            Expect::Check(_) => {
                // Re-encode what Java wrote, as decoded here.
                let vector = theirs["vectors"]
                    .as_array()
                    .and_then(|vs| vs.iter().find(|v| v["name"] == name))
                    .expect("the vector");
                let java = unhex(vector["hex"].as_str().unwrap()).unwrap();
                let value = Decoder::new(&java).read().unwrap();
                let mut e = Encoder::new();
                e.write(&value);
                e.into_bytes()
            }
        };
        ours.push(json!({"name": name, "hex": hex(&bytes)}));
    }
    let count = ours.len();
    let verdicts = run_java(
        &classpath,
        "decode",
        Some(json!({"vectors": ours}).to_string()),
    );
    let verdicts = verdicts["vectors"].as_array().expect("verdicts");
    assert_eq!(verdicts.len(), count, "one verdict per vector");
    let bad: Vec<String> = verdicts
        .iter()
        .filter(|v| v["equal"] != json!(true))
        .map(|v| v.to_string())
        .collect();
    assert!(
        bad.is_empty(),
        "Java disagrees with our bytes:\n{}",
        bad.join("\n")
    );
}
