//! Dubbo 3.3's `ServiceAddressURL` precedence, per key.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use switchman_core::Invocation;
use switchman_loadbalance::{BalancerKind, LoadBalance, RandomBalance};

use super::super::values::BalancerSpec;
use super::super::*;
use super::params;

#[test]
fn defaults_are_dubbos() {
    let e = ClusterConfig::default().resolve(None, &BTreeMap::new());
    assert_eq!(e.strategy, Strategy::Failover);
    assert_eq!(e.retries, 2);
    assert_eq!(e.timeout, Duration::from_millis(1000));
    assert_eq!(e.forks, Forks::from_dubbo(2));
    assert_eq!(e.broadcast_fail_percent, Percent::ALL);
    assert_eq!(e.failbacktasks, 100);
    assert!(!e.sticky);
    assert_eq!(e.loadbalance_for(0), None, "the directory's balancer");
    let fb = ClusterConfig::default()
        .strategy(Strategy::Failback)
        .resolve(None, &BTreeMap::new());
    assert_eq!(fb.retries, 3, "failback retries default to 3");
}

/// Dubbo 3.3's `ServiceAddressURL.getMethodParameter`: consumer method > provider method
/// > consumer (reference over `<dubbo:consumer>`) > provider > default.
#[test]
fn precedence_is_consumer_method_provider_method_consumer_provider() {
    // Provider `sayHello.timeout=3000`, consumer service `timeout=500`: 3000.
    let provider = params(&[("sayHello.timeout", "3000"), ("timeout", "2000")]);
    let cfg = ClusterConfig::default().timeout(Duration::from_millis(500));
    assert_eq!(
        cfg.resolve(Some("sayHello"), &provider).timeout.as_millis(),
        3000
    );
    assert_eq!(
        cfg.resolve(Some("other"), &provider).timeout.as_millis(),
        500,
        "the consumer beats the provider's service-level value"
    );
    // Consumer global `timeout=300`, provider `timeout=2000`: 300.
    let cfg = ClusterConfig::default()
        .global_settings(Settings::new().timeout(Duration::from_millis(300)));
    let provider = params(&[("timeout", "2000")]);
    assert_eq!(cfg.resolve(None, &provider).timeout.as_millis(), 300);
    // Nothing on the consumer: the provider's, then Dubbo's 1000 ms.
    let none = ClusterConfig::default();
    assert_eq!(none.resolve(None, &provider).timeout.as_millis(), 2000);
    assert_eq!(
        none.resolve(None, &BTreeMap::new()).timeout.as_millis(),
        1000
    );
    // A consumer method beats the provider method.
    let provider = params(&[("sayHello.timeout", "3000"), ("sayHello.actives", "4")]);
    let cfg = ClusterConfig::default().method(
        "sayHello",
        Settings::new().timeout(Duration::from_millis(100)),
    );
    let e = cfg.resolve(Some("sayHello"), &provider);
    assert_eq!((e.timeout.as_millis(), e.actives), (100, Some(4)));
    // `actives` follows the same layers.
    let cfg = ClusterConfig::default().service_settings(Settings::new().actives(9));
    assert_eq!(cfg.resolve(Some("sayHello"), &provider).actives, Some(4));
    assert_eq!(
        cfg.resolve(None, &params(&[("actives", "2")])).actives,
        Some(9)
    );
    // Per-call attachments beat all layers.
    let inv = Invocation::new("sayHello")
        .with_attachment("timeout", "50")
        .with_attachment("retries", "0");
    let o = apply_attachments(&cfg.resolve(Some("sayHello"), &provider), &inv)
        .unwrap()
        .unwrap();
    assert_eq!((o.timeout.as_millis(), o.retries), (50, 0));
    assert_eq!(o.timeout_for(0).as_millis(), 50);
}

