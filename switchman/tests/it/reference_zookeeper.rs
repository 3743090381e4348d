//! `Reference` against the real ZooKeeper that `scripts/test` starts: it waits for a provider
//! that registers after `connect()` began, fails within its wait with a message that says what
//! the registry has instead, and with `check(false)` returns at once.

use std::time::{Duration, Instant};

use serde_json::json;
use switchman::cluster::provider::{HttpProvider, ProviderReply};
use switchman::discovery::registrar_from_url;
use switchman::{ErrorKind, Instance, Reference, ServiceKey};
use switchman_integration_tests::{unique, zookeeper};

async fn provider() -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |req| {
        Box::pin(async move { ProviderReply::Ok(json!({"hello": req.arguments})) })
    })
    .await
    .unwrap()
}

fn instance(p: &HttpProvider, key: &ServiceKey) -> Instance {
    Instance::builder("127.0.0.1", p.addr().port())
        .protocol(switchman::core::Protocol::Http)
        .service(key.clone())
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_waits_for_a_provider_that_registers_after_it_started() {
    let zk = format!("zookeeper://{}", zookeeper());
    let iface = unique("org.example.Late").replace('-', "");
    let key = ServiceKey::with(&iface, "g1", "1.0.0");
    let p = provider().await;
    let registrar = registrar_from_url(&zk).unwrap();
    let late = {
        let (registrar, inst) = (registrar.clone(), instance(&p, &key));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            registrar.register(&inst).await.unwrap();
        })
    };
    let started = Instant::now();
    let greeter = Reference::new(&iface)
        .registry(&zk)
        .group("g1")
        .version("1.0.0")
        .wait(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "connect waited for the late provider ({:?})",
        started.elapsed()
    );
    late.await.unwrap();
    let reply = greeter.call("sayHello", json!(["world"])).await.unwrap();
    assert_eq!(
        reply,
        json!({"hello": ["world"]}),
        "the first call succeeds"
    );
    assert_eq!(p.hits(), 1);
    registrar.unregister(&instance(&p, &key)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_without_a_provider_says_what_the_registry_has() {
    let zk = format!("zookeeper://{}", zookeeper());
    let iface = unique("org.example.Versions").replace('-', "");
    let p = provider().await;
    let registrar = registrar_from_url(&zk).unwrap();
    let other = instance(&p, &ServiceKey::with(&iface, "g1", "2.0.0"));
    registrar.register(&other).await.unwrap();
    let started = Instant::now();
    let e = Reference::new(&iface)
        .registry(&zk)
        .group("g1")
        .version("1.0.0")
        .wait(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::NoProvider, "{e}");
    // The wait (2 s) plus the look around for what the registry has instead, with room for a
    // loaded machine: the point is that it ends, with the hint, instead of hanging.
    assert!(
        took < Duration::from_secs(2 + 15),
        "fails after the wait and a look around: {took:?}"
    );
    let m = e.message();
    assert!(
        m.contains(&format!("no provider for {iface}:1.0.0 in group g1")),
        "{m}"
    );
    assert!(m.contains(&format!("/dubbo/{iface}/providers")), "{m}");
    assert!(
        m.contains("the registry has version 2.0.0 in group g1"),
        "{m}"
    );
    registrar.unregister(&other).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_false_returns_at_once_and_calls_work_once_providers_appear() {
    let zk = format!("zookeeper://{}", zookeeper());
    let iface = unique("org.example.Lazy").replace('-', "");
    let key = ServiceKey::new(&iface);
    let started = Instant::now();
    let lazy = Reference::new(&iface)
        .registry(&zk)
        .check(false)
        .wait(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "no wait");
    let e = lazy.call("sayHello", json!(["x"])).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoProvider, "{e}");
    let p = provider().await;
    let registrar = registrar_from_url(&zk).unwrap();
    registrar.register(&instance(&p, &key)).await.unwrap();
    lazy.directory()
        .wait_until(Duration::from_secs(10), |s| !s.endpoints().is_empty())
        .await
        .unwrap();
    assert_eq!(
        lazy.call("sayHello", json!("x")).await.unwrap(),
        json!({"hello": ["x"]})
    );
    registrar.unregister(&instance(&p, &key)).await.unwrap();
}

/// A `Reference` is the consumer its registry URL names (`application=`): a consumer rule
/// for that application, as dubbo-admin writes it, reaches its directory and sets its
/// timeout; the same rule for another application does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_is_the_consumer_its_registry_url_names_for_consumer_rules() {
    let zk = zookeeper();
    let iface = unique("org.example.Ruled").replace('-', "");
    let app = unique("ruled-consumer");
    let key = ServiceKey::new(&iface);
    let p = provider().await;
    let registrar = registrar_from_url(&format!("zookeeper://{zk}")).unwrap();
    registrar.register(&instance(&p, &key)).await.unwrap();
    let reference = Reference::new(&iface)
        .registry(format!("zookeeper://{zk}?application={app}"))
        .connect()
        .await
        .unwrap();
    let client =
        switchman_integration_tests::zk_server::raw_client(&zk, Duration::from_secs(10)).await;
    // This application's item, then another's that would win if it matched.
    let rule = format!(
        "configVersion: v3.0\nscope: service\nkey: {iface}\nconfigs:\n- side: consumer\n  applications: [{app}]\n  parameters: {{timeout: 4321}}\n- side: consumer\n  applications: [someone-else]\n  parameters: {{timeout: 99}}\n"
    );
    let path = format!("/dubbo/config/dubbo/{iface}::.configurators");
    switchman_integration_tests::zk_server::put_node(&client, &path, rule.as_bytes()).await;
    let snap = reference
        .directory()
        .wait_until(Duration::from_secs(20), |s| {
            !s.consumer_overrides().is_empty()
        })
        .await
        .expect("the rule for this consumer's application arrives");
    assert_eq!(
        snap.consumer_overrides().get("timeout").map(String::as_str),
        Some("4321")
    );
    assert_eq!(
        reference.cluster().settings("sayHello").timeout,
        Duration::from_millis(4321),
        "the cluster uses it"
    );
    client.delete(&path, None).await.unwrap();
}

