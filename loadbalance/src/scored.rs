//! The picker shared by the balancers that compare live load (`leastactive`,
//! `shortestresponse`, `p2c`): each member gets a score from its [`InstanceStats`], lower is
//! better, ties are broken by weighted random.
//!
//! Dubbo scans every instance per call to find the exact minimum. Switchman does the same, with
//! the same tie-breaking, only while the routed subset is small (up to the *exact-scan limit*,
//! 16 by default, at most [`MAX_EXACT_SCAN`]); beyond that a pick draws two members by weight
//! (alias table, O(1)) and keeps the one with the lower score, the first drawn on ties. This is
//! the "power of two choices" result (Mitzenmacher): the maximum load falls from
//! `O(log n / log log n)` for one random choice to `O(log log n)`, close to the exact scan, at
//! constant cost, and it degrades gracefully when the scores are stale, where an exact scan
//! herds every concurrent caller onto the same instance.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::stats::{coarse_now_ns, tick_coarse_clock};
use crate::weights::{
    MemberWeights, Sampler, member_weights, patched_weights, same_members, weighted_untried,
};
use crate::{Endpoint, InstanceStats, PickContext, Picker};

/// Largest routed subset that may be scanned exactly on each pick.
pub const MAX_EXACT_SCAN: usize = 64;

// A scan keeps its tied members as the bits of a `u64`.
const _: () = assert!(MAX_EXACT_SCAN <= u64::BITS as usize);

/// Default exact-scan limit of the score-based balancers.
pub const DEFAULT_EXACT_SCAN: usize = 16;

/// How a score-based balancer rates a member at pick time. Lower is better.
pub(crate) trait Score: Send + Sync + Clone + std::fmt::Debug + 'static {
    /// What scores are compared as: an integer where the score is a count (no conversion and
    /// an integer comparison per member), `f64` otherwise.
    type Key: Copy + PartialOrd + std::fmt::Debug;
    /// A key no member scores below: where a scan's minimum starts.
    const WORST: Self::Key;
    /// Whether [`Score::score`] reads `now_ns` (the picker then reads the coarse clock, an
    /// atomic load, once per pick).
    const NEEDS_CLOCK: bool;
    fn score(&self, stats: &InstanceStats, now_ns: u64) -> Self::Key;
    /// Called for each member's statistics when a table is built over them, and for the
    /// changed members' when a table is patched: what [`Score::score`] needs kept from then
    /// on (`p2c` keeps the peak-EWMA).
    #[inline]
    fn prepare(&self, _stats: &InstanceStats) {}
    /// Whether `b` scores strictly lower than `a`: what two choices ask (the first draw wins
    /// ties). A score whose comparison is cheaper than two scores overrides it.
    #[inline]
    fn lower(&self, b: &InstanceStats, a: &InstanceStats, now_ns: u64) -> bool {
        self.score(b, now_ns) < self.score(a, now_ns)
    }
}

/// Consecutive failures beyond this no longer raise the load (`leastactive`, `p2c`).
const MAX_FAILURE_FACTOR: u32 = 16;

/// A member's load as `leastactive` and `p2c` count it: `(active + 1) × (1 + consecutive
/// failures)` (failures capped at 16), so an instance that fails fast (and so never has calls
/// in flight) looks busy instead of attracting every call. The failing case is out of line:
/// a scan of healthy members reads the failures and multiplies nothing.
#[inline]
pub(crate) fn load(stats: &InstanceStats) -> u64 {
    let load = u64::from(stats.active()) + 1;
    match stats.consecutive_failures() {
        0 => load,
        failures => failing_load(load, failures),
    }
}

#[cold]
#[inline(never)]
fn failing_load(load: u64, failures: u32) -> u64 {
    load * (1 + u64::from(failures.min(MAX_FAILURE_FACTOR)))
}

