//! The JSON mapping, both ways, and its errors.

use serde_json::{Value as Json, json};
use switchman_hessian::{
    Decoder, Encoder, JavaException, Value, from_json, java_exception, to_bytes, to_json,
};

fn map(json: Json, t: &str) -> Value {
    from_json(&json, Some(t)).unwrap_or_else(|e| panic!("{json} as {t}: {e}"))
}

fn untyped(json: Json) -> Value {
    from_json(&json, None).unwrap()
}

/// `json` as `t` is an error whose text contains each of `words`.
fn fails(json: Json, t: &str, words: &[&str]) {
    let e = match from_json(&json, Some(t)) {
        Ok(v) => panic!("{json} as {t} gave {v:?}"),
        Err(e) => e.to_string(),
    };
    for w in words {
        assert!(e.contains(w), "{json} as {t}: {e:?} lacks {w:?}");
    }
}

fn s(v: &str) -> Value {
    Value::string(v)
}

#[test]
fn scalars_untyped() {
    assert_eq!(untyped(json!(null)), Value::Null);
    assert_eq!(untyped(json!(true)), Value::Bool(true));
    assert_eq!(untyped(json!(5)), Value::Int(5));
    assert_eq!(untyped(json!(-2147483648_i64)), Value::Int(i32::MIN));
    assert_eq!(untyped(json!(2147483648_i64)), Value::Long(2_147_483_648));
    assert_eq!(untyped(json!(i64::MIN)), Value::Long(i64::MIN));
    assert_eq!(untyped(json!(u64::MAX)), Value::Double(u64::MAX as f64));
    assert_eq!(untyped(json!(1.5)), Value::Double(1.5));
    assert_eq!(untyped(json!("x")), s("x"));
    assert_eq!(
        from_json(&json!(7), Some("java.lang.Object")).unwrap(),
        Value::Int(7)
    );
}

#[test]
fn booleans_typed() {
    assert_eq!(map(json!(false), "boolean"), Value::Bool(false));
    assert_eq!(map(json!(true), "java.lang.Boolean"), Value::Bool(true));
    fails(json!(1), "boolean", &["boolean", "1"]);
    fails(
        json!("true"),
        "java.lang.Boolean",
        &["java.lang.Boolean", "\"true\""],
    );
}

#[test]
fn integers_typed_and_range_checked() {
    assert_eq!(map(json!(5), "int"), Value::Int(5));
    assert_eq!(map(json!(5), "java.lang.Integer"), Value::Int(5));
    assert_eq!(map(json!(3.0), "int"), Value::Int(3));
    assert_eq!(map(json!(-32768), "short"), Value::Int(-32768));
    assert_eq!(map(json!(127), "java.lang.Byte"), Value::Int(127));
    assert_eq!(map(json!(5), "long"), Value::Long(5));
    assert_eq!(
        map(json!(i64::MAX), "java.lang.Long"),
        Value::Long(i64::MAX)
    );
    fails(
        json!(2147483648_i64),
        "int",
        &["out of range", "int", "2147483648"],
    );
    fails(json!(40000), "short", &["out of range", "short"]);
    fails(json!(128), "byte", &["out of range", "byte"]);
    fails(json!(u64::MAX), "long", &["out of range", "long"]);
    fails(json!(1.5), "int", &["int", "whole number", "1.5"]);
    fails(json!(1.5), "long", &["long", "1.5"]);
    fails(json!("5"), "int", &["int", "\"5\""]);
}

#[test]
fn doubles_and_floats() {
    assert_eq!(map(json!(5), "double"), Value::Double(5.0));
    assert_eq!(map(json!(0.1), "java.lang.Double"), Value::Double(0.1));
    // A float is written as Double.parseDouble(String.valueOf(f)).
    assert_eq!(map(json!(0.1), "float"), Value::Double(0.1));
    assert_eq!(map(json!(1.0e-7), "java.lang.Float"), Value::Double(1.0e-7));
    assert_eq!(map(json!(16777217), "float"), Value::Double(16777216.0));
    fails(json!("0.1"), "double", &["double", "number"]);
}

