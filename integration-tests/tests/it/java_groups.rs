//! One Java Dubbo 3.3 process exporting `DemoService` under two groups on one port: two
//! endpoints at one address (issue #14, identity by service key); a consumer of both groups
//! is mergeable as in Dubbo: the first group alone without a merger, both with one. Real ZooKeeper (`SWITCHMAN_ZK`), real Java provider (`peers/java`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::dubbo::DubboInvoker;
use switchman_cluster::{ClusterConfig, ClusterInvoker, Merger, ProtocolInvoker, Settings};
use switchman_core::{Invocation, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_on_one_port_are_two_endpoints_and_both_are_called() {
    if java_peer::skipped("two_groups_on_one_port_are_two_endpoints_and_both_are_called") {
        return;
    }
    let base = unique("groups");
    let (ga, gb) = (format!("{base}-a"), format!("{base}-b"));
    let provider = JavaProvider::start(
        &ProviderOptions::zookeeper(&zookeeper())
            .group(&format!("{ga},{gb}"))
            .name("both")
            .param("warmup", "0"),
    );
    let reg = registry_from_url(&format!("zookeeper://{}", zookeeper())).unwrap();
    let dir = Arc::new(
        RegistryDirectory::subscribe(
            reg.as_ref(),
            DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, format!("{ga},{gb}"), "")),
        )
        .await
        .unwrap(),
    );
    let snap = dir
        .wait_until(Duration::from_secs(30), |s| s.endpoints().len() == 2)
        .await
        .expect("both groups of the one provider");
    let eps = snap.endpoints();
    assert_eq!(eps[0].instance.address(), eps[1].instance.address());
    let mut groups: Vec<&str> = eps
        .iter()
        .map(|e| e.instance.service().group.as_ref())
        .collect();
    groups.sort_unstable();
    assert_eq!(groups, [ga.as_str(), gb.as_str()]);
    assert!(!Arc::ptr_eq(&eps[0].stats, &eps[1].stats));

    // A consumer of two groups is mergeable (as in Dubbo); without a merger it calls the first
    // group it lists only.
    let cluster = |config: ClusterConfig| {
        ClusterInvoker::new(
            dir.clone(),
            Arc::new(ProtocolInvoker::new().dubbo(DubboInvoker::new())),
            config.timeout(Duration::from_secs(5)),
        )
    };
    let first_only = cluster(ClusterConfig::default());
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..50 {
        let who = first_only.invoke(&Invocation::new("whoami")).await.unwrap();
        *counts.entry(who.as_str().unwrap().to_string()).or_default() += 1;
    }
    assert_eq!(counts.get(&format!("both/{ga}")), Some(&50), "{counts:?}");

    // With `merger=map` every group is called and the answers merged.
    let merging =
        cluster(ClusterConfig::default().service_settings(Settings::new().merger(Merger::Map)));
    for k in 0..40 {
        let echoed = merging
            .invoke(&Invocation::new("echo").with_args(vec![json!({"k": k})]))
            .await
            .unwrap();
        assert_eq!(echoed, json!({"k": k}));
    }
    // 40 merged calls reached the provider's DemoService 80 times: once per group.
    assert_eq!(
        provider.calls_of_settled("echo", 80, Duration::from_secs(5)),
        80
    );
    // Each endpoint keeps its own statistics.
    let snap = dir.load();
    let served: Vec<u64> = snap
        .endpoints()
        .iter()
        .map(|e| e.stats.succeeded())
        .collect();
    assert_eq!(served.iter().sum::<u64>(), 50 + 80, "{served:?}");
    assert!(served.iter().all(|&n| n >= 40), "{served:?}");
}
