//! Switchman providers registered at application level (`register-mode=instance`, issue #18
//! item 5), found and called by a real Java Dubbo 3.3 consumer in `FORCE_APPLICATION` and by a
//! Switchman consumer, in real ZooKeeper and rnacos. The provider is `switchman provider
//! --protocol tri`'s own code (`serve_echo`, `java_instance`, `registrar_from_url`), which
//! answers Dubbo's `MetadataService` on its Triple port. Every test uses its own application,
//! service group and interface, so the tests run in parallel: a Java consumer in
//! `FORCE_APPLICATION` subscribes to every application its interface's mapping names, and a
//! shared interface (the `DemoService` of the Java providers elsewhere) would make it wait on
//! other tests' instances, whose `MetadataService` may be gone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::metadata_service::MetadataServiceClient;
use switchman_cluster::triple::{
    EchoOptions, TripleInvoker, TripleServer, java_instance, serve_echo,
};
use switchman_core::{Instance, Invocation, Invoker, ServiceKey, Url};
use switchman_discovery::metadata::{MetadataCache, MetadataInfo};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, Registrar, RegistryDirectory, registrar_from_url,
};
use switchman_integration_tests::java_peer::{self, JavaProvider, ProviderOptions};
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{nacos, nacos_api, unique, zookeeper};

const WAIT: Duration = Duration::from_secs(30);

/// An interface of this test's own (the echo provider answers any interface): nothing else
/// maps it to an application.
fn own_interface(prefix: &str) -> String {
    format!("io.switchman.rapp.{}", unique(prefix).replace('-', "_"))
}

/// A `switchman provider --protocol tri` of `iface` in `group`, application `app`.
struct RustProvider {
    server: TripleServer,
    name: String,
    instance: Instance,
    registrar: Arc<dyn Registrar>,
}

