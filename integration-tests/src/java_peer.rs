//! Real Java Apache Dubbo 3.3 peers (`peers/java`, see its README.md): a provider of
//! `io.switchman.peers.DemoService` over dubbo:// or tri://, a generic-invocation consumer, and
//! Hessian2 vectors written and read by Dubbo's own serializer.
//!
//! The built peers are the directory in `$SWITCHMAN_JAVA_PEERS` (set by `scripts/test`), else
//! what `scripts/install-java-peers` prints (it builds once into the cache directory outside the
//! clone, offline when the cache has everything). Every JVM gets the same small, fast-starting
//! settings ([`JVM_FLAGS`]). A [`JavaProvider`] is killed (SIGKILL) when dropped.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a provider may take from spawn to `READY` (export and registration done).
pub const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a consumer or vectors run may take before it is killed.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long [`JavaProvider::terminate`] waits for the JVM to exit after SIGTERM.
pub const TERMINATE_TIMEOUT: Duration = Duration::from_secs(30);
/// JVM options for quick starts and a small footprint (C1 only, serial GC, 256 MiB heap).
pub const JVM_FLAGS: &[&str] = &[
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-Xmx256m",
    "-XX:-UsePerfData",
];
/// Most of a peer's stderr kept for panic messages (the tail is kept).
const STDERR_CAP: usize = 256 * 1024;

/// The interface every Java peer serves.
pub const DEMO_SERVICE: &str = "io.switchman.peers.DemoService";

/// [`JVM_FLAGS`] and Dubbo's `dubbo.provider.token=true`: the provider's default
/// `ProviderConfig` asks for a token, so the export registers a random UUID as its `token`
/// (what `<dubbo:provider token="true"/>` or `@DubboService(token = "true")` do). For
/// [`JavaProvider::start_with_jvm_flags`].
pub fn token_true_jvm_flags() -> Vec<&'static str> {
    let mut flags = JVM_FLAGS.to_vec();
    flags.push("-Ddubbo.provider.token=true");
    flags
}

/// Whether the tests that start a JVM must skip: only when `scripts/test` found no JDK or Maven
/// and said so (`SWITCHMAN_NO_JAVA=1`). Anywhere else a missing peer fails the test.
pub fn skipped(test: &str) -> bool {
    let skip = std::env::var_os("SWITCHMAN_NO_JAVA").is_some_and(|v| v == "1");
    if skip {
        eprintln!("{test}: skipped, no JDK or Maven on this machine (SWITCHMAN_NO_JAVA=1)");
    }
    skip
}

/// The directory with `switchman-java-peers.jar` and `lib/`.
///
/// # Panics
/// When `$SWITCHMAN_JAVA_PEERS` is not set and `scripts/install-java-peers` fails (no Java or
/// Maven, or the build failed); the message says which.
pub fn peers_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = match std::env::var("SWITCHMAN_JAVA_PEERS") {
            Ok(d) if !d.is_empty() => PathBuf::from(d),
            _ => install(),
        };
        assert!(
            dir.join("switchman-java-peers.jar").is_file(),
            "{} has no switchman-java-peers.jar: run scripts/install-java-peers (scripts/test does) \
             or set SWITCHMAN_JAVA_PEERS to the directory it prints",
            dir.display()
        );
        dir
    })
}

/// Runs `scripts/install-java-peers` and returns the directory it prints.
fn install() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-java-peers");
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    match out.status.code() {
        Some(0) => {}
        Some(3) => panic!(
            "the Java peers need java and mvn on PATH (install-java-peers exited 3); \
             SWITCHMAN_JAVA_PEERS is not set either"
        ),
        _ => panic!(
            "{} failed ({}): see its log above; SWITCHMAN_JAVA_PEERS is not set",
            script.display(),
            out.status
        ),
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!dir.is_empty(), "install-java-peers printed no directory");
    PathBuf::from(dir)
}

/// The system property that makes a peer exit when its stdin reaches end of file (set for
/// providers, whose stdin is a pipe from this process; `Main.java`).
const EXIT_WITH_PARENT: &str = "switchman.peer.exitWithParent";

/// `java <JVM_FLAGS> -jar <peers jar> <program>`, run from the temp directory.
fn java(program: &str) -> Command {
    java_with(program, JVM_FLAGS)
}