#[test]
fn null_for_primitives_is_an_error() {
    assert_eq!(map(json!(null), "java.lang.Integer"), Value::Null);
    assert_eq!(map(json!(null), "java.lang.String"), Value::Null);
    assert_eq!(map(json!(null), "com.foo.User"), Value::Null);
    for t in [
        "int", "long", "double", "boolean", "char", "short", "byte", "float",
    ] {
        fails(json!(null), t, &[t, "primitive"]);
    }
}

#[test]
fn strings_and_chars() {
    assert_eq!(map(json!("hi"), "java.lang.String"), s("hi"));
    assert_eq!(map(json!("x"), "char"), s("x"));
    assert_eq!(map(json!("中"), "java.lang.Character"), s("中"));
    assert_eq!(map(json!("abc"), "char[]"), s("abc"));
    fails(json!("xy"), "char", &["char", "one"]);
    fails(json!(""), "char", &["char"]);
    // A non-BMP character is two Java chars.
    fails(json!("😀"), "char", &["char"]);
    fails(json!(5), "java.lang.String", &["java.lang.String", "5"]);
}

#[test]
fn dates_from_numbers_only() {
    assert_eq!(
        map(json!(1700000000123_i64), "java.util.Date"),
        Value::Date(1_700_000_000_123)
    );
    fails(
        json!("2024-01-01"),
        "java.util.Date",
        &["java.util.Date", "milliseconds", "2024-01-01"],
    );
    fails(json!(1.5), "java.util.Date", &["java.util.Date"]);
}

#[test]
fn big_decimals_as_hessian_lite_writes_them() {
    let bd = |t: &str| Value::object("java.math.BigDecimal", vec![("value", s(t))]);
    assert_eq!(
        map(json!("12345.6789"), "java.math.BigDecimal"),
        bd("12345.6789")
    );
    assert_eq!(
        map(json!(12345.6789), "java.math.BigDecimal"),
        bd("12345.6789")
    );
    assert_eq!(map(json!(7), "java.math.BigDecimal"), bd("7"));
    // BigDecimal.toString's own form.
    assert_eq!(map(json!("1e3"), "java.math.BigDecimal"), bd("1E+3"));
    assert_eq!(map(json!("0.0000001"), "java.math.BigDecimal"), bd("1E-7"));
    assert_eq!(map(json!(" +1.50 "), "java.math.BigDecimal"), bd("1.50"));
    fails(
        json!("12,5"),
        "java.math.BigDecimal",
        &["BigDecimal", "12,5"],
    );
    fails(json!(true), "java.math.BigDecimal", &["BigDecimal"]);
    // The bytes are Java's: a class of the one field "value", then the instance.
    assert_eq!(
        to_bytes(&bd("1.5")),
        b"C\x14java.math.BigDecimal\x91\x05value\x60\x031.5"
    );
    assert_eq!(to_json(&bd("12345.6789")), json!("12345.6789"));
}

#[test]
fn big_integers_as_hessian_lite_writes_them() {
    let v = map(
        json!("-123456789012345678901234567890"),
        "java.math.BigInteger",
    );
    assert_eq!(v.field("signum"), Some(&Value::Int(-1)));
    assert_eq!(
        v.field("mag"),
        Some(&Value::typed_list(
            "[int",
            vec![
                Value::Int(1),
                Value::Int(0x8ee90ff6_u32 as i32),
                Value::Int(0xc373e0ee_u32 as i32),
                Value::Int(0x4e3f0ad2),
            ]
        ))
    );
    assert_eq!(to_json(&v), json!("-123456789012345678901234567890"));
    let zero = map(json!(0), "java.math.BigInteger");
    assert_eq!(zero.field("signum"), Some(&Value::Int(0)));
    assert_eq!(zero.field("mag"), Some(&Value::typed_list("[int", vec![])));
    assert_eq!(to_json(&zero), json!("0"));
    assert_eq!(
        to_json(&map(json!(u64::MAX), "java.math.BigInteger")),
        json!("18446744073709551615")
    );
    assert_eq!(
        to_json(&map(json!(1e20), "java.math.BigInteger")),
        json!("100000000000000000000")
    );
    fails(json!("1.5"), "java.math.BigInteger", &["BigInteger", "1.5"]);
    fails(json!(1.5), "java.math.BigInteger", &["BigInteger"]);
}

