//! Switchman's Triple invoker against real Java Apache Dubbo 3.3 `tri://` providers of a plain
//! interface (`peers/java`, no IDL: the wrapper format with Hessian2 inside), discovered in the
//! shared ZooKeeper (`SWITCHMAN_ZK`) and rnacos (`SWITCHMAN_NACOS`); and the reverse, Switchman's
//! Triple provider (what `switchman provider --protocol tri` runs) called by Java Dubbo's own
//! generic consumer. Every test uses its own service group, so the tests run in parallel.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman_cluster::metadata_service::MetadataServiceClient;
use switchman_cluster::triple::{EchoOptions, java_instance, serve_echo};
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{ErrorKind, Invocation, ServiceKey, Url};
use switchman_discovery::metadata::MetadataCache;
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{
    DirectoryConfig, RegistryDirectory, registrar_from_url, registry_from_url,
};
use switchman_integration_tests::java_peer::{
    self, DEMO_SERVICE, JavaProvider, ProviderOptions, run_consumer,
};
use switchman_integration_tests::{nacos, unique, zookeeper};

const WAIT: Duration = Duration::from_secs(30);

fn group(tag: &str) -> String {
    unique(&format!("tri-{tag}"))
}

/// Subscribes to `DemoService` in `group` and waits until `n` instances are routable.
async fn directory(registry: &str, group: &str, n: usize) -> Arc<RegistryDirectory> {
    let reg = registry_from_url(registry).unwrap();
    let dir = RegistryDirectory::subscribe(
        reg.as_ref(),
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().len() == n)
        .await
        .unwrap_or_else(|e| panic!("{n} providers of group {group} in {registry}: {e}"));
    Arc::new(dir)
}

/// The cluster with Switchman's defaults: `ProtocolInvoker::new()`, whose Triple invoker
/// picks the wrapper codec for Java providers by itself.
fn cluster(dir: &Arc<RegistryDirectory>) -> ClusterInvoker {
    ClusterInvoker::new(
        dir.clone(),
        Arc::new(ProtocolInvoker::new()),
        ClusterConfig::default().timeout(Duration::from_secs(5)),
    )
}

fn typed(method: &str, types: &[&str], args: Vec<Value>) -> Invocation {
    Invocation::new(method)
        .with_args(args)
        .with_types(types.iter().copied())
}

fn user_json() -> Value {
    json!({
        "id": 7, "name": "Ann", "age": 33, "score": 4.5, "active": true,
        "created": 1_700_000_000_123_i64, "tags": ["a", "b"],
        "attributes": {"level": 3, "vip": true},
    })
}

/// How many calls of `method` reached the providers since `before`, once each provider's
/// output holds every call made so far (a ping answered and read: [`JavaProvider::settle`]).
async fn calls_after(
    dir: &RegistryDirectory,
    providers: [&JavaProvider; 2],
    method: &str,
    before: usize,
) -> usize {
    for p in providers {
        p.settle(&dir.load(), &ProtocolInvoker::new()).await;
    }
    providers.iter().map(|p| p.calls_of(method)).sum::<usize>() - before
}

