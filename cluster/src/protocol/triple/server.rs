//! A minimal Triple provider for tests, the demo and docker-compose: unary methods served by
//! one handler closure over cleartext HTTP/2 (prior knowledge), as Dubbo's providers do, or
//! over TLS (ALPN `h2`, optionally requiring a client certificate:
//! [`TripleServer::tls_config`]).
//!
//! Registering it is the caller's job, through a
//! [`Registrar`](switchman_discovery::Registrar): [`TripleServer::instance`] gives the
//! instance Dubbo would register, `tri://127.0.0.1:{port}/{service}?interface={service}`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use switchman_core::{BoxFuture, Instance, Protocol, ServiceKey};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::debug;

use serde_json::Value as Json;

use super::framing::{self, FrameDecoder};
use super::metadata::decode_timeout;
use super::status::{Code, Status, percent_encode};
use super::wrapper::{JavaCall, reply_message};

/// One unary request as the handler sees it.
#[derive(Debug, Clone)]
pub struct TripleRequest {
    /// Service (first path segment).
    pub service: String,
    /// Method (second path segment).
    pub method: String,
    /// The request message (without its length prefix).
    pub message: Bytes,
    /// The request headers (attachments arrive here, lower-cased).
    pub headers: HeaderMap,
    /// The caller's deadline from `grpc-timeout`, if it sent one.
    pub timeout: Option<Duration>,
}

/// What one connection and one request may cost a [`TripleServer`]: anyone who reaches its port
/// can send, so every size and wait is bounded. A request over a limit is answered with a
/// status naming it (`RESOURCE_EXHAUSTED` for size, `DEADLINE_EXCEEDED` for time), never held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// The largest request body (the framed message), in bytes. Default 8 MiB, Dubbo's default
    /// `payload`.
    pub max_body: usize,
    /// The largest header list of a request (HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`), in bytes.
    /// Default 16 KiB.
    pub max_header_list: u32,
    /// Requests in flight on one connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`).
    /// Default 256.
    pub max_concurrent_streams: u32,
    /// How long a request body may take to arrive in full (a sender trickling bytes is cut
    /// off); a shorter `grpc-timeout` of the caller's applies instead. Default 30 s.
    pub body_timeout: Duration,
    /// How long a TLS handshake may take. Default 10 s.
    pub handshake_timeout: Duration,
    /// An HTTP/2 PING is sent after this long without a frame from the peer, and the
    /// connection is closed when it is not answered within as long again. Default 30 s.
    pub keep_alive: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_body: 8 * 1024 * 1024,
            max_header_list: 16 * 1024,
            max_concurrent_streams: 256,
            body_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(30),
        }
    }
}

/// What the handler answers: the reply message, or a status sent trailers-only.
pub type TripleReply = std::result::Result<Bytes, Status>;

type Handler = Arc<dyn Fn(TripleRequest) -> BoxFuture<'static, TripleReply> + Send + Sync>;
type ResBody = BoxBody<Bytes, Infallible>;

/// A running Triple provider. [`TripleServer::stop`] (or dropping it) closes the listener and
/// every connection at once, like a killed process.
#[derive(Debug)]
pub struct TripleServer {
    addr: SocketAddr,
    hits: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    open: Arc<AtomicU64>,
    shutdown: watch::Sender<bool>,
}

impl TripleServer {
    /// Serves `handler` on `bind` (`127.0.0.1:0` for an ephemeral port), cleartext h2c.
    pub async fn serve<F>(bind: SocketAddr, handler: F) -> std::io::Result<TripleServer>
    where
        F: Fn(TripleRequest) -> BoxFuture<'static, TripleReply> + Send + Sync + 'static,
    {
        Self::serve_with(bind, None, ServerLimits::default(), handler).await
    }

    /// [`TripleServer::serve`] under other [`ServerLimits`] than the defaults.
    pub async fn serve_with_limits<F>(
        bind: SocketAddr,
        limits: ServerLimits,
        handler: F,
    ) -> std::io::Result<TripleServer>
    where
        F: Fn(TripleRequest) -> BoxFuture<'static, TripleReply> + Send + Sync + 'static,
    {
        Self::serve_with(bind, None, limits, handler).await
    }

