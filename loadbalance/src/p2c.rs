//! `p2c` (Dubbo name `adaptive`): power of two choices over a peak-EWMA load estimate.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::scored::{Score, ScoredPicker, load};
use crate::stats::{PER_DECAY_NS, ns_f64};
use crate::{Endpoint, InstanceStats, LoadBalance, Picker};

/// Default latency assumed for an instance that has no sample yet (tower's default too).
pub const DEFAULT_RTT: Duration = Duration::from_millis(30);

/// Power of two choices (tower's and linkerd's `p2c`; Dubbo's `adaptive` plays the same role).
///
/// Each pick draws two members by weight (alias table, O(1)) and keeps the one with the lower
/// `cost = peak-EWMA latency × (in-flight + 1) × (1 + consecutive failures)`, the first draw on
/// ties. The peak-EWMA ([`InstanceStats::peak_ewma_ns`]) jumps to any slower sample at once and
/// decays with a 10 s time constant, also while no sample arrives, so a member penalised once
/// gets probed again later. A failed call counts as a sample of at least
/// [`FAILURE_PENALTY`](crate::FAILURE_PENALTY) (1 s), and consecutive failures multiply the
/// cost: a member that fails fast does not attract traffic. Members without samples cost
/// [`DEFAULT_RTT`] (configurable).
///
/// Unlike Dubbo's `adaptive`, which scores by provider-reported CPU load and needs provider
/// support, this uses only what the consumer observes.
#[derive(Debug, Clone, Copy)]
pub struct P2cBalance {
    default_rtt: Duration,
}

impl Default for P2cBalance {
    fn default() -> Self {
        P2cBalance {
            default_rtt: DEFAULT_RTT,
        }
    }
}

impl P2cBalance {
    /// The balancer with [`DEFAULT_RTT`] for members without samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the latency assumed for members without samples.
    pub fn with_default_rtt(mut self, rtt: Duration) -> Self {
        self.default_rtt = rtt;
        self
    }
}

/// Scores in log form: `ln(decayed peak-EWMA) + ln((active + 1) × (1 + failures))` shifted by
/// `now / decay`, a shift common to every member. Comparing these orders members exactly as
/// comparing their decayed costs would, without reading the clock or calling `exp` per member.
#[derive(Debug, Clone)]
struct PeakEwmaCost {
    ln_default_rtt_ns: f64,
}

impl PeakEwmaCost {
    /// Scores with `default_rtt` for members without a sample.
    fn new(default_rtt: Duration) -> Self {
        PeakEwmaCost {
            ln_default_rtt_ns: (default_rtt.as_nanos() as f64).max(1.0).ln(),
        }
    }

    /// The latency part of the score: the peak-EWMA's log key, or the default RTT's for a
    /// member without a sample.
    #[inline]
    fn latency_key(&self, stats: &InstanceStats, now_ns: u64) -> f64 {
        stats
            .ewma_log_key()
            .unwrap_or_else(|| self.ln_default_rtt_ns + ns_f64(now_ns) * PER_DECAY_NS)
    }
}

impl Score for PeakEwmaCost {
    type Key = f64;
    const WORST: f64 = f64::INFINITY;
    const NEEDS_CLOCK: bool = true;
    #[inline]
    fn score(&self, stats: &InstanceStats, now_ns: u64) -> f64 {
        let key = self.latency_key(stats, now_ns);
        match load(stats) {
            1 => key,
            load => key + (load as f64).ln(),
        }
    }

    /// `key_b + ln(load_b) < key_a + ln(load_a)` with one `ln` at most: none when the two
    /// loads are equal (an idle pair, or two equally busy members), else the log of their
    /// ratio. Two scores would take the log of each load above one.
    #[inline]
    fn lower(&self, b: &InstanceStats, a: &InstanceStats, now_ns: u64) -> bool {
        let (kb, ka) = (self.latency_key(b, now_ns), self.latency_key(a, now_ns));
        let (lb, la) = (load(b), load(a));
        if lb == la {
            kb < ka
        } else {
            kb - ka < (la as f64 / lb as f64).ln()
        }
    }

    /// The statistics keep the peak-EWMA from now on (calls that nothing reads it for do not
    /// compute it).
    fn prepare(&self, stats: &InstanceStats) {
        stats.keep_peak_ewma();
    }
}

impl LoadBalance for P2cBalance {
    fn name(&self) -> &str {
        "p2c"
    }