/// Collects a child's stderr into a shared, capped buffer.
fn collect_stderr<R: Read + Send + 'static>(
    mut from: R,
    into: Arc<Mutex<String>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut s = into.lock().unwrap_or_else(|e| e.into_inner());
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            if s.len() > STDERR_CAP {
                let mut cut = s.len() - STDERR_CAP;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                s.drain(..cut);
            }
        }
    })
}

/// Waits for `child` up to `timeout`; kills it (SIGKILL) when it is still running then.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The provider's command line, built up by methods. Only `registry` is required; everything
/// else defaults as in the Java program (dubbo protocol, interface-level registration, ...).
#[derive(Debug, Clone, Default)]
pub struct ProviderOptions {
    /// `dubbo` or `tri` (default `dubbo`).
    pub protocol: Option<String>,
    /// `zookeeper://127.0.0.1:PORT` or `nacos://127.0.0.1:PORT`.
    pub registry: String,
    /// 0 takes one from [`crate::ports::allocate`], and the JVM is told it: Dubbo 3.3 takes no
    /// port the OS chooses (a protocol port of 0 is its default, 20880 for dubbo and 50051 for
    /// tri; -1 a scan up from that default, which races between JVMs that start at once).
    pub port: u16,
    /// The service's weight parameter.
    pub weight: Option<u32>,
    /// The service group.
    pub group: Option<String>,
    /// The service version.
    pub version: Option<String>,
    /// The application name (default `switchman-java-provider`).
    pub application: Option<String>,
    /// `interface`, `instance` or `all` (default `interface`).
    pub register_mode: Option<String>,
    /// `local` or `remote` (default `local`).
    pub metadata_type: Option<String>,
    /// The instance name in replies and `CALL` lines (default `127.0.0.1:<port>`).
    pub name: Option<String>,
    /// The protocol's heartbeat interval.
    pub heartbeat_ms: Option<u64>,
    /// Dubbo's shutdown wait (default 2000 ms).
    pub shutdown_wait_ms: Option<u64>,
    /// Extra service URL parameters, e.g. `("timeout", "500")`.
    pub params: Vec<(String, String)>,
    /// The release of `DemoService` to export: `v1` (default) or `v2` (the upgraded interface,
    /// one more method `greet(String)`, run from [`DEMO_SERVICE_V2_JAR`]).
    pub demo_service: Option<String>,
}

impl ProviderOptions {
    /// A dubbo:// provider registered at `registry`, on a port from [`crate::ports::allocate`].
    pub fn new(registry: impl Into<String>) -> Self {
        ProviderOptions {
            registry: registry.into(),
            ..Default::default()
        }
    }

    /// A dubbo:// provider registered in the ZooKeeper at `addr` (`host:port`).
    pub fn zookeeper(addr: &str) -> Self {
        Self::new(format!("zookeeper://{addr}"))
    }

    /// A dubbo:// provider registered in the Nacos at `addr` (`host:http-port`).
    pub fn nacos(addr: &str) -> Self {
        Self::new(format!("nacos://{addr}"))
    }

    /// `dubbo` or `tri`.
    pub fn protocol(mut self, p: &str) -> Self {
        self.protocol = Some(p.to_string());
        self
    }

    /// A fixed port (0 = one from [`crate::ports::allocate`]).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The weight parameter.
    pub fn weight(mut self, w: u32) -> Self {
        self.weight = Some(w);
        self
    }

    /// The service group.
    pub fn group(mut self, g: &str) -> Self {
        self.group = Some(g.to_string());
        self
    }

    /// The service version.
    pub fn version(mut self, v: &str) -> Self {
        self.version = Some(v.to_string());
        self
    }

    /// The application name.
    pub fn application(mut self, a: &str) -> Self {
        self.application = Some(a.to_string());
        self
    }

    /// `interface`, `instance` or `all`.
    pub fn register_mode(mut self, m: &str) -> Self {
        self.register_mode = Some(m.to_string());
        self
    }

    /// `local` or `remote`.
    pub fn metadata_type(mut self, t: &str) -> Self {
        self.metadata_type = Some(t.to_string());
        self
    }

    /// The instance name.
    pub fn name(mut self, n: &str) -> Self {
        self.name = Some(n.to_string());
        self
    }

    /// The heartbeat interval.
    pub fn heartbeat_ms(mut self, ms: u64) -> Self {
        self.heartbeat_ms = Some(ms);
        self
    }