#[derive(Debug)]
pub(crate) struct ScoredPicker<S> {
    members: Arc<[u32]>,
    /// Effective weights, in member order.
    weights: Box<[u32]>,
    /// Whether some member has a positive weight (zero-weight members are then skipped).
    any_positive: bool,
    sampler: Sampler,
    /// When picks scan the members exactly ([`ScoredPicker::scans`]): their statistics, in
    /// member order, so that a scan reads each member's counters without looking up its
    /// endpoint first. Empty when picks take two choices.
    scanned: Box<[Arc<InstanceStats>]>,
    refresh: Option<Duration>,
    score: S,
}

impl<S: Score> ScoredPicker<S> {
    pub(crate) fn new(
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        now: SystemTime,
        scan_limit: usize,
        score: S,
    ) -> Self {
        let w = member_weights(endpoints, &members, now);
        let scan = members.len() <= scan_limit.min(MAX_EXACT_SCAN);
        prepare_members(endpoints, &members, &score);
        Self::from_weights(endpoints, members, w, scan, score)
    }

    fn from_weights(
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        w: MemberWeights,
        scan: bool,
        score: S,
    ) -> Self {
        tick_coarse_clock();
        let any_positive = w.weights.iter().any(|&w| w > 0);
        let scanned = if scan {
            members
                .iter()
                .map(|&m| Arc::clone(&endpoints[m as usize].stats))
                .collect()
        } else {
            Box::default()
        };
        ScoredPicker {
            sampler: Sampler::new(&w.weights, &members),
            scanned,
            weights: w.weights.into_boxed_slice(),
            any_positive,
            members,
            refresh: w.refresh,
            score,
        }
    }

    /// Whether picks scan every member exactly (the subset is within the exact-scan limit):
    /// then every member's statistics are kept (an empty subset scans too).
    #[inline]
    fn scans(&self) -> bool {
        self.scanned.len() == self.members.len()
    }

    /// Dubbo's exact algorithm: the minimum score, ties by weighted random (uniform when the
    /// tied weights are all equal). Zero-weight members are skipped while others have weight.
    fn pick_scan(&self, rng: &mut fastrand::Rng) -> Option<usize> {
        self.pick_scan_avoiding(&[], rng)
    }

    /// [`ScoredPicker::pick_scan`] over the members not in `tried` (endpoint indexes): Dubbo's
    /// reselect runs the balancer over the untried instances.
    fn pick_scan_avoiding(&self, tried: &[usize], rng: &mut fastrand::Rng) -> Option<usize> {
        // Equal weights (the usual fleet: Dubbo's default, no warm-up), or all zero: weights
        // cannot change the pick, and the scan reads none.
        if self.sampler.is_uniform() {
            self.scan::<false>(tried, rng)
        } else {
            self.scan::<true>(tried, rng)
        }
    }

