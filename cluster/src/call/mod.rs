//! One call in progress: what a strategy uses to pick instances and make attempts.
//!
//! A strategy gets endpoints only as [`Pick`]s, which routing hands out and which borrow the
//! snapshot they were routed in: a pick cannot be used with another snapshot or outlive its
//! own. Attempts go through an [`Attempter`], which enforces the call's deadline on every
//! attempt and the service's retry budget on every attempt after the first, so a strategy
//! cannot retry past them (asking [`Call::retry_allowed`] first lets it stop with its own
//! error instead of the budget's).

use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;
use switchman_core::{Error, ErrorKind, Invocation, Invoker, Result, Tick};
use switchman_discovery::{Balancing, Routed};
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{debug, info_span};

use crate::config::{Effective, Hedge, MAX_ATTEMPTS};
use crate::plan::Plan;
use crate::shared::Shared;
use crate::telemetry::{CallTelemetry, InSpan, Outcome, System};

mod pick;
mod tried;

pub use pick::{Candidates, Pick};
pub(crate) use tried::Tried;

/// No new attempt starts when less than this remains of the call's deadline.
pub const DEADLINE_FLOOR: Duration = Duration::from_millis(5);

/// How much longer than the attempt timeout a claimed outlier probe keeps an ejected instance
/// reserved before another call may probe it (the probe was cancelled or never sent).
const PROBE_LEASE_MARGIN: Duration = Duration::from_secs(1);

/// What the attempts of one call have used so far, shared by every [`Attempter`] of the call
/// (attempts may run at once): attempts started, retries granted by [`Call::retry_allowed`]
/// and not yet used, retries taken without asking; and the call's clock.
///
/// The clock: a call reads it when it starts; the built-in strategies go from there to their
/// first attempt without waiting, so that attempt takes the call's start as its own (the
/// routing before it, a few hundred nanoseconds, is then in its latency) instead of reading
/// the clock again, and the call takes the end of its last attempt as its own end. A custom
/// strategy may wait before its first attempt: its attempts read the clock themselves.
#[derive(Debug)]
pub(crate) struct AttemptBook {
    started: AtomicU32,
    granted: AtomicU32,
    unasked: AtomicU32,
    /// When the call started.
    call_start: Instant,
    /// The same, on the bookkeeping clock.
    call_tick: Tick,
    /// Whether the first attempt may take `call_start` as its start (built-in strategies).
    lend_start: bool,
    /// The start was taken by an attempt.
    start_taken: std::sync::atomic::AtomicBool,
    /// Nanoseconds from `call_tick` to the end of the latest attempt, plus one (0: none yet).
    last_end: std::sync::atomic::AtomicU64,
}

