//! The HTTP invoker against real in-process HTTP providers on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_cluster::provider::{HttpProvider, ProviderReply, ProviderRequest};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker, RestRoute};
use switchman_core::{ErrorKind, Instance, Invocation, Invoker, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, StaticRegistry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LOCAL: &str = "127.0.0.1:0";

async fn provider(
    reply: impl Fn(ProviderRequest) -> ProviderReply + Send + Sync + 'static,
) -> HttpProvider {
    let reply = Arc::new(reply);
    HttpProvider::serve(LOCAL.parse().unwrap(), move |req| {
        let reply = reply.clone();
        Box::pin(async move { reply(req) })
    })
    .await
    .unwrap()
}

fn instance(addr: SocketAddr) -> Instance {
    Instance::builder(addr.ip().to_string(), addr.port())
        .service(ServiceKey::new("com.foo.Greeter"))
        .build()
}

#[tokio::test]
async fn default_mapping_posts_json_arguments_and_headers() {
    let p = provider(|req| {
        ProviderReply::Ok(json!({
            "path": format!("{}/{}", req.service, req.method),
            "args": req.arguments,
            "tag": req.headers.get("dubbo.tag").map(|v| v.to_str().unwrap().to_string()),
        }))
    })
    .await;
    let inv = Invocation::new("sayHello")
        .with_args(vec![json!("world"), json!(3)])
        .with_attachment("dubbo.tag", "gray");
    let out = HttpInvoker::new()
        .invoke(&instance(p.addr()), &inv, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"path": "com.foo.Greeter/sayHello", "args": ["world", 3], "tag": "gray"})
    );
}

#[tokio::test]
async fn statuses_are_classified_where_they_happen() {
    let p = provider(|req| match req.method.as_str() {
        "unavailable" => ProviderReply::Status(503, "overloaded".into()),
        "gateway" => ProviderReply::Status(502, "bad gateway".into()),
        "broken" => ProviderReply::Status(500, "NullPointerException".into()),
        "missing" => ProviderReply::Status(404, "no such method".into()),
        _ => ProviderReply::Ok(Value::Null),
    })
    .await;
    let http = HttpInvoker::new();
    let target = instance(p.addr());
    let call = |m: &'static str| {
        let http = http.clone();
        let target = target.clone();
        async move {
            http.invoke(&target, &Invocation::new(m), Duration::from_secs(2))
                .await
        }
    };
    for m in ["unavailable", "gateway"] {
        let e = call(m).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "{m}: {e}");
        assert!(e.is_retryable());
    }
    for m in ["broken", "missing"] {
        let e = call(m).await.unwrap_err();
        assert!(e.is_business(), "{m}: {e}");
        assert!(!e.is_retryable());
    }
    assert!(
        call("broken")
            .await
            .unwrap_err()
            .message()
            .contains("NullPointerException")
    );
    assert_eq!(call("fine").await.unwrap(), Value::Null);
}

