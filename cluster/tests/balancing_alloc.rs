//! The call path with balancers named by the settings: a method whose balancer is not the
//! directory's (from the consumer's settings or a provider's registration) picks from tables
//! built once per snapshot, with no allocation of its own per call.
//!
//! This test crate needs `unsafe` for `GlobalAlloc` (the library itself forbids it). The
//! allocation counter is per thread, so tests running in parallel do not disturb each other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_cluster::{BalancerKind, ClusterConfig, ClusterInvoker, Settings};
use switchman_core::{BoxFuture, Instance, Invocation, Invoker, Result, ServiceKey};
use switchman_discovery::contracts::{ConsumerInfo, Router, RouterChain, RouterStage};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the thread-local counter is a
// const-initialised `Cell`, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (r, ALLOCS.with(Cell::get) - before)
}

/// Answers with the port; its futures are boxed (one allocation per attempt, as every
/// `dyn Invoker`'s).
#[derive(Debug)]
struct Echo;

impl Invoker for Echo {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        _inv: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let port = target.port();
        Box::pin(async move { Ok(Value::from(port)) })
    }
}

#[test]
fn a_named_balancer_adds_no_allocation_per_call() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = rt.block_on(async {
        let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("test.Lb")), None);
        // The providers register roundrobin for `list`.
        let at = |port| {
            Instance::builder("10.0.0.1", port)
                .param("list.loadbalance", "roundrobin")
                .build()
        };
        dir.apply(Update::reset(vec![at(1), at(2), at(3)]));
        dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
            .await
            .unwrap();
        Arc::new(dir)
    });
    // The consumer names leastactive for `find`; `other` keeps the directory's random.
    let cfg = ClusterConfig::default().method(
        "find",
        Settings::new().loadbalance(BalancerKind::LeastActive),
    );
    let c = ClusterInvoker::new(dir.clone(), Arc::new(Echo), cfg);
    let methods = ["list", "find", "other"];
    for m in methods {
        for _ in 0..50 {
            rt.block_on(c.invoke(&Invocation::new(m))).unwrap();
        }
    }
    assert_eq!(c.settings("list").loadbalance_for(0), Some("roundrobin"));
    assert_eq!(c.settings("find").loadbalance_for(0), Some("leastactive"));
    assert_eq!(c.settings("other").loadbalance_for(0), None);
    let built = dir.load().extra_balancers();
    assert_eq!(built, 2, "roundrobin and leastactive, once each");
    for m in methods {
        let inv = Invocation::new(m);
        let (_, n) = allocations(|| {
            for _ in 0..1000 {
                rt.block_on(c.invoke(&inv)).unwrap();
            }
        });
        assert_eq!(
            n, 1000,
            "{m}: one allocation per call (the transport's boxed future), got {n} in 1000 calls"
        );
    }
    assert_eq!(
        dir.load().extra_balancers(),
        built,
        "no table built per call"
    );
}

/// Keeps the providers whose port has the parity the call's `parity` attachment names
/// (`even`/`odd`); counts its preparations.
#[derive(Debug, Default)]
struct Parity {
    prepared: std::sync::atomic::AtomicUsize,
}

#[derive(Debug)]
struct ParitySets([Vec<u32>; 2]);

impl Router for Parity {
    fn name(&self) -> &str {
        "parity"
    }

    fn prepare(&self, instances: &[Arc<Instance>], _: &ConsumerInfo) -> Box<dyn RouterStage> {
        self.prepared
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut sets = [Vec::new(), Vec::new()];
        for (i, inst) in instances.iter().enumerate() {
            sets[usize::from(inst.port() % 2)].push(i as u32);
        }
        Box::new(ParitySets(sets))
    }
}

impl RouterStage for ParitySets {
    fn sets(&self) -> &[Vec<u32>] {
        &self.0
    }

    fn route(&self, invocation: &Invocation) -> Option<usize> {
        match invocation.attachment("parity")? {
            "even" => Some(0),
            "odd" => Some(1),
            _ => None,
        }
    }
}

#[test]
fn a_router_of_ones_own_routes_each_call_without_allocating() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let parity = Arc::new(Parity::default());
    let chain = RouterChain::new().with_router(parity.clone());
    let dir = rt.block_on(async {
        let cfg = DirectoryConfig::new(ServiceKey::new("test.Parity")).router(chain);
        let dir = RegistryDirectory::spawn(cfg, None);
        let at = |port| Instance::builder("10.0.0.1", port).build();
        dir.apply(Update::reset(vec![at(1), at(2), at(3), at(4)]));
        dir.wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 4)
            .await
            .unwrap();
        Arc::new(dir)
    });
    let c = ClusterInvoker::new(dir.clone(), Arc::new(Echo), ClusterConfig::default());
    let odd = Invocation::new("find").with_attachment("parity", "odd");
    let even = Invocation::new("find").with_attachment("parity", "even");
    let any = Invocation::new("find");
    let ports = |inv: &Invocation| -> std::collections::BTreeSet<u64> {
        (0..200)
            .map(|_| rt.block_on(c.invoke(inv)).unwrap().as_u64().unwrap())
            .collect()
    };
    assert_eq!(ports(&odd), [1, 3].into());
    assert_eq!(ports(&even), [2, 4].into());
    assert_eq!(ports(&any), [1, 2, 3, 4].into());
    for inv in [&odd, &even] {
        let (_, n) = allocations(|| {
            for _ in 0..1000 {
                rt.block_on(c.invoke(inv)).unwrap();
            }
        });
        assert_eq!(
            n, 1000,
            "one allocation per call (the transport's boxed future), got {n} in 1000 calls"
        );
    }
    // A new fleet: the router is prepared for it.
    let before = parity.prepared.load(std::sync::atomic::Ordering::Relaxed);
    rt.block_on(async {
        dir.apply(Update::reset(vec![
            Instance::builder("10.0.0.1", 5).build(),
            Instance::builder("10.0.0.1", 6).build(),
        ]));
        dir.wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 2)
            .await
            .unwrap();
    });
    assert!(parity.prepared.load(std::sync::atomic::Ordering::Relaxed) > before);
    assert_eq!(ports(&odd), [5].into());
    assert_eq!(ports(&even), [6].into());
}
