//! Big fleets (issue #30): one interface with N interface-level providers in ZooKeeper, one
//! application with N application-level instances in Nacos (rnacos), for N = 1,000, 5,000 and
//! 20,000. For each it records the time from `RegistryDirectory::subscribe` to a snapshot with
//! all N instances, the time until a 1% change (1% of the nodes removed, 1% new ones added)
//! is visible in the snapshot, and the consumer process's memory (VmRSS before subscribing and
//! after the first snapshot, and VmHWM).
//!
//! Needs the servers of `scripts/services.sh` (`SWITCHMAN_ZK`, `SWITCHMAN_NACOS`):
//!
//! ```text
//! source scripts/services.sh && services_start
//! cargo bench -p switchman-integration-tests --bench big_fleet
//! services_stop
//! ```
//!
//! `BIG_FLEET_SIZES=1000,5000` and `BIG_FLEET_REGISTRIES=zk` (or `nacos`) narrow the run;
//! `BIG_FLEET_CONSUMERS=rust,java` also measures a Java Dubbo 3.3 consumer of each fleet (the
//! peers' `fleet` program, `SWITCHMAN_JAVA_PEERS`; default `rust` only), on a fleet of its own;
//! `BIG_FLEET_NACOS_PARAMS=list_interval=1000` adds parameters to the Nacos registry URL;
//! `BIG_FLEET_SHOW_LOG=1` prints every consumer's log (`RUST_LOG`), not only a failed one's. The
//! parent process writes each fleet with its own client, then runs one consumer process per
//! fleet (this program again, `child ...`), so each memory figure is one fresh process's.
//! Providers have fake addresses (the `ports::FAKE_PORTS` band on 127.0.0.1 to 127.0.0.11):
//! nothing dials them.

use std::collections::HashSet;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use switchman_core::url::encode_component;
use switchman_core::{ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registry, RegistryDirectory, Snapshot};
use switchman_integration_tests::java_peer::JavaFleet;
use switchman_integration_tests::nacos_api::{OpenApiInstance, publish_config};
use switchman_integration_tests::ports::FAKE_PORTS;
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{nacos, unique, zookeeper};
use zookeeper_client as zk;

/// How long one fleet (or its 1% change) may take to appear.
const FIRST_WAIT: Duration = Duration::from_secs(120);
/// Creates or deletes in flight at once on one ZooKeeper client.
const ZK_IN_FLIGHT: usize = 2000;
/// Open-API requests to rnacos at once.
const NACOS_WORKERS: usize = 16;

/// The fake address of provider `i`: 2,000 ports of the fake band per host.
fn fake_addr(i: usize) -> (String, u16) {
    let ports = usize::from(FAKE_PORTS.end - FAKE_PORTS.start);
    let host = format!("127.0.0.{}", 1 + i / ports);
    (host, FAKE_PORTS.start + (i % ports) as u16)
}

/// The provider URL Java Dubbo 3.3 writes for `DemoService`-like interfaces (about 560 bytes
/// once encoded as a node name).
fn provider_url(iface: &str, i: usize) -> String {
    let (host, port) = fake_addr(i);
    format!(
        "dubbo://{host}:{port}/{iface}?anyhost=true&application=big-fleet-provider\
         &background=false&deprecated=false&dubbo=2.0.2&dynamic=true&executor-management-mode=isolation\
         &file-cache=true&generic=false&interface={iface}\
         &methods=add,count,echo,fail,getUser,nothing,ping,save,sayHello,slow,whoami\
         &pid={}&prefer.serialization=hessian2,fastjson2&release=3.3.6&service-name-mapping=true\
         &side=provider&timestamp=1700000000000",
        10000 + i % 50000
    )
}

/// The node name of provider `i` (the encoded URL).
pub fn provider_node(iface: &str, i: usize) -> String {
    encode_component(&provider_url(iface, i))
}

fn rss_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Creates the nodes `names` under `parent`, `ZK_IN_FLIGHT` requests in flight at once.
async fn zk_create_all(client: &zk::Client, parent: &str, names: &[String]) {
    let paths: Vec<String> = names.iter().map(|n| format!("{parent}/{n}")).collect();
    let opts = persistent();
    for chunk in paths.chunks(ZK_IN_FLIGHT) {
        // The client sends each request when the future is made: they are all in flight.
        let pending: Vec<_> = chunk.iter().map(|p| client.create(p, b"", &opts)).collect();
        for (p, f) in chunk.iter().zip(pending) {
            match f.await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => panic!("create {p}: {e}"),
            }
        }
    }
}

