//! The Triple client of one endpoint ([`TripleEndpoint`]), what [`TripleInvoker`] makes as a
//! directory's [`MakeEndpoint`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{BoxFuture, Instance, Invocation, Invoker, MakeEndpoint, Result};

use super::TripleInvoker;
use super::pool::Entry;
use crate::protocol::dubbo::token::EndpointToken;
use crate::protocol::endpoint_params::EndpointShared;

/// The Triple client of one endpoint, made by [`TripleInvoker`] as a [`MakeEndpoint`]: it owns
/// the connection to its address (shared with the other endpoints there, such as another
/// group on the same port), reads it without a lock on every call, and closes it when the
/// last endpoint at the address is dropped and its calls have ended. It reads the provider's
/// `token`, `prefer.serialization`, `serialization`, `release` (whether it takes
/// [`WrapperCodec`](super::WrapperCodec), see [`speaks_wrapper`](super::wrapper::speaks_wrapper)) and `ssl-enabled` once, when it is made:
/// a call with that instance compares a pointer and reads no parameter string. When the
/// directory hands it the endpoint's new instance (an override, a re-registration:
/// `Invoker::instance_changed`), it reads again what changed, and calls with that one compare
/// a pointer again; a call with another instance compares its values with those kept and
/// parses only what differs.
pub struct TripleEndpoint {
    invoker: TripleInvoker,
    entry: Arc<Entry>,
    token: EndpointToken,
    shared: EndpointShared,
}

impl fmt::Debug for TripleEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TripleEndpoint")
            .field("connected", &self.entry.is_connected())
            .finish_non_exhaustive()
    }
}

impl MakeEndpoint for TripleInvoker {
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        Arc::new(TripleEndpoint {
            invoker: self.clone(),
            entry: self.pool.endpoint_entry(instance.address()),
            token: EndpointToken::new(instance),
            shared: EndpointShared::new(instance),
        })
    }
}

impl Invoker for TripleEndpoint {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let shared = self.shared.get(target);
            self.invoker
                .call_on(
                    &self.entry,
                    Some(&self.token),
                    shared,
                    target,
                    invocation,
                    timeout,
                )
                .await
        })
    }

    fn instance_changed(&self, instance: &Arc<Instance>) {
        self.shared.adopt(instance);
        self.token.adopt(instance);
    }

    /// Connecting, sending and the reply share one deadline.
    fn bounds_timeout(&self) -> bool {
        true
    }
}
