//! A typed call whose signature a Java Dubbo 3.3 provider does not have (its status 40) names
//! the signatures the provider has, read from the service definition the provider published
//! in the registry's metadata report, on ZooKeeper and on Nacos (rnacos), through every way
//! a `Reference` is called: `call_typed`, `call_as` and `tower::Service`.

use std::time::Duration;

use serde_json::json;
use switchman::{ErrorKind, Invocation, Reference};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{nacos, unique, zookeeper};
use tower::ServiceExt;

async fn mismatches_name_what_the_provider_has(registry: String, opts: ProviderOptions, g: &str) {
    let provider = tokio::task::spawn_blocking(move || JavaProvider::start(&opts))
        .await
        .unwrap();
    let reference = Reference::new(DEMO_SERVICE)
        .registry(registry)
        .group(g)
        .wait(Duration::from_secs(20))
        .connect()
        .await
        .unwrap();
    let want = format!(
        "signature mismatch: the provider {} has no add(long,long); it has add(int,int) (the \
         definition application switchman-java-provider published in the registry's metadata \
         report)",
        provider.address()
    );
    let json = reference
        .call_typed("add", &["long", "long"], json!([2, 3]))
        .await
        .unwrap_err();
    assert_eq!(
        (json.kind(), json.is_retryable()),
        (ErrorKind::BadConfig, false)
    );
    assert!(json.message().starts_with(&want), "{json}");

    let typed = reference
        .call_as::<_, i64>("add", (2_i64, 3_i64))
        .await
        .unwrap_err();
    assert!(typed.message().starts_with(&want), "{typed}");

    let tower = reference
        .clone()
        .oneshot(
            Invocation::new("add")
                .with_args(vec![2.into(), 3.into()])
                .with_types(["long", "long"]),
        )
        .await
        .unwrap_err();
    assert!(tower.message().starts_with(&want), "{tower}");

    // A method the provider has under another name only: every method is listed.
    let other = reference
        .call_typed("sayHello", &["int"], json!([1]))
        .await
        .unwrap_err();
    assert!(
        other
            .message()
            .contains("has no sayHello(int); it has sayHello(java.lang.String) (the definition"),
        "{other}"
    );

    // The right signature still works, and the same reference keeps naming mistakes.
    assert_eq!(
        reference
            .call_typed("add", &["int", "int"], json!([2, 3]))
            .await
            .unwrap(),
        5
    );
    drop(provider);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_40_names_the_providers_signatures_from_zookeeper() {
    if java_peer::skipped("status_40_names_the_providers_signatures_from_zookeeper") {
        return;
    }
    let g = unique("sig-def-zk");
    let zk = zookeeper();
    let opts = ProviderOptions::zookeeper(&zk).group(&g);
    mismatches_name_what_the_provider_has(format!("zookeeper://{zk}"), opts, &g).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_40_names_the_providers_signatures_from_nacos() {
    if java_peer::skipped("status_40_names_the_providers_signatures_from_nacos") {
        return;
    }
    let g = unique("sig-def-nacos");
    let n = nacos();
    let opts = ProviderOptions::nacos(&n).group(&g);
    mismatches_name_what_the_provider_has(format!("nacos://{n}"), opts, &g).await;
}
