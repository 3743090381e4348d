//! Dubbo 3 application-level discovery on Nacos against the shared rnacos and real Java Dubbo
//! 3.3 providers (`register-mode=instance`, a `nacos://` registry): the application instances
//! are the Nacos service `{app}`, found through the interface → application mapping Dubbo
//! writes (config `{interface}`, group `mapping`), their `MetadataInfo` from the provider's
//! own `MetadataService` (`metadata-type=local`, over dubbo:// and tri://) or from the Nacos
//! metadata report (`remote`: config `{app}`, group `{revision}`).
//!
//! rnacos 0.8.8 ignores the CAS md5 of a config publish (`cas_md5` is parsed, never checked),
//! so Dubbo's read-append-CAS of the mapping loses an application when two applications
//! providing the same interface start at the same moment. The tests here run in parallel, so
//! their providers start one application at a time ([`start_mapped`]): each start waits until
//! the mapping names its application before the next begins. Each consumer has its own
//! metadata cache (as if it were its own process), whose fetch counts the tests read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use switchman_cluster::metadata_service::MetadataServiceClient;
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{Instance, Invocation, ServiceKey, Url};
use switchman_discovery::metadata::MetadataCache;
use switchman_discovery::migration::Source;
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Snapshot};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::nacos_api::{publish_config, request};
use switchman_integration_tests::nacos_server::scratch_dir;
use switchman_integration_tests::{nacos, unique};

const WAIT: Duration = Duration::from_secs(30);

/// A Java provider registering only its application instance in Nacos.
fn provider(app: &str, group: &str, protocol: &str, metadata: &str) -> ProviderOptions {
    ProviderOptions::nacos(&nacos())
        .protocol(protocol)
        .application(app)
        .group(group)
        .register_mode("instance")
        .metadata_type(metadata)
        // Just started, both would still warm up (Dubbo's 10 min ramp).
        .param("warmup", "0")
}

/// The applications the mapping config of `DemoService` names now.
fn mapped_apps() -> Vec<String> {
    request(
        &nacos(),
        "GET",
        "/nacos/v1/cs/configs",
        &[
            ("dataId", DEMO_SERVICE.to_string()),
            ("group", "mapping".to_string()),
        ],
    )
    .map(|c| c.split(',').map(|a| a.trim().to_string()).collect())
    .unwrap_or_default()
}

static STARTS: Mutex<()> = Mutex::new(());

/// Starts providers of one application (together), then waits until the mapping names that
/// application; one application at a time in this process (see the module docs).
fn start_mapped(opts: &[ProviderOptions]) -> Vec<JavaProvider> {
    let _one_at_a_time = STARTS.lock().unwrap_or_else(|e| e.into_inner());
    start_and_wait_for_mapping(opts)
}

/// Like [`start_mapped`], then takes the application out of the mapping again (what a lost
/// write leaves), keeping the others.
fn start_unmapped(opts: &[ProviderOptions]) -> Vec<JavaProvider> {
    let _one_at_a_time = STARTS.lock().unwrap_or_else(|e| e.into_inner());
    let started = start_and_wait_for_mapping(opts);
    let app = opts[0].application.clone().expect("an application");
    let rest: Vec<String> = mapped_apps().into_iter().filter(|a| *a != app).collect();
    let content = if rest.is_empty() {
        "switchman-placeholder-app".to_string()
    } else {
        rest.join(",")
    };
    publish_config(&nacos(), DEMO_SERVICE, "mapping", &content).unwrap();
    assert!(!mapped_apps().contains(&app));
    started
}

