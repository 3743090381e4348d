//! `switchman watch` and `switchman top` with Dubbo 3 application-level discovery, against the
//! ZooKeeper `scripts/test` starts and real Java Dubbo 3.3 providers: one registered at the
//! interface level, one only as an application instance whose metadata is local (in its own
//! `MetadataService`, which the CLI calls). `watch` says per instance where it came from and
//! its revision (JSON and text); `top` and `call` find the application-level provider.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{unique, zookeeper};

const WAIT: Duration = Duration::from_secs(30);

/// A running `switchman` whose stdout lines arrive on a channel; killed when dropped.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchman"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// Lines until `done` says the last ones are what was awaited; panics after [`WAIT`].
    fn until(&self, what: &str, mut done: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if done(&line) {
                        return line;
                    }
                    seen.push(line);
                }
                Err(_) => panic!("{what}: not within {WAIT:?}; got {seen:#?}"),
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn instance<'a>(snap: &'a Value, address: &str) -> Option<&'a Value> {
    snap["instances"]
        .as_array()?
        .iter()
        .find(|i| i["address"] == address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_interface_and_application_level_instances_with_their_revision() {
    if java_peer::skipped("watch_shows_interface_and_application_level_instances") {
        return;
    }
    let zk = zookeeper();
    let group = unique("cli-app-level");
    let only_app = unique("cli-app-only");
    let app = unique("cli-app");
    let iface_opts = ProviderOptions::zookeeper(&zk)
        .group(&group)
        .name("iface")
        .param("warmup", "0");
    // Exported in both groups, registered only as an application instance, metadata local.
    let app_opts = ProviderOptions::zookeeper(&zk)
        .group(&format!("{group},{only_app}"))
        .application(&app)
        .register_mode("instance")
        .metadata_type("local")
        .name("app")
        .param("warmup", "0");
    let (iface, app_level) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&iface_opts));
        let b = s.spawn(|| JavaProvider::start(&app_opts));
        (a.join().unwrap(), b.join().unwrap())
    });
    let client = raw_client(&zk, WAIT).await;
    let (data, _) = client
        .get_data(&format!("/services/{app}/{}", app_level.address()))
        .await
        .unwrap();
    let node: Value = serde_json::from_slice(&data).unwrap();
    let revision = node["payload"]["metadata"]["dubbo.metadata.revision"]
        .as_str()
        .unwrap()
        .to_string();
    drop(client);
    let registry = format!("zookeeper://{zk}");

    // JSON lines: one snapshot with both, each saying where it came from.
    let watch = Running::start(&["watch", &registry, DEMO_SERVICE, "--group", &group]);
    let line = watch.until("a snapshot with both providers", |l| {
        serde_json::from_str::<Value>(l)
            .is_ok_and(|s| s["instances"].as_array().is_some_and(|i| i.len() == 2))
    });
    drop(watch);
    let snap: Value = serde_json::from_str(&line).unwrap();
    let i = instance(&snap, &iface.address()).expect("the interface-level provider");
    assert_eq!(i["discovery"], "interface", "{snap}");
    assert_eq!(i["revision"], Value::Null, "{snap}");
    let a = instance(&snap, &app_level.address()).expect("the application-level provider");
    assert_eq!(a["discovery"], "application", "{snap}");
    assert_eq!(a["revision"], revision.as_str(), "{snap}");
    assert_eq!(a["routable"], true, "{snap}");

    // Text: the same, one line per instance.
    let watch = Running::start(&[
        "watch",
        &registry,
        DEMO_SERVICE,
        "--group",
        &group,
        "--format",
        "text",
    ]);
    let mut block = Vec::new();
    watch.until("a text block with both providers", |l| {
        if l.starts_with("epoch ") {
            block.clear();
        }
        block.push(l.to_string());
        block.len() == 3
    });
    drop(watch);
    assert!(block[0].ends_with(": 2 instances"), "{block:#?}");
    let line_of = |addr: &str| {
        block
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{addr} ")))
            .cloned()
            .unwrap_or_else(|| panic!("no line for {addr}: {block:#?}"))
    };
    let l = line_of(&iface.address());
    assert!(l.contains(" discovery=interface "), "{l}");
    assert!(!l.contains("revision="), "{l}");
    let l = line_of(&app_level.address());
    assert!(
        l.contains(&format!(" discovery=application revision={revision} ")),
        "{l}"
    );
    assert!(l.ends_with(" routable"), "{l}");

    // `top --once` of the group only the application-level provider serves: its row (the
    // first list waits for its metadata, fetched from its MetadataService).
    let out = Command::new(env!("CARGO_BIN_EXE_switchman"))
        .args([
            "top",
            &registry,
            DEMO_SERVICE,
            "--group",
            &only_app,
            "--once",
            "--timeout",
            "20",
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains(&app_level.address()), "{table}");

    // `call` goes through Reference: both answer.
    let out = Command::new(env!("CARGO_BIN_EXE_switchman"))
        .args([
            "call",
            &registry,
            DEMO_SERVICE,
            "--group",
            &group,
            "--method",
            "whoami",
            "--count",
            "40",
            "--json",
        ])
        .output()
        .unwrap();
    let report: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    assert_eq!(report["succeeded"], 40, "{report}");
    let answered: Vec<&str> = report["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["succeeded"].as_u64() > Some(0))
        .filter_map(|i| i["address"].as_str())
        .collect();
    assert!(answered.contains(&app_level.address().as_str()), "{report}");
    assert!(answered.contains(&iface.address().as_str()), "{report}");
}
