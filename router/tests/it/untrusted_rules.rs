//! Rule text is untrusted input (it comes from a registry's config centre): the proptest
//! versions of the fuzz targets `fuzz/fuzz_targets/{condition_rule,rule_yaml}.rs`, and affinity
//! rules (v3.1). Any text is accepted or rejected with an error naming the key, never a panic,
//! and an accepted rule builds a route table whose answers name only real instances.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_router::{ConsumerInfo, MAX_RULE_BYTES, Route, RouterChain};

fn instances() -> Vec<Arc<Instance>> {
    [
        ("10.0.0.1", 20880, Some("gray"), Some("hz")),
        ("10.0.0.2", 20880, None, Some("sh")),
        ("10.0.0.3", 8080, Some("blue"), None),
        ("192.168.1.9", 20881, Some("gray"), Some("hz")),
    ]
    .into_iter()
    .map(|(host, port, tag, zone)| {
        let mut b = Instance::builder(host, port)
            .service(ServiceKey::new("com.foo.Bar"))
            .param("application", "demo");
        if let Some(t) = tag {
            b = b.tag(t);
        }
        if let Some(z) = zone {
            b = b.zone(z);
        }
        Arc::new(b.build())
    })
    .collect()
}

/// Parses `text` under `key`; when accepted, routes a few calls and checks every answer.
fn check(key: &str, text: &str) -> Result<(), TestCaseError> {
    let chain = match RouterChain::new().with_rule(key, text) {
        Ok(c) => c,
        Err(e) => {
            prop_assert!(
                e.to_string().contains(key),
                "the error names the key: {}",
                e
            );
            return Ok(());
        }
    };
    let list = instances();
    let table = chain.build(&list, &ConsumerInfo::new("10.0.0.9", "shop"));
    let mut rng = fastrand::Rng::with_seed(7);
    for inv in [
        Invocation::new("sayHello"),
        Invocation::new("getUser").with_args(vec![json!(1), json!("x")]),
        Invocation::new("sayHello").with_attachment("dubbo.tag", "gray"),
    ] {
        let members: Vec<u32> = match table.route(&inv, &mut rng) {
            Route::Subset(k) => table.subsets()[k].to_vec(),
            Route::Computed(s) => s.to_vec(),
            Route::Forbidden(_) => Vec::new(),
            other => panic!("an outcome this test does not know: {other:?}"),
        };
        for i in members {
            prop_assert!(
                (i as usize) < list.len(),
                "member {} of {} instances",
                i,
                list.len()
            );
        }
    }
    Ok(())
}

/// Condition-rule text made of the grammar's own pieces, so most cases get past the lexer.
fn condition_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("host".to_string()),
        Just("method".to_string()),
        Just("arguments[0]".to_string()),
        Just("arguments[".to_string()),
        Just("application".to_string()),
        Just("$host".to_string()),
        Just(" = ".to_string()),
        Just(" != ".to_string()),
        Just(" => ".to_string()),
        Just("=>".to_string()),
        Just(" & ".to_string()),
        Just(",".to_string()),
        Just("*".to_string()),
        Just("10.0.0.*".to_string()),
        "[a-zA-Z0-9.*$]{1,8}",
        "[ -~]{1,6}",
    ];
    proptest::collection::vec(piece, 0..14).prop_map(|p| p.concat())
}

/// YAML rule documents made of real keys and values in random order and nesting.
fn rule_yaml() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("configVersion: v3.0\n".to_string()),
        Just("configVersion: v3.1\n".to_string()),
        Just("configVersion: 3\n".to_string()),
        Just("scope: service\n".to_string()),
        Just("scope: application\n".to_string()),
        Just("key: com.foo.Bar\n".to_string()),
        Just("key: demo\n".to_string()),
        Just("enabled: true\n".to_string()),
        Just("force: false\n".to_string()),
        Just("runtime: yes\n".to_string()),
        Just("priority: 3\n".to_string()),
        Just("conditions:\n".to_string()),
        Just("  - method = sayHello => host = 10.0.0.1\n".to_string()),
        Just("  - => host != 10.0.0.*\n".to_string()),
        Just("  - from:\n      match: method=sayHello\n    to:\n      - match: host=10.0.0.2\n        weight: 50\n".to_string()),
        Just("tags:\n".to_string()),
        Just("  - name: gray\n    addresses: [10.0.0.1:20880, \"192.168.1.9\"]\n".to_string()),
        Just("  - name: blue\n    match:\n      - key: zone\n        value:\n          exact: hz\n".to_string()),
        Just("    ratio: 120\n".to_string()),
        Just("- \n".to_string()),
        Just("{}\n".to_string()),
        Just("[\n".to_string()),
        "[a-z]{1,6}: [ -~]{0,12}\n",
        "  [a-z]{1,6}:\n",
    ];
    proptest::collection::vec(line, 0..10).prop_map(|l| l.concat())
}

