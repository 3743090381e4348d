//! Load balancers: Dubbo's six strategies with O(1) or O(log n) picks.
//!
//! Dubbo's balancers scan every instance on every call. A Switchman balancer never does:
//! everything that depends only on the routed instance set (alias tables, rings, round-robin
//! schedules, effective weights) is built by [`LoadBalance::prepare`] when a snapshot is
//! published, off the call path. The resulting [`Picker`] answers [`Picker::pick`] in O(1) or
//! O(log n), without locks or allocation.
//!
//! | name | type | pick |
//! |---|---|---|
//! | `random` | [`RandomBalance`] | weighted random, alias table, O(1) |
//! | `roundrobin` | [`RoundRobinBalance`] | Dubbo's smooth weighted sequence, precomputed, O(1) |
//! | `leastactive` | [`LeastActiveBalance`] | fewest in flight; exact scan ≤ 16 members, else two choices |
//! | `shortestresponse` | [`ShortestResponseBalance`] | lowest window average × (active + 1); same |
//! | `consistenthash` | [`ConsistentHashBalance`] | Dubbo's MD5 ring, O(log n) |
//! | `p2c`, `adaptive` | [`P2cBalance`] | two choices over peak-EWMA × (in-flight + 1) |
//!
//! [`balancer_by_name`] (or [`BalancerKind`]) turns a Dubbo `loadbalance` value into one.
//!
//! Per-instance live state ([`InstanceStats`]: in-flight count, latency) lives beside the
//! snapshot in an [`Endpoint`], keyed by address by the directory, so it survives refreshes.
//! So does its [`outlier`] ejection state, which the cluster layer consults before a pick.
//!
//! Every weighted balancer reads [`effective_weight`]: Dubbo's warm-up ramp, from the provider's
//! `timestamp` or, when it published none, from the time the directory first saw it. While
//! any member warms up, [`Picker::refresh_after`] says when its weight next steps up, so the
//! directory rebuilds the table then.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod consistenthash;
mod leastactive;
pub mod outlier;
mod p2c;
mod random;
mod roundrobin;
mod scored;
mod shortestresponse;
mod stats;
mod weights;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use switchman_core::{Error, Instance, Invocation, Invoker};

pub use consistenthash::{
    ConsistentHashBalance, DEFAULT_HASH_NODES, MAX_HASH_NODES, MAX_RING_POINTS, key_point,
    ring_points,
};
pub use leastactive::LeastActiveBalance;
pub use outlier::{EjectionCount, OutlierConfig, OutlierState};
pub use p2c::{DEFAULT_RTT, P2cBalance};
pub use random::RandomBalance;
pub use roundrobin::{DEFAULT_SCHEDULE_LIMIT, RoundRobinBalance};
pub use scored::{DEFAULT_EXACT_SCAN, MAX_EXACT_SCAN};
pub use shortestresponse::ShortestResponseBalance;
pub use stats::{
    CallGuard, DEFAULT_RESPONSE_WINDOW, FAILURE_PENALTY, InstanceStats, PEAK_EWMA_DECAY,
};

/// The built-in balancers, by Dubbo name. Parse a `loadbalance` value once with
/// [`FromStr`], then [`BalancerKind::build`] it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BalancerKind {
    /// `random` (Dubbo's default).
    Random,
    /// `roundrobin`.
    RoundRobin,
    /// `leastactive`.
    LeastActive,
    /// `shortestresponse`.
    ShortestResponse,
    /// `consistenthash` (default `hash.nodes` and `hash.arguments`).
    ConsistentHash,
    /// `p2c`, alias `adaptive`.
    P2c,
}

impl BalancerKind {
    /// Every accepted name, aliases included.
    pub const NAMES: &'static [&'static str] = &[
        "random",
        "roundrobin",
        "leastactive",
        "shortestresponse",
        "consistenthash",
        "p2c",
        "adaptive",
    ];

    /// The canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            BalancerKind::Random => "random",
            BalancerKind::RoundRobin => "roundrobin",
            BalancerKind::LeastActive => "leastactive",
            BalancerKind::ShortestResponse => "shortestresponse",
            BalancerKind::ConsistentHash => "consistenthash",
            BalancerKind::P2c => "p2c",
        }
    }

    /// A balancer of this kind with default settings.
    pub fn build(self) -> Arc<dyn LoadBalance> {
        match self {
            BalancerKind::Random => Arc::new(RandomBalance),
            BalancerKind::RoundRobin => Arc::new(RoundRobinBalance::new()),
            BalancerKind::LeastActive => Arc::new(LeastActiveBalance::new()),
            BalancerKind::ShortestResponse => Arc::new(ShortestResponseBalance::new()),
            BalancerKind::ConsistentHash => Arc::new(ConsistentHashBalance::default()),
            BalancerKind::P2c => Arc::new(P2cBalance::new()),
        }
    }
}

