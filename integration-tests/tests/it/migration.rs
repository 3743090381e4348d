//! Dubbo 3's consumer migration step against real registries (the shared ZooKeeper and rnacos)
//! and real Java Dubbo 3.3 providers. Two providers of the same service and group make the two
//! lists tell apart: `A` registers at the interface level only (`register-mode=interface`),
//! `B` only as an application instance (`register-mode=instance`, metadata local, found
//! through the registry URL's `provided-by`). The consumer's `{application}.migration` rule is
//! written to the config centre (ZooKeeper node
//! `/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/{app}.migration`, Nacos config
//! `{app}.migration` in group `DUBBO_SERVICEDISCOVERY_MIGRATION`) while a few callers keep
//! calling (failfast: any failed attempt is a failed call).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchman_cluster::metadata_service::MetadataServiceClient;
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker, Strategy};
use switchman_core::{Invocation, ServiceKey, Url};
use switchman_discovery::metadata::MetadataCache;
use switchman_discovery::migration::{Lists, MigrationStep, Source};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registry, RegistryDirectory, Snapshot};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::nacos_api::publish_config;
use switchman_integration_tests::nacos_server::scratch_dir;
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{nacos, unique, zookeeper};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);
/// How long after a rule is written the consumer must have moved.
const SWITCH_WITHIN: Duration = Duration::from_secs(10);
const GROUP: &str = "DUBBO_SERVICEDISCOVERY_MIGRATION";

fn logs() {
    // RUST_LOG=switchman_discovery=debug shows what the adapter did in a failing test.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_test_writer()
        .try_init();
}

/// The two providers of one test: `A` at the interface level, `B` at the application level.
struct Pair {
    a: JavaProvider,
    b: JavaProvider,
    b_app: String,
    group: String,
}

fn start_pair(base: ProviderOptions, tag: &str) -> Pair {
    let group = unique(&format!("g-mig-{tag}"));
    let b_app = unique(&format!("mig-b-{tag}"));
    let a_opts = base
        .clone()
        .group(&group)
        .application(&unique(&format!("mig-a-{tag}")))
        .register_mode("interface")
        .name("A")
        .param("warmup", "0");
    let b_opts = base
        .group(&group)
        .application(&b_app)
        .register_mode("instance")
        .metadata_type("local")
        .name("B")
        .param("warmup", "0");
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&a_opts));
        let b = s.spawn(|| JavaProvider::start(&b_opts));
        (a.join().unwrap(), b.join().unwrap())
    });
    Pair { a, b, b_app, group }
}

struct Consumer {
    dir: Arc<RegistryDirectory>,
    cache: Arc<MetadataCache>,
    calls: ClusterInvoker,
}

async fn consumer(reg: &dyn Registry, cache: Arc<MetadataCache>, group: &str) -> Consumer {
    let dir = Arc::new(
        RegistryDirectory::subscribe(
            reg,
            DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")),
        )
        .await
        .unwrap(),
    );
    let calls = ClusterInvoker::new(
        dir.clone(),
        Arc::new(ProtocolInvoker::new()),
        ClusterConfig::default()
            .strategy(Strategy::Failfast)
            .timeout(Duration::from_secs(5)),
    );
    Consumer { dir, cache, calls }
}

fn new_cache() -> Arc<MetadataCache> {
    Arc::new(MetadataCache::new(Arc::new(MetadataServiceClient::new())))
}

fn ports(s: &Snapshot) -> Vec<u16> {
    let mut p: Vec<u16> = s.endpoints().iter().map(|e| e.instance.port()).collect();
    p.sort();
    p
}

async fn wait_for(c: &Consumer, what: &str, f: impl Fn(&Snapshot) -> bool) -> Instant {
    c.dir
        .wait_until(WAIT, f)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}; have ports {:?}", ports(&c.dir.load())));
    Instant::now()
}

