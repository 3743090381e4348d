//! The chaos suite (issue 9): each scenario runs steady load through failover + round robin
//! against 3 local providers, breaks something, asserts what the issue promises and prints ONE
//! line of figures:
//!
//! ```text
//! chaos <id> <title>: calls=N failed=N success=P% attempts/call=X recovery=T max-gap=T ... (note)
//! ```
//!
//! * `attempts/call` is counted on the consumer side, by an [`Invoker`](switchman_core::Invoker)
//!   wrapped around the `HttpInvoker` ([`CountingInvoker`]): every attempt the cluster layer
//!   sends, retries and hedges included.
//! * `recovery` is defined per scenario (the line's note says which):
//!   1. `kill -9` of a provider process to the last attempt sent to the dead address (failover
//!      and outlier ejection took over);
//!   2. / 3. the restarted registry serving to a provider registered after the restart being
//!      visible in the consumer's snapshot (the subscription is restored);
//!   4. the consumer's start (registry down, snapshot cache present) to its first successful
//!      call;
//!   5. (b) the providers' re-registration to the first successful call after the empty push
//!      (a: n/a, there is no outage; the time to engage the empty-list protection is printed);
//!   6. the restored network to the snapshot being right again (the re-created session's
//!      registration, the provider registered meanwhile, not the one removed meanwhile);
//!   7. n/a (every provider fails; the figure is attempts per call against the retry budget);
//!   8. n/a (the figures are p99 latencies: calls with hedging or forking against the fast
//!      providers' attempts, and failover alone as the reference); `attempts-to-slow` counts the
//!      attempts the slow provider got.
//!   9. and 10. n/a (hostile providers and registry writes: the figures are the consumer's, this
//!      process's, peak RSS against 2 × its idle RSS + the largest legal payload, and its CPU
//!      time; the calls of the good providers, and the last good rules, unaffected).
//!   11. to 14. (a real ZooKeeper ensemble failing, issue 30) a provider change made after the
//!       failure (11: the leader killed; 13: the last member restarted) or during it (12: the
//!       consumer's member cut off into the minority, from the cut; 14: a flapping link, the
//!       longest change-to-list time) visible in the consumer's snapshot; 15. the cut of 100
//!       providers' registry link to their nodes gone from the consumer's snapshot.
//!   16. to 18. (a real 3-node rnacos cluster failing, issue 30) the kill of a node (16: the
//!       consumer's; 17: the raft leader) or the last node's restart (18: a rolling restart) to
//!       a provider registered after it visible in the consumer's snapshot.
//! * `max-gap` is the longest time callers went without a successful call (load start and stop
//!   included).
//!
//! Each line goes to stderr and to `$CARGO_TARGET_TMPDIR/chaos-<id>.txt` (rewritten by every
//! run of that scenario); `$CARGO_TARGET_TMPDIR/chaos-figures.txt` is rewritten after each line
//! as all of them in scenario order.
//!
//! The scenarios run one at a time (a lock taken at the start of each test) so they do not
//! skew each other's figures. They need ZooKeeper and rnacos: scenarios 2, 3, 4, 6 and 11-18
//! start PRIVATE servers they kill and restart (`SWITCHMAN_ZK_CLASSPATH`, `RNACOS_BIN`), scenarios 5
//! and 10 use the shared ZooKeeper (`SWITCHMAN_ZK`) with unique interface names. Run:
//!
//! ```text
//! source scripts/services.sh && services_start \
//!   && cargo test -p switchman-integration-tests --test chaos -- --nocapture; services_stop
//! ```
//!
//! (`scripts/test` starts the servers itself.)

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchman_cluster::dubbo::DubboInvoker;
use switchman_cluster::provider::HttpProvider;
use switchman_cluster::{BudgetConfig, ClusterConfig, ClusterInvoker, Hedge, Settings, Strategy};
use switchman_core::{ErrorKind, Instance, Protocol, ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, Registrar, Registry, RegistryDirectory, StaticRegistry,
    cache as snapshot_cache,
};
use switchman_integration_tests::chaos::{
    Calls, CountingInvoker, Figures, Load, ProviderProcess, ScratchDir, TcpProxy, Usage, addresses,
    counted_cluster, directory_config, http_instance, mib, ms, percentile, reset_peak, serve_ok,
    usage,
};
use switchman_integration_tests::nacos_server::NacosServer;
use switchman_integration_tests::zk_server::{MemberPorts, ZkServer, put_node, raw_client};
use switchman_integration_tests::{unique, zookeeper};
use zookeeper_client as zk;

/// The provider process (`src/bin/chaos_provider.rs`).
const PROVIDER_BIN: &str = env!("CARGO_BIN_EXE_chaos_provider");
/// Where the figures files go.
const FIGURES_DIR: &str = env!("CARGO_TARGET_TMPDIR");

/// Concurrent callers of the steady load.
const CALLERS: usize = 2;
/// Each caller's pause between two calls: a few hundred calls/s in all, steady but light on a
/// 2-core box.
const PACE: Duration = Duration::from_millis(3);
/// Bound of the waits for set-up steps.
const WAIT: Duration = Duration::from_secs(15);
/// The issue's bound for a subscription to be restored after the registry is back.
const RESTORED: Duration = Duration::from_secs(20);

/// One scenario at a time: they share two cores and their figures are timings.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().await;
    // Adapter logs in the test output when RUST_LOG asks for them (nacos-sdk's reconnect
    // errors after scenario 3 would drown the figures otherwise).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_test_writer()
        .try_init();
    guard
}

fn emit(f: &Figures) {
    f.emit(Path::new(FIGURES_DIR));
}

fn interface(tag: &str) -> String {
    unique(&format!("chaos.{tag}")).replace('-', "_")
}

fn provider_processes(args: &[&[&str]]) -> Vec<ProviderProcess> {
    args.iter()
        .enumerate()
        .map(|(i, a)| ProviderProcess::spawn(Path::new(PROVIDER_BIN), &format!("p{}", i + 1), a))
        .collect()
}

/// A directory over a static list of `procs`.
async fn static_directory(
    key: &ServiceKey,
    procs: &[ProviderProcess],
) -> (StaticRegistry, Arc<RegistryDirectory>) {
    let registry =
        StaticRegistry::new(procs.iter().map(|p| http_instance(key, p.port())).collect());
    let dir = RegistryDirectory::subscribe(&registry, directory_config(key.clone()))
        .await
        .expect("subscribe to the static list");
    dir.wait_until(WAIT, |s| s.endpoints().len() == procs.len())
        .await
        .expect("every provider listed");
    (registry, Arc::new(dir))
}

fn zk_registry(url: &str) -> ZookeeperRegistry {
    let url = Url::parse(url).unwrap_or_else(|e| panic!("bad ZooKeeper URL {url}: {e}"));
    ZookeeperRegistry::from_url(&url).expect("valid ZooKeeper registry URL")
}

async fn start_zk() -> ZkServer {
    tokio::task::spawn_blocking(ZkServer::standalone)
        .await
        .expect("ZooKeeper starts")
}

/// Waits until `ready()` holds, polling every 50 ms; the time it took.
async fn poll_until<F, Fut>(within: Duration, what: &str, mut ready: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if ready().await {
            return start.elapsed();
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Three in-process providers answering `{"from": "p1"}` .. `"p3"`, and their instances of
/// `key`.
async fn three_providers(key: &ServiceKey) -> ([HttpProvider; 3], Vec<Instance>) {
    let providers = [
        serve_ok("p1").await,
        serve_ok("p2").await,
        serve_ok("p3").await,
    ];
    let instances = providers
        .iter()
        .map(|p| http_instance(key, p.addr().port()))
        .collect();
    (providers, instances)
}

/// Subscribes `consumer` with `config`, waits until `listed` providers are routable, and
/// starts the steady load until `ok` calls succeeded.
async fn under_load(
    consumer: &dyn Registry,
    config: DirectoryConfig,
    listed: usize,
    ok: u64,
    phase: &str,
) -> (Arc<RegistryDirectory>, Arc<CountingInvoker>, Load) {
    let dir = Arc::new(
        RegistryDirectory::subscribe(consumer, config)
            .await
            .expect("subscribe"),
    );
    dir.wait_until(WAIT, |s| s.endpoints().len() == listed)
        .await
        .unwrap_or_else(|e| panic!("{listed} providers listed: {e}"));
    let (cluster, counter) = counted_cluster(dir.clone(), ClusterConfig::default());
    let load = Load::start(cluster, CALLERS, PACE);
    load.wait_for_ok(ok, WAIT, phase).await;
    (dir, counter, load)
}

/// After a registry restart: waits until `late` (registered after the restart, served by
/// `provider`) is in the snapshot (the recovery), then until all three providers are back
/// (`again` says how the first two came back), then until `provider` receives calls.
/// Returns the times from `restarted_at` to the first two points.
async fn restored_after_restart(
    dir: &RegistryDirectory,
    late: &Instance,
    provider: &HttpProvider,
    restarted_at: Instant,
    again: &str,
) -> (Duration, Duration) {
    let address = late.address().to_string();
    dir.wait_until(RESTORED, |s| s.index_of(&address).is_some())
        .await
        .expect("the subscription is restored: p3, registered after the restart, is seen");
    let recovery = restarted_at.elapsed();
    dir.wait_until(RESTORED, |s| s.endpoints().len() == 3)
        .await
        .expect(again);
    let all_back = restarted_at.elapsed();
    poll_until(WAIT, "p3 receives calls", || async { provider.hits() > 0 }).await;
    (recovery, all_back)
}

// -----------------------------------------------------------------------------------------
// 1. kill -9 one provider mid-run
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_1_kill_9_one_provider_mid_run() {
    let _serial = serial().await;
    let key = ServiceKey::new(interface("Kill"));
    let mut procs = provider_processes(&[&[], &[], &[]]);
    let (_registry, dir) = static_directory(&key, &procs).await;
    let (cluster, counter) = counted_cluster(dir, ClusterConfig::default());

    let load = Load::start(cluster, CALLERS, PACE);
    load.wait_for_ok(300, WAIT, "before the kill").await;
    let victim = procs[1].address();
    let before = counter.attempts_to(&victim);
    assert!(
        before > 50,
        "round robin sends the victim its share before the kill ({before} attempts)"
    );
    let killed_at = Instant::now();
    let status = procs[1].kill_9();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = load.stop().await;

    let dead_attempts = counter.attempts_to(&victim) - before;
    let recovery = counter
        .last_attempt_to(&victim)
        .map(|t| t.saturating_duration_since(killed_at));
    let f = Figures::new("1", "kill -9 provider", &calls, counter.attempts())
        .recovery(recovery)
        .with("attempts-to-dead", dead_attempts)
        .note(
            "recovery = kill -9 to the last attempt sent to the dead provider; 3 provider \
             processes on a static list, one SIGKILLed after 300 calls, 2 s more load",
        );
    emit(&f);
    assert_eq!(
        status.signal(),
        Some(9),
        "the provider died of SIGKILL ({status})"
    );
    assert!(
        f.success_pct() >= 99.9,
        "success {:.3}% < 99.9% (failures: {:?})",
        f.success_pct(),
        calls.failures_by_kind()
    );
    assert!(
        recovery.is_some_and(|r| r < Duration::from_secs(1)),
        "attempts on the dead provider stop within 1 s (outlier ejection); the last came {recovery:?} after the kill"
    );
}

// -----------------------------------------------------------------------------------------
// 2. ZooKeeper stopped and restarted mid-run
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_2_zookeeper_stopped_and_restarted_mid_run() {
    let _serial = serial().await;
    let mut server = start_zk().await;
    let url = server.registry_url("session=2000&timeout=1000");
    let key = ServiceKey::new(interface("ZkRestart"));
    let (providers, instances) = three_providers(&key).await;
    // Held to the end: dropping a registry handle unregisters its providers.
    let producer = zk_registry(&url);
    for i in &instances[..2] {
        producer.register(i).await.expect("register p1, p2");
    }
    let consumer = zk_registry(&url);
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()),
        2,
        100,
        "before the outage",
    )
    .await;

    // Down (SIGKILL) for longer than the 2 s session, so the restart brings new sessions.
    let down = Duration::from_millis(3500);
    let (_server, restarted_at) = tokio::task::spawn_blocking(move || {
        server.kill(0);
        std::thread::sleep(down);
        server.restart(0);
        (server, Instant::now())
    })
    .await
    .expect("ZooKeeper restarts");

    let late = zk_registry(&url);
    late.register(&instances[2])
        .await
        .expect("register p3 after the restart");
    let (recovery, _) = restored_after_restart(
        &dir,
        &instances[2],
        &providers[2],
        restarted_at,
        "p1 and p2 are re-registered by their new session",
    )
    .await;
    let calls = load.stop().await;

    let f = Figures::new(
        "2",
        "ZooKeeper stopped and restarted",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(recovery))
    .with("down", ms(down))
    .note(
        "recovery = restarted ZooKeeper serving to a provider registered after the restart \
         visible in the snapshot; private ZooKeeper SIGKILLed for longer than the 2 s session",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails across the ZooKeeper restart: {:?}",
        calls.failures_by_kind()
    );
    assert!(calls.count() > 500, "calls kept flowing");
}

// -----------------------------------------------------------------------------------------
// 3. rnacos stopped and restarted mid-run
// -----------------------------------------------------------------------------------------

