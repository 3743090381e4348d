//! The codec interface: [`MessageCodec`], the trait every payload codec implements, and the
//! [`ReplyContext`] it may read a reply's headers from. A leaf of the module: the codecs
//! ([`codec`](super::codec), [`wrapper`](super::wrapper)) import it, it imports neither.

use std::fmt;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;
use switchman_core::{Invocation, Result};

/// Turns an invocation's arguments into one message and a reply message into JSON.
///
/// Only `content_type`, `encode` and `decode` are required; the other methods let a codec
/// choose the request path's method, add metadata and read the reply's headers (what the
/// Java wrapper format needs).
pub trait MessageCodec: Send + Sync + fmt::Debug {
    /// The request's `content-type` (`application/grpc` or `application/grpc+{subtype}`).
    fn content_type(&self) -> &'static str;
    /// The request message for `invocation`. An error here is the caller's (bad config or
    /// input, never retried).
    fn encode(&self, invocation: &Invocation) -> Result<Bytes>;
    /// The reply value for `message`, the provider's answer to `invocation`.
    fn decode(&self, invocation: &Invocation, message: Bytes) -> Result<Value>;
    /// The method in the request path (`/{service}/{method}`): the invocation's by default.
    fn path_method<'a>(&self, invocation: &'a Invocation) -> &'a str {
        &invocation.method
    }
    /// Metadata headers sent with `invocation` besides its attachments (none by default).
    fn metadata(&self, _invocation: &Invocation) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// The reply value for `message`, with the response's headers at hand: [`decode`] by
    /// default.
    ///
    /// [`decode`]: MessageCodec::decode
    fn decode_reply(
        &self,
        invocation: &Invocation,
        message: Bytes,
        _reply: &ReplyContext<'_>,
    ) -> Result<Value> {
        self.decode(invocation, message)
    }
}

/// What a codec may read of a successful reply besides its message.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplyContext<'a> {
    /// The provider's address (`host:port`).
    pub address: &'a str,
    /// The response headers.
    pub headers: Option<&'a HeaderMap>,
    /// The trailers.
    pub trailers: Option<&'a HeaderMap>,
}

impl ReplyContext<'_> {
    /// The value of header `name` in the headers, else in the trailers (non-UTF-8: `None`).
    pub fn header(&self, name: &str) -> Option<&str> {
        [self.headers, self.trailers]
            .into_iter()
            .flatten()
            .find_map(|h| h.get(name))
            .and_then(|v| v.to_str().ok())
    }
}
