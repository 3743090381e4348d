//! A plain `Reference` against the real ZooKeeper that `scripts/test` starts finds and calls
//! Java Dubbo 3.3 providers that register only their application instance and keep their
//! metadata local (Dubbo 3's recommended mode): nothing to configure, and no "no provider"
//! while their metadata is being fetched.

use std::time::Duration;

use serde_json::json;
use switchman::Reference;
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_reference_calls_application_level_providers_with_local_metadata() {
    if java_peer::skipped("a_plain_reference_calls_application_level_providers") {
        return;
    }
    let g = unique("ref-app-level");
    let app = unique("ref-app");
    let start = |protocol: &str, name: &str| {
        JavaProvider::start(
            &ProviderOptions::zookeeper(&zookeeper())
                .protocol(protocol)
                .application(&app)
                .group(&g)
                .name(name)
                .register_mode("instance")
                .metadata_type("local"),
        )
    };
    let (_dubbo, _tri) = std::thread::scope(|s| {
        let a = s.spawn(|| start("dubbo", "over-dubbo"));
        let b = s.spawn(|| start("tri", "over-tri"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let demo = Reference::new(DEMO_SERVICE)
        .registry(format!("zookeeper://{}", zookeeper()))
        .group(&g)
        .wait(Duration::from_secs(20))
        // As `switchman call` does: an empty first answer fails at once. The first list is
        // held back while the instances' metadata is being fetched, so this connects.
        .empty_grace(Duration::ZERO)
        .connect()
        .await
        .unwrap();
    // Both instances are found (connect returns with the first; the second follows).
    let dir = demo.directory().clone();
    dir.wait_until(Duration::from_secs(20), |s| s.endpoints().len() == 2)
        .await
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let who = demo.call("whoami", json!([])).await.unwrap();
        seen.insert(who.as_str().unwrap().to_string());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        vec!["over-dubbo".to_string(), "over-tri".to_string()]
    );
    let sum = demo
        .call_typed("add", &["int", "int"], json!([20, 22]))
        .await
        .unwrap();
    assert_eq!(sum, json!(42));
}

/// A `Reference` names its application to providers as a Java consumer does: the registry
/// URL's `application` arrives as the `remote.application` attachment (what the provider's
/// `RpcContext.getRemoteApplicationName()` reads) over dubbo:// and Triple; a call's own
/// attachment wins (dubbo://).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_sends_its_application_as_remote_application() {
    if java_peer::skipped("a_reference_sends_its_application_as_remote_application") {
        return;
    }
    let consumer_app = unique("shop-consumer");
    // One provider per protocol, each in a group of its own.
    let start = |protocol: &str| {
        let group = unique(&format!("ref-remote-app-{protocol}"));
        let provider = JavaProvider::start(
            &ProviderOptions::zookeeper(&zookeeper())
                .protocol(protocol)
                .group(&group)
                .name(protocol),
        );
        (group, provider)
    };
    let ((dubbo_group, _dubbo), (tri_group, _tri)) = std::thread::scope(|s| {
        let a = s.spawn(|| start("dubbo"));
        let b = s.spawn(|| start("tri"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let connect = |group: String| {
        Reference::new(DEMO_SERVICE)
            .registry(format!(
                "zookeeper://{}?application={consumer_app}",
                zookeeper()
            ))
            .group(&group)
            .wait(Duration::from_secs(20))
            .connect()
    };
    // Over dubbo:// the attachment; over Triple the tri-consumer-appname header, which the
    // Java provider turns into the same attachment.
    let demo = connect(dubbo_group).await.unwrap();
    assert_eq!(remote_application(&demo).await, json!(consumer_app));
    let over_tri = connect(tri_group).await.unwrap();
    assert_eq!(remote_application(&over_tri).await, json!(consumer_app));
    let own = switchman_core::Invocation::new("attachment")
        .with_args(vec![json!("remote.application")])
        .with_types(["java.lang.String"])
        .with_attachment("remote.application", "the-callers-own");
    assert_eq!(demo.invoke(&own).await.unwrap(), json!("the-callers-own"));
}

/// What the provider's `attachment("remote.application")` returns.
async fn remote_application(r: &Reference) -> serde_json::Value {
    r.call_typed(
        "attachment",
        &["java.lang.String"],
        json!(["remote.application"]),
    )
    .await
    .unwrap()
}
