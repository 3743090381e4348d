//! [`ClientTls`]: the consumer's TLS settings for the dubbo:// and Triple links to providers.
//!
//! Dubbo 3.3 serves TLS on the provider's own port once its `SslConfig` has a server
//! certificate (`dubbo.ssl.server-key-cert-chain-path`, `server-private-key-path`): the
//! first bytes of a connection tell a TLS handshake from cleartext (`SslServerTlsHandler`
//! for dubbo://, `NettyPortUnificationServerHandler` for Triple), and with
//! `server-trust-cert-collection-path` a client certificate is required (mTLS). The
//! provider's `ssl-enabled=true` URL parameter (`<dubbo:protocol ssl-enabled="true">`) says
//! so to consumers. A Java consumer with a client `SslConfig` dials every provider over TLS.
//!
//! With TLS settings Switchman dials every provider over TLS, as a Java consumer with a
//! client `SslConfig` does: the registry's data cannot downgrade a link to cleartext.
//! [`ClientTls::every_provider`]`(false)` dials only the providers whose URL says
//! `ssl-enabled=true` over TLS and the others in cleartext (a fleet moving to TLS; a registry
//! writer can then turn a provider's TLS off by dropping the parameter). A provider that says
//! `ssl-enabled=true` while the consumer has no TLS settings fails its calls at once with an
//! error naming it and what to set.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use switchman_core::{Error, Instance, Result};

pub use super::endpoint_params::SSL_ENABLED;
use super::endpoint_params::ssl_enabled;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{
    self, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime, pem::PemObject},
    server::WebPkiClientVerifier,
};

/// The consumer's TLS settings (rustls with the ring provider): the roots that sign the
/// providers' certificates, and an optional client certificate (mTLS). The server name
/// checked is the provider's registered host (a DNS name, or an IP address the certificate
/// must carry as an IP SAN). Cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    /// For dubbo:// (no ALPN).
    plain: TlsConnector,
    /// For Triple (ALPN `h2`).
    h2: TlsConnector,
    every_provider: bool,
    /// Tells settings apart: (true, a digest of the roots and client certificate chain) when
    /// read from PEM, else (false, a number of its own for each config given).
    id: (bool, u64),
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("every_provider", &self.every_provider)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// TLS with your own rustls `config` (roots, client certificate, verifier...). Its ALPN
    /// protocols are replaced: none on dubbo://, `h2` on Triple.
    pub fn new(config: Arc<ClientConfig>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self::with_id(config, (false, NEXT.fetch_add(1, Ordering::Relaxed)))
    }

    fn with_id(config: Arc<ClientConfig>, id: (bool, u64)) -> Self {
        let mut plain = (*config).clone();
        plain.alpn_protocols = Vec::new();
        let mut h2 = (*config).clone();
        h2.alpn_protocols = vec![b"h2".to_vec()];
        ClientTls {
            plain: TlsConnector::from(Arc::new(plain)),
            h2: TlsConnector::from(Arc::new(h2)),
            every_provider: true,
            id,
        }
    }

    /// TLS trusting the CA certificates of `ca_pem` (PEM, one or more), presenting
    /// `identity` (a PEM certificate chain and its unencrypted PEM private key) when given:
    /// Dubbo's `client-trust-cert-collection-path`, `client-key-cert-chain-path` and
    /// `client-private-key-path`, as bytes.
    pub fn from_pem(ca_pem: &[u8], identity: Option<(&[u8], &[u8])>) -> Result<Self> {
        let roots = certs(CertificateDer::pem_slice_iter(ca_pem), "CA", "the CA PEM")?;
        let identity = match identity {
            None => None,
            Some((chain, key)) => {
                let chain = certs(
                    CertificateDer::pem_slice_iter(chain),
                    "client certificate",
                    "the client certificate PEM",
                )?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| key_error(e, "the client key PEM"))?;
                Some((chain, key))
            }
        };
        Self::build(roots, identity)
    }

    /// [`ClientTls::from_pem`] from files: the CA file, and the client certificate chain and
    /// key files for mTLS. Errors name the file and what is wrong with it.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self> {
        let read = |p: &Path, what: &str| format!("the {what} file {}", p.display());
        let roots = certs(
            CertificateDer::pem_file_iter(ca)
                .map_err(|e| Error::bad_config(format!("cannot read {}: {e}", read(ca, "CA"))))?,
            "CA",
            &read(ca, "CA"),
        )?;
        let identity = match identity {
            None => None,
            Some((chain, key)) => {
                let what = read(chain, "client certificate");
                let chain = certs(
                    CertificateDer::pem_file_iter(chain)
                        .map_err(|e| Error::bad_config(format!("cannot read {what}: {e}")))?,
                    "client certificate",
                    &what,
                )?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| key_error(e, &read(key, "client key")))?;
                Some((chain, key))
            }
        };
        Self::build(roots, identity)
    }

    fn build(
        roots: Vec<CertificateDer<'static>>,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<Self> {
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        for cert in &roots {
            cert.as_ref().hash(&mut digest);
        }
        if let Some((chain, _)) = &identity {
            for cert in chain {
                cert.as_ref().hash(&mut digest);
            }
        }
        let mut store = RootCertStore::empty();
        for cert in roots {
            store
                .add(cert)
                .map_err(|e| Error::bad_config(format!("a CA certificate cannot be used: {e}")))?;
        }
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::bad_config(format!("TLS: {e}")))?
                .with_root_certificates(store);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
                Error::bad_config(format!(
                    "the client certificate and key do not make a TLS identity: {e}"
                ))
            })?,
        };
        Ok(Self::with_id(Arc::new(config), (true, digest.finish())))
    }

    /// Whether every provider is dialled over TLS (default `true`, as a Java consumer with a
    /// client `SslConfig` does: registry data cannot downgrade a link). `false`: only those
    /// whose URL says `ssl-enabled=true`, the others in cleartext, for a fleet moving to TLS
    /// (a registry writer can then turn a provider's TLS off by dropping the parameter).
    pub fn every_provider(mut self, every: bool) -> Self {
        self.every_provider = every;
        self
    }

    /// The connector for dubbo:// (`h2`: false) or Triple (`h2`: true).
    pub(crate) fn connector(&self, h2: bool) -> &TlsConnector {
        if h2 { &self.h2 } else { &self.plain }
    }

    /// Whether these settings dial every provider over TLS.
    pub(crate) fn is_every_provider(&self) -> bool {
        self.every_provider
    }

    /// Equal for settings read from the same CA and client certificates (by
    /// [`ClientTls::from_pem`] or [`ClientTls::from_files`]) with the same
    /// [`ClientTls::every_provider`], or clones of one [`ClientTls::new`]: what may share
    /// connections' outcomes (the metadata fetched through them).
    pub(crate) fn identity(&self) -> ((bool, u64), bool) {
        (self.id, self.every_provider)
    }

    /// [`choose`], for the crate's modules outside `protocol`.
    pub(crate) fn choose_for<'a>(
        tls: Option<&'a ClientTls>,
        target: &Instance,
        protocol: &str,
    ) -> Result<Option<&'a ClientTls>> {
        choose(tls, ssl_enabled(target), target.address(), protocol)
    }

    /// [`speaks_tls`], for the crate's modules outside `protocol`.
    pub(crate) async fn answers_tls(address: &str, within: Duration) -> bool {
        speaks_tls(address, within).await
    }
}

