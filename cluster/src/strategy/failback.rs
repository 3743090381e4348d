//! failback: one attempt; on failure answer `null` and retry in the background with jittered
//! exponential backoff (1 s, 2 s, 4 s ... at most 60 s, ×[0.5, 1.5)), each retry taken from
//! the service's retry budget, not Dubbo's fixed 5 s that makes
//! synchronized retry storms. The queue is bounded (`failbacktasks`, default 100); retries
//! stop when the invoker is dropped. `retries` below 0 means Dubbo's 3 and
//! `failbacktasks <= 0` Dubbo's 100; each background retry avoids the instance the previous
//! attempt failed on while another is routable, as Dubbo's `RetryTimerTask` does, and sees
//! the directory's current list (Dubbo retries over the list of the original call).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{Error, ErrorKind, Invocation, Result};
use tracing::{info, warn};

use crate::call::{AttemptBook, Call};
use crate::config::Effective;
use crate::shared::Shared;
use crate::strategy::simple::is_no_provider;
use crate::telemetry::CallTelemetry;

/// The longest pause between two failback retries (before jitter): Dubbo retries every 5 s;
/// doubling from 1 s without a cap reached 18 h by the 16th retry.
pub(crate) const MAX_FAILBACK_BACKOFF: Duration = Duration::from_secs(60);

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    // "No provider" is raised before the strategy does anything, as in Dubbo; anything else
    // that keeps the call from being made (every instance at its `actives` cap) is a failure
    // to retry.
    let plan = call.plan();
    let (failed, e) = match call.attempt_available(plan).await {
        Ok((pick, result)) => match result {
            Ok(v) => return Ok(v),
            Err(e) if e.is_business() => return Err(e),
            Err(e) => (Some(pick.instance().key()), e),
        },
        Err(e) if is_no_provider(&e) => return Err(e),
        Err(e) => (None, e),
    };
    warn!(method = %call.invocation().method, error = %e, "failback: the call failed; retrying in the background");
    call.shared()
        .queue_failback(call.invocation(), call.settings(), &e, failed);
    Ok(Value::Null)
}

impl Shared {
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
                // Each retry sees the directory's current list.
                let plan = inner.plan();
                let telemetry = CallTelemetry::new(plan.series(&inner.metrics, &inv.method));
                let book = AttemptBook::new(tokio::time::Instant::now(), true);
                let mut call = Call::new(&inner, &plan, &inv, &settings, &telemetry, &book);
                let outcome = async {
                    // A background retry is a retry: the service's budget decides, as for
                    // failover's (a refusal is counted and this retry is skipped).
                    if !call.retry_allowed() {
                        return Err(Error::new(
                            ErrorKind::LimitExceeded,
                            "failback retry refused by the retry budget",
                        ));
                    }
                    if let Some(a) = &last {
                        call.avoid(&plan, a);
                    }
                    let pick = call.select(&plan)?;
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
