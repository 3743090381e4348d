//! One monotonic timeline for the per-call bookkeeping: a [`Tick`] is a point on it,
//! nanoseconds since a process-wide origin, in a `u64`.
//!
//! A call reads the clock (an [`Instant`]) when it starts and when each attempt ends, and
//! converts each reading once. Everything the attempt then records (its latency, the
//! balancer's statistics, outlier detection, the retry budget, the call's duration) is
//! integer arithmetic on ticks, instead of one `Instant` subtraction per consumer (each a
//! checked seconds-and-nanoseconds difference).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The origin of every [`Tick`]: an hour before the first use, so that instants taken a
/// little earlier (a paused test clock started before it, a timestamp read before the first
/// call) still map to distinct positive ticks. A machine up for less than that takes a
/// minute before, or the first use itself.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(Duration::from_secs(3600))
            .or_else(|| now.checked_sub(Duration::from_secs(60)))
            .unwrap_or(now)
    })
}

/// A point on the process's monotonic clock: whole nanoseconds since a process-wide origin
/// (see the module's docs). Instants before the origin map to 0; past about 584 years it
/// saturates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tick(u64);

impl Tick {
    /// The tick of `at`: one `Instant` subtraction.
    #[inline]
    pub fn of(at: Instant) -> Tick {
        Tick(at.checked_duration_since(origin()).map_or(0, whole_nanos))
    }

    /// The tick `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Tick {
        Tick(nanos)
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to this tick; zero when `earlier` is later.
    #[inline]
    pub fn saturating_since(self, earlier: Tick) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// This tick as an `Instant`.
    pub fn instant(self) -> Instant {
        origin() + Duration::from_nanos(self.0)
    }
}

impl From<Instant> for Tick {
    #[inline]
    fn from(at: Instant) -> Tick {
        Tick::of(at)
    }
}

/// A duration in whole nanoseconds (saturating), without 128-bit arithmetic.
#[inline]
pub fn whole_nanos(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_measure_what_instants_measure() {
        let a = Instant::now();
        let b = a + Duration::from_millis(1500) + Duration::from_nanos(7);
        let (ta, tb) = (Tick::of(a), Tick::of(b));
        assert_eq!(tb.saturating_since(ta), b - a);
        assert_eq!(ta.saturating_since(tb), Duration::ZERO);
        assert_eq!(Tick::from_nanos(ta.as_nanos() + whole_nanos(b - a)), tb);
        assert_eq!(Tick::of(ta.instant()), ta);
        assert!(ta > Tick::default(), "the origin lies before the first use");
    }

    #[test]
    fn an_instant_before_the_origin_is_tick_zero() {
        let o = origin();
        if let Some(before) = o.checked_sub(Duration::from_secs(1)) {
            assert_eq!(Tick::of(before), Tick::default());
        }
        assert_eq!(Tick::of(o), Tick::default());
        assert_eq!(whole_nanos(Duration::MAX), u64::MAX);
    }
}