/// Deletes the nodes `names` under `parent` (missing ones count as deleted).
async fn zk_delete_all(client: &zk::Client, parent: &str, names: &[String]) {
    let paths: Vec<String> = names.iter().map(|n| format!("{parent}/{n}")).collect();
    for chunk in paths.chunks(ZK_IN_FLIGHT) {
        let pending: Vec<_> = chunk.iter().map(|p| client.delete(p, None)).collect();
        for (p, f) in chunk.iter().zip(pending) {
            match f.await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => eprintln!("delete {p}: {e}"),
            }
        }
    }
}

fn has_all(s: &Snapshot, want: &HashSet<String>, gone: &HashSet<String>) -> bool {
    let now: HashSet<&str> = s.instances().iter().map(|i| i.address()).collect();
    now.len() == want.len()
        && want.iter().all(|a| now.contains(a.as_str()))
        && gone.iter().all(|a| !now.contains(a.as_str()))
}

fn addrs(range: std::ops::Range<usize>) -> HashSet<String> {
    range
        .map(|i| {
            let (h, p) = fake_addr(i);
            format!("{h}:{p}")
        })
        .collect()
}

/// One measured fleet, as the child prints it.
struct Figures {
    first: Duration,
    churn: Duration,
    rss_before_kb: u64,
    rss_after_kb: u64,
    hwm_kb: u64,
}

impl Figures {
    fn line(&self, registry: &str, n: usize) -> String {
        format!(
            "RESULT {registry} n={n} first_ms={} churn_ms={} rss_before_kb={} rss_after_kb={} hwm_kb={}",
            self.first.as_millis(),
            self.churn.as_millis(),
            self.rss_before_kb,
            self.rss_after_kb,
            self.hwm_kb
        )
    }
}

/// Subscribes `registry` to `key`, waits for `n` instances, then applies `churn` (which
/// changes 1% of the fleet) and waits for it to show.
async fn measure(
    registry: &dyn Registry,
    key: ServiceKey,
    n: usize,
    churn: impl std::future::Future<Output = ()>,
) -> Figures {
    let rss_before_kb = rss_kb("VmRSS:");
    let t0 = Instant::now();
    let dir = RegistryDirectory::subscribe(registry, DirectoryConfig::new(key))
        .await
        .expect("subscribe");
    let first_set = addrs(0..n);
    dir.wait_until(FIRST_WAIT, |s| has_all(s, &first_set, &HashSet::new()))
        .await
        .unwrap_or_else(|e| panic!("first snapshot: {e}"));
    let first = t0.elapsed();
    let rss_after_kb = rss_kb("VmRSS:");
    let k = (n / 100).max(1);
    let want = addrs(k..n + k);
    let gone = addrs(0..k);
    let t1 = Instant::now();
    churn.await;
    dir.wait_until(FIRST_WAIT, |s| has_all(s, &want, &gone))
        .await
        .unwrap_or_else(|e| panic!("1% change: {e}"));
    Figures {
        first,
        churn: t1.elapsed(),
        rss_before_kb,
        rss_after_kb,
        hwm_kb: rss_kb("VmHWM:"),
    }
}

// ---- ZooKeeper ----

async fn zk_child(connect: &str, iface: &str, n: usize, extra: &str) {
    let url = format!("zookeeper://{connect}?app-level=false&timeout=30000{extra}");
    let reg = ZookeeperRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
    let writer = raw_client(connect, Duration::from_secs(10)).await;
    let figures = measure(&reg, ServiceKey::new(iface), n, zk_churn(&writer, iface, n)).await;
    println!("{}", figures.line("zookeeper", n));
}

/// The 1% change of a fleet of `n`: providers `0..k` deleted and `n..n + k` created, both at
/// once, as a rolling restart of 1% of the fleet would do.
async fn zk_churn(client: &zk::Client, iface: &str, n: usize) {
    let parent = format!("/dubbo/{iface}/providers");
    let k = (n / 100).max(1);
    let removed: Vec<String> = (0..k).map(|i| provider_node(iface, i)).collect();
    let added: Vec<String> = (n..n + k).map(|i| provider_node(iface, i)).collect();
    tokio::join!(
        zk_delete_all(client, &parent, &removed),
        zk_create_all(client, &parent, &added)
    );
}

