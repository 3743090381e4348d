//! Behaviour of the chain through its public API: each grammar feature and outcome rule.

use std::sync::Arc;

use serde_json::json;
use switchman_core::{Instance, Invocation, Url};
use switchman_router::{ConsumerInfo, Route, RouteTable, RouterChain};

const SVC: &str = "com.foo.Bar::.condition-router";

fn providers(urls: &[&str]) -> Vec<Arc<Instance>> {
    urls.iter()
        .map(|u| Arc::new(Instance::from_url(&Url::parse(u).unwrap()).unwrap()))
        .collect()
}

/// Four providers: two ports, two zones, one tagged `gray`.
fn four() -> Vec<Arc<Instance>> {
    providers(&[
        "dubbo://10.0.0.1:20880/com.foo.Bar?zone=z1&application=prov&weight=10",
        "dubbo://10.0.0.2:20881/com.foo.Bar?zone=z2&application=prov&weight=60",
        "dubbo://10.0.0.3:20880/com.foo.Bar?zone=z1&application=prov&weight=200",
        "tri://10.0.0.4:20881/com.foo.Bar?zone=z2&application=prov&dubbo.tag=gray",
    ])
}

fn consumer() -> ConsumerInfo {
    ConsumerInfo::from_url(
        Url::parse("consumer://10.1.1.1/com.foo.Bar?application=shop&zone=z2").unwrap(),
    )
}

#[derive(Debug, PartialEq, Eq)]
enum Out {
    Keep(Vec<u32>),
    Forbidden(String),
}

fn run(table: &RouteTable, inv: &Invocation) -> Out {
    let mut rng = fastrand::Rng::with_seed(7);
    match table.route(inv, &mut rng) {
        Route::Subset(i) => Out::Keep(table.subsets()[i].to_vec()),
        Route::Computed(s) => Out::Keep(s.to_vec()),
        Route::Forbidden(r) => Out::Forbidden(r.to_string()),
        other => panic!("an outcome this test does not know: {other:?}"),
    }
}

fn route_with(rule: &str, inv: &Invocation) -> Out {
    let chain = RouterChain::new().with_rule(SVC, rule).unwrap();
    run(&chain.build(&four(), &consumer()), inv)
}

fn keep(v: &[u32]) -> Out {
    Out::Keep(v.to_vec())
}

fn call(m: &str) -> Invocation {
    Invocation::new(m)
}

#[test]
fn no_rules_keeps_untagged_providers() {
    let t = RouterChain::new().build(&four(), &consumer());
    assert_eq!(run(&t, &call("x")), keep(&[0, 1, 2]));
    assert_eq!(
        &*t.subsets()[0],
        &[0, 1, 2, 3],
        "subset 0 is every instance"
    );
}

#[test]
fn method_condition() {
    let r = "method = find* => port = 20880";
    assert_eq!(route_with(r, &call("findAll")), keep(&[0, 2]));
    assert_eq!(route_with(r, &call("save")), keep(&[0, 1, 2]));
    // `methods` is the same key in a when.
    assert_eq!(
        route_with("methods = save => port = 20881", &call("save")),
        keep(&[1])
    );
}

#[test]
fn mismatch_and_multiple_values() {
    assert_eq!(
        route_with("method != a,b => zone = z1", &call("c")),
        keep(&[0, 2])
    );
    assert_eq!(
        route_with("method != a,b => zone = z1", &call("a")),
        keep(&[0, 1, 2])
    );
    assert_eq!(
        route_with("=> host = 10.0.0.1,10.0.0.2", &call("a")),
        keep(&[0, 1])
    );
    assert_eq!(
        route_with("=> host != 10.0.0.1,10.0.0.2", &call("a")),
        keep(&[2])
    );
}

#[test]
fn no_arrow_means_then_only_and_true_when() {
    assert_eq!(route_with("zone = z2", &call("a")), keep(&[1]));
    assert_eq!(route_with("true => zone = z2", &call("a")), keep(&[1]));
    assert_eq!(route_with(" => zone = z2", &call("a")), keep(&[1]));
}

