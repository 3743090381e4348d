//! Shared table-building pieces: effective (warm-up) weights of a routed subset, and an alias
//! table for O(1) weighted sampling.

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

/// Computes the effective weight of every member at `now` and the time until the next
/// warm-up step (Dubbo's weight grows by one every `warmup / weight`).
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
            let ep = &endpoints[i as usize];
            let w = effective_weight_at_ms(ep, now_ms);
            let full = ep.instance.weight();
            if w < full {
                let warmup_ms = ep.instance.warmup().as_millis() as f64;
                let start = ep
                    .instance
                    .timestamp_ms()
                    .unwrap_or_else(|| ep.stats.first_seen_ms());
                let uptime = now_ms.saturating_sub(start) as f64;
                // Next step when uptime / (warmup / full) reaches w + 1.
                let next = (w as f64 + 1.0) * warmup_ms / full as f64;
                let wait = Duration::from_millis((next - uptime).max(0.0).ceil() as u64);
                let wait = wait.max(MIN_REFRESH);
                refresh = Some(refresh.map_or(wait, |r| r.min(wait)));
            }
            w
        })
        .collect();
    MemberWeights { weights, refresh }
}

/// O(1) weighted sampling over member positions (Vose's alias method with exact integer
/// thresholds). Uniform when all weights are equal or all are zero; a zero-weight position is
/// never returned while another has weight.
#[derive(Debug)]
pub(crate) enum Sampler {
    /// Every position equally likely.
    Uniform(usize),
    /// Column `i` keeps position `i` when `r < threshold`, else goes to `alias`.
    Alias { total: u64, columns: Box<[Column]> },
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    threshold: u64,
    alias: u32,
}

impl Sampler {
    pub(crate) fn new(weights: &[u32]) -> Sampler {
        let n = weights.len();
        let total: u64 = weights.iter().map(|&w| w as u64).sum();
        if total == 0 || weights.windows(2).all(|w| w[0] == w[1]) {
            return Sampler::Uniform(n);
        }
        // Scaled weights s_i = w_i * n against threshold `total`: exact in u64, as members
        // are u32 indexes (n <= 2^32, so w_i * n < 2^64 for any u32 weight).
        debug_assert!(n as u64 <= u32::MAX as u64 + 1);
        let mut scaled: Vec<u64> = weights.iter().map(|&w| w as u64 * n as u64).collect();
        let t = total;
        let mut columns = vec![
            Column {
                threshold: total,
                alias: 0,
            };
            n
        ];
        let mut small: Vec<usize> = Vec::new();
        let mut large: Vec<usize> = Vec::new();
        for (i, &s) in scaled.iter().enumerate() {
            columns[i].alias = i as u32;
            if s < t { small.push(i) } else { large.push(i) }
        }
        while let (Some(&l), Some(&g)) = (small.last(), large.last()) {
            small.pop();
            columns[l] = Column {
                threshold: scaled[l],
                alias: g as u32,
            };
            scaled[g] -= t - scaled[l];
            if scaled[g] < t {
                large.pop();
                small.push(g);
            }
        }
        // Exact arithmetic leaves only full columns (threshold == total) behind.
        Sampler::Alias {
            total,
            columns: columns.into_boxed_slice(),
        }
    }

    /// A member position, or `None` when there are no members.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut fastrand::Rng) -> Option<usize> {
        match self {
            Sampler::Uniform(0) => None,
            Sampler::Uniform(n) => Some(rng.usize(..*n)),
            Sampler::Alias { total, columns } => {
                let i = rng.usize(..columns.len());
                let c = columns[i];
                Some(if rng.u64(..*total) < c.threshold {
                    i
                } else {
                    c.alias as usize
                })
            }
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

    /// The exact probability the table gives each position, from its columns.
    fn exact_shares(s: &Sampler, n: usize) -> Vec<f64> {
        match s {
            Sampler::Uniform(n) => vec![1.0 / *n as f64; *n],
            Sampler::Alias { total, columns } => {
                let mut p = vec![0.0; n];
                for (i, c) in columns.iter().enumerate() {
                    let keep = c.threshold as f64 / *total as f64;
                    p[i] += keep / n as f64;
                    p[c.alias as usize] += (1.0 - keep) / n as f64;
                }
                p
            }
        }
    }

    #[test]
    fn alias_table_reproduces_weights_exactly() {
        for weights in [
            vec![5u32, 1, 1],
            vec![0, 3, 0, 1],
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 1000],
            vec![u32::MAX, 1, 7],
        ] {
            let s = Sampler::new(&weights);
            let total: f64 = weights.iter().map(|&w| w as f64).sum();
            for (i, p) in exact_shares(&s, weights.len()).into_iter().enumerate() {
                let want = weights[i] as f64 / total;
                assert!((p - want).abs() < 1e-9, "{weights:?} [{i}]: {p} vs {want}");
            }
        }
    }

    #[test]
    fn zero_weights_never_sampled_and_all_zero_is_uniform() {
        let s = Sampler::new(&[0, 0, 9, 0]);
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..1000 {
            assert_eq!(s.sample(&mut rng), Some(2));
        }
        assert!(matches!(Sampler::new(&[0, 0]), Sampler::Uniform(2)));
        assert_eq!(Sampler::new(&[]).sample(&mut rng), None);
    }
}