impl fmt::Display for BalancerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BalancerKind {
    type Err = Error;

    /// Case-insensitive; surrounding blanks are ignored.
    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "random" => BalancerKind::Random,
            "roundrobin" => BalancerKind::RoundRobin,
            "leastactive" => BalancerKind::LeastActive,
            "shortestresponse" => BalancerKind::ShortestResponse,
            "consistenthash" => BalancerKind::ConsistentHash,
            "p2c" | "adaptive" => BalancerKind::P2c,
            _ => {
                return Err(Error::bad_config(format!(
                    "unknown load balancer {s:?}; valid names: {}",
                    BalancerKind::NAMES.join(", ")
                )));
            }
        })
    }
}

/// The balancer a Dubbo `loadbalance` value names, with default settings. An unknown name is a
/// [`BadConfig`](switchman_core::ErrorKind::BadConfig) error naming it and listing the valid
/// names.
pub fn balancer_by_name(name: &str) -> Result<Arc<dyn LoadBalance>, Error> {
    name.parse::<BalancerKind>().map(BalancerKind::build)
}

/// An instance with its live statistics, as held by a snapshot.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The instance as parsed from the registry (after overrides).
    pub instance: Arc<Instance>,
    /// Live state, shared across snapshots for the same address.
    pub stats: Arc<InstanceStats>,
    /// The endpoint's own client, made once by the directory's maker
    /// ([`switchman_core::MakeEndpoint`]) and kept across snapshots while the endpoint stays;
    /// `None` when the directory has no maker (the cluster's shared transport is used).
    pub service: Option<Arc<dyn Invoker>>,
}

