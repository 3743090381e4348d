//! Smoke tests of the real Java Apache Dubbo 3.3 peers (`peers/java`, built by
//! `scripts/install-java-peers`): a Java provider registered in the shared ZooKeeper
//! (`SWITCHMAN_ZK`) or rnacos (`SWITCHMAN_NACOS`), called by the Java generic consumer, and the
//! Hessian2 vectors of Dubbo's own serializer. Every test uses its own service group, so tests
//! (and other users of `DemoService`) run in parallel without seeing each other's providers.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use switchman_core::Url;
use switchman_integration_tests::java_peer::{
    self, DEMO_SERVICE, JavaProvider, ProviderOptions, run_consumer, vectors_decode, vectors_encode,
};
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{nacos, nacos_api, unique, zookeeper};

/// Every vector name `vectors encode` must print.
const VECTOR_NAMES: &[&str] = &[
    "null",
    "bool_true",
    "bool_false",
    "int_0",
    "int_m16",
    "int_47",
    "int_48",
    "int_m2048",
    "int_2047",
    "int_m262144",
    "int_262143",
    "int_262144",
    "int_max",
    "int_min",
    "long_0",
    "long_m8",
    "long_15",
    "long_16",
    "long_m2048",
    "long_2047",
    "long_m262144",
    "long_262143",
    "long_int32",
    "long_2p31",
    "long_max",
    "long_min",
    "double_0",
    "double_1",
    "double_m128",
    "double_127",
    "double_m32768",
    "double_32767",
    "double_12_25",
    "double_pi",
    "double_0_001",
    "double_1e300",
    "string_empty",
    "string_hello",
    "string_31",
    "string_32",
    "string_1023",
    "string_1024",
    "string_70000",
    "string_unicode",
    "string_emoji",
    "binary_empty",
    "binary_3",
    "binary_20000",
    "date_ms",
    "date_minute",
    "list_untyped",
    "list_empty",
    "list_int_array",
    "list_string_array",
    "list_20",
    "list_nested",
    "list_linked",
    "map_untyped",
    "map_empty",
    "map_int_keys",
    "map_treemap",
    "user",
    "user_list",
    "same_list_twice",
    "enum_red",
    "big_decimal",
    "big_integer",
    "exception_demo",
    "exception_cause",
    // The typed mapping table's rows (it::hessian_typed), object graphs included.
    "byte_m5",
    "short_1000",
    "float_1_1",
    "char_z",
    "prims",
    "prims_nulls",
    "empty",
    "enum_list",
    "map_variant",
    "set_one",
    "set_abc",
    "derived",
    "generics",
    "generics_nulls",
    "node_chain",
    "list_abc",
    "refs_after_forms",
    "node_self",
    "node_pair",
    "list_self",
    "shared_user",
    "refs_exponential",
];

/// A unique service group (letters, digits and dashes).
fn group(tag: &str) -> String {
    unique(&format!("java-{tag}"))
}

