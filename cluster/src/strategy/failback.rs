//! failback: one attempt; on failure answer `null` and retry in the background with jittered
//! exponential backoff (1 s, 2 s, 4 s ... ×[0.5, 1.5)), not Dubbo's fixed 5 s that makes
//! synchronized retry storms. The queue is bounded (`failbacktasks`, default 100); retries
//! stop when the invoker is dropped.

use serde_json::Value;
use switchman_core::Result;

use crate::call::Call;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    // "No provider" is raised before the strategy does anything, as in Dubbo.
    let snap = call.snapshot();
    let i = call.select(&snap)?;
    match call.attempter().attempt(&snap, i).await {
        Ok(v) => Ok(v),
        Err(e) if e.is_business() => Err(e),
        Err(e) => {
            call.inner()
                .queue_failback(call.invocation(), call.settings(), &e);
            Ok(Value::Null)
        }
    }
}