impl Endpoint {
    /// An endpoint with fresh statistics and no client of its own.
    pub fn new(instance: Arc<Instance>) -> Self {
        Endpoint {
            instance,
            stats: Arc::new(InstanceStats::new()),
            service: None,
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
    /// empty. May ignore `ctx.tried`; [`pick_untried`] handles exclusion. `endpoints` are
    /// those the picker was prepared (or patched) over; a picker may keep what it reads of
    /// them per pick (the exact scan keeps its members' statistics).
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

    /// The effective weights the table was built from, in member order, when none of them
    /// changes by itself (no member warming up). `None` (the default) when the table keeps
    /// none or some member warms.
    fn settled_weights(&self) -> Option<&[u32]> {
        None
    }

    /// This table after a change of weights only, for `members` (the same list it was built
    /// for) where only the endpoints in `changed` (global indexes, ascending; members or not)
    /// differ, in weight, warm-up or start time. The directory asks the previous table of the
    /// same balancer before calling [`LoadBalance::prepare`]: the built-in weighted tables
    /// start from their settled weights and read only the changed endpoints instead of every
    /// member's instance and statistics (at 100k members, most of a 1% weight change's cost).
    /// `None` (the default) when it cannot: other members, a member warming up, or a table
    /// that does not keep its weights.
    fn patched(
        &self,
        endpoints: &[Endpoint],
        members: &Arc<[u32]>,
        changed: &[u32],
        now: SystemTime,
    ) -> Option<Box<dyn Picker>> {
        let _ = (endpoints, members, changed, now);
        None
    }

    /// The pick for a retry whose first choice was already tried: what this balancer would
    /// choose among the untried members (Dubbo's reselect runs the balancer over them), or
    /// `None` to leave it to [`pick_untried`]'s generic reselect (ask again, then walk the
    /// members). Called only when `ctx.tried` holds the first choice; must not allocate.
    fn pick_untried(
        &self,
        _endpoints: &[Endpoint],
        _ctx: &PickContext<'_>,
        _rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        None
    }
}

/// How many times [`pick_untried`] asks the balancer again before walking the members.
pub const RESELECT_TRIES: usize = 10;

/// Picks with the balancer but avoids endpoints already tried in this call while untried
/// ones remain (Dubbo's reselect). When the first choice was tried, a balancer with its own
/// answer for the untried members ([`Picker::pick_untried`]: `consistenthash` takes the key's
/// successor on the ring) gives it; otherwise the balancer is asked up to [`RESELECT_TRIES`]
/// times, and if it keeps landing on tried endpoints, the first untried member from a random
/// start is taken. When every member was tried, the balancer's own choice is returned (Dubbo
/// does the same).
#[inline]
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
    reselect(picker, endpoints, ctx, rng, first)
}

/// [`pick_untried`] once the balancer's first choice was tried.
#[inline(never)]
fn reselect(
    picker: &dyn Picker,
    endpoints: &[Endpoint],
    ctx: &PickContext<'_>,
    rng: &mut fastrand::Rng,
    first: usize,
) -> Option<usize> {
    if let Some(i) = picker.pick_untried(endpoints, ctx, rng) {
        return Some(i);
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

/// Warm-up weight as Dubbo computes it: for `uptime < warmup`,
/// `max(1, min(weight, uptime / (warmup / weight)))`; otherwise `weight`. Unlike Dubbo, an
/// uptime of exactly 0 ms counts as warming (weight 1), not as warm: otherwise two instances
/// seen a millisecond apart would get weights 100 and 1. A start in the future (the
/// provider's clock is ahead) gives weight 1, as in Dubbo (`uptime < 0`), while it is less
/// than one warm-up window ahead; a clock further off gives the full weight instead of
/// Dubbo's weight 1 until the clocks meet.
/// `start_ms` is the provider's start time (its `timestamp`), `now_ms` the current time, both in
/// ms since the epoch.
pub fn warmup_weight(weight: u32, warmup_ms: u64, start_ms: u64, now_ms: u64) -> u32 {
    if weight == 0 || warmup_ms == 0 {
        return weight;
    }
    if now_ms < start_ms {
        return if start_ms - now_ms <= warmup_ms {
            1
        } else {
            weight
        };
    }
    let uptime = now_ms - start_ms;
    if uptime >= warmup_ms {
        return weight;
    }
    // Dubbo's arithmetic, in float as Java does it: (int) (uptime / ((float) warmup / weight)).
    let ww = (uptime as f32 / (warmup_ms as f32 / weight as f32)) as u64;
    ww.clamp(1, weight as u64) as u32
}

/// The effective weight of an endpoint at `now`: configured weight, ramped by warm-up from the
/// provider's `timestamp`, or, when it published none, from when the directory first saw it.
pub fn effective_weight(endpoint: &Endpoint, now: SystemTime) -> u32 {
    let now_ms = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    effective_weight_at_ms(endpoint, now_ms)
}

/// [`effective_weight`] at `now_ms` (milliseconds since the epoch), for table builders that
/// read the clock once for many endpoints.
pub(crate) fn effective_weight_at_ms(endpoint: &Endpoint, now_ms: u64) -> u32 {
    let inst = &endpoint.instance;
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

/// One warm endpoint per weight (`10.0.0.1`, ports from 1000), for the pickers' unit tests.
#[cfg(test)]
pub(crate) fn test_endpoints(weights: &[u32]) -> Vec<Endpoint> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let inst = Instance::builder("10.0.0.1", 1000 + i as u16)
                .weight(w)
                .timestamp_ms(0)
                .build();
            Endpoint::new(Arc::new(inst))
        })
        .collect()
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
        assert_eq!(
            warmup_weight(100, w, 5, 5),
            1,
            "just seen: warming, like 1 ms later"
        );
        assert_eq!(warmup_weight(100, w, 0, 600_000), 100);
        assert_eq!(
            warmup_weight(100, w, 1_000, 500),
            1,
            "clock skew: a start in the future weighs 1, as in Dubbo"
        );
        assert_eq!(
            warmup_weight(100, w, 2 * w, 0),
            100,
            "a clock more than a warm-up window ahead: full weight"
        );
        // Java computes in float: 209009 / (600000f / 333) is 116.0 in f32 (115.99... in f64).
        assert_eq!(warmup_weight(333, w, 0, 209_009), 116);
        assert_eq!(warmup_weight(0, w, 0, 1), 0);
    }
}

#[cfg(test)]
mod factory_tests {
    use super::*;
    use switchman_core::ErrorKind;

    #[test]
    fn names_resolve_and_aliases_share_a_kind() {
        for &name in BalancerKind::NAMES {
            let b = balancer_by_name(name).unwrap();
            let expected = if name == "adaptive" { "p2c" } else { name };
            assert_eq!(b.name(), expected);
        }
        assert_eq!(
            " RoundRobin ".parse::<BalancerKind>().unwrap(),
            BalancerKind::RoundRobin
        );
    }

    #[test]
    fn unknown_name_is_bad_config_listing_valid_names() {
        let e = balancer_by_name("fastest").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
        let msg = e.to_string();
        assert!(msg.contains("\"fastest\""), "{msg}");
        for name in BalancerKind::NAMES {
            assert!(msg.contains(name), "{msg}");
        }
    }
}
