//! TLS to a registry whose client crate speaks plain TCP only (ZooKeeper, Nacos): an
//! in-process relay, rustls with the ring provider.
//!
//! The registry client crates' own TLS pulls either rustls with its default provider (aws-lc-rs,
//! built with cmake: zookeeper-client) or a process-wide native-tls/OpenSSL feature (nacos-sdk),
//! neither of which the workspace builds. So each server gets a relay instead: a listener on
//! `127.0.0.1` that the registry client connects to in plain TCP, and for each connection a TLS
//! connection to the real server (tokio-rustls, ring), bytes copied both ways. Nothing leaves
//! the machine unencrypted. On Linux the relay only serves connections made by this process
//! (the connecting socket's inode, from `/proc/net/tcp`, must be one of `/proc/self/fd`), so
//! another local user cannot ride on the client certificate; elsewhere any local process could.
//!
//! The PEM files are read once, when the registry URL is parsed ([`TlsClient::new`]): a missing
//! or unreadable file is a configuration error naming it. Handshake failures are kept by the
//! relay ([`Relay::take_error`]) for the adapter's connect errors: they name the server and the
//! CA file (or the client certificate, when the server refused it).
//!
//! The URL parameters that turn TLS on are each adapter's (`zookeeper/tls.rs`, `nacos/tls.rs`);
//! [`param`] and [`bool_param`] are the shared readers.

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

/// The value of the first of `names` the URL gives (empty values count as absent); two names
/// with different values are an error.
pub(crate) fn param<'a>(url: &'a Url, names: &[&str]) -> Result<Option<&'a str>, String> {
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

/// A `true`/`false` parameter (any case) under one of `names`, `default` when absent.
pub(crate) fn bool_param(url: &Url, names: &[&str], default: bool) -> Result<bool, String> {
    match param(url, names)? {
        None => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(format!("{}={v:?} is neither true nor false", names[0])),
    }
}

/// What to do with a store that is not PEM.
pub(crate) const EXPORT_PEM: &str = "a JKS or PKCS#12 store cannot be read: export it as PEM \
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
pub(crate) fn server_name(server: &str) -> Result<ServerName<'static>, String> {
    let host = crate::address::host_of(server);
    ServerName::try_from(host.to_string()).map_err(|_| {
        format!("server {server}: {host:?} is neither a DNS name nor an IP address a certificate can carry")
    })
}

/// A rustls client configuration (ring) from PEM files, and the files it came from (for
/// messages).
pub(crate) struct TlsClient {
    config: Arc<rustls::ClientConfig>,
    ca: PathBuf,
    cert: Option<PathBuf>,
    hostname_verification: bool,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .field("hostname_verification", &self.hostname_verification)
            .finish()
    }
}

impl TlsClient {
    /// Reads the CA file `ca`, and the client certificate chain `cert` with its key (`key`, or
    /// the `cert` file itself when it holds the key too).
    pub(crate) fn new(
        ca: &str,
        cert: Option<&str>,
        key: Option<&str>,
        hostname_verification: bool,
    ) -> Result<TlsClient, String> {
        if cert.is_none() && key.is_some() {
            return Err("tls.key is given without tls.cert".into());
        }
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
                // A PEM key store holds the key and the chain in one file.
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
        Ok(TlsClient {
            config: Arc::new(config),
            ca,
            cert,
            hostname_verification,
        })
    }
}

/// A server behind a relay listener: `host:port` and the name its certificate must carry.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    server: Arc<str>,
    name: ServerName<'static>,
}

impl Target {
    /// `server` is `host:port`; the certificate must name the host.
    pub(crate) fn new(server: &str) -> Result<Target, String> {
        Ok(Target {
            server: Arc::from(server),
            name: server_name(server)?,
        })
    }

    /// `host:port`.
    #[cfg_attr(not(feature = "nacos"), allow(dead_code))]
    pub(crate) fn server(&self) -> &str {
        &self.server
    }
}

/// How many port pairs [`Relay::start_pairs`] tries per server before giving up.
#[cfg_attr(not(feature = "nacos"), allow(dead_code))]
const PAIR_ATTEMPTS: usize = 64;

/// The relay listeners of one registry connection; they close when it is dropped.
pub(crate) struct Relay {
    /// The local address of each server's (first) listener, in the order of the targets,
    /// separated by commas.
    connect: String,
    tasks: Vec<JoinHandle<()>>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay")
            .field("listeners", &self.connect)
            .finish()
    }
}

/// What one relay listener needs to serve its connections.
fn forwarder(
    tls: &TlsClient,
    target: &Target,
    what: &'static str,
    timeout: Duration,
    last_error: &Arc<Mutex<Option<String>>>,
) -> Forward {
    Forward {
        server: target.server.clone(),
        name: target.name.clone(),
        connector: TlsConnector::from(tls.config.clone()),
        timeout,
        ca: tls.ca.clone(),
        cert: tls.cert.clone(),
        what,
        last_error: last_error.clone(),
    }
}

