//! The chaos harness behind `tests/chaos.rs`: provider processes a scenario can `kill -9`, an
//! attempt-counting [`Invoker`], a paced load loop through a [`ClusterInvoker`], a TCP proxy that
//! cuts a client off its server, and the one line of [`Figures`] every scenario prints.
//!
//! Everything binds 127.0.0.1 only and is stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{BoxFuture, Instance, Invocation, Invoker, Protocol, Result, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory};
use switchman_loadbalance::RoundRobinBalance;

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

/// Resolves when this process's stdin reaches end of file. A provider process a scenario spawns
/// ([`ProviderProcess`] pipes its stdin) serves until then, so it exits when the test process
/// that spawned it closes the pipe or dies: no orphan outlives a crashed test run.
pub async fn stdin_closed() {
    let _ = tokio::task::spawn_blocking(|| {
        use std::io::Read;
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    })
    .await;
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

/// One attempt the cluster layer made, as [`CountingInvoker`] saw it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The task it ran on (the calling task: see [`CallRecord::task`]).
    pub task: Option<tokio::task::Id>,
    /// The instance it went to.
    pub address: String,
    /// When it was sent.
    pub sent: Instant,
    /// When it answered successfully (`None`: it failed, or was cancelled first).
    pub answered: Option<Instant>,
}

/// Wraps the transport and keeps every attempt the cluster layer makes ([`Attempt`]): the
/// consumer-side figure "attempts per call", per address with the time of the last one, and
/// the latency of every attempt that answered successfully are read from them.
#[derive(Debug)]
pub struct CountingInvoker {
    inner: Arc<dyn Invoker>,
    each: Mutex<Vec<Attempt>>,
}

impl CountingInvoker {
    /// Counts the attempts made through `inner`.
    pub fn new(inner: Arc<dyn Invoker>) -> Arc<CountingInvoker> {
        Arc::new(CountingInvoker {
            inner,
            each: Mutex::new(Vec::new()),
        })
    }

    /// Attempts sent so far.
    pub fn attempts(&self) -> u64 {
        self.each().len() as u64
    }

    /// Attempts sent to `address` so far.
    pub fn attempts_to(&self, address: &str) -> u64 {
        self.each().iter().filter(|a| a.address == address).count() as u64
    }

    /// When the last attempt to `address` was sent.
    pub fn last_attempt_to(&self, address: &str) -> Option<Instant> {
        self.each()
            .iter()
            .filter(|a| a.address == address)
            .map(|a| a.sent)
            .max()
    }

    fn each(&self) -> MutexGuard<'_, Vec<Attempt>> {
        self.each.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The attempts of `call` (a call of [`Load`]): those sent on its task while it ran, in the
    /// order they were sent.
    pub fn attempts_of(&self, call: &CallRecord) -> Vec<Attempt> {
        self.each()
            .iter()
            .filter(|a| {
                call.task.is_some()
                    && a.task == call.task
                    && a.sent >= call.start
                    && a.sent <= call.end
            })
            .cloned()
            .collect()
    }

    /// The latencies of the successful attempts on any of `addresses`.
    pub fn ok_latencies(&self, addresses: &[String]) -> Vec<Duration> {
        self.each()
            .iter()
            .filter(|a| addresses.contains(&a.address))
            .filter_map(|a| a.answered.map(|t| t.saturating_duration_since(a.sent)))
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
        let index = {
            let mut each = self.each();
            each.push(Attempt {
                task: tokio::task::try_id(),
                address: target.address().to_string(),
                sent: Instant::now(),
                answered: None,
            });
            each.len() - 1
        };
        Box::pin(async move {
            let result = self.inner.invoke(target, invocation, timeout).await;
            if result.is_ok() {
                self.each()[index].answered = Some(Instant::now());
            }
            result
        })
    }

    fn bounds_timeout(&self) -> bool {
        self.inner.bounds_timeout()
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

mod figures;
mod load;
mod proxy;
mod usage;

pub use figures::*;
pub use load::*;
pub use proxy::*;
pub use usage::*;