#[test]
fn blank_or_false_then_blocks_even_without_force() {
    for r in ["method = a =>", "method = a => false"] {
        match route_with(r, &call("a")) {
            Out::Forbidden(why) => assert!(why.contains(SVC), "{why}"),
            other => panic!("{r}: {other:?}"),
        }
        assert_eq!(route_with(r, &call("b")), keep(&[0, 1, 2]));
    }
}

#[test]
fn empty_result_ignored_unless_forced() {
    let r = "method = a => zone = nowhere";
    assert_eq!(route_with(r, &call("a")), keep(&[0, 1, 2]));
    let forced = format!("configVersion: v3.0\nforce: true\nconditions:\n  - {r}\n");
    assert!(matches!(route_with(&forced, &call("a")), Out::Forbidden(_)));
    // --force on a v2 text rule.
    let chain = RouterChain::new()
        .with_rule(SVC, r)
        .unwrap()
        .with_force(SVC);
    assert!(matches!(
        run(&chain.build(&four(), &consumer()), &call("a")),
        Out::Forbidden(_)
    ));
}

#[test]
fn consumer_keys_in_when() {
    // `host` and `application` in a when are the consumer's.
    assert_eq!(
        route_with("host = 10.1.1.1 => port = 20881", &call("a")),
        keep(&[1])
    );
    assert_eq!(
        route_with("host = 10.9.9.9 => port = 20881", &call("a")),
        keep(&[0, 1, 2])
    );
    assert_eq!(
        route_with("application = shop => port = 20881", &call("a")),
        keep(&[1])
    );
    assert_eq!(
        route_with(
            "consumer.application = sh* => provider.port = 20881",
            &call("a")
        ),
        keep(&[1])
    );
}

#[test]
fn provider_keys_in_then() {
    assert_eq!(
        route_with("=> address = 10.0.0.3:20880", &call("a")),
        keep(&[2])
    );
    assert_eq!(route_with("=> address = *:20881", &call("a")), keep(&[1]));
    assert_eq!(
        route_with("=> protocol = dubbo", &call("a")),
        keep(&[0, 1, 2])
    );
    assert_eq!(
        route_with("=> path = com.foo.Bar & port = 20881", &call("a")),
        keep(&[1])
    );
    assert_eq!(
        route_with("=> application = prov & zone = z1", &call("a")),
        keep(&[0, 2])
    );
}

#[test]
fn dollar_references_consumer_values() {
    assert_eq!(route_with("=> zone = $zone", &call("a")), keep(&[1]));
    // A missing consumer value matches only providers with an empty value: none here, so
    // the rule is ignored.
    assert_eq!(route_with("=> zone = $nope", &call("a")), keep(&[0, 1, 2]));
}

#[test]
fn wildcards_only_last_star_counts() {
    assert_eq!(
        route_with("=> host = 10.0.0.*", &call("a")),
        keep(&[0, 1, 2])
    );
    assert_eq!(route_with("=> host = *.3", &call("a")), keep(&[2]));
    assert_eq!(route_with("=> host = 10.*.2", &call("a")), keep(&[1]));
    // The first `*` is literal.
    assert_eq!(
        route_with("method = f*n* => port = 20881", &call("f*nd")),
        keep(&[1])
    );
    assert_eq!(
        route_with("method = f*n* => port = 20881", &call("find")),
        keep(&[0, 1, 2])
    );
}

#[test]
fn ranges() {
    assert_eq!(route_with("=> weight = 50~100", &call("a")), keep(&[1]));
    assert_eq!(route_with("=> weight = ~60", &call("a")), keep(&[0, 1]));
    assert_eq!(route_with("=> weight = 100~", &call("a")), keep(&[2]));
    assert_eq!(route_with("=> port = 20881~20881", &call("a")), keep(&[1]));
    // A bad range is true in then (keeps providers that have the key)...
    assert_eq!(route_with("=> weight = x~y", &call("a")), keep(&[0, 1, 2]));
    // ... and false in when.
    let inv = call("a").with_args(vec![json!(5)]);
    assert_eq!(
        route_with("arguments[0] = x~y => port = 20881", &inv),
        keep(&[0, 1, 2])
    );
    assert_eq!(
        route_with("arguments[0] = 1~9 => port = 20881", &inv),
        keep(&[1])
    );
}