#[test]
fn arrays_are_typed_lists_with_hessians_names() {
    assert_eq!(
        map(json!([1, 2]), "int[]"),
        Value::typed_list("[int", vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(
        map(json!([1, 2]), "[I"),
        Value::typed_list("[int", vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(
        map(json!([1]), "long[]"),
        Value::typed_list("[long", vec![Value::Long(1)])
    );
    assert_eq!(
        map(json!(["a", null]), "java.lang.String[]"),
        Value::typed_list("[string", vec![s("a"), Value::Null])
    );
    assert_eq!(
        map(json!(["a"]), "[Ljava.lang.String;"),
        Value::typed_list("[string", vec![s("a")])
    );
    assert_eq!(
        map(json!([1, "x"]), "java.lang.Object[]"),
        Value::typed_list("[object", vec![Value::Int(1), s("x")])
    );
    assert_eq!(
        map(json!([5]), "java.lang.Integer[]"),
        Value::typed_list("[java.lang.Integer", vec![Value::Int(5)])
    );
    assert_eq!(
        map(json!([0]), "java.util.Date[]"),
        Value::typed_list("[date", vec![Value::Date(0)])
    );
    assert_eq!(
        map(json!([[1], []]), "int[][]"),
        Value::typed_list(
            "[[int",
            vec![
                Value::typed_list("[int", vec![Value::Int(1)]),
                Value::typed_list("[int", vec![])
            ]
        )
    );
    assert_eq!(
        map(json!([{"a": 1}]), "com.foo.X[]"),
        Value::typed_list(
            "[com.foo.X",
            vec![Value::object("com.foo.X", vec![("a", Value::Int(1))])]
        )
    );
    assert_eq!(
        map(json!(["RED"]), "com.foo.Color[]"),
        Value::typed_list(
            "[com.foo.Color",
            vec![Value::object("com.foo.Color", vec![("name", s("RED"))])]
        )
    );
    assert_eq!(
        map(json!([true]), "boolean[]"),
        Value::typed_list("[boolean", vec![Value::Bool(true)])
    );
    fails(json!([1, "x"]), "int[]", &["$[1]", "int", "\"x\""]);
    fails(json!("x"), "int[]", &["int[]", "array"]);
}

#[test]
fn byte_arrays_are_binary() {
    assert_eq!(
        map(json!([1, 255, -1]), "byte[]"),
        Value::Binary(vec![1, 255, 255])
    );
    assert_eq!(map(json!("AQID"), "byte[]"), Value::Binary(vec![1, 2, 3]));
    assert_eq!(map(json!("AQI"), "[B"), Value::Binary(vec![1, 2]));
    fails(json!([256]), "byte[]", &["$[0]", "byte", "256"]);
    fails(json!("@@"), "byte[]", &["byte[]", "base64"]);
    assert_eq!(to_json(&Value::Binary(vec![1, 2, 3])), json!("AQID"));
}

#[test]
fn collections_are_untyped_lists() {
    for t in [
        "java.util.List",
        "java.util.ArrayList",
        "java.util.Collection",
        "java.util.Set",
        "java.util.LinkedList",
        "java.lang.Iterable",
    ] {
        assert_eq!(
            map(json!([1, "a"]), t),
            Value::list(vec![Value::Int(1), s("a")]),
            "{t}"
        );
    }
    // Generic arguments type the elements.
    assert_eq!(
        map(json!([1, 2]), "java.util.List<java.lang.Long>"),
        Value::list(vec![Value::Long(1), Value::Long(2)])
    );
    assert_eq!(
        map(
            json!([[1]]),
            "java.util.List<java.util.List<java.lang.Long>>"
        ),
        Value::list(vec![Value::list(vec![Value::Long(1)])])
    );
    fails(
        json!({"a": 1}),
        "java.util.List",
        &["java.util.List", "array"],
    );
    fails(
        json!([1.5]),
        "java.util.List<java.lang.Long>",
        &["$[0]", "java.lang.Long"],
    );
}

#[test]
fn objects_with_a_class_key_are_objects() {
    // Members in sorted order, as serde_json keeps them with or without `preserve_order`.
    assert_eq!(
        untyped(json!({"age": 3, "class": "com.foo.User", "name": "Ann"})),
        Value::object(
            "com.foo.User",
            vec![("age", Value::Int(3)), ("name", s("Ann"))]
        )
    );
    // Fields are converted untyped.
    assert_eq!(
        untyped(json!({"class": "com.foo.X", "tags": ["a"], "when": 5})),
        Value::object(
            "com.foo.X",
            vec![("tags", Value::list(vec![s("a")])), ("when", Value::Int(5))]
        )
    );
    // A subclass named by the JSON wins over the declared type.
    assert_eq!(
        map(
            json!({"class": "com.foo.Admin", "level": 2}),
            "com.foo.User"
        ),
        Value::object("com.foo.Admin", vec![("level", Value::Int(2))])
    );
    // A "class" that is not a string is an ordinary member.
    assert_eq!(
        untyped(json!({"class": 1})),
        Value::map(vec![(s("class"), Value::Int(1))])
    );
}

#[test]
fn typed_beans_and_enums() {
    assert_eq!(
        map(json!({"id": 1}), "com.foo.User"),
        Value::object("com.foo.User", vec![("id", Value::Int(1))])
    );
    assert_eq!(
        map(json!("RED"), "io.switchman.peers.Color"),
        Value::object("io.switchman.peers.Color", vec![("name", s("RED"))])
    );
    assert_eq!(
        map(
            json!("0f8fad5b-d9cb-469f-a165-70867728950e"),
            "java.util.UUID"
        ),
        Value::object(
            "java.util.UUID",
            vec![("value", s("0f8fad5b-d9cb-469f-a165-70867728950e"))]
        )
    );
    fails(json!(5), "com.foo.User", &["com.foo.User", "object"]);
    fails(json!({"a": 1}), "int", &["int", "object"]);
}

#[test]
fn maps_are_untyped_maps_with_string_keys() {
    let want = Value::map(vec![(s("a"), Value::Int(1))]);
    assert_eq!(untyped(json!({"a": 1})), want);
    for t in [
        "java.util.Map",
        "java.util.HashMap",
        "java.util.LinkedHashMap",
        "java.util.TreeMap",
        "java.util.concurrent.ConcurrentHashMap",
    ] {
        assert_eq!(map(json!({"a": 1}), t), want, "{t}");
    }
    // A map keeps a "class" member as data.
    assert_eq!(
        map(json!({"class": "x"}), "java.util.Map"),
        Value::map(vec![(s("class"), s("x"))])
    );
    // Generic arguments type keys and values.
    assert_eq!(
        map(
            json!({"1": 2}),
            "java.util.Map<java.lang.Integer, java.lang.Long>"
        ),
        Value::map(vec![(Value::Int(1), Value::Long(2))])
    );
    assert_eq!(
        map(json!({"k": [1]}), "java.util.Map<String, int[]>"),
        Value::map(vec![(
            s("k"),
            Value::typed_list("[int", vec![Value::Int(1)])
        )])
    );
    fails(
        json!({"x": 2}),
        "java.util.Map<java.lang.Integer, java.lang.Long>",
        &["$.x", "key", "java.lang.Integer"],
    );
    fails(
        json!({"a": {"b": "c"}}),
        "java.util.Map<String, java.util.Map<String, java.lang.Integer>>",
        &["$.a.b", "java.lang.Integer"],
    );
    fails(json!([1]), "java.util.Map", &["java.util.Map", "object"]);
}

#[test]
fn bad_type_names() {
    for t in [
        "",
        "[",
        "[X",
        "[L;",
        "java.util.List<",
        "java.util.List<a>>",
    ] {
        assert!(from_json(&json!(1), Some(t)).is_err(), "{t:?}");
    }
}

#[test]
fn to_json_of_every_kind() {
    assert_eq!(to_json(&Value::Null), json!(null));
    assert_eq!(to_json(&Value::Bool(true)), json!(true));
    assert_eq!(to_json(&Value::Int(-3)), json!(-3));
    assert_eq!(to_json(&Value::Long(1 << 40)), json!(1_i64 << 40));
    assert_eq!(to_json(&Value::Double(2.5)), json!(2.5));
    assert_eq!(to_json(&Value::Double(f64::NAN)), json!(null));
    assert_eq!(to_json(&Value::Double(f64::INFINITY)), json!(null));
    assert_eq!(to_json(&s("x")), json!("x"));
    assert_eq!(to_json(&Value::Date(5)), json!(5));
    assert_eq!(to_json(&Value::Ref(0)), json!(null));
    assert_eq!(
        to_json(&Value::typed_list("[int", vec![Value::Int(1)])),
        json!([1])
    );
    assert_eq!(
        to_json(&Value::typed_map(
            "java.util.TreeMap",
            vec![
                (s("a"), Value::Int(1)),
                (Value::Int(2), s("b")),
                (Value::Null, Value::Bool(true)),
                (Value::list(vec![Value::Int(1)]), Value::Null),
            ]
        )),
        json!({"a": 1, "2": "b", "null": true, "[1]": null})
    );
    assert_eq!(
        to_json(&Value::object(
            "com.foo.User",
            vec![("name", s("Ann")), ("tags", Value::list(vec![s("t")]))]
        )),
        json!({"class": "com.foo.User", "name": "Ann", "tags": ["t"]})
    );
    // An enum constant (one field, "name") is its name, as Dubbo's PojoUtils gives it.
    assert_eq!(
        to_json(&Value::object("com.foo.Color", vec![("name", s("RED"))])),
        json!("RED")
    );
    assert_eq!(
        to_json(&Value::object("java.util.UUID", vec![("value", s("u"))])),
        json!("u")
    );
}

/// A Throwable as hessian-lite writes one: suppressedExceptions, stackTrace, cause,
/// detailMessage (its field order), the cause `this` as a back reference to itself.
fn throwable(class: &str, message: Option<&str>, cause: Option<Value>, me: usize) -> Value {
    let frame = Value::object(
        "java.lang.StackTraceElement",
        vec![
            ("declaringClass", s("com.foo.Service")),
            ("methodName", s("call")),
            ("fileName", s("Service.java")),
            ("lineNumber", Value::Int(42)),
        ],
    );
    Value::object(
        class,
        vec![
            (
                "suppressedExceptions",
                Value::typed_list("java.util.Collections$EmptyList", vec![]),
            ),
            (
                "stackTrace",
                Value::typed_list("[java.lang.StackTraceElement", vec![frame]),
            ),
            ("cause", cause.unwrap_or(Value::Ref(me))),
            ("detailMessage", message.map_or(Value::Null, s)),
        ],
    )
}

#[test]
fn throwables_give_class_message_and_cause() {
    let inner = throwable("java.lang.IllegalStateException", Some("inner"), None, 4);
    let outer = throwable("java.lang.RuntimeException", Some("outer"), Some(inner), 0);
    // Through the codec: the self-references survive as refs.
    let mut enc = Encoder::new();
    enc.write(&outer);
    let bytes = enc.into_bytes();
    let decoded = Decoder::new(&bytes).read().unwrap();
    assert_eq!(decoded, outer);
    let e = java_exception(&decoded).unwrap();
    assert_eq!(
        e,
        JavaException {
            class: "java.lang.RuntimeException".into(),
            message: Some("outer".into()),
            cause: Some(Box::new(JavaException {
                class: "java.lang.IllegalStateException".into(),
                message: Some("inner".into()),
                cause: None,
            })),
        }
    );
    assert_eq!(e.to_string(), "java.lang.RuntimeException: outer");
    assert_eq!(
        std::error::Error::source(&e).map(|c| c.to_string()),
        Some("java.lang.IllegalStateException: inner".to_owned())
    );
    assert_eq!(
        to_json(&decoded),
        json!({
            "class": "java.lang.RuntimeException",
            "message": "outer",
            "cause": {"class": "java.lang.IllegalStateException", "message": "inner", "cause": null}
        })
    );

    // No message; a business exception's own fields are kept (not the stack trace).
    let mut custom = throwable("com.foo.BizException", None, None, 0);
    if let Value::Object(o) = &mut custom {
        o.fields.insert(0, ("code".into(), Value::Int(7)));
    }
    let e = java_exception(&custom).unwrap();
    assert_eq!(e.to_string(), "com.foo.BizException");
    assert_eq!(
        to_json(&custom),
        json!({"class": "com.foo.BizException", "message": null, "cause": null, "code": 7})
    );

    // A generic call's GenericException names what the provider threw.
    let mut generic = throwable(
        "com.alibaba.dubbo.rpc.service.GenericException",
        Some("com.foo.BizException: no stock"),
        None,
        0,
    );
    if let Value::Object(o) = &mut generic {
        o.fields
            .push(("exceptionClass".into(), s("com.foo.BizException")));
        o.fields.push(("exceptionMessage".into(), s("no stock")));
    }
    let e = java_exception(&generic).unwrap();
    assert_eq!(e.class, "com.foo.BizException");
    assert_eq!(e.message.as_deref(), Some("no stock"));

    // Not throwables.
    assert_eq!(java_exception(&Value::Int(1)), None);
    assert_eq!(
        java_exception(&Value::object("com.foo.User", vec![("name", s("x"))])),
        None
    );
}

#[test]
fn json_round_trips_through_hessian() {
    let cases = [
        (json!({"a": [1, 2.5, "x", null, true]}), None),
        (json!([1, 2, 3]), Some("int[]")),
        (json!("12.50"), Some("java.math.BigDecimal")),
        (json!("-98765432109876543210"), Some("java.math.BigInteger")),
        (json!("GREEN"), Some("io.switchman.peers.Color")),
        (json!("AAEC"), Some("byte[]")),
        (json!(1700000000000_i64), Some("java.util.Date")),
    ];
    for (json, t) in cases {
        let v = from_json(&json, t).unwrap();
        let back = Decoder::new(&to_bytes(&v)).read().unwrap();
        assert_eq!(to_json(&back), json, "{t:?}");
    }
}

#[test]
fn typed_values_where_no_type_is_given() {
    // A bean's fields are converted untyped: {"class", "value"} names the type.
    let v = untyped(json!({
        "class": "com.foo.User",
        "created": {"class": "java.util.Date", "value": 1700000000000_i64},
        "id": {"class": "java.lang.Long", "value": 7},
        "balance": {"class": "java.math.BigDecimal", "value": "1.50"},
        "big": {"class": "java.math.BigInteger", "value": "12"},
    }));
    assert_eq!(v.field("created"), Some(&Value::Date(1_700_000_000_000)));
    assert_eq!(v.field("id"), Some(&Value::Long(7)));
    assert_eq!(
        v.field("balance"),
        Some(&map(json!("1.50"), "java.math.BigDecimal"))
    );
    assert_eq!(
        v.field("big"),
        Some(&map(json!(12), "java.math.BigInteger"))
    );
    let e = from_json(
        &json!({"when": {"class": "java.util.Date", "value": "x"}}),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("$.when.value") && e.contains("java.util.Date"),
        "{e}"
    );
    // Other classes, or more members: an object.
    assert_eq!(
        untyped(json!({"class": "com.foo.X", "value": 1})),
        Value::object("com.foo.X", vec![("value", Value::Int(1))])
    );
}

/// Decimal rendering of `BigInteger` is quadratic in its length, and back references repeat a
/// number for free (a 4 KB reply with 21 copies of one long number took seconds of CPU): one
/// `to_json` renders at most 16 Mi word operations of them, the rest in their Java form
/// (lossless); a number longer than 1024 words is always in its Java form.
#[test]
fn big_integer_rendering_is_bounded_per_value() {
    let long = map(json!("9".repeat(9600)), "java.math.BigInteger");
    let words = long.field("mag").and_then(Value::items).unwrap().len();
    assert!((990..=1000).contains(&words), "{words}");
    let copies = Value::list(vec![long.clone(); 21]);
    let rendered = to_json(&copies);
    let items = rendered.as_array().unwrap();
    let texts = items.iter().filter(|j| j.is_string()).count();
    let budget = 16 * 1024 * 1024;
    assert_eq!(texts, budget / (words * words), "{texts} rendered as text");
    assert_eq!(items[0], json!("9".repeat(9600)));
    for j in &items[texts..] {
        assert_eq!(j["class"], json!("java.math.BigInteger"));
        assert_eq!(j["mag"].as_array().map(Vec::len), Some(words));
    }
    let longer = map(json!("9".repeat(9900)), "java.math.BigInteger");
    assert!(longer.field("mag").and_then(Value::items).unwrap().len() > 1024);
    assert!(
        to_json(&longer).is_object(),
        "over 1024 words: the Java form"
    );
}
