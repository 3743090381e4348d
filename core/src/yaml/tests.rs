use super::*;

/// `x: &a [0,0,…n]` and `y: [*a,*a,…m]`: n×m nodes from about `size` bytes of text (valid
/// YAML around a valid condition rule).
pub(crate) fn alias_bomb(size: usize) -> String {
    let head =
        "scope: service\nkey: demo.Greeter\nconditions:\n  - method = sayHello => host = 1.2.3.4\n";
    let room = size.saturating_sub(head.len() + 20);
    let n = room / 4;
    let m = room / 6;
    format!(
        "{head}x: &a [{}]\ny: [{}]\n",
        vec!["0"; n].join(","),
        vec!["*a"; m].join(",")
    )
}

fn value(text: &str) -> Value {
    from_str::<Value>(text, "test").unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

#[test]
fn scalars_read_as_yaml_1_2_core_schema() {
    let cases: &[(&str, Value)] = &[
        ("true", Value::Bool(true)),
        ("False", Value::Bool(false)),
        ("TRUE", Value::Bool(true)),
        ("yes", Value::String("yes".into())),
        ("on", Value::String("on".into())),
        ("n", Value::String("n".into())),
        ("~", Value::Null),
        ("null", Value::Null),
        ("", Value::Null),
        ("1", Value::Number(1u64.into())),
        ("-1", Value::Number((-1i64).into())),
        ("1.0", Value::Number(1.0f64.into())),
        ("0x1F", Value::Number(31u64.into())),
        ("010", Value::String("010".into())),
        ("1_000", Value::String("1_000".into())),
        (".inf", Value::String(".inf".into())),
        ("'*'", Value::String("*".into())),
        ("\"1\"", Value::String("1".into())),
        ("1.2.3.4", Value::String("1.2.3.4".into())),
        ("!foo bar", Value::String("bar".into())),
        (
            "method = sayHello => host = 1.2.3.4",
            Value::String("method = sayHello => host = 1.2.3.4".into()),
        ),
    ];
    for (text, want) in cases {
        let doc = value(&format!("v: {text}\n"));
        assert_eq!(doc.get("v"), Some(want), "{text}");
    }
    assert_eq!(Number::from(1.0f64).to_string(), "1.0");
    assert_eq!(Number::from(-3i64).to_string(), "-3");
    assert_eq!(value("v: 1.5\n").get("v").unwrap().to_string(), "1.5");
}

#[test]
fn a_dubbo_rule_reads_in_document_order() {
    let doc = value(
        "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nforce: false\nenabled: true\nruntime: true\npriority: 1\nconditions:\n  - method = sayHello => host = 1.2.3.4\n  - '=> host != 1.2.3.5'\n",
    );
    let m = doc.as_mapping().unwrap();
    let keys: Vec<_> = m.iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "configVersion",
            "scope",
            "key",
            "force",
            "enabled",
            "runtime",
            "priority",
            "conditions"
        ]
    );
    assert_eq!(m.get("force"), Some(&Value::Bool(false)));
    assert_eq!(m.get("priority").and_then(Value::as_i64), Some(1));
    assert_eq!(
        m.get("conditions").and_then(Value::as_sequence).unwrap()[1],
        Value::String("=> host != 1.2.3.5".into())
    );
    assert!(!m.contains_key("tags"));
    // Non-string keys stay what they are.
    let odd = value("1: x\ntrue: y\n");
    let keys: Vec<_> = odd
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(keys, [Value::Number(1u64.into()), Value::Bool(true)]);
    // Merge keys merge, as SnakeYAML does.
    let merged = value("base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n");
    assert_eq!(
        merged.get("d").and_then(|d| d.get("x")),
        Some(&Value::Number(1u64.into()))
    );
    assert_eq!(value(""), Value::Null);
    assert_eq!(value("# nothing\n"), Value::Null);
}

#[test]
fn bad_documents_are_errors_naming_the_input_and_where() {
    let e = from_str::<Value>("a: [1, 2\n", "rule x").unwrap_err();
    assert_eq!(e.limit(), None);
    assert_eq!(e.what(), "rule x");
    assert_eq!(e.line(), Some(1));
    assert!(e.to_string().starts_with("rule x: "), "{e}");
    assert!(e.to_string().contains("(line 1"), "{e}");
    let e = from_str::<Value>("a: 1\nb: 2\na: 3\n", "rule x").unwrap_err();
    assert!(e.message().contains("duplicate"), "{e}");
    assert_eq!(e.line(), Some(3));
    let e = from_str::<Value>("a: 1\n---\nb: 2\n", "rule x").unwrap_err();
    assert!(e.message().contains("multiple"), "{e}");
    // The message never carries control characters from the text.
    let e = from_str::<Value>("\"a\u{1b}[31m\": 1\n\"a\u{1b}[31m\": 2\n", "r").unwrap_err();
    assert!(!e.to_string().chars().any(char::is_control), "{e:?}");
    let into: crate::Error = e.into();
    assert_eq!(into.kind(), crate::ErrorKind::BadConfig);
}

