//! Ports on 127.0.0.1 for the real servers the tests start, and for the fake addresses they
//! write to a registry, laid out so that a real server never lands on another's port or on a
//! fake address.
//!
//! Linux hands out ports of its ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`,
//! 32768–60999 by default) to every `connect()` and every `bind(…:0)`, and never a port below
//! it. "Bind port 0, read the port, close, let the server bind it later" therefore races with
//! every client and every server in every process of the machine (a ZooKeeper client's local
//! port, a JVM's own listener, an in-process provider on `127.0.0.1:0`). Below the ephemeral
//! range only a process that asks for a port by number gets it, so the suite splits that part:
//!
//! | ports | used by |
//! |---|---|
//! | 11000–17999 | `scripts/services.sh`: the shared ZooKeeper, rnacos on `p`, `p + 1000`, `p + 2000` |
//! | [`FAKE_PORTS`] 18000–19999 | fake addresses the tests register and never serve: nothing binds them |
//! | 20880–… | Dubbo's own default ports (a JVM without a configured port scans up from 20880) |
//! | [`ALLOCATED`] 21000–32767 | [`allocate`] and [`allocate_with`]: every server a test starts |
//! | 32768–60999 | the kernel: `connect()`, `bind(0)` (in-process providers on `127.0.0.1:0`) |
//!
//! Within one process a port is handed out once: a process-wide atomic counter walks
//! [`ALLOCATED`] from an offset derived from the process id (two test binaries running at once
//! rarely start at the same place), every port handed out (with its offsets) is remembered, and
//! each candidate is checked with a probe bind, so a port some other process holds is skipped.
//! What remains is another process taking the port between the probe and the server's own bind,
//! which takes another user of this allocator (or of `scripts/services.sh`, for ports listed
//! above) picking the same number in that instant.
//!
//! Where a server can bind port 0 itself and report the port it got, that is better still (the
//! chaos providers print theirs): nothing then lies between choosing and binding.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
/// Ports that no real process of the suite binds (below the kernel's ephemeral range, outside
/// [`ALLOCATED`] and `scripts/services.sh`'s range): for fake instances a test writes to a
/// registry and never needs to dial, when their host must be 127.0.0.1 (for example to share the
/// real provider's MetadataService). A fake address whose host does not matter can also use a
/// host nothing listens on (127.0.0.2, ...). A test dialling one of these ports gets "connection
/// refused".
pub const FAKE_PORTS: Range<u16> = 18000..20000;

/// The ports [`allocate`] and [`allocate_with`] hand out: below Linux's ephemeral range
/// (32768), above [`FAKE_PORTS`] and Dubbo's default ports.
pub const ALLOCATED: Range<u16> = 21000..32768;

// The bands do not overlap, and the allocated one ends below the kernel's default ephemeral
// range.
const _: () = assert!(FAKE_PORTS.end <= ALLOCATED.start && ALLOCATED.end <= 32768);

/// How many candidates one call probes before it gives up.
const TRIES: u32 = 2000;

/// The process-wide allocator.
static PORTS: Allocator = Allocator::new();

/// A counter over [`ALLOCATED`] and the ports handed out so far.
struct Allocator {
    /// How many candidates this allocator has looked at.
    next: AtomicU32,
    /// Every port handed out (offsets included); never handed out again.
    handed_out: Mutex<BTreeSet<u16>>,
}

impl Allocator {
    const fn new() -> Allocator {
        Allocator {
            next: AtomicU32::new(0),
            handed_out: Mutex::new(BTreeSet::new()),
        }
    }

