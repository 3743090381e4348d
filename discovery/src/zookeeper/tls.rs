//! TLS to ZooKeeper (`secure=true`): the server's certificate checked against a CA file, an
//! optional client certificate, rustls with the ring provider.
//!
//! The ZooKeeper client crate speaks plain TCP here: its own `tls` feature pulls rustls with its
//! default provider (aws-lc-rs, built with cmake), which the workspace does not build. So each
//! server gets an in-process relay instead (`crate::tls_relay`, shared with Nacos): a listener
//! on `127.0.0.1:0` that the ZooKeeper client connects to, and for each connection a TLS
//! connection to the real server, serving only connections made by this process (on Linux).
//! This file reads the ZooKeeper URL parameters.
//!
//! The files are read once, when the registry URL is parsed: a missing or unreadable file is a
//! configuration error naming it. Handshake failures are kept by the relay and reported by the
//! session's connect error (server, reason, CA file).

use std::fmt;
use std::time::Duration;

use switchman_core::Url;
use tracing::debug;

pub(crate) use crate::tls_relay::Relay;
use crate::tls_relay::{EXPORT_PEM, Target, TlsClient, bool_param, param};

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
    client: TlsClient,
    /// Every server: `host:port` and the name its certificate must carry.
    targets: Vec<Target>,
}

impl fmt::Debug for ZkTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkTls")
            .field("client", &self.client)
            .finish()
    }
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
        let client = TlsClient::new(ca, cert, key, hostname_verification)?;
        let targets = servers
            .iter()
            .map(|s| Target::new(s))
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Some(ZkTls { client, targets }))
    }

    /// Starts one relay listener per server.
    pub(crate) async fn relay(&self, timeout: Duration) -> Result<Relay, String> {
        Relay::start(&self.client, &self.targets, "ZooKeeper", timeout).await
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
}