#[test]
fn arguments() {
    let inv = call("a").with_args(vec![json!("vip"), json!(42), json!(null), json!(true)]);
    for (r, want) in [
        ("arguments[0] = vip => port = 20881", vec![1]),
        ("arguments[1] = 42 => port = 20881", vec![1]),
        ("arguments[1] = 40~50 => port = 20881", vec![1]),
        ("arguments[2] = null => port = 20881", vec![1]),
        ("arguments[3] = true => port = 20881", vec![1]),
        ("arguments[0] = v* => port = 20881", vec![1]),
        ("arguments[0] = x => port = 20881", vec![0, 1, 2]),
        // A missing argument never matches, not even `!=`.
        ("arguments[9] != x => port = 20881", vec![0, 1, 2]),
    ] {
        assert_eq!(route_with(r, &inv), keep(&want), "{r}");
    }
}

#[test]
fn attachments() {
    let inv = call("a").with_attachment("user.level", "gold");
    assert_eq!(
        route_with("attachments[user.level] = gold => port = 20881", &inv),
        keep(&[1])
    );
    assert_eq!(
        route_with("attachments[user.level] != gold => port = 20881", &inv),
        keep(&[0, 1, 2])
    );
    // Missing attachment: no match even for `!=`.
    assert_eq!(
        route_with("attachments[other] != gold => port = 20881", &inv),
        keep(&[0, 1, 2])
    );
}

#[test]
fn missing_provider_key_never_matches_even_not_equal() {
    assert_eq!(route_with("=> nosuch != x", &call("a")), keep(&[0, 1, 2]));
    let forced = "force: true\nconditions:\n  - => nosuch != x\n";
    assert!(matches!(route_with(forced, &call("a")), Out::Forbidden(_)));
}

#[test]
fn same_key_merges() {
    assert_eq!(
        route_with("=> zone = z1 & zone != z1", &call("a")),
        keep(&[0, 1, 2]),
        "mismatch wins: nothing matches, rule ignored"
    );
    assert_eq!(
        route_with(
            "=> port = 20880 & port = 20881 & host != 10.0.0.1",
            &call("a")
        ),
        keep(&[1, 2])
    );
}

#[test]
fn malformed_separator_is_an_error() {
    let e = RouterChain::new()
        .with_rule(SVC, "method = a && b => port = 1")
        .unwrap_err();
    assert_eq!(e.key, SVC);
    assert_eq!(e.line, Some(1));
    assert!(e.to_string().contains(SVC));
}

#[test]
fn enabled_false_disables() {
    let r = "enabled: false\nconditions:\n  - => port = 20881\n";
    assert_eq!(route_with(r, &call("a")), keep(&[0, 1, 2]));
    let u = "condition://0.0.0.0/com.foo.Bar?enabled=false&rule=%3D%3E+port%3D20881";
    assert_eq!(route_with(u, &call("a")), keep(&[0, 1, 2]));
}

#[test]
fn v2_lines_and_v30_conditions_are_a_pipeline() {
    let text = "=> zone = z1\n# comment\nmethod = a => port = 20880 & host = 10.0.0.3\n";
    assert_eq!(route_with(text, &call("a")), keep(&[2]));
    assert_eq!(route_with(text, &call("b")), keep(&[0, 2]));
    let yaml = "configVersion: v3.0\nscope: service\nkey: com.foo.Bar\nconditions:\n  - => zone = z1\n  - method = a => host = 10.0.0.3\n";
    assert_eq!(route_with(yaml, &call("a")), keep(&[2]));
}

