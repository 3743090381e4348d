//! The chaos harness behind `tests/chaos.rs`: provider processes a scenario can `kill -9`, an
//! attempt-counting [`Invoker`], a paced load loop through a [`ClusterInvoker`], a TCP proxy that
//! cuts a client off its server, and the one line of [`Figures`] every scenario prints.
//!
//! Everything binds 127.0.0.1 only and is stopped when dropped.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{
    BoxFuture, ErrorKind, Instance, Invocation, Invoker, Protocol, Result, ServiceKey,
};
use switchman_discovery::{DirectoryConfig, RegistryDirectory};
use switchman_loadbalance::RoundRobinBalance;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

/// The method every scenario calls.
pub const METHOD: &str = "echo";

// ---------------------------------------------------------------------------------------------
// Providers
// ---------------------------------------------------------------------------------------------

/// A provider process (`src/bin/chaos_provider.rs`) serving on a 127.0.0.1 port; killed when
/// dropped. Its stdin is a pipe from this process, so it also exits when the test process dies.
#[derive(Debug)]
pub struct ProviderProcess {
    name: String,
    port: u16,
    child: Option<Child>,
}

impl ProviderProcess {
    /// Starts `bin --name name args...` and waits (at most 10 s) for the port it prints.
    ///
    /// # Panics
    /// When the binary cannot start or prints no port: the scenario means nothing without it.
    pub fn spawn(bin: &Path, name: &str, args: &[&str]) -> ProviderProcess {
        let mut child = Command::new(bin)
            .arg("--name")
            .arg(name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stdout = child.stdout.take().expect("the child's stdout is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
            let _ = tx.send(read);
        });
        let port = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(line)) => line.trim().parse::<u16>().ok(),
            _ => None,
        };
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("provider process {name} did not print its port within 10 s");
        };
        ProviderProcess {
            name: name.to_string(),
            port,
            child: Some(child),
        }
    }

    /// The provider's name (`--name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The port it serves on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`, the instance address the consumer uses.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `kill -9`: `Child::kill` sends SIGKILL on Unix. Waits for the process to end and
    /// returns its exit status.
    ///
    /// # Panics
    /// When the process was killed already or cannot be signalled.
    pub fn kill_9(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the provider process is running");
        child.kill().expect("SIGKILL the provider process");
        child.wait().expect("reap the killed provider process")
    }
}

impl Drop for ProviderProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An in-process provider answering `200 {"from": name}` (for scenarios whose subject is the
/// registry, not the provider process).
pub async fn serve_ok(name: &'static str) -> HttpProvider {
    HttpProvider::serve(([127, 0, 0, 1], 0).into(), move |_req| {
        Box::pin(async move { ProviderReply::Ok(json!({ "from": name })) })
    })
    .await
    .unwrap_or_else(|e| panic!("in-process provider {name} cannot bind 127.0.0.1:0: {e}"))
}

/// An HTTP instance of `service` on 127.0.0.1:`port`, without warm-up (a provider that joins
/// mid-run gets its full share at once, so the figures do not depend on the warm-up ramp).
pub fn http_instance(service: &ServiceKey, port: u16) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Http)
        .service(service.clone())
        .warmup(Duration::ZERO)
        .build()
}

/// The directory set-up every scenario uses: round robin, the default empty-list policy.
pub fn directory_config(service: ServiceKey) -> DirectoryConfig {
    DirectoryConfig::new(service).balancer(Arc::new(RoundRobinBalance::new()))
}

/// The addresses of the snapshot's instances, sorted.
pub fn addresses(dir: &RegistryDirectory) -> Vec<String> {
    let mut a: Vec<String> = dir
        .load()
        .instances()
        .iter()
        .map(|i| i.address().to_string())
        .collect();
    a.sort();
    a
}

// ---------------------------------------------------------------------------------------------
// Attempt counting
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct AddrLog {
    sent: u64,
    last_sent: Option<Instant>,
    ok_latencies: Vec<Duration>,
}

