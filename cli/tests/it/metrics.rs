//! `--metrics`: Prometheus scrapes of a running `switchman call` (and `watch`, `provider`)
//! against in-process HTTP providers.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::provider::{HttpProvider, ProviderReply};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_switchman"))
}

/// A port for the exporter, which binds it a moment later: below the kernel's ephemeral range,
/// so no `connect()` or `bind(0)` of another process can take it in between
/// (`switchman_integration_tests::ports`).
fn free_port() -> u16 {
    switchman_integration_tests::ports::allocate()
}

/// One `GET /metrics`; `None` while nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// One sample line: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("name value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split("\",")
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("k=v");
                (k.to_string(), v.trim_matches('"').to_string())
            })
            .collect();
        out.push((name.to_string(), labels, value));
    }
    out
}

fn with<'a>(all: &'a [Sample], name: &str, want: &[(&str, &str)]) -> Vec<&'a Sample> {
    all.iter()
        .filter(|(n, l, _)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn sum(all: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    with(all, name, want).iter().map(|s| s.2).sum()
}

/// Scrapes `child`'s endpoint every 100 ms until it exits; returns the last scrape and the
/// number of scrapes that answered.
fn scrape_until_exit(child: &mut Child, port: u16, limit: Duration) -> (String, usize) {
    let started = Instant::now();
    let mut last = String::new();
    let mut answered = 0;
    loop {
        if let Some(body) = scrape(port) {
            last = body;
            answered += 1;
        }
        if child.try_wait().unwrap().is_some() {
            return (last, answered);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("the command did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A provider whose answers cycle through: 3 ms and OK (mostly), 503 (retryable: transport),
/// 500 (business) and, once in 50, 300 ms (past the caller's 100 ms timeout).
async fn mixed_provider() -> HttpProvider {
    let n = Arc::new(AtomicU64::new(0));
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |req| {
        let k = n.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            match k % 50 {
                7 => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    ProviderReply::Ok(json!("late"))
                }
                k if k % 10 < 3 => ProviderReply::Status(503, "overloaded".into()),
                k if k % 10 == 3 => ProviderReply::Status(500, "NullPointerException".into()),
                _ => {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    ProviderReply::Ok(json!({"echo": req.arguments}))
                }
            }
        })
    })
    .await
    .unwrap()
}

fn registry_file(tag: &str, providers: &[&HttpProvider]) -> String {
    let dir = std::env::temp_dir().join(format!("switchman-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    let mut text = String::from("providers:\n");
    for p in providers {
        text.push_str(&format!("  - http://{}/demo.Echo?weight=100\n", p.addr()));
    }
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

/// The must-show of issue 19: scraping `--metrics` during `call --count 2000` finds the
/// call-duration histogram with its buckets, success and failure series split by error type,
/// and the retry-budget counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_serves_rpc_histograms_and_budget_counters_while_it_runs() {
    let p = mixed_provider().await;
    let file = registry_file("metrics-call", &[&p]);
    let port = free_port();
    let mut child = bin()
        .args([
            "call",
            &file,
            "demo.Echo",
            "--method",
            "echo",
            "--args",
            "[1]",
        ])
        .args(["--count", "2000", "--concurrency", "4", "--timeout", "100"])
        .args(["--json", "--metrics", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (text, answered) = tokio::task::spawn_blocking(move || {
        let r = scrape_until_exit(&mut child, port, Duration::from_secs(120));
        let out = child.wait_with_output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}; stderr: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(report["calls"], 2000, "{report}");
        r
    })
    .await
    .unwrap();
    assert!(answered >= 3, "scraped {answered} times during the run");

    let all = samples(&text);
    let call = "rpc_client_call_duration_seconds";
    assert!(
        text.contains(&format!("# TYPE {call} histogram")),
        "a histogram, not a summary:\n{text}"
    );
    let base = [
        ("rpc_system", "http"),
        ("rpc_service", "demo.Echo"),
        ("rpc_method", "echo"),
    ];
    let ok = [base.as_slice(), &[("outcome", "success")]].concat();
    let buckets = with(&all, &format!("{call}_bucket"), &ok);
    let les: Vec<&str> = buckets.iter().map(|(_, l, _)| l["le"].as_str()).collect();
    for le in ["0.0005", "0.001", "0.005", "0.1", "1", "10", "+Inf"] {
        assert!(les.contains(&le), "bucket le={le} in {les:?}");
    }
    // Cumulative: each bucket holds at least the one below it; +Inf is the count.
    let mut counts: Vec<(f64, f64)> = buckets
        .iter()
        .map(|(_, l, v)| (l["le"].parse::<f64>().unwrap_or(f64::INFINITY), *v))
        .collect();
    counts.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(counts.windows(2).all(|w| w[0].1 <= w[1].1), "{counts:?}");
    let successes = sum(&all, &format!("{call}_count"), &ok);
    assert_eq!(counts.last().unwrap().1, successes);
    assert!(successes > 100.0, "{successes}");
    assert!(
        with(&all, &format!("{call}_count"), &ok)
            .iter()
            .all(|(_, l, _)| !l.contains_key("error_type")),
        "no error type on successes"
    );
    // Failures, split by error type: 503s (transport) and 500s (business) end calls; the
    // attempts also show the timeouts.
    for error in ["transport", "business"] {
        let want = [
            base.as_slice(),
            &[("outcome", "failure"), ("error_type", error)],
        ]
        .concat();
        let n = sum(&all, &format!("{call}_count"), &want);
        assert!(n > 0.0, "{error} failures of calls:\n{text}");
        assert!(!with(&all, &format!("{call}_bucket"), &want).is_empty());
    }
    let attempt = "rpc_client_attempt_duration_seconds_count";
    for error in ["transport", "business", "timeout"] {
        let n = sum(
            &all,
            attempt,
            &[("outcome", "failure"), ("error_type", error)],
        );
        assert!(n > 0.0, "{error} failures of attempts:\n{text}");
    }
    assert!(
        sum(&all, attempt, &[]) > sum(&all, &format!("{call}_count"), &[]),
        "retries make more attempts than calls"
    );
    let refused = sum(
        &all,
        "switchman_retry_budget_refused_total",
        &[("rpc_service", "demo.Echo")],
    );
    assert!(refused > 0.0, "the budget refused retries:\n{text}");
    assert!(
        sum(
            &all,
            "switchman_retries_total",
            &[("rpc_service", "demo.Echo")]
        ) > 0.0
    );
    assert!(
        text.contains("# HELP rpc_client_call_duration_seconds"),
        "described:\n{text}"
    );
}

/// `watch --metrics` serves the directory gauges; a bad address fails at once, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_serves_directory_gauges_and_bad_addresses_are_named() {
    let a = mixed_provider().await;
    let b = mixed_provider().await;
    let file = registry_file("metrics-watch", &[&a, &b]);
    let port = free_port();
    let mut child = bin()
        .args(["watch", &file, "demo.Echo", "--metrics", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let text = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let text = loop {
            match scrape(port) {
                Some(t) if t.contains("switchman_directory_routable") => break t,
                _ if started.elapsed() > Duration::from_secs(20) => {
                    let _ = child.kill();
                    panic!("no directory gauges on 127.0.0.1:{port}");
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        child.kill().unwrap();
        child.wait().unwrap();
        text
    })
    .await
    .unwrap();
    let all = samples(&text);
    let svc = [("rpc_service", "demo.Echo")];
    assert_eq!(
        sum(&all, "switchman_directory_instances", &svc),
        2.0,
        "{text}"
    );
    assert_eq!(
        sum(&all, "switchman_directory_routable", &svc),
        2.0,
        "{text}"
    );
    assert!(sum(&all, "switchman_directory_snapshots_total", &svc) >= 1.0);

    let out = bin()
        .args([
            "watch",
            &file,
            "demo.Echo",
            "--metrics",
            "127.0.0.1:notaport",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"127.0.0.1:notaport\""), "{err}");

    // A port already taken: the command says which address it could not serve on.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = bin()
        .args(["watch", &file, "demo.Echo", "--once", "--metrics", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--metrics {addr}")), "{err}");
}

/// `provider --metrics` records every request it serves in `rpc_server_call_duration_seconds`:
/// a `switchman call` through the shared ZooKeeper (`SWITCHMAN_ZK`) against a provider failing
/// a share of its calls with 503 shows success and failure series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_serves_server_side_durations() {
    let zk = format!("zookeeper://{}", switchman_integration_tests::zookeeper());
    let service = switchman_integration_tests::unique("it.metrics.Provider").replace('-', "_");
    let port = free_port();
    let mut provider = bin()
        .args(["provider", "--registry", &zk, "--service", &service])
        .args([
            "--fail-percent",
            "30",
            "--metrics",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Registered once it prints its `serving` line.
    let mut stdout = std::io::BufReader::new(provider.stdout.take().unwrap());
    let (zk2, svc2) = (zk.clone(), service.clone());
    let out = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(line.contains("\"serving\""), "{line}");
        bin()
            .args(["call", &zk2, &svc2, "--method", "hello", "--count", "50"])
            .args(["--retries", "0", "--wait", "15", "--json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let text = tokio::task::spawn_blocking(move || scrape(port))
        .await
        .unwrap()
        .expect("the provider serves its metrics");
    provider.kill().unwrap();
    provider.wait().unwrap();
    let all = samples(&text);
    let name = "rpc_server_call_duration_seconds_count";
    let base = [("rpc_system", "http"), ("rpc_service", service.as_str())];
    let ok = sum(
        &all,
        name,
        &[
            base.as_slice(),
            &[("outcome", "success"), ("rpc_method", "hello")],
        ]
        .concat(),
    );
    let failed = sum(
        &all,
        name,
        &[
            base.as_slice(),
            &[("outcome", "failure"), ("error_type", "503")],
        ]
        .concat(),
    );
    assert_eq!(
        ok,
        report["succeeded"].as_f64().unwrap(),
        "{report}\n{text}"
    );
    assert_eq!(ok + failed, 50.0, "{text}");
    assert!(failed > 0.0, "{text}");
    assert!(text.contains("# TYPE rpc_server_call_duration_seconds histogram"));
}
