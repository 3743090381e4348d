//! Nacos health in the logs (issues #16 and #19): a connected registry whose server goes away
//! logs it once at warn, and once at info when the server is back, with how long it was gone;
//! never once per check. Against a PRIVATE rnacos this test stops and restarts.

use std::time::Duration;

use switchman_core::{ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory};
use switchman_integration_tests::logs::CapturedLog;
use switchman_integration_tests::nacos_server::{NacosServer, scratch_dir};
use switchman_integration_tests::unique;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacos_outage_is_logged_once_when_it_starts_and_once_when_it_ends() {
    let log = CapturedLog::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_env_filter("switchman_discovery=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let mut server = tokio::task::block_in_place(NacosServer::start);
    let cache = scratch_dir("switchman-nacos-health");
    let url = format!(
        "nacos://{}?naming=plain&rules=false&cache_dir={}",
        server.addr(),
        cache.display()
    );
    let registry = NacosRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
    let key = ServiceKey::new(unique("it.health"));
    let _dir = RegistryDirectory::subscribe(&registry, DirectoryConfig::new(key))
        .await
        .unwrap();
    log.until("connected", "connected to nacos", Duration::from_secs(30))
        .await;
    // A few healthy checks: nothing logged.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(log.lines("nacos unreachable").is_empty(), "{}", log.text());

    tokio::task::block_in_place(|| server.stop());
    log.until(
        "after the stop",
        "nacos unreachable",
        Duration::from_secs(20),
    )
    .await;
    // Several failing checks later: still one line.
    tokio::time::sleep(Duration::from_secs(7)).await;
    tokio::task::block_in_place(|| server.restart());
    log.until(
        "after the restart",
        "nacos reachable again",
        Duration::from_secs(60),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;

    let down = log.lines("nacos unreachable");
    assert_eq!(down.len(), 1, "once:\n{}", log.text());
    assert!(
        down[0].contains("WARN") && down[0].contains("registry=nacos://127.0.0.1:"),
        "{down:?}"
    );
    let up = log.lines("nacos reachable again");
    assert_eq!(up.len(), 1, "once:\n{}", log.text());
    assert!(
        up[0].contains("INFO") && up[0].contains("down_ms="),
        "{up:?}"
    );
    let down_ms: u64 = up[0]
        .split("down_ms=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(
        down_ms >= 5_000,
        "down for at least the 7 s it was stopped, minus detection: {down_ms}"
    );
    std::fs::remove_dir_all(&cache).ok();
}
