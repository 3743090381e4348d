//! TLS to Nacos (`secure=true`): HTTP (the login) and gRPC (everything else) through the shared
//! in-process relay (`crate::tls_relay`), rustls with the ring provider.
//!
//! nacos-sdk 0.8.3's own TLS is a process-wide native-tls (OpenSSL) cargo feature, which the
//! workspace does not build. With TLS on, nacos-sdk is given `127.0.0.1` relay addresses
//! instead of the servers: one relay PAIR per server, on local ports `p` and `p + 1000`
//! (nacos-sdk derives a server's gRPC port as its HTTP port + 1000, and its only other option,
//! `remote_grpc_port`, is one port for every server), forwarding over TLS to the server's HTTP
//! port and its gRPC port (HTTP + 1000, or `grpc_port`). The adapter's own login (`auth.rs`)
//! posts to the server list nacos-sdk hands it, the relays, so it goes over the same TLS.
//!
//! Parameters, ours (as for ZooKeeper) and the Nacos Java client's properties, which Dubbo
//! passes from the registry URL to the Nacos client:
//!
//! | ours | Nacos Java client | |
//! |---|---|---|
//! | `secure` | `nacos.remote.client.rpc.tls.enable` | TLS to every server |
//! | `tls.ca` | `nacos.remote.client.rpc.tls.trustCollectionChainPath` | PEM CA file, required |
//! | `tls.cert` | `nacos.remote.client.rpc.tls.certChainFile` | PEM client certificate chain |
//! | `tls.key` | `nacos.remote.client.rpc.tls.certPrivateKeyFile` | its unencrypted PEM key |
//! | `tls.hostname-verification` | | `false`: chain checked, not the name |
//!
//! `...tls.mutualAuth=true` requires a client certificate; `...tls.certPrivateKeyPwd` (an
//! encrypted key) and `...tls.trustAll=true` (no verification) are refused; `...tls.provider`,
//! `...tls.protocols` and `...tls.ciphers` are accepted and not used (rustls's safe defaults).

use std::fmt;
use std::time::Duration;

use switchman_core::Url;
use tracing::debug;

use crate::tls_relay::{Relay, Target, TlsClient, bool_param, param};

const JAVA: &str = "nacos.remote.client.rpc.tls.";
/// The offset nacos-sdk adds to a server's HTTP port for its gRPC port.
pub(super) const GRPC_OFFSET: u16 = 1000;
/// Bound on one relayed connection's TCP connect and TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The TLS settings of a registry (`secure=true`): the client configuration and, per server,
/// its HTTP and gRPC targets.
pub(crate) struct NacosTls {
    client: TlsClient,
    pairs: Vec<(Target, Target)>,
}

impl fmt::Debug for NacosTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NacosTls")
            .field("client", &self.client)
            .field("servers", &self.pairs.len())
            .finish()
    }
}

fn names(short: &'static str, java: &str) -> [String; 2] {
    [short.to_string(), format!("{JAVA}{java}")]
}

