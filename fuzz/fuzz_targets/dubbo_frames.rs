//! The bytes a dubbo:// provider sends: the frame reader splits them the same however they
//! are cut into reads, never holds a body over the payload limit, reserves at most a default
//! payload for a header alone, and every response body decodes to a reply or an error (never
//! a panic); every event body is classified.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_cluster::dubbo::decode_reply;
use switchman_cluster::dubbo::exchange::{
    Frame, FrameError, FrameReader, HEADER_LEN, MAGIC, READ_CHUNK, RESERVE_AT_ONCE, event,
};
use switchman_core::MAX_MESSAGE;

/// The frames of `stream` read `chunk` bytes at a time, and the error that ended it.
fn split(stream: &[u8], payload: usize, chunk: usize) -> (Vec<Frame>, Option<FrameError>) {
    let mut r = FrameReader::new(payload);
    let mut frames = Vec::new();
    let mut pushed = 0usize;
    // Bytes the frames account for: headers and kept bodies.
    let mut framed = 0usize;
    for part in stream.chunks(chunk) {
        r.push(part);
        pushed += part.len();
        loop {
            match r.next_frame() {
                Ok(Some(f)) => {
                    match &f {
                        Frame::Whole(h, body) => {
                            assert_eq!(body.len(), h.len as usize, "a body of its header's length");
                            assert!(
                                payload == 0 || body.len() <= payload,
                                "a kept body over the limit"
                            );
                            framed += HEADER_LEN + body.len();
                        }
                        Frame::Oversized(h) => {
                            assert!(
                                payload > 0 && h.len as usize > payload,
                                "{h:?} is not oversized"
                            );
                            framed += HEADER_LEN;
                        }
                    }
                    frames.push(f);
                }
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
        let (held, capacity) = r.held();
        assert!(framed + held <= pushed, "more bytes out than in");
        assert!(
            capacity <= 2 * (pushed + RESERVE_AT_ONCE + READ_CHUNK),
            "{capacity} bytes reserved after {pushed} read"
        );
    }
    (frames, None)
}

/// Frames with the right magic built from the fuzzer's bytes (flags, status, a length that
/// may lie, a body), so that most inputs get past the header: 4 bytes per frame, then its body.
fn framed(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut id = 0i64;
    while let [flags, status, len, lie, rest @ ..] = bytes {
        let n = usize::from(*len).min(rest.len());
        let (body, tail) = rest.split_at(n);
        id += 1;
        let announced = match lie % 8 {
            0 => i32::from(*lie) << 16,
            1 => -1,
            _ => n as i32,
        };
        out.extend_from_slice(&MAGIC.to_be_bytes());
        out.extend_from_slice(&[*flags, *status]);
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&announced.to_be_bytes());
        out.extend_from_slice(body);
        bytes = tail;
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let built;
    let stream = if shape & 0x80 != 0 {
        built = framed(rest);
        &built[..]
    } else {
        rest
    };
    let shape = shape & 0x7F;
    let payload = [0usize, 16, 1024, 8 << 20][usize::from(shape & 3)];
    let chunk = 1 + usize::from(shape >> 2);
    let (frames, error) = split(stream, payload, chunk);
    // However the stream was cut, the same frames and the same end.
    assert_eq!(
        split(stream, payload, stream.len().max(1)),
        (frames.clone(), error)
    );
    for f in &frames {
        if let Frame::Whole(h, body) = f {
            if h.is_event() {
                let _ = event::classify(h.serialization(), body);
            } else if !h.is_request() {
                if let Err(e) = decode_reply("10.0.0.1:20880", h.status, body) {
                    assert!(
                        e.message().len() <= MAX_MESSAGE + 64,
                        "an unbounded error message"
                    );
                }
            }
        }
    }
});
