//! Rust-to-Rust tests: the provider helper and the invoker over real loopback HTTP/2.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use switchman_core::{
    ErrorKind, Instance, Invocation, Invoker, MakeEndpoint, Protocol, ServiceKey,
};
use switchman_discovery::RegistryDirectory;

use super::*;

const SERVICE: &str = "org.apache.dubbo.samples.HelloWorld";
const T: Duration = Duration::from_secs(5);

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A provider: `sayHello` echoes "hello, {msg}", `echoHeader` answers the header named by the
/// message, `deadline` answers the received grpc-timeout in ms, `fail` answers
/// INVALID_ARGUMENT, `busy` UNAVAILABLE, `hang` never answers; anything else UNIMPLEMENTED.
async fn provider() -> TripleServer {
    TripleServer::serve(local(), |req: TripleRequest| {
        Box::pin(async move {
            match req.method.as_str() {
                "sayHello" => {
                    let mut out = b"hello, ".to_vec();
                    out.extend_from_slice(&req.message);
                    Ok(Bytes::from(out))
                }
                "json" => {
                    let v: serde_json::Value = serde_json::from_slice(&req.message).unwrap();
                    Ok(Bytes::from(serde_json::to_vec(&json!({"got": v})).unwrap()))
                }
                "echoHeader" => {
                    let name = String::from_utf8(req.message.to_vec()).unwrap();
                    Ok(req
                        .headers
                        .get(name.as_str())
                        .map(|v| Bytes::copy_from_slice(v.as_bytes()))
                        .unwrap_or_default())
                }
                "deadline" => Ok(Bytes::from(
                    req.timeout.map(|d| d.as_millis()).unwrap_or(0).to_string(),
                )),
                "fail" => Err(Status::new(
                    Code::InvalidArgument,
                    "name must not be empty ✗",
                )),
                "busy" => Err(Status::new(Code::Unavailable, "draining")),
                "hang" => std::future::pending().await,
                other => Err(Status::new(
                    Code::Unimplemented,
                    format!("no method {other}"),
                )),
            }
        })
    })
    .await
    .unwrap()
}

fn raw() -> TripleInvoker {
    TripleInvoker::new().payload(Payload::Raw)
}

fn hello(name: &str) -> Invocation {
    Invocation::new("sayHello").with_args(vec![json!(name)])
}

#[tokio::test]
async fn raw_call_round_trips_bytes() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    let reply = raw().invoke(&target, &hello("world"), T).await.unwrap();
    assert_eq!(reply, json!("hello, world"));
    let bin = Invocation::new("sayHello").with_args(vec![json!({"base64": "/w=="})]);
    let reply = raw().invoke(&target, &bin, T).await.unwrap();
    assert_eq!(reply, json!({"base64": "aGVsbG8sIP8="}));
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn codecs_are_chosen_per_method_then_service_then_default() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    let inv = TripleInvoker::new()
        .payload(Payload::Raw)
        .service_codec("other.Service", Arc::new(JsonCodec))
        .method_codec(SERVICE, "json", Arc::new(JsonCodec));
    let reply = inv
        .invoke(
            &target,
            &Invocation::new("json").with_args(vec![json!({"a": [1, 2]})]),
            T,
        )
        .await
        .unwrap();
    assert_eq!(reply, json!({"got": {"a": [1, 2]}}));
    // The content-type follows the codec: raw is plain application/grpc, JSON is +json.
    let ct = inv
        .invoke(
            &target,
            &Invocation::new("echoHeader").with_args(vec![json!("content-type")]),
            T,
        )
        .await
        .unwrap();
    assert_eq!(ct, json!("application/grpc"));
    let json_inv = TripleInvoker::new();
    let ct = json_inv
        .unary(
            &target,
            Unary {
                service: SERVICE,
                method: "echoHeader",
                content_type: JsonCodec.content_type(),
                message: b"content-type",
                attachments: &[],
            },
            T,
        )
        .await
        .unwrap();
    assert_eq!(&ct[..], b"application/grpc+json");
}

#[tokio::test]
async fn attachments_service_key_and_te_arrive_as_headers() {
    let server = provider().await;
    let target = Instance::builder("127.0.0.1", server.addr().port())
        .protocol(Protocol::Tri)
        .service(ServiceKey::with(SERVICE, "blue", "1.0.0"))
        .build();
    let inv = raw();
    let header = |name: &str| {
        Invocation::new("echoHeader")
            .with_args(vec![json!(name)])
            .with_attachment("Dubbo.Tag", "gray")
            .with_attachment("trace-bin", "\u{1}")
    };
    for (name, want) in [
        ("dubbo.tag", "gray"),
        ("trace-bin", "AQ"),
        ("te", "trailers"),
        ("tri-service-group", "blue"),
        ("tri-service-version", "1.0.0"),
    ] {
        let got = inv.invoke(&target, &header(name), T).await.unwrap();
        assert_eq!(got, json!(want), "header {name}");
    }
}

