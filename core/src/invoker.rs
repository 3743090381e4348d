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
}