impl Relay {
    /// One listener on `127.0.0.1:0` per target. `what` names the registry kind in logs;
    /// `timeout` bounds each connection's TCP connect and handshake.
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) async fn start(
        tls: &TlsClient,
        targets: &[Target],
        what: &'static str,
        timeout: Duration,
    ) -> Result<Relay, String> {
        let last_error = Arc::new(Mutex::new(None));
        let mut relay = Relay {
            connect: String::new(),
            tasks: Vec::new(),
            last_error,
        };
        for target in targets {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot open the TLS relay for {}: {e}", target.server))?;
            let local = listener
                .local_addr()
                .map_err(|e| format!("cannot open the TLS relay for {}: {e}", target.server))?;
            relay.push_local(local);
            let f = forwarder(tls, target, what, timeout, &relay.last_error);
            relay.tasks.push(tokio::spawn(accept(listener, local, f)));
        }
        Ok(relay)
    }

    /// Two listeners per pair of targets, on local ports `p` and `p + offset` (nacos-sdk
    /// derives a server's gRPC port from its HTTP port that way): pairs of free ports are
    /// picked until both bind. [`Relay::connect_string`] lists the first listeners.
    #[cfg_attr(not(feature = "nacos"), allow(dead_code))]
    pub(crate) async fn start_pairs(
        tls: &TlsClient,
        pairs: &[(Target, Target)],
        offset: u16,
        what: &'static str,
        timeout: Duration,
    ) -> Result<Relay, String> {
        let last_error = Arc::new(Mutex::new(None));
        let mut relay = Relay {
            connect: String::new(),
            tasks: Vec::new(),
            last_error,
        };
        for (first, second) in pairs {
            let cannot = |e: &dyn fmt::Display| {
                format!("cannot open the TLS relay for {}: {e}", first.server)
            };
            let mut bound = None;
            for _ in 0..PAIR_ATTEMPTS {
                let a = TcpListener::bind("127.0.0.1:0")
                    .await
                    .map_err(|e| cannot(&e))?;
                let local_a = a.local_addr().map_err(|e| cannot(&e))?;
                let Some(port_b) = local_a.port().checked_add(offset) else {
                    continue;
                };
                if let Ok(b) = TcpListener::bind(("127.0.0.1", port_b)).await
                    && let Ok(local_b) = b.local_addr()
                {
                    bound = Some(((a, local_a), (b, local_b)));
                    break;
                }
            }
            let Some(((a, local_a), (b, local_b))) = bound else {
                return Err(cannot(&format!(
                    "no pair of free local ports p and p + {offset} in {PAIR_ATTEMPTS} tries"
                )));
            };
            relay.push_local(local_a);
            let fa = forwarder(tls, first, what, timeout, &relay.last_error);
            let fb = forwarder(tls, second, what, timeout, &relay.last_error);
            relay.tasks.push(tokio::spawn(accept(a, local_a, fa)));
            relay.tasks.push(tokio::spawn(accept(b, local_b, fb)));
        }
        Ok(relay)
    }

    fn push_local(&mut self, local: SocketAddr) {
        if !self.connect.is_empty() {
            self.connect.push(',');
        }
        self.connect.push_str(&local.to_string());
    }

    /// The local listeners (the first of each pair), `127.0.0.1:port` separated by commas, as a
    /// client's server list.
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

/// One server behind a relay listener, and what its connections need.
#[derive(Clone)]
struct Forward {
    server: Arc<str>,
    name: ServerName<'static>,
    connector: TlsConnector,
    timeout: Duration,
    ca: PathBuf,
    cert: Option<PathBuf>,
    what: &'static str,
    last_error: Arc<Mutex<Option<String>>>,
}

impl Forward {
    /// What a failed handshake says: a refusal by the server points at the client certificate,
    /// anything else (an unknown issuer, a wrong name) at the CA file.
    fn handshake_error(&self, e: &std::io::Error) -> String {
        let refused = alert(e).is_some();
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
        debug!(server = %self.server, "TLS connection to {} failed: {reason}", self.what);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }
}

async fn accept(listener: TcpListener, me: SocketAddr, target: Forward) {
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
            warn!(server = %target.server, %peer, "refused a connection to the {} TLS relay: it does not come from this process", target.what);
            continue;
        }
        tokio::spawn(forward(local, target.clone()));
    }
}

async fn forward(mut local: TcpStream, t: Forward) {
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
        // TLS 1.3: the client's side of the handshake ends before the server has checked
        // the client's certificate, so a refusal of it arrives as an alert on the first read.
        let refusal = alert(&e).is_some_and(|a| {
            use rustls::AlertDescription as A;
            matches!(
                a,
                A::CertificateRequired
                    | A::BadCertificate
                    | A::UnsupportedCertificate
                    | A::CertificateUnknown
                    | A::UnknownCA
                    | A::AccessDenied
            )
        });
        t.failed(if refusal {
            t.handshake_error(&e)
        } else {
            format!("the TLS connection to {} failed: {e}", t.server)
        });
    }
}

/// The alert the peer sent, when that is what `e` is.
fn alert(e: &std::io::Error) -> Option<rustls::AlertDescription> {
    match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::AlertReceived(a) => Some(*a),
        _ => None,
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

    #[test]
    fn hosts_a_certificate_cannot_name_are_an_error_not_a_panic() {
        assert!(server_name("-zk.example:2281").is_err());
        assert!(server_name("zk..example:2281").is_err());
        assert!(server_name("127.0.0.1:2281").is_ok());
        assert!(server_name("[::1]:2281").is_ok());
        assert!(server_name("zk1.example.com:2281").is_ok());
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let e = TlsClient::new("/nonexistent/ca.pem", None, None, true).unwrap_err();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let e = TlsClient::new("/a.pem", None, Some("/k.pem"), true).unwrap_err();
        assert!(e.contains("without tls.cert"), "{e}");
    }
}
