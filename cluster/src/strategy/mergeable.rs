//! mergeable: one instance per group (Dubbo's `group="*"` or a list), called in parallel; failed
//! groups are dropped (logged); the successful results are merged: arrays concatenated, objects
//! merged (later groups win on equal keys), numbers summed, or the user's merger.

use serde_json::Value;
use switchman_core::{Error, Result};
use tracing::warn;

use crate::call::Call;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let snap = call.snapshot();
    let members = call.candidates(&snap)?;
    // First routed instance of each group, in address order (groups in first-seen order).
    let mut per_group: Vec<(&str, usize)> = Vec::new();
    for &m in members.iter() {
        let g = snap.endpoints()[m as usize]
            .instance
            .service()
            .group
            .as_ref();
        if !per_group.iter().any(|(seen, _)| *seen == g) {
            per_group.push((g, m as usize));
        }
    }
    let att = call.attempter();
    let snap_ref = &snap;
    let results =
        futures::future::join_all(per_group.iter().map(|&(_, i)| att.attempt(snap_ref, i))).await;
    let mut values = Vec::new();
    let mut last_err: Option<Error> = None;
    for ((group, i), r) in per_group.iter().zip(results) {
        match r {
            Ok(v) => values.push(v),
            Err(e) => {
                warn!(group = %group, error = %e, "mergeable: dropping a failed group");
                call.note_failure(&snap, *i);
                last_err = Some(e);
            }
        }
    }
    if values.is_empty() {
        return Err(call.fail(last_err.unwrap_or_else(|| Error::no_provider("no group answered"))));
    }
    match &call.inner().merger {
        Some(m) => m(values),
        None => default_merge(values),
    }
}

/// Arrays concatenated, objects merged, numbers summed; a single value as is; anything else
/// (mixed kinds, strings) is a `BadConfig` error asking for a merger.
pub(crate) fn default_merge(values: Vec<Value>) -> Result<Value> {
    let mut it = values.into_iter();
    let Some(first) = it.next() else {
        return Ok(Value::Null);
    };
    it.try_fold(first, |acc, v| match (acc, v) {
        (Value::Array(mut a), Value::Array(b)) => {
            a.extend(b);
            Ok(Value::Array(a))
        }
        (Value::Object(mut a), Value::Object(b)) => {
            a.extend(b);
            Ok(Value::Object(a))
        }
        (Value::Number(a), Value::Number(b)) => {
            let sum = match (a.as_i64(), b.as_i64()) {
                (Some(x), Some(y)) => x.checked_add(y).map(Value::from),
                _ => None,
            };
            Ok(sum.unwrap_or_else(|| Value::from(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0))))
        }
        (Value::Null, v) | (v, Value::Null) => Ok(v),
        (a, b) => Err(Error::bad_config(format!(
            "mergeable: no default merge for {} and {}; set a merger with ClusterInvoker::with_merger",
            kind(&a),
            kind(&b)
        ))),
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
