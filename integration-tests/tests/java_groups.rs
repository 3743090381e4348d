//! One Java Dubbo 3.3 process exporting `DemoService` under two groups on one port: two
//! endpoints at one address (issue #14, identity by service key), each reached by a consumer
//! of both groups. Real ZooKeeper (`SWITCHMAN_ZK`), real Java provider (`peers/java`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use switchman_cluster::dubbo::DubboInvoker;
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
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
    let _provider = JavaProvider::start(
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

    let cluster = ClusterInvoker::new(
        dir.clone(),
        Arc::new(ProtocolInvoker::new().dubbo(DubboInvoker::new())),
        ClusterConfig::default().timeout(Duration::from_secs(5)),
    );
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..200 {
        let who = cluster.invoke(&Invocation::new("whoami")).await.unwrap();
        *counts.entry(who.as_str().unwrap().to_string()).or_default() += 1;
    }
    eprintln!("200 calls over two groups on one port: {counts:?}");
    // Each group answers as its own service object: the provider dispatched by group.
    let a = counts.get(&format!("both/{ga}")).copied().unwrap_or(0);
    let b = counts.get(&format!("both/{gb}")).copied().unwrap_or(0);
    assert_eq!(a + b, 200, "{counts:?}");
    assert!(a > 60 && b > 60, "both endpoints take calls: {counts:?}");
    // Each endpoint keeps its own statistics.
    let snap = dir.load();
    let served: Vec<u64> = snap
        .endpoints()
        .iter()
        .map(|e| e.stats.succeeded())
        .collect();
    assert_eq!(served.iter().sum::<u64>(), 200, "{served:?}");
    assert!(served.iter().all(|&n| n > 60), "{served:?}");
}