#[test]
fn chain_order_and_priority() {
    // Service rule then application rule: the app rule sees the service rule's output.
    let chain = RouterChain::new()
        .with_rule("shop.condition-router", "=> port = 20881")
        .unwrap()
        .with_rule(SVC, "=> zone = z1")
        .unwrap();
    // Service: z1 -> {0,2}; app: port 20881 ∩ {0,2} = ∅, not forced -> unchanged.
    assert_eq!(
        run(&chain.build(&four(), &consumer()), &call("a")),
        keep(&[0, 2])
    );
    // Priority within a scope: higher first.
    let chain = RouterChain::new()
        .with_rule(
            "a.condition-router",
            "priority: 1\nconditions:\n  - => zone = z1\n",
        )
        .unwrap()
        .with_rule(
            "b.condition-router",
            "priority: 5\nforce: true\nconditions:\n  - => port = 20881\n",
        )
        .unwrap();
    // b first: {1}; then a: z1 ∩ {1} = ∅ -> unchanged {1}.
    assert_eq!(
        run(&chain.build(&four(), &consumer()), &call("a")),
        keep(&[1])
    );
    // Replacing and removing rules by key.
    let chain = chain
        .with_rule("b.condition-router", "=> host = 10.0.0.3")
        .unwrap();
    assert_eq!(
        run(&chain.build(&four(), &consumer()), &call("a")),
        keep(&[2])
    );
    let chain = chain.without_rule("b.condition-router");
    assert_eq!(
        run(&chain.build(&four(), &consumer()), &call("a")),
        keep(&[0, 2])
    );
}

#[test]
fn invalid_update_keeps_previous_chain() {
    let chain = RouterChain::new().with_rule(SVC, "=> zone = z1").unwrap();
    let err = chain.with_rule(SVC, "=> zone == z1");
    assert!(err.is_err());
    assert_eq!(chain.rule_text(SVC), Some("=> zone = z1"));
}

