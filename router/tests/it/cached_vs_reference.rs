//! Property: the cached path (`RouterChain::build` once, `RouteTable::route` per call) gives
//! the same answer as evaluating the rules from scratch, Dubbo style, for random rules,
//! instance lists, consumers and invocations.
//!
//! The reference below works on the generated specs (not on `Instance` or the crate's
//! parser): it renders the rules as v2 text, v3.0 or v3.1 YAML and tag YAML for the crate,
//! and evaluates the same rules directly, one router after another, as Dubbo's
//! `TagStateRouter`, `ConditionStateRouter` and `MultiDestConditionRouter` do.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use switchman_core::{Instance, Invocation, Url};
use switchman_router::{ConsumerInfo, Route, RouterChain};

// ---------- specs ----------

#[derive(Debug, Clone)]
struct Prov {
    host: u8,
    port: u16,
    zone: Option<&'static str>,
    weight: Option<u32>,
    tag: Option<&'static str>,
}

#[derive(Debug, Clone)]
struct Consumer {
    host: &'static str,
    app: &'static str,
    zone: Option<&'static str>,
    tag: Option<&'static str>,
}

#[derive(Debug, Clone)]
struct Call {
    method: &'static str,
    args: Vec<Value>,
    tag: Option<&'static str>,
    force_tag: Option<&'static str>,
    k: Option<&'static str>,
}

#[derive(Debug, Clone)]
struct Entry {
    key: &'static str,
    not: bool,
    values: Vec<&'static str>,
}

#[derive(Debug, Clone)]
enum StepSpec {
    V2 {
        when: Vec<Entry>,
        then: Option<Vec<Entry>>,
    },
    Multi {
        when: Vec<Entry>,
        to: Vec<(Vec<Entry>, u32)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Text,
    V30,
    V31,
}

#[derive(Debug, Clone)]
struct CondRule {
    app_scope: bool,
    priority: i32,
    force: bool,
    enabled: bool,
    format: Format,
    steps: Vec<StepSpec>,
}

#[derive(Debug, Clone)]
struct TagRuleSpec {
    force: bool,
    enabled: bool,
    tags: Vec<(&'static str, Vec<&'static str>)>,
}

const WHEN_KEYS: &[(&str, &[&str])] = &[
    ("method", &["a", "find*", "*All", "b"]),
    ("arguments[0]", &["x", "5", "1~9", "null", "~3"]),
    ("attachments[k]", &["v1", "v*"]),
    ("host", &["10.1.1.1", "10.1.1.*"]),
    ("application", &["shop", "w*"]),
    ("zone", &["z1", "z2"]),
];

const THEN_KEYS: &[(&str, &[&str])] = &[
    ("host", &["10.0.0.1", "10.0.0.*", "*.2"]),
    ("port", &["20880", "20880~20881", "2088*"]),
    ("zone", &["z1", "z2", "$zone"]),
    ("weight", &["10~60", "100~", "x~y"]),
    ("address", &["10.0.0.1:20880", "*:20881"]),
];

fn arb_entries(
    keys: &'static [(&'static str, &'static [&'static str])],
) -> BoxedStrategy<Vec<Entry>> {
    proptest::sample::subsequence((0..keys.len()).collect::<Vec<_>>(), 0..=2)
        .prop_flat_map(move |idxs| {
            idxs.into_iter()
                .map(|i| {
                    let (key, pool) = keys[i];
                    (
                        any::<bool>(),
                        proptest::sample::subsequence(pool.to_vec(), 1..=2),
                    )
                        .prop_map(move |(not, values)| Entry {
                            key,
                            not,
                            values,
                        })
                })
                .collect::<Vec<_>>()
        })
        .boxed()
}

fn arb_step(format: Format) -> BoxedStrategy<StepSpec> {
    if format == Format::V31 {
        (
            arb_entries(WHEN_KEYS),
            proptest::collection::vec((arb_entries(THEN_KEYS), 0u32..4), 0..=2),
        )
            .prop_map(|(when, to)| StepSpec::Multi {
                when,
                to: to.into_iter().map(|(c, w)| (c, w * 50)).collect(),
            })
            .boxed()
    } else {
        (
            arb_entries(WHEN_KEYS),
            proptest::option::weighted(0.85, arb_entries(THEN_KEYS)),
        )
            .prop_map(|(when, then)| StepSpec::V2 { when, then })
            .boxed()
    }
}

