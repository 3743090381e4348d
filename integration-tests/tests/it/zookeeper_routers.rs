//! The legacy ZooKeeper `routers` category against the shared ZooKeeper (`SWITCHMAN_ZK`):
//! `condition://` URLs that old dubbo-admin (and `registry.register(URL.valueOf(
//! "condition://..."))`) writes under `/dubbo/{interface}/routers` change where calls go,
//! `enabled=false` ones are ignored, and deleting the node restores the routing (issue 17,
//! item 11). Run with persistent watches and with one-shot watches (old servers).
//!
//! Java Dubbo 3.3 itself no longer applies these URLs (its RouterFactory for `condition` was
//! removed in 3.0): the last test pins that with a real Dubbo 3.3 consumer, next to a
//! config-centre rule it does apply, since Switchman's support is a documented difference.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::url::encode_component;
use switchman_core::{Instance, Invocation, Protocol, ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, Registrar, Registry, RegistryDirectory, Update};
use switchman_integration_tests::java_peer::{
    self, DEMO_SERVICE, JavaProvider, ProviderOptions, run_consumer,
};
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{unique, zookeeper};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(10);

fn registry(extra: &str) -> ZookeeperRegistry {
    let addr = if extra.is_empty() {
        format!("zookeeper://{}", zookeeper())
    } else {
        format!("zookeeper://{}?{extra}", zookeeper())
    };
    ZookeeperRegistry::from_url(&Url::parse(&addr).unwrap()).unwrap()
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

async fn named_provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
        Box::pin(async move { ProviderReply::Ok(json!({ "from": name })) })
    })
    .await
    .expect("provider starts")
}

fn instance(iface: &str, port: u16) -> Instance {
    Instance::builder("127.0.0.1", port)
        .protocol(Protocol::Http)
        .service(ServiceKey::new(iface))
        .weight(100)
        .timestamp_ms(0)
        .build()
}

