//! The Triple invoker: calls Dubbo 3 providers over Triple, which is gRPC framing on HTTP/2.
//!
//! A unary call is `POST /{service}/{method}` on cleartext HTTP/2 with prior knowledge (h2c,
//! what Dubbo's Java, Go and Python providers accept), with `content-type: application/grpc`
//! (or `+json`, `+proto`, as the [codec](MessageCodec) says), `te: trailers`, one
//! length-prefixed message ([`framing`]), `grpc-timeout` carrying what is left of the
//! attempt's timeout, the attachments as metadata headers ([`metadata`]),
//! `tri-service-group`/`tri-service-version` when the instance has them, and the provider's
//! `token` parameter as the `token` header (Dubbo's token authorization, as Java's
//! `TripleInvoker` sends it; a `token` attachment of the call's own is sent instead, and a
//! token longer than 256 bytes or not printable ASCII is logged and not sent). The answer's
//! `grpc-status`/`grpc-message` are read from the trailers, or from the headers of a
//! trailers-only response.
//!
//! # Connections
//!
//! One HTTP/2 connection per provider address, multiplexed by every concurrent call and reused
//! across calls, services and directory snapshots. A broken connection is replaced by the next
//! call. As a directory's endpoint maker ([`MakeEndpoint`]), the invoker gives each endpoint a
//! [`TripleEndpoint`] that owns the connection to its address (shared by the endpoints there)
//! and reads it without a lock; the directory drops it after its drain grace once the endpoint
//! left, and the connection closes when its last call ends. Calls through the invoker itself
//! ([`Invoker::invoke`] with any instance) use a pool by address instead, pruned by
//! [`TripleInvoker::retain`].
//!
//! # Errors
//!
//! Decided here, once (see [`status`] for the status table):
//!
//! - connect refused, handshake failure, a closed or reset connection, `UNAVAILABLE`:
//!   retryable transport errors;
//! - the attempt's timeout: a retryable timeout (the message says whether the request had been
//!   sent); `DEADLINE_EXCEEDED` from the provider: a timeout that is not retried;
//! - `UNIMPLEMENTED`, `INVALID_ARGUMENT`, `UNKNOWN` and every other status: business errors
//!   with the provider's message kept;
//! - a malformed answer (no `grpc-status`, compressed or truncated message): a transport error
//!   that is not retried (the provider did receive the call);
//! - arguments the codec cannot encode: a bad-config error.
//!
//! # Java providers of plain interfaces
//!
//! A Java Dubbo 3 Triple provider of a plain Java interface reads every gRPC request as a
//! protobuf `TripleRequestWrapper` with Hessian2 arguments ([`wrapper`]); instances that
//! registered `hessian2` as their serialization get [`WrapperCodec`] automatically (see
//! [`TripleInvoker`]). [`TripleServer::serve_java`] serves the same format to Java consumers.
//!
//! # Protobuf (IDL) services
//!
//! A typed call whose body has a protobuf request ([`switchman_core::TypedBody::protobuf`],
//! what `switchman::Reference::call_idl` and `switchman-build`'s clients make) skips the
//! codecs: the message is sent as is at `/{proto service}/{method}` with
//! [`IDL_CONTENT_TYPE`], and the reply message goes to the body's `read_result`.
//!
//! TLS: see [`TripleInvoker::client_tls`] (the providers that say `ssl-enabled=true`, or
//! every one) and [`TripleInvoker::tls`] (every provider); without them instances are called
//! over cleartext HTTP/2.

pub mod codec;
mod echo;
pub mod framing;
mod message_codec;
pub mod metadata;
mod pool;
mod server;
pub mod status;
mod stream;
#[cfg(test)]
mod tests;
pub mod wrapper;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use switchman_core::{BoxFuture, Error, Instance, Invocation, Invoker, MakeEndpoint, Result};
use tokio::time::Instant;
use tracing::trace;

use crate::protocol::endpoint_params::{EndpointShared, SharedParams, ssl_enabled};
use crate::protocol::tls::choose;
/// The consumer's TLS settings (also [`crate::dubbo::ClientTls`]).
pub use crate::protocol::tls::{ClientTls, SSL_ENABLED};
#[cfg(feature = "prost")]
pub use codec::ProstCodec;
pub use codec::{JsonCodec, MessageCodec, Payload, RawCodec, ReplyContext};
pub use echo::{EchoOptions, java_instance, serve_echo};
pub use server::{ServerLimits, TripleReply, TripleRequest, TripleServer};
pub use status::{Code, Status};
/// The rustls crate Switchman's Triple TLS is built on (for `ClientConfig`/`ServerConfig`).
pub use tokio_rustls::rustls;
pub use wrapper::{JavaCall, WrapperCodec};

