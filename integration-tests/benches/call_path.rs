//! The whole per-call path and the cost of a push, with tower 0.5's p2c in the same run.
//!
//! ```text
//! cargo bench -p switchman-integration-tests --bench call_path -- --warm-up-time 1 --measurement-time 2
//! python3 scripts/bench-table.py target      # Markdown tables for BENCHMARKS.md
//! ```
//!
//! * `call_path/{lb}/{rule}/{N}`: what `ClusterInvoker` does per attempt before the network:
//!   one `RegistryDirectory::load`, `Snapshot::select` (per-call routing + pick) and the
//!   in-flight bookkeeping (`InstanceStats::begin` + `CallGuard::finish`). Rules: `none`, a
//!   method condition rule (`method = find* => zone = z1`), a tag (`dubbo.tag=gray`, every
//!   10th provider tagged).
//! * `route_pick/{lb}/{rule}/{N}`: the same without the in-flight bookkeeping (load +
//!   route + pick only).
//! * `call_path_2threads/{lb}/none/{N}`: the same from two threads at once (time per call).
//! * `tower_p2c/{N}`: tower 0.5 `balance::p2c::Balance` over N always-ready
//!   `PendingRequests` services: `poll_ready` + `call` + one poll.
//! * `apply_update/{N}/{full|1pct|1pct-delta}`: a registry push of N instances (everything
//!   new), of the same list with 1% of the weights changed, or of only the 1% that changed
//!   (`Update::Add`), until the new snapshot (route subsets and balancer tables included) is
//!   published; `override`: an override rule that changes one instance's weight, set and
//!   cleared in turn.
//!
//! Allocations per call and per push are counted by a counting global allocator and printed
//! before the timings (`alloc: ...` lines).

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use switchman_core::{Instance, Invocation, ServiceKey, Tick};
use switchman_discovery::configurator::Configurator;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};
use switchman_loadbalance::balancer_by_name;
use switchman_router::RouterChain;
use tower::Service;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Bytes currently allocated (requested sizes), for the memory-per-instance figure.
static LIVE: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts calls and bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];
const BALANCERS: [&str; 4] = ["random", "roundrobin", "leastactive", "p2c"];

fn instances(n: usize, weight_bump: usize) -> Vec<Instance> {
    instances_on(n, weight_bump, 20880)
}

fn instances_on(n: usize, weight_bump: usize, port: u16) -> Vec<Instance> {
    (0..n)
        .map(|i| {
            let host = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
            let mut b = Instance::builder(host, port)
                .service(ServiceKey::new("com.foo.Bar"))
                .weight(if weight_bump > 0 && i % 100 == 0 {
                    100 + weight_bump as u32
                } else {
                    100
                })
                .timestamp_ms(0)
                .zone(&format!("z{}", i % 4));
            if i % 10 == 0 {
                b = b.tag("gray");
            }
            b.build()
        })
        .collect()
}

/// Each instance in an `Arc` of its own, as a registry adapter hands them to the directory.
fn shared(list: Vec<Instance>) -> Vec<Arc<Instance>> {
    list.into_iter().map(Arc::new).collect()
}

