//! available: the first available routed instance (address order), no balancing, one attempt.
//! An instance ejected as an outlier is not available; if every one is, the first is used.

use serde_json::Value;
use switchman_core::{Error, Result};

use crate::call::Call;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let members = call.candidates(plan)?;
    let Some(first) = members.get(0) else {
        return Err(Error::no_provider(format!(
            "no available provider of {}",
            plan.snapshot().service()
        )));
    };
    let pick = members.iter().find(|&p| call.admits(p)).unwrap_or(first);
    match call.attempter().attempt(pick).await {
        Ok(v) => Ok(v),
        Err(e) => {
            call.note_failure(pick);
            Err(call.fail(e))
        }
    }
}
