//! The YAML and URL loaders: Dubbo's keys, typed values, errors naming the key and value.

use std::collections::BTreeMap;
use std::time::Duration;

use switchman_loadbalance::{BalancerKind, OutlierConfig};

use super::super::*;
use super::params;

#[test]
fn yaml_with_dubbo_keys_and_clear_errors() {
    let text = "cluster: failfast\ntimeout: 800\nservices:\n  com.foo.Bar:\n    cluster: forking\n    forks: 3\n    broadcast.fail.percent: 50\n    methods:\n      sayHello: { retries: 0, mock: 'fail:return {\"x\": 1}' }\n";
    let cfg = ClusterConfig::from_yaml(text, "com.foo.Bar").unwrap();
    let e = cfg.resolve(Some("sayHello"), &BTreeMap::new());
    assert_eq!(
        (
            e.strategy,
            e.forks,
            e.retries,
            e.timeout.as_millis(),
            e.broadcast_fail_percent.get()
        ),
        (Strategy::Forking, Forks::from_dubbo(3), 0, 800, 50)
    );
    assert!(matches!(e.mock, Some(Mock::Fail(MockAction::Return(_)))));
    let other = ClusterConfig::from_yaml(text, "com.foo.Other")
        .unwrap()
        .resolve(None, &BTreeMap::new());
    assert_eq!(other.strategy, Strategy::Failfast);

    let e = ClusterConfig::from_yaml("cluster: teleport\n", "x").unwrap_err();
    assert!(e.to_string().contains("teleport"), "{e}");
    let e = ClusterConfig::from_yaml("retires: 3\n", "x").unwrap_err();
    assert!(e.to_string().contains("retires"), "{e}");
    let e =
        ClusterConfig::from_yaml("services:\n  x:\n    mock: 'fail:return {'\n", "x").unwrap_err();
    assert!(e.to_string().contains("not JSON"), "{e}");
    let e = ClusterConfig::from_yaml("broadcast.fail.percent: 150\n", "x").unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
}

/// Every value that used to be dropped silently (`hedge: p99` turned hedging off) is now an
/// error naming where, the key and the value.
#[test]
fn invalid_values_are_errors_naming_the_key_and_value() {
    for (yaml, needles) in [
        ("hedge: p99\n", &["cluster config", "hedge=\"p99\""][..]),
        ("retries: lots\n", &["retries=\"lots\"", "integer"]),
        ("timeout: soon\n", &["timeout=\"soon\""]),
        ("forks: many\n", &["forks=\"many\""]),
        ("sticky: yes\n", &["sticky=\"yes\"", "true or false"]),
        ("deadline: 0\n", &["deadline=\"0\""]),
        ("merger: sum\n", &["merger=\"sum\""]),
        (
            "loadbalance: fastest\n",
            &["loadbalance=\"fastest\"", "roundrobin"],
        ),
        ("hash.nodes: 2\n", &["hash.nodes=\"2\"", "at least 4"]),
        ("hash.arguments: a,b\n", &["hash.arguments=\"a,b\""]),
        ("failbacktasks: x\n", &["failbacktasks=\"x\""]),
        (
            "services:\n  com.foo.Bar:\n    methods:\n      find: { hedge: p99 }\n",
            &["service com.foo.Bar, method find", "hedge=\"p99\""],
        ),
        (
            "services:\n  com.foo.Other:\n    loadbalance: nope\n",
            &["service com.foo.Other", "loadbalance=\"nope\""],
        ),
    ] {
        let e = ClusterConfig::from_yaml(yaml, "com.foo.Bar").unwrap_err();
        for n in needles {
            assert!(e.to_string().contains(n), "{yaml}: {e} (wanted {n})");
        }
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
    }
}

#[test]
fn yaml_accepts_loadbalance_and_its_parameters_at_every_level() {
    let text = "loadbalance: roundrobin\nservices:\n  com.foo.Bar:\n    loadbalance: leastactive\n    methods:\n      find: { loadbalance: consistenthash, hash.nodes: 40, hash.arguments: [0, 1] }\n";
    let cfg = ClusterConfig::from_yaml(text, "com.foo.Bar").unwrap();
    assert_eq!(
        cfg.global.loadbalance,
        Some(Balancer::Named(BalancerKind::RoundRobin))
    );
    assert_eq!(
        cfg.service.loadbalance,
        Some(Balancer::Named(BalancerKind::LeastActive))
    );
    let find = &cfg.methods["find"];
    assert_eq!(
        find.loadbalance,
        Some(Balancer::Named(BalancerKind::ConsistentHash))
    );
    assert_eq!(find.hash_nodes, Some(HashNodes::new(40).unwrap()));
    assert_eq!(find.hash_arguments.as_ref().unwrap().indexes(), [0, 1]);
    let e = cfg.resolve(Some("find"), &BTreeMap::new());
    assert_eq!(e.loadbalance_for(0), Some("consistenthash"));
    let e = cfg.resolve(Some("other"), &BTreeMap::new());
    assert_eq!(e.loadbalance_for(0), Some("leastactive"));
    // Durations with units, and Dubbo's `timeout: 0` (the default, decided at that layer).
    let cfg = ClusterConfig::from_yaml(
        "timeout: 1.5s\ndeadline: 800ms\nhedge: 30\nservices:\n  x:\n    methods:\n      m: { timeout: 0 }\n",
        "x",
    )
    .unwrap();
    let e = cfg.resolve(None, &params(&[("timeout", "5000")]));
    assert_eq!(e.timeout, Duration::from_millis(1500));
    assert_eq!(e.deadline, Some(Duration::from_millis(800)));
    assert_eq!(e.hedge, Some(Hedge::After(Duration::from_millis(30))));
    let m = cfg.resolve(Some("m"), &params(&[("m.timeout", "5000")]));
    assert_eq!(
        m.timeout,
        Duration::from_millis(1000),
        "timeout: 0 decides: 1000 ms"
    );
}

