//! The ZooKeeper adapter against the shared server of `scripts/test` (`SWITCHMAN_ZK`). Every
//! test uses its own interface name, so tests run in parallel without touching each other's
//! nodes. Tests that stop or freeze ZooKeeper are in `zookeeper_session.rs` (private servers).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::url::encode_component;
use switchman_core::{Instance, Invocation, Protocol, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, Registrar, Registry, RegistryDirectory, Update,
};
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{unique, zookeeper};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(10);

/// Sends the adapters' logs to the test output (filtered by `RUST_LOG`).
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn registry(extra: &str) -> ZookeeperRegistry {
    let addr = if extra.is_empty() {
        format!("zookeeper://{}", zookeeper())
    } else {
        format!("zookeeper://{}?{extra}", zookeeper())
    };
    ZookeeperRegistry::from_url(&Url::parse(&addr).unwrap()).unwrap()
}

async fn raw() -> zk::Client {
    raw_client(&zookeeper(), WAIT).await
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// A unique interface name (dots and letters, as Java names them).
fn interface(tag: &str) -> String {
    unique(&format!("it.zk.{tag}")).replace('-', "_")
}

fn instance(iface: &str, port: u16, weight: u32, app: &str) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Http)
        .service(ServiceKey::new(iface))
        .weight(weight)
        .application(app)
        // Started long ago: warm-up must not scale the weights this test measures.
        .timestamp_ms(0)
        .build()
}

async fn named_provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
        Box::pin(async move { ProviderReply::Ok(json!({ "from": name })) })
    })
    .await
    .expect("provider starts")
}

/// Makes `n` calls (8 in flight) and counts the answers per provider name.
async fn split(cluster: &Arc<ClusterInvoker>, n: usize) -> HashMap<String, usize> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let cluster = cluster.clone();
        let next = next.clone();
        workers.push(tokio::spawn(async move {
            let mut seen: HashMap<String, usize> = HashMap::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                let v = cluster
                    .invoke(&Invocation::new("hello"))
                    .await
                    .expect("every call succeeds");
                *seen
                    .entry(v["from"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
            seen
        }));
    }
    let mut all = HashMap::new();
    for w in workers {
        for (k, v) in w.await.unwrap() {
            *all.entry(k).or_default() += v;
        }
    }
    all
}