fn nacos_registry(addr: &str, scratch: &ScratchDir, name: &str) -> NacosRegistry {
    let url = format!(
        "nacos://{addr}?naming=plain&rules=false&cache_dir={}",
        scratch.path().join(name).display()
    );
    NacosRegistry::from_url(&Url::parse(&url).expect("Nacos URL parses")).expect("valid Nacos URL")
}

/// Registers, retrying while the registrar's client reconnects, for at most `within`.
async fn register_within(reg: &dyn Registrar, inst: &Instance, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match reg.register(inst).await {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("register {} not yet: {e}", inst.address());
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("register {} failed for {within:?}: {e}", inst.address()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_3_nacos_stopped_and_restarted_mid_run() {
    let _serial = serial().await;
    let mut server = tokio::task::block_in_place(NacosServer::start);
    let scratch = ScratchDir::new("switchman-chaos-nacos");
    let key = ServiceKey::new(unique("chaos.nacos"));
    let (providers, instances) = three_providers(&key).await;
    let producer = nacos_registry(&server.addr(), &scratch, "producer");
    for i in &instances[..2] {
        register_within(&producer, i, Duration::from_secs(10)).await;
    }
    let consumer = nacos_registry(&server.addr(), &scratch, "consumer");
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()),
        2,
        100,
        "before the outage",
    )
    .await;

    let stopped_at = Instant::now();
    tokio::task::block_in_place(|| server.stop());
    load.wait_for_ok(300, WAIT, "while Nacos is down").await;
    tokio::task::block_in_place(|| server.restart());
    let restarted_at = Instant::now();
    let down = restarted_at - stopped_at;

    // A new registrar (a process started after the restart), so the recovery measures the
    // consumer's subscription, not the old registrar's reconnection.
    let late = nacos_registry(&server.addr(), &scratch, "late");
    register_within(&late, &instances[2], RESTORED).await;
    let registered = restarted_at.elapsed();
    let (recovery, all_back) = restored_after_restart(
        &dir,
        &instances[2],
        &providers[2],
        restarted_at,
        "p1 and p2 are registered again by their client",
    )
    .await;
    let calls = load.stop().await;

    let f = Figures::new(
        "3",
        "rnacos stopped and restarted",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(recovery))
    .with("down", ms(down))
    .with("late-registered", ms(registered))
    .with("all-back", ms(all_back))
    .note(
        "recovery = restarted rnacos serving to a provider registered after the restart \
         visible in the snapshot; private rnacos stopped (SIGTERM) and started again",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails across the Nacos restart: {:?}",
        calls.failures_by_kind()
    );
}

// -----------------------------------------------------------------------------------------
// 4. Consumer started with the registry down and a snapshot cache present
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_4_consumer_starts_with_the_registry_down_from_its_snapshot_cache() {
    let _serial = serial().await;
    let mut server = start_zk().await;
    let url = server.registry_url("session=2000&timeout=1000");
    let scratch = ScratchDir::new("switchman-chaos-cache");
    let cache = scratch.path().join("snapshot.json");
    let key = ServiceKey::new(interface("Cache"));
    let (providers, instances) = three_providers(&key).await;
    let producer = zk_registry(&url);
    for i in &instances {
        producer.register(i).await.expect("register");
    }

    // A first consumer run writes the snapshot cache.
    {
        let consumer = zk_registry(&url);
        let dir = RegistryDirectory::subscribe(
            &consumer,
            directory_config(key.clone()).cache_file(&cache),
        )
        .await
        .expect("subscribe");
        dir.wait_until(WAIT, |s| s.endpoints().len() == 3)
            .await
            .expect("three providers listed");
        poll_until(WAIT, "the snapshot cache holds the three providers", || {
            let (cache, key) = (cache.clone(), key.clone());
            async move { matches!(snapshot_cache::load(&cache, &key), Ok(Some(l)) if l.len() == 3) }
        })
        .await;
    }
    let _server = tokio::task::spawn_blocking(move || {
        server.kill(0);
        server
    })
    .await
    .expect("ZooKeeper stops");

    // A new consumer starts while ZooKeeper is down.
    let started = Instant::now();
    let consumer = zk_registry(&url);
    let dir = Arc::new(
        tokio::time::timeout(
            Duration::from_secs(2),
            RegistryDirectory::subscribe(
                &consumer,
                directory_config(key.clone()).cache_file(&cache),
            ),
        )
        .await
        .expect("subscribing does not wait for ZooKeeper")
        .expect("subscribe"),
    );
    assert_eq!(
        dir.load().endpoints().len(),
        3,
        "the snapshot comes from the cache"
    );
    let (cluster, counter) = counted_cluster(dir, ClusterConfig::default());
    let load = Load::start(cluster, CALLERS, PACE);
    load.wait_for_ok(500, WAIT, "from the snapshot cache with ZooKeeper down")
        .await;
    let calls = load.stop().await;

    let recovery = calls
        .first_success_after(started)
        .map(|t| t.saturating_duration_since(started));
    let f = Figures::new(
        "4",
        "consumer started with the registry down",
        &calls,
        counter.attempts(),
    )
    .recovery(recovery)
    .note(
        "recovery = consumer start to its first successful call; private ZooKeeper killed, \
         the snapshot cache written by an earlier consumer",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "every call succeeds from the cache: {:?}",
        calls.failures_by_kind()
    );
    for p in &providers {
        assert!(p.hits() > 50, "every cached provider serves calls");
    }
}

// -----------------------------------------------------------------------------------------
// 5. Empty push: all providers deregistered while they keep serving
// -----------------------------------------------------------------------------------------

/// Registers three serving providers in the shared ZooKeeper, subscribes with `policy`,
/// deregisters them all under load; returns what the policy-specific part needs.
struct EmptyPush {
    instances: Vec<Instance>,
    registrar: ZookeeperRegistry,
    _consumer: ZookeeperRegistry,
    _providers: [HttpProvider; 3],
    dir: Arc<RegistryDirectory>,
    counter: Arc<CountingInvoker>,
    load: Load,
    deregistered_at: Instant,
}

async fn empty_push(policy: EmptyPolicy) -> EmptyPush {
    let url = format!("zookeeper://{}?timeout=2000", zookeeper());
    let key = ServiceKey::new(interface("Empty"));
    let (providers, instances) = three_providers(&key).await;
    let registrar = zk_registry(&url);
    for i in &instances {
        registrar.register(i).await.expect("register");
    }
    let consumer = zk_registry(&url);
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()).empty_policy(policy),
        3,
        200,
        "before the empty push",
    )
    .await;
    let deregistered_at = Instant::now();
    for i in &instances {
        registrar.unregister(i).await.expect("unregister");
    }
    EmptyPush {
        instances,
        registrar,
        _consumer: consumer,
        _providers: providers,
        dir,
        counter,
        load,
        deregistered_at,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_5a_empty_push_with_keep_last_keeps_calls_flowing() {
    let _serial = serial().await;
    let t = empty_push(EmptyPolicy::KeepLast).await;
    t.dir
        .wait_until(WAIT, |s| s.is_protected())
        .await
        .expect("the empty push arrives and the empty-list protection keeps the last list");
    let protected_after = t.deregistered_at.elapsed();
    let protected_at = Instant::now();
    t.load
        .wait_for_ok(300, WAIT, "after the empty push, on the kept list")
        .await;
    let kept: Vec<String> = t
        .dir
        .load()
        .endpoints()
        .iter()
        .map(|e| e.instance.address().to_string())
        .collect();
    let calls = t.load.stop().await;

    let after = calls.started_between(protected_at, calls.stopped);
    let f = Figures::new(
        "5a",
        "empty push, policy keep-last",
        &calls,
        t.counter.attempts(),
    )
    .recovery(None)
    .with("protection-engaged", ms(protected_after))
    .with("kept", format!("{}/3", kept.len()))
    .with("calls-on-kept-list", after.len())
    .note(
        "recovery n/a: no outage by design; every provider deregistered in the shared \
         ZooKeeper while serving, the last list kept (snapshot protected)",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "keep-last: calls keep succeeding after the empty push: {:?}",
        calls.failures_by_kind()
    );
    // The providers are deregistered one by one: the last non-empty list the registry
    // pushed (one to three of them) is what is kept.
    assert!(
        !kept.is_empty()
            && kept
                .iter()
                .all(|a| t.instances.iter().any(|i| i.address() == a)),
        "the last non-empty list is kept: {kept:?}"
    );
    assert!(
        after.len() >= 200 && after.iter().all(|r| r.ok()),
        "calls made on the kept list succeed ({} of them)",
        after.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_5b_empty_push_with_publish_fails_calls_with_no_provider() {
    let _serial = serial().await;
    let t = empty_push(EmptyPolicy::Publish).await;
    t.dir
        .wait_until(WAIT, |s| s.instances().is_empty())
        .await
        .expect("the empty push is published");
    let emptied_at = Instant::now();
    let empty_after = t.deregistered_at.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reregistered_at = Instant::now();
    for i in &t.instances {
        t.registrar.register(i).await.expect("register again");
    }
    t.dir
        .wait_until(WAIT, |s| s.endpoints().len() == 3)
        .await
        .expect("the providers are listed again");
    t.load
        .wait_for_ok(200, WAIT, "after the providers registered again")
        .await;
    let calls = t.load.stop().await;

    let before = calls.started_between(calls.started, t.deregistered_at);
    let while_empty = calls.started_between(emptied_at, reregistered_at);
    let no_provider = while_empty
        .iter()
        .filter(|r| r.error == Some(ErrorKind::NoProvider))
        .count();
    let recovery = calls
        .first_success_after(reregistered_at)
        .map(|t| t.saturating_duration_since(reregistered_at));
    let f = Figures::new(
        "5b",
        "empty push, policy publish",
        &calls,
        t.counter.attempts(),
    )
    .recovery(recovery)
    .without_gap()
    .with("empty-published", ms(empty_after))
    .with(
        "no-provider-while-empty",
        format!("{no_provider}/{}", while_empty.len()),
    )
    .note(
        "recovery = re-registration to the first successful call; every provider \
         deregistered in the shared ZooKeeper while serving: calls fail with no provider \
         until they register again",
    );
    emit(&f);
    assert!(
        before.iter().all(|r| r.ok()),
        "calls succeed before the empty push"
    );
    assert!(
        while_empty.len() >= 50,
        "calls were made while the list was empty ({})",
        while_empty.len()
    );
    assert_eq!(
        no_provider,
        while_empty.len(),
        "publish: every call on the empty list fails with no provider"
    );
    let kinds = calls.failures_by_kind();
    assert!(
        kinds.keys().all(|k| k == ErrorKind::NoProvider.as_str()),
        "no failure of another kind: {kinds:?}"
    );
    assert!(
        recovery.is_some_and(|r| r < RESTORED),
        "calls succeed again after the providers register again ({recovery:?})"
    );
}

// -----------------------------------------------------------------------------------------
// 6. ZooKeeper session expiry: the consumer cut off longer than its session timeout
// -----------------------------------------------------------------------------------------

/// The session owning the provider node of `instance`, if the node exists.
async fn node_owner(client: &zk::Client, instance: &Instance) -> Option<i64> {
    let dir = format!("/dubbo/{}/providers", instance.service().interface);
    let needle = format!("127.0.0.1%3A{}%2F", instance.port());
    for child in client.list_children(&dir).await.unwrap_or_default() {
        if child.contains(&needle)
            && let Ok(Some(stat)) = client.check_stat(&format!("{dir}/{child}")).await
        {
            return Some(stat.ephemeral_owner);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_6_zookeeper_session_expiry_while_the_consumer_is_cut_off() {
    let _serial = serial().await;
    let server = start_zk().await;
    let upstream = format!("127.0.0.1:{}", server.port(0))
        .parse()
        .expect("ZooKeeper address");
    let proxy = TcpProxy::start(upstream).await.expect("the proxy binds");
    let key = ServiceKey::new(interface("Expiry"));
    let mut a = serve_ok("a").await;
    let (b, c) = (serve_ok("b").await, serve_ok("c").await);
    let (ia, ib, ic) = (
        http_instance(&key, a.addr().port()),
        http_instance(&key, b.addr().port()),
        http_instance(&key, c.addr().port()),
    );
    // Other processes' registrations, on a direct connection.
    let direct = zk_registry(&server.registry_url("timeout=1000"));
    direct.register(&ia).await.expect("register a");
    // The consumer process: its subscription and its own provider registration (b) share one
    // session, through the proxy, with a 2 s session timeout.
    let local = zk_registry(&format!(
        "zookeeper://{}?session=2000&timeout=1000",
        proxy.addr()
    ));
    local
        .register(&ib)
        .await
        .expect("register b through the proxy");
    let dir = Arc::new(
        RegistryDirectory::subscribe(&local, directory_config(key.clone()))
            .await
            .expect("subscribe through the proxy"),
    );
    let want_before = sorted([ia.address(), ib.address()]);
    poll_until(WAIT, "a and b listed", || {
        let ok = addresses(&dir) == want_before;
        async move { ok }
    })
    .await;
    let raw = raw_client(&server.connect_string(), WAIT).await;
    let b_owner = node_owner(&raw, &ib)
        .await
        .expect("b's node exists before the cut");
    let (cluster, counter) = counted_cluster(dir.clone(), ClusterConfig::default());
    let load = Load::start(cluster, CALLERS, PACE);
    load.wait_for_ok(200, WAIT, "before the cut").await;

    let cut_at = Instant::now();
    proxy.cut();
    // While the consumer is cut off: a is decommissioned (unregistered, then stopped), c joins.
    direct.unregister(&ia).await.expect("unregister a");
    a.stop();
    direct.register(&ic).await.expect("register c");
    // Cut until the server has expired the consumer's session: its ephemeral b node is gone.
    poll_until(WAIT, "the consumer's session expires while cut off", || {
        let (raw, ib) = (&raw, &ib);
        async move { node_owner(raw, ib).await.is_none() }
    })
    .await;
    // ZooKeeper expires sessions on its tick, counted from the last heartbeat (before the
    // cut): keep the line cut for longer than the session timeout in any case.
    let min_cut = Duration::from_millis(2500);
    tokio::time::sleep(min_cut.saturating_sub(cut_at.elapsed())).await;
    let restored_at = Instant::now();
    proxy.restore();
    let cut = restored_at - cut_at;

    let want_after = sorted([ib.address(), ic.address()]);
    let recovery = poll_until(
        RESTORED,
        "the snapshot is b and c again (re-registered, re-watched, a gone)",
        || {
            let ok = addresses(&dir) == want_after;
            async move { ok }
        },
    )
    .await;
    let settled = Instant::now();
    poll_until(RESTORED, "b's node is re-created by a new session", || {
        let (raw, ib) = (&raw, &ib);
        async move { node_owner(raw, ib).await.is_some_and(|o| o != b_owner) }
    })
    .await;
    load.wait_for_ok(300, WAIT, "after the restore").await;
    let calls = load.stop().await;

    let stale_after = counter
        .last_attempt_to(ia.address())
        .is_some_and(|t| t > settled);
    let f = Figures::new("6", "ZooKeeper session expiry", &calls, counter.attempts())
        .recovery(Some(recovery))
        .with("cut", ms(cut))
        .with("attempts-to-removed", counter.attempts_to(ia.address()))
        .note(
            "recovery = network restored to a snapshot of exactly {own re-registered provider, \
         provider added meanwhile}; the consumer's ZooKeeper connection cut by a proxy (open \
         connections closed, new ones black-holed) until its 2 s session expired and at least \
         2.5 s, one provider removed (and stopped) and one added meanwhile",
        );
    emit(&f);
    assert_eq!(addresses(&dir), want_after, "no stale instance afterwards");
    assert!(
        !stale_after,
        "no attempt goes to the removed provider once the snapshot is right"
    );
    assert_eq!(
        calls.failed(),
        0,
        "no call fails: {:?}",
        calls.failures_by_kind()
    );
    drop(direct);
    drop(local);
}

fn sorted<const N: usize>(a: [&str; N]) -> Vec<String> {
    let mut v: Vec<String> = a.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

// -----------------------------------------------------------------------------------------
// 7. Every provider failing: the retry budget bounds the attempts
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_7_every_provider_failing_stays_within_the_retry_budget() {
    let _serial = serial().await;
    let key = ServiceKey::new(interface("AllFail"));
    let fail: &[&str] = &["--status", "503"];
    let procs = provider_processes(&[fail, fail, fail]);
    let (_registry, dir) = static_directory(&key, &procs).await;
    let budget = BudgetConfig::default();
    let (cluster, counter) = counted_cluster(dir, ClusterConfig::default());
    let cluster = cluster.with_budget(Some(budget));
    let calls_wanted = 1000;
    let calls = Load::run(
        cluster.clone(),
        CALLERS,
        Duration::from_millis(1),
        calls_wanted,
    )
    .await;

    // The budget grants `min_per_sec` retries per second of its window whatever the traffic:
    // the floor. It is granted per window (one-second slots), so a run touching more slots
    // than a window holds may spend it more than once.
    let window = budget.window.as_secs().max(1);
    let floor = budget.min_per_sec as u64 * window;
    let slots_touched = calls.elapsed().as_secs() + 2;
    let windows = slots_touched.div_ceil(window);
    let bound = 1.2 * calls.count() as f64 + (floor * windows) as f64;
    let attempts = counter.attempts();
    let f = Figures::new("7", "every provider failing", &calls, attempts)
        .recovery(None)
        .without_gap()
        .with("bound", format!("{bound:.0}"))
        .with("budget-refused", cluster.budget_refused())
        .with("took", ms(calls.elapsed()))
        .note(format!(
            "recovery n/a; every provider answers 503, failover retries=2; bound = 1.2 x calls + \
         budget floor ({}/s x {window} s{})",
            budget.min_per_sec,
            if windows > 1 {
                format!(" x {windows} windows")
            } else {
                String::new()
            }
        ));
    emit(&f);
    assert_eq!(calls.count(), calls_wanted as u64);
    assert_eq!(calls.failed(), calls.count(), "every call fails");
    assert!(
        attempts as f64 <= bound,
        "{attempts} attempts for {} calls exceed 1.2 x calls + floor = {bound}",
        calls.count()
    );
    assert!(
        attempts > calls.count(),
        "failover did retry ({attempts} attempts)"
    );
}

// -----------------------------------------------------------------------------------------
// 8. One provider slow (p99 10x): hedging or forking keeps the call p99 near the fast ones'
// -----------------------------------------------------------------------------------------

/// Calls per run of scenario 8. Hedged calls spend the retry budget (20% of calls + 10/s over
/// 10 s, one window per run here). Round robin gives the slow provider a third of the first
/// attempts (a hedge's pick does not advance the rotation), so ~33% of calls hedge and a run
/// must stay within 0.2 x calls + 100 hedges: 240 calls need ~80 of 148.
const CALLS_8: usize = 240;
/// Each caller's pause in scenario 8 (two callers, ~70 calls/s: within the budget's floor).
const PACE_8: Duration = Duration::from_millis(8);
/// Scenario 8's slack on what a call adds to its attempts, at the median (the tail is the
/// scheduler's: the p99s are printed): from its first answer to the call returning, and from
/// the hedge delay to the hedge being sent (the timer's 1 ms tick).
///
/// Its claims are per call, from the call's own attempts ([`CountingInvoker::attempts_of`]), not
/// a bound on the call p99 from other percentiles: "call p99 <= hedge + the fast attempts' p99"
/// failed under load (a fresh machine's run: 57 ms against 10 + 35 + 5), as it must now and
/// then: the slowest fast attempts can be hedges (the hedged calls' tail is a sample of the fast
/// attempts' tail), and a loaded scheduler fires a hedge late.
const SLACK_8: Duration = Duration::from_millis(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_8_one_slow_provider_hedging_and_forking_keep_the_p99() {
    let _serial = serial().await;
    let key = ServiceKey::new(interface("Slow"));
    let fast: &[&str] = &["--delay-ms", "2", "--jitter-ms", "2"];
    // The fast providers answer in 2-4 ms, which the (debug-build) HTTP path makes ~5-10 ms at
    // the p99; the slow one in 80-100 ms: ~10x at the p99.
    let slow: &[&str] = &["--delay-ms", "80", "--jitter-ms", "20"];
    let procs = provider_processes(&[fast, slow, fast]);
    let fast_addrs = vec![procs[0].address(), procs[2].address()];
    let slow_addr = vec![procs[1].address()];
    let (_registry, dir) = static_directory(&key, &procs).await;

    // Reference: failover alone.
    let (cluster, counter) = counted_cluster(dir.clone(), ClusterConfig::default());
    let reference = Load::run(cluster, CALLERS, PACE_8, CALLS_8).await;
    let fast_ref = counter.ok_latencies(&fast_addrs);
    let fast_p99_ref = percentile(&fast_ref, 0.99);
    let slow_ref = counter.ok_latencies(&slow_addr);
    let slow_p99 = percentile(&slow_ref, 0.99);
    let ref_p99 = percentile(&reference.latencies(), 0.99);
    // Hedge after the fast providers' p90: a first attempt still waiting then is almost surely
    // on the slow provider.
    let hedge_ms = (percentile(&fast_ref, 0.90).as_secs_f64() * 1000.0).ceil() as u64;
    let hedge_ms = hedge_ms.max(1);

    // 8a: hedging.
    let hedging = ClusterConfig::default()
        .service_settings(Settings::new().hedge(Hedge::After(Duration::from_millis(hedge_ms))));
    let (cluster, counter_h) = counted_cluster(dir.clone(), hedging);
    let hedged = Load::run(cluster.clone(), CALLERS, PACE_8, CALLS_8).await;
    let fast_p99_h = percentile(&counter_h.ok_latencies(&fast_addrs), 0.99);
    let p99_h = percentile(&hedged.latencies(), 0.99);
    let hedge = Duration::from_millis(hedge_ms);
    let times_h = CallTimes::of(&hedged, &counter_h);
    let refused_h = cluster.budget_refused();
    let lateness: Vec<Duration> = times_h
        .second_sent
        .iter()
        .map(|d| d.saturating_sub(hedge))
        .collect();
    let fa = Figures::new(
        "8a",
        "one slow provider, hedging",
        &hedged,
        counter_h.attempts(),
    )
    .recovery(None)
    .with("p99", ms(p99_h))
    .with("fast-p99", ms(fast_p99_h))
    .with("failover-only-p99", ms(ref_p99))
    .with("slow-p99", ms(slow_p99))
    .with(
        "slow/fast-p99",
        format!(
            "{:.1}x",
            slow_p99.as_secs_f64() / fast_p99_ref.as_secs_f64().max(1e-6)
        ),
    )
    .with("hedge", format!("{hedge_ms}ms"))
    .with("hedged", times_h.second_sent.len())
    .with("hedge-late-p50", ms(percentile(&lateness, 0.5)))
    .with("hedge-late-p99", ms(percentile(&lateness, 0.99)))
    .with("return-lag-p99", ms(percentile(&times_h.return_lags, 0.99)))
    .with(
        "attempts-to-slow",
        format!(
            "{}/{}",
            counter_h.attempts_to(&slow_addr[0]),
            hedged.count()
        ),
    )
    .with(
        "failover-only-attempts-to-slow",
        format!(
            "{}/{}",
            counter.attempts_to(&slow_addr[0]),
            reference.count()
        ),
    )
    .with("budget-refused", refused_h)
    .note(
        "recovery n/a; p99 = call p99 with a hedge after the fast providers' p90, fast-p99 = \
         attempts on the 2 fast providers in the same run; hedge-late = hedge sent minus the \
         call's start minus the hedge delay; return-lag = the call's first answer to the call \
         returning; 240 calls",
    );
    emit(&fa);

    // 8b: forking, 2 forks.
    let forking = ClusterConfig::default()
        .service_settings(Settings::new().strategy(Strategy::Forking).forks(2));
    let (cluster, counter_f) = counted_cluster(dir.clone(), forking);
    let forked = Load::run(cluster, CALLERS, PACE_8, CALLS_8).await;
    let p99_f = percentile(&forked.latencies(), 0.99);
    let times_f = CallTimes::of(&forked, &counter_f);
    let fb = Figures::new(
        "8b",
        "one slow provider, forking",
        &forked,
        counter_f.attempts(),
    )
    .recovery(None)
    .with("p99", ms(p99_f))
    .with("fast-p99", ms(fast_p99_ref))
    .with("failover-only-p99", ms(ref_p99))
    .with("slow-p99", ms(slow_p99))
    .with("return-lag-p99", ms(percentile(&times_f.return_lags, 0.99)))
    .note(
        "recovery n/a; p99 = call p99 with forks=2, fast-p99 = attempts on the 2 fast \
         providers in the failover-only run (forking cancels the losers); return-lag = the \
         call's first answer to the call returning; 240 calls",
    );
    emit(&fb);

    // A guard on the set-up (the delay flags work), not the issue's claim: the p99 ratio is
    // printed. Every answer of the slow provider waits out its 80 ms floor, and the fast ones'
    // median stays well under it. Not the p99s: a loaded machine (the chaos binary runs
    // beside the other tests) inflated the fast p99 to 55 ms once, 3.9x under the slow one's.
    let slow_min = percentile(&slow_ref, 0.0);
    let fast_p50_ref = percentile(&fast_ref, 0.5);
    assert!(
        slow_min >= Duration::from_millis(80) && fast_p50_ref * 4 <= slow_min,
        "the slow provider is slow: its fastest answer {} vs the fast ones' median {}",
        ms(slow_min),
        ms(fast_p50_ref)
    );
    assert_eq!(reference.failed() + hedged.failed() + forked.failed(), 0);

    // Hedging, call by call: a call whose first attempt has not answered after the delay sends
    // a second one to another instance, never earlier, on time (the median), and returns with
    // the first answer (the median of the calls that raced two attempts: a call waiting for
    // both would add the slow provider's time); so the slow provider no longer sets the p99.
    // A call without a hedge answered before it was due: before the latest any hedge of the
    // run went out (a loaded scheduler fires a timer late, and the answer may come first).
    let due = hedge + lateness.iter().max().copied().unwrap_or_default() + SLACK_8;
    let unhedged: Vec<_> = times_h.single.iter().filter(|d| **d > due).collect();
    assert!(
        unhedged.is_empty(),
        "hedging: calls of one attempt that took {unhedged:?}, past {} (the hedge delay \
         {hedge_ms}ms, the latest hedge's lateness and the slack); retries refused by the \
         budget: {refused_h}",
        ms(due),
    );
    let early: Vec<_> = times_h.second_sent.iter().filter(|d| **d < hedge).collect();
    assert!(
        !times_h.second_sent.is_empty() && early.is_empty(),
        "hedging: {} hedges, sent after {early:?} (< {hedge_ms}ms) in calls that sent one early",
        times_h.second_sent.len()
    );
    assert!(
        percentile(&lateness, 0.5) <= SLACK_8,
        "hedging: the median hedge went out {} late",
        ms(percentile(&lateness, 0.5))
    );
    for (what, times) in [("hedging", &times_h), ("forking", &times_f)] {
        let lag = percentile(&times.raced_return_lags, 0.5);
        assert!(
            !times.raced_return_lags.is_empty() && lag <= SLACK_8,
            "{what}: calls of several attempts returned {} (median of {}) after their first answer",
            ms(lag),
            times.raced_return_lags.len()
        );
    }
    assert!(
        p99_h < ref_p99,
        "hedging: call p99 {} not under failover alone's {}",
        ms(p99_h),
        ms(ref_p99)
    );

    // Forking: every call sends `forks` attempts to distinct instances at once (the median
    // second one within the slack of the call's start) and returns with the first answer.
    assert!(
        times_f
            .fork_counts
            .iter()
            .all(|&(n, distinct)| n == 2 && distinct == 2),
        "forking: attempts (sent, distinct instances) per call: {:?}",
        times_f.fork_counts
    );
    assert!(
        percentile(&times_f.second_sent, 0.5) <= SLACK_8,
        "forking: the median second fork went out {} after the call's start",
        ms(percentile(&times_f.second_sent, 0.5))
    );
    assert!(
        p99_f < ref_p99,
        "forking: call p99 {} not under failover alone's {}",
        ms(p99_f),
        ms(ref_p99)
    );
}

/// Scenario 8's calls against their own attempts.
struct CallTimes {
    /// Per successful call: from its first answer (the earliest attempt to answer) to the call
    /// returning.
    return_lags: Vec<Duration>,
    /// The same for the calls that sent more than one attempt.
    raced_return_lags: Vec<Duration>,
    /// Per call with a second attempt: from the call's start to that attempt being sent.
    second_sent: Vec<Duration>,
    /// Per call with one attempt: how long it took.
    single: Vec<Duration>,
    /// Per call: attempts sent, and to how many distinct instances.
    fork_counts: Vec<(usize, usize)>,
}

impl CallTimes {
    fn of(calls: &Calls, counter: &CountingInvoker) -> CallTimes {
        let mut t = CallTimes {
            return_lags: Vec::new(),
            raced_return_lags: Vec::new(),
            second_sent: Vec::new(),
            single: Vec::new(),
            fork_counts: Vec::new(),
        };
        for call in &calls.records {
            let attempts = counter.attempts_of(call);
            let distinct: BTreeSet<&str> = attempts.iter().map(|a| a.address.as_str()).collect();
            t.fork_counts.push((attempts.len(), distinct.len()));
            if let Some(first) = attempts.iter().filter_map(|a| a.answered).min() {
                let lag = call.end.saturating_duration_since(first);
                t.return_lags.push(lag);
                if attempts.len() > 1 {
                    t.raced_return_lags.push(lag);
                }
            }
            match attempts.as_slice() {
                [] => {}
                [_] => t.single.push(call.latency()),
                [first, second, ..] => {
                    if second.address != first.address {
                        t.second_sent
                            .push(second.sent.saturating_duration_since(call.start));
                    }
                }
            }
        }
        t
    }
}

// ---------------------------------------------------------------------------------------------
// 9: hostile providers (issue 26)
// ---------------------------------------------------------------------------------------------

/// The hostile dubbo:// provider process (`src/bin/hostile_dubbo_provider.rs`).
const HOSTILE_BIN: &str = env!("CARGO_BIN_EXE_hostile_dubbo_provider");
/// The largest reply a consumer accepts by default (dubbo:// `payload`).
const LARGEST_LEGAL_PAYLOAD: u64 = 8 << 20;
/// The calls' timeout in the hostile-peer scenarios.
const HOSTILE_TIMEOUT: Duration = Duration::from_millis(300);
/// Successful calls each hostile-peer scenario waits for.
const HOSTILE_OK: u64 = 600;

fn dubbo_instance(key: &ServiceKey, port: u16) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Dubbo)
        .service(key.clone())
        .warmup(Duration::ZERO)
        .build()
}

/// Issue 26's bound on the consumer (this process): peak RSS under 2 × its idle RSS + the
/// largest legal payload.
fn rss_bound(idle: &Usage) -> u64 {
    2 * idle.rss + LARGEST_LEGAL_PAYLOAD
}

/// `f` with the consumer's footprint from `idle` to `after`: idle and peak RSS, the bound, CPU
/// time.
fn with_footprint(f: Figures, idle: &Usage, after: &Usage) -> Figures {
    f.with("idle-rss", mib(idle.rss))
        .with("peak-rss", mib(after.peak))
        .with("rss-bound", mib(rss_bound(idle)))
        .with("cpu", ms(after.cpu.saturating_sub(idle.cpu)))
}

/// Asserts [`rss_bound`].
fn assert_within_rss_bound(idle: &Usage, after: &Usage) {
    assert!(
        after.peak <= rss_bound(idle),
        "peak RSS {} over 2 x idle {} + the largest legal payload",
        mib(after.peak),
        mib(idle.rss)
    );
}

/// A well-behaved dubbo:// provider and one that misbehaves (`--misbehave misbehave`), in
/// processes of their own, under steady load through failover + round robin from this
/// process; one line of figures with the consumer's (this process's) peak RSS and CPU time.
/// Asserts what issue 26 targets: every attempt on the good provider succeeds, and the peak
/// RSS stays under 2 × the idle RSS + the largest legal payload (no panic, no abort: the
/// test process is the consumer).
async fn hostile_provider(id: &str, misbehave: &str, title: &str, note: &str) {
    let _serial = serial().await;
    let key = ServiceKey::new(interface(&format!("hostile_{id}")));
    let good = ProviderProcess::spawn(Path::new(HOSTILE_BIN), "good", &["--misbehave", "none"]);
    let bad = ProviderProcess::spawn(Path::new(HOSTILE_BIN), "bad", &["--misbehave", misbehave]);
    let registry = StaticRegistry::new(vec![
        dubbo_instance(&key, good.port()),
        dubbo_instance(&key, bad.port()),
    ]);
    let dir = RegistryDirectory::subscribe(&registry, directory_config(key.clone()))
        .await
        .expect("subscribe to the static list");
    dir.wait_until(WAIT, |s| s.endpoints().len() == 2)
        .await
        .expect("both providers listed");
    let counter = CountingInvoker::new(Arc::new(DubboInvoker::new()));
    let config = ClusterConfig::new()
        .strategy(Strategy::Failover)
        .timeout(HOSTILE_TIMEOUT);
    let cluster = ClusterInvoker::new(Arc::new(dir), counter.clone(), config);

    let idle = usage();
    reset_peak();
    let load = Load::start(cluster, CALLERS, PACE);
    load.wait_for_ok(HOSTILE_OK, WAIT * 4, "calls beside the hostile provider")
        .await;
    poll_until(WAIT, "attempts on the hostile provider", || async {
        counter.attempts_to(&bad.address()) >= 3
    })
    .await;
    let calls = load.stop().await;
    let after = usage();

    let good_sent = counter.attempts_to(&good.address());
    let good_ok = counter.ok_latencies(&[good.address()]).len() as u64;
    let f = Figures::new(id, title, &calls, counter.attempts())
        .without_gap()
        .with("attempts-to-hostile", counter.attempts_to(&bad.address()))
        .with("good-ok", format!("{good_ok}/{good_sent}"));
    let f = with_footprint(f, &idle, &after).note(format!(
        "dubbo:// failover, timeout {}; {note}",
        ms(HOSTILE_TIMEOUT)
    ));
    emit(&f);
    assert_eq!(
        good_ok, good_sent,
        "every attempt on the good provider succeeds beside a hostile one"
    );
    assert_within_rss_bound(&idle, &after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_9a_a_provider_flooding_heartbeats() {
    hostile_provider(
        "9a",
        "heartbeat-flood",
        "a provider flooding heartbeats",
        "it writes two-way heartbeats without pause and answers calls; over 64 events a second the consumer closes the connection",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_9b_a_provider_sending_a_hessian_bomb() {
    hostile_provider(
        "9b",
        "hessian-bomb",
        "a provider answering with a Hessian bomb",
        "each answer is 9 KB of back references to one list: 4 million values if copied; refused by the decoder's budget, not retried (the provider ran the call)",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_9c_a_provider_that_never_reads() {
    hostile_provider(
        "9c",
        "never-reads",
        "a provider that never reads",
        "it accepts connections and never reads nor answers",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_9d_a_provider_announcing_2_gib() {
    hostile_provider(
        "9d",
        "huge-length",
        "a provider announcing a 2 GiB answer",
        "each answer's header announces 2 GiB and no body follows: over the payload limit, the call fails at once (not retried), the body is skipped unheld",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_9e_a_provider_trickling_its_answers() {
    hostile_provider(
        "9e",
        "trickle",
        "a provider trickling its answers",
        "one byte every 20 ms: every call times out and fails over",
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 10: hostile registry writes (issue 26)
// ---------------------------------------------------------------------------------------------

/// A valid condition rule of `interface` whose YAML also holds an alias bomb: a 1000-element
/// list repeated 4000 times by aliases, 4 million nodes from about 18 KB.
fn alias_bomb_rule(interface: &str) -> String {
    let zeros = vec!["0"; 1000].join(",");
    let aliases = vec!["*a"; 4000].join(",");
    format!(
        "configVersion: v3.0\nscope: service\nkey: {interface}\nenabled: true\nforce: true\n\
         conditions:\n  - \"=> port = 1\"\nx: &a [{zeros}]\ny: [{aliases}]\n"
    )
}

/// The addresses `snapshot` routes a call of [`METHOD`] to, sorted.
fn routed(dir: &RegistryDirectory) -> Vec<String> {
    let snap = dir.load();
    let mut rng = fastrand::Rng::with_seed(1);
    let mut out: Vec<String> = snap
        .candidates(
            &switchman_core::Invocation::new(switchman_integration_tests::chaos::METHOD),
            &mut rng,
        )
        .map(|c| {
            c.iter()
                .map(|&i| snap.instances()[i as usize].address().to_string())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_10_hostile_registry_writes_under_load() {
    let _serial = serial().await;
    let url = format!("zookeeper://{}?timeout=2000", zookeeper());
    let iface = interface("HostileRegistry");
    let key = ServiceKey::new(&iface);
    let procs: Vec<ProviderProcess> = (1..=3)
        .map(|i| {
            ProviderProcess::spawn(
                Path::new(HOSTILE_BIN),
                &format!("p{i}"),
                &["--misbehave", "none"],
            )
        })
        .collect();
    let [p1, p2, p3] = [0, 1, 2].map(|i| procs[i].address());
    let registrar = zk_registry(&url);
    registrar
        .register(&dubbo_instance(&key, procs[0].port()))
        .await
        .expect("register p1");
    registrar
        .register(&dubbo_instance(&key, procs[1].port()))
        .await
        .expect("register p2");
    // p3 registers every number a provider may send out of its range.
    let p3_instance = Instance::builder("127.0.0.1", procs[2].port())
        .protocol(Protocol::Dubbo)
        .service(key.clone())
        .warmup(Duration::ZERO)
        .param("connections", "18446744073709551615")
        .param("heartbeat", "1")
        .param("payload", "0")
        .param("hash.nodes", "2000000000")
        .param("timeout", "99999999999999999")
        .param("echo.timeout", "-5")
        .build();
    registrar.register(&p3_instance).await.expect("register p3");
    let raw = raw_client(&zookeeper(), WAIT).await;
    let rule_path = format!("/dubbo/config/dubbo/{iface}.condition-router");
    let conf_path = format!("/dubbo/config/dubbo/{iface}.configurators");
    let good_rule = |n: usize| {
        format!(
            "configVersion: v3.0\nscope: service\nkey: {iface}\nenabled: true\nforce: true\n\
             conditions:\n  - \"=> port = {},{}\"\n# revision {n}\n",
            procs[0].port(),
            procs[2].port()
        )
    };
    let configurators = |weight: u32, extra: &str| {
        format!(
            "configVersion: v3.0\nscope: service\nkey: {iface}\nenabled: true\nconfigs:\n  - side: provider\n    parameters:\n      weight: {weight}\n{extra}"
        )
    };
    put_node(&raw, &rule_path, good_rule(0).as_bytes()).await;
    put_node(&raw, &conf_path, configurators(50, "").as_bytes()).await;

    let consumer = zk_registry(&url);
    let dir = Arc::new(
        RegistryDirectory::subscribe(&consumer, directory_config(key.clone()))
            .await
            .expect("subscribe"),
    );
    let mut kept = vec![p1.clone(), p3.clone()];
    kept.sort();
    // The last good state: the rule routes to p1 and p3, the configurators weigh all 50.
    let in_force = |d: &RegistryDirectory| {
        routed(d) == kept && d.load().instances().iter().all(|i| i.weight() == 50)
    };
    poll_until(WAIT, "the good rule and configurators in force", || {
        let d = dir.clone();
        async move { d.load().instances().len() == 3 && in_force(&d) }
    })
    .await;
    let counter = CountingInvoker::new(Arc::new(DubboInvoker::new()));
    let cluster = ClusterInvoker::new(dir.clone(), counter.clone(), ClusterConfig::new());
    let idle = usage();
    reset_peak();
    let load = Load::start(cluster, CALLERS, PACE);
    load.wait_for_ok(100, WAIT, "before the hostile writes")
        .await;

    let bomb = format!(
        "x: &a [{}]\ny: [{}]\n",
        vec!["0"; 1000].join(","),
        vec!["*a"; 4000].join(",")
    );
    let writes: Vec<(&str, String, Vec<u8>)> = vec![
        (
            "an alias-bomb routing rule",
            rule_path.clone(),
            alias_bomb_rule(&iface).into_bytes(),
        ),
        (
            "an alias-bomb configurator",
            conf_path.clone(),
            configurators(1, &bomb).into_bytes(),
        ),
        (
            "a 300 KB configurator",
            conf_path.clone(),
            configurators(1, &"# padding\n".repeat(30_000)).into_bytes(),
        ),
        (
            "a provider node that is no URL",
            format!("/dubbo/{iface}/providers/%ZZ%25not-a-url"),
            Vec::new(),
        ),
    ];
    let mut done = Vec::new();
    for (n, (what, path, data)) in writes.iter().enumerate() {
        let before = dir.updates_applied();
        put_node(&raw, path, data).await;
        // The barrier: an update the directory applies after the adapter read the write. A
        // rule reaches the directory (which rejects it); a configurator or a provider node the
        // adapter rejects itself sends nothing, so a new revision of the good rule follows: the
        // adapter reads its nodes in one order per pass (providers, then each key's
        // configurators before its condition rule), and ZooKeeper delivers the watch events in
        // the order of the writes, so that revision is read after the write before it.
        if path != &rule_path {
            put_node(&raw, &rule_path, good_rule(n + 1).as_bytes()).await;
        }
        poll_until(WAIT, &format!("the directory reads {what}"), || {
            let d = dir.clone();
            async move { d.updates_applied() > before }
        })
        .await;
        done.push(*what);
        assert!(
            in_force(&dir),
            "after {what}, the last good rule and configurators stay in force"
        );
    }
    let to_p2_before = counter.attempts_to(&p2);
    load.wait_for_ok(300, WAIT, "after the hostile writes")
        .await;
    let calls = load.stop().await;
    let after = usage();
    let listed = addresses(&dir);
    let f = Figures::new(
        "10",
        "hostile registry writes under load",
        &calls,
        counter.attempts(),
    )
    .with("writes", done.len())
    .with("rules-kept", in_force(&dir))
    .with("listed", listed.len())
    .with("to-p3", counter.attempts_to(&p3));
    let f = with_footprint(f, &idle, &after).note(format!(
            "dubbo://, ZooKeeper; a good rule routes to p1 and p3 (p3 registered connections=2^64-1, heartbeat=1, payload=0, hash.nodes=2e9, timeout=1e17); written under load: {}",
            done.join(", ")
        ));
    emit(&f);
    assert_eq!(calls.failed(), 0, "no call fails");
    assert_eq!(
        counter.attempts_to(&p2),
        to_p2_before,
        "no call reaches p2: the good rule stays in force"
    );
    assert!(
        counter.attempts_to(&p3) > 0,
        "p3 serves despite its numbers"
    );
    assert_eq!(listed, {
        let mut all = vec![p1, p2, p3];
        all.sort();
        all
    });
    assert_within_rss_bound(&idle, &after);
    let _ = raw.delete(&rule_path, None).await;
    let _ = raw.delete(&conf_path, None).await;
}

// ---------------------------------------------------------------------------------------------
// 11-14: a real ZooKeeper ensemble failing (issue 30)
// ---------------------------------------------------------------------------------------------

/// The consumer's and registrars' parameters in the ensemble scenarios: a session longer
/// than an election of the private ensemble (500 ms ticks: 1-3 s), so a member's loss moves
/// the session to another member instead of expiring it; each call or connect attempt 1 s.
const ENSEMBLE_PARAMS: &str = "session=10000&timeout=1000";

/// A proxy the test controls in front of each member's client port: the consumer's links.
async fn client_proxies(zk: &ZkServer) -> Vec<TcpProxy> {
    let mut out = Vec::new();
    for i in 0..zk.len() {
        let upstream = format!("127.0.0.1:{}", zk.port(i))
            .parse()
            .expect("member address");
        out.push(TcpProxy::start(upstream).await.expect("the proxy binds"));
    }
    out
}

/// `zookeeper://` with `servers` (the first one, the others as `backup`) and `params`.
fn zk_url(servers: &[String], params: &str) -> String {
    let backup = if servers.len() > 1 {
        format!("backup={}&", servers[1..].join(","))
    } else {
        String::new()
    };
    format!("zookeeper://{}?{backup}{params}", servers[0])
}

/// A registry URL over the proxies.
fn proxied_url(proxies: &[TcpProxy]) -> String {
    let servers: Vec<String> = proxies.iter().map(|p| p.addr().to_string()).collect();
    zk_url(&servers, ENSEMBLE_PARAMS)
}

/// A registry URL straight to `members` of `zk`.
fn direct_url(zk: &ZkServer, members: &[usize]) -> String {
    let servers: Vec<String> = members
        .iter()
        .map(|&i| format!("127.0.0.1:{}", zk.port(i)))
        .collect();
    zk_url(&servers, ENSEMBLE_PARAMS)
}

/// The members whose proxy forwards a connection of the consumer now.
fn forwarding(proxies: &[TcpProxy]) -> Vec<usize> {
    (0..proxies.len())
        .filter(|&i| proxies[i].forwarding() > 0)
        .collect()
}

/// [`under_load`] with the consumer's first session steered onto member `on`: the other
/// members' proxies refuse connections until the load runs, then forward again (the
/// consumer's client picks its server at random otherwise).
async fn steered_under_load(
    proxies: &[TcpProxy],
    on: usize,
    consumer: &dyn Registry,
    config: DirectoryConfig,
    listed: usize,
) -> (Arc<RegistryDirectory>, Arc<CountingInvoker>, Load) {
    for (i, p) in proxies.iter().enumerate() {
        if i != on {
            p.refuse();
        }
    }
    let out = under_load(consumer, config, listed, 200, "before the failure").await;
    for (i, p) in proxies.iter().enumerate() {
        if i != on {
            p.restore();
        }
    }
    assert_eq!(
        forwarding(proxies),
        vec![on],
        "the consumer's session is on member {on} (and only there)"
    );
    out
}

/// Waits until the consumer's connection is held by a member other than `off` (forwarded
/// at two polls 50 ms apart: a member without quorum closes a new connection at once) and
/// returns when (the first of the two polls).
async fn moved_off(proxies: &[TcpProxy], off: usize, within: Duration) -> Instant {
    let start = Instant::now();
    let mut last = Vec::new();
    loop {
        let now: Vec<usize> = forwarding(proxies)
            .into_iter()
            .filter(|&i| i != off)
            .collect();
        if !now.is_empty() && now == last {
            return Instant::now() - Duration::from_millis(50);
        }
        assert!(
            start.elapsed() < within,
            "the consumer's session is not on another member than {off} within {within:?}"
        );
        last = now;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Registers a marker provider node (another interface, never called) through `consumer`'s
/// session, so the test can tell by its owner whether that session survived.
async fn session_marker(consumer: &ZookeeperRegistry, key: &ServiceKey, port: u16) -> Instance {
    let marker = http_instance(&ServiceKey::new(format!("{}.marker", key.interface)), port);
    register_within(consumer, &marker, WAIT).await;
    marker
}

/// The session owning the marker node, waiting (at most [`WAIT`]) while the test's own
/// client reconnects or the node is re-created.
async fn marker_owner(raw: &zk::Client, marker: &Instance) -> i64 {
    let start = Instant::now();
    loop {
        if let Some(owner) = node_owner(raw, marker).await {
            return owner;
        }
        assert!(
            start.elapsed() < WAIT,
            "the marker node is gone for {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lists a directory published, each with when it was first seen.
type Seen = Vec<(Instant, Vec<String>)>;

/// Every distinct address list the directory published, in order, with when: a task that
/// reads the snapshot after each epoch change (a list that lasted less than the task's wake-up
/// may be missed, not reordered).
struct Views {
    seen: Arc<std::sync::Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Views {
    fn record(dir: Arc<RegistryDirectory>) -> Views {
        let seen: Arc<std::sync::Mutex<Seen>> = Arc::default();
        let out = seen.clone();
        let mut epochs = dir.epochs();
        let task = tokio::spawn(async move {
            loop {
                let now = addresses(&dir);
                {
                    let mut seen = out.lock().unwrap_or_else(|p| p.into_inner());
                    if seen.last().is_none_or(|(_, last)| *last != now) {
                        seen.push((Instant::now(), now));
                    }
                }
                if epochs.changed().await.is_err() {
                    return;
                }
            }
        });
        Views { seen, task }
    }

    /// Stops recording; the lists seen.
    fn stop(self) -> Seen {
        self.task.abort();
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Checks the lists a directory published against changes made in order: `changes[n]` is
/// `(address, present)` (the address was added, or removed). Once a list reflects a change,
/// every later list reflects it too (no list goes back to an older view of the registry).
/// Returns how many lists went back (0 is the target) and prints them.
fn stale_views(views: &[(Instant, Vec<String>)], changes: &[(&str, bool)]) -> usize {
    let mut stale = 0;
    for &(address, present) in changes {
        let reflects = |v: &Vec<String>| v.iter().any(|a| a == address) == present;
        if let Some(first) = views.iter().position(|(_, v)| reflects(v)) {
            for (_, v) in &views[first..] {
                if !reflects(v) {
                    eprintln!(
                        "stale view: {v:?} after a list with {address} {}",
                        if present { "added" } else { "removed" }
                    );
                    stale += 1;
                }
            }
        }
    }
    stale
}

/// Unregisters, retrying while the registrar's session moves, for at most `within`.
async fn unregister_within(reg: &dyn Registrar, inst: &Instance, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match reg.unregister(inst).await {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("unregister {} not yet: {e}", inst.address());
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("unregister {} failed for {within:?}: {e}", inst.address()),
        }
    }
}

/// Starts an ensemble of three (blocking until every member serves).
fn ensemble_of_three() -> ZkServer {
    tokio::task::block_in_place(|| ZkServer::ensemble(3))
}

/// Whether member `i` serves (a blocking four-letter command, off the runtime's workers).
fn serving(zk: &ZkServer, i: usize) -> bool {
    tokio::task::block_in_place(|| zk.serving(i))
}

// -----------------------------------------------------------------------------------------
// 11. The leader of a 3-node ensemble killed under load, the consumer's session on it
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_11_zookeeper_leader_killed_under_load() {
    let _serial = serial().await;
    let began = Instant::now();
    let mut zk = ensemble_of_three();
    let proxies = client_proxies(&zk).await;
    let leader = tokio::task::block_in_place(|| zk.leader()).expect("the ensemble has a leader");
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let key = ServiceKey::new(interface("ZkLeader"));
    let (providers, instances) = three_providers(&key).await;
    let producer = zk_registry(&direct_url(&zk, &[0, 1, 2]));
    for i in &instances[..2] {
        register_within(&producer, i, WAIT).await;
    }
    let consumer = zk_registry(&proxied_url(&proxies));
    let (dir, counter, load) = steered_under_load(
        &proxies,
        leader,
        &consumer,
        directory_config(key.clone()),
        2,
    )
    .await;
    let views = Views::record(dir.clone());
    let marker = session_marker(&consumer, &key, providers[0].addr().port()).await;
    let raw = raw_client(&zk.connect_string(), WAIT).await;
    let session = node_owner(&raw, &marker)
        .await
        .expect("the consumer's marker node exists");

    let killed_at = Instant::now();
    tokio::task::block_in_place(|| zk.kill(leader));
    // A change made after the kill, by a registrar of another process (a fresh session on
    // the surviving members): it commits once they elected a new leader.
    let late = zk_registry(&direct_url(&zk, &survivors));
    let (moved, ()) = tokio::join!(
        moved_off(&proxies, leader, RESTORED),
        register_within(&late, &instances[2], RESTORED)
    );
    let registered = killed_at.elapsed();
    let elected = tokio::task::block_in_place(|| zk.leader());
    let p3 = instances[2].address().to_string();
    dir.wait_until(RESTORED, |s| s.index_of(&p3).is_some())
        .await
        .expect("p3, registered after the kill, is seen");
    let visible = killed_at.elapsed();
    // The consumer's session moved to a surviving member (it read p3 through it).
    let moved_to = forwarding(&proxies);
    poll_until(WAIT, "p3 receives calls", || async {
        providers[2].hits() > 0
    })
    .await;
    load.wait_for_ok(300, WAIT, "after the kill").await;
    let session_kept = marker_owner(&raw, &marker).await == session;
    let calls = load.stop().await;
    let views = views.stop();
    let stale = stale_views(&views, &[(&p3, true)]);

    let f = Figures::new(
        "11",
        "ZooKeeper leader killed under load",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(visible))
    .with("moved", ms(moved.saturating_duration_since(killed_at)))
    .with("registered", ms(registered))
    .with(
        "moved-to",
        moved_to
            .iter()
            .map(|m| format!("member{}", m + 1))
            .collect::<Vec<_>>()
            .join(","),
    )
    .with("session-kept", session_kept)
    .with("views", views.len())
    .with("stale-views", stale)
    .with("took", ms(began.elapsed()))
    .note(
        "recovery = SIGKILL of the leader to a provider registered after the kill (a new \
         session on the survivors) visible in the consumer's snapshot; 3-member private \
         ensemble, the consumer's session (10 s) steered onto the leader through per-member \
         proxies; moved = kill to the consumer's connection held by a surviving member, \
         registered = kill to that registration committed (after the new election)",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails when the leader dies: {:?}",
        calls.failures_by_kind()
    );
    assert!(
        elected.is_some_and(|l| l != leader),
        "a surviving member leads ({elected:?}, killed member {leader})"
    );
    assert!(
        moved_to.len() == 1 && moved_to[0] != leader,
        "the consumer's session is on one surviving member: {moved_to:?} (killed {leader})"
    );
    assert!(
        session_kept,
        "the consumer's session moved to the majority, not expired"
    );
    assert_eq!(
        stale, 0,
        "no published list goes back to before p3: {views:?}"
    );
    assert_eq!(addresses(&dir).len(), 3, "p1, p2 and p3 listed at the end");
    drop((late, producer, consumer));
}

// -----------------------------------------------------------------------------------------
// 12. The consumer's member cut off into the minority
// -----------------------------------------------------------------------------------------

/// The quorum and election links of an ensemble of three, each direction of each pair through
/// proxies of its own (member `from` reaches member `to` through `links[(from, to)]`).
struct QuorumLinks {
    links: Vec<((usize, usize), TcpProxy, TcpProxy)>,
}

impl QuorumLinks {
    async fn start(ports: &[MemberPorts]) -> QuorumLinks {
        let mut links = Vec::new();
        for from in 0..ports.len() {
            for to in (0..ports.len()).filter(|&t| t != from) {
                let at = |p: u16| format!("127.0.0.1:{p}").parse().expect("member address");
                let quorum = TcpProxy::start(at(ports[to].quorum))
                    .await
                    .expect("the quorum proxy binds");
                let election = TcpProxy::start(at(ports[to].election))
                    .await
                    .expect("the election proxy binds");
                links.push(((from, to), quorum, election));
            }
        }
        QuorumLinks { links }
    }

    /// The ports member `from` reaches member `to` at.
    fn peer(&self, from: usize, to: usize) -> (u16, u16) {
        self.links
            .iter()
            .find(|(k, _, _)| *k == (from, to))
            .map(|(_, q, e)| (q.addr().port(), e.addr().port()))
            .expect("a link between two members")
    }

    /// Cuts (or restores) every link to and from member `k`.
    fn isolate(&self, k: usize, cut: bool) {
        for ((from, to), q, e) in &self.links {
            if *from == k || *to == k {
                for p in [q, e] {
                    if cut {
                        p.cut();
                    } else {
                        p.restore();
                    }
                }
            }
        }
    }
}

/// How long scenario 12 keeps the consumer's member cut off at least.
const MIN_CUT_12: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_12_zookeeper_consumer_member_cut_off_into_the_minority() {
    let _serial = serial().await;
    let began = Instant::now();
    let ports = ZkServer::allocate_ensemble(3);
    let links = QuorumLinks::start(&ports).await;
    let zk = tokio::task::block_in_place(|| {
        ZkServer::ensemble_linked(&ports, &|from, to| links.peer(from, to))
    });
    let proxies = client_proxies(&zk).await;
    let leader = tokio::task::block_in_place(|| zk.leader()).expect("the ensemble has a leader");
    // The consumer's member: a follower, cut off from the leader and the other follower.
    let minority = (0..3).find(|&i| i != leader).expect("a follower");
    let majority: Vec<usize> = (0..3).filter(|&i| i != minority).collect();
    let key = ServiceKey::new(interface("ZkMinority"));
    let (providers, instances) = three_providers(&key).await;
    // The registrar of the other processes: on the majority side.
    let producer = zk_registry(&direct_url(&zk, &majority));
    for i in &instances[..2] {
        register_within(&producer, i, WAIT).await;
    }
    let consumer = zk_registry(&proxied_url(&proxies));
    let (dir, counter, load) = steered_under_load(
        &proxies,
        minority,
        &consumer,
        directory_config(key.clone()),
        2,
    )
    .await;
    let views = Views::record(dir.clone());
    let marker = session_marker(&consumer, &key, providers[0].addr().port()).await;
    let raw = raw_client(&zk.connect_string(), WAIT).await;
    let session = node_owner(&raw, &marker)
        .await
        .expect("the consumer's marker node exists");
    let accepted_before: u64 = proxies.iter().map(TcpProxy::accepted).sum();

    let cut_at = Instant::now();
    links.isolate(minority, true);
    // The cut-off member stops serving (no quorum): it closes its clients' connections.
    poll_until(WAIT, "the cut-off member stops serving", || {
        let lost = !serving(&zk, minority);
        async move { lost }
    })
    .await;
    let lost_quorum = cut_at.elapsed();
    // Meanwhile, on the majority side: p1 is unregistered (it keeps serving: calls that still
    // go to it succeed, only the lists tell) and p3 registered.
    let (moved, ()) = tokio::join!(moved_off(&proxies, minority, RESTORED), async {
        unregister_within(&producer, &instances[0], RESTORED).await;
        register_within(&producer, &instances[2], RESTORED).await;
    });
    let (p1, p3) = (
        instances[0].address().to_string(),
        instances[2].address().to_string(),
    );
    let want = sorted([instances[1].address(), instances[2].address()]);
    dir.wait_until(RESTORED, |s| {
        s.index_of(&p3).is_some() && s.index_of(&p1).is_none()
    })
    .await
    .expect("the majority's change (p1 out, p3 in) is seen");
    let visible = cut_at.elapsed();
    let settled = Instant::now();
    assert!(
        !serving(&zk, minority),
        "the cut-off member is still without quorum when the change is seen"
    );
    let reconnects = proxies.iter().map(TcpProxy::accepted).sum::<u64>() - accepted_before;
    load.wait_for_ok(300, WAIT, "while the member is cut off")
        .await;
    // Cut for a while in any case: the consumer keeps serving, the member stays out.
    tokio::time::sleep(MIN_CUT_12.saturating_sub(cut_at.elapsed())).await;
    assert!(
        !serving(&zk, minority),
        "the cut-off member is still without quorum at the heal"
    );
    let healed_at = Instant::now();
    links.isolate(minority, false);
    poll_until(RESTORED, "the cut-off member serves again", || {
        let back = serving(&zk, minority);
        async move { back }
    })
    .await;
    let rejoined = healed_at.elapsed();
    let cut = healed_at - cut_at;
    poll_until(WAIT, "p3 receives calls", || async {
        providers[2].hits() > 0
    })
    .await;
    load.wait_for_ok(200, WAIT, "after the heal").await;
    let session_kept = marker_owner(&raw, &marker).await == session;
    let calls = load.stop().await;
    let views = views.stop();
    let stale = stale_views(&views, &[(&p1, false), (&p3, true)]);

    let f = Figures::new(
        "12",
        "ZooKeeper consumer's member cut off into the minority",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(visible))
    .with("lost-quorum", ms(lost_quorum))
    .with("moved", ms(moved.saturating_duration_since(cut_at)))
    .with("reconnects", reconnects)
    .with("cut", ms(cut))
    .with("rejoined", ms(rejoined))
    .with("session-kept", session_kept)
    .with("views", views.len())
    .with("stale-views", stale)
    .with("took", ms(began.elapsed()))
    .note(
        "recovery = cut to the majority's change (p1 unregistered, p3 registered during the \
         cut) in the consumer's snapshot; 3-member private ensemble with every quorum and \
         election link through proxies, the consumer's follower cut off from both others; \
         lost-quorum = cut to that member refusing to serve, moved = cut to the consumer's \
         connection held by a majority member (same session), reconnects = connections the \
         consumer opened meanwhile, cut at least 5 s, rejoined = heal to the member serving \
         again",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails while the consumer's member is cut off: {:?}",
        calls.failures_by_kind()
    );
    assert!(
        session_kept,
        "the consumer's session moved to the majority, not expired"
    );
    assert_eq!(
        stale, 0,
        "no published list goes back to an older view: {views:?}"
    );
    assert_eq!(addresses(&dir), want, "the majority's view at the end");
    assert!(
        counter.last_attempt_to(&p1).is_none_or(|t| t < settled),
        "no attempt goes to the unregistered p1 once the change is seen"
    );
    drop((producer, consumer));
}

// -----------------------------------------------------------------------------------------
// 13. Rolling restart of the three members under load
// -----------------------------------------------------------------------------------------

/// When the first list of `views` reflecting `(address, present)` was published.
fn first_reflecting(
    views: &[(Instant, Vec<String>)],
    address: &str,
    present: bool,
) -> Option<Instant> {
    views
        .iter()
        .find(|(_, v)| v.iter().any(|a| a == address) == present)
        .map(|(t, _)| *t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_13_zookeeper_rolling_restart_of_all_three_members() {
    let _serial = serial().await;
    let began = Instant::now();
    let mut zk = ensemble_of_three();
    let proxies = client_proxies(&zk).await;
    let leader = tokio::task::block_in_place(|| zk.leader()).expect("the ensemble has a leader");
    // Followers first, the leader last: how a rolling restart is done.
    let order: Vec<usize> = (0..3)
        .filter(|&i| i != leader)
        .chain(std::iter::once(leader))
        .collect();
    let key = ServiceKey::new(interface("ZkRolling"));
    let (providers, instances) = three_providers(&key).await;
    let producer = zk_registry(&direct_url(&zk, &[0, 1, 2]));
    for i in &instances[..2] {
        register_within(&producer, i, WAIT).await;
    }
    let consumer = zk_registry(&proxied_url(&proxies));
    // The consumer on the first member restarted: it moves at least once.
    let (dir, counter, load) = steered_under_load(
        &proxies,
        order[0],
        &consumer,
        directory_config(key.clone()),
        2,
    )
    .await;
    let views = Views::record(dir.clone());
    let marker = session_marker(&consumer, &key, providers[0].addr().port()).await;
    let raw = raw_client(&zk.connect_string(), WAIT).await;
    let session = node_owner(&raw, &marker)
        .await
        .expect("the consumer's marker node exists");
    let accepted_before: u64 = proxies.iter().map(TcpProxy::accepted).sum();

    let mut each = Vec::new();
    for &i in &order {
        let t = Instant::now();
        tokio::task::block_in_place(|| {
            zk.kill(i);
            zk.restart(i);
            // Back in a quorum with a leader before the next member goes.
            let deadline = Instant::now() + RESTORED;
            while zk.leader().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "no leader {RESTORED:?} after restarting member {i}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        each.push(t.elapsed());
        load.wait_for_ok(100, WAIT, &format!("after restarting member {}", i + 1))
            .await;
    }
    let restarted_at = Instant::now();
    let late = zk_registry(&direct_url(&zk, &[0, 1, 2]));
    register_within(&late, &instances[2], RESTORED).await;
    let p3 = instances[2].address().to_string();
    dir.wait_until(RESTORED, |s| s.index_of(&p3).is_some())
        .await
        .expect("p3, registered after the last restart, is seen");
    let visible = restarted_at.elapsed();
    poll_until(WAIT, "p3 receives calls", || async {
        providers[2].hits() > 0
    })
    .await;
    let reconnects = proxies.iter().map(TcpProxy::accepted).sum::<u64>() - accepted_before;
    let session_kept = marker_owner(&raw, &marker).await == session;
    let calls = load.stop().await;
    let views = views.stop();
    let (p1, p2) = (instances[0].address(), instances[1].address());
    let stale = stale_views(&views, &[(p1, true), (p2, true), (&p3, true)]);

    let f = Figures::new(
        "13",
        "ZooKeeper rolling restart of all three members",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(visible))
    .with(
        "restarts",
        each.iter().map(|d| ms(*d)).collect::<Vec<_>>().join("+"),
    )
    .with("reconnects", reconnects)
    .with("session-kept", session_kept)
    .with("views", views.len())
    .with("stale-views", stale)
    .with("took", ms(began.elapsed()))
    .note(
        "recovery = last member back to a provider registered after it visible in the \
         consumer's snapshot; 3-member private ensemble, each member SIGKILLed and started \
         again in turn (followers first, the leader last), the next one once the ensemble has \
         a leader again; restarts = kill to quorum again per member; the consumer's session \
         (10 s) starts on the first member restarted",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails across the rolling restart: {:?}",
        calls.failures_by_kind()
    );
    assert!(
        session_kept,
        "the consumer's session moved from member to member, not expired"
    );
    assert_eq!(
        stale, 0,
        "p1 and p2 stay listed throughout, p3 once seen: {views:?}"
    );
    assert_eq!(addresses(&dir).len(), 3, "p1, p2 and p3 listed at the end");
    drop((late, producer, consumer));
}

// -----------------------------------------------------------------------------------------
// 14. The consumer's registry link flapping every second for 30 s
// -----------------------------------------------------------------------------------------

/// Scenario 14's flaps: the link down for [`FLAP`], up for [`FLAP`], this many times (30 s).
const FLAPS: usize = 15;
/// Half a flap.
const FLAP: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_14_zookeeper_link_flapping_every_second_for_30_s() {
    let _serial = serial().await;
    let began = Instant::now();
    let zk = start_zk().await;
    let proxies = client_proxies(&zk).await;
    let proxy = &proxies[0];
    let key = ServiceKey::new(interface("ZkFlap"));
    let (providers, instances) = three_providers(&key).await;
    let producer = zk_registry(&direct_url(&zk, &[0]));
    for i in &instances[..2] {
        register_within(&producer, i, WAIT).await;
    }
    let consumer = zk_registry(&proxied_url(&proxies));
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()),
        2,
        200,
        "before the flapping",
    )
    .await;
    let views = Views::record(dir.clone());
    let marker = session_marker(&consumer, &key, providers[0].addr().port()).await;
    let raw = raw_client(&zk.connect_string(), WAIT).await;
    let session = node_owner(&raw, &marker)
        .await
        .expect("the consumer's marker node exists");
    let accepted_before = proxy.accepted();

    // Changes made while the link is down: p3 joins in the 5th flap, p1 leaves (still
    // serving) in the 10th.
    let (p1, p3) = (instances[0].address(), instances[2].address());
    let mut changed = Vec::new();
    let flapping_from = Instant::now();
    for flap in 1..=FLAPS {
        let down = Instant::now();
        proxy.cut();
        if flap == 5 {
            register_within(&producer, &instances[2], WAIT).await;
            changed.push((p3, true, Instant::now()));
        }
        if flap == 10 {
            unregister_within(&producer, &instances[0], WAIT).await;
            changed.push((p1, false, Instant::now()));
        }
        tokio::time::sleep(FLAP.saturating_sub(down.elapsed())).await;
        let up = Instant::now();
        proxy.restore();
        tokio::time::sleep(FLAP.saturating_sub(up.elapsed())).await;
    }
    let flapping = flapping_from.elapsed();
    let want = sorted([instances[1].address(), instances[2].address()]);
    dir.wait_until(RESTORED, |s| {
        s.index_of(p3).is_some() && s.index_of(p1).is_none()
    })
    .await
    .expect("the final view: p2 and p3");
    let settled = Instant::now();
    let reconnects = proxy.accepted() - accepted_before;
    load.wait_for_ok(200, WAIT, "after the flapping").await;
    let session_kept = marker_owner(&raw, &marker).await == session;
    let calls = load.stop().await;
    let views = views.stop();
    let stale = stale_views(&views, &[(p3, true), (p1, false)]);
    // Each change's lag: made (link down) to the first list reflecting it.
    let lags: Vec<Duration> = changed
        .iter()
        .map(|&(a, present, at)| {
            first_reflecting(&views, a, present)
                .map_or(Duration::MAX, |t| t.saturating_duration_since(at))
        })
        .collect();

    let f = Figures::new(
        "14",
        "ZooKeeper link flapping every second",
        &calls,
        counter.attempts(),
    )
    .recovery(lags.iter().max().copied())
    .with("flapping", ms(flapping))
    .with("reconnects", reconnects)
    .with(
        "lags",
        lags.iter().map(|d| ms(*d)).collect::<Vec<_>>().join("+"),
    )
    .with("session-kept", session_kept)
    .with("views", views.len())
    .with("stale-views", stale)
    .with("took", ms(began.elapsed()))
    .note(format!(
        "recovery = the longest time from a change (made while the link is down) to the first \
         list reflecting it; private ZooKeeper, the consumer's link through a proxy cut for 1 s \
         and restored for 1 s, {FLAPS} times; p3 registered in the 5th cut, p1 unregistered \
         (still serving) in the 10th; reconnects = connections the consumer opened; session 10 s"
    ));
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails while the link flaps: {:?}",
        calls.failures_by_kind()
    );
    assert_eq!(addresses(&dir), want, "the final view: p2 and p3");
    assert!(
        reconnects >= FLAPS as u64,
        "the consumer reconnected after every cut ({reconnects} connections)"
    );
    assert!(session_kept, "the consumer's session survived the 1 s cuts");
    assert_eq!(
        stale, 0,
        "no published list goes back to an older view: {views:?}"
    );
    assert!(
        counter.last_attempt_to(p1).is_none_or(|t| t < settled),
        "no attempt goes to the unregistered p1 once the final view is in"
    );
    drop((producer, consumer));
}

// -----------------------------------------------------------------------------------------
// 15. 100 providers' sessions expiring at once
// -----------------------------------------------------------------------------------------

/// Providers whose sessions expire together in scenario 15.
const GROUP: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_15_zookeeper_100_provider_sessions_expiring_at_once() {
    let _serial = serial().await;
    let began = Instant::now();
    let zk = tokio::task::block_in_place(|| ZkServer::standalone_with("maxClientCnxns=0\n"));
    let proxies = client_proxies(&zk).await;
    let key = ServiceKey::new(interface("ZkGroupExpiry"));
    let (_staying, instances) = three_providers(&key).await;
    let producer = zk_registry(&direct_url(&zk, &[0]));
    for i in &instances {
        register_within(&producer, i, WAIT).await;
    }
    // 100 provider processes' registrations, each its own 2 s session, all through one proxy;
    // they keep serving when their sessions expire (cut off from ZooKeeper only).
    let mut group = Vec::new();
    let mut registrars = Vec::new();
    for _ in 0..GROUP {
        let p = serve_ok("g").await;
        let registrar = zk_registry(&format!(
            "zookeeper://{}?session=2000&timeout=1000",
            proxies[0].addr()
        ));
        register_within(&registrar, &http_instance(&key, p.addr().port()), WAIT).await;
        group.push(p);
        registrars.push(registrar);
    }
    let consumer = zk_registry(&direct_url(&zk, &[0]));
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()),
        3 + GROUP,
        300,
        "before the expiry",
    )
    .await;
    let raw = raw_client(&zk.connect_string(), WAIT).await;

    let cut_at = Instant::now();
    proxies[0].cut();
    let staying: Vec<String> = {
        let mut a: Vec<String> = instances.iter().map(|i| i.address().to_string()).collect();
        a.sort();
        a
    };
    // The server expires the sessions on its tick, from their last heartbeat: 2 s + a tick.
    let bound = Duration::from_secs(2) + Duration::from_secs(3);
    dir.wait_until(bound + WAIT, |s| s.instances().len() == 3)
        .await
        .expect("the 100 expired providers leave the list");
    let dropped = cut_at.elapsed();
    assert_eq!(
        addresses(&dir),
        staying,
        "the three staying providers remain"
    );
    let group_dir = format!("/dubbo/{}/providers", key.interface);
    let left = raw.list_children(&group_dir).await.map(|c| c.len());
    load.wait_for_ok(300, WAIT, "after the expiry").await;
    let calls = load.stop().await;
    let to_staying: u64 = staying.iter().map(|a| counter.attempts_to(a)).sum();

    let f = Figures::new(
        "15",
        "100 ZooKeeper provider sessions expiring at once",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(dropped))
    .with("bound", ms(bound))
    .with(
        "nodes-left",
        left.map_or_else(|e| e.to_string(), |n| n.to_string()),
    )
    .with("attempts-to-staying", to_staying)
    .with("took", ms(began.elapsed()))
    .note(
        "recovery = cut to the consumer's list without the 100 (their 2 s sessions expired on \
         the server); private ZooKeeper, 103 providers, 100 of them registered each by its own \
         registry (its own session) through one proxy, cut (they keep serving); bound = \
         session + 3 s",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails while 100 providers leave: {:?}",
        calls.failures_by_kind()
    );
    assert!(
        dropped <= bound,
        "the expired providers leave within the session + 3 s ({})",
        ms(dropped)
    );
    drop((registrars, producer, consumer, group));
}

// ---------------------------------------------------------------------------------------------
// 16-17: a real rnacos cluster (raft mode) failing (issue 30)
// ---------------------------------------------------------------------------------------------

use switchman_integration_tests::nacos_api::OpenApiInstance;
use switchman_integration_tests::nacos_server::{NacosCluster, raft_state};

/// A pair of proxies the test controls in front of each rnacos node: HTTP on a port `p`, gRPC
/// on `p + 1000` (nacos-sdk derives a server's gRPC port as its HTTP port + 1000), so the
/// consumer's registry URL lists the proxies and the test sees which node its connection is on.
/// The bound on a write accepted after a node died in scenarios 16 and 17. rnacos routes an
/// instance write to the node owning the service (a hash over the valid nodes); the others
/// count a node out 15 s after its last ping (pings and checks every 3 s), so a write for a
/// service the dead node owned fails for up to ~18 s: 15 s + two 3 s rounds + 6 s of slack.
const OWNER_OUT: Duration = Duration::from_secs(27);

struct NodeLinks {
    http: Vec<TcpProxy>,
    grpc: Vec<TcpProxy>,
}

impl NodeLinks {
    async fn start(cluster: &NacosCluster) -> NodeLinks {
        let (mut http, mut grpc) = (Vec::new(), Vec::new());
        for node in cluster.nodes() {
            let p = switchman_integration_tests::ports::allocate_with(&[1000]);
            let at = |port: u16| format!("127.0.0.1:{port}").parse().expect("node address");
            http.push(
                TcpProxy::start_at(p, at(node.http_port()))
                    .await
                    .expect("the HTTP proxy binds"),
            );
            grpc.push(
                TcpProxy::start_at(p + 1000, at(node.grpc_port()))
                    .await
                    .expect("the gRPC proxy binds"),
            );
        }
        NodeLinks { http, grpc }
    }

    /// `nacos://` over the three proxies (plain naming, no rules), nacos-sdk's cache in
    /// `scratch`/`name`.
    fn registry(&self, scratch: &ScratchDir, name: &str) -> NacosRegistry {
        let servers: Vec<String> = self.http.iter().map(|p| p.addr().to_string()).collect();
        let url = format!(
            "nacos://{}?naming=plain&rules=false&cache_dir={}",
            servers.join(","),
            scratch.path().join(name).display()
        );
        NacosRegistry::from_url(&Url::parse_registry(&url).expect("Nacos URL parses"))
            .expect("valid Nacos URL")
    }

    /// Node `i`'s proxies refuse new connections (or forward again).
    fn refuse(&self, i: usize, refuse: bool) {
        for p in [&self.http[i], &self.grpc[i]] {
            if refuse {
                p.refuse();
            } else {
                p.restore();
            }
        }
    }

    /// Connections the consumer opened to any node's gRPC port so far.
    fn accepted(&self) -> u64 {
        self.grpc.iter().map(TcpProxy::accepted).sum()
    }
}

/// `instance` as a persistent open-API instance of the plain Nacos service `key.interface`.
fn open_instance(key: &ServiceKey, instance: &Instance) -> OpenApiInstance {
    let mut o = OpenApiInstance::new(&key.interface, "127.0.0.1", instance.port());
    o.metadata_json = r#"{"protocol":"http","warmup":"0"}"#.into();
    o
}

/// Registers `o` through the open API of `nodes` (`127.0.0.1:<http port>`), each in turn,
/// retrying for at most `within` (a write is routed to the node owning the service, which may
/// be a dead one until the others count it out); returns how many requests failed first.
async fn open_register_within(nodes: Vec<String>, o: OpenApiInstance, within: Duration) -> u32 {
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + within;
        let mut failed = 0;
        for node in nodes.iter().cycle() {
            match o.register(node) {
                Ok(_) => {
                    if failed > 0 {
                        eprintln!(
                            "open-API register {}:{}: {failed} failed first",
                            o.ip, o.port
                        );
                    }
                    return failed;
                }
                Err(e) if Instant::now() < deadline => {
                    if failed == 0 {
                        eprintln!(
                            "open-API register {}:{} via {node} not yet: {e}",
                            o.ip, o.port
                        );
                    }
                    failed += 1;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(e) => panic!("open-API register failed for {within:?}: {e}"),
            }
        }
        unreachable!("the node list is not empty")
    })
    .await
    .expect("the registering thread")
}

/// The raft id every node of `http_ports` names as its leader, when it is one of them and says
/// so itself.
fn agreed_leader(http_ports: &[u16]) -> Option<u64> {
    let states: Vec<_> = http_ports.iter().map(|&p| raft_state(p)).collect();
    let leader = states.first()?.as_ref()?.leader?;
    let all_agree = states
        .iter()
        .all(|s| s.as_ref().is_some_and(|s| s.leader == Some(leader)));
    let leads = states
        .iter()
        .flatten()
        .any(|s| s.id == leader && s.state == "Leader");
    (all_agree && leads).then_some(leader)
}

/// Waits (off the runtime's workers, at most `within`) until the nodes of `http_ports` agree
/// on a leader among them; the leader's raft id and when it was first seen.
async fn survivors_lead(http_ports: Vec<u16>, within: Duration) -> (u64, Instant) {
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        loop {
            if let Some(l) = agreed_leader(&http_ports) {
                return (l, Instant::now());
            }
            assert!(
                start.elapsed() < within,
                "the surviving rnacos nodes agree on no leader within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .expect("the polling thread")
}

/// Which node scenarios 16 and 17 kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NacosVictim {
    /// The node the consumer's gRPC connection is on (a follower).
    ConsumersServer,
    /// The raft leader (the consumer is on a follower).
    Leader,
}

/// Scenarios 16 and 17: a 3-node rnacos cluster, the consumer listing the three nodes (through
/// proxies) and steered off the leader, p1 and p2 registered (persistent, open API); `victim`
/// is `kill -9`ed under load, then p3 is registered through a surviving node.
async fn nacos_cluster_node_killed(id: &str, title: &str, victim: NacosVictim) {
    let _serial = serial().await;
    let began = Instant::now();
    let mut cluster = tokio::task::block_in_place(NacosCluster::start);
    let formed = began.elapsed();
    let leader =
        tokio::task::block_in_place(|| cluster.leader()).expect("the cluster has a leader");
    let links = NodeLinks::start(&cluster).await;
    let scratch = ScratchDir::new("switchman-chaos-nacos-cluster");
    let key = ServiceKey::new(interface("NacosCluster"));
    let (providers, instances) = three_providers(&key).await;
    let open: Vec<OpenApiInstance> = instances.iter().map(|i| open_instance(&key, i)).collect();
    for o in &open[..2] {
        open_register_within(cluster.addrs(&[0, 1, 2]), o.clone(), WAIT).await;
    }
    // The consumer on a follower: the leader's proxies refuse until its connection is up.
    links.refuse(leader, true);
    let consumer = links.registry(&scratch, "consumer");
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()),
        2,
        200,
        "before the kill",
    )
    .await;
    links.refuse(leader, false);
    let on_nodes = forwarding(&links.grpc);
    assert!(
        on_nodes.len() == 1 && on_nodes[0] != leader,
        "the consumer's connection is on one follower: {on_nodes:?} (leader {leader})"
    );
    let on = on_nodes[0];
    let killed = match victim {
        NacosVictim::ConsumersServer => on,
        NacosVictim::Leader => leader,
    };
    let survivors: Vec<usize> = (0..3).filter(|&i| i != killed).collect();
    let survivor_ports: Vec<u16> = survivors
        .iter()
        .map(|&i| cluster.node(i).http_port())
        .collect();
    let views = Views::record(dir.clone());
    let accepted_before = links.accepted();

    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster.kill(killed));
    // A change made after the kill, through the surviving nodes' open API; meanwhile the
    // consumer's connection moves (when its node died) and the survivors agree on a leader.
    let (moved, failed_writes, (led, led_at)) = tokio::join!(
        async {
            if killed == on {
                Some(moved_off(&links.grpc, on, RESTORED).await)
            } else {
                None
            }
        },
        async {
            let failed =
                open_register_within(cluster.addrs(&survivors), open[2].clone(), OWNER_OUT).await;
            (failed, killed_at.elapsed())
        },
        survivors_lead(survivor_ports, RESTORED),
    );
    let (failed_writes, registered) = failed_writes;
    let p3 = instances[2].address().to_string();
    dir.wait_until(RESTORED, |s| s.index_of(&p3).is_some())
        .await
        .expect("p3, registered after the kill, is seen");
    poll_until(WAIT, "p3 receives calls", || async {
        providers[2].hits() > 0
    })
    .await;
    load.wait_for_ok(300, WAIT, "after the kill").await;
    let moved_to = forwarding(&links.grpc);
    let reconnects = links.accepted() - accepted_before;
    let calls = load.stop().await;
    let views = views.stop();
    // When the first list with p3 was published (the waits above ran one after the other).
    let visible = first_reflecting(&views, &p3, true)
        .expect("a published list has p3")
        .saturating_duration_since(killed_at);
    let (p1, p2) = (instances[0].address(), instances[1].address());
    let stale = stale_views(&views, &[(p1, true), (p2, true), (&p3, true)]);
    let node_names = |nodes: &[usize]| {
        nodes
            .iter()
            .map(|m| format!("node{}", m + 1))
            .collect::<Vec<_>>()
            .join(",")
    };

    let mut f = Figures::new(id, title, &calls, counter.attempts())
        .recovery(Some(visible))
        .with("formed", ms(formed))
        .with("consumer-on", node_names(&[on]))
        .with("killed", node_names(&[killed]));
    if let Some(moved) = moved {
        f = f.with(
            "reconnected",
            ms(moved.saturating_duration_since(killed_at)),
        );
    }
    let f = f
        .with("moved-to", node_names(&moved_to))
        .with("reconnects", reconnects)
        .with(
            "leader-agreed",
            ms(led_at.saturating_duration_since(killed_at)),
        )
        .with("registered", ms(registered))
        .with("failed-writes", failed_writes)
        .with("views", views.len())
        .with("stale-views", stale)
        .with("took", ms(began.elapsed()))
        .note(match victim {
            NacosVictim::ConsumersServer => {
                "recovery = SIGKILL of the consumer's node to a provider registered after the \
                 kill (open API, through a surviving node) visible in the consumer's snapshot; \
                 private 3-node rnacos 0.8.8 cluster (raft), the consumer listing the three \
                 through per-node proxies, its connection on a follower; reconnected = kill to \
                 its connection held by a surviving node; registered = kill to the write \
                 accepted (failed-writes before: routed to the dead node owning the service); \
                 leader-agreed = kill to the survivors naming one leader"
            }
            NacosVictim::Leader => {
                "recovery = SIGKILL of the raft leader to a provider registered after the kill \
                 (open API, through a surviving node) visible in the consumer's snapshot; \
                 private 3-node rnacos 0.8.8 cluster (raft), the consumer listing the three \
                 through per-node proxies, its connection on a follower (kept); \
                 leader-agreed = kill to the survivors naming a new leader; registered = kill \
                 to the write accepted (failed-writes before: routed to the dead node owning \
                 the service)"
            }
        });
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails when rnacos node {} dies: {:?}",
        killed + 1,
        calls.failures_by_kind()
    );
    assert!(
        moved_to.len() == 1 && moved_to[0] != killed,
        "the consumer's connection is on one surviving node: {moved_to:?} (killed {killed})"
    );
    match victim {
        NacosVictim::ConsumersServer => assert_eq!(
            led,
            leader as u64 + 1,
            "the leader (node {}) still leads after a follower died",
            leader + 1
        ),
        NacosVictim::Leader => {
            assert_ne!(led, leader as u64 + 1, "a surviving node leads");
            assert_eq!(
                moved_to,
                vec![on],
                "the consumer's connection stays on its surviving node"
            );
        }
    }
    assert_eq!(
        stale, 0,
        "p1 and p2 stay listed throughout, p3 once seen: {views:?}"
    );
    assert_eq!(addresses(&dir).len(), 3, "p1, p2 and p3 listed at the end");
    drop((consumer, links, cluster));
}

// -----------------------------------------------------------------------------------------
// 16. The consumer's rnacos node killed under load
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_16_nacos_cluster_consumers_server_killed() {
    nacos_cluster_node_killed(
        "16",
        "rnacos cluster: the consumer's node killed",
        NacosVictim::ConsumersServer,
    )
    .await;
}

// -----------------------------------------------------------------------------------------
// 17. The rnacos raft leader killed under load
// -----------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_17_nacos_cluster_leader_killed() {
    nacos_cluster_node_killed(
        "17",
        "rnacos cluster: the raft leader killed",
        NacosVictim::Leader,
    )
    .await;
}

// -----------------------------------------------------------------------------------------
// 18. Rolling restart of the three rnacos nodes under load
// -----------------------------------------------------------------------------------------

/// The ports of the instances node `http` (`127.0.0.1:<http port>`) lists for the plain
/// service `service`, sorted; `None` when it does not answer.
fn node_lists(http: &str, service: &str) -> Option<Vec<u16>> {
    let body = switchman_integration_tests::nacos_api::request(
        http,
        "GET",
        "/nacos/v1/ns/instance/list",
        &[("serviceName", service.to_string())],
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let mut ports: Vec<u16> = v["hosts"]
        .as_array()?
        .iter()
        .filter_map(|h| h["port"].as_u64())
        .filter_map(|p| u16::try_from(p).ok())
        .collect();
    ports.sort_unstable();
    Some(ports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_18_nacos_cluster_rolling_restart_of_all_three_nodes() {
    let _serial = serial().await;
    let began = Instant::now();
    let mut cluster = tokio::task::block_in_place(NacosCluster::start);
    let leader =
        tokio::task::block_in_place(|| cluster.leader()).expect("the cluster has a leader");
    let links = NodeLinks::start(&cluster).await;
    let scratch = ScratchDir::new("switchman-chaos-nacos-rolling");
    let key = ServiceKey::new(interface("NacosRolling"));
    let (providers, instances) = three_providers(&key).await;
    let open: Vec<OpenApiInstance> = instances.iter().map(|i| open_instance(&key, i)).collect();
    for o in &open[..2] {
        open_register_within(cluster.addrs(&[0, 1, 2]), o.clone(), WAIT).await;
    }
    links.refuse(leader, true);
    let consumer = links.registry(&scratch, "consumer");
    let (dir, counter, load) = under_load(
        &consumer,
        directory_config(key.clone()),
        2,
        200,
        "before the restarts",
    )
    .await;
    links.refuse(leader, false);
    let on_nodes = forwarding(&links.grpc);
    assert!(
        on_nodes.len() == 1 && on_nodes[0] != leader,
        "the consumer's connection is on one follower: {on_nodes:?} (leader {leader})"
    );
    // Followers first (the consumer's first: it moves at least once), the leader last.
    let other = (0..3)
        .find(|&i| i != leader && i != on_nodes[0])
        .expect("two followers");
    let order = [on_nodes[0], other, leader];
    let mut want: Vec<u16> = instances[..2].iter().map(Instance::port).collect();
    want.sort_unstable();
    let views = Views::record(dir.clone());
    let accepted_before = links.accepted();

    let (mut each, mut synced, mut moves) = (Vec::new(), Vec::new(), Vec::new());
    for &i in &order {
        let t = Instant::now();
        let was_on = forwarding(&links.grpc) == [i];
        tokio::task::block_in_place(|| cluster.kill(i));
        // A consumer on the stopped node moves to another before it comes back (a restart
        // faster than nacos-sdk's reconnect would otherwise go unnoticed).
        if was_on {
            moves.push(
                moved_off(&links.grpc, i, RESTORED)
                    .await
                    .saturating_duration_since(t),
            );
        }
        tokio::task::block_in_place(|| {
            cluster.restart(i);
            // Back in the cluster, all three agreeing on a leader, before the next one goes.
            let deadline = Instant::now() + RESTORED;
            while cluster.leader().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "no agreed leader {RESTORED:?} after restarting node {}",
                    i + 1
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        each.push(t.elapsed());
        // The restarted node serves at once, but its naming view comes back by the cluster
        // sync: the operator's readiness check before the next restart is that it lists p1
        // and p2 again.
        let addr = cluster.node(i).addr();
        let back = poll_until(
            RESTORED,
            &format!("restarted node {} lists p1 and p2", i + 1),
            || async {
                tokio::task::block_in_place(|| node_lists(&addr, &key.interface))
                    .is_some_and(|l| want.iter().all(|p| l.contains(p)))
            },
        )
        .await;
        synced.push(back);
        load.wait_for_ok(100, WAIT, &format!("after restarting node {}", i + 1))
            .await;
    }
    let restarted_at = Instant::now();
    open_register_within(cluster.addrs(&[0, 1, 2]), open[2].clone(), OWNER_OUT).await;
    let registered = restarted_at.elapsed();
    let p3 = instances[2].address().to_string();
    dir.wait_until(RESTORED, |s| s.index_of(&p3).is_some())
        .await
        .expect("p3, registered after the last restart, is seen");
    poll_until(WAIT, "p3 receives calls", || async {
        providers[2].hits() > 0
    })
    .await;
    let reconnects = links.accepted() - accepted_before;
    let moved_to = forwarding(&links.grpc);
    let calls = load.stop().await;
    let views = views.stop();
    let visible = first_reflecting(&views, &p3, true)
        .expect("a published list has p3")
        .saturating_duration_since(restarted_at);
    let (p1, p2) = (instances[0].address(), instances[1].address());
    let stale = stale_views(&views, &[(p1, true), (p2, true), (&p3, true)]);
    let joined = |d: &[Duration]| d.iter().map(|d| ms(*d)).collect::<Vec<_>>().join("+");

    let f = Figures::new(
        "18",
        "rnacos cluster: rolling restart of all three nodes",
        &calls,
        counter.attempts(),
    )
    .recovery(Some(visible))
    .with("restarts", joined(&each))
    .with("synced", joined(&synced))
    .with("registered", ms(registered))
    .with("moves", joined(&moves))
    .with("reconnects", reconnects)
    .with(
        "order",
        order
            .iter()
            .map(|m| format!("node{}", m + 1))
            .collect::<Vec<_>>()
            .join(","),
    )
    .with("views", views.len())
    .with("stale-views", stale)
    .with("took", ms(began.elapsed()))
    .note(
        "recovery = last node back to a provider registered after it (open API) visible in \
         the consumer's snapshot; private 3-node rnacos 0.8.8 cluster (raft), each node \
         SIGKILLed and started again with its data in turn (the consumer's follower first, \
         the leader last), once the consumer's connection moved off it (moves = kill to \
         that, per move); restarts = kill to all three agreeing on a leader again; synced = \
         then to the restarted node listing p1 and p2 itself, the next restart after that",
    );
    emit(&f);
    assert_eq!(
        calls.failed(),
        0,
        "no call fails across the rolling restart: {:?}",
        calls.failures_by_kind()
    );
    assert!(
        moved_to.len() == 1 && !moves.is_empty(),
        "the consumer moved at least once ({} times) and holds one connection: {moved_to:?}",
        moves.len()
    );
    assert_eq!(
        stale, 0,
        "p1 and p2 stay listed throughout, p3 once seen: {views:?}"
    );
    assert_eq!(addresses(&dir).len(), 3, "p1, p2 and p3 listed at the end");
    drop((consumer, links, cluster));
}
