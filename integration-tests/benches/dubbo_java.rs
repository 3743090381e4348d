//! dubbo:// against Java Apache Dubbo 3.3: one Java provider of `DemoService` (one JVM, the
//! dubbo protocol, peers/java), called with the typed `add(int,int)` by
//!
//! - `switchman/cluster`: Switchman's dubbo:// consumer through the whole cluster layer
//!   (`ClusterInvoker` over a `RegistryDirectory` subscribed to a `StaticRegistry` holding that
//!   one provider; failover, random, the default settings; `ProtocolInvoker` → `DubboInvoker`);
//! - `switchman/invoker`: the same `DubboInvoker` called directly on the instance, no cluster
//!   (the same per-call work otherwise: Hessian2 encoding of the invocation, the pool lookup,
//!   decoding of the result), so `cluster / invoker` is the cost of the cluster layer;
//! - `switchman/connection`: a bare `Connection::request` with a body encoded once beforehand
//!   (the transport alone: no encoding, no decoding beyond a byte check, no pool);
//! - `switchman/cluster-endpoints`: the cluster over per-endpoint clients, what `Reference`
//!   runs (a second directory whose maker is that `DubboInvoker`: each endpoint's
//!   `DubboEndpoint`, its parameters read once, its own connection slot);
//! - `switchman/endpoint`: that endpoint's client called directly on its instance, no
//!   cluster, so `cluster-endpoints / endpoint` is the cost of the cluster layer on that path;
//! - `java/async` and `java/sync`: Java Dubbo's own consumer, the peers' `bench` program
//!   (`ReferenceConfig<DemoService>`, a direct `dubbo://127.0.0.1:PORT` URL, one shared
//!   connection): N chains of async calls, or N threads making blocking calls.
//!
//! The first three Rust cases share one connection (the invoker's pool hands the bare case the
//! connection the other two use), and the last two another (the endpoint's), so each
//! comparison differs only in the consumer's code path: with a connection each, the
//! provider's CPU per call differed by up to 1.7× between connections in the same run, which
//! swamped the cluster layer's cost.
//!
//! Every client keeps N calls in flight (a closed loop: N tasks, chains or threads, each
//! starting its next call when the last one answered), at 16 and 128. Both JVMs run with
//! `java_peer::BENCH_JVM_FLAGS` (the JVM's defaults: C2, 512 MiB heap) and get 20 s of calls
//! first, unmeasured, for their JIT (the provider's before the first Rust case, the Java
//! consumer's in its own run). Then the Rust cases each warm up for `--warm-up` seconds and are
//! measured for `--measure` seconds in 50 rounds of alternating slices (0.1 s each at the
//! default 5 s: cluster, invoker, connection; invoker, connection, cluster; ...), so drifting
//! load on the shared machine and the provider's pauses hit all three alike; the Java program
//! warms up and measures each level in one stretch. Besides calls per
//! second and latency percentiles (µs, exact for Rust, 1 µs buckets in Java), each row has the
//! CPU time per call of the consumer process (for Rust without the thread that counts the
//! provider's `CALL` lines) and of the provider JVM, from `/proc/<pid>/stat`, and the CPU that
//! every other process on the machine used meanwhile (`/proc/stat`), in % of one core: how much
//! of the 2 cores other work took away.
//!
//! Everything is on 127.0.0.1; the provider JVM, the consumer under test and anything else
//! running share the machine's cores; nothing is pinned. The provider registers nowhere
//! (registry `N/A`), so no ZooKeeper is needed.
//!
//! ```text
//! SWITCHMAN_JAVA_PEERS=$(scripts/install-java-peers) \
//!   cargo bench -p switchman-integration-tests --bench dubbo_java [-- --warm-up 2 --measure 5]
//! ```
//!
//! Prints a table and writes `<target>/switchman-bench/dubbo_java.json`, which
//! `scripts/bench-table.py --dubbo-java` turns into the BENCHMARKS.md section
//! (`scripts/bench --only dubbo-java` runs both). Other flags: `--in-flight 16,128`,
//! `--method add|sayHello`, `--max-calls N` (per case and level, default 5,000,000),
//! `--out PATH`; for experiments and profiles `--rust-only` (no Java consumer) and `--case
//! cluster|invoker|connection` (only that Rust case). Run without `--bench` (as `cargo test
//! --benches` does) it does nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};
use switchman_cluster::dubbo::{Connection, DubboInvoker, HESSIAN2, status};
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{Instance, Invocation, Invoker, Protocol, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, StaticRegistry};
use switchman_integration_tests::java_peer::{
    self, BENCH_JVM_FLAGS, DEMO_SERVICE, JavaProvider, ProviderOptions,
};

