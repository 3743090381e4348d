//! failfast and failsafe: one attempt each.

use serde_json::Value;
use switchman_core::{Error, ErrorKind, Result};
use tracing::warn;

use crate::call::Call;

/// failfast: one pick, one attempt, the error at once.
pub(crate) async fn failfast(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let (pick, result) = call.attempt_available(plan).await?;
    match result {
        Ok(v) => Ok(v),
        Err(e) => {
            call.note_failure(pick);
            Err(call.fail(e))
        }
    }
}

/// failsafe: one attempt; an invocation failure (transport, timeout, an instance at its
/// `actives` cap, ...) is logged and the result is `null`. As in Dubbo, "no provider" (none
/// listed, or none left by routing) is reported before the strategy runs, and a business
/// error is the provider's answer: both reach the caller.
pub(crate) async fn failsafe(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let attempt = match call.attempt_available(plan).await {
        Ok((pick, result)) => result.map_err(|e| (Some(pick), e)),
        Err(e) if is_no_provider(&e) => return Err(e),
        Err(e) => Err((None, e)),
    };
    match attempt {
        Ok(v) => Ok(v),
        Err((i, e)) if e.is_business() => {
            if let Some(pick) = i {
                call.note_failure(pick);
            }
            Err(call.fail(e))
        }
        Err((_, e)) => {
            warn!(method = %call.invocation().method, error = %e, "failsafe: ignoring the failure");
            Ok(Value::Null)
        }
    }
}

/// Whether `e` is what Dubbo's `checkInvokers` raises before any strategy runs: no provider
/// listed, or routing leaves none for this call.
pub(crate) fn is_no_provider(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::NoProvider | ErrorKind::Forbidden)
}
