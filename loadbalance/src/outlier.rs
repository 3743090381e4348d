//! Outlier ejection: per-instance state that takes a failing instance out of rotation for a
//! while, then lets one probe call decide whether it comes back.
//!
//! A registry notices a dead provider only after its session or health timeout (15–60 s); in
//! that window only the client protects calls. Retries hide the failures from callers but
//! still spend an attempt (and budget) on the broken instance every time it is picked. The
//! state here lets the cluster layer stop picking it:
//!
//! * **Strikes.** Transport failures and timeouts are strikes; a business error is the
//!   instance's answer and counts as a success; an orderly "retry elsewhere" (HTTP 503 with
//!   `connection: close`, HTTP/2 GOAWAY) is neither (`switchman_core::Error::counts_as_strike`).
//! * **Ejection** after `consecutive_failures` strikes in a row (default 5), or when the
//!   success rate over the last `window` (30 s, two 15 s halves) falls below `success_rate`
//!   (80%) once at least `minimum_volume` (20) outcomes were seen there (Finagle's defaults).
//! * **Penalty**: `base_penalty × 2^(n−1)` for the n-th ejection in a row, ±20% jitter (so
//!   instances ejected together do not come back together), capped at `max_penalty`.
//! * **Probe.** When the penalty ends, the next pick that reaches the instance claims it as a
//!   probe (one compare-and-swap; concurrent picks keep skipping it while the probe is in
//!   flight). A successful probe readmits it and clears the ejection count; a failed probe
//!   ejects it again with the next, longer penalty.
//!
//! The cluster layer owns the decisions that need the whole service: it asks
//! [`OutlierConfig::max_ejection_percent`] before [`OutlierState::eject`], and never fails a
//! call only because every candidate is ejected.
//!
//! Everything is atomics in the instance's [`InstanceStats`](crate::InstanceStats), so the
//! state survives snapshot refreshes. The pick path reads one atomic ([`OutlierState::admits`]:
//! a healthy instance costs a load and no clock read); recording an outcome
//! ([`InstanceStats::record_outlier`](crate::InstanceStats::record_outlier), after the call's
//! statistics) is a few atomic operations, a success no read-modify-write; only a transition
//! (rare) does more.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchman_core::Tick;

/// Outlier-ejection settings for one service. Defaults follow Finagle and Envoy; see each
/// field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutlierConfig {
    /// Whether ejection is on (default `true`).
    pub enabled: bool,
    /// Strikes in a row that eject an instance (default 5, Envoy's `consecutive_5xx`); 0
    /// disables this trigger.
    pub consecutive_failures: u32,
    /// Eject when the success rate over [`OutlierConfig::window`] falls below this fraction
    /// (default 0.8, Finagle's `FailureAccrual` success-rate policy); 0 disables this trigger.
    pub success_rate: f64,
    /// The success-rate window (default 30 s). It slides in two halves, so it covers between
    /// half and all of this.
    pub window: Duration,
    /// Outcomes the window must hold before the success rate may eject (default 20): five
    /// calls with one failure say nothing.
    pub minimum_volume: u32,
    /// Penalty of a first ejection (default 30 s, Envoy's `base_ejection_time`).
    pub base_penalty: Duration,
    /// Longest penalty (default 5 min): the penalty doubles per ejection in a row up to this.
    pub max_penalty: Duration,
    /// Never eject more than this percentage of a service's routable instances at once
    /// (default 50). A fault shared by every instance (a common dependency down, a bad
    /// deploy of the consumer) looks like every instance failing; without the guard ejection
    /// would empty the service and turn a partial outage into a total one. At 50% the
    /// majority always stays in rotation, so a false positive can at most halve capacity,
    /// while a genuine minority of bad instances (the common case) is still ejected. A
    /// service with one instance never ejects it (ejection could not send the call anywhere
    /// else).
    pub max_ejection_percent: u32,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        OutlierConfig {
            enabled: true,
            consecutive_failures: 5,
            success_rate: 0.8,
            window: Duration::from_secs(30),
            minimum_volume: 20,
            base_penalty: Duration::from_secs(30),
            max_penalty: Duration::from_secs(300),
            max_ejection_percent: 50,
        }
    }
}

impl OutlierConfig {
    /// Ejection turned off.
    pub fn disabled() -> Self {
        OutlierConfig {
            enabled: false,
            ..Self::default()
        }
    }