#[test]
fn v31_multi_destination() {
    let rule = "configVersion: v3.1\nscope: service\nkey: com.foo.Bar\nforce: false\nconditions:\n  - from:\n      match: method = a\n    to:\n      - match: zone = z1\n        weight: 300\n      - match: port = 20881\n        weight: 100\n";
    let chain = RouterChain::new().with_rule(SVC, rule).unwrap();
    let t = chain.build(&four(), &consumer());
    let mut rng = fastrand::Rng::with_seed(3);
    let mut counts = [0u32; 2];
    for _ in 0..4000 {
        match t.route(&call("a"), &mut rng) {
            Route::Subset(i) => match &*t.subsets()[i] {
                [0, 2] => counts[0] += 1,
                [1] => counts[1] += 1,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }
    // 3:1 by weight; a loose bound that a correct weighting never misses.
    assert!((2700..3300).contains(&counts[0]), "{counts:?}");
    assert_eq!(run(&t, &call("b")), keep(&[0, 1, 2]));
}

#[test]
fn v31_blank_to_matches_all_and_missing_to_disables() {
    let all = "configVersion: v3.1\nconditions:\n  - from:\n      match: method = a\n    to:\n      - match: \"\"\n";
    assert_eq!(route_with(all, &call("a")), keep(&[0, 1, 2]));
    let none = "configVersion: v3.1\nconditions:\n  - from:\n      match: method = a\n";
    assert!(matches!(route_with(none, &call("a")), Out::Forbidden(_)));
    assert_eq!(route_with(none, &call("b")), keep(&[0, 1, 2]));
    // Only non-empty destinations are candidates; none -> unchanged unless forced.
    let empty = "configVersion: v3.1\nconditions:\n  - from:\n      match: method = a\n    to:\n      - match: zone = nowhere\n";
    assert_eq!(route_with(empty, &call("a")), keep(&[0, 1, 2]));
    let forced = format!("force: true\n{empty}");
    assert!(matches!(route_with(&forced, &call("a")), Out::Forbidden(_)));
}

// ---- tag routing ----

fn tagged() -> Vec<Arc<Instance>> {
    providers(&[
        "dubbo://10.0.0.1:20880/s?application=p",
        "dubbo://10.0.0.2:20880/s?application=p&dubbo.tag=gray",
        "dubbo://10.0.0.3:20880/s?application=p&dubbo.tag=blue",
        "dubbo://10.0.0.4:20880/s?application=p&env=canary",
        "dubbo://10.0.0.5:20880/s?application=p&env=canary-eu",
    ])
}

fn tag_call(tag: &str) -> Invocation {
    call("a").with_attachment("dubbo.tag", tag)
}

fn tag_route(rule: Option<&str>, inv: &Invocation) -> Out {
    let mut chain = RouterChain::new();
    if let Some(r) = rule {
        chain = chain.with_rule("p.tag-router", r).unwrap();
    }
    run(
        &chain.build(&tagged(), &ConsumerInfo::new("10.1.1.1", "shop")),
        inv,
    )
}

#[test]
fn static_tags() {
    assert_eq!(tag_route(None, &call("a")), keep(&[0, 3, 4]));
    assert_eq!(tag_route(None, &tag_call("gray")), keep(&[1]));
    // Unknown tag falls back to untagged providers unless forced.
    assert_eq!(tag_route(None, &tag_call("red")), keep(&[0, 3, 4]));
    let forced = tag_call("red").with_attachment("dubbo.force.tag", "true");
    assert!(matches!(tag_route(None, &forced), Out::Forbidden(_)));
    // The consumer's own dubbo.tag is the default request tag.
    let c = ConsumerInfo::from_url(Url::parse("consumer://h/s?dubbo.tag=blue").unwrap());
    let t = RouterChain::new().build(&tagged(), &c);
    assert_eq!(run(&t, &call("a")), keep(&[2]));
    assert_eq!(run(&t, &tag_call("gray")), keep(&[1]), "attachment wins");
}

#[test]
fn dynamic_tags_by_address() {
    let rule = "force: false\nenabled: true\nkey: p\ntags:\n  - name: canary\n    addresses: [\"10.0.0.4:20880\", \"10.0.0.5\"]\n  - name: canary|eu\n    addresses: [\"10.0.0.5:20880\"]\n";
    assert_eq!(tag_route(Some(rule), &tag_call("canary")), keep(&[3, 4]));
    // Untagged calls never reach providers in a dynamic group, nor statically tagged ones.
    assert_eq!(tag_route(Some(rule), &call("a")), keep(&[0]));
    // Level fallback: canary|eu exists; canary|us falls back to canary.
    assert_eq!(tag_route(Some(rule), &tag_call("canary|eu")), keep(&[4]));
    assert_eq!(tag_route(Some(rule), &tag_call("canary|us")), keep(&[3, 4]));
    // No level fallback when the tag is forced.
    let forced = tag_call("canary|us").with_attachment("dubbo.force.tag", "true");
    assert!(matches!(tag_route(Some(rule), &forced), Out::Forbidden(_)));
    // A tag the rule does not know: static tags, then untagged fallback.
    assert_eq!(tag_route(Some(rule), &tag_call("gray")), keep(&[1]));
    assert_eq!(tag_route(Some(rule), &tag_call("red")), keep(&[0]));
}

#[test]
fn dynamic_tag_with_no_live_provider() {
    let rule = |force: bool| {
        format!("force: {force}\ntags:\n  - name: green\n    addresses: [\"10.9.9.9\"]\n")
    };
    // Not forced: falls back to untagged providers.
    assert_eq!(
        tag_route(Some(&rule(false)), &tag_call("green")),
        keep(&[0, 3, 4])
    );
    // Rule force: empty.
    assert!(matches!(
        tag_route(Some(&rule(true)), &tag_call("green")),
        Out::Forbidden(_)
    ));
}

#[test]
fn dynamic_tags_by_match_v30() {
    for (sel, want) in [
        ("exact: canary", vec![3]),
        ("prefix: canary", vec![3, 4]),
        ("regex: \"canary-.*\"", vec![4]),
        ("wildcard: \"*\"", vec![3, 4]),
        ("noempty: true", vec![3, 4]),
    ] {
        let rule = format!(
            "configVersion: v3.0\ntags:\n  - name: c\n    match:\n      - key: env\n        value: {{{sel}}}\n"
        );
        assert_eq!(tag_route(Some(&rule), &tag_call("c")), keep(&want), "{sel}");
    }
    // `empty` selects providers without the parameter.
    let rule = "configVersion: v3.0\ntags:\n  - name: plain\n    match:\n      - key: env\n        value: {empty: true}\n";
    assert_eq!(tag_route(Some(rule), &tag_call("plain")), keep(&[0, 1, 2]));
    // Without configVersion v3.0, `match` is ignored (as Dubbo): the tag is unknown.
    let rule = "tags:\n  - name: c\n    match:\n      - key: env\n        value: {exact: canary}\n";
    assert_eq!(tag_route(Some(rule), &tag_call("c")), keep(&[0, 3, 4]));
}

#[test]
fn disabled_tag_rule_uses_static_tags() {
    let rule = "enabled: false\ntags:\n  - name: canary\n    addresses: [\"10.0.0.4\"]\n";
    assert_eq!(tag_route(Some(rule), &call("a")), keep(&[0, 3, 4]));
}

#[test]
fn tag_then_condition() {
    let chain = RouterChain::new()
        .with_rule(
            "p.tag-router",
            "tags:\n  - name: canary\n    addresses: [\"10.0.0.4\", \"10.0.0.5\"]\n",
        )
        .unwrap()
        .with_rule("s::.condition-router", "method = a => env = canary-eu")
        .unwrap();
    let t = chain.build(&tagged(), &ConsumerInfo::new("h", "shop"));
    assert_eq!(run(&t, &tag_call("canary")), keep(&[4]));
    assert_eq!(
        run(&t, &call("a")),
        keep(&[0]),
        "condition sees only the tag output"
    );
}

#[test]
fn empty_instance_list() {
    let chain = RouterChain::new().with_rule(SVC, "=> port = 1").unwrap();
    let t = chain.build(&[], &consumer());
    assert!(t.is_empty());
    assert_eq!(run(&t, &call("a")), keep(&[]));
}

#[test]
fn subsets_are_deduplicated() {
    let chain = RouterChain::new()
        .with_rule(SVC, "method = a => zone = z1\nmethod = b => port = 20880\n")
        .unwrap();
    let t = chain.build(&four(), &consumer());
    let mut seen = t.subsets().to_vec();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), t.subsets().len());
}

