//! W3C trace context across the wire: a `traceparent` (and `tracestate`) the caller sets on the
//! invocation reaches the provider unchanged on every protocol, through the cluster invoker
//! (retries included): an HTTP header, Triple metadata, a dubbo:// attachment. Rust HTTP and
//! Triple providers in-process; Java Apache Dubbo 3.3 dubbo:// and tri:// providers
//! (`peers/java`, `DemoService.attachment(key)` answers the attachment it received) through
//! the shared ZooKeeper (`SWITCHMAN_ZK`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::telemetry::TRACEPARENT;
use switchman_cluster::triple::{Payload, TripleInvoker, TripleServer};
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker};
use switchman_core::{Instance, Invocation, Protocol, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, StaticRegistry, registry_from_url};
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PARENT}-01")
}

/// The trace id of a W3C `traceparent` value (`version-traceid-parentid-flags`).
fn trace_id(value: &str) -> Option<&str> {
    let parts: Vec<&str> = value.split('-').collect();
    match parts.as_slice() {
        [v, t, p, f] if v.len() == 2 && t.len() == 32 && p.len() == 16 && f.len() == 2 => Some(t),
        _ => None,
    }
}

/// The `traceparent` and `tracestate` headers one request carried.
type Seen = (Option<String>, Option<String>);

async fn cluster_over(instances: Vec<Instance>, service: &str) -> ClusterInvoker {
    let registry = StaticRegistry::new(instances);
    let dir =
        RegistryDirectory::subscribe(&registry, DirectoryConfig::new(ServiceKey::new(service)))
            .await
            .unwrap();
    dir.wait_until(Duration::from_secs(5), |s| !s.endpoints().is_empty())
        .await
        .unwrap();
    let transport = ProtocolInvoker::new().triple(TripleInvoker::new().payload(Payload::Raw));
    ClusterInvoker::new(
        Arc::new(dir),
        Arc::new(transport),
        ClusterConfig::default().timeout(Duration::from_secs(5)),
    )
}

/// An HTTP provider (its first answer a 503, so the call is retried) and a Triple provider,
/// both answering the trace context they received; every attempt carries the caller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traceparent_reaches_http_and_triple_providers_unchanged() {
    let local = "127.0.0.1:0".parse().unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let n = Arc::new(AtomicU64::new(0));
    let http = {
        let seen = seen.clone();
        HttpProvider::serve(local, move |req| {
            let header = |k: &str| {
                req.headers
                    .get(k)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            seen.lock()
                .unwrap()
                .push((header(TRACEPARENT), header("tracestate")));
            let first = n.fetch_add(1, Ordering::Relaxed) == 0;
            Box::pin(async move {
                if first {
                    ProviderReply::Status(503, "busy".into())
                } else {
                    ProviderReply::Ok(json!("ok"))
                }
            })
        })
        .await
        .unwrap()
    };
    let tri = TripleServer::serve(local, |req| {
        let tp = req
            .headers
            .get(TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_string();
        Box::pin(async move { Ok(bytes::Bytes::from(tp)) })
    })
    .await
    .unwrap();

    let inv = Invocation::new("trace")
        .with_args(vec![json!("x")])
        .with_attachment(TRACEPARENT, traceparent())
        .with_attachment("tracestate", "congo=t61rcWkgMzE");

    let http_instance = Instance::builder("127.0.0.1", http.addr().port())
        .protocol(Protocol::Http)
        .service(ServiceKey::new("test.Trace"))
        .build();
    let c = cluster_over(vec![http_instance], "test.Trace").await;
    assert_eq!(c.invoke(&inv).await.unwrap(), json!("ok"));
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "a 503, then the retry: {got:?}");
    for (tp, state) in &got {
        assert_eq!(tp.as_deref(), Some(traceparent().as_str()));
        assert_eq!(state.as_deref(), Some("congo=t61rcWkgMzE"));
    }

    let c = cluster_over(vec![tri.instance("test.Trace")], "test.Trace").await;
    let reply = c.invoke(&inv).await.unwrap();
    assert_eq!(reply, Value::String(traceparent()), "Triple metadata");
    assert_eq!(trace_id(reply.as_str().unwrap()), Some(TRACE_ID));

    // Without one, nothing is invented: the provider sees no trace context.
    let bare = Invocation::new("trace").with_args(vec![json!("x")]);
    assert_eq!(c.invoke(&bare).await.unwrap(), json!("none"));
}

async fn demo_directory(group: &str) -> Arc<RegistryDirectory> {
    let reg = registry_from_url(&format!("zookeeper://{}", zookeeper())).unwrap();
    let dir = RegistryDirectory::subscribe(
        reg.as_ref(),
        DirectoryConfig::new(ServiceKey::with(DEMO_SERVICE, group, "")),
    )
    .await
    .unwrap();
    dir.wait_until(Duration::from_secs(30), |s| s.endpoints().len() == 1)
        .await
        .unwrap_or_else(|e| panic!("the provider of group {group}: {e}"));
    Arc::new(dir)
}

/// Java Dubbo 3.3 providers over dubbo:// and tri:// receive the caller's `traceparent` as
/// the attachment of that name: the same trace id as on the Rust providers above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traceparent_reaches_java_dubbo_and_triple_providers() {
    if java_peer::skipped("traceparent_reaches_java_dubbo_and_triple_providers") {
        return;
    }
    let zk = zookeeper();
    let (g_dubbo, g_tri) = (unique("trace-dubbo"), unique("trace-tri"));
    let (dubbo, tri) = std::thread::scope(|s| {
        let a = s.spawn(|| JavaProvider::start(&ProviderOptions::zookeeper(&zk).group(&g_dubbo)));
        let b = s.spawn(|| {
            JavaProvider::start(
                &ProviderOptions::zookeeper(&zk)
                    .group(&g_tri)
                    .protocol("tri"),
            )
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    let asked = Invocation::new("attachment")
        .with_args(vec![json!(TRACEPARENT)])
        .with_types(["java.lang.String"])
        .with_attachment(TRACEPARENT, traceparent());
    for (group, protocol, provider) in [(&g_dubbo, "dubbo", &dubbo), (&g_tri, "tri", &tri)] {
        let dir = demo_directory(group).await;
        assert_eq!(
            dir.load().endpoints()[0].instance.protocol().as_str(),
            protocol
        );
        let cluster = ClusterInvoker::new(
            dir,
            Arc::new(ProtocolInvoker::new()),
            ClusterConfig::default().timeout(Duration::from_secs(5)),
        );
        let got = cluster
            .invoke(&asked)
            .await
            .unwrap_or_else(|e| panic!("{protocol}: {e}\nprovider output:\n{}", provider.output()));
        let got = got.as_str().unwrap_or_else(|| panic!("{protocol}: {got}"));
        assert_eq!(got, traceparent(), "{protocol}");
        assert_eq!(trace_id(got), Some(TRACE_ID), "{protocol}");
    }
}