    /// Dubbo's shutdown wait.
    pub fn shutdown_wait_ms(mut self, ms: u64) -> Self {
        self.shutdown_wait_ms = Some(ms);
        self
    }

    /// One extra service URL parameter.
    pub fn param(mut self, k: &str, v: &str) -> Self {
        self.params.push((k.to_string(), v.to_string()));
        self
    }

    /// The release of `DemoService`: `v1` or `v2` (same interface name, plus
    /// `greet(String)` → `"greetings, <name> from <instance> (v2)"`: a provider upgraded in
    /// place with a new method).
    pub fn demo_service(mut self, release: &str) -> Self {
        self.demo_service = Some(release.to_string());
        self
    }

    /// The jar the provider runs from: the v2 jar for `demo_service("v2")` (its classes shadow
    /// the main jar's), else the main one.
    fn jar(&self) -> &'static str {
        match self.demo_service.as_deref() {
            Some("v2") => DEMO_SERVICE_V2_JAR,
            _ => "switchman-java-peers.jar",
        }
    }

    fn args(&self, port: u16) -> Vec<String> {
        let mut a = vec!["--registry".to_string(), self.registry.clone()];
        a.extend(["--port".to_string(), port.to_string()]);
        let mut opt = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.extend([flag.to_string(), v]);
            }
        };
        opt("--protocol", self.protocol.clone());
        opt("--weight", self.weight.map(|w| w.to_string()));
        opt("--group", self.group.clone());
        opt("--version", self.version.clone());
        opt("--application", self.application.clone());
        opt("--register-mode", self.register_mode.clone());
        opt("--metadata-type", self.metadata_type.clone());
        opt("--name", self.name.clone());
        opt("--demo-service", self.demo_service.clone());
        opt("--heartbeat-ms", self.heartbeat_ms.map(|v| v.to_string()));
        opt(
            "--shutdown-wait-ms",
            self.shutdown_wait_ms.map(|v| v.to_string()),
        );
        for (k, v) in &self.params {
            a.extend(["--param".to_string(), format!("{k}={v}")]);
        }
        a
    }
}

/// One running Java Dubbo provider.
#[derive(Debug)]
pub struct JavaProvider {
    child: Option<Child>,
    port: u16,
    protocol: String,
    name: String,
    started_in: Duration,
    calls: Arc<Mutex<HashMap<String, usize>>>,
    stderr: Arc<Mutex<String>>,
    stderr_thread: Option<JoinHandle<()>>,
    /// Registered at the application level (`register-mode` instance or all): stopped with
    /// SIGTERM when dropped, see the `Drop` impl.
    app_level: bool,
}