/// `n` calls; the answers per provider name.
async fn split(cluster: &ClusterInvoker, n: usize) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for k in 0..n {
        let v = cluster
            .invoke(&Invocation::new("hello"))
            .await
            .unwrap_or_else(|e| panic!("call {k} fails: {e}"));
        *seen
            .entry(v["from"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    seen
}

/// Calls until `done` holds for a round of 20 calls (bounded by [`WAIT`]).
async fn until(
    cluster: &ClusterInvoker,
    what: &str,
    done: impl Fn(&HashMap<String, usize>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = split(cluster, 20).await;
        if done(&seen) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still {seen:?} after {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node dubbo-admin 2.x writes for a condition rule.
fn router_node(iface: &str, rule: &str, enabled: bool) -> String {
    encode_component(&format!(
        "condition://0.0.0.0/{iface}?category=routers&dynamic=false&enabled={enabled}&force=true&name=it&priority=0&rule={}&runtime=false",
        encode_component(rule)
    ))
}

async fn cleanup(client: &zk::Client, path: &str) {
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

async fn routers_node_changes_where_calls_go(watch: &str) {
    let iface = unique(&format!("it.zk.Routers{watch}")).replace('-', "_");
    let a = named_provider("a").await;
    let b = named_provider("b").await;
    let producer = registry("");
    producer
        .register(&instance(&iface, a.addr().port()))
        .await
        .unwrap();
    producer
        .register(&instance(&iface, b.addr().port()))
        .await
        .unwrap();

    let dir = Arc::new(
        RegistryDirectory::subscribe(
            &registry(&format!("watch={watch}")),
            DirectoryConfig::new(ServiceKey::new(&iface)),
        )
        .await
        .unwrap(),
    );
    dir.wait_until(WAIT, |s| s.endpoints().len() == 2)
        .await
        .expect("both providers listed");
    let cluster = ClusterInvoker::new(
        dir.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    let before = split(&cluster, 200).await;
    assert!(
        before.contains_key("a") && before.contains_key("b"),
        "no rule: both serve {before:?}"
    );

    // dubbo-admin writes a rule sending every call to a, and a disabled one sending every call
    // to b; were the disabled one applied, nothing would be left (both are forced).
    let client = raw_client(&zookeeper(), WAIT).await;
    let routers = format!("/dubbo/{iface}/routers");
    client.mkdir(&routers, &persistent()).await.unwrap();
    let to_a = format!(
        "{routers}/{}",
        router_node(&iface, &format!("=> port = {}", a.addr().port()), true)
    );
    let disabled_to_b = format!(
        "{routers}/{}",
        router_node(&iface, &format!("=> port = {}", b.addr().port()), false)
    );
    client
        .create(&disabled_to_b, b"", &persistent())
        .await
        .unwrap();
    client.create(&to_a, b"", &persistent()).await.unwrap();
    until(&cluster, "the routers node sends every call to a", |s| {
        s.keys().all(|k| k == "a")
    })
    .await;
    let routed = split(&cluster, 200).await;
    assert_eq!(routed.get("a"), Some(&200), "{routed:?}");

    // The rule node removed: the rule disappears and both serve again.
    client.delete(&to_a, None).await.unwrap();
    until(&cluster, "deleting the routers node restores b", |s| {
        s.contains_key("b")
    })
    .await;
    let after = split(&cluster, 200).await;
    assert!(
        after.contains_key("a") && after.contains_key("b"),
        "rule gone: both serve {after:?}"
    );
    assert!(
        dir.load().endpoints().len() == 2,
        "the disabled rule still changes nothing"
    );

    producer
        .unregister(&instance(&iface, a.addr().port()))
        .await
        .ok();
    producer
        .unregister(&instance(&iface, b.addr().port()))
        .await
        .ok();
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routers_node_with_persistent_watches() {
    routers_node_changes_where_calls_go("persistent").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routers_node_with_oneshot_watches() {
    routers_node_changes_where_calls_go("oneshot").await;
}

/// `legacy-routers=false` reads no rule from the routers node (what a Java Dubbo 3.x consumer
/// does); the default sends it to the directory as a rule update under the node's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_routers_false_ignores_the_routers_node() {
    let iface = unique("it.zk.RoutersOff").replace('-', "_");
    let client = raw_client(&zookeeper(), WAIT).await;
    let routers = format!("/dubbo/{iface}/routers");
    client.mkdir(&routers, &persistent()).await.unwrap();
    let node = router_node(&iface, "=> port = 1", true);
    client
        .create(&format!("{routers}/{node}"), b"", &persistent())
        .await
        .unwrap();
    let key = ServiceKey::new(&iface);
    let on = registry("");
    let off = registry("legacy-routers=false");
    let mut on_rx = on.subscribe(&key).await.unwrap();
    let mut off_rx = off.subscribe(&key).await.unwrap();
    let want = format!("{routers}/{node}");
    let seen = tokio::time::timeout(WAIT, async {
        while let Some(u) = on_rx.recv().await {
            if let Update::Rule { key, text: Some(t) } = u
                && key == want
            {
                return t;
            }
        }
        panic!("subscription ended")
    })
    .await
    .expect("the default reads the routers node");
    assert!(seen.starts_with("condition://0.0.0.0/"), "{seen}");
    // The other subscription's first list, then a second for anything that would follow it.
    let first = tokio::time::timeout(WAIT, off_rx.recv())
        .await
        .expect("a first list");
    assert!(matches!(first, Some(Update::Reset(_))), "{first:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut rest = Vec::new();
    while let Ok(Some(u)) = tokio::time::timeout_at(deadline, off_rx.recv()).await {
        rest.push(u);
    }
    assert!(
        !rest
            .iter()
            .any(|u| matches!(u, Update::Rule { key, .. } if key.contains("/routers/"))),
        "legacy-routers=false sends no routers rule: {rest:?}"
    );
    cleanup(&client, &format!("/dubbo/{iface}")).await;
}

/// Which provider names the Java consumer's `n` calls of `sayHello` reached.
fn java_split(zk: &str, group: &str, n: usize) -> HashMap<String, usize> {
    let count = n.to_string();
    let (status, lines) = run_consumer(&[
        "--registry",
        &format!("zookeeper://{zk}"),
        "--interface",
        DEMO_SERVICE,
        "--group",
        group,
        "--method",
        "sayHello",
        "--types",
        "java.lang.String",
        "--args",
        "[\"x\"]",
        "--count",
        &count,
    ]);
    assert!(status.success(), "every Java call succeeds: {lines:?}");
    let mut seen = HashMap::new();
    for l in &lines {
        let from = l["result"]
            .as_str()
            .and_then(|r| r.rsplit(" from ").next())
            .unwrap_or("?")
            .to_string();
        *seen.entry(from).or_default() += 1;
    }
    seen
}

/// Dubbo 3.3's `RegistryDirectory.toRouters` asks the `RouterFactory` extension named like the
/// URL's protocol, and 3.x has none for `condition` (only state-router factories): the URL is
/// logged ("convert router url to router error") and ignored. The same rule as a config-centre
/// `.condition-router` key is applied. This pins the difference the README documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_dubbo_3_3_ignores_legacy_router_urls_but_applies_the_config_rule() {
    if java_peer::skipped("java_dubbo_3_3_ignores_legacy_router_urls_but_applies_the_config_rule") {
        return;
    }
    let zk = zookeeper();
    // A group of its own: the router URL and the rule name it, so no other test's consumer of
    // the shared DemoService takes them.
    let g = unique("routers");
    let opts = ProviderOptions::zookeeper(&zk)
        .group(&g)
        .param("warmup", "0");
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&opts.clone().name("a")));
        let b = s.spawn(|| JavaProvider::start(&opts.clone().name("b")));
        (a.join().unwrap(), b.join().unwrap())
    });
    let client = raw_client(&zk, WAIT).await;
    let rule = format!("=> port = {}", a.port());

    // The config-centre rule: Dubbo sends every call to a.
    let _ = client.mkdir("/dubbo/config/dubbo", &persistent()).await;
    let key = format!("/dubbo/config/dubbo/{DEMO_SERVICE}::{g}.condition-router");
    let yaml = format!(
        "configVersion: v3.0\nscope: service\nkey: {g}/{DEMO_SERVICE}\nforce: true\nenabled: true\nconditions:\n  - '{rule}'\n"
    );
    client
        .create(&key, yaml.as_bytes(), &persistent())
        .await
        .unwrap();
    let zk2 = zk.clone();
    let g2 = g.clone();
    let routed = tokio::task::spawn_blocking(move || java_split(&zk2, &g2, 40))
        .await
        .unwrap();
    assert_eq!(
        routed.get("a"),
        Some(&40),
        "Dubbo applies the config rule: {routed:?}"
    );
    client.delete(&key, None).await.unwrap();

    // The same rule as a legacy router URL: Dubbo 3.3 keeps calling both.
    let routers = format!("/dubbo/{DEMO_SERVICE}/routers");
    let _ = client.mkdir(&routers, &persistent()).await;
    let node = format!(
        "{routers}/{}",
        encode_component(&format!(
            "condition://0.0.0.0/{DEMO_SERVICE}?category=routers&dynamic=false&enabled=true&force=true&group={g}&priority=0&rule={}&runtime=false",
            encode_component(&rule)
        ))
    );
    client.create(&node, b"", &persistent()).await.unwrap();
    let zk2 = zk.clone();
    let g2 = g.clone();
    let ignored = tokio::task::spawn_blocking(move || java_split(&zk2, &g2, 40))
        .await
        .unwrap();
    eprintln!("Dubbo 3.3 with the legacy router URL: {ignored:?}");
    assert!(
        ignored.contains_key("a") && ignored.contains_key("b"),
        "Dubbo 3.3 does not apply the router URL: {ignored:?}"
    );
    client.delete(&node, None).await.unwrap();
    drop((a, b));
}
