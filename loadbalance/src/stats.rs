//! Live per-instance state: in-flight count, a peak-EWMA latency estimate, a sliding window of
//! successful response times, and failure counters.
//!
//! Everything is a handful of atomics updated when a call ends and read (never written) by
//! pickers. Updates that race may lose a sample under contention; that is the price of staying
//! lock-free and is irrelevant to balancing, which only needs estimates.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use switchman_core::Tick;
use switchman_core::clock::whole_nanos;

use crate::outlier::{Outcome, OutlierConfig, OutlierState, Verdict};

/// Default length of the response-time window read by `shortestresponse` (Dubbo's
/// `slidePeriod`, 30 s).
pub const DEFAULT_RESPONSE_WINDOW: Duration = Duration::from_secs(30);

/// Decay time constant of the peak-EWMA latency estimate (as in linkerd and finagle: 10 s).
pub const PEAK_EWMA_DECAY: Duration = Duration::from_secs(10);

/// A failed call (not served) counts as a latency sample of at least this much, so that an
/// instance failing fast does not look fast to `p2c`.
pub const FAILURE_PENALTY: Duration = Duration::from_secs(1);

/// ns since the clock's origin (see [`switchman_core::clock`]).
fn nanos_since_origin(at: Instant) -> u64 {
    Tick::of(at).as_nanos()
}

/// A sample this many epochs (or fewer) older than its bucket is dropped as late; a bucket
/// further behind than that is stale and starts again (epochs wrap at 2^32).
const STALE_AFTER: i32 = 1 << 16;

/// The longest half of a response window (windows over two hours are capped).
const MAX_BUCKET: Duration = Duration::from_secs(3600);

/// Decay time constant in ns, as f64.
const DECAY_NS: f64 = PEAK_EWMA_DECAY.as_nanos() as f64;
/// Its inverse: the call path multiplies (a division by a float constant stays a division).
pub(crate) const PER_DECAY_NS: f64 = 1.0 / DECAY_NS;

/// Nanoseconds as `f64`, saturating at 2^63 (292 years): one signed conversion, where a `u64`
/// converts with a five-instruction sequence on the baseline x86-64 target.
#[inline(always)]
pub(crate) fn ns_f64(ns: u64) -> f64 {
    ns.min(i64::MAX as u64) as i64 as f64
}

/// Below this fraction of the decay constant between two samples, the EWMA is updated by
/// series instead of `exp` and `ln` (see [`InstanceStats::record_ewma`]): the terms left out
/// are below 1e-13 of the estimate.
const SERIES_BELOW: f64 = 1e-3;

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
    /// The epoch (`ns since the origin / bucket length`) modulo 2^32, compared with wrapping
    /// arithmetic: a bucket untouched for 2^32 epochs (over 4 years with Dubbo's 30 s window)
    /// could pass for a current one.
    epoch: AtomicU32,
    /// Successes in the epoch. A u32: with the half-window capped at an hour (see
    /// [`InstanceStats::with_response_window`]) it would take 1.2 million successes per
    /// second on one instance for that hour to wrap.
    count: AtomicU32,
    sum_us: AtomicU64,
}

/// Bits of [`InstanceStats`]'s call word that count calls in flight (up to 2^24 − 1 per
/// instance); the other 40 count successes.
const IN_FLIGHT_BITS: u32 = 24;
const IN_FLIGHT: u64 = (1 << IN_FLIGHT_BITS) - 1;
const ONE_SUCCESS: u64 = 1 << IN_FLIGHT_BITS;
const SUCCESS_BITS: u32 = 64 - IN_FLIGHT_BITS;
const SUCCESS_MAX: u64 = (1 << SUCCESS_BITS) - 1;

