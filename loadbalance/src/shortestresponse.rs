//! Dubbo's `shortestresponse`: the lowest expected wait, ties broken by weighted random.

use std::sync::Arc;
use std::time::SystemTime;

use crate::scored::{DEFAULT_EXACT_SCAN, Score, ScoredPicker};
use crate::{Endpoint, InstanceStats, LoadBalance, Picker};

/// Dubbo's `shortestresponse`: prefers the member with the lowest
/// `average successful response time × (active + 1)`; among equals, weighted random.
///
/// The average covers the calls that succeeded in a sliding window (30 s by default, set per
/// instance with [`InstanceStats::with_response_window`]); a member with no success in the
/// window scores 0, as in Dubbo, so new and recovered members get probed — unless its latest
/// calls failed: then it scores above every member that answers (Dubbo would rate a member that
/// fails fast as the quickest). Consecutive failures also multiply the expected wait
/// (`× (1 + failures)`), as they count as load in `leastactive`. The window slides in
/// two halves, where Dubbo resets its counters every 30 s. Subsets up to the exact-scan limit
/// (16 by default) are scanned exactly like Dubbo; larger ones compare two weighted-random
/// draws (power of two choices, O(1)). A zero-weight member is never picked while another has
/// weight.
///
/// Averages are kept in microseconds, where Dubbo's are whole milliseconds (each elapsed time
/// comes from `System.currentTimeMillis`, and the average is an integer division): in Dubbo,
/// instances answering in 0.3 ms and 0.7 ms both estimate 0 and tie, so the balancer falls
/// back to weighted random exactly where it matters for fast services; here the 0.3 ms
/// instance wins, until its in-flight count makes its expected wait the longer one. Equal
/// averages (to the microsecond) tie and are broken by weight, as in Dubbo.
#[derive(Debug, Clone, Copy)]
pub struct ShortestResponseBalance {
    exact_scan: usize,
}

impl Default for ShortestResponseBalance {
    fn default() -> Self {
        ShortestResponseBalance {
            exact_scan: DEFAULT_EXACT_SCAN,
        }
    }
}

impl ShortestResponseBalance {
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

/// The score of a member whose calls in the window all failed (per consecutive failure): above
/// any real expected wait (µs × in-flight), so it is picked only when every member fails.
const NO_SUCCESS_FAILING: f64 = 1e15;

#[derive(Debug, Clone)]
struct ExpectedWait;

impl Score for ExpectedWait {
    type Key = f64;
    const WORST: f64 = f64::INFINITY;
    const NEEDS_CLOCK: bool = true;
    #[inline]
    fn score(&self, stats: &InstanceStats, now_ns: u64) -> f64 {
        let failures = f64::from(stats.consecutive_failures());
        match stats.window_average_at(now_ns) {
            Some(avg) => avg as f64 * (stats.active() as f64 + 1.0) * (1.0 + failures),
            // Never answered in the window: probe it (Dubbo) unless its latest calls failed.
            None if failures == 0.0 => 0.0,
            None => NO_SUCCESS_FAILING * failures,
        }
    }
}

impl LoadBalance for ShortestResponseBalance {
    fn name(&self) -> &str {
        "shortestresponse"
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
            ExpectedWait,
        ))
    }
}
