//! Live per-instance state: in-flight count, a peak-EWMA latency estimate, a sliding window of
//! successful response times, and failure counters.
//!
//! Everything is a handful of atomics updated when a call ends and read (never written) by
//! pickers. Updates that race may lose a sample under contention; that is the price of staying
//! lock-free and is irrelevant to balancing, which only needs estimates.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::outlier::OutlierState;

/// Default length of the response-time window read by `shortestresponse` (Dubbo's
/// `slidePeriod`, 30 s).
pub const DEFAULT_RESPONSE_WINDOW: Duration = Duration::from_secs(30);

/// Decay time constant of the peak-EWMA latency estimate (as in linkerd and finagle: 10 s).
pub const PEAK_EWMA_DECAY: Duration = Duration::from_secs(10);

/// A failed call (not served) counts as a latency sample of at least this much, so that an
/// instance failing fast does not look fast to `p2c`.
pub const FAILURE_PENALTY: Duration = Duration::from_secs(1);

/// The monotonic origin all stats timestamps are measured from (ns since then).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn nanos_since_origin(at: Instant) -> u64 {
    at.checked_duration_since(origin())
        .map(|d| d.as_nanos().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

/// The latest time any call was recorded or any table built (ns since the origin): the clock
/// pickers read, so that a pick costs an atomic load rather than a clock read. It only lags
/// real time while nothing completes and nothing is rebuilt, when nothing it times changes.
static COARSE_NOW_NS: AtomicU64 = AtomicU64::new(0);

/// Advances the coarse clock to `at` (ns since the origin); cheap when it is already there.
fn advance_coarse(at_ns: u64) {
    // One write per millisecond at most: keeps the shared cache line mostly read-only.
    if at_ns > COARSE_NOW_NS.load(Ordering::Relaxed) + 1_000_000 {
        COARSE_NOW_NS.fetch_max(at_ns, Ordering::Relaxed);
    }
}

/// Reads the real clock into the coarse clock (table builds call it).
pub(crate) fn tick_coarse_clock() {
    advance_coarse(nanos_since_origin(Instant::now()));
}

/// The coarse clock (see [`COARSE_NOW_NS`]).
#[inline]
pub(crate) fn coarse_now_ns() -> u64 {
    COARSE_NOW_NS.load(Ordering::Relaxed)
}

/// One half of the response window: successful calls ended during one epoch.
#[derive(Debug, Default)]
#[repr(C)]
struct Bucket {
    epoch: AtomicU64,
    count: AtomicU64,
    sum_us: AtomicU64,
}

/// Live per-instance state shared by every snapshot that holds the same address.
///
/// Laid out for pickers: what `leastactive` and `p2c` read sits in the first cache line, the
/// response window of `shortestresponse` right after it, counters for humans last.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct InstanceStats {
    active: AtomicU32,
    consecutive_failures: AtomicU32,
    /// `ln(ewma_ns) + ewma_at_ns / decay`, as f64 bits (NaN before the first sample): comparing
    /// two of these compares the decayed estimates at any common instant, without reading the
    /// clock or calling `exp`.
    ewma_key: AtomicU64,
    /// Length of one bucket (half the window) in ns.
    bucket_ns: u64,
    buckets: [Bucket; 2],
    /// Peak-EWMA latency estimate in ns, as f64 bits; 0 when no sample yet.
    ewma_ns: AtomicU64,
    /// When `ewma_ns` was last updated (ns since the stats origin).
    ewma_at_ns: AtomicU64,
    first_seen_ms: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    outlier: OutlierState,
}

impl Default for InstanceStats {
    fn default() -> Self {
        Self::new()
    }
}

impl InstanceStats {
    /// Fresh state; "first seen" is now; the response window is
    /// [`DEFAULT_RESPONSE_WINDOW`].
    pub fn new() -> Self {
        Self::with_response_window(DEFAULT_RESPONSE_WINDOW)
    }

    /// Fresh state with another response-time window (Dubbo's `shortestresponse.slidePeriod`).
    /// The window slides in two halves: the average covers between half and all of it.
    pub fn with_response_window(window: Duration) -> Self {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let bucket_ns = (window.as_nanos() / 2).clamp(1, u64::MAX as u128) as u64;
        InstanceStats {
            active: AtomicU32::new(0),
            first_seen_ms: AtomicU64::new(now),
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            consecutive_failures: AtomicU32::new(0),
            ewma_ns: AtomicU64::new(0),
            ewma_at_ns: AtomicU64::new(0),
            ewma_key: AtomicU64::new(f64::NAN.to_bits()),
            bucket_ns,
            buckets: Default::default(),
            outlier: OutlierState::default(),
        }
    }