    /// Serves `handler` on `bind` over TLS with `config` (ALPN `h2` is set on it).
    pub async fn serve_tls<F>(
        bind: SocketAddr,
        config: Arc<tokio_rustls::rustls::ServerConfig>,
        handler: F,
    ) -> std::io::Result<TripleServer>
    where
        F: Fn(TripleRequest) -> BoxFuture<'static, TripleReply> + Send + Sync + 'static,
    {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        Self::serve_with(
            bind,
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
            ServerLimits::default(),
            handler,
        )
        .await
    }

    async fn serve_with<F>(
        bind: SocketAddr,
        tls: Option<tokio_rustls::TlsAcceptor>,
        limits: ServerLimits,
        handler: F,
    ) -> std::io::Result<TripleServer>
    where
        F: Fn(TripleRequest) -> BoxFuture<'static, TripleReply> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let hits = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let (shutdown, mut stopped) = watch::channel(false);
        let handler: Handler = Arc::new(handler);
        let (h, c, o, stop_rx) = (
            hits.clone(),
            connections.clone(),
            open.clone(),
            shutdown.subscribe(),
        );
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    _ = stopped.wait_for(|s| *s) => return,
                    accepted = listener.accept() => match accepted {
                        Ok((s, _)) => s,
                        Err(e) => {
                            debug!(error = %e, "Triple server: accept failed");
                            continue;
                        }
                    },
                };
                let _ = stream.set_nodelay(true);
                c.fetch_add(1, Ordering::Relaxed);
                o.fetch_add(1, Ordering::Relaxed);
                let (handler, hits, mut stop) = (handler.clone(), h.clone(), stop_rx.clone());
                let open = o.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let (handler, hits) = (handler.clone(), hits.clone());
                        async move { Ok::<_, Infallible>(handle(req, &handler, &hits, &limits).await) }
                    });
                    let mut builder =
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    builder
                        .max_header_list_size(limits.max_header_list)
                        .max_concurrent_streams(limits.max_concurrent_streams)
                        .timer(TokioTimer::new())
                        .keep_alive_interval(Some(limits.keep_alive))
                        .keep_alive_timeout(limits.keep_alive);
                    let served = async {
                        match tls {
                            None => builder.serve_connection(TokioIo::new(stream), svc).await,
                            Some(acceptor) => {
                                let handshake = tokio::time::timeout(
                                    limits.handshake_timeout,
                                    acceptor.accept(stream),
                                );
                                match handshake.await {
                                    Ok(Ok(s)) => {
                                        builder.serve_connection(TokioIo::new(s), svc).await
                                    }
                                    Ok(Err(e)) => {
                                        debug!(error = %e, "Triple server: TLS handshake failed");
                                        Ok(())
                                    }
                                    Err(_) => {
                                        debug!("Triple server: TLS handshake timed out");
                                        Ok(())
                                    }
                                }
                            }
                        }
                    };
                    tokio::select! {
                        _ = stop.wait_for(|s| *s) => {}
                        r = served => if let Err(e) = r {
                            debug!(error = %e, "Triple server: connection ended");
                        },
                    }
                    open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Ok(TripleServer {
            addr,
            hits,
            connections,
            open,
            shutdown,
        })
    }

    /// Serves a plain Java interface to Java Dubbo 3 consumers: every request is read in the
    /// [wrapper format](super::wrapper) (typed or generic `$invoke`, Hessian2 inside) and
    /// handed over decoded as a [`JavaCall`]; the handler's JSON value goes back as the
    /// reply's Hessian2 value. A request that does not decode is answered `INVALID_ARGUMENT`
    /// (or `UNIMPLEMENTED` for a serialization other than Hessian2); a handler error is sent
    /// as its status. Register it with [`java_instance`](super::java_instance).
    pub async fn serve_java<F>(bind: SocketAddr, handler: F) -> std::io::Result<TripleServer>
    where
        F: Fn(JavaCall) -> BoxFuture<'static, Result<Json, Status>> + Send + Sync + 'static,
    {
        Self::serve_java_tls(bind, None, handler).await
    }

    /// [`TripleServer::serve_java`] over TLS with `tls` (see [`TripleServer::serve_tls`];
    /// [`TripleServer::tls_config`] makes one from PEM files), or in cleartext with `None`.
    /// Register it with `ssl-enabled=true` ([`SSL_ENABLED`](super::SSL_ENABLED)), as Dubbo 3
    /// does for a protocol with `ssl-enabled`.
    pub async fn serve_java_tls<F>(
        bind: SocketAddr,
        tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
        handler: F,
    ) -> std::io::Result<TripleServer>
    where
        F: Fn(JavaCall) -> BoxFuture<'static, Result<Json, Status>> + Send + Sync + 'static,
    {
        let handler = Arc::new(handler);
        let triple = move |req: TripleRequest| -> BoxFuture<'static, TripleReply> {
            let handler = handler.clone();
            Box::pin(async move {
                let call = JavaCall::decode(&req.service, &req.method, &req.message)?;
                let serialize_type = call.serialize_type.clone();
                let value = handler(call).await?;
                reply_message(&serialize_type, &value)
            })
        };
        match tls {
            None => Self::serve(bind, triple).await,
            Some(config) => Self::serve_tls(bind, config, triple).await,
        }
    }

    /// A provider's TLS settings from PEM files (rustls, ring provider): its certificate chain
    /// and unencrypted private key (Dubbo's `server-key-cert-chain-path` and
    /// `server-private-key-path`), and with `client_ca` the CA that must sign the consumers'
    /// certificates (mTLS, Dubbo's `server-trust-cert-collection-path`: a consumer without
    /// one is refused at the handshake). Errors name the file and what is wrong with it.
    pub fn tls_config(
        cert_chain: &std::path::Path,
        key: &std::path::Path,
        client_ca: Option<&std::path::Path>,
    ) -> switchman_core::Result<Arc<tokio_rustls::rustls::ServerConfig>> {
        crate::protocol::tls::server_config(cert_chain, key, client_ca)
    }

    /// The answer to `call` when it is one to Dubbo's `org.apache.dubbo.metadata.
    /// MetadataService` (version `1.0.0`, the Hessian interface): `getMetadataInfo(revision)`
    /// answers the `MetadataInfo` this process's registrars publish for that revision
    /// ([`exported`](switchman_discovery::metadata::exported)), as the Java objects a Java
    /// Dubbo 3.3 consumer decodes, or `null` for a revision not published (Dubbo's
    /// `MetadataServiceDelegation`); its other methods are `UNIMPLEMENTED`. `None` for a
    /// call to another service. [`serve_echo`](super::serve_echo) answers these first; call
    /// it from your own [`TripleServer::serve_java`] handler to do the same.
    pub fn metadata_service_answer(call: &JavaCall) -> Option<Result<Json, Status>> {
        use switchman_discovery::metadata::{METADATA_SERVICE, exported};
        if call.service != METADATA_SERVICE {
            return None;
        }
        if call.method != "getMetadataInfo" {
            return Some(Err(Status::new(
                Code::Unimplemented,
                format!(
                    "{METADATA_SERVICE}.{} is not served (only getMetadataInfo)",
                    call.method
                ),
            )));
        }
        let Some(Json::String(revision)) = call.args.first() else {
            return Some(Err(Status::new(
                Code::InvalidArgument,
                "getMetadataInfo takes one String, the revision",
            )));
        };
        Some(Ok(exported()
            .lookup(None, revision)
            .map(|info| info.to_java_json())
            .unwrap_or(Json::Null)))
    }

    /// Serves only Dubbo's `MetadataService` ([`TripleServer::metadata_service_answer`]),
    /// for a provider whose own protocol is not Triple: register its instances with
    /// `metadata-service-port` = this server's port.
    pub async fn serve_metadata_service(bind: SocketAddr) -> std::io::Result<TripleServer> {
        Self::serve_java(bind, |call| {
            Box::pin(async move {
                Self::metadata_service_answer(&call).unwrap_or_else(|| {
                    Err(Status::new(
                        Code::Unimplemented,
                        format!("{} is not served here", call.service),
                    ))
                })
            })
        })
        .await
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests that reached the handler so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections open now (accepted and not yet closed by either side).
    pub fn open_connections(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// The instance to register for `service`: `tri://{addr}/{service}?interface={service}`.
    pub fn instance(&self, service: &str) -> Instance {
        Instance::builder(self.addr.ip().to_string(), self.addr.port())
            .protocol(Protocol::Tri)
            .path(service)
            .service(ServiceKey::new(service))
            .build()
    }

    /// Stops at once: no new connections, open ones are closed.
    pub fn stop(&self) {
        let _ = self.shutdown.send(true);
    }
}

impl Drop for TripleServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn empty(status: StatusCode) -> Response<ResBody> {
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = status;
    r
}

fn grpc_headers(content_type: &HeaderValue) -> Response<ResBody> {
    let mut r = empty(StatusCode::OK);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, content_type.clone());
    r
}

