//! TLS to real Java Apache Dubbo 3.3 providers (`peers/java` with `--tls-cert-chain`, Dubbo's
//! `SslConfig`: TLS on the provider's own port, `ssl-enabled=true` registered) found in the
//! shared ZooKeeper (`SWITCHMAN_ZK`), with certificates made here: dubbo:// and Triple calls
//! over TLS with the CA; without TLS settings the call fails at once naming the provider and
//! what to set; with mTLS required, calls work with the client certificate and fail without.
//! Every test uses its own service group and directory of certificates.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::dubbo::ClientTls;
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{ErrorKind, Invocation, Result, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

use super::test_pki::{ca, leaf, write};

const WAIT: Duration = Duration::from_secs(30);

/// A CA, the provider's certificate (for 127.0.0.1, an IP SAN) and key, a client certificate
/// and key signed by the same CA, and a second CA that signed none of them.
struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    other_ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pki {
    fn path(p: &Path) -> &str {
        p.to_str().expect("a UTF-8 temp path")
    }
}

fn pki() -> Pki {
    let dir = std::env::temp_dir().join(unique("switchman-java-tls"));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_cert, issuer) = ca("switchman test CA");
    let (other_cert, _) = ca("another CA");
    let (server_cert, server_key) = leaf(&issuer);
    let (client_cert, client_key) = leaf(&issuer);
    let p = Pki {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        dir,
    };
    write(&p.ca, &ca_cert.pem());
    write(&p.other_ca, &other_cert.pem());
    write(&p.server_cert, &server_cert);
    write(&p.server_key, &server_key);
    write(&p.client_cert, &client_cert);
    write(&p.client_key, &client_key);
    p
}

/// A Java provider of `protocol` in a new group, serving TLS with `pki`'s server certificate
/// (requiring a client certificate when `mtls`).
fn tls_provider(pki: &Pki, protocol: &str, mtls: bool, tag: &str) -> (String, JavaProvider) {
    let g = unique(&format!("tls-{tag}"));
    let mut opts = ProviderOptions::zookeeper(&zookeeper())
        .protocol(protocol)
        .group(&g)
        .tls(Pki::path(&pki.server_cert), Pki::path(&pki.server_key));
    if mtls {
        opts = opts.tls_trust(Pki::path(&pki.ca));
    }
    (g, JavaProvider::start(&opts))
}

/// A cluster over `group`'s providers (one client per endpoint, as `Reference` makes them),
/// once `n` are routable.
async fn cluster(group: &str, transport: ProtocolInvoker) -> ClusterInvoker {
    let reg = registry_from_url(&format!("zookeeper://{}", zookeeper())).unwrap();
    let dir = RegistryDirectory::subscribe(
        reg.as_ref(),
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")).maker(transport.clone()),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().len() == 1)
        .await
        .unwrap_or_else(|e| panic!("the TLS provider of group {group}: {e}"));
    let ssl = dir.load().instances()[0]
        .param("ssl-enabled")
        .map(str::to_string);
    assert_eq!(
        ssl.as_deref(),
        Some("true"),
        "the provider registers ssl-enabled=true"
    );
    ClusterInvoker::new(
        Arc::new(dir),
        Arc::new(transport),
        ClusterConfig::default().timeout(Duration::from_secs(5)),
    )
}

async fn say_hello(cluster: &ClusterInvoker, who: &str) -> Result<Value> {
    cluster
        .invoke(
            &Invocation::new("sayHello")
                .with_args(vec![json!(who)])
                .with_types(["java.lang.String"]),
        )
        .await
}

fn files(ca: &Path, identity: Option<(&Path, &Path)>) -> ProtocolInvoker {
    ProtocolInvoker::new().tls(ClientTls::from_files(ca, identity).unwrap())
}

/// dubbo:// and Triple over TLS: the CA is enough; without TLS settings the call fails at once
/// with the error that says what to set; with the wrong CA the handshake fails, not retried.
async fn one_way_tls(protocol: &str) {
    let pki = pki();
    let (g, provider) = tls_provider(&pki, protocol, false, protocol);

    let tls = cluster(&g, files(&pki.ca, None)).await;
    let reply = say_hello(&tls, "tls").await.unwrap();
    let expected = format!("hello, tls from {}", provider.name());
    assert_eq!(reply, json!(expected));

    let started = Instant::now();
    let e = say_hello(&cluster(&g, ProtocolInvoker::new()).await, "clear")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
    let text = e.to_string();
    let wanted = format!("{protocol}://{}", provider.address());
    assert!(text.contains(&wanted), "{text}");
    assert!(
        text.contains("ssl-enabled=true") && text.contains("tls_ca"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "failed at once");

    let e = say_hello(&cluster(&g, files(&pki.other_ca, None)).await, "wrong CA")
        .await
        .unwrap_err();
    // A certificate the consumer rejects is a configuration error: not retried.
    assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    let calls = provider.calls_of_settled("sayHello", 1, Duration::from_secs(2));
    assert_eq!(calls, 1, "only the TLS call with the CA arrived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dubbo_over_tls_to_a_java_provider() {
    if java_peer::skipped("dubbo_over_tls_to_a_java_provider") {
        return;
    }
    one_way_tls("dubbo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triple_over_tls_to_a_java_provider() {
    if java_peer::skipped("triple_over_tls_to_a_java_provider") {
        return;
    }
    one_way_tls("tri").await;
}

/// A provider requiring a client certificate (mTLS): calls with it work; without it they fail
/// (the provider refuses the handshake) and never reach the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dubbo_mtls_to_a_java_provider() {
    if java_peer::skipped("dubbo_mtls_to_a_java_provider") {
        return;
    }
    let pki = pki();
    let (g, provider) = tls_provider(&pki, "dubbo", true, "mtls");

    let identity = Some((pki.client_cert.as_path(), pki.client_key.as_path()));
    let mtls = cluster(&g, files(&pki.ca, identity)).await;
    let reply = say_hello(&mtls, "mtls").await.unwrap();
    assert_eq!(
        reply,
        json!(format!("hello, mtls from {}", provider.name()))
    );

    let e = say_hello(&cluster(&g, files(&pki.ca, None)).await, "no cert")
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Transport | ErrorKind::Timeout),
        "{e}"
    );
    let calls = provider.calls_of_settled("sayHello", 1, Duration::from_secs(2));
    assert_eq!(
        calls, 1,
        "only the call with the client certificate arrived"
    );
}
