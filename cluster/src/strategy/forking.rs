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
    let snap = call.snapshot();
    let candidates = call.candidates(&snap)?.len();
    let forks = match call.settings().forks {
        0 => candidates,
        f => f.min(candidates),
    }
    .max(1);
    let mut picked = Vec::with_capacity(forks);
    for _ in 0..forks {
        let i = call.select(&snap)?;
        if picked.contains(&i) {
            break;
        }
        picked.push(i);
    }
    let att = call.attempter();
    let snap_ref = &snap;
    let racers: Vec<Answer<'_>> = picked
        .iter()
        .map(|&i| Box::pin(async move { as_answer(att.attempt(snap_ref, i).await) }) as Answer<'_>)
        .collect();
    match futures::future::select_ok(racers).await {
        // Returning drops the remaining attempts: they are cancelled.
        Ok((answer, _rest)) => answer,
        Err(e) => {
            for &i in &picked {
                call.note_failure(&snap, i);
            }
            Err(call.fail(e))
        }
    }
}
