//! One HTTP/2 exchange of a Triple call: the request as it is sent ([`Unary`], its path and
//! headers) and the answer as it is read (the head's status, the one message, the trailers'
//! `grpc-status`), with the errors both can end in. The invoker ([`super::TripleInvoker`])
//! sends it on a connection and bounds it by the attempt's deadline.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use switchman_core::{Error, Instance, Result};
use tokio::time::Instant;
use tracing::trace;

use super::framing::{self, FrameDecoder};
use super::metadata;
use super::status::{Code, Status};
use crate::protocol::dubbo::token::{TOKEN_KEY, Token};

const USER_AGENT: &str = concat!("switchman/", env!("CARGO_PKG_VERSION"));

/// The error of a call whose `timeout` passed before it was answered (`sent`: after the
/// request left).
pub(super) fn late(address: &str, method: &str, timeout: Duration, sent: bool) -> Error {
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
pub(super) fn retry_elsewhere(e: &(dyn std::error::Error + 'static)) -> bool {
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

/// One encoded unary request, for [`TripleInvoker::unary`](super::TripleInvoker::unary).
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
pub(super) fn service_name(target: &Instance) -> &str {
    let i = target.service().interface.as_ref();
    if i.is_empty() { target.path() } else { i }
}

pub(super) fn timeout_header(left: Duration) -> HeaderValue {
    HeaderValue::try_from(metadata::encode_timeout(left)).unwrap_or(HeaderValue::from_static("0n"))
}

/// The header naming the consumer's application (Dubbo's `TripleHeaderEnum.CONSUMER_APP_NAME_KEY`).
pub(super) const CONSUMER_APP_NAME: &str = "tri-consumer-appname";

pub(super) fn build_request(
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

pub(super) fn invalid(address: &str, method: &str, what: impl fmt::Display) -> Error {
    Error::transport(format!(
        "{address} answered {method} with an invalid Triple response: {what}"
    ))
    .with_retryable(false)
}

/// The status carried by `headers`, if any.
pub(super) fn status_in(headers: &HeaderMap) -> Option<std::result::Result<Status, ()>> {
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
pub(super) struct Answer {
    pub(super) message: Bytes,
    pub(super) headers: HeaderMap,
    pub(super) trailers: Option<HeaderMap>,
}

/// Checks a response's head: `Ok(false)` when messages follow, `Ok(true)` for a
/// trailers-only OK (no message at all), the error of any other status, of an HTTP status
/// other than 200 or of a content type that is not gRPC.
pub(super) fn check_head(
    parts: &http::response::Parts,
    address: &str,
    method: &str,
) -> Result<bool> {
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

pub(super) async fn read_response(
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
