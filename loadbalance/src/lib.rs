//! Load balancers.
//!
//! A balancer never scans the instance list on a call. Everything that depends only on the
//! routed instance set (prefix sums, alias tables, rings, schedules) is built by
//! [`LoadBalance::prepare`] when a snapshot is published, off the call path. The resulting
//! [`Picker`] answers [`Picker::pick`] in O(1) or O(log n), without locks or allocation.
//!
//! Per-instance live state ([`InstanceStats`]: in-flight count, latency) lives beside the
//! snapshot in an [`Endpoint`], keyed by address by the directory, so it survives refreshes.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod random;
mod stats;

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use switchman_core::{Instance, Invocation};

pub use random::RandomBalance;
pub use stats::{CallGuard, InstanceStats};

/// An instance with its live statistics, as held by a snapshot.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The instance as parsed from the registry (after overrides).
    pub instance: Arc<Instance>,
    /// Live state, shared across snapshots for the same address.
    pub stats: Arc<InstanceStats>,
}

impl Endpoint {
    /// An endpoint with fresh statistics.
    pub fn new(instance: Arc<Instance>) -> Self {
        Endpoint {
            instance,
            stats: Arc::new(InstanceStats::new()),
        }
    }
}

/// What a pick may look at besides the tables: the invocation (consistent hash reads its
/// arguments) and the endpoints already tried in this call (global indexes).
#[derive(Debug, Clone, Copy)]
pub struct PickContext<'a> {
    /// The call being balanced.
    pub invocation: &'a Invocation,
    /// Global endpoint indexes already tried by this call, in order.
    pub tried: &'a [usize],
}

/// A balancing strategy. Implement it to plug in your own; [`LoadBalance::prepare`] is called
/// once per snapshot and per routed subset, never per call.
pub trait LoadBalance: Send + Sync + fmt::Debug {
    /// Dubbo's name for the strategy (`random`, `roundrobin`, ...).
    fn name(&self) -> &str;

    /// Builds the picker for one routed subset. `members` are indexes into `endpoints`,
    /// ascending. `now` is the wall clock used for warm-up.
    fn prepare(
        &self,
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        now: SystemTime,
    ) -> Box<dyn Picker>;
}

/// The per-subset table a balancer built. `pick` must not allocate, lock or scan.
pub trait Picker: Send + Sync + fmt::Debug {
    /// Picks one member and returns its global endpoint index, or `None` when the subset is
    /// empty. May ignore `ctx.tried`; [`pick_untried`] handles exclusion.
    fn pick(
        &self,
        endpoints: &[Endpoint],
        ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize>;

    /// The members this picker chooses from (global indexes, ascending).
    fn members(&self) -> &[u32];

    /// When the table goes stale by itself (warm-up in progress): the directory rebuilds it
    /// after this long. `None` when it stays valid until the next change.
    fn refresh_after(&self) -> Option<std::time::Duration> {
        None
    }
}

/// How many times [`pick_untried`] asks the balancer again before walking the members.
pub const RESELECT_TRIES: usize = 10;

/// Picks with the balancer but avoids endpoints already tried in this call while untried
/// ones remain (Dubbo's reselect). The balancer is asked up to [`RESELECT_TRIES`] times; if it
/// keeps landing on tried endpoints, the first untried member from a random start is taken.
/// When every member was tried, the balancer's own choice is returned (Dubbo does the same).
pub fn pick_untried(
    picker: &dyn Picker,
    endpoints: &[Endpoint],
    ctx: &PickContext<'_>,
    rng: &mut fastrand::Rng,
) -> Option<usize> {
    let first = picker.pick(endpoints, ctx, rng)?;
    if ctx.tried.is_empty() || !ctx.tried.contains(&first) {
        return Some(first);
    }
    for _ in 1..RESELECT_TRIES {
        let i = picker.pick(endpoints, ctx, rng)?;
        if !ctx.tried.contains(&i) {
            return Some(i);
        }
    }
    let members = picker.members();
    let start = rng.usize(..members.len());
    (0..members.len())
        .map(|k| members[(start + k) % members.len()] as usize)
        .find(|i| !ctx.tried.contains(i))
        .or(Some(first))
}

/// Warm-up weight as Dubbo computes it: for `0 < uptime < warmup`,
/// `max(1, min(weight, uptime / (warmup / weight)))`; otherwise `weight`.
/// `start_ms` is the provider's start time (its `timestamp`), `now_ms` the current time, both in
/// ms since the epoch.
pub fn warmup_weight(weight: u32, warmup_ms: u64, start_ms: u64, now_ms: u64) -> u32 {
    if weight == 0 || warmup_ms == 0 || now_ms <= start_ms {
        return weight;
    }
    let uptime = now_ms - start_ms;
    if uptime >= warmup_ms {
        return weight;
    }
    // Same arithmetic as Dubbo: (int) (uptime / ((float) warmup / weight)).
    let ww = (uptime as f64 / (warmup_ms as f64 / weight as f64)) as u64;
    ww.clamp(1, weight as u64) as u32
}

/// The effective weight of an endpoint at `now`: configured weight, ramped by warm-up from the
/// provider's `timestamp`, or, when it published none, from when the directory first saw it.
pub fn effective_weight(endpoint: &Endpoint, now: SystemTime) -> u32 {
    let inst = &endpoint.instance;
    let now_ms = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let start = inst
        .timestamp_ms()
        .unwrap_or_else(|| endpoint.stats.first_seen_ms());
    warmup_weight(
        inst.weight(),
        inst.warmup().as_millis() as u64,
        start,
        now_ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_matches_dubbo_examples() {
        let w = 10 * 60 * 1000;
        assert_eq!(warmup_weight(100, w, 0, 60_000), 10);
        assert_eq!(warmup_weight(100, w, 0, 300_000), 50);
        assert_eq!(warmup_weight(100, w, 0, 306_000), 51);
        assert_eq!(warmup_weight(100, w, 0, 594_000), 99);
        assert_eq!(warmup_weight(100, w, 0, 1), 1);
        assert_eq!(warmup_weight(100, w, 0, 600_000), 100);
        assert_eq!(
            warmup_weight(100, w, 1_000, 500),
            100,
            "clock skew: start in the future"
        );
        assert_eq!(warmup_weight(0, w, 0, 1), 0);
    }
}
