//! The Nacos adapter against the shared rnacos (`SWITCHMAN_NACOS`, started by `scripts/test`):
//! instances from the open API and from the SDK, weight and enabled changes under real calls,
//! the empty-list policy, and governance rules from the config centre.
//!
//! Every test uses its own service names, so they run in parallel with each other and with
//! other suites on the same server. rnacos batches pushes (0.1–1 s); "within 3 s" is the
//! issue's bound for one push.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{Instance, Invocation, Protocol, ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, Registrar, Registry, RegistryDirectory, Update,
};
use switchman_integration_tests::nacos_api::{OpenApiInstance, publish_config};
use switchman_integration_tests::nacos_server::scratch_dir;
use switchman_integration_tests::{nacos, unique};

const PUSH: Duration = Duration::from_secs(3);
/// First list of a fresh client: connect, subscribe, first push.
const FIRST_LIST: Duration = Duration::from_secs(10);

struct Cache(std::path::PathBuf);

impl Drop for Cache {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// A registry on the shared server with its own SDK cache directory.
fn registry(params: &str) -> (NacosRegistry, Cache) {
    let cache = scratch_dir("switchman-nacos-it");
    let url = format!(
        "nacos://{}?cache_dir={}{}{params}",
        nacos(),
        cache.display(),
        if params.is_empty() { "" } else { "&" }
    );
    let reg = NacosRegistry::from_url(&Url::parse(&url).unwrap()).expect("valid nacos URL");
    (reg, Cache(cache))
}

async fn provider() -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |_req| {
        Box::pin(async { ProviderReply::Ok(json!("ok")) })
    })
    .await
    .expect("provider binds")
}

fn open_api(service: &str, p: &HttpProvider) -> OpenApiInstance {
    let mut i = OpenApiInstance::new(service, "127.0.0.1", p.addr().port());
    // No warm-up: the split must follow the weights from the first call.
    i.metadata_json = r#"{"protocol":"http","warmup":"0"}"#.into();
    i
}

