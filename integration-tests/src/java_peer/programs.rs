//! The Java programs run to their end: the generic-invocation consumer, the Hessian2 vectors
//! and the benchmark consumer.

use std::io::{Read, Write};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::flags::BENCH_JVM_FLAGS;
use super::jvm::{collect_stderr, java, java_with, wait_bounded};
use super::peers::DEMO_SERVICE;

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
