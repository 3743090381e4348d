//! The admin endpoint (feature `admin`) of an in-process consumer and provider: what
//! `GET /services`, `GET /snapshot/{service}`, `GET /metrics` answer, and `POST /offline` /
//! `POST /online` acting on an exported provider through its registrar.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchman::admin::{Admin, Exported};
use switchman::cluster::provider::{HttpProvider, ProviderReply};
use switchman::core::BoxFuture;
use switchman::discovery::{Registrar, StaticRegistry};
use switchman::{ClusterConfig, ClusterInvoker, DirectoryConfig, Instance, Reference, ServiceKey};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request; (status, body).
async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("the admin endpoint answers")
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP answer to {method} {path}: {text:?}"));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = http(addr, "GET", path).await;
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    (status, v)
}

fn row<'a>(snapshot: &'a Value, address: &str) -> &'a Value {
    snapshot["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == address)
        .unwrap_or_else(|| panic!("no row for {address}: {snapshot}"))
}

async fn echo(name: &'static str, delay: Duration) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            ProviderReply::Ok(json!({ "from": name }))
        })
    })
    .await
    .unwrap()
}

/// A port nothing listens on: calls to it fail with connection refused (a strike).
/// A port on 127.0.0.1 that refuses connections for as long as the returned socket lives:
/// bound, never listening, so no other process or test can take it meanwhile (a listener
/// bound then dropped would leave the port free for anyone).
fn dead_port() -> (u16, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    (socket.local_addr().unwrap().port(), socket)
}

