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

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use switchman_core::{Error, ErrorKind, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{debug, info, trace, warn};

use super::exchange::event::MAX_EVENT_BODY;
use super::exchange::{self, FrameError, FrameReader, HEADER_LEN, HESSIAN2, Header, event, status};

/// Dubbo's default payload limit, both directions: 8 MiB.
pub const DEFAULT_PAYLOAD: usize = 8 * 1024 * 1024;
/// Dubbo's default heartbeat interval: 60 s.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(60);
/// Dubbo's default connect timeout: 3 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a pending write may go without the peer accepting a byte: 30 s.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Frames waiting for the writer; a caller beyond it waits (within its timeout).
const QUEUE: usize = 1024;
/// Bytes (headers and bodies) of the frames queued or being written; a caller beyond it
/// waits (within its timeout), a heartbeat or its answer beyond it is dropped. A frame larger
/// than this counts as this much (it is then alone in the queue).
pub(crate) const QUEUE_BYTES: usize = 16 * 1024 * 1024;
/// Bodies up to this size are copied into the write buffer; larger ones are written directly.
const INLINE_BODY: usize = 16 * 1024;
/// The write buffer is written out once it holds this much.
const WRITE_CHUNK: usize = 64 * 1024;

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
        let ms = config.connect_timeout.as_millis();
        let stream = match tokio::time::timeout(config.connect_timeout, TcpStream::connect(address))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(
                    Error::transport(format!("cannot connect to {address}: {e}")).with_source(e),
                );
            }
            Err(_) => {
                return Err(Error::transport(format!(
                    "connecting to {address} timed out after {ms} ms"
                )));
            }
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().ok();
        let (rd, wr) = stream.into_split();
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
        debug!(address, ?local, "dubbo connection established");
        Ok(Connection {
            handle: Arc::new(Handle { shared }),
        })
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

/// A frame for the writer.
struct Frame {
    header: [u8; HEADER_LEN],
    body: Bytes,
    /// Its share of [`QUEUE_BYTES`], given back when the frame is written (or dropped).
    _queued: OwnedSemaphorePermit,
}

/// What a frame with `body` counts against [`QUEUE_BYTES`].
fn cost(body: &[u8]) -> u32 {
    // QUEUE_BYTES fits in u32.
    (HEADER_LEN + body.len()).min(QUEUE_BYTES) as u32
}

/// Request ids are sequential: spread them with a multiplicative hash instead of SipHash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_i64(&mut self, id: i64) {
        self.0 = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Waiters = HashMap<i64, oneshot::Sender<Result<Response>>, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct Calls {
    waiting: Waiters,
    /// Why the connection closed, once it did.
    closed: Option<String>,
}

/// What the handles and the three tasks share.
struct Shared {
    address: String,
    heartbeat: Duration,
    payload: usize,
    write_timeout: Duration,
    /// Timestamps are milliseconds since this instant.
    epoch: Instant,
    next_id: AtomicI64,
    calls: Mutex<Calls>,
    /// `calls.waiting.len()`, readable without the lock (updated under it).
    in_flight: AtomicUsize,
    frames: mpsc::Sender<Frame>,
    /// [`QUEUE_BYTES`] of permits: the bytes queued (closed with the connection).
    queue_bytes: Arc<Semaphore>,
    stop: watch::Sender<bool>,
    closed: AtomicBool,
    readonly: AtomicBool,
    readonly_since: AtomicU64,
    last_read: AtomicU64,
    last_write: AtomicU64,
    late: AtomicU64,
    #[cfg(test)]
    probe: Probe,
}

/// What the tests observe of the buffers.
#[cfg(test)]
#[derive(Default)]
struct Probe {
    read_capacity: AtomicUsize,
    read_bytes: AtomicUsize,
    queued_high: AtomicUsize,
}

/// Removes a call's entry when the call gives up (timeout or cancellation).
struct Waiting<'a> {
    shared: &'a Shared,
    id: i64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let _ = self.shared.take(self.id);
    }
}