    /// The exact scan: the minimum score, ties by weighted random (uniform when the tied
    /// weights are all equal), zero-weight members skipped while others have weight. Without
    /// `WEIGHTED` (every weight equal) it reads no weight and draws uniformly among the tied:
    /// the same pick.
    ///
    /// The tied members are the bits of one word (a scan covers at most
    /// [`MAX_EXACT_SCAN`] = 64 members, positions 0–63): a tie costs an `or`, not a store,
    /// and the draw among them takes the same position as a list of them in member order.
    fn scan<const WEIGHTED: bool>(
        &self,
        tried: &[usize],
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        let now = if S::NEEDS_CLOCK { coarse_now_ns() } else { 0 };
        let mut tied = 0u64;
        let mut count = 0usize;
        let mut best = S::WORST;
        let mut total: u64 = 0;
        let mut first_weight = 0u32;
        let mut same_weight = true;
        for pos in 0..self.scanned.len() {
            let w = if WEIGHTED { self.weights[pos] } else { 0 };
            if WEIGHTED && w == 0 && self.any_positive {
                continue;
            }
            if !tried.is_empty() && tried.contains(&(self.members[pos] as usize)) {
                continue;
            }
            let s = self.score.score(&self.scanned[pos], now);
            // A member scoring `WORST` itself ties with the start: the same as taking it as
            // the first minimum, since nothing is tied yet.
            if s < best {
                best = s;
                tied = 0;
                count = 0;
                total = 0;
                same_weight = true;
            } else if s > best {
                continue;
            }
            if WEIGHTED {
                if count == 0 {
                    first_weight = w;
                } else if w != first_weight {
                    same_weight = false;
                }
            }
            // `pos` stays below the member count, at most `MAX_EXACT_SCAN` (a scan is only
            // prepared for that many): the remainder only spares a check.
            tied |= 1 << (pos % MAX_EXACT_SCAN);
            count += 1;
            total += w as u64;
        }
        let chosen = match count {
            0 => return None,
            1 => tied.trailing_zeros() as usize,
            // Every member tied (an idle service): the draw is the position itself.
            n if n == self.scanned.len() && (same_weight || total == 0) => rng.usize(..n),
            _ if same_weight || total == 0 => nth_bit(tied, rng.usize(..count)),
            _ => {
                let mut r = rng.u64(..total);
                // The last tied member, should the draw run past the others.
                let mut chosen = 63 - tied.leading_zeros() as usize;
                let mut rest = tied;
                while rest != 0 {
                    let pos = rest.trailing_zeros() as usize;
                    let w = u64::from(self.weights[pos]);
                    if r < w {
                        chosen = pos;
                        break;
                    }
                    r -= w;
                    rest &= rest - 1;
                }
                chosen
            }
        };
        Some(self.members[chosen] as usize)
    }

    /// Two weighted draws (global indexes; different members where the table allows,
    /// [`Sampler::sample_two`]), the lower score wins, the first draw on ties.
    fn pick_two(&self, endpoints: &[Endpoint], rng: &mut fastrand::Rng) -> Option<usize> {
        let (a, b) = self.sampler.sample_two(rng)?;
        if b == a {
            return Some(a);
        }
        let now = if S::NEEDS_CLOCK { coarse_now_ns() } else { 0 };
        let lower = self
            .score
            .lower(&endpoints[b].stats, &endpoints[a].stats, now);
        Some(if lower { b } else { a })
    }
}

/// [`Score::prepare`] for the statistics of `endpoints` at `indexes`.
fn prepare_members<S: Score>(endpoints: &[Endpoint], indexes: &[u32], score: &S) {
    for &i in indexes {
        if let Some(e) = endpoints.get(i as usize) {
            score.prepare(&e.stats);
        }
    }
}

/// The position of the `n`-th set bit of `bits` (from the lowest, `n` counted from 0); `n`
/// must be below the number of set bits.
#[inline]
fn nth_bit(mut bits: u64, n: usize) -> usize {
    for _ in 0..n {
        bits &= bits - 1;
    }
    bits.trailing_zeros() as usize
}

impl<S: Score> Picker for ScoredPicker<S> {
    fn pick(
        &self,
        endpoints: &[Endpoint],
        _ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        match self.members.len() {
            0 => None,
            1 => Some(self.members[0] as usize),
            _ if self.scans() => self.pick_scan(rng),
            _ => self.pick_two(endpoints, rng),
        }
    }

    fn members(&self) -> &[u32] {
        &self.members
    }

    fn refresh_after(&self) -> Option<Duration> {
        self.refresh
    }

    fn settled_weights(&self) -> Option<&[u32]> {
        self.refresh.is_none().then_some(&*self.weights)
    }

    fn patched(
        &self,
        endpoints: &[Endpoint],
        members: &Arc<[u32]>,
        changed: &[u32],
        now: SystemTime,
    ) -> Option<Box<dyn Picker>> {
        let settled = self.settled_weights()?;
        if !same_members(&self.members, members) {
            return None;
        }
        let w = patched_weights(endpoints, members, settled, changed, now);
        // The other members' statistics are those this table was built over (the directory
        // keeps an address's statistics across snapshots): only the changed ones are new. A
        // patch at 100k members reads the delta, not every member's statistics.
        prepare_members(endpoints, changed, &self.score);
        Some(Box::new(ScoredPicker::from_weights(
            endpoints,
            members.clone(),
            w,
            self.scans(),
            self.score.clone(),
        )))
    }