/// A reference registers itself as Java Dubbo consumers do: the ephemeral
/// `/dubbo/{interface}/consumers/{encoded consumer URL}` node dubbo-admin lists, with its
/// application, group and version; dropping the reference removes it; `register-consumer=false`
/// on the registry URL registers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_is_listed_as_a_consumer_until_dropped() {
    let zk = zookeeper();
    let iface = unique("org.example.Listed").replace('-', "");
    let app = unique("listed-consumer");
    let key = ServiceKey::with(&iface, "g1", "1.0.0");
    let p = provider().await;
    let registrar = registrar_from_url(&format!("zookeeper://{zk}")).unwrap();
    registrar.register(&instance(&p, &key)).await.unwrap();
    let client =
        switchman_integration_tests::zk_server::raw_client(&zk, Duration::from_secs(10)).await;
    let consumers = format!("/dubbo/{iface}/consumers");
    let listed = || async {
        match client.list_children(&consumers).await {
            Ok(children) => children
                .into_iter()
                .map(|c| switchman::core::Url::from_encoded(&c).unwrap())
                .collect::<Vec<_>>(),
            Err(_) => Vec::new(),
        }
    };
    let reference = Reference::new(&iface)
        .registry(format!("zookeeper://{zk}?application={app}"))
        .group("g1")
        .version("1.0.0")
        .connect()
        .await
        .unwrap();
    let nodes = listed().await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let url = &nodes[0];
    assert_eq!(url.protocol(), "consumer");
    assert_eq!(url.path(), iface);
    for (k, v) in [
        ("application", app.as_str()),
        ("category", "consumers"),
        ("side", "consumer"),
        ("interface", iface.as_str()),
        ("group", "g1"),
        ("version", "1.0.0"),
    ] {
        assert_eq!(url.param(k), Some(v), "{k} in {url}");
    }
    let clone = reference.clone();
    drop(reference);
    assert_eq!(listed().await.len(), 1, "a clone keeps it");
    drop(clone);
    let give_up = Instant::now() + Duration::from_secs(10);
    while !listed().await.is_empty() {
        assert!(
            Instant::now() < give_up,
            "removed when the reference is dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let quiet = Reference::new(&iface)
        .registry(format!(
            "zookeeper://{zk}?application={app}&register-consumer=false"
        ))
        .group("g1")
        .version("1.0.0")
        .connect()
        .await
        .unwrap();
    quiet.call("sayHello", json!(["x"])).await.unwrap();
    assert!(listed().await.is_empty(), "register-consumer=false");
}

/// An affinity rule (Dubbo 3.3.6 `{service}.affinity-router`) pushed to ZooKeeper sends the
/// calls of a consumer in region r2 to the r2 provider only; deleting it spreads them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_affinity_rule_keeps_calls_in_the_consumers_region() {
    let zk = zookeeper();
    let iface = unique("org.example.Near").replace('-', "");
    let key = ServiceKey::new(&iface);
    let (near, far) = (provider().await, provider().await);
    let registrar = registrar_from_url(&format!("zookeeper://{zk}")).unwrap();
    for (p, region) in [(&near, "r2"), (&far, "r1")] {
        let i = Instance::builder("127.0.0.1", p.addr().port())
            .protocol(switchman::core::Protocol::Http)
            .service(key.clone())
            .param("region", region)
            .build();
        registrar.register(&i).await.unwrap();
    }
    let reference = Reference::new(&iface)
        .registry(format!("zookeeper://{zk}"))
        .consumer_param("region", "r2")
        .connect()
        .await
        .unwrap();
    reference
        .directory()
        .wait_until(Duration::from_secs(20), |s| s.endpoints().len() == 2)
        .await
        .unwrap();
    let client =
        switchman_integration_tests::zk_server::raw_client(&zk, Duration::from_secs(10)).await;
    let path = format!("/dubbo/config/dubbo/{iface}::.affinity-router");
    let rule = format!(
        "configVersion: v3.1\nscope: service\nkey: {iface}\nenabled: true\naffinityAware:\n  key: region\n  ratio: 0\n"
    );
    let epoch = reference.directory().load().epoch();
    switchman_integration_tests::zk_server::put_node(&client, &path, rule.as_bytes()).await;
    reference
        .directory()
        .wait_until(Duration::from_secs(20), |s| s.epoch() > epoch)
        .await
        .expect("the rule reaches the directory");
    let far_before = far.hits();
    for _ in 0..40 {
        reference.call("sayHello", json!(["x"])).await.unwrap();
    }
    assert_eq!(
        far.hits(),
        far_before,
        "every call in the consumer's region"
    );
    assert!(near.hits() >= 40);
    let epoch = reference.directory().load().epoch();
    client.delete(&path, None).await.unwrap();
    reference
        .directory()
        .wait_until(Duration::from_secs(20), |s| s.epoch() > epoch)
        .await
        .expect("the deletion reaches the directory");
    for _ in 0..40 {
        reference.call("sayHello", json!(["x"])).await.unwrap();
    }
    assert!(far.hits() > far_before, "spread again without the rule");
}