async fn zk_fleet(n: usize, consumer: &str) -> Option<String> {
    let connect = zookeeper();
    let client = raw_client(&connect, Duration::from_secs(10)).await;
    let iface = unique("bench.BigFleet").replace('-', "_");
    let parent = format!("/dubbo/{iface}/providers");
    client.mkdir(&parent, &persistent()).await.expect("mkdir");
    let names: Vec<String> = (0..n).map(|i| provider_node(&iface, i)).collect();
    let t = Instant::now();
    zk_create_all(&client, &parent, &names).await;
    let bytes: usize = names.iter().map(|s| s.len() + 4).sum();
    eprintln!(
        "zookeeper: {n} providers ({bytes} bytes of names) written in {:?}",
        t.elapsed()
    );
    let out = if consumer == "java" {
        let registry = format!("zookeeper://{connect}");
        // Curator reads a reply up to `jute.maxbuffer` (1 MB by default: about 1,840 of these
        // providers), so the JVM runs with 16 MB, as a Java consumer of such a fleet must.
        java_fleet(
            "zookeeper",
            n,
            &[
                "--registry",
                &registry,
                "--interface",
                &iface,
                "--migration",
                "FORCE_INTERFACE",
            ],
            &["-Djute.maxbuffer=16777216"],
            || {
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(zk_churn(&client, &iface, n))
                })
            },
        )
    } else {
        run_child(&["zk", &connect, &iface, &n.to_string()])
    };
    // Every node this run made, the child's 1% included.
    let k = (n / 100).max(1);
    let all: Vec<String> = (0..n + k).map(|i| provider_node(&iface, i)).collect();
    zk_delete_all(&client, &parent, &all).await;
    let _ = client.delete(&parent, None).await;
    let _ = client.delete(&format!("/dubbo/{iface}"), None).await;
    out
}

/// Where the default packet limit breaks a Java client: grows one providers node 50 children
/// at a time from 1,600 to 2,000 and after each step lists it with zookeeper-client and with
/// ZooKeeper's own Java client (`zkCli`, `ZooKeeperMain -server ... ls`, the classpath of
/// `SWITCHMAN_ZK_CLASSPATH`), with the default `jute.maxbuffer` and with `-Djute.maxbuffer=4194304`.
async fn probe() {
    let connect = zookeeper();
    let client = raw_client(&connect, Duration::from_secs(10)).await;
    let iface = unique("bench.Probe").replace('-', "_");
    let parent = format!("/dubbo/{iface}/providers");
    client.mkdir(&parent, &persistent()).await.expect("mkdir");
    let classpath = std::env::var("SWITCHMAN_ZK_CLASSPATH").unwrap_or_default();
    let java_ls = |extra: &[&str]| -> String {
        let out = Command::new("java")
            .args(extra)
            .args(["-cp", &classpath, "org.apache.zookeeper.ZooKeeperMain"])
            .args(["-server", &connect, "ls", &parent])
            .output();
        match out {
            Err(e) => format!("java: {e}"),
            Ok(o) => {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
                match text.lines().find(|l| l.contains("out of range")) {
                    Some(l) => l.trim().to_string(),
                    None if text.contains("dubbo%3A%2F%2F") => "listed".to_string(),
                    None => format!("no list: {}", text.lines().last().unwrap_or("")),
                }
            }
        }
    };
    let mut n = 0;
    let mut reply = 20;
    let mut step = 1600;
    while n < 2000 {
        let names: Vec<String> = (n..n + step).map(|i| provider_node(&iface, i)).collect();
        reply += names.iter().map(|s| s.len() + 4).sum::<usize>();
        zk_create_all(&client, &parent, &names).await;
        n += step;
        step = 50;
        let rust = match client.list_children(&parent).await {
            Ok(c) => format!("listed {}", c.len()),
            Err(e) => format!("error {e}"),
        };
        println!(
            "n={n} reply={reply} bytes: zookeeper-client {rust}; Java client: {}; Java client -Djute.maxbuffer=4194304: {}",
            java_ls(&[]),
            java_ls(&["-Djute.maxbuffer=4194304"])
        );
    }
    let all: Vec<String> = (0..n).map(|i| provider_node(&iface, i)).collect();
    zk_delete_all(&client, &parent, &all).await;
    let _ = client.delete(&parent, None).await;
    let _ = client.delete(&format!("/dubbo/{iface}"), None).await;
}

// ---- Nacos ----

