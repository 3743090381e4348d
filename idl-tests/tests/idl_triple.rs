//! The client `switchman-build` generated from the Java peers' `greeter.proto` (this crate's
//! `build.rs`) against two Java Dubbo 3.3 providers of that protobuf service (Dubbo's own
//! compiler plugin's stub, over tri://) registered in the test ZooKeeper: calls go through the
//! cluster to both, a provider's exception is a clear non-retried error, a killed provider is
//! failed over, and a dubbo:// provider refuses an IDL call at once.

use std::time::{Duration, Instant};

use switchman::cluster::triple::{IDL_CONTENT_TYPE, TripleInvoker, Unary};
use switchman::core::{ErrorKind, Instance, Protocol};
use switchman::{CallContext, Strategy};
use switchman_idl_tests::greeter::{Empty, GreeterClient, HelloReply, HelloRequest};
use switchman_integration_tests::java_peer::{
    self, IDL_PROTO_SERVICE, IDL_SERVICE, JavaProvider, ProviderOptions,
};
use switchman_integration_tests::{ports, unique, zookeeper};

fn provider(group: &str, name: &str) -> JavaProvider {
    JavaProvider::start(
        &ProviderOptions::zookeeper(&zookeeper())
            .protocol("tri")
            .idl()
            .group(group)
            .name(name),
    )
}