/// `n` calls; returns how many each provider served.
async fn split(invoker: &ClusterInvoker, providers: &[&HttpProvider], n: usize) -> Vec<u64> {
    let before: Vec<u64> = providers.iter().map(|p| p.hits()).collect();
    for k in 0..n {
        let r = invoker.invoke(&Invocation::new("echo")).await;
        assert!(r.is_ok(), "call {k} failed: {r:?}");
    }
    providers
        .iter()
        .zip(before)
        .map(|(p, b)| p.hits() - b)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_open_api_and_sdk_instances_are_seen_within_one_push() {
    // Plain naming, instances from the open API (persistent, as a non-SDK client writes them).
    let service = unique("it.plain");
    let (reg, _c1) = registry("naming=plain");
    let mut a = OpenApiInstance::new(&service, "127.0.0.1", 18001);
    a.weight = 2.5;
    a.cluster = "hz".into();
    a.metadata_json = r#"{"protocol":"http","dubbo.tag":"gray","warmup":"30000"}"#.into();
    a.register(&nacos()).expect("open API register");
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&service)))
        .await
        .expect("subscribe");
    let s = dir
        .wait_until(FIRST_LIST, |s| s.instances().len() == 1)
        .await
        .expect("first list");
    let i = &s.instances()[0];
    assert_eq!(i.address(), "127.0.0.1:18001");
    assert_eq!(i.weight(), 250, "Nacos 2.5 is Dubbo weight 250");
    assert_eq!(i.zone(), Some("hz"), "the cluster is the zone");
    assert_eq!(i.tag(), Some("gray"));
    assert_eq!(i.warmup(), Duration::from_secs(30));
    assert_eq!(i.protocol(), &Protocol::Http);
    // A second instance arrives within one push.
    let b = OpenApiInstance::new(&service, "127.0.0.1", 18002);
    b.register(&nacos()).expect("open API register");
    let s = dir
        .wait_until(PUSH, |s| s.instances().len() == 2)
        .await
        .expect("second instance within one push");
    assert_eq!(s.instances()[1].weight(), 100);
    a.deregister(&nacos()).ok();
    b.deregister(&nacos()).ok();

    // Dubbo naming, instances registered through the SDK by Switchman's registrar.
    let key = ServiceKey::with(unique("it.dubbo.Echo"), "g1", "1.0.0");
    let (provider_reg, _c2) = registry("");
    let first = Instance::builder("127.0.0.1", 18011)
        .service(key.clone())
        .protocol(Protocol::Tri)
        .weight(40)
        .application("it-provider")
        .build();
    provider_reg.register(&first).await.expect("SDK register");
    // The server holds it under Dubbo's service name with the URL parameters as metadata.
    let listed = switchman_integration_tests::nacos_api::request(
        &nacos(),
        "GET",
        "/nacos/v1/ns/instance/list",
        &[("serviceName", key.nacos_service_name())],
    )
    .expect("open API list");
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    let hosts = listed["hosts"].as_array().cloned().unwrap_or_default();
    assert_eq!(hosts.len(), 1, "{listed}");
    assert_eq!(hosts[0]["metadata"]["interface"], json!(&*key.interface));
    assert_eq!(hosts[0]["metadata"]["weight"], json!("40"));
    assert_eq!(hosts[0]["weight"], json!(0.4));

    let (consumer_reg, _c3) = registry("");
    let dir = RegistryDirectory::subscribe(&consumer_reg, DirectoryConfig::new(key.clone()))
        .await
        .expect("subscribe");
    let s = dir
        .wait_until(FIRST_LIST, |s| s.instances().len() == 1)
        .await
        .expect("first list");
    let i = &s.instances()[0];
    assert_eq!(
        (i.weight(), i.protocol(), i.application(), i.service()),
        (40, &Protocol::Tri, Some("it-provider"), &key)
    );
    let second = Instance::builder("127.0.0.1", 18012)
        .service(key.clone())
        .weight(100)
        .build();
    provider_reg.register(&second).await.expect("SDK register");
    dir.wait_until(PUSH, |s| s.instances().len() == 2)
        .await
        .expect("SDK-registered instance within one push");
    provider_reg.unregister(&first).await.expect("deregister");
    let s = dir
        .wait_until(PUSH, |s| s.instances().len() == 1)
        .await
        .expect("deregistration within one push");
    assert_eq!(s.instances()[0].port(), 18012);
    provider_reg.unregister(&second).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_weight_and_enabled_changes_move_real_traffic() {
    let service = unique("it.split");
    let (p1, p2) = (provider().await, provider().await);
    let mut i1 = open_api(&service, &p1);
    let mut i2 = open_api(&service, &p2);
    i1.register(&nacos()).expect("register p1");
    i2.register(&nacos()).expect("register p2");
    let (reg, _c) = registry("naming=plain");
    let dir = Arc::new(
        RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&service)))
            .await
            .expect("subscribe"),
    );
    dir.wait_until(FIRST_LIST, |s| s.endpoints().len() == 2)
        .await
        .expect("both providers listed");
    let invoker = ClusterInvoker::new(
        dir.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );

    // Equal weights: about half each (binomial, n = 1000: 5 sigma is ±79).
    let even = split(&invoker, &[&p1, &p2], 1000).await;
    assert!(
        (420..=580).contains(&even[1]),
        "equal weights split {even:?}"
    );

    // p2 to weight 5 through the open API, as an operator would: p2 should get 5/6.
    i2.weight = 5.0;
    i2.update(&nacos()).expect("PUT weight");
    let port2 = p2.addr().port();
    dir.wait_until(PUSH, |s| {
        s.instances()
            .iter()
            .any(|i| i.port() == port2 && i.weight() == 500)
    })
    .await
    .expect("weight change within one push");
    let skewed = split(&invoker, &[&p1, &p2], 1000).await;
    // Expected 833; 5 sigma is ±59.
    assert!(
        (775..=892).contains(&skewed[1]),
        "1:5 weights split {skewed:?}"
    );

    // p1 disabled: it stops receiving calls once the push arrives.
    i1.enabled = false;
    i1.update(&nacos()).expect("PUT enabled=false");
    let port1 = p1.addr().port();
    dir.wait_until(PUSH, |s| {
        s.endpoints().iter().all(|e| e.instance.port() != port1)
    })
    .await
    .expect("disabled instance out of routing within one push");
    let after = split(&invoker, &[&p1, &p2], 200).await;
    assert_eq!(after, vec![0, 200], "a disabled instance gets no call");
    i1.deregister(&nacos()).ok();
    i2.deregister(&nacos()).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_deregistering_everything_follows_the_empty_policy() {
    let service = unique("it.empty");
    let inst = OpenApiInstance::new(&service, "127.0.0.1", 18021);
    inst.register(&nacos()).expect("register");
    let (reg, _c) = registry("naming=plain");
    let key = ServiceKey::new(&service);
    let keep = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(key.clone()))
        .await
        .expect("subscribe");
    let publish = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(key).empty_policy(EmptyPolicy::Publish),
    )
    .await
    .expect("subscribe");
    for d in [&keep, &publish] {
        d.wait_until(FIRST_LIST, |s| s.instances().len() == 1)
            .await
            .expect("listed");
    }
    inst.deregister(&nacos()).expect("deregister");
    // The SDK's own empty-push protection is off: the empty list reaches the directory, whose
    // policy decides.
    let s = publish
        .wait_until(PUSH, |s| s.instances().is_empty())
        .await
        .expect("Publish: the empty list is published");
    let mut rng = fastrand::Rng::with_seed(7);
    let e = s.select(&Invocation::new("m"), &[], &mut rng).unwrap_err();
    assert_eq!(e.kind(), switchman_core::ErrorKind::NoProvider);
    let s = keep
        .wait_until(PUSH, |s| s.is_protected())
        .await
        .expect("KeepLast: the empty push is seen and the last list kept");
    assert_eq!(s.endpoints().len(), 1);
    assert!(s.select(&Invocation::new("m"), &[], &mut rng).is_ok());
}

