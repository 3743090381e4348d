//! Registry health in the logs when a ZooKeeper session expires (issue 19, item 6): the lost
//! connection once at warn, the session's end once at warn with how long the connection had
//! been lost, the new session once at info with how long ZooKeeper was gone, and the
//! re-registration of the provider nodes once at info with how many and how long it took;
//! never once per retry. Against a PRIVATE server this test freezes (SIGSTOP) past the session
//! timeout.

use std::time::Duration;

use switchman_core::{Instance, Protocol, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, RegistryDirectory};
use switchman_integration_tests::logs::CapturedLog;
use switchman_integration_tests::unique;
use switchman_integration_tests::zk_server::ZkServer;

async fn until(what: &str, log: &CapturedLog, needle: &str) {
    log.until(what, needle, Duration::from_secs(30)).await;
}

/// The single line containing `needle`, at `level`, naming the registry.
fn one(log: &CapturedLog, needle: &str, level: &str, fields: &[&str]) -> String {
    let lines = log.lines(needle);
    assert_eq!(lines.len(), 1, "once: {needle:?}\n{}", log.text());
    let line = &lines[0];
    assert!(line.contains(level), "{level}: {line}");
    assert!(line.contains("registry=zookeeper://127.0.0.1:"), "{line}");
    for f in fields {
        assert!(line.contains(f), "{f} in {line}");
    }
    line.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_and_re_registration_are_logged_once_each_with_durations() {
    let log = CapturedLog::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_env_filter("switchman_discovery=info,switchman_discovery::zookeeper::session=debug")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let server = tokio::task::spawn_blocking(ZkServer::standalone)
        .await
        .unwrap();
    let url = server.registry_url("session=2000&timeout=1000");
    let registry = ZookeeperRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
    let iface = unique("it.zk.HealthLogs").replace('-', "_");
    let instance = Instance::builder("127.0.0.1", 19_301)
        .protocol(Protocol::Http)
        .service(ServiceKey::new(&iface))
        .timestamp_ms(0)
        .build();
    registry.register(&instance).await.unwrap();
    let dir =
        RegistryDirectory::subscribe(&registry, DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    dir.wait_until(Duration::from_secs(15), |s| s.instances().len() == 1)
        .await
        .unwrap();
    until("connected", &log, "ZooKeeper session established").await;

    // Frozen past the session timeout: the client loses the connection, and when the server
    // resumes it finds its session expired.
    server.signal(0, "STOP");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    server.signal(0, "CONT");
    until("after the expiry", &log, "provider nodes re-registered").await;
    // The subscription is back: the provider is still listed.
    dir.wait_until(Duration::from_secs(15), |s| s.instances().len() == 1)
        .await
        .unwrap();
    // Every line below comes from the session's one task: once it has stopped, none can repeat
    // later (the barrier, instead of waiting for lines that should not come).
    drop(dir);
    drop(registry);
    until("after the drop", &log, "ZooKeeper session task stopped").await;

    one(&log, "ZooKeeper connection lost", "WARN", &[]);
    one(
        &log,
        "ZooKeeper session ended",
        "WARN",
        &["lost_ms=", "session=0x"],
    );
    one(
        &log,
        "ZooKeeper session re-established",
        "INFO",
        &["down_ms=", "generation=2"],
    );
    one(
        &log,
        "provider nodes re-registered in the new session",
        "INFO",
        &["nodes=1", "failed=0", "took_ms="],
    );
    drop(server);
}
