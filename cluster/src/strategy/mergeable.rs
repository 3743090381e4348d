//! mergeable: Dubbo's `MergeableClusterInvoker` for a consumer of several groups (`group="*"`
//! or a list, which makes a reference mergeable by itself, as in Dubbo).
//!
//! Each group is a cluster of its own: a weighted pick among the group's routed instances,
//! failing over within the group (`retries`, under the service's retry budget) when the
//! configured strategy is failover (the default), one attempt otherwise.
//!
//! - Without a `merger` (or `merger=false`) only the first group with an available provider
//!   is called, as in Dubbo: groups in the order the consumer listed them, for `*` by name
//!   (Dubbo takes them from a hash map, in no defined order). A group none of whose providers
//!   could take the call (nothing was sent: unreachable, shutting down) passes it to the next;
//!   any other error, a timeout included, ends the call with that group's error, as Dubbo
//!   rethrows it (the group may have run the call).
//! - With a merger (`merger=true`/`list`/`set`/`map`, or one set in code with
//!   `ClusterInvoker::with_merger`) every group is called at once. A group answering with a
//!   business error is dropped (logged), as Dubbo drops a result carrying an exception; a group
//!   failing otherwise (timeout, transport, no provider reachable) fails the whole call, as in
//!   Dubbo, rather than returning a merge that silently lacks a group. One answer is returned
//!   as is, several are merged (see [`merge`]). When every group fails the call fails with the
//!   last error (Dubbo returns `null`).

use serde_json::Value;
use switchman_core::{Error, ErrorKind, Result};
use switchman_discovery::Snapshot;
use tracing::{debug, warn};

use crate::call::{Attempter, Call, Pick};
use crate::config::{MAX_ATTEMPTS, Merger, Strategy};
use crate::plan::Plan;

pub(crate) async fn run(call: &mut Call<'_>) -> Result<Value> {
    let plan = call.plan();
    let members = call.candidates(plan)?;
    let groups = by_group(plan.snapshot(), members.indexes());
    let within = match call.settings().strategy {
        Strategy::Failover | Strategy::Mergeable => {
            (call.settings().retries as usize + 1).min(MAX_ATTEMPTS)
        }
        _ => 1,
    };
    let merger = match (call.settings().merger, call.shared().merger.is_some()) {
        (Some(m), _) => m,
        // A merger set in code asks for merging.
        (None, true) => Merger::Default,
        (None, false) => Merger::Off,
    };
    let att = call.attempter();
    if merger == Merger::Off {
        let mut last: Option<Error> = None;
        for (group, idx) in &groups {
            let (r, failed) = group_call(call, att, plan, idx, within).await;
            for i in failed {
                call.note_failure(Pick::new(plan, i));
            }
            match r {
                Ok(v) => return Ok(v),
                // Nothing in this group could take the call: the next group may serve it.
                Err(e) if e.is_unavailable() || e.kind() == ErrorKind::NoProvider => {
                    debug!(group = %group, error = %e, "mergeable: group unavailable, trying the next");
                    last = Some(e);
                }
                Err(e) => return Err(call.fail(e)),
            }
        }
        let e = last.unwrap_or_else(|| Error::no_provider("no group has a provider"));
        return Err(call.fail(e));
    }
    let this = &*call;
    let results = futures::future::join_all(
        groups
            .iter()
            .map(|(_, idx)| group_call(this, att, plan, idx, within)),
    )
    .await;
    let mut values = Vec::new();
    let mut last_err: Option<Error> = None;
    for ((group, _), (r, failed)) in groups.iter().zip(results) {
        for i in failed {
            call.note_failure(Pick::new(plan, i));
        }
        match r {
            Ok(v) => values.push(v),
            Err(e) if e.is_business() => {
                warn!(group = %group, error = %e, "mergeable: dropping a group that answered with an error");
                last_err = Some(e);
            }
            Err(e) => {
                // A merge without this group would be silently partial.
                let message = format!("mergeable: group {group} failed: {}", e.message());
                return Err(call.fail(Error::new(e.kind(), message).with_retryable(false)));
            }
        }
    }
    if values.is_empty() {
        return Err(call.fail(last_err.unwrap_or_else(|| Error::no_provider("no group answered"))));
    }
    if values.len() == 1 {
        return Ok(values.pop().unwrap_or(Value::Null));
    }
    match (&call.shared().merger, merger) {
        (Some(m), Merger::Default) => m(values),
        _ => merge(merger, values),
    }
}

/// The routed candidates by group: in the consumer's order for a group list, by name for
/// `*`; each group's members in address order.
fn by_group<'s>(snap: &'s Snapshot, members: &[u32]) -> Vec<(&'s str, Vec<usize>)> {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for &m in members {
        let g = snap.endpoints()[m as usize]
            .instance
            .service()
            .group
            .as_ref();
        match groups.iter_mut().find(|(seen, _)| *seen == g) {
            Some((_, v)) => v.push(m as usize),
            None => groups.push((g, vec![m as usize])),
        }
    }
    let wanted = &snap.service().group;
    let position = |g: &str| {
        wanted
            .split(',')
            .map(str::trim)
            .position(|w| w == g)
            .unwrap_or(usize::MAX)
    };
    groups.sort_by(|a, b| position(a.0).cmp(&position(b.0)).then(a.0.cmp(b.0)));
    groups
}