use crate::protocol::dubbo::token::{self, EndpointToken, TOKEN_KEY, Token};
use framing::FrameDecoder;
use pool::{ConnectSettings, Entry, Pool};

const USER_AGENT: &str = concat!("switchman/", env!("CARGO_PKG_VERSION"));
/// HTTP's drain grace, the same as the directory's default for endpoint clients.
pub use crate::DEFAULT_DRAIN_GRACE;

#[derive(Debug, Clone, Default)]
struct ServiceCodecs {
    service: Option<Arc<dyn MessageCodec>>,
    methods: HashMap<String, Arc<dyn MessageCodec>>,
}

/// Calls `tri://` instances (Dubbo 3 Triple). Cheap to clone; clones share the connections.
///
/// The codec is chosen per call: the method's ([`TripleInvoker::method_codec`]), else the
/// service's ([`TripleInvoker::service_codec`]), else [`WrapperCodec`] when the instance is a
/// Java Dubbo provider of a plain interface ([`wrapper::speaks_wrapper`]: it registered
/// `hessian2` in `prefer.serialization`/`serialization`; turn it off with
/// [`TripleInvoker::java_wrapper`]), else the invoker's default ([`TripleInvoker::codec`],
/// [`JsonCodec`] unless set).
///
/// ```no_run
/// # async fn demo(instance: switchman_core::Instance) -> switchman_core::Result<()> {
/// use std::time::Duration;
/// use switchman_cluster::triple::{Payload, TripleInvoker};
/// use switchman_core::{Invocation, Invoker};
///
/// // The Python and Go Dubbo samples take and return raw bytes.
/// let triple = TripleInvoker::new().payload(Payload::Raw);
/// let hello = Invocation::new("sayHello").with_args(vec!["world".into()]);
/// let reply = triple.invoke(&instance, &hello, Duration::from_secs(3)).await?;
/// println!("{reply}"); // a JSON string when the reply bytes are UTF-8
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TripleInvoker {
    pool: Arc<Pool>,
    default_codec: Arc<dyn MessageCodec>,
    java_codec: Option<Arc<dyn MessageCodec>>,
    codecs: HashMap<String, ServiceCodecs>,
    max_message: usize,
    /// The consumer's application, sent as `tri-consumer-appname` ([`TripleInvoker::application`]).
    application: Option<HeaderValue>,
}

impl fmt::Debug for TripleInvoker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TripleInvoker")
            .field("default_codec", &self.default_codec)
            .field("java_codec", &self.java_codec)
            .field("codecs", &self.codecs)
            .field("max_message", &self.max_message)
            .field("application", &self.application)
            .field("pool", &self.pool)
            .finish()
    }
}

impl Default for TripleInvoker {
    fn default() -> Self {
        Self::new()
    }
}

impl TripleInvoker {
    /// An invoker with the JSON codec, 16 MiB messages, and HTTP/2 keep-alive pings every 30 s
    /// (a connection whose ping is not answered in 10 s is closed and replaced).
    pub fn new() -> Self {
        TripleInvoker {
            pool: Arc::new(Pool::new(ConnectSettings {
                keep_alive_interval: Some(Duration::from_secs(30)),
                keep_alive_timeout: Duration::from_secs(10),
                tls: None,
            })),
            default_codec: Arc::new(JsonCodec),
            java_codec: Some(Arc::new(WrapperCodec::new())),
            codecs: HashMap::new(),
            max_message: framing::DEFAULT_MAX_MESSAGE,
            application: None,
        }
    }

    /// The consumer's application, sent with every call as the `tri-consumer-appname` header,
    /// as Java's Triple consumer sends it (the provider's `RpcContext` reads it as the remote
    /// application). A name that cannot be a header value is not sent.
    pub fn application(mut self, name: &str) -> Self {
        self.application = HeaderValue::try_from(name)
            .ok()
            .filter(|_| !name.is_empty());
        self
    }