    fn prepare(
        &self,
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        now: SystemTime,
    ) -> Box<dyn Picker> {
        Box::new(ScoredPicker::new(
            endpoints,
            members,
            now,
            0,
            PeakEwmaCost::new(self.default_rtt),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A `p2c` table keeps the peak-EWMA of the statistics it is built over, prepared or
    /// patched (as the directory patches: unchanged members keep their statistics, a changed
    /// one here comes with statistics of its own): the pick reads the estimate without
    /// marking it.
    #[test]
    fn tables_keep_the_peak_ewma_of_their_members() {
        let before = crate::test_endpoints(&[100; 4]);
        let members: Arc<[u32]> = (0..4).collect();
        let now = SystemTime::now();
        let table = P2cBalance::new().prepare(&before, members.clone(), now);
        let mut after = before.clone();
        after[2] = Endpoint::new(before[2].instance.clone());
        let _patched = table
            .patched(&after, &members, &[2], now)
            .expect("same members, settled weights");
        let at = Instant::now();
        for e in before.iter().chain(&after) {
            e.stats.record(Duration::from_millis(3), true, at);
            assert_eq!(
                e.stats.ewma_log_key().map(|k| k.is_finite()),
                Some(true),
                "{}",
                e.instance.address()
            );
        }
    }

    /// Two choices' comparison (one `ln` at most) agrees with comparing the two scores, busy,
    /// failing and idle members alike, apart from ties within rounding.
    #[test]
    fn comparing_two_agrees_with_their_scores() {
        let t0 = Instant::now();
        let mut rng = fastrand::Rng::with_seed(8);
        let score = PeakEwmaCost::new(DEFAULT_RTT);
        let (mut differing_loads, mut equal_loads) = (0, 0);
        for _ in 0..2_000 {
            let pair = [InstanceStats::new(), InstanceStats::new()];
            let mut guards = Vec::new();
            for s in &pair {
                s.keep_peak_ewma();
                // Now and then no sample (the default RTT's key).
                for _ in 0..rng.usize(..3) {
                    let at = t0 + Duration::from_millis(rng.u64(..60_000));
                    s.record(
                        Duration::from_micros(rng.u64(1..5_000)),
                        rng.u8(..8) != 0,
                        at,
                    );
                }
                for _ in 0..rng.usize(..3) {
                    guards.push(s.begin());
                }
            }
            let [a, b] = &pair;
            let now = rng.u64(..1 << 40);
            let (sa, sb) = (score.score(a, now), score.score(b, now));
            if (sa - sb).abs() < 1e-9 * sa.abs().max(1.0) {
                continue;
            }
            if load(a) == load(b) {
                equal_loads += 1;
            } else {
                differing_loads += 1;
            }
            assert_eq!(score.lower(b, a, now), sb < sa, "{sa} vs {sb}");
        }
        assert!(
            differing_loads > 200 && equal_loads > 200,
            "{differing_loads} {equal_loads}"
        );
    }

    /// The log-form score orders members as their decayed costs at a common instant do.
    #[test]
    fn log_scores_order_like_decayed_costs() {
        let t0 = Instant::now();
        let mut rng = fastrand::Rng::with_seed(21);
        let score = PeakEwmaCost::new(DEFAULT_RTT);
        for _ in 0..200 {
            let a = InstanceStats::new();
            let b = InstanceStats::new();
            for s in [&a, &b] {
                // As a p2c table over it does: the estimate is kept from then on.
                s.keep_peak_ewma();
                for _ in 0..rng.usize(1..4) {
                    let at = t0 + Duration::from_millis(rng.u64(..60_000));
                    s.record(Duration::from_micros(rng.u64(1..200_000)), rng.bool(), at);
                }
            }
            let _busy: Vec<_> = (0..rng.usize(..3)).map(|_| a.begin()).collect();
            let now = t0 + Duration::from_secs(61);
            let cost = |s: &InstanceStats| {
                s.peak_ewma_ns(now).unwrap()
                    * (s.active() as f64 + 1.0)
                    * (1.0 + s.consecutive_failures() as f64)
            };
            let (ca, cb) = (cost(&a), cost(&b));
            if (ca / cb - 1.0).abs() < 1e-9 {
                continue;
            }
            assert_eq!(
                score.score(&a, 0) < score.score(&b, 0),
                ca < cb,
                "{ca} vs {cb}"
            );
        }
    }
}
