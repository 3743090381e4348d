//! The ZooKeeper adapter with SASL DIGEST-MD5 (`sasl=digest-md5`, `sasl.jaas=`) against a private
//! ZooKeeper that requires it (`ZkServer::standalone_sasl`: a JAAS `Server` section with
//! `DigestLoginModule` users, `SASLAuthenticationProvider`, `enforce.auth.enabled=true` with
//! `enforce.auth.schemes=sasl`): a provider registered with SASL is seen by a consumer with
//! SASL (credentials from the URL, from a JAAS file, and from the address's user:password,
//! which is the digest identity too); a wrong password and no SASL at all are refused with an
//! error that names the registry and SASL, within the call timeout; and SASL over TLS.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use switchman_core::{Instance, Protocol, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, RegistryDirectory};
use switchman_integration_tests::unique;
use switchman_integration_tests::zk_server::{ZkSasl, ZkServer, ZkTlsFiles};

use super::test_pki::{ca, leaf, write};

const WAIT: Duration = Duration::from_secs(10);

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch() -> Scratch {
    let dir = std::env::temp_dir().join(unique("switchman-zk-sasl"));
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn users() -> ZkSasl {
    ZkSasl {
        users: vec![
            ("alice".into(), "secret".into()),
            ("bob".into(), "b0b-pw".into()),
        ],
        enforce: true,
    }
}

fn registry(address: &str) -> ZookeeperRegistry {
    ZookeeperRegistry::from_url(&Url::parse(address).unwrap()).unwrap()
}

fn instance(iface: &str, port: u16) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Http)
        .service(ServiceKey::new(iface))
        .application("it-sasl")
        .build()
}

/// The JAAS file a Java ZooKeeper client would be given (`Client` section).
fn client_jaas(dir: &std::path::Path, user: &str, password: &str) -> PathBuf {
    let file = dir.join("client-jaas.conf");
    write(
        &file,
        &format!(
            "// as -Djava.security.auth.login.config gives it to a Java client\n\
             Client {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
             username=\"{user}\"\n    password=\"{password}\";\n}};\n"
        ),
    );
    file
}

fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_registered_with_sasl_is_seen_with_sasl() {
    init_logs();
    let tmp = scratch();
    let server = ZkServer::standalone_sasl(&users(), None);
    let port = server.port(0);
    let iface = unique("it.zk.sasl.Visible").replace('-', "_");

    // URL parameters.
    let producer = registry(&format!(
        "zookeeper://127.0.0.1:{port}?sasl=digest-md5&sasl.username=alice&sasl.password=secret"
    ));
    producer.register(&instance(&iface, 18_120)).await.unwrap();
    // The Java client's JAAS file and property name, another user.
    let jaas = client_jaas(&tmp.0, "bob", "b0b-pw");
    let consumer = registry(&format!(
        "zookeeper://127.0.0.1:{port}?java.security.auth.login.config={}",
        jaas.display()
    ));
    let dir =
        RegistryDirectory::subscribe(&consumer, DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("a provider registered with SASL is seen by a consumer with SASL");
    assert_eq!(snap.instances()[0].address(), "127.0.0.1:18120");

    // The address's user:password as both the digest identity and the SASL user: the nodes
    // are creator-only, and ZooKeeper grants them to both identities of the creator, so alice
    // over SASL alone (a JAAS file) reads them.
    let iface2 = unique("it.zk.sasl.Digest").replace('-', "_");
    let both = registry(&format!(
        "zookeeper://alice:secret@127.0.0.1:{port}?sasl=digest-md5"
    ));
    both.register(&instance(&iface2, 18_121)).await.unwrap();
    let alice = registry(&format!(
        "zookeeper://127.0.0.1:{port}?sasl.jaas={}",
        client_jaas(&tmp.0, "alice", "secret").display()
    ));
    let dir2 = RegistryDirectory::subscribe(&alice, DirectoryConfig::new(ServiceKey::new(&iface2)))
        .await
        .unwrap();
    let snap = dir2
        .wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("creator-only nodes of alice (digest and SASL) are read by alice over SASL");
    assert_eq!(snap.instances()[0].address(), "127.0.0.1:18121");
}

#[tokio::test(flavor = "current_thread")]
async fn wrong_password_and_no_sasl_are_refused_clearly() {
    let (logs, _guard) = super::thread_logs::debug_logs_on_this_thread();
    let server = ZkServer::standalone_sasl(&users(), None);
    let port = server.port(0);
    let iface = unique("it.zk.sasl.Refused").replace('-', "_");
    let timeout = Duration::from_millis(2000);

    for (address, want) in [
        (
            format!(
                "zookeeper://127.0.0.1:{port}?sasl.username=alice&sasl.password=WRONG-pw&timeout=2000"
            ),
            "SASL DIGEST-MD5 as \"alice\"",
        ),
        (
            format!("zookeeper://127.0.0.1:{port}?timeout=2000"),
            "sasl=digest-md5",
        ),
    ] {
        let reg = registry(&address);
        let started = Instant::now();
        let err = reg
            .register(&instance(&iface, 18_122))
            .await
            .expect_err("refused by the server")
            .to_string();
        let took = started.elapsed();
        assert!(
            err.contains(&format!("registry zookeeper://127.0.0.1:{port}"))
                && err.contains("SASL")
                && err.contains(want),
            "the error names the registry and SASL: {err}; log:\n{}",
            logs.text()
        );
        assert!(!err.contains("WRONG-pw"), "never the password: {err}");
        assert!(
            took < timeout,
            "refused within the connect timeout, not after retries: {took:?}"
        );
        eprintln!("refused as expected in {took:?}: {err}");
        // A subscription is not ready, and the log says why.
        let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
        let line = logs
            .line_with(&["cannot reach ZooKeeper", want], WAIT)
            .await
            .unwrap_or_else(|log| panic!("no refusal logged; log:\n{log}"));
        assert!(line.contains("SASL"), "{line}");
        assert_eq!(dir.snapshot().epoch(), 0, "no list without a session");
        assert!(
            !logs.text().contains("WRONG-pw"),
            "never the password in the log"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_over_tls() {
    init_logs();
    let tmp = scratch();
    let (ca_cert, issuer) = ca("switchman SASL test CA");
    let (server_cert, server_key) = leaf(&issuer);
    let (client_cert, client_key) = leaf(&issuer);
    let ca_file = tmp.0.join("ca.pem");
    let server_store = tmp.0.join("server.pem");
    let client_store = tmp.0.join("client.pem");
    write(&ca_file, &ca_cert.pem());
    write(&server_store, &format!("{server_key}{server_cert}"));
    write(&client_store, &format!("{client_key}{client_cert}"));
    let server = ZkServer::standalone_sasl(
        &users(),
        Some(&ZkTlsFiles {
            key_store: server_store,
            trust_store: ca_file.clone(),
            client_auth: "need",
        }),
    );
    let port = server.secure_port();
    let iface = unique("it.zk.sasl.Tls").replace('-', "_");
    let tls = format!(
        "secure=true&tls.ca={}&tls.cert={}",
        ca_file.display(),
        client_store.display()
    );
    let producer = registry(&format!(
        "zookeeper://127.0.0.1:{port}?{tls}&sasl=digest-md5&sasl.username=alice&sasl.password=secret"
    ));
    producer.register(&instance(&iface, 18_123)).await.unwrap();
    let consumer = registry(&format!(
        "zookeeper://127.0.0.1:{port}?{tls}&sasl.jaas={}",
        client_jaas(&tmp.0, "bob", "b0b-pw").display()
    ));
    let dir =
        RegistryDirectory::subscribe(&consumer, DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("a provider registered with SASL over TLS is seen with SASL over TLS");
    assert_eq!(snap.instances()[0].address(), "127.0.0.1:18123");
}