fn arb_cond_rule() -> impl Strategy<Value = CondRule> {
    prop_oneof![Just(Format::Text), Just(Format::V30), Just(Format::V31)].prop_flat_map(|format| {
        (
            any::<bool>(),
            -1i32..3,
            any::<bool>(),
            proptest::bool::weighted(0.9),
            proptest::collection::vec(arb_step(format), 1..=3),
        )
            .prop_map(
                move |(app_scope, priority, force, enabled, steps)| CondRule {
                    app_scope,
                    // v2 text has no priority field either.
                    priority: if format == Format::Text { 0 } else { priority },
                    // v2 text has no force field.
                    force: force && format != Format::Text,
                    enabled: enabled || format == Format::Text,
                    format,
                    steps,
                },
            )
    })
}

fn arb_tag_rule() -> impl Strategy<Value = TagRuleSpec> {
    (
        any::<bool>(),
        proptest::bool::weighted(0.85),
        proptest::collection::vec(
            (
                proptest::sample::select(vec!["canary", "canary|eu", "gray"]),
                proptest::sample::subsequence(
                    vec!["10.0.0.1", "10.0.0.2:20881", "10.0.0.*", "10.0.0.9"],
                    1..=2,
                ),
            ),
            1..=3,
        ),
    )
        .prop_map(|(force, enabled, tags)| TagRuleSpec {
            force,
            enabled,
            tags,
        })
}

fn arb_prov() -> impl Strategy<Value = Prov> {
    (
        1u8..5,
        prop_oneof![Just(20880u16), Just(20881u16)],
        proptest::option::of(proptest::sample::select(vec!["z1", "z2"])),
        proptest::option::of(proptest::sample::select(vec![10u32, 50, 100, 200])),
        proptest::option::weighted(0.3, proptest::sample::select(vec!["gray", "blue"])),
    )
        .prop_map(|(host, port, zone, weight, tag)| Prov {
            host,
            port,
            zone,
            weight,
            tag,
        })
}

fn arb_consumer() -> impl Strategy<Value = Consumer> {
    (
        proptest::sample::select(vec!["10.1.1.1", "10.1.1.2"]),
        proptest::sample::select(vec!["shop", "web"]),
        proptest::option::of(proptest::sample::select(vec!["z1", "z2"])),
        proptest::option::weighted(0.2, proptest::sample::select(vec!["gray", "canary"])),
    )
        .prop_map(|(host, app, zone, tag)| Consumer {
            host,
            app,
            zone,
            tag,
        })
}

fn arb_call() -> impl Strategy<Value = Call> {
    (
        proptest::sample::select(vec!["a", "b", "find", "findAll"]),
        proptest::collection::vec(
            prop_oneof![Just(json!("x")), Just(json!(5)), Just(Value::Null)],
            0..2,
        ),
        proptest::option::of(proptest::sample::select(vec![
            "gray",
            "canary",
            "canary|eu",
            "canary|us",
            "blue",
            "red",
        ])),
        proptest::option::weighted(0.3, proptest::sample::select(vec!["true", "false"])),
        proptest::option::of(proptest::sample::select(vec!["v1", "v2"])),
    )
        .prop_map(|(method, args, tag, force_tag, k)| Call {
            method,
            args,
            tag,
            force_tag,
            k,
        })
}

// ---------- rendering for the crate ----------

fn render_conj(c: &[Entry]) -> String {
    c.iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e.key,
                if e.not { "!=" } else { "=" },
                e.values.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(" & ")
}

fn render_v2(when: &[Entry], then: &Option<Vec<Entry>>) -> String {
    let then = match then {
        None => String::new(),
        // An empty then conjunction would read as blank (block); render it as `false`
        // explicitly to keep the same meaning.
        Some(t) if t.is_empty() => "false".into(),
        Some(t) => render_conj(t),
    };
    format!("{} => {}", render_conj(when), then)
}