/// `loadbalance` by Dubbo's precedence: consumer method > provider method > consumer >
/// provider > the directory's balancer; a provider's value is read from its own URL.
#[test]
fn loadbalance_precedence_is_consumer_method_provider_method_consumer_provider() {
    let both = params(&[
        ("loadbalance", "leastactive"),
        ("sayHello.loadbalance", "roundrobin"),
    ]);
    let service_only = params(&[("loadbalance", "leastactive")]);
    let lb = |cfg: &ClusterConfig, m: &str, p: &BTreeMap<String, String>| {
        cfg.resolve(Some(m), p)
            .loadbalance_for(0)
            .map(str::to_string)
    };
    let none = ClusterConfig::default();
    // Provider only: its method value, then its service value.
    assert_eq!(lb(&none, "sayHello", &both).as_deref(), Some("roundrobin"));
    assert_eq!(lb(&none, "other", &both).as_deref(), Some("leastactive"));
    assert_eq!(
        lb(&none, "sayHello", &BTreeMap::new()),
        None,
        "the directory's"
    );
    // Consumer (service level) beats the provider's service value, not its method value.
    let consumer = ClusterConfig::default().loadbalance(BalancerKind::ShortestResponse);
    assert_eq!(
        lb(&consumer, "sayHello", &both).as_deref(),
        Some("roundrobin")
    );
    assert_eq!(
        lb(&consumer, "other", &both).as_deref(),
        Some("shortestresponse")
    );
    assert_eq!(
        lb(&consumer, "sayHello", &service_only).as_deref(),
        Some("shortestresponse")
    );
    // The consumer's global layer is a consumer layer too.
    let global =
        ClusterConfig::default().global_settings(Settings::new().loadbalance(BalancerKind::P2c));
    assert_eq!(lb(&global, "other", &both).as_deref(), Some("p2c"));
    assert_eq!(
        lb(&global, "sayHello", &both).as_deref(),
        Some("roundrobin")
    );
    // A consumer method beats everything.
    let method = consumer.clone().method(
        "sayHello",
        Settings::new().loadbalance(BalancerKind::ConsistentHash),
    );
    assert_eq!(
        lb(&method, "sayHello", &both).as_deref(),
        Some("consistenthash")
    );
    assert_eq!(
        lb(&method, "other", &both).as_deref(),
        Some("shortestresponse"),
        "another method keeps the service level"
    );
    // A provider value that names no balancer is ignored (the next layer decides).
    let bad = params(&[
        ("sayHello.loadbalance", "fastest"),
        ("loadbalance", "roundrobin"),
    ]);
    assert_eq!(lb(&none, "sayHello", &bad).as_deref(), Some("roundrobin"));
}

/// `hash.nodes` and `hash.arguments` are resolved key by key with the same precedence, and
/// apply to `consistenthash` only.
#[test]
fn hash_parameters_follow_the_same_layers() {
    let provider = params(&[
        ("loadbalance", "consistenthash"),
        ("hash.nodes", "320"),
        ("find.hash.arguments", "1"),
    ]);
    let cfg = ClusterConfig::default();
    let providers = [ProviderKeys::parse(&provider)];
    let spec = |cfg: &ClusterConfig, m: &str| {
        let e = cfg.resolve_for_snapshot(Some(m), 1, &providers);
        e.resolved_for.unwrap().specs.unwrap()[0].clone()
    };
    let nodes = |n| HashNodes::new(n).unwrap();
    let args = |a: &[usize]| HashArguments::new(a).unwrap();
    assert_eq!(
        spec(&cfg, "find"),
        BalancerSpec::Named(BalancerKind::ConsistentHash, nodes(320), args(&[1]))
    );
    assert_eq!(
        spec(&cfg, "other"),
        BalancerSpec::Named(BalancerKind::ConsistentHash, nodes(320), args(&[0]))
    );
    // A consumer's hash.nodes beats the provider's service value, the provider's method
    // hash.arguments beats the consumer's service value.
    let cfg = ClusterConfig::default().service_settings(
        Settings::new()
            .hash_nodes(nodes(40))
            .hash_arguments(args(&[2])),
    );
    assert_eq!(
        spec(&cfg, "find"),
        BalancerSpec::Named(BalancerKind::ConsistentHash, nodes(40), args(&[1]))
    );
    // Another balancer ignores them.
    let rr = ClusterConfig::default().loadbalance(BalancerKind::RoundRobin);
    assert_eq!(
        spec(&rr, "find"),
        BalancerSpec::Named(
            BalancerKind::RoundRobin,
            HashNodes::DEFAULT,
            HashArguments::first()
        )
    );
}

