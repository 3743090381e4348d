//! `cluster`: the fault-tolerance strategy, by Dubbo's name.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use switchman_core::Error;

/// The fault-tolerance strategy, by Dubbo's name (`cluster=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// Retry other instances on retryable failures (`retries` extra attempts). Default.
    #[default]
    Failover,
    /// One attempt; the error is returned at once.
    Failfast,
    /// One attempt; a failure is logged and the result is `null`.
    Failsafe,
    /// One attempt; a failure returns `null` and queues the call for background retries.
    Failback,
    /// `forks` parallel attempts on distinct instances; the first answer wins.
    Forking,
    /// Every routed instance in order; any failure fails the call.
    Broadcast,
    /// The first available instance, no balancing.
    Available,
    /// One instance per group; the successful results are merged.
    Mergeable,
    /// Prefer instances in the consumer's zone, then any.
    ZoneAware,
}

impl Strategy {
    /// Every strategy, in documentation order.
    pub const ALL: [Strategy; 9] = [
        Strategy::Failover,
        Strategy::Failfast,
        Strategy::Failsafe,
        Strategy::Failback,
        Strategy::Forking,
        Strategy::Broadcast,
        Strategy::Available,
        Strategy::Mergeable,
        Strategy::ZoneAware,
    ];

    /// Dubbo's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Failover => "failover",
            Strategy::Failfast => "failfast",
            Strategy::Failsafe => "failsafe",
            Strategy::Failback => "failback",
            Strategy::Forking => "forking",
            Strategy::Broadcast => "broadcast",
            Strategy::Available => "available",
            Strategy::Mergeable => "mergeable",
            Strategy::ZoneAware => "zone-aware",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let wanted = s.trim().to_ascii_lowercase();
        Strategy::ALL
            .into_iter()
            .find(|k| k.as_str() == wanted || (wanted == "zoneaware" && *k == Strategy::ZoneAware))
            .ok_or_else(|| {
                let names: Vec<_> = Strategy::ALL.iter().map(|k| k.as_str()).collect();
                Error::bad_config(format!(
                    "cluster {s:?} is not a known strategy (expected one of: {})",
                    names.join(", ")
                ))
            })
    }
}

impl<'de> Deserialize<'de> for Strategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
