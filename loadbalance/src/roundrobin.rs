//! Dubbo's `roundrobin`: smooth weighted round robin, without Dubbo's O(n) scan per call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use switchman_core::method_slot;

use crate::weights::member_weights;
use crate::{Endpoint, LoadBalance, PickContext, Picker};

/// Default longest schedule precomputed per routed subset (entries of 4 bytes).
pub const DEFAULT_SCHEDULE_LIMIT: usize = 1 << 20;

/// Steps × distinct weights a schedule build may cost before falling back to the stride.
const BUILD_BUDGET: u128 = 1 << 26;

/// Number of per-method counters in a picker (a power of two).
const METHOD_SLOTS: usize = 32;

/// Dubbo's `roundrobin`: smooth weighted round robin, without Dubbo's O(n) scan per call.
///
/// Dubbo (like nginx) keeps a `current` value per instance; on each call every `current` grows
/// by its weight, the largest wins (the earliest on ties) and loses the total weight. The
/// sequence only depends on the weights, so Switchman computes it once per snapshot and a pick
/// is a counter increment plus an array read.
///
/// # How the schedule is built
///
/// Scaling every weight by the same factor does not change the choices, so weights are divided
/// by their gcd; the sequence then repeats every `period = Σw / gcd` calls. Instances of the same
/// weight grow at the same rate, so among them the winner is always the one picked least often,
/// the earliest on ties: each weight class is a plain rotation. A step therefore compares one
/// candidate per distinct weight (`D` of them) and the schedule costs `O(period × D)` to build.
///
/// # When the period is too long
///
/// If the period exceeds the schedule limit (2^20 entries by default, 4 MiB), or `period × D`
/// exceeds the build budget, the picker falls back to a *golden-ratio stride* over the prefix
/// sums of the weights: call `c` lands on the instance owning offset `c × s mod Σw`, with
/// `s ≈ 0.618 Σw` coprime to `Σw`. Every instance still gets exactly its weight in each window
/// of `Σw` calls, and consecutive calls are spread over the fleet (a low-discrepancy sequence),
/// but the order is no longer nginx's. The pick is then a lookup in a bucket index of the
/// prefix sums (about one bucket per member) and a search among the few members it leaves:
/// O(1) expected, O(log n) at worst.
///
/// # State
///
/// State is per service and method, like Dubbo's: each picker (one per routed subset of a
/// service) holds a small array of padded atomic counters indexed by a hash of the method name.
/// Two methods whose names collide share a rotation, which keeps the shares right but
/// interleaves their sequences. A new snapshot starts every sequence from the beginning, as
/// Dubbo's does for a fresh consumer; Dubbo keeps `current` values across list changes and
/// recycles them after 60 s idle, which has no equivalent here.
///
/// # Concurrent picks
///
/// The counter is advanced by a relaxed read and write, not a locked read-modify-write (which
/// cost about 5 ns a pick, an eighth of the whole per-call path): calls that follow one
/// another take the positions in turn exactly, but two calls picking at the same moment on two
/// threads may read the same count and take the same position, and a thread interrupted
/// between its read and its write sets the count back, so some positions come twice. Every
/// member keeps its share: two threads picking as fast as they can are a few dozen calls in
/// 140,000 off the weights (a test holds it within 1%), and real calls, a network round trip
/// apart, rarely meet at all. Dubbo's own scan is no more exact under concurrency: two calls
/// can find the same largest `current` before either subtracts the total.
///
/// # All weights zero
///
/// When every member weighs 0 the members take turns (A B C A ...). Dubbo's scan sends every
/// call to the first member then (no `current` ever grows, and the first is kept on ties),
/// which piles a whole service onto one instance at the moment an operator has drained all of
/// them; Switchman spreads it evenly, as Dubbo's own `random` does for all-zero weights.
#[derive(Debug, Clone, Copy)]
pub struct RoundRobinBalance {
    schedule_limit: usize,
}