impl Shared {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Dubbo's check: a limit of 0 means none.
    fn over_payload(&self, len: usize) -> bool {
        self.payload > 0 && len > self.payload
    }

    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, id: i64, tx: oneshot::Sender<Result<Response>>) -> Result<()> {
        let mut calls = self.lock();
        if let Some(reason) = &calls.closed {
            return Err(self.error(reason));
        }
        calls.waiting.insert(id, tx);
        self.in_flight.store(calls.waiting.len(), Ordering::Relaxed);
        Ok(())
    }

    fn take(&self, id: i64) -> Option<oneshot::Sender<Result<Response>>> {
        let mut calls = self.lock();
        let tx = calls.waiting.remove(&id);
        if tx.is_some() {
            self.in_flight.store(calls.waiting.len(), Ordering::Relaxed);
        }
        tx
    }

    fn error(&self, reason: &str) -> Error {
        Error::transport(format!(
            "the connection to {} closed: {reason}",
            self.address
        ))
    }

    fn closed_error(&self) -> Error {
        let calls = self.lock();
        self.error(calls.closed.as_deref().unwrap_or("closed"))
    }

    /// Closes the connection (once): fails every waiting call with a retryable transport
    /// error saying `reason`, and stops the tasks.
    fn close(&self, reason: &str) {
        let waiting = {
            let mut calls = self.lock();
            if calls.closed.is_some() {
                return;
            }
            calls.closed = Some(reason.to_string());
            self.closed.store(true, Ordering::Release);
            self.in_flight.store(0, Ordering::Relaxed);
            std::mem::take(&mut calls.waiting)
        };
        self.stop.send_replace(true);
        // Callers waiting for room in the queue fail at once.
        self.queue_bytes.close();
        if waiting.is_empty() {
            debug!(address = %self.address, reason, "dubbo connection closed");
        } else {
            info!(address = %self.address, reason, failed = waiting.len(), "dubbo connection closed with calls in flight");
        }
        for (_, tx) in waiting {
            let _ = tx.send(Err(self.error(reason)));
        }
    }

    #[cfg(test)]
    fn probe_queued(&self) {
        let queued = QUEUE_BYTES - self.queue_bytes.available_permits();
        self.probe.queued_high.fetch_max(queued, Ordering::SeqCst);
    }

    fn touch_read(&self) {
        self.last_read.store(self.now_ms(), Ordering::Relaxed);
    }

    fn touch_write(&self) {
        self.last_write.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Queues a frame the transport itself sends (heartbeats and their answers, always a few
    /// bytes of this side's own). Dropped when the queue is full: traffic is flowing then (or
    /// the provider stopped reading), and the reader must never wait on it.
    fn send_control(&self, header: Header, body: &'static [u8]) {
        let Ok(queued) = self.queue_bytes.clone().try_acquire_many_owned(cost(body)) else {
            trace!(address = %self.address, "write queue full or closed: control frame dropped");
            return;
        };
        let frame = Frame {
            header: header.encode(),
            body: Bytes::from_static(body),
            _queued: queued,
        };
        #[cfg(test)]
        self.probe_queued();
        if self.frames.try_send(frame).is_err() {
            trace!(address = %self.address, "write queue full or closed: control frame dropped");
        }
    }

    fn on_frame(&self, h: Header, body: Bytes) {
        if h.is_request() {
            if h.is_event() {
                self.on_event(h, body);
            } else {
                self.on_call(h);
            }
        } else if h.is_event() {
            trace!(address = %self.address, id = h.id, "heartbeat answered");
        } else {
            match self.take(h.id) {
                Some(tx) => {
                    let _ = tx.send(Ok(Response {
                        status: h.status,
                        serialization: h.serialization(),
                        body,
                    }));
                }
                None => self.late(h.id),
            }
        }
    }

    fn late(&self, id: i64) {
        let late = self.late.fetch_add(1, Ordering::Relaxed) + 1;
        debug!(address = %self.address, id, late, "dropped a response whose call had given up");
    }

    /// An event request from the provider.
    fn on_event(&self, h: Header, body: Bytes) {
        match event::classify(h.serialization(), &body) {
            event::Event::Readonly => {
                self.readonly_since.store(self.now_ms(), Ordering::Relaxed);
                if !self.readonly.swap(true, Ordering::AcqRel) {
                    info!(address = %self.address, "provider sent its readonly event (shutting down): no new calls on this connection");
                }
            }
            event::Event::Writeable => {
                if self.readonly.swap(false, Ordering::AcqRel) {
                    info!(address = %self.address, "provider sent its writeable event: calls resume on this connection");
                }
            }
            event::Event::Other if h.is_two_way() => {
                // A heartbeat: answer with the serialized null of the same serialization when
                // this side knows it, else with Hessian2's (Java answers in its own
                // serialization too); never with the provider's bytes.
                let (ser, null) = match event::null_body(h.serialization()) {
                    Some(null) => (h.serialization(), null),
                    None => (HESSIAN2, event::HESSIAN2_NULL),
                };
                trace!(address = %self.address, id = h.id, "answering the provider's heartbeat");
                self.send_control(
                    Header::response(h.id, ser, status::OK, true, null.len() as i32),
                    null,
                );
            }
            event::Event::Other => {
                trace!(address = %self.address, id = h.id, "ignored a one-way event");
            }
        }
    }

    /// A call from the provider (a Dubbo callback): this consumer exports nothing.
    fn on_call(&self, h: Header) {
        if !h.is_two_way() {
            debug!(address = %self.address, id = h.id, "ignored a one-way call from the provider");
            return;
        }
        debug!(address = %self.address, id = h.id, "refused a call from the provider (callbacks are not supported)");
        if h.serialization() == HESSIAN2 {
            // A Hessian2 string of fewer than 32 ASCII characters: its length, then itself.
            const MESSAGE: &[u8] = b"\x19consumer has no callbacks";
            self.send_control(
                Header::response(
                    h.id,
                    HESSIAN2,
                    status::SERVICE_NOT_FOUND,
                    false,
                    MESSAGE.len() as i32,
                ),
                MESSAGE,
            );
        }
    }

    /// A frame announcing more than the payload limit: fail its call (the body is skipped).
    fn oversized(&self, h: &Header) {
        let len = h.len;
        if h.is_request() || h.is_event() {
            warn!(address = %self.address, id = h.id, len, limit = self.payload, "skipping a request or event from the provider over the payload limit");
            return;
        }
        match self.take(h.id) {
            Some(tx) => {
                let e = Error::new(
                    ErrorKind::LimitExceeded,
                    format!(
                        "the response of {} to request {} is {len} bytes, over the payload limit of {} bytes",
                        self.address, h.id, self.payload
                    ),
                )
                .with_retryable(false);
                let _ = tx.send(Err(e));
            }
            None => self.late(h.id),
        }
    }
}

/// Resolves once the connection is closing.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|closed| *closed).await;
}

