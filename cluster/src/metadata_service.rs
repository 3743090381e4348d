//! [`MetadataServiceClient`]: calls a Java Dubbo 3 provider's
//! `org.apache.dubbo.metadata.MetadataService.getMetadataInfo(String revision)`, the
//! [`MetadataFetcher`] behind application-level discovery with `metadata-type=local`.
//!
//! As Dubbo's `MetadataUtils.referMetadataService` does: the service
//! `org.apache.dubbo.metadata.MetadataService`, group = the provider's application name,
//! version `1.0.0`, on the host of the instance and the protocol and port its
//! `dubbo.metadata-service.url-params` advertise, one typed call (parameter type
//! `java.lang.String`), no retry inside the call (the [`MetadataCache`] retries), the
//! connection dropped afterwards (Dubbo destroys the proxy after each fetch).
//!
//! - dubbo://: a typed Hessian2 request through a [`DubboInvoker`].
//! - tri://: the Triple wrapper format Java Dubbo uses for plain interfaces
//!   ([`WrapperCodec`](crate::protocol::triple::WrapperCodec)), through a [`TripleInvoker`].
//!   A Java 3.3 Triple provider advertises its `MetadataServiceV2` (`meta-v=2.0.0`, protobuf)
//!   and exports the `1.0.0` service on the same port too (unless `onlyUseMetadataV2`), which
//!   is what is called here.
//!
//! The answer is the Hessian-encoded `MetadataInfo` POJO (`app`, `revision`, `services` →
//! `ServiceInfo { name, group, version, protocol, port, path, params }`); `null` means the
//! provider has no metadata of that revision (it changed since it registered).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, Protocol, Result, ServiceKey,
};
use switchman_discovery::metadata::{
    METADATA_SERVICE, METADATA_SERVICE_VERSION, MetadataCache, MetadataFetcher, MetadataInfo,
    MetadataServiceTarget, install_fetcher,
};

use crate::protocol::dubbo::DubboInvoker;
use crate::protocol::triple::TripleInvoker;

/// The method called.
pub const METHOD: &str = "getMetadataInfo";

/// Calls `MetadataService.getMetadataInfo` over dubbo:// or tri:// (see the module docs).
/// Holds no connection between fetches.
#[derive(Debug, Clone, Default)]
pub struct MetadataServiceClient {
    _private: (),
}

impl MetadataServiceClient {
    /// A client.
    pub fn new() -> Self {
        Self::default()
    }

    /// The instance the call goes to: the MetadataService of `target`.
    pub fn instance(target: &MetadataServiceTarget) -> Result<Instance> {
        let protocol = match target.protocol.as_str() {
            "dubbo" => Protocol::Dubbo,
            "tri" | "triple" => Protocol::Tri,
            other => {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "the MetadataService of {}:{} is advertised over {other}://, which Switchman cannot call (dubbo, tri)",
                        target.host, target.port
                    ),
                )
                .with_retryable(false));
            }
        };
        if target.application.is_empty() {
            return Err(Error::bad_config(format!(
                "the MetadataService of {}:{} has no application (its group)",
                target.host, target.port
            )));
        }
        let mut b = Instance::builder(target.host.as_str(), target.port)
            .protocol(protocol)
            .path(METADATA_SERVICE)
            .service(ServiceKey::with(
                METADATA_SERVICE,
                &target.application,
                METADATA_SERVICE_VERSION,
            ))
            .application(&target.application);
        // Serialization (prefer.serialization, serialization) and payload limits as advertised.
        for key in ["prefer.serialization", "serialization", "payload"] {
            if let Some(v) = target.params.get(key) {
                b = b.param(key, v);
            }
        }
        if !target.params.contains_key("prefer.serialization")
            && !target.params.contains_key("serialization")
        {
            // Dubbo's default; the Triple invoker also picks the Java wrapper format from it.
            b = b.param("prefer.serialization", "hessian2");
        }
        Ok(b.build())
    }

    async fn call(
        &self,
        target: &MetadataServiceTarget,
        timeout: Duration,
    ) -> Result<MetadataInfo> {
        let instance = Self::instance(target)?;
        let mut inv = Invocation::new(METHOD)
            .with_args(vec![Value::String(target.revision.clone())])
            .with_types(["java.lang.String"]);
        if let Some(token) = target.params.get("token").filter(|t| !t.is_empty()) {
            inv = inv.with_attachment("token", token);
        }
        // One invoker per fetch: its connection goes when the fetch is done.
        let value = match instance.protocol() {
            Protocol::Dubbo => DubboInvoker::new().invoke(&instance, &inv, timeout).await?,
            _ => {
                TripleInvoker::new()
                    .invoke(&instance, &inv, timeout)
                    .await?
            }
        };
        if value.is_null() {
            return Err(Error::business(format!(
                "{} has no MetadataInfo of revision {} (its services changed since it registered?)",
                instance.address(),
                target.revision
            )));
        }
        MetadataInfo::from_json(&value).map_err(|e| {
            Error::business(format!(
                "{} answered {METHOD}({}) with something that is not a MetadataInfo: {e}",
                instance.address(),
                target.revision
            ))
        })
    }
}