fn render_rule(r: &CondRule) -> String {
    match r.format {
        Format::Text => r
            .steps
            .iter()
            .map(|s| match s {
                StepSpec::V2 { when, then } => render_v2(when, then) + "\n",
                StepSpec::Multi { .. } => unreachable!(),
            })
            .collect(),
        Format::V30 | Format::V31 => {
            let mut y = format!(
                "configVersion: {}\nforce: {}\nenabled: {}\npriority: {}\nconditions:\n",
                if r.format == Format::V31 {
                    "v3.1"
                } else {
                    "v3.0"
                },
                r.force,
                r.enabled,
                r.priority
            );
            for s in &r.steps {
                match s {
                    StepSpec::V2 { when, then } => {
                        y += &format!("  - \"{}\"\n", render_v2(when, then));
                    }
                    StepSpec::Multi { when, to } => {
                        y += &format!("  - from:\n      match: \"{}\"\n", render_conj(when));
                        if !to.is_empty() {
                            y += "    to:\n";
                            for (c, w) in to {
                                y += &format!(
                                    "      - match: \"{}\"\n        weight: {w}\n",
                                    render_conj(c)
                                );
                            }
                        }
                    }
                }
            }
            y
        }
    }
}

fn render_tag_rule(t: &TagRuleSpec) -> String {
    let mut y = format!("force: {}\nenabled: {}\ntags:\n", t.force, t.enabled);
    for (name, addrs) in &t.tags {
        let a: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
        y += &format!("  - name: \"{name}\"\n    addresses: [{}]\n", a.join(", "));
    }
    y
}

fn prov_url(p: &Prov) -> String {
    let mut u = format!(
        "dubbo://10.0.0.{}:{}/com.foo.Bar?application=prov",
        p.host, p.port
    );
    if let Some(z) = p.zone {
        u += &format!("&zone={z}");
    }
    if let Some(w) = p.weight {
        u += &format!("&weight={w}");
    }
    if let Some(t) = p.tag {
        u += &format!("&dubbo.tag={t}");
    }
    u
}

fn consumer_info(c: &Consumer) -> ConsumerInfo {
    let mut u = format!("consumer://{}/com.foo.Bar?application={}", c.host, c.app);
    if let Some(z) = c.zone {
        u += &format!("&zone={z}");
    }
    if let Some(t) = c.tag {
        u += &format!("&dubbo.tag={t}");
    }
    ConsumerInfo::from_url(Url::parse(&u).unwrap())
}

fn invocation(c: &Call) -> Invocation {
    let mut inv = Invocation::new(c.method).with_args(c.args.clone());
    if let Some(t) = c.tag {
        inv.set_attachment("dubbo.tag", t);
    }
    if let Some(f) = c.force_tag {
        inv.set_attachment("dubbo.force.tag", f);
    }
    if let Some(k) = c.k {
        inv.set_attachment("k", k);
    }
    inv
}

// ---------- the reference evaluator ----------

/// Dubbo's `UrlUtils.isMatchGlobPattern`.
fn glob(pattern: Option<&str>, value: &str) -> bool {
    let Some(p) = pattern else {
        return value.is_empty();
    };
    if p == "*" {
        return true;
    }
    if p.is_empty() && value.is_empty() {
        return true;
    }
    if p.is_empty() || value.is_empty() {
        return false;
    }
    match p.rfind('*') {
        None => value == p,
        Some(i) if i == p.len() - 1 => value.starts_with(&p[..i]),
        Some(0) => value.ends_with(&p[1..]),
        Some(i) => value.starts_with(&p[..i]) && value.ends_with(&p[i + 1..]),
    }
}

fn pattern_match(p: &str, value: &str, in_when: bool, consumer: &Consumer) -> bool {
    if let Some((lo, hi)) = p.split_once('~') {
        let default = !in_when;
        if lo.is_empty() && hi.is_empty() {
            return default;
        }
        let (Ok(v), Ok(lo), Ok(hi)) = (
            value.parse::<i64>(),
            if lo.is_empty() {
                Ok(i64::MIN)
            } else {
                lo.parse::<i64>()
            },
            if hi.is_empty() {
                Ok(i64::MAX)
            } else {
                hi.parse::<i64>()
            },
        ) else {
            return default;
        };
        return lo <= v && v <= hi;
    }
    if !in_when && let Some(name) = p.strip_prefix('$') {
        let resolved = match name {
            "zone" => consumer.zone,
            _ => None,
        };
        return glob(resolved, value);
    }
    glob(Some(p), value)
}

fn entry_match(e: &Entry, value: Option<&str>, in_when: bool, consumer: &Consumer) -> bool {
    let Some(v) = value else { return false };
    let hit = e
        .values
        .iter()
        .any(|p| pattern_match(p, v, in_when, consumer));
    if e.not { !hit } else { hit }
}

