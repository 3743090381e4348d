//! Per-endpoint clients made by the directory's maker: made once per endpoint, kept across
//! snapshots, kept through the drain grace and dropped after it, wrapped in tower layers per
//! endpoint.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_cluster::{ClusterConfig, ClusterInvoker, LayeredMaker, Settings};
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, MakeEndpoint, Result, ServiceKey,
};
use switchman_discovery::{DirectoryConfig, EmptyPolicy, RegistryDirectory, Update};
use tower::limit::ConcurrencyLimitLayer;

const T: Duration = Duration::from_secs(5);

/// Counts what it makes and what is dropped; its clients answer with their port after
/// `delay`, recording the most calls in flight per port.
#[derive(Debug, Default)]
struct Maker {
    made: AtomicUsize,
    dropped: Arc<AtomicUsize>,
    delay: Duration,
    in_flight: Arc<Mutex<HashMap<u16, (usize, usize)>>>,
    /// The instances the directory handed each client (`Invoker::instance_changed`).
    handed: Arc<Mutex<Vec<Arc<Instance>>>>,
    /// The weight of the instance of each call.
    called_with: Arc<Mutex<Vec<u32>>>,
}

#[derive(Debug)]
struct Client {
    port: u16,
    delay: Duration,
    dropped: Arc<AtomicUsize>,
    in_flight: Arc<Mutex<HashMap<u16, (usize, usize)>>>,
    handed: Arc<Mutex<Vec<Arc<Instance>>>>,
    called_with: Arc<Mutex<Vec<u32>>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl MakeEndpoint for Maker {
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        self.made.fetch_add(1, Ordering::SeqCst);
        Arc::new(Client {
            port: instance.port(),
            delay: self.delay,
            dropped: self.dropped.clone(),
            in_flight: self.in_flight.clone(),
            handed: self.handed.clone(),
            called_with: self.called_with.clone(),
        })
    }
}

impl Invoker for Client {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        _invocation: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            assert_eq!(
                target.port(),
                self.port,
                "only ever called with its endpoint"
            );
            self.called_with.lock().unwrap().push(target.weight());
            {
                let mut m = self.in_flight.lock().unwrap();
                let e = m.entry(self.port).or_default();
                e.0 += 1;
                e.1 = e.1.max(e.0);
            }
            tokio::time::sleep(self.delay).await;
            self.in_flight
                .lock()
                .unwrap()
                .get_mut(&self.port)
                .unwrap()
                .0 -= 1;
            Ok(json!(self.port))
        })
    }

    fn instance_changed(&self, instance: &Arc<Instance>) {
        assert_eq!(instance.port(), self.port, "only ever its endpoint's");
        self.handed.lock().unwrap().push(instance.clone());
    }
}

/// The shared transport: never used when every endpoint has its own client.
#[derive(Debug)]
struct Unused;

impl Invoker for Unused {
    fn invoke<'a>(
        &'a self,
        _target: &'a Instance,
        _invocation: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async {
            Err(Error::new(
                ErrorKind::Unsupported,
                "the shared transport was used",
            ))
        })
    }
}

fn at(port: u16, weight: u32) -> Instance {
    Instance::builder("10.0.0.1", port).weight(weight).build()
}

fn config(maker: Arc<Maker>, grace: Duration) -> DirectoryConfig {
    DirectoryConfig::new(ServiceKey::new("com.foo.Greeter"))
        .maker(maker)
        .drain_grace(grace)
        .empty_policy(EmptyPolicy::Publish)
}

