//! `poll_ready` for the cluster invoker: not ready while this invoker's in-flight attempts
//! fill every endpoint's `actives` cap.
//!
//! Only attempts to endpoints that have a cap are counted (nothing is counted, and
//! `poll_ready` is always ready, when no cap is set). When every routable endpoint has a cap
//! and the attempts in flight are fewer than the caps' sum, some endpoint has room (they
//! cannot all be full), so a ready invoker can place the call. The count is this invoker's:
//! another invoker over the same directory shares the endpoints' active counts, and a call it
//! keeps busy can still make one of ours find every endpoint full (that call then fails with
//! `LimitExceeded`, as it would without `poll_ready`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::sync::{Notify, futures::OwnedNotified};

/// Attempts in flight to capped endpoints, and who waits for one of them to end.
#[derive(Debug, Default)]
pub(crate) struct Room {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    in_flight: AtomicUsize,
    /// `poll_ready`s waiting: an attempt that ends wakes them only when there are some, so
    /// the call path never touches the notifier's lock otherwise.
    waiting: AtomicUsize,
    notify: Arc<Notify>,
}

/// One counted attempt; dropping it (the attempt ended or was cancelled) makes room.
#[derive(Debug)]
pub(crate) struct Occupied<'r> {
    room: &'r Room,
}

impl Drop for Occupied<'_> {
    fn drop(&mut self) {
        let s = &self.room.shared;
        s.in_flight.fetch_sub(1, Ordering::SeqCst);
        if s.waiting.load(Ordering::SeqCst) > 0 {
            s.notify.notify_waiters();
        }
    }
}

impl Room {
    /// Counts an attempt to a capped endpoint until the guard drops.
    #[inline]
    pub(crate) fn enter(&self) -> Occupied<'_> {
        self.shared.in_flight.fetch_add(1, Ordering::SeqCst);
        Occupied { room: self }
    }

    /// Attempts in flight to capped endpoints.
    pub(crate) fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// A registration to be woken when an attempt ends. Register (poll it once, or
    /// [`Wait::poll_wake`]) before checking the condition again, or a wake-up can be missed.
    pub(crate) fn wait(&self) -> Wait {
        self.shared.waiting.fetch_add(1, Ordering::SeqCst);
        let mut fut = Box::pin(self.shared.notify.clone().notified_owned());
        fut.as_mut().enable();
        Wait {
            fut,
            shared: self.shared.clone(),
        }
    }
}

/// A pending `poll_ready`'s registration (boxed once per wait, not per call).
pub(crate) struct Wait {
    fut: Pin<Box<OwnedNotified>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wait").finish_non_exhaustive()
    }
}

impl Wait {
    /// Ready once an attempt ended after this registration.
    pub(crate) fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.fut.as_mut().poll(cx)
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}
