//! TLS to ZooKeeper (`secure=true`): the server's certificate checked against a CA file, an
//! optional client certificate, rustls with the ring provider.
//!
//! The ZooKeeper client crate speaks plain TCP here: its own `tls` feature pulls rustls with its
//! default provider (aws-lc-rs, built with cmake), which the workspace does not build. So each
//! server gets an in-process relay instead: a listener on `127.0.0.1:0` that the ZooKeeper
//! client connects to, and for each connection a TLS connection to the real server (tokio-rustls,
//! ring), bytes copied both ways. Nothing leaves the machine unencrypted. On Linux the relay only
//! serves connections made by this process (the connecting socket's inode, from
//! `/proc/net/tcp`, must be one of `/proc/self/fd`), so another local user cannot ride on the
//! client certificate; elsewhere any local process could.
//!
//! The files are read once, when the registry URL is parsed: a missing or unreadable file is a
//! configuration error naming it. Handshake failures are kept by the relay and reported by the
//! session's connect error (server, reason, CA file).

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchman_core::Url;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tracing::{debug, warn};

/// `secure`, and the Java client's property that means the same.
const SECURE: [&str; 2] = ["secure", "zookeeper.client.secure"];
/// The CA file: ours, and ZooKeeper's trust store (PEM only).
const CA: [&str; 2] = ["tls.ca", "zookeeper.ssl.trustStore.location"];
/// The client certificate: ours, and ZooKeeper's key store (a PEM file with key and chain).
const CERT: [&str; 2] = ["tls.cert", "zookeeper.ssl.keyStore.location"];
const KEY: [&str; 1] = ["tls.key"];
const HOSTNAME: [&str; 2] = [
    "tls.hostname-verification",
    "zookeeper.ssl.hostnameVerification",
];
/// Store types: only PEM can be read.
const STORE_TYPES: [&str; 2] = [
    "zookeeper.ssl.trustStore.type",
    "zookeeper.ssl.keyStore.type",
];
/// Accepted, not used: the Java client needs Netty for TLS; this one has a single transport.
const IGNORED: [&str; 2] = [
    "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.trustStore.password",
];

/// The TLS settings of a registry (`secure=true`).
pub(crate) struct ZkTls {
    config: Arc<rustls::ClientConfig>,
    /// Every server: `host:port` and the name its certificate must carry.
    targets: Vec<(Arc<str>, ServerName<'static>)>,
    ca: PathBuf,
    cert: Option<PathBuf>,
    hostname_verification: bool,
}

impl fmt::Debug for ZkTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkTls")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("hostname_verification", &self.hostname_verification)
            .finish()
    }
}

/// The value of the first of `names` the URL gives (empty values count as absent); two names
/// with different values are an error.
fn param<'a>(url: &'a Url, names: &[&str]) -> Result<Option<&'a str>, String> {
    let mut found: Option<(&str, &str)> = None;
    for name in names {
        if let Some(v) = url.param(name).map(str::trim).filter(|v| !v.is_empty()) {
            match found {
                Some((n, prev)) if prev != v => {
                    return Err(format!("{n}={prev:?} and {name}={v:?} disagree"));
                }
                Some(_) => {}
                None => found = Some((name, v)),
            }
        }
    }
    Ok(found.map(|(_, v)| v))
}

fn bool_param(url: &Url, names: &[&str], default: bool) -> Result<bool, String> {
    match param(url, names)? {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(format!("{}={v:?} is neither true nor false", names[0])),
    }
}

/// What to do with a store that is not PEM.
const EXPORT_PEM: &str = "a JKS or PKCS#12 store cannot be read: export it as PEM \
     (`keytool -exportcert -rfc` for a CA, `openssl pkcs12 -nodes` for a key and its chain)";

fn load_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read the {what} file {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the {what} file {} is not PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "the {what} file {} holds no PEM certificate ({EXPORT_PEM})",
            path.display()
        ));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "the client key file {} holds no unencrypted PEM private key (give tls.key, or a \
             key store file with the key; an encrypted key cannot be read: \
             `openssl pkey -in KEY -out PLAIN`)",
            path.display()
        ),
        e => format!("cannot read the client key file {}: {e}", path.display()),
    })
}

/// The name a server's certificate must carry: its host (a DNS name or an IP address).
fn server_name(server: &str) -> Result<ServerName<'static>, String> {
    let host = server.rsplit_once(':').map_or(server, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|_| {
        format!("server {server}: {host:?} is neither a DNS name nor an IP address a certificate can carry")
    })
}

