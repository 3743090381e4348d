//! The HTTP invoker over HTTPS (rustls) against an in-process TLS provider on 127.0.0.1 with a
//! self-signed certificate: calls succeed when the client trusts it, fail as a transport
//! error when it does not, and a cleartext invoker cannot talk to it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use serde_json::{Value, json};
use switchman_cluster::HttpInvoker;
use switchman_cluster::triple::rustls;
use switchman_core::{ErrorKind, Instance, Invocation, Invoker, ServiceKey};
use tokio::net::TcpListener;

fn certified() -> rcgen::CertifiedKey<rcgen::KeyPair> {
    rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap()
}

/// An HTTPS (HTTP/1.1) provider answering `{"secure": <path>, "args": <body>}`.
async fn https_provider(ck: &rcgen::CertifiedKey<rcgen::KeyPair>) -> SocketAddr {
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let path = req.uri().path().to_string();
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let args: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let out = json!({"secure": path, "args": args}).to_string();
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(out)))
                            .unwrap(),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

fn instance(addr: SocketAddr) -> Instance {
    Instance::builder(addr.ip().to_string(), addr.port())
        .service(ServiceKey::new("com.foo.Secure"))
        .build()
}

fn trusting(ck: &rcgen::CertifiedKey<rcgen::KeyPair>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

#[tokio::test]
async fn calls_go_over_https_with_the_callers_tls_config() {
    let ck = certified();
    let addr = https_provider(&ck).await;
    let target = instance(addr);
    let invoker = HttpInvoker::new().tls(trusting(&ck));
    for i in 0..3 {
        let inv = Invocation::new("hello").with_args(vec![json!(i)]);
        let out = invoker
            .invoke(&target, &inv, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(out, json!({"secure": "/com.foo.Secure/hello", "args": [i]}));
    }
}

#[tokio::test]
async fn an_untrusted_certificate_or_cleartext_fails_as_a_transport_error() {
    let ck = certified();
    let addr = https_provider(&ck).await;
    let target = instance(addr);
    let inv = Invocation::new("hello");
    // Trusting another certificate: the handshake fails.
    let stranger = HttpInvoker::new().tls(trusting(&certified()));
    let e = stranger
        .invoke(&target, &inv, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
    // Cleartext HTTP to a TLS port.
    let e = HttpInvoker::new()
        .invoke(&target, &inv, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
}