#[tokio::test]
async fn grpc_timeout_carries_the_remaining_deadline() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    let got = raw()
        .invoke(
            &target,
            &Invocation::new("deadline"),
            Duration::from_millis(2500),
        )
        .await
        .unwrap();
    let ms: u64 = got.as_str().unwrap().parse().unwrap();
    assert!(ms <= 2500 && ms > 0, "provider saw {ms} ms");
}

#[tokio::test]
async fn trailers_only_errors_keep_the_status_and_message() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    let inv = raw();

    let e = inv
        .invoke(&target, &Invocation::new("fail"), T)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Business);
    assert!(!e.is_retryable());
    assert!(
        e.message()
            .ends_with("with INVALID_ARGUMENT (3): name must not be empty ✗"),
        "{e}"
    );

    let e = inv
        .invoke(&target, &Invocation::new("nope"), T)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Business);
    assert!(
        e.message().contains("UNIMPLEMENTED (12): no method nope"),
        "{e}"
    );

    let e = inv
        .invoke(&target, &Invocation::new("busy"), T)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport);
    assert!(e.is_retryable());
}

#[tokio::test]
async fn bad_arguments_fail_before_anything_is_sent() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    let e = raw()
        .invoke(
            &target,
            &Invocation::new("sayHello").with_args(vec![json!(1)]),
            T,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadConfig);
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn many_concurrent_calls_share_one_connection() {
    let server = provider().await;
    let target = Arc::new(server.instance(SERVICE));
    let inv = raw();
    let calls = (0..200).map(|i| {
        let (inv, target) = (inv.clone(), target.clone());
        tokio::spawn(async move { inv.invoke(&target, &hello(&i.to_string()), T).await })
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap().unwrap(), json!(format!("hello, {i}")));
    }
    assert_eq!(server.hits(), 200);
    assert_eq!(server.connections(), 1);
    assert_eq!(inv.connected(), vec![target.address().to_string()]);
}

