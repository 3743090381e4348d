//! One TCP connection to a provider, multiplexed by every call that uses it.
//!
//! Three tasks per connection, all ended by [`Shared::close`]:
//!
//! - the **writer** drains a queue of frames bounded in frames ([`QUEUE`]) and in bytes
//!   ([`QUEUE_BYTES`]); frames already queued are batched into one write (small ones copied
//!   into a reused buffer, large bodies written as they are), flushed when the queue is empty.
//!   A peer that accepts no byte of a pending write for [`ExchangeConfig::write_timeout`]
//!   (it stopped reading) gets its connection closed;
//! - the **reader** splits the stream into frames, hands each response to the call waiting
//!   for its id (a oneshot in a small map under a std mutex, never held across an await),
//!   answers the provider's heartbeats (with this side's own null body, never the provider's
//!   bytes) and reads its readonly/writeable events. An event body over
//!   [`MAX_EVENT_BODY`] bytes (Java's limit) is a protocol error that closes the connection;
//! - the **heartbeat** timer, every third of the interval, sends a heartbeat when nothing was
//!   read or nothing was written for one interval and closes the connection when nothing was
//!   read for three (Dubbo's `HeartbeatTimerTask` and `ReconnectTimerTask`).
//!
//! A connection that breaks (end of stream, I/O error, bad frame, three silent heartbeat
//! intervals, a stalled write) fails every call waiting on it at once with a retryable
//! transport error, and is never used again. Dropping the last [`Connection`] handle closes
//! it (a call in flight holds a handle, so that happens once it is idle).

mod config;
mod io;
mod shared;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use switchman_core::{Error, ErrorKind, Result};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::debug;

use super::exchange::Header;
#[cfg(doc)]
use super::exchange::event::MAX_EVENT_BODY;
use crate::protocol::tls::{ClientTls, handshake_error, server_name};
use config::QUEUE;
pub(crate) use config::QUEUE_BYTES;
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEARTBEAT, DEFAULT_PAYLOAD, DEFAULT_WRITE_TIMEOUT,
    ExchangeConfig, Response,
};
#[cfg(test)]
pub(crate) use io::MAX_EVENTS_PER_SECOND;
use io::{heartbeat_loop, read_loop, write_loop};
#[cfg(test)]
use shared::Probe;
use shared::{Calls, Frame, Shared, Waiting, cost};

/// One multiplexed connection to a provider. Cheap to clone; clones share the connection,
/// which closes when the last clone is dropped.
#[derive(Clone)]
pub struct Connection {
    handle: Arc<Handle>,
}