/// Wraps the transport and counts every attempt the cluster layer makes (the consumer-side
/// figure "attempts per call"), per address with the time of the last one, and the latency of
/// every attempt that answered successfully.
#[derive(Debug)]
pub struct CountingInvoker {
    inner: Arc<dyn Invoker>,
    attempts: AtomicU64,
    by_addr: Mutex<HashMap<String, AddrLog>>,
}

impl CountingInvoker {
    /// Counts the attempts made through `inner`.
    pub fn new(inner: Arc<dyn Invoker>) -> Arc<CountingInvoker> {
        Arc::new(CountingInvoker {
            inner,
            attempts: AtomicU64::new(0),
            by_addr: Mutex::new(HashMap::new()),
        })
    }

    fn log(&self) -> MutexGuard<'_, HashMap<String, AddrLog>> {
        self.by_addr.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attempts sent so far.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// Attempts sent to `address` so far.
    pub fn attempts_to(&self, address: &str) -> u64 {
        self.log().get(address).map_or(0, |l| l.sent)
    }

    /// When the last attempt to `address` was sent.
    pub fn last_attempt_to(&self, address: &str) -> Option<Instant> {
        self.log().get(address).and_then(|l| l.last_sent)
    }

    /// The latencies of the successful attempts on any of `addresses`.
    pub fn ok_latencies(&self, addresses: &[String]) -> Vec<Duration> {
        let log = self.log();
        addresses
            .iter()
            .filter_map(|a| log.get(a))
            .flat_map(|l| l.ok_latencies.iter().copied())
            .collect()
    }
}

impl Invoker for CountingInvoker {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let sent = Instant::now();
        self.attempts.fetch_add(1, Ordering::Relaxed);
        {
            let mut log = self.log();
            let entry = log.entry(target.address().to_string()).or_default();
            entry.sent += 1;
            entry.last_sent = Some(sent);
        }
        Box::pin(async move {
            let result = self.inner.invoke(target, invocation, timeout).await;
            if result.is_ok() {
                let took = sent.elapsed();
                self.log()
                    .entry(target.address().to_string())
                    .or_default()
                    .ok_latencies
                    .push(took);
            }
            result
        })
    }
}

/// A cluster invoker over `dir` whose attempts go through a [`CountingInvoker`] around a fresh
/// [`HttpInvoker`].
pub fn counted_cluster(
    dir: Arc<RegistryDirectory>,
    config: ClusterConfig,
) -> (ClusterInvoker, Arc<CountingInvoker>) {
    let counter = CountingInvoker::new(Arc::new(HttpInvoker::new()));
    let cluster = ClusterInvoker::new(dir, counter.clone(), config);
    (cluster, counter)
}

// ---------------------------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------------------------

/// One call made by the load loop.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord {
    /// When the call started.
    pub start: Instant,
    /// When it returned.
    pub end: Instant,
    /// `None` when it succeeded, else the error's kind.
    pub error: Option<ErrorKind>,
}

impl CallRecord {
    /// Whether the call succeeded.
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// How long the call took.
    pub fn latency(&self) -> Duration {
        self.end.saturating_duration_since(self.start)
    }
}

/// Steady load: `callers` tasks, each calling [`METHOD`] through the cluster invoker and then
/// sleeping `pace`, until stopped (or until each made its share of a fixed number of calls).
#[derive(Debug)]
pub struct Load {
    started: Instant,
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    callers: Vec<JoinHandle<Vec<CallRecord>>>,
}

impl Load {
    /// Starts the callers; they run until [`Load::stop`].
    pub fn start(cluster: ClusterInvoker, callers: usize, pace: Duration) -> Load {
        Self::spawn(cluster, callers, pace, None)
    }

    /// Makes exactly `calls` calls (split over `callers`) and returns them.
    pub async fn run(
        cluster: ClusterInvoker,
        callers: usize,
        pace: Duration,
        calls: usize,
    ) -> Calls {
        Self::spawn(cluster, callers, pace, Some(calls))
            .finish()
            .await
    }

