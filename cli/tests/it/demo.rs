//! `switchman demo` end to end: real in-process providers, the static registry, failover.

use std::process::Command;

use serde_json::Value;

fn demo(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchman"))
        .arg("demo")
        .args(args)
        .output()
        .expect("run switchman");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn demo_json_reports_failover_hiding_the_flaky_provider_and_the_weight_change() {
    let (code, stdout, stderr) = demo(&["--calls", "2000", "--json"]);
    assert_eq!(code, 0, "stderr: {stderr}");
    let r: Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(r["calls"], 2000);
    // The flaky provider's 503s are retried elsewhere: every call succeeds.
    assert_eq!(r["succeeded"], 2000, "{r}");
    let attempts = r["attempts_per_call"].as_f64().unwrap();
    assert!(
        attempts > 1.0 && attempts < 1.2,
        "some calls needed a retry: {attempts}"
    );
    let providers = r["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 5);
    let p1_before = providers[0]["share_before"].as_f64().unwrap();
    let p1_after = providers[0]["share_after"].as_f64().unwrap();
    // The flaky provider (p3, 67% success) is ejected as an outlier after its first 20 or so
    // calls: equal weights over the other four first (about 1/4), then 400 of 700 (about 0.57).
    assert_eq!(providers[2]["ejected"], true, "{r}");
    assert!(providers[2]["share_after"].as_f64().unwrap() < 0.02, "{r}");
    assert!((p1_before - 0.25).abs() < 0.06, "p1 before {p1_before}");
    assert!((p1_after - 0.571).abs() < 0.06, "p1 after {p1_after}");
    assert!(r["latency_p99_ms"].as_f64().unwrap() >= r["latency_p50_ms"].as_f64().unwrap());

    // Plain demo ends with every strategy on the same fleet.
    let rows = r["strategies"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|s| s["cluster"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {r}"))
    };
    assert_eq!(rows.len(), 9);
    assert_eq!(
        row("failover")["errors"],
        0,
        "failover hides the flaky provider"
    );
    assert!(
        row("failfast")["errors"].as_u64().unwrap() > 0,
        "failfast shows its 503s"
    );
    assert_eq!(
        row("failsafe")["errors"],
        0,
        "failsafe turns failures into empty answers"
    );
    assert!(row("failsafe")["empty"].as_u64().unwrap() > 0);
    assert_eq!(
        row("broadcast")["attempts_per_call"],
        5.0,
        "broadcast calls every provider"
    );
    assert!(
        row("broadcast")["errors"].as_u64().unwrap() > 0,
        "a broadcast fails when any provider fails"
    );
    let forking = row("forking")["attempts_per_call"].as_f64().unwrap();
    assert!(
        forking > 1.5 && forking <= 2.0,
        "forks=2 (a cancelled attempt may never reach its provider): {forking}"
    );
}

#[test]
fn demo_with_one_cluster_runs_only_that_strategy() {
    let (code, stdout, stderr) = demo(&["--calls", "300", "--cluster", "failfast", "--json"]);
    assert_eq!(code, 0, "stderr: {stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["cluster"], "failfast");
    assert!(r["strategies"].as_array().unwrap().is_empty());
    assert!(
        r["failed"].as_u64().unwrap() > 0,
        "failfast does not retry the flaky provider"
    );
}

#[test]
fn demo_table_and_bad_arguments() {
    let (code, stdout, _) = demo(&["--calls", "200", "--compare-calls", "30"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("share before") && stdout.contains("attempts per call"),
        "{stdout}"
    );
    let (code, _, stderr) = demo(&["--cluster", "teleport", "--calls", "10"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("teleport"), "{stderr}");
}
