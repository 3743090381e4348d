//! The 16-byte header of Dubbo's exchange protocol (Java's `ExchangeCodec`), its flags, the
//! response status codes, and the few event bodies the transport itself reads and writes.
//!
//! ```text
//! 0      2       3        4                 12           16
//! +------+-------+--------+-----------------+------------+---------------+
//! | DABB | flags | status | request id, i64 | length i32 | body (length) |
//! +------+-------+--------+-----------------+------------+---------------+
//! flags: 0x80 request | 0x40 two-way | 0x20 event | serialization id (low 5 bits)
//! ```
//!
//! Every number is big-endian. `status` is only meaningful in responses (requests send 0).

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// The length of the header.
pub const HEADER_LEN: usize = 16;
/// The magic number that opens every frame.
pub const MAGIC: u16 = 0xDABB;
/// Flag: the frame is a request (otherwise a response).
pub const FLAG_REQUEST: u8 = 0x80;
/// Flag: the request expects a response.
pub const FLAG_TWO_WAY: u8 = 0x40;
/// Flag: the frame is an event (heartbeat, readonly/writeable), not a call.
pub const FLAG_EVENT: u8 = 0x20;
/// The bits of the flags byte holding the serialization id.
pub const SERIALIZATION_MASK: u8 = 0x1F;

/// Serialization id of Hessian2 (Dubbo's default for dubbo://).
pub const HESSIAN2: u8 = 2;
/// Serialization id of protobuf.
pub const PROTOBUF: u8 = 22;
/// Serialization id of fastjson2 (JSONB).
pub const FASTJSON2: u8 = 23;

/// Response status codes (Java's `org.apache.dubbo.remoting.exchange.Response`).
pub mod status {
    /// The call completed; the body is the result.
    pub const OK: u8 = 20;
    /// The peer could not serialize the response (for example over its payload limit).
    pub const SERIALIZATION_ERROR: u8 = 25;
    /// The client gave up waiting.
    pub const CLIENT_TIMEOUT: u8 = 30;
    /// The provider gave up (its own timeout).
    pub const SERVER_TIMEOUT: u8 = 31;
    /// The channel went inactive before the answer (Java's consumer-side marker).
    pub const CHANNEL_INACTIVE: u8 = 35;
    /// The provider could not decode the request.
    pub const BAD_REQUEST: u8 = 40;
    /// The provider could not encode the response.
    pub const BAD_RESPONSE: u8 = 50;
    /// No such service on the provider.
    pub const SERVICE_NOT_FOUND: u8 = 60;
    /// The service failed.
    pub const SERVICE_ERROR: u8 = 70;
    /// The provider failed outside the service.
    pub const SERVER_ERROR: u8 = 80;
    /// The client failed (for example decoding the response).
    pub const CLIENT_ERROR: u8 = 90;
    /// The provider's thread pool is exhausted.
    pub const SERVER_THREADPOOL_EXHAUSTED_ERROR: u8 = 100;
}

/// Event bodies, as serialized by the peer (Java's `CodecSupport.getNullBytesOf` and
/// `ObjectOutput.writeEvent`).
pub mod event {
    /// A heartbeat's body in Hessian2: null, `N`.
    pub const HESSIAN2_NULL: &[u8] = b"N";
    /// The readonly event (`"R"`, graceful shutdown) in Hessian2: a one-character string.
    pub const HESSIAN2_READONLY: &[u8] = &[0x01, b'R'];
    /// The writeable event (`"W"`, the provider accepts calls again) in Hessian2.
    pub const HESSIAN2_WRITEABLE: &[u8] = &[0x01, b'W'];
    /// A heartbeat's body in fastjson2: a 4-byte length, then JSONB null.
    pub const FASTJSON2_NULL: &[u8] = &[0, 0, 0, 1, 0xAF];
    /// The readonly event in fastjson2: a 4-byte length, then a one-character JSONB string.
    pub const FASTJSON2_READONLY: &[u8] = &[0, 0, 0, 2, 0x4A, b'R'];
    /// The writeable event in fastjson2.
    pub const FASTJSON2_WRITEABLE: &[u8] = &[0, 0, 0, 2, 0x4A, b'W'];
    /// Java rejects event bodies longer than this (`deserialization.event.size`).
    pub const MAX_EVENT_BODY: usize = 15;