/// A port free a moment ago, for an endpoint the test binds itself at a known address.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A consumer listed with `.admin(..)`: its snapshot shows the dead instance ejected with the
/// time left of its penalty (and that time running down), the live ones routable, their
/// counters; `/services` lists it; `/metrics` has per-instance attempt series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_shows_an_ejected_instance_with_its_time_left() {
    switchman::admin::set_metrics_handle(switchman::install_metrics_recorder().unwrap());
    let a = echo("a", Duration::ZERO).await;
    let b = echo("b", Duration::ZERO).await;
    let (dead, _held) = dead_port();
    let dir = std::env::temp_dir().join(format!("switchman-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(
        &file,
        format!(
            "providers:\n  - http://{}/it.admin.Echo?zone=z1&dubbo.tag=gray\n  - http://{}/it.admin.Echo\n  - http://127.0.0.1:{dead}/it.admin.Echo\n",
            a.addr(),
            b.addr()
        ),
    )
    .unwrap();
    let reference = Reference::new("it.admin.Echo")
        .registry(file.to_str().unwrap())
        .admin("127.0.0.1:0".parse().unwrap())
        .connect()
        .await
        .unwrap();
    let admin = reference.admin_addr().expect("listed on an admin endpoint");
    assert!(admin.ip().is_loopback());
    for _ in 0..60 {
        // Failover retries hide the dead instance from the caller.
        reference.call("echo", json!([])).await.unwrap();
    }

    let (status, snap) = get_json(admin, "/snapshot/it.admin.Echo").await;
    assert_eq!(status, 200, "{snap}");
    assert_eq!(snap["service"], "it.admin.Echo");
    assert_eq!(snap["cluster"]["strategy"], "failover");
    let dead_addr = format!("127.0.0.1:{dead}");
    let d = row(&snap, &dead_addr);
    assert_eq!(d["state"], "ejected", "{snap}");
    let left = d["ejected"]["left_ms"].as_u64().unwrap();
    // The first penalty: 30 s ± 20%.
    assert!(left > 0 && left <= 36_000, "{d}");
    assert_eq!(d["ejected"]["ejections"], 1);
    assert!(d["failed"].as_u64().unwrap() >= 5, "{d}");
    assert_eq!(d["succeeded"], 0);
    let live = row(&snap, &a.addr().to_string());
    assert_eq!(live["state"], "routable");
    assert_eq!(live["zone"], "z1");
    assert_eq!(live["tag"], "gray");
    assert_eq!(
        (live["weight"].as_u64(), live["current_weight"].as_u64()),
        (Some(100), Some(100))
    );
    let served = live["succeeded"].as_u64().unwrap()
        + row(&snap, &b.addr().to_string())["succeeded"]
            .as_u64()
            .unwrap();
    assert_eq!(served, 60, "every call answered by a live instance: {snap}");
    assert_eq!(served, a.hits() + b.hits());
    assert_eq!(snap["states"], json!({"ejected": 1, "routable": 2}));

    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, again) = get_json(admin, "/snapshot/it.admin.Echo").await;
    let left2 = row(&again, &dead_addr)["ejected"]["left_ms"]
        .as_u64()
        .unwrap();
    assert!(
        left2 + 250 <= left && left2 > 0,
        "the time left runs down: {left} then {left2}"
    );

    let (status, services) = get_json(admin, "/services").await;
    assert_eq!(status, 200);
    let c = &services["consumers"][0];
    assert_eq!(c["service"], "it.admin.Echo");
    assert_eq!(
        (
            c["instances"].as_u64(),
            c["routable"].as_u64(),
            c["ejected"].as_u64()
        ),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(services["providers"], json!([]));

    let (status, text) = http(admin, "GET", "/metrics").await;
    assert_eq!(status, 200);
    let dead_series = format!("server_port=\"{dead}\"");
    assert!(
        text.lines().any(
            |l| l.starts_with("rpc_client_attempt_duration_seconds_count")
                && l.contains(&dead_series)
                && l.contains("error_type=\"transport\"")
        ),
        "per-instance attempt series for the dead instance:\n{text}"
    );

    // Unknown services and paths are named; a dropped reference leaves the listing.
    let (status, e) = get_json(admin, "/snapshot/it.admin.Nope").await;
    assert_eq!(status, 404);
    assert!(
        e["error"].as_str().unwrap().contains("it.admin.Nope"),
        "{e}"
    );
    assert_eq!(e["services"], json!(["it.admin.Echo"]));
    let (status, e) = get_json(admin, "/nothing").await;
    assert_eq!(status, 404);
    assert!(e["error"].as_str().unwrap().contains("/nothing"), "{e}");
    let (status, _) = http(admin, "GET", "/offline").await;
    assert_eq!(status, 405, "offline is a POST");
    // The endpoint lives while a handle to it does: the reference's listing, or this one.
    let held = Admin::shared(admin).await.unwrap();
    assert_eq!(held.addr(), admin, "the running endpoint, not a new one");
    drop(reference);
    let (_, services) = get_json(admin, "/services").await;
    assert_eq!(services["consumers"], json!([]));
    drop(held);
    tokio::time::timeout(Duration::from_secs(5), async {
        while tokio::net::TcpStream::connect(admin).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the listener stops with its last handle");
}

/// An endpoint that leaves the registry while a call to it is in flight is `draining` (with
/// the call counted), then goes once the call is over and the grace has passed; a warming
/// instance shows its current weight; a disabled one says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_warming_and_disabled_instances() {
    let slow = echo("slow", Duration::from_millis(1500)).await;
    let other = echo("other", Duration::ZERO).await;
    let key = ServiceKey::new("it.admin.Drain");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let inst = |addr: SocketAddr| {
        Instance::builder("127.0.0.1", addr.port())
            .service(key.clone())
            .timestamp_ms(0)
            .build()
    };
    let warming = Instance::builder("127.0.0.1", 1)
        .service(key.clone())
        .warmup(Duration::from_secs(600))
        .timestamp_ms(now_ms - 60_000)
        .build();
    let disabled = Instance::builder("127.0.0.1", 2)
        .service(key.clone())
        .enabled(false)
        .build();
    let registry = StaticRegistry::new(vec![
        inst(slow.addr()),
        inst(other.addr()),
        warming,
        disabled,
    ]);
    let directory = Arc::new(
        switchman::RegistryDirectory::subscribe(&registry, DirectoryConfig::new(key.clone()))
            .await
            .unwrap(),
    );
    directory
        .wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 3)
        .await
        .unwrap();
    let cluster = ClusterInvoker::new(
        directory.clone(),
        Arc::new(switchman::cluster::HttpInvoker::new()),
        ClusterConfig::default(),
    );
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let _listing = admin.cluster("static", &cluster);

    let (_, snap) = get_json(admin.addr(), "/snapshot/it.admin.Drain").await;
    let w = row(&snap, "127.0.0.1:1");
    assert_eq!(w["state"], "warming", "{snap}");
    // Dubbo: weight × uptime / warmup = 100 × 60 s / 600 s.
    assert_eq!(w["current_weight"], 10, "{w}");
    assert_eq!(w["warming"]["weight"], 100);
    let d = row(&snap, "127.0.0.1:2");
    assert_eq!(d["state"], "disabled");
    assert!(
        d["disabled"]["reason"]
            .as_str()
            .unwrap()
            .contains("enabled=false"),
        "{d}"
    );

    // A call in flight to `slow` (reached through a direct pick of its endpoint), then `slow`
    // leaves the registry.
    let snap0 = directory.load();
    let i = snap0.index_of(&slow.addr().to_string()).unwrap();
    let stats = snap0.endpoints()[i].stats.clone();
    let target = snap0.endpoints()[i].instance.clone();
    let in_flight = tokio::spawn(async move {
        let guard = stats.begin();
        let r = switchman::Invoker::invoke(
            &switchman::cluster::HttpInvoker::new(),
            &target,
            &switchman::Invocation::new("echo"),
            Duration::from_secs(5),
        )
        .await;
        guard.finish(Duration::from_millis(1500), r.is_ok());
        r
    });
    // The call reached `slow` (which answers after 1.5 s): it is in flight.
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    while slow.hits() == 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "the call never reached slow"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let epoch = directory.load().epoch();
    let slow_addr = slow.addr().to_string();
    registry.update(|l| l.retain(|i| i.address() != slow_addr));
    directory
        .wait_until(Duration::from_secs(5), |s| s.epoch() > epoch)
        .await
        .unwrap();
    let mut seen = None;
    for _ in 0..50 {
        let (_, snap) = get_json(admin.addr(), "/snapshot/it.admin.Drain").await;
        if let Some(r) = snap["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == slow_addr.as_str())
        {
            seen = Some(r.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = seen.expect("the departed endpoint is shown");
    assert_eq!(r["state"], "draining", "{r}");
    assert_eq!(r["draining"]["in_flight"], 1, "{r}");
    assert_eq!(r["draining"]["listed"], false);
    assert!(r["draining"]["grace_left_ms"].as_u64().unwrap() > 0);
    in_flight.await.unwrap().unwrap();
    let (_, snap) = get_json(admin.addr(), "/snapshot/it.admin.Drain").await;
    let r = row(&snap, &slow_addr);
    assert_eq!(r["draining"]["in_flight"], 0, "the call finished: {r}");
    assert_eq!(snap["states"]["draining"], 1);
}

/// A registrar that records what it was asked.
#[derive(Debug, Default)]
struct Recording {
    log: Mutex<Vec<String>>,
    fail_next: AtomicU64,
}

impl Registrar for Recording {
    fn register<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, switchman::Result<()>> {
        Box::pin(async move {
            self.log
                .lock()
                .unwrap()
                .push(format!("register {}", instance.address()));
            if self.fail_next.swap(0, Ordering::Relaxed) > 0 {
                return Err(switchman::Error::transport("registry down"));
            }
            Ok(())
        })
    }
    fn unregister<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, switchman::Result<()>> {
        Box::pin(async move {
            self.log
                .lock()
                .unwrap()
                .push(format!("unregister {}", instance.address()));
            Ok(())
        })
    }
}

/// `POST /offline` and `/online` flip an exported provider's registration (only where it is
/// not in the wanted state already, as Dubbo's QOS does), `?service=` selects by pattern,
/// nothing matching is `service not found`, and `/services` shows the state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_and_online_unregister_and_register_again() {
    let registrar = Arc::new(Recording::default());
    let one = Exported::new(
        Instance::builder("127.0.0.1", 20880)
            .service(ServiceKey::with("com.foo.Greeter", "g1", "1.0.0"))
            .build(),
    )
    .registry("zookeeper://u:secret@127.0.0.1:2181", registrar.clone());
    let two = Exported::new(
        Instance::builder("127.0.0.1", 20881)
            .service(ServiceKey::new("com.foo.Other"))
            .build(),
    )
    .registry("zookeeper://127.0.0.1:2181", registrar.clone());
    assert!(one.online().await.is_empty());
    assert!(two.online().await.is_empty());
    assert!(one.is_online());
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let _l1 = admin.provider(&one);
    let _l2 = admin.provider(&two);
    let log = || registrar.log.lock().unwrap().clone();
    assert_eq!(
        log(),
        ["register 127.0.0.1:20880", "register 127.0.0.1:20881"]
    );

    let (status, body) = http(
        admin.addr(),
        "POST",
        "/offline?service=g1%2Fcom.foo.Greeter%3A1.0.0",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["result"], "OK");
    assert_eq!(v["providers"][0]["state"], "offline");
    assert!(!one.is_online() && two.is_online());
    // Offline again: nothing registered there, nothing asked of the registry.
    let (status, _) = http(
        admin.addr(),
        "POST",
        "/offline?service=com%5C.foo%5C.Greet.*",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(log()[2..], ["unregister 127.0.0.1:20880"]);

    let (_, services) = get_json(admin.addr(), "/services").await;
    let states: Vec<(String, String)> = services["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["service"].as_str().unwrap().to_string(),
                p["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (
                "g1/com.foo.Greeter:1.0.0".to_string(),
                "offline".to_string()
            ),
            ("com.foo.Other".to_string(), "online".to_string())
        ]
    );
    let shown = services["providers"][0]["registries"][0].as_str().unwrap();
    assert!(!shown.contains("secret"), "{shown}");

    // Online with no pattern: every provider; only the offline one is registered again. A
    // registry failure is reported and the provider counts as online (the registrar retries).
    registrar.fail_next.store(1, Ordering::Relaxed);
    let (status, body) = http(admin.addr(), "POST", "/online").await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["providers"].as_array().unwrap().len(), 2);
    assert!(
        v["errors"][0].as_str().unwrap().contains("registry down"),
        "{v}"
    );
    assert_eq!(log()[3..], ["register 127.0.0.1:20880"]);
    assert!(one.is_online());

    let (status, body) = http(admin.addr(), "POST", "/offline?service=com.bar.Nope").await;
    assert_eq!(status, 404);
    assert!(body.contains("service not found"), "{body}");
    let (status, body) = http(admin.addr(), "POST", "/offline?service=(").await;
    assert_eq!(status, 400);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("\"(\""), "{body}");
    assert_eq!(log().len(), 4, "no registry call for a bad pattern");
}

/// Two references asking for the same admin address share one endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_share_one_admin_port() {
    let a = echo("a", Duration::ZERO).await;
    let dir = std::env::temp_dir().join(format!("switchman-admin-share-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(
        &file,
        format!(
            "providers:\n  - http://{0}/it.admin.One\n  - http://{0}/it.admin.Two\n",
            a.addr()
        ),
    )
    .unwrap();
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let one = Reference::new("it.admin.One")
        .registry(file.to_str().unwrap())
        .admin(addr)
        .connect()
        .await
        .unwrap();
    let two = Reference::new("it.admin.Two")
        .registry(file.to_str().unwrap())
        .admin(addr)
        .connect()
        .await
        .unwrap();
    assert_eq!(one.admin_addr(), Some(addr));
    assert_eq!(two.admin_addr(), Some(addr));
    let (_, services) = get_json(addr, "/services").await;
    let names: Vec<&str> = services["consumers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["service"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["it.admin.One", "it.admin.Two"]);
    // Another process (or a listener of this one) holding the port: connect names it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let e = Reference::new("it.admin.One")
        .registry(file.to_str().unwrap())
        .admin(taken.local_addr().unwrap())
        .connect()
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains(&taken.local_addr().unwrap().to_string()),
        "{e}"
    );
}

/// `/snapshot/{service}` says which discovery level's list is in use and why, when the
/// registry adapter reads both (`discovery`: the migration step and both sizes).
#[tokio::test]
async fn the_snapshot_shows_the_discovery_levels_decision() {
    use switchman::discovery::Update;
    use switchman::discovery::migration::{Lists, MigrationStep, Source};
    let dir = switchman::RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::new("it.admin.Lists")),
        None,
    );
    let without = switchman::admin::snapshot_json(&dir, None);
    assert!(without.get("discovery").is_none(), "{without}");
    dir.apply(Update::Lists(Lists {
        step: Some(MigrationStep::ApplicationFirst),
        interface_level: 3,
        app_level: 2,
        using: Source::Interface,
    }));
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    while dir.lists().is_none() {
        assert!(std::time::Instant::now() < give_up, "never applied");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let with = switchman::admin::snapshot_json(&dir, None);
    assert_eq!(
        with["discovery"],
        json!({"step": "APPLICATION_FIRST", "interface_level": 3, "app_level": 2, "using": "interface"})
    );
}