#[test]
fn explain_says_why() {
    let chain = RouterChain::new()
        .with_rule(SVC, "method = find* => zone = z1")
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(1);
    let e = chain.explain(&four(), &consumer(), &call("findX"), &mut rng);
    assert_eq!(e.kept(), vec![0, 2]);
    assert!(
        e.providers[1].why.contains("`zone` is `z2`"),
        "{:?}",
        e.providers[1]
    );
    assert!(e.providers[3].why.contains("tag"), "{:?}", e.providers[3]);
    assert!(
        e.steps.iter().any(|s| s.contains("when matches")),
        "{:?}",
        e.steps
    );
    let e = chain.explain(&four(), &consumer(), &call("save"), &mut rng);
    assert_eq!(e.kept(), vec![0, 1, 2]);
    assert!(e.steps.iter().any(|s| s.contains("does not match")));
}

#[test]
fn beyond_max_subsets_takes_the_computed_slow_path() {
    let n = switchman_router::MAX_SUBSETS + 40;
    let urls: Vec<String> = (0..n)
        .map(|i| format!("dubbo://10.0.{}.{}:20880/s?id={i}", i / 200, i % 200 + 1))
        .collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let instances = providers(&refs);
    // Each rule keeps all but one instance: large sets, one bit per instance each, so the
    // budget of MAX_SUBSETS such sets runs out.
    let rule: String = (0..n)
        .map(|i| format!("method = m{i} => id != {i}\n"))
        .collect();
    let chain = RouterChain::new().with_rule(SVC, &rule).unwrap();
    let t = chain.build(&instances, &consumer());
    assert!(t.subsets().len() <= switchman_router::MAX_SUBSETS + 1);
    let mut rng = fastrand::Rng::with_seed(1);
    let mut computed = 0;
    for i in 0..n {
        let got = match t.route(&call(&format!("m{i}")), &mut rng) {
            Route::Subset(s) => t.subsets()[s].to_vec(),
            Route::Computed(s) => {
                computed += 1;
                s.to_vec()
            }
            other => panic!("{other:?}"),
        };
        let want: Vec<u32> = (0..n as u32).filter(|&k| k != i as u32).collect();
        assert_eq!(got, want, "m{i}");
    }
    assert!(computed > 0, "some calls needed the slow path");
    assert_eq!(run(&t, &call("other")), Out::Keep((0..n as u32).collect()));
    // A call of a shape seen before takes the set computed then: the same allocation, no
    // O(n) work (the per-call path stays O(steps) whatever the rules make of the table).
    let mut kept = 0;
    for i in 0..n {
        let c = call(&format!("m{i}"));
        if let (Route::Computed(a), Route::Computed(b)) =
            (t.route(&c, &mut rng), t.route(&c, &mut rng))
        {
            assert!(Arc::ptr_eq(&a, &b), "m{i} computed twice");
            kept += 1;
        }
    }
    assert_eq!(kept, computed);
}

