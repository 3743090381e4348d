//! The paced load loop and what it records: calls, gaps, percentiles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchman_core::ErrorKind;
use tokio::task::JoinHandle;

use switchman_cluster::ClusterInvoker;

use super::*;

// ---------------------------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------------------------

/// One call made by the load loop.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord {
    /// When the call started.
    pub start: Instant,
    /// When it returned.
    pub end: Instant,
    /// `None` when it succeeded, else the error's kind.
    pub error: Option<ErrorKind>,
    /// The caller's task: with [`CountingInvoker::attempts_of`], the call's own attempts (a
    /// call's attempts, hedges and forks included, run on its task).
    pub task: Option<tokio::task::Id>,
}

impl CallRecord {
    /// Whether the call succeeded.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// How long the call took.
    pub fn latency(&self) -> Duration {
        self.end.saturating_duration_since(self.start)
    }
}

/// Steady load: `callers` tasks, each calling [`METHOD`] through the cluster invoker and then
/// sleeping `pace`, until stopped (or until each made its share of a fixed number of calls).
#[derive(Debug)]
pub struct Load {
    started: Instant,
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    callers: Vec<JoinHandle<Vec<CallRecord>>>,
}

impl Load {
    /// Starts the callers; they run until [`Load::stop`].
    pub fn start(cluster: ClusterInvoker, callers: usize, pace: Duration) -> Load {
        Self::spawn(cluster, callers, pace, None)
    }

    /// Makes exactly `calls` calls (split over `callers`) and returns them.
    pub async fn run(
        cluster: ClusterInvoker,
        callers: usize,
        pace: Duration,
        calls: usize,
    ) -> Calls {
        Self::spawn(cluster, callers, pace, Some(calls))
            .finish()
            .await
    }

    fn spawn(
        cluster: ClusterInvoker,
        callers: usize,
        pace: Duration,
        total: Option<usize>,
    ) -> Load {
        let callers = callers.max(1);
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let handles = (0..callers)
            .map(|k| {
                let limit = total.map(|t| t / callers + usize::from(k < t % callers));
                let (cluster, stop, ok, failed) =
                    (cluster.clone(), stop.clone(), ok.clone(), failed.clone());
                tokio::spawn(async move {
                    // Spread the callers over the pace interval.
                    if k > 0 && !pace.is_zero() {
                        tokio::time::sleep(pace * k as u32 / callers as u32).await;
                    }
                    let invocation = Invocation::new(METHOD);
                    let task = tokio::task::try_id();
                    let mut out = Vec::with_capacity(limit.unwrap_or(4096));
                    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| out.len() < l) {
                        let start = Instant::now();
                        let result = cluster.invoke(&invocation).await;
                        let end = Instant::now();
                        let error = match result {
                            Ok(_) => {
                                ok.fetch_add(1, Ordering::Relaxed);
                                None
                            }
                            Err(e) => {
                                if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                                    eprintln!("chaos: call failed: {e}");
                                }
                                Some(e.kind())
                            }
                        };
                        out.push(CallRecord {
                            start,
                            end,
                            error,
                            task,
                        });
                        if !pace.is_zero() {
                            tokio::time::sleep(pace).await;
                        }
                    }
                    out
                })
            })
            .collect();
        Load {
            started: Instant::now(),
            stop,
            ok,
            failed,
            callers: handles,
        }
    }

    /// Successful calls so far.
    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Failed calls so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Waits until `more` calls have succeeded after now.
    ///
    /// # Panics
    /// When they do not within `within`, naming `what`.
    pub async fn wait_for_ok(&self, more: u64, within: Duration, what: &str) {
        let target = self.ok() + more;
        let waited = tokio::time::timeout(within, async {
            while self.ok() < target {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "{what}: {more} more successful calls expected within {within:?}, got {} (failed so far: {})",
            self.ok() + more - target,
            self.failed()
        );
    }

    /// Stops the callers and returns every call they made.
    pub async fn stop(self) -> Calls {
        self.stop.store(true, Ordering::Relaxed);
        self.finish().await
    }

    async fn finish(self) -> Calls {
        let mut records = Vec::new();
        for h in self.callers {
            records.extend(h.await.expect("a load caller panicked"));
        }
        records.sort_by_key(|r| r.start);
        Calls {
            started: self.started,
            stopped: Instant::now(),
            records,
        }
    }
}

/// The calls a [`Load`] made, sorted by start.
#[derive(Debug, Clone)]
pub struct Calls {
    /// When the load started.
    pub started: Instant,
    /// When it stopped.
    pub stopped: Instant,
    /// Every call.
    pub records: Vec<CallRecord>,
}

impl Calls {
    /// Calls made.
    pub fn count(&self) -> u64 {
        self.records.len() as u64
    }

    /// Calls that failed.
    pub fn failed(&self) -> u64 {
        self.records.iter().filter(|r| !r.ok()).count() as u64
    }

    /// Successful calls in percent (100 when no call was made).
    pub fn success_pct(&self) -> f64 {
        success_pct(self.count(), self.failed())
    }

    /// How long the load ran.
    pub fn elapsed(&self) -> Duration {
        self.stopped.saturating_duration_since(self.started)
    }

    /// The longest time a caller of the service waited for a success: the longest interval
    /// between two consecutive successful completions (from the load's start to the first and
    /// from the last to the stop included).
    pub fn max_success_gap(&self) -> Duration {
        let mut ends: Vec<Instant> = self
            .records
            .iter()
            .filter(|r| r.ok())
            .map(|r| r.end)
            .collect();
        ends.sort();
        let mut last = self.started;
        let mut gap = Duration::ZERO;
        for e in ends.into_iter().chain(std::iter::once(self.stopped)) {
            gap = gap.max(e.saturating_duration_since(last));
            last = last.max(e);
        }
        gap
    }

    /// When the first successful call that started at or after `t` returned.
    pub fn first_success_after(&self, t: Instant) -> Option<Instant> {
        self.records
            .iter()
            .filter(|r| r.ok() && r.start >= t)
            .map(|r| r.end)
            .min()
    }

    /// The calls that started in `[from, to)`.
    pub fn started_between(&self, from: Instant, to: Instant) -> Vec<CallRecord> {
        self.records
            .iter()
            .filter(|r| r.start >= from && r.start < to)
            .copied()
            .collect()
    }

    /// The latency of every call (successful or not).
    pub fn latencies(&self) -> Vec<Duration> {
        self.records.iter().map(CallRecord::latency).collect()
    }

    /// Failures counted by error kind (`"no provider" => 12`).
    pub fn failures_by_kind(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for kind in self.records.iter().filter_map(|r| r.error) {
            *m.entry(kind.to_string()).or_insert(0) += 1;
        }
        m
    }
}

pub(super) fn success_pct(calls: u64, failed: u64) -> f64 {
    if calls == 0 {
        100.0
    } else {
        100.0 * (calls - failed) as f64 / calls as f64
    }
}

/// The `q`-quantile (0..=1) of `samples` by nearest rank (zero for no sample).
pub fn percentile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut s = samples.to_vec();
    s.sort();
    let rank = (q.clamp(0.0, 1.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// A duration as whole milliseconds below 10 s (`12ms`), else seconds (`12.3s`), sub-ms with
/// one decimal (`0.4ms`).
pub fn ms(d: Duration) -> String {
    let m = d.as_secs_f64() * 1000.0;
    if m < 1.0 {
        format!("{m:.1}ms")
    } else if m < 10_000.0 {
        format!("{m:.0}ms")
    } else {
        format!("{:.1}s", m / 1000.0)
    }
}
