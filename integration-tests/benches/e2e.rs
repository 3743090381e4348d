//! End-to-end throughput on 127.0.0.1: calls through `ClusterInvoker` to 3 local providers
//! against raw clients to one of them, in the same run, for HTTP and for Triple.
//!
//! ```text
//! cargo bench -p switchman-integration-tests --bench e2e -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each iteration is a batch of 256 calls with 16 in flight on a 2-worker tokio runtime;
//! criterion reports time per batch, so calls per second = 256 / time. Groups:
//! `e2e_http/{cluster,raw_reqwest,raw_reqwest_same_work}` and
//! `e2e_triple/{cluster,cluster_shared_transport,raw_triple}`. With `E2E_CLOCK=cpu` criterion
//! measures the process's CPU time per batch (clients and providers) instead of wall time:
//! steadier when other work loads the machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::triple::{Payload, TripleInvoker, TripleRequest, TripleServer};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker, ProtocolInvoker};
use switchman_core::{Instance, Invocation, Invoker, MakeEndpoint, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};

const BATCH: usize = 256;
const IN_FLIGHT: usize = 16;

async fn batch<F, Fut>(call: F)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let mut tasks = Vec::with_capacity(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..BATCH / IN_FLIGHT {
                assert!(call().await, "a call failed");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// The CPU time every thread of this process has run, from `/proc/self/task/*/schedstat`
/// (nanoseconds; Linux only), for `E2E_CLOCK=cpu`.
fn process_cpu() -> Duration {
    let mut ns: u64 = 0;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(ns)
}

/// With `E2E_CLOCK=cpu`, criterion measures the CPU time the process (clients and providers)
/// spent instead of wall time: steadier than throughput on a machine others are loading.
fn cpu_clock() -> bool {
    std::env::var("E2E_CLOCK").is_ok_and(|c| c == "cpu")
}

fn timed<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, call: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let cpu = cpu_clock();
    let (start, start_cpu) = (
        Instant::now(),
        if cpu { process_cpu() } else { Duration::ZERO },
    );
    for _ in 0..iters {
        rt.block_on(batch(call.clone()));
    }
    if cpu {
        process_cpu().saturating_sub(start_cpu)
    } else {
        start.elapsed()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A directory whose endpoints get their own clients from `maker`, as `switchman::Reference`
/// sets it up.
async fn directory(
    instances: Vec<Instance>,
    maker: impl MakeEndpoint + 'static,
) -> Arc<RegistryDirectory> {
    let n = instances.len();
    let dir = RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::new("bench.Echo")).maker(maker),
        None,
    );
    dir.apply(Update::reset(instances));
    dir.wait_until(Duration::from_secs(10), |s| s.endpoints().len() == n)
        .await
        .unwrap();
    Arc::new(dir)
}

fn bench_http(c: &mut Criterion) {
    let rt = runtime();
    let (providers, cluster) = rt.block_on(async {
        let mut providers = Vec::new();
        for _ in 0..3 {
            let p = HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |req| {
                Box::pin(async move { ProviderReply::Ok(json!({"echo": req.arguments})) })
            })
            .await
            .unwrap();
            providers.push(p);
        }
        let instances = providers
            .iter()
            .map(|p| {
                Instance::builder("127.0.0.1", p.addr().port())
                    .service(ServiceKey::new("bench.Echo"))
                    .build()
            })
            .collect();
        let http = HttpInvoker::new();
        let dir = directory(instances, http.clone()).await;
        let cluster = ClusterInvoker::new(dir, Arc::new(http), ClusterConfig::default());
        (providers, cluster)
    });
    let url = format!("http://{}/bench.Echo/echo", providers[0].addr());
    // The workspace's reqwest has `rustls-no-provider`: a bare client needs a process-wide
    // provider (Switchman's own clients configure ring themselves).
    let _ = switchman_cluster::triple::rustls::crypto::ring::default_provider().install_default();
    let raw = reqwest::Client::builder()
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("e2e_http");
    group.throughput(criterion::Throughput::Elements(BATCH as u64));
    group.bench_function("cluster", |b| {
        b.iter_custom(|iters| {
            let cluster = cluster.clone();
            timed(&rt, iters, move || {
                let cluster = cluster.clone();
                async move {
                    cluster
                        .invoke(&Invocation::new("echo").with_args(vec![json!("x")]))
                        .await
                        .is_ok()
                }
            })
        })
    });
    group.bench_function("raw_reqwest", |b| {
        b.iter_custom(|iters| {
            let (raw, url) = (raw.clone(), url.clone());
            timed(&rt, iters, move || {
                let (raw, url) = (raw.clone(), url.clone());
                async move {
                    match raw
                        .post(&url)
                        .json(&vec![json!("x")])
                        .timeout(Duration::from_secs(1))
                        .send()
                        .await
                    {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    }
                }
            })
        })
    });
    // The same work as the cluster without it: the same 3 providers in turn, the reply decoded
    // as JSON (the cluster hands back a decoded `Value`), one request timeout. The ratio of
    // `cluster` to this is what the cluster layer costs; `raw_reqwest` above (one provider,
    // reply bytes only) is kept for comparison with earlier runs.
    let urls: Arc<[String]> = providers
        .iter()
        .map(|p| format!("http://{}/bench.Echo/echo", p.addr()))
        .collect();
    let next = Arc::new(AtomicUsize::new(0));
    group.bench_function("raw_reqwest_same_work", |b| {
        b.iter_custom(|iters| {
            let (raw, urls, next) = (raw.clone(), urls.clone(), next.clone());
            timed(&rt, iters, move || {
                let (raw, urls, next) = (raw.clone(), urls.clone(), next.clone());
                async move {
                    let url = &urls[next.fetch_add(1, Ordering::Relaxed) % urls.len()];
                    match raw
                        .post(url)
                        .json(&vec![json!("x")])
                        .timeout(Duration::from_secs(1))
                        .send()
                        .await
                    {
                        Ok(r) => {
                            r.status().is_success() && r.json::<serde_json::Value>().await.is_ok()
                        }
                        Err(_) => false,
                    }
                }
            })
        })
    });
    group.finish();
}

