//! `switchman watch` and `switchman top` with Dubbo 3 application-level discovery, against the
//! ZooKeeper `scripts/test` starts and real Java Dubbo 3.3 providers: one registered at the
//! interface level, one only as an application instance whose metadata is local (in its own
//! `MetadataService`, which the CLI calls). `watch` says per instance where it came from and
//! its revision (JSON and text): the interface-level provider with `migration.step=
//! FORCE_INTERFACE` on the registry URL, the application-level one in the default
//! `APPLICATION_FIRST` (it covers the other); `top` and `call` find the application-level
//! provider.

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
    // The migration step picks one list: FORCE_INTERFACE (the registry URL's step) the
    // interface-level provider, APPLICATION_FIRST (the default) the application-level one,
    // which covers it.
    let iface_registry = format!("{registry}?migration.step=FORCE_INTERFACE");

    // JSON lines: the instance of each says where it came from.
    let snapshot_with = |registry: &str, address: &str| -> Value {
        let watch = Running::start(&["watch", registry, DEMO_SERVICE, "--group", &group]);
        let line = watch.until(&format!("a snapshot with {address}"), |l| {
            serde_json::from_str::<Value>(l).is_ok_and(|s| instance(&s, address).is_some())
        });
        serde_json::from_str(&line).unwrap()
    };
    let snap = snapshot_with(&iface_registry, &iface.address());
    assert_eq!(
        snap["instances"].as_array().map(Vec::len),
        Some(1),
        "{snap}"
    );
    let i = instance(&snap, &iface.address()).unwrap();
    assert_eq!(i["discovery"], "interface", "{snap}");
    assert_eq!(i["revision"], Value::Null, "{snap}");
    let snap = snapshot_with(&registry, &app_level.address());
    assert_eq!(
        snap["instances"].as_array().map(Vec::len),
        Some(1),
        "{snap}"
    );
    let a = instance(&snap, &app_level.address()).unwrap();
    assert_eq!(a["discovery"], "application", "{snap}");
    assert_eq!(a["revision"], revision.as_str(), "{snap}");
    assert_eq!(a["routable"], true, "{snap}");

    // Text: the same, one line per instance.
    let text_line = |registry: &str, address: &str| -> (String, String) {
        let watch = Running::start(&[
            "watch",
            registry,
            DEMO_SERVICE,
            "--group",
            &group,
            "--format",
            "text",
        ]);
        let mut block: Vec<String> = Vec::new();
        watch.until(&format!("a text block with {address}"), |l| {
            if l.starts_with("epoch ") {
                block.clear();
            }
            block.push(l.to_string());
            block.len() == 2 && block[1].trim_start().starts_with(&format!("{address} "))
        });
        (block[0].clone(), block[1].clone())
    };
    let (header, l) = text_line(&iface_registry, &iface.address());
    assert!(header.ends_with(": 1 instance"), "{header}");
    assert!(l.contains(" discovery=interface "), "{l}");
    assert!(!l.contains("revision="), "{l}");
    let (header, l) = text_line(&registry, &app_level.address());
    assert!(header.ends_with(": 1 instance"), "{header}");
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

    // `call` goes through Reference: the provider of the step answers.
    let answered = |registry: &str| -> Vec<String> {
        let out = Command::new(env!("CARGO_BIN_EXE_switchman"))
            .args([
                "call",
                registry,
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
        report["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["succeeded"].as_u64() > Some(0))
            .filter_map(|i| i["address"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(answered(&registry), vec![app_level.address()]);
    assert_eq!(answered(&iface_registry), vec![iface.address()]);
}
