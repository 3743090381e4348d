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
        .with_env_filter("switchman_discovery=info")
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
    // The client keeps retrying meanwhile: still one warning.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(log.count("ZooKeeper connection lost"), 1, "{}", log.text());

    let server = tokio::task::spawn_blocking(move || {
        server.restart(0);
        server.wait_serving(0, Duration::from_secs(15));
        server
    })
    .await
    .unwrap();
    until("after the restart", &log, "ZooKeeper reconnected").await;
    let text = log.text();
    assert_eq!(text.matches("ZooKeeper reconnected").count(), 1, "{text}");
    assert!(text.contains("after_ms="), "{text}");
    assert_eq!(
        text.matches("ZooKeeper session established").count(),
        1,
        "the same session: {text}"
    );
    drop(dir);
    drop(server);
}
