//! `loadbalance` registered by real Java Dubbo 3.3 providers (issue #16 item 5), read from
//! their ZooKeeper URLs with Dubbo's precedence: consumer method > provider method > consumer >
//! provider. Two providers register `loadbalance=consistenthash` for the service and
//! `whoami.loadbalance=roundrobin` for one method. Real ZooKeeper (`SWITCHMAN_ZK`), real Java
//! providers (`peers/java`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_cluster::dubbo::DubboInvoker;
use switchman_cluster::{BalancerKind, ClusterConfig, ClusterInvoker, ProtocolInvoker, Settings};
use switchman_core::{BoxFuture, Instance, Invocation, Invoker, Result, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

/// The transport, recording the port each attempt goes to.
#[derive(Debug)]
struct Recording {
    inner: ProtocolInvoker,
    ports: Mutex<Vec<u16>>,
}

impl Invoker for Recording {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        inv: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        if let Ok(mut p) = self.ports.lock() {
            p.push(target.port());
        }
        self.inner.invoke(target, inv, timeout)
    }
}

impl Recording {
    fn take(&self) -> Vec<u16> {
        std::mem::take(&mut *self.ports.lock().unwrap())
    }
}

async fn run(c: &ClusterInvoker, method: &str, arg: Option<Value>, n: usize) {
    for k in 0..n {
        let inv = match &arg {
            Some(a) => Invocation::new(method).with_args(vec![a.clone()]),
            None => Invocation::new(method),
        };
        c.invoke(&inv)
            .await
            .unwrap_or_else(|e| panic!("{method} call {k}: {e}"));
    }
}

fn alternates(ports: &[u16]) -> bool {
    ports.len() >= 2 && ports.windows(2).all(|w| w[0] != w[1])
}

fn distinct(ports: &[u16]) -> usize {
    ports.iter().collect::<HashSet<_>>().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadbalance_from_java_providers_follows_dubbos_precedence() {
    if java_peer::skipped("loadbalance_from_java_providers_follows_dubbos_precedence") {
        return;
    }
    let group = unique("lb");
    let start = |name: &str| {
        JavaProvider::start(
            &ProviderOptions::zookeeper(&zookeeper())
                .group(&group)
                .name(name)
                .param("warmup", "0")
                .param("loadbalance", "consistenthash")
                .param("whoami.loadbalance", "roundrobin"),
        )
    };
    let (p1, p2) = (start("p1"), start("p2"));
    let reg = registry_from_url(&format!("zookeeper://{}", zookeeper())).unwrap();
    let dir = Arc::new(
        RegistryDirectory::subscribe(
            reg.as_ref(),
            DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group.as_str(), "")),
        )
        .await
        .unwrap(),
    );
    let snap = dir
        .wait_until(Duration::from_secs(30), |s| s.endpoints().len() == 2)
        .await
        .expect("both providers");
    for e in snap.endpoints() {
        assert_eq!(e.instance.param("whoami.loadbalance"), Some("roundrobin"));
    }
    let transport = Arc::new(Recording {
        inner: ProtocolInvoker::new().dubbo(DubboInvoker::new()),
        ports: Mutex::new(Vec::new()),
    });
    let cluster = |config: ClusterConfig| {
        ClusterInvoker::new(
            dir.clone(),
            transport.clone(),
            config.timeout(Duration::from_secs(5)),
        )
    };
    let ports = [p1.port(), p2.port()];

    // Provider only: `whoami` round robin (its method value), `sayHello` consistent hash (its
    // service value): one key, one provider; the keys spread over both.
    let c = cluster(ClusterConfig::default());
    run(&c, "whoami", None, 20).await;
    let seq = transport.take();
    assert!(alternates(&seq), "provider method roundrobin: {seq:?}");
    let mut owners = HashSet::new();
    for key in 0..16 {
        run(&c, "sayHello", Some(json!(format!("key-{key}"))), 4).await;
        let seq = transport.take();
        assert_eq!(
            distinct(&seq),
            1,
            "provider consistenthash, key {key}: {seq:?}"
        );
        owners.insert(seq[0]);
    }
    assert_eq!(owners.len(), 2, "16 keys over both providers {ports:?}");

    // Consumer service random: beats the provider's service value (`sayHello` spreads), not its
    // method value (`whoami` still alternates).
    let c = cluster(ClusterConfig::default().loadbalance(BalancerKind::Random));
    run(&c, "sayHello", Some(json!("one-key")), 30).await;
    let seq = transport.take();
    assert_eq!(
        distinct(&seq),
        2,
        "consumer random beats provider consistenthash: {seq:?}"
    );
    run(&c, "whoami", None, 20).await;
    let seq = transport.take();
    assert!(alternates(&seq), "provider method beats consumer: {seq:?}");

    // Consumer method consistenthash on `whoami` (no argument: one key): beats everything.
    let c = cluster(
        ClusterConfig::default()
            .loadbalance(BalancerKind::Random)
            .method(
                "whoami",
                Settings::new().loadbalance(BalancerKind::ConsistentHash),
            ),
    );
    run(&c, "whoami", None, 20).await;
    let seq = transport.take();
    assert_eq!(
        distinct(&seq),
        1,
        "consumer method beats provider method: {seq:?}"
    );
    drop((p1, p2));
}