    fn spawn(
        cluster: ClusterInvoker,
        callers: usize,
        pace: Duration,
        total: Option<usize>,
    ) -> Load {
        let callers = callers.max(1);
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let handles = (0..callers)
            .map(|k| {
                let limit = total.map(|t| t / callers + usize::from(k < t % callers));
                let (cluster, stop, ok, failed) =
                    (cluster.clone(), stop.clone(), ok.clone(), failed.clone());
                tokio::spawn(async move {
                    // Spread the callers over the pace interval.
                    if k > 0 && !pace.is_zero() {
                        tokio::time::sleep(pace * k as u32 / callers as u32).await;
                    }
                    let invocation = Invocation::new(METHOD);
                    let mut out = Vec::with_capacity(limit.unwrap_or(4096));
                    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| out.len() < l) {
                        let start = Instant::now();
                        let result = cluster.invoke(&invocation).await;
                        let end = Instant::now();
                        let error = match result {
                            Ok(_) => {
                                ok.fetch_add(1, Ordering::Relaxed);
                                None
                            }
                            Err(e) => {
                                if failed.fetch_add(1, Ordering::Relaxed) < 3 {
                                    eprintln!("chaos: call failed: {e}");
                                }
                                Some(e.kind())
                            }
                        };
                        out.push(CallRecord { start, end, error });
                        if !pace.is_zero() {
                            tokio::time::sleep(pace).await;
                        }
                    }
                    out
                })
            })
            .collect();
        Load {
            started: Instant::now(),
            stop,
            ok,
            failed,
            callers: handles,
        }
    }

    /// Successful calls so far.
    pub fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Failed calls so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Waits until `more` calls have succeeded after now.
    ///
    /// # Panics
    /// When they do not within `within`, naming `what`.
    pub async fn wait_for_ok(&self, more: u64, within: Duration, what: &str) {
        let target = self.ok() + more;
        let waited = tokio::time::timeout(within, async {
            while self.ok() < target {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "{what}: {more} more successful calls expected within {within:?}, got {} (failed so far: {})",
            self.ok() + more - target,
            self.failed()
        );
    }

    /// Stops the callers and returns every call they made.
    pub async fn stop(self) -> Calls {
        self.stop.store(true, Ordering::Relaxed);
        self.finish().await
    }

    async fn finish(self) -> Calls {
        let mut records = Vec::new();
        for h in self.callers {
            records.extend(h.await.expect("a load caller panicked"));
        }
        records.sort_by_key(|r| r.start);
        Calls {
            started: self.started,
            stopped: Instant::now(),
            records,
        }
    }
}

/// The calls a [`Load`] made, sorted by start.
#[derive(Debug, Clone)]
pub struct Calls {
    /// When the load started.
    pub started: Instant,
    /// When it stopped.
    pub stopped: Instant,
    /// Every call.
    pub records: Vec<CallRecord>,
}

impl Calls {
    /// Calls made.
    pub fn count(&self) -> u64 {
        self.records.len() as u64
    }

    /// Calls that failed.
    pub fn failed(&self) -> u64 {
        self.records.iter().filter(|r| !r.ok()).count() as u64
    }

    /// Successful calls in percent (100 when no call was made).
    pub fn success_pct(&self) -> f64 {
        success_pct(self.count(), self.failed())
    }

    /// How long the load ran.
    pub fn elapsed(&self) -> Duration {
        self.stopped.saturating_duration_since(self.started)
    }

    /// The longest time a caller of the service waited for a success: the longest interval
    /// between two consecutive successful completions (from the load's start to the first and
    /// from the last to the stop included).
    pub fn max_success_gap(&self) -> Duration {
        let mut ends: Vec<Instant> = self
            .records
            .iter()
            .filter(|r| r.ok())
            .map(|r| r.end)
            .collect();
        ends.sort();
        let mut last = self.started;
        let mut gap = Duration::ZERO;
        for e in ends.into_iter().chain(std::iter::once(self.stopped)) {
            gap = gap.max(e.saturating_duration_since(last));
            last = last.max(e);
        }
        gap
    }

    /// When the first successful call that started at or after `t` returned.
    pub fn first_success_after(&self, t: Instant) -> Option<Instant> {
        self.records
            .iter()
            .filter(|r| r.ok() && r.start >= t)
            .map(|r| r.end)
            .min()
    }

    /// The calls that started in `[from, to)`.
    pub fn started_between(&self, from: Instant, to: Instant) -> Vec<CallRecord> {
        self.records
            .iter()
            .filter(|r| r.start >= from && r.start < to)
            .copied()
            .collect()
    }

    /// The latency of every call (successful or not).
    pub fn latencies(&self) -> Vec<Duration> {
        self.records.iter().map(CallRecord::latency).collect()
    }

    /// Failures counted by error kind (`"no provider" => 12`).
    pub fn failures_by_kind(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for kind in self.records.iter().filter_map(|r| r.error) {
            *m.entry(kind.to_string()).or_insert(0) += 1;
        }
        m
    }
}

fn success_pct(calls: u64, failed: u64) -> f64 {
    if calls == 0 {
        100.0
    } else {
        100.0 * (calls - failed) as f64 / calls as f64
    }
}

/// The `q`-quantile (0..=1) of `samples` by nearest rank (zero for no sample).
pub fn percentile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut s = samples.to_vec();
    s.sort();
    let rank = (q.clamp(0.0, 1.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// A duration as whole milliseconds below 10 s (`12ms`), else seconds (`12.3s`), sub-ms with
/// one decimal (`0.4ms`).
pub fn ms(d: Duration) -> String {
    let m = d.as_secs_f64() * 1000.0;
    if m < 1.0 {
        format!("{m:.1}ms")
    } else if m < 10_000.0 {
        format!("{m:.0}ms")
    } else {
        format!("{:.1}s", m / 1000.0)
    }
}

// ---------------------------------------------------------------------------------------------
// Figures
// ---------------------------------------------------------------------------------------------

/// The one line of figures a scenario prints: calls, failed, success %, attempts per call,
/// max recovery time (defined per scenario, in the line's note), the longest caller-visible
/// gap between two successful calls, and scenario-specific figures.
#[derive(Debug, Clone)]
pub struct Figures {
    id: String,
    title: String,
    calls: u64,
    failed: u64,
    attempts: u64,
    recovery: Option<Duration>,
    max_gap: Option<Duration>,
    extra: Vec<(String, String)>,
    note: String,
}

impl Figures {
    /// Figures `id` (`"1"`, `"5a"`...) titled `title` for `calls`, with `attempts` counted on
    /// the consumer side.
    pub fn new(id: &str, title: &str, calls: &Calls, attempts: u64) -> Figures {
        Figures {
            id: id.to_string(),
            title: title.to_string(),
            calls: calls.count(),
            failed: calls.failed(),
            attempts,
            recovery: None,
            max_gap: Some(calls.max_success_gap()),
            extra: Vec::new(),
            note: String::new(),
        }
    }

    /// Sets the recovery time (`None` prints `n/a`).
    pub fn recovery(mut self, d: Option<Duration>) -> Self {
        self.recovery = d;
        self
    }

    /// Drops the max-gap figure (for scenarios where calls are meant to fail).
    pub fn without_gap(mut self) -> Self {
        self.max_gap = None;
        self
    }

    /// Adds a scenario-specific `key=value` figure.
    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.extra.push((key.to_string(), value.to_string()));
        self
    }

    /// Sets the note (what "recovery" means here, what was done).
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// Successful calls in percent.
    pub fn success_pct(&self) -> f64 {
        success_pct(self.calls, self.failed)
    }

    /// Attempts per call.
    pub fn attempts_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.attempts as f64 / self.calls as f64
        }
    }

    /// The line: `chaos 1 kill -9 provider: calls=2400 failed=0 success=100.000%
    /// attempts/call=1.004 recovery=12ms max-gap=15ms ... (note)`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "chaos {} {}: calls={} failed={} success={:.3}% attempts/call={:.3} recovery={}",
            self.id,
            self.title,
            self.calls,
            self.failed,
            self.success_pct(),
            self.attempts_per_call(),
            self.recovery.map_or_else(|| "n/a".to_string(), ms),
        );
        if let Some(gap) = self.max_gap {
            line.push_str(&format!(" max-gap={}", ms(gap)));
        }
        for (k, v) in &self.extra {
            line.push_str(&format!(" {k}={v}"));
        }
        if !self.note.is_empty() {
            line.push_str(&format!(" ({})", self.note));
        }
        line
    }

    /// Prints the line on stderr and writes it to `dir/chaos-<id>.txt` (replacing the previous
    /// run's), then rewrites `dir/chaos-figures.txt` as every `chaos-<id>.txt` there in
    /// scenario order.
    ///
    /// # Panics
    /// When the files cannot be written.
    pub fn emit(&self, dir: &Path) {
        let line = self.line();
        eprintln!("{line}");
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| panic!("create the figures directory {}: {e}", dir.display()));
        write_atomically(&dir.join(format!("chaos-{}.txt", self.id)), &(line + "\n"));
        let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("chaos-") && n.ends_with(".txt"))
                    && p.file_name().and_then(|n| n.to_str()) != Some(FIGURES_FILE)
            })
            .collect();
        parts.sort();
        let all: String = parts
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        write_atomically(&dir.join(FIGURES_FILE), &all);
    }
}

