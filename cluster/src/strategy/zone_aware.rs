//! zone-aware: prefer an instance in the consumer's zone (`zone` setting), else any; then
//! behave as failover. The in-zone pick asks the balancer for an in-zone
//! instance ([`ZONE_TRIES`] times, no per-call scan), so a zone holding a tiny share of the
//! weight may be missed;
//! a directory serves one registry, so Dubbo's "preferred registry" step does not apply.

use serde_json::Value;
use switchman_core::Result;

use crate::call::Call;

/// How many picks look for an in-zone instance before falling back to any.
const ZONE_TRIES: usize = 32;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    if let Some(zone) = call.settings().zone.as_deref() {
        let plan = call.plan();
        let att = call.attempter();
        for _ in 0..ZONE_TRIES {
            let pick = call.peek(plan)?;
            if pick.instance().zone() == Some(zone) && call.admits(pick) {
                call.mark_tried(pick);
                match att.attempt(pick).await {
                    Ok(v) => return Ok(v),
                    Err(e) if !e.is_retryable() => return Err(call.fail(e)),
                    Err(e) => {
                        call.note_failure(pick);
                        // Going on to failover is a retry: the budget decides.
                        if !call.retry_allowed() {
                            return Err(call.fail(e));
                        }
                        break;
                    }
                }
            }
        }
    }
    super::failover::run(call).await
}