/// A provider registering `m.hash.nodes=2000000000` (method level beats the consumer's
/// service value) cannot make the ring unbounded: the value is out of range and ignored, the
/// layer below applies.
#[test]
fn an_out_of_range_hash_nodes_from_a_provider_is_ignored() {
    let provider = params(&[
        ("loadbalance", "consistenthash"),
        ("hash.nodes", "320"),
        ("find.hash.nodes", "2000000000"),
    ]);
    let providers = [ProviderKeys::parse(&provider)];
    let e = ClusterConfig::default().resolve_for_snapshot(Some("find"), 1, &providers);
    assert_eq!(
        e.resolved_for.unwrap().specs.unwrap()[0],
        BalancerSpec::Named(
            BalancerKind::ConsistentHash,
            HashNodes::new(320).unwrap(),
            HashArguments::first()
        )
    );
    assert!(HashNodes::new(4097).is_err() && HashNodes::new(4096).is_ok());
}

/// A balancer object set in code is a consumer layer like a name.
#[test]
fn a_custom_balancer_is_a_consumer_setting() {
    let mine: Arc<dyn LoadBalance> = Arc::new(RandomBalance);
    let cfg = ClusterConfig::default().loadbalance(mine.clone());
    let provider = params(&[("loadbalance", "roundrobin")]);
    let e = cfg.resolve(Some("m"), &provider);
    assert_eq!(e.loadbalance_for(0), Some("random"));
    let providers = [ProviderKeys::parse(&provider)];
    let e = cfg.resolve_for_snapshot(Some("m"), 1, &providers);
    assert!(matches!(
        &e.resolved_for.unwrap().specs.unwrap()[0],
        BalancerSpec::Custom(b) if values_same(b, &mine)
    ));
}

fn values_same(a: &Arc<dyn LoadBalance>, b: &Arc<dyn LoadBalance>) -> bool {
    super::super::values::same_object(a, b)
}

/// `sticky` is read like `loadbalance`: a provider may register it.
#[test]
fn sticky_follows_the_layers() {
    let provider = params(&[("sticky", "true"), ("m.sticky", "false")]);
    let none = ClusterConfig::default();
    assert!(!none.resolve(Some("m"), &provider).sticky);
    assert!(none.resolve(Some("other"), &provider).sticky);
    let consumer = ClusterConfig::default().service_settings(Settings::new().sticky(false));
    assert!(!consumer.resolve(Some("other"), &provider).sticky);
    let method = ClusterConfig::default().method("m", Settings::new().sticky(true));
    assert!(method.resolve(Some("m"), &provider).sticky);
    // Java's Boolean.parseBoolean: only `true`, in any case, is true.
    assert!(none.resolve(None, &params(&[("sticky", "TRUE")])).sticky);
    assert!(!none.resolve(None, &params(&[("sticky", "yes")])).sticky);
}

/// `retries` and `forks` are the consumer's: a provider's `retries=0` does not stop a
/// consumer's failover.
#[test]
fn retries_and_forks_come_from_the_consumer_only() {
    let provider = params(&[("retries", "0"), ("sayHello.retries", "0"), ("forks", "5")]);
    let e = ClusterConfig::default().resolve(Some("sayHello"), &provider);
    assert_eq!(
        (e.retries, e.forks),
        (2, Forks::from_dubbo(2)),
        "Dubbo's defaults"
    );
    let cfg = ClusterConfig::default().global_settings(Settings::new().retries(7).forks(4));
    let e = cfg.resolve(Some("sayHello"), &provider);
    assert_eq!((e.retries, e.forks), (7, Forks::from_dubbo(4)));
    let names = cfg.method_names(&[ProviderKeys::parse(&provider)], &Dynamic::default());
    assert!(
        names.is_empty(),
        "provider retries make no method of their own"
    );
}

