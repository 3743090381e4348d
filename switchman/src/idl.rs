//! Protobuf (IDL) services over Triple ([`Reference::call_idl`], feature `idl`): the request
//! is a prost message sent as is (`application/grpc+proto`, no Dubbo wrapper) at
//! `/{package.Service}/{Rpc}`, the reply decoded into the prost type, and the call goes
//! through the whole cluster (routing, balancing, failover, retries, timeouts, metrics) like
//! every other. `switchman-build` generates typed clients that call this.
//!
//! What routing rules and consistent hashing see: the method (the proto's rpc name), the
//! attachments and the provider's parameters; an IDL call exposes no arguments to them
//! (`arguments[0]` matches nothing, consistent hashing hashes no argument).
//!
//! Only Triple (`tri://`) providers carry an IDL call: a dubbo:// provider fails it at once
//! with a bad-config error (not retried), which names the service and method.
//!
//! A server-streaming rpc ([`Reference::call_idl_server_stream`]) goes through the cluster
//! until a provider accepts it: routing, balancing and failover choose the provider, and
//! an attempt succeeds once that provider answered with its gRPC head. Its replies then
//! come through the [`Streaming`] the call returns, read as the caller asks for them.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use switchman_cluster::Strategy;
use switchman_core::{Error, Invocation, MessageStream, Protobuf, Result, StreamSink, TypedBody};

use crate::{CallContext, Reference};

/// The JSON a Triple call of an IDL service returns in place of the reply it decoded: the
/// index of that reply in the call's [`IdlCall`].
const TOKEN: &str = "$switchman.idl-reply";

/// One IDL call: the encoded request and what its attempts answered (the replies they
/// decoded, or the streams they opened), by the token each returned.
struct IdlCall<Resp> {
    service: String,
    method: String,
    message: Vec<u8>,
    replies: Mutex<Vec<Option<Resp>>>,
}

impl<Resp> IdlCall<Resp> {
    fn new(service: &str, method: &str, message: Vec<u8>) -> Self {
        IdlCall {
            service: service.to_string(),
            method: method.to_string(),
            message,
            replies: Mutex::new(Vec::new()),
        }
    }

    /// Keeps what an attempt answered; returns the token the attempt answers in its place.
    fn keep(&self, answer: Resp) -> Value {
        let mut replies = self.replies.lock().unwrap_or_else(|p| p.into_inner());
        replies.push(Some(answer));
        serde_json::json!({ TOKEN: replies.len() - 1 })
    }

    /// What the call's answer stands for: the kept answer its token names, `Ok(None)` for
    /// failsafe's empty answer (`null`); any other JSON (a mock) is an error.
    fn take_kept(&self, answer: Value, what: impl fmt::Display) -> Result<Option<Resp>> {
        if answer.is_null() {
            return Ok(None);
        }
        if let Some(i) = answer
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get(TOKEN))
            .and_then(Value::as_u64)
        {
            let mut replies = self.replies.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = replies.get_mut(i as usize).and_then(Option::take) {
                return Ok(Some(r));
            }
        }
        Err(Error::bad_config(format!(
            "{}/{}: the answer is not {what} from a provider (a JSON mock cannot answer an IDL \
             call)",
            self.service, self.method,
        )))
    }

    fn request(&self) -> Protobuf<'_> {
        Protobuf {
            service: &self.service,
            message: &self.message,
        }
    }

    fn not_hessian(&self) -> Error {
        Error::bad_config(format!(
            "{}/{} is a protobuf (IDL) call: only Triple (tri://) providers carry it, not \
             dubbo:// or Triple's Hessian wrapper",
            self.service, self.method
        ))
    }
}

impl<Resp: prost::Message + Default + Send + 'static> TypedBody for IdlCall<Resp> {
    fn write_args(&self, _out: &mut Vec<u8>) -> Result<()> {
        Err(self.not_hessian())
    }

    fn each_arg(&self) -> Result<Vec<Vec<u8>>> {
        Err(self.not_hessian())
    }

    fn read_result(&self, bytes: &[u8]) -> Result<(usize, Value)> {
        let reply = Resp::decode(bytes).map_err(|e| {
            Error::business(format!(
                "the reply to {}/{} is not a valid {}: {e}",
                self.service,
                self.method,
                std::any::type_name::<Resp>()
            ))
        })?;
        Ok((bytes.len(), self.keep(reply)))
    }

    fn protobuf(&self) -> Option<Protobuf<'_>> {
        Some(self.request())
    }
}