    /// Sets HTTP/2 keep-alive (`None`: no pings). Starts a new, empty connection pool: set it
    /// before the first call.
    pub fn keep_alive(mut self, interval: Option<Duration>, timeout: Duration) -> Self {
        let tls = self.pool.tls_settings();
        self.pool = Arc::new(Pool::new(ConnectSettings {
            keep_alive_interval: interval,
            keep_alive_timeout: timeout,
            tls,
        }));
        self
    }

    /// Calls every provider over TLS with `config` (its roots, client certificate, ...): HTTP/2
    /// negotiated with ALPN `h2`, the server name taken from the instance's host. Without it,
    /// calls use cleartext HTTP/2 with prior knowledge (h2c), as Dubbo's Triple does by default.
    /// A peer that does not agree to `h2` fails with a non-retryable transport error.
    pub fn tls(self, config: Arc<rustls::ClientConfig>) -> Self {
        self.client_tls(ClientTls::new(config).every_provider(true))
    }

    /// TLS settings: a provider whose URL says `ssl-enabled=true` (as a Java Dubbo provider
    /// with `<dubbo:protocol ssl-enabled="true">` registers) is called over TLS with ALPN
    /// `h2`, the others over cleartext h2c, or every provider over TLS with
    /// [`ClientTls::every_provider`]. Without TLS settings, calls to a provider that says
    /// `ssl-enabled=true` fail at once with a bad-config error naming it. Starts a new, empty
    /// connection pool: set it before the first call.
    pub fn client_tls(mut self, tls: ClientTls) -> Self {
        let (interval, timeout) = self.pool.keep_alive_settings();
        self.pool = Arc::new(Pool::new(ConnectSettings {
            keep_alive_interval: interval,
            keep_alive_timeout: timeout,
            tls: Some(tls),
        }));
        self
    }