/// The application instance Java Dubbo 3.3 registers with `metadata-type=remote`.
fn nacos_instance(app: &str, i: usize) -> OpenApiInstance {
    let (host, port) = fake_addr(i);
    let mut inst = OpenApiInstance::new(app, &host, port);
    inst.metadata_json = json!({
        "dubbo.metadata.revision": "r1",
        "dubbo.metadata.storage-type": "remote",
        "dubbo.endpoints": format!("[{{\"port\":{port},\"protocol\":\"dubbo\"}}]"),
        "meta-v": "2.0.0",
        "timestamp": "1700000000000",
    })
    .to_string();
    inst
}

/// Runs `f` on every index of `range`, `NACOS_WORKERS` threads at once.
fn nacos_each(range: std::ops::Range<usize>, f: impl Fn(usize) + Sync) {
    let next = AtomicUsize::new(range.start);
    std::thread::scope(|s| {
        for _ in 0..NACOS_WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= range.end {
                        return;
                    }
                    f(i);
                }
            });
        }
    });
}

fn nacos_register(app: &str, range: std::ops::Range<usize>) {
    let addr = nacos();
    nacos_each(range, |i| {
        let inst = nacos_instance(app, i);
        for attempt in 0.. {
            match inst.register(&addr) {
                Ok(_) => break,
                Err(e) if attempt < 5 => {
                    eprintln!("register {i}: {e}; again");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("register {i}: {e}"),
            }
        }
    });
}

fn nacos_deregister(app: &str, range: std::ops::Range<usize>) {
    let addr = nacos();
    nacos_each(range, |i| {
        let _ = nacos_instance(app, i).deregister(&addr);
    });
}

async fn nacos_child(addr: &str, app: &str, iface: &str, n: usize, cache: &str) {
    let extra = std::env::var("BIG_FLEET_NACOS_PARAMS").unwrap_or_default();
    let url = format!(
        "nacos://{addr}?cache_dir={cache}&provided-by={app}&migration.step=FORCE_APPLICATION&{extra}"
    );
    let reg = NacosRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
    let app = app.to_string();
    let figures = measure(&reg, ServiceKey::new(iface), n, async move {
        tokio::task::spawn_blocking(move || nacos_churn(&app, n))
            .await
            .expect("churn");
    })
    .await;
    println!("{}", figures.line("nacos", n));
}

/// The 1% change of a fleet of `n` instances of `app`: `0..k` deregistered and `n..n + k`
/// registered, at once.
fn nacos_churn(app: &str, n: usize) {
    let k = (n / 100).max(1);
    std::thread::scope(|s| {
        s.spawn(|| nacos_deregister(app, 0..k));
        s.spawn(|| nacos_register(app, n..n + k));
    });
}

fn nacos_fleet(n: usize, consumer: &str) -> Option<String> {
    let app = unique("big-fleet-app");
    let iface = unique("bench.NacosFleet").replace('-', "_");
    // The metadata report every instance points to (revision r1): one fetch for the fleet.
    let info = json!({
        "app": app, "revision": "r1",
        "services": {format!("{iface}:dubbo"): {
            "name": iface, "protocol": "dubbo", "port": -1, "path": iface,
            "params": {"application": app, "side": "provider", "interface": iface,
                       "methods": "sayHello", "release": "3.3.6"}
        }}
    });
    for attempt in 0.. {
        match publish_config(&nacos(), &app, "r1", &info.to_string()) {
            Ok(_) => break,
            // rnacos may still be busy with the previous fleet's deregistrations.
            Err(e) if attempt < 5 => {
                eprintln!("publish the report: {e}; again");
                std::thread::sleep(Duration::from_secs(2));
            }
            Err(e) => panic!("publish the report: {e}"),
        }
    }
    let t = Instant::now();
    nacos_register(&app, 0..n);
    eprintln!(
        "nacos: {n} application instances registered in {:?}",
        t.elapsed()
    );
    let cache = std::env::temp_dir().join(unique("big-fleet-nacos-cache"));
    let k = (n / 100).max(1);
    let out = if consumer == "java" {
        let registry = format!("nacos://{}", nacos());
        java_fleet(
            "nacos",
            n,
            &[
                "--registry",
                &registry,
                "--interface",
                &iface,
                "--provided-by",
                &app,
                "--migration",
                "FORCE_APPLICATION",
                "--metadata-report",
                &registry,
            ],
            &[],
            || nacos_churn(&app, n),
        )
    } else {
        run_child(&[
            "nacos",
            &nacos(),
            &app,
            &iface,
            &n.to_string(),
            &cache.display().to_string(),
        ])
    };
    nacos_deregister(&app, 0..n + k);
    let _ = std::fs::remove_dir_all(&cache);
    out
}

// ---- a Java consumer ----

/// A Java Dubbo 3.3 consumer of the fleet (`fleet` in the peers, `args` naming the registry
/// and the reference, `jvm_extra` added to its JVM flags): the time until its directory holds
/// exactly providers `0..n`, then until it holds `k..n + k` after `churn` (which makes that
/// change). The JVM's RSS after the first phase, the heap in use after a full GC, and VmHWM.
fn java_fleet(
    registry: &str,
    n: usize,
    args: &[&str],
    jvm_extra: &[&str],
    churn: impl FnOnce(),
) -> Option<String> {
    let k = (n / 100).max(1);
    let dir = std::env::temp_dir().join(unique("big-fleet-java"));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let write = |name: &str, range: std::ops::Range<usize>| {
        let path = dir.join(name);
        let text: Vec<String> = addrs(range).into_iter().collect();
        std::fs::write(&path, text.join("\n")).expect("write the address list");
        path.display().to_string()
    };
    let (first, then) = (write("first.txt", 0..n), write("then.txt", k..n + k));
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--expect-file", &first, "--then-file", &then]);
    let mut flags = vec!["-Xmx2g", "-XX:-UsePerfData"];
    flags.extend_from_slice(jvm_extra);
    let mut java = JavaFleet::start(&all, &flags);
    let result = (|| {
        let first = java.next(FIRST_WAIT)?;
        if first["ok"] != json!(true) {
            return Err(format!("first phase: {first}"));
        }
        java.go();
        churn();
        let change = java.next(FIRST_WAIT)?;
        if change["ok"] != json!(true) {
            return Err(format!("1% change: {change}"));
        }
        Ok(format!(
            "RESULT java-{registry} n={n} first_ms={} churn_ms={} rss_after_kb={} heap_kb={} hwm_kb={}",
            first["ms"], change["ms"], first["rss_kb"], first["heap_kb"], change["hwm_kb"]
        ))
    })();
    drop(java);
    let _ = std::fs::remove_dir_all(&dir);
    result
        .map_err(|e| eprintln!("java consumer of {n} ({registry}): {e}"))
        .ok()
}

// ---- driver ----

fn run_child(args: &[&str]) -> Option<String> {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .arg("child")
        .args(args)
        .output()
        .expect("run the consumer process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT"))
        .map(str::to_string);
    if line.is_none() || std::env::var_os("BIG_FLEET_SHOW_LOG").is_some() {
        eprintln!(
            "consumer process {} ({}):\n{}\n{}",
            if line.is_none() { "failed" } else { "log" },
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    line
}

fn list_env(var: &str, default: &str) -> Vec<String> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if args.first().map(String::as_str) == Some("probe") {
        rt.block_on(probe());
        return;
    }
    if args.first().map(String::as_str) == Some("child") {
        // The adapters' warnings go to stderr (shown when a consumer fails); RUST_LOG for more.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .with_writer(std::io::stderr)
            .try_init();
        let a: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
        match a.as_slice() {
            ["zk", connect, iface, n] => {
                rt.block_on(zk_child(connect, iface, n.parse().expect("n"), ""))
            }
            ["nacos", addr, app, iface, n, cache] => {
                rt.block_on(nacos_child(addr, app, iface, n.parse().expect("n"), cache))
            }
            _ => panic!("unknown child arguments {a:?}"),
        }
        return;
    }
    let sizes: Vec<usize> = list_env("BIG_FLEET_SIZES", "1000,5000,20000")
        .iter()
        .map(|s| s.parse().expect("BIG_FLEET_SIZES: numbers"))
        .collect();
    let registries = list_env("BIG_FLEET_REGISTRIES", "zk,nacos");
    let consumers = list_env("BIG_FLEET_CONSUMERS", "rust");
    let mut lines = Vec::new();
    for r in &registries {
        for &n in &sizes {
            for c in &consumers {
                assert!(
                    c == "rust" || c == "java",
                    "BIG_FLEET_CONSUMERS: unknown {c}"
                );
                let line = match r.as_str() {
                    "zk" => rt.block_on(zk_fleet(n, c)),
                    "nacos" => nacos_fleet(n, c),
                    other => panic!("BIG_FLEET_REGISTRIES: unknown {other}"),
                };
                match line {
                    Some(l) => {
                        println!("{l}");
                        lines.push(l);
                    }
                    None => println!("RESULT {c} {r} n={n} failed (see above)"),
                }
            }
        }
    }
    let _ = lines;
}
