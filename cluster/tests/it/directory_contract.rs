//! The cluster over the `Directory` contract (a fixed list, a discovery system of one's own),
//! as a `tower::Layer`, and `poll_ready` following the `actives` caps.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_cluster::contracts::{ArcSwap, Directory, Guard, Snapshot};
use switchman_cluster::{ClusterConfig, ClusterInvoker, ClusterLayer, Settings};
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, Result, ServiceKey,
};
use switchman_discovery::{DirectoryConfig, FixedDirectory};
use tokio::sync::Semaphore;
use tower::{Service, ServiceBuilder, ServiceExt};

/// A waker that records being woken: polls a service by hand, so "not ready" is checked
/// without waiting for time to pass, and "woken" without polling again.
fn flag_waker() -> (Arc<std::sync::atomic::AtomicBool>, std::task::Waker) {
    struct Flag(Arc<std::sync::atomic::AtomicBool>);
    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let woken = Arc::new(std::sync::atomic::AtomicBool::new(false));
    (woken.clone(), std::task::Waker::from(Arc::new(Flag(woken))))
}

/// Answers with the port it was sent to; with `gate`, each call first waits for a permit.
#[derive(Debug, Default)]
struct Port {
    gate: Option<Arc<Semaphore>>,
    calls: AtomicUsize,
}

impl Invoker for Port {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        _invocation: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(g) = &self.gate {
                g.acquire()
                    .await
                    .map_err(|_| Error::transport("gate closed"))?
                    .forget();
            }
            Ok(json!(target.port()))
        })
    }
}

fn config() -> DirectoryConfig {
    DirectoryConfig::new(ServiceKey::new("com.foo.Greeter"))
}

fn fleet(ports: &[u16]) -> Vec<Instance> {
    ports
        .iter()
        .map(|&p| Instance::builder("10.0.0.1", p).build())
        .collect()
}

/// Someone else's discovery system: it swaps whole fleets in.
#[derive(Debug)]
struct Swapping {
    current: ArcSwap<Snapshot>,
}

impl Swapping {
    fn show(&self, ports: &[u16]) {
        let list = fleet(ports).into_iter().map(Arc::new).collect();
        self.current
            .store(Arc::new(Snapshot::fixed(&config(), list)));
    }
}

impl Directory for Swapping {
    fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }
}

#[tokio::test]
async fn the_cluster_calls_whatever_a_directory_of_ones_own_hands_out() {
    let dir = Arc::new(Swapping {
        current: ArcSwap::from_pointee(Snapshot::fixed(&config(), Vec::new())),
    });
    let cluster = ClusterInvoker::new(
        dir.clone(),
        Arc::new(Port::default()),
        ClusterConfig::default(),
    );
    let e = cluster.invoke(&Invocation::new("hi")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoProvider, "{e}");

    dir.show(&[1, 2]);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..100 {
        seen.insert(
            cluster
                .invoke(&Invocation::new("hi"))
                .await
                .unwrap()
                .as_u64()
                .unwrap(),
        );
    }
    assert_eq!(seen, [1, 2].into_iter().collect());

    dir.show(&[3]);
    for _ in 0..20 {
        assert_eq!(
            cluster.invoke(&Invocation::new("hi")).await.unwrap(),
            json!(3)
        );
    }
}

#[tokio::test]
async fn a_fixed_directory_routes_as_the_registry_directory_would() {
    // A disabled instance is listed but not routed, as in a registry's snapshot.
    let mut list = fleet(&[1, 2]);
    list.push(Instance::builder("10.0.0.1", 3).enabled(false).build());
    let dir = FixedDirectory::new(&config(), list);
    let snap = dir.load();
    assert_eq!(snap.instances().len(), 3);
    let routed: Vec<u16> = snap.endpoints().iter().map(|e| e.instance.port()).collect();
    assert_eq!(routed, [1, 2]);
    assert_eq!(snap.epoch(), 1);
    assert!(dir.epochs().is_none(), "a fixed list never changes");
}

#[tokio::test]
async fn the_cluster_is_a_tower_layer_over_a_transport() {
    let dir = Arc::new(FixedDirectory::new(&config(), fleet(&[7])));
    let transport = Arc::new(Port::default());
    let mut svc = ServiceBuilder::new()
        .layer(ClusterLayer::new(dir, ClusterConfig::default()).budget(None))
        .service(transport.clone());
    let got = svc
        .ready()
        .await
        .unwrap()
        .call(Invocation::new("hi"))
        .await
        .unwrap();
    assert_eq!(got, json!(7));
    assert_eq!(transport.calls.load(Ordering::SeqCst), 1);
}