    /// Sets the largest reply message accepted (default 16 MiB).
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }

    /// Sets the default codec.
    pub fn codec(mut self, codec: Arc<dyn MessageCodec>) -> Self {
        self.default_codec = codec;
        self
    }

    /// Sets the default codec to a built-in one.
    pub fn payload(self, payload: Payload) -> Self {
        self.codec(payload.codec())
    }

    /// Sets the codec of every method of `service` (interface name).
    pub fn service_codec(mut self, service: &str, codec: Arc<dyn MessageCodec>) -> Self {
        self.codecs.entry(service.to_string()).or_default().service = Some(codec);
        self
    }

    /// Sets the codec of one method of `service`.
    pub fn method_codec(
        mut self,
        service: &str,
        method: &str,
        codec: Arc<dyn MessageCodec>,
    ) -> Self {
        self.codecs
            .entry(service.to_string())
            .or_default()
            .methods
            .insert(method.to_string(), codec);
        self
    }

    /// Whether Java Dubbo providers of plain interfaces (see [`wrapper::speaks_wrapper`]) get
    /// [`WrapperCodec`] when no service or method codec is set (default: yes). Off, they get
    /// the default codec like every other provider.
    pub fn java_wrapper(mut self, enabled: bool) -> Self {
        self.java_codec = enabled.then(|| Arc::new(WrapperCodec::new()) as Arc<dyn MessageCodec>);
        self
    }

    /// The codec of `service`'s `method` on a provider whose shared parameters are `shared`.
    fn codec_for(
        &self,
        shared: &SharedParams,
        service: &str,
        method: &str,
    ) -> &Arc<dyn MessageCodec> {
        let explicit = self
            .codecs
            .get(service)
            .and_then(|s| s.methods.get(method).or(s.service.as_ref()));
        if let Some(c) = explicit {
            return c;
        }
        match &self.java_codec {
            Some(java) if shared.speaks_wrapper() => java,
            _ => &self.default_codec,
        }
    }

    /// Drops the connections of the addresses for which `keep` is false, at once (no grace).
    /// For calls through the invoker itself; endpoints' own clients (the invoker as a
    /// directory's maker) are not in this pool and drain with their endpoint. In-flight calls
    /// on dropped connections finish.
    pub fn retain(&self, keep: impl FnMut(&str) -> bool) {
        self.pool.retain(keep, Duration::ZERO);
    }

    /// The addresses with an open connection, sorted.
    pub fn connected(&self) -> Vec<String> {
        self.pool.connected()
    }

    /// One unary call with an already-encoded message: `POST /{service}/{method}` on `target`
    /// with `call.content_type`. Returns the reply message. This is what [`Invoker::invoke`]
    /// does after encoding; use it for payloads outside the codecs. The provider's `token`
    /// goes with it unless `call.attachments` carry one.
    pub async fn unary(
        &self,
        target: &Instance,
        call: Unary<'_>,
        timeout: Duration,
    ) -> Result<Bytes> {
        let entry = self.pool.entry(target.address());
        let token = token::to_add(None, target, call.attachments, true);
        let tls = ssl_enabled(target);
        self.unary_answer(&entry, target, call, token.as_ref(), tls, timeout)
            .await
            .map(|a| a.message)
    }

    /// One call; `ssl_enabled`: the provider's `ssl-enabled`, as read.
    async fn unary_answer(
        &self,
        entry: &Entry,
        target: &Instance,
        call: Unary<'_>,
        token: Option<&Token>,
        ssl_enabled: bool,
        timeout: Duration,
    ) -> Result<Answer> {
        let (address, method) = (target.address(), call.method);
        let deadline = crate::config::deadline_after(timeout);
        let request = (entry, target, call, token, ssl_enabled);
        self.within(request, deadline, timeout, |response| {
            read_response(response, address, method, self.max_message)
        })
        .await
    }

    /// Sends `request` and hands its response to `read`, all before `deadline` (`timeout`
    /// from now): a late one is a timeout error that says whether the request had left.
    async fn within<T, F, Fut>(
        &self,
        (entry, target, call, token, ssl_enabled): Outgoing<'_>,
        deadline: Instant,
        timeout: Duration,
        read: F,
    ) -> Result<T>
    where
        F: FnOnce(http::Response<hyper::body::Incoming>) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let (address, method) = (target.address(), call.method);
        let mut sent = false;
        let outcome = tokio::time::timeout_at(deadline, async {
            let response = self
                .open(entry, target, call, token, ssl_enabled, deadline, &mut sent)
                .await?;
            read(response).await
        })
        .await;
        outcome.unwrap_or_else(|_| Err(late(address, method, timeout, sent)))
    }

    /// The typed call for prost users (feature `prost`): `request` encoded, the reply decoded
    /// as `Resp`.
    #[cfg(feature = "prost")]
    pub async fn call_proto<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        target: &Instance,
        method: &str,
        request: &Req,
        attachments: &[(String, String)],
        timeout: Duration,
    ) -> Result<Resp> {
        let message = request.encode_to_vec();
        let call = Unary {
            service: service_name(target),
            method,
            content_type: "application/grpc+proto",
            message: &message,
            attachments,
        };
        let reply = self.unary(target, call, timeout).await?;
        Resp::decode(reply).map_err(|e| {
            Error::business(format!(
                "the reply of {} to {method} is not a valid {}: {e}",
                target.address(),
                std::any::type_name::<Resp>()
            ))
        })
    }

    /// Sends the request and waits for the response's head; `sent` turns true once the
    /// request is on its way (for the timeout's message).
    #[allow(clippy::too_many_arguments)]
    async fn open(
        &self,
        entry: &Entry,
        target: &Instance,
        call: Unary<'_>,
        token: Option<&Token>,
        ssl_enabled: bool,
        deadline: Instant,
        sent: &mut bool,
    ) -> Result<http::Response<hyper::body::Incoming>> {
        let address = target.address();
        let method = call.method;
        let mut request = build_request(target, &call, token, deadline)?;
        let settings = self.pool.settings();
        let tls = choose(settings.tls.as_ref(), ssl_enabled, address, "tri")?;
        let mut sender = entry.get(settings, address, tls).await?;
        if let Err(e) = sender.ready().await {
            entry.discard();
            return Err(Error::transport(format!(
                "the connection to {address} closed before {method} was sent"
            ))
            .with_source(e));
        }
        if let Some(app) = &self.application {
            request.headers_mut().insert(CONSUMER_APP_NAME, app.clone());
        }
        // Refresh the deadline header: connecting may have taken part of the budget.
        request.headers_mut().insert(
            "grpc-timeout",
            timeout_header(deadline.saturating_duration_since(Instant::now())),
        );
        *sent = true;
        let response = match sender.send_request(request).await {
            Ok(r) => r,
            Err(e) => {
                entry.discard();
                let what = if e.is_canceled() {
                    "the connection closed before the request was sent"
                } else {
                    "the request failed"
                };
                let strike = !e.is_canceled() && !retry_elsewhere(&e);
                return Err(Error::transport(format!("{method} on {address}: {what}"))
                    .with_outlier_strike(strike)
                    .with_source(e));
            }
        };
        Ok(response)
    }
}