impl AttemptBook {
    /// The book of a call that started at `call_start`; `lend_start`: its first attempt may
    /// take that instant as its own start (see the type's docs).
    pub(crate) fn new(call_start: Instant, lend_start: bool) -> Self {
        AttemptBook {
            started: AtomicU32::new(0),
            granted: AtomicU32::new(0),
            unasked: AtomicU32::new(0),
            call_start,
            call_tick: Tick::of(call_start.into_std()),
            lend_start,
            start_taken: std::sync::atomic::AtomicBool::new(false),
            last_end: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// When the call started.
    pub(crate) fn call_start(&self) -> Instant {
        self.call_start
    }

    /// When the call started, on the bookkeeping clock.
    pub(crate) fn call_tick(&self) -> Tick {
        self.call_tick
    }

    /// An attempt's start: the call's for the first attempt of a built-in strategy (a plain
    /// load and store: two attempts of a fork racing here both take it, having started at
    /// that moment alike), else the clock.
    #[inline]
    fn attempt_start(&self) -> (Instant, Tick) {
        if self.lend_start && !self.start_taken.load(Ordering::Relaxed) {
            self.start_taken.store(true, Ordering::Relaxed);
            return (self.call_start, self.call_tick);
        }
        let now = Instant::now();
        (now, Tick::of(now.into_std()))
    }

    /// No attempt takes the call's start any more (the call did other work first: the
    /// `APPLICATION_FIRST` fallback's plan).
    pub(crate) fn forgo_start(&self) {
        self.start_taken.store(true, Ordering::Relaxed);
    }

    /// Notes that an attempt ended at `ended`.
    #[inline]
    fn attempt_ended(&self, ended: Tick) {
        let ns = ended.as_nanos().saturating_sub(self.call_tick.as_nanos());
        self.last_end
            .store(ns.min(u64::MAX - 1) + 1, Ordering::Relaxed);
    }

    /// How long the call took: to the end of its latest attempt, or to now when it made none
    /// (or when it waited after the attempt: a custom strategy).
    pub(crate) fn call_elapsed(&self) -> Duration {
        match self.last_end.load(Ordering::Relaxed) {
            0 => self.call_start.elapsed(),
            _ if !self.lend_start => self.call_start.elapsed(),
            n => Duration::from_nanos(n - 1),
        }
    }

    /// Whether no attempt of the call has sent anything so far (each one ended before
    /// sending: [`Error::is_unavailable`]), or none was made.
    pub(crate) fn nothing_sent(&self) -> bool {
        self.started.load(Ordering::Acquire) == 0
    }

    /// Uses one granted retry, if any is left.
    fn take_grant(&self) -> bool {
        self.granted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| g.checked_sub(1))
            .is_ok()
    }
}

/// Makes single attempts. Cheap to copy; holds no state of the call, so several attempts can
/// run at once (forking, hedging) while the [`Call`] picks the next instance.
///
/// The first attempt of a call is free; every later one is a retry and needs a retry the
/// budget allows: one granted by [`Call::retry_allowed`] (or [`Attempter::retry_allowed`])
/// beforehand, or, when the strategy did not ask, one withdrawn by the attempt itself, which
/// otherwise fails at once with [`ErrorKind::LimitExceeded`] (not retryable) without calling
/// anyone. Retries taken without asking are also capped at [`MAX_ATTEMPTS`] per call. No
/// attempt starts with less than [`DEADLINE_FLOOR`] left of the call's deadline.
#[derive(Clone, Copy)]
pub struct Attempter<'c> {
    shared: &'c Shared,
    invocation: &'c Invocation,
    settings: &'c Effective,
    deadline: Option<Instant>,
    telemetry: &'c CallTelemetry<'c>,
    book: &'c AttemptBook,
    /// Attempts of one wave (forking, broadcast, the groups of a merging call): not retries.
    fan_out: bool,
}

impl std::fmt::Debug for Attempter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempter")
            .field("method", &self.invocation.method)
            .field("fan_out", &self.fan_out)
            .finish()
    }
}

impl<'c> Attempter<'c> {
    /// Asks for a retry (see [`Call::retry_allowed`]); for strategies whose attempts run at
    /// once, each with its own retries (mergeable's groups). A granted retry is used by the
    /// next attempt after the first.
    pub fn retry_allowed(&self) -> bool {
        let ok = self.withdraw();
        if ok {
            self.book.granted.fetch_add(1, Ordering::AcqRel);
        }
        ok
    }

    /// Whether the deadline leaves time and the budget has a retry (withdrawn); counted.
    fn withdraw(&self) -> bool {
        if self
            .deadline
            .is_some_and(|d| d.saturating_duration_since(Instant::now()) < DEADLINE_FLOOR)
        {
            return false;
        }
        if self.shared.budget.as_ref().is_none_or(|b| b.withdraw()) {
            self.shared.metrics.retries.increment(1);
            true
        } else {
            self.shared.metrics.budget_refused.increment(1);
            debug!(method = %self.invocation.method, "retry refused by the retry budget");
            false
        }
    }

    /// Attempts of one wave: each is a first attempt, not a retry (forking's forks, every
    /// instance of a broadcast, each group of a merging call).
    pub(crate) fn fan_out(self) -> Self {
        Attempter {
            fan_out: true,
            ..self
        }
    }

