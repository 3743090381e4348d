//! One call in progress: what a strategy uses to pick instances and make attempts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{Error, ErrorKind, Invocation, Result};
use switchman_discovery::Snapshot;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{Instrument, debug, info_span};

use crate::config::{Effective, MAX_ATTEMPTS};
use crate::invoker::Inner;
use crate::telemetry::{CallTelemetry, Outcome, System};

/// No new attempt starts when less than this remains of the call's deadline.
pub const DEADLINE_FLOOR: Duration = Duration::from_millis(5);

/// How much longer than the attempt timeout a claimed outlier probe keeps an ejected instance
/// reserved before another call may probe it (the probe was cancelled or never sent).
const PROBE_LEASE_MARGIN: Duration = Duration::from_secs(1);

/// The instances tried by one call, as indexes into the snapshot they were picked from, kept on
/// the stack. Remapped by address when the snapshot changes between attempts.
pub(crate) struct Tried {
    idx: [usize; MAX_ATTEMPTS],
    len: usize,
    snapshot: Option<Arc<Snapshot>>,
}

impl Tried {
    fn new() -> Self {
        Tried {
            idx: [0; MAX_ATTEMPTS],
            len: 0,
            snapshot: None,
        }
    }

    fn sync(&mut self, snap: &Arc<Snapshot>) {
        if let Some(old) = &self.snapshot {
            if old.epoch() == snap.epoch() {
                return;
            }
            let mut n = 0;
            for k in 0..self.len {
                let key = old.endpoints()[self.idx[k]].instance.key();
                if let Some(i) = snap.index_of(key) {
                    self.idx[n] = i;
                    n += 1;
                }
            }
            self.len = n;
        }
        self.snapshot = Some(snap.clone());
    }

    fn as_slice(&self) -> &[usize] {
        &self.idx[..self.len]
    }

    fn contains(&self, i: usize) -> bool {
        self.as_slice().contains(&i)
    }

    fn push(&mut self, i: usize) {
        if self.len < MAX_ATTEMPTS && !self.contains(i) {
            self.idx[self.len] = i;
            self.len += 1;
        }
    }

    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// Makes single attempts. Cheap to copy; holds no state of the call, so several attempts can
/// run at once (forking, hedging) while the [`Call`] picks the next instance.
#[derive(Clone, Copy)]
pub struct Attempter<'c> {
    inner: &'c Inner,
    invocation: &'c Invocation,
    settings: &'c Effective,
    deadline: Option<Instant>,
    telemetry: &'c CallTelemetry,
}

impl std::fmt::Debug for Attempter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempter")
            .field("method", &self.invocation.method)
            .finish()
    }
}

impl<'c> Attempter<'c> {
    /// Asks for a retry (see [`Call::retry_allowed`]); for strategies whose attempts run at
    /// once, each with its own retries (mergeable's groups).
    pub fn retry_allowed(&self) -> bool {
        if self
            .deadline
            .is_some_and(|d| d.saturating_duration_since(Instant::now()) < DEADLINE_FLOOR)
        {
            return false;
        }
        if self.inner.budget.as_ref().is_none_or(|b| b.withdraw()) {
            self.inner.metrics.retries.increment(1);
            true
        } else {
            self.inner.metrics.budget_refused.increment(1);
            debug!(method = %self.invocation.method, "retry refused by the retry budget");
            false
        }
    }

