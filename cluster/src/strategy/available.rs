//! available: the first available routed instance (address order), no balancing, one attempt.
//! An instance ejected as an outlier is not available; if every one is, the first is used.
//! As Java's `AvailableClusterInvoker` skips an invoker that is not `isAvailable()` (a
//! provider shutting down: its connections got the read-only event), an attempt that could not
//! be sent ([`Error::is_unavailable`]) moves on to the next available instance: not a retry,
//! nothing reached a provider.

use serde_json::Value;
use switchman_core::{Error, Result};

use crate::call::Call;
use crate::config::MAX_ATTEMPTS;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let members = call.candidates(plan)?;
    let Some(first) = members.get(0) else {
        return Err(Error::no_provider(format!(
            "no available provider of {}",
            plan.snapshot().service()
        )));
    };
    // Admitted members in address order (by position: no allocation per call).
    let next_admitted = |from: usize| {
        (from..members.len())
            .find_map(|k| members.get(k).filter(|&p| call.admits(p)).map(|p| (k, p)))
    };
    let (mut k, mut pick) = next_admitted(0).unwrap_or((members.len(), first));
    let mut skipped = 0;
    loop {
        match call.attempter().attempt(pick).await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let next = (e.is_unavailable() && skipped < MAX_ATTEMPTS)
                    .then(|| next_admitted(k + 1))
                    .flatten();
                match next {
                    Some((n, p)) => {
                        skipped += 1;
                        (k, pick) = (n, p);
                    }
                    None => {
                        call.note_failure(pick);
                        return Err(call.fail(e));
                    }
                }
            }
        }
    }
}