async fn read_loop(shared: Arc<Shared>, mut rd: OwnedReadHalf, mut stop: watch::Receiver<bool>) {
    tokio::select! {
        reason = read_frames(&shared, &mut rd) => shared.close(&reason),
        () = stopped(&mut stop) => {}
    }
}

/// Event requests (heartbeats, readonly and writeable) a provider may send in one second; more
/// is a flood, and the connection closes. Java providers send one heartbeat per interval (60 s
/// by default) and a readonly event per shutdown: answering a flood costs the consumer a CPU.
pub(crate) const MAX_EVENTS_PER_SECOND: u32 = 64;

/// Counts the provider's event requests per second (see [`MAX_EVENTS_PER_SECOND`]).
struct EventRate {
    since: Instant,
    count: u32,
}

impl EventRate {
    /// Counts one more event; `false` when it is over the rate.
    fn allow(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.since) >= Duration::from_secs(1) {
            self.since = now;
            self.count = 0;
        }
        self.count += 1;
        self.count <= MAX_EVENTS_PER_SECOND
    }
}

/// Reads frames until the stream ends or breaks; returns why.
async fn read_frames(s: &Shared, rd: &mut OwnedReadHalf) -> String {
    use tokio::io::AsyncReadExt;
    let mut frames = FrameReader::new(s.payload);
    let mut events = EventRate {
        since: Instant::now(),
        count: 0,
    };
    loop {
        loop {
            match frames.next_frame() {
                Ok(Some(exchange::Frame::Whole(h, _)))
                    if h.is_request() && h.is_event() && !events.allow() =>
                {
                    warn!(address = %s.address, limit = MAX_EVENTS_PER_SECOND, "the provider sent more events (heartbeats) in a second than the limit: closing the connection");
                    return format!(
                        "protocol error: more than {MAX_EVENTS_PER_SECOND} events (heartbeats) in one second"
                    );
                }
                Ok(Some(exchange::Frame::Whole(h, body))) => s.on_frame(h, body),
                Ok(Some(exchange::Frame::Oversized(h))) => s.oversized(&h),
                Ok(None) => break,
                Err(e) => {
                    if let FrameError::EventTooLong(len) = e {
                        warn!(address = %s.address, len, limit = MAX_EVENT_BODY, "the provider sent an event body over the limit: protocol error, closing the connection");
                    }
                    return e.to_string();
                }
            }
        }
        match rd.read_buf(frames.buffer()).await {
            Ok(0) => return "the provider closed the connection".to_string(),
            Ok(_n) => {
                #[cfg(test)]
                {
                    let p = &s.probe;
                    p.read_bytes.fetch_add(_n, Ordering::SeqCst);
                    p.read_capacity.fetch_max(frames.held().1, Ordering::SeqCst);
                }
                s.touch_read();
            }
            Err(e) => return format!("reading failed: {e}"),
        }
    }
}

