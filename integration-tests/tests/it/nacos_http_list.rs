//! Services read through Nacos's HTTP open API instead of nacos-sdk (`discovery/src/nacos/
//! sdk.rs`, "Services too large for nacos-sdk"): forced with `http-list-above=0`, or moved
//! there once a list the SDK gave is over `http-list-above` bytes. Each test runs a PRIVATE
//! rnacos, whose access log shows the HTTP reads (`GET /nacos/v1/ns/instance/list?...`);
//! instances are registered through the open API (persistent), as a non-SDK client writes
//! them. The figures with lists over nacos-sdk's 4 MiB limit are `benches/big_fleet.rs`.

use std::time::Duration;

use switchman_core::{ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Snapshot};
use switchman_integration_tests::nacos_api::{self, OpenApiInstance};
use switchman_integration_tests::nacos_server::{NacosServer, scratch_dir};
use switchman_integration_tests::ports::FAKE_PORTS;
use switchman_integration_tests::unique;

/// Bound on one change to show: several HTTP reads at `list_interval=200`.
const SEEN: Duration = Duration::from_secs(10);

fn registry(addr: &str, params: &str) -> NacosRegistry {
    let url = format!(
        "nacos://{addr}?naming=plain&rules=false&list_interval=200&cache_dir={}&{params}",
        scratch_dir("switchman-nacos-http-list").display()
    );
    NacosRegistry::from_url(&Url::parse(&url).unwrap()).expect("valid nacos URL")
}

/// Fake port `i` of this file (never served).
fn port(i: u16) -> u16 {
    FAKE_PORTS.start + 700 + i
}

/// The ports in a snapshot, sorted.
fn ports(s: &Snapshot) -> Vec<u16> {
    let mut p: Vec<u16> = s.instances().iter().map(|i| i.port()).collect();
    p.sort();
    p
}