/// Live per-instance state shared by every snapshot that holds the same address.
///
/// Laid out for pickers: what `leastactive` and `p2c` read sits in the first 32 bytes (one
/// cache line: the struct is 32-byte aligned), the response window of `shortestresponse`
/// right after it, counters for humans last. 160 bytes in all (192 with 64-byte alignment,
/// which at 100k instances was 3 MiB more for no measured gain).
#[derive(Debug)]
#[repr(C, align(32))]
pub struct InstanceStats {
    /// Calls in flight (the low [`IN_FLIGHT_BITS`] bits) and successful calls modulo 2^40
    /// (the rest) in one word: a successful call ends with one read-modify-write.
    calls: AtomicU64,
    consecutive_failures: AtomicU32,
    /// How many times the successes in `calls` wrapped past 2^40 (every 127 days at 100,000
    /// successes a second on one instance).
    success_wraps: AtomicU32,
    /// `ln(ewma_ns) + ewma_at_ns / decay`, as f64 bits (NaN before the first sample): comparing
    /// two of these compares the decayed estimates at any common instant, without reading the
    /// clock or calling `exp`.
    ewma_key: AtomicU64,
    /// Whether anything reads the peak-EWMA ([`InstanceStats::keep_peak_ewma`]): until then
    /// no call computes it.
    ewma_read: AtomicBool,
    /// Length of one bucket (half the window) in ns.
    bucket_ns: u64,
    buckets: [Bucket; 2],
    /// Peak-EWMA latency estimate in ns, as f64 bits; 0 when no sample yet.
    ewma_ns: AtomicU64,
    /// When `ewma_ns` was last updated (ns since the stats origin).
    ewma_at_ns: AtomicU64,
    first_seen_ms: AtomicU64,
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
    /// Windows over two hours are taken as two hours.
    pub fn with_response_window(window: Duration) -> Self {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let bucket_ns = (window.as_nanos() / 2).clamp(1, MAX_BUCKET.as_nanos()) as u64;
        InstanceStats {
            calls: AtomicU64::new(0),
            success_wraps: AtomicU32::new(0),
            first_seen_ms: AtomicU64::new(now),
            failed: AtomicU64::new(0),
            consecutive_failures: AtomicU32::new(0),
            ewma_ns: AtomicU64::new(0),
            ewma_at_ns: AtomicU64::new(0),
            ewma_key: AtomicU64::new(f64::NAN.to_bits()),
            ewma_read: AtomicBool::new(false),
            bucket_ns,
            // Further behind the coarse clock (no clock read) than a late sample can be: stale,
            // and every sample to come, even from a clock somewhat behind, starts it again.
            buckets: std::array::from_fn(|_| Bucket {
                epoch: AtomicU32::new(
                    ((coarse_now_ns() / bucket_ns) as u32)
                        .wrapping_sub(STALE_AFTER.unsigned_abs() + 2),
                ),
                ..Bucket::default()
            }),
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
        (self.calls.load(Ordering::Relaxed) & IN_FLIGHT) as u32
    }

    /// Successful calls so far.
    pub fn succeeded(&self) -> u64 {
        let wraps = u64::from(self.success_wraps.load(Ordering::Relaxed));
        (wraps << SUCCESS_BITS) | (self.calls.load(Ordering::Relaxed) >> IN_FLIGHT_BITS)
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

    /// Records an attempt's outcome for outlier detection (see [`OutlierState`]) and says
    /// what to do about it; `started` and `now` are `Instant`s or [`Tick`]s. Record the call
    /// in these statistics first ([`CallGuard::finish`], [`InstanceStats::record`]): the
    /// success-rate window reads the successes counted there instead of counting them again.
    pub fn record_outlier(
        &self,
        outcome: Outcome,
        started: impl Into<Tick>,
        now: impl Into<Tick>,
        cfg: &OutlierConfig,
    ) -> Verdict {
        // The low 32 bits of the successes: what the window's differences need.
        let successes = self.succeeded() as u32;
        self.outlier
            .record(outcome, started.into(), now.into(), cfg, successes)
    }

    /// Marks a call as started; the guard ends it. Dropping the guard without
    /// [`CallGuard::finish`] counts as a cancelled call (no latency sample).
    pub fn begin(&self) -> CallGuard<'_> {
        let before = self.calls.fetch_add(1, Ordering::Relaxed);
        // 2^24 − 1 calls in flight on one instance already: the count stays there and this
        // call is not counted (the carry into the successes is taken back).
        let counted = before & IN_FLIGHT != IN_FLIGHT;
        if !counted {
            self.calls.fetch_sub(1, Ordering::Relaxed);
        }
        CallGuard {
            stats: self,
            done: false,
            counted,
        }
    }

    /// Records a finished call observed at `at` without touching the in-flight count: for
    /// callers that track in-flight calls themselves, simulators and tests.
    /// [`CallGuard::finish`] calls it with `Instant::now()`. `at`: an `Instant` or a
    /// [`Tick`].
    pub fn record(&self, elapsed: Duration, served: bool, at: impl Into<Tick>) {
        self.settle(elapsed, served, at.into(), 0);
    }

    /// [`InstanceStats::record`], ending `release` (0 or 1) calls in flight in the same
    /// read-modify-write as the success count.
    fn settle(&self, elapsed: Duration, served: bool, at: Tick, release: u64) {
        let at_ns = at.as_nanos();
        advance_coarse(at_ns);
        if served {
            let before = self
                .calls
                .fetch_add(ONE_SUCCESS.wrapping_sub(release), Ordering::Relaxed);
            if before >> IN_FLIGHT_BITS == SUCCESS_MAX {
                self.success_wraps.fetch_add(1, Ordering::Relaxed);
            }
            self.consecutive_failures.store(0, Ordering::Relaxed);
            let elapsed_ns = whole_nanos(elapsed);
            self.record_window(elapsed_ns, at_ns);
            if self.ewma_read.load(Ordering::Relaxed) {
                self.record_ewma(elapsed_ns, at_ns);
            }
        } else {
            if release > 0 {
                self.calls.fetch_sub(release, Ordering::Relaxed);
            }
            self.failed.fetch_add(1, Ordering::Relaxed);
            self.consecutive_failures.fetch_add(1, Ordering::Relaxed);
            if self.ewma_read.load(Ordering::Relaxed) {
                let current_ns = self.ewma_raw_ns() as u64;
                let penalty_ns = whole_nanos(FAILURE_PENALTY);
                self.record_ewma(
                    whole_nanos(elapsed)
                        .max(penalty_ns)
                        .max(current_ns.saturating_mul(2)),
                    at_ns,
                );
            }
        }
    }

    fn record_window(&self, elapsed_ns: u64, at_ns: u64) {
        let epoch = (at_ns / self.bucket_ns) as u32;
        let bucket = &self.buckets[(epoch % 2) as usize];
        let seen = bucket.epoch.load(Ordering::Acquire);
        let ahead = epoch.wrapping_sub(seen) as i32;
        if (-STALE_AFTER..0).contains(&ahead) {
            return; // a sample older than what the bucket holds now: drop it
        }
        // Ahead, or so far behind that the bucket's epoch is from before a wrap: a new epoch.
        if ahead != 0
            && bucket
                .epoch
                .compare_exchange(seen, epoch, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            bucket.count.store(0, Ordering::Relaxed);
            bucket.sum_us.store(0, Ordering::Relaxed);
        }
        let us = elapsed_ns / 1000;
        // Loads and stores, not read-modify-writes: two calls ending on this instance at the
        // same instant may lose one's sample (the module's price for staying cheap), and the
        // average stays an average of samples (each writer adds one to the count and its own
        // latency to the sum). Two locked instructions less per call.
        let count = bucket.count.load(Ordering::Relaxed);
        bucket.count.store(count.wrapping_add(1), Ordering::Relaxed);
        let sum = bucket.sum_us.load(Ordering::Relaxed);
        bucket
            .sum_us
            .store(sum.saturating_add(us), Ordering::Relaxed);
    }

    fn ewma_raw_ns(&self) -> f64 {
        f64::from_bits(self.ewma_ns.load(Ordering::Relaxed))
    }

    /// Peak-EWMA update: a sample above the estimate replaces it; otherwise the estimate moves
    /// toward the sample by `1 − w`, `w = exp(−dt / decay)`.
    ///
    /// A busy instance records samples microseconds apart (`dt / decay` around 1e-7), where
    /// `1 − w` and the change of `ln` are tiny: both come from their series (three terms each,
    /// exact to 1e-13 relative) instead of `exp` and `ln`, which cost more than the rest of the
    /// call's bookkeeping. The log key is then updated by the same change
    /// (`key' = key + dt/decay + ln(next/prev)`); every peak and every sample after a pause
    /// recomputes it from scratch, so rounding cannot drift.
    ///
    /// Out of line: only instances a peak-EWMA reader was prepared over take it, and inlined it
    /// would widen every call's [`InstanceStats::settle`].
    #[inline(never)]
    fn record_ewma(&self, sample_ns: u64, at_ns: u64) {
        let rtt = ns_f64(sample_ns);
        let prev = self.ewma_raw_ns();
        let prev_at = self.ewma_at_ns.load(Ordering::Relaxed);
        let at_ns = at_ns.max(1);
        if rtt <= prev && prev >= 1.0 && prev_at != 0 {
            // 0 for a sample arriving out of order (`at` earlier than the last one).
            let moved_by = at_ns.saturating_sub(prev_at);
            let x = ns_f64(moved_by) * PER_DECAY_NS;
            if x < SERIES_BELOW {
                let prev_key = f64::from_bits(self.ewma_key.load(Ordering::Relaxed));
                // 1 − exp(−x) and ln(1 + d) by their series.
                let one_minus_w = x * (1.0 - x * (0.5 - x * (1.0 / 6.0)));
                // next = prev·w + rtt·(1 − w) = prev·(1 + d)
                let step = (rtt - prev) * one_minus_w;
                let next = prev + step;
                let d = step / prev;
                let ln_ratio = d * (1.0 - d * (0.5 - d * (1.0 / 3.0)));
                // The key tracks `at`: it moves by the same x.
                let key = prev_key + x + ln_ratio;
                self.ewma_ns.store(next.to_bits(), Ordering::Relaxed);
                self.ewma_key.store(key.to_bits(), Ordering::Relaxed);
                self.ewma_at_ns.store(at_ns.max(prev_at), Ordering::Relaxed);
                return;
            }
        }
        self.record_ewma_exact(rtt, prev, prev_at, at_ns);
    }

    /// [`InstanceStats::record_ewma`] for a peak, a first sample or a sample after a pause:
    /// `exp` and `ln` computed, the log key recomputed from scratch. Out of line, so that the
    /// series path saves no registers for the calls these make.
    #[cold]
    #[inline(never)]
    fn record_ewma_exact(&self, rtt: f64, prev: f64, prev_at: u64, at_ns: u64) {
        let next = if rtt > prev || prev_at == 0 && prev == 0.0 {
            rtt // peak: jump up at once
        } else {
            let dt = ns_f64(at_ns.saturating_sub(prev_at));
            let w = (-dt / DECAY_NS).exp();
            prev * w + rtt * (1.0 - w)
        };
        let key = next.max(1.0).ln() + ns_f64(at_ns) * PER_DECAY_NS;
        self.ewma_ns.store(next.to_bits(), Ordering::Relaxed);
        self.ewma_key.store(key.to_bits(), Ordering::Relaxed);
        self.ewma_at_ns.store(at_ns, Ordering::Relaxed);
    }

    /// The peak-EWMA estimate in log form, `ln(cost at t) + t / decay`, or `None` before the
    /// first sample. The decayed estimate at time `now` is `exp(key − now / decay)`. It is kept
    /// only after [`InstanceStats::keep_peak_ewma`] (a `p2c` table calls it for its members
    /// when built): this read does not mark it, to keep the pick to one load.
    #[inline]
    pub(crate) fn ewma_log_key(&self) -> Option<f64> {
        let key = f64::from_bits(self.ewma_key.load(Ordering::Relaxed));
        (!key.is_nan()).then_some(key)
    }

    /// The peak-EWMA latency estimate at `now`, in ns, decayed toward zero for the time since
    /// the last sample (so an instance penalised once is probed again later). `None` before
    /// the first sample.
    ///
    /// Kept from the first time a balancer that reads it is prepared over this instance
    /// ([`InstanceStats::keep_peak_ewma`]) or it is read: calls that nothing reads it for do
    /// not compute it.
    pub fn peak_ewma_ns(&self, now: Instant) -> Option<f64> {
        self.keep_peak_ewma();
        let at = self.ewma_at_ns.load(Ordering::Relaxed);
        if at == 0 {
            return None;
        }
        let dt = nanos_since_origin(now).saturating_sub(at) as f64;
        Some(self.ewma_raw_ns() * (-dt / PEAK_EWMA_DECAY.as_nanos() as f64).exp())
    }

    /// From now on calls keep this instance's peak-EWMA ([`InstanceStats::peak_ewma_ns`]):
    /// what a balancer that reads it calls for each member when it prepares (`p2c` does).
    /// Reading it does the same.
    #[inline]
    pub fn keep_peak_ewma(&self) {
        if !self.ewma_read.load(Ordering::Relaxed) {
            self.ewma_read.store(true, Ordering::Relaxed);
        }
    }

    /// Average successful response time over the sliding window ending at `now`, in µs;
    /// `None` when no call succeeded in the window (Dubbo then estimates 0: the instance looks
    /// fastest, so a new or idle instance gets probed).
    pub fn window_average_us(&self, now: Instant) -> Option<u64> {
        self.window_average_at(nanos_since_origin(now))
    }

    #[inline]
    pub(crate) fn window_average_at(&self, now_ns: u64) -> Option<u64> {
        let epoch = (now_ns / self.bucket_ns) as u32;
        let (mut count, mut sum) = (0u64, 0u64);
        for b in &self.buckets {
            let e = b.epoch.load(Ordering::Acquire);
            if e == epoch || e.wrapping_add(1) == epoch {
                count += u64::from(b.count.load(Ordering::Relaxed));
                sum = sum.saturating_add(b.sum_us.load(Ordering::Relaxed));
            }
        }
        (count > 0).then(|| sum / count)
    }
}

/// An in-flight call on one instance (see [`InstanceStats::begin`]).
#[derive(Debug)]
pub struct CallGuard<'a> {
    stats: &'a InstanceStats,
    done: bool,
    /// In the in-flight count (every call below its 2^24 − 1 cap).
    counted: bool,
}

