//! How the CLI writes: no colour codes into a redirected stderr, malformed registry URLs
//! named as such.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_switchman"))
}

#[test]
fn logs_to_a_redirected_stderr_carry_no_colour_codes() {
    let dir = std::env::temp_dir().join(format!("switchman-cli-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    // A provider that refuses connections: the call logs (debug) and fails.
    std::fs::write(&file, "providers:\n  - http://127.0.0.1:1/x.Y\n").unwrap();
    let out = bin()
        .args(["call", file.to_str().unwrap(), "x.Y", "--method", "m"])
        .args(["--wait", "5"])
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("directory updated"),
        "the debug log was written: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no ANSI escapes: {stderr:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_malformed_registry_url_is_reported_as_one() {
    for cmd in [
        &["call", "zookeeper:/127.0.0.1:2181", "x.Y", "--method", "m"][..],
        &["watch", "zookeeper:/127.0.0.1:2181", "x.Y"][..],
    ] {
        let out = bin().args(cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("zookeeper:/127.0.0.1:2181: a malformed registry URL"),
            "{cmd:?}: {stderr}"
        );
    }
}

fn run(args: &[&str]) -> (Option<i32>, String, std::time::Duration) {
    let started = std::time::Instant::now();
    let out = bin().args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn zero_calls_or_zero_concurrency_are_rejected() {
    for (flag, want) in [
        ("--count", "--count 0"),
        ("--concurrency", "--concurrency 0"),
    ] {
        let (code, stderr, _) = run(&["call", "/tmp/x.yaml", "x.Y", "--method", "m", flag, "0"]);
        assert_eq!(code, Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(want), "{flag}: {stderr}");
    }
}

#[test]
fn an_unreachable_registry_ends_call_and_watch_alike_after_the_stated_wait() {
    let (code, call_err, took) = run(&[
        "call",
        "zookeeper://127.0.0.1:1",
        "x.Y",
        "--method",
        "m",
        "--wait",
        "1",
    ]);
    assert_eq!(code, Some(2), "{call_err}");
    assert!(call_err.contains("did not answer within 1s"), "{call_err}");
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    let (code, watch_err, _) = run(&["watch", "zookeeper://127.0.0.1:1", "x.Y", "--timeout", "1"]);
    assert_eq!(code, Some(2), "{watch_err}");
    assert!(
        watch_err.contains("did not answer within 1s"),
        "{watch_err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_the_registry_lacks_ends_call_at_once_with_what_exists() {
    let zk = format!("zookeeper://{}", switchman_integration_tests::zookeeper());
    let iface = switchman_integration_tests::unique("org.example.Cli").replace('-', "");
    let p =
        switchman::cluster::provider::HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |_| {
            Box::pin(async {
                switchman::cluster::provider::ProviderReply::Ok(serde_json::json!(1))
            })
        })
        .await
        .unwrap();
    let other = switchman::Instance::builder("127.0.0.1", p.addr().port())
        .protocol(switchman::core::Protocol::Http)
        .service(switchman::ServiceKey::with(&iface, "g1", "2.0.0"))
        .build();
    let registrar = switchman::discovery::registrar_from_url(&zk).unwrap();
    registrar.register(&other).await.unwrap();
    let args: Vec<String> = [
        "call",
        &zk,
        &iface,
        "--method",
        "m",
        "--group",
        "g1",
        "--version",
        "1.0.0",
        // Far longer than the call may take: an empty answer must end it at once.
        "--wait",
        "120",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, stderr, took) = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&a)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        took < std::time::Duration::from_secs(60),
        "at once, not after --wait 120: {took:?}"
    );
    assert!(
        stderr.contains(&format!("/dubbo/{iface}/providers")),
        "{stderr}"
    );
    assert!(
        stderr.contains("the registry has version 2.0.0 in group g1"),
        "{stderr}"
    );
    registrar.unregister(&other).await.unwrap();

    // Nacos: the hint for plain (Spring Cloud) service names.
    let nacos = format!("nacos://{}", switchman_integration_tests::nacos());
    let (code, stderr, _) = tokio::task::spawn_blocking(move || {
        run(&["call", &nacos, "plain-service", "--method", "m"])
    })
    .await
    .unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("?naming=plain"), "{stderr}");
}
