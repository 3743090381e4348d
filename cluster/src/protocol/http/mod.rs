use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method, StatusCode};
use serde_json::Value;
use switchman_core::{BoxFuture, Error, Instance, Invocation, Invoker, MakeEndpoint, Result};
use tracing::debug;

/// How much of an error body is kept in a business error's message.
const MAX_ERROR_BODY: usize = 1024;
/// Default of [`HttpInvoker::max_body`]: 16 MiB, as Triple's message limit.
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;
/// Default of [`HttpInvoker::with_drain_grace`] and `TripleInvoker::drain_grace`: 10 s,
/// Dubbo's shutdown wait.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(10);

/// A REST mapping for one method: HTTP method and a path template whose `{0}`, `{1}`, ...
/// are replaced by the arguments (percent-encoded). Arguments not used in the path form the
/// JSON body (one value, or an array when several) for methods that carry a body.
#[derive(Debug, Clone)]
pub struct RestRoute {
    method: Method,
    template: String,
}

impl RestRoute {
    /// `GET /users/{0}` and the like. The template must start with `/`.
    pub fn new(method: Method, template: &str) -> Result<Self> {
        if !template.starts_with('/') {
            return Err(Error::bad_config(format!(
                "REST path template {template:?} must start with '/'"
            )));
        }
        Ok(RestRoute {
            method,
            template: template.to_string(),
        })
    }
}

/// Calls HTTP providers through one shared `reqwest::Client` (connection pooling, per-call
/// timeout).
///
/// Default mapping (Dubbo Triple's HTTP/JSON unary convention): `POST
/// http://{host}:{port}/{service}/{method}` with the arguments as a JSON array body and the
/// attachments as headers. Methods given a [`RestRoute`] use it instead.
///
/// Classification, decided here: connect errors, timeouts and 502/503/504 are retryable
/// transport errors; any other non-2xx status is a business error (the provider's answer),
/// never retried. A 503 with `connection: close` (a provider draining) is retried elsewhere but
/// is no outlier strike. A 2xx body is parsed as JSON (empty body: `null`); one that is not
/// JSON is a transport error that is not retried (the provider ran the call). Bodies are read
/// up to [`HttpInvoker::max_body`] (16 MiB); a larger one fails the call, not retried.
#[derive(Debug, Clone)]
pub struct HttpInvoker {
    client: reqwest::Client,
    rest: HashMap<String, RestRoute>,
    max_body: usize,
    /// `http` or, after [`HttpInvoker::tls`], `https`.
    scheme: &'static str,
}

impl Default for HttpInvoker {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpInvoker {
    /// An invoker with its own client (pooled, `TCP_NODELAY`), whose connections close after
    /// [`DEFAULT_DRAIN_GRACE`] without a call: see [`HttpInvoker::with_drain_grace`].
    pub fn new() -> Self {
        Self::with_drain_grace(DEFAULT_DRAIN_GRACE)
    }

    /// An invoker whose pooled connections close `grace` after their last call. This is how a
    /// provider the registry removed is drained: the snapshot stops routing calls to it at
    /// once, calls in flight finish, and its connections, idle from then on, close within one
    /// to two `grace` periods (the pool's idle sweep). Live providers whose traffic pauses
    /// longer than `grace` reconnect on their next call.
    pub fn with_drain_grace(grace: Duration) -> Self {
        Self::with_client(Self::client(grace, None))
    }

    fn client(
        grace: Duration,
        tls: Option<&tokio_rustls::rustls::ClientConfig>,
    ) -> reqwest::Client {
        // reqwest with `rustls-no-provider` would look for the process's default crypto
        // provider (and panic without one); a client always gets its TLS config from here:
        // the caller's, or for cleartext-only use one on ring (the provider Triple uses) that
        // trusts nothing, so nothing process-wide is installed.
        let config = match tls {
            Some(config) => config.clone(),
            None => cleartext_only_tls(),
        };
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(grace)
            .no_proxy()
            // A redirect would replay the call's body and attachments to wherever a provider
            // points: a provider answers, it does not send the call elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .use_preconfigured_tls(config)
            .build()
            .expect("a reqwest client with a preconfigured rustls config builds")
    }

    /// An invoker on your own client (calls go over `http://`; for `https://` build the
    /// client with your TLS settings and call [`HttpInvoker::https`]).
    pub fn with_client(client: reqwest::Client) -> Self {
        HttpInvoker {
            client,
            rest: HashMap::new(),
            max_body: DEFAULT_MAX_BODY,
            scheme: "http",
        }
    }