    /// When the directory first saw this address (ms since the epoch): the warm-up start for
    /// providers that publish no `timestamp`.
    pub fn first_seen_ms(&self) -> u64 {
        self.first_seen_ms.load(Ordering::Relaxed)
    }

    /// Overrides the first-seen time (tests, snapshot cache restore).
    pub fn set_first_seen_ms(&self, ms: u64) {
        self.first_seen_ms.store(ms, Ordering::Relaxed);
    }

    /// Calls in flight.
    pub fn active(&self) -> u32 {
        self.active.load(Ordering::Relaxed)
    }

    /// Successful calls so far.
    pub fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Failed (non-business) calls so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Failed calls since the last successful one.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures.load(Ordering::Relaxed)
    }

    /// Outlier-ejection state (see [`OutlierState`]): whether the instance is out of
    /// rotation, and the strike counters that decide it.
    pub fn outlier(&self) -> &OutlierState {
        &self.outlier
    }

    /// Marks a call as started; the guard ends it. Dropping the guard without
    /// [`CallGuard::finish`] counts as a cancelled call (no latency sample).
    pub fn begin(&self) -> CallGuard<'_> {
        self.active.fetch_add(1, Ordering::Relaxed);
        CallGuard {
            stats: self,
            done: false,
        }
    }

    /// Records a finished call observed at `at` without touching the in-flight count: for
    /// callers that track in-flight calls themselves, simulators and tests.
    /// [`CallGuard::finish`] calls it with `Instant::now()`.
    pub fn record(&self, elapsed: Duration, served: bool, at: Instant) {
        let at_ns = nanos_since_origin(at);
        advance_coarse(at_ns);
        if served {
            self.succeeded.fetch_add(1, Ordering::Relaxed);
            self.consecutive_failures.store(0, Ordering::Relaxed);
            self.record_window(elapsed, at_ns);
            self.record_ewma(elapsed, at_ns);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
            self.consecutive_failures.fetch_add(1, Ordering::Relaxed);
            let current = Duration::from_nanos(self.ewma_raw_ns() as u64);
            self.record_ewma(elapsed.max(FAILURE_PENALTY).max(current * 2), at_ns);
        }
    }

    fn record_window(&self, elapsed: Duration, at_ns: u64) {
        let epoch = at_ns / self.bucket_ns;
        let bucket = &self.buckets[(epoch % 2) as usize];
        let seen = bucket.epoch.load(Ordering::Acquire);
        if seen > epoch {
            return; // a sample older than what the bucket holds now: drop it
        }
        if seen < epoch
            && bucket
                .epoch
                .compare_exchange(seen, epoch, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            bucket.count.store(0, Ordering::Relaxed);
            bucket.sum_us.store(0, Ordering::Relaxed);
        }
        let us = elapsed.as_micros().min(u64::MAX as u128) as u64;
        bucket.count.fetch_add(1, Ordering::Relaxed);
        bucket.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    fn ewma_raw_ns(&self) -> f64 {
        f64::from_bits(self.ewma_ns.load(Ordering::Relaxed))
    }

    fn record_ewma(&self, sample: Duration, at_ns: u64) {
        let rtt = sample.as_nanos() as f64;
        let prev = self.ewma_raw_ns();
        let prev_at = self.ewma_at_ns.load(Ordering::Relaxed);
        let next = if rtt > prev || prev_at == 0 && prev == 0.0 {
            rtt // peak: jump up at once
        } else {
            let dt = at_ns.saturating_sub(prev_at) as f64;
            let w = (-dt / PEAK_EWMA_DECAY.as_nanos() as f64).exp();
            prev * w + rtt * (1.0 - w)
        };
        let at_ns = at_ns.max(1);
        let key = next.max(1.0).ln() + at_ns as f64 / PEAK_EWMA_DECAY.as_nanos() as f64;
        self.ewma_ns.store(next.to_bits(), Ordering::Relaxed);
        self.ewma_key.store(key.to_bits(), Ordering::Relaxed);
        self.ewma_at_ns.store(at_ns, Ordering::Relaxed);
    }

    /// The peak-EWMA estimate in log form, `ln(cost at t) + t / decay`, or `None` before the
    /// first sample. The decayed estimate at time `now` is `exp(key − now / decay)`.
    #[inline]
    pub(crate) fn ewma_log_key(&self) -> Option<f64> {
        let key = f64::from_bits(self.ewma_key.load(Ordering::Relaxed));
        (!key.is_nan()).then_some(key)
    }

    /// The peak-EWMA latency estimate at `now`, in ns, decayed toward zero for the time since
    /// the last sample (so an instance penalised once is probed again later). `None` before
    /// the first sample.
    pub fn peak_ewma_ns(&self, now: Instant) -> Option<f64> {
        let at = self.ewma_at_ns.load(Ordering::Relaxed);
        if at == 0 {
            return None;
        }
        let dt = nanos_since_origin(now).saturating_sub(at) as f64;
        Some(self.ewma_raw_ns() * (-dt / PEAK_EWMA_DECAY.as_nanos() as f64).exp())
    }

    /// Average successful response time over the sliding window ending at `now`, in µs;
    /// `None` when no call succeeded in the window (Dubbo then estimates 0: the instance looks
    /// fastest, so a new or idle instance gets probed).
    pub fn window_average_us(&self, now: Instant) -> Option<u64> {
        self.window_average_at(nanos_since_origin(now))
    }

    #[inline]
    pub(crate) fn window_average_at(&self, now_ns: u64) -> Option<u64> {
        let epoch = now_ns / self.bucket_ns;
        let (mut count, mut sum) = (0u64, 0u64);
        for b in &self.buckets {
            let e = b.epoch.load(Ordering::Acquire);
            if e == epoch || e + 1 == epoch {
                count += b.count.load(Ordering::Relaxed);
                sum = sum.saturating_add(b.sum_us.load(Ordering::Relaxed));
            }
        }
        (count > 0).then(|| sum / count)
    }

    fn end(&self, elapsed: Option<Duration>, ok: Option<bool>) {
        self.active.fetch_sub(1, Ordering::Relaxed);
        if let (Some(elapsed), Some(ok)) = (elapsed, ok) {
            self.record(elapsed, ok, Instant::now());
        }
    }
}