#[test]
fn alias_bombs_are_refused_at_the_node_limit() {
    for size in [5 * 1024, 10 * 1024, 64 * 1024] {
        let bomb = alias_bomb(size);
        assert!(bomb.len() <= size, "{}", bomb.len());
        let e =
            from_str::<Value>(&bomb, "condition rule demo.Greeter.condition-router").unwrap_err();
        assert_eq!(e.limit(), Some(Limit::Nodes), "{size}: {e}");
        assert!(
            e.to_string().starts_with(
                "condition rule demo.Greeter.condition-router: over the YAML node limit: more than 100000 nodes"
            ),
            "{e}"
        );
        assert!(e.line().is_some(), "{e}");
    }
    // The same shape within the limit is an ordinary document.
    let small = value("x: &a [0,0,0]\ny: [*a,*a]\n");
    assert_eq!(
        small.get("y").and_then(Value::as_sequence).map(Vec::len),
        Some(2)
    );
}

#[test]
fn nested_aliases_are_refused_at_the_node_limit() {
    // Nine levels of ten: 10^9 nodes from 480 bytes.
    let mut laughs = String::from("a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(",");
        laughs += &format!("a{i}: &a{i} [{refs}]\n");
    }
    let e = from_str::<Value>(&laughs, "t").unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Nodes), "{e}");
    // Through typed targets too, not only Value.
    let e = from_str::<std::collections::BTreeMap<String, serde_json::Value>>(&laughs, "t")
        .unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Nodes), "{e}");
    // A small limit is a small limit.
    let tight = Limits {
        max_nodes: 10,
        ..Limits::DEFAULT
    };
    let e = from_str_with::<Value>("[1,2,3,4,5,6,7,8,9,10,11]", "t", &tight).unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Nodes), "{e}");
    assert!(from_str_with::<Value>("[1,2,3]", "t", &tight).is_ok());
}

#[test]
fn depth_is_bounded_with_aliases_expanded() {
    let deep = format!("a: {}x{}\n", "[".repeat(70), "]".repeat(70));
    let e = from_str::<Value>(&deep, "t").unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Depth), "{e}");
    assert!(e.message().contains("depth limit"), "{e}");
    let ok = format!("a: {}x{}\n", "[".repeat(60), "]".repeat(60));
    assert!(from_str::<Value>(&ok, "t").is_ok());
    // Each level shallow, the expansion deep: a chain of anchors each wrapping the last.
    let mut chain = String::from("a0: &a0 x\n");
    for i in 1..200 {
        chain += &format!("a{i}: &a{i} [*a{}]\n", i - 1);
    }
    let e = from_str::<Value>(&chain, "t").unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Depth), "{e}");
}

#[test]
fn repeated_long_text_is_bounded() {
    let long = "x".repeat(100 * 1024);
    let doc = format!("a: &a {long}\nb: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n");
    let e = from_str::<Value>(&doc, "t").unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Text), "{e}");
    // Once is fine.
    assert!(from_str::<Value>(&format!("a: &a {long}\nb: [*a]\n"), "t").is_ok());
}

#[test]
fn size_is_checked_before_parsing() {
    let big = format!("a: {}\n", "x".repeat(MAX_BYTES));
    let e = from_str::<Value>(&big, "migration rule").unwrap_err();
    assert_eq!(e.limit(), Some(Limit::Bytes));
    assert!(
        e.to_string()
            .starts_with("migration rule: over the YAML size limit"),
        "{e}"
    );
    let larger = Limits {
        max_bytes: 2 * MAX_BYTES,
        ..Limits::DEFAULT
    };
    assert!(from_str_with::<Value>(&big, "t", &larger).is_ok());
}

#[test]
fn many_aliases_of_one_anchor_are_fine_within_the_limit() {
    let mut doc = String::from("common: &c {zone: a}\nitems:\n");
    for i in 0..500 {
        doc += &format!("  - {{id: {i}, meta: *c}}\n");
    }
    let v = value(&doc);
    assert_eq!(
        v.get("items").and_then(Value::as_sequence).map(Vec::len),
        Some(500)
    );
}

#[derive(Debug, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Record {
    address: String,
    #[serde(default)]
    weight: Option<Value>,
    #[serde(default, alias = "interface")]
    service: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
}

#[test]
fn values_read_back_as_typed_records() {
    let v = value("address: 1.2.3.4:80\nweight: 5\ninterface: demo.Greeter\ntags: [a, b]\n");
    let r: Record = from_value(v).unwrap();
    assert_eq!(
        r,
        Record {
            address: "1.2.3.4:80".into(),
            weight: Some(Value::Number(5u64.into())),
            service: Some("demo.Greeter".into()),
            tags: vec!["a".into(), "b".into()],
        }
    );
    let e = from_value::<Record>(value("address: a:1\ncolour: red\n")).unwrap_err();
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = from_value::<Record>(value("weight: 1\n")).unwrap_err();
    assert!(e.contains("missing field `address`"), "{e}");
    let e = from_value::<Record>(value("address: [1]\n")).unwrap_err();
    assert!(e.contains("invalid type"), "{e}");
}

#[test]
fn values_print_for_messages() {
    let v = value("a: [1, x, 'two words', 1.0, ~, true, '010']\n");
    assert_eq!(
        v.to_string(),
        "{a: [1, x, \"two words\", 1.0, null, true, \"010\"]}"
    );
    assert_eq!(
        format!("{:?}", v.get("a").unwrap().as_sequence().unwrap()[0]),
        "Number(1)"
    );
    assert_eq!(format!("{:?}", Value::String("x".into())), "String(\"x\")");
}
