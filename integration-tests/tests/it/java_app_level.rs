//! Dubbo 3 application-level discovery on ZooKeeper against real Java Dubbo 3.3 providers
//! (`register-mode=instance`): instances under `/services/{app}`, their `MetadataInfo` from
//! the provider's own `MetadataService` (`metadata-type=local`, over dubbo:// and tri://) or
//! from the metadata report (`remote`). Every test uses its own applications and service group,
//! so the tests run in parallel; each consumer has its own metadata cache, whose fetch counts
//! the tests read.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::metadata_service::MetadataServiceClient;
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{BoxFuture, Instance, Invocation, Result, ServiceKey, Url};
use switchman_discovery::metadata::{
    MetadataCache, MetadataFetcher, MetadataInfo, MetadataServiceTarget,
};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Snapshot};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::ports::FAKE_PORTS;
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{unique, zookeeper};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);

fn registry(extra: &str) -> String {
    format!("zookeeper://{}{extra}", zookeeper())
}

/// A Java provider registering only its application instance (no `/dubbo/{interface}` node).
fn provider(app: &str, group: &str, protocol: &str, metadata: &str) -> ProviderOptions {
    ProviderOptions::zookeeper(&zookeeper())
        .protocol(protocol)
        .application(app)
        .group(group)
        .register_mode("instance")
        .metadata_type(metadata)
        // Just started, both would still warm up (Dubbo's 10 min ramp).
        .param("warmup", "0")
}

/// A consumer of `DemoService` in `group`, with a metadata cache of its own (as if it were its
/// own process: the tests of this file run in parallel, and every consumer reads every
/// application mapped to `DemoService`, the other tests' too), fetching through the client
/// `Reference` installs.
async fn directory(registry: &str, group: &str) -> (Arc<RegistryDirectory>, Arc<MetadataCache>) {
    let cache = Arc::new(MetadataCache::new(Arc::new(MetadataServiceClient::new())));
    let reg = ZookeeperRegistry::from_url(&Url::parse(registry).unwrap())
        .unwrap()
        .metadata_cache(cache.clone());
    let dir = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")),
    )
    .await
    .unwrap();
    (Arc::new(dir), cache)
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

/// The instances calls can go to.
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
    let counts: Arc<std::sync::Mutex<BTreeMap<String, usize>>> = Default::default();
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

/// Two instances of one application, weights 100 and 300: found, called over `protocol`,
/// split about 1:3; each revision's `MetadataInfo` fetched from the provider exactly once
/// for `local`, never for `remote`.
async fn weighted_fleet(protocol: &str, metadata: &str) {
    let tag = format!("{protocol}-{metadata}");
    let app = unique(&format!("app-level-{tag}"));
    let g = unique(&format!("g-{tag}"));
    let opts = |w: u32, name: &str| provider(&app, &g, protocol, metadata).weight(w).name(name);
    let (light, heavy) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&opts(100, "w100")));
        let b = s.spawn(|| JavaProvider::start(&opts(300, "w300")));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (dir, cache) = directory(&registry(""), &g).await;
    let snap = wait_for(&dir, "both application instances", |s| {
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
    let mut want = vec![light.port(), heavy.port()];
    want.sort();
    assert_eq!(ports, want);
    let counts = split(&cluster(&dir), 400).await;
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
    assert_eq!(cluster(&dir).invoke(&typed).await.unwrap(), json!(5));
    let fetches = cache.fetches_of(&app);
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_metadata_over_dubbo() {
    if java_peer::skipped("local_metadata_over_dubbo") {
        return;
    }
    weighted_fleet("dubbo", "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_metadata_over_tri() {
    if java_peer::skipped("local_metadata_over_tri") {
        return;
    }
    weighted_fleet("tri", "local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_metadata_over_dubbo() {
    if java_peer::skipped("remote_metadata_over_dubbo") {
        return;
    }
    weighted_fleet("dubbo", "remote").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_metadata_over_tri() {
    if java_peer::skipped("remote_metadata_over_tri") {
        return;
    }
    weighted_fleet("tri", "remote").await;
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}

async fn node_json(client: &zk::Client, path: &str) -> Value {
    let (data, _) = client.get_data(path).await.unwrap();
    serde_json::from_slice(&data).unwrap()
}

/// 49 more instances of a real provider's application with its revision (nodes written to
/// ZooKeeper, each at its own port, all advertising the real provider's MetadataService):
/// one fetch for the 50, and calls work. The real `MetadataInfo` names the service's port, so
/// (as in Dubbo) every instance maps to that one endpoint. The fake instances are on 127.0.0.1
/// (the real provider's host, whose MetadataService they share) at ports of [`FAKE_PORTS`],
/// which no real process binds, so none can be the real provider's own node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_instances_of_one_revision_one_real_fetch() {
    if java_peer::skipped("fifty_instances_of_one_revision_one_real_fetch") {
        return;
    }
    let app = unique("app-level-fifty");
    let g = unique("g-fifty");
    let real = JavaProvider::start(&provider(&app, &g, "dubbo", "local").name("real"));
    let client = raw_client(&zookeeper(), WAIT).await;
    let dir_path = format!("/services/{app}");
    let node = node_json(&client, &format!("{dir_path}/{}", real.address())).await;
    let revision = node["payload"]["metadata"]["dubbo.metadata.revision"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !FAKE_PORTS.contains(&real.port()),
        "the real provider's port {} is among the fake ones {FAKE_PORTS:?}",
        real.port()
    );
    for k in 1..50u16 {
        let mut copy = node.clone();
        let port = FAKE_PORTS.start + k;
        copy["port"] = json!(port);
        copy["id"] = json!(format!("127.0.0.1:{port}"));
        let path = format!("{dir_path}/127.0.0.1:{port}");
        client
            .create(&path, copy.to_string().as_bytes(), &ephemeral())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "create fake instance {path} (real provider on port {}): {e}",
                    real.port()
                )
            });
    }
    let (children, _) = client.get_children(&dir_path).await.unwrap();
    assert_eq!(children.len(), 50);
    let (dir, cache) = directory(&registry(""), &g).await;
    let snap = wait_for(&dir, "the provider", |s| !s.endpoints().is_empty()).await;
    assert_eq!(addresses(&snap), vec![format!("dubbo {}", real.address())]);
    let counts = split(&cluster(&dir), 50).await;
    assert_eq!(counts.get("real"), Some(&50));
    assert_eq!(
        cache.fetches_of(&app),
        vec![(revision, 1)],
        "one fetch for 50 instances"
    );
}

/// A fetcher that answers every revision of its application with one service over
/// dubbo:// without a port (each instance's own port applies), counting its calls.
#[derive(Debug, Default)]
struct Counting {
    interface: String,
    calls: AtomicU64,
}

impl MetadataFetcher for Counting {
    fn fetch<'a>(
        &'a self,
        target: &'a MetadataServiceTarget,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<MetadataInfo>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            MetadataInfo::from_json(&json!({
                "app": target.application, "revision": target.revision,
                "services": {"x:dubbo": {"name": self.interface, "protocol": "dubbo", "port": -1,
                    "group": "g50", "params": {"weight": "7"}}}
            }))
            .map_err(switchman_core::Error::bad_config)
        })
    }
}

