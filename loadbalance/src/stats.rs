use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Live per-instance state shared by every snapshot that holds the same address.
#[derive(Debug)]
pub struct InstanceStats {
    active: AtomicU32,
    first_seen_ms: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
}

impl Default for InstanceStats {
    fn default() -> Self {
        Self::new()
    }
}

impl InstanceStats {
    /// Fresh state; "first seen" is now.
    pub fn new() -> Self {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        InstanceStats {
            active: AtomicU32::new(0),
            first_seen_ms: AtomicU64::new(now),
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// When the directory first saw this address (ms since the epoch): the warm-up start for
    /// providers that publish no `timestamp`.
    pub fn first_seen_ms(&self) -> u64 {
        self.first_seen_ms.load(Ordering::Relaxed)
    }

    /// Overrides the first-seen time (tests, snapshot cache restore).
    pub fn set_first_seen_ms(&self, ms: u64) {
        self.first_seen_ms.store(ms, Ordering::Relaxed);
    }

    /// Calls in flight.
    pub fn active(&self) -> u32 {
        self.active.load(Ordering::Relaxed)
    }

    /// Successful calls so far.
    pub fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Failed (non-business) calls so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Marks a call as started; the guard ends it. Dropping the guard without
    /// [`CallGuard::finish`] counts as a cancelled call (no latency sample).
    pub fn begin(&self) -> CallGuard<'_> {
        self.active.fetch_add(1, Ordering::Relaxed);
        CallGuard {
            stats: self,
            done: false,
        }
    }

    fn end(&self, _elapsed: Option<Duration>, ok: Option<bool>) {
        self.active.fetch_sub(1, Ordering::Relaxed);
        match ok {
            Some(true) => {
                self.succeeded.fetch_add(1, Ordering::Relaxed);
            }
            Some(false) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
            None => {}
        }
    }
}

/// An in-flight call on one instance (see [`InstanceStats::begin`]).
#[derive(Debug)]
pub struct CallGuard<'a> {
    stats: &'a InstanceStats,
    done: bool,
}

impl CallGuard<'_> {
    /// Ends the call with its latency and whether the instance served it (a business error
    /// counts as served: the instance answered).
    pub fn finish(mut self, elapsed: Duration, served: bool) {
        self.done = true;
        self.stats.end(Some(elapsed), Some(served));
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.stats.end(None, None);
        }
    }
}
