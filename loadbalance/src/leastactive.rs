//! Dubbo's `leastactive`: the fewest calls in flight, ties broken by weighted random.

use std::sync::Arc;
use std::time::SystemTime;

use crate::scored::{DEFAULT_EXACT_SCAN, Score, ScoredPicker, load};
use crate::{Endpoint, InstanceStats, LoadBalance, Picker};

/// Dubbo's `leastactive`: prefers the member with the fewest in-flight calls
/// ([`InstanceStats::active`]); among equals, weighted random. Unlike Dubbo, recent failures
/// count as load: the score is `(active + 1) × (1 + consecutive failures)`, so an instance
/// that fails fast (and so never has calls in flight) does not attract every call.
///
/// Up to the exact-scan limit (16 members by default) every pick scans the subset exactly as
/// Dubbo does. Larger subsets compare two weighted-random draws (power of two choices, O(1)):
/// the pick is then the less loaded of two candidates rather than the global minimum, which
/// keeps the load spread nearly as even without an O(n) scan and without sending every
/// concurrent caller to the same idle instance. One deliberate difference from Dubbo: a
/// zero-weight member is never picked while another has weight, even if it is the only idle
/// one (Dubbo would pick it). In-flight counts are per instance, across methods, where Dubbo
/// counts per instance and method.
#[derive(Debug, Clone, Copy)]
pub struct LeastActiveBalance {
    exact_scan: usize,
}

impl Default for LeastActiveBalance {
    fn default() -> Self {
        LeastActiveBalance {
            exact_scan: DEFAULT_EXACT_SCAN,
        }
    }
}

impl LeastActiveBalance {
    /// The balancer with the default exact-scan limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Subsets of at most `members` are scanned exactly (capped at
    /// [`MAX_EXACT_SCAN`](crate::MAX_EXACT_SCAN)); 0 always uses two choices.
    pub fn with_exact_scan_limit(mut self, members: usize) -> Self {
        self.exact_scan = members;
        self
    }
}

#[derive(Debug, Clone)]
struct Active;

impl Score for Active {
    type Key = u64;
    const WORST: u64 = u64::MAX;
    const NEEDS_CLOCK: bool = false;
    #[inline]
    fn score(&self, stats: &InstanceStats, _now_ns: u64) -> u64 {
        // (active + 1) × (1 + recent failures): the same order as `active` while nothing
        // fails, but an instance that fails fast (so never has calls in flight) looks busy
        // instead of attracting every call.
        load(stats)
    }
}

impl LoadBalance for LeastActiveBalance {
    fn name(&self) -> &str {
        "leastactive"
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
            self.exact_scan,
            Active,
        ))
    }
}