async fn cleanup(client: &zk::Client, path: &str) {
    // Depth-first delete of what a test created (best effort).
    let mut stack = vec![path.to_string()];
    let mut order = Vec::new();
    while let Some(p) = stack.pop() {
        if let Ok(children) = client.list_children(&p).await {
            for c in children {
                stack.push(format!("{p}/{c}"));
            }
        }
        order.push(p);
    }
    for p in order.into_iter().rev() {
        let _ = client.delete(&p, None).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_provider_is_visible_within_1s_and_gone_within_1s() {
    logs();
    let iface = interface("Visible");
    let consumer = registry("");
    let dir = RegistryDirectory::subscribe(
        &consumer,
        DirectoryConfig::new(ServiceKey::new(&iface)).empty_policy(EmptyPolicy::Publish),
    )
    .await
    .unwrap();
    // The first (empty) list: from here on the clock measures propagation only.
    dir.wait_until(WAIT, |s| s.epoch() > 0).await.unwrap();

    let producer = registry("");
    let inst = instance(&iface, 18_081, 100, "it-visible");
    producer.register(&inst).await.unwrap();
    let snap = dir
        .wait_until(Duration::from_secs(1), |s| s.instances().len() == 1)
        .await
        .expect("a registered provider is visible within 1 s");
    assert_eq!(snap.instances()[0].address(), "127.0.0.1:18081");
    assert_eq!(snap.instances()[0].application(), Some("it-visible"));

    // The node is the ephemeral one Java Dubbo writes.
    let client = raw().await;
    let dir_path = format!("/dubbo/{iface}/providers");
    let children = client.list_children(&dir_path).await.unwrap();
    assert_eq!(children.len(), 1);
    let url = Url::from_encoded(&children[0]).unwrap();
    assert_eq!(url.protocol(), "http");
    assert_eq!(url.path(), iface);
    assert_eq!(url.param("interface"), Some(iface.as_str()));
    assert_eq!(url.param("side"), Some("provider"));
    assert_eq!(url.param("dynamic"), Some("true"));
    let (_, stat) = client
        .get_data(&format!("{dir_path}/{}", children[0]))
        .await
        .unwrap();
    assert_ne!(stat.ephemeral_owner, 0, "provider nodes are ephemeral");

    producer.unregister(&inst).await.unwrap();
    dir.wait_until(Duration::from_secs(1), |s| s.instances().is_empty())
        .await
        .expect("an unregistered provider is gone within 1 s");
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_python_encoded_nodes_parse_and_bad_nodes_are_skipped() {
    logs();
    let iface = interface("Encoded");
    let client = raw().await;
    let dir_path = format!("/dubbo/{iface}/providers");
    client.mkdir(&dir_path, &persistent()).await.unwrap();
    // Exactly what Java's URLEncoder makes of a Dubbo provider URL (space as '+', ',' as %2C).
    let java = format!(
        "dubbo%3A%2F%2F127.0.0.1%3A20880%2F{iface}%3Fanyhost%3Dtrue%26application%3Dmy+shop%26dubbo%3D2.0.2%26interface%3D{iface}%26methods%3DsayHello%2CsayBye%26side%3Dprovider%26timestamp%3D1700000000000%26weight%3D25"
    );
    // What apache-dubbo (Python) registers: no path, `service` instead of `interface`.
    let python = format!("tri%3A%2F%2F127.0.0.1%3A50051%3Fservice%3D{iface}");
    let other_version = encode_component(&format!(
        "dubbo://127.0.0.1:20881/{iface}?interface={iface}&version=9.9"
    ));
    let broken = "dubbo%3A%2F%2Fbroken%ZZ".to_string();
    let no_port = encode_component(&format!("dubbo://127.0.0.1/{iface}"));
    for name in [&java, &python, &other_version, &broken, &no_port] {
        client
            .create(
                &format!("{dir_path}/{name}"),
                b"10.0.0.1",
                &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
    }
    let dir =
        RegistryDirectory::subscribe(&registry(""), DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.instances().len() == 2)
        .await
        .expect("the two good nodes are listed");
    let by_port: HashMap<u16, &Arc<Instance>> =
        snap.instances().iter().map(|i| (i.port(), i)).collect();
    let j = by_port[&20880];
    assert_eq!(j.protocol(), &Protocol::Dubbo);
    assert_eq!(j.weight(), 25);
    assert_eq!(j.application(), Some("my shop"));
    assert_eq!(j.param("methods"), Some("sayHello,sayBye"));
    let p = by_port[&50051];
    assert_eq!(p.protocol(), &Protocol::Tri);
    assert_eq!(&*p.service().interface, iface.as_str());
    drop(dir);
    // Protocol filter of the consumer (`protocol=tri`).
    let tri_only = RegistryDirectory::subscribe(
        &registry("protocol=tri"),
        DirectoryConfig::new(ServiceKey::new(&iface)),
    )
    .await
    .unwrap();
    let snap = tri_only.wait_until(WAIT, |s| s.epoch() > 0).await.unwrap();
    assert_eq!(
        snap.instances()
            .iter()
            .map(|i| i.port())
            .collect::<Vec<_>>(),
        vec![50051]
    );
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weight_override_changes_the_measured_split_of_1000_calls() {
    logs();
    let iface = interface("Split");
    let a = named_provider("a").await;
    let b = named_provider("b").await;
    let producer = registry("");
    let ia = instance(&iface, a.addr().port(), 100, "it-split");
    let ib = instance(&iface, b.addr().port(), 100, "it-split");
    producer.register(&ia).await.unwrap();
    producer.register(&ib).await.unwrap();

    let dir = Arc::new(
        RegistryDirectory::subscribe(&registry(""), DirectoryConfig::new(ServiceKey::new(&iface)))
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
    let before = split(&cluster, 1000).await;
    let share_a = before.get("a").copied().unwrap_or(0) as f64 / 1000.0;
    assert!(
        (0.40..=0.60).contains(&share_a),
        "equal weights split evenly: {before:?}"
    );

    // An operator raises a's weight to 400 with an override node (dubbo-admin's form).
    let client = raw().await;
    let over_dir = format!("/dubbo/{iface}/configurators");
    client.mkdir(&over_dir, &persistent()).await.unwrap();
    let rule = encode_component(&format!(
        "override://{}/{iface}?category=configurators&dynamic=false&enabled=true&weight=400",
        ia.address()
    ));
    let rule_path = format!("{over_dir}/{rule}");
    client.create(&rule_path, b"", &persistent()).await.unwrap();
    dir.wait_until(WAIT, |s| {
        s.instances()
            .iter()
            .any(|i| i.port() == a.addr().port() && i.weight() == 400)
    })
    .await
    .expect("the override reaches the directory");
    let after = split(&cluster, 1000).await;
    let share_a = after.get("a").copied().unwrap_or(0) as f64 / 1000.0;
    // Expected 400 / 500 = 0.8; the band is more than 6 standard deviations wide.
    assert!(
        (0.72..=0.88).contains(&share_a),
        "weight 400 vs 100 moves the split to about 80/20: {after:?}"
    );

    // Config-centre YAML disables b; a bad edit later keeps the last good rule in force.
    let yaml_path = format!("/dubbo/config/dubbo/{iface}::.configurators");
    let yaml = format!(
        "configVersion: v2.7\nscope: service\nkey: {iface}\nenabled: true\nconfigs:\n  - addresses: [\"{}\"]\n    side: provider\n    parameters:\n      disabled: true\n",
        ib.address()
    );
    client
        .mkdir("/dubbo/config/dubbo", &persistent())
        .await
        .unwrap();
    client
        .create(&yaml_path, yaml.as_bytes(), &persistent())
        .await
        .unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().len() == 1)
        .await
        .expect("the YAML rule disables b");
    client
        .set_data(&yaml_path, b"configs: [unclosed", None)
        .await
        .unwrap();
    // An observable change after the bad edit: the weight override goes away.
    client.delete(&rule_path, None).await.unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.instances().iter().all(|i| i.weight() == 100))
        .await
        .expect("removing the override restores the weight");
    assert_eq!(
        snap.endpoints().len(),
        1,
        "the last good YAML rule (b disabled) stays in force"
    );
    let only_a = split(&cluster, 100).await;
    assert_eq!(only_a.get("a"), Some(&100), "{only_a:?}");
    client.delete(&yaml_path, None).await.unwrap();
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

async fn next_rule(rx: &mut switchman_discovery::UpdateReceiver, key: &str) -> Option<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(Update::Rule { key: k, text })) if k == key => return text,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("subscription ended"),
            Err(_) => panic!("no rule update for {key} within {WAIT:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_centre_rules_arrive_as_rule_updates() {
    logs();
    let iface = interface("Rules");
    let app = unique("it-rules-app");
    let client = raw().await;
    client
        .mkdir("/dubbo/config/dubbo", &persistent())
        .await
        .unwrap();
    let producer = registry("");
    producer
        .register(&instance(&iface, 18_090, 100, &app))
        .await
        .unwrap();
    let consumer = registry("application=it-consumer");
    let mut rx = consumer.subscribe(&ServiceKey::new(&iface)).await.unwrap();

    let service_key = format!("{iface}::.condition-router");
    let text = format!(
        "configVersion: v3.0\nscope: service\nkey: {iface}\nconditions:\n  - method = hello => host = 127.0.0.1\n"
    );
    let path = format!("/dubbo/config/dubbo/{service_key}");
    client
        .create(&path, text.as_bytes(), &persistent())
        .await
        .unwrap();
    assert_eq!(
        next_rule(&mut rx, &service_key).await.as_deref(),
        Some(text.as_str())
    );

    // The provider application's tag rule is watched because a provider names that app.
    let tag_key = format!("{app}.tag-router");
    let tag = format!(
        "configVersion: v3.0\nkey: {app}\ntags:\n  - name: gray\n    addresses: [\"127.0.0.1:18090\"]\n"
    );
    let tag_path = format!("/dubbo/config/dubbo/{tag_key}");
    client
        .create(&tag_path, tag.as_bytes(), &persistent())
        .await
        .unwrap();
    assert_eq!(
        next_rule(&mut rx, &tag_key).await.as_deref(),
        Some(tag.as_str())
    );

    client.delete(&path, None).await.unwrap();
    assert_eq!(
        next_rule(&mut rx, &service_key).await,
        None,
        "deletion clears the rule"
    );
    client.delete(&tag_path, None).await.unwrap();
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_started_while_zookeeper_is_down_serves_from_its_cache_file() {
    logs();
    let iface = interface("Cache");
    let cache = std::env::temp_dir().join(format!("{}.json", unique("switchman-zk-cache")));
    let a = named_provider("a").await;
    let producer = registry("");
    producer
        .register(&instance(&iface, a.addr().port(), 100, "it-cache"))
        .await
        .unwrap();
    {
        // A first consumer run writes the cache file.
        let dir = RegistryDirectory::subscribe(
            &registry(""),
            DirectoryConfig::new(ServiceKey::new(&iface)).cache_file(&cache),
        )
        .await
        .unwrap();
        dir.wait_until(WAIT, |s| s.endpoints().len() == 1)
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + WAIT;
        while !cache.exists() {
            assert!(tokio::time::Instant::now() < deadline, "cache file written");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // ZooKeeper "down": nothing listens on this port. Not one bound and released (a port of the
    // kernel's ephemeral range, which another test's provider on 127.0.0.1:0 may get next): one
    // of the ports no real process of the suite binds.
    let dead_port = switchman_integration_tests::ports::FAKE_PORTS.start;
    let down = ZookeeperRegistry::from_url(
        &Url::parse(&format!("zookeeper://127.0.0.1:{dead_port}?timeout=500")).unwrap(),
    )
    .unwrap();
    let dir = Arc::new(
        RegistryDirectory::subscribe(
            &down,
            DirectoryConfig::new(ServiceKey::new(&iface)).cache_file(&cache),
        )
        .await
        .expect("subscribing does not wait for ZooKeeper"),
    );
    assert_eq!(dir.load().endpoints().len(), 1, "the cache serves at once");
    let cluster = ClusterInvoker::new(dir, Arc::new(HttpInvoker::new()), ClusterConfig::default());
    for _ in 0..20 {
        let v = cluster.invoke(&Invocation::new("hello")).await.unwrap();
        assert_eq!(v["from"], "a");
    }
    std::fs::remove_file(&cache).ok();
    cleanup(&raw().await, &format!("/dubbo/{iface}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_level_instances_come_from_mapping_services_and_remote_metadata() {
    logs();
    let iface = interface("AppLevel");
    let app = unique("it-app-level");
    let revision = "rev-1a2b3c";
    let client = raw().await;
    let dir =
        RegistryDirectory::subscribe(&registry(""), DirectoryConfig::new(ServiceKey::new(&iface)))
            .await
            .unwrap();
    // What a Dubbo 3 provider with remote metadata writes.
    client.mkdir("/dubbo/mapping", &persistent()).await.unwrap();
    let meta_dir = format!("/dubbo/metadata/{app}");
    client.mkdir(&meta_dir, &persistent()).await.unwrap();
    let metadata = json!({
        "app": app,
        "revision": revision,
        "services": {
            format!("{iface}:tri"): {
                "name": iface, "protocol": "tri", "path": iface,
                "params": {"side": "provider", "weight": "40", "interface": iface}
            }
        }
    });
    client
        .create(
            &format!("{meta_dir}/{revision}"),
            metadata.to_string().as_bytes(),
            &persistent(),
        )
        .await
        .unwrap();
    let services_dir = format!("/services/{app}");
    client.mkdir(&services_dir, &persistent()).await.unwrap();
    let instance_json = json!({
        "name": app, "id": "127.0.0.1:20880", "address": "127.0.0.1", "port": 20880,
        "sslPort": null,
        "payload": {
            "@class": "org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
            "id": "127.0.0.1:20880", "name": app,
            "metadata": {
                "dubbo.endpoints": "[{\"port\":50052,\"protocol\":\"tri\"}]",
                "dubbo.metadata.revision": revision,
                "dubbo.metadata.storage-type": "remote"
            }
        },
        "registrationTimeUTC": 1_700_000_000_000u64, "serviceType": "DYNAMIC", "uriSpec": null
    });
    client
        .create(
            &format!("{services_dir}/127.0.0.1:20880"),
            instance_json.to_string().as_bytes(),
            &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    // The mapping last: it makes the consumer look at the application.
    client
        .create(
            &format!("/dubbo/mapping/{iface}"),
            app.as_bytes(),
            &persistent(),
        )
        .await
        .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("the application-level instance is listed");
    let i = &snap.instances()[0];
    assert_eq!(i.address(), "127.0.0.1:50052", "port from the tri endpoint");
    assert_eq!(i.protocol(), &Protocol::Tri);
    assert_eq!(i.weight(), 40);
    assert_eq!(i.application(), Some(app.as_str()));
    cleanup(&client, &services_dir).await;
    cleanup(&client, &meta_dir).await;
    let _ = client
        .delete(&format!("/dubbo/mapping/{iface}"), None)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_auth_and_chroot_protect_what_we_create() {
    logs();
    let iface = interface("Auth");
    let chroot = unique("switchman-chroot");
    let secured = format!("zookeeper://alice:s3cret@{}/{chroot}", zookeeper());
    let producer = ZookeeperRegistry::from_url(&Url::parse(&secured).unwrap()).unwrap();
    producer
        .register(&instance(&iface, 18_100, 100, "it-auth"))
        .await
        .unwrap();
    let dir = RegistryDirectory::subscribe(
        &ZookeeperRegistry::from_url(&Url::parse(&secured).unwrap()).unwrap(),
        DirectoryConfig::new(ServiceKey::new(&iface)),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.instances().len() == 1)
        .await
        .expect("an authenticated consumer under the same chroot sees the provider");

    // The node lives under the chroot and only the creator may touch it.
    let anonymous = raw().await;
    let parent = format!("/{chroot}/dubbo/{iface}/providers");
    assert!(
        matches!(
            anonymous.list_children(&parent).await,
            Err(zk::Error::NoAuth)
        ),
        "an unauthenticated client cannot list the providers"
    );
    let owner = tokio::time::timeout(
        WAIT,
        zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_auth("digest", b"alice:s3cret")
            .connect(&zookeeper()),
    )
    .await
    .unwrap()
    .unwrap();
    let children = owner.list_children(&parent).await.unwrap();
    assert_eq!(children.len(), 1);
    for path in [parent.clone(), format!("{parent}/{}", children[0])] {
        let (acl, _) = owner.get_acl(&path).await.unwrap();
        assert_eq!(acl.len(), 1, "{path}: {acl:?}");
        assert_eq!(acl[0].scheme(), "digest");
        assert!(acl[0].id().starts_with("alice:"), "{path}: {acl:?}");
    }
    drop(dir);
    drop(producer);
    cleanup(&owner, &format!("/{chroot}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_bad_rule_nodes_keep_the_last_good_rule() {
    logs();
    let iface = interface("Oversized");
    let client = raw().await;
    client
        .mkdir("/dubbo/config/dubbo", &persistent())
        .await
        .unwrap();
    let consumer = registry("application=it-oversized-consumer");
    let mut rx = consumer.subscribe(&ServiceKey::new(&iface)).await.unwrap();
    let key = format!("{iface}::.condition-router");
    let path = format!("/dubbo/config/dubbo/{key}");
    let good = "conditions:\n  - => host = 127.0.0.1\n";
    client
        .create(&path, good.as_bytes(), &persistent())
        .await
        .unwrap();
    assert_eq!(next_rule(&mut rx, &key).await.as_deref(), Some(good));

    // 300 KB is over the adapter's 256 KiB limit (and under ZooKeeper's 1 MB).
    client
        .set_data(&path, "#".repeat(300 * 1024).as_bytes(), None)
        .await
        .unwrap();
    // Then an observable change on another key of the same subscription.
    let app_key = "it-oversized-consumer.condition-router".to_string();
    let app_path = format!("/dubbo/config/dubbo/{app_key}");
    let _ = client.delete(&app_path, None).await;
    client
        .create(&app_path, good.as_bytes(), &persistent())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, rx.recv())
            .await
            .expect("updates arrive")
        {
            Some(Update::Rule { key: k, .. }) if k == key => {
                panic!("the oversized rule must be skipped, not sent")
            }
            Some(Update::Rule { key: k, text }) if k == app_key => {
                assert_eq!(text.as_deref(), Some(good));
                break;
            }
            Some(_) => {}
            None => panic!("subscription ended"),
        }
    }
    client.delete(&path, None).await.unwrap();
    client.delete(&app_path, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneshot_watch_mode_for_old_servers_sees_every_kind_of_change() {
    logs();
    let iface = interface("Oneshot");
    let consumer = registry("watch=oneshot");
    let dir = RegistryDirectory::subscribe(
        &consumer,
        DirectoryConfig::new(ServiceKey::new(&iface)).empty_policy(EmptyPolicy::Publish),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.epoch() > 0).await.unwrap();
    let producer = registry("");
    let a = instance(&iface, 18_201, 100, "it-oneshot");
    let b = instance(&iface, 18_202, 100, "it-oneshot");
    producer.register(&a).await.unwrap();
    dir.wait_until(Duration::from_secs(1), |s| s.instances().len() == 1)
        .await
        .expect("the providers node did not exist: an exists watch sees it created");
    producer.register(&b).await.unwrap();
    dir.wait_until(Duration::from_secs(1), |s| s.instances().len() == 2)
        .await
        .expect("the re-armed child watch sees the second provider");

    let client = raw().await;
    let over_dir = format!("/dubbo/{iface}/configurators");
    client.mkdir(&over_dir, &persistent()).await.unwrap();
    let rule = encode_component(&format!(
        "override://{}/{iface}?category=configurators&weight=7",
        a.address()
    ));
    client
        .create(&format!("{over_dir}/{rule}"), b"", &persistent())
        .await
        .unwrap();
    dir.wait_until(WAIT, |s| s.instances().iter().any(|i| i.weight() == 7))
        .await
        .expect("the override is seen");
    client
        .mkdir("/dubbo/config/dubbo", &persistent())
        .await
        .unwrap();
    let yaml_path = format!("/dubbo/config/dubbo/{iface}::.configurators");
    let yaml = format!(
        "configVersion: v2.7\nkey: {iface}\nconfigs:\n  - addresses: [\"{}\"]\n    side: provider\n    parameters: {{disabled: true}}\n",
        b.address()
    );
    client
        .create(&yaml_path, yaml.as_bytes(), &persistent())
        .await
        .unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().len() == 1)
        .await
        .expect("the config-centre key appearing is seen (exists watch)");
    client
        .set_data(
            &yaml_path,
            b"configVersion: v2.7\nkey: x\nconfigs: []\n",
            None,
        )
        .await
        .unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().len() == 2)
        .await
        .expect("the data change is seen (data watch)");
    producer.unregister(&a).await.unwrap();
    dir.wait_until(Duration::from_secs(1), |s| s.instances().len() == 1)
        .await
        .expect("the removal is seen");
    client.delete(&yaml_path, None).await.unwrap();
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

/// After the first whole list, the adapter sends only what changed: a provider that arrives is
/// an `Add` of that provider, one that leaves a `Remove` of its address; the directory takes
/// its patch path for such deltas. Unchanged nodes are not parsed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_first_list_only_changes_are_sent() {
    logs();
    let iface = interface("Deltas");
    let producer = registry("");
    for port in [18_101, 18_102, 18_103] {
        producer
            .register(&instance(&iface, port, 100, "it-deltas"))
            .await
            .unwrap();
    }
    let consumer = registry("");
    let mut rx = consumer.subscribe(&ServiceKey::new(&iface)).await.unwrap();
    let mut next_list_update = async || loop {
        match tokio::time::timeout(WAIT, rx.recv()).await {
            Ok(Some(u @ (Update::Reset(_) | Update::Add(_) | Update::Remove(_)))) => return u,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("subscription ended"),
            Err(_) => panic!("no list update within {WAIT:?}"),
        }
    };
    match next_list_update().await {
        Update::Reset(l) => assert_eq!(l.len(), 3, "{l:?}"),
        other => panic!("the first list is whole: {other:?}"),
    }
    producer
        .register(&instance(&iface, 18_104, 100, "it-deltas"))
        .await
        .unwrap();
    match next_list_update().await {
        Update::Add(l) => {
            assert_eq!(l.len(), 1, "{l:?}");
            assert_eq!(l[0].address(), "127.0.0.1:18104");
        }
        other => panic!("an arrival is an Add of it alone: {other:?}"),
    }
    producer
        .unregister(&instance(&iface, 18_101, 100, "it-deltas"))
        .await
        .unwrap();
    match next_list_update().await {
        // Named by endpoint key: address, protocol, service key.
        Update::Remove(gone) => {
            assert_eq!(gone.len(), 1, "{gone:?}");
            assert!(gone[0].starts_with("127.0.0.1:18101 "), "{gone:?}");
            assert!(gone[0].ends_with(&iface), "{gone:?}");
        }
        other => panic!("a departure is a Remove of it alone: {other:?}"),
    }
    cleanup(&raw().await, &format!("/dubbo/{iface}")).await;
}