    /// One attempt on endpoint `i` of `snap`: bounded by the per-attempt timeout and what is
    /// left of the deadline; in-flight and outcome recorded on the instance's live stats.
    pub async fn attempt(self, snap: &Snapshot, i: usize) -> Result<Value> {
        let ep = &snap.endpoints()[i];
        // The timeout for this instance: its own registration may set it (Dubbo reads it
        // from the URL of the instance being called), precomputed per snapshot.
        let mut timeout = self
            .inner
            .limits(self.settings, &self.invocation.method, snap, i)
            .timeout;
        if let Some(d) = self.deadline {
            let left = d.saturating_duration_since(Instant::now());
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
        let started = Instant::now();
        let guard = ep.stats.begin();
        let fut = self
            .inner
            .invoker
            .invoke(&ep.instance, self.invocation, timeout);
        let result = match tokio::time::timeout(timeout, fut)
            .instrument(span.clone())
            .await
        {
            Ok(r) => r,
            Err(_) => Err(Error::timeout(format!(
                "{} did not answer {} within {timeout:?}",
                ep.instance.address(),
                self.invocation.method
            ))),
        };
        let elapsed = started.elapsed();
        let outcome = Outcome::of(&result);
        let target = (
            ep.instance.address(),
            ep.instance.host(),
            ep.instance.port(),
        );
        self.inner
            .metrics
            .record_attempt(&self.telemetry.series, system, target, outcome, elapsed);
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
        guard.finish(elapsed, served);
        self.inner.record_outlier(snap, i, &result, started);
        if served {
            self.inner.latency.record(elapsed);
        }
        if let Err(e) = &result {
            debug!(address = ep.instance.address(), method = %self.invocation.method, error = %e, "attempt failed");
        }
        result
    }
}

/// One call in progress, handed to a strategy ([`crate::ClusterStrategy`]).
///
/// It loads snapshots, routes and picks (skipping instances this call already tried while
/// untried ones remain, honouring `sticky` and `actives`), makes attempts through an
/// [`Attempter`], and asks the service's retry budget and the call's deadline before a retry.
pub struct Call<'c> {
    inner: &'c Inner,
    invocation: &'c Invocation,
    settings: &'c Effective,
    telemetry: &'c CallTelemetry,
    deadline: Option<Instant>,
    rng: fastrand::Rng,
    tried: Tried,
    failed: Vec<String>,
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
        inner: &'c Inner,
        invocation: &'c Invocation,
        settings: &'c Effective,
        telemetry: &'c CallTelemetry,
    ) -> Self {
        Call {
            inner,
            invocation,
            settings,
            telemetry,
            deadline: settings.deadline.map(|d| Instant::now() + d),
            rng: fastrand::Rng::new(),
            tried: Tried::new(),
            failed: Vec::new(),
        }
    }

    pub(crate) fn inner(&self) -> &'c Inner {
        self.inner
    }

    /// The invocation.
    pub fn invocation(&self) -> &'c Invocation {
        self.invocation
    }

    /// The resolved settings for this call.
    pub fn settings(&self) -> &'c Effective {
        self.settings
    }

    /// The directory's current snapshot (one atomic load).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.directory.load()
    }

    /// An attempter for this call.
    pub fn attempter(&self) -> Attempter<'c> {
        Attempter {
            inner: self.inner,
            invocation: self.invocation,
            settings: self.settings,
            deadline: self.deadline,
            telemetry: self.telemetry,
        }
    }

    /// What is left of the call's deadline, if it has one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The routed candidates (indexes into `snap.endpoints()`, address order).
    pub fn candidates(&mut self, snap: &Arc<Snapshot>) -> Result<Arc<[u32]>> {
        snap.candidates(self.invocation, &mut self.rng)
    }

    /// Routes and picks one endpoint of `snap` and marks it tried. Avoids endpoints already
    /// tried while untried ones remain; skips instances at their `actives` cap and fails with
    /// `LimitExceeded` when every one it finds is at the cap. Skips instances ejected as
    /// outliers (an ejected instance whose penalty is over is taken as its probe); when every
    /// candidate it finds is ejected, it takes one of them anyway: ejection never fails a call
    /// by itself.
    ///
    /// With `sticky` on, as Dubbo's `AbstractClusterInvoker.select`: the sticky instance is
    /// forgotten when routing does not give it to this call; otherwise it is taken when this
    /// call has not tried it yet and it is available (not at its cap, not ejected); and
    /// whatever is picked instead becomes the sticky instance (the selected one, whether or
    /// not its call then succeeds).
    pub fn select(&mut self, snap: &Arc<Snapshot>) -> Result<usize> {
        self.tried.sync(snap);
        if self.settings.sticky {
            if let Some(i) = self.sticky_pick(snap) {
                self.tried.push(i);
                return Ok(i);
            }
        }
        let i = self.pick(snap)?;
        if self.settings.sticky {
            self.inner.remember_sticky(&snap.endpoints()[i].instance);
        }
        Ok(i)
    }

    /// The sticky instance when routing gives it to this call and it may be used; forgets it
    /// when routing does not give it.
    fn sticky_pick(&mut self, snap: &Arc<Snapshot>) -> Option<usize> {
        let sticky = self.inner.sticky()?;
        let routed = snap.index_of(sticky.key()).filter(|&i| {
            snap.candidates(self.invocation, &mut self.rng)
                .is_ok_and(|members| members.binary_search(&(i as u32)).is_ok())
        });
        let Some(i) = routed else {
            self.inner.forget_sticky();
            return None;
        };
        (!self.tried.contains(i) && !self.at_cap(snap, i) && self.admitted(snap, i)).then_some(i)
    }

    fn pick(&mut self, snap: &Arc<Snapshot>) -> Result<usize> {
        let base = self.tried.len;
        let mut capped = false;
        let mut ejected = None;
        for _ in 0..MAX_ATTEMPTS {
            let i = snap.select(self.invocation, self.tried.as_slice(), &mut self.rng)?;
            if self.tried.contains(i) {
                // Every candidate was tried already (or skipped for its cap or ejection).
                break;
            }
            if self.at_cap(snap, i) {
                capped = true;
                self.tried.push(i);
                continue;
            }
            if !self.admitted(snap, i) {
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
        let i = snap.select(self.invocation, &[], &mut self.rng)?;
        Ok(i)
    }

    /// Routes and picks like [`Call::select`] but without marking the pick as tried (for
    /// strategies that look before they leap, such as zone-aware).
    pub fn peek(&mut self, snap: &Arc<Snapshot>) -> Result<usize> {
        self.tried.sync(snap);
        snap.select(self.invocation, self.tried.as_slice(), &mut self.rng)
    }

    /// Marks endpoint `i` of the last synced snapshot as tried.
    pub fn mark_tried(&mut self, i: usize) {
        self.tried.push(i);
    }

    /// Marks the endpoint with key `key` as tried, when `snap` holds it (a failback retry
    /// avoids the endpoint its previous attempt failed on).
    pub(crate) fn avoid(&mut self, snap: &Arc<Snapshot>, key: &str) {
        self.tried.sync(snap);
        if let Some(i) = snap.index_of(key) {
            self.tried.push(i);
        }
    }

    /// Whether outlier ejection lets a call go to endpoint `i` (one atomic load for an
    /// instance in rotation; claims the probe of an instance whose penalty is over).
    pub(crate) fn admitted(&self, snap: &Snapshot, i: usize) -> bool {
        !self.inner.outlier.enabled
            || snap.endpoints()[i].stats.outlier().admits(
                || Instant::now().into_std(),
                self.inner
                    .limits(self.settings, &self.invocation.method, snap, i)
                    .timeout
                    + PROBE_LEASE_MARGIN,
            )
    }

    /// Whether endpoint `i` is at its `actives` cap (the instance's own registration may set
    /// the cap, precomputed per snapshot).
    fn at_cap(&self, snap: &Snapshot, i: usize) -> bool {
        self.inner
            .limits(self.settings, &self.invocation.method, snap, i)
            .actives
            .is_some_and(|cap| snap.endpoints()[i].stats.active() >= cap)
    }

    /// Records that the attempt on endpoint `i` of `snap` failed (for the final error).
    pub fn note_failure(&mut self, snap: &Snapshot, i: usize) {
        self.failed
            .push(snap.endpoints()[i].instance.address().to_string());
    }

    /// Asks for a retry: the deadline must leave time and the service's retry budget must
    /// allow it. A refusal is counted.
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