/// `base` with every 100th instance's weight raised by `bump`, the others the same `Arc`s: a
/// whole list as the built-in adapters send it after a reconnect (what did not change is what
/// they parsed before, shared), with 1% edited meanwhile.
fn one_in_100_changed(base: &[Arc<Instance>], bump: u32) -> Vec<Arc<Instance>> {
    base.iter()
        .enumerate()
        .map(|(i, inst)| {
            if i % 100 == 0 {
                Arc::new(inst.with_weight(inst.weight() + bump))
            } else {
                inst.clone()
            }
        })
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Applies `update` and waits for the snapshot it makes: the time from the apply until that
/// snapshot is visible. Then, untimed, lets the directory's task finish its turn (it frees
/// what the snapshot replaced after yielding once), as a runtime that keeps running would,
/// instead of charging that to the next push.
fn publish(rt: &tokio::runtime::Runtime, dir: &RegistryDirectory, update: Update) -> Duration {
    let took = rt.block_on(async {
        let e = dir.load().epoch();
        let t = Instant::now();
        dir.apply(update);
        dir.wait_until(Duration::from_secs(60), |s| s.epoch() > e)
            .await
            .unwrap();
        t.elapsed()
    });
    rt.block_on(async {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    });
    took
}

fn directory(rt: &tokio::runtime::Runtime, n: usize, lb: &str, rule: &str) -> RegistryDirectory {
    rt.block_on(async {
        let mut chain = RouterChain::new();
        if rule == "method" {
            chain = chain
                .with_rule(
                    "com.foo.Bar::.condition-router",
                    "method = find* => zone = z1",
                )
                .unwrap();
        }
        let cfg = DirectoryConfig::new(ServiceKey::new("com.foo.Bar"))
            .balancer(balancer_by_name(lb).unwrap())
            .router(chain);
        let dir = RegistryDirectory::spawn(cfg, None);
        dir.apply(Update::reset(instances(n, 0)));
        dir.wait_until(Duration::from_secs(60), |s| s.endpoints().len() == n)
            .await
            .unwrap();
        dir
    })
}

fn invocation(rule: &str) -> Invocation {
    match rule {
        "tag" => Invocation::new("findUser").with_attachment("dubbo.tag", "gray"),
        _ => Invocation::new("findUser"),
    }
}

#[inline]
fn route_pick(dir: &RegistryDirectory, inv: &Invocation, rng: &mut fastrand::Rng) -> usize {
    let snap = dir.load();
    snap.select(inv, &[], rng).unwrap()
}

/// The end of an attempt as the attempter has it: it reads the clock once after the call,
/// converts the reading to a [`Tick`] once, and hands that tick to the latency, the metrics,
/// outlier detection and the statistics (`CallGuard::finish_at`). `Fake` advances the tick
/// 100 ns per call without reading or converting a clock, so that `call_path/*` measures the
/// bookkeeping the balancer adds; `Real` reads the clock and converts the reading
/// (`call_path_clock/*`): the attempt's whole cost, with the read and the conversion that the
/// attempter shares among those four charged to the statistics alone.
enum Clock {
    Fake(Tick),
    Real,
}

impl Clock {
    fn fake() -> Clock {
        Clock::Fake(Tick::of(Instant::now()))
    }

    #[inline]
    fn ended(&mut self) -> Tick {
        match self {
            Clock::Fake(at) => {
                *at = Tick::from_nanos(at.as_nanos() + 100);
                *at
            }
            Clock::Real => Tick::of(Instant::now()),
        }
    }
}

#[inline]
fn one_call(
    dir: &RegistryDirectory,
    inv: &Invocation,
    rng: &mut fastrand::Rng,
    clock: &mut Clock,
) -> usize {
    // Latencies of 200–400 µs: above the estimate now and then (a peak), mostly below.
    let latency = Duration::from_micros(200 + rng.u64(..200));
    one_call_taking(dir, inv, rng, clock, latency)
}

#[inline]
fn one_call_taking(
    dir: &RegistryDirectory,
    inv: &Invocation,
    rng: &mut fastrand::Rng,
    clock: &mut Clock,
    latency: Duration,
) -> usize {
    let snap = dir.load();
    let i = snap.select(inv, &[], rng).unwrap();
    let guard = snap.endpoints()[i].stats.begin();
    guard.finish_at(latency, true, clock.ended());
    i
}

fn report_allocations(rt: &tokio::runtime::Runtime) {
    for rule in ["none", "method", "tag"] {
        let dir = directory(rt, 1000, "random", rule);
        let inv = invocation(rule);
        let mut rng = fastrand::Rng::with_seed(1);
        let mut clock = Clock::Real;
        for _ in 0..100 {
            one_call(&dir, &inv, &mut rng, &mut clock);
        }
        let before = ALLOCS.load(Ordering::Relaxed);
        for _ in 0..100_000 {
            black_box(one_call(&dir, &inv, &mut rng, &mut clock));
        }
        let per_call = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / 100_000.0;
        println!("alloc: call_path/random/{rule}/1000: {per_call} allocations per call");
    }
    for n in [1_000, 10_000] {
        let dir = directory(rt, n, "random", "method");
        // Empty the registry first (untimed); protection keeps the old list, marked protected.
        rt.block_on(async {
            dir.apply(Update::Reset(Vec::new()));
            dir.wait_until(Duration::from_secs(60), |s| s.is_protected())
                .await
                .unwrap();
        });
        // The list as the registry hands it (in `Arc`s, not counted) to what the snapshot is
        // published.
        let push = |dir: &RegistryDirectory, list: Vec<Arc<Instance>>| {
            let before = ALLOCS.load(Ordering::Relaxed);
            publish(rt, dir, Update::Reset(list));
            ALLOCS.load(Ordering::Relaxed) - before
        };
        // New addresses (port 20881): the protected list's instances are not reused.
        let full = push(&dir, shared(instances_on(n, 0, 20881)));
        println!("alloc: apply_update/{n}/full: {full} allocations per push");
        let base = shared(instances(n, 0));
        let again = push(&dir, base.clone());
        println!(
            "alloc: apply_update/{n}/replace-all: {again} allocations per push (every address replaced)"
        );
        let churn = push(&dir, one_in_100_changed(&base, 7));
        println!("alloc: apply_update/{n}/1pct: {churn} allocations per push");
        let copies = push(&dir, shared(instances(n, 0)));
        println!(
            "alloc: apply_update/{n}/1pct-copies: {copies} allocations per push (every instance a new copy)"
        );
    }
}

/// Memory a directory holds per instance at 100k (its registry map and published list, the
/// snapshot's instances and endpoints, the route table, the balancer tables, the live stats),
/// counted by the allocator: live bytes after the first snapshot minus before, with the
/// update's own list consumed. Requested sizes, without the allocator's rounding.
fn report_memory(rt: &tokio::runtime::Runtime) {
    const N: usize = 100_000;
    let settle = || rt.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    for (lb, rule) in [("random", "none"), ("random", "method"), ("p2c", "method")] {
        // Directories dropped before (their tasks end and free asynchronously) are gone.
        settle();
        let before = LIVE.load(Ordering::Relaxed);
        let dir = directory(rt, N, lb, rule);
        // Let the directory free what it built the snapshot from.
        settle();
        let report = |what: &str| {
            let held = LIVE.load(Ordering::Relaxed).saturating_sub(before);
            println!(
                "memory: directory/{lb}/{rule}/{N}{what}: {:.0} bytes per instance ({:.2} MiB in all; target <= 1024)",
                held as f64 / N as f64,
                held as f64 / (1024.0 * 1024.0)
            );
        };
        report("");
        // Steady state under weight edits: two 1% deltas (the directory then also keeps the
        // snapshot before the current one, to patch it in place at the next edit).
        for bump in [7, 0] {
            let delta: Vec<Instance> = instances(N, bump).into_iter().step_by(100).collect();
            publish(rt, &dir, Update::add(delta));
        }
        settle();
        report("/patched");
        drop(dir);
    }
}

/// Relative standard deviation of hits over instances for equal weights (distribution
/// quality), printed next to the timings.
fn report_distribution(rt: &tokio::runtime::Runtime) {
    for lb in BALANCERS {
        let n = 1000;
        let dir = directory(rt, n, lb, "none");
        let inv = invocation("none");
        let mut rng = fastrand::Rng::with_seed(3);
        let mut clock = Clock::Real;
        let mut hits = vec![0u64; n];
        // Equal instances answering in equal time (300 µs): how evenly the balancer spreads.
        // (With random latencies p2c follows each instance's last peaks, by design.)
        let latency = Duration::from_micros(300);
        for _ in 0..n * 100 {
            hits[one_call_taking(&dir, &inv, &mut rng, &mut clock, latency)] += 1;
        }
        // Every 10th instance is tagged: an untagged call never reaches it (Dubbo's tag
        // semantics), so the quality is measured over the 900 instances the call can reach.
        let snap = dir.load();
        let tagged = |i: usize| snap.endpoints()[i].instance.tag().is_some();
        assert!(hits.iter().enumerate().all(|(i, h)| !tagged(i) || *h == 0));
        let reachable: Vec<u64> = hits
            .iter()
            .enumerate()
            .filter(|(i, _)| !tagged(*i))
            .map(|(_, h)| *h)
            .collect();
        let mean = reachable.iter().sum::<u64>() as f64 / reachable.len() as f64;
        let var = reachable
            .iter()
            .map(|&h| (h as f64 - mean).powi(2))
            .sum::<f64>()
            / reachable.len() as f64;
        println!(
            "quality: {lb}/1000 instances (900 reachable untagged), {:.0} calls each: relative std-dev of hits {:.3} (uniform random: {:.3})",
            mean,
            var.sqrt() / mean,
            1.0 / mean.sqrt()
        );
    }
}

fn bench_call_path(c: &mut Criterion) {
    let rt = runtime();
    report_allocations(&rt);
    report_distribution(&rt);
    report_memory(&rt);
    for lb in BALANCERS {
        for rule in ["none", "method", "tag"] {
            if lb != "random" && rule != "none" {
                continue;
            }
            let mut group = c.benchmark_group(format!("call_path/{lb}/{rule}"));
            for &n in &SIZES {
                let dir = directory(&rt, n, lb, rule);
                let inv = invocation(rule);
                let mut rng = fastrand::Rng::with_seed(7);
                let mut clock = Clock::fake();
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    b.iter(|| black_box(one_call(&dir, &inv, &mut rng, &mut clock)))
                });
            }
            group.finish();
            if rule == "none" && (lb == "random" || lb == "p2c") {
                let mut group = c.benchmark_group(format!("call_path_clock/{lb}/{rule}"));
                for &n in &SIZES {
                    let dir = directory(&rt, n, lb, rule);
                    let inv = invocation(rule);
                    let mut rng = fastrand::Rng::with_seed(7);
                    let mut clock = Clock::Real;
                    group.bench_function(BenchmarkId::from_parameter(n), |b| {
                        b.iter(|| black_box(one_call(&dir, &inv, &mut rng, &mut clock)))
                    });
                }
                group.finish();
            }
            let mut group = c.benchmark_group(format!("route_pick/{lb}/{rule}"));
            for &n in &SIZES {
                let dir = directory(&rt, n, lb, rule);
                let inv = invocation(rule);
                let mut rng = fastrand::Rng::with_seed(7);
                group.bench_function(BenchmarkId::from_parameter(n), |b| {
                    b.iter(|| black_box(route_pick(&dir, &inv, &mut rng)))
                });
            }
            group.finish();
        }
        let mut group = c.benchmark_group(format!("call_path_2threads/{lb}/none"));
        for &n in &SIZES {
            let dir = Arc::new(directory(&rt, n, lb, "none"));
            group.bench_function(BenchmarkId::from_parameter(n), |b| {
                b.iter_custom(|iters| {
                    let half = iters / 2 + 1;
                    let start = Instant::now();
                    std::thread::scope(|s| {
                        for seed in 0..2 {
                            let dir = dir.clone();
                            s.spawn(move || {
                                let inv = invocation("none");
                                let mut rng = fastrand::Rng::with_seed(seed);
                                let mut clock = Clock::fake();
                                for _ in 0..half {
                                    black_box(one_call(&dir, &inv, &mut rng, &mut clock));
                                }
                            });
                        }
                    });
                    // Two threads did 2 × half calls: report wall time per call.
                    start.elapsed() / 2
                })
            });
        }
        group.finish();
    }

    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut group = c.benchmark_group("tower_p2c");
    for &n in &SIZES {
        let services: Vec<_> = (0..n)
            .map(|_| {
                PendingRequests::new(
                    tower::service_fn(|_: ()| std::future::ready(Ok::<(), Infallible>(()))),
                    CompleteOnResponse::default(),
                )
            })
            .collect();
        let mut balance = Balance::new(ServiceList::new(services));
        for _ in 0..4 {
            let _ = balance.poll_ready(&mut cx);
        }
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
    }
    group.finish();
}