/// Tag rules: real headers, a `tags:` list of real and broken entries, optional junk.
fn tag_yaml() -> impl Strategy<Value = String> {
    let header = proptest::sample::subsequence(
        vec![
            "configVersion: v3.0\n",
            "key: demo\n",
            "enabled: true\n",
            "force: false\n",
            "runtime: true\n",
            "scope: service\n",
        ],
        0..=6,
    );
    let entry = prop_oneof![
        Just("  - name: gray\n    addresses: [10.0.0.1:20880, \"192.168.1.9\"]\n".to_string()),
        Just("  - name: blue\n    addresses: []\n".to_string()),
        Just("  - name: hz\n    match:\n      - key: zone\n        value:\n          exact: hz\n".to_string()),
        Just("  - name: x\n    match:\n      - key: application\n        value:\n          wildcard: \"de*\"\n".to_string()),
        Just("  - name: \n".to_string()),
        Just("  - addresses: [1]\n".to_string()),
        "  - name: [a-z*]{1,5}\n    addresses: \\[[0-9.:*, ]{0,20}\\]\n",
    ];
    let junk = prop_oneof![
        Just(String::new()),
        Just(String::new()),
        "[a-z]{1,6}: [ -~]{0,12}\n",
    ];
    (header, proptest::collection::vec(entry, 0..4), junk)
        .prop_map(|(h, e, j)| format!("{}tags:\n{}{j}", h.concat(), e.concat()))
}

/// Affinity rules (v3.1): real headers, an `affinityAware` block with real and broken keys and
/// ratios, optional junk.
fn affinity_yaml() -> impl Strategy<Value = String> {
    let header = proptest::sample::subsequence(
        vec![
            "configVersion: v3.1\n",
            "scope: service\n",
            "key: com.foo.Bar\n",
            "enabled: true\n",
            "runtime: false\n",
        ],
        0..=5,
    );
    let aware_key = prop_oneof![
        Just("  key: zone\n".to_string()),
        Just("  key: application\n".to_string()),
        Just("  key: \n".to_string()),
        Just("  key: [a]\n".to_string()),
        "  key: [a-z.]{1,8}\n",
        Just(String::new()),
    ];
    let ratio = prop_oneof![
        Just("  ratio: 0\n".to_string()),
        Just("  ratio: 50\n".to_string()),
        Just("  ratio: 100\n".to_string()),
        Just("  ratio: 100.5\n".to_string()),
        Just("  ratio: -1\n".to_string()),
        Just("  ratio: .nan\n".to_string()),
        Just("  ratio: {}\n".to_string()),
        "  ratio: [0-9.e+-]{1,6}\n",
        Just(String::new()),
    ];
    let junk = prop_oneof![
        Just(String::new()),
        Just(String::new()),
        "[a-z]{1,6}: [ -~]{0,12}\n",
    ];
    (header, aware_key, ratio, junk)
        .prop_map(|(h, k, r, j)| format!("{}affinityAware:\n{k}{r}{j}", h.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn affinity_rules_are_accepted_or_rejected_never_a_panic(text in affinity_yaml()) {
        check("com.foo.Bar.affinity-router", &text)?;
        check("demo.affinity-router", &text)?;
    }

    #[test]
    fn condition_text_is_accepted_or_rejected_never_a_panic(text in condition_text()) {
        check("com.foo.Bar.condition-router", &text)?;
    }

    #[test]
    fn arbitrary_text_is_accepted_or_rejected_never_a_panic(text in any::<String>()) {
        check("com.foo.Bar.condition-router", &text)?;
        check("demo.tag-router", &text)?;
    }

    #[test]
    fn tag_rules_are_accepted_or_rejected_never_a_panic(text in tag_yaml()) {
        check("demo.tag-router", &text)?;
    }

    #[test]
    fn yaml_rules_are_accepted_or_rejected_never_a_panic(text in rule_yaml()) {
        check("demo.tag-router", &text)?;
        check("com.foo.Bar.condition-router", &text)?;
        check("demo.condition-router", &text)?;
    }
}

#[test]
fn rule_text_over_the_limit_is_rejected_before_parsing() {
    let text = format!("method = a => host = {}", "1".repeat(MAX_RULE_BYTES));
    let e = RouterChain::new()
        .with_rule("com.foo.Bar.condition-router", &text)
        .unwrap_err()
        .to_string();
    assert!(e.contains("limit"), "{e}");
}

/// The generators reach the parsers' accepting paths (else the properties above would only
/// exercise rejections).
#[test]
fn generators_produce_accepted_rules_too() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let accepted =
        |strategy: &dyn Fn() -> BoxedStrategy<String>, key: &str, runner: &mut TestRunner| {
            (0..400)
                .filter(|_| {
                    let text = strategy().new_tree(runner).unwrap().current();
                    RouterChain::new().with_rule(key, &text).is_ok()
                })
                .count()
        };
    let cond = accepted(
        &|| condition_text().boxed(),
        "com.foo.Bar.condition-router",
        &mut runner,
    );
    let tag = accepted(&|| tag_yaml().boxed(), "demo.tag-router", &mut runner);
    let yaml = accepted(
        &|| rule_yaml().boxed(),
        "demo.condition-router",
        &mut runner,
    );
    let affinity = accepted(
        &|| affinity_yaml().boxed(),
        "com.foo.Bar.affinity-router",
        &mut runner,
    );
    eprintln!(
        "accepted of 400: condition text {cond}, tag YAML {tag}, condition YAML {yaml}, affinity YAML {affinity}"
    );
    assert!(
        cond >= 20 && tag >= 20 && yaml >= 20 && affinity >= 20,
        "{cond} {tag} {yaml} {affinity}"
    );
}
