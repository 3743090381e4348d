use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::{Instance, Invocation, Result};

/// A boxed, sendable future (what [`Invoker::invoke`] returns, so invokers can be `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The transport: performs one attempt of `invocation` against one `target` instance.
///
/// Implementations classify their failures where they happen: an [`crate::Error`] of kind
/// `Transport` or `Timeout` is retryable, `Business` is the provider's own answer. The
/// cluster layer above decides what to do with them and never re-classifies.
pub trait Invoker: Send + Sync + fmt::Debug {
    /// One attempt, bounded by `timeout`.
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>>;

    /// For an endpoint's own client (made by a [`MakeEndpoint`]): the directory hands it the
    /// endpoint's new instance when a registration or an override changed it (same address,
    /// protocol and service key), before it publishes the snapshot that routes to it, and
    /// calls then come with this instance. A client that keeps what it read of its instance
    /// reads it again here, so that its calls compare a pointer and read no parameter. Calls
    /// still in flight with the instance before it may come after. Default: nothing.
    fn instance_changed(&self, instance: &Arc<Instance>) {
        let _ = instance;
    }

    /// Whether every future [`invoke`](Invoker::invoke) returns ends by itself within the
    /// `timeout` it was given (connecting, queueing and the reply included), with a timeout
    /// error at the latest. The cluster then arms no timer of its own around the attempt: one
    /// timer per attempt instead of two. Default `false`: the cluster bounds the attempt.
    /// Switchman's dubbo://, Triple and HTTP clients bound their own.
    fn bounds_timeout(&self) -> bool {
        false
    }
}

impl<T: Invoker + ?Sized> Invoker for Arc<T> {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        (**self).invoke(target, invocation, timeout)
    }

    fn instance_changed(&self, instance: &Arc<Instance>) {
        (**self).instance_changed(instance)
    }

    fn bounds_timeout(&self) -> bool {
        (**self).bounds_timeout()
    }
}

/// Makes the client of one endpoint (linkerd's shape: a stack per endpoint, made once).
///
/// A directory given a maker calls it when an endpoint (address, protocol, service key) first
/// appears, never on the call path, and keeps the client in its snapshots beside the
/// endpoint's live statistics; every attempt on that endpoint goes through it, with the
/// endpoint's current instance as `target`. When a registration or an override changes that
/// instance, the directory hands the client the new one first
/// ([`Invoker::instance_changed`]). When the endpoint leaves, snapshots stop routing
/// to it; the directory keeps the client for its drain grace (an endpoint that comes back
/// within it gets the same client) and then drops it, and dropping it drains it: its
/// connections close once their last call ends.
///
/// Choose the protocol here, and wrap the client in whatever it should have per endpoint (a
/// concurrency limit, a circuit breaker, tower layers through
/// `switchman_cluster::TowerEndpoint`).
pub trait MakeEndpoint: Send + Sync + fmt::Debug {
    /// The client of the endpoint `instance`. It is only ever called with this endpoint.
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker>;
}

impl<T: MakeEndpoint + ?Sized> MakeEndpoint for Arc<T> {
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        (**self).make(instance)
    }
}