    /// The first free candidate at or after the counter, the counter starting at `start`
    /// (modulo the candidates for `p`).
    fn allocate(&self, start: u32, offsets: &[u16]) -> u16 {
        let widest = offsets.iter().copied().max().unwrap_or(0);
        let width = ALLOCATED.end - ALLOCATED.start;
        assert!(
            widest < width,
            "offsets {offsets:?} do not fit in ports {ALLOCATED:?}"
        );
        // Candidates for `p`: the part of the range where `p + widest` still fits.
        let bases = u32::from(width - widest);
        let mut handed_out = self.handed_out.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..TRIES {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let p = ALLOCATED.start + (start.wrapping_add(n) % bases) as u16;
            let ports: Vec<u16> = std::iter::once(p)
                .chain(offsets.iter().map(|off| p + off))
                .collect();
            if ports.iter().any(|q| handed_out.contains(q)) {
                continue;
            }
            if ports.iter().all(|&q| free_now(q)) {
                handed_out.extend(ports);
                return p;
            }
        }
        panic!(
            "no free port in 127.0.0.1:{ALLOCATED:?} (with offsets {offsets:?}) after {TRIES} candidates"
        );
    }
}

/// A port of [`ALLOCATED`] that nothing is bound to now and that this process has not handed
/// out before, for a server that must be told its port before it binds (a ZooKeeper config, a
/// JVM's `--port`).
///
/// # Panics
/// When no such port is found in 2000 candidates; the message names the range.
pub fn allocate() -> u16 {
    allocate_with(&[])
}

/// A port `p` such that `p` and `p + off` for every `off` in `offsets` are in [`ALLOCATED`],
/// free now and not handed out before by this process (all of them are then remembered as
/// handed out), for a server with several ports at fixed offsets (rnacos: HTTP `p`, gRPC
/// `p + 1000`, console `p + 2000`).
///
/// # Panics
/// When the offsets do not fit in [`ALLOCATED`], or no such port is found in 2000 candidates;
/// the message names the range and the offsets.
pub fn allocate_with(offsets: &[u16]) -> u16 {
    PORTS.allocate(pid_offset(), offsets)
}

/// Whether `127.0.0.1:port` can be bound now (nothing listens there, on 127.0.0.1 or 0.0.0.0).
fn free_now(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Where this process starts counting: its id spread over the range (Knuth's multiplicative
/// hash), so processes with neighbouring ids start far apart.
fn pid_offset() -> u32 {
    std::process::id().wrapping_mul(2_654_435_761)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test at a time: a test's probe binds (held for an instant) must not meet the other
    /// test's bind of the same port.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn ports_are_below_the_ephemeral_range_distinct_and_free() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = BTreeSet::new();
        for _ in 0..50 {
            let p = allocate();
            assert!(ALLOCATED.contains(&p), "{p}");
            assert!(seen.insert(p), "{p} handed out twice");
            TcpListener::bind(("127.0.0.1", p)).unwrap_or_else(|e| panic!("bind {p}: {e}"));
        }
        let p = allocate_with(&[1000, 2000]);
        for q in [p, p + 1000, p + 2000] {
            assert!(ALLOCATED.contains(&q), "{q}");
            assert!(seen.insert(q), "{q} handed out twice");
        }
    }

    #[test]
    fn a_port_held_by_another_process_is_skipped() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // A port some other process holds: one the allocator did not hand out, bound here.
        // (At least 1000 above the range's start, for the offset case below.)
        let p = loop {
            let q = allocate();
            if q >= ALLOCATED.start + 1000 {
                break q;
            }
        };
        let held = TcpListener::bind(("127.0.0.1", p)).unwrap_or_else(|e| panic!("bind {p}: {e}"));
        // A fresh allocator whose first candidate is that port.
        let fresh = Allocator::new();
        let start = u32::from(p - ALLOCATED.start);
        let got = fresh.allocate(start, &[]);
        assert_ne!(got, p, "the held port was handed out");
        assert!(ALLOCATED.contains(&got), "{got}");
        // Offsets count too: a base whose + 1000 is held is skipped.
        let fresh = Allocator::new();
        let got = fresh.allocate(start - 1000, &[1000]);
        assert_ne!(
            got + 1000,
            p,
            "a base whose offset port is held was handed out"
        );
        drop(held);
    }
}
