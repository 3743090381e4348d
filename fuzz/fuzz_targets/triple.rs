//! What a Triple peer sends: the length-prefixed stream splits into the same messages however
//! it is cut, within the message limit; every message parses as a request or a response
//! wrapper or is refused (what parses encodes back to bytes that parse the same), a wrapped
//! reply decodes to JSON or an error, a wrapped Java call decodes or gets a status; the
//! `grpc-status`, `grpc-message` and `grpc-timeout` header values parse or are refused. Never
//! a panic.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use switchman_cluster::triple::framing::{FrameDecoder, FrameError};
use switchman_cluster::triple::metadata::{decode_timeout, encode_timeout};
use switchman_cluster::triple::wrapper::{RequestWrapper, ResponseWrapper};
use switchman_cluster::triple::{
    JavaCall, MessageCodec, ReplyContext, Status, WrapperCodec, status::percent_decode,
};
use switchman_core::Invocation;

/// The messages of `stream` pushed `chunk` bytes at a time, and the error that ended it.
fn messages(stream: &[u8], max: usize, chunk: usize) -> (Vec<Bytes>, Option<FrameError>) {
    let mut d = FrameDecoder::new(max);
    let mut out = Vec::new();
    for part in stream.chunks(chunk) {
        d.push(part);
        loop {
            match d.next_message() {
                Ok(Some(m)) => {
                    assert!(m.len() <= max, "a message over the limit");
                    out.push(m);
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, d.finish().err())
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    match shape % 4 {
        0 | 1 => {
            let max = if shape % 2 == 0 { 64 } else { 1 << 20 };
            let chunk = 1 + usize::from(shape >> 2);
            let (msgs, end) = messages(rest, max, chunk);
            let whole = messages(rest, max, rest.len().max(1));
            assert_eq!(whole.0, msgs, "the same messages however the stream is cut");
            assert_eq!(whole.1.is_some(), end.is_some());
            let inv = Invocation::new("getUser").with_types(["long"]);
            let cx = ReplyContext {
                address: "10.0.0.1:50051",
                headers: None,
                trailers: None,
            };
            for m in msgs {
                if let Ok(w) = ResponseWrapper::decode(&m) {
                    assert_eq!(ResponseWrapper::decode(&w.encode()).as_ref(), Ok(&w));
                }
                if let Ok(w) = RequestWrapper::decode(&m) {
                    assert_eq!(RequestWrapper::decode(&w.encode()).as_ref(), Ok(&w));
                }
                let _ = WrapperCodec::new().decode_reply(&inv, m.clone(), &cx);
                let _ = JavaCall::decode("org.example.UserService", "getUser", &m);
                let _ = JavaCall::decode("org.example.UserService", "$invoke", &m);
            }
        }
        2 => {
            // grpc-status, then grpc-message after the first NUL.
            let (code, message) = match rest.iter().position(|&b| b == 0) {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            if let Some(s) = Status::from_header_values(code, message) {
                let _ = s.into_error("10.0.0.1:50051", "getUser");
            }
            let _ = percent_decode(rest);
        }
        _ => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            if let Some(d) = decode_timeout(text) {
                // What this side sends on for it parses, and is never shorter.
                let again =
                    decode_timeout(&encode_timeout(d)).expect("our own grpc-timeout parses");
                assert!(again >= d, "{text:?}: {d:?} sent on as {again:?}");
            }
        }
    }
});