impl<Resp: Default> IdlCall<Resp> {
    /// The call's reply: the one the transport decoded; failsafe's empty answer (`null`) is the
    /// default message; any other JSON (a mock) is an error.
    fn take(&self, answer: Value) -> Result<Resp> {
        let what = format_args!("a {}", std::any::type_name::<Resp>());
        Ok(self.take_kept(answer, what)?.unwrap_or_default())
    }
}

/// One server-streaming IDL call: the streams its attempts opened.
struct StreamCall(IdlCall<Box<dyn MessageStream>>);

impl TypedBody for StreamCall {
    fn write_args(&self, _out: &mut Vec<u8>) -> Result<()> {
        Err(self.0.not_hessian())
    }

    fn each_arg(&self) -> Result<Vec<Vec<u8>>> {
        Err(self.0.not_hessian())
    }

    fn read_result(&self, _bytes: &[u8]) -> Result<(usize, Value)> {
        Err(Error::bad_config(format!(
            "{}/{} is a server-streaming call: a transport answered it with one reply",
            self.0.service, self.0.method
        )))
    }

    fn protobuf(&self) -> Option<Protobuf<'_>> {
        Some(self.0.request())
    }

    fn server_stream(&self) -> Option<&dyn StreamSink> {
        Some(self)
    }
}

impl StreamSink for StreamCall {
    fn opened(&self, stream: Box<dyn MessageStream>) -> Value {
        self.0.keep(stream)
    }
}

/// The replies of a server-streaming IDL call ([`Reference::call_idl_server_stream`]), in
/// the order the provider sent them. [`Streaming::message`] reads the next one; the stream
/// ends with `Ok(None)` when the provider completed it, or with the error that ended it: the
/// provider's exception (a Triple status, as a unary call's), a broken connection, a reply
/// that is not a valid `T`, or the call's deadline (its `timeout` covers the whole stream,
/// as a gRPC deadline does). After an error it gives `Ok(None)`. Dropping it cancels the
/// call (HTTP/2 `RST_STREAM`).
///
/// Replies are read from the connection only as they are asked for: a provider faster than
/// the reader is held back by HTTP/2 flow control, not buffered.
///
/// It is also a `futures_core::Stream` of `Result<T>` (as tonic's `Streaming` is), for
/// `futures::StreamExt` and `tokio_stream` combinators: `while let Some(reply) =
/// replies.next().await { let reply = reply?; ... }`.
pub struct Streaming<T> {
    replies: Option<Box<dyn MessageStream>>,
    call: Arc<str>,
    reply: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streaming")
            .field("call", &self.call)
            .field("ended", &self.replies.is_none())
            .finish()
    }
}

impl<T: prost::Message + Default> Streaming<T> {
    /// The next reply; `Ok(None)` once the stream ended.
    pub async fn message(&mut self) -> Result<Option<T>> {
        std::future::poll_fn(|cx| self.poll_message(cx))
            .await
            .transpose()
    }

    /// [`Streaming::message`] as a poll (what its `futures_core::Stream` impl runs).
    pub fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        let Some(replies) = self.replies.as_mut() else {
            return Poll::Ready(None);
        };
        let next = match replies.poll_message(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(next) => next,
        };
        let reply = match next {
            None => None,
            Some(Ok(bytes)) => Some(T::decode(bytes).map_err(|e| {
                Error::business(format!(
                    "a reply of {} is not a valid {}: {e}",
                    self.call,
                    std::any::type_name::<T>()
                ))
            })),
            Some(Err(e)) => Some(Err(e)),
        };
        if !matches!(reply, Some(Ok(_))) {
            // Ended, or ended by this error: the call is dropped (cancelled if still open).
            self.replies = None;
        }
        Poll::Ready(reply)
    }
}

