//! Chooses the transport per instance from its protocol.

pub mod dubbo;
mod endpoint_params;
mod http;
mod tls;
pub mod triple;

pub use self::http::{DEFAULT_DRAIN_GRACE, DEFAULT_MAX_BODY, HttpInvoker, RestRoute};

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, MakeEndpoint, Protocol, Result,
};

use dubbo::DubboInvoker;
use triple::TripleInvoker;

/// The invoker for mixed fleets: `dubbo` instances through a [`DubboInvoker`], `tri`
/// instances through a [`TripleInvoker`], `http` and `rest` instances through an
/// [`HttpInvoker`]; anything else fails with an [`ErrorKind::Unsupported`] error naming the
/// protocol and the address (not retried).
///
/// The directory's [`DirectoryConfig::protocols`](switchman_discovery::DirectoryConfig)
/// already keeps such instances out of routing, so that error only shows when a directory was
/// told to route every protocol.
#[derive(Debug, Clone, Default)]
pub struct ProtocolInvoker {
    dubbo: DubboInvoker,
    triple: TripleInvoker,
    http: HttpInvoker,
}

impl ProtocolInvoker {
    /// Default dubbo://, Triple and HTTP invokers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The Triple and HTTP invokers configured by you, the default dubbo:// one.
    pub fn with(triple: TripleInvoker, http: HttpInvoker) -> Self {
        ProtocolInvoker {
            dubbo: DubboInvoker::new(),
            triple,
            http,
        }
    }

    /// The consumer's application, sent with every call: `remote.application` to dubbo://
    /// providers ([`DubboInvoker::application`]), `tri-consumer-appname` to Triple ones
    /// ([`TripleInvoker::application`]).
    pub fn application(mut self, name: &str) -> Self {
        self.dubbo = self.dubbo.application(name);
        self.triple = self.triple.application(name);
        self
    }

    /// TLS for the dubbo:// and Triple providers that take it (`ssl-enabled=true` on their
    /// URL, or every provider with [`ClientTls::every_provider`](tls::ClientTls::every_provider)):
    /// [`DubboInvoker::tls`] and [`TripleInvoker::client_tls`]. Call it after replacing either
    /// invoker.
    pub fn tls(mut self, tls: tls::ClientTls) -> Self {
        self.dubbo = self.dubbo.tls(tls.clone());
        self.triple = self.triple.client_tls(tls);
        self
    }

    /// Replaces the dubbo:// invoker.
    pub fn dubbo(mut self, dubbo: DubboInvoker) -> Self {
        self.dubbo = dubbo;
        self
    }

    /// Replaces the Triple invoker.
    pub fn triple(mut self, triple: TripleInvoker) -> Self {
        self.triple = triple;
        self
    }

    /// Replaces the HTTP invoker.
    pub fn http(mut self, http: HttpInvoker) -> Self {
        self.http = http;
        self
    }

    /// The Triple invoker (to [`TripleInvoker::retain`] connections, or inspect them).
    pub fn triple_invoker(&self) -> &TripleInvoker {
        &self.triple
    }
}

impl Invoker for ProtocolInvoker {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        match target.protocol() {
            Protocol::Dubbo => self.dubbo.invoke(target, invocation, timeout),
            Protocol::Tri => self.triple.invoke(target, invocation, timeout),
            Protocol::Http | Protocol::Rest => self.http.invoke(target, invocation, timeout),
            _ => Unsupported.invoke(target, invocation, timeout),
        }
    }

    /// Each of its clients bounds its own.
    fn bounds_timeout(&self) -> bool {
        true
    }
}

/// The default endpoint maker: the protocol is chosen once, when the endpoint appears: a
/// [`TripleEndpoint`](triple::TripleEndpoint) or
/// [`DubboEndpoint`](dubbo::DubboEndpoint) owning the connection to its address
/// (shared by the endpoints there), the shared HTTP client, or, for any other protocol, a
/// client that fails every call with [`ErrorKind::Unsupported`].
impl MakeEndpoint for ProtocolInvoker {
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        match instance.protocol() {
            Protocol::Dubbo => self.dubbo.make(instance),
            Protocol::Tri => self.triple.make(instance),
            Protocol::Http | Protocol::Rest => self.http.make(instance),
            _ => Arc::new(Unsupported),
        }
    }
}

/// The client of an endpoint whose protocol Switchman cannot call.
#[derive(Debug)]
struct Unsupported;

impl Invoker for Unsupported {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        _invocation: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let e = Error::new(
            ErrorKind::Unsupported,
            format!(
                "{} speaks {}://, which Switchman cannot call (supported: dubbo, tri, http, rest)",
                target.address(),
                target.protocol()
            ),
        );
        Box::pin(async move { Err(e) })
    }

    fn bounds_timeout(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::triple::{Payload, TripleServer};
    use super::*;
    use crate::provider::{HttpProvider, ProviderReply};
    use serde_json::json;
    use switchman_core::ServiceKey;

    #[tokio::test]
    async fn each_instance_is_called_over_its_own_protocol() {
        let local = "127.0.0.1:0".parse().unwrap();
        let http = HttpProvider::serve(local, |req| {
            Box::pin(async move { ProviderReply::Ok(json!({"http": req.arguments})) })
        })
        .await
        .unwrap();
        let tri = TripleServer::serve(local, |req| {
            Box::pin(async move {
                Ok(bytes::Bytes::from(
                    [b"tri: ".as_slice(), &req.message].concat(),
                ))
            })
        })
        .await
        .unwrap();
        let invoker = ProtocolInvoker::new().triple(TripleInvoker::new().payload(Payload::Raw));
        let call = Invocation::new("hi").with_args(vec![json!("x")]);
        let t = Duration::from_secs(5);
        let http_target = Instance::builder("127.0.0.1", http.addr().port())
            .protocol(Protocol::Http)
            .service(ServiceKey::new("svc"))
            .build();
        let reply = invoker.invoke(&http_target, &call, t).await.unwrap();
        assert_eq!(reply, json!({"http": ["x"]}));
        let reply = invoker
            .invoke(&tri.instance("svc"), &call, t)
            .await
            .unwrap();
        assert_eq!(reply, json!("tri: x"));
        assert_eq!((http.hits(), tri.hits()), (1, 1));
    }

    #[tokio::test]
    async fn unsupported_protocols_fail_with_a_clear_error() {
        let inv = ProtocolInvoker::new();
        let target = Instance::builder("10.0.0.9", 20880)
            .protocol(Protocol::Other("grpc".into()))
            .build();
        let e = inv
            .invoke(&target, &Invocation::new("hi"), Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(!e.is_retryable());
        assert_eq!(
            e.message(),
            "10.0.0.9:20880 speaks grpc://, which Switchman cannot call (supported: dubbo, tri, http, rest)"
        );
    }
}
