//! Durations as settings write them: `30ms`, `1.5s`, or a plain number of milliseconds
//! (Dubbo's unit for `timeout`), and Dubbo's default per-attempt timeout.

use std::time::Duration;

/// Dubbo's default `timeout`: what an attempt gets when no layer sets a positive one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

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
