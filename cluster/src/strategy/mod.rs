//! The built-in strategies, one file each. Each is a plain async function over a [`Call`].

mod available;
mod broadcast;
mod failback;
mod failover;
mod forking;
mod mergeable;
mod simple;
mod zone_aware;

use std::fmt;

use serde_json::Value;
use switchman_core::{BoxFuture, Result};

use crate::call::Call;
use crate::config::Strategy;

pub(crate) use mergeable::default_merge;

/// A user-defined cluster strategy. Implement it and pass it to
/// [`ClusterInvoker::with_strategy`](crate::ClusterInvoker::with_strategy); no registry of
/// names to patch.
///
/// A strategy sees endpoints only as [`Pick`](crate::Pick)s from routing, tied to the plan
/// they were routed in, and every attempt after the first of a call is a retry the service's
/// retry budget must allow: the [`Attempter`](crate::Attempter) checks it (and the call's
/// deadline) whatever the strategy does. The built-in strategies use nothing else.
pub trait ClusterStrategy: Send + Sync + fmt::Debug {
    /// Runs one call: pick instances with `call.select` (or walk `call.candidates`) in
    /// `call.plan()` (or a newer `call.relist()`), attempt them with
    /// `call.attempter().attempt(pick)`, ask `call.retry_allowed()` before retrying to stop
    /// with your own error when the budget says no.
    fn call<'a, 'c>(&'a self, call: &'a mut Call<'c>) -> BoxFuture<'a, Result<Value>>;
}

/// Runs the built-in strategy `kind`; a consumer of several groups (`*` or a list) is
/// mergeable whatever `kind` says, as in Dubbo (`kind` then applies within each group).
pub(crate) async fn run(kind: Strategy, call: &mut Call<'_>) -> Result<Value> {
    let kind = if is_multi_group(&call.plan().snapshot().service().group) {
        Strategy::Mergeable
    } else {
        kind
    };
    match kind {
        Strategy::Failover => failover::run(call).await,
        Strategy::Failfast => simple::failfast(call).await,
        Strategy::Failsafe => simple::failsafe(call).await,
        Strategy::Failback => failback::run(call).await,
        Strategy::Forking => forking::run(call).await,
        // Boxed, as the calls of several endpoints or groups allocate anyway: inline, their
        // futures would set the size of every call's future.
        Strategy::Broadcast => Box::pin(broadcast::run(call)).await,
        Strategy::Available => available::run(call).await,
        Strategy::Mergeable => Box::pin(mergeable::run(call)).await,
        Strategy::ZoneAware => zone_aware::run(call).await,
    }
}

/// Whether a consumer's `group` names several groups (`*` or a comma-separated list).
pub(crate) fn is_multi_group(group: &str) -> bool {
    group == "*" || group.contains(',')
}

/// Treats a business error as an answer (forking, hedging: the provider did answer).
pub(crate) fn as_answer(
    r: Result<Value>,
) -> std::result::Result<Result<Value>, switchman_core::Error> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) if !e.is_retryable() => Ok(Err(e)),
        Err(e) => Err(e),
    }
}
