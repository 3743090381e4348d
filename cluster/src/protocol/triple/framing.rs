//! gRPC message framing: every message on a Triple stream is a 5-byte prefix (one compressed
//! flag byte, then the message length as a big-endian `u32`) followed by the message.
//!
//! HTTP/2 DATA frames do not respect message boundaries: a message can arrive split across
//! frames, and one frame can carry several messages. [`FrameDecoder`] reassembles them.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The size of the length prefix.
pub const PREFIX_LEN: usize = 5;

/// The largest message accepted by default (16 MiB), in either direction.
pub const DEFAULT_MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// Frames one uncompressed message.
pub fn encode_message(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(PREFIX_LEN + message.len());
    out.put_u8(0);
    // Message sizes are bounded by the max-message check on the receiving side; a message
    // larger than 4 GiB cannot be framed at all.
    out.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    out.put_slice(message);
    out.freeze()
}

/// Why a stream's bytes are not a valid sequence of messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The compressed flag is set, but no compression was negotiated (Switchman never sends
    /// `grpc-accept-encoding`, so a peer may not compress).
    Compressed,
    /// The flag byte is neither 0 nor 1.
    BadFlag(u8),
    /// The announced length exceeds the limit.
    TooLarge {
        /// The announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The stream ended inside a message.
    Truncated {
        /// Bytes left over.
        pending: usize,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Compressed => {
                f.write_str("compressed message received, but no compression was negotiated")
            }
            FrameError::BadFlag(b) => write!(f, "invalid message flag byte {b:#04x}"),
            FrameError::TooLarge { len, max } => {
                write!(f, "message of {len} bytes exceeds the limit of {max} bytes")
            }
            FrameError::Truncated { pending } => {
                write!(f, "stream ended inside a message ({pending} bytes pending)")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Reassembles length-prefixed messages from arbitrarily split chunks.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE)
    }
}

impl FrameDecoder {
    /// A decoder refusing messages larger than `max` bytes.
    pub fn new(max: usize) -> Self {
        FrameDecoder {
            buf: BytesMut::new(),
            max,
        }
    }

    /// Appends a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete message, `Ok(None)` when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < PREFIX_LEN {
            return Ok(None);
        }
        match self.buf[0] {
            0 => {}
            1 => return Err(FrameError::Compressed),
            b => return Err(FrameError::BadFlag(b)),
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        if self.buf.len() < PREFIX_LEN + len {
            // Reserve once for the rest of this message instead of growing chunk by chunk.
            self.buf.reserve(PREFIX_LEN + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(PREFIX_LEN);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Checks that the stream ended on a message boundary.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Truncated {
                pending: self.buf.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(d: &mut FrameDecoder) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(m) = d.next_message().unwrap() {
            out.push(m);
        }
        out
    }

    #[test]
    fn encodes_flag_length_and_message() {
        let f = encode_message(b"hello");
        assert_eq!(&f[..], b"\x00\x00\x00\x00\x05hello");
        assert_eq!(&encode_message(b"")[..], b"\x00\x00\x00\x00\x00");
    }

    #[test]
    fn reassembles_messages_split_at_every_byte() {
        let mut stream = encode_message(b"first").to_vec();
        stream.extend_from_slice(&encode_message(b""));
        stream.extend_from_slice(&encode_message(&[7u8; 300]));
        for cut in 0..=stream.len() {
            let mut d = FrameDecoder::default();
            let mut got = Vec::new();
            d.push(&stream[..cut]);
            got.extend(decode_all(&mut d));
            d.push(&stream[cut..]);
            got.extend(decode_all(&mut d));
            assert_eq!(got.len(), 3, "cut at {cut}");
            assert_eq!(&got[0][..], b"first");
            assert!(got[1].is_empty());
            assert_eq!(&got[2][..], &[7u8; 300][..]);
            d.finish().unwrap();
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let stream = encode_message(b"abc");
        let mut d = FrameDecoder::default();
        for (i, b) in stream.iter().enumerate() {
            assert_eq!(d.next_message().unwrap(), None, "before byte {i}");
            d.push(&[*b]);
        }
        assert_eq!(d.next_message().unwrap().as_deref(), Some(&b"abc"[..]));
        assert_eq!(d.next_message().unwrap(), None);
    }

    #[test]
    fn rejects_compressed_bad_flags_oversized_and_truncated() {
        let mut d = FrameDecoder::default();
        d.push(b"\x01\x00\x00\x00\x01x");
        assert_eq!(d.next_message(), Err(FrameError::Compressed));

        let mut d = FrameDecoder::default();
        d.push(b"\x02\x00\x00\x00\x01x");
        assert_eq!(d.next_message(), Err(FrameError::BadFlag(2)));

        let mut d = FrameDecoder::new(4);
        d.push(b"\x00\x00\x00\x00\x05");
        assert_eq!(
            d.next_message(),
            Err(FrameError::TooLarge { len: 5, max: 4 })
        );

        let mut d = FrameDecoder::default();
        d.push(b"\x00\x00\x00\x00\x05hel");
        assert_eq!(d.next_message(), Ok(None));
        assert_eq!(d.finish(), Err(FrameError::Truncated { pending: 8 }));
    }
}