/// 50 instance nodes of one revision in a real ZooKeeper, each at its own address: one
/// fetch (counted by the fetcher itself), 50 endpoints, each on its instance's port. Then one
/// instance changes revision (its node's data only): one more fetch, not 51. The instances are
/// fake (never dialled): on [`FAKE_HOST`], at ports of [`FAKE_PORTS`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_instances_one_fetch_and_a_revision_change_is_one_more() {
    fifty_synthetic("").await;
}

/// The same with one-shot watches (what a ZooKeeper before 3.6 gets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_instances_one_fetch_with_oneshot_watches() {
    fifty_synthetic("&watch=oneshot").await;
}

/// A loopback host nothing in the suite listens on (every real server binds 127.0.0.1).
const FAKE_HOST: &str = "127.0.0.2";

async fn fifty_synthetic(extra: &str) {
    let app = unique("app-level-synthetic");
    // An interface of its own: no other application is mapped to it.
    let iface = unique("it.app.Fifty").replace('-', "_");
    let fetcher = Arc::new(Counting {
        interface: iface.clone(),
        ..Counting::default()
    });
    let cache = Arc::new(MetadataCache::new(fetcher.clone()));
    let client = raw_client(&zookeeper(), WAIT).await;
    let dir_path = format!("/services/{app}");
    client.mkdir(&dir_path, &persistent()).await.unwrap();
    let node_of = |name: &str, port: u16, revision: &str| {
        json!({
            "name": name, "id": format!("{FAKE_HOST}:{port}"), "address": FAKE_HOST, "port": port,
            "payload": {"@class": "org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
                "metadata": {
                    "dubbo.metadata.revision": revision,
                    "dubbo.metadata.storage-type": "local",
                    "dubbo.metadata-service.url-params": format!("{{\"port\":\"{port}\",\"protocol\":\"dubbo\"}}"),
                    "timestamp": "1700000000000"
                }},
            "serviceType": "DYNAMIC"
        })
        .to_string()
    };
    let node = |port: u16, revision: &str| node_of(&app, port, revision);
    let port = |k: u16| FAKE_PORTS.start + k;
    for k in 0..50u16 {
        let path = format!("{dir_path}/{FAKE_HOST}:{}", port(k));
        client
            .create(&path, node(port(k), "rev-a").as_bytes(), &ephemeral())
            .await
            .unwrap_or_else(|e| panic!("create fake instance {path}: {e}"));
    }
    // No mapping names this application: the registry URL's provided-by does.
    let zk_reg = ZookeeperRegistry::from_url(
        &Url::parse(&registry(&format!("?provided-by={app}{extra}"))).unwrap(),
    )
    .unwrap()
    .metadata_cache(cache.clone());
    let dir = RegistryDirectory::subscribe(
        &zk_reg,
        DirectoryConfig::new(ServiceKey::with(&iface, "g50", "")),
    )
    .await
    .unwrap();
    let snap = wait_for(&dir, "50 endpoints", |s| s.endpoints().len() == 50).await;
    let ports: std::collections::BTreeSet<u16> = routable(&snap).iter().map(|i| i.port()).collect();
    assert_eq!(ports.len(), 50, "each instance on its own port");
    assert!(routable(&snap).iter().all(|i| i.weight() == 7));
    assert_eq!(fetcher.calls.load(Ordering::SeqCst), 1, "one fetch for 50");
    assert_eq!(cache.fetches(&app, "rev-a"), 1);
    // A mapping naming another application (with an instance of its own) is written first:
    // the registry URL's provided-by names the applications, so the mapping is not read (as
    // Dubbo's ServiceDiscoveryRegistry) and that instance never joins. ZooKeeper delivers
    // the two writes' events in order, so the barrier below (instance 7's new revision)
    // comes after the mapping's.
    let other = unique("app-level-unnamed");
    let other_dir = format!("/services/{other}");
    client.mkdir(&other_dir, &persistent()).await.unwrap();
    let other_node = format!("{other_dir}/{FAKE_HOST}:{}", port(60));
    client
        .create(
            &other_node,
            node_of(&other, port(60), "rev-a").as_bytes(),
            &ephemeral(),
        )
        .await
        .unwrap();
    let mapping = format!("/dubbo/mapping/{iface}");
    client.mkdir("/dubbo/mapping", &persistent()).await.unwrap();
    client
        .create(&mapping, other.as_bytes(), &persistent())
        .await
        .unwrap();
    // One instance is upgraded in place: its node gets a new revision.
    client
        .set_data(
            &format!("{dir_path}/{FAKE_HOST}:{}", port(7)),
            node(port(7), "rev-b").as_bytes(),
            None,
        )
        .await
        .unwrap();
    // The barrier is the moved instance itself: once the snapshot lists it at rev-b, the
    // fetches that change needed are done.
    let snap = wait_for(&dir, "instance 7 at rev-b", |s| {
        routable(s)
            .iter()
            .any(|i| i.port() == port(7) && i.param("dubbo.metadata.revision") == Some("rev-b"))
    })
    .await;
    assert_eq!(fetcher.calls.load(Ordering::SeqCst), 2, "one more fetch");
    assert_eq!(cache.fetches(&app, "rev-b"), 1);
    assert_eq!(
        snap.endpoints().len(),
        50,
        "the mapped application is not read"
    );
    assert!(routable(&snap).iter().all(|i| i.port() != port(60)));
    assert_eq!(cache.fetches(&other, "rev-a"), 0);
    let moved = routable(&snap)
        .into_iter()
        .find(|i| i.port() == port(7))
        .unwrap();
    assert_eq!(moved.param("dubbo.metadata.revision"), Some("rev-b"));
    for k in 0..50u16 {
        let _ = client
            .delete(&format!("{dir_path}/{FAKE_HOST}:{}", port(k)), None)
            .await;
    }
    let _ = client.delete(&dir_path, None).await;
    let _ = client.delete(&other_node, None).await;
    let _ = client.delete(&other_dir, None).await;
    let _ = client.delete(&mapping, None).await;
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill {sig} {pid}");
}