fn arg_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn when_match(when: &[Entry], consumer: &Consumer, call: &Call) -> bool {
    when.iter().all(|e| {
        let v: Option<String> = match e.key {
            "method" => Some(call.method.to_string()),
            "arguments[0]" => call.args.first().map(arg_text),
            "attachments[k]" => call.k.map(str::to_string),
            "host" => Some(consumer.host.to_string()),
            "application" => Some(consumer.app.to_string()),
            "zone" => consumer.zone.map(str::to_string),
            other => panic!("{other}"),
        };
        entry_match(e, v.as_deref(), true, consumer)
    })
}

fn then_match(then: &[Entry], p: &Prov, consumer: &Consumer) -> bool {
    then.iter().all(|e| {
        let v: Option<String> = match e.key {
            "host" => Some(format!("10.0.0.{}", p.host)),
            "port" => Some(p.port.to_string()),
            "zone" => p.zone.map(str::to_string),
            "weight" => p.weight.map(|w| w.to_string()),
            "address" => Some(format!("10.0.0.{}:{}", p.host, p.port)),
            other => panic!("{other}"),
        };
        entry_match(e, v.as_deref(), false, consumer)
    })
}

fn addr_match(pattern: &str, p: &Prov) -> bool {
    let host = format!("10.0.0.{}", p.host);
    if let Some(prefix) = pattern.strip_suffix('*') {
        return host.starts_with(prefix);
    }
    match pattern.split_once(':') {
        Some((h, port)) => h == host && port == p.port.to_string(),
        None => pattern == host,
    }
}

/// Dubbo's `TagStateRouter.doRoute`.
fn ref_tag(
    rule: Option<&TagRuleSpec>,
    provs: &[Prov],
    list: Vec<usize>,
    consumer: &Consumer,
    call: &Call,
) -> Vec<usize> {
    let tag = call.tag.or(consumer.tag);
    let force_use = call.force_tag.is_some_and(|f| f == "true");
    let untagged = |l: &[usize]| -> Vec<usize> {
        l.iter()
            .copied()
            .filter(|&i| provs[i].tag.is_none())
            .collect()
    };
    let Some(rule) = rule.filter(|r| r.enabled) else {
        return match tag {
            Some(t) => {
                let r: Vec<usize> = list
                    .iter()
                    .copied()
                    .filter(|&i| provs[i].tag == Some(t))
                    .collect();
                if r.is_empty() && !force_use {
                    untagged(&list)
                } else {
                    r
                }
            }
            None => untagged(&list),
        };
    };
    // tag name -> address patterns; later entries replace earlier ones.
    let mut names: Vec<(&str, &Vec<&str>)> = Vec::new();
    for (n, a) in &rule.tags {
        match names.iter_mut().find(|(x, _)| x == n) {
            Some(slot) => slot.1 = a,
            None => names.push((n, a)),
        }
    }
    let all_addrs: Vec<&str> = names.iter().flat_map(|(_, a)| a.iter().copied()).collect();
    let in_group = |i: usize| all_addrs.iter().any(|a| addr_match(a, &provs[i]));
    match tag {
        Some(t) => {
            let get = |n: &str| names.iter().find(|(x, _)| *x == n).map(|(_, a)| *a);
            let addrs = if force_use || !t.contains('|') {
                get(t)
            } else {
                let parts: Vec<&str> = t.split('|').collect();
                (1..=parts.len())
                    .rev()
                    .find_map(|k| get(&parts[..k].join("|")))
            };
            let result: Vec<usize> = match addrs {
                Some(a) => {
                    let r: Vec<usize> = list
                        .iter()
                        .copied()
                        .filter(|&i| a.iter().any(|p| addr_match(p, &provs[i])))
                        .collect();
                    if !r.is_empty() || rule.force {
                        return r;
                    }
                    r
                }
                None => list
                    .iter()
                    .copied()
                    .filter(|&i| provs[i].tag == Some(t))
                    .collect(),
            };
            if !result.is_empty() || force_use {
                return result;
            }
            list.iter()
                .copied()
                .filter(|&i| !in_group(i) && provs[i].tag.is_none())
                .collect()
        }
        None => {
            let r: Vec<usize> = list.iter().copied().filter(|&i| !in_group(i)).collect();
            if r.is_empty() {
                return r;
            }
            untagged(&r)
        }
    }
}