/// A trailers-only response: the status travels in the headers.
fn trailers_only(content_type: &HeaderValue, status: &Status) -> Response<ResBody> {
    let mut r = grpc_headers(content_type);
    let h = r.headers_mut();
    h.insert("grpc-status", HeaderValue::from(status.code.as_u32()));
    if let Ok(m) = HeaderValue::try_from(percent_encode(&status.message))
        && !status.message.is_empty()
    {
        h.insert("grpc-message", m);
    }
    r
}

async fn handle(
    req: Request<Incoming>,
    handler: &Handler,
    hits: &AtomicU64,
    limits: &ServerLimits,
) -> Response<ResBody> {
    if req.method() != Method::POST {
        return empty(StatusCode::METHOD_NOT_ALLOWED);
    }
    let ct = match req.headers().get(header::CONTENT_TYPE) {
        Some(ct) if ct.as_bytes().starts_with(b"application/grpc") => ct.clone(),
        _ => return empty(StatusCode::UNSUPPORTED_MEDIA_TYPE),
    };
    let mut segments = req.uri().path().trim_start_matches('/').splitn(2, '/');
    let (service, method) = match (segments.next(), segments.next()) {
        (Some(s), Some(m)) if !s.is_empty() && !m.is_empty() && !m.contains('/') => {
            (s.to_string(), m.to_string())
        }
        _ => {
            let st = Status::new(
                Code::Unimplemented,
                format!("no method at {}", req.uri().path()),
            );
            return trailers_only(&ct, &st);
        }
    };
    let timeout = req
        .headers()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(decode_timeout);
    let (parts, body) = req.into_parts();
    let wait = timeout.map_or(limits.body_timeout, |t| t.min(limits.body_timeout));
    let collected = tokio::time::timeout(wait, Limited::new(body, limits.max_body).collect());
    let body = match collected.await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.is::<LengthLimitError>() => {
            let st = Status::new(
                Code::ResourceExhausted,
                format!("request body over {} bytes", limits.max_body),
            );
            return trailers_only(&ct, &st);
        }
        Ok(Err(e)) => {
            debug!(error = %e, "Triple server: request body broke off");
            return trailers_only(&ct, &Status::new(Code::Cancelled, "request body broke off"));
        }
        Err(_) => {
            let st = Status::new(
                Code::DeadlineExceeded,
                format!("request body not complete within {wait:?}"),
            );
            return trailers_only(&ct, &st);
        }
    };
    let mut decoder = FrameDecoder::default();
    decoder.push(&body);
    let message = match (decoder.next_message(), decoder.next_message()) {
        (Ok(Some(m)), Ok(None)) if decoder.finish().is_ok() => m,
        (Err(e), _) | (_, Err(e)) => {
            return trailers_only(&ct, &Status::new(Code::Internal, e.to_string()));
        }
        _ => {
            let st = Status::new(
                Code::Internal,
                "a unary request carries exactly one message",
            );
            return trailers_only(&ct, &st);
        }
    };
    hits.fetch_add(1, Ordering::Relaxed);
    let reply = handler(TripleRequest {
        service,
        method,
        message,
        headers: parts.headers,
        timeout,
    })
    .await;
    match reply {
        Err(status) => trailers_only(&ct, &status),
        Ok(msg) => {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
                Ok(Frame::data(framing::encode_message(&msg))),
                Ok(Frame::trailers(trailers)),
            ];
            let mut r = Response::new(StreamBody::new(futures::stream::iter(frames)).boxed());
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::sync::mpsc;

    /// A server whose handler answers every request with an empty message, counting them.
    async fn server(limits: ServerLimits) -> TripleServer {
        TripleServer::serve_with_limits("127.0.0.1:0".parse().unwrap(), limits, |_req| {
            Box::pin(async { Ok(Bytes::new()) })
        })
        .await
        .unwrap()
    }

    /// Sends one request whose body frames come from `frames` (the body ends when the sender
    /// is dropped) and returns the `grpc-status` and `grpc-message` the server answered.
    async fn send(server: &TripleServer, frames: mpsc::Receiver<Bytes>) -> (String, String) {
        let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        let (mut client, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .unwrap();
        tokio::spawn(conn);
        let body =
            StreamBody::new(tokio_stream_from(frames).map(|b| Ok::<_, Infallible>(Frame::data(b))));
        let req = Request::post("/demo.Greeter/sayHello")
            .header(header::CONTENT_TYPE, "application/grpc+proto")
            .body(body)
            .unwrap();
        let res = client.send_request(req).await.unwrap();
        let h = res.headers().clone();
        let get = |k: &str| {
            h.get(k)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        (get("grpc-status"), get("grpc-message"))
    }

    fn tokio_stream_from(mut rx: mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    #[tokio::test]
    async fn a_request_body_over_the_limit_is_refused_without_reaching_the_handler() {
        let s = server(ServerLimits {
            max_body: 64 * 1024,
            ..ServerLimits::default()
        })
        .await;
        let (tx, rx) = mpsc::channel(4);
        let sender = tokio::spawn(async move {
            // 16 chunks of 8 KiB: 128 KiB in all, twice the limit.
            for _ in 0..16 {
                if tx.send(Bytes::from(vec![0u8; 8 * 1024])).await.is_err() {
                    break;
                }
            }
        });
        let (status, message) = send(&s, rx).await;
        assert_eq!(status, "8", "RESOURCE_EXHAUSTED: {message}");
        assert!(message.contains("65536"), "{message}");
        assert_eq!(s.hits(), 0);
        sender.abort();
    }

    #[tokio::test]
    async fn a_request_body_that_never_ends_is_cut_off_after_the_body_timeout() {
        let s = server(ServerLimits {
            body_timeout: Duration::from_millis(200),
            ..ServerLimits::default()
        })
        .await;
        let (tx, rx) = mpsc::channel(4);
        // Two bytes of the length prefix, then nothing more: the sender is held open.
        tx.send(Bytes::from_static(&[0, 0])).await.unwrap();
        let (status, message) = send(&s, rx).await;
        assert_eq!(status, "4", "DEADLINE_EXCEEDED: {message}");
        assert!(message.contains("not complete"), "{message}");
        assert_eq!(s.hits(), 0);
        drop(tx);
    }

    #[tokio::test]
    async fn a_request_within_the_limits_reaches_the_handler() {
        let s = server(ServerLimits {
            max_body: 64 * 1024,
            ..ServerLimits::default()
        })
        .await;
        let (tx, rx) = mpsc::channel(4);
        tx.send(framing::encode_message(&Bytes::from(vec![1u8; 1000])))
            .await
            .unwrap();
        drop(tx);
        let (status, message) = send(&s, rx).await;
        assert_eq!(status, "", "a reply, not a trailers-only status: {message}");
        assert_eq!(s.hits(), 1);
    }
}