#[tokio::test]
async fn refused_connections_and_timeouts_are_retryable() {
    // A port that refuses: bound and never listening, held for the whole test (a listener
    // bound then closed would leave the port to anyone meanwhile).
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind(LOCAL.parse().unwrap()).unwrap();
    let closed = held.local_addr().unwrap();
    let http = HttpInvoker::new();
    let e = http
        .invoke(
            &instance(closed),
            &Invocation::new("m"),
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.is_retryable());

    let slow = HttpProvider::serve(LOCAL.parse().unwrap(), |_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ProviderReply::Ok(Value::Null)
        })
    })
    .await
    .unwrap();
    let e = http
        .invoke(
            &instance(slow.addr()),
            &Invocation::new("m"),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn rest_routes_fill_the_path_and_send_the_rest_as_body() {
    let p = provider(|req| {
        ProviderReply::Ok(
            json!({"path": format!("/{}/{}", req.service, req.method), "body": req.arguments}),
        )
    })
    .await;
    let http = HttpInvoker::new()
        .rest_route(
            "getUser",
            RestRoute::new(http::Method::GET, "/users/{0}").unwrap(),
        )
        .rest_route(
            "rename",
            RestRoute::new(http::Method::PUT, "/users/{0}").unwrap(),
        );
    let target = instance(p.addr());
    let out = http
        .invoke(
            &target,
            &Invocation::new("getUser").with_args(vec![json!(42)]),
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(out.unwrap(), json!({"path": "/users/42", "body": null}));
    let out = http
        .invoke(
            &target,
            &Invocation::new("rename").with_args(vec![json!("a"), json!({"name": "b"})]),
            Duration::from_secs(2),
        )
        .await;
    assert_eq!(
        out.unwrap(),
        json!({"path": "/users/a", "body": {"name": "b"}})
    );
}

#[tokio::test]
async fn failover_over_real_providers_hides_a_failing_one() {
    let good1 = provider(|_| ProviderReply::Ok(json!("good1"))).await;
    let good2 = provider(|_| ProviderReply::Ok(json!("good2"))).await;
    let bad = provider(|_| ProviderReply::Status(503, "down".into())).await;
    let registry = StaticRegistry::new(vec![
        instance(good1.addr()),
        instance(good2.addr()),
        instance(bad.addr()),
    ]);
    let dir = RegistryDirectory::subscribe(
        &registry,
        DirectoryConfig::new(ServiceKey::new("com.foo.Greeter")),
    )
    .await
    .unwrap();
    dir.wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 3)
        .await
        .unwrap();
    let cluster = ClusterInvoker::new(
        Arc::new(dir),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    for _ in 0..200 {
        let v = cluster.invoke(&Invocation::new("hello")).await.unwrap();
        assert!(v == json!("good1") || v == json!("good2"));
    }
    assert_eq!(
        bad.hits(),
        5,
        "the failing provider was picked and failed over until 5 consecutive failures ejected it"
    );
    assert!(good1.hits() > 50 && good2.hits() > 50);
}

/// A provider that answers every request with `503` and `connection: close` (a draining
/// server), written by hand because the test provider cannot set that header.
async fn draining_provider() -> (SocketAddr, Arc<AtomicU64>) {
    raw_provider(
        b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 8\r\n\r\ndraining",
    )
    .await
}

/// A provider that answers every request with the bytes of `response` and closes, counting
/// the requests it read whole.
async fn raw_provider(response: &'static [u8]) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind(LOCAL).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                // Read the whole request (headers, then content-length bytes) before answering.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let body_start = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < body_start + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                counter.fetch_add(1, Ordering::Relaxed);
                let _ = sock.write_all(response).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, hits)
}

#[tokio::test]
async fn a_503_with_connection_close_is_retried_elsewhere_but_never_ejected() {
    let good1 = provider(|_| ProviderReply::Ok(json!("good1"))).await;
    let good2 = provider(|_| ProviderReply::Ok(json!("good2"))).await;
    let (draining, draining_hits) = draining_provider().await;
    let e = HttpInvoker::new()
        .invoke(
            &instance(draining),
            &Invocation::new("m"),
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.is_retryable() && !e.counts_as_strike(), "{e:?}");
    let registry = StaticRegistry::new(vec![
        instance(good1.addr()),
        instance(good2.addr()),
        instance(draining),
    ]);
    let dir = RegistryDirectory::subscribe(
        &registry,
        DirectoryConfig::new(ServiceKey::new("com.foo.Greeter")),
    )
    .await
    .unwrap();
    dir.wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 3)
        .await
        .unwrap();
    let cluster = ClusterInvoker::new(
        Arc::new(dir),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    for _ in 0..150 {
        let v = cluster.invoke(&Invocation::new("hello")).await.unwrap();
        assert!(v == json!("good1") || v == json!("good2"));
    }
    let hits = draining_hits.load(Ordering::Relaxed);
    assert!(
        hits > 20,
        "still picked (and failed over), never ejected: {hits}"
    );
    let snap = cluster.directory().load();
    let i = snap.index_of(&draining.to_string()).unwrap();
    assert!(!snap.endpoints()[i].stats.outlier().is_ejected());
}

/// Server-side TCP connections to `port` in state ESTABLISHED, from `/proc/net/tcp` (Linux).
fn established_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3
                && cols[3] == "01"
                && cols[1]
                    .rsplit_once(':')
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                    == Some(port)
        })
        .count()
}