impl Reference {
    /// Calls the unary rpc `method` of the protobuf service `service` (the proto's
    /// `package.Service`, the first segment of the request path) with `request`, over Triple,
    /// through the cluster; the reply is decoded as `Resp`. What `switchman-build`'s clients
    /// call. See the module docs (feature `idl`).
    ///
    /// ```no_run
    /// # async fn demo(greeter: switchman::Reference) -> switchman::Result<()> {
    /// use switchman::prost::Message;
    ///
    /// #[derive(Clone, PartialEq, Message)]
    /// #[prost(prost_path = "::switchman::prost")]
    /// struct HelloRequest {
    ///     #[prost(string, tag = "1")]
    ///     name: String,
    /// }
    /// #[derive(Clone, PartialEq, Message)]
    /// #[prost(prost_path = "::switchman::prost")]
    /// struct HelloReply {
    ///     #[prost(string, tag = "1")]
    ///     message: String,
    /// }
    ///
    /// let request = HelloRequest { name: "world".into() };
    /// let context = switchman::CallContext::new();
    /// let reply: HelloReply = greeter
    ///     .call_idl("example.greeter.Greeter", "SayHello", &request, &context)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_idl<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        request: &Req,
        context: &CallContext,
    ) -> Result<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default + Send + 'static,
    {
        self.not_mergeable(service, method)?;
        let call = Arc::new(IdlCall::<Resp>::new(
            service,
            method,
            request.encode_to_vec(),
        ));
        let answer = self
            .invoke(&idl_invocation(method, call.clone(), context))
            .await?;
        call.take(answer)
    }

    /// Calls the server-streaming rpc `method` of the protobuf service `service` with
    /// `request`, over Triple, through the cluster: routing, balancing, retries and failover
    /// choose the provider until one accepts the call (answers its gRPC head within the
    /// call's `timeout`); its replies, decoded as `Resp`, then come through the returned
    /// [`Streaming`], which ends at the same deadline. What `switchman-build`'s clients call
    /// for `rpc M(Req) returns (stream Resp)`. A provider that fails the call before it
    /// opens is an error here (failed over if retryable); after, it ends the stream.
    ///
    /// Per call, the cluster sees the opening: `active` counts and response times cover it,
    /// not the replies that follow. Failsafe's empty answer is an empty stream.
    pub async fn call_idl_server_stream<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        request: &Req,
        context: &CallContext,
    ) -> Result<Streaming<Resp>>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        self.not_mergeable(service, method)?;
        let call = Arc::new(StreamCall(IdlCall::new(
            service,
            method,
            request.encode_to_vec(),
        )));
        let answer = self
            .invoke(&idl_invocation(method, call.clone(), context))
            .await?;
        Ok(Streaming {
            replies: call.0.take_kept(answer, "a stream")?,
            call: format!("{service}/{method}").into(),
            reply: PhantomData,
        })
    }

    fn not_mergeable(&self, service: &str, method: &str) -> Result<()> {
        if self.cluster().settings(method).strategy == Strategy::Mergeable {
            return Err(Error::bad_config(format!(
                "{service}/{method}: an IDL call takes one provider's reply, and mergeable \
                 merges JSON answers"
            )));
        }
        Ok(())
    }
}

impl<T: prost::Message + Default> futures_core::Stream for Streaming<T> {
    type Item = Result<T>;

    fn poll_next(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<T>>> {
        self.get_mut().poll_message(cx)
    }
}

/// The invocation of an IDL call: `method`, the typed body, the context's attachments.
fn idl_invocation(method: &str, body: Arc<dyn TypedBody>, context: &CallContext) -> Invocation {
    let mut inv = Invocation::new(method).with_typed(body);
    for (k, v) in context.attachments() {
        inv.set_attachment(k.clone(), v.clone());
    }
    inv
}

/// Includes the code `switchman-build` generated for a proto package (in a `build.rs`) from
/// `$OUT_DIR/{package}.rs`: `switchman::include_proto!("example.greeter");`.
#[macro_export]
macro_rules! include_proto {
    ($package:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $package, ".rs"));
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Reply {
        #[prost(string, tag = "1")]
        message: String,
    }

