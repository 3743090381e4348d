//! Signature mistakes diagnosed on the consumer side, against real Java Apache Dubbo 3.3
//! providers (`peers/java`) in the shared ZooKeeper (`SWITCHMAN_ZK`): a method the provider
//! does not list in its `methods` fails before the call, short Java type names are expanded
//! (or refused with the rule), and a provider's status 40 to a wrong signature names the
//! signature sent and the provider's methods.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{ErrorKind, Invocation, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

const WAIT: Duration = Duration::from_secs(30);

async fn directory(group: &str) -> Arc<RegistryDirectory> {
    let reg = registry_from_url(&format!("zookeeper://{}", zookeeper())).unwrap();
    let dir = RegistryDirectory::subscribe(
        reg.as_ref(),
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")),
    )
    .await
    .unwrap();
    dir.wait_until(WAIT, |s| s.endpoints().len() == 1)
        .await
        .unwrap_or_else(|e| panic!("the provider of group {group}: {e}"));
    Arc::new(dir)
}

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

/// The calls the provider served besides the `ping`s of [`JavaProvider::settle`].
fn served(p: &JavaProvider) -> usize {
    p.calls() - p.calls_of("ping")
}

/// One provider of `protocol` in a group of its own, its directory and a cluster on it.
async fn provider(protocol: &str) -> (JavaProvider, Arc<RegistryDirectory>, ClusterInvoker) {
    let g = unique(&format!("signatures-{protocol}"));
    let opts = ProviderOptions::zookeeper(&zookeeper())
        .protocol(protocol)
        .group(&g);
    let p = tokio::task::spawn_blocking(move || JavaProvider::start(&opts))
        .await
        .unwrap();
    let dir = directory(&g).await;
    let c = cluster(&dir);
    (p, dir, c)
}

/// The checks made before the call over either protocol: an unknown short type name is
/// refused, a known one is expanded and the call works; nothing reaches the provider for the
/// refused call.
async fn short_names(p: &JavaProvider, dir: &RegistryDirectory, c: &ClusterInvoker) {
    let hello = c
        .invoke(&typed("sayHello", &["String"], vec!["Ann".into()]))
        .await
        .expect("String is java.lang.String");
    assert!(
        hello.as_str().is_some_and(|h| h.starts_with("hello, Ann")),
        "{hello}"
    );
    p.settle(&dir.load(), &ProtocolInvoker::new()).await;
    let before = served(p);
    let e = c
        .invoke(&typed("sayHello", &["User"], vec!["Ann".into()]))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
    assert!(
        e.message().contains(
            "`User` is not a full Java class name: write it with its package, e.g. org.example.User"
        ),
        "{e}"
    );
    p.settle(&dir.load(), &ProtocolInvoker::new()).await;
    assert_eq!(served(p), before, "refused before the call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_mistakes_are_named_before_or_after_a_java_dubbo_call() {
    if java_peer::skipped("signature_mistakes_are_named_before_or_after_a_java_dubbo_call") {
        return;
    }
    let (p, dir, c) = provider("dubbo").await;
    let addr = p.address();

    // The provider has add(int,int): add(long,long) is its status 40, named.
    let e = c
        .invoke(&typed("add", &["long", "long"], vec![2.into(), 3.into()]))
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.is_retryable()),
        (ErrorKind::BadConfig, false),
        "{e}"
    );
    let want = format!(
        "signature mismatch: the provider {addr} has no add(long,long); its methods are add, \
         attachment, count, echo, fail, getUser"
    );
    assert!(e.message().starts_with(&want), "{e}");
    assert_eq!(
        c.invoke(&typed("add", &["int", "int"], vec![2.into(), 3.into()]))
            .await
            .unwrap(),
        5
    );

    // A method it does not list fails before the call, typed or generic.
    p.settle(&dir.load(), &ProtocolInvoker::new()).await;
    let before = served(&p);
    let want = format!("the provider {addr} has no method addd; it has add, attachment, count");
    for call in [
        typed("addd", &["int", "int"], vec![2.into(), 3.into()]),
        Invocation::new("addd").with_args(vec![2.into(), 3.into()]),
    ] {
        let e = c.invoke(&call).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
        assert!(e.message().starts_with(&want), "{e}");
    }
    p.settle(&dir.load(), &ProtocolInvoker::new()).await;
    assert_eq!(served(&p), before, "addd never reached the provider");

    short_names(&p, &dir, &c).await;
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_mistakes_over_java_triple() {
    if java_peer::skipped("signature_mistakes_over_java_triple") {
        return;
    }
    let (p, dir, c) = provider("tri").await;
    // The Java Triple provider answers a method it does not have with UNKNOWN (the
    // NullPointerException of its method lookup): named.
    let e = c
        .invoke(&typed("addd", &["int", "int"], vec![2.into(), 3.into()]))
        .await
        .unwrap_err();
    assert!(
        e.message().contains("the provider does not serve addd"),
        "{e}"
    );
    short_names(&p, &dir, &c).await;
    drop(dir);
}
