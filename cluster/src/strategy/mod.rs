//! The built-in strategies, one file each. Each is a plain async function over a [`Call`].

mod available;
mod broadcast;
mod failback;
mod failover;
mod forking;
mod mergeable;
mod simple;
mod zone_aware;

use serde_json::Value;
use switchman_core::Result;

use crate::call::Call;
use crate::config::Strategy;

pub(crate) use mergeable::default_merge;

/// Runs the built-in strategy `kind`; a consumer of several groups (`*` or a list) is
/// mergeable whatever `kind` says, as in Dubbo (`kind` then applies within each group).
pub(crate) async fn run(kind: Strategy, call: &mut Call<'_>) -> Result<Value> {
    let kind = if is_multi_group(&call.inner().directory.snapshot().service().group) {
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
        Strategy::Broadcast => broadcast::run(call).await,
        Strategy::Available => available::run(call).await,
        Strategy::Mergeable => mergeable::run(call).await,
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
