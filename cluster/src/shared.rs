//! What every call of one service shares: the directory and the plan built from it, the
//! transport, the retry budget, metrics, the sticky instance, outlier ejection's count and the
//! `actives` room. Strategies and attempts reach it through their [`Call`](crate::Call); it
//! knows nothing of either.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use serde_json::Value;
use switchman_core::{Instance, Invoker, Result, Tick};
use switchman_discovery::{Directory, Snapshot};
use switchman_loadbalance::outlier::{Outcome, Verdict};
use switchman_loadbalance::{EjectionCount, OutlierConfig};
use tracing::{debug, info};

use crate::budget::RetryBudget;
use crate::config::MergerFn;
use crate::plan::{Plan, Planner};
use crate::readiness::Room;
use crate::telemetry::Metrics;

/// Successful-latency histogram with power-of-two microsecond buckets (lock-free), for the
/// hedging policy's observed p95.
pub(crate) struct Latency {
    buckets: [AtomicU64; 40],
}

impl Latency {
    pub(crate) fn new() -> Self {
        Latency {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn record(&self, d: Duration) {
        let us = d.as_micros().max(1) as u64;
        let b = (64 - us.leading_zeros() as usize).min(39);
        self.buckets[b].fetch_add(1, Ordering::Relaxed);
    }

    /// The upper bound of the bucket holding the 95th percentile; `None` under 20 samples.
    pub(crate) fn p95(&self) -> Option<Duration> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total < 20 {
            return None;
        }
        let want = (total as f64 * 0.95).ceil() as u64;
        let mut seen = 0;
        for (b, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some(Duration::from_micros(1u64 << b));
            }
        }
        None
    }
}

pub(crate) struct Shared {
    pub(crate) directory: Arc<dyn Directory>,
    pub(crate) invoker: Arc<dyn Invoker>,
    /// The consumer's settings and the plan of the newest snapshot.
    pub(crate) planner: Planner,
    pub(crate) budget: Option<RetryBudget>,
    pub(crate) metrics: Metrics,
    pub(crate) latency: Latency,
    /// The sticky instance (the last one selected while `sticky` is on).
    pub(crate) sticky: ArcSwapOption<Instance>,
    pub(crate) merger: Option<MergerFn>,
    pub(crate) failback_pending: AtomicUsize,
    pub(crate) outlier: OutlierConfig,
    /// Endpoints out of rotation, for the max-ejection-percent guard: two strikes at once
    /// cannot both pass it, without a lock.
    pub(crate) ejected: EjectionCount,
    /// Attempts in flight to endpoints with an `actives` cap, for `poll_ready`.
    pub(crate) room: Room,
    pub(crate) this: Weak<Shared>,
}

impl Shared {
    /// The plan of the directory's current snapshot (built now when the snapshot is new).
    #[inline]
    pub(crate) fn plan(&self) -> Plan {
        self.planner.current(&*self.directory)
    }

    /// The plan a call starts with, and the `APPLICATION_FIRST` fallback it may still move to
    /// (see [`switchman_discovery::migration`]): with a fallback, `100 - proportion` percent
    /// of calls (one draw each) and every call while the directory's snapshot has no endpoint
    /// start on the fallback's plan; the others start on the directory's and may fall back.
    #[inline]
    pub(crate) fn plan_for_call(&self) -> (Plan, Option<Arc<Snapshot>>) {
        let plan = self.plan();
        let Some(f) = self.directory.fallback() else {
            return (plan, None);
        };
        let draw = f.proportion < 100 && fastrand::u8(..100) >= f.proportion;
        if draw || plan.snapshot().endpoints().is_empty() {
            return (self.planner.fallback(f.snapshot), None);
        }
        (plan, Some(f.snapshot))
    }

    /// The plan of the fallback's current snapshot, if there still is a fallback.
    pub(crate) fn fallback_plan(&self) -> Option<Plan> {
        let f = self.directory.fallback()?;
        Some(self.planner.fallback(f.snapshot))
    }