/// Graceful drain over HTTP: a provider the registry removed gets no new call, its in-flight
/// call finishes, and its pooled connection closes once idle for the grace period.
#[tokio::test]
async fn a_removed_provider_drains_and_its_connections_close_after_the_grace() {
    use switchman_discovery::{EmptyPolicy, Update};
    const GRACE: Duration = Duration::from_millis(500);
    let slow_or_echo = |req: ProviderRequest| {
        Box::pin(async move {
            if req.method == "slow" {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            ProviderReply::Ok(json!({ "method": req.method }))
        }) as switchman_core::BoxFuture<'static, ProviderReply>
    };
    let a = HttpProvider::serve(LOCAL.parse().unwrap(), slow_or_echo)
        .await
        .unwrap();
    let b = HttpProvider::serve(LOCAL.parse().unwrap(), slow_or_echo)
        .await
        .unwrap();
    let (ia, ib) = (instance(a.addr()), instance(b.addr()));
    let dir = Arc::new(RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::new("com.foo.Greeter")).empty_policy(EmptyPolicy::Publish),
        None,
    ));
    dir.apply(Update::reset(vec![ia.clone(), ib.clone()]));
    dir.wait_until(Duration::from_secs(5), |s| s.instances().len() == 2)
        .await
        .unwrap();
    let http = Arc::new(HttpInvoker::with_drain_grace(GRACE));
    let cluster = ClusterInvoker::new(dir.clone(), http.clone(), ClusterConfig::default());

    let in_flight = {
        let (http, ia) = (http.clone(), ia.clone());
        tokio::spawn(async move {
            http.invoke(&ia, &Invocation::new("slow"), Duration::from_secs(5))
                .await
        })
    };
    // The in-flight call's connection, once it is made.
    tokio::time::timeout(Duration::from_secs(5), async {
        while established_to(a.addr().port()) != 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the in-flight call's connection");
    dir.apply(Update::Remove(vec![ia.address().to_string()]));
    dir.wait_until(Duration::from_secs(5), |s| s.instances().len() == 1)
        .await
        .unwrap();
    let a_before = a.hits();
    for _ in 0..20 {
        cluster.invoke(&Invocation::new("hello")).await.unwrap();
    }
    assert_eq!(
        a.hits(),
        a_before,
        "no new call reaches the removed provider"
    );
    assert_eq!(b.hits(), 20);
    assert_eq!(in_flight.await.unwrap().unwrap(), json!({"method": "slow"}));
    let idle_since = tokio::time::Instant::now();
    // Idle now: closed within two grace periods (plus scheduling slack).
    while established_to(a.addr().port()) > 0 {
        assert!(
            idle_since.elapsed() < 2 * GRACE + Duration::from_secs(2),
            "the removed provider's connection is still open after {:?}",
            idle_since.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        idle_since.elapsed() >= GRACE / 2,
        "closed by the idle timeout, not at once: {:?}",
        idle_since.elapsed()
    );
}

/// Cluster invoker with failover (2 retries) over the given provider addresses.
async fn failover_over(addrs: &[SocketAddr], invoker: HttpInvoker) -> ClusterInvoker {
    let registry = StaticRegistry::new(addrs.iter().map(|a| instance(*a)).collect());
    let dir = RegistryDirectory::subscribe(
        &registry,
        DirectoryConfig::new(ServiceKey::new("com.foo.Greeter")),
    )
    .await
    .unwrap();
    dir.wait_until(Duration::from_secs(5), |s| {
        s.endpoints().len() == addrs.len()
    })
    .await
    .unwrap();
    ClusterInvoker::new(
        Arc::new(dir),
        Arc::new(invoker),
        ClusterConfig::default().retries(2),
    )
}

#[tokio::test]
async fn a_2xx_reply_that_is_not_json_reaches_the_provider_once() {
    let (a, hits_a) =
        raw_provider(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 5\r\n\r\nhello")
            .await;
    let (b, hits_b) =
        raw_provider(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 5\r\n\r\nhello")
            .await;
    let cluster = failover_over(&[a, b], HttpInvoker::new()).await;
    let e = cluster
        .invoke(&Invocation::new("sayHello"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(!e.is_retryable(), "the provider processed the call: {e}");
    assert!(e.message().contains("not JSON"), "{e}");
    assert!(
        e.message().contains(&a.to_string()) || e.message().contains(&b.to_string()),
        "names the provider: {e}"
    );
    assert_eq!(
        hits_a.load(Ordering::Relaxed) + hits_b.load(Ordering::Relaxed),
        1,
        "exactly one attempt"
    );
}

#[tokio::test]
async fn bodies_over_the_limit_fail_without_being_read_whole() {
    let p = provider(|_| ProviderReply::Ok(json!("x".repeat(4096)))).await;
    let small = HttpInvoker::new().max_body(1024);
    let e = small
        .invoke(
            &instance(p.addr()),
            &Invocation::new("m"),
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(!e.is_retryable());
    assert!(e.message().contains("1024"), "{e}");
    // Without a content-length (chunked) the limit holds while reading.
    let body = format!("\"{}\"", "a".repeat(2046));
    let response = format!(
        "HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let (chunked, _) = raw_provider(Box::leak(response.into_bytes().into_boxed_slice())).await;
    let e = small
        .invoke(
            &instance(chunked),
            &Invocation::new("m"),
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}
