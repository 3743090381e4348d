//! Shared table-building pieces: effective (warm-up) weights of a routed subset, and an alias
//! table for O(1) weighted sampling.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::{Endpoint, effective_weight_at_ms};

/// Shortest refresh period requested while instances warm up.
const MIN_REFRESH: Duration = Duration::from_millis(100);

/// Effective weights of a subset, in member order, and when they next change.
#[derive(Debug)]
pub(crate) struct MemberWeights {
    pub(crate) weights: Vec<u32>,
    /// Time until the first warming member's weight steps up; `None` when nobody warms.
    pub(crate) refresh: Option<Duration>,
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The effective weight of `ep` at `now_ms` and, while it warms up, the time until its
/// weight steps up next (Dubbo's weight grows by one every `warmup / weight`).
fn weight_and_step(ep: &Endpoint, now_ms: u64) -> (u32, Option<Duration>) {
    let w = effective_weight_at_ms(ep, now_ms);
    let full = ep.instance.weight();
    if w >= full {
        return (w, None);
    }
    let warmup_ms = ep.instance.warmup().as_millis() as f64;
    let start = ep
        .instance
        .timestamp_ms()
        .unwrap_or_else(|| ep.stats.first_seen_ms());
    let uptime = now_ms.saturating_sub(start) as f64;
    // Next step when uptime / (warmup / full) reaches w + 1.
    let next = (w as f64 + 1.0) * warmup_ms / full as f64;
    let wait = Duration::from_millis((next - uptime).max(0.0).ceil() as u64);
    (w, Some(wait.max(MIN_REFRESH)))
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Computes the effective weight of every member at `now` and the time until the next
/// warm-up step.
pub(crate) fn member_weights(
    endpoints: &[Endpoint],
    members: &[u32],
    now: SystemTime,
) -> MemberWeights {
    let now_ms = millis(now);
    let mut refresh: Option<Duration> = None;
    let weights = members
        .iter()
        .map(|&i| {
            let (w, step) = weight_and_step(&endpoints[i as usize], now_ms);
            refresh = earliest(refresh, step);
            w
        })
        .collect();
    MemberWeights { weights, refresh }
}

/// [`member_weights`] from a previous table's settled weights (`settled`, in member order):
/// those of the members in `changed` (global indexes, ascending) are computed again, the others
/// kept (a settled weight stays what it is while the instance does not change).
pub(crate) fn patched_weights(
    endpoints: &[Endpoint],
    members: &[u32],
    settled: &[u32],
    changed: &[u32],
    now: SystemTime,
) -> MemberWeights {
    debug_assert_eq!(settled.len(), members.len());
    let now_ms = millis(now);
    let mut weights = settled.to_vec();
    let mut refresh = None;
    for &c in changed {
        if let Ok(pos) = members.binary_search(&c) {
            let (w, step) = weight_and_step(&endpoints[c as usize], now_ms);
            weights[pos] = w;
            refresh = earliest(refresh, step);
        }
    }
    MemberWeights { weights, refresh }
}

/// Whether `members` is the list a table was built for (`built_for`): the same `Arc` as the
/// directory passes it, or equal.
pub(crate) fn same_members(built_for: &Arc<[u32]>, members: &Arc<[u32]>) -> bool {
    Arc::ptr_eq(built_for, members) || built_for == members
}

/// O(1) weighted sampling over a subset's members (Vose's alias method with exact integer
/// thresholds), answering with the member's global endpoint index: a pick reads one column
/// and no member list (at 100k members, one cache miss less). Uniform when all weights are
/// equal or all are zero; a zero-weight member is never returned while another has weight.
#[derive(Debug)]
pub(crate) enum Sampler {
    /// Every member equally likely, and the members are `0..n`.
    Identity(usize),
    /// Every member equally likely.
    Uniform(Arc<[u32]>),
    /// Column `i` answers `keep` when `r < threshold`, else `alias`.
    Alias { total: u64, columns: Box<[Column]> },
}

impl Sampler {
    /// Every member equally likely: all weights equal, or all zero.
    #[inline]
    pub(crate) fn is_uniform(&self) -> bool {
        matches!(self, Sampler::Identity(_) | Sampler::Uniform(_))
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    threshold: u64,
    /// The global index of member `i`.
    keep: u32,
    /// The global index of the member that tops column `i` up.
    alias: u32,
}

impl Sampler {
    /// The table for `members` (global indexes, in member order) with `weights` (same order).
    pub(crate) fn new(weights: &[u32], members: &Arc<[u32]>) -> Sampler {
        debug_assert_eq!(weights.len(), members.len());
        let n = weights.len();
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        if total == 0 || weights.windows(2).all(|w| w[0] == w[1]) {
            let identity = members.iter().enumerate().all(|(i, &m)| m as usize == i);
            return if identity {
                Sampler::Identity(n)
            } else {
                Sampler::Uniform(members.clone())
            };
        }
        // Scaled weights s_i = w_i * n against threshold `total`: exact in u64, as members
        // are u32 indexes (n <= 2^32, so w_i * n < 2^64 for any u32 weight). Each column's
        // threshold holds its scaled weight while the table is built (no second array), and
        // `alias` a member position until the end.
        debug_assert!(n as u64 <= u32::MAX as u64 + 1);
        let t = total;
        let mut columns: Vec<Column> = weights
            .iter()
            .zip(members.iter())
            .enumerate()
            .map(|(i, (&w, &m))| Column {
                threshold: w as u64 * n as u64,
                keep: m,
                alias: i as u32,
            })
            .collect();
        // One work array for both stacks: the small ones (s < t) grow from the front, the
        // large ones from the back; together they never hold more than n.
        let mut stack = vec![0u32; n];
        let (mut small, mut large) = (0usize, n);
        for (i, c) in columns.iter().enumerate() {
            if c.threshold < t {
                stack[small] = i as u32;
                small += 1;
            } else {
                large -= 1;
                stack[large] = i as u32;
            }
        }
        while small > 0 && large < n {
            small -= 1;
            let l = stack[small] as usize;
            let g = stack[large];
            let s_l = columns[l].threshold;
            columns[l].alias = g;
            let rest = &mut columns[g as usize].threshold;
            *rest -= t - s_l;
            if *rest < t {
                large += 1;
                stack[small] = g;
                small += 1;
            }
        }
        // Exact arithmetic leaves only full columns (threshold == total) behind. Aliases
        // become global indexes.
        for c in &mut columns {
            c.alias = members[c.alias as usize];
        }
        Sampler::Alias {
            total,
            columns: columns.into_boxed_slice(),
        }
    }

    /// A member's global endpoint index, or `None` when there are no members.
    #[inline(always)]
    pub(crate) fn sample(&self, rng: &mut fastrand::Rng) -> Option<usize> {
        match self {
            Sampler::Identity(0) => None,
            Sampler::Identity(n) => Some(rng.usize(..*n)),
            Sampler::Uniform(members) => match members.len() {
                0 => None,
                n => Some(members[rng.usize(..n)] as usize),
            },
            Sampler::Alias { total, columns } => {
                let c = columns[rng.usize(..columns.len())];
                Some(if rng.u64(..*total) < c.threshold {
                    c.keep
                } else {
                    c.alias
                } as usize)
            }
        }
    }

    /// Two members' global endpoint indexes for the power of two choices, different whenever
    /// there are two members: equally likely members draw the second among the others; a
    /// weighted table draws it again at most twice (a dominant weight may keep winning), so
    /// the two may then be the same. `None` when there are no members.
    #[inline(always)]
    pub(crate) fn sample_two(&self, rng: &mut fastrand::Rng) -> Option<(usize, usize)> {
        match self {
            Sampler::Identity(n) => two_positions(*n, rng),
            Sampler::Uniform(members) => {
                let (a, b) = two_positions(members.len(), rng)?;
                Some((members[a] as usize, members[b] as usize))
            }
            Sampler::Alias { .. } => {
                let a = self.sample(rng)?;
                let mut b = self.sample(rng)?;
                for _ in 0..2 {
                    if b != a {
                        break;
                    }
                    b = self.sample(rng)?;
                }
                Some((a, b))
            }
        }
    }
}

/// Two different positions below `n`, uniformly (the second drawn among the others); `(0, 0)`
/// for one position, `None` for none.
#[inline(always)]
fn two_positions(n: usize, rng: &mut fastrand::Rng) -> Option<(usize, usize)> {
    match n {
        0 => None,
        1 => Some((0, 0)),
        _ => {
            let a = rng.usize(..n);
            let b = rng.usize(..n - 1);
            Some((a, b + usize::from(b >= a)))
        }
    }
}

/// Dubbo's reselect for weighted random: a weighted draw over the members not in `tried`
/// (endpoint indexes), uniform when their weights are all zero; `None` when every member was
/// tried. One pass over the members: only for a retry whose draws kept landing on tried
/// members (see `RandomPicker::pick_untried`).
pub(crate) fn weighted_untried(
    members: &[u32],
    weights: &[u32],
    tried: &[usize],
    rng: &mut fastrand::Rng,
) -> Option<usize> {
    let open = |pos: &usize| !tried.contains(&(members[*pos] as usize));
    let (mut count, mut total) = (0usize, 0u64);
    for pos in (0..members.len()).filter(open) {
        count += 1;
        total += weights[pos] as u64;
    }
    if count == 0 {
        return None;
    }
    let pos = if total == 0 {
        let k = rng.usize(..count);
        (0..members.len()).filter(open).nth(k)?
    } else {
        let mut r = rng.u64(..total);
        (0..members.len()).filter(open).find(|&pos| {
            let w = weights[pos] as u64;
            if r < w {
                true
            } else {
                r -= w;
                false
            }
        })?
    };
    Some(members[pos] as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact probability the table gives each global index below `n`, from its columns.
    fn exact_shares(s: &Sampler, n: usize) -> Vec<f64> {
        let mut p = vec![0.0; n];
        match s {
            Sampler::Identity(m) => p[..*m].iter_mut().for_each(|x| *x = 1.0 / *m as f64),
            Sampler::Uniform(members) => {
                for &m in members.iter() {
                    p[m as usize] += 1.0 / members.len() as f64;
                }
            }
            Sampler::Alias { total, columns } => {
                for c in columns.iter() {
                    let keep = c.threshold as f64 / *total as f64;
                    p[c.keep as usize] += keep / columns.len() as f64;
                    p[c.alias as usize] += (1.0 - keep) / columns.len() as f64;
                }
            }
        }
        p
    }

    fn identity(n: usize) -> Arc<[u32]> {
        (0..n as u32).collect()
    }

    #[test]
    fn alias_table_reproduces_weights_exactly() {
        for weights in [
            vec![5u32, 1, 1],
            vec![0, 3, 0, 1],
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 1000],
            vec![u32::MAX, 1, 7],
        ] {
            let s = Sampler::new(&weights, &identity(weights.len()));
            let total: f64 = weights.iter().map(|&w| w as f64).sum();
            for (i, p) in exact_shares(&s, weights.len()).into_iter().enumerate() {
                let want = weights[i] as f64 / total;
                assert!((p - want).abs() < 1e-9, "{weights:?} [{i}]: {p} vs {want}");
            }
            // Over a subset: the same shares, at the members' global indexes.
            let members: Arc<[u32]> = (0..weights.len() as u32).map(|i| 3 * i + 1).collect();
            let s = Sampler::new(&weights, &members);
            let shares = exact_shares(&s, 3 * weights.len() + 1);
            for (g, p) in shares.into_iter().enumerate() {
                let want = match members.iter().position(|&m| m as usize == g) {
                    Some(i) => weights[i] as f64 / total,
                    None => 0.0,
                };
                assert!((p - want).abs() < 1e-9, "{weights:?} @{g}: {p} vs {want}");
            }
        }
    }

    #[test]
    fn zero_weights_never_sampled_and_all_zero_is_uniform() {
        let s = Sampler::new(&[0, 0, 9, 0], &identity(4));
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..1000 {
            assert_eq!(s.sample(&mut rng), Some(2));
        }
        assert!(matches!(
            Sampler::new(&[0, 0], &identity(2)),
            Sampler::Identity(2)
        ));
        assert_eq!(Sampler::new(&[], &identity(0)).sample(&mut rng), None);
        let subset: Arc<[u32]> = Arc::from([4u32, 9]);
        assert!(matches!(
            Sampler::new(&[3, 3], &subset),
            Sampler::Uniform(_)
        ));
        assert_eq!(Sampler::new(&[], &Arc::from([])).sample(&mut rng), None);
    }

    /// Two choices from equally likely members are two different members, every ordered pair
    /// about equally often; one member pairs with itself; none gives none.
    #[test]
    fn two_uniform_draws_are_two_members() {
        let mut rng = fastrand::Rng::with_seed(5);
        let subset: Arc<[u32]> = Arc::from([4u32, 9, 11]);
        for s in [
            Sampler::new(&[1, 1, 1], &identity(3)),
            Sampler::new(&[2, 2, 2], &subset),
        ] {
            let global: Vec<usize> = match &s {
                Sampler::Identity(n) => (0..*n).collect(),
                Sampler::Uniform(m) => m.iter().map(|&g| g as usize).collect(),
                Sampler::Alias { .. } => unreachable!("equal weights"),
            };
            let mut pairs = std::collections::HashMap::new();
            let draws = 60_000;
            for _ in 0..draws {
                let (a, b) = s.sample_two(&mut rng).unwrap();
                assert_ne!(a, b);
                assert!(global.contains(&a) && global.contains(&b));
                *pairs.entry((a, b)).or_insert(0u32) += 1;
            }
            // Six ordered pairs of three, 10,000 each expected (σ ≈ 91).
            assert_eq!(pairs.len(), 6);
            for (pair, n) in pairs {
                assert!((9_500..10_500).contains(&n), "{pair:?} drawn {n} times");
            }
        }
        let one = Sampler::new(&[7], &Arc::from([3u32]));
        assert_eq!(one.sample_two(&mut rng), Some((3, 3)));
        assert_eq!(Sampler::new(&[], &identity(0)).sample_two(&mut rng), None);
    }

    /// A patched table (`Picker::patched`, else `prepare` as the directory does) is the table a
    /// full build gives: the changed members' weights are read again, the others kept; a
    /// previous table that warms, or was built for other members, does not patch itself.
    #[test]
    fn patched_tables_equal_full_builds() {
        use crate::{
            LeastActiveBalance, LoadBalance, P2cBalance, RandomBalance, ShortestResponseBalance,
        };
        use std::sync::Arc;
        use switchman_core::Instance;

        let now = SystemTime::now();
        let now_ms = millis(now);
        let node = |port: u16, weight: u32, warming: bool| {
            let b = Instance::builder("10.0.0.1", port).weight(weight);
            let b = if warming {
                b.timestamp_ms(now_ms - 1_000)
                    .warmup(Duration::from_secs(600))
            } else {
                b.timestamp_ms(0)
            };
            Arc::new(b.build())
        };
        let mut rng = fastrand::Rng::with_seed(11);
        let before: Vec<Endpoint> = (0..60)
            .map(|p| Endpoint::new(node(p, rng.u32(1..200), false)))
            .collect();
        // Every member but a few, so that some changed endpoints are not members.
        let members: Arc<[u32]> = (0..60u32).filter(|i| i % 7 != 3).collect();
        let other: Arc<[u32]> = (0..60u32).filter(|i| i % 2 == 0).collect();
        let balancers: Vec<Arc<dyn LoadBalance>> = vec![
            Arc::new(RandomBalance),
            Arc::new(LeastActiveBalance::new()),
            Arc::new(ShortestResponseBalance::new()),
            Arc::new(P2cBalance::new()),
        ];
        // What the directory does: patch the previous table, else build from scratch.
        let rebuild = |lb: &dyn LoadBalance,
                       previous: &dyn crate::Picker,
                       endpoints: &[Endpoint],
                       members: &Arc<[u32]>,
                       changed: &[u32]| {
            previous
                .patched(endpoints, members, changed, now)
                .unwrap_or_else(|| lb.prepare(endpoints, members.clone(), now))
        };
        for lb in balancers {
            let name = lb.name().to_string();
            let previous = lb.prepare(&before, members.clone(), now);
            assert!(previous.settled_weights().is_some(), "{name}");
            // New weights for a few endpoints (3 and 10 are not members); same stats.
            let changed = [3u32, 4, 10, 32, 58];
            let mut after = before.clone();
            for &c in &changed {
                after[c as usize].instance = node(c as u16, rng.u32(0..300), false);
            }
            let full = lb.prepare(&after, members.clone(), now);
            assert!(
                previous.patched(&after, &members, &changed, now).is_some(),
                "{name}"
            );
            let patched = rebuild(&*lb, &*previous, &after, &members, &changed);
            assert_eq!(patched.settled_weights(), full.settled_weights(), "{name}");
            assert_ne!(
                patched.settled_weights(),
                previous.settled_weights(),
                "{name}"
            );
            // A previous table for other members: a full build.
            let stranger = lb.prepare(&before, other.clone(), now);
            assert!(
                stranger.patched(&after, &members, &changed, now).is_none(),
                "{name}"
            );
            let from_stranger = rebuild(&*lb, &*stranger, &after, &members, &changed);
            assert_eq!(
                from_stranger.settled_weights(),
                full.settled_weights(),
                "{name}"
            );
            // One changed member starts warming: the patched table warms too, as a full one.
            let mut warming = after.clone();
            warming[32].instance = node(32, 100, true);
            let full_w = lb.prepare(&warming, members.clone(), now);
            let patched_w = rebuild(&*lb, &*patched, &warming, &members, &[32]);
            assert!(full_w.refresh_after().is_some(), "{name}");
            assert_eq!(patched_w.refresh_after(), full_w.refresh_after(), "{name}");
            assert_eq!(patched_w.settled_weights(), None, "{name}");
            // Patched from a warming table: every member is read again (32 is settled again).
            assert!(
                patched_w.patched(&after, &members, &[4], now).is_none(),
                "{name}"
            );
            let patched_again = rebuild(&*lb, &*patched_w, &after, &members, &[4]);
            assert_eq!(
                patched_again.settled_weights(),
                full.settled_weights(),
                "{name}"
            );
        }
    }
}