impl ZkTls {
    /// The TLS settings of `url` for `servers` (`host:port`), `None` without `secure=true`.
    pub(crate) fn from_url(url: &Url, servers: &[String]) -> Result<Option<ZkTls>, String> {
        let secure = bool_param(url, &SECURE, false)?;
        let ca = param(url, &CA)?;
        let cert = param(url, &CERT)?;
        let key = param(url, &KEY)?;
        let hostname_verification = bool_param(url, &HOSTNAME, true)?;
        for name in STORE_TYPES {
            if let Some(t) = param(url, &[name])?
                && !t.eq_ignore_ascii_case("pem")
            {
                return Err(format!(
                    "{name}={t}: only PEM files can be read; {EXPORT_PEM}"
                ));
            }
        }
        if param(url, &["zookeeper.ssl.keyStore.password"])?.is_some() {
            return Err(
                "zookeeper.ssl.keyStore.password: an encrypted client key cannot be \
                 read; give an unencrypted PEM key (`openssl pkey -in KEY -out PLAIN`)"
                    .into(),
            );
        }
        for name in IGNORED {
            if param(url, &[name])?.is_some() {
                debug!("registry parameter {name} is not needed here and is ignored");
            }
        }
        if !secure {
            if ca.is_some() || cert.is_some() || key.is_some() {
                return Err("TLS files are given but not secure=true".into());
            }
            return Ok(None);
        }
        if cert.is_none() && key.is_some() {
            return Err("tls.key is given without tls.cert".into());
        }
        let Some(ca) = ca else {
            return Err(
                "secure=true needs tls.ca: the PEM file of the CA that signed the \
                 servers' certificates"
                    .into(),
            );
        };
        let ca = PathBuf::from(ca);
        let mut roots = rustls::RootCertStore::empty();
        for c in load_certs(&ca, "CA")? {
            roots
                .add(c)
                .map_err(|e| format!("the CA file {}: {e}", ca.display()))?;
        }
        let identity = match (cert, key) {
            (None, _) => None,
            (Some(cert), key) => {
                let cert = PathBuf::from(cert);
                let chain = load_certs(&cert, "client certificate")?;
                // A ZooKeeper PEM key store holds the key and the chain in one file.
                let key = load_key(key.map_or(cert.as_path(), Path::new))?;
                Some((cert, chain, key))
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| format!("the CA file {}: {e}", ca.display()))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = if hostname_verification {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
        };
        let (config, cert) = match identity {
            None => (builder.with_no_client_auth(), None),
            Some((path, chain, key)) => (
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("the client certificate {}: {e}", path.display()))?,
                Some(path),
            ),
        };
        let targets = servers
            .iter()
            .map(|s| Ok((Arc::from(s.as_str()), server_name(s)?)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Some(ZkTls {
            config: Arc::new(config),
            targets,
            ca,
            cert,
            hostname_verification,
        }))
    }

    /// Starts one relay listener per server.
    pub(crate) async fn relay(&self, timeout: Duration) -> Result<Relay, String> {
        let last_error = Arc::new(Mutex::new(None));
        let mut locals = Vec::new();
        let mut tasks = Vec::new();
        for (server, name) in &self.targets {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot open the TLS relay for {server}: {e}"))?;
            let local = listener
                .local_addr()
                .map_err(|e| format!("cannot open the TLS relay for {server}: {e}"))?;
            locals.push(local.to_string());
            let target = Target {
                server: server.clone(),
                name: name.clone(),
                connector: TlsConnector::from(self.config.clone()),
                timeout,
                ca: self.ca.clone(),
                cert: self.cert.clone(),
                last_error: last_error.clone(),
            };
            tasks.push(tokio::spawn(accept(listener, local, target)));
        }
        Ok(Relay {
            connect: locals.join(","),
            tasks,
            last_error,
        })
    }
}

/// The relay listeners of one session task; they close when it is dropped.
pub(crate) struct Relay {
    connect: String,
    tasks: Vec<JoinHandle<()>>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl Relay {
    /// The connect string for the ZooKeeper client: the local listeners.
    pub(crate) fn connect_string(&self) -> &str {
        &self.connect
    }

    /// The last failure of a TLS connection since the last call, if any.
    pub(crate) fn take_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One server behind a relay listener.
#[derive(Clone)]
struct Target {
    server: Arc<str>,
    name: ServerName<'static>,
    connector: TlsConnector,
    timeout: Duration,
    ca: PathBuf,
    cert: Option<PathBuf>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl Target {
    /// What a failed handshake says: a refusal by the server points at the client certificate,
    /// anything else (an unknown issuer, a wrong name) at the CA file.
    fn handshake_error(&self, e: &std::io::Error) -> String {
        let refused = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .is_some_and(|e| matches!(e, rustls::Error::AlertReceived(_)));
        let hint = match (&self.cert, refused) {
            (None, true) => {
                "the server refused it: does it need a client certificate (tls.cert)?".to_string()
            }
            (Some(cert), true) => format!(
                "the server refused it: is the client certificate {} signed by a CA it trusts?",
                cert.display()
            ),
            (_, false) => format!("CA file {}", self.ca.display()),
        };
        format!("TLS handshake with {} failed: {e} ({hint})", self.server)
    }

    fn failed(&self, reason: String) {
        debug!(server = %self.server, "TLS connection to ZooKeeper failed: {reason}");
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }
}

async fn accept(listener: TcpListener, me: SocketAddr, target: Target) {
    loop {
        let (local, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                debug!(server = %target.server, "TLS relay accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ours = tokio::task::spawn_blocking(move || from_this_process(peer, me))
            .await
            .unwrap_or(false);
        if !ours {
            warn!(server = %target.server, %peer, "refused a connection to the ZooKeeper TLS relay: it does not come from this process");
            continue;
        }
        tokio::spawn(forward(local, target.clone()));
    }
}

async fn forward(mut local: TcpStream, t: Target) {
    let connect = async {
        let tcp = TcpStream::connect(&*t.server)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", t.server))?;
        let _ = tcp.set_nodelay(true);
        t.connector
            .connect(t.name.clone(), tcp)
            .await
            .map_err(|e| t.handshake_error(&e))
    };
    let mut tls = match tokio::time::timeout(t.timeout, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return t.failed(e),
        Err(_) => {
            return t.failed(format!(
                "no TLS session with {} within {:?}",
                t.server, t.timeout
            ));
        }
    };
    let _ = local.set_nodelay(true);
    if let Err(e) = tokio::io::copy_bidirectional(&mut local, &mut tls).await {
        t.failed(format!("the TLS connection to {} failed: {e}", t.server));
    }
}

/// Whether the connection from `peer` to the relay at `me` was made by this process: the
/// connecting socket (`peer` → `me` in `/proc/net/tcp`) is one of this process's descriptors.
#[cfg(target_os = "linux")]
fn from_this_process(peer: SocketAddr, me: SocketAddr) -> bool {
    let hex = |a: SocketAddr| match a {
        SocketAddr::V4(a) => format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(a.ip().octets()),
            a.port()
        ),
        SocketAddr::V6(_) => String::new(),
    };
    let (from, to) = (hex(peer), hex(me));
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let Some(inode) = table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == from && f[2] == to).then(|| f[9].to_string())
    }) else {
        return false;
    };
    let want = format!("socket:[{inode}]");
    std::fs::read_dir("/proc/self/fd").is_ok_and(|dir| {
        dir.flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == want.as_str()))
    })
}

