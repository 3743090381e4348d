//! What the handles and the three tasks of a connection share: the calls waiting for their
//! response, the write queue, the provider's state, and the handling of each frame read.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use switchman_core::{Error, ErrorKind, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, trace, warn};

use super::super::exchange::{HEADER_LEN, HESSIAN2, Header, event, status};
use super::config::{QUEUE_BYTES, Response};

/// A frame for the writer.
pub(super) struct Frame {
    pub(super) header: [u8; HEADER_LEN],
    pub(super) body: Bytes,
    /// Its share of [`QUEUE_BYTES`], given back when the frame is written (or dropped).
    pub(super) _queued: OwnedSemaphorePermit,
}

/// What a frame with `body` counts against [`QUEUE_BYTES`].
pub(super) fn cost(body: &[u8]) -> u32 {
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
pub(super) struct Calls {
    waiting: Waiters,
    /// Why the connection closed, once it did.
    closed: Option<String>,
}

/// What the handles and the three tasks share.
pub(super) struct Shared {
    pub(super) address: String,
    pub(super) heartbeat: Duration,
    pub(super) payload: usize,
    pub(super) write_timeout: Duration,
    /// Timestamps are milliseconds since this instant.
    pub(super) epoch: Instant,
    pub(super) next_id: AtomicI64,
    pub(super) calls: Mutex<Calls>,
    /// `calls.waiting.len()`, readable without the lock (updated under it).
    pub(super) in_flight: AtomicUsize,
    pub(super) frames: mpsc::Sender<Frame>,
    /// [`QUEUE_BYTES`] of permits: the bytes queued (closed with the connection).
    pub(super) queue_bytes: Arc<Semaphore>,
    pub(super) stop: watch::Sender<bool>,
    pub(super) closed: AtomicBool,
    pub(super) readonly: AtomicBool,
    pub(super) readonly_since: AtomicU64,
    pub(super) last_read: AtomicU64,
    pub(super) last_write: AtomicU64,
    pub(super) late: AtomicU64,
    #[cfg(test)]
    pub(super) probe: Probe,
}

/// What the tests observe of the buffers.
#[cfg(test)]
#[derive(Default)]
pub(super) struct Probe {
    pub(super) read_capacity: AtomicUsize,
    pub(super) read_bytes: AtomicUsize,
    pub(super) queued_high: AtomicUsize,
}

/// Removes a call's entry when the call gives up (timeout or cancellation).
pub(super) struct Waiting<'a> {
    pub(super) shared: &'a Shared,
    pub(super) id: i64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let _ = self.shared.take(self.id);
    }
}

impl Shared {
    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Dubbo's check: a limit of 0 means none.
    pub(super) fn over_payload(&self, len: usize) -> bool {
        self.payload > 0 && len > self.payload
    }

    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn register(&self, id: i64, tx: oneshot::Sender<Result<Response>>) -> Result<()> {
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

    pub(super) fn closed_error(&self) -> Error {
        let calls = self.lock();
        self.error(calls.closed.as_deref().unwrap_or("closed"))
    }

    /// Closes the connection (once): fails every waiting call with a retryable transport
    /// error saying `reason`, and stops the tasks.
    pub(super) fn close(&self, reason: &str) {
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
    pub(super) fn probe_queued(&self) {
        let queued = QUEUE_BYTES - self.queue_bytes.available_permits();
        self.probe.queued_high.fetch_max(queued, Ordering::SeqCst);
    }

    pub(super) fn touch_read(&self) {
        self.last_read.store(self.now_ms(), Ordering::Relaxed);
    }

    pub(super) fn touch_write(&self) {
        self.last_write.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Queues a frame the transport itself sends (heartbeats and their answers, always a few
    /// bytes of this side's own). Dropped when the queue is full: traffic is flowing then (or
    /// the provider stopped reading), and the reader must never wait on it.
    pub(super) fn send_control(&self, header: Header, body: &'static [u8]) {
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

    pub(super) fn on_frame(&self, h: Header, body: Bytes) {
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
    pub(super) fn oversized(&self, h: &Header) {
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