async fn write_loop(
    shared: Arc<Shared>,
    mut wr: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Frame>,
    mut stop: watch::Receiver<bool>,
) {
    let stall = shared.write_timeout;
    let work = async {
        let mut buf = BytesMut::with_capacity(WRITE_CHUNK);
        while let Some(first) = queue.recv().await {
            let mut next = Some(first);
            while let Some(frame) = next.take() {
                buf.extend_from_slice(&frame.header);
                if frame.body.len() > INLINE_BODY {
                    write_all(&mut wr, &buf, stall).await?;
                    buf.clear();
                    write_all(&mut wr, &frame.body, stall).await?;
                } else {
                    buf.extend_from_slice(&frame.body);
                    if buf.len() >= WRITE_CHUNK {
                        write_all(&mut wr, &buf, stall).await?;
                        buf.clear();
                    }
                }
                next = queue.try_recv().ok();
            }
            if !buf.is_empty() {
                write_all(&mut wr, &buf, stall).await?;
                buf.clear();
            }
            wr.flush().await?;
            shared.touch_write();
        }
        Ok::<(), std::io::Error>(())
    };
    tokio::select! {
        result = work => {
            if let Err(e) = result {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    warn!(address = %shared.address, error = %e, "closing a connection whose provider stopped reading");
                }
                shared.close(&format!("writing failed: {e}"));
            }
        }
        () = stopped(&mut stop) => {}
    }
}

/// Writes all of `data`, failing when the peer accepts no byte of it for `stall` (zero: no
/// limit): a peer that stops reading fills the socket buffers and then every write waits.
async fn write_all(
    wr: &mut OwnedWriteHalf,
    mut data: &[u8],
    stall: Duration,
) -> std::io::Result<()> {
    if stall.is_zero() {
        return wr.write_all(data).await;
    }
    while !data.is_empty() {
        match tokio::time::timeout(stall, wr.write(data)).await {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => data = &data[n..],
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the provider accepted no byte for {} ms (it stopped reading)",
                        stall.as_millis()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Dubbo's client timers: a heartbeat after one idle interval (nothing read, or nothing
/// written), closing after three intervals with nothing read. Checks every third of the
/// interval, as Dubbo's `HEARTBEAT_CHECK_TICK` does.
async fn heartbeat_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let every = shared.heartbeat;
    let beat = every.as_millis().max(1) as u64;
    let tick = (every / 3).max(Duration::from_millis(1));
    let mut ticks = tokio::time::interval_at(Instant::now() + tick, tick);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_beat = 0u64;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stopped(&mut stop) => return,
        }
        let now = shared.now_ms();
        let read_idle = now.saturating_sub(shared.last_read.load(Ordering::Relaxed));
        let write_idle = now.saturating_sub(shared.last_write.load(Ordering::Relaxed));
        if read_idle >= beat.saturating_mul(3) {
            shared.close(&format!(
                "nothing read for {read_idle} ms (three heartbeat intervals of {beat} ms)"
            ));
            return;
        }
        if (read_idle >= beat || write_idle >= beat) && now.saturating_sub(last_beat) >= beat {
            last_beat = now;
            let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
            trace!(address = %shared.address, id, read_idle, write_idle, "sending a heartbeat");
            shared.send_control(
                Header::event_request(id, HESSIAN2, true, event::HESSIAN2_NULL.len() as i32),
                event::HESSIAN2_NULL,
            );
        }
    }
}
