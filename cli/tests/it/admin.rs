//! `--admin`: a `switchman call` consumer and two `switchman provider` processes through the
//! real ZooKeeper that `scripts/test` starts (`SWITCHMAN_ZK`). `POST /offline` on one provider
//! makes it leave the consumer's snapshot (no longer listed, no new call), `POST /online` brings
//! it back, and the consumer sees no failed call, nor even a failed attempt, meanwhile.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_switchman"))
}

/// One HTTP/1.1 request to `addr`; (status, body), `None` while nothing answers.
fn http(addr: &str, method: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

fn get_json(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path).unwrap_or_else(|| panic!("{addr}{path} answers"));
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Kills the processes when the test ends, passed or not.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `switchman provider` and returns (its address, its admin address).
fn provider(procs: &mut Procs, zk: &str, service: &str, name: &str) -> (String, String) {
    let child = bin()
        .args([
            "provider",
            "--registry",
            zk,
            "--service",
            service,
            "--name",
            name,
        ])
        .args(["--delay-ms", "2", "--admin", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    procs.0.push(child);
    let v = support::serving_line(procs.0.last_mut().unwrap());
    (
        v["address"].as_str().unwrap().to_string(),
        v["admin"].as_str().expect("the admin address").to_string(),
    )
}

/// The address a command prints on stderr: `switchman CMD: admin endpoint on http://ADDR`.
fn admin_of(child: &mut Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(a) = line.split("admin endpoint on http://").nth(1) {
                let _ = tx.send(a.trim().to_string());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the command prints its admin endpoint")
}

fn row<'a>(snap: &'a Value, address: &str) -> Option<&'a Value> {
    snap["instances"]
        .as_array()?
        .iter()
        .find(|r| r["address"] == address)
}

/// Polls `GET /snapshot/{service}` of `admin` until `ok` holds (at most `limit`).
fn wait_snapshot(
    admin: &str,
    service: &str,
    limit: Duration,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        if let Some((200, body)) = http(admin, "GET", &format!("/snapshot/{service}")) {
            let v: Value = serde_json::from_str(&body).unwrap();
            if ok(&v) {
                return v;
            }
            assert!(started.elapsed() < limit, "{what} within {limit:?}: {v}");
        } else {
            assert!(
                started.elapsed() < limit,
                "{what} within {limit:?}: no snapshot"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `name_count{rpc_service=service, <want>}` summed from a scrape.
fn count(scrape: &str, name: &str, service: &str, want: &str) -> f64 {
    let svc = format!("rpc_service=\"{service}\"");
    scrape
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(&svc) && l.contains(want))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[test]
fn offline_takes_a_provider_out_of_the_consumer_and_online_brings_it_back() {
    let zk = format!("zookeeper://{}", switchman_integration_tests::zookeeper());
    let service = switchman_integration_tests::unique("it.admin.Qos").replace('-', "_");
    let mut procs = Procs(Vec::new());
    let (a, a_admin) = provider(&mut procs, &zk, &service, "a");
    let (b, _b_admin) = provider(&mut procs, &zk, &service, "b");
    // Dubbo's QOS port is loopback only unless asked otherwise.
    assert!(a_admin.starts_with("127.0.0.1:"), "{a_admin}");

    // A consumer making calls until the test ends (it is killed then; its admin endpoint's
    // counters and scrape are what the test reads).
    let mut consumer = bin()
        .args([
            "call",
            &zk,
            &service,
            "--method",
            "hello",
            "--count",
            "100000000",
        ])
        .args(["--concurrency", "2", "--wait", "15", "--admin", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let admin = admin_of(&mut consumer);
    procs.0.push(consumer);
    let served = |snap: &Value, addr: &str| {
        row(snap, addr)
            .filter(|r| r["state"] == "routable")
            .and_then(|r| r["succeeded"].as_u64())
            .unwrap_or(0)
    };
    wait_snapshot(
        &admin,
        &service,
        Duration::from_secs(20),
        "both providers called",
        |s| served(s, &a) > 20 && served(s, &b) > 20,
    );

    // The provider's own view: online, in ZooKeeper.
    let services = get_json(&a_admin, "/services");
    assert_eq!(services["providers"][0]["state"], "online", "{services}");
    assert_eq!(services["providers"][0]["address"], a.as_str());

    let (status, body) = http(&a_admin, "POST", "/offline").expect("offline answers");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["result"], "OK", "{v}");
    assert_eq!(v["errors"], serde_json::json!([]), "{v}");
    let gone = wait_snapshot(
        &admin,
        &service,
        Duration::from_secs(10),
        "a leaves the consumer's routable set and its calls in flight end",
        // Present and draining: a snapshot taken just after the swap, before the admin's
        // tracker recorded the departure, may not list `a` at all (a proof run saw that, then
        // a call still in flight on it); the tracker lists it as draining for its grace.
        |s| row(s, &a).is_some_and(|r| r["state"] == "draining" && r["draining"]["in_flight"] == 0),
    );
    let r = row(&gone, &a).expect("listed while draining");
    // Shown while its last calls drain: the registry no longer lists it.
    assert_eq!(r["draining"]["listed"], false, "{r}");
    assert_eq!(gone["states"]["routable"], 1, "{gone}");
    // `gone` already shows no call in flight on `a` (a pick from the previous snapshot starts
    // its attempt within microseconds, long before that answer came back); count from here.
    let settled = get_json(&admin, &format!("/snapshot/{service}"));
    let before = row(&settled, &a).and_then(|r| r["succeeded"].as_u64());
    assert!(
        row(&settled, &a).is_none_or(|r| r["active"] == 0),
        "{settled}"
    );
    // The barrier: b serves 20 more calls after that count, so calls kept flowing meanwhile.
    let later = wait_snapshot(
        &admin,
        &service,
        Duration::from_secs(10),
        "b keeps serving",
        |s| served(s, &b) > served(&settled, &b) + 20,
    );
    assert_eq!(
        row(&later, &a).and_then(|r| r["succeeded"].as_u64()),
        before,
        "no new call reaches the offline provider: {later}"
    );
    let services = get_json(&a_admin, "/services");
    assert_eq!(services["providers"][0]["state"], "offline", "{services}");

    let (status, body) = http(&a_admin, "POST", "/online").expect("online answers");
    assert_eq!(status, 200, "{body}");
    let back = wait_snapshot(
        &admin,
        &service,
        Duration::from_secs(10),
        "a routable again",
        |s| row(s, &a).is_some_and(|r| r["state"] == "routable"),
    );
    let resumed = served(&back, &a);
    wait_snapshot(
        &admin,
        &service,
        Duration::from_secs(10),
        "a called again",
        |s| served(s, &a) > resumed + 20,
    );

    // Not one failed call, not one failed attempt (a failover would hide one from the caller).
    let snap = get_json(&admin, &format!("/snapshot/{service}"));
    for r in snap["instances"].as_array().unwrap() {
        assert_eq!(r["failed"], 0, "{r}");
    }
    let (status, scrape) = http(&admin, "GET", "/metrics").unwrap();
    assert_eq!(status, 200);
    let calls = "rpc_client_call_duration_seconds_count";
    assert!(
        count(&scrape, calls, &service, "outcome=\"success\"") > 100.0,
        "{scrape}"
    );
    assert_eq!(
        count(&scrape, calls, &service, "outcome=\"failure\""),
        0.0,
        "{scrape}"
    );
    assert_eq!(
        count(
            &scrape,
            "rpc_client_attempt_duration_seconds_count",
            &service,
            "outcome=\"failure\""
        ),
        0.0,
        "{scrape}"
    );
    assert_eq!(
        count(&scrape, "switchman_retries_total", &service, ""),
        0.0,
        "{scrape}"
    );
}

/// Bad `--admin` values and a taken port are named, with the usual exit code 2.
#[test]
fn bad_admin_addresses_are_named() {
    let out = bin()
        .args([
            "watch",
            "nowhere.yaml",
            "demo.Echo",
            "--admin",
            "127.0.0.1:x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"127.0.0.1:x\"") && err.contains("admin endpoint"),
        "{err}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("switchman-cli-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(&file, "providers:\n  - http://127.0.0.1:1/demo.Echo\n").unwrap();
    let out = bin()
        .args([
            "watch",
            file.to_str().unwrap(),
            "demo.Echo",
            "--once",
            "--admin",
            &addr,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--admin {addr}")), "{err}");
}