    /// The balancer over the untried members (Dubbo's reselect): the exact scan skipping the
    /// tried ones; above the exact-scan limit, two choices redrawn until untried, then one
    /// weighted pass.
    fn pick_untried(
        &self,
        endpoints: &[Endpoint],
        ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        if self.scans() {
            if let Some(i) = self.pick_scan_avoiding(ctx.tried, rng) {
                return Some(i);
            }
            // Only zero-weight members are left untried.
            return weighted_untried(&self.members, &self.weights, ctx.tried, rng);
        }
        for _ in 0..crate::RESELECT_TRIES {
            let i = self.pick_two(endpoints, rng)?;
            if !ctx.tried.contains(&i) {
                return Some(i);
            }
        }
        weighted_untried(&self.members, &self.weights, ctx.tried, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_endpoints;

    /// In flight plus one: what `leastactive` scores, without its failure factor.
    #[derive(Debug, Clone)]
    struct InFlight;

    impl Score for InFlight {
        type Key = u32;
        const WORST: u32 = u32::MAX;
        const NEEDS_CLOCK: bool = false;
        fn score(&self, stats: &InstanceStats, _now_ns: u64) -> u32 {
            stats.active() + 1
        }
    }

    /// The scan for equal weights picks exactly what the weighted scan picks: the same
    /// minimum, the same draw among the tied, with and without instances already tried.
    #[test]
    fn the_scan_for_equal_weights_picks_what_the_weighted_scan_picks() {
        let endpoints = test_endpoints(&[100; 12]);
        let members: Arc<[u32]> = (0..12).collect();
        let picker = ScoredPicker::new(&endpoints, members, SystemTime::now(), 16, InFlight);
        assert!(picker.sampler.is_uniform() && picker.scans());
        let mut load = fastrand::Rng::with_seed(5);
        let mut guards = Vec::new();
        for round in 0..200u64 {
            // A fresh spread of 0–2 calls in flight per instance.
            guards.clear();
            for e in &endpoints {
                for _ in 0..load.usize(..3) {
                    guards.push(e.stats.begin());
                }
            }
            let tried: Vec<usize> = (0..load.usize(..4)).map(|_| load.usize(..12)).collect();
            let (mut a, mut b) = (
                fastrand::Rng::with_seed(round),
                fastrand::Rng::with_seed(round),
            );
            for _ in 0..8 {
                assert_eq!(
                    picker.scan::<false>(&tried, &mut a),
                    picker.scan::<true>(&tried, &mut b),
                    "round {round}, tried {tried:?}"
                );
            }
        }
    }

    /// The exact scan reads the statistics of the endpoints it was prepared or patched over:
    /// a table patched onto endpoints with statistics of their own (every one busy but one)
    /// picks by those, not by the previous table's.
    #[test]
    fn a_patched_scan_reads_the_new_endpoints_statistics() {
        let before = test_endpoints(&[100; 10]);
        let members: Arc<[u32]> = (0..10).collect();
        let now = SystemTime::now();
        let previous = ScoredPicker::new(&before, members.clone(), now, 16, InFlight);
        assert!(previous.scans());
        let after: Vec<Endpoint> = before
            .iter()
            .map(|e| Endpoint::new(e.instance.clone()))
            .collect();
        let _busy: Vec<_> = after
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != 6)
            .map(|(_, e)| e.stats.begin())
            .collect();
        let patched = previous
            .patched(&after, &members, &[], now)
            .expect("same members, settled weights");
        let mut rng = fastrand::Rng::with_seed(3);
        let ctx = PickContext {
            invocation: &switchman_core::Invocation::new("m"),
            tried: &[],
        };
        for _ in 0..50 {
            assert_eq!(patched.pick(&after, &ctx, &mut rng), Some(6));
        }
        // The previous table still reads its own endpoints, all idle: it spreads.
        let picks: std::collections::BTreeSet<_> = (0..50)
            .filter_map(|_| previous.pick(&before, &ctx, &mut rng))
            .collect();
        assert!(picks.len() > 1, "{picks:?}");
    }

    /// The scan as Dubbo's `LeastActiveLoadBalance` writes it, on this picker's weights and
    /// scores: the tied positions in a list, a weighted draw among them unless their weights
    /// are all equal (or all zero); with Switchman's one difference, zero-weight members
    /// skipped while another has weight.
    fn dubbo_scan(
        picker: &ScoredPicker<InFlight>,
        endpoints: &[Endpoint],
        tried: &[usize],
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        let any_positive = picker.weights.iter().any(|&w| w > 0);
        let (mut tied, mut best) = (Vec::new(), 0);
        for (pos, &m) in picker.members.iter().enumerate() {
            if any_positive && picker.weights[pos] == 0 || tried.contains(&(m as usize)) {
                continue;
            }
            let s = InFlight.score(&endpoints[m as usize].stats, 0);
            if tied.is_empty() || s < best {
                best = s;
                tied.clear();
            } else if s > best {
                continue;
            }
            tied.push(pos);
        }
        let weights: Vec<u64> = tied.iter().map(|&p| u64::from(picker.weights[p])).collect();
        let total: u64 = weights.iter().sum();
        let chosen = match tied.len() {
            0 => return None,
            1 => tied[0],
            n if total == 0 || weights.iter().all(|&w| w == weights[0]) => tied[rng.usize(..n)],
            _ => {
                let mut r = rng.u64(..total);
                let k = weights.iter().position(|&w| {
                    let hit = r < w;
                    r = r.saturating_sub(w);
                    hit
                });
                tied[k.unwrap_or(tied.len() - 1)]
            }
        };
        Some(picker.members[chosen] as usize)
    }

    /// The scan (its tied positions as the bits of a word, the weights read only when they differ)
    /// picks exactly what Dubbo's written-out scan picks with the same random draws, up to
    /// the largest subset scanned (64 members), with weights equal, mixed or zero, instances
    /// already tried, and every member tied.
    #[test]
    fn the_scan_picks_what_dubbos_scan_picks() {
        let mut draw = fastrand::Rng::with_seed(11);
        for round in 0..300u64 {
            let n = draw.usize(1..=MAX_EXACT_SCAN);
            let weights: Vec<u32> = match round % 3 {
                0 => vec![100; n],
                1 => (0..n).map(|_| [0, 1, 5, 100][draw.usize(..4)]).collect(),
                _ => (0..n).map(|_| draw.u32(1..4)).collect(),
            };
            let endpoints = test_endpoints(&weights);
            let members: Arc<[u32]> = (0..n as u32).rev().collect();
            let picker = ScoredPicker::new(
                &endpoints,
                members,
                SystemTime::now(),
                MAX_EXACT_SCAN,
                InFlight,
            );
            // Every fourth round idle and nothing tried: every member tied.
            let idle = round % 4 == 3;
            let mut guards = Vec::new();
            for e in endpoints.iter().filter(|_| !idle) {
                for _ in 0..draw.usize(..3) {
                    guards.push(e.stats.begin());
                }
            }
            let tried: Vec<usize> = (0..if idle { 0 } else { draw.usize(..4) })
                .map(|_| draw.usize(..n))
                .collect();
            let (mut a, mut b) = (
                fastrand::Rng::with_seed(round),
                fastrand::Rng::with_seed(round),
            );
            for _ in 0..8 {
                assert_eq!(
                    picker.pick_scan_avoiding(&tried, &mut a),
                    dubbo_scan(&picker, &endpoints, &tried, &mut b),
                    "round {round}: weights {weights:?}, tried {tried:?}"
                );
            }
        }
    }
}
