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