/// How many HTTP list reads of `service` the server answered with 200.
fn http_reads(server: &NacosServer, service: &str) -> usize {
    let needle = format!("GET /nacos/v1/ns/instance/list?serviceName={service}&");
    server
        .log()
        .lines()
        .filter(|l| l.contains(&needle) && l.contains("\" 200 "))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_read_over_http_follows_registrations_weights_and_deregistrations() {
    let server = tokio::task::block_in_place(NacosServer::start);
    let nacos = server.addr();
    let service = unique("it.nacos.http");
    let mut a = OpenApiInstance::new(&service, "127.0.0.1", port(1));
    let b = OpenApiInstance::new(&service, "127.0.0.1", port(2));
    a.register(&nacos).expect("register a");
    b.register(&nacos).expect("register b");

    let reg = registry(&nacos, "http-list-above=0");
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&service)))
        .await
        .expect("subscribe");
    let s = dir
        .wait_until(SEEN, |s| s.instances().len() == 2)
        .await
        .expect("the first list, read over HTTP");
    assert_eq!(ports(&s), [port(1), port(2)]);
    assert!(
        http_reads(&server, &service) >= 1,
        "read over HTTP:\n{}",
        server.log()
    );
    assert_eq!(
        reg.services_read_over_http(),
        [(service.clone(), "DEFAULT_GROUP".to_string())]
    );

    // A weight change.
    a.weight = 3.0;
    a.update(&nacos).expect("update a");
    let s = dir
        .wait_until(SEEN, |s| {
            s.instances()
                .iter()
                .any(|i| i.port() == port(1) && i.weight() == 300)
        })
        .await
        .expect("the new weight");
    assert_eq!(s.instances().len(), 2);

    // A deregistration, then a registration.
    b.deregister(&nacos).expect("deregister b");
    let s = dir
        .wait_until(SEEN, |s| ports(s) == [port(1)])
        .await
        .expect("b leaves");
    assert_eq!(s.instances()[0].weight(), 300);
    let c = OpenApiInstance::new(&service, "127.0.0.1", port(3));
    c.register(&nacos).expect("register c");
    dir.wait_until(SEEN, |s| ports(s) == [port(1), port(3)])
        .await
        .expect("c arrives");
    // Every change came over HTTP: the SDK never subscribed to the service, so it had no
    // other way in (the reads keep going at list_interval).
    assert!(http_reads(&server, &service) >= 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_over_http_list_above_moves_to_http_and_stays_current() {
    let server = tokio::task::block_in_place(NacosServer::start);
    let nacos = server.addr();
    let service = unique("it.nacos.grows");
    OpenApiInstance::new(&service, "127.0.0.1", port(10))
        .register(&nacos)
        .expect("register");
    // One instance is about 250 bytes of JSON: under the bound; 12 are over it.
    let reg = registry(&nacos, "http-list-above=2000");
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&service)))
        .await
        .expect("subscribe");
    dir.wait_until(SEEN, |s| s.instances().len() == 1)
        .await
        .expect("the first list, through the SDK");
    assert!(
        reg.services_read_over_http().is_empty(),
        "a small service is read through the SDK"
    );
    let grown: Vec<OpenApiInstance> = (11..22)
        .map(|i| OpenApiInstance::new(&service, "127.0.0.1", port(i)))
        .collect();
    for i in &grown {
        i.register(&nacos).expect("register");
    }
    dir.wait_until(SEEN, |s| s.instances().len() == 12)
        .await
        .expect("the grown list");
    // Moved to HTTP (by the grown list the SDK pushed, or by the size check), and changes
    // keep arriving through it.
    let moved = tokio::time::timeout(SEEN, async {
        while reg.services_read_over_http().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(moved.is_ok(), "never moved to HTTP:\n{}", server.log());
    let reads = http_reads(&server, &service);
    for i in &grown[..6] {
        i.deregister(&nacos).expect("deregister");
    }
    dir.wait_until(SEEN, |s| s.instances().len() == 6)
        .await
        .expect("the shrunk list");
    assert!(http_reads(&server, &service) > reads, "read over HTTP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_read_over_http_with_a_login() {
    const USER: &str = "switchman-http";
    const PASSWORD: &str = "pw-http-list";
    let server = tokio::task::block_in_place(|| {
        NacosServer::start_with(&[
            ("RNACOS_ENABLE_OPEN_API_AUTH", "true"),
            ("RNACOS_INIT_ADMIN_USERNAME", USER),
            ("RNACOS_INIT_ADMIN_PASSWORD", PASSWORD),
        ])
    });
    let nacos = server.addr();
    // rnacos creates its admin user shortly after it starts serving.
    let token = tokio::time::timeout(SEEN, async {
        loop {
            let login = nacos_api::request(
                &nacos,
                "POST",
                "/nacos/v1/auth/login",
                &[("username", USER.into()), ("password", PASSWORD.into())],
            );
            if let Ok(body) = login
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(&body)
                && let Some(t) = v["accessToken"].as_str()
            {
                return t.to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("rnacos auth never became ready");
    let service = unique("it.nacos.http.auth");
    nacos_api::request(
        &nacos,
        "POST",
        "/nacos/v1/ns/instance",
        &[
            ("serviceName", service.clone()),
            ("ip", "127.0.0.1".into()),
            ("port", port(30).to_string()),
            ("healthy", "true".into()),
            ("ephemeral", "false".into()),
            ("accessToken", token),
        ],
    )
    .expect("open API register");
    // The open API refuses a list read without a token: the read below needs the login.
    let anonymous = nacos_api::request(
        &nacos,
        "GET",
        "/nacos/v1/ns/instance/list",
        &[("serviceName", service.clone())],
    );
    assert!(anonymous.is_err(), "{anonymous:?}");

    let reg = registry(&format!("{USER}:{PASSWORD}@{nacos}"), "http-list-above=0");
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&service)))
        .await
        .expect("subscribe");
    let s = dir
        .wait_until(SEEN, |s| s.instances().len() == 1)
        .await
        .expect("the list, read over HTTP with the login's token");
    assert_eq!(ports(&s), [port(30)]);
    assert!(http_reads(&server, &service) >= 1, "{}", server.log());
}