/// Waits until the subscription decided with B at the application level (it is read in every
/// step): B's `MetadataInfo` fetched and the adapter's decision counting it
/// (`RegistryDirectory::lists`, sent after the list it publishes). Returns that decision.
async fn wait_for_app_level(c: &Consumer, app: &str) -> Lists {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(l) = c.dir.lists().filter(|l| l.app_level > 0) {
            assert!(
                !c.cache.fetches_of(app).is_empty(),
                "{l:?} without B's metadata"
            );
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "no decision with B's application-level instance: {:?}",
            c.dir.lists()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the consumer falls back to A (the interface level) with `proportion`
/// (`RegistryDirectory::fallback`, APPLICATION_FIRST with B in use).
async fn wait_for_fallback(c: &Consumer, pair: &Pair, proportion: u8) {
    let deadline = Instant::now() + WAIT;
    loop {
        let f = c.dir.fallback();
        if let Some(f) = &f
            && f.proportion == proportion
            && ports(&f.snapshot) == vec![pair.a.port()]
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no fallback to A at {proportion}%: {:?}",
            f.map(|f| (f.proportion, ports(&f.snapshot)))
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many of `n` calls A answered (each answered by A or B).
async fn on_a(c: &Consumer, n: usize) -> usize {
    let mut a = 0;
    for _ in 0..n {
        match c.calls.invoke(&Invocation::new("whoami")).await.unwrap() {
            v if v == "A" => a += 1,
            v => assert_eq!(v, "B"),
        }
    }
    a
}

/// How many of `n` `whoami` calls a Java Dubbo 3.3 consumer (generic, application `app`, the
/// applications given as `provided-by`, so no mapping is read) gets answered by A.
async fn java_on_a(registry: &str, app: &str, pair: &Pair, n: usize) -> usize {
    let args: Vec<String> = [
        "--registry",
        registry,
        "--interface",
        DEMO_SERVICE,
        "--group",
        &pair.group,
        "--application",
        app,
        "--provided-by",
        &pair.b_app,
        "--method",
        "whoami",
        "--count",
        &n.to_string(),
        "--timeout-ms",
        "5000",
    ]
    .map(String::from)
    .to_vec();
    let lines = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, lines) = java_peer::run_consumer(&args);
        assert!(status.success(), "{lines:?}");
        lines
    })
    .await
    .unwrap();
    assert_eq!(lines.len(), n, "{lines:?}");
    lines
        .iter()
        .filter(|l| {
            let who = l["result"].as_str().unwrap_or_else(|| panic!("{l}"));
            assert!(who == "A" || who == "B", "{l}");
            who == "A"
        })
        .count()
}

/// One call of the load: when it started and who answered (or the error).
struct Call {
    started: Instant,
    answer: Result<String, String>,
}

/// A few callers calling `whoami` until stopped (bounded: at most 20,000 calls in all).
struct Load {
    stop: Arc<AtomicBool>,
    calls: Arc<Mutex<Vec<Call>>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

const CALLERS: usize = 4;
const MAX_CALLS: usize = 20_000;

fn start_load(cluster: &ClusterInvoker) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let calls: Arc<Mutex<Vec<Call>>> = Default::default();
    let count = Arc::new(AtomicUsize::new(0));
    let workers = (0..CALLERS)
        .map(|_| {
            let (cluster, stop, calls, count) =
                (cluster.clone(), stop.clone(), calls.clone(), count.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed)
                    && count.fetch_add(1, Ordering::Relaxed) < MAX_CALLS
                {
                    let started = Instant::now();
                    let answer = match cluster.invoke(&Invocation::new("whoami")).await {
                        Ok(v) => v
                            .as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("not a string: {v}")),
                        Err(e) => Err(e.to_string()),
                    };
                    calls.lock().unwrap().push(Call { started, answer });
                    // A little pause: a few hundred calls a second on 2 busy cores.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    Load {
        stop,
        calls,
        workers,
    }
}

impl Load {
    /// Waits (at most [`WAIT`]) until `n` calls started at or after `since` have finished.
    async fn wait_calls(&self, n: usize, since: Instant) {
        let deadline = Instant::now() + WAIT;
        loop {
            let done = self
                .calls
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.started >= since)
                .count();
            if done >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "only {done} of {n} calls in {WAIT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn finish(self) -> Vec<Call> {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers {
            w.await.unwrap();
        }
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

/// Who answered the calls started in `[from, to)`.
fn answers(
    calls: &[Call],
    from: Instant,
    to: Instant,
) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for c in calls.iter().filter(|c| c.started >= from && c.started < to) {
        let who = match &c.answer {
            Ok(w) => w.clone(),
            Err(e) => format!("error: {e}"),
        };
        *m.entry(who).or_insert(0) += 1;
    }
    m
}

/// Where a test writes its consumer's migration rule.
enum Rules {
    Zk { client: zk::Client, path: String },
    Nacos { data_id: String },
}

impl Rules {
    fn zookeeper(client: zk::Client, app: &str) -> Rules {
        Rules::Zk {
            client,
            path: format!("/dubbo/config/{GROUP}/{app}.migration"),
        }
    }

    fn nacos(app: &str) -> Rules {
        Rules::Nacos {
            data_id: format!("{app}.migration"),
        }
    }

    /// Creates or replaces the rule.
    async fn write(&self, text: &str) {
        match self {
            Rules::Zk { client, path } => {
                let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                let parent = path.rsplit_once('/').unwrap().0;
                let _ = client.mkdir(parent, &opts).await;
                match client.create(path, text.as_bytes(), &opts).await {
                    Ok(_) => {}
                    Err(zk::Error::NodeExists) => {
                        client.set_data(path, text.as_bytes(), None).await.unwrap();
                    }
                    Err(e) => panic!("create {path}: {e}"),
                }
            }
            Rules::Nacos { data_id } => {
                let (data_id, text) = (data_id.clone(), text.to_string());
                tokio::task::spawn_blocking(move || {
                    publish_config(&nacos(), &data_id, GROUP, &text)
                        .expect("publish the migration rule")
                })
                .await
                .unwrap();
            }
        }
    }

    async fn remove(&self) {
        if let Rules::Zk { client, path } = self {
            let _ = client.delete(path, None).await;
        }
    }
}

/// The scenario both registries share: the consumer starts in `FORCE_INTERFACE` (the rule is
/// there before it subscribes) and calls A only; the rule becomes `FORCE_APPLICATION` under
/// load: within [`SWITCH_WITHIN`] every new call goes to B, no call fails. A bad rule then
/// changes nothing (the last good step stays).
async fn force_interface_to_force_application(c: &Consumer, pair: &Pair, rules: &Rules) {
    wait_for(c, "A alone (FORCE_INTERFACE)", |s| {
        ports(s) == vec![pair.a.port()]
    })
    .await;
    wait_for_app_level(c, &pair.b_app).await;
    assert_eq!(ports(&c.dir.load()), vec![pair.a.port()], "still A alone");
    let load_started = Instant::now();
    let load = start_load(&c.calls);
    load.wait_calls(200, load_started).await;
    let written = Instant::now();
    rules
        .write("key: consumer\nstep: FORCE_APPLICATION\n")
        .await;
    let moved = wait_for(c, "B alone (FORCE_APPLICATION)", |s| {
        ports(s) == vec![pair.b.port()]
    })
    .await;
    load.wait_calls(200, moved).await;
    // A rule that is not one: logged, the last good step stays (Nacos's listener or its 2 s
    // poll has it within 3 s).
    rules.write("step: FORCE_NOPE\n").await;
    let bad = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    load.wait_calls(100, bad + Duration::from_secs(3)).await;
    let calls = load.finish().await;
    let far_past = written - Duration::from_secs(3600);
    let far_future = Instant::now() + Duration::from_secs(3600);
    let before = answers(&calls, far_past, written);
    let during = answers(&calls, written, moved);
    let after = answers(&calls, moved, far_future);
    eprintln!(
        "switched {:?} after the rule was written; calls before {before:?}, during {during:?}, after {after:?}",
        moved - written
    );
    assert!(moved - written < SWITCH_WITHIN, "{:?}", moved - written);
    let failed: Vec<&String> = calls
        .iter()
        .filter_map(|c| c.answer.as_ref().err())
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed: {:?}",
        failed.len(),
        calls.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(before.get("A").copied().unwrap_or(0) >= 200, "{before:?}");
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        ["A"],
        "before the switch only A"
    );
    assert!(during.keys().all(|k| k == "A" || k == "B"), "{during:?}");
    assert!(after.get("B").copied().unwrap_or(0) >= 300, "{after:?}");
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        ["B"],
        "after the switch only B, the bad rule ignored"
    );
    assert_eq!(ports(&c.dir.load()), vec![pair.b.port()]);
}