    /// What an incoming event request says.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Event {
        /// `"R"`: the provider is shutting down; send it no new calls.
        Readonly,
        /// `"W"`: the provider accepts calls again (Dubbo's online command).
        Writeable,
        /// Anything else: a heartbeat (null) or an event this side does not know.
        Other,
    }

    /// Reads an event request's body serialized with `serialization`. Hessian2 and fastjson2
    /// are matched exactly; for any other serialization a short body ending in the letter is
    /// taken for the string (Dubbo's only string events are `"R"` and `"W"`).
    pub fn classify(serialization: u8, body: &[u8]) -> Event {
        let (readonly, writeable) = match serialization {
            super::HESSIAN2 => (HESSIAN2_READONLY, HESSIAN2_WRITEABLE),
            super::FASTJSON2 => (FASTJSON2_READONLY, FASTJSON2_WRITEABLE),
            _ => {
                if body.len() > MAX_EVENT_BODY {
                    return Event::Other;
                }
                return match body.last() {
                    Some(b'R') => Event::Readonly,
                    Some(b'W') => Event::Writeable,
                    _ => Event::Other,
                };
            }
        };
        if body == readonly {
            Event::Readonly
        } else if body == writeable {
            Event::Writeable
        } else {
            Event::Other
        }
    }

    /// The body of a heartbeat (serialized null) in `serialization`, if this side knows it.
    pub fn null_body(serialization: u8) -> Option<&'static [u8]> {
        match serialization {
            super::HESSIAN2 => Some(HESSIAN2_NULL),
            super::FASTJSON2 => Some(FASTJSON2_NULL),
            _ => None,
        }
    }
}

/// A frame header. Build one with [`Header::request`], [`Header::event_request`] or
/// [`Header::response`]; read one with [`Header::decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The flags byte: [`FLAG_REQUEST`], [`FLAG_TWO_WAY`], [`FLAG_EVENT`] and the
    /// serialization id.
    pub flags: u8,
    /// The response status (0 in requests).
    pub status: u8,
    /// The request id (a response carries its request's).
    pub id: i64,
    /// The body length in bytes. Negative only in a malformed frame.
    pub len: i32,
}

/// Why a header could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The frame does not start with `0xDABB`: the peer does not speak the exchange protocol,
    /// or the stream lost its framing.
    BadMagic(u16),
    /// The body length is negative.
    BadLength(i32),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::BadMagic(m) => write!(f, "bad magic 0x{m:04X} (expected 0xDABB)"),
            HeaderError::BadLength(l) => write!(f, "negative body length {l}"),
        }
    }
}

impl std::error::Error for HeaderError {}

impl Header {
    /// A call: request, two-way when `two_way`.
    pub fn request(id: i64, serialization: u8, two_way: bool, len: i32) -> Header {
        let mut flags = FLAG_REQUEST | (serialization & SERIALIZATION_MASK);
        if two_way {
            flags |= FLAG_TWO_WAY;
        }
        Header {
            flags,
            status: 0,
            id,
            len,
        }
    }

    /// An event request (a heartbeat when two-way with a null body).
    pub fn event_request(id: i64, serialization: u8, two_way: bool, len: i32) -> Header {
        let mut h = Header::request(id, serialization, two_way, len);
        h.flags |= FLAG_EVENT;
        h
    }

    /// A response to request `id`; an event response (heartbeat answer) when `event`.
    pub fn response(id: i64, serialization: u8, status: u8, event: bool, len: i32) -> Header {
        let mut flags = serialization & SERIALIZATION_MASK;
        if event {
            flags |= FLAG_EVENT;
        }
        Header {
            flags,
            status,
            id,
            len,
        }
    }

    /// Whether this is a request (otherwise a response).
    pub fn is_request(&self) -> bool {
        self.flags & FLAG_REQUEST != 0
    }

    /// Whether the request expects a response.
    pub fn is_two_way(&self) -> bool {
        self.flags & FLAG_TWO_WAY != 0
    }