/// A barrier on `p`'s output: `Ping` straight at it (not through the cluster), then wait until
/// its `CALL .. Ping` line is read. Its lines are printed before a reply leaves and read in
/// order, so every call it received before is counted once this returns.
async fn settle(p: &JavaProvider) {
    let pings = p.calls_of("Ping");
    let target = Instance::builder("127.0.0.1", p.port())
        .protocol(Protocol::Tri)
        .build();
    let reply = TripleInvoker::new()
        .unary(
            &target,
            Unary {
                service: IDL_PROTO_SERVICE,
                method: "Ping",
                content_type: IDL_CONTENT_TYPE,
                message: &[],
                attachments: &[],
            },
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|e| panic!("Ping {}: {e}", p.address()));
    let reply: HelloReply = switchman::prost::Message::decode(reply).unwrap();
    assert_eq!(reply.instance, p.name());
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.calls_of("Ping") == pings {
        assert!(
            Instant::now() < deadline,
            "{}: Ping answered, its CALL line never read",
            p.address()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn hello(name: &str) -> HelloRequest {
    HelloRequest {
        name: name.to_string(),
        times: 2,
        tags: vec!["a".into(), "b".into()],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_client_calls_java_idl_providers_through_the_cluster() {
    if java_peer::skipped("generated_client_calls_java_idl_providers_through_the_cluster") {
        return;
    }
    let g = unique("idl");
    let mut p1 = provider(&g, "p1");
    let p2 = provider(&g, "p2");
    assert_eq!(GreeterClient::INTERFACE, IDL_SERVICE);
    assert_eq!(GreeterClient::SERVICE, IDL_PROTO_SERVICE);
    let greeter = GreeterClient::connect(
        GreeterClient::builder()
            .registry(format!("zookeeper://{}", zookeeper()))
            .group(&g)
            .cluster(Strategy::Failover)
            .retries(2)
            .wait(Duration::from_secs(20)),
    )
    .await
    .unwrap();

    // Both providers answer, each reply decoded field by field.
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..40 {
        let name = format!("n{i}");
        let reply = greeter.say_hello(hello(&name)).await.unwrap();
        let one = format!("hello, {name} from {}", reply.instance);
        assert_eq!(reply.message, format!("{one}; {one}"));
        assert_eq!(reply.tags, ["a", "b"]);
        assert_eq!(reply.length, name.len() as i64);
        *seen.entry(reply.instance).or_default() += 1;
    }
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["p1", "p2"], "{seen:?}");
    // The default message (every field empty) and a call context's attachments.
    let reply = greeter
        .say_hello_with(
            HelloRequest::default(),
            &CallContext::new().timeout(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert!(reply.message.starts_with("hello,  from p"), "{reply:?}");
    assert!(reply.tags.is_empty());

    // A provider that throws: one attempt, a business error with the status and the message.
    let e = greeter.fail(hello("boom")).await.unwrap_err();
    assert!(e.is_business(), "{e}");
    assert!(!e.is_retryable(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("answered Fail with UNKNOWN (2): refused: boom"),
        "status and message: {text}"
    );
    settle(&p1).await;
    settle(&p2).await;
    assert_eq!(p1.calls_of("Fail") + p2.calls_of("Fail"), 1, "not retried");

    // An rpc the service does not have.
    let e = greeter
        .reference()
        .call_idl::<_, HelloReply>(IDL_PROTO_SERVICE, "Nope", &Empty {}, &CallContext::new())
        .await
        .unwrap_err();
    assert!(e.is_business() && !e.is_retryable(), "{e}");
    assert!(e.to_string().contains("Nope"), "{e}");

    // A killed provider (its node stays in ZooKeeper until its session expires): failed over.
    p1.kill9();
    let before = p2.calls_of("SayHello");
    for i in 0..20 {
        let reply = greeter
            .say_hello(hello(&format!("after{i}")))
            .await
            .unwrap_or_else(|e| panic!("call {i} after the kill: {e}"));
        assert_eq!(reply.instance, "p2");
    }
    settle(&p2).await;
    assert_eq!(p2.calls_of("SayHello") - before, 20);
    // The dead provider was still a candidate (its node outlives it): the calls that picked it
    // were failed over, not spared by the registry.
    let snapshot = greeter.reference().directory().load();
    assert!(
        snapshot
            .endpoints()
            .iter()
            .any(|e| e.instance.port() == p1.port()),
        "{} left the directory",
        p1.address()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dubbo_provider_refuses_an_idl_call_at_once() {
    // Nothing listens there: the call must fail before any connect.
    let port = ports::FAKE_PORTS.start + 417;
    let dir = std::env::temp_dir().join(format!("switchman-idl-dubbo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(&file, format!("- dubbo://127.0.0.1:{port}/{IDL_SERVICE}\n")).unwrap();
    let greeter = GreeterClient::connect(
        GreeterClient::builder()
            .registry(file.to_str().unwrap())
            .retries(3),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let e = greeter.say_hello(hello("x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
    assert!(!e.is_retryable(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("switchman.idl.Greeter/SayHello is a protobuf (IDL) call")
            && text.contains("only Triple (tri://)"),
        "{text}"
    );
    assert!(
        text.matches(&format!("127.0.0.1:{port}")).count() <= 1,
        "one attempt: {text}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "at once");
    std::fs::remove_dir_all(&dir).ok();
}

/// The wire, against a Rust Triple server: the path names the proto service and rpc, the
/// content type is `application/grpc+proto`, the message is the request's protobuf bytes as
/// is, attachments are headers; a reply that is not the reply type is a business error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_is_the_bare_message_at_the_proto_path() {
    use switchman::cluster::triple::{Code, Status, TripleRequest, TripleServer};
    use switchman::prost::Message;
    use switchman::prost::bytes::Bytes;

    let server = TripleServer::serve("127.0.0.1:0".parse().unwrap(), |req: TripleRequest| {
        Box::pin(async move {
            let ct = req
                .headers
                .get("content-type")
                .map(|v| v.as_bytes().to_vec());
            if ct.as_deref() != Some(IDL_CONTENT_TYPE.as_bytes()) {
                return Err(Status::new(
                    Code::InvalidArgument,
                    format!("content-type {ct:?}"),
                ));
            }
            match (req.service.as_str(), req.method.as_str()) {
                ("switchman.idl.Greeter", "SayHello") => {
                    let hello = HelloRequest::decode(req.message)
                        .map_err(|e| Status::new(Code::InvalidArgument, e.to_string()))?;
                    let who = req
                        .headers
                        .get("x-who")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let reply = HelloReply {
                        message: format!("hi {} ({})", hello.name, hello.times),
                        instance: who,
                        tags: hello.tags,
                        length: 0,
                    };
                    Ok(Bytes::from(reply.encode_to_vec()))
                }
                // Not a HelloReply: field 1 as a varint where a string is.
                ("switchman.idl.Greeter", "Fail") => Ok(Bytes::from_static(&[0x08, 0x01])),
                (s, m) => Err(Status::new(Code::Unimplemented, format!("{s}/{m}"))),
            }
        })
    })
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("switchman-idl-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(&file, format!("- tri://{}/{IDL_SERVICE}\n", server.addr())).unwrap();
    let greeter = GreeterClient::connect(GreeterClient::builder().registry(file.to_str().unwrap()))
        .await
        .unwrap();

    let reply = greeter
        .say_hello_with(
            HelloRequest {
                name: "wire".into(),
                times: 3,
                tags: vec!["t".into()],
            },
            &CallContext::new().attachment("x-who", "ctx"),
        )
        .await
        .unwrap();
    assert_eq!(reply.message, "hi wire (3)");
    assert_eq!(reply.instance, "ctx", "the attachment went as a header");
    assert_eq!(reply.tags, ["t"]);

    let e = greeter.fail(hello("x")).await.unwrap_err();
    assert!(e.is_business() && !e.is_retryable(), "{e}");
    assert!(
        e.to_string()
            .contains("the reply to switchman.idl.Greeter/Fail is not a valid"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Reads `stream` to its end: the replies, and the error that ended it if any.
async fn drain(
    stream: &mut switchman::Streaming<HelloReply>,
) -> (Vec<HelloReply>, Option<switchman::core::Error>) {
    let mut replies = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(r)) => replies.push(r),
            Ok(None) => return (replies, None),
            Err(e) => return (replies, Some(e)),
        }
    }
}

fn count(name: &str, times: i32, tags: &[&str]) -> HelloRequest {
    HelloRequest {
        name: name.to_string(),
        times,
        tags: tags.iter().map(|t| t.to_string()).collect(),
    }
}

/// `rpc Count(HelloRequest) returns (stream HelloReply)` of two Java Dubbo 3.3 providers,
/// through the generated client: the replies in order from one provider, streams spread over
/// both, a provider's exception after its replies ends the stream with that error, the
/// deadline ends a slow stream, a dropped stream leaves the connection usable, and a killed
/// provider is failed over when a stream opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_streams_from_java_idl_providers_through_the_cluster() {
    if java_peer::skipped("server_streams_from_java_idl_providers_through_the_cluster") {
        return;
    }
    let g = unique("idl-stream");
    let mut p1 = provider(&g, "p1");
    let p2 = provider(&g, "p2");
    let greeter = GreeterClient::connect(
        GreeterClient::builder()
            .registry(format!("zookeeper://{}", zookeeper()))
            .group(&g)
            .cluster(Strategy::Failover)
            .retries(2)
            .timeout(Duration::from_secs(10))
            .wait(Duration::from_secs(20)),
    )
    .await
    .unwrap();

    // Five replies, in order, from one provider; then the end, and the end again.
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..20 {
        let name = format!("s{i}");
        let mut stream = greeter.count(count(&name, 5, &["t"])).await.unwrap();
        let (replies, error) = drain(&mut stream).await;
        assert!(error.is_none(), "stream {i}: {error:?}");
        assert_eq!(replies.len(), 5, "stream {i}: {replies:?}");
        let instance = replies[0].instance.clone();
        for (k, r) in replies.iter().enumerate() {
            let k = k as i64 + 1;
            assert_eq!(r.message, format!("hello, {name} #{k} from {instance}"));
            assert_eq!((r.length, r.instance.as_str()), (k, instance.as_str()));
            assert_eq!(r.tags, ["t"]);
        }
        assert!(
            stream.message().await.unwrap().is_none(),
            "ended stays ended"
        );
        seen.insert(instance);
    }
    assert_eq!(seen.iter().collect::<Vec<_>>(), ["p1", "p2"], "balanced");

    // The provider's exception after three replies: they come first, then its error.
    let mut stream = greeter.count(count("boom", 3, &["fail"])).await.unwrap();
    let (replies, error) = drain(&mut stream).await;
    assert_eq!(replies.len(), 3, "{replies:?}");
    let e = error.expect("the stream ends with the provider's error");
    assert!(e.is_business(), "{e}");
    assert!(e.to_string().contains("refused: boom"), "{e}");
    assert!(
        stream.message().await.unwrap().is_none(),
        "after the error: the end"
    );

    // A reply every 200 ms, 20 of them, under a 1.5 s deadline: the deadline ends the stream.
    let mut stream = greeter
        .count_with(
            count("slow", 20, &["slow"]),
            &CallContext::new().timeout(Duration::from_millis(1500)),
        )
        .await
        .unwrap();
    let (replies, error) = drain(&mut stream).await;
    let e = error.expect("the deadline ends the stream");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(replies.len() < 20, "{} replies", replies.len());

    // A stream dropped after its first reply: the next calls on the connections work.
    let mut stream = greeter
        .count(count("dropped", 10, &["slow"]))
        .await
        .unwrap();
    assert_eq!(stream.message().await.unwrap().unwrap().length, 1);
    drop(stream);
    for i in 0..4 {
        let reply = greeter.say_hello(hello(&format!("d{i}"))).await.unwrap();
        assert!(reply.message.starts_with(&format!("hello, d{i} from p")));
    }

    // A killed provider (its node stays until its session expires): streams open on p2.
    p1.kill9();
    let before = p2.calls_of("Count");
    for i in 0..10 {
        let mut stream = greeter
            .count(count(&format!("k{i}"), 2, &[]))
            .await
            .unwrap_or_else(|e| panic!("stream {i} after the kill: {e}"));
        let (replies, error) = drain(&mut stream).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(replies.len(), 2);
        assert!(replies.iter().all(|r| r.instance == "p2"), "{replies:?}");
    }
    settle(&p2).await;
    assert_eq!(p2.calls_of("Count") - before, 10, "each stream opened once");
}