fn start_and_wait_for_mapping(opts: &[ProviderOptions]) -> Vec<JavaProvider> {
    let app = opts[0].application.clone().expect("an application");
    let started: Vec<JavaProvider> = std::thread::scope(|s| {
        let handles: Vec<_> = opts
            .iter()
            .map(|o| s.spawn(move || JavaProvider::start(o)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let deadline = Instant::now() + WAIT;
    while !mapped_apps().contains(&app) {
        assert!(
            Instant::now() < deadline,
            "the mapping never named {app}: {:?}",
            mapped_apps()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    started
}

struct Consumer {
    dir: Arc<RegistryDirectory>,
    cache: Arc<MetadataCache>,
    sdk_cache: std::path::PathBuf,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.sdk_cache).ok();
    }
}

/// A consumer of `DemoService` in `group` through Nacos, with a metadata cache of its own,
/// fetching through the client `Reference` installs.
async fn consumer(group: &str, extra: &str) -> Consumer {
    // RUST_LOG=switchman_discovery=debug shows what the adapter did in a failing test.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_test_writer()
        .try_init();
    let sdk_cache = scratch_dir("switchman-nacos-app-java");
    let url = format!(
        "nacos://{}?cache_dir={}{extra}",
        nacos(),
        sdk_cache.display()
    );
    let cache = Arc::new(MetadataCache::new(Arc::new(MetadataServiceClient::new())));
    let reg = NacosRegistry::from_url(&Url::parse(&url).unwrap())
        .unwrap()
        .metadata_cache(cache.clone());
    let dir = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")),
    )
    .await
    .unwrap();
    Consumer {
        dir: Arc::new(dir),
        cache,
        sdk_cache,
    }
}

async fn wait_for(
    dir: &RegistryDirectory,
    what: &str,
    f: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    dir.wait_until(WAIT, f)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}; have {:?}", addresses(&dir.load())))
}

fn routable(s: &Snapshot) -> Vec<Arc<Instance>> {
    s.endpoints().iter().map(|e| e.instance.clone()).collect()
}

fn addresses(s: &Snapshot) -> Vec<String> {
    routable(s)
        .iter()
        .map(|i| format!("{} {}", i.protocol(), i.address()))
        .collect()
}

fn cluster(dir: &Arc<RegistryDirectory>) -> ClusterInvoker {
    ClusterInvoker::new(
        dir.clone(),
        Arc::new(ProtocolInvoker::new()),
        ClusterConfig::default().timeout(Duration::from_secs(5)),
    )
}

/// `n` calls of `whoami`, 16 in flight: the count per answering instance.
async fn split(cluster: &ClusterInvoker, n: usize) -> BTreeMap<String, usize> {
    let counts: Arc<Mutex<BTreeMap<String, usize>>> = Default::default();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..16 {
        let (cluster, counts, next) = (cluster.clone(), counts.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n {
                let who = cluster.invoke(&Invocation::new("whoami")).await.unwrap();
                let who = who.as_str().unwrap().to_string();
                *counts.lock().unwrap().entry(who).or_default() += 1;
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let c = counts.lock().unwrap().clone();
    assert_eq!(c.values().sum::<usize>(), n);
    c
}

/// Two instances of one application, weights 100 and 300, found through the mapping alone:
/// called over `protocol`, split about 1:3; each revision's `MetadataInfo` fetched from the
/// provider exactly once for `local`, never for `remote`. Then the heavy one stops: Nacos
/// pushes its application instance gone, and every call goes to the other.
async fn weighted_fleet(protocol: &str, metadata: &str) {
    let tag = format!("{protocol}-{metadata}");
    let app = unique(&format!("nacos-app-level-{tag}"));
    let g = unique(&format!("g-nacos-{tag}"));
    let opts = |w: u32, name: &str| provider(&app, &g, protocol, metadata).weight(w).name(name);
    let mut started = start_mapped(&[opts(100, "w100"), opts(300, "w300")]);
    let c = consumer(&g, "").await;
    let snap = wait_for(&c.dir, "both application instances", |s| {
        s.endpoints().len() == 2
    })
    .await;
    for i in routable(&snap) {
        assert_eq!(i.protocol().as_str(), protocol, "{i:?}");
        assert_eq!(i.application(), Some(app.as_str()));
        assert!(
            i.param("dubbo.metadata.revision").is_some(),
            "from the application level: {i:?}"
        );
        assert!(
            i.param("timestamp").is_some(),
            "the instance's timestamp: {i:?}"
        );
    }
    let mut ports: Vec<u16> = routable(&snap).iter().map(|i| i.port()).collect();
    ports.sort();
    let mut want: Vec<u16> = started.iter().map(|p| p.port()).collect();
    want.sort();
    assert_eq!(ports, want);
    let counts = split(&cluster(&c.dir), 400).await;
    eprintln!("{tag}: 400 calls split {counts:?}");
    let heavy_share = counts.get("w300").copied().unwrap_or(0) as f64 / 400.0;
    // Expected 0.75; one standard deviation is 0.022.
    assert!(
        (0.65..=0.85).contains(&heavy_share),
        "weight 300 of 400 got {heavy_share}: {counts:?}"
    );
    let typed = Invocation::new("add")
        .with_args(vec![2.into(), 3.into()])
        .with_types(["int", "int"]);
    assert_eq!(cluster(&c.dir).invoke(&typed).await.unwrap(), json!(5));
    let fetches = c.cache.fetches_of(&app);
    match metadata {
        "local" => {
            assert_eq!(
                fetches.len(),
                2,
                "two revisions (the weights differ): {fetches:?}"
            );
            assert!(fetches.iter().all(|(_, n)| *n == 1), "{fetches:?}");
        }
        _ => assert!(
            fetches.is_empty(),
            "remote metadata is read, not fetched: {fetches:?}"
        ),
    }
    // The heavy one stops (Dubbo deregisters its instance): pushed.
    let heavy = started.pop().unwrap();
    let light_port = started[0].port();
    let mut heavy = heavy;
    heavy.terminate();
    let snap = wait_for(&c.dir, "the stopped instance gone", |s| {
        s.endpoints().len() == 1
    })
    .await;
    assert_eq!(routable(&snap)[0].port(), light_port);
    let counts = split(&cluster(&c.dir), 20).await;
    assert_eq!(counts.get("w100"), Some(&20), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_local_metadata_over_dubbo() {
    if java_peer::skipped("nacos_local_metadata_over_dubbo") {
        return;
    }
    weighted_fleet("dubbo", "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_local_metadata_over_tri() {
    if java_peer::skipped("nacos_local_metadata_over_tri") {
        return;
    }
    weighted_fleet("tri", "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_remote_metadata_over_dubbo() {
    if java_peer::skipped("nacos_remote_metadata_over_dubbo") {
        return;
    }
    weighted_fleet("dubbo", "remote").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_remote_metadata_over_tri() {
    if java_peer::skipped("nacos_remote_metadata_over_tri") {
        return;
    }
    weighted_fleet("tri", "remote").await;
}

/// A provider registered both ways (`register-mode=all`, Dubbo 3's default): one endpoint at
/// its address, the application-level one (`APPLICATION_FIRST`, no rule: the application level
/// covers the interface level), and it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_register_mode_all_is_one_endpoint_the_application_level_one() {
    if java_peer::skipped("nacos_register_mode_all") {
        return;
    }
    let app = unique("nacos-app-level-all");
    let g = unique("g-nacos-all");
    let opts = provider(&app, &g, "dubbo", "local")
        .register_mode("all")
        .name("both");
    let started = start_mapped(&[opts]);
    let c = consumer(&g, "").await;
    // Both levels are read: wait for the adapter's decision with both lists (sent after the
    // list it publishes), which keeps the application level (it covers the interface level).
    let deadline = Instant::now() + WAIT;
    let decided = loop {
        match c.dir.lists() {
            Some(l) if l.app_level > 0 && l.interface_level > 0 => break l,
            other => assert!(
                Instant::now() < deadline,
                "no decision with both levels: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(decided.using, Source::Application, "{decided:?}");
    assert!(!c.cache.fetches_of(&app).is_empty());
    let snap = c.dir.load();
    assert_eq!(
        addresses(&snap),
        vec![format!("dubbo {}", started[0].address())]
    );
    assert!(
        routable(&snap)[0]
            .param("dubbo.metadata.revision")
            .is_some(),
        "the application-level endpoint (APPLICATION_FIRST): {:?}",
        routable(&snap)[0]
    );
    assert_eq!(
        cluster(&c.dir)
            .invoke(&Invocation::new("whoami"))
            .await
            .unwrap(),
        json!("both")
    );
}

/// A provider the mapping does not name (its application was taken out again, as a write
/// lost to rnacos's missing CAS leaves it) is found through the registry's `provided-by`,
/// and only through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_provided_by_finds_an_application_the_mapping_lost() {
    if java_peer::skipped("nacos_provided_by") {
        return;
    }
    let app = unique("nacos-app-level-pb");
    let g = unique("g-nacos-pb");
    let started = start_unmapped(&[provider(&app, &g, "tri", "local").name("pb")]);
    let with = consumer(&g, &format!("&provided-by={app}")).await;
    let without = consumer(&g, "").await;
    let snap = wait_for(&with.dir, "the provider", |s| s.endpoints().len() == 1).await;
    assert_eq!(
        addresses(&snap),
        vec![format!("tri {}", started[0].address())]
    );
    assert_eq!(
        cluster(&with.dir)
            .invoke(&Invocation::new("whoami"))
            .await
            .unwrap(),
        json!("pb")
    );
    // Without provided-by the consumer's first decision (taken once its mapping was read and
    // nothing was left to fetch) has no application-level instance, and nothing was fetched.
    let deadline = Instant::now() + WAIT;
    let decided = loop {
        if let Some(l) = without.dir.lists() {
            break l;
        }
        assert!(Instant::now() < deadline, "no first decision");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(decided.app_level, 0, "{decided:?}");
    assert!(
        without.dir.load().endpoints().is_empty(),
        "{:?}",
        addresses(&without.dir.load())
    );
    assert!(without.cache.fetches_of(&app).is_empty());
}

/// The service's method names as the endpoint carries them (`methods`, from the service's
/// params in the `MetadataInfo`), sorted.
fn methods(i: &Instance) -> Vec<String> {
    let mut m: Vec<String> = i
        .param("methods")
        .unwrap_or_default()
        .split(',')
        .filter(|m| !m.is_empty())
        .map(str::to_string)
        .collect();
    m.sort();
    m
}

fn greet(name: &str) -> Invocation {
    Invocation::new("greet")
        .with_args(vec![name.into()])
        .with_types(["java.lang.String"])
}

/// A provider upgraded in place in Nacos (stopped, started again at the same address as a new
/// release whose `DemoService` has one more method, `greet`: a new revision of the same
/// instance): without a restart of the consumer the endpoint's `methods` gain `greet`, `greet`
/// answers from the upgraded provider (it failed before), and the new revision is fetched
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_a_provider_upgraded_in_place_gains_its_new_method_with_one_fetch() {
    if java_peer::skipped("nacos_upgraded_in_place") {
        return;
    }
    let app = unique("nacos-app-level-upgrade");
    let g = unique("g-nacos-upgrade");
    let mut old = start_mapped(&[provider(&app, &g, "dubbo", "local").name("v1")]);
    let port = old[0].port();
    let c = consumer(&g, "").await;
    let snap = wait_for(&c.dir, "v1", |s| s.endpoints().len() == 1).await;
    let v1 = routable(&snap)[0].clone();
    let v1_methods = methods(&v1);
    assert!(v1_methods.contains(&"whoami".to_string()), "{v1_methods:?}");
    assert!(!v1_methods.contains(&"greet".to_string()), "{v1_methods:?}");
    let calls = cluster(&c.dir);
    assert_eq!(
        calls.invoke(&Invocation::new("whoami")).await.unwrap(),
        json!("v1")
    );
    let missing = calls.invoke(&greet("ann")).await;
    assert!(missing.is_err(), "v1 has no greet: {missing:?}");
    let before = c.cache.fetches_of(&app);
    assert_eq!(before.len(), 1, "{before:?}");
    old[0].terminate();
    let new = start_mapped(&[provider(&app, &g, "dubbo", "local")
        .demo_service("v2")
        .port(port)
        .name("v2")]);
    let snap = wait_for(&c.dir, "v2's methods", |s| {
        routable(s)
            .iter()
            .any(|i| methods(i).contains(&"greet".to_string()))
    })
    .await;
    assert_eq!(snap.endpoints().len(), 1, "{:?}", addresses(&snap));
    let upgraded = routable(&snap)[0].clone();
    assert_eq!(upgraded.port(), new[0].port());
    assert_ne!(
        upgraded.param("dubbo.metadata.revision"),
        v1.param("dubbo.metadata.revision"),
        "a new revision"
    );
    let mut want = v1_methods.clone();
    want.push("greet".to_string());
    want.sort();
    assert_eq!(methods(&upgraded), want, "the new method, and only it");
    assert_eq!(
        calls.invoke(&greet("ann")).await.unwrap(),
        json!("greetings, ann from v2 (v2)")
    );
    assert_eq!(
        new[0].calls_of_settled("greet", 1, Duration::from_secs(2)),
        1
    );
    let after = c.cache.fetches_of(&app);
    let new_revs: Vec<_> = after.iter().filter(|r| !before.contains(r)).collect();
    assert_eq!(new_revs.len(), 1, "{after:?}");
    assert_eq!(
        new_revs[0].1, 1,
        "exactly one fetch of the new revision: {after:?}"
    );
    assert_eq!(
        Some(new_revs[0].0.as_str()),
        upgraded.param("dubbo.metadata.revision"),
        "{after:?}"
    );
}