    /// The budget and deadline check of an attempt after the first that no grant covers.
    fn unasked_retry(&self, pick: Pick<'_>) -> Result<()> {
        let address = pick.instance().address();
        let n = self.book.unasked.fetch_add(1, Ordering::AcqRel) as usize + 1;
        if n >= MAX_ATTEMPTS {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "retry of {} on {address} refused: {MAX_ATTEMPTS} attempts is the most one call makes",
                    self.invocation.method
                ),
            )
            .with_retryable(false));
        }
        if self.withdraw() {
            return Ok(());
        }
        if self
            .deadline
            .is_some_and(|d| d.saturating_duration_since(Instant::now()) < DEADLINE_FLOOR)
        {
            return Err(Error::timeout(format!(
                "deadline of {} reached before a retry on {address}",
                self.invocation.method
            ))
            .with_retryable(false));
        }
        Err(Error::new(
            ErrorKind::LimitExceeded,
            format!(
                "retry of {} on {address} refused by the retry budget of {}",
                self.invocation.method,
                pick.snapshot().service()
            ),
        )
        .with_retryable(false))
    }

    /// One attempt on `pick`: bounded by the per-attempt timeout and what is left of the
    /// deadline; in-flight and outcome recorded on the instance's live stats. An attempt after
    /// the call's first needs a retry from the budget (see [`Attempter`]).
    pub async fn attempt(self, pick: Pick<'_>) -> Result<Value> {
        let started_before = self.book.started.fetch_add(1, Ordering::AcqRel);
        if started_before > 0
            && !self.fan_out
            && !self.book.take_grant()
            && let Err(e) = self.unasked_retry(pick)
        {
            self.book.started.fetch_sub(1, Ordering::AcqRel);
            return Err(e);
        }
        let (plan, i) = (pick.plan, pick.index);
        let snap = plan.snapshot();
        let ep = &snap.endpoints()[i];
        // The timeout for this instance: its own registration may set it (Dubbo reads it
        // from the URL of the instance being called), precomputed in the plan.
        let limits = plan.limits(self.settings, &self.invocation.method, i);
        let mut timeout = limits.timeout;
        // One clock read (or the call's, for its first attempt) for the deadline's check, the
        // attempt's start and its timer.
        let (started, started_tick) = self.book.attempt_start();
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(started);
            if left < DEADLINE_FLOOR {
                return Err(Error::timeout(format!(
                    "deadline of {} reached before an attempt on {}",
                    self.invocation.method,
                    ep.instance.address()
                ))
                .with_retryable(false));
            }
            timeout = timeout.min(left);
        }
        let system = System::of(ep.instance.protocol());
        let number = self.telemetry.begin_attempt(system);
        let span = info_span!(
            "attempt",
            endpoint = ep.instance.address(),
            attempt = number,
            rpc.system = system.as_str(),
            otel.kind = "client",
            outcome = Empty,
            error_type = Empty,
        );
        // Counted for `poll_ready` only when the endpoint has a cap.
        let _room = limits.actives.map(|_| self.shared.room.enter());
        let guard = ep.stats.begin();
        // The endpoint's own client when the directory made one, else the shared transport.
        let client: &dyn Invoker = match &ep.service {
            Some(service) => &**service,
            None => &*self.shared.invoker,
        };
        let fut = client.invoke(&ep.instance, self.invocation, timeout);
        // Polled in the span through a reference (no clone of the span, no second entry to
        // drop it in); each future is dropped as soon as it is done, as before.
        let result = if client.bounds_timeout() {
            // The client's own timer bounds it: no second one.
            let mut fut = fut;
            InSpan::new(&span, fut.as_mut()).await
        } else {
            let bounded = pin!(tokio::time::timeout_at(
                crate::config::deadline_from(started, timeout),
                fut
            ));
            match InSpan::new(&span, bounded).await {
                Ok(r) => r,
                Err(_) => Err(Error::timeout(format!(
                    "{} did not answer {} within {timeout:?}",
                    ep.instance.address(),
                    self.invocation.method
                ))),
            }
        };
        // One clock read for the latency, the balancer's statistics, outlier detection and
        // the call's end, converted once: what follows is arithmetic on ticks.
        let ended = Tick::of(Instant::now().into_std());
        self.book.attempt_ended(ended);
        let elapsed = ended.saturating_since(started_tick);
        let outcome = Outcome::of(&result);
        self.shared.metrics.record_attempt(
            &self.telemetry.series,
            system,
            &ep.instance,
            outcome,
            elapsed,
        );
        if !span.is_disabled() {
            span.record("outcome", outcome.as_str());
            if let Some(t) = outcome.error_type() {
                span.record("error_type", t);
            }
        }
        let served = match &result {
            Ok(_) => true,
            Err(e) => e.is_business(),
        };
        guard.finish_at(elapsed, served, ended);
        self.shared
            .record_outlier(snap, i, &result, started_tick, ended);
        // The service's latency histogram is what a `hedge=p95` delay reads: kept by the
        // calls that hedge so (one shared count less for every other call).
        if served && matches!(self.settings.hedge, Some(Hedge::P95)) {
            self.shared.latency.record(elapsed);
        }
        if let Err(e) = &result {
            debug!(address = ep.instance.address(), method = %self.invocation.method, error = %e, "attempt failed");
            if e.is_unavailable() {
                // Nothing was sent: not an attempt, the next one needs no retry.
                self.book.started.fetch_sub(1, Ordering::AcqRel);
            }
        }
        result
    }
}

