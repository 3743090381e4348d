//! What ZooKeeper does to sessions, against PRIVATE servers these tests start, freeze, kill and
//! restart (never the shared `SWITCHMAN_ZK`): session expiry, a 3-node ensemble losing its
//! leader, and a restart under calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{Instance, Invocation, Protocol, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, EmptyPolicy, Registrar, RegistryDirectory};
use switchman_integration_tests::unique;
use switchman_integration_tests::zk_server::{ZkServer, raw_client};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(15);

/// Sends the adapters' logs to the test output (filtered by `RUST_LOG`).
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn registry(url: &str) -> ZookeeperRegistry {
    ZookeeperRegistry::from_url(&Url::parse(url).unwrap()).unwrap()
}

fn interface(tag: &str) -> String {
    unique(&format!("it.zk.{tag}")).replace('-', "_")
}

fn instance(iface: &str, port: u16) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Http)
        .service(ServiceKey::new(iface))
        .timestamp_ms(0)
        .build()
}

async fn start(f: impl FnOnce() -> ZkServer + Send + 'static) -> ZkServer {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// The ephemeral owners of the provider nodes of `iface`.
async fn owners(client: &zk::Client, iface: &str) -> Vec<i64> {
    let dir = format!("/dubbo/{iface}/providers");
    let mut out = Vec::new();
    for c in client.list_children(&dir).await.unwrap_or_default() {
        if let Ok(Some(stat)) = client.check_stat(&format!("{dir}/{c}")).await {
            out.push(stat.ephemeral_owner);
        }
    }
    out
}

fn ports(dir: &RegistryDirectory) -> Vec<u16> {
    dir.load().instances().iter().map(|i| i.port()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_recreates_the_provider_node_and_restores_the_subscription() {
    logs();
    let server = start(ZkServer::standalone).await;
    let url = server.registry_url("session=2000&timeout=1000");
    let iface = interface("Expiry");
    let producer = registry(&url);
    producer.register(&instance(&iface, 19_001)).await.unwrap();
    let dir = RegistryDirectory::subscribe(
        &registry(&url),
        DirectoryConfig::new(ServiceKey::new(&iface)).empty_policy(EmptyPolicy::Publish),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .unwrap();
    let before = owners(&raw_client(&server.connect_string(), WAIT).await, &iface).await;
    assert_eq!(before.len(), 1);

    // Freeze the server past the session timeout: both sessions expire (the clients give up
    // after 1.4 x 2 s without an answer, the server expires them when it resumes).
    server.signal(0, "STOP");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    server.signal(0, "CONT");

    let client = raw_client(&server.connect_string(), WAIT).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = owners(&client, &iface).await;
        if now.len() == 1 && now[0] != before[0] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "provider node re-created by a new session (owners before {before:x?}, now {now:x?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The subscription works again: a provider registered now is seen.
    let late = registry(&url);
    late.register(&instance(&iface, 19_002)).await.unwrap();
    dir.wait_until(WAIT, |s| s.instances().len() == 2)
        .await
        .expect("the subscription is restored after the expiry");
    assert_eq!(ports(&dir), vec![19_001, 19_002]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_losing_its_leader_loses_no_update() {
    logs();
    let mut server = start(|| ZkServer::ensemble(3)).await;
    let url = server.registry_url("session=6000&timeout=1000");
    let iface = interface("Ensemble");
    let producer = registry(&url);
    let a = instance(&iface, 19_101);
    producer.register(&a).await.unwrap();
    let dir = RegistryDirectory::subscribe(
        &registry(&url),
        DirectoryConfig::new(ServiceKey::new(&iface)).empty_policy(EmptyPolicy::Publish),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .unwrap();

    let leader = server.leader().expect("an ensemble has a leader");
    server.kill(leader);
    // Changes made during the election (registration retries until a quorum answers).
    let b = instance(&iface, 19_102);
    let second = registry(&url);
    if let Err(e) = second.register(&b).await {
        // Still retried in the background; the assertion below decides.
        eprintln!("register during the election: {e}");
    }
    dir.wait_until(WAIT, |s| s.instances().len() == 2)
        .await
        .expect("the provider added during the election is seen");
    producer.unregister(&a).await.unwrap();
    dir.wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("the removal after the election is seen");
    assert_eq!(ports(&dir), vec![19_102]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_stopped_and_restarted_under_calls_fails_no_call() {
    logs();
    let mut server = start(ZkServer::standalone).await;
    let url = server.registry_url("session=2000&timeout=1000");
    let iface = interface("Restart");
    let mut providers = Vec::new();
    for name in ["p1", "p2", "p3"] {
        providers.push(
            HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
                Box::pin(async move { ProviderReply::Ok(json!({ "from": name })) })
            })
            .await
            .unwrap(),
        );
    }
    let producer = registry(&url);
    for p in &providers[..2] {
        producer
            .register(&instance(&iface, p.addr().port()))
            .await
            .unwrap();
    }
    let dir = Arc::new(
        RegistryDirectory::subscribe(
            &registry(&url),
            DirectoryConfig::new(ServiceKey::new(&iface)),
        )
        .await
        .unwrap(),
    );
    dir.wait_until(WAIT, |s| s.endpoints().len() == 2)
        .await
        .unwrap();
    let cluster = Arc::new(ClusterInvoker::new(
        dir.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let caller = {
        let (cluster, stop, ok, failed) =
            (cluster.clone(), stop.clone(), ok.clone(), failed.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match cluster.invoke(&Invocation::new("hello")).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("call failed: {e}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                // Pace the calls: the machine is shared.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    // Down for longer than the session timeout, so the restart brings new sessions.
    let _server = tokio::task::spawn_blocking(move || {
        server.kill(0);
        std::thread::sleep(Duration::from_millis(3500));
        server.restart(0);
        server
    })
    .await
    .unwrap();

    // The providers come back (re-registered) and a new one is seen: the consumer is live.
    let p3 = instance(&iface, providers[2].addr().port());
    // Held: dropping a registry handle unregisters its providers.
    let late = registry(&url);
    late.register(&p3).await.unwrap();
    dir.wait_until(WAIT, |s| s.instances().len() == 3)
        .await
        .expect("re-registered providers and the new one are listed after the restart");
    stop.store(true, Ordering::Relaxed);
    caller.await.unwrap();
    assert_eq!(failed.load(Ordering::Relaxed), 0, "no call failed");
    assert!(ok.load(Ordering::Relaxed) > 100, "calls kept flowing");
}
