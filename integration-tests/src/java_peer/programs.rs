//! The Java programs run to their end: the generic-invocation consumer, the Hessian2 vectors
//! and the benchmark consumer.

use std::io::{Read, Write};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::flags::BENCH_JVM_FLAGS;
use super::jvm::{collect_stderr, java, java_with, wait_bounded};

/// How long a consumer or vectors run may take before it is killed.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a `bench` run may take before it is killed.
pub const BENCH_TIMEOUT: Duration = Duration::from_secs(300);

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
/// `add(2, 3)` three times over tri:// on `interface` (generic: any name) in `group`, as a Java
/// Dubbo 3.x fleet would look a provider up; its JSON lines. Blocking.
///
/// # Panics
/// As [`run_consumer`], and when the consumer does not exit successfully.
pub fn force_application_adds(registry: &str, interface: &str, group: &str) -> Vec<Value> {
    let (status, lines) = run_consumer(&[
        "--registry",
        registry,
        "--interface",
        interface,
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

/// `vectors bench SECONDS` under [`super::BENCH_JVM_FLAGS`] (C2): hessian-lite's nanoseconds
/// per encode and per decode of `User.sample(7)` and of a list of 100 users, as Dubbo's
/// "hessian2" serialization does them per call: one JSON value per case
/// (`{"case": "user/encode", "ns", "bytes"}`).
pub fn vectors_bench(seconds: f64) -> Vec<Value> {
    let out = super::jvm::java_with("vectors", super::BENCH_JVM_FLAGS)
        .args(["bench", &seconds.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("java starts (the Java vectors bench): {e}"));
    assert!(
        out.status.success(),
        "java vectors bench exited {}; stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
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

/// The Java generic-invocation consumer kept for many runs (`consumer-serve`): Dubbo starts
/// once, then each [`JavaConsumer::run`] makes a fresh reference with the command's settings
/// (group, cluster, timeout, retries), makes its calls and destroys the reference (stopping
/// failback's background retries). One JVM start instead of one per run. The JVM ends when
/// this is dropped (its stdin closes), killed if it does not within [`RUN_TIMEOUT`].
pub struct JavaConsumer {
    process: LineProcess,
}

impl std::fmt::Debug for JavaConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JavaConsumer")
            .field("pid", &self.process.child.id())
            .finish()
    }
}

impl JavaConsumer {
    /// Starts the consumer of `interface` in `registry`.
    ///
    /// # Panics
    /// When java cannot be started.
    pub fn start(registry: &str, interface: &str) -> JavaConsumer {
        let mut cmd = java("consumer-serve");
        cmd.args(["--registry", registry, "--interface", interface]);
        JavaConsumer {
            process: LineProcess::spawn(cmd, "the Java consumer-serve"),
        }
    }

    /// Runs one command (`{"group", "cluster", "method", "types", "args", "count",
    /// "timeout_ms", "retries"?}`) and returns the JSON line of every call, as
    /// [`run_consumer`] does. Blocking.
    ///
    /// # Panics
    /// When the JVM exits or does not finish the command within [`RUN_TIMEOUT`].
    pub fn run(&mut self, command: &Value) -> Vec<Value> {
        self.run_counted(command, &std::sync::atomic::AtomicUsize::new(0))
    }

    /// [`JavaConsumer::run`], adding one to `progress` as each call's line arrives (for a test
    /// that acts while the calls run, e.g. stops a provider after the first ones).
    ///
    /// # Panics
    /// As [`JavaConsumer::run`].
    pub fn run_counted(
        &mut self,
        command: &Value,
        progress: &std::sync::atomic::AtomicUsize,
    ) -> Vec<Value> {
        self.process.send(&command.to_string()).unwrap_or_else(|e| {
            panic!(
                "the Java consumer took no command ({e}): {}",
                self.process.err()
            )
        });
        let deadline = std::time::Instant::now() + RUN_TIMEOUT;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.process.lines.recv_timeout(left).unwrap_or_else(|e| {
                panic!(
                    "the Java consumer did not finish {command} ({e}); stderr:\n{}",
                    self.process.err()
                )
            });
            if !line.trim_start().starts_with('{') {
                continue;
            }
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("consumer printed bad JSON ({e}): {line}"));
            if v["done"] == Value::Bool(true) {
                return out;
            }
            out.push(v);
            progress.fetch_add(1, std::sync::atomic::Ordering::Release);
        }
    }
}

/// A JVM whose stdin this process writes and whose stdout lines it reads (stderr kept for
/// messages). Dropping it closes its stdin (the peers end then) and waits for it, killed
/// after [`RUN_TIMEOUT`].
struct LineProcess {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl LineProcess {
    fn spawn(mut cmd: std::process::Command, what: &str) -> LineProcess {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("java starts ({what}): {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        collect_stderr(child.stderr.take().expect("piped stderr"), stderr.clone());
        let stdin = child.stdin.take();
        LineProcess {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// Writes `line` to its stdin.
    fn send(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").and_then(|()| stdin.flush())
    }

    fn err(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for LineProcess {
    fn drop(&mut self) {
        // End of stdin ends the JVM; bounded, then killed.
        drop(self.stdin.take());
        let _ = wait_bounded(&mut self.child, RUN_TIMEOUT);
    }
}

/// The Java big-fleet watcher (`fleet`, `Fleet.java`): a Java Dubbo consumer of a big fleet,
/// printing when its directory holds exactly the expected providers, then, after
/// [`JavaFleet::go`], when it holds the changed set.
pub struct JavaFleet {
    process: LineProcess,
}

impl std::fmt::Debug for JavaFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JavaFleet")
            .field("pid", &self.process.child.id())
            .finish()
    }
}

impl JavaFleet {
    /// Starts `fleet` with `args` under `jvm_flags`.
    ///
    /// # Panics
    /// When java cannot be started.
    pub fn start(args: &[&str], jvm_flags: &[&str]) -> JavaFleet {
        let mut cmd = java_with("fleet", jvm_flags);
        cmd.args(args);
        JavaFleet {
            process: LineProcess::spawn(cmd, "the Java fleet watcher"),
        }
    }

    /// Its next JSON line, within `timeout`; `Err` with its stderr when none comes.
    pub fn next(&mut self, timeout: Duration) -> Result<Value, String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.process.lines.recv_timeout(left).map_err(|e| {
                format!(
                    "no line from the Java fleet watcher ({e}); stderr:\n{}",
                    self.process.err()
                )
            })?;
            if line.trim_start().starts_with('{') {
                return serde_json::from_str(&line).map_err(|e| format!("bad JSON ({e}): {line}"));
            }
        }
    }

    /// Starts its second phase (the fleet has just been changed).
    pub fn go(&mut self) {
        let _ = self.process.send("go");
    }
}