    /// Whether one more ejection is allowed when `ejected` of `routable` instances are out.
    pub fn may_eject(&self, ejected: usize, routable: usize) -> bool {
        (ejected + 1) * 100 <= self.max_ejection_percent.min(100) as usize * routable
    }

    /// The penalty of the `n`-th ejection in a row (n ≥ 1), with `jitter` in `[0, 1)` mapped
    /// to ×[0.8, 1.2); never above [`OutlierConfig::max_penalty`].
    pub fn penalty(&self, n: u32, jitter: f64) -> Duration {
        let doubled = self
            .base_penalty
            .saturating_mul(1u32 << n.saturating_sub(1).min(20));
        doubled
            .mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0))
            .min(self.max_penalty)
    }
}

/// How many of a service's endpoints are out of rotation, as one atomic word: the guard of
/// [`OutlierConfig::max_ejection_percent`] without a lock or a scan per strike.
///
/// The count belongs to one snapshot, named by the `epoch` the caller passes (the cluster
/// passes the snapshot's process-unique id). The first decision for a new snapshot (endpoints
/// came or went, some possibly while ejected) counts its ejected endpoints once; every later
/// one for that snapshot is a compare-and-swap on the word.
#[derive(Debug, Default)]
pub struct EjectionCount {
    /// `(epoch & EPOCH_MASK) << COUNT_BITS | count`.
    word: AtomicU64,
}

const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const EPOCH_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

fn pack(epoch: u64, count: usize) -> u64 {
    ((epoch & EPOCH_MASK) << COUNT_BITS) | (count as u64).min(COUNT_MASK)
}

impl EjectionCount {
    /// A count that knows no epoch yet (the first decision counts).
    pub fn new() -> Self {
        EjectionCount {
            // Epoch bits all ones: no snapshot has that epoch before 2^40 publishes.
            word: AtomicU64::new(EPOCH_MASK << COUNT_BITS),
        }
    }

    /// Reserves one ejection among `routable` endpoints of the snapshot at `epoch`, when the
    /// guard allows it: `Ok(ejected before)`, or `Err(ejected)` when the guard is reached.
    /// `recount` (a scan of the snapshot) runs only when the stored count is of another epoch.
    /// After `Ok`, call [`EjectionCount::release`] if the ejection did not happen after all.
    pub fn try_reserve(
        &self,
        epoch: u64,
        routable: usize,
        cfg: &OutlierConfig,
        recount: impl FnOnce() -> usize,
    ) -> Result<usize, usize> {
        let mut recount = Some(recount);
        let mut w = self.word.load(Ordering::Acquire);
        loop {
            let count = if w >> COUNT_BITS == epoch & EPOCH_MASK {
                (w & COUNT_MASK) as usize
            } else {
                let fresh = match recount.take() {
                    Some(f) => f(),
                    // Lost a race to store the recount: the winner's word is of this epoch.
                    None => (w & COUNT_MASK) as usize,
                };
                match self.word.compare_exchange(
                    w,
                    pack(epoch, fresh),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        w = pack(epoch, fresh);
                        fresh
                    }
                    Err(now) => {
                        w = now;
                        continue;
                    }
                }
            };
            if !cfg.may_eject(count, routable) {
                return Err(count);
            }
            match self.word.compare_exchange_weak(
                w,
                pack(epoch, count + 1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(count),
                Err(now) => w = now,
            }
        }
    }

    /// One endpoint of the snapshot at `epoch` came back into rotation (or a reserved
    /// ejection did not happen). A count of another epoch is left for the next recount.
    pub fn release(&self, epoch: u64) {
        let _ = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w >> COUNT_BITS == epoch & EPOCH_MASK && w & COUNT_MASK > 0).then(|| w - 1)
            });
    }

    /// The count as of the last decision at `epoch`, if it is of that epoch.
    pub fn get(&self, epoch: u64) -> Option<usize> {
        let w = self.word.load(Ordering::Acquire);
        (w >> COUNT_BITS == epoch & EPOCH_MASK).then_some((w & COUNT_MASK) as usize)
    }
}

/// What one finished attempt says about the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It answered (a business error included).
    Success,
    /// A strike: transport failure or timeout.
    Strike,
    /// Neither: an orderly "retry elsewhere", a consumer-side refusal.
    Neutral,
}