/// Two endpoints with `actives=1` each: two calls in flight fill them; `poll_ready` is
/// pending (load_shed refuses at once) until one ends.
#[tokio::test]
async fn poll_ready_is_pending_while_in_flight_calls_fill_every_cap() {
    let gate = Arc::new(Semaphore::new(0));
    let transport = Arc::new(Port {
        gate: Some(gate.clone()),
        calls: AtomicUsize::new(0),
    });
    let dir = Arc::new(FixedDirectory::new(&config(), fleet(&[1, 2])));
    let cluster = ClusterInvoker::new(
        dir,
        transport.clone(),
        ClusterConfig::default().service_settings(Settings::new().actives(1)),
    );
    let mut svc = cluster.clone();
    svc.ready().await.expect("nothing in flight: ready");
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let c = cluster.clone();
            tokio::spawn(async move { c.invoke(&Invocation::new("hi")).await })
        })
        .collect();
    while transport.calls.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    let (woken, waker) = flag_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(
        svc.poll_ready(&mut cx).is_pending(),
        "both endpoints at their cap: not ready"
    );
    // load_shed turns "not ready" into an immediate refusal instead of a queued call.
    let mut shed = ServiceBuilder::new().load_shed().service(cluster.clone());
    let refused = shed
        .ready()
        .await
        .unwrap()
        .call(Invocation::new("hi"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("overloaded"), "{refused}");

    // One call ends: ready again, woken rather than polled. (The refused call above never
    // reached an endpoint: still not ready, and nobody woke the waiter.)
    assert!(svc.poll_ready(&mut cx).is_pending());
    assert!(!woken.load(Ordering::SeqCst));
    gate.add_permits(1);
    tokio::time::timeout(Duration::from_secs(5), async {
        while !woken.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("woken when a call ended");
    assert!(matches!(
        svc.poll_ready(&mut cx),
        std::task::Poll::Ready(Ok(()))
    ));
    gate.add_permits(1);
    for c in calls {
        c.await.unwrap().unwrap();
    }
}

/// A provider that registered its own `actives` caps itself; one uncapped endpoint keeps the
/// invoker ready.
#[tokio::test]
async fn provider_registered_caps_count_and_an_uncapped_endpoint_keeps_it_ready() {
    let gate = Arc::new(Semaphore::new(0));
    let transport = Arc::new(Port {
        gate: Some(gate.clone()),
        calls: AtomicUsize::new(0),
    });
    let capped = |ports: &[u16]| -> Vec<Instance> {
        ports
            .iter()
            .map(|&p| {
                Instance::builder("10.0.0.1", p)
                    .param("actives", "1")
                    .build()
            })
            .collect()
    };
    let one = Arc::new(FixedDirectory::new(&config(), capped(&[1])));
    let mut mixed_list = capped(&[1]);
    mixed_list.extend(fleet(&[2]));
    let mixed = Arc::new(FixedDirectory::new(&config(), mixed_list));
    let c1 = ClusterInvoker::new(one, transport.clone(), ClusterConfig::default());
    let c2 = ClusterInvoker::new(mixed, transport.clone(), ClusterConfig::default());
    let busy = {
        let c = c1.clone();
        tokio::spawn(async move { c.invoke(&Invocation::new("hi")).await })
    };
    while transport.calls.load(Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    let mut s1 = c1.clone();
    let (_, waker) = flag_waker();
    assert!(
        s1.poll_ready(&mut std::task::Context::from_waker(&waker))
            .is_pending(),
        "the only endpoint registered actives=1 and has a call in flight"
    );
    let mut s2 = c2.clone();
    tokio::time::timeout(Duration::from_secs(1), s2.ready())
        .await
        .expect("an uncapped endpoint: always ready")
        .unwrap();
    gate.add_permits(1);
    busy.await.unwrap().unwrap();
    tokio::time::timeout(Duration::from_secs(1), s1.ready())
        .await
        .expect("room again")
        .unwrap();
}

/// A directory of one's own builds every snapshot with [`Snapshot::fixed`]; the cluster's
/// per-snapshot caches (the balancer chosen per method, per-endpoint limits) must follow each
/// new snapshot, whatever its epoch says. With round robin, and providers registering their own
/// `timeout`, a fleet shrinking from five endpoints to two is called only at the two, without
/// a panic (an index into the old fleet's tables).
#[tokio::test]
async fn per_snapshot_caches_follow_a_directory_of_ones_own_through_a_shrinking_fleet() {
    let with_timeout = |ports: &[u16]| -> Vec<Arc<Instance>> {
        ports
            .iter()
            .map(|&p| {
                Arc::new(
                    Instance::builder("10.0.0.1", p)
                        .param("timeout", "700")
                        .build(),
                )
            })
            .collect()
    };
    let dir = Arc::new(Swapping {
        current: ArcSwap::from_pointee(Snapshot::fixed(&config(), with_timeout(&[1, 2, 3, 4, 5]))),
    });
    let cluster = ClusterInvoker::new(
        dir.clone(),
        Arc::new(Port::default()),
        ClusterConfig::default().service_settings(
            Settings::new().loadbalance(switchman_cluster::BalancerKind::RoundRobin),
        ),
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        seen.insert(
            cluster
                .invoke(&Invocation::new("hi"))
                .await
                .unwrap()
                .as_u64()
                .unwrap(),
        );
    }
    assert_eq!(seen.len(), 5, "round robin over five: {seen:?}");
    assert_eq!(dir.snapshot().epoch(), 1);

    dir.current
        .store(Arc::new(Snapshot::fixed(&config(), with_timeout(&[6, 7]))));
    assert_eq!(
        dir.snapshot().epoch(),
        1,
        "the same epoch as the first fleet"
    );
    let mut after = std::collections::BTreeSet::new();
    for _ in 0..50 {
        after.insert(
            cluster
                .invoke(&Invocation::new("hi"))
                .await
                .unwrap()
                .as_u64()
                .unwrap(),
        );
    }
    assert_eq!(after, [6, 7].into_iter().collect());
}