/// Closes the connection when the last [`Connection`] goes.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close("no longer used");
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.handle.shared;
        f.debug_struct("Connection")
            .field("address", &s.address)
            .field("in_flight", &self.in_flight())
            .field("readonly", &self.is_readonly())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// Connects to `address` (`host:port`, IPv6 as `[::1]:20880`) within
    /// `config.connect_timeout`. Fails with a retryable transport error.
    pub async fn connect(address: &str, config: ExchangeConfig) -> Result<Connection> {
        let stream = tcp(address, &config).await?;
        let local = stream.local_addr().ok();
        let (rd, wr) = stream.into_split();
        let conn = Self::start(address, config, rd, wr);
        debug!(address, ?local, "dubbo connection established");
        Ok(conn)
    }

    /// [`Connection::connect`] over TLS: the TCP connection and the handshake (checking the
    /// certificate against `address`'s host) together within `config.connect_timeout`.
    /// Fails with a retryable transport error when connecting or the handshake fails, and
    /// with a bad-config error when the host cannot be a TLS server name or the provider's
    /// certificate is rejected (unknown issuer, wrong name, expired).
    pub async fn connect_tls(
        address: &str,
        config: ExchangeConfig,
        tls: &ClientTls,
    ) -> Result<Connection> {
        let name = server_name(address)?;
        let started = Instant::now();
        let stream = tcp(address, &config).await?;
        let local = stream.local_addr().ok();
        let left = config.connect_timeout.saturating_sub(started.elapsed());
        let handshake = tls.connector(false).connect(name, stream);
        let stream = match tokio::time::timeout(left, handshake).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(handshake_error(address, e)),
            Err(_) => {
                return Err(Error::transport(format!(
                    "the TLS handshake with {address} did not end within {} ms",
                    config.connect_timeout.as_millis()
                )));
            }
        };
        let (rd, wr) = tokio::io::split(stream);
        let conn = Self::start(address, config, rd, wr);
        debug!(address, ?local, "dubbo connection established over TLS");
        Ok(conn)
    }

    /// Starts the reader, writer and heartbeat tasks of a connected stream.
    fn start<R, W>(address: &str, config: ExchangeConfig, rd: R, wr: W) -> Connection
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (frames, queue) = mpsc::channel(QUEUE);
        let (stop, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            address: address.to_string(),
            heartbeat: config.heartbeat,
            payload: config.payload,
            write_timeout: config.write_timeout,
            epoch: Instant::now(),
            next_id: AtomicI64::new(0),
            calls: Mutex::new(Calls::default()),
            in_flight: AtomicUsize::new(0),
            frames,
            queue_bytes: Arc::new(Semaphore::new(QUEUE_BYTES)),
            stop,
            closed: AtomicBool::new(false),
            readonly: AtomicBool::new(false),
            readonly_since: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
            last_write: AtomicU64::new(0),
            late: AtomicU64::new(0),
            #[cfg(test)]
            probe: Probe::default(),
        });
        tokio::spawn(read_loop(shared.clone(), rd, shared.stop.subscribe()));
        tokio::spawn(write_loop(
            shared.clone(),
            wr,
            queue,
            shared.stop.subscribe(),
        ));
        if !config.heartbeat.is_zero() {
            tokio::spawn(heartbeat_loop(shared.clone(), shared.stop.subscribe()));
        }
        Connection {
            handle: Arc::new(Handle { shared }),
        }
    }

    /// One two-way request; `body` is the serialized request body, `serialization` its id
    /// ([`HESSIAN2`](super::HESSIAN2)...). Bounded by `timeout`: a timeout error names the
    /// address and the milliseconds, and a response arriving later is dropped.
    ///
    /// Errors: a body over the payload limit fails before sending (limit exceeded, not
    /// retryable); a closed or broken connection fails at once (transport, retryable); a
    /// response over the payload limit fails the call (limit exceeded, not retryable: the
    /// provider did process the request).
    pub async fn request(
        &self,
        serialization: u8,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Response> {
        let s = &*self.handle.shared;
        let len = match i32::try_from(body.len()) {
            Ok(len) if !s.over_payload(body.len()) => len,
            _ => {
                return Err(Error::new(
                    ErrorKind::LimitExceeded,
                    format!(
                        "the request to {} is {} bytes, over the payload limit of {} bytes",
                        s.address,
                        body.len(),
                        s.payload
                    ),
                ));
            }
        };
        let id = s.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        s.register(id, tx)?;
        let waiting = Waiting { shared: s, id };
        let exchange = async {
            let queued = s.queue_bytes.clone().acquire_many_owned(cost(&body)).await;
            let frame = Frame {
                header: Header::request(id, serialization, true, len).encode(),
                body,
                _queued: queued.ok()?,
            };
            #[cfg(test)]
            s.probe_queued();
            s.frames.send(frame).await.ok()?;
            rx.await.ok()
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Some(result)) => {
                // Whoever answered (the reader or `close`) removed the entry.
                std::mem::forget(waiting);
                result
            }
            Ok(None) => {
                drop(waiting);
                Err(s.closed_error())
            }
            Err(_) => {
                drop(waiting);
                Err(Error::timeout(format!(
                    "{} did not answer request {id} within {} ms",
                    s.address,
                    timeout.as_millis()
                )))
            }
        }
    }

    /// Whether the provider sent its readonly event (it is shutting down gracefully, or was
    /// taken offline) and has not sent the writeable event since.
    pub fn is_readonly(&self) -> bool {
        self.handle.shared.readonly.load(Ordering::Acquire)
    }

    /// Whether the connection is closed (broken, timed out by heartbeats, or dropped). A
    /// closed connection never opens again.
    pub fn is_closed(&self) -> bool {
        self.handle.shared.closed.load(Ordering::Acquire)
    }

    /// Requests sent or queued and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.handle.shared.in_flight.load(Ordering::Relaxed)
    }

    /// The address connected to, as given to [`Connection::connect`].
    pub fn address(&self) -> &str {
        &self.handle.shared.address
    }

    /// How long the connection has been readonly (`None` when it is not).
    pub(crate) fn readonly_for(&self) -> Option<Duration> {
        let s = &self.handle.shared;
        if !self.is_readonly() {
            return None;
        }
        let since = s.readonly_since.load(Ordering::Relaxed);
        Some(Duration::from_millis(s.now_ms().saturating_sub(since)))
    }

    /// Whether `self` and `other` are handles of the same connection.
    #[cfg(test)]
    pub(crate) fn same(&self, other: &Connection) -> bool {
        Arc::ptr_eq(&self.handle.shared, &other.handle.shared)
    }

    /// The largest capacity of the read buffer so far, and the bytes read.
    #[cfg(test)]
    pub(crate) fn read_probe(&self) -> (usize, usize) {
        let p = &self.handle.shared.probe;
        (
            p.read_capacity.load(Ordering::SeqCst),
            p.read_bytes.load(Ordering::SeqCst),
        )
    }

    /// The most bytes queued for the writer at once so far.
    #[cfg(test)]
    pub(crate) fn queued_high_water(&self) -> usize {
        self.handle.shared.probe.queued_high.load(Ordering::SeqCst)
    }

    /// Responses that came after their call had given up.
    #[cfg(test)]
    pub(crate) fn late_responses(&self) -> u64 {
        self.handle.shared.late.load(Ordering::Relaxed)
    }
}

/// A TCP connection to `address` within `config.connect_timeout`, `TCP_NODELAY` on.
async fn tcp(address: &str, config: &ExchangeConfig) -> Result<TcpStream> {
    let ms = config.connect_timeout.as_millis();
    match tokio::time::timeout(config.connect_timeout, TcpStream::connect(address)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => {
            Err(Error::transport(format!("cannot connect to {address}: {e}")).with_source(e))
        }
        Err(_) => Err(Error::transport(format!(
            "connecting to {address} timed out after {ms} ms"
        ))),
    }
}
