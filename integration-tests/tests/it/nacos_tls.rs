//! The Nacos adapter over TLS (`secure=true`): rnacos has no TLS, so each test puts a TLS
//! terminator (rustls, certificates from rcgen) in front of a PRIVATE rnacos, on a port pair
//! `p` / `p + 1000` forwarding to rnacos's HTTP and gRPC ports. A subscription over TLS sees an
//! instance registered through the open API; with auth, the login goes over TLS and its token
//! is refreshed before it expires (rnacos's `RNACOS_API_LOGIN_TIMEOUT` sets the TTL); a wrong
//! CA fails clearly (not ready, a log line naming the server and the CA file).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchman_cluster::triple::rustls;
use switchman_core::{Instance, ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, RegistryDirectory};
use switchman_integration_tests::nacos_api;

use super::test_pki::{ca, leaf, leaf_pair, write};
use switchman_integration_tests::nacos_server::{NacosServer, scratch_dir};
use switchman_integration_tests::unique;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const USER: &str = "switchman";
const PASSWORD: &str = "s3cret-tls-pass";
/// The token TTL rnacos is started with: over one nacos-sdk login period (30 s), so that a
/// refresh at the SDK's pace can keep it fresh, and short enough for a test.
const TOKEN_TTL: Duration = Duration::from_secs(40);

/// A CA, the server's certificate for 127.0.0.1 signed by it, and a second CA; a client
/// certificate and key signed by the CA, and a server configuration that requires one.
struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    other_ca: PathBuf,
    server: Arc<rustls::ServerConfig>,
    client_cert: PathBuf,
    client_key: PathBuf,
    mutual: Arc<rustls::ServerConfig>,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki() -> Pki {
    let dir = std::env::temp_dir().join(unique("switchman-nacos-tls"));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_cert, issuer) = ca("switchman nacos test CA");
    let (other_cert, _) = ca("another CA");
    let (cert, key) = leaf_pair(&issuer);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = || {
        rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
    };
    let chain = vec![cert.der().clone()];
    let key = || rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let server = builder()
        .with_no_client_auth()
        .with_single_cert(chain.clone(), key())
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_cert.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mutual = builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key())
        .unwrap();
    let (client_cert, client_key) = leaf(&issuer);
    let p = Pki {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        server: Arc::new(server),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        mutual: Arc::new(mutual),
        dir,
    };
    write(&p.ca, &ca_cert.pem());
    write(&p.other_ca, &other_cert.pem());
    write(&p.client_cert, &client_cert);
    write(&p.client_key, &client_key);
    p
}

/// A TLS terminator on `127.0.0.1:p` and `p + 1000`, forwarding the decrypted bytes to
/// rnacos's HTTP and gRPC ports. Its tasks end with the runtime.
async fn terminator(config: Arc<rustls::ServerConfig>, nacos: &NacosServer) -> u16 {
    let p = switchman_integration_tests::ports::allocate_with(&[1000]);
    for (port, backend) in [(p, nacos.http_port()), (p + 1000, nacos.grpc_port())] {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| panic!("terminator on {port}: {e}"));
        let config = config.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(terminate(tcp, backend, config.clone()));
            }
        });
    }
    p
}

