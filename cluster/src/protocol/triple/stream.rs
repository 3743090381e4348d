//! The replies of a server-streaming Triple call, read as the caller asks for them: the
//! response body is polled only when the caller wants the next message, so HTTP/2's flow
//! control holds a fast provider back (nothing is buffered past one frame and one message),
//! and dropping the stream resets the HTTP/2 stream (the provider sees the call cancelled).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Incoming};
use switchman_core::{Error, MessageStream, Result};
use tokio::time::{Instant, Sleep};

use super::exchange::{invalid, status_in};
use super::framing::FrameDecoder;
use super::status::Code;

/// What bounds one stream, and names it in errors.
pub(super) struct Limits {
    pub(super) address: String,
    pub(super) method: String,
    /// The call's deadline: the stream ends with a timeout error when it passes.
    pub(super) deadline: Instant,
    /// The timeout the deadline came from (for the message).
    pub(super) timeout: Duration,
    /// The largest message accepted.
    pub(super) max_message: usize,
}

/// One server-streaming call's replies ([`MessageStream`]).
pub(super) struct ReplyStream {
    body: Incoming,
    decoder: FrameDecoder,
    deadline: Pin<Box<Sleep>>,
    limits: Limits,
    /// The stream has ended (OK, or after the error that ended it).
    done: bool,
}

impl ReplyStream {
    /// The stream of `body`; `ended`: the provider already ended it with OK in its head
    /// (trailers-only: no message).
    pub(super) fn new(body: Incoming, limits: Limits, ended: bool) -> Self {
        ReplyStream {
            body,
            decoder: FrameDecoder::new(limits.max_message),
            deadline: Box::pin(tokio::time::sleep_until(limits.deadline)),
            limits,
            done: ended,
        }
    }

    fn fail(&mut self, e: Error) -> Poll<Option<Result<Bytes>>> {
        self.done = true;
        Poll::Ready(Some(Err(e)))
    }

    fn invalid(&mut self, what: impl std::fmt::Display) -> Poll<Option<Result<Bytes>>> {
        let e = invalid(&self.limits.address, &self.limits.method, what);
        self.fail(e)
    }

    /// The trailers ended the stream: OK ends it, any other status is its error.
    fn trailers(&mut self, trailers: &http::HeaderMap) -> Poll<Option<Result<Bytes>>> {
        match status_in(trailers) {
            Some(Ok(s)) if s.code == Code::Ok => match self.decoder.finish() {
                Ok(()) => {
                    self.done = true;
                    Poll::Ready(None)
                }
                Err(e) => self.invalid(e),
            },
            Some(Ok(s)) => {
                let e = s.into_error(&self.limits.address, &self.limits.method);
                self.fail(e)
            }
            Some(Err(())) => self.invalid("unparsable grpc-status"),
            None => self.invalid("trailers without grpc-status"),
        }
    }
}

impl MessageStream for ReplyStream {
    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes>>> {
        if self.done {
            return Poll::Ready(None);
        }
        loop {
            match self.decoder.next_message() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(message))),
                Ok(None) => {}
                Err(e) => return self.invalid(e),
            }
            if self.deadline.as_mut().poll(cx).is_ready() {
                let Limits {
                    address,
                    method,
                    timeout,
                    ..
                } = &self.limits;
                let e = Error::timeout(format!(
                    "{address} did not end its stream of {method} within {timeout:?}"
                ))
                .with_retryable(false);
                return self.fail(e);
            }
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return self.invalid("the stream ended without grpc-status"),
                Poll::Ready(Some(Err(e))) => {
                    let Limits {
                        address, method, ..
                    } = &self.limits;
                    let e = Error::transport(format!("{address} broke off its stream of {method}"))
                        .with_retryable(false)
                        .with_source(e);
                    return self.fail(e);
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.decoder.push(&data),
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            return self.trailers(&trailers);
                        }
                    }
                },
            }
        }
    }
}
