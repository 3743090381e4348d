//! Pick cost per balancer at 10 … 100k instances, equal and skewed weights, with tower 0.5's
//! `p2c::Balance` over the same endpoint counts as a reference.
//!
//! Run (a few minutes on 2 cores):
//!
//! ```text
//! cargo bench -p switchman-loadbalance --bench pick -- --warm-up-time 1 --measurement-time 2
//! python3 loadbalance/benches/table.py   # the Markdown table for BENCHMARKS.md
//! ```
//!
//! * `pick/<balancer>/<weights>/<n>`: one `Picker::pick` on a prepared table (the hot path).
//! * `pick/p2c/busy/<n>`: the same for p2c over members with 0–3 calls in flight each.
//! * `request/p2c+call/equal/<n>`: a p2c pick plus `InstanceStats::begin` and
//!   `CallGuard::finish`, the bookkeeping a real call adds (comparable to tower's request).
//! * `key/md5-only`: hashing a consistent-hash key alone (the floor of `consistenthash`).
//! * `request/tower-p2c/equal/<n>`: tower's `Balance::poll_ready` + `call` + one poll of the
//!   response future over `PendingRequests`-wrapped services that are always ready.
//!
//! Skewed weights repeat the pattern 100, 10, 10, 1 × 7 (gcd 1): the round-robin schedule is
//! precomputed up to 10k instances (period 12.7 × n) and uses the golden-ratio stride at 100k.

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use switchman_core::{Instance, Invocation};
use switchman_loadbalance::{
    BalancerKind, Endpoint, LoadBalance, P2cBalance, PickContext, Picker, key_point,
};
use tower::Service;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};

const SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];
const SKEW: [u32; 10] = [100, 10, 10, 1, 1, 1, 1, 1, 1, 1];

fn endpoints(n: usize, skewed: bool) -> Vec<Endpoint> {
    (0..n)
        .map(|i| {
            let host = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
            let w = if skewed { SKEW[i % SKEW.len()] } else { 100 };
            let inst = Instance::builder(host, 20880)
                .weight(w)
                .timestamp_ms(0)
                .build();
            Endpoint::new(Arc::new(inst))
        })
        .collect()
}

/// One latency sample of 0.5–1.5 ms per endpoint.
fn record_samples(eps: &[Endpoint]) {
    for (i, e) in eps.iter().enumerate() {
        e.stats.record(
            Duration::from_micros(500 + (i as u64 * 37) % 1000),
            true,
            std::time::Instant::now(),
        );
    }
}

fn bench_pickers(c: &mut Criterion) {
    let kinds = [
        BalancerKind::Random,
        BalancerKind::RoundRobin,
        BalancerKind::LeastActive,
        BalancerKind::ShortestResponse,
        BalancerKind::ConsistentHash,
        BalancerKind::P2c,
    ];
    let keys: Vec<Invocation> = (0..1024)
        .map(|k| Invocation::new("get").with_args(vec![json!(format!("user-{k}"))]))
        .collect();
    for skewed in [false, true] {
        let weights = if skewed { "skewed" } else { "equal" };
        for &n in &SIZES {
            let eps = endpoints(n, skewed);
            // Some live state so score-based balancers compare real numbers.
            record_samples(&eps);
            let members: Arc<[u32]> = (0..n as u32).collect();
            for kind in kinds {
                let lb = kind.build();
                let picker: Box<dyn Picker> = lb.prepare(&eps, members.clone(), SystemTime::now());
                let mut group = c.benchmark_group(format!("pick/{kind}/{weights}"));
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    let mut rng = fastrand::Rng::with_seed(1);
                    let mut k = 0usize;
                    b.iter(|| {
                        k = (k + 1) & 1023;
                        let ctx = PickContext {
                            invocation: &keys[k],
                            tried: &[],
                        };
                        black_box(picker.pick(&eps, &ctx, &mut rng))
                    })
                });
                group.finish();
            }
        }
    }
}

/// `pick/p2c/busy/<n>`: p2c over members with 0–3 calls in flight each (guards held through
/// the run) and latency samples: the loaded service p2c is for, where the two candidates'
/// loads differ or match and their scores take the load's logarithm.
fn bench_busy_p2c(c: &mut Criterion) {
    for &n in &SIZES {
        let eps = endpoints(n, false);
        record_samples(&eps);
        let _in_flight: Vec<_> = eps
            .iter()
            .enumerate()
            .flat_map(|(i, e)| (0..i % 4).map(move |_| e.stats.begin()))
            .collect();
        let picker = P2cBalance::new().prepare(&eps, (0..n as u32).collect(), SystemTime::now());
        let inv = Invocation::new("get");
        let mut group = c.benchmark_group("pick/p2c/busy");
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            let mut rng = fastrand::Rng::with_seed(3);
            b.iter(|| {
                let ctx = PickContext {
                    invocation: &inv,
                    tried: &[],
                };
                black_box(picker.pick(&eps, &ctx, &mut rng))
            })
        });
        group.finish();
    }
}

fn bench_requests(c: &mut Criterion) {
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    for &n in &SIZES {
        // Switchman: p2c pick + in-flight/latency bookkeeping of the call.
        let eps = endpoints(n, false);
        let picker = P2cBalance::new().prepare(&eps, (0..n as u32).collect(), SystemTime::now());
        let inv = Invocation::new("get");
        let mut group = c.benchmark_group("request/p2c+call/equal");
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            let mut rng = fastrand::Rng::with_seed(2);
            b.iter(|| {
                let ctx = PickContext {
                    invocation: &inv,
                    tried: &[],
                };
                let i = picker.pick(&eps, &ctx, &mut rng).unwrap();
                let guard = eps[i].stats.begin();
                guard.finish(Duration::from_micros(800), true);
                black_box(i)
            })
        });
        group.finish();

        // tower 0.5: p2c over PendingRequests (in-flight count) of always-ready services.
        let services: Vec<_> = (0..n)
            .map(|_| {
                PendingRequests::new(
                    tower::service_fn(|_: ()| std::future::ready(Ok::<(), Infallible>(()))),
                    CompleteOnResponse::default(),
                )
            })
            .collect();
        let mut balance = Balance::new(ServiceList::new(services));
        // Let it discover every endpoint before measuring.
        for _ in 0..4 {
            let _ = balance.poll_ready(&mut cx);
        }
        let mut group = c.benchmark_group("request/tower-p2c/equal");
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                match balance.poll_ready(&mut cx) {
                    Poll::Ready(Ok(())) => {}
                    other => panic!("tower balance not ready: {other:?}"),
                }
                let fut = pin!(balance.call(()));
                black_box(fut.poll(&mut cx).is_ready())
            })
        });
        group.finish();
    }
}

/// What Dubbo compatibility costs `consistenthash`: MD5 of a short key alone (no ring lookup).
fn bench_key_hash(c: &mut Criterion) {
    let keys: Vec<Invocation> = (0..1024)
        .map(|k| Invocation::new("get").with_args(vec![json!(format!("user-{k}"))]))
        .collect();
    let mut group = c.benchmark_group("key/md5-only/-");
    group.bench_function(BenchmarkId::from_parameter(10), |b| {
        let mut k = 0usize;
        b.iter(|| {
            k = (k + 1) & 1023;
            black_box(key_point(&keys[k], &[0]))
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_pickers,
    bench_busy_p2c,
    bench_requests,
    bench_key_hash
);
criterion_main!(benches);