/// One group's cluster: up to `attempts` weighted picks among its members, each avoiding
/// the ones that failed, retries under the budget. Returns the answer and the failed members.
async fn group_call(
    call: &Call<'_>,
    att: Attempter<'_>,
    plan: &Plan,
    members: &[usize],
    attempts: usize,
) -> (Result<Value>, Vec<usize>) {
    let mut failed: Vec<usize> = Vec::new();
    let mut last: Option<Error> = None;
    // Whether some attempt reached a provider (its error was not "nothing sent").
    let mut sent = false;
    let mut rng = fastrand::Rng::new();
    for n in 0..attempts {
        if n > 0 && !att.retry_allowed() {
            break;
        }
        let Some(i) = pick(call, plan, members, &failed, &mut rng) else {
            break;
        };
        // A group's first attempt is its own, not a retry of the call; its retries are.
        let this = if n == 0 { att.fan_out() } else { att };
        match this.attempt(Pick::new(plan, i)).await {
            Ok(v) => return (Ok(v), failed),
            Err(e) => {
                failed.push(i);
                sent |= !e.is_unavailable();
                if !e.is_retryable() {
                    return (Err(e.with_unavailable(!sent)), failed);
                }
                last = Some(e);
            }
        }
    }
    // The group could not take the call only when no attempt sent anything.
    let last = last.map(|e| e.with_unavailable(!sent));
    let e = last.unwrap_or_else(|| {
        Error::no_provider(format!(
            "no available provider in group {:?}",
            members
                .first()
                .map(|&i| {
                    plan.snapshot().endpoints()[i]
                        .instance
                        .service()
                        .group
                        .to_string()
                })
                .unwrap_or_default()
        ))
    });
    (Err(e), failed)
}

/// A weighted random member (warm-up weights) not in `avoid` and admitted by outlier
/// ejection; any untried member when every one is ejected.
fn pick(
    call: &Call<'_>,
    plan: &Plan,
    members: &[usize],
    avoid: &[usize],
    rng: &mut fastrand::Rng,
) -> Option<usize> {
    let snap = plan.snapshot();
    let now = std::time::SystemTime::now();
    let open: Vec<usize> = members
        .iter()
        .copied()
        .filter(|i| !avoid.contains(i))
        .collect();
    let weights: Vec<u64> = open
        .iter()
        .map(|&i| switchman_loadbalance::effective_weight(&snap.endpoints()[i], now) as u64)
        .collect();
    let total: u64 = weights.iter().sum();
    for _ in 0..open.len().min(8) {
        let i = if total == 0 {
            open[rng.usize(..open.len())]
        } else {
            let mut r = rng.u64(..total);
            let mut chosen = open[0];
            for (k, &w) in weights.iter().enumerate() {
                if r < w {
                    chosen = open[k];
                    break;
                }
                r -= w;
            }
            chosen
        };
        if call.admitted(plan, i) {
            return Some(i);
        }
    }
    open.first().copied()
}

/// Merges several groups' answers the way `merger` says (see [`Merger`]).
pub(crate) fn merge(merger: Merger, values: Vec<Value>) -> Result<Value> {
    let mut it = values.into_iter().filter(|v| !v.is_null());
    let Some(first) = it.next() else {
        return Ok(Value::Null);
    };
    let wrong = |want: &str, got: &Value| {
        Error::bad_config(format!(
            "mergeable: merger {merger:?} merges {want}, got {}; set another merger or one in \
             code with ClusterInvoker::with_merger",
            kind(got)
        ))
    };
    match merger {
        Merger::List | Merger::Set => {
            let Value::Array(mut acc) = first else {
                return Err(wrong("arrays", &first));
            };
            for v in it {
                match v {
                    Value::Array(b) => acc.extend(b),
                    other => return Err(wrong("arrays", &other)),
                }
            }
            if merger == Merger::Set {
                let mut seen: Vec<Value> = Vec::with_capacity(acc.len());
                for v in acc {
                    if !seen.contains(&v) {
                        seen.push(v);
                    }
                }
                acc = seen;
            }
            Ok(Value::Array(acc))
        }
        Merger::Map => {
            let Value::Object(mut acc) = first else {
                return Err(wrong("objects", &first));
            };
            for v in it {
                match v {
                    Value::Object(b) => acc.extend(b),
                    other => return Err(wrong("objects", &other)),
                }
            }
            Ok(Value::Object(acc))
        }
        Merger::Default | Merger::Off => match first {
            Value::Array(_) => merge(Merger::List, std::iter::once(first).chain(it).collect()),
            Value::Object(_) => merge(Merger::Map, std::iter::once(first).chain(it).collect()),
            other => Err(Error::bad_config(format!(
                "mergeable: no merger for {} (Dubbo has none for single values); set a merger \
                 with ClusterInvoker::with_merger",
                kind(&other)
            ))),
        },
    }
}

/// The default merge (`merger=true`): arrays concatenated, objects merged (a later answer
/// wins on a key), `null` answers skipped; numbers, strings and booleans have no merger.
pub(crate) fn default_merge(values: Vec<Value>) -> Result<Value> {
    merge(Merger::Default, values)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_mergers() {
        let two = || vec![json!([1, 2]), json!([2, 3])];
        assert_eq!(merge(Merger::List, two()).unwrap(), json!([1, 2, 2, 3]));
        assert_eq!(merge(Merger::Set, two()).unwrap(), json!([1, 2, 3]));
        assert!(merge(Merger::Map, two()).is_err());
        assert_eq!(
            merge(Merger::Map, vec![json!({"k": 1}), json!({"k": 2, "j": 0})]).unwrap(),
            json!({"k": 2, "j": 0})
        );
        assert_eq!("TRUE".parse::<Merger>().unwrap(), Merger::Default);
        assert_eq!("N/A".parse::<Merger>().unwrap(), Merger::Off);
        assert_eq!("int".parse::<Merger>().unwrap(), Merger::List);
    }
}