async fn rust_provider(registry: &str, iface: &str, app: &str, group: &str) -> RustProvider {
    let (server, name) = serve_echo(
        "127.0.0.1:0".parse().unwrap(),
        EchoOptions {
            name: Some(format!("rust-{app}")),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let instance = java_instance(
        "127.0.0.1",
        server.addr().port(),
        ServiceKey::with(iface, group, ""),
        &["add"],
    )
    .timestamp_ms(now_ms)
    .application(app)
    .param("name", &name)
    .build();
    let registrar = registrar_from_url(registry).unwrap();
    registrar.register(&instance).await.unwrap();
    RustProvider {
        server,
        name,
        instance,
        registrar,
    }
}

/// The Java consumer in `FORCE_APPLICATION` (generic, so any interface name): `add(2, 3)`
/// three times over tri://.
async fn java_calls(registry: &str, iface: &str, group: &str) -> Vec<Value> {
    let (registry, iface, group) = (registry.to_string(), iface.to_string(), group.to_string());
    tokio::task::spawn_blocking(move || {
        java_peer::force_application_adds(&registry, &iface, &group)
    })
    .await
    .unwrap()
}

fn want(name: &str) -> Value {
    json!({"ok": true, "result": {"from": name, "method": "add", "echo": [2, 3]}})
}

async fn zk_data(path: &str) -> Option<Vec<u8>> {
    let zk = raw_client(&zookeeper(), WAIT).await;
    match zk.get_data(path).await {
        Ok((d, _)) => Some(d),
        Err(zookeeper_client::Error::NoNode) => None,
        Err(e) => panic!("{path}: {e}"),
    }
}

/// The revision in a Curator instance node.
fn node_revision(data: &[u8]) -> String {
    let v: Value = serde_json::from_slice(data).unwrap();
    v["payload"]["metadata"]["dubbo.metadata.revision"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_consumer_calls_a_rust_instance_in_zookeeper_local_metadata() {
    if java_peer::skipped("the_java_consumer_calls_a_rust_instance_in_zookeeper_local_metadata") {
        return;
    }
    let started = Instant::now();
    let (app, group) = (unique("rapp-zk"), unique("rapp-zk"));
    let iface = own_interface("rapp-zk");
    let registry = format!("zookeeper://{}?register-mode=instance", zookeeper());
    let p = rust_provider(&registry, &iface, &app, &group).await;
    // Application level only: the instance and the mapping, no interface-level node.
    let id = format!("127.0.0.1:{}", p.server.addr().port());
    let node = zk_data(&format!("/services/{app}/{id}"))
        .await
        .expect("instance node");
    let revision = node_revision(&node);
    assert_eq!(revision.len(), 32, "an MD5 hex revision: {revision}");
    let mapping =
        String::from_utf8(zk_data(&format!("/dubbo/mapping/{iface}")).await.unwrap()).unwrap();
    assert!(mapping.split(',').any(|a| a == app), "{mapping}");
    assert!(
        zk_data(&format!("/dubbo/metadata/{app}/{revision}"))
            .await
            .is_none(),
        "local metadata: no report"
    );
    let lines = java_calls(&format!("zookeeper://{}", zookeeper()), &iface, &group).await;
    assert_eq!(lines, vec![want(&p.name); 3]);
    // 3 calls plus at least one getMetadataInfo from the Java consumer.
    assert!(p.server.hits() >= 4, "hits {}", p.server.hits());
    // Unregistering removes the instance, not the mapping (as Dubbo).
    p.registrar.unregister(&p.instance).await.unwrap();
    assert!(zk_data(&format!("/services/{app}/{id}")).await.is_none());
    let mapping =
        String::from_utf8(zk_data(&format!("/dubbo/mapping/{iface}")).await.unwrap()).unwrap();
    assert!(mapping.split(',').any(|a| a == app), "{mapping}");
    eprintln!("zookeeper local: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_consumer_calls_a_rust_instance_in_zookeeper_remote_metadata() {
    if java_peer::skipped("the_java_consumer_calls_a_rust_instance_in_zookeeper_remote_metadata") {
        return;
    }
    let (app, group) = (unique("rapp-zkr"), unique("rapp-zkr"));
    let iface = own_interface("rapp-zkr");
    let registry = format!(
        "zookeeper://{}?register-mode=instance&metadata-type=remote",
        zookeeper()
    );
    let p = rust_provider(&registry, &iface, &app, &group).await;
    let id = format!("127.0.0.1:{}", p.server.addr().port());
    let node = zk_data(&format!("/services/{app}/{id}")).await.unwrap();
    let revision = node_revision(&node);
    let report = zk_data(&format!("/dubbo/metadata/{app}/{revision}"))
        .await
        .expect("report");
    let info = MetadataInfo::from_slice(&report).unwrap();
    assert_eq!(
        (info.app.as_str(), info.revision.as_str()),
        (app.as_str(), revision.as_str())
    );
    assert_eq!(info.calc_revision(), revision);
    let lines = java_calls(&format!("zookeeper://{}", zookeeper()), &iface, &group).await;
    assert_eq!(lines, vec![want(&p.name); 3]);
    // Remote metadata: the Java consumer read the report, not the MetadataService.
    assert_eq!(p.server.hits(), 3);
    p.registrar.unregister(&p.instance).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_consumer_calls_a_rust_instance_in_nacos_local_metadata() {
    if java_peer::skipped("the_java_consumer_calls_a_rust_instance_in_nacos_local_metadata") {
        return;
    }
    let (app, group) = (unique("rapp-nacos"), unique("rapp-nacos"));
    let iface = own_interface("rapp-nacos");
    let registry = format!("nacos://{}?register-mode=instance", nacos());
    let p = rust_provider(&registry, &iface, &app, &group).await;
    let mapping = nacos_api::request(
        &nacos(),
        "GET",
        "/nacos/v1/cs/configs",
        &[("dataId", iface.clone()), ("group", "mapping".to_string())],
    )
    .unwrap();
    assert!(mapping.split(',').any(|a| a.trim() == app), "{mapping}");
    let listed = nacos_api::request(
        &nacos(),
        "GET",
        "/nacos/v1/ns/instance/list",
        &[("serviceName", app.clone())],
    )
    .unwrap();
    assert!(listed.contains("dubbo.metadata.revision"), "{listed}");
    let lines = java_calls(&format!("nacos://{}", nacos()), &iface, &group).await;
    assert_eq!(lines, vec![want(&p.name); 3]);
    assert!(p.server.hits() >= 4, "hits {}", p.server.hits());
    p.registrar.unregister(&p.instance).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_consumer_calls_a_rust_instance_in_nacos_remote_metadata() {
    if java_peer::skipped("the_java_consumer_calls_a_rust_instance_in_nacos_remote_metadata") {
        return;
    }
    let (app, group) = (unique("rapp-nacosr"), unique("rapp-nacosr"));
    let iface = own_interface("rapp-nacosr");
    let registry = format!(
        "nacos://{}?register-mode=instance&metadata-type=remote",
        nacos()
    );
    let p = rust_provider(&registry, &iface, &app, &group).await;
    let revision = switchman_discovery::metadata::MetadataInfo::of_services(
        &app,
        [switchman_discovery::metadata::ServiceInfo::from_instance(
            &p.instance,
        )],
    )
    .revision;
    let report = nacos_api::request(
        &nacos(),
        "GET",
        "/nacos/v1/cs/configs",
        &[("dataId", app.clone()), ("group", revision.clone())],
    )
    .unwrap();
    assert_eq!(
        MetadataInfo::from_slice(report.as_bytes())
            .unwrap()
            .revision,
        revision
    );
    let lines = java_calls(&format!("nacos://{}", nacos()), &iface, &group).await;
    assert_eq!(lines, vec![want(&p.name); 3]);
    assert_eq!(p.server.hits(), 3, "the report, not the MetadataService");
    p.registrar.unregister(&p.instance).await.unwrap();
}

/// A Switchman consumer (interface-level reading off) finds the Rust application instance
/// through the mapping and the MetadataService, and calls it.
async fn switchman_round_trip(
    registry: &str,
    iface: &str,
    consumer: Arc<dyn switchman_discovery::Registry>,
    app: &str,
    group: &str,
) {
    let p = rust_provider(registry, iface, app, group).await;
    let dir = RegistryDirectory::subscribe(
        consumer.as_ref(),
        // Publish: the unregistered instance must leave the list, not be kept as the last one.
        DirectoryConfig::new(ServiceKey::with(iface, group, "")).empty_policy(EmptyPolicy::Publish),
    )
    .await
    .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| !s.endpoints().is_empty())
        .await
        .unwrap_or_else(|e| panic!("{app}: {e}"));
    let target = snap.endpoints()[0].instance.clone();
    assert_eq!(target.port(), p.server.addr().port());
    assert_eq!(
        target.param("dubbo.metadata.revision").map(str::len),
        Some(32)
    );
    let got = TripleInvoker::new()
        .invoke(
            &target,
            &Invocation::new("add")
                .with_args(vec![json!(2), json!(3)])
                .with_types(["int", "int"]),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(
        got,
        json!({"from": p.name, "method": "add", "echo": [2, 3]})
    );
    p.registrar.unregister(&p.instance).await.unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().is_empty())
        .await
        .unwrap_or_else(|e| panic!("{app} still listed after unregister: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchman_consumer_finds_the_rust_instance_in_zookeeper() {
    let (app, group) = (unique("rapp-rt"), unique("rapp-rt"));
    let cache = Arc::new(MetadataCache::new(Arc::new(MetadataServiceClient::new())));
    let consumer =
        ZookeeperRegistry::from_url(&Url::parse(&format!("zookeeper://{}", zookeeper())).unwrap())
            .unwrap()
            .metadata_cache(cache.clone());
    switchman_round_trip(
        &format!("zookeeper://{}?register-mode=instance", zookeeper()),
        &own_interface("rapp-rt"),
        Arc::new(consumer),
        &app,
        &group,
    )
    .await;
    assert!(cache.stats().fetches >= 1, "{:?}", cache.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchman_consumer_finds_the_rust_instance_in_nacos() {
    let (app, group) = (unique("rapp-rtn"), unique("rapp-rtn"));
    let cache = Arc::new(MetadataCache::new(Arc::new(MetadataServiceClient::new())));
    let consumer = NacosRegistry::from_url(
        &Url::parse(&format!("nacos://{}?provided-by={app}", nacos())).unwrap(),
    )
    .unwrap()
    .metadata_cache(cache.clone());
    switchman_round_trip(
        &format!("nacos://{}?register-mode=instance", nacos()),
        &own_interface("rapp-rtn"),
        Arc::new(consumer),
        &app,
        &group,
    )
    .await;
}

/// `register-mode=all` writes both levels; a second application of the same interface is
/// appended to the mapping, never replacing the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_mode_all_writes_both_levels_and_the_mapping_keeps_every_app() {
    let (a1, a2, group) = (unique("rapp-all1"), unique("rapp-all2"), unique("rapp-all"));
    let iface = own_interface("rapp-all");
    let registry = format!("zookeeper://{}?register-mode=all", zookeeper());
    let p1 = rust_provider(&registry, &iface, &a1, &group).await;
    let p2 = rust_provider(&registry, &iface, &a2, &group).await;
    let zk = raw_client(&zookeeper(), WAIT).await;
    let providers = zk
        .list_children(&format!("/dubbo/{iface}/providers"))
        .await
        .unwrap();
    let port = p1.server.addr().port().to_string();
    assert!(
        providers
            .iter()
            .any(|c| c.contains(&port) && c.contains(&group)),
        "interface-level node of {port}"
    );
    let mapping =
        String::from_utf8(zk_data(&format!("/dubbo/mapping/{iface}")).await.unwrap()).unwrap();
    let apps: Vec<&str> = mapping.split(',').collect();
    assert!(
        apps.contains(&a1.as_str()) && apps.contains(&a2.as_str()),
        "{mapping}"
    );
    for p in [&p1, &p2] {
        p.registrar.unregister(&p.instance).await.unwrap();
    }
}

/// The revision computed as Dubbo's `MetadataInfo.calAndGetRevision` equals the one a Java
/// 3.3 provider registers for the same `MetadataInfo` (read from its report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_revision_matches_the_one_java_computes() {
    if java_peer::skipped("the_revision_matches_the_one_java_computes") {
        return;
    }
    let (app, group) = (unique("rapp-jrev"), unique("rapp-jrev"));
    let java = JavaProvider::start(
        &ProviderOptions::zookeeper(&zookeeper())
            .protocol("tri")
            .application(&app)
            .group(&group)
            .register_mode("instance")
            .metadata_type("remote"),
    );
    let zk = raw_client(&zookeeper(), WAIT).await;
    let deadline = Instant::now() + WAIT;
    let node = loop {
        if let Ok(children) = zk.list_children(&format!("/services/{app}")).await
            && let Some(c) = children.first()
        {
            break zk_data(&format!("/services/{app}/{c}")).await.unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no instance of {app}: {}",
            java.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let revision = node_revision(&node);
    let report = zk_data(&format!("/dubbo/metadata/{app}/{revision}"))
        .await
        .expect("report");
    let info = MetadataInfo::from_slice(&report).unwrap();
    assert!(!info.services.is_empty());
    assert_eq!(info.calc_revision(), revision, "{info:?}");
    drop(java);
}

/// After a session expiry, the new session re-creates the application instance node with the
/// current revision; the mapping (persistent) is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_recreates_the_application_instance() {
    use switchman_integration_tests::zk_server::ZkServer;
    let server = tokio::task::spawn_blocking(ZkServer::standalone)
        .await
        .unwrap();
    let url = server.registry_url("session=2000&timeout=1000&register-mode=instance");
    let (app, group) = (unique("rapp-exp"), unique("rapp-exp"));
    let iface = own_interface("rapp-exp");
    let p = rust_provider(&url, &iface, &app, &group).await;
    let path = format!("/services/{app}/127.0.0.1:{}", p.server.addr().port());
    let client = raw_client(&server.connect_string(), WAIT).await;
    let owner = |c: zookeeper_client::Client, path: String| async move {
        c.check_stat(&path)
            .await
            .ok()
            .flatten()
            .map(|s| s.ephemeral_owner)
    };
    let before = owner(client.clone(), path.clone())
        .await
        .expect("instance node");
    let (data_before, _) = client.get_data(&path).await.unwrap();
    // Freeze the server past the session timeout: the session expires when it resumes.
    server.signal(0, "STOP");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    server.signal(0, "CONT");
    let client = raw_client(&server.connect_string(), WAIT).await;
    let deadline = Instant::now() + WAIT;
    loop {
        match owner(client.clone(), path.clone()).await {
            Some(now) if now != before => break,
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "{path} re-created by a new session"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (data_after, _) = client.get_data(&path).await.unwrap();
    assert_eq!(node_revision(&data_after), node_revision(&data_before));
    let (mapping, _) = client
        .get_data(&format!("/dubbo/mapping/{iface}"))
        .await
        .unwrap();
    assert_eq!(String::from_utf8(mapping).unwrap(), app);
    p.registrar.unregister(&p.instance).await.unwrap();
    assert!(owner(client.clone(), path.clone()).await.is_none());
}
