//! The Nacos adapter when Nacos goes away: each test runs a PRIVATE rnacos it can stop and
//! restart (never the shared server).
//!
//! Providers are registered through Switchman's registrar (ephemeral SDK instances, which the
//! SDK registers again after it reconnects), so no service mixes persistent and ephemeral
//! instances across a restart (an rnacos quirk).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{Instance, Invocation, ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, RegistryDirectory};
use switchman_integration_tests::nacos_server::{NacosServer, scratch_dir};
use switchman_integration_tests::unique;

/// The bound for a subscription to come back after Nacos does.
const RESTORED: Duration = Duration::from_secs(20);

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(prefix: &str) -> Self {
        let p = scratch_dir(prefix);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

fn registry(addr: &str, cache: &TempDir, name: &str) -> NacosRegistry {
    let url = format!(
        "nacos://{addr}?naming=plain&rules=false&cache_dir={}",
        cache.0.join(name).display()
    );
    NacosRegistry::from_url(&Url::parse(&url).unwrap()).expect("valid nacos URL")
}

async fn provider() -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |_req| {
        Box::pin(async { ProviderReply::Ok(json!("ok")) })
    })
    .await
    .expect("provider binds")
}

fn instance(service: &ServiceKey, p: &HttpProvider) -> Instance {
    Instance::builder("127.0.0.1", p.addr().port())
        .service(service.clone())
        .warmup(Duration::ZERO)
        .build()
}