/// The error of a call whose `timeout` passed before it was answered (`sent`: after the
/// request left).
fn late(address: &str, method: &str, timeout: Duration, sent: bool) -> Error {
    if sent {
        Error::timeout(format!(
            "{address} did not answer {method} within {timeout:?}"
        ))
    } else {
        Error::timeout(format!(
            "{method} on {address}: not sent within {timeout:?} (connecting, or waiting for a stream)"
        ))
    }
}

/// Whether `e` says "retry elsewhere" rather than "this instance is broken": the peer sent
/// a graceful HTTP/2 GOAWAY (`NO_ERROR`) or refused the stream (`REFUSED_STREAM`, not
/// processed). h2 is not a direct dependency, so this reads h2's messages in the source chain
/// (only on the error path).
fn retry_elsewhere(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if text.contains("refused stream")
            || text.starts_with("connection error received: not a result of an error")
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// What one request is sent with: the endpoint's connection entry, the instance, the request,
/// the token to send and the provider's `ssl-enabled`.
type Outgoing<'a> = (&'a Entry, &'a Instance, Unary<'a>, Option<&'a Token>, bool);

/// One encoded unary request, for [`TripleInvoker::unary`].
#[derive(Debug, Clone, Copy)]
pub struct Unary<'a> {
    /// The service (interface) name: the first path segment.
    pub service: &'a str,
    /// The method: the second path segment.
    pub method: &'a str,
    /// `application/grpc`, `application/grpc+proto`, `application/grpc+json`...
    pub content_type: &'a str,
    /// The message, without its length prefix.
    pub message: &'a [u8],
    /// Sent as metadata headers.
    pub attachments: &'a [(String, String)],
}

/// The interface the instance serves (Dubbo's `interface`/`service` parameter, else its path).
fn service_name(target: &Instance) -> &str {
    let i = target.service().interface.as_ref();
    if i.is_empty() { target.path() } else { i }
}

fn timeout_header(left: Duration) -> HeaderValue {
    HeaderValue::try_from(metadata::encode_timeout(left)).unwrap_or(HeaderValue::from_static("0n"))
}

/// The header naming the consumer's application (Dubbo's `TripleHeaderEnum.CONSUMER_APP_NAME_KEY`).
const CONSUMER_APP_NAME: &str = "tri-consumer-appname";

fn build_request(
    target: &Instance,
    call: &Unary<'_>,
    token: Option<&Token>,
    deadline: Instant,
) -> Result<Request<Full<Bytes>>> {
    let address = target.address();
    let Unary {
        service,
        method,
        content_type,
        message,
        attachments,
    } = *call;
    let uri = Uri::builder()
        .scheme("http")
        .authority(address)
        .path_and_query(format!("/{service}/{method}"))
        .build()
        .map_err(|e| {
            Error::bad_config(format!(
                "cannot call {service}/{method} on {address}: not a valid request path ({e})"
            ))
        })?;
    let mut headers = HeaderMap::with_capacity(9 + attachments.len());
    metadata::add_attachments(&mut headers, attachments);
    // Checked to be a valid header value when it was read.
    if let Some(v) = token.and_then(|t| HeaderValue::try_from(t.as_str()).ok()) {
        headers.insert(TOKEN_KEY, v);
    }
    let ct = HeaderValue::try_from(content_type)
        .map_err(|_| Error::bad_config(format!("invalid content-type {content_type:?}")))?;
    headers.insert(header::CONTENT_TYPE, ct);
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
    headers.insert(
        "grpc-timeout",
        timeout_header(deadline.saturating_duration_since(Instant::now())),
    );
    let key = target.service();
    for (name, value) in [
        ("tri-service-group", key.group.as_ref()),
        ("tri-service-version", key.version.as_ref()),
    ] {
        if !value.is_empty()
            && let Ok(v) = HeaderValue::try_from(value)
        {
            headers.insert(name, v);
        }
    }
    let mut req = Request::new(Full::new(framing::encode_message(message)));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}

fn invalid(address: &str, method: &str, what: impl fmt::Display) -> Error {
    Error::transport(format!(
        "{address} answered {method} with an invalid Triple response: {what}"
    ))
    .with_retryable(false)
}

/// The status carried by `headers`, if any.
fn status_in(headers: &HeaderMap) -> Option<std::result::Result<Status, ()>> {
    let raw = headers.get("grpc-status")?;
    Some(
        Status::from_header_values(
            raw.as_bytes(),
            headers.get("grpc-message").map(HeaderValue::as_bytes),
        )
        .ok_or(()),
    )
}