impl Default for RoundRobinBalance {
    fn default() -> Self {
        RoundRobinBalance {
            schedule_limit: DEFAULT_SCHEDULE_LIMIT,
        }
    }
}

impl RoundRobinBalance {
    /// A balancer with the default schedule limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the longest schedule precomputed per subset; longer periods use the golden-ratio
    /// stride (exact shares, different order). 0 forces the stride.
    pub fn with_schedule_limit(mut self, entries: usize) -> Self {
        self.schedule_limit = entries;
        self
    }
}

impl LoadBalance for RoundRobinBalance {
    fn name(&self) -> &str {
        "roundrobin"
    }

    fn prepare(
        &self,
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        now: SystemTime,
    ) -> Box<dyn Picker> {
        let w = member_weights(endpoints, &members, now);
        Box::new(RoundRobinPicker {
            order: Order::build(&w.weights, self.schedule_limit),
            members,
            counters: Box::new(std::array::from_fn(|_| Counter::default())),
            refresh: w.refresh,
        })
    }
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Counter(AtomicU64);

/// How call number `c` maps to a member position.
#[derive(Debug)]
enum Order {
    /// No members.
    Empty,
    /// `c mod n` (equal weights, or all zero).
    Cycle(usize),
    /// The exact smooth-WRR period.
    Schedule(Box<[u32]>),
    /// Golden-ratio stride over prefix sums (periods too long to precompute).
    Stride {
        prefix: Box<[u64]>,
        total: u64,
        step: u64,
        /// `index[b]`: the member owning offset `b << shift`; narrows the search to the
        /// members between two consecutive entries (usually one or two).
        index: Box<[u32]>,
        shift: u32,
    },
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Order {
    fn build(weights: &[u32], limit: usize) -> Order {
        let n = weights.len();
        if n == 0 {
            return Order::Empty;
        }
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        if total == 0 || weights.windows(2).all(|w| w[0] == w[1]) {
            return Order::Cycle(n);
        }
        let g = weights.iter().fold(0u64, |g, &w| gcd(g, w as u64));
        let period = total / g;
        // Weight classes: (reduced weight, member positions ascending). Zero weights are left
        // out: their `current` never grows, so smooth WRR never picks them.
        let mut classes: Vec<(u64, Vec<u32>)> = Vec::new();
        {
            let mut sorted: Vec<(u64, u32)> = weights
                .iter()
                .enumerate()
                .filter(|&(_, &w)| w > 0)
                .map(|(i, &w)| (w as u64 / g, i as u32))
                .collect();
            sorted.sort_unstable();
            for (w, i) in sorted {
                match classes.last_mut() {
                    Some((cw, v)) if *cw == w => v.push(i),
                    _ => classes.push((w, vec![i])),
                }
            }
        }
        let fits =
            period <= limit as u64 && (period as u128) * (classes.len() as u128) <= BUILD_BUDGET;
        if fits {
            Order::Schedule(smooth_schedule(&classes, period))
        } else {
            Order::stride(weights, total)
        }
    }

    fn stride(weights: &[u32], total: u64) -> Order {
        let prefix: Box<[u64]> = weights
            .iter()
            .scan(0u64, |acc, &w| {
                *acc += w as u64;
                Some(*acc)
            })
            .collect();
        // Golden-ratio step, nudged until it is coprime with the total so that the offsets
        // c × step mod total visit every offset once per window of `total` calls.
        let mut step = ((total as f64) * 0.618_033_988_749_895) as u64;
        step = step.clamp(1, total.max(1));
        while gcd(step, total) != 1 {
            step += 1;
        }
        // Buckets of 2^shift offsets, about one per member.
        let per_member = (total / weights.len() as u64).max(1);
        let shift = 63 - per_member.leading_zeros();
        let buckets = (total >> shift) as usize + 1;
        let mut index = Vec::with_capacity(buckets + 1);
        let mut pos = 0usize;
        for b in 0..=buckets as u64 {
            let lowest = b << shift;
            while pos < prefix.len() && prefix[pos] <= lowest {
                pos += 1;
            }
            index.push(pos.min(prefix.len() - 1) as u32);
        }
        Order::Stride {
            prefix,
            total,
            step,
            index: index.into_boxed_slice(),
            shift,
        }
    }

    #[inline]
    fn position(&self, c: u64) -> Option<usize> {
        match self {
            Order::Empty => None,
            Order::Cycle(n) => Some((c % *n as u64) as usize),
            Order::Schedule(s) => Some(s[(c % s.len() as u64) as usize] as usize),
            Order::Stride {
                prefix,
                total,
                step,
                index,
                shift,
            } => {
                let (total, step) = (*total, *step);
                let x = if total <= u32::MAX as u64 {
                    (c % total) * step % total
                } else {
                    ((c % total) as u128 * step as u128 % total as u128) as u64
                };
                let b = (x >> shift) as usize;
                let (lo, hi) = (index[b] as usize, index[b + 1] as usize);
                Some(lo + prefix[lo..=hi].partition_point(|&p| p <= x))
            }
        }
    }
}

/// Generates one period of smooth weighted round robin. `classes` holds the reduced weights
/// with their member positions (ascending). At step `t` (1-based) the leader of a class that has
/// been picked `p` times is member `p mod m`, picked `p / m` times so far, whose `current` is
/// `t × w − total × (p / m)`.
fn smooth_schedule(classes: &[(u64, Vec<u32>)], period: u64) -> Box<[u32]> {
    let total: i64 = classes
        .iter()
        .map(|(w, v)| *w as i64 * v.len() as i64)
        .sum();
    let mut picks = vec![0u64; classes.len()];
    let mut out = Vec::with_capacity(period as usize);
    for t in 1..=period as i64 {
        let mut best: Option<(i64, u32, usize)> = None;
        for (c, (w, m)) in classes.iter().enumerate() {
            let p = picks[c];
            let len = m.len() as u64;
            let idx = m[(p % len) as usize];
            let current = t * *w as i64 - total * (p / len) as i64;
            let better = match best {
                None => true,
                Some((bv, bi, _)) => current > bv || current == bv && idx < bi,
            };
            if better {
                best = Some((current, idx, c));
            }
        }
        let (_, idx, c) = best.expect("at least one class");
        picks[c] += 1;
        out.push(idx);
    }
    out.into_boxed_slice()
}

#[derive(Debug)]
struct RoundRobinPicker {
    members: Arc<[u32]>,
    order: Order,
    counters: Box<[Counter; METHOD_SLOTS]>,
    refresh: Option<Duration>,
}

impl Picker for RoundRobinPicker {
    fn pick(
        &self,
        _endpoints: &[Endpoint],
        ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        if self.members.is_empty() {
            return None;
        }
        // A retry or hedge (the call already tried someone) takes a random position of the
        // period, which is a weighted random pick, and leaves the rotation alone: if it
        // advanced the rotation, the instance after a slow or failing one would lose its turns
        // to retries and the slow one would get more than its share of first attempts.
        let c = if ctx.tried.is_empty() {
            // A relaxed read and write, not a locked increment (see "Concurrent picks").
            let slot = method_slot(&ctx.invocation.method, METHOD_SLOTS);
            let counter = &self.counters[slot].0;
            let c = counter.load(Ordering::Relaxed);
            counter.store(c.wrapping_add(1), Ordering::Relaxed);
            c
        } else {
            rng.u64(..)
        };
        self.order.position(c).map(|p| self.members[p] as usize)
    }

