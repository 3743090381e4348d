//! The `switchman provider` binary registered with `--register-mode instance` (the Dubbo 3
//! application instance, the mapping, its MetadataService over Triple) is found and called by
//! a real Java Dubbo 3.3 consumer in `FORCE_APPLICATION`, in the ZooKeeper and rnacos that
//! `scripts/test` starts (`SWITCHMAN_ZK`, `SWITCHMAN_NACOS`).

use std::process::{Child, Command, Stdio};

use serde_json::json;
use switchman_integration_tests::java_peer;
use switchman_integration_tests::{nacos, unique, zookeeper};

use super::support;

/// A running `switchman provider`; killed when dropped.
struct Provider(Child);

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `switchman provider --protocol tri --register-mode instance` and waits for its
/// `serving` line.
fn provider(registry: &str, iface: &str, group: &str, app: &str, name: &str) -> Provider {
    let child = Command::new(env!("CARGO_BIN_EXE_switchman"))
        .args([
            "provider",
            "--registry",
            registry,
            "--service",
            iface,
            "--group",
            group,
            "--protocol",
            "tri",
            "--register-mode",
            "instance",
            "--application",
            app,
            "--name",
            name,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut provider = Provider(child);
    support::serving_line(&mut provider.0);
    provider
}

fn found_and_called(registry: String, tag: &str) {
    let group = unique(tag);
    let app = unique(&format!("{tag}-app"));
    // An interface of this test's own (the echo provider answers any): a Java consumer in
    // FORCE_APPLICATION subscribes to every application its interface's mapping names, and
    // the shared DemoService mapping names other tests' applications, whose MetadataService
    // may be gone.
    let iface = format!("io.switchman.cli.{}", unique(tag).replace('-', "_"));
    let _p = provider(&registry, &iface, &group, &app, "rust-instance");
    let lines = java_peer::force_application_adds(&registry, &iface, &group);
    let want =
        json!({"ok": true, "result": {"from": "rust-instance", "method": "add", "echo": [2, 3]}});
    assert_eq!(lines, vec![want.clone(), want.clone(), want], "{tag}");
}

#[test]
fn a_switchman_provider_in_instance_mode_is_called_by_java_in_force_application_zookeeper() {
    if java_peer::skipped("a_switchman_provider_in_instance_mode_..._zookeeper") {
        return;
    }
    found_and_called(format!("zookeeper://{}", zookeeper()), "cli-app-zk");
}

#[test]
fn a_switchman_provider_in_instance_mode_is_called_by_java_in_force_application_nacos() {
    if java_peer::skipped("a_switchman_provider_in_instance_mode_..._nacos") {
        return;
    }
    found_and_called(format!("nacos://{}", nacos()), "cli-app-nacos");
}