/// Two Java tri:// providers at weights 100 and 300 in `registry`: the weighted split, typed
/// and generic calls, POJOs, maps, void and null answers, the business exception (not
/// retried) and a timeout that fails over.
async fn weighted_fleet(registry: String, options: fn() -> ProviderOptions, tag: &str) {
    let started = Instant::now();
    let g = group(tag);
    // Just started, both would still warm up (Dubbo's 10 min ramp from their `timestamp`)
    // and weigh about the same.
    let opts = |w: u32, name: &str| {
        options()
            .protocol("tri")
            .weight(w)
            .group(&g)
            .name(name)
            .param("warmup", "0")
    };
    let (light, heavy) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&opts(100, "w100")));
        let b = s.spawn(|| JavaProvider::start(&opts(300, "w300")));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!((light.protocol(), heavy.protocol()), ("tri", "tri"));
    let dir = directory(&registry, &g, 2).await;
    let ready = started.elapsed();
    let target = dir.load().endpoints()[0].instance.clone();
    assert_eq!(target.protocol().as_str(), "tri");
    assert!(
        target
            .param("prefer.serialization")
            .is_some_and(|p| p.contains("hessian2")),
        "a Java tri provider registers hessian2: {:?}",
        target.params()
    );
    let cluster = cluster(&dir);

    // 400 calls, 16 in flight: about 1:3.
    let t400 = Instant::now();
    let counts: Arc<std::sync::Mutex<BTreeMap<String, usize>>> = Default::default();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..16 {
        let (cluster, counts, next) = (cluster.clone(), counts.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < 400 {
                let who = cluster.invoke(&Invocation::new("whoami")).await.unwrap();
                let who = who.as_str().unwrap().to_string();
                *counts.lock().unwrap().entry(who).or_default() += 1;
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let t400 = t400.elapsed();
    let counts = counts.lock().unwrap().clone();
    let heavy_share = counts.get("w300").copied().unwrap_or(0) as f64 / 400.0;
    eprintln!(
        "{tag}: providers ready and discovered in {ready:?}; 400 calls in {t400:?}, split {counts:?}"
    );
    assert_eq!(counts.values().sum::<usize>(), 400);
    // Expected 0.75; one standard deviation is 0.022.
    assert!(
        (0.65..=0.85).contains(&heavy_share),
        "weight 300 of 400 got {heavy_share}: {counts:?}"
    );

    // Typed and generic.
    let sum = cluster
        .invoke(&typed("add", &["int", "int"], vec![2.into(), 3.into()]))
        .await
        .unwrap();
    assert_eq!(sum, json!(5));
    let generic = cluster
        .invoke(&Invocation::new("add").with_args(vec![20.into(), 22.into()]))
        .await
        .unwrap();
    assert_eq!(generic, json!(42), "a call without types goes generic");
    let hello = cluster
        .invoke(&typed(
            "sayHello",
            &["java.lang.String"],
            vec!["rust".into()],
        ))
        .await
        .unwrap();
    assert!(
        hello.as_str().unwrap().starts_with("hello, rust from w"),
        "{hello}"
    );
    let n = cluster
        .invoke(&typed(
            "count",
            &["java.util.List<java.lang.String>"],
            vec![json!(["a", "b", "c"])],
        ))
        .await
        .unwrap();
    assert_eq!(n, json!(3));

    // POJOs. Generic: a map, which the provider converts by the real field types. Typed: an
    // object of the parameter's class; its Date field says so with {"class", "value"}.
    let mut want = user_json();
    want["name"] = json!("Ann (saved)");
    want.as_object_mut()
        .unwrap()
        .insert("class".into(), json!("io.switchman.peers.User"));
    let mut pojo = user_json();
    pojo["class"] = json!("io.switchman.peers.User");
    let saved = cluster
        .invoke(&Invocation::new("save").with_args(vec![pojo]))
        .await
        .unwrap();
    assert_eq!(saved, want, "generic save keeps every field");
    let mut typed_user = user_json();
    typed_user["created"] = json!({"class": "java.util.Date", "value": 1_700_000_000_123_i64});
    let saved = cluster
        .invoke(&typed(
            "save",
            &["io.switchman.peers.User"],
            vec![typed_user],
        ))
        .await
        .unwrap();
    assert_eq!(saved, want, "typed save keeps every field");
    let got = cluster
        .invoke(&typed("getUser", &["long"], vec![9.into()]))
        .await
        .unwrap();
    assert_eq!(got["id"], json!(9));
    assert_eq!(got["created"], json!(1_700_000_000_009_i64));
    assert_eq!(got["class"], json!("io.switchman.peers.User"));
    let map = json!({"a": 1, "b": "x", "nested": {"k": [1, 2]}, "none": null});
    let echoed = cluster
        .invoke(&typed("echo", &["java.util.Map"], vec![map.clone()]))
        .await
        .unwrap();
    assert_eq!(echoed, map);

    // void and null.
    assert_eq!(
        cluster.invoke(&Invocation::new("ping")).await.unwrap(),
        Value::Null
    );
    assert_eq!(
        cluster.invoke(&Invocation::new("nothing")).await.unwrap(),
        Value::Null
    );

    // The business exception: the Java class and message, one attempt (typed and generic).
    for inv in [
        typed("fail", &["java.lang.String"], vec!["boom".into()]),
        Invocation::new("fail").with_args(vec!["bang".into()]),
    ] {
        let before = light.calls_of("fail") + heavy.calls_of("fail");
        let e = cluster.invoke(&inv).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Business, "{e}");
        let msg = inv.arguments[0].as_str().unwrap();
        assert!(
            e.message()
                .contains(&format!("io.switchman.peers.DemoException: {msg}")),
            "{e}"
        );
        let thrown = e
            .cause::<switchman_hessian::JavaException>()
            .expect("the Java exception, typed");
        assert_eq!(thrown.class, "io.switchman.peers.DemoException");
        assert_eq!(
            calls_after(&dir, [&light, &heavy], "fail", before).await,
            1,
            "a business exception is not retried: {e}"
        );
    }

    // Past the timeout: both providers are tried, the error is a timeout.
    let before = light.calls_of("slow") + heavy.calls_of("slow");
    let t_slow = Instant::now();
    let slow = typed("slow", &["int"], vec![1500.into()]).with_attachment("timeout", "300");
    let e = cluster.invoke(&slow).await.unwrap_err();
    let t_slow = t_slow.elapsed();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    let mut tried = e.tried().to_vec();
    tried.sort();
    tried.dedup();
    let mut both = vec![light.address(), heavy.address()];
    both.sort();
    assert_eq!(tried, both, "the timeout failed over to the other provider");
    assert!(calls_after(&dir, [&light, &heavy], "slow", before).await >= 2);
    eprintln!(
        "{tag}: slow(1500) with a 300 ms timeout failed over in {t_slow:?} ({e}); whole test {:?}",
        started.elapsed()
    );

    // No timeout anywhere (consumer defaults, the providers register none): Triple's default
    // is 3000 ms, as a Java consumer's `TripleInvoker` uses, so a 1.5 s call answers (with
    // dubbo://'s 1000 ms it would time out).
    assert_eq!(target.param("timeout"), None, "{:?}", target.params());
    let defaults = ClusterInvoker::new(
        dir.clone(),
        Arc::new(ProtocolInvoker::new()),
        ClusterConfig::default(),
    );
    let answer = defaults
        .invoke(&typed("slow", &["int"], vec![1500.into()]))
        .await
        .unwrap_or_else(|e| panic!("{tag}: slow(1500) within Triple's default 3000 ms: {e}"));
    assert!(
        answer
            .as_str()
            .is_some_and(|a| a.starts_with("slow 1500 from ")),
        "{answer}"
    );
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_triple_providers_in_zookeeper() {
    if java_peer::skipped("java_triple_providers_in_zookeeper") {
        return;
    }
    weighted_fleet(
        format!("zookeeper://{}", zookeeper()),
        || ProviderOptions::zookeeper(&zookeeper()),
        "zk",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_triple_providers_in_nacos() {
    if java_peer::skipped("java_triple_providers_in_nacos") {
        return;
    }
    weighted_fleet(
        format!("nacos://{}", nacos()),
        || ProviderOptions::nacos(&nacos()),
        "nacos",
    )
    .await;
}

/// Switchman's Triple provider, started and registered in `registry` as
/// `switchman provider --protocol tri` does it, called by the Java generic consumer with
/// `method`/`types`/`args` three times; every answer is the provider's map.
async fn java_consumer_calls_switchman(
    registry: String,
    tag: &str,
    method: &str,
    types: &str,
    args: Value,
) {
    let started = Instant::now();
    let g = group(tag);
    let (server, name) = serve_echo(
        "127.0.0.1:0".parse().unwrap(),
        EchoOptions {
            name: Some(format!("switchman-{tag}")),
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
        ServiceKey::with(DEMO_SERVICE, &g, ""),
        &[],
    )
    .timestamp_ms(now_ms)
    .application("switchman-provider")
    .param("name", &name)
    .build();
    let registrar = registrar_from_url(&registry).unwrap();
    registrar.register(&instance).await.unwrap();

    let argv: Vec<String> = [
        "--registry",
        &registry,
        "--interface",
        DEMO_SERVICE,
        "--group",
        &g,
        "--protocol",
        "tri",
        "--method",
        method,
        "--types",
        types,
        "--args",
        &args.to_string(),
        "--count",
        "3",
        "--timeout-ms",
        "5000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let t_consumer = Instant::now();
    let (status, lines) = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = argv.iter().map(String::as_str).collect();
        run_consumer(&a)
    })
    .await
    .unwrap();
    let t_consumer = t_consumer.elapsed();
    assert!(status.success(), "{tag}: {lines:?}");
    let want = json!({"ok": true, "result": {"from": name, "method": method, "echo": args}});
    assert_eq!(lines, vec![want.clone(), want.clone(), want], "{tag}");
    assert_eq!(server.hits(), 3, "every call reached Switchman's provider");
    eprintln!(
        "{tag}: the Java consumer (JVM start, discovery, 3 calls) took {t_consumer:?}; whole test {:?}",
        started.elapsed()
    );
    registrar.unregister(&instance).await.unwrap();
    drop(registrar);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_consumer_calls_switchman_triple_in_zookeeper() {
    if java_peer::skipped("the_java_consumer_calls_switchman_triple_in_zookeeper") {
        return;
    }
    java_consumer_calls_switchman(
        format!("zookeeper://{}", zookeeper()),
        "reverse-zk",
        "add",
        "int,int",
        json!([2, 3]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_consumer_calls_switchman_triple_in_nacos() {
    if java_peer::skipped("the_java_consumer_calls_switchman_triple_in_nacos") {
        return;
    }
    java_consumer_calls_switchman(
        format!("nacos://{}", nacos()),
        "reverse-nacos",
        "save",
        "io.switchman.peers.User",
        json!([{"id": 7, "name": "Ann", "tags": ["a", "b"], "attributes": {"vip": true}}]),
    )
    .await;
}

/// `add(i, 1)` for i in 0..n through `cluster`, typed, and one generic call: n + 1 calls of
/// `add`, each answered.
async fn adds(cluster: &ClusterInvoker, n: i64) {
    for i in 0..n {
        let sum = cluster
            .invoke(&typed("add", &["int", "int"], vec![i.into(), 1.into()]))
            .await
            .unwrap_or_else(|e| panic!("add({i}, 1): {e}"));
        assert_eq!(sum, json!(i + 1));
    }
    let generic = cluster
        .invoke(&Invocation::new("add").with_args(vec![20.into(), 22.into()]))
        .await
        .unwrap();
    assert_eq!(generic, json!(42), "a generic call carries the token too");
}

/// A call of `add` with a `token` attachment of its own, `wrong` (sent instead of the
/// provider's, as Java sends a caller's own): refused by the provider's `TokenHeaderFilter`.
async fn refused_with(cluster: &ClusterInvoker, wrong: &str) {
    let inv =
        typed("add", &["int", "int"], vec![1.into(), 1.into()]).with_attachment("token", wrong);
    let e = cluster.invoke(&inv).await.unwrap_err();
    assert!(
        e.message().contains("Forbid invoke remote service"),
        "the provider refuses a wrong token: {e}"
    );
}

/// A Java tri:// provider exported with `token=true` (its `TokenHeaderFilter` refuses any
/// call without its UUID) is called through the cluster: the endpoint sends the UUID it
/// registered as the `token` header. A wrong `token` of the call's own is refused, so the
/// provider does check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_triple_provider_exported_with_token_true_is_called_with_its_uuid() {
    if java_peer::skipped("a_java_triple_provider_exported_with_token_true_is_called_with_its_uuid")
    {
        return;
    }
    let zk = zookeeper();
    let g = group("token-true");
    let provider = JavaProvider::start_with_jvm_flags(
        &ProviderOptions::zookeeper(&zk).protocol("tri").group(&g),
        &java_peer::token_true_jvm_flags(),
    );
    let dir = directory(&format!("zookeeper://{zk}"), &g, 1).await;
    let target = dir.load().endpoints()[0].instance.clone();
    assert_eq!(target.protocol().as_str(), "tri");
    let token = target.param("token").unwrap_or_default();
    let parts: Vec<usize> = token.split('-').map(str::len).collect();
    assert_eq!(
        parts,
        [8, 4, 4, 4, 12],
        "token=true registers a random UUID, got {token:?}"
    );
    let cluster = cluster(&dir);
    adds(&cluster, 20).await;
    refused_with(&cluster, "wrong").await;
    // The invoker alone (no endpoint client): the token is read from the instance.
    let alone = switchman_cluster::triple::TripleInvoker::new();
    let sum = switchman_core::Invoker::invoke(
        &alone,
        &target,
        &typed("add", &["int", "int"], vec![2.into(), 3.into()]),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(sum, json!(5));
    // 20 typed, 1 generic, 1 alone: the refused call never reached the service.
    assert_eq!(provider.calls_of_settled("add", 22, WAIT), 22);
}

/// A Java tri:// provider registered at the application level only (`register-mode=instance`:
/// its parameters come from its `MetadataInfo`) with a fixed `token=s3cret` is called with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_triple_provider_with_a_fixed_token_at_the_application_level_is_called_with_it() {
    if java_peer::skipped(
        "a_java_triple_provider_with_a_fixed_token_at_the_application_level_is_called_with_it",
    ) {
        return;
    }
    let zk = zookeeper();
    let g = group("token-app");
    let app = unique("tri-token-app");
    let provider = JavaProvider::start(
        &ProviderOptions::zookeeper(&zk)
            .protocol("tri")
            .application(&app)
            .group(&g)
            .register_mode("instance")
            .metadata_type("local")
            .param("token", "s3cret"),
    );
    let reg = ZookeeperRegistry::from_url(&Url::parse(&format!("zookeeper://{zk}")).unwrap())
        .unwrap()
        .metadata_cache(Arc::new(MetadataCache::new(Arc::new(
            MetadataServiceClient::new(),
        ))));
    let dir = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, &g, "")),
    )
    .await
    .unwrap();
    let snap = dir
        .wait_until(WAIT, |s| s.endpoints().len() == 1)
        .await
        .expect("the application-level instance");
    let target = snap.endpoints()[0].instance.clone();
    assert!(
        target.param("dubbo.metadata.revision").is_some(),
        "found at the application level: {:?}",
        target.params().keys().collect::<Vec<_>>()
    );
    assert_eq!(target.param("token"), Some("s3cret"));
    let cluster = cluster(&Arc::new(dir));
    adds(&cluster, 5).await;
    refused_with(&cluster, "s3cret-not").await;
    assert_eq!(provider.calls_of_settled("add", 6, WAIT), 6);
}