fn bench_triple(c: &mut Criterion) {
    let rt = runtime();
    let (servers, cluster, shared, target) = rt.block_on(async {
        let mut servers = Vec::new();
        for _ in 0..3 {
            let s = TripleServer::serve("127.0.0.1:0".parse().unwrap(), |req: TripleRequest| {
                Box::pin(
                    async move { Ok(Bytes::from([b"hello, ".as_slice(), &req.message].concat())) },
                )
            })
            .await
            .unwrap();
            servers.push(s);
        }
        let instances: Vec<Instance> = servers.iter().map(|s| s.instance("bench.Echo")).collect();
        let target = instances[0].clone();
        let invoker = ProtocolInvoker::new().triple(TripleInvoker::new().payload(Payload::Raw));
        let dir = directory(instances.clone(), invoker.clone()).await;
        let cluster = ClusterInvoker::new(dir, Arc::new(invoker), ClusterConfig::default());
        // The same fleet through one shared transport (no per-endpoint clients): its pool by
        // address, for comparison.
        let plain =
            RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("bench.Echo")), None);
        plain.apply(Update::reset(instances));
        plain
            .wait_until(Duration::from_secs(10), |s| s.endpoints().len() == 3)
            .await
            .unwrap();
        let transport = ProtocolInvoker::new().triple(TripleInvoker::new().payload(Payload::Raw));
        let shared = ClusterInvoker::new(
            Arc::new(plain),
            Arc::new(transport),
            ClusterConfig::default(),
        );
        (servers, cluster, shared, target)
    });
    let raw = Arc::new(TripleInvoker::new().payload(Payload::Raw));
    let target = Arc::new(target);
    let mut group = c.benchmark_group("e2e_triple");
    group.throughput(criterion::Throughput::Elements(BATCH as u64));
    group.bench_function("cluster", |b| {
        b.iter_custom(|iters| {
            let cluster = cluster.clone();
            timed(&rt, iters, move || {
                let cluster = cluster.clone();
                async move {
                    cluster
                        .invoke(&Invocation::new("sayHello").with_args(vec![json!("x")]))
                        .await
                        .is_ok()
                }
            })
        })
    });
    group.bench_function("cluster_shared_transport", |b| {
        b.iter_custom(|iters| {
            let shared = shared.clone();
            timed(&rt, iters, move || {
                let shared = shared.clone();
                async move {
                    shared
                        .invoke(&Invocation::new("sayHello").with_args(vec![json!("x")]))
                        .await
                        .is_ok()
                }
            })
        })
    });
    group.bench_function("raw_triple", |b| {
        b.iter_custom(|iters| {
            let (raw, target) = (raw.clone(), target.clone());
            timed(&rt, iters, move || {
                let (raw, target) = (raw.clone(), target.clone());
                async move {
                    let inv = Invocation::new("sayHello").with_args(vec![json!("x")]);
                    raw.invoke(&target, &inv, Duration::from_secs(1))
                        .await
                        .is_ok()
                }
            })
        })
    });
    group.finish();
    drop(servers);
}

criterion_group!(benches, bench_http, bench_triple);
criterion_main!(benches);
