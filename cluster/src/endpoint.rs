//! Per-endpoint tower stacks: an endpoint maker whose clients are wrapped in tower layers.
//!
//! [`LayeredMaker`] makes each endpoint's client with another maker (the protocol's, usually
//! [`ProtocolInvoker`](crate::ProtocolInvoker)) and wraps it in a `tower::Layer` of your choice,
//! once per endpoint: a `ConcurrencyLimitLayer` then limits that endpoint alone, a
//! `TimeoutLayer` bounds its attempts, a `RateLimitLayer` paces it. Each attempt clones the
//! stack (tower's services take `&mut self`) and the invocation (the request is owned), so a
//! layered endpoint costs what its layers' clones cost; endpoints without layers (a plain
//! maker) cost nothing of that.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::Value;
use switchman_core::{BoxFuture, Error, Instance, Invocation, Invoker, MakeEndpoint, Result};
use tower_layer::Layer;
use tower_service::Service;

/// One attempt, as the request of a per-endpoint tower stack.
#[derive(Debug, Clone)]
pub struct EndpointCall {
    /// The call.
    pub invocation: Invocation,
    /// The attempt's timeout (the transport enforces it; the cluster bounds the attempt too).
    pub timeout: Duration,
}

/// The innermost service of a per-endpoint stack: the endpoint's client from the inner maker,
/// called with the endpoint's current instance (the one it was made with until the directory
/// hands over another: an override, a re-registration; same address, protocol, service key).
#[derive(Clone)]
pub struct EndpointClient {
    client: Arc<dyn Invoker>,
    instance: Arc<ArcSwap<Instance>>,
}

impl fmt::Debug for EndpointClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointClient")
            .field("endpoint", &self.instance.load().key())
            .finish()
    }
}

impl EndpointClient {
    /// The endpoint this client calls, as it is now.
    pub fn instance(&self) -> Arc<Instance> {
        self.instance.load_full()
    }
}

impl Service<EndpointCall> for EndpointClient {
    type Response = Value;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Value>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: EndpointCall) -> Self::Future {
        let (client, instance) = (self.client.clone(), self.instance.load_full());
        Box::pin(async move { client.invoke(&instance, &req.invocation, req.timeout).await })
    }
}

/// A maker whose clients are `maker`'s wrapped in `layer` (see the module docs).
#[derive(Debug, Clone)]
pub struct LayeredMaker<M, L> {
    maker: M,
    layer: L,
}

impl<M, L> LayeredMaker<M, L> {
    /// Clients made by `maker`, each wrapped in `layer` once, when its endpoint appears.
    pub fn new(maker: M, layer: L) -> Self {
        LayeredMaker { maker, layer }
    }
}

impl<M, L, S> MakeEndpoint for LayeredMaker<M, L>
where
    M: MakeEndpoint,
    L: Layer<EndpointClient, Service = S> + Send + Sync + fmt::Debug,
    S: Service<EndpointCall, Response = Value> + Clone + Send + Sync + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
{
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        let client = EndpointClient {
            client: self.maker.make(instance),
            instance: Arc::new(ArcSwap::new(instance.clone())),
        };
        Arc::new(TowerEndpoint {
            inner: client.clone(),
            stack: self.layer.layer(client),
            key: instance.key().into(),
        })
    }
}

/// An endpoint's client that is a tower stack (made by [`LayeredMaker`]).
pub struct TowerEndpoint<S> {
    stack: S,
    /// The innermost service, to hand it the endpoint's new instance.
    inner: EndpointClient,
    key: Arc<str>,
}

impl<S> fmt::Debug for TowerEndpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TowerEndpoint")
            .field("endpoint", &self.key)
            .finish_non_exhaustive()
    }
}

impl<S> Invoker for TowerEndpoint<S>
where
    S: Service<EndpointCall, Response = Value> + Clone + Send + Sync + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
{
    fn invoke<'a>(
        &'a self,
        _target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let mut stack = self.stack.clone();
        let req = EndpointCall {
            invocation: invocation.clone(),
            timeout,
        };
        Box::pin(async move {
            poll_fn(|cx| stack.poll_ready(cx))
                .await
                .map_err(|e| self.layer_error(e.into()))?;
            stack
                .call(req)
                .await
                .map_err(|e| self.layer_error(e.into()))
        })
    }

    fn instance_changed(&self, instance: &Arc<Instance>) {
        self.inner.instance.store(instance.clone());
        self.inner.client.instance_changed(instance);
    }
}

impl<S> TowerEndpoint<S> {
    /// A transport error comes back as it was; a layer's own (a load shed, a layer timeout)
    /// becomes a retryable transport error naming the endpoint.
    fn layer_error(&self, e: Box<dyn std::error::Error + Send + Sync>) -> Error {
        match e.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::transport(format!(
                "{}: refused by its endpoint layers: {other}",
                self.key
            )),
        }
    }
}