    /// Whether this is an event (heartbeat, readonly...).
    pub fn is_event(&self) -> bool {
        self.flags & FLAG_EVENT != 0
    }

    /// The serialization id of the body.
    pub fn serialization(&self) -> u8 {
        self.flags & SERIALIZATION_MASK
    }

    /// The 16 bytes on the wire.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..2].copy_from_slice(&MAGIC.to_be_bytes());
        b[2] = self.flags;
        b[3] = self.status;
        b[4..12].copy_from_slice(&self.id.to_be_bytes());
        b[12..16].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Reads a header from the first [`HEADER_LEN`] bytes of `buf`. A bad magic or a negative
    /// length is an error; any flags combination is accepted.
    ///
    /// # Panics
    ///
    /// When `buf` is shorter than [`HEADER_LEN`].
    pub fn decode(buf: &[u8]) -> Result<Header, HeaderError> {
        let b: &[u8; HEADER_LEN] = buf[..HEADER_LEN]
            .try_into()
            .expect("a slice of HEADER_LEN bytes");
        let magic = u16::from_be_bytes([b[0], b[1]]);
        if magic != MAGIC {
            return Err(HeaderError::BadMagic(magic));
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[4..12]);
        let len = i32::from_be_bytes([b[12], b[13], b[14], b[15]]);
        if len < 0 {
            return Err(HeaderError::BadLength(len));
        }
        Ok(Header {
            flags: b[2],
            status: b[3],
            id: i64::from_be_bytes(id),
            len,
        })
    }
}

/// A body announced up to this size is allocated at once when its header arrives; a larger
/// one (possible only with a payload limit above it, or none) grows as its bytes come.
pub const RESERVE_AT_ONCE: usize = 8 * 1024 * 1024;
/// Read granularity, and the chunk in which an oversized body is discarded.
pub const READ_CHUNK: usize = 64 * 1024;

/// What [`FrameReader::next_frame`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A whole frame: its header and its body of `header.len` bytes.
    Whole(Header, Bytes),
    /// A frame announcing a body over the payload limit: its body is skipped as it comes,
    /// without being kept.
    Oversized(Header),
}