/// Per-call timeout on every side (the Java bench's `--timeout-ms`).
const TIMEOUT: Duration = Duration::from_secs(5);
/// The measured time of a Rust case is split into this many alternating slices.
const ROUNDS: u32 = 50;
/// Before the first Rust case: calls that only warm the provider's JIT up (its C2 takes
/// 10–15 s on 2 busy cores to settle).
const PROVIDER_WARM_UP: Duration = Duration::from_secs(20);
/// Before the Java consumer's first level: its own JIT warm-up, as long as the provider's.
const JVM_WARM_UP: Duration = PROVIDER_WARM_UP;

struct Options {
    warm_up: Duration,
    measure: Duration,
    in_flight: Vec<usize>,
    method: String,
    max_calls: u64,
    out: PathBuf,
    rust_only: bool,
    case: Option<String>,
}

impl Options {
    fn parse() -> Option<Options> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        if !args.iter().any(|a| a == "--bench") {
            return None;
        }
        let mut o = Options {
            warm_up: Duration::from_secs(2),
            measure: Duration::from_secs(5),
            in_flight: vec![16, 128],
            method: "add".into(),
            max_calls: 5_000_000,
            out: target_dir().join("switchman-bench").join("dubbo_java.json"),
            rust_only: false,
            case: None,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .unwrap_or_else(|| panic!("{flag} needs a value"))
                    .clone()
            };
            let secs = |v: String| Duration::from_secs_f64(v.parse().expect("seconds"));
            match flag.as_str() {
                "--warm-up" => o.warm_up = secs(value()),
                "--measure" => o.measure = secs(value()),
                "--in-flight" => {
                    o.in_flight = value()
                        .split(',')
                        .map(|n| n.trim().parse().expect("--in-flight 16,128"))
                        .collect()
                }
                "--method" => o.method = value(),
                "--max-calls" => o.max_calls = value().parse().expect("--max-calls N"),
                "--out" => o.out = PathBuf::from(value()),
                "--rust-only" => o.rust_only = true,
                "--case" => o.case = Some(value()),
                // `--bench` and whatever else cargo passes.
                _ => {}
            }
        }
        assert!(
            matches!(o.method.as_str(), "add" | "sayHello"),
            "--method add|sayHello"
        );
        Some(o)
    }
}

/// `target/` of this build: the bench runs as `target/release/deps/dubbo_java-<hash>`.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// One Rust client; `call` makes one checked call.
#[allow(clippy::large_enum_variant, reason = "five of them, each in an Arc")]
enum Case {
    Cluster(ClusterInvoker, Invocation),
    Invoker(DubboInvoker, Instance, Invocation),
    Connection(Connection, Bytes),
    /// The cluster over per-endpoint clients (what `Reference` runs).
    ClusterEndpoints(ClusterInvoker, Invocation),
    /// That endpoint's client (`DubboEndpoint`) called on the instance, no cluster.
    Endpoint(Arc<dyn Invoker>, Arc<Instance>, Invocation),
}

