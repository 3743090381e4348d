//! The Triple invoker against real Dubbo providers: the official Python implementation
//! (PyPI `apache-dubbo` 3.0.0b1, installed by `scripts/install-python-peers`), registered in
//! the shared ZooKeeper of `scripts/test` (`SWITCHMAN_ZK`), discovered by the ZooKeeper adapter.
//! Every test uses its own service name, so tests run in parallel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use serde_json::json;
use switchman_cluster::triple::{Payload, TripleInvoker};
use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker, Strategy};
use switchman_core::{
    BoxFuture, ErrorKind, Instance, Invocation, Invoker, Protocol, Result, ServiceKey,
};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_integration_tests::python_peer::PythonPeer;
use switchman_integration_tests::{unique, zookeeper};

const WAIT: Duration = Duration::from_secs(20);

/// Records the kind of every failed attempt per address around the real invoker.
#[derive(Debug)]
struct Recording<I> {
    inner: I,
    failures: Mutex<HashMap<String, Vec<ErrorKind>>>,
}

impl<I: Invoker> Invoker for Recording<I> {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        inv: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let r = self.inner.invoke(target, inv, timeout).await;
            if let Err(e) = &r {
                self.failures
                    .lock()
                    .unwrap()
                    .entry(target.address().to_string())
                    .or_default()
                    .push(e.kind());
            }
            r
        })
    }
}

fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A unique service name, shaped like a Java interface.
fn service(tag: &str) -> String {
    unique(&format!("it.triple.{tag}")).replace('-', "_")
}

async fn directory(service: &str, expect: usize) -> Arc<RegistryDirectory> {
    let registry = registry_from_url(&format!("zookeeper://{}", zookeeper())).unwrap();
    // Failover + round robin, as a Dubbo consumer of these providers would typically run.
    let config = DirectoryConfig::new(ServiceKey::new(service))
        .balancer(Arc::new(switchman_loadbalance::RoundRobinBalance::new()));
    let dir = Arc::new(
        RegistryDirectory::subscribe(&*registry, config)
            .await
            .unwrap(),
    );
    dir.wait_until(WAIT, |s| s.endpoints().len() == expect)
        .await
        .unwrap_or_else(|e| panic!("the Python providers of {service} were not discovered: {e}"));
    dir
}

