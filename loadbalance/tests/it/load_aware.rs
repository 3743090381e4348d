//! The balancers that read live state steer calls away from busy, slow and failing instances.

use crate::common;

use std::time::{Duration, Instant};

use common::{endpoints, histogram, prepare_all};
use switchman_loadbalance::{LeastActiveBalance, LoadBalance, P2cBalance, ShortestResponseBalance};

#[test]
fn leastactive_scan_always_takes_the_idlest() {
    let eps = endpoints(&[100, 100, 100, 100]);
    let _busy: Vec<_> = [0, 0, 1, 3, 3, 3]
        .iter()
        .map(|&i| eps[i].stats.begin())
        .collect();
    let p = prepare_all(&LeastActiveBalance::new(), &eps);
    let hits = histogram(p.as_ref(), &eps, 1000, 1);
    assert_eq!(hits, [0, 0, 1000, 0]);
}

#[test]
fn leastactive_scan_breaks_ties_by_weight() {
    let eps = endpoints(&[100, 300, 100]);
    let _busy = eps[2].stats.begin();
    let p = prepare_all(&LeastActiveBalance::new(), &eps);
    let hits = histogram(p.as_ref(), &eps, 40_000, 2);
    assert_eq!(hits[2], 0);
    common::assert_fits(&hits[..2], &[100, 300], "ties among the idle");
}

#[test]
fn leastactive_two_choices_starves_the_busiest() {
    let n = 200;
    let eps = endpoints(&vec![100; n]);
    // Instance 0 is very busy; the others idle. It can only win against itself, which the
    // distinct-draw retry makes rare: far below its 1/n fair share.
    let _busy: Vec<_> = (0..50).map(|_| eps[0].stats.begin()).collect();
    let p = prepare_all(&LeastActiveBalance::new(), &eps);
    let calls = 100_000;
    let hits = histogram(p.as_ref(), &eps, calls, 3);
    assert!(hits[0] < (calls / n) as u64 / 20, "busy got {}", hits[0]);
}

#[test]
fn shortestresponse_prefers_the_fast_and_probes_the_unknown() {
    let eps = endpoints(&[100, 100, 100]);
    let now = Instant::now();
    eps[0].stats.record(Duration::from_millis(50), true, now);
    eps[1].stats.record(Duration::from_millis(5), true, now);
    eps[2].stats.record(Duration::from_millis(20), true, now);
    let lb = ShortestResponseBalance::new();
    let p = prepare_all(&lb, &eps);
    assert_eq!(histogram(p.as_ref(), &eps, 500, 4), [0, 500, 0]);
    // Five in flight on the fast one: 5 ms × 6 = 30 ms > 20 ms × 1.
    let _busy: Vec<_> = (0..5).map(|_| eps[1].stats.begin()).collect();
    assert_eq!(histogram(p.as_ref(), &eps, 500, 5), [0, 0, 500]);
    // A failure is not a response-time sample, but consecutive failures multiply the
    // expected wait: 20 ms × 1 × (1 + 1) = 40 ms > 30 ms.
    eps[2].stats.record(Duration::from_secs(5), false, now);
    assert_eq!(histogram(p.as_ref(), &eps, 500, 6), [0, 500, 0]);
    // An instance with no call in the window estimates 0 (Dubbo): it is probed.
    let fresh = endpoints(&[100, 100]);
    fresh[0].stats.record(Duration::from_millis(1), true, now);
    let p = prepare_all(&lb, &fresh);
    assert_eq!(histogram(p.as_ref(), &fresh, 100, 7), [0, 100]);
    // ... but not once it failed with no success: it does not look like the fastest.
    fresh[1].stats.record(Duration::from_millis(1), false, now);
    assert_eq!(histogram(p.as_ref(), &fresh, 100, 8), [100, 0]);
    // When both fail, the one that answered within the window is still preferred.
    fresh[0].stats.record(Duration::from_millis(1), false, now);
    fresh[1].stats.record(Duration::from_millis(1), false, now);
    assert_eq!(histogram(p.as_ref(), &fresh, 100, 9), [100, 0]);
}