/// Receives updates until one satisfies `want` or `within` passes.
async fn next_matching(
    rx: &mut switchman_discovery::UpdateReceiver,
    within: Duration,
    mut want: impl FnMut(&Update) -> bool,
) -> Update {
    let found = tokio::time::timeout(within, async {
        while let Some(u) = rx.recv().await {
            if want(&u) {
                return Some(u);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(u)) => u,
        Ok(None) => panic!("subscription ended"),
        Err(_) => panic!("no matching update within {within:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_config_centre_rules_arrive_as_rule_updates() {
    let consumer_app = unique("it-consumer");
    let provider_app = unique("it-provider");
    let key = ServiceKey::with(unique("it.rules.Echo"), "", "1.0");
    let (provider_reg, _c1) = registry("");
    provider_reg
        .register(
            &Instance::builder("127.0.0.1", 18031)
                .service(key.clone())
                .application(&provider_app)
                .build(),
        )
        .await
        .expect("register");
    let (reg, _c2) = registry(&format!("application={consumer_app}"));
    let mut rx = reg.subscribe(&key).await.expect("subscribe");
    // The subscription is live once the first list arrived.
    next_matching(
        &mut rx,
        FIRST_LIST,
        |u| matches!(u, Update::Reset(l) | Update::Add(l) if l.len() == 1),
    )
    .await;

    // A service-level condition rule, published after the consumer subscribed.
    let data_id = format!("{}:1.0:.condition-router", key.interface);
    let v1 = format!(
        "configVersion: v3.0\nscope: service\nkey: {}\nconditions:\n  - '=> host != 10.9.9.9'\n",
        key.interface
    );
    publish_config(&nacos(), &data_id, "dubbo", &v1).expect("publish rule");
    let u = next_matching(&mut rx, PUSH, |u| matches!(u, Update::Rule { .. })).await;
    assert_eq!(
        u,
        Update::Rule {
            key: data_id.clone(),
            text: Some(v1)
        }
    );
    // A change of an existing rule arrives too.
    let v2 = rule_v2(&data_id);
    publish_config(&nacos(), &data_id, "dubbo", &v2).expect("publish rule v2");
    let u = next_matching(&mut rx, PUSH, |u| matches!(u, Update::Rule { .. })).await;
    assert_eq!(
        u,
        Update::Rule {
            key: data_id,
            text: Some(v2)
        }
    );
    // Application-level rules: the consumer's condition rule, the provider's tag rule.
    let app_rule =
        "configVersion: v3.0\nscope: application\nkey: x\nconditions:\n  - '=> host != 10.9.9.8'\n";
    publish_config(
        &nacos(),
        &format!("{consumer_app}.condition-router"),
        "dubbo",
        app_rule,
    )
    .expect("publish app rule");
    let tag_rule = format!(
        "configVersion: v3.0\nforce: false\nenabled: true\nkey: {provider_app}\ntags:\n  - name: gray\n    addresses: [\"127.0.0.1:18031\"]\n"
    );
    publish_config(
        &nacos(),
        &format!("{provider_app}.tag-router"),
        "dubbo",
        &tag_rule,
    )
    .expect("publish tag rule");
    let mut seen = Vec::new();
    for _ in 0..2 {
        if let Update::Rule { key, text } =
            next_matching(&mut rx, PUSH, |u| matches!(u, Update::Rule { .. })).await
        {
            seen.push((key, text.is_some()));
        }
    }
    seen.sort();
    let mut want = vec![
        (format!("{consumer_app}.condition-router"), true),
        (format!("{provider_app}.tag-router"), true),
    ];
    want.sort();
    assert_eq!(seen, want);
}

fn rule_v2(data_id: &str) -> String {
    format!(
        "# {data_id} v2\nconfigVersion: v3.0\nscope: service\nkey: x\nconditions:\n  - '=> host != 10.9.9.7'\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_weight_configurator_changes_the_snapshot() {
    let key = ServiceKey::with(unique("it.override.Echo"), "g2", "");
    let (provider_reg, _c1) = registry("");
    let inst = Instance::builder("127.0.0.1", 18041)
        .service(key.clone())
        .build();
    provider_reg.register(&inst).await.expect("register");
    let (reg, _c2) = registry("");
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(key.clone()))
        .await
        .expect("subscribe");
    dir.wait_until(FIRST_LIST, |s| {
        s.instances().len() == 1 && s.instances()[0].weight() == 100
    })
    .await
    .expect("listed with weight 100");
    let data_id = format!("{}::g2.configurators", key.interface);
    let rule = format!(
        "configVersion: v3.0\nscope: service\nkey: g2/{}\nenabled: true\nconfigs:\n  - addresses: [\"127.0.0.1:18041\"]\n    side: provider\n    parameters:\n      weight: 7\n",
        key.interface
    );
    publish_config(&nacos(), &data_id, "dubbo", &rule).expect("publish configurator");
    let s = dir
        .wait_until(PUSH, |s| {
            s.instances().first().is_some_and(|i| i.weight() == 7)
        })
        .await
        .expect("override applied within 3 s");
    assert_eq!(s.instances().len(), 1);
    provider_reg.unregister(&inst).await.ok();
}

/// Nacos pushes whole lists; the adapter sends the directory only what changed. An operator's
/// weight edit of one instance arrives as an `Add` of that instance alone (the directory's
/// patch path), after a first whole list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_weight_edits_arrive_as_a_delta_of_the_edited_instance() {
    let service = unique("it.delta");
    let (p1, p2, p3) = (provider().await, provider().await, provider().await);
    let mut edited = open_api(&service, &p2);
    for i in [
        open_api(&service, &p1),
        edited.clone(),
        open_api(&service, &p3),
    ] {
        i.register(&nacos()).expect("register");
    }
    let (reg, _c) = registry("naming=plain");
    let mut rx = reg
        .subscribe(&ServiceKey::new(&service))
        .await
        .expect("subscribe");
    // Until all three are listed (the first update is the whole list; should the server list
    // them in two pushes, the rest follows as a delta).
    let list_update =
        |u: &Update| matches!(u, Update::Add(_) | Update::Remove(_) | Update::Reset(_));
    let mut listed = std::collections::BTreeSet::new();
    let mut first = true;
    while listed.len() < 3 {
        match next_matching(&mut rx, FIRST_LIST, list_update).await {
            Update::Reset(l) if first => listed = l.iter().map(|i| i.port()).collect(),
            Update::Add(l) if !first => listed.extend(l.iter().map(|i| i.port())),
            other => panic!("a whole list first, then deltas: {other:?}"),
        }
        first = false;
    }
    edited.weight = 5.0;
    edited.update(&nacos()).expect("PUT weight");
    let port = p2.addr().port();
    let delta = next_matching(&mut rx, PUSH, list_update).await;
    match delta {
        Update::Add(l) => {
            assert_eq!(l.len(), 1, "only the edited instance: {l:?}");
            assert_eq!((l[0].port(), l[0].weight()), (port, 500));
        }
        other => panic!("a weight edit is an Add of the edited instance: {other:?}"),
    }
    for p in [&p1, &p2, &p3] {
        open_api(&service, p).deregister(&nacos()).ok();
    }
}

// ---- Server lists (`nacos://a,b`, `?backup=`, `?endpoint=`) with a dead server first ----

/// First list through a server list whose first server is dead: the client builds (naming and
/// config, at once) may each pick the dead one first, which costs about 6.5 s in nacos-sdk
/// 0.8.3 (its connection checks, then a 2 s pause before the next server).
const LIST_FIRST: Duration = Duration::from_secs(20);

/// A port `p` with `p` and `p + 1000` (a Nacos server's HTTP and gRPC ports) where nothing
/// listens: from the band nothing in the suite binds (`ports::FAKE_PORTS`, below the kernel's
/// ephemeral range), each checked free with a listener bound and dropped at once.
fn dead_nacos_port() -> u16 {
    let band = switchman_integration_tests::ports::FAKE_PORTS;
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    for _ in 0..500 {
        let p = fastrand::u16(band.start..band.end - 1000);
        if free(p) && free(p + 1000) {
            return p;
        }
    }
    panic!("no free port pair in {band:?}");
}

/// Registers a provider through the registry address `address(cache_dir)` and subscribes
/// through the same address: the registration is on the live server (open API) and the
/// subscription lists it. `what` names the case in messages.
async fn round_trip_through(what: &str, address: impl Fn(&std::path::Path) -> String) {
    // RUST_LOG=nacos_sdk=info shows which server each client build picked.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_test_writer()
        .try_init();
    let key = ServiceKey::with(unique("it.list.Echo"), "", "1.0");
    let provider_cache = Cache(scratch_dir("switchman-nacos-it"));
    let provider_address = address(&provider_cache.0);
    let registrar = switchman_discovery::registrar_from_url(&provider_address)
        .unwrap_or_else(|e| panic!("{what}: {provider_address}: {e}"));
    let instance = Instance::builder("127.0.0.1", 18041)
        .service(key.clone())
        .build();
    let started = std::time::Instant::now();
    registrar
        .register(&instance)
        .await
        .unwrap_or_else(|e| panic!("{what}: register through {provider_address}: {e}"));
    eprintln!("{what}: registered after {:?}", started.elapsed());
    let listed = switchman_integration_tests::nacos_api::request(
        &nacos(),
        "GET",
        "/nacos/v1/ns/instance/list",
        &[("serviceName", key.nacos_service_name())],
    )
    .expect("open API list");
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    let ports: Vec<_> = listed["hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|h| h["port"].clone())
        .collect();
    assert_eq!(
        ports,
        [json!(18041)],
        "{what}: on the live server: {listed}"
    );

    let consumer_cache = Cache(scratch_dir("switchman-nacos-it"));
    let consumer_address = address(&consumer_cache.0);
    let registry = switchman_discovery::registry_from_url(&consumer_address)
        .unwrap_or_else(|e| panic!("{what}: {consumer_address}: {e}"));
    let started = std::time::Instant::now();
    let dir = RegistryDirectory::subscribe(registry.as_ref(), DirectoryConfig::new(key.clone()))
        .await
        .expect("subscribe");
    let s = dir
        .wait_until(LIST_FIRST, |s| s.instances().len() == 1)
        .await
        .unwrap_or_else(|_| panic!("{what}: no list through {consumer_address}"));
    eprintln!("{what}: first list after {:?}", started.elapsed());
    assert_eq!(s.instances()[0].address(), "127.0.0.1:18041", "{what}");
    assert_eq!(s.instances()[0].service(), &key, "{what}");
    registrar.unregister(&instance).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_server_list_in_the_authority_skips_a_dead_first_server() {
    let dead = dead_nacos_port();
    let live = nacos();
    round_trip_through("a,b", |cache| {
        format!(
            "nacos://127.0.0.1:{dead},{live}?cache_dir={}",
            cache.display()
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_server_list_in_backup_skips_a_dead_first_server() {
    let dead = dead_nacos_port();
    let live = nacos();
    round_trip_through("?backup=", |cache| {
        format!(
            "nacos://127.0.0.1:{dead}?backup={live}&cache_dir={}",
            cache.display()
        )
    })
    .await;
}

/// A minimal address server: answers every request with `body` (text/plain) and records the
/// request lines it was asked.
async fn address_server(body: String) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("address server binds");
    let addr = listener.local_addr().expect("local address").to_string();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (body, seen) = (body.clone(), seen.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                seen.lock()
                    .unwrap()
                    .push(head.lines().next().unwrap_or("").to_string());
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                conn.write_all(reply.as_bytes()).await.ok();
                conn.shutdown().await.ok();
            });
        }
    });
    (addr, asked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_endpoint_reads_the_servers_from_an_address_server() {
    let dead = dead_nacos_port();
    // The address server lists the dead server first; the URL's own server is dead too: the
    // address server's list is the one used (as in Java Nacos, the endpoint wins).
    let (endpoint, asked) = address_server(format!("127.0.0.1:{dead}\n{}\n", nacos())).await;
    round_trip_through("endpoint=", |cache| {
        format!(
            "nacos://127.0.0.1:{dead}?endpoint={endpoint}&cache_dir={}",
            cache.display()
        )
    })
    .await;
    let asked = asked.lock().unwrap().clone();
    assert!(
        !asked.is_empty()
            && asked
                .iter()
                .all(|l| l.starts_with("GET /nacos/serverlist?namespace=public ")),
        "{asked:?}"
    );
}