#[tokio::test]
async fn connection_refused_is_a_retryable_transport_error() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    drop(server);
    // The port is closed now (nothing else binds it in between on loopback in practice; the
    // assertion below would fail loudly if something did and answered).
    let e = raw().invoke(&target, &hello("x"), T).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn a_provider_that_never_answers_times_out_retryably() {
    let server = provider().await;
    let target = server.instance(SERVICE);
    let e = raw()
        .invoke(
            &target,
            &Invocation::new("hang"),
            Duration::from_millis(200),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(e.is_retryable());
    assert!(e.message().contains("did not answer hang within"), "{e}");
}

#[tokio::test]
async fn a_killed_connection_is_replaced_and_retain_drops_addresses() {
    let first = provider().await;
    let target = first.instance(SERVICE);
    let inv = raw();
    inv.invoke(&target, &hello("a"), T).await.unwrap();
    // A second provider on another port; the first one dies (connections reset).
    let second = provider().await;
    let other = second.instance(SERVICE);
    inv.invoke(&other, &hello("b"), T).await.unwrap();
    assert_eq!(inv.connected().len(), 2);
    first.stop();
    let e = inv.invoke(&target, &hello("c"), T).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    // The directory says the first address left: its entry goes, the other stays.
    inv.retain(|a| a == other.address());
    assert_eq!(inv.connected(), vec![other.address().to_string()]);
    assert_eq!(inv.pool.addresses(), vec![other.address().to_string()]);
    inv.invoke(&other, &hello("d"), T).await.unwrap();
    assert_eq!(second.connections(), 1);
}

/// Graceful drain: an address that left gets no new call (the snapshot no longer lists it), its
/// in-flight call finishes, and its connection is closed once the grace period has passed; an
/// address that leaves and comes back within the grace keeps its connection, also after the
/// moment its grace would have ended (a third address leaving later is the barrier for that).
#[tokio::test]
async fn an_address_that_left_drains_then_its_connection_closes_after_the_grace() {
    use crate::{ClusterConfig, ClusterInvoker};
    use switchman_discovery::{DirectoryConfig, EmptyPolicy, Update};
    // B's leave-and-return must fit in it: two directory turns on an otherwise idle runtime.
    const GRACE: Duration = Duration::from_millis(1000);
    // `slow` answers after 300 ms: the in-flight call that outlives the removal.
    let slow_provider = || {
        TripleServer::serve(local(), |req: TripleRequest| {
            Box::pin(async move {
                if req.method == "slow" {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Ok(req.message)
            })
        })
    };
    let a = slow_provider().await.unwrap();
    let b = slow_provider().await.unwrap();
    let c = slow_provider().await.unwrap();
    let (ia, ib, ic) = (
        a.instance(SERVICE),
        b.instance(SERVICE),
        c.instance(SERVICE),
    );
    // The directory makes each endpoint's client (its connection) and keeps it for the grace.
    let inv = raw();
    let dir = Arc::new(RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::new(SERVICE))
            .empty_policy(EmptyPolicy::Publish)
            .maker(inv.clone())
            .drain_grace(GRACE),
        None,
    ));
    dir.apply(Update::reset(vec![ia.clone(), ib.clone(), ic.clone()]));
    dir.wait_until(T, |s| s.instances().len() == 3)
        .await
        .unwrap();
    let cluster = ClusterInvoker::new(dir.clone(), Arc::new(inv.clone()), ClusterConfig::default());
    let client_of = |i: &Instance| {
        let snap = dir.load();
        let ep = &snap.endpoints()[snap.index_of(i.key()).unwrap()];
        (ep.instance.clone(), ep.service.clone().unwrap())
    };
    let (ea, ca) = client_of(&ia);
    let (eb, cb) = client_of(&ib);
    let (ec, cc) = client_of(&ic);
    ca.invoke(&ea, &hello("a"), T).await.unwrap();
    cb.invoke(&eb, &hello("b"), T).await.unwrap();
    cc.invoke(&ec, &hello("c"), T).await.unwrap();
    drop((cb, cc));
    assert_eq!(
        (a.connections(), b.connections(), c.connections()),
        (1, 1, 1)
    );

    // A call in flight on A when A leaves.
    let in_flight = tokio::spawn(async move {
        ca.invoke(&ea, &Invocation::new("slow").with_args(vec![json!("x")]), T)
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let left_at = tokio::time::Instant::now();
    dir.apply(Update::Remove(vec![ia.address().to_string()]));
    dir.wait_until(T, |s| s.instances().len() == 2)
        .await
        .unwrap();
    // No new call goes to A, at once.
    let served_by_a = a.hits();
    for k in 0..20 {
        cluster.invoke(&hello(&k.to_string())).await.unwrap();
    }
    assert_eq!(
        a.hits(),
        served_by_a,
        "no call reaches the address that left"
    );
    // The in-flight call finishes normally, and the connection stays meanwhile.
    assert_eq!(in_flight.await.unwrap().unwrap(), json!("x"));
    assert_eq!(a.open_connections(), 1);
    // After the grace the directory drops A's client, which closes its connection.
    let deadline = left_at + GRACE + T;
    while a.open_connections() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "closed after the grace"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        left_at.elapsed() >= GRACE,
        "not before the grace: {:?}",
        left_at.elapsed()
    );
    assert!(
        inv.pool.addresses().is_empty(),
        "the shared pool was never used"
    );

    // B leaves and comes back within the grace: same connection.
    let has_b = |s: &switchman_discovery::Snapshot| s.index_of(ib.key()).is_some();
    dir.apply(Update::Remove(vec![ib.address().to_string()]));
    dir.wait_until(T, |s| !has_b(s)).await.unwrap();
    dir.apply(Update::add(vec![ib.clone()]));
    dir.wait_until(T, has_b).await.unwrap();
    // Then C leaves: its grace ends after the one B's left would have, so once C's connection is
    // closed the directory has expired everything due up to B's moment (the barrier, no sleep).
    let c_left = tokio::time::Instant::now();
    dir.apply(Update::Remove(vec![ic.address().to_string()]));
    dir.wait_until(T, |s| s.instances().len() == 1)
        .await
        .unwrap();
    while c.open_connections() > 0 {
        assert!(c_left.elapsed() < GRACE + T, "C closed after its grace");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.invoke(&hello("again")).await.unwrap();
    assert_eq!(b.connections(), 1, "B kept its connection through the blip");
    assert_eq!(b.open_connections(), 1, "and it is still open");
}

#[cfg(feature = "prost")]
mod prost_messages {
    use super::*;
    use prost::Message as _;

    #[derive(Clone, PartialEq, prost::Message, serde::Serialize, serde::Deserialize)]
    struct HelloRequest {
        #[prost(string, tag = "1")]
        name: String,
    }

    #[derive(Clone, PartialEq, prost::Message, serde::Serialize, serde::Deserialize)]
    struct HelloReply {
        #[prost(string, tag = "1")]
        message: String,
        #[prost(string, tag = "2")]
        content_type: String,
    }

    async fn proto_provider() -> TripleServer {
        TripleServer::serve(local(), |req: TripleRequest| {
            Box::pin(async move {
                let hello = HelloRequest::decode(req.message)
                    .map_err(|e| Status::new(Code::InvalidArgument, e.to_string()))?;
                let ct = req.headers["content-type"].to_str().unwrap().to_string();
                let reply = HelloReply {
                    message: format!("hello, {}", hello.name),
                    content_type: ct,
                };
                Ok(Bytes::from(reply.encode_to_vec()))
            })
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn prost_codec_maps_json_arguments_to_protobuf_and_back() {
        let server = proto_provider().await;
        let target = server.instance(SERVICE);
        let inv = TripleInvoker::new().method_codec(
            SERVICE,
            "sayHello",
            Arc::new(ProstCodec::<HelloRequest, HelloReply>::new()),
        );
        let call = Invocation::new("sayHello").with_args(vec![json!({"name": "world"})]);
        let reply = inv.invoke(&target, &call, T).await.unwrap();
        assert_eq!(
            reply,
            json!({"message": "hello, world", "content_type": "application/grpc+proto"})
        );
        let typed: HelloReply = inv
            .call_proto(
                &target,
                "sayHello",
                &HelloRequest {
                    name: "typed".into(),
                },
                &[],
                T,
            )
            .await
            .unwrap();
        assert_eq!(typed.message, "hello, typed");
    }
}

/// Hand-made answers the helper server never sends: a hyper HTTP/2 server answering every
/// request with `respond()`.
mod malformed {
    use super::*;
    use http::{HeaderMap, HeaderValue, Response, StatusCode};
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Empty, StreamBody};
    use hyper::body::Frame;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use std::convert::Infallible;

    type Body = BoxBody<Bytes, Infallible>;

    async fn raw_server(respond: fn() -> Response<Body>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind(local()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |_req| async move {
                        Ok::<_, Infallible>(respond())
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        addr
    }

    fn grpc(frames: Vec<Frame<Bytes>>) -> Response<Body> {
        let stream = futures::stream::iter(frames.into_iter().map(Ok));
        let mut r = Response::new(StreamBody::new(stream).boxed());
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/grpc"));
        r
    }

    fn trailers(status: &'static str) -> Frame<Bytes> {
        let mut t = HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_static(status));
        Frame::trailers(t)
    }

    async fn call(respond: fn() -> Response<Body>) -> switchman_core::Result<serde_json::Value> {
        let addr = raw_server(respond).await;
        let target = Instance::builder("127.0.0.1", addr.port())
            .protocol(Protocol::Tri)
            .service(ServiceKey::new(SERVICE))
            .build();
        raw().invoke(&target, &hello("x"), T).await
    }

    #[tokio::test]
    async fn messages_split_across_data_frames_are_reassembled() {
        let v = call(|| {
            let framed = framing::encode_message(b"split reply");
            grpc(vec![
                Frame::data(framed.slice(..3)),
                Frame::data(framed.slice(3..9)),
                Frame::data(framed.slice(9..)),
                trailers("0"),
            ])
        })
        .await
        .unwrap();
        assert_eq!(v, json!("split reply"));
    }

    #[tokio::test]
    async fn trailers_only_status_in_headers_is_read() {
        let e = call(|| {
            let mut r = grpc(vec![]);
            r.headers_mut()
                .insert("grpc-status", HeaderValue::from_static("5"));
            r.headers_mut()
                .insert("grpc-message", HeaderValue::from_static("no%20such%20user"));
            r
        })
        .await
        .unwrap_err();
        assert!(e.is_business());
        assert!(e.message().ends_with("NOT_FOUND (5): no such user"), "{e}");
    }

    #[tokio::test]
    async fn http_errors_without_grpc_status_map_like_grpc() {
        let e = call(|| {
            let mut r = Response::new(Empty::new().boxed());
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            r
        })
        .await
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport);
        assert!(e.is_retryable());
        assert!(
            e.message().contains("UNAVAILABLE (14): HTTP status 503"),
            "{e}"
        );

        let e = call(|| {
            let mut r = Response::new(Empty::new().boxed());
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        })
        .await
        .unwrap_err();
        assert!(e.is_business());
        assert!(e.message().contains("UNIMPLEMENTED (12)"), "{e}");
    }

    #[tokio::test]
    async fn compressed_replies_are_rejected_without_retry() {
        let e = call(|| {
            grpc(vec![
                Frame::data(Bytes::from_static(b"\x01\x00\x00\x00\x01z")),
                trailers("0"),
            ])
        })
        .await
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport);
        assert!(!e.is_retryable());
        assert!(e.message().contains("compressed message"), "{e}");
    }

    #[tokio::test]
    async fn missing_status_truncated_and_extra_messages_are_invalid() {
        for respond in [
            (|| grpc(vec![Frame::data(framing::encode_message(b"no status"))]))
                as fn() -> Response<Body>,
            || {
                grpc(vec![
                    Frame::data(Bytes::from_static(b"\x00\x00\x00\x00\x09half")),
                    trailers("0"),
                ])
            },
            || {
                grpc(vec![
                    Frame::data(framing::encode_message(b"one")),
                    Frame::data(framing::encode_message(b"two")),
                    trailers("0"),
                ])
            },
            || grpc(vec![trailers("0")]),
        ] {
            let e = call(respond).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
            assert!(!e.is_retryable(), "{e}");
            assert!(e.message().contains("invalid Triple response"), "{e}");
        }
    }

    #[tokio::test]
    async fn an_error_status_after_a_partial_message_wins() {
        let e = call(|| {
            grpc(vec![
                Frame::data(Bytes::from_static(b"\x00\x00\x00\x00\x09half")),
                trailers("13"),
            ])
        })
        .await
        .unwrap_err();
        assert!(e.is_business(), "{e}");
        assert!(e.message().contains("INTERNAL (13)"), "{e}");
    }

    /// A server-streaming IDL call's body: keeps the stream the transport opens.
    struct Streamed(std::sync::Mutex<Option<Box<dyn switchman_core::MessageStream>>>);

    impl switchman_core::TypedBody for Streamed {
        fn write_args(&self, _: &mut Vec<u8>) -> switchman_core::Result<()> {
            unreachable!("Triple sends an IDL call's message")
        }
        fn each_arg(&self) -> switchman_core::Result<Vec<Vec<u8>>> {
            unreachable!("Triple sends an IDL call's message")
        }
        fn read_result(&self, _: &[u8]) -> switchman_core::Result<(usize, serde_json::Value)> {
            panic!("a streaming call has no single reply")
        }
        fn protobuf(&self) -> Option<switchman_core::Protobuf<'_>> {
            Some(switchman_core::Protobuf {
                service: "p.Greeter",
                message: b"req",
            })
        }
        fn server_stream(&self) -> Option<&dyn switchman_core::StreamSink> {
            Some(self)
        }
    }

    impl switchman_core::StreamSink for Streamed {
        fn opened(&self, stream: Box<dyn switchman_core::MessageStream>) -> serde_json::Value {
            *self.0.lock().unwrap() = Some(stream);
            json!("opened")
        }
    }

    /// Opens a stream on a server answering `respond()` within `timeout`, and reads it to
    /// its end: the messages, then the error that ended it, if any.
    async fn stream(
        respond: fn() -> Response<Body>,
        timeout: Duration,
    ) -> switchman_core::Result<(Vec<Bytes>, Option<switchman_core::Error>)> {
        let addr = raw_server(respond).await;
        let target = Instance::builder("127.0.0.1", addr.port())
            .protocol(Protocol::Tri)
            .build();
        let body = Arc::new(Streamed(std::sync::Mutex::new(None)));
        let inv = Invocation::new("Count").with_typed(body.clone());
        assert_eq!(raw().invoke(&target, &inv, timeout).await?, json!("opened"));
        let mut replies = body
            .0
            .lock()
            .unwrap()
            .take()
            .expect("the stream handed over");
        let mut messages = Vec::new();
        loop {
            match std::future::poll_fn(|cx| replies.poll_message(cx)).await {
                Some(Ok(m)) => messages.push(m),
                Some(Err(e)) => {
                    let after = std::future::poll_fn(|cx| replies.poll_message(cx)).await;
                    assert!(after.is_none(), "an error ends the stream");
                    return Ok((messages, Some(e)));
                }
                None => return Ok((messages, None)),
            }
        }
    }

    fn texts(t: &[&'static str]) -> Vec<Bytes> {
        t.iter().map(|t| Bytes::from_static(t.as_bytes())).collect()
    }

    #[tokio::test]
    async fn a_server_stream_yields_its_messages_in_order_across_frames() {
        let (messages, error) = stream(
            || {
                let mut all = framing::encode_message(b"one").to_vec();
                all.extend_from_slice(&framing::encode_message(b""));
                all.extend_from_slice(&framing::encode_message(b"three"));
                let all = Bytes::from(all);
                grpc(vec![
                    Frame::data(all.slice(..7)),
                    Frame::data(all.slice(7..)),
                    Frame::data(framing::encode_message(b"four")),
                    trailers("0"),
                ])
            },
            T,
        )
        .await
        .unwrap();
        assert!(error.is_none(), "{error:?}");
        assert_eq!(messages, texts(&["one", "", "three", "four"]));
    }

    #[tokio::test]
    async fn a_trailers_only_answer_is_an_empty_stream_or_the_calls_error() {
        let (messages, error) = stream(
            || {
                let mut r = grpc(vec![]);
                r.headers_mut()
                    .insert("grpc-status", HeaderValue::from_static("0"));
                r
            },
            T,
        )
        .await
        .unwrap();
        assert!(
            messages.is_empty() && error.is_none(),
            "{messages:?} {error:?}"
        );

        // A refusal in the head fails the attempt itself (the cluster may fail it over).
        let e = stream(
            || {
                let mut r = grpc(vec![]);
                r.headers_mut()
                    .insert("grpc-status", HeaderValue::from_static("14"));
                r
            },
            T,
        )
        .await
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
        assert!(e.is_retryable(), "{e}");
    }

    #[tokio::test]
    async fn a_server_streams_error_status_or_broken_framing_ends_it_after_its_messages() {
        let (messages, error) = stream(
            || {
                grpc(vec![
                    Frame::data(framing::encode_message(b"a")),
                    Frame::data(framing::encode_message(b"b")),
                    trailers("13"),
                ])
            },
            T,
        )
        .await
        .unwrap();
        assert_eq!(messages, texts(&["a", "b"]));
        let e = error.unwrap();
        assert!(
            e.is_business() && e.message().contains("INTERNAL (13)"),
            "{e}"
        );

        for respond in [
            (|| grpc(vec![Frame::data(framing::encode_message(b"a"))])) as fn() -> Response<Body>,
            || {
                grpc(vec![
                    Frame::data(framing::encode_message(b"a")),
                    Frame::data(Bytes::from_static(b"\x00\x00\x00\x00\x09half")),
                    trailers("0"),
                ])
            },
            || {
                grpc(vec![
                    Frame::data(framing::encode_message(b"a")),
                    Frame::data(Bytes::from_static(b"\x07\x00\x00\x00\x01z")),
                ])
            },
            || {
                grpc(vec![
                    Frame::data(framing::encode_message(b"a")),
                    Frame::trailers(HeaderMap::new()),
                ])
            },
        ] {
            let (messages, error) = stream(respond, T).await.unwrap();
            assert_eq!(messages, texts(&["a"]));
            let e = error.expect("an invalid stream ends with an error");
            assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
            assert!(!e.is_retryable(), "{e}");
            assert!(e.message().contains("invalid Triple response"), "{e}");
        }
    }

    #[tokio::test]
    async fn the_calls_deadline_ends_a_stream_that_does_not() {
        let (messages, error) = stream(
            || {
                let first = futures::stream::iter([Ok::<_, Infallible>(Frame::data(
                    framing::encode_message(b"first"),
                ))]);
                let body =
                    StreamBody::new(futures::StreamExt::chain(first, futures::stream::pending()));
                let mut r = Response::new(BodyExt::boxed(body));
                r.headers_mut()
                    .insert("content-type", HeaderValue::from_static("application/grpc"));
                r
            },
            Duration::from_millis(300),
        )
        .await
        .unwrap();
        assert_eq!(messages, texts(&["first"]));
        let e = error.expect("the deadline ends the stream");
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        assert!(
            e.message()
                .contains("did not end its stream of Count within 300ms"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn non_grpc_content_types_are_refused() {
        let e = call(|| {
            let mut r = Response::new(Empty::new().boxed());
            r.headers_mut()
                .insert("content-type", HeaderValue::from_static("text/html"));
            r
        })
        .await
        .unwrap_err();
        assert!(e.is_business());
        assert!(e.message().contains("is not gRPC"), "{e}");
    }
}

mod tls {
    use super::*;
    use crate::protocol::triple::rustls;

    fn certified() -> rcgen::CertifiedKey<rcgen::KeyPair> {
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
    }

    async fn tls_provider(ck: &rcgen::CertifiedKey<rcgen::KeyPair>) -> TripleServer {
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![ck.cert.der().clone()], key)
            .unwrap();
        TripleServer::serve_tls(local(), Arc::new(config), |req: TripleRequest| {
            Box::pin(
                async move { Ok(Bytes::from([b"secure, ".as_slice(), &req.message].concat())) },
            )
        })
        .await
        .unwrap()
    }

    fn client(trusting: &rcgen::CertifiedKey<rcgen::KeyPair>) -> TripleInvoker {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(trusting.cert.der().clone()).unwrap();
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TripleInvoker::new()
            .payload(Payload::Raw)
            .tls(Arc::new(config))
    }

    #[tokio::test]
    async fn calls_go_over_tls_with_alpn_h2() {
        let ck = certified();
        let server = tls_provider(&ck).await;
        let target = server.instance("demo.Secure");
        let invoker = client(&ck);
        for i in 0..5 {
            let inv = Invocation::new("hello").with_args(vec![json!(format!("world-{i}"))]);
            let out = invoker
                .invoke(&target, &inv, Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(out, json!(format!("secure, world-{i}")));
        }
        assert_eq!(server.connections(), 1, "one TLS connection, multiplexed");
    }

    #[tokio::test]
    async fn an_untrusted_certificate_is_bad_config_and_a_cleartext_client_fails_as_transport() {
        let ck = certified();
        let server = tls_provider(&ck).await;
        let target = server.instance("demo.Secure");
        let inv = Invocation::new("hello").with_args(vec![json!("x")]);
        let stranger = certified();
        let e = client(&stranger)
            .invoke(&target, &inv, Duration::from_secs(5))
            .await
            .unwrap_err();
        // The same on every try: a configuration error, not retried.
        assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
        assert!(!e.is_retryable(), "{e}");
        assert!(e.to_string().contains("TLS handshake"), "{e}");
        let e = TripleInvoker::new()
            .payload(Payload::Raw)
            .invoke(&target, &inv, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::Transport,
            "cleartext h2c against a TLS port: {e}"
        );
        assert_eq!(server.hits(), 0);
    }
}

/// Clients made by the directory (the Triple invoker as its maker): two groups on one port
/// share one connection; an endpoint that left keeps it for the grace and not after; the
/// connection closes when its last endpoint's client is dropped.
#[tokio::test]
async fn endpoint_clients_own_their_connection_and_close_it_after_the_grace() {
    use crate::{ClusterConfig, ClusterInvoker};
    use switchman_discovery::{DirectoryConfig, EmptyPolicy, Update};
    const GRACE: Duration = Duration::from_millis(400);
    let a = provider().await;
    let b = provider().await;
    let group = |s: &TripleServer, g: &str| {
        let i = s.instance(SERVICE);
        Instance::builder(i.host(), i.port())
            .protocol(Protocol::Tri)
            .service(ServiceKey::with(SERVICE, g, ""))
            .build()
    };
    let key = ServiceKey::with(SERVICE, "g1,g2", "");
    let maker = raw();
    let dir = Arc::new(RegistryDirectory::spawn(
        DirectoryConfig::new(key)
            .maker(maker.clone())
            .drain_grace(GRACE)
            .empty_policy(EmptyPolicy::Publish),
        None,
    ));
    dir.apply(Update::reset(vec![
        group(&a, "g1"),
        group(&a, "g2"),
        group(&b, "g1"),
    ]));
    dir.wait_until(T, |s| s.endpoints().len() == 3)
        .await
        .unwrap();
    // Every endpoint called through its own client (the shared transport is never used).
    let snap = dir.load();
    for ep in snap.endpoints() {
        let client = ep.service.as_ref().expect("made by the maker");
        client.invoke(&ep.instance, &hello("x"), T).await.unwrap();
    }
    assert_eq!(
        (a.connections(), b.connections()),
        (1, 1),
        "the two groups at A share one connection"
    );
    let cluster = ClusterInvoker::new(dir.clone(), Arc::new(Unreachable), ClusterConfig::default());
    drop(snap);

    // A leaves (both its groups): no new call reaches it, its connection stays for the grace.
    let left = tokio::time::Instant::now();
    dir.apply(Update::Remove(vec![
        a.instance(SERVICE).address().to_string(),
    ]));
    dir.wait_until(T, |s| s.endpoints().len() == 1)
        .await
        .unwrap();
    let served_by_a = a.hits();
    for k in 0..10 {
        cluster.invoke(&hello(&k.to_string())).await.unwrap();
    }
    assert_eq!(a.hits(), served_by_a);
    // Not closed before the grace: the elapsed time is checked once it closes (no sleep-and-look).
    while a.open_connections() > 0 {
        assert!(left.elapsed() < GRACE + T, "closed after the grace");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(left.elapsed() >= GRACE, "{:?}", left.elapsed());
    assert_eq!(b.open_connections(), 1, "B's stays");
    // The endpoints' connections are theirs, not the invoker's shared pool's.
    assert!(maker.pool.addresses().is_empty());
}

/// A shared transport that must not be reached.
#[derive(Debug)]
struct Unreachable;

impl Invoker for Unreachable {
    fn invoke<'a>(
        &'a self,
        _target: &'a Instance,
        _invocation: &'a Invocation,
        _timeout: Duration,
    ) -> switchman_core::BoxFuture<'a, switchman_core::Result<serde_json::Value>> {
        Box::pin(async { panic!("the shared transport was used") })
    }
}

/// A provider answering every call with an empty message; it records each request's
/// content type.
async fn records_content_types() -> (TripleServer, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let server = TripleServer::serve(local(), move |req: TripleRequest| {
        let ct = req
            .headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        record.lock().unwrap().push(ct);
        Box::pin(async { Ok(Bytes::new()) })
    })
    .await
    .unwrap();
    (server, seen)
}

/// A Triple endpoint decides whether its provider takes the Java wrapper format from what it
/// read when it was made (`prefer.serialization` naming hessian2: the wrapper's
/// `application/grpc+proto`), not per call; an override naming protobuf only is read once,
/// and the calls then take the default JSON codec.
#[tokio::test]
async fn an_endpoint_chooses_the_wrapper_from_what_it_read_when_made() {
    use crate::protocol::endpoint_params::reads;
    let (server, seen) = records_content_types().await;
    let at = |params: &[(&str, &str)]| {
        let mut b = Instance::builder("127.0.0.1", server.addr().port())
            .protocol(Protocol::Tri)
            .service(ServiceKey::new(SERVICE));
        for (k, v) in params {
            b = b.param(k, v);
        }
        Arc::new(b.build())
    };
    let call = Invocation::new("greet")
        .with_args(vec![json!("x")])
        .with_types(["java.lang.String"]);
    let java = at(&[("prefer.serialization", "hessian2,fastjson2")]);
    let invoker = TripleInvoker::new();
    let before = reads();
    let endpoint = invoker.make(&java);
    for _ in 0..3 {
        let _ = endpoint.invoke(&java, &call, T).await;
    }
    assert_eq!(reads() - before, 1, "parsed when made, not per call");
    let proto = at(&[("serialization", "protobuf"), ("release", "3.3.0")]);
    for _ in 0..2 {
        let _ = endpoint.invoke(&proto, &call, T).await;
    }
    assert_eq!(reads() - before, 2, "the change parsed once");
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "application/grpc+proto",
            "application/grpc+proto",
            "application/grpc+proto",
            "application/grpc+json",
            "application/grpc+json",
        ]
    );
}

/// A Triple endpoint reads `ssl-enabled` when it is made: without TLS settings every call
/// with that instance fails at once naming it; an override dropping it is read, and calls
/// go through in cleartext.
#[tokio::test]
async fn an_endpoint_reads_ssl_enabled_once_and_again_when_it_changes() {
    use crate::protocol::endpoint_params::reads;
    let server = provider().await;
    let at = |ssl: &str| {
        let i = server.instance(SERVICE);
        Arc::new(i.with_param("ssl-enabled", ssl).unwrap())
    };
    let tls = at("true");
    let before = reads();
    let endpoint = raw().make(&tls);
    for _ in 0..3 {
        let e = endpoint.invoke(&tls, &hello("x"), T).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
        assert!(
            e.message().starts_with(&format!(
                "tri://{} registered ssl-enabled=true",
                server.addr()
            )),
            "{e}"
        );
    }
    assert_eq!(reads() - before, 1, "parsed when made, not per call");
    assert_eq!(server.hits(), 0, "nothing sent");
    let plain = at("false");
    let reply = endpoint.invoke(&plain, &hello("x"), T).await.unwrap();
    assert_eq!(reply, json!("hello, x"));
    assert_eq!(reads() - before, 2, "the change parsed once");
}