/// An in-flight call on one instance (see [`InstanceStats::begin`]).
#[derive(Debug)]
pub struct CallGuard<'a> {
    stats: &'a InstanceStats,
    done: bool,
}

impl CallGuard<'_> {
    /// Ends the call with its latency and whether the instance served it (a business error
    /// counts as served: the instance answered).
    pub fn finish(mut self, elapsed: Duration, served: bool) {
        self.done = true;
        self.stats.end(Some(elapsed), Some(served));
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.stats.end(None, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_counts_in_flight_and_outcomes() {
        let s = InstanceStats::new();
        let g = s.begin();
        let g2 = s.begin();
        assert_eq!(s.active(), 2);
        g.finish(Duration::from_millis(5), true);
        drop(g2);
        assert_eq!(s.active(), 0);
        assert_eq!(s.succeeded(), 1);
        assert_eq!(s.failed(), 0);
        assert!(s.window_average_us(Instant::now()).is_some());
    }

    #[test]
    fn window_averages_successes_and_expires() {
        let s = InstanceStats::with_response_window(Duration::from_secs(30));
        let t0 = Instant::now();
        s.record(Duration::from_millis(10), true, t0);
        s.record(Duration::from_millis(30), true, t0);
        s.record(Duration::from_millis(500), false, t0);
        assert_eq!(s.window_average_us(t0), Some(20_000));
        // Still inside the window 14 s later (same or next half).
        assert_eq!(
            s.window_average_us(t0 + Duration::from_secs(14)),
            Some(20_000)
        );
        // Gone once two halves have passed.
        assert_eq!(s.window_average_us(t0 + Duration::from_secs(31)), None);
        // A later sample replaces the stale half.
        let t1 = t0 + Duration::from_secs(60);
        s.record(Duration::from_millis(4), true, t1);
        assert_eq!(s.window_average_us(t1), Some(4_000));
    }

    #[test]
    fn peak_ewma_jumps_up_decays_down_and_penalises_failures() {
        let s = InstanceStats::new();
        let t0 = Instant::now();
        assert_eq!(s.peak_ewma_ns(t0), None);
        s.record(Duration::from_millis(10), true, t0);
        assert_eq!(s.peak_ewma_ns(t0), Some(10e6));
        s.record(Duration::from_millis(100), true, t0);
        assert_eq!(s.peak_ewma_ns(t0), Some(100e6), "peaks are taken at once");
        let later = t0 + PEAK_EWMA_DECAY;
        s.record(Duration::from_millis(10), true, later);
        let v = s.peak_ewma_ns(later).unwrap();
        assert!(v > 10e6 && v < 100e6, "{v}");
        // A fast failure counts as a slow sample.
        s.record(Duration::from_millis(1), false, later);
        assert!(s.peak_ewma_ns(later).unwrap() >= FAILURE_PENALTY.as_nanos() as f64);
        assert_eq!(s.consecutive_failures(), 1);
        // The estimate decays while no samples arrive.
        let much_later = later + PEAK_EWMA_DECAY * 10;
        assert!(s.peak_ewma_ns(much_later).unwrap() < 1e6);
        s.record(Duration::from_millis(1), true, much_later);
        assert_eq!(s.consecutive_failures(), 0);
    }
}
