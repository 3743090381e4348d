//! `loadbalance` from the settings and the providers' registrations, per method and per routed
//! subset, with tables built once per snapshot.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};
use switchman_loadbalance::BalancerKind;

use super::{FaultInvoker, directory};
use crate::{ClusterConfig, ClusterInvoker, Settings};

fn at(port: u16, params: &[(&str, &str)]) -> Instance {
    params
        .iter()
        .fold(Instance::builder("10.0.0.1", port), |b, (k, v)| {
            b.param(k, v)
        })
        .build()
}

/// `n` calls of `method` with the argument `arg`; the ports called, in order.
async fn calls(
    c: &ClusterInvoker,
    fi: &FaultInvoker,
    method: &str,
    arg: Value,
    n: usize,
) -> Vec<u16> {
    let before = fi.calls().len();
    for _ in 0..n {
        c.invoke(&Invocation::new(method).with_args(vec![arg.clone()]))
            .await
            .unwrap();
    }
    fi.calls()[before..].to_vec()
}

/// Round robin over `k` equal instances: every window of `k` calls holds each once.
fn rotates(seq: &[u16], k: usize) -> bool {
    seq.chunks(k)
        .all(|w| w.len() < k || w.iter().collect::<HashSet<_>>().len() == k)
}

/// Consistent hash: one argument, one instance.
async fn sticks_by_key(c: &ClusterInvoker, fi: &FaultInvoker, method: &str) -> bool {
    for key in 0..20 {
        let seq = calls(c, fi, method, json!(key), 6).await;
        if seq.iter().collect::<HashSet<_>>().len() != 1 {
            return false;
        }
    }
    true
}

/// Same argument, spread over several instances (random or round robin, not a hash).
async fn spreads(c: &ClusterInvoker, fi: &FaultInvoker, method: &str) -> bool {
    let seq = calls(c, fi, method, json!(7), 40).await;
    seq.iter().collect::<HashSet<_>>().len() > 1
}

/// Nothing on the consumer: the providers' `loadbalance=roundrobin` applies (the directory's
/// balancer is random), and its tables are built once for the snapshot, not per call.
#[tokio::test(start_paused = true)]
async fn a_providers_loadbalance_applies_and_its_tables_are_built_once() {
    let rr = [("loadbalance", "roundrobin")];
    let dir = directory(vec![at(1, &rr), at(2, &rr), at(3, &rr)]).await;
    let fi = FaultInvoker::with(&[]);
    let c = ClusterInvoker::new(dir.clone(), fi.clone(), ClusterConfig::default());
    let seq = calls(&c, &fi, "m", json!(1), 60).await;
    assert!(rotates(&seq, 3), "round robin: {seq:?}");
    assert_eq!(c.settings("m").loadbalance_for(0), Some("roundrobin"));
    let snap = dir.load();
    assert_eq!(snap.extra_balancers(), 1, "one table set for the snapshot");
    calls(&c, &fi, "other", json!(1), 30).await;
    assert_eq!(
        snap.extra_balancers(),
        1,
        "shared by every method, never rebuilt per call"
    );
    // A new snapshot gets its own, once.
    // (No warm-up for the newcomer, so that the rotation is even.)
    let newcomer = Instance::builder("10.0.0.1", 4)
        .param("loadbalance", "roundrobin")
        .warmup(Duration::ZERO)
        .build();
    dir.apply(Update::add(vec![newcomer]));
    let next = dir
        .wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 4)
        .await
        .unwrap();
    assert_eq!(next.extra_balancers(), 0, "built on first use");
    let seq = calls(&c, &fi, "m", json!(1), 40).await;
    assert!(rotates(&seq, 4), "{seq:?}");
    assert_eq!(next.extra_balancers(), 1);
    assert_eq!(snap.extra_balancers(), 1);
}