#[test]
fn url_params_load_with_the_same_parser() {
    let s = Settings::from_params(&params(&[
        ("application", "shop"),
        ("cluster", "forking"),
        ("forks", "0"),
        ("retries", "-1"),
        ("loadbalance", "RoundRobin"),
        ("sticky", "true"),
    ]))
    .unwrap();
    assert_eq!(s.strategy, Some(Strategy::Forking));
    assert_eq!(s.forks, Some(Forks::All));
    assert_eq!(s.retries, Some(Retries::Negative));
    assert_eq!(
        s.loadbalance,
        Some(Balancer::Named(BalancerKind::RoundRobin))
    );
    assert_eq!(s.sticky, Some(true));
    let e = Settings::from_params(&params(&[("hedge", "p99")])).unwrap_err();
    assert!(e.message().contains("hedge=\"p99\""), "{e}");
    let mut s = Settings::new();
    let e = s.set("retires", "3").unwrap_err();
    assert!(
        e.message().contains("retires") && e.message().contains("retries"),
        "{e}"
    );
}

/// The provider's registration, read leniently: the six keys it may set, per method and for
/// the service, `hash.nodes` being a service-level key and not method `hash`.
#[test]
fn provider_params_read_the_keys_dubbo_reads_from_the_provider() {
    let p = params(&[
        ("timeout", "200"),
        ("loadbalance", "roundrobin"),
        ("hash.nodes", "80"),
        ("find.hash.arguments", "1,2"),
        ("find.loadbalance", "consistenthash"),
        ("find.sticky", "true"),
        ("retries", "0"),
        ("forks", "9"),
        ("find.timeout", "soon"),
    ]);
    let service = Settings::from_provider_params(&p, None);
    assert_eq!(service.timeout, Some(Duration::from_millis(200)));
    assert_eq!(
        service.loadbalance,
        Some(Balancer::Named(BalancerKind::RoundRobin))
    );
    assert_eq!(service.hash_nodes, Some(HashNodes::new(80).unwrap()));
    assert_eq!(service.retries, None, "retries are the consumer's");
    assert_eq!(service.forks, None, "forks are the consumer's");
    let find = Settings::from_provider_params(&p, Some("find"));
    assert_eq!(
        find.loadbalance,
        Some(Balancer::Named(BalancerKind::ConsistentHash))
    );
    assert_eq!(find.hash_arguments.unwrap().indexes(), [1, 2]);
    assert_eq!(find.sticky, Some(true));
    assert_eq!(
        find.timeout,
        Some(Duration::from_millis(200)),
        "a method value that does not parse falls back to the service value"
    );
}

#[test]
fn outlier_keys_at_global_and_service_level() {
    let text = "outlier.consecutive: 3\noutlier.base-penalty: 10s\nservices:\n  com.foo.Bar:\n    outlier.success-rate: 90%\n    outlier.max-ejection-percent: 34\n    outlier.window: 60000\n  com.foo.Off:\n    outlier.enabled: false\n";
    let o = ClusterConfig::from_yaml(text, "com.foo.Bar")
        .unwrap()
        .outlier;
    assert_eq!(o.consecutive_failures, 3);
    assert_eq!(o.base_penalty, Duration::from_secs(10));
    assert_eq!(o.success_rate, 0.9);
    assert_eq!(o.max_ejection_percent, 34);
    assert_eq!(o.window, Duration::from_secs(60));
    assert_eq!(o.max_penalty, Duration::from_secs(300), "default kept");
    assert!(o.enabled);
    let off = ClusterConfig::from_yaml(text, "com.foo.Off")
        .unwrap()
        .outlier;
    assert!(!off.enabled);
    assert_eq!(off.consecutive_failures, 3, "global layer applies");
    assert_eq!(
        ClusterConfig::from_yaml("timeout: 5\n", "x")
            .unwrap()
            .outlier,
        OutlierConfig::default()
    );
    for (bad, needle) in [
        ("outlier.consecutive: lots\n", "outlier.consecutive"),
        ("outlier.success-rate: 1.5\n", "outlier.success-rate"),
        (
            "outlier.max-ejection-percent: 150\n",
            "outlier.max-ejection-percent",
        ),
        ("outlier.penalty: 3s\n", "outlier.penalty"),
        (
            "services:\n  x:\n    methods:\n      m: { outlier.consecutive: 2 }\n",
            "outlier.consecutive",
        ),
    ] {
        let e = ClusterConfig::from_yaml(bad, "x").unwrap_err();
        assert!(e.to_string().contains(needle), "{bad}: {e}");
    }
}