    /// Calls every provider over HTTPS with `config` (its roots, client certificate, ALPN:
    /// add `h2` and `http/1.1` to `alpn_protocols` to let providers speak HTTP/2), as
    /// [`TripleInvoker::tls`](super::triple::TripleInvoker::tls) does for Triple; the rustls
    /// crate is [`crate::triple::rustls`](super::triple::rustls). Connections drain as
    /// with [`HttpInvoker::with_drain_grace`] ([`DEFAULT_DRAIN_GRACE`]). A provider that does
    /// not speak TLS fails the call as a transport error naming it.
    pub fn tls(self, config: std::sync::Arc<tokio_rustls::rustls::ClientConfig>) -> Self {
        HttpInvoker {
            client: Self::client(DEFAULT_DRAIN_GRACE, Some(&config)),
            scheme: "https",
            ..self
        }
    }

    /// Uses `https://` URLs with the client given to [`HttpInvoker::with_client`] (which
    /// must then carry the TLS settings).
    pub fn https(mut self) -> Self {
        self.scheme = "https";
        self
    }

    /// The largest response body read (default [`DEFAULT_MAX_BODY`], 16 MiB).
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Maps `method` to a REST route (Spring-Cloud-style providers).
    pub fn rest_route(mut self, method: &str, route: RestRoute) -> Self {
        self.rest.insert(method.to_string(), route);
        self
    }

    fn request(
        &self,
        target: &Instance,
        inv: &Invocation,
        timeout: Duration,
    ) -> reqwest::RequestBuilder {
        let base = format!("{}://{}", self.scheme, target.address());
        let builder = match self.rest.get(&inv.method) {
            None => {
                let mut url = base;
                let _ = write!(url, "/{}/{}", target.service().interface, inv.method);
                self.client.post(url).json(&inv.arguments)
            }
            Some(route) => {
                let (path, rest) = fill_template(&route.template, &inv.arguments);
                let b = self
                    .client
                    .request(route.method.clone(), format!("{base}{path}"));
                let has_body = !matches!(route.method, Method::GET | Method::HEAD | Method::DELETE);
                match (has_body, rest.len()) {
                    (false, _) | (true, 0) => b,
                    (true, 1) => b.json(&rest[0]),
                    (true, _) => b.json(&rest),
                }
            }
        };
        let mut builder = builder.timeout(timeout);
        for (k, v) in &inv.attachments {
            match (
                HeaderName::try_from(k.as_str()),
                HeaderValue::try_from(v.as_str()),
            ) {
                (Ok(name), Ok(value)) => builder = builder.header(name, value),
                _ => debug!(key = %k, "attachment is not a valid HTTP header; not sent"),
            }
        }
        builder
    }
}

/// Replaces `{i}` with argument `i` (strings raw, others as JSON text, percent-encoded);
/// returns the path and the arguments not used.
fn fill_template(template: &str, args: &[Value]) -> (String, Vec<Value>) {
    let mut used = vec![false; args.len()];
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find('}')
            .and_then(|close| after[..close].parse::<usize>().ok().map(|i| (close, i)))
        {
            Some((close, i)) if i < args.len() => {
                used[i] = true;
                let text = match &args[i] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push_str(&switchman_core::url::encode_component(&text).replace('+', "%20"));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let unused = args
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .map(|(a, _)| a.clone())
        .collect();
    (out, unused)
}

/// The TLS config of a client that calls over `http://` only: ring's provider, no root (an
/// `https://` URL could not be verified and fails).
fn cleartext_only_tls() -> tokio_rustls::rustls::ClientConfig {
    use tokio_rustls::rustls;
    rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth()
}

/// The HTTP/2 reason when `e` (or an error it wraps) is the provider refusing new streams:
/// a GOAWAY (it is shutting down: calls it did not start may go elsewhere) or REFUSED_STREAM
/// (it did not process the stream). Read from h2's typed error, not from its message.
fn h2_refusal(e: &(dyn std::error::Error + 'static)) -> Option<h2::Reason> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h2e) = err.downcast_ref::<h2::Error>() {
            if h2e.is_go_away() || h2e.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return h2e.reason();
            }
            return None;
        }
        cur = err.source();
    }
    None
}

fn classify(e: reqwest::Error, target: &Instance, method: &str) -> Error {
    let addr = target.address();
    if let Some(reason) = h2_refusal(&e) {
        // The provider is draining or refused the stream before processing it: retry
        // elsewhere, no outlier strike (a deploy is not a fault).
        return Error::transport(format!(
            "{addr} refused {method} over HTTP/2 ({reason:?}): retrying elsewhere"
        ))
        .with_source(e)
        .with_outlier_strike(false);
    }
    if e.is_timeout() {
        Error::timeout(format!("{addr} did not answer {method} in time")).with_source(e)
    } else if e.is_connect() {
        Error::transport(format!("cannot connect to {addr}")).with_source(e)
    } else {
        Error::transport(format!("HTTP call of {method} on {addr} failed")).with_source(e)
    }
}

/// As a [`MakeEndpoint`], every endpoint shares this invoker's `reqwest::Client` (its
/// connection pool is reqwest's, by address): the client of an endpoint is a clone (reference
/// counts). A departed provider's idle connections close after the drain grace, as reqwest's
/// idle timeout (see [`HttpInvoker::with_drain_grace`]).
impl MakeEndpoint for HttpInvoker {
    fn make(&self, _instance: &std::sync::Arc<Instance>) -> std::sync::Arc<dyn Invoker> {
        std::sync::Arc::new(self.clone())
    }
}

impl Invoker for HttpInvoker {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        inv: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        // A protobuf (IDL) call has no JSON arguments to send: refused before any request.
        if let Some(p) = inv.typed.as_ref().and_then(|t| t.0.protobuf()) {
            let e = Error::bad_config(format!(
                "{}/{} is a protobuf (IDL) call: only Triple (tri://) providers carry it, not \
                 {} at {}",
                p.service,
                inv.method,
                target.protocol(),
                target.address()
            ))
            .with_retryable(false);
            return Box::pin(async move { Err(e) });
        }
        let req = self.request(target, inv, timeout);
        Box::pin(async move {
            let resp = req
                .send()
                .await
                .map_err(|e| classify(e, target, &inv.method))?;
            let status = resp.status();
            let closing = connection_close(resp.headers());
            let body = read_body(resp, self.max_body, target, &inv.method).await?;
            if status.is_success() {
                if body.iter().all(u8::is_ascii_whitespace) {
                    return Ok(Value::Null);
                }
                return serde_json::from_slice(&body).map_err(|e| {
                    Error::transport(format!(
                        "{} answered {} with a body that is not JSON",
                        target.address(),
                        inv.method
                    ))
                    .with_source(e)
                    // It ran the call: another attempt could repeat its side effects.
                    .with_retryable(false)
                });
            }
            let text =
                String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)]).into_owned();
            let msg = format!(
                "{} answered {} with HTTP {}: {}",
                target.address(),
                inv.method,
                status.as_u16(),
                text.trim()
            );
            Err(status_error(status, closing, msg))
        })
    }

    /// reqwest's request timeout covers connecting, the request and the whole body.
    fn bounds_timeout(&self) -> bool {
        true
    }
}