/// APPLICATION_FIRST (no rule): B (the application level covers the interface level, threshold
/// 0.0); a threshold of 2.0 (1 instance for 1 provider does not reach it): A; the threshold
/// removed: B, with A at hand per call: `proportion` sends `100 - proportion` percent of the
/// calls to A (Dubbo's `MigrationInvoker.invoke`); B stopped (an empty application level
/// never covers): A.
async fn application_first(
    c: &Consumer,
    pair: &mut Pair,
    rules: &Rules,
    app: &str,
    java_registry: &str,
) {
    wait_for(c, "B alone (APPLICATION_FIRST, no rule)", |s| {
        ports(s) == vec![pair.b.port()]
    })
    .await;
    assert_eq!(
        c.calls.invoke(&Invocation::new("whoami")).await.unwrap(),
        "B"
    );
    rules
        .write("step: APPLICATION_FIRST\nthreshold: 2.0\n")
        .await;
    wait_for(c, "A alone (threshold 2.0 not reached)", |s| {
        ports(s) == vec![pair.a.port()]
    })
    .await;
    assert_eq!(
        c.calls.invoke(&Invocation::new("whoami")).await.unwrap(),
        "A"
    );
    rules.write("step: APPLICATION_FIRST\n").await;
    wait_for(c, "B again (threshold 0.0)", |s| {
        ports(s) == vec![pair.b.port()]
    })
    .await;
    wait_for_fallback(c, pair, 100).await;
    assert_eq!(on_a(c, 50).await, 0, "proportion 100: every call on B");
    rules
        .write("step: APPLICATION_FIRST\nproportion: 0\n")
        .await;
    wait_for_fallback(c, pair, 0).await;
    assert_eq!(on_a(c, 50).await, 50, "proportion 0: every call on A");
    rules
        .write("step: APPLICATION_FIRST\nproportion: 40\n")
        .await;
    wait_for_fallback(c, pair, 40).await;
    // 60% of 400 calls on A: 240, within 8 standard deviations (about 10 calls).
    let a = on_a(c, 400).await;
    assert!(
        (160..=320).contains(&a),
        "{a} of 400 calls on A at proportion 40"
    );
    // A Java Dubbo 3.3 consumer of the same application under the same rule splits the same.
    let java_a = java_on_a(java_registry, app, pair, 400).await;
    assert!(
        (160..=320).contains(&java_a),
        "Java: {java_a} of 400 calls on A at proportion 40 (Switchman: {a})"
    );
    eprintln!("proportion 40: Switchman {a}, Java {java_a} of 400 calls on A");
    rules.write("step: APPLICATION_FIRST\n").await;
    wait_for_fallback(c, pair, 100).await;
    pair.b.terminate();
    wait_for(c, "A once the application level is empty", |s| {
        ports(s) == vec![pair.a.port()]
    })
    .await;
    assert_eq!(
        c.calls.invoke(&Invocation::new("whoami")).await.unwrap(),
        "A"
    );
}

