//! The cluster layer: what one call does across the instances of a service.
//!
//! A [`ClusterInvoker`] loads the directory's snapshot, resolves the call's settings (cached
//! per snapshot, method and endpoint, in Dubbo 3.3's order: consumer method > provider method
//! of the instance called > consumer service and global > provider > Dubbo's defaults;
//! `retries`/`timeout` attachments beat them all), and runs
//! the configured [`Strategy`] (Dubbo's names: failover, failfast, failsafe, failback, forking,
//! broadcast, available, mergeable, zone-aware) or your own [`ClusterStrategy`]. Each attempt
//! routes and picks an instance (no lock, no allocation on that path) and calls it through an
//! [`Invoker`](switchman_core::Invoker) such as [`HttpInvoker`].
//!
//! Only retryable failures (transport, timeout) are retried, degraded to a mock or queued for
//! failback; a business error is the provider's answer and returns at once. Beyond Dubbo:
//! a per-service [`RetryBudget`] (20% of calls + 10/s over 10 s) shared by every retrying
//! strategy, opt-in hedging, a whole-call deadline, bounded failback with jittered backoff, and
//! a `tower::Service` implementation.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod budget;
mod by_address;
mod call;
mod config;
pub mod contracts;
pub mod endpoint;
mod invoker;
mod layer;
pub mod metadata_service;
mod plan;
mod protocol;
#[cfg(feature = "provider")]
pub mod provider;
mod readiness;
pub mod registries;
mod shared;
mod strategy;
pub mod telemetry;
#[cfg(test)]
mod tests;

pub use budget::{BudgetConfig, RetryBudget};
pub use call::{Attempter, Call, Candidates, DEADLINE_FLOOR, Pick};
pub use config::{
    Balancer, ClusterConfig, DEFAULT_TIMEOUT, Effective, FallbackFn, Forks, HashArguments,
    HashNodes, Hedge, MAX_ATTEMPTS, MAX_PROVIDER_TIMEOUT, Merger, MergerFn, Mock, MockAction,
    Percent, Retries, Settings, Strategy, TRIPLE_DEFAULT_TIMEOUT,
};
pub use endpoint::{LayeredMaker, TowerEndpoint};
pub use invoker::ClusterInvoker;
pub use layer::ClusterLayer;
pub use plan::Plan;
pub use protocol::{
    DEFAULT_DRAIN_GRACE, DEFAULT_MAX_BODY, HttpInvoker, ProtocolInvoker, RestRoute, dubbo, triple,
};
pub use strategy::ClusterStrategy;
pub use switchman_loadbalance::BalancerKind;
pub use switchman_loadbalance::OutlierConfig;

/// Merges JSON results the way the `mergeable` strategy does by default.
pub fn merge_results(values: Vec<serde_json::Value>) -> switchman_core::Result<serde_json::Value> {
    strategy::default_merge(values)
}
