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
//! TLS: a provider with TLS on (a Java provider with an `SslConfig`, `switchman provider
//! --tls-cert`) serves its MetadataService over TLS on the same port. A client with TLS
//! settings ([`MetadataServiceClient::tls`], the consumer's [`ClientTls`]) fetches as calls
//! go: every provider over TLS, or with [`ClientTls::every_provider`]`(false)` over TLS where
//! the instance's `dubbo.metadata-service.url-params` say `ssl-enabled=true` (Switchman's
//! provider writes it; a Java 3.3 provider does not) and over cleartext elsewhere, then over
//! TLS if cleartext is refused. Without TLS settings a fetch from an instance that says
//! `ssl-enabled=true` fails at once, and a cleartext fetch refused by a provider that answers
//! a TLS handshake fails saying so (a configuration error naming the address and what to set),
//! instead of an opaque closed connection. [`cache_with_tls`] gives the consumers of one set of
//! TLS settings their own [`MetadataCache`].
//!
//! The answer is the Hessian-encoded `MetadataInfo` POJO (`app`, `revision`, `services` →
//! `ServiceInfo { name, group, version, protocol, port, path, params }`); `null` means the
//! provider has no metadata of that revision (it changed since it registered).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use serde_json::Value;
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, Protocol, Result, ServiceKey,
};
use switchman_discovery::metadata::{
    METADATA_SERVICE, METADATA_SERVICE_VERSION, MetadataCache, MetadataFetcher, MetadataInfo,
    MetadataServiceTarget, install_fetcher,
};

use crate::dubbo::{ClientTls, SSL_ENABLED};
use crate::protocol::dubbo::DubboInvoker;
use crate::protocol::triple::TripleInvoker;

/// The method called.
pub const METHOD: &str = "getMetadataInfo";

/// How long a failed cleartext fetch may spend asking the provider for a TLS handshake, to say
/// that it serves TLS.
const TLS_PROBE: Duration = Duration::from_secs(1);

/// Calls `MetadataService.getMetadataInfo` over dubbo:// or tri:// (see the module docs).
/// Holds no connection between fetches.
#[derive(Debug, Clone, Default)]
pub struct MetadataServiceClient {
    tls: Option<ClientTls>,
}