impl NacosTls {
    /// The TLS settings of `url` for `servers` (`host:port`, HTTP ports), whose gRPC port is
    /// `grpc_port` or HTTP + 1000; `None` without `secure=true`. `endpoint`: an address server
    /// is configured (its list cannot be relayed).
    pub(crate) fn from_url(
        url: &Url,
        servers: &[&str],
        grpc_port: Option<u16>,
        endpoint: bool,
    ) -> Result<Option<NacosTls>, String> {
        let get = |short: &'static str, java: &str| {
            let n = names(short, java);
            param(url, &[n[0].as_str(), n[1].as_str()])
        };
        let secure = {
            let n = names("secure", "enable");
            bool_param(url, &[n[0].as_str(), n[1].as_str()], false)?
        };
        let ca = get("tls.ca", "trustCollectionChainPath")?;
        let cert = get("tls.cert", "certChainFile")?;
        let key = get("tls.key", "certPrivateKeyFile")?;
        let hostname_verification = bool_param(url, &["tls.hostname-verification"], true)?;
        let mutual = bool_param(url, &[&format!("{JAVA}mutualAuth")], false)?;
        if bool_param(url, &[&format!("{JAVA}trustAll")], false)? {
            return Err(format!(
                "{JAVA}trustAll=true (no certificate check) is not supported: give the CA file \
                 (tls.ca), and tls.hostname-verification=false if the names do not match"
            ));
        }
        if param(url, &[&format!("{JAVA}certPrivateKeyPwd")])?.is_some() {
            return Err(format!(
                "{JAVA}certPrivateKeyPwd: an encrypted client key cannot be read; give an \
                 unencrypted PEM key (`openssl pkey -in KEY -out PLAIN`)"
            ));
        }
        for name in ["provider", "protocols", "ciphers"] {
            if param(url, &[&format!("{JAVA}{name}")])?.is_some() {
                debug!("registry parameter {JAVA}{name} is not used (rustls, safe defaults)");
            }
        }
        if !secure {
            if ca.is_some() || cert.is_some() || key.is_some() {
                return Err("TLS files are given but not secure=true".into());
            }
            return Ok(None);
        }
        if endpoint {
            return Err(
                "secure=true with an address server (endpoint) is not supported: list the \
                 servers instead"
                    .into(),
            );
        }
        if mutual && cert.is_none() {
            return Err(format!(
                "{JAVA}mutualAuth=true needs a client certificate (tls.cert)"
            ));
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
        let mut pairs = Vec::with_capacity(servers.len());
        for server in servers {
            let (host, port) = server
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
                .ok_or_else(|| format!("server {server}: no port"))?;
            let grpc = match grpc_port {
                Some(g) => g,
                None => port.checked_add(GRPC_OFFSET).ok_or_else(|| {
                    format!("server {server}: its gRPC port would be over 65535; give grpc_port")
                })?,
            };
            pairs.push((
                Target::new(server)?,
                Target::new(&format!("{host}:{grpc}"))?,
            ));
        }
        Ok(Some(NacosTls { client, pairs }))
    }

    /// Starts the relay pairs: the result's addresses are the servers nacos-sdk is given.
    pub(crate) async fn relay(&self) -> Result<Relay, String> {
        Relay::start_pairs(
            &self.client,
            &self.pairs,
            GRPC_OFFSET,
            "Nacos",
            HANDSHAKE_TIMEOUT,
        )
        .await
    }

    /// The real servers, `host:port`, for messages.
    pub(crate) fn servers(&self) -> String {
        self.pairs
            .iter()
            .map(|(http, _)| http.server())
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(params: &str) -> Result<Option<NacosTls>, String> {
        let url = Url::parse(&format!("nacos://nacos.example:8848?{params}")).unwrap();
        NacosTls::from_url(&url, &["nacos.example:8848"], None, false)
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
    fn java_names_and_bad_settings_are_named() {
        assert!(err("secure=true").contains("needs tls.ca"));
        assert!(err("nacos.remote.client.rpc.tls.enable=true").contains("needs tls.ca"));
        let e = err(
            "nacos.remote.client.rpc.tls.enable=true&nacos.remote.client.rpc.tls.trustCollectionChainPath=/nonexistent/ca.pem",
        );
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let e = err(
            "secure=true&tls.ca=/a.pem&nacos.remote.client.rpc.tls.trustCollectionChainPath=/b.pem",
        );
        assert!(e.contains("disagree"), "{e}");
        assert!(
            err("secure=true&tls.ca=/a.pem&nacos.remote.client.rpc.tls.trustAll=true")
                .contains("trustAll")
        );
        assert!(
            err("secure=true&tls.ca=/a.pem&nacos.remote.client.rpc.tls.certPrivateKeyPwd=hunter2")
                .contains("encrypted client key")
        );
        assert!(
            err("secure=true&tls.ca=/a.pem&nacos.remote.client.rpc.tls.mutualAuth=true")
                .contains("needs a client certificate")
        );
        assert!(
            err("secure=true&tls.ca=/a.pem&nacos.remote.client.rpc.tls.certPrivateKeyFile=/k.pem")
                .contains("without tls.cert")
        );
        let url = Url::parse("nacos://a:8848?secure=true&tls.ca=/a.pem").unwrap();
        let e = NacosTls::from_url(&url, &["a:8848"], None, true).unwrap_err();
        assert!(e.contains("address server"), "{e}");
    }
}