/// Per endpoint of a snapshot: each instance's registration sets its own values.
#[test]
fn snapshot_resolution_is_per_endpoint() {
    let providers = [
        ProviderKeys::parse(&params(&[("timeout", "200")])),
        ProviderKeys::parse(&params(&[("timeout", "5000"), ("m.actives", "3")])),
        ProviderKeys::parse(&BTreeMap::new()),
    ];
    let cfg = ClusterConfig::default();
    let e = cfg.resolve_for_snapshot(Some("m"), 7, &providers);
    let t: Vec<u128> = (0..3).map(|i| e.timeout_for(i).as_millis()).collect();
    assert_eq!(t, [200, 5000, 1000]);
    assert_eq!(
        (0..3).map(|i| e.actives_for(i)).collect::<Vec<_>>(),
        [None, Some(3), None]
    );
    assert!(e.limits_at(8, 0).is_none(), "resolved for epoch 7 only");
    // Dubbo 2.6's `default.timeout` is the service-level value when `timeout` is absent.
    let legacy = ProviderKeys::parse(&params(&[("default.timeout", "700")]));
    let both = ProviderKeys::parse(&params(&[("default.timeout", "700"), ("timeout", "9")]));
    let e = cfg.resolve_for_snapshot(None, 7, &[legacy, both]);
    assert_eq!(
        (e.timeout_for(0).as_millis(), e.timeout_for(1).as_millis()),
        (700, 9)
    );
    // No endpoint registers anything: no per-endpoint arrays.
    let plain = cfg.resolve_for_snapshot(None, 7, &providers[2..]);
    let r = plain.resolved_for.unwrap();
    assert_eq!(r.snapshot, 7);
    assert!(r.limits.is_none() && r.specs.is_none());
}

#[test]
fn failback_negative_retries_and_tasks_take_dubbos_defaults() {
    let cfg = ClusterConfig::default().service_settings(
        Settings::new()
            .strategy(Strategy::Failback)
            .retries(Retries::Negative),
    );
    let e = cfg.resolve(None, &BTreeMap::new());
    assert_eq!((e.retries, e.failbacktasks), (3, 100));
    let e = ClusterConfig::from_yaml("cluster: failback\nretries: -1\nfailbacktasks: -5\n", "x")
        .unwrap()
        .resolve(None, &BTreeMap::new());
    assert_eq!((e.retries, e.failbacktasks), (3, 100));
    // Failover keeps `retries <= -1` as one attempt.
    let e = ClusterConfig::default()
        .retries(Retries::from_dubbo(-1))
        .resolve(None, &BTreeMap::new());
    assert_eq!(e.retries, 0);
}

/// Attachments are parsed as the loaders parse: a bad one fails the call, naming it.
#[test]
fn attachments_that_do_not_parse_are_errors_naming_them() {
    let e = ClusterConfig::default().resolve(None, &BTreeMap::new());
    let bad = Invocation::new("m").with_attachment("retries", "two");
    let err = apply_attachments(&e, &bad).unwrap_err();
    assert!(err.message().contains("retries=\"two\""), "{err}");
    let bad = Invocation::new("m").with_attachment("timeout", "soon");
    let err = apply_attachments(&e, &bad).unwrap_err();
    assert!(err.message().contains("timeout=\"soon\""), "{err}");
    // Not positive: ignored, the settings apply; with a unit: as the loaders read it.
    let zero = Invocation::new("m").with_attachment("timeout", "0");
    let o = apply_attachments(&e, &zero).unwrap().unwrap();
    assert_eq!(
        (o.timeout, o.timeout_forced),
        (Duration::from_secs(1), false)
    );
    let unit = Invocation::new("m").with_attachment("timeout", "1.5s");
    let o = apply_attachments(&e, &unit).unwrap().unwrap();
    assert_eq!(o.timeout, Duration::from_millis(1500));
    let negative = Invocation::new("m").with_attachment("retries", "-1");
    assert_eq!(
        apply_attachments(&e, &negative).unwrap().unwrap().retries,
        0
    );
    assert!(
        apply_attachments(&e, &Invocation::new("m"))
            .unwrap()
            .is_none()
    );
}

/// A provider registering a timeout of `i64::MAX` ms (registry data) gets one day, so no
/// caller computes a deadline beyond the clock; within the range the value stands.
#[test]
fn a_provider_timeout_over_a_day_is_one_day() {
    let providers = [
        ProviderKeys::parse(&params(&[("timeout", "9223372036854775807")])),
        ProviderKeys::parse(&params(&[("m.timeout", "86400001")])),
        ProviderKeys::parse(&params(&[("timeout", "86400000")])),
    ];
    let e = ClusterConfig::default().resolve_for_snapshot(Some("m"), 1, &providers);
    let t: Vec<Duration> = (0..3).map(|i| e.timeout_for(i)).collect();
    assert_eq!(t, [crate::MAX_PROVIDER_TIMEOUT; 3]);
}