async fn published(dir: &RegistryDirectory, update: Update, ports: &[u16]) {
    let epoch = dir.load().epoch();
    dir.apply(update);
    dir.wait_until(T, |s| {
        s.epoch() > epoch && {
            let mut p: Vec<u16> = s.endpoints().iter().map(|e| e.instance.port()).collect();
            p.sort_unstable();
            p == ports
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn one_client_per_endpoint_kept_across_snapshots_and_through_the_grace() {
    let maker = Arc::new(Maker::default());
    const GRACE: Duration = Duration::from_millis(300);
    let dir = Arc::new(RegistryDirectory::spawn(config(maker.clone(), GRACE), None));
    published(&dir, Update::reset(vec![at(1, 100), at(2, 100)]), &[1, 2]).await;
    let cluster = ClusterInvoker::new(dir.clone(), Arc::new(Unused), ClusterConfig::default());
    for _ in 0..50 {
        cluster.invoke(&Invocation::new("hi")).await.unwrap();
    }
    assert_eq!(
        maker.made.load(Ordering::SeqCst),
        2,
        "made on arrival, not per call"
    );

    // A weight change (a new snapshot) keeps both clients.
    published(&dir, Update::reset(vec![at(1, 100), at(2, 300)]), &[1, 2]).await;
    assert_eq!(dir.load().endpoints()[1].instance.weight(), 300);
    assert_eq!(maker.made.load(Ordering::SeqCst), 2);

    // 2 leaves: no longer routed; its client is kept for the grace...
    let before = Arc::as_ptr(dir.load().endpoints()[1].service.as_ref().unwrap());
    published(&dir, Update::reset(vec![at(1, 100)]), &[1]).await;
    for _ in 0..20 {
        assert_eq!(
            cluster.invoke(&Invocation::new("hi")).await.unwrap(),
            json!(1)
        );
    }
    assert_eq!(
        maker.dropped.load(Ordering::SeqCst),
        0,
        "not before the grace"
    );
    // ...and it comes back within it: the same client, nothing made.
    published(&dir, Update::reset(vec![at(1, 100), at(2, 300)]), &[1, 2]).await;
    let again = Arc::as_ptr(dir.load().endpoints()[1].service.as_ref().unwrap());
    assert!(std::ptr::addr_eq(before, again), "the same client");
    assert_eq!(maker.made.load(Ordering::SeqCst), 2);

    // It leaves for good: dropped once the grace is over, not before.
    let left = tokio::time::Instant::now();
    published(&dir, Update::reset(vec![at(1, 100)]), &[1]).await;
    // Not before the grace: the elapsed time is checked when it is dropped.
    while maker.dropped.load(Ordering::SeqCst) == 0 {
        assert!(left.elapsed() < GRACE + T, "dropped after the grace");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(left.elapsed() >= GRACE, "{:?}", left.elapsed());
    assert_eq!(maker.dropped.load(Ordering::SeqCst), 1);

    // A new arrival after that: a new client.
    published(&dir, Update::reset(vec![at(1, 100), at(2, 100)]), &[1, 2]).await;
    assert_eq!(maker.made.load(Ordering::SeqCst), 3);
    // The directory dropped: every client goes with it.
    drop(cluster);
    drop(dir);
    let t = tokio::time::Instant::now();
    while maker.dropped.load(Ordering::SeqCst) < 3 {
        assert!(t.elapsed() < T, "dropped with the directory");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_tower_layer_through_the_maker_limits_each_endpoint() {
    let run = |layered: bool| async move {
        let maker = Arc::new(Maker {
            delay: Duration::from_millis(30),
            ..Maker::default()
        });
        let base = DirectoryConfig::new(ServiceKey::new("com.foo.Greeter"));
        let dc = if layered {
            base.maker(LayeredMaker::new(
                maker.clone(),
                ConcurrencyLimitLayer::new(1),
            ))
        } else {
            base.maker(maker.clone())
        };
        let dir = Arc::new(RegistryDirectory::spawn(dc, None));
        published(&dir, Update::reset(vec![at(1, 100), at(2, 100)]), &[1, 2]).await;
        // No retries: each of the 12 calls is one attempt.
        let cluster = ClusterInvoker::new(
            dir,
            Arc::new(Unused),
            ClusterConfig::default().service_settings(Settings::new().retries(0)),
        );
        let calls: Vec<_> = (0..12)
            .map(|_| {
                let c = cluster.clone();
                tokio::spawn(async move { c.invoke(&Invocation::new("hi")).await })
            })
            .collect();
        for c in calls {
            c.await.unwrap().unwrap();
        }
        let m = maker.in_flight.lock().unwrap().clone();
        let peaks: Vec<usize> = [1, 2].iter().map(|p| m.get(p).map_or(0, |e| e.1)).collect();
        peaks
    };
    let limited = run(true).await;
    assert_eq!(
        limited,
        [1, 1],
        "one call at a time per endpoint: {limited:?}"
    );
    let free = run(false).await;
    assert!(
        free.iter().any(|&p| p > 1),
        "without the layer calls overlap: {free:?}"
    );
}

/// The instance a client was handed last (`None`: never).
fn last_handed(maker: &Maker) -> Option<Arc<Instance>> {
    maker.handed.lock().unwrap().last().cloned()
}

#[tokio::test]
async fn a_client_is_handed_its_endpoints_new_instance_before_calls_come_with_it() {
    for layered in [false, true] {
        let maker = Arc::new(Maker::default());
        let base = config(maker.clone(), Duration::from_secs(60));
        let dc = if layered {
            base.maker(LayeredMaker::new(
                maker.clone(),
                ConcurrencyLimitLayer::new(8),
            ))
        } else {
            base
        };
        let dir = Arc::new(RegistryDirectory::spawn(dc, None));
        published(&dir, Update::reset(vec![at(1, 100)]), &[1]).await;
        assert!(
            last_handed(&maker).is_none(),
            "made with it: nothing to hand"
        );
        let cluster = ClusterInvoker::new(dir.clone(), Arc::new(Unused), ClusterConfig::default());
        // A weight change (the patch path) and another parameter (a full rebuild).
        let changes = [
            Update::add(vec![at(1, 300)]),
            Update::reset(vec![
                Instance::builder("10.0.0.1", 1)
                    .weight(300)
                    .param("timeout", "700")
                    .build(),
            ]),
        ];
        for (k, update) in changes.into_iter().enumerate() {
            let epoch = dir.load().epoch();
            dir.apply(update);
            dir.wait_until(T, |s| s.epoch() > epoch).await.unwrap();
            let snap = dir.load();
            let handed = last_handed(&maker).expect("handed the new instance");
            assert!(
                Arc::ptr_eq(&handed, &snap.endpoints()[0].instance),
                "change {k}: the very instance the snapshot routes to"
            );
            assert_eq!(maker.handed.lock().unwrap().len(), k + 1, "once per change");
            maker.called_with.lock().unwrap().clear();
            cluster.invoke(&Invocation::new("hi")).await.unwrap();
            assert_eq!(
                *maker.called_with.lock().unwrap(),
                [300],
                "layered: {layered}, change {k}: called with the new instance"
            );
        }
        // It leaves and comes back within the grace, changed: its kept client is handed it.
        published(&dir, Update::reset(vec![at(2, 100)]), &[2]).await;
        published(&dir, Update::reset(vec![at(1, 50), at(2, 100)]), &[1, 2]).await;
        // (2's client is handed its new, equal instance too: a new `Arc` from the registry.)
        let handed: Vec<u32> = maker
            .handed
            .lock()
            .unwrap()
            .iter()
            .filter(|i| i.port() == 1)
            .map(|i| i.weight())
            .collect();
        assert_eq!(handed, [300, 300, 50], "layered: {layered}");
        assert_eq!(maker.made.load(Ordering::SeqCst), 2, "1 kept, 2 made");
    }
}
