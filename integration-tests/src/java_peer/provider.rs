//! One running Java provider: its start, call counts, settle barrier and stop.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::flags::JVM_FLAGS;
use super::jvm::{collect_stderr, java_jar, wait_bounded};
use super::options::ProviderOptions;

/// How long a provider may take from spawn to `READY` (export and registration done).
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

/// How long [`JavaProvider::terminate`] waits for the JVM to exit after SIGTERM.
pub const TERMINATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The name of the thread that reads the `READY` and `CALL` lines of a provider started by
/// [`JavaProvider::start_with_jvm_flags`] (15 bytes, the most Linux keeps in `comm`).
pub const PROVIDER_STDOUT_THREAD: &str = "provider-stdout";

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

impl JavaProvider {
    /// [`JavaProvider::start`] with other JVM options than [`JVM_FLAGS`] (the benchmark runs
    /// its provider with [`BENCH_JVM_FLAGS`]). Its stdout (`READY`, then one `CALL` line per
    /// call) is read by a thread named [`PROVIDER_STDOUT_THREAD`] in batches, so counting the
    /// calls costs the benchmark process no wake-up per call.
    ///
    /// # Panics
    /// As [`JavaProvider::start`].
    ///
    /// [`BENCH_JVM_FLAGS`]: super::BENCH_JVM_FLAGS
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