impl JavaProvider {
    /// Spawns the provider and waits until it printed `READY` (exported and registered).
    ///
    /// # Panics
    /// When it does not get ready within [`START_TIMEOUT`] or exits first; the message
    /// carries its stderr.
    pub fn start(opts: &ProviderOptions) -> JavaProvider {
        Self::launch(opts, JVM_FLAGS, false)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:{port}`, the address it registers.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `dubbo` or `tri`, as it reported when ready.
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// The instance name its replies carry.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// From spawn to `READY`.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Calls served so far (all methods).
    pub fn calls(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum()
    }

    /// Calls of `method` served so far.
    pub fn calls_of(&self, method: &str) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    /// Calls of `method` once the provider's output has caught up with `expected` (its `CALL`
    /// lines are printed before a reply leaves, but read by another thread, so a count read
    /// right after the last reply may lag), or what was counted after `within`; a count above
    /// `expected` is returned at once.
    pub fn calls_of_settled(&self, method: &str, expected: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let n = self.calls_of(method);
            if n >= expected || Instant::now() >= deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A barrier on the output: calls `ping` straight at this provider (its endpoint in
    /// `snapshot`, through `invoker`) and waits (at most 10 s) until its `CALL ping` line is read.
    /// The provider prints a call's line before the reply leaves and its lines are read in
    /// order, so once this returns every call that reached it before is counted: a retry that
    /// happened shows, and one that did not cannot show later. No sleep.
    pub async fn settle(
        &self,
        snapshot: &switchman_discovery::Snapshot,
        invoker: &dyn switchman_core::Invoker,
    ) {
        let endpoint = snapshot
            .endpoints()
            .iter()
            .find(|e| e.instance.port() == self.port())
            .unwrap_or_else(|| panic!("{} is not in the snapshot", self.address()));
        let pings = self.calls_of("ping");
        invoker
            .invoke(
                &endpoint.instance,
                &switchman_core::Invocation::new("ping"),
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("ping {}: {e}", self.address()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.calls_of("ping") == pings {
            assert!(
                Instant::now() < deadline,
                "{} answered ping but its CALL line was never read",
                self.address()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// What it wrote on stderr so far (its logs; the last 256 KiB).
    pub fn output(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The JVM's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills it with SIGKILL and waits for it to exit: no unregistration, as after a crash.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM, so Dubbo's shutdown hook runs (graceful: read-only event to connected
    /// consumers, unregistration), and waits up to [`TERMINATE_TIMEOUT`] for the JVM to exit,
    /// then kills it. Returns the exit status, `None` when it had to be killed.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !sent {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        wait_bounded(&mut child, TERMINATE_TIMEOUT)
    }
}

/// Killed (SIGKILL) when dropped, except a provider registered at the application level: it is
/// stopped with SIGTERM ([`JavaProvider::terminate`]), so Dubbo removes its instance node. A
/// killed one's node stays until its ZooKeeper session expires (Curator's 60 s), and meanwhile
/// every Java consumer of `DemoService` in `APPLICATION_FIRST` (Dubbo 3.3's default) in the same
/// ZooKeeper finds the application through the shared mapping and retries the dead instance's
/// MetadataService, for longer than a test waits. A test that wants the kill calls
/// [`JavaProvider::kill9`] itself.
impl Drop for JavaProvider {
    fn drop(&mut self) {
        if self.app_level {
            self.terminate();
        } else {
            self.kill9();
        }
    }
}

/// Runs the Java generic-invocation consumer with `args` (its flags, see peers/java/README.md)
/// and returns its exit status and the JSON line of every call (`{"ok":true,"result":..}` or
/// `{"ok":false,"error":"<class>: <message>"}`). Its stderr is printed (captured by the test
/// harness) when it fails.
///
/// # Panics
/// When java cannot be started or it runs longer than [`RUN_TIMEOUT`].
pub fn run_consumer(args: &[&str]) -> (ExitStatus, Vec<Value>) {
    let (status, stdout, stderr) = run("consumer", args, None);
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("consumer printed bad JSON ({e}): {l}"))
        })
        .collect();
    if !status.success() {
        eprintln!("java consumer {args:?} exited {status}; stderr:\n{stderr}");
    }
    (status, lines)
}

/// The Java consumer in `FORCE_APPLICATION` (application-level discovery only) calling
/// `add(2, 3)` three times over tri:// on `DemoService` in `group`, as a Java Dubbo 3.x fleet
/// would look a provider up; its JSON lines. Blocking.
///
/// # Panics
/// As [`run_consumer`], and when the consumer does not exit successfully.
pub fn force_application_adds(registry: &str, group: &str) -> Vec<Value> {
    let (status, lines) = run_consumer(&[
        "--registry",
        registry,
        "--interface",
        DEMO_SERVICE,
        "--group",
        group,
        "--protocol",
        "tri",
        "--migration",
        "FORCE_APPLICATION",
        "--method",
        "add",
        "--types",
        "int,int",
        "--args",
        "[2,3]",
        "--count",
        "3",
        "--timeout-ms",
        "5000",
    ]);
    assert!(status.success(), "{lines:?}");
    lines
}

/// `vectors encode`: `{"dubbo_version","hessian_lite_version","vectors":[{"name","hex"}]}`.
///
/// # Panics
/// When the program fails or prints no JSON.
pub fn vectors_encode() -> Value {
    vectors("encode", None)
}

/// `vectors decode` of `input` (`{"vectors":[{"name","hex"}]}`): per vector its decoded
/// `class`, whether it `equal`s the Java value of that name, `reencoded_hex`, or `error`.
///
/// # Panics
/// When the program fails or prints no JSON.
pub fn vectors_decode(input: &Value) -> Value {
    vectors("decode", Some(input.to_string()))
}

fn vectors(mode: &str, stdin: Option<String>) -> Value {
    let (status, stdout, stderr) = run("vectors", &[mode], stdin);
    assert!(
        status.success(),
        "java vectors {mode} exited {status}; stderr:\n{stderr}"
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("java vectors {mode} printed no JSON ({e}); stderr:\n{stderr}"))
}

/// Runs one program to its end (bounded), feeding `stdin`; returns (status, stdout, stderr).
fn run(program: &str, args: &[&str], stdin: Option<String>) -> (ExitStatus, String, String) {
    let mut child = java(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("java starts (the Java {program}): {e}"));
    let writer = stdin.map(|input| {
        let mut pipe = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        })
    });
    let mut out = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = Arc::new(Mutex::new(String::new()));
    let err_thread = collect_stderr(child.stderr.take().expect("piped stderr"), stderr.clone());
    let status = wait_bounded(&mut child, RUN_TIMEOUT);
    if let Some(w) = writer {
        let _ = w.join();
    }
    let stdout = reader.join().unwrap_or_default();
    let _ = err_thread.join();
    let stderr = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match status {
        Some(s) => (s, stdout, stderr),
        None => panic!(
            "java {program} {args:?} ran longer than {RUN_TIMEOUT:?} and was killed; stderr:\n{stderr}"
        ),
    }
}

/// JVM options of the benchmark's JVMs (`benches/dubbo_java.rs`: the provider and the Java
/// consumer `bench`): the JVM's own defaults (tiered C1 + C2, the default collector) with a
/// 512 MiB heap, unlike [`JVM_FLAGS`], which trade peak speed for quick starts.
pub const BENCH_JVM_FLAGS: &[&str] = &["-Xms512m", "-Xmx512m", "-XX:-UsePerfData"];
/// The name of the thread that reads the `READY` and `CALL` lines of a provider started by
/// [`JavaProvider::start_with_jvm_flags`] (15 bytes, the most Linux keeps in `comm`).
pub const PROVIDER_STDOUT_THREAD: &str = "provider-stdout";
/// How long a `bench` run may take before it is killed.
pub const BENCH_TIMEOUT: Duration = Duration::from_secs(300);

/// The jar (beside `switchman-java-peers.jar`) holding the upgraded `DemoService` and
/// `DemoServiceImpl` (`peers/java/src/v2/java`); its manifest puts the main jar after it.
pub const DEMO_SERVICE_V2_JAR: &str = "switchman-java-peers-v2.jar";

/// `java <jvm_flags> -jar <peers jar> <program>`, run from the temp directory.
fn java_with(program: &str, jvm_flags: &[&str]) -> Command {
    java_jar("switchman-java-peers.jar", program, jvm_flags)
}

/// `java <jvm_flags> -jar <peers dir>/<jar> <program>`, run from the temp directory.
fn java_jar(jar: &str, program: &str, jvm_flags: &[&str]) -> Command {
    let path = peers_dir().join(jar);
    assert!(
        path.is_file(),
        "{} is missing: SWITCHMAN_JAVA_PEERS is an older build; rerun scripts/install-java-peers",
        path.display()
    );
    let mut cmd = Command::new("java");
    cmd.args(jvm_flags)
        .arg(format!("-D{EXIT_WITH_PARENT}={}", program == "provider"))
        .arg("-jar")
        .arg(path)
        .arg(program)
        .current_dir(std::env::temp_dir());
    cmd
}

impl JavaProvider {
    /// [`JavaProvider::start`] with other JVM options than [`JVM_FLAGS`] (the benchmark runs
    /// its provider with [`BENCH_JVM_FLAGS`]). Its stdout (`READY`, then one `CALL` line per
    /// call) is read by a thread named [`PROVIDER_STDOUT_THREAD`] in batches, so counting the
    /// calls costs the benchmark process no wake-up per call.
    ///
    /// # Panics
    /// As [`JavaProvider::start`].
    pub fn start_with_jvm_flags(opts: &ProviderOptions, jvm_flags: &[&str]) -> JavaProvider {
        Self::launch(opts, jvm_flags, true)
    }

    /// Spawns the provider under `jvm_flags` and waits for `READY`. With `batch_reads`, the
    /// stdout reader sleeps 5 ms whenever it has drained the pipe once the provider is ready
    /// (for benchmarks: one wake-up per batch of `CALL` lines instead of one per call); tests
    /// read line by line, so a call's `CALL` line is counted as soon as it is printed.
    fn launch(opts: &ProviderOptions, jvm_flags: &[&str], batch_reads: bool) -> JavaProvider {
        let port = if opts.port == 0 {
            crate::ports::allocate()
        } else {
            opts.port
        };
        let started = Instant::now();
        // The JVM exits (gracefully) when its stdin reaches end of file: when this process
        // dies, even by SIGKILL, no provider outlives it (the pipe stays open in `Child`).
        let mut child = java_jar(opts.jar(), "provider", jvm_flags)
            .args(opts.args(port))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("java starts (the Java provider)");
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_thread =
            collect_stderr(child.stderr.take().expect("piped stderr"), stderr.clone());
        let calls = Arc::new(Mutex::new(HashMap::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let counts = calls.clone();
        // Named, so a benchmark can tell this thread's CPU time from its own. Once the
        // provider is ready, the thread sleeps 5 ms whenever it has drained the pipe, so it
        // reads the `CALL` lines in batches instead of waking up for each call (the pipe's
        // 64 KiB hold 5 ms of ~300k calls/s).
        let reader = std::thread::Builder::new().name(PROVIDER_STDOUT_THREAD.into());
        reader
            .spawn(move || {
                let mut from = BufReader::with_capacity(64 * 1024, stdout);
                let mut line = String::new();
                let mut ready = false;
                loop {
                    if batch_reads && ready && from.buffer().is_empty() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    line.clear();
                    if !matches!(from.read_line(&mut line), Ok(n) if n > 0) {
                        break;
                    }
                    let mut words = line.split_whitespace();
                    match words.next() {
                        Some("READY") => {
                            let proto = words.next().unwrap_or_default().to_string();
                            let port = words.next().and_then(|p| p.parse::<u16>().ok());
                            let _ = ready_tx.send((proto, port));
                            ready = true;
                        }
                        Some("CALL") => {
                            if let Some(method) = words.nth(1) {
                                *counts
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .entry(method.to_string())
                                    .or_insert(0) += 1;
                            }
                        }
                        _ => {}
                    }
                }
            })
            .expect("a thread reading the provider's stdout");
        let mut peer = JavaProvider {
            child: Some(child),
            port,
            protocol: opts.protocol.clone().unwrap_or_else(|| "dubbo".into()),
            name: opts
                .name
                .clone()
                .unwrap_or_else(|| format!("127.0.0.1:{port}")),
            started_in: Duration::ZERO,
            calls,
            stderr,
            stderr_thread: Some(stderr_thread),
            app_level: matches!(opts.register_mode.as_deref(), Some("instance" | "all")),
        };
        match ready_rx.recv_timeout(START_TIMEOUT) {
            Ok((proto, Some(p))) => {
                peer.protocol = proto;
                peer.port = p;
                peer.started_in = started.elapsed();
                peer
            }
            other => {
                peer.kill9();
                if let Some(t) = peer.stderr_thread.take() {
                    let _ = t.join();
                }
                panic!(
                    "the Java provider ({:?}, JVM {jvm_flags:?}) did not get ready on port {port} within {START_TIMEOUT:?} ({other:?}); stderr:\n{}",
                    opts.args(port),
                    peer.output()
                );
            }
        }
    }
}

/// Runs the Java Dubbo benchmark consumer `bench` with `args` (its flags, see
/// peers/java/README.md) under [`BENCH_JVM_FLAGS`] and returns its JSON line per in-flight
/// level (`{"ok":true,"mode","method","in_flight","calls","errors","seconds","calls_per_s",
/// "p50_us","p99_us","max_us",...}`).
///
/// # Panics
/// When java cannot be started, it runs longer than [`BENCH_TIMEOUT`], exits with an error or
/// prints no result; the message carries its stderr.
pub fn run_bench(args: &[&str]) -> Vec<Value> {
    let mut child = java_with("bench", BENCH_JVM_FLAGS)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("java starts (the Java bench): {e}"));
    let mut out = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = Arc::new(Mutex::new(String::new()));
    let err_thread = collect_stderr(child.stderr.take().expect("piped stderr"), stderr.clone());
    let status = wait_bounded(&mut child, BENCH_TIMEOUT);
    let stdout = reader.join().unwrap_or_default();
    let _ = err_thread.join();
    let stderr = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("bench printed bad JSON ({e}): {l}"))
        })
        .collect();
    match status {
        Some(s) if s.success() && !lines.is_empty() => lines,
        Some(s) => panic!("java bench {args:?} exited {s}: {lines:?}; stderr:\n{stderr}"),
        None => panic!(
            "java bench {args:?} ran longer than {BENCH_TIMEOUT:?} and was killed; stderr:\n{stderr}"
        ),
    }
}
