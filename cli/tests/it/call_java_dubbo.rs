//! `switchman call` and `switchman watch` against a real Java Dubbo 3.3 provider of
//! `io.switchman.peers.DemoService` over dubbo://, registered in the ZooKeeper that
//! `scripts/test` starts.

use std::process::Command;

use serde_json::{Value, json};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

fn switchman(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchman"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn call_and_watch_a_java_dubbo_provider() {
    if java_peer::skipped("call_and_watch_a_java_dubbo_provider") {
        return;
    }
    let zk = zookeeper();
    let group = unique("cli-dubbo");
    let provider = JavaProvider::start(&ProviderOptions::zookeeper(&zk).group(&group));
    let registry = format!("zookeeper://{zk}");
    let base = [
        "call",
        registry.as_str(),
        DEMO_SERVICE,
        "--group",
        group.as_str(),
        "--json",
    ];

    // Typed: the descriptor comes from --types.
    let mut args = base.to_vec();
    args.extend(["--method", "add", "--args", "[2,3]", "--types", "int,int"]);
    args.extend(["--count", "10", "--concurrency", "4"]);
    let (code, report, stderr) = switchman(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["succeeded"], 10, "{report}");
    assert_eq!(report["last_result"], 5);
    assert_eq!(
        report["instances"],
        json!([{"address": provider.address(), "succeeded": 10, "failed": 0}])
    );

    // Without --types the call is generic; --generic forces it with types too.
    for extra in [&[][..], &["--types", "java.lang.String", "--generic"][..]] {
        let mut args = base.to_vec();
        args.extend(["--method", "sayHello", "--args", "[\"cli\"]"]);
        args.extend(extra);
        let (code, report, stderr) = switchman(&args);
        assert_eq!(code, Some(0), "{extra:?}: {stderr}");
        assert_eq!(
            report["last_result"],
            format!("hello, cli from {}", provider.name()),
            "{extra:?}"
        );
    }

    // A business exception: the call fails (exit 1) with the Java class and message.
    let mut args = base.to_vec();
    args.extend(["--method", "fail", "--args", "[\"no\"]"]);
    let (code, report, _) = switchman(&args);
    assert_eq!(code, Some(1));
    let error = report["last_result"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("io.switchman.peers.DemoException: no"),
        "{report}"
    );

    // Wrong types: the provider cannot find the method; not retried, exit 1.
    let mut args = base.to_vec();
    args.extend(["--method", "add", "--args", "[2,3]", "--types", "long,long"]);
    let (code, report, _) = switchman(&args);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["instances"][0]["failed"], 1, "one attempt: {report}");

    let (code, snap, stderr) = switchman(&[
        "watch",
        registry.as_str(),
        DEMO_SERVICE,
        "--group",
        group.as_str(),
        "--once",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(snap["instances"][0]["protocol"], "dubbo", "{snap}");
    assert_eq!(snap["instances"][0]["routable"], true, "{snap}");
}
