//! The ZooKeeper adapter over TLS (`secure=true`) against a private ZooKeeper with Netty's TLS
//! port (`ZkServer::standalone_tls`, `ssl.clientAuth=need`) and certificates made here: a
//! provider registered over TLS is seen by a subscription over TLS; without a client
//! certificate, or with the wrong CA, the subscription never becomes ready and the log says
//! why (server, reason, file).

use std::path::PathBuf;
use std::time::Duration;

use switchman_core::{Instance, Protocol, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, RegistryDirectory};
use switchman_integration_tests::unique;
use switchman_integration_tests::zk_server::{ZkServer, ZkTlsFiles, raw_client};
use zookeeper_client as zk;

use super::test_pki::{ca, leaf, write};

const WAIT: Duration = Duration::from_secs(10);

/// A CA, the server's key store (key and chain in one PEM file, as ZooKeeper reads it), a
/// client certificate and key, and a second CA that signed none of them.
struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    other_ca: PathBuf,
    server: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    /// The client's key and certificate in one file (a ZooKeeper PEM key store).
    client_store: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki() -> Pki {
    let dir = std::env::temp_dir().join(unique("switchman-zk-tls"));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_cert, issuer) = ca("switchman test CA");
    let (other_cert, _) = ca("another CA");
    let (server_cert, server_key) = leaf(&issuer);
    let (client_cert, client_key) = leaf(&issuer);
    let p = Pki {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        server: dir.join("server.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        client_store: dir.join("client-store.pem"),
        dir,
    };
    write(&p.ca, &ca_cert.pem());
    write(&p.other_ca, &other_cert.pem());
    write(&p.server, &format!("{server_key}{server_cert}"));
    write(&p.client_cert, &client_cert);
    write(&p.client_key, &client_key);
    write(&p.client_store, &format!("{client_key}{client_cert}"));
    p
}

fn tls_server(p: &Pki) -> ZkServer {
    ZkServer::standalone_tls(&ZkTlsFiles {
        key_store: p.server.clone(),
        trust_store: p.ca.clone(),
        client_auth: "need",
    })
}

fn registry(address: &str) -> ZookeeperRegistry {
    ZookeeperRegistry::from_url(&Url::parse(address).unwrap()).unwrap()
}

fn instance(iface: &str, port: u16) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Http)
        .service(ServiceKey::new(iface))
        .application("it-tls")
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_registered_over_tls_is_seen_over_tls_with_digest_acl() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let p = pki();
    let server = tls_server(&p);
    let port = server.secure_port();
    let iface = unique("it.zk.tls.Visible").replace('-', "_");
    // Our parameter names, separate certificate and key files.
    let producer = registry(&format!(
        "zookeeper://alice:s3cret@127.0.0.1:{port}?secure=true&tls.ca={}&tls.cert={}&tls.key={}",
        p.ca.display(),
        p.client_cert.display(),
        p.client_key.display()
    ));
    producer.register(&instance(&iface, 18_110)).await.unwrap();
    // The Java client's property names, the key store holding key and chain.
    let consumer = registry(&format!(
        "zookeeper://alice:s3cret@localhost:{port}?zookeeper.client.secure=true\
         &zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty\
         &zookeeper.ssl.trustStore.location={}&zookeeper.ssl.trustStore.type=PEM\
         &zookeeper.ssl.keyStore.location={}&zookeeper.ssl.keyStore.type=PEM",
        p.ca.display(),
        p.client_store.display()
    ));
    let dir =
        RegistryDirectory::subscribe(&consumer, DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("a provider registered over TLS is seen over TLS");
    assert_eq!(snap.instances()[0].address(), "127.0.0.1:18110");

    // The same node on the server's plain port: creator-only (digest), so an anonymous client
    // cannot list it, and the digest identity can.
    let parent = format!("/dubbo/{iface}/providers");
    let anonymous = raw_client(&format!("127.0.0.1:{}", server.port(0)), WAIT).await;
    assert!(
        matches!(
            anonymous.list_children(&parent).await,
            Err(zk::Error::NoAuth)
        ),
        "the provider node is protected by the digest ACL"
    );
    let owner = tokio::time::timeout(
        WAIT,
        zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_auth("digest", b"alice:s3cret")
            .connect(&format!("127.0.0.1:{}", server.port(0))),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(owner.list_children(&parent).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn missing_client_certificate_and_wrong_ca_fail_clearly() {
    let (logs, _guard) = super::thread_logs::debug_logs_on_this_thread();
    let p = pki();
    let server = tls_server(&p);
    let port = server.secure_port();
    let iface = unique("it.zk.tls.Refused").replace('-', "_");

    // The server needs a client certificate; none is given.
    let no_cert = registry(&format!(
        "zookeeper://127.0.0.1:{port}?secure=true&tls.ca={}&timeout=2000",
        p.ca.display()
    ));
    let dir = RegistryDirectory::subscribe(&no_cert, DirectoryConfig::new(ServiceKey::new(&iface)))
        .await
        .unwrap();
    // An attempt's reason names the handshake (a loaded machine's first attempt may instead
    // run out of its 2 s: "no session within 2s"; the next ones say why).
    let line = logs
        .line_with(
            &[
                "cannot reach ZooKeeper",
                &format!("127.0.0.1:{port}"),
                "TLS handshake",
            ],
            WAIT,
        )
        .await
        .unwrap_or_else(|log| panic!("no TLS refusal logged; log:\n{log}"));
    assert!(
        line.contains("client certificate (tls.cert)"),
        "the reason names the TLS refusal and the missing client certificate: {line}"
    );
    // Past the logged failure (the barrier above) the subscription has no session: it has
    // published nothing.
    assert_eq!(
        dir.load().epoch(),
        0,
        "a subscription without a session is not ready"
    );
    drop(dir);
    drop(no_cert);

    // A CA that did not sign the server's certificate.
    let wrong_ca = registry(&format!(
        "zookeeper://127.0.0.1:{port}?secure=true&tls.ca={}&tls.cert={}&tls.key={}&timeout=2000",
        p.other_ca.display(),
        p.client_cert.display(),
        p.client_key.display()
    ));
    let dir =
        RegistryDirectory::subscribe(&wrong_ca, DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    let other_ca = p.other_ca.display().to_string();
    let line = logs
        .line_with(&["cannot reach ZooKeeper", "UnknownIssuer"], WAIT)
        .await
        .unwrap_or_else(|log| panic!("no wrong-CA failure logged; log:\n{log}"));
    assert!(
        line.contains(&other_ca) && line.contains(&format!("127.0.0.1:{port}")),
        "the reason names the server and the CA file: {line}"
    );
    // Past the logged failure (the barrier above) the subscription has no session: it has
    // published nothing.
    assert_eq!(
        dir.load().epoch(),
        0,
        "a subscription without a session is not ready"
    );

    // A CA file that does not exist: a configuration error naming it.
    let missing = p.dir.join("missing-ca.pem");
    let err = ZookeeperRegistry::from_url(
        &Url::parse(&format!(
            "zookeeper://127.0.0.1:{port}?secure=true&tls.ca={}",
            missing.display()
        ))
        .unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&missing.display().to_string()),
        "the error names the file: {err}"
    );
}
