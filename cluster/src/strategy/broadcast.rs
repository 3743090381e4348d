//! broadcast: every routed instance in order, no balancer. Any failure (business included) makes
//! the call fail with the last error; otherwise the last result. `broadcast.fail.percent`
//! (default 100) stops early once failures reach `n × percent / 100` (integer division; a
//! threshold of 0, from percent 0, never stops early), as Dubbo counts it.
//!
//! An instance that announced it is going away (a graceful shutdown: [`Error::is_leaving`],
//! nothing was sent) is left out, not a failure: it is leaving the fleet the call is broadcast
//! to. Dubbo calls it and fails the call (the scenario oracle's `graceful-stop`). When every
//! instance is leaving, the call fails with the last one's error.

use serde_json::Value;
use switchman_core::{Error, Result};
use tracing::debug;

use crate::call::Call;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let members = call.candidates(plan)?;
    let threshold = members.len() * call.settings().broadcast_fail_percent.get() as usize / 100;
    // One wave: every instance gets a first attempt, none is a retry.
    let att = call.attempter().fan_out();
    let mut last_ok = Value::Null;
    let mut last_err: Option<Error> = None;
    let mut failures = 0usize;
    let mut reached = false;
    let mut leaving: Option<Error> = None;
    for pick in members.iter() {
        match att.attempt(pick).await {
            Ok(v) => {
                last_ok = v;
                reached = true;
            }
            Err(e) if e.is_leaving() => {
                debug!(error = %e, "broadcast: leaving out an instance that is shutting down");
                leaving = Some(e);
            }
            Err(e) => {
                reached = true;
                call.note_failure(pick);
                last_err = Some(e);
                failures += 1;
                if failures == threshold {
                    break;
                }
            }
        }
    }
    match (last_err, leaving) {
        (Some(e), _) => Err(call.fail(e)),
        (None, Some(e)) if !reached => Err(call.fail(e)),
        _ => Ok(last_ok),
    }
}