/// Why an instance should be ejected.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EjectReason {
    /// This many strikes in a row.
    ConsecutiveFailures(u32),
    /// The success rate over the window (a fraction) and the outcomes it is based on.
    SuccessRate {
        /// Successes / outcomes.
        rate: f64,
        /// Outcomes in the window.
        volume: u32,
    },
}

impl std::fmt::Display for EjectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EjectReason::ConsecutiveFailures(n) => write!(f, "{n} consecutive failures"),
            EjectReason::SuccessRate { rate, volume } => write!(
                f,
                "success rate {:.1}% over the last {volume} calls",
                rate * 100.0
            ),
        }
    }
}

/// What [`InstanceStats::record_outlier`](crate::InstanceStats::record_outlier) decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Nothing changes.
    Stay,
    /// The instance crossed a threshold: the caller should [`OutlierState::eject`] it if the
    /// max-ejection-percent guard allows.
    ShouldEject(EjectReason),
    /// The probe (or any call started after the ejection) succeeded: back in rotation.
    Readmitted,
    /// The probe failed: ejected again for this (longer) penalty.
    Reejected(Duration),
}

/// ns since the clock's origin (see [`switchman_core::clock`]), at least 1 (0 means "never").
fn ns(at: Tick) -> u64 {
    at.as_nanos().max(1)
}

fn ms(at: Tick) -> u64 {
    ns(at) / 1_000_000
}

/// The end of a span of `d` from `now`, in ms since the origin, rounded up: a penalty or a lease
/// stored in whole milliseconds lasts at least `d`, never up to 1 ms less.
fn until_ms(now: Tick, d: Duration) -> u64 {
    let end = u128::from(ns(now)) + d.as_nanos();
    u64::try_from(end.div_ceil(1_000_000))
        .unwrap_or(u64::MAX)
        .min(u64::MAX >> 1)
}

/// One half of the success-rate window. Its successes are not counted here: the instance's
/// statistics count every success already (one read-modify-write that a successful call makes
/// anyway), and a half keeps that count as it was when the half began. The window's successes
/// are the count now minus the oldest live half's, modulo 2^32: a success costs the window no
/// read-modify-write, and the count stays exact. (One difference from counting here: a
/// success of a call that started before the state last changed is ignored as an outcome but
/// is in that count, so a call straddling a readmission counts in the new window; successes
/// only make an ejection less likely.)
#[derive(Debug, Default)]
struct Half {
    epoch: AtomicU64,
    /// The instance's successes (modulo 2^32) before the half's first outcome.
    successes_at: AtomicU32,
    failed: AtomicU32,
}

/// Live ejection state of one instance (in its [`InstanceStats`](crate::InstanceStats)).
#[derive(Debug, Default)]
pub struct OutlierState {
    /// 0: in rotation. Otherwise `until_ms << 1 | probing`: ejected until `until_ms` (ms since
    /// the origin), or, with the probing bit, a probe claimed whose lease ends then.
    word: AtomicU64,
    /// When the state last changed (ns since the origin). Outcomes of calls started before
    /// then say nothing about the new state and are ignored.
    since_ns: AtomicU64,
    /// Ejections in a row (cleared by a successful probe).
    ejections: AtomicU32,
    /// Strikes since the last success.
    consecutive: AtomicU32,
    halves: [Half; 2],
}

impl OutlierState {
    /// Whether the instance is out of rotation (ejected, or its probe is in flight).
    #[inline]
    pub fn is_ejected(&self) -> bool {
        self.word.load(Ordering::Relaxed) != 0
    }

    /// Ejections in a row so far (0 once a probe succeeded).
    pub fn ejections(&self) -> u32 {
        self.ejections.load(Ordering::Relaxed)
    }

    /// Strikes since the last success.
    pub fn consecutive_strikes(&self) -> u32 {
        self.consecutive.load(Ordering::Relaxed)
    }

    /// When the current penalty (or probe lease) ends, if ejected.
    pub fn ejected_until(&self) -> Option<Instant> {
        match self.word.load(Ordering::Relaxed) {
            0 => None,
            w => Some(Tick::from_nanos((w >> 1).saturating_mul(1_000_000)).instant()),
        }
    }

