//! dubbo://: Dubbo2's exchange protocol over TCP, as Java Apache Dubbo 3.3 speaks it
//! (`ExchangeCodec`, `HeaderExchangeHandler`, `HeartbeatTimerTask`, `DefaultFuture`).
//!
//! This module is the transport: framing, multiplexing, events, limits and the connection
//! lifecycle. Bodies are opaque bytes here (their Hessian2 encoding lives on top).
//!
//! # Frames
//!
//! A 16-byte big-endian [header](exchange::Header): magic `0xDABB`, a flags byte
//! (`0x80` request, `0x40` two-way, `0x20` event, the low 5 bits the serialization id:
//! [`HESSIAN2`] = 2), a status byte (responses: [`status`]), the request id (i64, unique and
//! increasing per connection) and the body length (i32).
//!
//! # Connections
//!
//! A [`Connection`] is one TCP connection shared by every concurrent call (multiplexed by
//! request id): one writer task batches queued frames into one write, one reader task hands
//! each response to its waiting call. A call that times out stops waiting; its response, if
//! it ever comes, is dropped. A broken connection (end of stream, I/O error, bad magic) fails
//! every call in flight at once with a retryable transport error and is replaced by the
//! [`Pool`] on next use.
//!
//! # TLS
//!
//! [`DubboInvoker::tls`]: a provider whose URL says `ssl-enabled=true` is dialled over TLS
//! (rustls, the ring provider; the certificate checked against the provider's registered
//! host), as a Java Dubbo 3.3 provider with an `SslConfig` serves it on its dubbo:// port;
//! see [`ClientTls`].
//!
//! # Events
//!
//! - **Heartbeats** (Dubbo's `HeartbeatTimerTask`/`ReconnectTimerTask`): checked every third
//!   of [`ExchangeConfig::heartbeat`] (default 60 s); after one interval with nothing read or
//!   nothing written the connection sends an event request (two-way, Hessian null `N`);
//!   after three intervals with nothing read it closes. A heartbeat from the provider is
//!   answered at once with an event response (status 20, same id, this side's own null body:
//!   of the request's serialization when it is Hessian2 or fastjson2, else Hessian2's; never
//!   the provider's bytes). An event body over 15 bytes (Java's `deserialization.event.size`)
//!   is a protocol error that closes the connection, and so are more than 64 event requests in
//!   one second (a heartbeat flood: answering one cost the consumer a whole CPU).
//! - **Readonly** (`"R"`, Hessian `0x01 0x52`): a provider shutting down gracefully (its
//!   shutdown hook, `HeaderExchangeServer.close`, or the QoS `gracefulShutdown` command)
//!   sends this one-way event on every connection; [`Connection::is_readonly`] turns true
//!   and the pool sends no new calls there nor opens new connections to that address.
//!   **Writeable** (`"W"`, Dubbo's `GracefulShutdown.writeable()`) undoes it. Beyond Dubbo, a
//!   connection still readonly after three heartbeat intervals (a provider put back online
//!   after the QoS `gracefulShutdown`, which never sends `"W"`) is replaced on next use.
//!   fastjson2-serialized events are understood too.
//!
//! # Limits
//!
//! [`ExchangeConfig::payload`] (default 8 MiB) bounds bodies both ways: a larger request
//! fails before it is sent; a response announcing more fails its call (not retryable: the
//! provider processed it) and its body is read and discarded without breaking the
//! connection. A body is allocated as its bytes arrive beyond 8 MiB, so a header alone
//! (with no payload limit) reserves nothing big.
//!
//! The frames waiting to be written are bounded in number (1024) and in bytes (16 MiB); a
//! call beyond waits within its timeout. A connection whose peer accepts no byte of a pending
//! write for [`ExchangeConfig::write_timeout`] (default 30 s: it stopped reading) is closed.
//!
//! The provider's `connections`, `heartbeat` and `payload` parameters (registry data) are
//! bounded: see `params.rs` for their ranges and what applies outside them.

pub(crate) mod body;
mod connection;
pub mod exchange;
mod invoker;
mod params;
mod pool;
#[cfg(test)]
mod tests;
pub(crate) mod token;

/// The consumer's TLS settings (also [`crate::triple::ClientTls`]).
pub use crate::protocol::tls::{ClientTls, SSL_ENABLED};
pub use body::{Reply, decode_reply};
pub use connection::{
    Connection, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEARTBEAT, DEFAULT_PAYLOAD, DEFAULT_WRITE_TIMEOUT,
    ExchangeConfig, Response,
};
pub use exchange::{FASTJSON2, HESSIAN2, Header, HeaderError, PROTOBUF, status};
pub use invoker::{DubboEndpoint, DubboInvoker};
pub use pool::Pool;
pub use switchman_core::java_types::descriptor;