/// `sayHello("rust")` and `add(2, 3)` through the Java consumer (in parallel), asserted.
fn call_hello_and_add(registry: &str, group: &str, provider: &JavaProvider) {
    let common = [
        "--registry",
        registry,
        "--interface",
        DEMO_SERVICE,
        "--group",
        group,
        "--timeout-ms",
        "5000",
    ];
    let hello = {
        let args: Vec<String> = common.iter().map(|s| s.to_string()).collect();
        std::thread::spawn(move || {
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["--method", "sayHello", "--types", "java.lang.String"]);
            a.extend(["--args", r#"["rust"]"#]);
            run_consumer(&a)
        })
    };
    let mut a = common.to_vec();
    a.extend(["--method", "add", "--types", "int,int", "--args", "[2,3]"]);
    let (status, lines) = run_consumer(&a);
    assert!(status.success(), "add: {lines:?}");
    assert_eq!(lines, vec![json!({"ok": true, "result": 5})]);
    let (status, lines) = hello.join().expect("the sayHello consumer thread");
    assert!(status.success(), "sayHello: {lines:?}");
    assert_eq!(
        lines,
        vec![json!({"ok": true, "result": format!("hello, rust from {}", provider.name())})]
    );
    let settle = Duration::from_secs(5);
    assert_eq!(provider.calls_of_settled("sayHello", 1, settle), 1);
    assert_eq!(provider.calls_of_settled("add", 1, settle), 1);
    assert_eq!(provider.calls(), 2);
}

fn assert_vector_names(v: &Value) {
    assert!(
        v["dubbo_version"]
            .as_str()
            .is_some_and(|s| s.starts_with("3.3.")),
        "{}",
        v["dubbo_version"]
    );
    assert!(
        v["hessian_lite_version"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let vectors = v["vectors"].as_array().expect("a vectors array");
    let names: Vec<&str> = vectors.iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(names, VECTOR_NAMES, "vector names and their order");
    for e in vectors {
        let hex = e["hex"].as_str().unwrap_or_default();
        assert!(
            !hex.is_empty() && hex.len() % 2 == 0 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{e}"
        );
    }
    let by_name = |n: &str| vectors.iter().find(|e| e["name"] == n).unwrap()["hex"].clone();
    // A few fixed points of the Hessian 2 grammar.
    assert_eq!(by_name("null"), "4e");
    assert_eq!(by_name("int_0"), "90");
    assert_eq!(by_name("string_hello"), "0568656c6c6f");
}

/// The provider nodes of `group` under `/dubbo/DemoService/providers`: (node name, decoded).
async fn zk_provider_urls(client: &zookeeper_client::Client, group: &str) -> Vec<(String, Url)> {
    let dir = format!("/dubbo/{DEMO_SERVICE}/providers");
    let children = client.list_children(&dir).await.unwrap_or_default();
    children
        .into_iter()
        .filter_map(|c| Url::from_encoded(&c).ok().map(|u| (c, u)))
        .filter(|(_, u)| u.param("group") == Some(group))
        .collect()
}

/// One Java dubbo:// provider in ZooKeeper: its node (address and weight), two calls through
/// the Java consumer, the vectors, and a graceful SIGTERM that removes the node.
#[test]
fn java_dubbo_provider_in_zookeeper_serves_the_java_consumer() {
    if java_peer::skipped("java_dubbo_provider_in_zookeeper_serves_the_java_consumer") {
        return;
    }
    let zk = zookeeper();
    let g = group("zk");
    // Encode, then decode Java's own bytes again: every vector round-trips inside Java.
    let vectors = std::thread::spawn(|| {
        let encoded = vectors_encode();
        let decoded = vectors_decode(&json!({"vectors": encoded["vectors"].clone()}));
        (encoded, decoded)
    });
    let mut provider = JavaProvider::start(
        &ProviderOptions::zookeeper(&zk)
            .weight(150)
            .group(&g)
            .name("smoke-zk"),
    );
    eprintln!(
        "java dubbo provider with ZooKeeper ready in {:?}",
        provider.started_in()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(raw_client(&zk, Duration::from_secs(10)));
    let urls = rt.block_on(zk_provider_urls(&client, &g));
    assert_eq!(urls.len(), 1, "one provider node of group {g}: {urls:?}");
    let (node, url) = &urls[0];
    assert_eq!(url.protocol(), "dubbo");
    assert_eq!(url.address(), provider.address());
    assert_eq!(url.host(), "127.0.0.1");
    assert_eq!(url.path(), DEMO_SERVICE);
    assert_eq!(url.param("weight"), Some("150"));
    assert_eq!(url.param("side"), Some("provider"));
    // The node name is the URL encoded once, as Java's URLEncoder does.
    let prefix = format!("dubbo%3A%2F%2F127.0.0.1%3A{}%2F", provider.port());
    assert!(node.starts_with(&prefix), "{node}");

    call_hello_and_add(&format!("zookeeper://{zk}"), &g, &provider);
    let (encoded, decoded) = vectors.join().expect("the vectors thread");
    assert_vector_names(&encoded);
    let decoded = decoded["vectors"]
        .as_array()
        .expect("a decoded vectors array");
    assert_eq!(decoded.len(), VECTOR_NAMES.len());
    for d in decoded {
        assert_eq!(d["equal"], true, "Java's decode of its own bytes: {d}");
        assert!(d.get("error").is_none(), "{d}");
    }

    // SIGTERM: Dubbo's shutdown hook unregisters before the JVM exits.
    let status = provider.terminate();
    assert!(
        status.is_some(),
        "the JVM exited after SIGTERM:\n{}",
        provider.output()
    );
    let left = rt.block_on(zk_provider_urls(&client, &g));
    assert!(
        left.is_empty(),
        "provider node left after a graceful stop: {left:?}"
    );
    drop(client);
}

/// The same with rnacos: the Java tri:// provider registers as Nacos instance of
/// `providers:DemoService::<group>` and serves the Java consumer.
#[test]
fn java_tri_provider_in_nacos_serves_the_java_consumer() {
    if java_peer::skipped("java_tri_provider_in_nacos_serves_the_java_consumer") {
        return;
    }
    let addr = nacos();
    let g = group("nacos");
    let provider = JavaProvider::start(
        &ProviderOptions::nacos(&addr)
            .protocol("tri")
            .weight(7)
            .group(&g)
            .name("smoke-nacos"),
    );
    eprintln!(
        "java tri provider with Nacos ready in {:?}",
        provider.started_in()
    );
    assert_eq!(provider.protocol(), "tri");
    let service = format!("providers:{DEMO_SERVICE}::{g}");
    let body = nacos_api::request(
        &addr,
        "GET",
        "/nacos/v1/ns/instance/list",
        &[("serviceName", service.clone())],
    )
    .unwrap_or_else(|e| panic!("instance list of {service}: {e}"));
    let list: Value = serde_json::from_str(&body).unwrap();
    let hosts = list["hosts"].as_array().cloned().unwrap_or_default();
    assert_eq!(hosts.len(), 1, "{body}");
    let h = &hosts[0];
    assert_eq!(h["ip"], "127.0.0.1");
    assert_eq!(h["port"], provider.port());
    assert_eq!(h["metadata"]["protocol"], "tri");
    assert_eq!(h["metadata"]["weight"], "7");
    assert_eq!(h["metadata"]["group"], g.as_str());
    let methods: BTreeSet<&str> = h["metadata"]["methods"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .collect();
    assert!(
        methods.contains("sayHello") && methods.contains("add"),
        "{methods:?}"
    );

    call_hello_and_add(&format!("nacos://{addr}"), &g, &provider);
}
