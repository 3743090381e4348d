//! `switchman call` and `switchman watch` against a static registry file and real in-process
//! HTTP providers.

use std::process::Command;

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
