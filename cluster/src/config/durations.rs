//! Durations as settings write them: `30ms`, `1.5s`, or a plain number of milliseconds
//! (Dubbo's unit for `timeout`), and Dubbo's default per-attempt timeout.

use std::time::Duration;

/// Dubbo's default `timeout`: what an attempt gets when no layer sets a positive one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// Dubbo's default `timeout` of a `tri://` provider (`TripleInvoker` passes 3000 ms where
/// `DubboInvoker` passes 1000): what an attempt to a Triple endpoint gets when no layer sets a
/// positive one.
pub const TRIPLE_DEFAULT_TIMEOUT: Duration = Duration::from_millis(3000);

/// The longest `timeout` a provider's registration can give its callers: one day. Dubbo has
/// no bound; a larger value (registry data, up to `i64::MAX` ms) is taken as this, warned.
pub const MAX_PROVIDER_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// `now + d`, saturating: a timeout too long to add to the clock (`Duration::MAX`, a
/// provider's `timeout=9223372036854775807`) is a deadline about 30 years away, never the
/// overflow panic of `Instant + Duration`.
pub(crate) fn deadline_after(d: Duration) -> tokio::time::Instant {
    deadline_from(tokio::time::Instant::now(), d)
}

/// [`deadline_after`] from `now`, a clock read the caller has already made.
pub(crate) fn deadline_from(now: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(30 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

/// `30ms`, `1.5s` (seconds, fractions allowed) or a plain whole number of milliseconds;
/// `None` for anything else (negative, not finite, no number, another unit).
pub(crate) fn parse_duration(t: &str) -> Option<Duration> {
    let t = t.trim();
    if let Some(ms) = t.strip_suffix("ms") {
        ms.trim().parse().ok().map(Duration::from_millis)
    } else if let Some(s) = t.strip_suffix('s') {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s >= 0.0 && s.is_finite())
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    } else {
        t.parse().ok().map(Duration::from_millis)
    }
}

/// Dubbo's `getMethodPositiveParameter` for a timeout: the layer that sets a value decides,
/// and a value that is not positive means the default.
pub(crate) fn positive_or_default(d: Duration) -> Duration {
    if d.is_zero() { DEFAULT_TIMEOUT } else { d }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_never_overflows_the_clock() {
        let now = tokio::time::Instant::now();
        assert!(deadline_after(Duration::MAX) > now + Duration::from_secs(365 * 24 * 3600));
        let d = deadline_after(Duration::from_millis(i64::MAX as u64));
        assert!(d > now + Duration::from_secs(365 * 24 * 3600));
        let soon = deadline_after(Duration::from_millis(5));
        assert!(soon >= now + Duration::from_millis(5) && soon < now + Duration::from_secs(5));
    }
}