    fn call() -> IdlCall<Reply> {
        IdlCall::new("example.Greeter", "SayHello", vec![10, 1, b'x'])
    }

    #[test]
    fn hessian_protocols_are_refused_with_the_call_named() {
        let c = call();
        let e = c.write_args(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("example.Greeter/SayHello"), "{e}");
        assert!(c.each_arg().is_err());
        let p = c.protobuf().unwrap();
        assert_eq!(
            (p.service, p.message),
            ("example.Greeter", &[10, 1, b'x'][..])
        );
    }

    #[test]
    fn replies_come_back_by_their_token_and_bad_bytes_are_a_business_error() {
        let c = call();
        let bytes = prost::Message::encode_to_vec(&Reply {
            message: "hi".into(),
        });
        let (took, token) = c.read_result(&bytes).unwrap();
        assert_eq!(took, bytes.len());
        assert_eq!(c.take(token.clone()).unwrap().message, "hi");
        assert!(c.take(token).is_err(), "a reply is taken once");
        let e = c.read_result(&[0xff, 0xff, 0xff]).unwrap_err();
        assert!(e.is_business(), "{e}");
        assert_eq!(c.take(Value::Null).unwrap(), Reply::default());
        assert!(c.take(serde_json::json!({"message": "mock"})).is_err());
    }

    /// A stream of fixed items.
    struct Fixed(std::collections::VecDeque<Result<prost::bytes::Bytes>>);

    impl MessageStream for Fixed {
        fn poll_message(
            &mut self,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<prost::bytes::Bytes>>> {
            Poll::Ready(self.0.pop_front())
        }
    }

    fn streaming(items: Vec<Result<prost::bytes::Bytes>>) -> (StreamCall, Value) {
        let c = StreamCall(IdlCall::new("example.Greeter", "Count", vec![]));
        assert!(c.server_stream().is_some() && c.protobuf().is_some());
        assert!(c.read_result(b"").is_err(), "no single reply");
        let token = c.opened(Box::new(Fixed(items.into())));
        (c, token)
    }

    fn reply(text: &str) -> prost::bytes::Bytes {
        prost::Message::encode_to_vec(&Reply {
            message: text.into(),
        })
        .into()
    }

    #[tokio::test]
    async fn a_stream_decodes_its_replies_and_ends_at_the_first_error() {
        let (c, token) = streaming(vec![
            Ok(reply("one")),
            Ok(prost::bytes::Bytes::from_static(&[0xff, 0xff])),
            Ok(reply("never read")),
        ]);
        let mut s: Streaming<Reply> = Streaming {
            replies: c.0.take_kept(token, "a stream").unwrap(),
            call: "example.Greeter/Count".into(),
            reply: PhantomData,
        };
        assert_eq!(s.message().await.unwrap().unwrap().message, "one");
        let e = s.message().await.unwrap_err();
        assert!(e.is_business(), "{e}");
        assert!(
            e.to_string()
                .contains("a reply of example.Greeter/Count is not a valid"),
            "{e}"
        );
        assert!(s.message().await.unwrap().is_none(), "ended by its error");
        assert!(format!("{s:?}").contains("ended: true"));
    }

    #[tokio::test]
    async fn a_stream_is_a_futures_stream_of_results() {
        use futures_core::Stream;
        let (c, token) = streaming(vec![Ok(reply("a")), Ok(reply("b"))]);
        let mut s: Streaming<Reply> = Streaming {
            replies: c.0.take_kept(token, "a stream").unwrap(),
            call: "example.Greeter/Count".into(),
            reply: PhantomData,
        };
        let mut got = Vec::new();
        while let Some(r) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut s).poll_next(cx)).await
        {
            got.push(r.unwrap().message);
        }
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn failsafe_is_an_empty_stream_and_a_mock_is_refused() {
        let (c, _) = streaming(vec![]);
        assert!(c.0.take_kept(Value::Null, "a stream").unwrap().is_none());
        let e =
            c.0.take_kept(serde_json::json!(["mock"]), "a stream")
                .err()
                .unwrap();
        assert!(
            e.to_string().contains("is not a stream from a provider"),
            "{e}"
        );
    }
}
