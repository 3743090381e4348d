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
//! call. As a directory's endpoint maker ([`MakeEndpoint`](switchman_core::MakeEndpoint)), the invoker gives each endpoint a
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
mod endpoint;
mod exchange;
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
use http::HeaderValue;
use serde_json::Value;
use switchman_core::{BoxFuture, Error, Instance, Invocation, Invoker, Result};
use tokio::time::Instant;
use tracing::trace;

use crate::protocol::endpoint_params::{SharedParams, ssl_enabled};
use crate::protocol::tls::choose;
/// The consumer's TLS settings (also [`crate::dubbo::ClientTls`]).
pub use crate::protocol::tls::{ClientTls, SSL_ENABLED};
#[cfg(feature = "prost")]
pub use codec::ProstCodec;
pub use codec::{JsonCodec, MessageCodec, Payload, RawCodec, ReplyContext};
pub use echo::{EchoOptions, java_instance, serve_echo};
pub use endpoint::TripleEndpoint;
pub use exchange::Unary;
use exchange::{
    Answer, CONSUMER_APP_NAME, build_request, check_head, late, read_response, retry_elsewhere,
    service_name, timeout_header,
};
pub use server::{ServerLimits, TripleReply, TripleRequest, TripleServer};
pub use status::{Code, Status};
/// The rustls crate Switchman's Triple TLS is built on (for `ClientConfig`/`ServerConfig`).
pub use tokio_rustls::rustls;
pub use wrapper::{JavaCall, WrapperCodec};

use crate::protocol::dubbo::token::{self, EndpointToken, Token};
use pool::{ConnectSettings, Entry, Pool};

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

/// What one request is sent with: the endpoint's connection entry, the instance, the request,
/// the token to send and the provider's `ssl-enabled`.
type Outgoing<'a> = (&'a Entry, &'a Instance, Unary<'a>, Option<&'a Token>, bool);

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