    fn members(&self) -> &[u32] {
        &self.members
    }

    fn refresh_after(&self) -> Option<Duration> {
        self.refresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dubbo's algorithm verbatim: O(n) per pick, used as the oracle.
    fn dubbo_sequence(weights: &[u32], calls: usize) -> Vec<usize> {
        let total: i64 = weights.iter().map(|&w| w as i64).sum();
        let mut current = vec![0i64; weights.len()];
        (0..calls)
            .map(|_| {
                let mut best: Option<usize> = None;
                for (i, &w) in weights.iter().enumerate() {
                    current[i] += w as i64;
                    if best.is_none_or(|b| current[i] > current[b]) {
                        best = Some(i);
                    }
                }
                let b = best.unwrap();
                current[b] -= total;
                b
            })
            .collect()
    }

    fn sequence(order: &Order, calls: u64) -> Vec<usize> {
        (0..calls).map(|c| order.position(c).unwrap()).collect()
    }

    #[test]
    fn five_one_one_is_nginx_sequence() {
        let o = Order::build(&[5, 1, 1], DEFAULT_SCHEDULE_LIMIT);
        assert_eq!(sequence(&o, 14), [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn schedule_matches_dubbo_scan_for_many_weight_sets() {
        let mut rng = fastrand::Rng::with_seed(11);
        for case in 0..200 {
            let n = rng.usize(1..12);
            let weights: Vec<u32> = (0..n)
                .map(|_| if rng.u8(..8) == 0 { 0 } else { rng.u32(1..20) })
                .collect();
            if weights.iter().all(|&w| w == 0) {
                continue;
            }
            let o = Order::build(&weights, DEFAULT_SCHEDULE_LIMIT);
            let total: u64 = weights.iter().map(|&w| w as u64).sum();
            let calls = (2 * total + 3) as usize;
            assert_eq!(
                sequence(&o, calls as u64),
                dubbo_sequence(&weights, calls),
                "case {case}: {weights:?}"
            );
        }
    }

    #[test]
    fn gcd_reduction_keeps_the_sequence() {
        let a = Order::build(&[500, 100, 100], DEFAULT_SCHEDULE_LIMIT);
        match &a {
            Order::Schedule(s) => assert_eq!(s.len(), 7),
            other => panic!("{other:?}"),
        }
        assert_eq!(sequence(&a, 21), dubbo_sequence(&[500, 100, 100], 21));
    }

    #[test]
    fn stride_gives_exact_shares_per_window() {
        let weights = [5u32, 0, 1, 3, 7];
        let o = Order::build(&weights, 0);
        assert!(matches!(o, Order::Stride { .. }));
        let mut hits = [0u32; 5];
        for p in sequence(&o, 16 * 3) {
            hits[p] += 1;
        }
        assert_eq!(hits, [15, 0, 3, 9, 21]);
    }

    #[test]
    fn stride_index_finds_the_owner_of_every_offset() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..100 {
            let n = rng.usize(2..50);
            let weights: Vec<u32> = (0..n)
                .map(|_| match rng.u8(..4) {
                    0 => 0,
                    1 => rng.u32(1..3),
                    _ => rng.u32(1..1000),
                })
                .collect();
            if weights.iter().all(|&w| w == 0) {
                continue;
            }
            let total: u64 = weights.iter().map(|&w| w as u64).sum();
            let Order::Stride { prefix, step, .. } = Order::stride(&weights, total) else {
                unreachable!()
            };
            let o = Order::stride(&weights, total);
            for c in 0..total {
                let x = c * step % total;
                let want = prefix.partition_point(|&p| p <= x);
                assert_eq!(o.position(c), Some(want), "{weights:?} c={c}");
            }
        }
    }

    /// A deliberate difference: Dubbo's scan gives A A A for all-zero weights; Switchman
    /// cycles (see the type's docs).
    #[test]
    fn all_zero_weights_take_turns_where_dubbo_always_picks_the_first() {
        assert_eq!(dubbo_sequence(&[0, 0, 0], 3), [0, 0, 0]);
        let o = Order::build(&[0, 0, 0], DEFAULT_SCHEDULE_LIMIT);
        assert_eq!(sequence(&o, 6), [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn equal_weights_cycle() {
        let o = Order::build(&[100, 100, 100], DEFAULT_SCHEDULE_LIMIT);
        assert_eq!(sequence(&o, 6), [0, 1, 2, 0, 1, 2]);
        assert_eq!(sequence(&Order::build(&[0, 0], 10), 3), [0, 1, 0]);
    }
}