/// Dubbo's default timeout is the protocol's: 3000 ms to a `tri://` provider (`TripleInvoker`),
/// 1000 ms to the others, for no layer and for a value that is not positive
/// (`getMethodPositiveParameter`); any layer's positive value beats it.
#[test]
fn the_default_timeout_is_the_protocols() {
    let keys =
        |p: &[(&str, &str)], protocol: &str| ProviderKeys::parse(&params(p)).protocol(protocol);
    let providers = [
        keys(&[], "tri"),
        keys(&[("timeout", "0")], "tri"),
        keys(&[("m.timeout", "-5")], "tri"),
        keys(&[("timeout", "700")], "tri"),
        keys(&[], "dubbo"),
        keys(&[("timeout", "0")], "dubbo"),
    ];
    let ms = |cfg: &ClusterConfig| {
        let e = cfg.resolve_for_snapshot(Some("m"), 1, &providers);
        (0..providers.len())
            .map(|i| e.timeout_for(i).as_millis())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ms(&ClusterConfig::default()),
        [3000, 3000, 3000, 700, 1000, 1000]
    );
    let consumer = ClusterConfig::default().timeout(Duration::from_millis(400));
    assert_eq!(ms(&consumer), [400, 400, 3000, 400, 400, 400]);
}

/// Consumer rules (dubbo-admin's `side: consumer`) lay over the consumer's own settings: the
/// service-level keys over its service and global layers, `{method}.{key}` over its method
/// layer; a provider's method-level registration still beats a service-level value, as the
/// consumer's own would; a value that does not parse is skipped, the others apply.
#[test]
fn consumer_rules_override_the_consumers_own_settings() {
    let rules = params(&[
        ("timeout", "6000"),
        ("retries", "5"),
        ("cluster", "failfast"),
        ("mock", "force:return null"),
        ("find.timeout", "250"),
        ("forks", "many"),
        ("priority", "3"),
    ]);
    let dynamic = Dynamic::parse(&rules, &"demo.Svc");
    let cfg = ClusterConfig::default()
        .timeout(Duration::from_millis(1000))
        .retries(1)
        .method("find", Settings::new().timeout(Duration::from_millis(900)))
        .method("get", Settings::new().retries(0));
    let plain = [ProviderKeys::parse(&BTreeMap::new())];
    let service = cfg.resolve_for_snapshot_with(None, 1, &plain, &dynamic);
    assert_eq!(service.timeout, Duration::from_millis(6000));
    assert_eq!(service.retries, 5);
    assert_eq!(service.strategy, Strategy::Failfast);
    assert!(service.mock.is_some(), "force:return null");
    assert_eq!(service.forks, Forks::from_dubbo(2), "forks=many skipped");
    // The rule's method key beats the consumer's method setting.
    let find = cfg.resolve_for_snapshot_with(Some("find"), 1, &plain, &dynamic);
    assert_eq!(find.timeout, Duration::from_millis(250));
    // The consumer's own method layer beats the rule's service-level keys.
    let get = cfg.resolve_for_snapshot_with(Some("get"), 1, &plain, &dynamic);
    assert_eq!(get.retries, 0);
    assert_eq!(get.timeout, Duration::from_millis(6000));
    // A provider's method-level timeout beats a service-level one, the rule's included.
    let with_method = [ProviderKeys::parse(&params(&[("list.timeout", "2000")]))];
    let list = cfg.resolve_for_snapshot_with(Some("list"), 1, &with_method, &dynamic);
    assert_eq!(list.timeout_for(0), Duration::from_millis(2000));
    // Its method names are resolved for.
    let names = cfg.method_names(&plain, &dynamic);
    assert!(names.contains(&"find".to_string()) && names.contains(&"get".to_string()));
    // Without rules, the consumer's own settings.
    let own = cfg.resolve_for_snapshot(None, 1, &plain);
    assert_eq!(own.timeout, Duration::from_millis(1000));
    assert_eq!(own.retries, 1);
}