    /// Whether a call can be placed within the service's `actives` caps: always, unless
    /// every endpoint has a cap and this invoker's attempts in flight fill their sum.
    pub(crate) fn has_room(&self) -> bool {
        // Nothing counted in flight (always so without caps): every cap (at least 1) has room,
        // without resolving settings.
        let in_flight = self.room.in_flight() as u64;
        if in_flight == 0 {
            return true;
        }
        match self.plan().capacity() {
            Some(cap) => in_flight < cap,
            None => true,
        }
    }

    /// The sticky instance, if any.
    pub(crate) fn sticky(&self) -> Option<Arc<Instance>> {
        self.sticky.load_full()
    }

    /// Makes `instance` the sticky one (a reference-count increment; nothing is stored when it
    /// already is).
    pub(crate) fn remember_sticky(&self, instance: &Arc<Instance>) {
        let current = self.sticky.load();
        if current.as_deref().map(Instance::key) != Some(instance.key()) {
            self.sticky.store(Some(instance.clone()));
        }
    }

    /// Forgets the sticky instance (it is not among the routed candidates any more).
    pub(crate) fn forget_sticky(&self) {
        if self.sticky.load().is_some() {
            self.sticky.store(None);
        }
    }

    /// Feeds the outcome of an attempt on endpoint `i` of `snap` (started at `started`) to the
    /// instance's outlier state, and acts on the verdict: ejects (if the max-ejection-percent
    /// guard allows), logs and counts. The common case is a few atomic operations.
    pub(crate) fn record_outlier(
        &self,
        snap: &Snapshot,
        i: usize,
        result: &Result<Value>,
        started: Tick,
        ended: Tick,
    ) {
        let cfg = &self.outlier;
        if !cfg.enabled {
            return;
        }
        let outcome = match result {
            Ok(_) => Outcome::Success,
            Err(e) if e.is_business() => Outcome::Success,
            Err(e) if e.counts_as_strike() => Outcome::Strike,
            Err(_) => Outcome::Neutral,
        };
        let ep = &snap.endpoints()[i];
        let state = ep.stats.outlier();
        let address = ep.instance.address();
        match ep.stats.record_outlier(outcome, started, ended, cfg) {
            Verdict::Stay => {}
            Verdict::ShouldEject(reason) => {
                let routable = snap.endpoints().len();
                let snapshot = snap.id();
                // One compare-and-swap on the service's ejection count (a scan only at the
                // first decision of a snapshot): no lock and no scan per strike, even
                // when the whole fleet fails.
                let ejected = match self
                    .ejected
                    .try_reserve(snapshot, routable, cfg, || ejected_count(snap))
                {
                    Ok(before) => before,
                    Err(ejected) => {
                        debug!(service = %snap.service(), address, %reason, ejected, routable,
                                max_percent = cfg.max_ejection_percent,
                                "outlier not ejected: the max-ejection-percent guard is reached");
                        return;
                    }
                };
                let Some(penalty) = state.eject(ended, cfg) else {
                    // Another caller ejected it first (and counted it).
                    self.ejected.release(snapshot);
                    return;
                };
                self.metrics.outlier_ejections.increment(1);
                self.metrics.outlier_ejected.set((ejected + 1) as f64);
                info!(service = %snap.service(), address, %reason, ?penalty,
                    ejections = state.ejections(), "outlier ejected");
            }
            Verdict::Reejected(penalty) => {
                self.metrics.outlier_ejections.increment(1);
                info!(service = %snap.service(), address, reason = "probe failed", ?penalty,
                    ejections = state.ejections(), "outlier ejected again");
            }
            Verdict::Readmitted => {
                self.ejected.release(snap.id());
                if let Some(n) = self.ejected.get(snap.id()) {
                    self.metrics.outlier_ejected.set(n as f64);
                }
                info!(service = %snap.service(), address, "outlier readmitted after a successful call");
            }
        }
    }
}

/// Instances of `snap` out of rotation (a scan; only on ejection decisions).
fn ejected_count(snap: &Snapshot) -> usize {
    snap.endpoints()
        .iter()
        .filter(|e| e.stats.outlier().is_ejected())
        .count()
}