/// One call in progress, handed to a strategy ([`crate::ClusterStrategy`]).
///
/// It holds the plan the call started with (and loads the current one for a strategy that
/// re-lists), routes and picks (skipping instances this call already tried while
/// untried ones remain, honouring `sticky`, `actives` and the balancer the settings name for
/// the method), makes attempts through an [`Attempter`], and asks the service's retry budget
/// and the call's deadline before a retry.
pub struct Call<'c> {
    shared: &'c Shared,
    plan: &'c Plan,
    invocation: &'c Invocation,
    settings: &'c Effective,
    telemetry: &'c CallTelemetry<'c>,
    book: &'c AttemptBook,
    deadline: Option<Instant>,
    rng: fastrand::Rng,
    tried: Tried<'c>,
    failed: Vec<String>,
    /// The call runs on the `APPLICATION_FIRST` fallback's plan: it re-lists there.
    on_fallback: bool,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.invocation.method)
            .field("failed", &self.failed)
            .finish()
    }
}

impl<'c> Call<'c> {
    pub(crate) fn new(
        shared: &'c Shared,
        plan: &'c Plan,
        invocation: &'c Invocation,
        settings: &'c Effective,
        telemetry: &'c CallTelemetry<'c>,
        book: &'c AttemptBook,
    ) -> Self {
        Call {
            shared,
            plan,
            invocation,
            settings,
            telemetry,
            book,
            deadline: settings
                .deadline
                .map(|d| crate::config::deadline_from(book.call_start(), d)),
            rng: fastrand::Rng::new(),
            tried: Tried::new(plan.snapshot()),
            failed: Vec::new(),
            on_fallback: false,
        }
    }

    /// This call on the `APPLICATION_FIRST` fallback's plan: it re-lists there, and keeps
    /// `deadline` (the whole call's, when it moved there from the directory's plan).
    pub(crate) fn on_fallback(mut self, deadline: Option<Option<Instant>>) -> Self {
        self.on_fallback = true;
        if let Some(d) = deadline {
            self.deadline = d;
        }
        self
    }

