//! Zero allocations per pick, counted by a global allocator wrapper.
//!
//! This test crate needs `unsafe` for `GlobalAlloc` (the library itself forbids it). Counting is
//! per thread, so tests running in parallel threads do not disturb each other.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use switchman_core::Invocation;
use switchman_loadbalance::{
    BalancerKind, LoadBalance, PickContext, RoundRobinBalance, pick_untried,
};

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

#[test]
fn the_counter_sees_allocations() {
    let (_, n) = allocations(|| vec![1u8; 64]);
    assert!(n >= 1);
}

#[test]
fn picks_do_not_allocate() {
    let mut balancers: Vec<Arc<dyn LoadBalance>> = BalancerKind::NAMES
        .iter()
        .map(|n| switchman_loadbalance::balancer_by_name(n).unwrap())
        .collect();
    balancers.push(Arc::new(RoundRobinBalance::new().with_schedule_limit(0)));
    let invocations = [
        Invocation::new("get").with_args(vec![json!("user-17")]),
        Invocation::new("get").with_args(vec![json!(12345)]),
        Invocation::new("get").with_args(vec![json!(2.5e12)]),
        Invocation::new("get").with_args(vec![json!({"id": [1, 2, "x"]})]),
    ];
    for n in [3usize, 10, 1000] {
        let weights: Vec<u32> = (0..n).map(|i| [100, 10, 1, 0][i % 4]).collect();
        let eps = common::endpoints(&weights);
        let now = Instant::now();
        for (i, e) in eps.iter().enumerate() {
            e.stats
                .record(Duration::from_millis(1 + i as u64 % 7), i % 5 != 0, now);
        }
        for lb in &balancers {
            let p = lb.prepare(&eps, (0..n as u32).collect(), SystemTime::now());
            let mut rng = fastrand::Rng::with_seed(5);
            let tried = [0usize, 1];
            let ((), count) = allocations(|| {
                for k in 0..2000 {
                    let inv = &invocations[k % invocations.len()];
                    let ctx = PickContext {
                        invocation: inv,
                        tried: &[],
                    };
                    assert!(p.pick(&eps, &ctx, &mut rng).is_some());
                    let ctx = PickContext {
                        invocation: inv,
                        tried: &tried,
                    };
                    assert!(pick_untried(p.as_ref(), &eps, &ctx, &mut rng).is_some());
                }
            });
            assert_eq!(count, 0, "{} at {n} allocated {count} times", lb.name());
        }
    }
}

#[test]
fn outlier_checks_and_outcomes_do_not_allocate() {
    use switchman_loadbalance::OutlierConfig;
    use switchman_loadbalance::outlier::{Outcome, Verdict};
    let eps = common::endpoints(&[100, 100]);
    let cfg = OutlierConfig::default();
    let lease = Duration::from_secs(2);
    let t0 = Instant::now();
    // Warm up anything lazily initialised (the timestamp origin, the thread's rng).
    let healthy = &eps[0].stats;
    let ms = Duration::from_millis(1);
    healthy.record(ms, true, t0);
    healthy.record_outlier(Outcome::Success, t0, t0, &cfg);
    let ejected = &eps[1].stats;
    let penalty = ejected.outlier().eject(t0, &cfg).unwrap();
    let ((), count) = allocations(|| {
        for _ in 0..2000 {
            // The pick-time check: one load for an instance in rotation, no clock read.
            assert!(healthy.outlier().admits(Instant::now, lease));
            // An ejected instance inside its penalty: a clock read and a compare.
            assert!(!ejected.outlier().admits(|| t0, lease));
            // Outcomes below the thresholds (a success rate above 80%).
            // Each call counted in the statistics first, as the cluster does.
            for _ in 0..4 {
                healthy.record(ms, true, t0);
                assert_eq!(
                    healthy.record_outlier(Outcome::Success, t0, t0, &cfg),
                    Verdict::Stay
                );
            }
            healthy.record(ms, false, t0);
            assert_eq!(
                healthy.record_outlier(Outcome::Strike, t0, t0, &cfg),
                Verdict::Stay
            );
        }
        // Claiming the probe and readmitting.
        let t1 = t0 + penalty + Duration::from_millis(1);
        assert!(ejected.outlier().admits(|| t1, lease));
        assert_eq!(
            ejected.record_outlier(Outcome::Success, t1, t1, &cfg),
            Verdict::Readmitted
        );
    });
    assert_eq!(count, 0, "outlier bookkeeping allocated {count} times");
}