impl Case {
    fn name(&self) -> &'static str {
        match self {
            Case::Cluster(..) => "switchman/cluster",
            Case::Invoker(..) => "switchman/invoker",
            Case::Connection(..) => "switchman/connection",
            Case::ClusterEndpoints(..) => "switchman/cluster-endpoints",
            Case::Endpoint(..) => "switchman/endpoint",
        }
    }

    async fn call(&self) -> Result<(), String> {
        let value = match self {
            Case::Cluster(cluster, inv) | Case::ClusterEndpoints(cluster, inv) => {
                cluster.invoke(inv).await
            }
            Case::Invoker(invoker, target, inv) => invoker.invoke(target, inv, TIMEOUT).await,
            Case::Endpoint(client, target, inv) => client.invoke(target, inv, TIMEOUT).await,
            Case::Connection(conn, body) => {
                let resp = conn
                    .request(HESSIAN2, body.clone(), TIMEOUT)
                    .await
                    .map_err(|e| e.to_string())?;
                // Status OK, then the result flag: a value (1), or a value and attachments (4).
                return if resp.status == status::OK
                    && matches!(resp.body.first(), Some(0x91 | 0x94))
                {
                    Ok(())
                } else {
                    Err(format!("status {} body {:02x?}", resp.status, resp.body))
                };
            }
        };
        match value {
            Ok(v) if v == json!(3) || v.as_str().is_some_and(|s| s.starts_with("hello, x")) => {
                Ok(())
            }
            Ok(v) => Err(format!("unexpected result {v}")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// CPU time (utime + stime) of a process or thread from its `/proc` stat file, in seconds.
fn cpu_seconds(stat: &std::path::Path) -> f64 {
    let Ok(text) = std::fs::read_to_string(stat) else {
        return f64::NAN;
    };
    // The fields after `(comm)`: state is field 3, utime 14, stime 15 (in 100 Hz ticks).
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    match (tick(11), tick(12)) {
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

/// Where CPU time goes: this process (the Rust consumer), the thread in it that reads the
/// provider's `CALL` lines (provider work, not the consumer's), and the provider JVM.
struct Cpu {
    provider: PathBuf,
    reader: Option<PathBuf>,
}

impl Cpu {
    fn new(provider_pid: u32) -> Cpu {
        let reader = std::fs::read_dir("/proc/self/task").ok().and_then(|tasks| {
            tasks.flatten().map(|t| t.path()).find(|t| {
                std::fs::read_to_string(t.join("comm"))
                    .is_ok_and(|c| c.trim() == java_peer::PROVIDER_STDOUT_THREAD)
            })
        });
        Cpu {
            provider: PathBuf::from(format!("/proc/{provider_pid}/stat")),
            reader: reader.map(|t| t.join("stat")),
        }
    }

    /// CPU seconds so far: (consumer, provider, every other process on the machine).
    fn now(&self) -> (f64, f64, f64) {
        let reader = self.reader.as_deref().map_or(0.0, cpu_seconds);
        let me = cpu_seconds(std::path::Path::new("/proc/self/stat"));
        let provider = cpu_seconds(&self.provider);
        (me - reader, provider, machine_busy() - me - provider)
    }
}

/// Busy CPU seconds of the whole machine, all cores (`/proc/stat`: user, nice, system, irq,
/// softirq, steal; not idle or iowait).
fn machine_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return f64::NAN;
    };
    let t: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    if t.len() < 8 {
        return f64::NAN;
    }
    (t[0] + t[1] + t[2] + t[5] + t[6] + t[7]) / 100.0
}

/// What the slices of one case at one level add up to.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    seconds: f64,
    errors: u64,
    first_error: Option<String>,
    started: u64,
    consumer_cpu: f64,
    provider_cpu: f64,
    other_cpu: f64,
}

impl Tally {
    fn percentile(sorted: &[u32], p: f64) -> u32 {
        if sorted.is_empty() {
            return 0;
        }
        let rank = ((p * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    fn figures(mut self, case: &str, in_flight: usize, measure: Duration) -> Value {
        self.latencies_us.sort_unstable();
        let calls = self.latencies_us.len();
        let l = &self.latencies_us;
        json!({
            "case": case,
            "in_flight": in_flight,
            "calls": calls,
            "consumer_cpu_us": self.consumer_cpu * 1e6 / calls as f64,
            "provider_cpu_us": self.provider_cpu * 1e6 / calls as f64,
            "other_cpu_pct": self.other_cpu * 100.0 / self.seconds,
            "errors": self.errors,
            "seconds": self.seconds,
            "calls_per_s": calls as f64 / self.seconds,
            "p50_us": Self::percentile(l, 0.50),
            "p99_us": Self::percentile(l, 0.99),
            "max_us": l.last().copied().unwrap_or(0),
            "measure_s": measure.as_secs_f64(),
            "first_error": self.first_error,
            "load1": load1(),
        })
    }
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// `in_flight` closed loops of `case` for `length`; recorded into `tally` unless `None`.
async fn slice(
    case: &Arc<Case>,
    in_flight: usize,
    length: Duration,
    max_calls: u64,
    cpu: &Cpu,
    tally: Option<&mut Tally>,
) {
    let cpu0 = cpu.now();
    let start = Instant::now();
    let end = start + length;
    let budget = tally
        .as_ref()
        .map_or(u64::MAX, |t| max_calls.saturating_sub(t.started));
    let started = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::with_capacity(in_flight);
    for _ in 0..in_flight {
        let (case, started, failed) = (case.clone(), started.clone(), failed.clone());
        loops.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = (0u64, None);
            loop {
                let t0 = Instant::now();
                if t0 >= end
                    || failed.load(Ordering::Relaxed)
                    || started.fetch_add(1, Ordering::Relaxed) >= budget
                {
                    break;
                }
                match case.call().await {
                    Ok(()) => latencies.push((t0.elapsed().as_nanos() / 1000) as u32),
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        errors.0 += 1;
                        errors.1.get_or_insert(e);
                    }
                }
            }
            (latencies, errors)
        }));
    }
    let mut results = Vec::with_capacity(in_flight);
    for l in loops {
        results.push(l.await.expect("a call loop panicked"));
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu1 = cpu.now();
    if let Some(t) = tally {
        t.seconds += seconds;
        t.consumer_cpu += cpu1.0 - cpu0.0;
        t.provider_cpu += cpu1.1 - cpu0.1;
        t.other_cpu += cpu1.2 - cpu0.2;
        t.started += started.load(Ordering::Relaxed).min(budget);
        for (latencies, (errors, first)) in results {
            t.latencies_us.extend(latencies);
            t.errors += errors;
            if t.first_error.is_none() {
                t.first_error = first;
            }
        }
    }
}

/// The request body `DubboInvoker` sends for the typed call (version, path, service version,
/// method, descriptor, arguments, attachments `path`, `interface`, `timeout`), in Hessian2.
fn encoded_body(method: &str) -> Bytes {
    fn string(out: &mut Vec<u8>, s: &str) {
        // A short string: its length (< 32) in one byte, then the UTF-8 (ASCII here).
        assert!(s.is_ascii() && s.len() < 32, "{s}");
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
    let mut b = Vec::with_capacity(128);
    for s in ["2.0.2", DEMO_SERVICE, "", method] {
        string(&mut b, s);
    }
    if method == "add" {
        string(&mut b, "II");
        // Compact ints: 0x90 + n.
        b.extend_from_slice(&[0x91, 0x92]);
    } else {
        string(&mut b, "Ljava/lang/String;");
        string(&mut b, "x");
    }
    b.push(b'H');
    let timeout = TIMEOUT.as_millis().to_string();
    for (k, v) in [
        ("path", DEMO_SERVICE),
        ("interface", DEMO_SERVICE),
        ("timeout", timeout.as_str()),
    ] {
        string(&mut b, k);
        string(&mut b, v);
    }
    b.push(b'Z');
    Bytes::from(b)
}

fn invocation(method: &str) -> Invocation {
    if method == "add" {
        Invocation::new("add")
            .with_args(vec![1.into(), 2.into()])
            .with_types(["int", "int"])
    } else {
        Invocation::new("sayHello")
            .with_args(vec!["x".into()])
            .with_types(["java.lang.String"])
    }
}

async fn rust_cases(port: u16, method: &str) -> (Vec<Arc<Case>>, Arc<RegistryDirectory>) {
    let instance = Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Dubbo)
        .service(ServiceKey::new(DEMO_SERVICE))
        .build();
    let registry = StaticRegistry::new(vec![instance.clone()]);
    let dir = RegistryDirectory::subscribe(
        &registry,
        DirectoryConfig::new(ServiceKey::new(DEMO_SERVICE)),
    )
    .await
    .expect("a directory over the static registry");
    dir.wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 1)
        .await
        .expect("the provider in the directory");
    let dir = Arc::new(dir);
    // One invoker, so one pool and one connection for all three cases: they differ only in
    // the consumer's code path, not in which connection (and provider I/O thread) they get.
    let dubbo = DubboInvoker::new();
    let cluster = ClusterInvoker::new(
        dir.clone(),
        Arc::new(ProtocolInvoker::new().dubbo(dubbo.clone())),
        ClusterConfig::default().timeout(TIMEOUT),
    );
    let conn = dubbo
        .pool()
        .get(instance.address(), 0, TIMEOUT)
        .await
        .expect("a connection to the Java provider");
    // The cluster over per-endpoint clients, as `Reference` runs it, and that endpoint's
    // client alone: a second directory whose maker is the same invoker, so both share the
    // endpoint's connection (one live endpoint at the address: one slot).
    let with_clients = RegistryDirectory::subscribe(
        &registry,
        DirectoryConfig::new(ServiceKey::new(DEMO_SERVICE)).maker(dubbo.clone()),
    )
    .await
    .expect("a directory with per-endpoint clients");
    with_clients
        .wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 1)
        .await
        .expect("the provider in the directory");
    let snap = with_clients.load();
    let endpoint = snap.endpoints()[0]
        .service
        .clone()
        .expect("the endpoint's own client");
    // The very instance the endpoint was made with: its calls compare a pointer.
    let endpoint_instance = snap.endpoints()[0].instance.clone();
    drop(snap);
    let over_clients = ClusterInvoker::new(
        Arc::new(with_clients),
        Arc::new(ProtocolInvoker::new().dubbo(dubbo.clone())),
        ClusterConfig::default().timeout(TIMEOUT),
    );
    let cases = vec![
        Arc::new(Case::Cluster(cluster, invocation(method))),
        Arc::new(Case::Invoker(dubbo, instance, invocation(method))),
        Arc::new(Case::Connection(conn, encoded_body(method))),
        Arc::new(Case::ClusterEndpoints(over_clients, invocation(method))),
        Arc::new(Case::Endpoint(
            endpoint,
            endpoint_instance,
            invocation(method),
        )),
    ];
    // The provider's first calls load and link much of Dubbo: allow them 30 s.
    for case in &cases {
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = case.call().await {
            assert!(
                Instant::now() < deadline,
                "{}: no call succeeded within 30 s: {e}",
                case.name()
            );
            eprintln!("dubbo_java: {}: first call failed, again: {e}", case.name());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    (cases, dir)
}

fn print_row(row: &Value) {
    let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "{:<22} {:>9} {:>10.0} {:>8} {:>8} {:>8} {:>6} {:>12.1} {:>12.1} {:>9.0}",
        row["case"].as_str().unwrap_or("?"),
        row["in_flight"].as_u64().unwrap_or(0),
        f("calls_per_s"),
        row["p50_us"].as_u64().unwrap_or(0),
        row["p99_us"].as_u64().unwrap_or(0),
        row["max_us"].as_u64().unwrap_or(0),
        row["errors"].as_u64().unwrap_or(0),
        f("consumer_cpu_us"),
        f("provider_cpu_us"),
        f("other_cpu_pct"),
    );
}

fn main() {
    let Some(opts) = Options::parse() else {
        eprintln!("dubbo_java: a benchmark (cargo bench --bench dubbo_java); nothing to test");
        return;
    };
    if java_peer::skipped("dubbo_java") {
        return;
    }
    let provider =
        JavaProvider::start_with_jvm_flags(&ProviderOptions::new("N/A"), BENCH_JVM_FLAGS);
    eprintln!(
        "dubbo_java: Java provider on {} ready in {:?}",
        provider.address(),
        provider.started_in()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (mut cases, dir) = rt.block_on(rust_cases(provider.port(), &opts.method));
    if let Some(only) = &opts.case {
        cases.retain(|c| c.name() == format!("switchman/{only}"));
        assert!(
            !cases.is_empty(),
            "--case cluster|invoker|connection|cluster-endpoints|endpoint"
        );
    }
    let provider_pid = provider.pid().expect("the provider runs");
    let cpu = Cpu::new(provider_pid);

    println!(
        "{:<22} {:>9} {:>10} {:>8} {:>8} {:>8} {:>6} {:>12} {:>12} {:>9}",
        "case",
        "in flight",
        "calls/s",
        "p50 µs",
        "p99 µs",
        "max µs",
        "errors",
        "consumer µs",
        "provider µs",
        "others %"
    );
    let mut rows = Vec::new();
    rt.block_on(async {
        let widest = opts.in_flight.iter().copied().max().unwrap_or(16);
        slice(&cases[0], widest, PROVIDER_WARM_UP, u64::MAX, &cpu, None).await;
        for &n in &opts.in_flight {
            for case in &cases {
                slice(case, n, opts.warm_up, u64::MAX, &cpu, None).await;
            }
            let mut tallies: Vec<Tally> = cases.iter().map(|_| Tally::default()).collect();
            // Each round starts with the next case, so no case always follows the same one.
            for round in 0..ROUNDS as usize {
                for k in 0..cases.len() {
                    let i = (round + k) % cases.len();
                    let length = opts.measure / ROUNDS;
                    slice(
                        &cases[i],
                        n,
                        length,
                        opts.max_calls,
                        &cpu,
                        Some(&mut tallies[i]),
                    )
                    .await;
                }
            }
            for (case, tally) in cases.iter().zip(tallies) {
                let row = tally.figures(case.name(), n, opts.measure);
                print_row(&row);
                rows.push(row);
            }
        }
    });
    drop(dir);

    let url = format!("dubbo://{}", provider.address());
    let levels = opts
        .in_flight
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let (warm_ms, measure_ms) = (
        opts.warm_up.as_millis().to_string(),
        opts.measure.as_millis().to_string(),
    );
    let (timeout_ms, max_calls) = (TIMEOUT.as_millis().to_string(), opts.max_calls.to_string());
    let (jvm_warm_ms, pid) = (
        JVM_WARM_UP.as_millis().to_string(),
        provider_pid.to_string(),
    );
    let mut java_version = Value::Null;
    let mut dubbo_version = Value::Null;
    let modes: &[&str] = if opts.rust_only {
        &[]
    } else {
        &["async", "sync"]
    };
    for mode in modes {
        let lines = java_peer::run_bench(&[
            "--url",
            &url,
            "--method",
            &opts.method,
            "--mode",
            mode,
            "--in-flight",
            &levels,
            "--warmup-ms",
            &warm_ms,
            "--measure-ms",
            &measure_ms,
            "--timeout-ms",
            &timeout_ms,
            "--max-calls",
            &max_calls,
            "--jvm-warmup-ms",
            &jvm_warm_ms,
            "--cpu-of",
            &pid,
        ]);
        for line in lines {
            assert_eq!(line["ok"], json!(true), "the Java bench failed: {line}");
            java_version = line["java_version"].clone();
            dubbo_version = line["dubbo_version"].clone();
            let mut row = json!({"case": format!("java/{mode}"), "load1": load1()});
            for key in [
                "in_flight",
                "calls",
                "errors",
                "seconds",
                "calls_per_s",
                "p50_us",
                "p99_us",
                "max_us",
            ] {
                row[key] = line[key].clone();
            }
            row["measure_s"] = json!(opts.measure.as_secs_f64());
            let calls = line["calls"].as_f64().unwrap_or(f64::NAN);
            let per_call = |ms: &Value| ms.as_f64().map_or(f64::NAN, |ms| ms * 1e3 / calls);
            row["consumer_cpu_us"] = json!(per_call(&line["cpu_ms"]));
            row["provider_cpu_us"] = json!(per_call(&line["peer_cpu_ms"]));
            let ms = |k: &str| line[k].as_f64().unwrap_or(f64::NAN);
            let seconds = line["seconds"].as_f64().unwrap_or(f64::NAN);
            row["other_cpu_pct"] =
                json!((ms("machine_busy_ms") - ms("cpu_ms") - ms("peer_cpu_ms")) / 10.0 / seconds);
            print_row(&row);
            rows.push(row);
        }
    }
    let failed: Vec<&Value> = rows
        .iter()
        .filter(|r| r["errors"].as_u64() != Some(0))
        .collect();
    assert!(failed.is_empty(), "calls failed: {failed:?}");

    let generated_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let report = json!({
        "generated_unix": generated_unix,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "method": opts.method,
        "warm_up_s": opts.warm_up.as_secs_f64(),
        "measure_s": opts.measure.as_secs_f64(),
        "rounds": ROUNDS,
        "timeout_ms": TIMEOUT.as_millis() as u64,
        "jvm_flags": BENCH_JVM_FLAGS,
        "provider_warm_up_s": PROVIDER_WARM_UP.as_secs_f64(),
        "jvm_warm_up_s": JVM_WARM_UP.as_secs_f64(),
        "java_version": java_version,
        "dubbo_version": dubbo_version,
        "rows": rows,
    });
    if let Some(parent) = opts.out.parent() {
        std::fs::create_dir_all(parent).expect("the output directory");
    }
    std::fs::write(&opts.out, serde_json::to_string_pretty(&report).unwrap())
        .expect("the figures file");
    println!("figures: {}", opts.out.display());
    drop(provider);
}
