//! failback: one attempt; on failure answer `null` and retry in the background with jittered
//! exponential backoff (1 s, 2 s, 4 s ... at most 60 s, ×[0.5, 1.5)), each retry taken from
//! the service's retry budget, not Dubbo's fixed 5 s that makes
//! synchronized retry storms. The queue is bounded (`failbacktasks`, default 100); retries
//! stop when the invoker is dropped. `retries` below 0 means Dubbo's 3 and
//! `failbacktasks <= 0` Dubbo's 100; each background retry avoids the instance the previous
//! attempt failed on while another is routable, as Dubbo's `RetryTimerTask` does, and sees
//! the directory's current list (Dubbo retries over the list of the original call).

use serde_json::Value;
use switchman_core::Result;
use tracing::warn;

use crate::call::Call;
use crate::strategy::simple::is_no_provider;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    // "No provider" is raised before the strategy does anything, as in Dubbo; anything else
    // that keeps the call from being made (every instance at its `actives` cap) is a failure
    // to retry.
    let snap = call.snapshot();
    let (failed, e) = match call.attempt_available(&snap).await {
        Ok((pick, result)) => match result {
            Ok(v) => return Ok(v),
            Err(e) if e.is_business() => return Err(e),
            Err(e) => (Some(pick.instance().key()), e),
        },
        Err(e) if is_no_provider(&e) => return Err(e),
        Err(e) => (None, e),
    };
    warn!(method = %call.invocation().method, error = %e, "failback: the call failed; retrying in the background");
    call.inner()
        .queue_failback(call.invocation(), call.settings(), &e, failed);
    Ok(Value::Null)
}
