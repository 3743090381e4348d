//! One reference over two real registries (ZooKeeper `SWITCHMAN_ZK` and rnacos
//! `SWITCHMAN_NACOS`), each holding one HTTP provider of the same interface: the call picks a
//! registry as Dubbo's `ZoneAwareClusterInvoker` does (issue #17 item 11): the `preferred`
//! registry while it has a provider, else the `registry_zone` attachment (with
//! `registry_zone_force` an error when no registry in that zone has one), else by registry
//! weight. The registries' `zone`, `preferred` and `weight` come from their URLs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::registries::{
    REGISTRY_ZONE, REGISTRY_ZONE_FORCE, RegistryMember, ZoneAwareRegistries,
};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{ErrorKind, Instance, Invocation, Protocol, ServiceKey};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, Registrar, RegistryDirectory, registrar_from_url,
    registry_from_url,
};
use switchman_integration_tests::nacos_server::scratch_dir;
use switchman_integration_tests::{nacos, unique, zookeeper};

async fn provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
        Box::pin(async move { ProviderReply::Ok(json!(name)) })
    })
    .await
    .expect("provider binds")
}

fn instance(key: &ServiceKey, p: &HttpProvider) -> Instance {
    Instance::builder("127.0.0.1", p.addr().port())
        .protocol(Protocol::Http)
        .service(key.clone())
        .warmup(Duration::ZERO)
        .build()
}

async fn member(url: &str, key: &ServiceKey) -> RegistryMember {
    let registry = registry_from_url(url).unwrap();
    // Publish an empty list as it is: the preferred registry must lose its provider below.
    let config = DirectoryConfig::new(key.clone()).empty_policy(EmptyPolicy::Publish);
    let dir = RegistryDirectory::subscribe(registry.as_ref(), config)
        .await
        .unwrap();
    dir.wait_until(Duration::from_secs(20), |s| s.endpoints().len() == 1)
        .await
        .unwrap_or_else(|e| panic!("the provider in {url}: {e}"));
    let cluster = ClusterInvoker::new(
        Arc::new(dir),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    RegistryMember::from_registry_url(url, cluster).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_pick_a_registry_by_preference_zone_and_weight() {
    let key = ServiceKey::new(unique("it.zones.Greeter"));
    let (in_zk, in_nacos) = (provider("zk").await, provider("nacos").await);
    let zk_url = format!("zookeeper://{}?zone=z1&weight=100", zookeeper());
    let cache = scratch_dir("switchman-registry-zones");
    let nacos_url = format!(
        "nacos://{}?rules=false&cache_dir={}&zone=z2&weight=300",
        nacos(),
        cache.display()
    );
    let zk_registrar = registrar_from_url(&zk_url).unwrap();
    zk_registrar
        .register(&instance(&key, &in_zk))
        .await
        .unwrap();
    let nacos_registrar =
        NacosRegistry::from_url(&switchman_core::Url::parse(&nacos_url).unwrap()).unwrap();
    nacos_registrar
        .register(&instance(&key, &in_nacos))
        .await
        .unwrap();

    let zoned = ZoneAwareRegistries::new(vec![
        member(&zk_url, &key).await,
        member(&nacos_url, &key).await,
    ])
    .unwrap();
    let call = |zone: Option<&str>, force: bool| {
        let mut inv = Invocation::new("hello");
        if let Some(z) = zone {
            inv = inv.with_attachment(REGISTRY_ZONE, z);
        }
        if force {
            inv = inv.with_attachment(REGISTRY_ZONE_FORCE, "true");
        }
        inv
    };
    // The attachment's zone.
    for _ in 0..20 {
        assert_eq!(
            zoned.invoke(&call(Some("z1"), false)).await.unwrap(),
            json!("zk")
        );
        assert_eq!(
            zoned.invoke(&call(Some("z2"), true)).await.unwrap(),
            json!("nacos")
        );
    }
    // A forced zone no registry has: NoProvider naming the zone.
    let e = zoned.invoke(&call(Some("z9"), true)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoProvider, "{e}");
    assert!(e.to_string().contains("z9"), "{e}");
    // No zone (or an unknown one, not forced): by registry weight, 100 : 300.
    let mut split: BTreeMap<String, usize> = BTreeMap::new();
    for k in 0..400 {
        let zone = (k % 2 == 0).then_some("elsewhere");
        let who = zoned.invoke(&call(zone, false)).await.unwrap();
        *split.entry(who.as_str().unwrap().to_string()).or_default() += 1;
    }
    let nacos_share = split.get("nacos").copied().unwrap_or(0) as f64 / 400.0;
    assert!((0.65..=0.85).contains(&nacos_share), "{split:?}");

    // A preferred registry takes every call while it has a provider...
    let preferred = ZoneAwareRegistries::new(vec![
        member(&zk_url, &key).await,
        member(&format!("{nacos_url}&preferred=true"), &key).await,
    ])
    .unwrap();
    for _ in 0..20 {
        assert_eq!(
            preferred.invoke(&call(Some("z1"), false)).await.unwrap(),
            json!("nacos")
        );
    }
    // ...and none once its provider is gone: the zone decides again.
    nacos_registrar
        .unregister(&instance(&key, &in_nacos))
        .await
        .unwrap();
    let dir = preferred.members()[1].cluster().directory().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !dir.load().endpoints().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the Nacos provider never left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        assert_eq!(
            preferred.invoke(&call(Some("z1"), false)).await.unwrap(),
            json!("zk")
        );
    }
    zk_registrar
        .unregister(&instance(&key, &in_zk))
        .await
        .unwrap();
    std::fs::remove_dir_all(&cache).ok();
}