/// A successful reply: its message, headers and trailers.
struct Answer {
    message: Bytes,
    headers: HeaderMap,
    trailers: Option<HeaderMap>,
}

/// Checks a response's head: `Ok(false)` when messages follow, `Ok(true)` for a
/// trailers-only OK (no message at all), the error of any other status, of an HTTP status
/// other than 200 or of a content type that is not gRPC.
fn check_head(parts: &http::response::Parts, address: &str, method: &str) -> Result<bool> {
    // Trailers-only: the status is in the headers and there is no body worth reading.
    match status_in(&parts.headers) {
        Some(Ok(s)) if s.code == Code::Ok => return Ok(true),
        Some(Ok(s)) => return Err(s.into_error(address, method)),
        Some(Err(())) => return Err(invalid(address, method, "unparsable grpc-status")),
        None => {}
    }
    if parts.status != http::StatusCode::OK {
        let code = Code::from_http(parts.status.as_u16());
        return Err(
            Status::new(code, format!("HTTP status {}", parts.status.as_u16()))
                .into_error(address, method),
        );
    }
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    match content_type {
        Some(ct) if ct.starts_with("application/grpc") => Ok(false),
        other => {
            let what = other.map_or("no content-type".to_string(), |ct| {
                format!("content-type {ct:?}")
            });
            Err(Status::new(Code::Unknown, format!("{what} is not gRPC"))
                .into_error(address, method))
        }
    }
}

async fn read_response(
    response: http::Response<hyper::body::Incoming>,
    address: &str,
    method: &str,
    max_message: usize,
) -> Result<Answer> {
    let (parts, mut body) = response.into_parts();
    if check_head(&parts, address, method)? {
        return Err(invalid(address, method, "OK without a message"));
    }
    let mut decoder = FrameDecoder::new(max_message);
    let mut message: Option<Bytes> = None;
    let mut trailers: Option<HeaderMap> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            Error::transport(format!("{address} broke off its answer to {method}")).with_source(e)
        })?;
        match frame.into_data() {
            Ok(data) => {
                decoder.push(&data);
                while let Some(m) = decoder
                    .next_message()
                    .map_err(|e| invalid(address, method, e))?
                {
                    if message.is_some() {
                        return Err(invalid(
                            address,
                            method,
                            "more than one message for a unary call",
                        ));
                    }
                    message = Some(m);
                }
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
            }
        }
    }
    // A non-OK status wins over whatever came before it (a provider may fail mid-message).
    let status = match trailers.as_ref().and_then(status_in) {
        Some(Ok(s)) if s.code != Code::Ok => return Err(s.into_error(address, method)),
        Some(Ok(s)) => s,
        Some(Err(())) => return Err(invalid(address, method, "unparsable grpc-status")),
        None => {
            return Err(invalid(
                address,
                method,
                "the stream ended without grpc-status",
            ));
        }
    };
    decoder.finish().map_err(|e| invalid(address, method, e))?;
    trace!(address, method, status = %status.code, "Triple call answered");
    let message = message.ok_or_else(|| invalid(address, method, "OK without a message"))?;
    Ok(Answer {
        message,
        headers: parts.headers,
        trailers,
    })
}

impl Invoker for TripleInvoker {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let entry = self.pool.entry(target.address());
            let shared = SharedParams::of(target);
            self.call_on(&entry, None, shared, target, invocation, timeout)
                .await
        })
    }

    fn bounds_timeout(&self) -> bool {
        true
    }
}

/// The Triple client of one endpoint, made by [`TripleInvoker`] as a [`MakeEndpoint`]: it owns
/// the connection to its address (shared with the other endpoints there, such as another
/// group on the same port), reads it without a lock on every call, and closes it when the
/// last endpoint at the address is dropped and its calls have ended. It reads the provider's
/// `token`, `prefer.serialization`, `serialization`, `release` (whether it takes
/// [`WrapperCodec`], see [`wrapper::speaks_wrapper`]) and `ssl-enabled` once, when it is made:
/// a call with that instance compares a pointer and reads no parameter string. When the
/// directory hands it the endpoint's new instance (an override, a re-registration:
/// `Invoker::instance_changed`), it reads again what changed, and calls with that one compare
/// a pointer again; a call with another instance compares its values with those kept and
/// parses only what differs.
pub struct TripleEndpoint {
    invoker: TripleInvoker,
    entry: Arc<Entry>,
    token: EndpointToken,
    shared: EndpointShared,
}

