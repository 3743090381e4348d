//! The cluster invoker: one call of a service from its plan to its answer (or its mock).

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use arc_swap::ArcSwapOption;
use serde_json::Value;
use switchman_core::{BoxFuture, Error, Invocation, Invoker, Result};
use switchman_discovery::{Directory, Snapshot};
use switchman_loadbalance::EjectionCount;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{debug, info, info_span};

use crate::budget::{BudgetConfig, RetryBudget};
use crate::call::{AttemptBook, Call};
use crate::config::{ClusterConfig, Effective, MergerFn, Mock, MockAction, apply_attachments};
use crate::plan::Planner;
use crate::readiness::Room;
use crate::shared::{Latency, Shared};
use crate::strategy::{self, ClusterStrategy};
use crate::telemetry::{self, CallTelemetry, InSpan, Metrics};

/// Calls one service through its directory with a fault-tolerance strategy.
///
/// Per call: one snapshot load, settings resolved once per snapshot (a map lookup), the
/// strategy's attempts (each: route + O(1)/O(log n) pick + invoker call bounded by the
/// timeout and the deadline), mock/degrade on non-business failure. Cheap to clone.
pub struct ClusterInvoker {
    shared: Arc<Shared>,
    /// The user's strategy, in place of the built-in ones.
    custom: Option<Arc<dyn ClusterStrategy>>,
    /// `poll_ready`'s registration while it waits for room (per clone, as tower expects).
    ready_wait: Option<crate::readiness::Wait>,
}

impl Clone for ClusterInvoker {
    fn clone(&self) -> Self {
        ClusterInvoker {
            shared: self.shared.clone(),
            custom: self.custom.clone(),
            ready_wait: None,
        }
    }
}