fn zk_consumer_url(app: &str, b_app: &str) -> Url {
    Url::parse(&format!(
        "zookeeper://{}?application={app}&provided-by={b_app}",
        zookeeper()
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_rule_moves_the_consumer_from_force_interface_to_force_application_under_load() {
    if java_peer::skipped("zookeeper_migration_rule_switch") {
        return;
    }
    logs();
    let pair = start_pair(ProviderOptions::zookeeper(&zookeeper()), "zk");
    let app = unique("mig-consumer-zk");
    let rules = Rules::zookeeper(raw_client(&zookeeper(), WAIT).await, &app);
    rules.write("key: consumer\nstep: FORCE_INTERFACE\n").await;
    let cache = new_cache();
    let reg = ZookeeperRegistry::from_url(&zk_consumer_url(&app, &pair.b_app))
        .unwrap()
        .metadata_cache(cache.clone());
    let c = consumer(&reg, cache, &pair.group).await;
    force_interface_to_force_application(&c, &pair, &rules).await;
    rules.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_application_first_follows_the_threshold_and_an_empty_side() {
    if java_peer::skipped("zookeeper_migration_application_first") {
        return;
    }
    logs();
    let mut pair = start_pair(ProviderOptions::zookeeper(&zookeeper()), "zk-af");
    let app = unique("mig-consumer-zk-af");
    let rules = Rules::zookeeper(raw_client(&zookeeper(), WAIT).await, &app);
    let cache = new_cache();
    let reg = ZookeeperRegistry::from_url(&zk_consumer_url(&app, &pair.b_app))
        .unwrap()
        .metadata_cache(cache.clone());
    let c = consumer(&reg, cache, &pair.group).await;
    application_first(
        &c,
        &mut pair,
        &rules,
        &app,
        &format!("zookeeper://{}", zookeeper()),
    )
    .await;
    rules.remove().await;
}

/// A step from the registry URL alone: `migration.step=FORCE_INTERFACE` keeps A although the
/// application level (B) would cover it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_step_from_the_registry_url() {
    if java_peer::skipped("zookeeper_migration_url_step") {
        return;
    }
    logs();
    let pair = start_pair(ProviderOptions::zookeeper(&zookeeper()), "zk-url");
    let cache = new_cache();
    let url = Url::parse(&format!(
        "zookeeper://{}?provided-by={}&migration.step=FORCE_INTERFACE",
        zookeeper(),
        pair.b_app
    ))
    .unwrap();
    let reg = ZookeeperRegistry::from_url(&url)
        .unwrap()
        .metadata_cache(cache.clone());
    let c = consumer(&reg, cache, &pair.group).await;
    wait_for(&c, "A", |s| ports(s) == vec![pair.a.port()]).await;
    let decided = wait_for_app_level(&c, &pair.b_app).await;
    assert_eq!(
        decided.step,
        Some(MigrationStep::ForceInterface),
        "{decided:?}"
    );
    assert_eq!(decided.using, Source::Interface, "{decided:?}");
    assert_eq!(ports(&c.dir.load()), vec![pair.a.port()], "B never used");
}

struct NacosConsumer {
    c: Consumer,
    sdk_cache: std::path::PathBuf,
}

impl Drop for NacosConsumer {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.sdk_cache).ok();
    }
}

async fn nacos_consumer(app: &str, pair: &Pair) -> NacosConsumer {
    let sdk_cache = scratch_dir("switchman-nacos-migration");
    let url = format!(
        "nacos://{}?cache_dir={}&application={app}&provided-by={}",
        nacos(),
        sdk_cache.display(),
        pair.b_app
    );
    let cache = new_cache();
    let reg = NacosRegistry::from_url(&Url::parse(&url).unwrap())
        .unwrap()
        .metadata_cache(cache.clone());
    NacosConsumer {
        c: consumer(&reg, cache, &pair.group).await,
        sdk_cache,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_rule_moves_the_consumer_from_force_interface_to_force_application_under_load() {
    if java_peer::skipped("nacos_migration_rule_switch") {
        return;
    }
    logs();
    let pair = start_pair(ProviderOptions::nacos(&nacos()), "nacos");
    let app = unique("mig-consumer-nacos");
    let rules = Rules::nacos(&app);
    rules.write("key: consumer\nstep: FORCE_INTERFACE\n").await;
    let n = nacos_consumer(&app, &pair).await;
    force_interface_to_force_application(&n.c, &pair, &rules).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_application_first_follows_the_threshold_and_an_empty_side() {
    if java_peer::skipped("nacos_migration_application_first") {
        return;
    }
    logs();
    let mut pair = start_pair(ProviderOptions::nacos(&nacos()), "nacos-af");
    let app = unique("mig-consumer-nacos-af");
    let rules = Rules::nacos(&app);
    let n = nacos_consumer(&app, &pair).await;
    application_first(
        &n.c,
        &mut pair,
        &rules,
        &app,
        &format!("nacos://{}", nacos()),
    )
    .await;
}