impl fmt::Debug for TripleEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TripleEndpoint")
            .field("connected", &self.entry.is_connected())
            .finish_non_exhaustive()
    }
}

impl MakeEndpoint for TripleInvoker {
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        Arc::new(TripleEndpoint {
            invoker: self.clone(),
            entry: self.pool.endpoint_entry(instance.address()),
            token: EndpointToken::new(instance),
            shared: EndpointShared::new(instance),
        })
    }
}

impl Invoker for TripleEndpoint {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let shared = self.shared.get(target);
            self.invoker
                .call_on(
                    &self.entry,
                    Some(&self.token),
                    shared,
                    target,
                    invocation,
                    timeout,
                )
                .await
        })
    }

    fn instance_changed(&self, instance: &Arc<Instance>) {
        self.shared.adopt(instance);
        self.token.adopt(instance);
    }

    /// Connecting, sending and the reply share one deadline.
    fn bounds_timeout(&self) -> bool {
        true
    }
}

impl TripleInvoker {
    /// One call on `entry`'s connection; `endpoint_token`: the endpoint's token, read once
    /// (`None`: read from `target`); `shared`: `target`'s shared parameters (the endpoint's,
    /// read once, or read for this call).
    async fn call_on(
        &self,
        entry: &Entry,
        endpoint_token: Option<&EndpointToken>,
        shared: SharedParams,
        target: &Instance,
        invocation: &Invocation,
        timeout: Duration,
    ) -> Result<Value> {
        let tls = shared.ssl_enabled;
        if let Some(typed) = &invocation.typed
            && let Some(proto) = typed.0.protobuf()
        {
            let body: &dyn switchman_core::TypedBody = &*typed.0;
            return self
                .call_idl(
                    entry,
                    endpoint_token,
                    tls,
                    target,
                    invocation,
                    (proto, body),
                    timeout,
                )
                .await;
        }
        {
            let service = service_name(target);
            let codec = self.codec_for(&shared, service, &invocation.method);
            let message = codec.encode(invocation)?;
            let extra = codec.metadata(invocation);
            let attachments: std::borrow::Cow<'_, [(String, String)]> = if extra.is_empty() {
                std::borrow::Cow::Borrowed(&invocation.attachments)
            } else {
                let mut all = invocation.attachments.clone();
                for (k, v) in extra {
                    if !all.iter().any(|(key, _)| key.eq_ignore_ascii_case(k)) {
                        all.push((k.to_string(), v.to_string()));
                    }
                }
                std::borrow::Cow::Owned(all)
            };
            let call = Unary {
                service,
                method: codec.path_method(invocation),
                content_type: codec.content_type(),
                message: &message,
                attachments: &attachments,
            };
            let token = token::to_add(endpoint_token, target, &attachments, true);
            let answer = self
                .unary_answer(entry, target, call, token.as_ref(), tls, timeout)
                .await?;
            let cx = ReplyContext {
                address: target.address(),
                headers: Some(&answer.headers),
                trailers: answer.trailers.as_ref(),
            };
            codec.decode_reply(invocation, answer.message, &cx)
        }
    }
}