    /// Whether the instance is in rotation (not ejected, no probe out): one atomic load. What
    /// [`OutlierState::admits`] answers first, without its arguments.
    #[inline]
    pub fn in_rotation(&self) -> bool {
        self.word.load(Ordering::Relaxed) == 0
    }

    /// Whether a pick may send a call here: in rotation (one atomic load, `now` not called),
    /// or ejected with the penalty over and the probe claimed by this caller, which must then
    /// make the call. A claimed probe that never reports back (cancelled) frees the instance
    /// for another probe after `lease`.
    #[inline]
    pub fn admits(&self, now: impl FnOnce() -> Instant, lease: Duration) -> bool {
        let w = self.word.load(Ordering::Relaxed);
        if w == 0 {
            return true;
        }
        let now = Tick::of(now());
        let now_ms = ms(now);
        if now_ms < w >> 1 {
            return false;
        }
        let claimed = (until_ms(now, lease) << 1) | 1;
        if self
            .word
            .compare_exchange(w, claimed, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.since_ns.store(ns(now), Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    /// Records the outcome of an attempt that started at `started` and ended at `now`, with
    /// `successes` the instance's successful calls so far, modulo 2^32, this one's included
    /// ([`InstanceStats::record_outlier`](crate::InstanceStats::record_outlier) passes them).
    /// Ejecting is left to the caller ([`Verdict::ShouldEject`]); readmission and re-ejection
    /// after a failed probe happen here.
    pub(crate) fn record(
        &self,
        outcome: Outcome,
        started: Tick,
        now: Tick,
        cfg: &OutlierConfig,
        successes: u32,
    ) -> Verdict {
        if outcome == Outcome::Neutral
            || !cfg.enabled
            || ns(started) < self.since_ns.load(Ordering::Relaxed)
        {
            return Verdict::Stay;
        }
        let w = self.word.load(Ordering::Acquire);
        if w != 0 {
            return match outcome {
                Outcome::Success => {
                    if self
                        .word
                        .compare_exchange(w, 0, Ordering::AcqRel, Ordering::Relaxed)
                        .is_err()
                    {
                        return Verdict::Stay;
                    }
                    self.ejections.store(0, Ordering::Relaxed);
                    self.reset_counts(successes);
                    self.since_ns.store(ns(now), Ordering::Relaxed);
                    Verdict::Readmitted
                }
                Outcome::Strike if w & 1 == 1 => {
                    let n = self.ejections.load(Ordering::Relaxed) + 1;
                    let penalty = cfg.penalty(n, fastrand::f64());
                    let until = (until_ms(now, penalty) << 1).max(2);
                    if self
                        .word
                        .compare_exchange(w, until, Ordering::AcqRel, Ordering::Relaxed)
                        .is_err()
                    {
                        return Verdict::Stay;
                    }
                    self.ejections.store(n, Ordering::Relaxed);
                    self.since_ns.store(ns(now), Ordering::Relaxed);
                    Verdict::Reejected(penalty)
                }
                _ => Verdict::Stay,
            };
        }
        if outcome == Outcome::Success {
            // Counted in `successes` already: the window only needs to know when a half
            // begins (this success belongs to the new half).
            self.turn(now, cfg.window, successes.wrapping_sub(1));
            if self.consecutive.load(Ordering::Relaxed) != 0 {
                self.consecutive.store(0, Ordering::Relaxed);
            }
            return Verdict::Stay;
        }
        let (ok, failed) = self.count_strike(now, cfg.window, successes);
        let c = self.consecutive.fetch_add(1, Ordering::Relaxed) + 1;
        if cfg.consecutive_failures > 0 && c >= cfg.consecutive_failures {
            return Verdict::ShouldEject(EjectReason::ConsecutiveFailures(c));
        }
        let volume = ok + failed;
        if cfg.success_rate > 0.0 && volume >= cfg.minimum_volume.max(1) {
            let rate = ok as f64 / volume as f64;
            if rate < cfg.success_rate {
                return Verdict::ShouldEject(EjectReason::SuccessRate { rate, volume });
            }
        }
        Verdict::Stay
    }

    /// Ejects the instance (if it is in rotation) for the next penalty and returns it; `None`
    /// when another caller ejected it first.
    pub fn eject(&self, now: impl Into<Tick>, cfg: &OutlierConfig) -> Option<Duration> {
        let now = now.into();
        let n = self.ejections.load(Ordering::Relaxed) + 1;
        let penalty = cfg.penalty(n, fastrand::f64());
        let until = (until_ms(now, penalty) << 1).max(2);
        self.word
            .compare_exchange(0, until, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        self.ejections.store(n, Ordering::Relaxed);
        self.since_ns.store(ns(now), Ordering::Relaxed);
        Some(penalty)
    }

    /// The window's epoch at `now` and the half it falls in, begun afresh (its count of
    /// strikes cleared, `successes_at` kept as where its successes start) if it held an older
    /// epoch; also the epoch the half held before.
    fn turn(&self, now: Tick, window: Duration, successes_at: u32) -> (u64, &Half, u64) {
        let half_ms = (window.as_millis() as u64 / 2).max(1);
        let epoch = ms(now) / half_ms;
        let h = &self.halves[(epoch % 2) as usize];
        let seen = h.epoch.load(Ordering::Acquire);
        if seen < epoch
            && h.epoch
                .compare_exchange(seen, epoch, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            h.successes_at.store(successes_at, Ordering::Relaxed);
            h.failed.store(0, Ordering::Relaxed);
        }
        (epoch, h, seen)
    }

    /// Adds a strike to the window and returns the window's (successes, strikes), with
    /// `successes` the instance's count now.
    fn count_strike(&self, now: Tick, window: Duration, successes: u32) -> (u32, u32) {
        let (epoch, h, seen) = self.turn(now, window, successes);
        if seen <= epoch {
            h.failed.fetch_add(1, Ordering::Relaxed);
        }
        // The successes since the oldest live half began (the current one alone when the
        // other holds no outcome of the last window).
        let (mut from, mut failed) = (None, 0);
        for h in &self.halves {
            let e = h.epoch.load(Ordering::Acquire);
            if e == epoch || e + 1 == epoch {
                failed += h.failed.load(Ordering::Relaxed);
                let at = h.successes_at.load(Ordering::Relaxed);
                if e + 1 == epoch || from.is_none() {
                    from = Some(at);
                }
            }
        }
        let ok = from.map_or(0, |at| successes.wrapping_sub(at));
        (ok, failed)
    }

    fn reset_counts(&self, successes: u32) {
        self.consecutive.store(0, Ordering::Relaxed);
        for h in &self.halves {
            h.successes_at.store(successes, Ordering::Relaxed);
            h.failed.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InstanceStats;

    const LEASE: Duration = Duration::from_secs(2);

    /// An attempt's end as the cluster reports it: to the instance's statistics first (where
    /// a success is counted), then to outlier detection.
    fn end(
        s: &InstanceStats,
        o: Outcome,
        started: Instant,
        now: Instant,
        c: &OutlierConfig,
    ) -> Verdict {
        s.record(Duration::from_millis(1), o == Outcome::Success, now);
        s.record_outlier(o, started, now, c)
    }

    #[test]
    fn penalty_doubles_with_jitter_and_is_capped() {
        let c = OutlierConfig::default();
        assert_eq!(c.penalty(1, 0.5), Duration::from_secs(30));
        assert_eq!(c.penalty(1, 0.0), Duration::from_secs(24));
        assert!(c.penalty(1, 0.999) < Duration::from_secs(36));
        assert_eq!(c.penalty(2, 0.5), Duration::from_secs(60));
        assert_eq!(c.penalty(4, 0.5), Duration::from_secs(240));
        assert_eq!(c.penalty(5, 0.0), Duration::from_secs(300), "capped");
        assert_eq!(c.penalty(60, 0.9), Duration::from_secs(300));
    }

    #[test]
    fn a_penalty_stored_in_milliseconds_is_never_cut_short() {
        // An ejection 0.9 ms into a millisecond: its end is rounded up, so the instance stays
        // out for the whole penalty (rounded down, it came back up to 1 ms early: the cluster
        // test's 48 s minimum was once read as 47.999 s).
        let now = Tick::from_nanos(5_000_900_000);
        let penalty = Duration::from_secs(48);
        let until = until_ms(now, penalty);
        assert_eq!(until, 53_001);
        assert!(Duration::from_millis(until) >= Duration::from_nanos(now.as_nanos()) + penalty);
        assert_eq!(
            until_ms(Tick::from_nanos(7_000_000), penalty),
            48_007,
            "exact: no rounding"
        );
        assert_eq!(
            until_ms(now, Duration::MAX),
            u64::MAX >> 1,
            "capped, shifts without overflow"
        );

        let s = OutlierState::default();
        let eject_at = Tick::from_nanos(2_000_000_500);
        let penalty = s.eject(eject_at, &OutlierConfig::default()).unwrap();
        let left = s.ejected_until().unwrap() - eject_at.instant();
        assert!(
            left >= penalty && left < penalty + Duration::from_millis(1),
            "{left:?}"
        );
    }

    #[test]
    fn ejection_count_guards_without_a_scan_per_decision() {
        let cfg = OutlierConfig::default();
        let count = EjectionCount::new();
        let scans = std::cell::Cell::new(0);
        let scan = |n: usize| {
            scans.set(scans.get() + 1);
            n
        };
        // Epoch 1, 10 routable, none ejected: five reservations pass, the sixth is refused.
        for k in 0..5 {
            assert_eq!(count.try_reserve(1, 10, &cfg, || scan(0)), Ok(k));
        }
        assert_eq!(count.try_reserve(1, 10, &cfg, || scan(0)), Err(5));
        assert_eq!(scans.get(), 1, "one scan for the whole epoch");
        count.release(1);
        assert_eq!(count.get(1), Some(4));
        assert_eq!(count.try_reserve(1, 10, &cfg, || scan(0)), Ok(4));
        // A new epoch recounts once (two of the five left the snapshot).
        assert_eq!(count.try_reserve(2, 8, &cfg, || scan(3)), Ok(3));
        assert_eq!(count.try_reserve(2, 8, &cfg, || scan(99)), Err(4));
        assert_eq!(scans.get(), 2);
        // A release of an older epoch does not touch the new count.
        count.release(1);
        assert_eq!(count.get(2), Some(4));
    }

    #[test]
    fn ejection_count_holds_under_threads() {
        let cfg = OutlierConfig::default();
        let count = std::sync::Arc::new(EjectionCount::new());
        let granted = std::sync::Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (count, granted) = (count.clone(), granted.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        if count.try_reserve(7, 100, &cfg, || 0).is_ok() {
                            granted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            granted.load(Ordering::Relaxed),
            50,
            "exactly half of 100, never more"
        );
    }

    #[test]
    fn max_ejection_percent_keeps_a_majority() {
        let c = OutlierConfig::default();
        assert!(!c.may_eject(0, 1), "a lone instance is never ejected");
        assert!(c.may_eject(0, 2) && !c.may_eject(1, 2));
        assert!(c.may_eject(0, 3) && !c.may_eject(1, 3));
        assert!(c.may_eject(1, 4) && !c.may_eject(2, 4));
    }

    #[test]
    fn consecutive_strikes_eject_and_a_probe_readmits() {
        let c = OutlierConfig::default();
        let st = InstanceStats::new();
        let s = st.outlier();
        let t0 = Instant::now();
        for _ in 0..4 {
            assert_eq!(end(&st, Outcome::Strike, t0, t0, &c), Verdict::Stay);
        }
        assert_eq!(
            end(&st, Outcome::Strike, t0, t0, &c),
            Verdict::ShouldEject(EjectReason::ConsecutiveFailures(5))
        );
        assert!(s.in_rotation(), "strikes alone do not take it out");
        let p = s.eject(t0, &c).unwrap();
        assert!(s.eject(t0, &c).is_none(), "only once");
        assert!(s.is_ejected());
        assert!(!s.in_rotation());
        assert!(!s.admits(|| t0 + p / 2, LEASE));
        // A call that started before the ejection says nothing.
        let before = t0 - Duration::from_millis(5);
        assert_eq!(end(&st, Outcome::Success, before, t0, &c), Verdict::Stay);
        let t1 = t0 + p + Duration::from_millis(1);
        assert!(
            s.admits(|| t1, LEASE),
            "the first pick after the penalty probes"
        );
        assert!(!s.admits(|| t1, LEASE), "one probe at a time");
        assert!(!s.in_rotation(), "a probe is out");
        assert_eq!(end(&st, Outcome::Success, t1, t1, &c), Verdict::Readmitted);
        assert!(s.in_rotation());
        assert!(!s.is_ejected());
        assert_eq!(s.ejections(), 0);
        assert!(s.admits(|| unreachable!("no clock read while healthy"), LEASE));
    }

    #[test]
    fn a_failed_probe_reejects_for_longer_and_a_lost_probe_expires() {
        let c = OutlierConfig::default();
        let st = InstanceStats::new();
        let s = st.outlier();
        let t0 = Instant::now();
        let p1 = s.eject(t0, &c).unwrap();
        let t1 = t0 + p1 + Duration::from_millis(1);
        assert!(s.admits(|| t1, LEASE));
        // Other failures while the probe is out do not count; the probe's does.
        let Verdict::Reejected(p2) = end(&st, Outcome::Strike, t1, t1, &c) else {
            panic!("probe failure must re-eject")
        };
        assert!(
            p2 >= Duration::from_secs(48) && p2 < Duration::from_secs(72),
            "{p2:?}"
        );
        assert_eq!(s.ejections(), 2);
        // A probe that never reports back frees the instance after the lease.
        let t2 = t1 + p2 + Duration::from_millis(1);
        assert!(s.admits(|| t2, LEASE));
        assert!(!s.admits(|| t2 + LEASE / 2, LEASE));
        assert!(s.admits(|| t2 + LEASE + Duration::from_millis(1), LEASE));
    }

    #[test]
    fn the_window_counts_the_successes_of_the_statistics_across_their_wrap() {
        let c = OutlierConfig {
            consecutive_failures: 0,
            minimum_volume: 10,
            ..OutlierConfig::default()
        };
        let s = OutlierState::default();
        let t0 = Tick::of(Instant::now());
        // The instance's count (modulo 2^32) passes its wrap inside the window: 9 successes
        // and 3 strikes are 12 outcomes at 75%.
        let mut successes = u32::MAX - 4;
        for _ in 0..9 {
            successes = successes.wrapping_add(1);
            assert_eq!(
                s.record(Outcome::Success, t0, t0, &c, successes),
                Verdict::Stay
            );
        }
        assert_eq!(
            s.record(Outcome::Strike, t0, t0, &c, successes),
            Verdict::Stay
        );
        assert_eq!(
            s.record(Outcome::Strike, t0, t0, &c, successes),
            Verdict::Stay
        );
        let v = s.record(Outcome::Strike, t0, t0, &c, successes);
        assert!(
            matches!(v, Verdict::ShouldEject(EjectReason::SuccessRate { volume: 12, rate }) if rate == 0.75),
            "{v:?}"
        );
        // Successes counted before the window's first outcome are not in it: a new half a
        // whole window later starts where the count stands.
        let later = Tick::from_nanos(t0.as_nanos() + 60_000_000_000);
        successes = successes.wrapping_add(1_000);
        assert_eq!(
            s.record(Outcome::Strike, later, later, &c, successes),
            Verdict::Stay
        );
        for k in 0..9 {
            let v = s.record(Outcome::Strike, later, later, &c, successes);
            let expected = if k < 8 {
                Verdict::Stay
            } else {
                Verdict::ShouldEject(EjectReason::SuccessRate {
                    rate: 0.0,
                    volume: 10,
                })
            };
            assert_eq!(v, expected, "strike {k}");
        }
    }

    #[test]
    fn success_rate_needs_the_minimum_volume() {
        let c = OutlierConfig {
            consecutive_failures: 0,
            ..OutlierConfig::default()
        };
        let st = InstanceStats::new();
        let t0 = Instant::now();
        // 3 of 4 succeed (75%), but only 16 outcomes: not enough.
        for k in 0..16 {
            let o = if k % 4 == 3 {
                Outcome::Strike
            } else {
                Outcome::Success
            };
            assert_eq!(end(&st, o, t0, t0, &c), Verdict::Stay, "call {k}");
        }
        for _ in 0..3 {
            end(&st, Outcome::Success, t0, t0, &c);
        }
        let v = end(&st, Outcome::Strike, t0, t0, &c);
        assert!(
            matches!(v, Verdict::ShouldEject(EjectReason::SuccessRate { volume: 20, rate }) if rate == 0.75),
            "{v:?}"
        );
        // The window forgets: a minute later the old outcomes are gone.
        let later = t0 + Duration::from_secs(60);
        assert_eq!(end(&st, Outcome::Strike, later, later, &c), Verdict::Stay);
    }
}