/// A provider whose MetadataService does not answer (its JVM stopped) is held out while the
/// other is called; once it answers again it joins, without a restart of the consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_whose_metadata_service_does_not_answer_is_held_out_then_joins() {
    if java_peer::skipped("held_out_then_joins") {
        return;
    }
    let app = unique("app-level-mute");
    let g = unique("g-mute");
    let opts = |w: u32, name: &str| provider(&app, &g, "dubbo", "local").weight(w).name(name);
    let (live, mute) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&opts(100, "live")));
        let b = s.spawn(|| JavaProvider::start(&opts(200, "mute")));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mute_pid = mute.pid().unwrap();
    signal(mute_pid, "-STOP");
    struct Resume(u32);
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-CONT", &self.0.to_string()])
                .status();
        }
    }
    let resume = Resume(mute_pid);
    let (dir, cache) = directory(&registry("?metadata-timeout=1000&metadata-retry=2000"), &g).await;
    let snap = wait_for(&dir, "the live provider", |s| !s.endpoints().is_empty()).await;
    assert_eq!(addresses(&snap), vec![format!("dubbo {}", live.address())]);
    let counts = split(&cluster(&dir), 40).await;
    assert_eq!(counts.get("live"), Some(&40), "{counts:?}");
    // Its fetch is failing: more than one attempt at its revision, none succeeded.
    let deadline = Instant::now() + WAIT;
    loop {
        let stats = cache.fetches_of(&app);
        if stats.iter().any(|(_, n)| *n >= 3) {
            break;
        }
        assert!(Instant::now() < deadline, "no retries: {stats:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(dir.load().endpoints().len(), 1, "still held out");
    let resumed = Instant::now();
    drop(resume);
    let snap = wait_for(&dir, "the provider that answers again", |s| {
        s.endpoints().len() == 2
    })
    .await;
    eprintln!("joined {:?} after it answered again", resumed.elapsed());
    assert!(routable(&snap).iter().any(|i| i.port() == mute.port()));
    let counts = split(&cluster(&dir), 300).await;
    assert!(counts.get("mute").copied().unwrap_or(0) > 100, "{counts:?}");
    assert!(counts.get("live").copied().unwrap_or(0) > 30, "{counts:?}");
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

/// A provider upgraded in place (stopped, started again on the same port as a new release: its
/// `DemoService` has one more method, `greet`, and other service parameters; a new revision):
/// the consumer keeps running, fetches the new revision exactly once, the endpoint's `methods`
/// gain `greet`, and `greet` answers from the upgraded provider (it failed before the upgrade).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_upgraded_in_place_is_one_fetch_of_its_new_revision() {
    if java_peer::skipped("upgraded_in_place") {
        return;
    }
    let app = unique("app-level-upgrade");
    let g = unique("g-upgrade");
    let v1 = provider(&app, &g, "tri", "local")
        .name("v1")
        .param("release.tag", "v1");
    let mut old = JavaProvider::start(&v1);
    let port = old.port();
    let (dir, cache) = directory(&registry(""), &g).await;
    let snap = wait_for(&dir, "v1", |s| s.endpoints().len() == 1).await;
    let v1_instance = routable(&snap)[0].clone();
    let v1_methods = methods(&v1_instance);
    assert!(v1_methods.contains(&"whoami".to_string()), "{v1_methods:?}");
    assert!(!v1_methods.contains(&"greet".to_string()), "{v1_methods:?}");
    let c = cluster(&dir);
    assert_eq!(
        c.invoke(&Invocation::new("whoami")).await.unwrap(),
        json!("v1")
    );
    let missing = c.invoke(&greet("bob")).await;
    assert!(missing.is_err(), "v1 has no greet: {missing:?}");
    let before = cache.fetches_of(&app);
    assert_eq!(before.len(), 1, "{before:?}");
    old.terminate();
    let new = JavaProvider::start(
        &provider(&app, &g, "tri", "local")
            .demo_service("v2")
            .port(port)
            .name("v2")
            .weight(250)
            .param("release.tag", "v2"),
    );
    let snap = wait_for(&dir, "v2", |s| {
        routable(s)
            .iter()
            .any(|i| i.param("release.tag") == Some("v2"))
    })
    .await;
    assert_eq!(snap.endpoints().len(), 1);
    let upgraded = routable(&snap)[0].clone();
    assert_eq!(upgraded.weight(), 250);
    assert_eq!(upgraded.port(), new.port());
    assert_ne!(
        upgraded.param("dubbo.metadata.revision"),
        v1_instance.param("dubbo.metadata.revision"),
        "a new revision"
    );
    eprintln!(
        "upgraded: revision {:?} -> {:?}, methods {:?}",
        v1_instance.param("dubbo.metadata.revision"),
        upgraded.param("dubbo.metadata.revision"),
        upgraded.param("methods")
    );
    let mut want = v1_methods.clone();
    want.push("greet".to_string());
    want.sort();
    assert_eq!(methods(&upgraded), want, "the new method, and only it");
    assert_eq!(
        c.invoke(&Invocation::new("whoami")).await.unwrap(),
        json!("v2")
    );
    assert_eq!(
        c.invoke(&greet("bob")).await.unwrap(),
        json!("greetings, bob from v2 (v2)")
    );
    assert_eq!(new.calls_of_settled("greet", 1, Duration::from_secs(2)), 1);
    let after = cache.fetches_of(&app);
    let new_revs: Vec<_> = after.iter().filter(|r| !before.contains(r)).collect();
    assert_eq!(new_revs.len(), 1, "{after:?}");
    assert_eq!(
        new_revs[0].1, 1,
        "exactly one fetch of the new revision: {after:?}"
    );
    assert_eq!(
        Some(new_revs[0].0.as_str()),
        upgraded.param("dubbo.metadata.revision"),
        "the fetch was of the revision the endpoint carries: {after:?}"
    );
}