impl TripleInvoker {
    /// A protobuf (IDL) call ([`switchman_core::TypedBody::protobuf`]): the message as is, at
    /// `/{proto service}/{method}`, `application/grpc+proto`, no codec. A unary call hands
    /// the reply message to the body's `read_result`; a server-streaming one
    /// ([`switchman_core::TypedBody::server_stream`]) hands the opened stream to its sink.
    /// Either returns the JSON the body answers. `ssl_enabled`: the provider's
    /// `ssl-enabled`, as read.
    #[allow(clippy::too_many_arguments)]
    async fn call_idl(
        &self,
        entry: &Entry,
        endpoint_token: Option<&EndpointToken>,
        ssl_enabled: bool,
        target: &Instance,
        invocation: &Invocation,
        (proto, body): (switchman_core::Protobuf<'_>, &dyn switchman_core::TypedBody),
        timeout: Duration,
    ) -> Result<Value> {
        let call = Unary {
            service: proto.service,
            method: &invocation.method,
            content_type: IDL_CONTENT_TYPE,
            message: proto.message,
            attachments: &invocation.attachments,
        };
        let token = token::to_add(endpoint_token, target, &invocation.attachments, true);
        if let Some(sink) = body.server_stream() {
            let replies = self
                .open_stream(entry, target, call, token.as_ref(), ssl_enabled, timeout)
                .await?;
            return Ok(sink.opened(replies));
        }
        let answer = self
            .unary_answer(entry, target, call, token.as_ref(), ssl_enabled, timeout)
            .await?;
        body.read_result(&answer.message).map(|(_, v)| v)
    }

    /// Opens a server-streaming call: succeeds once the provider answered with a gRPC head
    /// within `timeout`; the stream then ends at the same deadline (gRPC's: a deadline
    /// covers the whole call, and `grpc-timeout` tells the provider so).
    async fn open_stream(
        &self,
        entry: &Entry,
        target: &Instance,
        call: Unary<'_>,
        token: Option<&Token>,
        ssl_enabled: bool,
        timeout: Duration,
    ) -> Result<Box<dyn switchman_core::MessageStream>> {
        let (address, method) = (target.address(), call.method);
        let deadline = crate::config::deadline_after(timeout);
        let request = (entry, target, call, token, ssl_enabled);
        let (body, ended) = self
            .within(request, deadline, timeout, |response| async move {
                let (parts, body) = response.into_parts();
                let ended = check_head(&parts, address, method)?;
                Ok((body, ended))
            })
            .await?;
        trace!(address, method, ended, "Triple server stream opened");
        Ok(Box::new(stream::ReplyStream::new(
            body,
            stream::Limits {
                address: address.to_string(),
                method: method.to_string(),
                deadline,
                timeout,
                max_message: self.max_message,
            },
            ended,
        )))
    }
}

/// The content type of a protobuf (IDL) call: gRPC's, what Dubbo's IDL stubs send.
pub const IDL_CONTENT_TYPE: &str = "application/grpc+proto";

/// This module's README (folded into the workspace README), compiled as doctests.
#[doc = include_str!("README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod token_tests {
    use super::*;

    fn tokens(target: &Arc<Instance>, attachments: &[(String, String)]) -> Vec<String> {
        let endpoint = EndpointToken::new(target);
        let token = token::to_add(Some(&endpoint), target, attachments, true);
        let call = Unary {
            service: "com.foo.Greeter",
            method: "hello",
            content_type: "application/grpc",
            message: b"",
            attachments,
        };
        let req = build_request(target, &call, token.as_ref(), Instant::now()).unwrap();
        req.headers()
            .get_all("token")
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }

    fn with_token(token: &str) -> Arc<Instance> {
        Arc::new(
            Instance::builder("127.0.0.1", 50051)
                .protocol(switchman_core::Protocol::Tri)
                .param("token", token)
                .build(),
        )
    }

    #[tokio::test]
    async fn the_providers_token_is_the_token_header_unless_the_call_has_its_own() {
        let uuid = "3f1d5c8e-2b7a-4c3e-9f1a-0d2b4c6e8a1f";
        assert_eq!(tokens(&with_token(uuid), &[]), [uuid]);
        let own = [("Token".to_string(), "mine".to_string())];
        assert_eq!(
            tokens(&with_token(uuid), &own),
            ["mine"],
            "the call's own, once (header names ignore case)"
        );
        assert!(tokens(&with_token("two\nlines"), &[]).is_empty());
        assert!(tokens(&with_token(&"x".repeat(257)), &[]).is_empty());
        let none = Arc::new(Instance::builder("127.0.0.1", 50051).build());
        assert!(tokens(&none, &[]).is_empty());
    }
}

#[cfg(test)]
mod retry_elsewhere_tests {
    use super::retry_elsewhere;
    use std::fmt;

    #[derive(Debug)]
    struct Msg(&'static str, Option<Box<Msg>>);
    impl fmt::Display for Msg {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Msg {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|m| m as _)
        }
    }

    #[test]
    fn goaway_and_refused_stream_are_not_strikes() {
        let wrap = |inner: &'static str| Msg("http2 error", Some(Box::new(Msg(inner, None))));
        assert!(retry_elsewhere(&wrap(
            "stream error received: refused stream before processing any application logic"
        )));
        assert!(retry_elsewhere(&wrap(
            "connection error received: not a result of an error"
        )));
        assert!(!retry_elsewhere(&wrap(
            "connection error received: unspecific protocol error detected"
        )));
        assert!(!retry_elsewhere(&wrap("connection reset by peer")));
    }
}
