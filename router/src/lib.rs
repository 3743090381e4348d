//! The router chain.
//!
//! Routers narrow the instance list before the balancer picks. Dubbo re-runs every router on
//! every call; Switchman splits each rule into the part that depends only on the instance list
//! and the consumer (computed once per snapshot or rule change by [`RouterChain::build`]) and the
//! part that reads the invocation (method, arguments, attachments), evaluated per call by
//! [`RouteTable::route`] without allocating in the common cases.
//!
//! The result of routing is one of a finite set of precomputed candidate subsets
//! ([`RouteTable::subsets`]); the directory builds one balancer table per subset, so a call does
//! route + pick with no O(n) work.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

use std::sync::Arc;

use switchman_core::{Instance, Invocation, Url};

/// The consumer's own description: its URL parameters (`application`, `host`, `dubbo.tag`,
/// ...), which `when` conditions match against and `$name` references read.
#[derive(Debug, Clone)]
pub struct ConsumerInfo {
    /// The consumer URL (`consumer://host/interface?application=..&...`).
    pub url: Url,
}

impl ConsumerInfo {
    /// A consumer at `host` with application name `application`.
    pub fn new(host: &str, application: &str) -> Self {
        let url = Url::new("consumer", host, None, "").with_param("application", application);
        ConsumerInfo { url }
    }
}

/// The outcome of routing one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// Use precomputed subset `i` of [`RouteTable::subsets`].
    Subset(usize),
    /// A subset that was not precomputed (rare: see the table's docs). The caller builds a
    /// balancer table for it on the spot.
    Computed(Arc<[u32]>),
    /// Rules forbid this call; the string names the rule.
    Forbidden(&'a str),
}

/// The ordered set of routing rules. Cheap to clone; rebuilt when rules change.
#[derive(Debug, Clone, Default)]
pub struct RouterChain {}

impl RouterChain {
    /// A chain with no rules: every available instance is a candidate.
    pub fn new() -> Self {
        RouterChain {}
    }

    /// Precomputes everything that depends only on `instances` and the consumer.
    pub fn build(&self, instances: &[Arc<Instance>], _consumer: &ConsumerInfo) -> RouteTable {
        let all: Arc<[u32]> = (0..instances.len() as u32).collect();
        RouteTable { subsets: vec![all] }
    }
}

/// The chain's precomputed state for one instance list.
#[derive(Debug, Clone)]
pub struct RouteTable {
    subsets: Vec<Arc<[u32]>>,
}

impl RouteTable {
    /// The distinct candidate subsets (indexes into the instance list, ascending).
    /// Subset 0 is the result when no rule applies.
    pub fn subsets(&self) -> &[Arc<[u32]>] {
        &self.subsets
    }

    /// Routes one call: the per-invocation part of every rule.
    pub fn route(&self, _invocation: &Invocation, _rng: &mut fastrand::Rng) -> Route<'_> {
        Route::Subset(0)
    }
}
