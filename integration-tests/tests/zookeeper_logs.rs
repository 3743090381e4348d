//! What an operator reads when ZooKeeper goes away and comes back: one warning when the
//! connection is lost, one info line with the time it took when it is back (same session),
//! never one per call or per retry. Against a PRIVATE server this test kills and restarts.

use std::time::Duration;

use switchman_core::{ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory};
use switchman_integration_tests::logs::CapturedLog;
use switchman_integration_tests::zk_server::ZkServer;

async fn until(what: &str, log: &CapturedLog, needle: &str) {
    log.until(what, needle, Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_and_restored_connection_is_logged_once_each() {
    let log = CapturedLog::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        // zookeeper_client's debug lines show its connection attempts while the server is down.
        .with_env_filter(
            "switchman_discovery=info,switchman_discovery::zookeeper::session=debug,zookeeper_client=debug",
        )
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let mut server = tokio::task::spawn_blocking(ZkServer::standalone)
        .await
        .unwrap();
    let url = server.registry_url("session=20000&timeout=1000");
    let registry = ZookeeperRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
    let dir = RegistryDirectory::subscribe(
        &registry,
        DirectoryConfig::new(ServiceKey::new("it.zk.Logs")),
    )
    .await
    .unwrap();
    dir.wait_until(Duration::from_secs(15), |s| s.epoch() > 0)
        .await
        .unwrap();
    until("connected", &log, "ZooKeeper session established").await;

    server.kill(0);
    until("after the kill", &log, "ZooKeeper connection lost").await;
    // The client keeps retrying meanwhile (three attempts seen before the restart); the
    // warning is counted once the session task has stopped, at the end.
    let attempts = log.count("fails in connecting to");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while log.count("fails in connecting to") < attempts + 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no retries logged by zookeeper_client: {}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let server = tokio::task::spawn_blocking(move || {
        server.restart(0);
        server.wait_serving(0, Duration::from_secs(15));
        server
    })
    .await
    .unwrap();
    until("after the restart", &log, "ZooKeeper reconnected").await;
    // Every counted line comes from the session's one task: once it has stopped none can come.
    drop(dir);
    drop(registry);
    until("after the drop", &log, "ZooKeeper session task stopped").await;
    let text = log.text();
    assert_eq!(
        text.matches("ZooKeeper connection lost").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("ZooKeeper reconnected").count(), 1, "{text}");
    assert!(text.contains("after_ms="), "{text}");
    assert_eq!(
        text.matches("ZooKeeper session established").count(),
        1,
        "the same session: {text}"
    );
    drop(server);
}