    /// The whole call's deadline.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub(crate) fn shared(&self) -> &'c Shared {
        self.shared
    }

    /// The invocation.
    pub fn invocation(&self) -> &'c Invocation {
        self.invocation
    }

    /// The resolved settings for this call.
    pub fn settings(&self) -> &'c Effective {
        self.settings
    }

    /// The plan the call started with: the snapshot the call's settings were read from
    /// (no load).
    pub fn plan(&self) -> &'c Plan {
        self.plan
    }

    /// The plan of the directory's current snapshot, for a strategy that re-lists before a
    /// retry (failover does, as Dubbo's does): a retry sees instances that came or went
    /// meanwhile. Picks in it use its settings for the method, under this call's attachments.
    pub fn relist(&self) -> Plan {
        if self.on_fallback {
            return self
                .shared
                .fallback_plan()
                .unwrap_or_else(|| self.plan.clone());
        }
        self.shared.plan()
    }

    /// An attempter for this call.
    pub fn attempter(&self) -> Attempter<'c> {
        Attempter {
            shared: self.shared,
            invocation: self.invocation,
            settings: self.settings,
            deadline: self.deadline,
            telemetry: self.telemetry,
            book: self.book,
            fan_out: false,
        }
    }

    /// What is left of the call's deadline, if it has one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The routed candidates of `plan` for this call, in address order, for strategies that
    /// call every candidate or walk them in order (broadcast, available). Fails as
    /// [`Call::select`] does when there is none.
    pub fn candidates<'s>(&mut self, plan: &'s Plan) -> Result<Candidates<'s>> {
        let members = plan.snapshot().candidates(self.invocation, &mut self.rng)?;
        Ok(Candidates { plan, members })
    }

    /// Routes and picks one endpoint of `plan` and marks it tried. Avoids endpoints already
    /// tried while untried ones remain; skips instances at their `actives` cap and fails with
    /// `LimitExceeded` when every one it finds is at the cap. Skips instances ejected as
    /// outliers (an ejected instance whose penalty is over is taken as its probe); when every
    /// candidate it finds is ejected, it takes one of them anyway: ejection never fails a call
    /// by itself. The balancer is the one the settings resolve for the method and the routed
    /// subset (`loadbalance`, Dubbo's precedence), its tables built once per plan.
    ///
    /// With `sticky` on (read, as Dubbo's `AbstractClusterInvoker.select` reads it, with the
    /// first routed provider's registration as the provider layer): the sticky instance is
    /// forgotten when routing does not give it to this call; otherwise it is taken when this
    /// call has not tried it yet and it is available (not at its cap, not ejected); and
    /// whatever is picked instead becomes the sticky instance (the selected one, whether or
    /// not its call then succeeds).
    pub fn select<'s>(&mut self, plan: &'s Plan) -> Result<Pick<'s>> {
        let snap = plan.snapshot();
        self.tried.sync(snap);
        let routed = snap.route(self.invocation, &mut self.rng)?;
        let method = &self.invocation.method;
        let balancing = plan.balancing(self.settings, method);
        let sticky = match routed.first() {
            Some(f) => plan.limits(self.settings, method, f).sticky,
            None => false,
        };
        if sticky && let Some(i) = self.sticky_pick(plan, &routed) {
            self.tried.push(i);
            return Ok(Pick::new(plan, i));
        }
        let i = self.pick(plan, &routed, balancing)?;
        if sticky {
            self.shared.remember_sticky(&snap.endpoints()[i].instance);
        }
        Ok(Pick::new(plan, i))
    }

    /// Selects an endpoint of `plan` and makes one attempt on it, as Dubbo's
    /// `cluster.availablecheck` does for every strategy: when the endpoint could not take the
    /// call and nothing was sent ([`Error::is_unavailable`]: a provider shutting down, no
    /// connection), another untried one is selected, and that is not a retry (neither the
    /// strategy's `retries` nor the retry budget pays for it). Gives the last endpoint and its
    /// result; errors only when nothing could be selected at all.
    pub async fn attempt_available<'s>(
        &mut self,
        plan: &'s Plan,
    ) -> Result<(Pick<'s>, Result<Value>)> {
        let mut pick = self.select(plan)?;
        let mut skipped: Vec<usize> = Vec::new();
        loop {
            let result = self.attempter().attempt(pick).await;
            match &result {
                Err(e) if e.is_unavailable() && skipped.len() < MAX_ATTEMPTS => {
                    skipped.push(pick.index());
                    match self.select(plan) {
                        Ok(next) if !skipped.contains(&next.index()) => pick = next,
                        // Every candidate was unavailable: the last one's error.
                        _ => return Ok((pick, result)),
                    }
                }
                _ => return Ok((pick, result)),
            }
        }
    }

    /// The sticky instance when routing gives it to this call and it may be used; forgets it
    /// when routing does not give it.
    fn sticky_pick(&mut self, plan: &Plan, routed: &Routed<'_>) -> Option<usize> {
        let sticky = self.shared.sticky()?;
        let routed = plan
            .snapshot()
            .index_of(sticky.key())
            .filter(|&i| routed.contains(i));
        let Some(i) = routed else {
            self.shared.forget_sticky();
            return None;
        };
        (!self.tried.contains(i) && !self.at_cap(plan, i) && self.admitted(plan, i)).then_some(i)
    }

    fn pick(
        &mut self,
        plan: &Plan,
        routed: &Routed<'_>,
        balancing: Option<&Balancing>,
    ) -> Result<usize> {
        let snap = plan.snapshot();
        let base = self.tried.len;
        let mut capped = false;
        let mut ejected = None;
        for _ in 0..MAX_ATTEMPTS {
            let i = snap.pick(
                routed,
                balancing,
                self.invocation,
                self.tried.as_slice(),
                &mut self.rng,
            )?;
            if self.tried.contains(i) {
                // Every candidate was tried already (or skipped for its cap or ejection).
                break;
            }
            if self.at_cap(plan, i) {
                capped = true;
                self.tried.push(i);
                continue;
            }
            if !self.admitted(plan, i) {
                ejected.get_or_insert(i);
                self.tried.push(i);
                continue;
            }
            self.tried.truncate(base);
            self.tried.push(i);
            return Ok(i);
        }
        if let Some(i) = ejected {
            // Every candidate found is ejected (or at its cap): better an ejected instance
            // than no call at all.
            self.tried.truncate(base);
            self.tried.push(i);
            return Ok(i);
        }
        if capped {
            self.tried.truncate(base);
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "every provider of {} for {} is at its actives limit",
                    snap.service(),
                    self.invocation.method
                ),
            ));
        }
        self.tried.truncate(base);
        // All tried: do as Dubbo does and reuse the balancer's choice.
        snap.pick(routed, balancing, self.invocation, &[], &mut self.rng)
    }

    /// Routes and picks like [`Call::select`] but without marking the pick as tried (for
    /// strategies that look before they leap, such as zone-aware).
    pub fn peek<'s>(&mut self, plan: &'s Plan) -> Result<Pick<'s>> {
        let snap = plan.snapshot();
        self.tried.sync(snap);
        let routed = snap.route(self.invocation, &mut self.rng)?;
        let balancing = plan.balancing(self.settings, &self.invocation.method);
        let i = snap.pick(
            &routed,
            balancing,
            self.invocation,
            self.tried.as_slice(),
            &mut self.rng,
        )?;
        Ok(Pick::new(plan, i))
    }

    /// Marks `pick` as tried: later picks of this call avoid it while untried candidates
    /// remain.
    pub fn mark_tried(&mut self, pick: Pick<'_>) {
        if self.tried.is_unset() {
            self.tried.sync(self.plan.snapshot());
        }
        self.tried.push_pick(pick);
    }

    /// Marks the endpoint with key `key` as tried, when `plan` holds it (a failback retry
    /// avoids the endpoint its previous attempt failed on).
    pub(crate) fn avoid(&mut self, plan: &Plan, key: &str) {
        let snap = plan.snapshot();
        self.tried.sync(snap);
        if let Some(i) = snap.index_of(key) {
            self.tried.push(i);
        }
    }

    /// Whether outlier ejection lets a call go to `pick` now (one atomic load for an instance
    /// in rotation; claims the probe of an instance whose penalty is over, so ask only right
    /// before attempting it).
    pub fn admits(&self, pick: Pick<'_>) -> bool {
        self.admitted(pick.plan, pick.index)
    }

    /// Whether outlier ejection lets a call go to endpoint `i` (one atomic load for an
    /// instance in rotation; claims the probe of an instance whose penalty is over).
    pub(crate) fn admitted(&self, plan: &Plan, i: usize) -> bool {
        if !self.shared.outlier.enabled {
            return true;
        }
        let outlier = plan.snapshot().endpoints()[i].stats.outlier();
        outlier.in_rotation()
            || outlier.admits(
                || Instant::now().into_std(),
                plan.limits(self.settings, &self.invocation.method, i)
                    .timeout
                    + PROBE_LEASE_MARGIN,
            )
    }

    /// Whether endpoint `i` is at its `actives` cap (the instance's own registration may set
    /// the cap, precomputed in the plan).
    fn at_cap(&self, plan: &Plan, i: usize) -> bool {
        plan.limits(self.settings, &self.invocation.method, i)
            .actives
            .is_some_and(|cap| plan.snapshot().endpoints()[i].stats.active() >= cap)
    }

    /// Records that the attempt on `pick` failed (for the final error).
    pub fn note_failure(&mut self, pick: Pick<'_>) {
        self.failed.push(pick.instance().address().to_string());
    }

    /// Asks for a retry: the deadline must leave time and the service's retry budget must
    /// allow it. A refusal is counted. A granted retry is used by the next attempt after the
    /// first (an attempt that finds none asks the budget itself).
    pub fn retry_allowed(&mut self) -> bool {
        self.attempter().retry_allowed()
    }

    /// `e` with the addresses this call tried and failed on.
    pub fn fail(&mut self, e: Error) -> Error {
        let tried = std::mem::take(&mut self.failed);
        if tried.is_empty() {
            e
        } else {
            e.with_tried(tried)
        }
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    fn tick(at: Instant) -> Tick {
        Tick::of(at.into_std())
    }

    fn second_ago() -> Instant {
        Instant::now()
            .checked_sub(Duration::from_secs(1))
            .expect("a second after boot")
    }

    #[test]
    fn the_first_attempt_of_a_built_in_strategy_takes_the_calls_start() {
        let start = second_ago();
        let book = AttemptBook::new(start, true);
        assert_eq!(
            book.attempt_start(),
            (start, tick(start)),
            "the first attempt: the call's start"
        );
        assert!(
            book.attempt_start().0 >= start + Duration::from_millis(500),
            "later ones read the clock"
        );
        // The call ends with its last attempt.
        assert!(
            book.call_elapsed() >= Duration::from_millis(500),
            "no attempt ended yet"
        );
        book.attempt_ended(tick(start + Duration::from_millis(5)));
        book.attempt_ended(tick(start + Duration::from_millis(7)));
        assert_eq!(book.call_elapsed(), Duration::from_millis(7));
        book.attempt_ended(tick(start));
        assert_eq!(
            book.call_elapsed(),
            Duration::ZERO,
            "zero is a real end too"
        );
    }

    #[test]
    fn custom_strategies_and_a_fallback_read_the_clock() {
        let start = second_ago();
        let custom = AttemptBook::new(start, false);
        assert!(custom.attempt_start().0 >= start + Duration::from_millis(500));
        custom.attempt_ended(tick(start + Duration::from_millis(5)));
        assert!(
            custom.call_elapsed() >= Duration::from_millis(500),
            "a custom strategy may wait after its last attempt"
        );
        let fallback = AttemptBook::new(start, true);
        fallback.forgo_start();
        assert!(fallback.attempt_start().0 >= start + Duration::from_millis(500));
    }
}