impl fmt::Debug for ClusterInvoker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterInvoker")
            .field("service", self.shared.directory.load().service())
            .field("custom_strategy", &self.custom)
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
        let shared = Arc::new_cyclic(|this| Shared {
            directory,
            invoker,
            outlier: config.outlier,
            planner: Planner::new(config),
            budget: budget.map(RetryBudget::new),
            metrics: Metrics::new(service, instance_metrics),
            latency: Latency::new(),
            sticky: ArcSwapOption::empty(),
            merger,
            failback_pending: AtomicUsize::new(0),
            ejected: EjectionCount::new(),
            room: Room::default(),
            this: this.clone(),
        });
        ClusterInvoker {
            shared,
            custom,
            ready_wait: None,
        }
    }

    fn rebuild(self, f: impl FnOnce(&mut Parts)) -> Self {
        let shared = &self.shared;
        let mut parts = Parts {
            budget: shared.budget.as_ref().map(|b| b.config()),
            custom: self.custom.clone(),
            merger: shared.merger.clone(),
            config: shared.planner.config().clone(),
            instance_metrics: shared.metrics.per_instance(),
        };
        f(&mut parts);
        Self::build(shared.directory.clone(), shared.invoker.clone(), parts)
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
        &self.shared.directory
    }

    /// The effective settings for `method` under the current snapshot.
    pub fn settings(&self, method: &str) -> Arc<Effective> {
        self.shared.plan().settings(method).clone()
    }

    /// Retries the budget refused so far.
    pub fn budget_refused(&self) -> u64 {
        self.shared
            .budget
            .as_ref()
            .map(RetryBudget::refused)
            .unwrap_or(0)
    }

    /// Failback retries waiting in the background.
    pub fn failback_pending(&self) -> usize {
        self.shared.failback_pending.load(Ordering::Relaxed)
    }

    /// Makes one call.
    ///
    /// Recorded as one sample of `rpc_client_call_duration_seconds` (not when a forced mock
    /// answers without calling) and traced as an `info` span `call` (fields `rpc.service`,
    /// `rpc.method`, `cluster`, then `outcome`, `error_type` and `attempts`) around one `attempt`
    /// span per attempt. A failure answered by a `fail:` mock is recorded as the failure it
    /// was. See [`crate::telemetry`].
    pub async fn invoke(&self, invocation: &Invocation) -> Result<Value> {
        let shared = &*self.shared;
        let started = tokio::time::Instant::now();
        // The one load of the call: everything below reads this plan (or, under
        // APPLICATION_FIRST, the interface-level fallback's when the call moves there).
        let (plan, fallback) = shared.plan_for_call();
        let resolved = plan.settings(&invocation.method);
        let overridden = apply_attachments(resolved, invocation)?;
        let settings = overridden.as_deref().unwrap_or(resolved);
        if let Some(Mock::Force(action)) = &settings.mock {
            return run_mock(action, invocation, None);
        }
        let book = AttemptBook::new(started, self.custom.is_none());
        if let Some(b) = &shared.budget {
            b.deposit_at(book.call_tick());
        }
        let telemetry = CallTelemetry::new(plan.series(&shared.metrics, &invocation.method));
        let span = info_span!("call",
            rpc.service = shared.metrics.service(),
            rpc.method = %invocation.method,
            cluster = %settings.strategy,
            outcome = Empty,
            error_type = Empty,
            attempts = Empty,
        );
        // Pinned where it is built and polled in the span through a reference: the call's
        // future (about a kilobyte) is not copied into a wrapper and again into this one.
        let body = pin!(async {
            let mut call = Call::new(shared, &plan, invocation, settings, &telemetry, &book);
            let result = self.run(&mut call).await;
            // APPLICATION_FIRST: nothing at the application level could take the call
            // (none listed, or every candidate refused it before anything was sent): the
            // interface level takes it, within the same deadline.
            match (result, fallback) {
                (Err(e), Some(snapshot)) if falls_back(&e) && book.nothing_sent() => {
                    debug!(method = %invocation.method, error = %e,
                        "application level unavailable for this call: falling back to the interface level");
                    // Boxed, with its plan and settings: the rare path does not enlarge every
                    // call's future.
                    let deadline = call.deadline();
                    Box::pin(self.fall_back(snapshot, invocation, &telemetry, &book, deadline))
                        .await
                }
                (result, _) => result,
            }
        });
        let result = InSpan::new(&span, body).await;
        let outcome = telemetry::Outcome::of(&result);
        telemetry
            .series
            .record_call(telemetry.system(), outcome, book.call_elapsed());
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

impl ClusterInvoker {
    /// `APPLICATION_FIRST`'s fallback: the call again on the interface level's `snapshot`,
    /// within the deadline it already had.
    async fn fall_back(
        &self,
        snapshot: Arc<Snapshot>,
        invocation: &Invocation,
        telemetry: &CallTelemetry<'_>,
        book: &AttemptBook,
        deadline: Option<Instant>,
    ) -> Result<Value> {
        let shared = &*self.shared;
        let plan = shared.planner.fallback(snapshot);
        book.forgo_start();
        let resolved = plan.settings(&invocation.method);
        let overridden = apply_attachments(resolved, invocation)?;
        let settings = overridden.as_deref().unwrap_or(resolved);
        let mut call = Call::new(shared, &plan, invocation, settings, telemetry, book)
            .on_fallback(Some(deadline));
        self.run(&mut call).await
    }

    /// The strategy (the user's, else the settings') on `call`.
    async fn run(&self, call: &mut Call<'_>) -> Result<Value> {
        match &self.custom {
            Some(custom) => custom.call(call).await,
            None => strategy::run(call.settings().strategy, call).await,
        }
    }
}

/// Whether a call that failed with `e` at the application level moves to the interface
/// level (when nothing was sent): no endpoint was listed or routable there, or the last one
/// tried was unavailable.
fn falls_back(e: &Error) -> bool {
    e.kind() == switchman_core::ErrorKind::NoProvider || e.is_unavailable()
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
            if self.shared.has_room() {
                self.ready_wait = None;
                return Poll::Ready(Ok(()));
            }
            match &mut self.ready_wait {
                None => {
                    // Registered before the check above is repeated: an attempt ending in
                    // between wakes this registration.
                    self.ready_wait = Some(self.shared.room.wait());
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
