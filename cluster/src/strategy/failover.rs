//! failover: retry retryable failures on other instances, re-listing before every attempt.

use std::pin::pin;

use serde_json::Value;
use switchman_core::{Error, Result};

use crate::call::{Call, Pick};
use crate::config::{Hedge, MAX_ATTEMPTS};
use crate::plan::Plan;
use crate::strategy::as_answer;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let attempts = (call.settings().retries as usize + 1).min(MAX_ATTEMPTS);
    let mut last: Option<Error> = None;
    // An endpoint that could not take the call (nothing sent) is skipped without counting as
    // an attempt or asking the budget (Dubbo's availablecheck), a bounded number of times.
    let mut skips = 0;
    let mut skipped = false;
    let mut n = 0;
    while n < attempts {
        if n > 0 && !skipped && !call.retry_allowed() {
            break;
        }
        // Re-list before every retry: it sees instances that came or went meanwhile.
        let fresh;
        let plan = if n == 0 && skips == 0 {
            call.plan()
        } else {
            fresh = call.relist();
            &fresh
        };
        let pick = match call.select(plan) {
            Ok(p) => p,
            Err(e) => return Err(call.fail(last.unwrap_or(e))),
        };
        let result = match call.settings().hedge {
            // Boxed: two attempts and a timer would double the size of every failover call's
            // future; a hedged call allocates for its race anyway.
            Some(h) if n == 0 => Box::pin(hedged(call, plan, pick, h)).await,
            _ => call.attempter().attempt(pick).await,
        };
        match result {
            Ok(v) => return Ok(v),
            Err(e) => {
                call.note_failure(pick);
                if !e.is_retryable() {
                    return Err(call.fail(e));
                }
                skipped = e.is_unavailable() && skips < MAX_ATTEMPTS;
                if skipped {
                    skips += 1;
                } else {
                    n += 1;
                }
                last = Some(e);
            }
        }
    }
    let e = last.unwrap_or_else(|| Error::no_provider("no attempt was made"));
    Err(call.fail(e))
}

/// The first attempt, plus a second one on another instance if the first has not answered
/// after the hedging delay (and the retry budget allows it). The first answer wins.
async fn hedged(call: &mut Call<'_>, plan: &Plan, pick: Pick<'_>, hedge: Hedge) -> Result<Value> {
    let delay = match hedge {
        Hedge::After(d) => d,
        Hedge::P95 => call
            .shared()
            .latency
            .p95()
            .unwrap_or(std::time::Duration::from_millis(50)),
    };
    let att = call.attempter();
    let mut first = pin!(att.attempt(pick));
    tokio::select! {
        r = &mut first => return r,
        _ = tokio::time::sleep(delay) => {}
    }
    if !call.retry_allowed() {
        return first.await;
    }
    let second = match call.select(plan) {
        Ok(other) if other != pick => other,
        _ => return first.await,
    };
    let second = pin!(att.attempt(second));
    match futures::future::select_ok([
        Box::pin(async { as_answer(first.await) })
            as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>>,
        Box::pin(async { as_answer(second.await) }),
    ])
    .await
    {
        Ok((answer, _)) => answer,
        Err(e) => Err(e),
    }
}
