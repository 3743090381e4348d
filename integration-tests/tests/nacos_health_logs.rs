//! Nacos health in the logs (issues #16 and #19): a connected registry whose server goes away
//! logs it once at warn, and once at info when the server is back, with how long it was gone;
//! never once per check. Against a PRIVATE rnacos this test stops and restarts. The registry
//! checks every 200 ms (`health_interval`) and logs each check at debug: the test counts checks
//! instead of sleeping before it asserts that nothing more was logged.

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
        .with_env_filter("switchman_discovery=info,switchman_discovery::nacos=debug")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let mut server = tokio::task::block_in_place(NacosServer::start);
    let cache = scratch_dir("switchman-nacos-health");
    let url = format!(
        "nacos://{}?naming=plain&rules=false&health_interval=200&cache_dir={}",
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
    const CHECK: &str = "nacos health check";
    let checks = |ok: bool| log.count_lines(&[CHECK, if ok { "ok=true" } else { "ok=false" }]);
    // Three healthy checks: nothing logged.
    log.until_lines(
        "three healthy checks",
        &[CHECK, "ok=true"],
        3,
        Duration::from_secs(30),
    )
    .await;
    assert!(log.lines("nacos unreachable").is_empty(), "{}", log.text());

    tokio::task::block_in_place(|| server.stop());
    log.until(
        "after the stop",
        "nacos unreachable",
        Duration::from_secs(20),
    )
    .await;
    let unreachable_seen = std::time::Instant::now();
    // Three failing checks later: still one line.
    let failed = checks(false);
    log.until_lines(
        "three more failing checks",
        &[CHECK, "ok=false"],
        failed + 3,
        Duration::from_secs(30),
    )
    .await;
    let restarting = std::time::Instant::now();
    tokio::task::block_in_place(|| server.restart());
    log.until(
        "after the restart",
        "nacos reachable again",
        Duration::from_secs(60),
    )
    .await;
    // Three healthy checks after it: still one line each.
    let healthy = checks(true);
    log.until_lines(
        "three more healthy checks",
        &[CHECK, "ok=true"],
        healthy + 3,
        Duration::from_secs(30),
    )
    .await;

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
    // Counted from the first failed check, which was before the test saw its line, to a
    // check after the restart: at least the time from that sight to the restart.
    let at_least = restarting.duration_since(unreachable_seen).as_millis() as u64;
    assert!(
        down_ms >= at_least,
        "down for at least the {at_least} ms from the warning to the restart: {down_ms}"
    );
    std::fs::remove_dir_all(&cache).ok();
}
