//! failfast and failsafe: one attempt each.

use serde_json::Value;
use switchman_core::Result;
use tracing::warn;

use crate::call::Call;

/// failfast: one pick, one attempt, the error at once.
pub(crate) async fn failfast(call: &mut Call<'_>) -> Result<Value> {
    let snap = call.snapshot();
    let i = call.select(&snap)?;
    match call.attempter().attempt(&snap, i).await {
        Ok(v) => Ok(v),
        Err(e) => {
            call.note_failure(&snap, i);
            Err(call.fail(e))
        }
    }
}

/// failsafe: one attempt; any failure is logged and the result is `null`.
pub(crate) async fn failsafe(call: &mut Call<'_>) -> Result<Value> {
    match failfast(call).await {
        Ok(v) => Ok(v),
        Err(e) => {
            warn!(method = %call.invocation().method, error = %e, "failsafe: ignoring the failure");
            Ok(Value::Null)
        }
    }
}
