//! `switchman call` and `switchman watch` against a static registry file and real in-process
//! HTTP providers.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use switchman_cluster::provider::{HttpProvider, ProviderReply};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_switchman"))
}

async fn provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |req| {
        Box::pin(async move { ProviderReply::Ok(json!({"from": name, "args": req.arguments})) })
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_round_robin_over_a_static_file_and_watch_once() {
    let a = provider("a").await;
    let b = provider("b").await;
    let dir = std::env::temp_dir().join(format!("switchman-cli-call-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(
        &file,
        format!(
            "providers:\n  - http://{}/demo.Echo?weight=100\n  - address: {}\n    weight: 100\n",
            a.addr(),
            b.addr()
        ),
    )
    .unwrap();

    let file_s = file.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        bin()
            .args([
                "call",
                &file_s,
                "demo.Echo",
                "--method",
                "echo",
                "--args",
                "[\"hi\"]",
                "--count",
                "20",
            ])
            .args(["--loadbalance", "roundrobin", "--json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["succeeded"], 20);
    let counts: Vec<u64> = r["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["succeeded"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![10, 10], "round robin alternates: {r}");
    assert_eq!(r["last_result"]["args"], json!(["hi"]));
    assert_eq!(a.hits() + b.hits(), 20);

    // The text report says its per-instance columns count attempts, not calls.
    let file_s = file.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        bin()
            .args([
                "call",
                &file_s,
                "demo.Echo",
                "--method",
                "echo",
                "--count",
                "2",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "\n  attempts per instance (a retried call counts on each instance tried):\n"
        ),
        "{stdout}"
    );

    let file_s = file.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        bin()
            .args(["watch", &file_s, "demo.Echo", "--once"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success());
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["epoch"], 1);
    let addrs: Vec<&str> = line["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["address"].as_str().unwrap())
        .collect();
    let mut want = vec![a.addr().to_string(), b.addr().to_string()];
    want.sort();
    assert_eq!(addrs, want, "sorted by address");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_inputs_exit_2_with_a_message() {
    let out = bin()
        .args(["call", "/nonexistent/providers.yaml", "x", "--method", "m"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/providers.yaml"));
    let out = bin()
        .args(["call", "bogus://h:1", "x", "--method", "m"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
    let out = bin()
        .args([
            "call",
            "/tmp/x.yaml",
            "x",
            "--method",
            "m",
            "--loadbalance",
            "fastest",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fastest"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_a_triple_provider_with_a_raw_payload() {
    use switchman_cluster::triple::{TripleRequest, TripleServer};
    let server = TripleServer::serve("127.0.0.1:0".parse().unwrap(), |req: TripleRequest| {
        Box::pin(async move {
            let mut out = b"hello, ".to_vec();
            out.extend_from_slice(&req.message);
            Ok(bytes::Bytes::from(out))
        })
    })
    .await
    .unwrap();
    let file = std::env::temp_dir().join(format!("switchman-cli-tri-{}.yaml", std::process::id()));
    std::fs::write(
        &file,
        format!(
            "- tri://{}?service=org.apache.dubbo.samples.HelloWorld\n",
            server.addr()
        ),
    )
    .unwrap();
    let file_s = file.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        bin()
            .args([
                "call",
                &file_s,
                "org.apache.dubbo.samples.HelloWorld",
                "--method",
                "sayHello",
            ])
            .args(["--payload", "raw", "--data", "world"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("last result: hello, world"), "{stdout}");
    assert_eq!(server.hits(), 1);
    std::fs::remove_file(&file).ok();
}

/// A registry file in a directory of its own; removed with the directory by the caller.
fn registry_file(name: &str, body: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("switchman-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(&file, body).unwrap();
    let shown = file.to_str().unwrap().to_string();
    (dir, shown)
}

/// `watch --once` on a service nothing matches exits 2 and says what the registry has instead:
/// another version, or nothing of that name at all (a misspelled service). The providers are
/// TEST-NET addresses that nothing ever serves: watch only reads the list.
#[test]
fn watch_on_a_service_nothing_matches_says_so_and_what_exists() {
    let (dir, file) = registry_file(
        "watch-none",
        "providers:\n  - http://192.0.2.1:8080/demo.Echo\n  - http://192.0.2.2:8080/demo.Echo?version=2.0.0&group=g1\n",
    );
    let out = bin()
        .args(["watch", &file, "demo.Echo", "--version", "3.0.0", "--once"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "switchman watch: nothing in {file} matches demo.Echo:3.0.0; the registry has it \
             registered without version or group, version 2.0.0 in group g1 (choose with --group \
             and --version)"
        )),
        "{stderr}"
    );
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        line["instances"],
        json!([]),
        "the empty list is still printed"
    );

    let out = bin()
        .args(["watch", &file, "demo.Echoo", "--once"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "matches demo.Echoo; the registry lists no provider of demo.Echoo in any group or version (is the service name right?)"
        ),
        "{stderr}"
    );

    // What matches is printed as before, exit 0.
    let out = bin()
        .args(["watch", &file, "demo.Echo", "--once"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A provider that warms up (Dubbo's `warmup` from its `timestamp`): `watch` shows the weight
/// the balancer gives it as it ramps up to the registered one, each printed snapshot showing
/// something new (the directory republishes at every warm-up step; the registered weight alone
/// made every line the same). Read until the provider is warm, so no line is awaited in vain.
#[test]
fn watch_shows_the_warm_up_ramp_once_per_step() {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let (dir, file) = registry_file(
        "watch-warmup",
        &format!(
            "providers:\n  - http://192.0.2.1:8080/demo.Echo?weight=100&warmup=1500&timestamp={now_ms}\n  - http://192.0.2.2:8080/demo.Echo?weight=50\n"
        ),
    );
    let mut child = bin()
        .args(["watch", &file, "demo.Echo"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut ramp = Vec::new();
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            let _ = child.kill();
            panic!("not warm within 30 s: {seen:#?}");
        };
        let snap: Value = serde_json::from_str(&line).unwrap();
        let warming = &snap["instances"][0];
        assert_eq!(warming["address"], "192.0.2.1:8080", "{line}");
        assert_eq!(warming["weight"], 100, "{line}");
        assert_eq!(snap["instances"][1]["effective_weight"], 50, "{line}");
        let w = warming["effective_weight"].as_u64().unwrap();
        seen.push(line);
        ramp.push(w);
        if w == 100 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
    assert!(ramp.len() >= 3, "the ramp is visible: {ramp:?}");
    assert!(ramp[0] < 100, "{ramp:?}");
    assert!(
        ramp.windows(2).all(|w| w[0] < w[1]),
        "each printed snapshot shows a new weight: {ramp:?}"
    );
}