fn reference(
    tag_rule: Option<&TagRuleSpec>,
    rules: &[CondRule],
    provs: &[Prov],
    consumer: &Consumer,
    call: &Call,
    rng: &mut fastrand::Rng,
) -> Option<Vec<usize>> {
    let mut list = ref_tag(tag_rule, provs, (0..provs.len()).collect(), consumer, call);
    let mut order: Vec<&CondRule> = rules.iter().collect();
    order.sort_by_key(|r| (r.app_scope, std::cmp::Reverse(r.priority)));
    for r in order.into_iter().filter(|r| r.enabled) {
        for s in &r.steps {
            if list.is_empty() {
                break;
            }
            match s {
                StepSpec::V2 { when, then } => {
                    if !when_match(when, consumer, call) {
                        continue;
                    }
                    // A blank (rendered `false`) then blocks the call.
                    let Some(then) = then.as_ref().filter(|t| !t.is_empty()) else {
                        list.clear();
                        continue;
                    };
                    let kept: Vec<usize> = list
                        .iter()
                        .copied()
                        .filter(|&i| then_match(then, &provs[i], consumer))
                        .collect();
                    if !kept.is_empty() || r.force {
                        list = kept;
                    }
                }
                StepSpec::Multi { when, to } => {
                    if !when_match(when, consumer, call) {
                        continue;
                    }
                    if to.is_empty() {
                        list.clear();
                        continue;
                    }
                    let cands: Vec<(Vec<usize>, u64)> = to
                        .iter()
                        .map(|(c, w)| {
                            let set: Vec<usize> = list
                                .iter()
                                .copied()
                                .filter(|&i| then_match(c, &provs[i], consumer))
                                .collect();
                            (set, if *w == 0 { 100 } else { *w as u64 })
                        })
                        .filter(|(s, _)| !s.is_empty())
                        .collect();
                    match cands.len() {
                        0 if r.force => list.clear(),
                        0 => {}
                        1 => list = cands[0].0.clone(),
                        _ => {
                            let total: u64 = cands.iter().map(|c| c.1).sum();
                            let mut x = rng.u64(0..total);
                            for (s, w) in cands {
                                if x < w {
                                    list = s;
                                    break;
                                }
                                x -= w;
                            }
                        }
                    }
                }
            }
        }
    }
    (!list.is_empty()).then_some(list)
}

fn cached(
    table: &switchman_router::RouteTable,
    inv: &Invocation,
    rng: &mut fastrand::Rng,
) -> Option<Vec<usize>> {
    let set: Vec<usize> = match table.route(inv, rng) {
        Route::Subset(i) => table.subsets()[i].iter().map(|&x| x as usize).collect(),
        Route::Computed(s) => s.iter().map(|&x| x as usize).collect(),
        Route::Forbidden(_) => return None,
        other => panic!("an outcome this test does not know: {other:?}"),
    };
    (!set.is_empty()).then_some(set)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn cached_route_equals_reference(
        provs in proptest::collection::vec(arb_prov(), 0..12),
        consumer in arb_consumer(),
        tag_rule in proptest::option::weighted(0.5, arb_tag_rule()),
        rules in proptest::collection::vec(arb_cond_rule(), 0..=3),
        calls in proptest::collection::vec(arb_call(), 1..6),
        seed in any::<u64>(),
    ) {
        let mut chain = RouterChain::new();
        if let Some(t) = &tag_rule {
            chain = chain.with_rule("prov.tag-router", &render_tag_rule(t)).unwrap();
        }
        for (i, r) in rules.iter().enumerate() {
            let key = if r.app_scope {
                format!("app{i}.condition-router")
            } else {
                format!("com.foo.S{i}:1.0:.condition-router")
            };
            let text = render_rule(r);
            chain = chain
                .with_rule(&key, &text)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        }
        let instances: Vec<Arc<Instance>> = provs
            .iter()
            .map(|p| Arc::new(Instance::from_url(&Url::parse(&prov_url(p)).unwrap()).unwrap()))
            .collect();
        let table = chain.build(&instances, &consumer_info(&consumer));
        for c in &calls {
            let inv = invocation(c);
            let mut r1 = fastrand::Rng::with_seed(seed);
            let mut r2 = fastrand::Rng::with_seed(seed);
            let got = cached(&table, &inv, &mut r1);
            let want = reference(tag_rule.as_ref(), &rules, &provs, &consumer, c, &mut r2);
            prop_assert_eq!(got, want, "call {:?}", c);
        }
        // Subsets are distinct and ascending.
        let subsets = table.subsets();
        for s in subsets {
            prop_assert!(s.windows(2).all(|w| w[0] < w[1]));
        }
        let mut sorted = subsets.to_vec();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), subsets.len());
    }
}