/// One TLS connection: rustls's state machine between the client's socket and a plain
/// connection to `backend`.
async fn terminate(tcp: TcpStream, backend: u16, config: Arc<rustls::ServerConfig>) {
    let Ok(plain) = TcpStream::connect(("127.0.0.1", backend)).await else {
        return;
    };
    let Ok(mut conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let (mut tr, mut tw) = tcp.into_split();
    let (mut br, mut bw) = plain.into_split();
    let mut tbuf = vec![0u8; 16 * 1024];
    let mut bbuf = vec![0u8; 16 * 1024];
    loop {
        while conn.wants_write() {
            let mut out = Vec::new();
            if conn.write_tls(&mut out).is_err() || tw.write_all(&out).await.is_err() {
                return;
            }
        }
        tokio::select! {
            n = tr.read(&mut tbuf) => {
                let Ok(n) = n else { return };
                if n == 0 {
                    return;
                }
                let mut rd = &tbuf[..n];
                while !rd.is_empty() {
                    if conn.read_tls(&mut rd).is_err() || conn.process_new_packets().is_err() {
                        // A failed handshake: send the alert, then close.
                        let mut out = Vec::new();
                        let _ = conn.write_tls(&mut out);
                        let _ = tw.write_all(&out).await;
                        return;
                    }
                    let mut plain = Vec::new();
                    let eof = match conn.reader().read_to_end(&mut plain) {
                        Ok(_) => true,
                        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                    };
                    if !plain.is_empty() && bw.write_all(&plain).await.is_err() {
                        return;
                    }
                    if eof {
                        return;
                    }
                }
            }
            n = br.read(&mut bbuf), if !conn.is_handshaking() => {
                let Ok(n) = n else { return };
                if n == 0 {
                    conn.send_close_notify();
                } else if conn.writer().write_all(&bbuf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

fn registry(address: &str) -> NacosRegistry {
    NacosRegistry::from_url(&Url::parse(address).unwrap()).expect("valid nacos URL")
}

fn login_count(server: &NacosServer) -> usize {
    server
        .log()
        .lines()
        .filter(|l| l.contains("\"POST /nacos/v1/auth/login HTTP/1.1\" 200 "))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_over_tls_with_a_login_whose_token_is_refreshed_before_it_expires() {
    let p = pki();
    let ttl = TOKEN_TTL.as_secs().to_string();
    let server = tokio::task::block_in_place(|| {
        NacosServer::start_with(&[
            ("RNACOS_ENABLE_OPEN_API_AUTH", "true"),
            ("RNACOS_INIT_ADMIN_USERNAME", USER),
            ("RNACOS_INIT_ADMIN_PASSWORD", PASSWORD),
            ("RNACOS_API_LOGIN_TIMEOUT", ttl.as_str()),
        ])
    });
    // rnacos creates its admin user shortly after it starts serving; its answer gives the TTL.
    let token = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let login = nacos_api::request(
                &server.addr(),
                "POST",
                "/nacos/v1/auth/login",
                &[("username", USER.into()), ("password", PASSWORD.into())],
            );
            if let Ok(body) = login
                && body.contains("accessToken")
            {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert_eq!(v["tokenTtl"].as_u64(), Some(TOKEN_TTL.as_secs()), "{body}");
                return v["accessToken"].as_str().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("rnacos auth never became ready");
    let port = terminator(p.server.clone(), &server).await;
    let cache = scratch_dir("switchman-nacos-tls");

    // An instance registered through the open API (plain HTTP to rnacos, with a token).
    let seen = unique("it.nacos.tls.open");
    nacos_api::request(
        &server.addr(),
        "POST",
        "/nacos/v1/ns/instance",
        &[
            ("serviceName", seen.clone()),
            ("ip", "127.0.0.1".into()),
            ("port", "18120".into()),
            ("healthy", "true".into()),
            ("ephemeral", "false".into()),
            ("accessToken", token),
        ],
    )
    .expect("open API register");

    // Our parameter names; the credentials in the address.
    let consumer = registry(&format!(
        "nacos://{USER}:{PASSWORD}@127.0.0.1:{port}?secure=true&tls.ca={}&naming=plain&rules=false&cache_dir={}",
        p.ca.display(),
        cache.join("consumer").display()
    ));
    let started = Instant::now();
    let dir = RegistryDirectory::subscribe(&consumer, DirectoryConfig::new(ServiceKey::new(&seen)))
        .await
        .expect("subscribe");
    dir.wait_until(Duration::from_secs(20), |s| s.endpoints().len() == 1)
        .await
        .expect("a subscription over TLS sees the instance registered through the open API");

    // The Nacos Java client's property names (as Dubbo passes them on); the credentials as
    // parameters.
    let later = ServiceKey::new(unique("it.nacos.tls.later"));
    let provider = registry(&format!(
        "nacos://127.0.0.1:{port}?nacos.remote.client.rpc.tls.enable=true\
         &nacos.remote.client.rpc.tls.trustCollectionChainPath={}\
         &username={USER}&password={PASSWORD}&naming=plain&rules=false&cache_dir={}",
        p.ca.display(),
        cache.join("provider").display()
    ));
    let instance = |port: u16| {
        Instance::builder("127.0.0.1", port)
            .service(later.clone())
            .warmup(Duration::ZERO)
            .build()
    };
    provider
        .register(&instance(18_121))
        .await
        .expect("registered over TLS with a login over TLS");
    let watcher = RegistryDirectory::subscribe(&consumer, DirectoryConfig::new(later.clone()))
        .await
        .expect("subscribe");
    watcher
        .wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 1)
        .await
        .expect("the consumer sees the provider registered over TLS");
    // Two clients (the consumer's and the provider's naming clients), one login each so far.
    let first_logins = login_count(&server);
    assert!(
        first_logins >= 2,
        "{first_logins} logins; log:\n{}",
        server.log()
    );

    // Past the first tokens' expiry (the consumer logged in before `started`, the provider
    // after): both clients logged in again before it, at the SDK's 30 s pace.
    let past = TOKEN_TTL + Duration::from_secs(5);
    tokio::time::sleep(past.saturating_sub(started.elapsed())).await;
    let logins = login_count(&server);
    assert!(
        logins >= first_logins + 2,
        "each client renewed its token before it expired: {first_logins} logins, then {logins} after {past:?}; log:\n{}",
        server.log()
    );
    // The renewed token works: a registration after the first token's expiry, seen over TLS.
    if let Err(e) = provider.register(&instance(18_122)).await {
        panic!(
            "registered with the renewed token: {e}; log:\n{}",
            server.log()
        );
    }
    watcher
        .wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 2)
        .await
        .expect("the change after the first token's expiry is seen over TLS");
    let log = server.log();
    assert!(
        !log.contains(PASSWORD),
        "the password reached the server's access log"
    );
    drop((dir, watcher, consumer, provider));
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "current_thread")]
async fn a_wrong_ca_fails_clearly_naming_the_server_and_the_ca_file() {
    let (logs, _guard) = super::thread_logs::debug_logs_on_this_thread();
    let p = pki();
    let server = NacosServer::start();
    let port = terminator(p.server.clone(), &server).await;
    let cache = scratch_dir("switchman-nacos-tls-ca");
    let reg = registry(&format!(
        "nacos://ops:hunter2-pw@127.0.0.1:{port}?secure=true&tls.ca={}&naming=plain&rules=false&cache_dir={}",
        p.other_ca.display(),
        cache.display()
    ));
    let dir = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(ServiceKey::new(unique("it.nacos.tls.refused"))),
    )
    .await
    .unwrap();
    let other_ca = p.other_ca.display().to_string();
    let line = logs
        .line_with(&["not ready", "UnknownIssuer"], Duration::from_secs(40))
        .await
        .unwrap_or_else(|log| panic!("no wrong-CA failure logged; log:\n{log}"));
    assert!(
        line.contains(&other_ca) && line.contains(&format!("127.0.0.1:{port}")),
        "the reason names the server and the CA file: {line}"
    );
    // Past the logged failure (the barrier above) the subscription has no connection: it has
    // published nothing.
    assert_eq!(
        dir.load().epoch(),
        0,
        "a subscription without a connection is not ready"
    );
    assert!(
        !logs.text().contains("hunter2-pw"),
        "the password never reaches a log line"
    );
    drop(dir);
    drop(reg);
    let _ = std::fs::remove_dir_all(&cache);
}

/// mTLS: a terminator that requires a client certificate signed by the CA. Without one the
/// client is refused, logged naming the server and the missing `tls.cert`; with one (the Nacos
/// Java client's property names, `mutualAuth=true` as Dubbo users write it) a subscription sees
/// an instance registered over the same mTLS.
#[tokio::test(flavor = "current_thread")]
async fn mutual_tls_needs_the_client_certificate_and_works_with_it() {
    let (logs, _guard) = super::thread_logs::debug_logs_on_this_thread();
    let p = pki();
    let server = NacosServer::start();
    let port = terminator(p.mutual.clone(), &server).await;
    let cache = scratch_dir("switchman-nacos-mtls");

    let no_cert = registry(&format!(
        "nacos://127.0.0.1:{port}?secure=true&tls.ca={}&naming=plain&rules=false&cache_dir={}",
        p.ca.display(),
        cache.join("refused").display()
    ));
    let refused = RegistryDirectory::subscribe(
        &no_cert,
        DirectoryConfig::new(ServiceKey::new(unique("it.nacos.mtls.refused"))),
    )
    .await
    .unwrap();
    let line = logs
        .line_with(
            &["not ready", "client certificate (tls.cert)"],
            Duration::from_secs(40),
        )
        .await
        .unwrap_or_else(|log| panic!("no refusal for the missing certificate logged; log:\n{log}"));
    assert!(
        line.contains(&format!("127.0.0.1:{port}")),
        "names the server: {line}"
    );
    assert_eq!(refused.load().epoch(), 0, "not ready without a connection");
    drop((refused, no_cert));

    let key = ServiceKey::new(unique("it.nacos.mtls"));
    let url = format!(
        "nacos://127.0.0.1:{port}?nacos.remote.client.rpc.tls.enable=true\
         &nacos.remote.client.rpc.tls.mutualAuth=true\
         &nacos.remote.client.rpc.tls.trustCollectionChainPath={}\
         &nacos.remote.client.rpc.tls.certChainFile={}\
         &nacos.remote.client.rpc.tls.certPrivateKeyFile={}&naming=plain&rules=false&cache_dir={}",
        p.ca.display(),
        p.client_cert.display(),
        p.client_key.display(),
        cache.join("mutual").display()
    );
    let reg = registry(&url);
    reg.register(
        &Instance::builder("127.0.0.1", 18_131)
            .service(key.clone())
            .warmup(Duration::ZERO)
            .build(),
    )
    .await
    .expect("registered over mTLS");
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(key))
        .await
        .expect("subscribe");
    dir.wait_until(Duration::from_secs(20), |s| s.endpoints().len() == 1)
        .await
        .expect("a subscription over mTLS sees the instance registered over mTLS");
    drop((dir, reg));
    let _ = std::fs::remove_dir_all(&cache);
}