/// The body, refused past `max` bytes: by its `content-length` before reading, else while the
/// chunks arrive. Either way the provider answered, so the error is not retried.
async fn read_body(
    mut resp: reqwest::Response,
    max: usize,
    target: &Instance,
    method: &str,
) -> Result<bytes::Bytes> {
    let too_big = || {
        Error::new(
            switchman_core::ErrorKind::LimitExceeded,
            format!(
                "{} answered {method} with a body over the limit of {max} bytes",
                target.address()
            ),
        )
        .with_retryable(false)
    };
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| classify(e, target, method))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Whether the response carries `connection: close`.
fn connection_close(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("close"))
}

/// The error for a non-2xx `status`: 502/503/504 are retryable transport errors, the rest
/// business errors. A 503 with `connection: close` is a provider draining or shedding load in
/// an orderly way: retried elsewhere, but no outlier strike.
fn status_error(status: StatusCode, closing: bool, msg: String) -> Error {
    match status {
        StatusCode::SERVICE_UNAVAILABLE if closing => {
            Error::transport(msg).with_outlier_strike(false)
        }
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => {
            Error::transport(msg)
        }
        _ => Error::business(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_503_with_connection_close_is_retried_but_no_strike() {
        let mut h = http::HeaderMap::new();
        assert!(!connection_close(&h));
        h.insert(
            http::header::CONNECTION,
            HeaderValue::from_static("keep-alive, Close"),
        );
        assert!(connection_close(&h));
        let e = status_error(StatusCode::SERVICE_UNAVAILABLE, true, "draining".into());
        assert!(e.is_retryable() && !e.counts_as_strike());
        let e = status_error(StatusCode::SERVICE_UNAVAILABLE, false, "down".into());
        assert!(e.is_retryable() && e.counts_as_strike());
        let e = status_error(StatusCode::BAD_GATEWAY, true, "bad".into());
        assert!(e.counts_as_strike(), "only a 503 says 'draining'");
        let e = status_error(StatusCode::INTERNAL_SERVER_ERROR, true, "npe".into());
        assert!(e.is_business() && !e.counts_as_strike());
    }

    #[test]
    fn templates_fill_and_leave_the_rest_for_the_body() {
        let (p, rest) = fill_template(
            "/users/{0}/orders/{2}",
            &[json!("a b"), json!({"x": 1}), json!(7)],
        );
        assert_eq!(p, "/users/a%20b/orders/7");
        assert_eq!(rest, vec![json!({"x": 1})]);
        let (p, _) = fill_template("/x/{9}/{y}", &[]);
        assert_eq!(p, "/x/{9}/{y}");
        assert!(RestRoute::new(Method::GET, "users").is_err());
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    /// An error wrapping another, as reqwest and hyper wrap h2's.
    #[derive(Debug)]
    struct Wrapped(Box<dyn std::error::Error + Send + Sync>);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("request failed")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self.0.as_ref())
        }
    }

    #[test]
    fn refusals_are_read_from_h2s_typed_reason() {
        let refused = Wrapped(Box::new(h2::Error::from(h2::Reason::REFUSED_STREAM)));
        assert_eq!(h2_refusal(&refused), Some(h2::Reason::REFUSED_STREAM));
        // A stream reset for another reason is a failure of that call, not a refusal.
        let cancel = Wrapped(Box::new(h2::Error::from(h2::Reason::CANCEL)));
        assert_eq!(h2_refusal(&cancel), None);
        // The words alone do not count.
        let text = Wrapped("GOAWAY REFUSED_STREAM".into());
        assert_eq!(h2_refusal(&text), None);
    }

    /// A provider answering `307` with a `Location` elsewhere: the call is not replayed there
    /// (its body and attachments stay with the provider that was picked) and fails.
    #[tokio::test]
    async fn a_redirect_is_not_followed() {
        use serde_json::json;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let elsewhere_addr = elsewhere.local_addr().unwrap();
        let reached = Arc::new(AtomicUsize::new(0));
        let r = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = elsewhere.accept().await {
                r.fetch_add(1, Ordering::SeqCst);
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ntrue")
                    .await;
            }
        });
        let provider = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = provider.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = provider.accept().await {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = s.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{elsewhere_addr}/x\r\ncontent-length: 0\r\n\r\n"
                );
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        let target = Instance::builder("127.0.0.1", port).build();
        let got = HttpInvoker::new()
            .invoke(
                &target,
                &switchman_core::Invocation::new("hi").with_args(vec![json!(1)]),
                std::time::Duration::from_secs(5),
            )
            .await;
        assert!(got.is_err(), "a 307 is an answer, not a success: {got:?}");
        assert_eq!(
            reached.load(Ordering::SeqCst),
            0,
            "the redirect was followed"
        );
    }

    /// A protobuf (IDL) call has no JSON form: refused at once, nothing sent.
    #[tokio::test]
    async fn a_protobuf_call_is_refused_before_any_request() {
        use std::sync::Arc;
        use switchman_core::{Protobuf, Typed, TypedBody};
        struct Idl;
        impl TypedBody for Idl {
            fn write_args(&self, _out: &mut Vec<u8>) -> Result<()> {
                Err(Error::bad_config("not Hessian"))
            }
            fn each_arg(&self) -> Result<Vec<Vec<u8>>> {
                Err(Error::bad_config("not Hessian"))
            }
            fn read_result(&self, _bytes: &[u8]) -> Result<(usize, Value)> {
                Ok((0, Value::Null))
            }
            fn protobuf(&self) -> Option<Protobuf<'_>> {
                Some(Protobuf {
                    service: "demo.Greeter",
                    message: b"\x0a\x01x",
                })
            }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted: Arc<std::sync::Mutex<Vec<std::net::SocketAddr>>> = Default::default();
        let a = accepted.clone();
        tokio::spawn(async move {
            while let Ok((_, peer)) = listener.accept().await {
                a.lock().unwrap().push(peer);
            }
        });
        let mut inv = switchman_core::Invocation::new("SayHello");
        inv.typed = Some(Typed(Arc::new(Idl)));
        let target = Instance::builder("127.0.0.1", port).build();
        let e = HttpInvoker::new()
            .invoke(&target, &inv, std::time::Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig, "{e}");
        assert!(!e.is_retryable());
        assert!(
            e.message()
                .starts_with("demo.Greeter/SayHello is a protobuf (IDL) call"),
            "{e}"
        );
        // A barrier: connections are accepted in order, so once our own is, any the invoker
        // made was too.
        let probe = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mine = probe.local_addr().unwrap();
        while !accepted.lock().unwrap().contains(&mine) {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            *accepted.lock().unwrap(),
            vec![mine],
            "only the probe connected"
        );
    }
}