/// Registers, retrying while the registrar's client reconnects, for at most `within`.
async fn register_within(reg: &NacosRegistry, inst: &Instance, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match reg.register(inst).await {
            Ok(()) => return,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("register {} not yet: {e}", inst.address());
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("register {} failed for {within:?}: {e}", inst.address()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_restart_under_calls_fails_no_call_and_resubscribes() {
    let mut server = tokio::task::block_in_place(NacosServer::start);
    let cache = TempDir::new("switchman-nacos-restart");
    let key = ServiceKey::new(unique("it.restart"));
    let (p1, p2) = (provider().await, provider().await);
    let provider_reg = registry(&server.addr(), &cache, "provider");
    register_within(&provider_reg, &instance(&key, &p1), Duration::from_secs(10)).await;

    let consumer_reg = registry(&server.addr(), &cache, "consumer");
    // Default policy KeepLast: the empty list a restarted Nacos may push before the provider
    // re-registered must not stop calls.
    let dir = Arc::new(
        RegistryDirectory::subscribe(&consumer_reg, DirectoryConfig::new(key.clone()))
            .await
            .expect("subscribe"),
    );
    dir.wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 1)
        .await
        .expect("provider listed");
    let invoker = ClusterInvoker::new(
        dir.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );

    // Calls run throughout the outage.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let caller = {
        let (invoker, stop, ok, failed) =
            (invoker.clone(), stop.clone(), ok.clone(), failed.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match invoker.invoke(&Invocation::new("echo")).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("call failed: {e}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let before_outage = ok.load(Ordering::Relaxed);
    tokio::task::block_in_place(|| server.stop());
    // Calls keep succeeding while Nacos is down.
    let during = ok.load(Ordering::Relaxed);
    tokio::time::timeout(Duration::from_secs(10), async {
        while ok.load(Ordering::Relaxed) < during + 100 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("calls keep flowing while Nacos is down");
    tokio::task::block_in_place(|| server.restart());

    // The subscription is back: a provider registered after the restart is seen.
    register_within(&provider_reg, &instance(&key, &p2), RESTORED).await;
    dir.wait_until(RESTORED, |s| s.endpoints().len() == 2)
        .await
        .expect("subscription restored after the restart");
    let p2_before = p2.hits();
    tokio::time::timeout(Duration::from_secs(10), async {
        while p2.hits() == p2_before {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the new provider receives calls");
    stop.store(true, Ordering::Relaxed);
    caller.await.unwrap();
    assert!(ok.load(Ordering::Relaxed) > before_outage + 100);
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "no call may fail across the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_consumer_starts_while_nacos_is_down_from_its_snapshot_cache() {
    let mut server = tokio::task::block_in_place(NacosServer::start);
    let cache = TempDir::new("switchman-nacos-down");
    let snapshot = cache.0.join("snapshot.json");
    let key = ServiceKey::new(unique("it.down"));
    let (p1, p2) = (provider().await, provider().await);
    let provider_reg = registry(&server.addr(), &cache, "provider");
    register_within(&provider_reg, &instance(&key, &p1), Duration::from_secs(10)).await;

    // A first consumer run writes the snapshot cache.
    {
        let reg = registry(&server.addr(), &cache, "consumer1");
        let dir = RegistryDirectory::subscribe(
            &reg,
            DirectoryConfig::new(key.clone()).cache_file(&snapshot),
        )
        .await
        .expect("subscribe");
        dir.wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 1)
            .await
            .expect("provider listed");
        tokio::time::timeout(Duration::from_secs(5), async {
            while !snapshot.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("snapshot cache written");
    }
    tokio::task::block_in_place(|| server.stop());

    // A new consumer starts while Nacos is down: subscribing returns at once, calls succeed
    // from the snapshot cache.
    let reg = registry(&server.addr(), &cache, "consumer2");
    let dir = Arc::new(
        tokio::time::timeout(
            Duration::from_secs(2),
            RegistryDirectory::subscribe(
                &reg,
                DirectoryConfig::new(key.clone()).cache_file(&snapshot),
            ),
        )
        .await
        .expect("subscribe does not wait for Nacos")
        .expect("subscribe"),
    );
    assert_eq!(
        dir.load().endpoints().len(),
        1,
        "served from the snapshot cache"
    );
    let invoker = ClusterInvoker::new(
        dir.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    for k in 0..50 {
        let r = invoker.invoke(&Invocation::new("echo")).await;
        assert!(r.is_ok(), "call {k} while Nacos is down: {r:?}");
    }
    assert_eq!(p1.hits(), 50, "every call reached the cached provider");

    // Nacos comes back: the consumer connects in the background and follows changes.
    tokio::task::block_in_place(|| server.restart());
    register_within(&provider_reg, &instance(&key, &p2), RESTORED).await;
    dir.wait_until(RESTORED, |s| s.endpoints().len() == 2)
        .await
        .expect("the consumer started offline follows Nacos once it is back");
}

/// Waits until the server's access log holds a login by the adapter (HTTP/1.1; the test's own
/// requests are HTTP/1.0) answered with `status`. The credentials are in the request's body,
/// so the logged request line has no query string.
async fn login_logged(server: &NacosServer, status: &str) -> bool {
    let needle = format!("\"POST /nacos/v1/auth/login HTTP/1.1\" {status} ");
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let found = server.log().lines().any(|l| l.contains(&needle));
            if found {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_username_and_password_authenticate() {
    let server = tokio::task::block_in_place(|| {
        NacosServer::start_with(&[
            ("RNACOS_ENABLE_OPEN_API_AUTH", "true"),
            ("RNACOS_INIT_ADMIN_USERNAME", "switchman"),
            ("RNACOS_INIT_ADMIN_PASSWORD", "s3cret-pass"),
        ])
    });
    // rnacos creates its admin user shortly after it starts serving: wait until it can log in.
    let ready = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let login = switchman_integration_tests::nacos_api::request(
                &server.addr(),
                "POST",
                "/nacos/v1/auth/login",
                &[
                    ("username", "switchman".into()),
                    ("password", "s3cret-pass".into()),
                ],
            );
            if login.is_ok_and(|body| body.contains("accessToken")) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(ready.is_ok(), "rnacos auth never became ready");
    let cache = TempDir::new("switchman-nacos-auth");
    let key = ServiceKey::new(unique("it.auth"));
    let p = provider().await;
    let with = |creds: &str, name: &str| {
        let url = format!(
            "nacos://{creds}{}?naming=plain&rules=false&cache_dir={}",
            server.addr(),
            cache.0.join(name).display()
        );
        NacosRegistry::from_url(&Url::parse(&url).unwrap()).expect("valid nacos URL")
    };

    // Right credentials (in the address): the client logs in over HTTP, then registers and
    // subscribes over gRPC with the token.
    let provider_reg = with("switchman:s3cret-pass@", "provider");
    register_within(&provider_reg, &instance(&key, &p), Duration::from_secs(10)).await;
    assert!(
        login_logged(&server, "200").await,
        "the client logged in with the URL's credentials; log:\n{}",
        server.log()
    );
    let consumer_reg = with("switchman:s3cret-pass@", "consumer");
    let dir = RegistryDirectory::subscribe(&consumer_reg, DirectoryConfig::new(key.clone()))
        .await
        .expect("subscribe");
    dir.wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 1)
        .await
        .expect("an authenticated consumer sees the provider");

    // A wrong password: the login is refused and so is the registration.
    let intruder = with("mallory:wr0ng-pa55@", "intruder");
    let refused = intruder.register(&instance(&key, &p)).await;
    assert!(
        refused.is_err(),
        "a wrong password must not register: {refused:?}"
    );
    assert!(
        login_logged(&server, "403").await,
        "the wrong password was tried and refused; log:\n{}",
        server.log()
    );
    // nacos-sdk's own login put both in the URL, which the server (and any proxy) logs.
    let log = server.log();
    for secret in ["s3cret-pass", "wr0ng-pa55"] {
        assert!(
            !log.contains(secret),
            "a password reached the server's access log:\n{log}"
        );
    }
}
