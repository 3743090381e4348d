//! `hedge`: when a failover call sends a second attempt while the first is still running.

use std::str::FromStr;
use std::time::Duration;

use switchman_core::Error;

use super::durations::parse_duration;

/// When to send a hedged second attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Hedge {
    /// After a fixed delay.
    After(Duration),
    /// After the service's observed p95 latency (a fixed 50 ms until 20 calls were seen).
    P95,
}

impl FromStr for Hedge {
    type Err = Error;
    /// `p95`, or a delay such as `30ms` / `1s` / `25` (ms).
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("p95") {
            return Ok(Hedge::P95);
        }
        parse_duration(t).map(Hedge::After).ok_or_else(|| {
            Error::bad_config(format!(
                "hedge {s:?}: expected `p95` or a delay such as `30ms`"
            ))
        })
    }
}