/// A deliberate difference: Dubbo averages whole milliseconds (each call's elapsed time is
/// read from `System.currentTimeMillis`), so 0.3 ms and 0.7 ms both estimate 0 and tie
/// (weighted random between them). Switchman averages microseconds: the 0.3 ms instance
/// is the shortest. Equal averages still tie and split by weight.
#[test]
fn shortestresponse_ranks_sub_millisecond_averages() {
    let eps = endpoints(&[100, 100]);
    let now = Instant::now();
    eps[0].stats.record(Duration::from_micros(300), true, now);
    eps[1].stats.record(Duration::from_micros(700), true, now);
    let p = prepare_all(&ShortestResponseBalance::new(), &eps);
    assert_eq!(histogram(p.as_ref(), &eps, 500, 10), [500, 0]);
    let tied = endpoints(&[100, 300]);
    tied[0].stats.record(Duration::from_micros(300), true, now);
    tied[1].stats.record(Duration::from_micros(300), true, now);
    let p = prepare_all(&ShortestResponseBalance::new(), &tied);
    let hits = histogram(p.as_ref(), &tied, 40_000, 11);
    common::assert_fits(&hits, &[100, 300], "equal sub-ms averages tie");
}

#[test]
fn p2c_avoids_slow_and_fast_failing_instances() {
    let n = 100;
    let eps = endpoints(&vec![100; n]);
    let now = Instant::now();
    // The calls are made under the p2c table, which keeps their peak-EWMA.
    let p = prepare_all(&P2cBalance::new(), &eps);
    for (i, e) in eps.iter().enumerate() {
        let ms = if i == 1 { 400 } else { 10 };
        e.stats.record(Duration::from_millis(ms), true, now);
    }
    // Instance 0 fails in 1 ms, repeatedly: it must not look fast.
    for _ in 0..3 {
        eps[0].stats.record(Duration::from_millis(1), false, now);
    }
    let calls = 100_000;
    let hits = histogram(p.as_ref(), &eps, calls, 8);
    let fair = (calls / n) as u64;
    assert!(hits[0] < fair / 20, "failing instance got {}", hits[0]);
    assert!(hits[1] < fair / 20, "slow instance got {}", hits[1]);
    assert!(hits[2..].iter().all(|&h| h > fair / 2), "{hits:?}");
}

#[test]
fn score_balancers_skip_zero_weight_even_when_idle() {
    let eps = endpoints(&[0, 100, 100]);
    let _busy: Vec<_> = [1, 2].iter().map(|&i| eps[i].stats.begin()).collect();
    let balancers: [&dyn LoadBalance; 3] = [
        &LeastActiveBalance::new(),
        &ShortestResponseBalance::new(),
        &P2cBalance::new(),
    ];
    for lb in balancers {
        let p = prepare_all(lb, &eps);
        assert_eq!(histogram(p.as_ref(), &eps, 1000, 9)[0], 0, "{}", lb.name());
    }
}

#[test]
fn leastactive_counts_fast_failures_as_load() {
    // Instance 0 fails at once, so it never has a call in flight; the others each have one.
    let eps = endpoints(&[100, 100, 100]);
    let now = Instant::now();
    for _ in 0..3 {
        eps[0].stats.record(Duration::from_millis(1), false, now);
    }
    let _busy: Vec<_> = [1, 2].iter().map(|&i| eps[i].stats.begin()).collect();
    let p = prepare_all(&LeastActiveBalance::new(), &eps);
    let hits = histogram(p.as_ref(), &eps, 1000, 4);
    assert_eq!(hits[0], 0, "(0 + 1) × (1 + 3) > (1 + 1) × 1: {hits:?}");
    // One success clears the failures: it is the idlest again.
    eps[0].stats.record(Duration::from_millis(1), true, now);
    let hits = histogram(p.as_ref(), &eps, 1000, 5);
    assert_eq!(hits, [1000, 0, 0]);
}