/// Two apache-dubbo providers, discovered through ZooKeeper, 100 `sayHello` calls through
/// failover + random, 4 in flight; one provider is killed (SIGKILL) after 50 answers.
/// Its node lingers in ZooKeeper (the session is not closed), so the cluster keeps picking it
/// and must fail over: no call may be lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_calls_over_two_python_providers_survive_a_kill() {
    logs();
    let svc = service("HelloWorld");
    let p1 = PythonPeer::start(&zookeeper(), &svc, "p1");
    let p2 = PythonPeer::start(&zookeeper(), &svc, "p2");
    let dir = directory(&svc, 2).await;

    // What the Python provider registered, as the adapter parsed it.
    let snap = dir.load();
    let mut addrs: Vec<String> = snap
        .instances()
        .iter()
        .map(|i| {
            assert_eq!(i.protocol(), &Protocol::Tri);
            assert_eq!(&*i.service().interface, svc.as_str());
            i.address().to_string()
        })
        .collect();
    addrs.sort();
    let mut want = vec![p1.address(), p2.address()];
    want.sort();
    assert_eq!(addrs, want);

    let invoker = ProtocolInvoker::new().triple(TripleInvoker::new().payload(Payload::Raw));
    let recording = Arc::new(Recording {
        inner: invoker,
        failures: Mutex::new(HashMap::new()),
    });
    let cluster = ClusterInvoker::new(
        dir.clone(),
        recording.clone(),
        ClusterConfig::default()
            .strategy(Strategy::Failover)
            .retries(2)
            .timeout(Duration::from_secs(5)),
    );

    let answered = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let killer = {
        let (answered, killed, dir) = (answered.clone(), killed.clone(), dir.clone());
        let mut p1 = p1;
        tokio::spawn(async move {
            while answered.load(Ordering::Acquire) < 50 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            p1.kill();
            killed.store(true, Ordering::Release);
            (p1, dir.load().endpoints().len())
        })
    };
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (cluster, answered, killed) = (cluster.clone(), answered.clone(), killed.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                for k in 0..25 {
                    let i = w * 25 + k;
                    let after_kill = killed.load(Ordering::Acquire);
                    let inv =
                        Invocation::new("sayHello").with_args(vec![json!(format!("world-{i}"))]);
                    let reply = cluster.invoke(&inv).await;
                    answered.fetch_add(1, Ordering::AcqRel);
                    out.push((i, after_kill, reply));
                }
                out
            })
        })
        .collect();
    let mut by_label: HashMap<String, usize> = HashMap::new();
    let mut after_kill_labels: HashMap<String, usize> = HashMap::new();
    let mut total = 0;
    for w in workers {
        for (i, after_kill, reply) in w.await.unwrap() {
            total += 1;
            let reply = reply.unwrap_or_else(|e| panic!("call {i} was lost: {e}"));
            let text = reply
                .as_str()
                .expect("a UTF-8 reply comes back as a JSON string");
            let label = ["p1", "p2"]
                .into_iter()
                .find(|l| text == format!("hello, world-{i} from {l}"))
                .unwrap_or_else(|| panic!("call {i}: unexpected reply {text:?}"));
            *by_label.entry(label.to_string()).or_default() += 1;
            if after_kill {
                *after_kill_labels.entry(label.to_string()).or_default() += 1;
            }
        }
    }
    let (p1, listed_at_kill) = killer.await.unwrap();
    let p1_address = p1.address();
    assert_eq!(total, 100);
    // The dead provider was still listed: the calls after the kill survived by failover.
    assert_eq!(listed_at_kill, 2);
    assert!(by_label.get("p1").copied().unwrap_or(0) > 0, "{by_label:?}");
    assert!(by_label.get("p2").copied().unwrap_or(0) > 0, "{by_label:?}");
    assert!(
        after_kill_labels.get("p2").copied().unwrap_or(0) > 0,
        "calls ran after the kill: {after_kill_labels:?}"
    );
    assert_eq!(
        after_kill_labels.get("p1"),
        None,
        "a killed provider answered: {after_kill_labels:?}"
    );
    // The cluster did pick the dead provider and failed over: only it failed, and only with
    // retryable transport errors (connection refused or reset).
    let failures = recording.failures.lock().unwrap().clone();
    assert_eq!(
        failures.keys().collect::<Vec<_>>(),
        vec![&p1_address],
        "{failures:?}"
    );
    assert!(
        failures[&p1_address]
            .iter()
            .all(|k| *k == ErrorKind::Transport),
        "{failures:?}"
    );
    drop(p1);
    drop(p2);
    drop(cluster);
}

/// Error mapping and codecs against the real peer: an exception in the provider and an
/// unknown method are business errors (not retried) carrying the provider's message.
#[tokio::test]
async fn python_provider_errors_are_business_errors() {
    logs();
    let svc = service("Errors");
    let peer = PythonPeer::start(&zookeeper(), &svc, "solo");
    let dir = directory(&svc, 1).await;
    let target = dir.load().instances()[0].clone();
    let triple = TripleInvoker::new().payload(Payload::Raw);
    let t = Duration::from_secs(5);

    let ok = triple
        .invoke(
            &target,
            &Invocation::new("sayHello").with_args(vec![json!("x")]),
            t,
        )
        .await
        .unwrap();
    assert_eq!(ok, json!("hello, x from solo"));

    let e = triple
        .invoke(
            &target,
            &Invocation::new("fail").with_args(vec![json!("bad input")]),
            t,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Business, "{e}");
    assert!(!e.is_retryable());
    assert!(
        e.message()
            .ends_with("with INTERNAL (13): Invoke method failed: refused: bad input"),
        "{e}"
    );

    let e = triple
        .invoke(&target, &Invocation::new("noSuchMethod"), t)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Business, "{e}");
    assert!(e.message().contains("with UNIMPLEMENTED (12)"), "{e}");

    // The peer accepts application/grpc+json but answers raw bytes (`hello, "j" from solo`):
    // the JSON codec reports a reply it cannot parse, and does not retry.
    let e = TripleInvoker::new()
        .invoke(
            &target,
            &Invocation::new("sayHello").with_args(vec![json!("j")]),
            t,
        )
        .await
        .unwrap_err();
    assert!(e.is_business() && !e.is_retryable(), "{e}");
    assert!(e.message().contains("is not JSON"), "{e}");
    drop(peer);
}
