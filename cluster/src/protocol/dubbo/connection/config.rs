//! The settings and limits of a connection, and the response it hands to a call.

use std::time::Duration;

use bytes::Bytes;

#[cfg(doc)]
use super::super::exchange::status;

/// Dubbo's default payload limit, both directions: 8 MiB.
pub const DEFAULT_PAYLOAD: usize = 8 * 1024 * 1024;
/// Dubbo's default heartbeat interval: 60 s.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(60);
/// Dubbo's default connect timeout: 3 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a pending write may go without the peer accepting a byte: 30 s.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Frames waiting for the writer; a caller beyond it waits (within its timeout).
pub(super) const QUEUE: usize = 1024;
/// Bytes (headers and bodies) of the frames queued or being written; a caller beyond it
/// waits (within its timeout), a heartbeat or its answer beyond it is dropped. A frame larger
/// than this counts as this much (it is then alone in the queue).
pub(crate) const QUEUE_BYTES: usize = 16 * 1024 * 1024;
/// Bodies up to this size are copied into the write buffer; larger ones are written directly.
pub(super) const INLINE_BODY: usize = 16 * 1024;
/// The write buffer is written out once it holds this much.
pub(super) const WRITE_CHUNK: usize = 64 * 1024;

/// Settings of the connections to providers.
#[derive(Debug, Clone)]
pub struct ExchangeConfig {
    /// Idle interval after which a heartbeat is sent (Dubbo's `heartbeat`, default 60 s); a
    /// connection on which nothing was read for three intervals is closed. Zero: no
    /// heartbeats and no idle check.
    pub heartbeat: Duration,
    /// Largest body accepted, both ways (Dubbo's `payload`, default 8 MiB; 0: no limit).
    pub payload: usize,
    /// How long establishing a TCP connection may take (default 3 s).
    pub connect_timeout: Duration,
    /// How long a pending write may go without the provider accepting a byte before the
    /// connection is closed (default 30 s; zero: no limit). A provider that stops reading
    /// otherwise holds the queued frames and every call waiting behind them.
    pub write_timeout: Duration,
}

impl Default for ExchangeConfig {
    fn default() -> Self {
        ExchangeConfig {
            heartbeat: DEFAULT_HEARTBEAT,
            payload: DEFAULT_PAYLOAD,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }
}

/// A provider's answer to one request: the header's status and serialization id, and the
/// body, still serialized.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status byte ([`status::OK`] or an error code from [`status`]).
    pub status: u8,
    /// The serialization id of the body.
    pub serialization: u8,
    /// The body: for [`status::OK`] the serialized result, otherwise the error message.
    pub body: Bytes,
}
