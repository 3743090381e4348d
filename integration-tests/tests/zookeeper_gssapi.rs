//! SASL GSSAPI (Kerberos) to ZooKeeper (`sasl=gssapi`, feature `zookeeper-gssapi`) against a
//! real MIT KDC (`kdc.rs`) and a ZooKeeper that accepts only SASL sessions with its Kerberos
//! service principal `zookeeper/localhost`: a provider registered and a subscription that sees
//! it, both as the client principal from a keytab (a creator-only node of that session belongs
//! to `sasl:client`); a wrong server principal is refused, logged with the principal asked for.
//!
//! Its own binary with its own `main` (no test harness): MIT Kerberos reads `KRB5_CONFIG`,
//! `KRB5_CLIENT_KTNAME` and `KRB5CCNAME` from the environment, which `main` sets before any
//! thread exists. Skipped, saying why, without the KDC programs or the services of
//! `scripts/services.sh`.

use std::time::Duration;

use switchman_core::{Instance, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, RegistryDirectory};
use switchman_integration_tests::kdc::{Kdc, REALM};
use switchman_integration_tests::logs::CapturedLog;
use switchman_integration_tests::zk_server::ZkServer;
use zookeeper_client as zk;

fn main() {
    // `cargo test` passes harness flags; `--list` (nextest, IDEs) expects the test's name.
    if std::env::args().any(|a| a == "--list") {
        println!("gssapi_registration_and_subscription: test");
        return;
    }
    if std::env::var_os("SWITCHMAN_ZK_CLASSPATH").is_none() {
        println!(
            "zookeeper_gssapi: skipped (SWITCHMAN_ZK_CLASSPATH is not set: run through scripts/test)"
        );
        return;
    }
    let kdc = match Kdc::start(&["zookeeper/localhost", "client"]) {
        Ok(k) => k,
        Err(why) => {
            println!("zookeeper_gssapi: skipped ({why})");
            return;
        }
    };
    let server_keytab = kdc.keytab("zookeeper/localhost").expect("server keytab");
    let client_keytab = kdc.keytab("client").expect("client keytab");
    // SAFETY: no other thread exists yet (no runtime, no server started, nothing spawned
    // that runs threads in this process): nothing reads the environment concurrently.
    unsafe {
        std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
        std::env::set_var("KRB5_CLIENT_KTNAME", &client_keytab);
        std::env::set_var(
            "KRB5CCNAME",
            format!("FILE:{}", kdc.dir().join("client.ccache").display()),
        );
    }
    let server = ZkServer::standalone_kerberos(
        &format!("zookeeper/localhost@{REALM}"),
        &server_keytab,
        &kdc.krb5_conf(),
    );
    let log = CapturedLog::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_env_filter("switchman_discovery=debug,zookeeper_client=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let port = server.connect_string();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(scenario(&port, &log));
    }));
    drop(rt);
    drop(server);
    drop(kdc);
    match result {
        Ok(()) => println!("test gssapi_registration_and_subscription ... ok"),
        Err(e) => {
            eprintln!("log:\n{}", log.text());
            std::panic::resume_unwind(e);
        }
    }
}

async fn scenario(connect: &str, log: &CapturedLog) {
    let iface = switchman_integration_tests::unique("it.zk.gssapi.Greeter").replace('-', "_");
    // The server principal is zookeeper/localhost; the address is 127.0.0.1 (the server
    // listens there only): `sasl.host` names the principal's host.
    let url = format!("zookeeper://{connect}?sasl=gssapi&sasl.host=localhost&timeout=5000");
    let registry = ZookeeperRegistry::from_url(&Url::parse(&url).unwrap()).expect("valid URL");
    let key = ServiceKey::new(&iface);
    let instance = Instance::builder("127.0.0.1", 20_881)
        .service(key.clone())
        .warmup(Duration::ZERO)
        .build();
    tokio::time::timeout(Duration::from_secs(30), registry.register(&instance))
        .await
        .expect("registered within 30s")
        .expect("registered over GSSAPI");
    let dir = RegistryDirectory::subscribe(&registry, DirectoryConfig::new(key))
        .await
        .expect("subscribe");
    dir.wait_until(Duration::from_secs(20), |s| s.endpoints().len() == 1)
        .await
        .expect("the subscription over GSSAPI sees the provider");

    // SASL alone leaves ACLs as Dubbo's Curator client does (anyone-all); the session is the
    // client principal's: a node created creator-only belongs to `sasl:client`.
    let raw = zk::Client::connector()
        .with_sasl(zk::SaslOptions::gssapi().with_hostname("localhost"))
        .with_session_timeout(Duration::from_secs(10))
        .connect(connect)
        .await
        .expect("a raw GSSAPI session");
    let parent = format!("/dubbo/{iface}/providers");
    let children = raw.list_children(&parent).await.expect("list providers");
    assert_eq!(children.len(), 1, "{children:?}");
    let (acl, _) = raw
        .get_acl(&format!("{parent}/{}", children[0]))
        .await
        .expect("the node's ACL");
    assert_eq!(
        acl.iter().map(|a| (a.scheme(), a.id())).collect::<Vec<_>>(),
        [("world", "anyone")],
        "{acl:?}"
    );
    let own = format!("/dubbo/{iface}/owned");
    raw.create(
        &own,
        b"",
        &zk::CreateMode::Ephemeral.with_acls(zk::Acls::creator_all()),
    )
    .await
    .expect("create a creator-only node");
    let (acl, _) = raw.get_acl(&own).await.expect("its ACL");
    assert_eq!(
        acl.iter().map(|a| (a.scheme(), a.id())).collect::<Vec<_>>(),
        [("sasl", "client")],
        "the session is the client principal's: {acl:?}"
    );
    drop(raw);

    // A server principal the KDC does not know: no session, and the log names what was asked.
    let wrong = ZookeeperRegistry::from_url(
        &Url::parse(&format!(
            "zookeeper://{connect}?sasl=gssapi&sasl.host=elsewhere&timeout=2000"
        ))
        .unwrap(),
    )
    .unwrap();
    let refused = RegistryDirectory::subscribe(
        &wrong,
        DirectoryConfig::new(ServiceKey::new(format!("{iface}.Refused"))),
    )
    .await
    .unwrap();
    log.until(
        "the refused principal",
        "SASL GSSAPI to zookeeper/elsewhere",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(refused.load().epoch(), 0, "no session, nothing published");
    drop((refused, wrong, dir, registry));
}
