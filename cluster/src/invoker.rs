use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use serde_json::Value;
use switchman_core::{BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, Result};
use switchman_discovery::{Directory, Snapshot};
use switchman_loadbalance::outlier::{Outcome, Verdict};
use switchman_loadbalance::{EjectionCount, LoadBalance, OutlierConfig};
use tracing::field::Empty;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::budget::{BudgetConfig, RetryBudget};
use crate::call::{AttemptBook, Call};
use crate::config::{
    BalancerSpec, ClusterConfig, Dynamic, Effective, Limits, Mock, MockAction, ProviderKeys,
    apply_attachments, equivalent,
};
use crate::readiness::Room;
use crate::strategy;
use crate::telemetry::{self, CallTelemetry, Metrics};

/// A user merger for the `mergeable` strategy.
pub type MergerFn = Arc<dyn Fn(Vec<Value>) -> Result<Value> + Send + Sync>;

/// A user-defined cluster strategy. Implement it and pass it to
/// [`ClusterInvoker::with_strategy`]; no registry of names to patch.
///
/// A strategy sees endpoints only as [`Pick`](crate::Pick)s from routing, tied to their
/// snapshot, and every attempt after the first of a call is a retry the service's retry
/// budget must allow: the [`Attempter`](crate::Attempter) checks it (and the call's deadline)
/// whatever the strategy does.
pub trait ClusterStrategy: Send + Sync + fmt::Debug {
    /// Runs one call: pick instances with `call.select` (or walk `call.candidates`), attempt
    /// them with `call.attempter().attempt(pick)`, ask `call.retry_allowed()` before retrying
    /// to stop with your own error when the budget says no.
    fn call<'a, 'c>(&'a self, call: &'a mut Call<'c>) -> BoxFuture<'a, Result<Value>>;
}

/// Successful-latency histogram with power-of-two microsecond buckets (lock-free), for the
/// hedging policy's observed p95.
pub(crate) struct Latency {
    buckets: [AtomicU64; 40],
}

impl Latency {
    fn new() -> Self {
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

struct Resolved {
    /// The [`Snapshot::id`] resolved for.
    snapshot: u64,
    default: Arc<Effective>,
    methods: HashMap<String, Arc<Effective>>,
}

pub(crate) struct Inner {
    pub(crate) directory: Arc<dyn Directory>,
    pub(crate) invoker: Arc<dyn Invoker>,
    config: ClusterConfig,
    pub(crate) budget: Option<RetryBudget>,
    pub(crate) metrics: Metrics,
    pub(crate) latency: Latency,
    resolved: ArcSwapOption<Resolved>,
    /// The sticky instance (the last one selected while `sticky` is on).
    sticky: ArcSwapOption<Instance>,
    custom: Option<Arc<dyn ClusterStrategy>>,
    pub(crate) merger: Option<MergerFn>,
    pub(crate) failback_pending: AtomicUsize,
    pub(crate) outlier: OutlierConfig,
    /// Endpoints out of rotation, for the max-ejection-percent guard: two strikes at once
    /// cannot both pass it, without a lock.
    ejected: EjectionCount,
    /// The balancer object of each balancer setting seen, so that a snapshot builds one
    /// table set per balancer, shared by the methods naming it. Locked only while settings
    /// are resolved for a new snapshot.
    balancers: Mutex<Vec<(BalancerSpec, Arc<dyn LoadBalance>)>>,
    /// Attempts in flight to endpoints with an `actives` cap, for `poll_ready`.
    pub(crate) room: Room,
    pub(crate) this: Weak<Inner>,
}

/// Most balancer settings remembered (each distinct `loadbalance`/`hash.*` combination the
/// consumer or a provider names); past it, a balancer is built for the snapshot at hand.
const MAX_BALANCER_SPECS: usize = 64;

/// The longest pause between two failback retries (before jitter): Dubbo retries every 5 s;
/// doubling from 1 s without a cap reached 18 h by the 16th retry.
pub(crate) const MAX_FAILBACK_BACKOFF: Duration = Duration::from_secs(60);

impl Inner {
    /// Whether a call can be placed within the service's `actives` caps: always, unless
    /// every endpoint has a cap and this invoker's attempts in flight fill their sum.
    pub(crate) fn has_room(&self) -> bool {
        // Nothing counted in flight (always so without caps): every cap (at least 1) has room,
        // without resolving settings.
        let in_flight = self.room.in_flight() as u64;
        if in_flight == 0 {
            return true;
        }
        let snap = self.directory.snapshot();
        let settings = self.effective(&snap, "");
        match settings.capacity_at(snap.id()).flatten() {
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
        started: tokio::time::Instant,
        ended: tokio::time::Instant,
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
        let now = ended.into_std();
        let address = ep.instance.address();
        match state.record(outcome, started.into_std(), now, cfg) {
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
                let Some(penalty) = state.eject(now, cfg) else {
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

    /// The settings of `method` for `snap`: resolved once per snapshot (every method with
    /// settings of its own, each endpoint's registration read once, the balancer tables the
    /// settings name built or shared), then a map lookup.
    pub(crate) fn effective(&self, snap: &Snapshot, method: &str) -> Arc<Effective> {
        let cached = self.resolved.load();
        let resolved = match cached.as_ref() {
            Some(r) if r.snapshot == snap.id() => r.clone(),
            _ => {
                let r = Arc::new(self.resolve(snap));
                // An older snapshot (a call that started before a change) does not replace
                // the newer resolution.
                if cached.as_ref().is_none_or(|c| c.snapshot < r.snapshot) {
                    self.resolved.store(Some(r.clone()));
                }
                r
            }
        };
        resolved
            .methods
            .get(method)
            .unwrap_or(&resolved.default)
            .clone()
    }

    fn resolve(&self, snap: &Snapshot) -> Resolved {
        let snapshot = snap.id();
        let providers: Vec<ProviderKeys> = snap
            .endpoints()
            .iter()
            .map(|e| {
                ProviderKeys::parse(e.instance.params()).protocol(e.instance.protocol().as_str())
            })
            .collect();
        // What consumer rules set for this consumer, over its own settings.
        let dynamic = Dynamic::parse(snap.consumer_overrides(), snap.service());
        // The balancer of each distinct spec, looked up once for this resolution (endpoints
        // and methods mostly share one or two specs).
        let mut memo: Vec<(BalancerSpec, Option<Arc<dyn LoadBalance>>)> = Vec::new();
        let mut with_tables = |method: Option<&str>| {
            let mut e = self
                .config
                .resolve_for_snapshot_with(method, snapshot, &providers, &dynamic);
            if let Some(r) = e.resolved_for.as_mut()
                && let Some(specs) = r.specs.clone()
            {
                r.balancing = snap.balancing(|i| {
                    let spec = specs.get(i)?;
                    if let Some((_, b)) = memo.iter().find(|(s, _)| s == spec) {
                        return b.clone();
                    }
                    let b = self.balancer_for(spec, snap.balancer());
                    if memo.len() < MAX_BALANCER_SPECS {
                        memo.push((spec.clone(), b.clone()));
                    }
                    b
                });
            }
            Arc::new(e)
        };
        let methods = self
            .config
            .method_names(&providers, &dynamic)
            .into_iter()
            .map(|m| {
                let e = with_tables(Some(&m));
                (m, e)
            })
            .collect();
        let default = with_tables(None);
        Resolved {
            snapshot,
            default,
            methods,
        }
    }

    /// The balancer object for `spec` (`None`: the directory's `directory` builds the same
    /// tables), the same one every time for the same spec so that a snapshot shares its
    /// tables across the methods naming it.
    fn balancer_for(
        &self,
        spec: &BalancerSpec,
        directory: &Arc<dyn LoadBalance>,
    ) -> Option<Arc<dyn LoadBalance>> {
        if spec.is_directory() {
            return None;
        }
        let b = {
            let mut known = self.balancers.lock().unwrap_or_else(|e| e.into_inner());
            match known.iter().find(|(s, _)| s == spec) {
                // The directory's balancer may have changed since (set_balancer).
                Some((_, b)) if spec.build_needs(directory) => b.clone(),
                Some(_) => return None,
                None => {
                    let built = spec.build(directory)?;
                    if known.len() < MAX_BALANCER_SPECS {
                        known.push((spec.clone(), built.clone()));
                    }
                    built
                }
            }
        };
        (!equivalent(&b, directory)).then_some(b)
    }

    /// The timeout and actives cap of a call with `settings` to endpoint `i` of `snap`: from
    /// the settings when they were resolved for `snap` (an array read), else from the
    /// settings resolved for `snap` (the strategy re-listed and got a newer snapshot).
    #[inline]
    pub(crate) fn limits(
        &self,
        settings: &Effective,
        method: &str,
        snap: &Snapshot,
        i: usize,
    ) -> Limits {
        let mut l = match settings.limits_at(snap.id(), i) {
            Some(l) => l,
            None => {
                let fresh = self.effective(snap, method);
                fresh.limits_at(snap.id(), i).unwrap_or(Limits {
                    timeout: fresh.timeout,
                    actives: fresh.actives,
                    sticky: fresh.sticky,
                })
            }
        };
        if settings.timeout_forced {
            l.timeout = settings.timeout;
        }
        l
    }
}

/// Calls one service through its directory with a fault-tolerance strategy.
///
/// Per call: one snapshot load, settings resolved once per snapshot (a map lookup), the
/// strategy's attempts (each: route + O(1)/O(log n) pick + invoker call bounded by the
/// timeout and the deadline), mock/degrade on non-business failure. Cheap to clone.
pub struct ClusterInvoker {
    inner: Arc<Inner>,
    /// `poll_ready`'s registration while it waits for room (per clone, as tower expects).
    ready_wait: Option<crate::readiness::Wait>,
}

impl Clone for ClusterInvoker {
    fn clone(&self) -> Self {
        ClusterInvoker {
            inner: self.inner.clone(),
            ready_wait: None,
        }
    }
}

impl fmt::Debug for ClusterInvoker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterInvoker")
            .field("service", self.inner.directory.load().service())
            .field("custom_strategy", &self.inner.custom)
            .finish()
    }
}

impl ClusterInvoker {
    /// A cluster invoker over `directory`, calling instances through `invoker`, with the
    /// default retry budget (20% of calls + 10/s over 10 s).
    pub fn new(
        directory: Arc<dyn Directory>,
        invoker: Arc<dyn Invoker>,
        config: ClusterConfig,
    ) -> Self {
        Self::build(
            directory,
            invoker,
            Parts {
                budget: Some(BudgetConfig::default()),
                custom: None,
                merger: None,
                config,
                instance_metrics: false,
            },
        )
    }

    fn build(directory: Arc<dyn Directory>, invoker: Arc<dyn Invoker>, parts: Parts) -> Self {
        let Parts {
            budget,
            custom,
            merger,
            config,
            instance_metrics,
        } = parts;
        let service = directory.load().service().to_string();
        let inner = Arc::new_cyclic(|this| Inner {
            directory,
            invoker,
            outlier: config.outlier,
            config,
            budget: budget.map(RetryBudget::new),
            metrics: Metrics::new(service, instance_metrics),
            latency: Latency::new(),
            resolved: ArcSwapOption::empty(),
            sticky: ArcSwapOption::empty(),
            custom,
            merger,
            failback_pending: AtomicUsize::new(0),
            ejected: EjectionCount::new(),
            balancers: Mutex::new(Vec::new()),
            room: Room::default(),
            this: this.clone(),
        });
        ClusterInvoker {
            inner,
            ready_wait: None,
        }
    }

    fn rebuild(self, f: impl FnOnce(&mut Parts)) -> Self {
        let inner = &self.inner;
        let mut parts = Parts {
            budget: inner.budget.as_ref().map(|b| b.config()),
            custom: inner.custom.clone(),
            merger: inner.merger.clone(),
            config: inner.config.clone(),
            instance_metrics: inner.metrics.per_instance(),
        };
        f(&mut parts);
        Self::build(inner.directory.clone(), inner.invoker.clone(), parts)
    }

    /// Replaces the built-in strategies with your own (a new invoker with fresh state).
    pub fn with_strategy(self, strategy: impl ClusterStrategy + 'static) -> Self {
        self.rebuild(|p| p.custom = Some(Arc::new(strategy)))
    }

    /// Sets (or, with `None`, removes) the retry budget (a new invoker with fresh state).
    pub fn with_budget(self, budget: Option<BudgetConfig>) -> Self {
        self.rebuild(|p| p.budget = budget)
    }

    /// Labels the attempt-duration histogram with the instance called (`server_address`,
    /// `server_port`; off by default: one series per instance, method and outcome can be many
    /// series). A new invoker with fresh state. See [`crate::telemetry`].
    pub fn with_instance_metrics(self, on: bool) -> Self {
        self.rebuild(|p| p.instance_metrics = on)
    }

    /// A merger for the `mergeable` strategy: with it every group is called and their answers
    /// go to `merger` (it takes the place of `merger=true`; a named `merger` setting such as
    /// `list` or `map` still picks the built-in one).
    pub fn with_merger(
        self,
        merger: impl Fn(Vec<Value>) -> Result<Value> + Send + Sync + 'static,
    ) -> Self {
        self.rebuild(|p| p.merger = Some(Arc::new(merger)))
    }

    /// The directory this invoker reads.
    pub fn directory(&self) -> &Arc<dyn Directory> {
        &self.inner.directory
    }

    /// The effective settings for `method` under the current snapshot.
    pub fn settings(&self, method: &str) -> Arc<Effective> {
        self.inner.effective(&self.inner.directory.load(), method)
    }

    /// Retries the budget refused so far.
    pub fn budget_refused(&self) -> u64 {
        self.inner
            .budget
            .as_ref()
            .map(RetryBudget::refused)
            .unwrap_or(0)
    }

    /// Failback retries waiting in the background.
    pub fn failback_pending(&self) -> usize {
        self.inner.failback_pending.load(Ordering::Relaxed)
    }

    /// Makes one call.
    ///
    /// Recorded as one sample of `rpc_client_call_duration_seconds` (not when a forced mock
    /// answers without calling) and traced as an `info` span `call` (fields `rpc.service`,
    /// `rpc.method`, `cluster`, then `outcome`, `error_type` and `attempts`) around one `attempt`
    /// span per attempt. A failure answered by a `fail:` mock is recorded as the failure it
    /// was. See [`crate::telemetry`].
    pub async fn invoke(&self, invocation: &Invocation) -> Result<Value> {
        let inner = &*self.inner;
        let started = tokio::time::Instant::now();
        let snap = inner.directory.snapshot();
        let resolved = inner.effective(&snap, &invocation.method);
        drop(snap);
        let overridden = apply_attachments(&resolved, invocation)?;
        let settings = overridden.as_ref().unwrap_or(&resolved);
        if let Some(Mock::Force(action)) = &settings.mock {
            return run_mock(action, invocation, None);
        }
        if let Some(b) = &inner.budget {
            b.deposit();
        }
        let telemetry = CallTelemetry::new(inner.metrics.method(&invocation.method));
        let span = info_span!("call",
            rpc.service = inner.metrics.service(),
            rpc.method = %invocation.method,
            cluster = %settings.strategy,
            outcome = Empty,
            error_type = Empty,
            attempts = Empty,
        );
        let book = AttemptBook::new();
        let result = async {
            let mut call = Call::new(inner, invocation, settings, &telemetry, &book);
            match &inner.custom {
                Some(custom) => custom.call(&mut call).await,
                None => strategy::run(settings.strategy, &mut call).await,
            }
        }
        .instrument(span.clone())
        .await;
        let outcome = telemetry::Outcome::of(&result);
        telemetry
            .series
            .record_call(telemetry.system(), outcome, started.elapsed());
        if !span.is_disabled() {
            span.record("outcome", outcome.as_str());
            span.record("attempts", telemetry.attempts());
            if let Some(t) = outcome.error_type() {
                span.record("error_type", t);
            }
        }
        match (&result, &settings.mock) {
            (Err(e), Some(Mock::Fail(action))) if !e.is_business() => {
                info!(method = %invocation.method, error = %e, "call failed; answering with the mock");
                run_mock(action, invocation, Some(e))
            }
            _ => result,
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

struct Parts {
    budget: Option<BudgetConfig>,
    custom: Option<Arc<dyn ClusterStrategy>>,
    merger: Option<MergerFn>,
    config: ClusterConfig,
    instance_metrics: bool,
}

fn run_mock(action: &MockAction, invocation: &Invocation, cause: Option<&Error>) -> Result<Value> {
    match action {
        MockAction::Return(v) => Ok(v.clone()),
        MockAction::Throw(m) => Err(Error::business(format!(
            "mock for {}: {m}",
            invocation.method
        ))),
        MockAction::Fallback(f) => f(invocation, cause),
    }
}

impl Inner {
    /// Queues `invocation` for background retries (failback) after it failed on `failed` (an
    /// endpoint key; `None` when it failed before an attempt). Each retry avoids the instance the
    /// previous attempt failed on while another one is routable, as Dubbo's does. Returns
    /// `false` when the queue is full (the call is dropped, logged and counted).
    pub(crate) fn queue_failback(
        &self,
        invocation: &Invocation,
        settings: &Effective,
        cause: &Error,
        failed: Option<&str>,
    ) -> bool {
        let cap = settings.failbacktasks;
        let pending = self.failback_pending.fetch_add(1, Ordering::AcqRel);
        if pending >= cap || settings.retries == 0 {
            self.failback_pending.fetch_sub(1, Ordering::AcqRel);
            if settings.retries > 0 {
                self.metrics.failback_dropped.increment(1);
                warn!(method = %invocation.method, cap, error = %cause, "failback queue full; call dropped");
            }
            return false;
        }
        self.metrics.failback_pending.set((pending + 1) as f64);
        let weak = self.this.clone();
        let inv = invocation.clone();
        let retries = settings.retries;
        let settings = settings.clone();
        let mut last: Option<String> = failed.map(str::to_string);
        tokio::spawn(async move {
            let mut rng = fastrand::Rng::new();
            for k in 0..retries {
                // Jittered exponential backoff: 1 s, 2 s, 4 s ... up to a minute, each
                // ×[0.5, 1.5).
                let base = (Duration::from_secs(1) * 2u32.saturating_pow(k.min(6)))
                    .min(MAX_FAILBACK_BACKOFF);
                let delay = base.mul_f64(0.5 + rng.f64());
                tokio::time::sleep(delay).await;
                let Some(inner) = weak.upgrade() else { return };
                let telemetry = CallTelemetry::new(inner.metrics.method(&inv.method));
                let book = AttemptBook::new();
                let mut call = Call::new(&inner, &inv, &settings, &telemetry, &book);
                let outcome = async {
                    // A background retry is a retry: the service's budget decides, as for
                    // failover's (a refusal is counted and this retry is skipped).
                    if !call.retry_allowed() {
                        return Err(Error::new(
                            ErrorKind::LimitExceeded,
                            "failback retry refused by the retry budget",
                        ));
                    }
                    let snap = call.snapshot();
                    if let Some(a) = &last {
                        call.avoid(&snap, a);
                    }
                    let pick = call.select(&snap)?;
                    last = Some(pick.instance().key().to_string());
                    call.attempter().attempt(pick).await
                }
                .await;
                match outcome {
                    Ok(_) => {
                        info!(method = %inv.method, attempt = k + 1, "failback retry succeeded");
                        inner.finish_failback();
                        return;
                    }
                    Err(e) if e.is_business() || e.kind() == ErrorKind::BadConfig => {
                        warn!(method = %inv.method, error = %e, "failback retry got an answer that is not retryable; giving up");
                        inner.finish_failback();
                        return;
                    }
                    Err(e) => {
                        warn!(method = %inv.method, attempt = k + 1, error = %e, "failback retry failed")
                    }
                }
                if k + 1 == retries {
                    warn!(method = %inv.method, retries, "failback retries exhausted; call dropped");
                    inner.finish_failback();
                }
            }
        });
        true
    }

    fn finish_failback(&self) {
        let left = self.failback_pending.fetch_sub(1, Ordering::AcqRel) - 1;
        self.metrics.failback_pending.set(left as f64);
    }
}

impl RetryBudget {
    pub(crate) fn config(&self) -> BudgetConfig {
        self.config_copy()
    }
}

/// The cluster invoker as a `tower::Service`, so it composes with tower layers (timeouts,
/// rate limits, concurrency limits, load shedding, ...); each call runs
/// [`ClusterInvoker::invoke`].
///
/// `poll_ready` reflects the `actives` caps: when every endpoint has one (the service's
/// `actives` setting or the providers' own registrations) and this invoker's attempts in
/// flight fill their sum, it is pending until one ends, so `tower::load_shed` or a `Buffer`
/// can act before a call would find every provider full. Without caps it is always ready.
impl tower_service::Service<Invocation> for ClusterInvoker {
    type Response = Value;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Value>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        loop {
            if self.inner.has_room() {
                self.ready_wait = None;
                return Poll::Ready(Ok(()));
            }
            match &mut self.ready_wait {
                None => {
                    // Registered before the check above is repeated: an attempt ending in
                    // between wakes this registration.
                    self.ready_wait = Some(self.inner.room.wait());
                }
                Some(w) => match w.poll_wake(cx) {
                    Poll::Ready(()) => self.ready_wait = None,
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }

    fn call(&mut self, invocation: Invocation) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.invoke(&invocation).await })
    }
}