/// Elsewhere there is no such check (see the module documentation).
#[cfg(not(target_os = "linux"))]
fn from_this_process(_peer: SocketAddr, _me: SocketAddr) -> bool {
    true
}

/// `tls.hostname-verification=false`: the chain is checked against the CA, the name is not.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        // webpki checks the chain first, the name last: a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(params: &str) -> Result<Option<ZkTls>, String> {
        let url = Url::parse(&format!("zookeeper://zk_1.example:2281?{params}")).unwrap();
        ZkTls::from_url(&url, &url.servers(2181).unwrap())
    }

    fn err(params: &str) -> String {
        parse(params).expect_err(params)
    }

    #[test]
    fn plain_without_secure() {
        assert!(parse("").unwrap().is_none());
        assert!(parse("secure=false").unwrap().is_none());
        assert!(err("tls.ca=/x.pem").contains("not secure=true"));
        assert!(err("secure=yes").contains("neither true nor false"));
    }

    #[test]
    fn bad_settings_are_named() {
        assert!(err("secure=true").contains("needs tls.ca"));
        assert!(
            err("secure=true&zookeeper.ssl.trustStore.location=/t.jks&zookeeper.ssl.trustStore.type=JKS")
                .contains("export it as PEM")
        );
        assert!(
            err("secure=true&tls.ca=/a.pem&zookeeper.ssl.keyStore.password=hunter2")
                .contains("encrypted client key")
        );
        let e = err("secure=true&tls.ca=/a.pem&zookeeper.ssl.trustStore.location=/b.pem");
        assert!(e.contains("disagree"), "{e}");
        let e = err("zookeeper.client.secure=true&tls.ca=/nonexistent/ca.pem");
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        assert!(err("secure=true&tls.ca=/a.pem&tls.key=/k.pem").contains("without tls.cert"));
    }

    #[test]
    fn files_that_are_not_pem_are_named() {
        let dir =
            std::env::temp_dir().join(format!("switchman-zk-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("truststore.jks");
        std::fs::write(&store, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).unwrap();
        let e = err(&format!("secure=true&tls.ca={}", store.display()));
        assert!(
            e.contains(&store.display().to_string()) && e.contains("PEM"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn hosts_a_certificate_cannot_name_are_an_error_not_a_panic() {
        assert!(server_name("-zk.example:2281").is_err());
        assert!(server_name("zk..example:2281").is_err());
        assert!(server_name("127.0.0.1:2281").is_ok());
        assert!(server_name("[::1]:2281").is_ok());
        assert!(server_name("zk1.example.com:2281").is_ok());
    }
}