impl MetadataFetcher for MetadataServiceClient {
    fn fetch<'a>(
        &'a self,
        target: &'a MetadataServiceTarget,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<MetadataInfo>> {
        Box::pin(self.call(target, timeout))
    }
}

/// Installs a [`MetadataServiceClient`] behind the process-wide metadata cache that registries
/// use (once; later calls return the cache already installed). `switchman::Reference` calls
/// it; call it yourself when you subscribe with a registry directly.
pub fn install() -> Arc<MetadataCache> {
    install_fetcher(Arc::new(MetadataServiceClient::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn target(protocol: &str) -> MetadataServiceTarget {
        MetadataServiceTarget {
            application: "shop".into(),
            revision: "r1".into(),
            host: "127.0.0.1".into(),
            port: 1,
            protocol: protocol.into(),
            params: BTreeMap::new(),
        }
    }

    #[test]
    fn the_call_goes_to_group_app_version_1_0_0() {
        let i = MetadataServiceClient::instance(&target("tri")).unwrap();
        assert_eq!(i.service().interface.as_ref(), METADATA_SERVICE);
        assert_eq!(i.service().group.as_ref(), "shop");
        assert_eq!(i.service().version.as_ref(), "1.0.0");
        assert_eq!(i.protocol(), &Protocol::Tri);
        assert_eq!(i.param("prefer.serialization"), Some("hessian2"));
        let e = MetadataServiceClient::instance(&target("rest")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.message().contains("rest://"), "{e}");
    }

    #[tokio::test]
    async fn a_triple_provider_answers_in_the_java_wrapper_format() {
        use crate::protocol::triple::TripleServer;
        use serde_json::json;
        let server = TripleServer::serve_java("127.0.0.1:0".parse().unwrap(), |call| {
            Box::pin(async move {
                assert_eq!(call.service, METADATA_SERVICE);
                assert_eq!((call.method.as_str(), call.generic), (METHOD, false));
                assert_eq!(call.types, vec!["java.lang.String".to_string()]);
                if call.args == vec![json!("gone")] {
                    return Ok(Value::Null);
                }
                assert_eq!(call.args, vec![json!("r1")]);
                Ok(json!({
                    "class": "org.apache.dubbo.metadata.MetadataInfo",
                    "app": "shop", "revision": "r1",
                    "services": {"x.Y:tri": {"name": "x.Y", "protocol": "tri", "port": 50051,
                                             "path": "x.Y", "params": {"weight": "7"}}}
                }))
            })
        })
        .await
        .unwrap();
        let mut t = target("tri");
        t.port = server.addr().port();
        let client = MetadataServiceClient::new();
        let info = client.fetch(&t, Duration::from_secs(5)).await.unwrap();
        assert_eq!(info.revision, "r1");
        assert_eq!(info.services["x.Y:tri"].params["weight"], "7");
        assert_eq!(info.services["x.Y:tri"].port, Some(50051));
        t.revision = "gone".into();
        let e = client.fetch(&t, Duration::from_secs(5)).await.unwrap_err();
        assert!(
            e.message().contains("no MetadataInfo of revision gone"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_error_naming_the_address() {
        // Bound but not listening: connecting is refused, and no one else can take the port
        // while the socket is held (a listener dropped at once would leave it to anyone).
        let held = tokio::net::TcpSocket::new_v4().unwrap();
        held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = held.local_addr().unwrap().port();
        let mut t = target("dubbo");
        t.port = port;
        let e = MetadataServiceClient::new()
            .fetch(&t, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
        assert!(e.to_string().contains(&port.to_string()), "{e}");
    }
}
