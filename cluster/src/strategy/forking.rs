//! forking: `forks` parallel attempts on distinct instances; the first answer wins (a business
//! error counts as an answer), the others are cancelled; when all fail, the last error.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use switchman_core::{Error, Result};

use crate::call::Call;
use crate::strategy::as_answer;

type Answer<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Result<Value>, Error>> + Send + 'a>>;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let candidates = call.candidates(plan)?.len();
    let forks = call.settings().forks.of(candidates);
    let mut picked = Vec::with_capacity(forks);
    for _ in 0..forks {
        let pick = call.select(plan)?;
        if picked.contains(&pick) {
            break;
        }
        picked.push(pick);
    }
    // One wave: the forks are first attempts, not retries.
    let att = call.attempter().fan_out();
    let racers: Vec<Answer<'_>> = picked
        .iter()
        .map(|&pick| Box::pin(async move { as_answer(att.attempt(pick).await) }) as Answer<'_>)
        .collect();
    match futures::future::select_ok(racers).await {
        // Returning drops the remaining attempts: they are cancelled.
        Ok((answer, _rest)) => answer,
        Err(e) => {
            for &pick in &picked {
                call.note_failure(pick);
            }
            Err(call.fail(e))
        }
    }
}