impl MetadataServiceClient {
    /// A client (cleartext; see [`MetadataServiceClient::tls`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Fetches over TLS with the consumer's settings, as its calls go (see the module docs).
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
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
        // TLS as advertised (`ssl-enabled`).
        for key in [
            "prefer.serialization",
            "serialization",
            "payload",
            SSL_ENABLED,
        ] {
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
        let deadline = tokio::time::Instant::now() + timeout;
        let protocol = instance.protocol().as_str().to_string();
        let over_tls = ClientTls::choose_for(self.tls.as_ref(), &instance, &protocol)
            .map_err(|e| reworded(&e, format!("its MetadataService: {}", e.message())))?
            .is_some();
        let value = match Self::invoke(&instance, &inv, timeout, self.tls.as_ref(), over_tls).await
        {
            Err(e) if !over_tls && e.kind() == ErrorKind::Transport => {
                // Refused in cleartext: a provider serving TLS only? A Java provider's instance
                // says nothing about its TLS.
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                match &self.tls {
                    // TLS where enabled: try TLS before giving up.
                    Some(_) if !left.is_zero() => {
                        Self::invoke(&instance, &inv, left, self.tls.as_ref(), true)
                            .await
                            .map_err(|t| {
                                reworded(
                                    &t,
                                    format!("{} (and in cleartext: {})", t.message(), e.message()),
                                )
                            })?
                    }
                    None if !left.is_zero()
                        && ClientTls::answers_tls(instance.address(), left.min(TLS_PROBE))
                            .await =>
                    {
                        return Err(Error::bad_config(format!(
                            "its MetadataService refused a cleartext call ({}) and answers a TLS \
                             handshake: it serves TLS, and this consumer has no TLS settings (give \
                             the CA that signs its certificate: Reference::tls_ca, `switchman call \
                             --tls-ca`, or MetadataServiceClient::tls; for mTLS also a client \
                             certificate and key)",
                            e.message()
                        )));
                    }
                    _ => return Err(e),
                }
            }
            other => other?,
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

/// `e` with another message (its kind and retryability kept).
fn reworded(e: &Error, message: String) -> Error {
    Error::new(e.kind(), message).with_retryable(e.is_retryable())
}

impl MetadataServiceClient {
    /// One call through a new invoker (its connection goes when the fetch is done), over TLS
    /// with `tls` when `over_tls`.
    async fn invoke(
        instance: &Instance,
        inv: &Invocation,
        timeout: Duration,
        tls: Option<&ClientTls>,
        over_tls: bool,
    ) -> Result<Value> {
        let tls = tls
            .filter(|_| over_tls)
            .map(|t| t.clone().every_provider(true));
        match (instance.protocol(), tls) {
            (Protocol::Dubbo, None) => DubboInvoker::new().invoke(instance, inv, timeout).await,
            (Protocol::Dubbo, Some(t)) => {
                DubboInvoker::new()
                    .tls(t)
                    .invoke(instance, inv, timeout)
                    .await
            }
            (_, None) => TripleInvoker::new().invoke(instance, inv, timeout).await,
            (_, Some(t)) => {
                TripleInvoker::new()
                    .client_tls(t)
                    .invoke(instance, inv, timeout)
                    .await
            }
        }
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

/// The metadata cache of the consumers with TLS settings `tls`: one per distinct settings (the
/// same CA and client certificate files, the same [`ClientTls::every_provider`]) in the
/// process, fetching with a [`MetadataServiceClient`] over TLS, kept while a registry holds it
/// (`ZookeeperRegistry::metadata_cache`, `NacosRegistry::metadata_cache`). The consumers
/// without TLS share the process-wide cache ([`install`]): a consumer's TLS settings never
/// change how another one's metadata is fetched.
pub fn cache_with_tls(tls: &ClientTls) -> Arc<MetadataCache> {
    type Caches = HashMap<((bool, u64), bool), Weak<MetadataCache>>;
    static CACHES: OnceLock<Mutex<Caches>> = OnceLock::new();
    let mut caches = CACHES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    caches.retain(|_, c| c.strong_count() > 0);
    let key = tls.identity();
    if let Some(cache) = caches.get(&key).and_then(Weak::upgrade) {
        return cache;
    }
    let cache = Arc::new(MetadataCache::new(Arc::new(
        MetadataServiceClient::new().tls(tls.clone()),
    )));
    caches.insert(key, Arc::downgrade(&cache));
    cache
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

    mod tls {
        use super::*;
        use crate::protocol::triple::TripleServer;
        use serde_json::json;
        use tokio_rustls::rustls;

        /// A self-signed certificate for 127.0.0.1: (server settings, CA PEM).
        fn certificate() -> (Arc<rustls::ServerConfig>, String) {
            let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
            let key =
                rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![ck.cert.der().clone()], key)
            .unwrap();
            (Arc::new(config), ck.cert.pem())
        }

        /// A MetadataService over TLS answering revision r1.
        async fn tls_metadata_service(config: Arc<rustls::ServerConfig>) -> TripleServer {
            TripleServer::serve_java_tls("127.0.0.1:0".parse().unwrap(), Some(config), |_call| {
                Box::pin(async move {
                    Ok(json!({"app": "shop", "revision": "r1", "services": {
                        "x.Y:tri": {"name": "x.Y", "protocol": "tri", "port": 50051}}}))
                })
            })
            .await
            .unwrap()
        }

        fn on(server: &TripleServer, ssl: bool) -> MetadataServiceTarget {
            let mut t = target("tri");
            t.port = server.addr().port();
            if ssl {
                t.params.insert(SSL_ENABLED.into(), "true".into());
            }
            t
        }

        #[tokio::test]
        async fn fetches_go_over_tls_with_the_consumers_settings() {
            let (config, ca) = certificate();
            let server = tls_metadata_service(config).await;
            let tls = ClientTls::from_pem(ca.as_bytes(), None).unwrap();
            // Every provider over TLS: whatever the instance says.
            let client = MetadataServiceClient::new().tls(tls.clone());
            for ssl in [false, true] {
                let info = client
                    .fetch(&on(&server, ssl), Duration::from_secs(5))
                    .await
                    .unwrap();
                assert_eq!(info.revision, "r1");
            }
            // Where enabled: over TLS when the instance says so, and when cleartext is refused.
            let where_enabled = MetadataServiceClient::new().tls(tls.every_provider(false));
            for ssl in [true, false] {
                let info = where_enabled
                    .fetch(&on(&server, ssl), Duration::from_secs(5))
                    .await
                    .unwrap_or_else(|e| panic!("ssl-enabled {ssl}: {e}"));
                assert_eq!(info.revision, "r1");
            }
            assert_eq!(server.hits(), 4);
        }

        #[tokio::test]
        async fn without_tls_settings_a_tls_provider_is_a_clear_error_at_once() {
            let (config, ca) = certificate();
            let server = tls_metadata_service(config).await;
            let client = MetadataServiceClient::new();
            // The instance says ssl-enabled: refused before dialling.
            let started = std::time::Instant::now();
            let e = client
                .fetch(&on(&server, true), Duration::from_secs(5))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
            assert!(e.message().contains("ssl-enabled=true"), "{e}");
            assert!(e.message().contains("MetadataService"), "{e}");
            assert!(
                e.message()
                    .contains(&format!("tri://127.0.0.1:{}", server.addr().port())),
                "{e}"
            );
            // It says nothing (a Java provider): cleartext is refused, the TLS handshake
            // answered, and the error says so.
            let e = client
                .fetch(&on(&server, false), Duration::from_secs(5))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
            assert!(e.message().contains("answers a TLS handshake"), "{e}");
            assert!(e.message().contains("tls_ca"), "{e}");
            assert!(started.elapsed() < Duration::from_secs(4), "not a hang");
            // The wrong CA: the handshake fails on the certificate.
            let (_, other) = certificate();
            let e = MetadataServiceClient::new()
                .tls(ClientTls::from_pem(other.as_bytes(), None).unwrap())
                .fetch(&on(&server, false), Duration::from_secs(5))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
            assert!(e.message().contains("TLS handshake"), "{e}");
            assert_eq!(server.hits(), 0);
            drop(ca);
        }

        #[tokio::test]
        async fn a_cleartext_provider_that_refuses_is_not_called_a_tls_one() {
            // Accepts and closes at once: cleartext refused, and no TLS handshake either.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            tokio::spawn(async move {
                while let Ok((s, _)) = listener.accept().await {
                    drop(s);
                }
            });
            let mut t = target("tri");
            t.port = port;
            let e = MetadataServiceClient::new()
                .fetch(&t, Duration::from_secs(5))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
            assert!(!e.message().contains("TLS"), "{e}");
        }

        #[test]
        fn consumers_with_the_same_settings_share_a_cache() {
            let (_, ca) = certificate();
            let (_, other) = certificate();
            let a = ClientTls::from_pem(ca.as_bytes(), None).unwrap();
            let b = ClientTls::from_pem(ca.as_bytes(), None).unwrap();
            let c = ClientTls::from_pem(other.as_bytes(), None).unwrap();
            let first = cache_with_tls(&a);
            assert!(Arc::ptr_eq(&first, &cache_with_tls(&b)));
            assert!(!Arc::ptr_eq(&first, &cache_with_tls(&c)));
            assert!(!Arc::ptr_eq(
                &first,
                &cache_with_tls(&b.clone().every_provider(false))
            ));
            let shared = install();
            assert!(!Arc::ptr_eq(&first, &shared));
        }
    }
}