/// The file holding every scenario's line.
pub const FIGURES_FILE: &str = "chaos-figures.txt";

fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

// ---------------------------------------------------------------------------------------------
// A TCP proxy that can cut the line
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    Open,
    Cut,
}

/// Forwards 127.0.0.1:`addr()` to an upstream address; [`TcpProxy::cut`] closes every
/// connection and black-holes new ones (accepted, read and discarded, never answered or
/// forwarded) until [`TcpProxy::restore`]: what a client sees when its network partitions.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    line: Arc<watch::Sender<Line>>,
    conns: Arc<Mutex<Vec<AbortHandle>>>,
    accept: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a fresh 127.0.0.1 port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<TcpProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (line, _) = watch::channel(Line::Open);
        let line = Arc::new(line);
        let conns: Arc<Mutex<Vec<AbortHandle>>> = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn(accept_loop(listener, upstream, line.clone(), conns.clone()));
        Ok(TcpProxy {
            addr,
            line,
            conns,
            accept,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn switch(&self, to: Line) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        self.line.send_replace(to);
        for c in conns.drain(..) {
            c.abort();
        }
    }

    /// Cuts the line: open connections are closed, new ones are black-holed.
    pub fn cut(&self) {
        self.switch(Line::Cut);
    }

    /// Restores the line: black-holed connections are closed, new ones are forwarded.
    pub fn restore(&self) {
        self.switch(Line::Open);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            c.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    line: Arc<watch::Sender<Line>>,
    conns: Arc<Mutex<Vec<AbortHandle>>>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = client.set_nodelay(true);
        // Decided and registered under the lock `switch` takes: a connection accepted while
        // the line changes is either aborted by the switch or sees the new state.
        let mut open = conns.lock().unwrap_or_else(|p| p.into_inner());
        let task = if *line.borrow() == Line::Open {
            tokio::spawn(async move {
                let mut client = client;
                if let Ok(mut server) = TcpStream::connect(upstream).await {
                    let _ = server.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            })
        } else {
            tokio::spawn(async move {
                let mut client = client;
                let mut buf = [0u8; 1024];
                while matches!(client.read(&mut buf).await, Ok(n) if n > 0) {}
            })
        };
        open.retain(|c| !c.is_finished());
        open.push(task.abort_handle());
    }
}

// ---------------------------------------------------------------------------------------------
// Scratch files
// ---------------------------------------------------------------------------------------------

/// A fresh scratch directory (see [`crate::nacos_server::scratch_dir`]), removed when dropped.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Creates it.
    ///
    /// # Panics
    /// When it cannot be created.
    pub fn new(prefix: &str) -> ScratchDir {
        let p = crate::nacos_server::scratch_dir(prefix);
        std::fs::create_dir_all(&p)
            .unwrap_or_else(|e| panic!("create scratch directory {}: {e}", p.display()));
        ScratchDir(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
