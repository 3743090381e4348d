//! The rendering rules, table-driven; expected texts are what Java 17 prints for the object
//! (`String.valueOf`, `HashMap.toString`, `new BigDecimal(s).toString()`, ...).

use serde_json::{Value, json};

use super::*;

fn check(table: &[(Value, Option<&str>, &str)]) {
    for (v, t, want) in table {
        assert_eq!(java_text(v, *t), *want, "{v} as {t:?}");
        // The no-allocation path gives the same text.
        with_java_text(v, *t, |s| {
            assert_eq!(s, *want, "{v} as {t:?} (with_java_text)")
        });
        let mut s = String::new();
        write_java_text(&mut s, v, *t).unwrap();
        assert_eq!(s, *want);
    }
}

fn double(x: f64) -> String {
    let mut s = String::new();
    write_java_double(&mut s, x).unwrap();
    s
}

fn float(x: f32) -> String {
    let mut s = String::new();
    write_java_float(&mut s, x).unwrap();
    s
}

#[test]
fn doubles_and_floats_print_like_java() {
    let doubles: &[(f64, &str)] = &[
        (1.0, "1.0"),
        (1.5, "1.5"),
        (-2.25, "-2.25"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0012, "0.0012"),
        (1e-4, "1.0E-4"),
        (1e7, "1.0E7"),
        (1.234e10, "1.234E10"),
        (9_999_999.0, "9999999.0"),
        (1_234_567.5, "1234567.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "Infinity"),
        (f64::NEG_INFINITY, "-Infinity"),
        (f64::MAX, "1.7976931348623157E308"),
        (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
        // Subnormals whose shortest decimal has one digit: the closest of two digits.
        (f64::from_bits(1), "4.9E-324"),
        // 9.88e-324: "9.9E-324" is closer than "1.0E-323" (what JDK 17 prints).
        (f64::from_bits(2), "9.9E-324"),
        (1e23, "1.0E23"),
        (0.3, "0.3"),
        (4.35, "4.35"),
        // A tie between two shortest decimals: the even one (JDK 19+); Rust picks the upper.
        (1_125_899_906_842_624.0 + 0.25, "1.1258999068426242E15"),
        (1_125_899_906_842_624.0 + 0.75, "1.1258999068426248E15"),
    ];
    for (x, want) in doubles {
        assert_eq!(double(*x), *want, "{x:e}");
    }
    let floats: &[(f32, &str)] = &[
        (1.0, "1.0"),
        (0.1, "0.1"),
        (1e-4, "1.0E-4"),
        (1e10, "1.0E10"),
        (16_777_216.0, "1.6777216E7"),
        (f32::MAX, "3.4028235E38"),
        (f32::from_bits(1), "1.4E-45"),
        // Ties: 2417552.25 is halfway between 2417552.2 and 2417552.3 (JDK 17 agrees here).
        (2_417_552.0 + 0.25, "2417552.2"),
        (341_767.0 + 0.125, "341767.12"),
        (3_812_220.0 + 0.25, "3812220.2"),
        (2_417_552.0 + 0.75, "2417552.8"),
        (-481_145.0 - 0.625, "-481145.62"),
    ];
    for (x, want) in floats {
        assert_eq!(float(*x), *want, "{x:e}");
    }
}

#[test]
fn scalars_untyped() {
    check(&[
        (json!("vip"), None, "vip"),
        (json!(""), None, ""),
        (Value::Null, None, "null"),
        (json!(true), None, "true"),
        (json!(false), Some("java.lang.Object"), "false"),
        (json!(42), None, "42"),
        (json!(-3), None, "-3"),
        // A Long past Integer's range.
        (json!(3_000_000_000i64), None, "3000000000"),
        // Other numbers are Doubles.
        (json!(1.5), None, "1.5"),
        (json!(5.0), None, "5.0"),
        (json!(1e10), None, "1.0E10"),
        (json!(0.001), None, "0.001"),
        (json!(1e-4), None, "1.0E-4"),
        (json!(3.25e21), None, "3.25E21"),
        (json!(123_456_789.0), None, "1.23456789E8"),
        // Past i64: the Hessian mapping sends a Double.
        (json!(u64::MAX), None, "1.8446744073709552E19"),
        (
            json!(12_345_678_901_234_567_890u64),
            None,
            "1.2345678901234567E19",
        ),
    ]);
}

#[test]
fn declared_floating_point() {
    check(&[
        (json!(5), Some("double"), "5.0"),
        (json!(5), Some("java.lang.Double"), "5.0"),
        (json!(5.0), Some("double"), "5.0"),
        (json!(1.5), Some("double"), "1.5"),
        (json!(-0.5), Some("double"), "-0.5"),
        (json!(0.1), Some("double"), "0.1"),
        (json!(1e7), Some("double"), "1.0E7"),
        (json!(9_999_999), Some("double"), "9999999.0"),
        (json!(1e-5), Some("double"), "1.0E-5"),
        (json!(-1000), Some("Double"), "-1000.0"),
        (json!(u64::MAX), Some("double"), "1.8446744073709552E19"),
        // Float.toString: the float's own shortest digits.
        (json!(0.1), Some("float"), "0.1"),
        (json!(1.00000001), Some("float"), "1.0"),
        (json!(1.00000001), Some("double"), "1.00000001"),
        (json!(16_777_217), Some("java.lang.Float"), "1.6777216E7"),
        (json!(3.4028235e38), Some("float"), "3.4028235E38"),
        (json!(1e-4), Some("float"), "1.0E-4"),
        (json!(1e10), Some("float"), "1.0E10"),
        (json!(7), Some("float"), "7.0"),
        // A value a double cannot hold renders untyped.
        (json!("5"), Some("double"), "5"),
        (Value::Null, Some("java.lang.Double"), "null"),
    ]);
}

#[test]
fn declared_integral() {
    check(&[
        (json!(5), Some("int"), "5"),
        (json!(5.0), Some("int"), "5"),
        (json!(5.0), Some("java.lang.Integer"), "5"),
        (json!(-128), Some("byte"), "-128"),
        (json!(-2.0), Some("short"), "-2"),
        (json!(5.0), Some("long"), "5"),
        (json!(1e15), Some("java.lang.Long"), "1000000000000000"),
        (
            json!(9_007_199_254_740_993i64),
            Some("long"),
            "9007199254740993",
        ),
        (
            json!(12_345_678_901_234_567_890u64),
            Some("java.math.BigInteger"),
            "12345678901234567890",
        ),
        (
            json!(1e20),
            Some("java.math.BigInteger"),
            "100000000000000000000",
        ),
        (
            json!(1e40),
            Some("java.math.BigInteger"),
            "10000000000000000303786028427003666890752",
        ),
        (json!("-007"), Some("java.math.BigInteger"), "-7"),
        (json!("+0"), Some("java.math.BigInteger"), "0"),
        // What the type cannot hold renders untyped (Java would fail the call).
        (json!(5.5), Some("int"), "5.5"),
        (json!(200), Some("byte"), "200"),
        (json!(3e9), Some("int"), "3.0E9"),
        (json!(1e19), Some("long"), "1.0E19"),
        (json!("abc"), Some("java.math.BigInteger"), "abc"),
        (json!(true), Some("int"), "true"),
    ]);
}

#[test]
fn declared_big_decimal() {
    let t = Some("java.math.BigDecimal");
    check(&[
        (json!(1.5), t, "1.5"),
        (json!(5), t, "5"),
        (json!(-5), t, "-5"),
        // Of the number's text as serde_json prints it: 1e10 is "10000000000.0", 1e-7 "1e-7".
        (json!(1e10), t, "10000000000.0"),
        (json!(1e-7), t, "1E-7"),
        (json!(1.5e300), t, "1.5E+300"),
        (json!("1.50"), t, "1.50"),
        (json!("1e10"), t, "1E+10"),
        (json!("1E-7"), t, "1E-7"),
        (json!("0.0000001"), t, "1E-7"),
        (json!("-0.000001"), t, "-0.000001"),
        (json!("123.456e2"), t, "12345.6"),
        (json!("0.00"), t, "0.00"),
        (json!("0E+3"), t, "0E+3"),
        (json!("0e-7"), t, "0E-7"),
        (json!("-0"), t, "0"),
        (json!("+5"), t, "5"),
        (json!("00012.30"), t, "12.30"),
        (json!(" 2.5 "), t, "2.5"),
        (json!("1e99999999999"), t, "1e99999999999"),
        (json!("x"), t, "x"),
    ]);
}

#[test]
fn strings_booleans_and_classes() {
    check(&[
        (json!("a b"), Some("java.lang.String"), "a b"),
        (json!("x"), Some("char"), "x"),
        (json!(5), Some("java.lang.String"), "5"),
        (json!(true), Some("boolean"), "true"),
        (json!("true"), Some("java.lang.Boolean"), "true"),
        (Value::Null, Some("int"), "null"),
        // POJOs: compact JSON (Java's Object.toString is Class@hash unless overridden).
        (
            json!({"id": 1, "name": "n\"q"}),
            Some("com.foo.User"),
            r#"{"id":1,"name":"n\"q"}"#,
        ),
        // An enum constant's name; a Date's milliseconds.
        (json!("RED"), Some("com.foo.Color"), "RED"),
        (
            json!(1_700_000_000_000i64),
            Some("java.util.Date"),
            "1700000000000",
        ),
        (
            json!("550e8400-e29b-41d4-a716-446655440000"),
            Some("java.util.UUID"),
            "550e8400-e29b-41d4-a716-446655440000",
        ),
        // Untyped objects naming a class: a POJO, or a typed value.
        (
            json!({"class": "com.foo.User", "id": 1}),
            None,
            r#"{"class":"com.foo.User","id":1}"#,
        ),
        (
            json!({"class": "java.math.BigDecimal", "value": "1.50"}),
            None,
            "1.50",
        ),
        (json!({"class": "java.lang.Long", "value": 5}), None, "5"),
        (
            json!({"class": "java.lang.Long", "value": {"class": "java.lang.Long", "value": 5}}),
            None,
            r#"{"class":"java.lang.Long","value":{"class":"java.lang.Long","value":5}}"#,
        ),
        // A type variable or an unknown java.* type: the JSON decides.
        (json!(5), Some("T"), "5"),
        (json!(1.0), Some("java.util.Optional"), "1.0"),
        (json!("\u{1}\t"), Some("com.foo.Pojo"), "\u{1}\t"),
        (json!(["\u{1}\t"]), Some("com.foo.Pojo"), "[\u{1}\t]"),
        (
            json!({"k": "\u{1}\t\\"}),
            Some("com.foo.Pojo"),
            r#"{"k":"\u0001\t\\"}"#,
        ),
    ]);
}

#[test]
fn collections_and_arrays() {
    check(&[
        (json!(["a", "b"]), Some("java.util.List"), "[a, b]"),
        (json!(["a", "b"]), None, "[a, b]"),
        (json!([]), Some("java.util.ArrayList"), "[]"),
        (
            json!([1, 2.5, null, true, "a b"]),
            Some("java.util.Collection"),
            "[1, 2.5, null, true, a b]",
        ),
        (
            json!([1, 2]),
            Some("java.util.List<java.lang.Double>"),
            "[1.0, 2.0]",
        ),
        (
            json!([1, 2]),
            Some("java.util.List<? extends java.lang.Long>"),
            "[1, 2]",
        ),
        (
            json!([[1], [2, 3]]),
            Some("java.util.List<java.util.List<java.lang.Double>>"),
            "[[1.0], [2.0, 3.0]]",
        ),
        (json!([{"x": "y"}]), Some("java.util.List"), "[{x=y}]"),
        // Arrays render like lists (Java's [Ljava.lang.String;@hash is not reproducible).
        (json!(["a", "b"]), Some("java.lang.String[]"), "[a, b]"),
        (json!(["a", "b"]), Some("[Ljava.lang.String;"), "[a, b]"),
        (json!([1, 2]), Some("double[]"), "[1.0, 2.0]"),
        (json!([1, 2]), Some("[D"), "[1.0, 2.0]"),
        (json!([[1, 2]]), Some("[[I"), "[[1, 2]]"),
        (json!("aGk="), Some("byte[]"), "aGk="),
        // Sets: HashSet order, duplicates dropped.
        (
            json!(["b", "a", "c", "b", "user7", "Aa", "BB"]),
            Some("java.util.Set"),
            "[Aa, BB, a, b, c, user7]",
        ),
        (
            json!([3, 1, 100, -5, 1_099_511_627_776i64, 1]),
            Some("java.util.Set<java.lang.Long>"),
            "[1099511627776, 1, 3, 100, -5]",
        ),
        (
            json!([1.5, 2, -0.0, 0.0, 100.25]),
            Some("java.util.HashSet<java.lang.Double>"),
            "[2.0, -0.0, 0.0, 1.5, 100.25]",
        ),
        // Two Doubles equal as Java objects: 1 and 1.0.
        (
            json!([1, 1.0]),
            Some("java.util.Set<java.lang.Double>"),
            "[1.0]",
        ),
        (
            json!(["b", "a", "b"]),
            Some("java.util.LinkedHashSet"),
            "[b, a]",
        ),
        (
            json!(["b", "a", "b", "C"]),
            Some("java.util.TreeSet"),
            "[C, a, b]",
        ),
        (
            json!([3, 1, 2]),
            Some("java.util.SortedSet<java.lang.Integer>"),
            "[1, 2, 3]",
        ),
        // Mixed classes in a TreeSet do not compare: JSON order.
        (json!([3, "a"]), Some("java.util.TreeSet"), "[3, a]"),
    ]);
}

#[test]
fn maps() {
    let k30: serde_json::Map<String, Value> =
        (0..30).map(|i| (format!("k{i}"), json!(i))).collect();
    let words: serde_json::Map<String, Value> = [
        "user", "order", "Ω", "a b", "", "id", "name", "zone", "x1", "vip",
    ]
    .iter()
    .map(|k| (k.to_string(), json!(1)))
    .collect();
    check(&[
        (
            json!({"banana": 1, "apple": 2, "cherry": 3}),
            Some("java.util.Map"),
            "{banana=1, apple=2, cherry=3}",
        ),
        (
            json!({"banana": 1, "apple": 2, "cherry": 3}),
            None,
            "{banana=1, apple=2, cherry=3}",
        ),
        // 30 keys: two resizes (16 → 32 → 64 buckets).
        (
            Value::Object(k30),
            Some("java.util.HashMap"),
            "{k11=11, k10=10, k13=13, k12=12, k15=15, k14=14, k17=17, k16=16, k19=19, k18=18, k0=0, k1=1, k2=2, k20=20, k3=3, k4=4, k22=22, k5=5, k21=21, k6=6, k24=24, k7=7, k23=23, k8=8, k26=26, k9=9, k25=25, k28=28, k27=27, k29=29}",
        ),
        (
            Value::Object(words),
            None,
            "{=1, a b=1, zone=1, name=1, x1=1, Ω=1, id=1, vip=1, user=1, order=1}",
        ),
        (
            json!({"l": [1, 2], "m": {"x": "y"}}),
            None,
            "{l=[1, 2], m={x=y}}",
        ),
        (json!({}), Some("java.util.Map"), "{}"),
        // Typed keys and values.
        (
            json!({"20": "x", "3": "y", "-1": "z"}),
            Some("java.util.Map<java.lang.Integer, java.lang.String>"),
            "{-1=z, 3=y, 20=x}",
        ),
        (
            json!({"a": 1, "b": 2}),
            Some("java.util.Map<java.lang.String, java.lang.Double>"),
            "{a=1.0, b=2.0}",
        ),
        // Two keys equal as Integers: the first key, the last value ("01" is not a JSON
        // number, so it stays a string, as the Hessian mapping reads it).
        (
            json!({"1": "a", "1.0": "b", "01": "c"}),
            Some("java.util.Map<java.lang.Integer, java.lang.String>"),
            "{01=c, 1=b}",
        ),
        // LinkedHashMap: the JSON object's order; TreeMap: UTF-16 order.
        (
            json!({"b": 1, "a": 2}),
            Some("java.util.LinkedHashMap"),
            "{a=2, b=1}",
        ),
        (
            json!({"b": "1", "a": "2", "C": "3", "é": "4", "😀": "5", "\u{FFFF}": "6"}),
            Some("java.util.TreeMap"),
            "{C=3, a=2, b=1, é=4, 😀=5, \u{FFFF}=6}",
        ),
    ]);
}

#[test]
fn java_hash_codes_of_collections() {
    // Arrays.asList("a","b").hashCode() == 4066, new HashSet<>(..).hashCode() == 195,
    // Map.of("a","b").hashCode() == 3.
    let list = json!(["a", "b"]);
    let set_type = JType::parse("java.util.Set");
    assert_eq!(hash_code(&resolve(&list, JType::Any), 0), Some(4066));
    assert_eq!(hash_code(&resolve(&list, set_type), 0), Some(195));
    assert_eq!(
        hash_code(&resolve(&json!({"a": "b"}), JType::Any), 0),
        Some(3)
    );
    assert_eq!(
        hash_code(&resolve(&json!({"id": 1}), JType::Class), 0),
        None
    );
    // Sets of lists order by the lists' hashes: [a] (128, bucket 0) before [b] (129, bucket 1).
    assert_eq!(
        java_text(&json!([["b"], ["a"]]), Some("java.util.Set")),
        "[[a], [b]]"
    );
}

#[test]
fn bounds_cut_deterministically() {
    // Deeper than MAX_DEPTH: the rest is "...".
    let mut v = json!("leaf");
    for _ in 0..40 {
        v = json!([v]);
    }
    let s = java_text(&v, None);
    assert_eq!(
        s,
        format!("{}...{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH))
    );
    let mut o = json!(1);
    for _ in 0..40 {
        o = json!({ "k": o });
    }
    let s = java_text(&o, Some("com.foo.Pojo"));
    assert!(s.ends_with(&format!("...{}", "}".repeat(MAX_DEPTH))), "{s}");
    // Longer than MAX_TEXT: cut at a character boundary, then "...".
    let big = Value::Array(vec![json!("Ω".repeat(1000)); 100]);
    let s = java_text(&big, None);
    assert_eq!(s.len(), MAX_TEXT - 1 + ELLIPSIS.len());
    assert!(s.ends_with(ELLIPSIS));
    assert_eq!(s, java_text(&big, None));
    with_java_text(&big, None, |t| assert_eq!(t, s));
    // A string argument itself is never cut.
    let long = json!("x".repeat(MAX_TEXT * 2));
    assert_eq!(java_text(&long, None).len(), MAX_TEXT * 2);
    assert_eq!(java_text(&long, Some("com.foo.Enum")).len(), MAX_TEXT * 2);
}

#[test]
fn a_failing_writer_is_an_error() {
    struct Full;
    impl fmt::Write for Full {
        fn write_str(&mut self, _: &str) -> fmt::Result {
            Err(fmt::Error)
        }
    }
    assert!(write_java_text(&mut Full, &json!(5), Some("double")).is_err());
    assert!(write_java_text(&mut Full, &json!([1]), None).is_err());
}

fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-c0-9.eE+-]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map("[a-c0-9]{0,3}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    /// Any JSON under any declared type renders without panicking, the same every time, and
    /// the allocation-free path agrees.
    #[test]
    fn any_value_any_type(v in arb_json(), t in proptest::sample::select(vec![
        "", "int", "long", "double", "float", "byte", "java.math.BigDecimal",
        "java.math.BigInteger", "java.lang.String", "boolean", "java.util.List",
        "java.util.Set", "java.util.TreeSet", "java.util.LinkedHashSet", "java.util.Map",
        "java.util.TreeMap", "java.util.Map<java.lang.Long, java.util.Set<java.lang.Double>>",
        "java.util.List<java.util.Map<java.lang.Integer, java.lang.Float>>", "int[]",
        "[[Ljava.lang.Double;", "com.foo.User", "java.util.Date", "java.util.Set<", "<>",
    ])) {
        let ty = (!t.is_empty()).then_some(t);
        let a = java_text(&v, ty);
        proptest::prop_assert_eq!(&a, &java_text(&v, ty));
        with_java_text(&v, ty, |s| assert_eq!(s, a));
        proptest::prop_assert!(a.len() <= MAX_TEXT + ELLIPSIS.len());
    }
}

proptest::proptest! {
    /// The allocation-free order of small maps is the simulated `HashMap`'s (keys drawn from a
    /// small alphabet collide in buckets often).
    #[test]
    fn small_maps_order_like_the_simulation(
        m in proptest::collection::btree_map("[a-dA-D]{0,3}", proptest::strategy::Just(json!(0)), 0..=12)
    ) {
        let m: serde_json::Map<String, Value> = m.into_iter().collect();
        let hashes: Vec<i32> = m.keys().map(|k| order::string_hash(k)).collect();
        let want: Vec<usize> = order::hash_order(&hashes, |_, _| false)
            .pairs
            .into_iter()
            .map(|p| p.0)
            .collect();
        let keys: Vec<&String> = m.keys().collect();
        match small_hash_order(&m) {
            Some((slots, n)) => {
                let got: Vec<usize> = slots[..n]
                    .iter()
                    .map(|s| keys.iter().position(|k| *k == s.1.unwrap().0).unwrap())
                    .collect();
                proptest::prop_assert_eq!(got, want);
            }
            // Only when 9 keys share a bucket.
            None => proptest::prop_assert!(m.len() >= 9),
        }
    }
}