/// Why the byte stream cannot be read any further: the connection must close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The header does not decode (lost framing, or not the exchange protocol).
    Header(HeaderError),
    /// An event announcing a body over [`event::MAX_EVENT_BODY`] bytes (Java refuses these:
    /// `deserialization.event.size`).
    EventTooLong(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Header(e) => write!(f, "bad frame: {e}"),
            FrameError::EventTooLong(len) => write!(
                f,
                "protocol error: an event body of {len} bytes (at most {} accepted)",
                event::MAX_EVENT_BODY
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Splits the bytes a peer sends into frames, within bounds: a body over the payload limit is
/// skipped as it arrives (never buffered), a header alone reserves at most
/// [`RESERVE_AT_ONCE`], an event body over 15 bytes or a bad header ends the stream. No I/O:
/// the connection's reader appends what it reads to [`FrameReader::buffer`] and takes frames
/// out with [`FrameReader::next_frame`].
#[derive(Debug)]
pub struct FrameReader {
    buf: BytesMut,
    /// Bytes of an oversized body still to discard.
    skip: usize,
    /// Largest body kept (0: no limit).
    payload: usize,
}

impl FrameReader {
    /// A reader keeping bodies up to `payload` bytes (0: no limit).
    pub fn new(payload: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::with_capacity(READ_CHUNK),
            skip: 0,
            payload,
        }
    }

    /// The buffer the next read appends to, with room for a quarter chunk at least.
    pub fn buffer(&mut self) -> &mut BytesMut {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        &mut self.buf
    }

    /// Appends bytes received (what a read into [`FrameReader::buffer`] does).
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer().extend_from_slice(bytes);
    }

    /// Bytes held, and the capacity reserved for them.
    pub fn held(&self) -> (usize, usize) {
        (self.buf.len(), self.buf.capacity())
    }

    /// The next frame, or `Ok(None)` until more bytes arrive. An error ends the stream: the
    /// connection must close.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.skip > 0 {
            let n = self.skip.min(self.buf.len());
            self.buf.advance(n);
            self.skip -= n;
            if self.skip > 0 {
                return Ok(None);
            }
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = Header::decode(&self.buf).map_err(FrameError::Header)?;
        let len = h.len as usize;
        if h.is_event() && len > event::MAX_EVENT_BODY {
            return Err(FrameError::EventTooLong(len));
        }
        if self.payload > 0 && len > self.payload {
            self.buf.advance(HEADER_LEN);
            self.skip = len;
            return Ok(Some(Frame::Oversized(h)));
        }
        if self.buf.len() < HEADER_LEN + len {
            // The rest of the frame at once when it is no larger than a default payload;
            // else the buffer grows as the bytes come (a header alone reserves nothing big).
            let missing = HEADER_LEN + len - self.buf.len();
            if missing <= RESERVE_AT_ONCE {
                self.buf.reserve(missing);
            }
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        let body = self.buf.split_to(len).freeze();
        Ok(Some(Frame::Whole(h, body)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(h: Header, body: &[u8]) -> Vec<u8> {
        let mut v = h.encode().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn frames_split_at_every_byte_come_out_whole() {
        let mut stream = frame(Header::response(1, HESSIAN2, status::OK, false, 3), b"abc");
        stream.extend(frame(Header::event_request(2, HESSIAN2, true, 1), b"N"));
        stream.extend(frame(
            Header::response(3, HESSIAN2, status::OK, false, 0),
            b"",
        ));
        for cut in 0..=stream.len() {
            let mut r = FrameReader::new(1024);
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                r.push(part);
                while let Some(f) = r.next_frame().expect("well-formed") {
                    got.push(f);
                }
            }
            let ids: Vec<i64> = got
                .iter()
                .map(|f| match f {
                    Frame::Whole(h, _) => h.id,
                    Frame::Oversized(h) => -h.id,
                })
                .collect();
            assert_eq!(ids, [1, 2, 3], "cut at {cut}");
            assert_eq!(
                got[0],
                Frame::Whole(Header::decode(&stream).unwrap(), "abc".into())
            );
        }
    }

    #[test]
    fn an_oversized_body_is_skipped_and_the_next_frame_read() {
        let mut stream = frame(
            Header::response(1, HESSIAN2, status::OK, false, 100),
            &[7; 100],
        );
        stream.extend(frame(
            Header::response(2, HESSIAN2, status::OK, false, 1),
            b"x",
        ));
        let mut r = FrameReader::new(10);
        let mut got = Vec::new();
        for b in &stream {
            r.push(std::slice::from_ref(b));
            while let Some(f) = r.next_frame().unwrap() {
                got.push(f);
            }
            assert!(
                r.held().0 <= HEADER_LEN + 10,
                "an oversized body is never held"
            );
        }
        assert!(matches!(got[0], Frame::Oversized(h) if h.id == 1));
        assert!(matches!(&got[1], Frame::Whole(h, b) if h.id == 2 && &b[..] == b"x"));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn a_long_event_or_a_bad_header_ends_the_stream() {
        let mut r = FrameReader::new(0);
        r.push(&frame(
            Header::event_request(1, HESSIAN2, true, 16),
            &[0; 16],
        ));
        assert_eq!(r.next_frame(), Err(FrameError::EventTooLong(16)));
        let mut r = FrameReader::new(0);
        r.push(&[0xCA, 0xFE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            r.next_frame(),
            Err(FrameError::Header(HeaderError::BadMagic(0xCAFE)))
        );
    }

    #[test]
    fn a_header_alone_reserves_at_most_a_default_payload() {
        let mut r = FrameReader::new(0);
        r.push(&Header::response(1, HESSIAN2, status::OK, false, i32::MAX).encode());
        assert_eq!(r.next_frame(), Ok(None));
        assert!(r.held().1 < 2 * READ_CHUNK, "{:?}", r.held());
        let mut r = FrameReader::new(0);
        r.push(&Header::response(1, HESSIAN2, status::OK, false, 1 << 20).encode());
        assert_eq!(r.next_frame(), Ok(None));
        assert!(r.held().1 >= HEADER_LEN + (1 << 20), "{:?}", r.held());
    }
}