/// A provider's TLS settings (rustls, ring provider) from PEM files: its certificate chain
/// and unencrypted private key, and with `client_ca` the CA client certificates must be signed
/// by (mTLS: a client without one is refused). Dubbo's `server-key-cert-chain-path`,
/// `server-private-key-path` and `server-trust-cert-collection-path`. Errors name the file.
pub(crate) fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>> {
    let read = |p: &Path, what: &str| format!("the {what} file {}", p.display());
    let what = read(cert, "server certificate");
    let chain = certs(
        CertificateDer::pem_file_iter(cert)
            .map_err(|e| Error::bad_config(format!("cannot read {what}: {e}")))?,
        "server certificate",
        &what,
    )?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| key_error(e, &read(key, "key")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::bad_config(format!("TLS: {e}")))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let what = read(ca, "client CA");
            let roots = certs(
                CertificateDer::pem_file_iter(ca)
                    .map_err(|e| Error::bad_config(format!("cannot read {what}: {e}")))?,
                "CA",
                &what,
            )?;
            let mut store = RootCertStore::empty();
            for c in roots {
                store.add(c).map_err(|e| {
                    Error::bad_config(format!("{what}: a CA certificate cannot be used: {e}"))
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
                .build()
                .map_err(|e| Error::bad_config(format!("{what}: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        Error::bad_config(format!(
            "the server certificate {} and key do not make a TLS identity: {e}",
            cert.display()
        ))
    })?;
    Ok(Arc::new(config))
}

/// Whether `address` answers a TLS handshake by sending a certificate, within `within`: what
/// tells a provider that serves TLS only from one that is down or broken, when a cleartext
/// call to it failed. The certificate is refused unread (the handshake goes no further).
pub(crate) async fn speaks_tls(address: &str, within: Duration) -> bool {
    let Ok(name) = server_name(address) else {
        return false;
    };
    let verifier = Arc::new(Probe::default());
    let Ok(builder) =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
    else {
        return false;
    };
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = TlsConnector::from(Arc::new(config));
    let probe = async {
        let tcp = tokio::net::TcpStream::connect(address).await.ok()?;
        let _ = connector.connect(name, tcp).await;
        Some(())
    };
    let _ = tokio::time::timeout(within, probe).await;
    verifier.saw_certificate.load(Ordering::Relaxed)
}

/// The verifier of [`speaks_tls`]: notes that a certificate came, and refuses it.
#[derive(Debug, Default)]
struct Probe {
    saw_certificate: AtomicBool,
}

impl ServerCertVerifier for Probe {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        self.saw_certificate.store(true, Ordering::Relaxed);
        Err(rustls::Error::General(
            "a probe: no certificate is trusted".into(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("a probe".into()))
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("a probe".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS settings to dial the provider at `address` with: `tls` when the provider takes TLS
/// (`enabled`: its `ssl-enabled=true`, read by
/// [`SharedParams`](super::endpoint_params::SharedParams)) or `tls` says every provider;
/// `None` for cleartext. A provider that takes TLS only while the consumer has none is a
/// configuration error naming it.
pub(crate) fn choose<'a>(
    tls: Option<&'a ClientTls>,
    enabled: bool,
    address: &str,
    protocol: &str,
) -> Result<Option<&'a ClientTls>> {
    match tls {
        Some(t) if enabled || t.is_every_provider() => Ok(Some(t)),
        Some(_) => Ok(None),
        None if enabled => Err(Error::bad_config(format!(
            "{protocol}://{address} registered ssl-enabled=true: it takes TLS, and this consumer has no \
             TLS settings (give the CA that signs its certificate: Reference::tls_ca, \
             `switchman call --tls-ca`, or ClientTls on the invoker; for mTLS also a client \
             certificate and key)",
        ))),
        None => Ok(None),
    }
}

/// The error of a failed TLS handshake with `address`: a certificate the consumer rejects
/// (unknown issuer, wrong name, expired) is a configuration error, the same on every try;
/// anything else a retryable transport error.
pub(crate) fn handshake_error(address: &str, e: std::io::Error) -> Error {
    let rejected = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
    if rejected {
        Error::bad_config(format!(
            "TLS handshake with {address} failed: {e} (is the CA given the one that signs its \
             certificate, and does the certificate name the provider's registered host?)"
        ))
        .with_source(e)
    } else {
        Error::transport(format!("TLS handshake with {address} failed: {e}")).with_source(e)
    }
}

/// The name `address`'s certificate must carry: its host (a DNS name or an IP address).
pub(crate) fn server_name(address: &str) -> Result<ServerName<'static>> {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        Error::bad_config(format!(
            "{address}: {host:?} is neither a DNS name nor an IP address a TLS certificate can carry"
        ))
        .with_source(e)
    })
}