impl CallGuard<'_> {
    /// Ends the call with its latency and whether the instance served it (a business error
    /// counts as served: the instance answered). Reads the clock for the time the call ended;
    /// a caller that has just read it to measure `elapsed` passes it to
    /// [`CallGuard::finish_at`] instead.
    pub fn finish(self, elapsed: Duration, served: bool) {
        self.finish_at(elapsed, served, Instant::now());
    }

    /// Ends the call as [`CallGuard::finish`] does, with the time it ended given (an
    /// `Instant` or a [`Tick`]): no clock read.
    pub fn finish_at(mut self, elapsed: Duration, served: bool, ended: impl Into<Tick>) {
        self.done = true;
        self.stats
            .settle(elapsed, served, ended.into(), u64::from(self.counted));
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        // Cancelled: out of flight, no sample.
        if !self.done && self.counted {
            self.stats.calls.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_and_successes_share_one_word_and_stay_exact() {
        let s = InstanceStats::new();
        let (a, b, c) = (s.begin(), s.begin(), s.begin());
        assert_eq!(s.active(), 3);
        // A call recorded by its owner (no guard) counts its outcome, not its flight.
        s.record(Duration::from_millis(1), true, Instant::now());
        assert_eq!((s.active(), s.succeeded()), (3, 1));
        a.finish(Duration::from_millis(1), true);
        b.finish(Duration::from_millis(1), false);
        assert_eq!((s.active(), s.succeeded(), s.failed()), (1, 2, 1));
        drop(c);
        assert_eq!((s.active(), s.succeeded(), s.failed()), (0, 2, 1));
        // Still 160 bytes: the word replaced a u32 and a u64.
        assert_eq!(std::mem::size_of::<InstanceStats>(), 160);
    }

    #[test]
    fn calls_past_the_in_flight_cap_are_not_counted_and_corrupt_nothing() {
        let s = InstanceStats::new();
        s.calls
            .store((5 << IN_FLIGHT_BITS) | (IN_FLIGHT - 1), Ordering::Relaxed);
        let last = s.begin();
        assert_eq!((u64::from(s.active()), s.succeeded()), (IN_FLIGHT, 5));
        let over = s.begin();
        assert_eq!((u64::from(s.active()), s.succeeded()), (IN_FLIGHT, 5));
        over.finish(Duration::from_millis(1), true);
        assert_eq!((u64::from(s.active()), s.succeeded()), (IN_FLIGHT, 6));
        let over = s.begin();
        drop(over);
        assert_eq!(u64::from(s.active()), IN_FLIGHT);
        last.finish(Duration::from_millis(1), true);
        assert_eq!((u64::from(s.active()), s.succeeded()), (IN_FLIGHT - 1, 7));
    }

    #[test]
    fn successes_go_on_past_two_to_the_forty() {
        let s = InstanceStats::new();
        s.calls
            .store(SUCCESS_MAX << IN_FLIGHT_BITS, Ordering::Relaxed);
        let g = s.begin();
        assert_eq!((s.active(), s.succeeded()), (1, SUCCESS_MAX));
        g.finish(Duration::from_millis(1), true);
        assert_eq!((s.active(), s.succeeded()), (0, SUCCESS_MAX + 1));
        s.record(Duration::from_millis(1), true, Instant::now());
        assert_eq!((s.active(), s.succeeded()), (0, SUCCESS_MAX + 2));
    }

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

    #[test]
    fn no_call_keeps_a_peak_ewma_that_nothing_reads() {
        let s = InstanceStats::new();
        let t0 = Instant::now();
        s.record(Duration::from_millis(10), true, t0);
        s.record(Duration::from_millis(10), false, t0);
        assert_eq!(s.peak_ewma_ns(t0), None, "not kept before its first read");
        assert_eq!(s.ewma_log_key(), None);
        assert_eq!(
            (s.succeeded(), s.failed()),
            (1, 1),
            "the calls themselves are counted"
        );
        s.record(Duration::from_millis(20), true, t0);
        assert_eq!(
            s.peak_ewma_ns(t0),
            Some(20e6),
            "kept from the first read on"
        );
    }

    /// The series path (samples close together) agrees with the exact peak-EWMA
    /// (`exp`/`ln` at every sample) and keeps the log key consistent with the estimate.
    #[test]
    fn peak_ewma_series_path_matches_exact_formula() {
        let s = InstanceStats::new();
        let t0 = Instant::now() + Duration::from_secs(1);
        s.keep_peak_ewma();
        assert_eq!(s.ewma_log_key(), None, "kept from now on, no sample yet");
        let mut rng = fastrand::Rng::with_seed(3);
        let (mut exact, mut exact_at) = (0.0f64, 0u64);
        let mut at = t0;
        for i in 0..20_000u32 {
            // Mostly microseconds apart (series path), now and then a pause (exact path);
            // latencies around 300 µs with occasional peaks.
            at += if i % 1000 == 999 {
                Duration::from_millis(50)
            } else {
                Duration::from_micros(rng.u64(1..200))
            };
            let rtt_ns = if i % 97 == 0 {
                900_000.0
            } else {
                rng.u64(200_000..400_000) as f64
            };
            s.record(Duration::from_nanos(rtt_ns as u64), true, at);
            let at_ns = nanos_since_origin(at);
            exact = if rtt_ns > exact || exact_at == 0 {
                rtt_ns
            } else {
                let w = (-((at_ns - exact_at) as f64) / DECAY_NS).exp();
                exact * w + rtt_ns * (1.0 - w)
            };
            exact_at = at_ns;
            let got = s.ewma_raw_ns();
            assert!(
                (got - exact).abs() <= exact * 1e-9,
                "sample {i}: {got} vs exact {exact}"
            );
            let from_key = (s.ewma_log_key().unwrap() - at_ns as f64 / DECAY_NS).exp();
            assert!(
                (from_key - exact).abs() <= exact * 1e-6,
                "sample {i}: key gives {from_key}, exact {exact}"
            );
        }
        // The estimate decayed from the last peak toward the samples, not stuck at the peak.
        assert!(s.ewma_raw_ns() < 900_000.0 && s.ewma_raw_ns() > 200_000.0);
    }

    /// The window's epochs are kept modulo 2^32: across the wrap the previous half still
    /// counts, an older sample is still dropped, and the next epoch still resets.
    #[test]
    fn window_epochs_wrap() {
        // 2 ns window: 1 ns halves, so epoch = ns since the origin.
        let s = InstanceStats::with_response_window(Duration::from_nanos(2));
        let at = |ns: u64| Tick::from_nanos(ns);
        let last = (1u64 << 32) - 1; // epoch u32::MAX
        for b in &s.buckets {
            b.epoch.store(u32::MAX - 3, Ordering::Relaxed); // as if created just before
        }
        s.record(Duration::from_micros(10), true, at(last));
        s.record(Duration::from_micros(30), true, at(last + 1)); // epoch 0 after the wrap
        assert_eq!(s.window_average_at(last + 1), Some(20));
        // A sample two epochs old is dropped, not taken for a newer one.
        s.record(Duration::from_micros(1000), true, at(last - 1));
        assert_eq!(s.window_average_at(last + 1), Some(20));
        // Two epochs later the u32::MAX half is stale.
        assert_eq!(s.window_average_at(last + 2), Some(30));
        s.record(Duration::from_micros(50), true, at(last + 3));
        assert_eq!(s.window_average_at(last + 3), Some(50));
    }
}
