//! The whole `ClusterInvoker::invoke` of one call, with a transport that answers at once:
//! settings lookup, strategy, routing, pick, attempt bookkeeping (in-flight, outlier state,
//! metrics, the retry budget's deposit) and the transport's future, polled once.
//!
//! ```text
//! cargo bench -p switchman-integration-tests --bench invoke -- --warm-up-time 1 --measurement-time 2
//! ```
//!
//! * `invoke/{strategy}/{lb}/{N}`: one call over a fixed directory of N instances.
//!
//! Allocations per call are counted by a counting global allocator and printed before the
//! timings (`alloc: ...` lines); the transport's own future is one of them. The size of
//! `ClusterInvoker::invoke`'s future is printed too (`future: ...`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::Value;
use switchman_cluster::{BalancerKind, ClusterConfig, ClusterInvoker, Strategy};
use switchman_core::{BoxFuture, Instance, Invocation, Invoker, Result, ServiceKey};
use switchman_discovery::{DirectoryConfig, FixedDirectory};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Answers every call at once.
#[derive(Debug)]
struct Ready;

impl Invoker for Ready {
    fn invoke<'a>(
        &'a self,
        _instance: &'a Instance,
        _invocation: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(std::future::ready(Ok(Value::Null)))
    }
}

fn cluster(n: usize, strategy: Strategy, lb: BalancerKind) -> ClusterInvoker {
    let instances = (0..n).map(|i| {
        let host = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
        Instance::builder(host, 20880)
            .service(ServiceKey::new("com.foo.Bar"))
            .timestamp_ms(0)
            .build()
    });
    let dir = FixedDirectory::new(
        &DirectoryConfig::new(ServiceKey::new("com.foo.Bar")),
        instances,
    );
    let config = ClusterConfig::default().strategy(strategy).loadbalance(lb);
    ClusterInvoker::new(Arc::new(dir), Arc::new(Ready), config)
}

/// One call, polled once (the transport answers at once, so one poll completes it).
fn call(c: &ClusterInvoker, inv: &Invocation) -> Result<Value> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(c.invoke(inv)).poll(&mut cx) {
        Poll::Ready(r) => r,
        Poll::Pending => panic!("the ready transport left the call pending"),
    }
}

fn bench_invoke(c: &mut Criterion) {
    // A runtime for the timers the call arms (the attempt timeout), entered for the run.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let _enter = rt.enter();
    let inv = Invocation::new("find");
    for strategy in [Strategy::Failover, Strategy::Failfast] {
        for (lb, name) in [
            (BalancerKind::Random, "random"),
            (BalancerKind::RoundRobin, "roundrobin"),
        ] {
            let mut group = c.benchmark_group(format!("invoke/{}/{name}", strategy.as_str()));
            for n in [10usize, 10_000] {
                let cl = cluster(n, strategy, lb);
                call(&cl, &inv).expect("the first call");
                let before = ALLOCS.load(Ordering::Relaxed);
                const CALLS: u64 = 1000;
                for _ in 0..CALLS {
                    black_box(call(&cl, &inv)).expect("a call");
                }
                let per = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / CALLS as f64;
                println!(
                    "alloc: invoke/{}/{name}/{n}: {per:.2} allocations per call",
                    strategy.as_str()
                );
                if strategy == Strategy::Failover && lb == BalancerKind::Random && n == 10 {
                    // What every call's state machine takes (the largest strategy inlined),
                    // whatever the strategy and balancer: printed once.
                    let size = std::mem::size_of_val(&cl.invoke(&inv));
                    println!("future: ClusterInvoker::invoke: {size} bytes");
                }
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    b.iter(|| black_box(call(&cl, &inv)))
                });
            }
            group.finish();
        }
    }
}

criterion_group!(benches, bench_invoke);
criterion_main!(benches);