fn certs(
    iter: impl Iterator<
        Item = std::result::Result<CertificateDer<'static>, rustls::pki_types::pem::Error>,
    >,
    what: &str,
    source: &str,
) -> Result<Vec<CertificateDer<'static>>> {
    let certs = iter
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::bad_config(format!("{source} is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::bad_config(format!(
            "{source} holds no PEM {what} certificate (a JKS or PKCS#12 store must be exported \
             as PEM first)"
        )));
    }
    Ok(certs)
}

fn key_error(e: rustls::pki_types::pem::Error, source: &str) -> Error {
    match e {
        rustls::pki_types::pem::Error::NoItemsFound => Error::bad_config(format!(
            "{source} holds no unencrypted PEM private key (an encrypted key cannot be read: \
             `openssl pkey -in KEY -out PLAIN`)"
        )),
        e => Error::bad_config(format!("cannot read {source}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(ssl: Option<&str>) -> Instance {
        let mut b = Instance::builder("127.0.0.1", 20880);
        if let Some(v) = ssl {
            b = b.param(SSL_ENABLED, v);
        }
        b.build()
    }

    /// [`choose`] for a provider at 127.0.0.1:20880 whose `ssl-enabled` is `ssl`.
    fn choose<'a>(
        tls: Option<&'a ClientTls>,
        ssl: &Instance,
        protocol: &str,
    ) -> Result<Option<&'a ClientTls>> {
        super::choose(tls, ssl_enabled(ssl), ssl.address(), protocol)
    }

    fn tls() -> ClientTls {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        ClientTls::from_pem(ck.cert.pem().as_bytes(), None).unwrap()
    }

    #[test]
    fn tls_is_used_for_every_provider_or_where_the_provider_says_ssl_enabled_when_asked() {
        let t = tls();
        // The default: every provider, whatever its URL says (no downgrade by registry data).
        for ssl in [Some("true"), None, Some("false")] {
            assert!(
                choose(Some(&t), &instance(ssl), "dubbo").unwrap().is_some(),
                "{ssl:?}"
            );
        }
        let where_enabled = t.every_provider(false);
        for (ssl, tls) in [
            (Some("true"), true),
            (Some("TRUE"), true),
            (None, false),
            (Some("false"), false),
        ] {
            assert_eq!(
                choose(Some(&where_enabled), &instance(ssl), "tri")
                    .unwrap()
                    .is_some(),
                tls,
                "{ssl:?}"
            );
        }
        assert!(choose(None, &instance(None), "tri").unwrap().is_none());
    }

    #[test]
    fn a_tls_provider_without_consumer_tls_is_a_clear_error() {
        let e = choose(None, &instance(Some("true")), "dubbo").unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
        assert!(e.message().contains("dubbo://127.0.0.1:20880"), "{e}");
        assert!(e.message().contains("ssl-enabled=true"), "{e}");
        assert!(e.message().contains("tls_ca"), "{e}");
    }

    #[test]
    fn bad_pem_is_a_clear_error() {
        let e = ClientTls::from_pem(b"not a pem", None).unwrap_err();
        assert!(e.message().contains("holds no PEM CA certificate"), "{e}");
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let ca = ck.cert.pem();
        let e = ClientTls::from_pem(ca.as_bytes(), Some((ca.as_bytes(), b"nope"))).unwrap_err();
        assert!(
            e.message().contains("no unencrypted PEM private key"),
            "{e}"
        );
        let e = ClientTls::from_files(Path::new("/nonexistent/ca.pem"), None).unwrap_err();
        assert!(e.message().contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn server_names_are_the_host() {
        assert!(server_name("127.0.0.1:20880").is_ok());
        assert!(server_name("[::1]:20880").is_ok());
        assert!(server_name("provider.example:20880").is_ok());
        assert!(server_name("bad host:1").is_err());
    }

    #[tokio::test]
    async fn a_provider_serves_tls_from_pem_files_and_requires_client_certificates_with_a_ca() {
        use crate::protocol::triple::{TripleInvoker, TripleServer};
        use switchman_core::{Invocation, Invoker, Protocol};
        let dir = std::env::temp_dir().join(format!(
            "switchman-server-tls-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let server = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let client = rcgen::generate_simple_self_signed(vec!["client".into()]).unwrap();
        let file = |name: &str, text: String| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let cert = file("server.pem", server.cert.pem());
        let key = file("server.key", server.signing_key.serialize_pem());
        let client_cert = file("client.pem", client.cert.pem());
        let client_key = file("client.key", client.signing_key.serialize_pem());

        // Errors name the file.
        let missing = dir.join("missing.pem");
        let e = server_config(&missing, &key, None).unwrap_err();
        assert!(e.message().contains("missing.pem"), "{e}");
        let e = server_config(&cert, &cert, None).unwrap_err();
        assert!(e.message().contains("server.pem"), "{e}");
        assert!(
            e.message().contains("no unencrypted PEM private key"),
            "{e}"
        );
        let e = server_config(&cert, &key, Some(&key)).unwrap_err();
        assert!(e.message().contains("client CA file"), "{e}");

        // mTLS: the client certificate (self-signed: its own CA) is required.
        let config = server_config(&cert, &key, Some(&client_cert)).unwrap();
        let tls = TripleServer::serve_tls("127.0.0.1:0".parse().unwrap(), config, |req| {
            Box::pin(async move { Ok(req.message) })
        })
        .await
        .unwrap();
        let target = Instance::builder("127.0.0.1", tls.addr().port())
            .protocol(Protocol::Tri)
            .path("x.Echo")
            .build();
        let inv = Invocation::new("echo").with_args(vec![serde_json::json!("hi")]);
        let ca = server.cert.pem();
        let with_cert = ClientTls::from_files(&cert, Some((&client_cert, &client_key))).unwrap();
        let out = TripleInvoker::new()
            .payload(crate::protocol::triple::Payload::Raw)
            .client_tls(with_cert)
            .invoke(&target, &inv, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(out, serde_json::json!("hi"));
        let without = ClientTls::from_pem(ca.as_bytes(), None).unwrap();
        let e = TripleInvoker::new()
            .payload(crate::protocol::triple::Payload::Raw)
            .client_tls(without)
            .invoke(&target, &inv, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e.kind(),
                switchman_core::ErrorKind::Transport | switchman_core::ErrorKind::BadConfig
            ),
            "{e}"
        );
        assert_eq!(tls.hits(), 1, "only the call with a client certificate");
        // It answers a TLS handshake; a closed port does not.
        assert!(speaks_tls(&tls.addr().to_string(), Duration::from_secs(2)).await);
        drop(tls);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