const AFFINITY: &str = "com.foo.Bar::.affinity-router";

fn affinity(ratio: &str, extra: &str) -> String {
    format!(
        "configVersion: v3.1\nscope: service\nkey: com.foo.Bar\n{extra}affinityAware:\n  key: zone\n  ratio: {ratio}\n"
    )
}

fn route_affinity(rule: &str, consumer: &ConsumerInfo) -> Out {
    let chain = RouterChain::new().with_rule(AFFINITY, rule).unwrap();
    run(&chain.build(&four(), consumer), &call("find"))
}

/// Dubbo 3.3.6's affinity router: the providers whose `key` parameter equals the consumer's,
/// when they are at least `ratio` percent of the candidates; else all of them. The consumer
/// (zone z2) has one z2 provider of three untagged ones (33%).
#[test]
fn affinity_prefers_the_consumers_value_above_the_ratio() {
    assert_eq!(route_affinity(&affinity("0", ""), &consumer()), keep(&[1]));
    assert_eq!(route_affinity(&affinity("33", ""), &consumer()), keep(&[1]));
    assert_eq!(
        route_affinity(&affinity("34", ""), &consumer()),
        keep(&[0, 1, 2]),
        "under the ratio: every candidate"
    );
    assert_eq!(
        route_affinity(&affinity("0", "enabled: false\n"), &consumer()),
        keep(&[0, 1, 2]),
        "disabled"
    );
    // No provider has the consumer's value: every candidate, even at ratio 0 (a preference
    // never leaves a call without a provider; Dubbo would return none).
    let elsewhere = ConsumerInfo::from_url(
        Url::parse("consumer://10.1.1.1/com.foo.Bar?application=shop&zone=z9").unwrap(),
    );
    assert_eq!(
        route_affinity(&affinity("0", ""), &elsewhere),
        keep(&[0, 1, 2])
    );
    // A consumer without the parameter: nothing to prefer.
    let plain = ConsumerInfo::new("10.1.1.1", "shop");
    assert_eq!(route_affinity(&affinity("0", ""), &plain), keep(&[0, 1, 2]));
    // Before the condition rules: affinity keeps z2, then a non-forced condition that would
    // leave none (z1) changes nothing.
    let chain = RouterChain::new()
        .with_rule(AFFINITY, &affinity("0", ""))
        .unwrap()
        .with_rule(SVC, "=> zone = z1")
        .unwrap();
    assert_eq!(
        run(&chain.build(&four(), &consumer()), &call("find")),
        keep(&[1])
    );
}

#[test]
fn bad_affinity_rules_are_refused_with_their_field() {
    for (rule, field) in [
        (affinity("150", ""), "ratio"),
        (affinity("abc", ""), "ratio"),
        (
            "configVersion: v3.0\nkey: com.foo.Bar\naffinityAware:\n  key: zone\n".to_string(),
            "configVersion",
        ),
        (
            "configVersion: v3.1\nkey: com.foo.Bar\n".to_string(),
            "affinityAware",
        ),
        (
            "configVersion: v3.1\nkey: com.foo.Bar\naffinityAware:\n  ratio: 10\n".to_string(),
            "affinityAware.key",
        ),
    ] {
        let e = RouterChain::new().with_rule(AFFINITY, &rule).unwrap_err();
        assert!(e.to_string().contains(field), "{field}: {e}");
    }
}