/// Dubbo's precedence, end to end: consumer method > provider method > consumer > provider.
#[tokio::test(start_paused = true)]
async fn loadbalance_precedence_end_to_end() {
    // The providers register consistenthash for the service and roundrobin for `m`.
    let p = [
        ("loadbalance", "consistenthash"),
        ("m.loadbalance", "roundrobin"),
    ];
    let dir = directory(vec![at(1, &p), at(2, &p), at(3, &p)]).await;
    let fi = FaultInvoker::with(&[]);

    // Provider only: `m` rotates (provider method), `x` hashes (provider service).
    let c = ClusterInvoker::new(dir.clone(), fi.clone(), ClusterConfig::default());
    let seq = calls(&c, &fi, "m", json!(1), 30).await;
    assert!(rotates(&seq, 3), "provider method: {seq:?}");
    assert!(
        sticks_by_key(&c, &fi, "x").await,
        "provider service: consistenthash"
    );

    // Consumer service random: beats the provider's service value, not its method value.
    let consumer = ClusterConfig::default().loadbalance(BalancerKind::Random);
    let c = ClusterInvoker::new(dir.clone(), fi.clone(), consumer.clone());
    let seq = calls(&c, &fi, "m", json!(1), 30).await;
    assert!(rotates(&seq, 3), "provider method beats consumer: {seq:?}");
    assert!(
        spreads(&c, &fi, "x").await,
        "consumer beats provider service"
    );

    // Consumer method consistenthash on `m`: beats the provider's method value.
    let method = consumer.method(
        "m",
        Settings::new().loadbalance(BalancerKind::ConsistentHash),
    );
    let c = ClusterInvoker::new(dir, fi.clone(), method);
    assert!(
        sticks_by_key(&c, &fi, "m").await,
        "consumer method beats all"
    );
    assert!(spreads(&c, &fi, "x").await);
}

/// Per method and per routed subset: a rule routes `find*` to zone z1, whose first provider
/// registered consistenthash, and every other call to all providers, whose first registered
/// roundrobin; each subset uses its own first provider's balancer, as Dubbo reads
/// `invokers.get(0)` after routing.
#[tokio::test(start_paused = true)]
async fn each_routed_subset_uses_its_first_providers_balancer() {
    let insts = vec![
        at(1, &[("zone", "z0"), ("loadbalance", "roundrobin")]),
        at(2, &[("zone", "z0")]),
        at(3, &[("zone", "z1"), ("loadbalance", "consistenthash")]),
        at(4, &[("zone", "z1")]),
    ];
    let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("com.foo.Bar")), None);
    dir.apply(Update::reset(insts));
    dir.apply(Update::Rule {
        key: "com.foo.Bar::.condition-router".into(),
        text: Some("method = find* => zone = z1".into()),
    });
    let snap = dir
        .wait_until(Duration::from_secs(5), |s| s.subset_count() == 2)
        .await
        .unwrap();
    let dir = Arc::new(dir);
    let fi = FaultInvoker::with(&[]);
    let c = ClusterInvoker::new(dir, fi.clone(), ClusterConfig::default());
    let seq = calls(&c, &fi, "list", json!(1), 40).await;
    assert!(rotates(&seq, 4), "all four, round robin: {seq:?}");
    assert!(sticks_by_key(&c, &fi, "findUser").await);
    let found = calls(&c, &fi, "findUser", json!(3), 5).await;
    assert!(found.iter().all(|p| *p == 3 || *p == 4), "{found:?}");
    assert_eq!(
        snap.extra_balancers(),
        2,
        "one table set per balancer for the snapshot"
    );
}

/// A balancer set in code for one method, the others on the directory's tables; the YAML
/// loader's key works the same way.
#[tokio::test(start_paused = true)]
async fn per_method_balancers_from_code_and_yaml() {
    let dir = directory(vec![at(1, &[]), at(2, &[]), at(3, &[])]).await;
    let fi = FaultInvoker::with(&[]);
    let cfg = ClusterConfig::default().method(
        "find",
        Settings::new().loadbalance(BalancerKind::ConsistentHash),
    );
    let c = ClusterInvoker::new(dir.clone(), fi.clone(), cfg);
    assert!(sticks_by_key(&c, &fi, "find").await);
    assert!(spreads(&c, &fi, "list").await);
    assert_eq!(c.settings("list").loadbalance_for(0), None);

    let yaml = "services:\n  com.foo.Bar:\n    methods:\n      list: { loadbalance: roundrobin }\n";
    let cfg = ClusterConfig::from_yaml(yaml, "com.foo.Bar").unwrap();
    let c = ClusterInvoker::new(dir, fi.clone(), cfg);
    let seq = calls(&c, &fi, "list", json!(1), 30).await;
    assert!(rotates(&seq, 3), "{seq:?}");
}

/// The directory's own balancer named again in the settings reuses the snapshot's tables
/// instead of building a second set.
#[tokio::test(start_paused = true)]
async fn naming_the_directorys_balancer_builds_nothing_more() {
    let dir = directory(vec![at(1, &[]), at(2, &[])]).await;
    let fi = FaultInvoker::with(&[]);
    let cfg = ClusterConfig::default().loadbalance(BalancerKind::Random);
    let c = ClusterInvoker::new(dir.clone(), fi.clone(), cfg);
    calls(&c, &fi, "m", json!(1), 10).await;
    assert_eq!(dir.load().extra_balancers(), 0);
}