fn bench_apply_update(c: &mut Criterion) {
    let rt = runtime();
    for &n in &[1_000usize, 10_000, 100_000] {
        let mut group = c.benchmark_group(format!("apply_update/{n}"));
        group.sample_size(10);
        let dir = directory(&rt, n, "random", "method");
        // The registry's lists, each instance in an `Arc` (as adapters hand them over).
        let base = shared(instances(n, 0));
        // Full push: the directory holds nothing of it. It is emptied in between (untimed;
        // empty-list protection then keeps the last list, which a push of the same addresses
        // would reuse), and the lists alternate between two disjoint address sets (ports 20880
        // and 20881), so every instance of the timed push is new.
        let other = shared(instances_on(n, 0, 20881));
        let mut on_other = false;
        let full_dir = directory(&rt, n, "random", "method");
        group.bench_function("full", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    on_other = !on_other;
                    let list = if on_other {
                        other.clone()
                    } else {
                        base.clone()
                    };
                    rt.block_on(async {
                        full_dir.apply(Update::Reset(Vec::new()));
                        let e = full_dir.load().epoch();
                        full_dir
                            .wait_until(Duration::from_secs(60), |s| {
                                s.epoch() > e || s.is_protected()
                            })
                            .await
                            .unwrap();
                    });
                    total += publish(&rt, &full_dir, Update::Reset(list));
                }
                total
            })
        });
        // The directory of the full pushes is dropped here: the rows below use one that has
        // not been through them (freshly built memory, as before this row changed).
        drop(full_dir);
        // 1% churn in a whole list, as the built-in adapters send it after a reconnect: the
        // instances that did not change are the `Arc`s sent before (they keep what they
        // parsed), so the directory recognises them by pointer. Alternates between the base
        // list and one with 1% of the weights changed.
        let changed = one_in_100_changed(&base, 7);
        let mut flip = false;
        group.bench_function("1pct", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    flip = !flip;
                    let list = if flip { changed.clone() } else { base.clone() };
                    total += publish(&rt, &dir, Update::Reset(list));
                }
                total
            })
        });
        // The same with every instance a new copy (copied untimed), as a registry that builds
        // new instances for every list would send it: each is compared with the one held.
        group.bench_function("1pct-copies", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    flip = !flip;
                    let source = if flip { &changed } else { &base };
                    let list: Vec<Arc<Instance>> = source
                        .iter()
                        .map(|i| Arc::new(Instance::clone(i)))
                        .collect();
                    total += publish(&rt, &dir, Update::Reset(list));
                }
                total
            })
        });
        // 1% churn sent as a delta (`Update::Add` of the changed instances), as a registry
        // that reports changes rather than whole lists would.
        group.bench_function("1pct-delta", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Send the 1% that differs from what the directory holds now (untimed).
                    let holds_changed = dir.load().instances().iter().any(|i| i.weight() != 100);
                    let source = if holds_changed { &base } else { &changed };
                    let delta: Vec<Arc<Instance>> = source.iter().step_by(100).cloned().collect();
                    total += publish(&rt, &dir, Update::Add(delta));
                }
                total
            })
        });
        // An operator's weight override of one instance (a dubbo-admin weight rule), set and
        // cleared in turn: every effective instance is computed again under the new rules.
        let mut set = false;
        group.bench_function("override", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    set = !set;
                    let rules = if set {
                        vec![Configurator::for_address("10.0.0.1:20880").param("weight", "7")]
                    } else {
                        Vec::new()
                    };
                    let update = Update::Configurators {
                        source: "bench".into(),
                        rules,
                    };
                    total += publish(&rt, &dir, update);
                }
                total
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_call_path, bench_apply_update);
criterion_main!(benches);
