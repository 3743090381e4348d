use std::str::FromStr;
use std::time::Duration;

use switchman_core::Error;

/// The fault-tolerance strategy, by Dubbo's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// Retry other instances on retryable failures (`retries` extra attempts). Dubbo's default.
    #[default]
    Failover,
    /// One attempt; the error is returned at once.
    Failfast,
}

impl FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "failover" => Ok(Strategy::Failover),
            "failfast" => Ok(Strategy::Failfast),
            other => Err(Error::bad_config(format!(
                "cluster {other:?} is not a known strategy (expected one of: failover, failfast)"
            ))),
        }
    }
}

/// Maximum attempts of one call, whatever `retries` says.
pub const MAX_ATTEMPTS: usize = 16;

/// How calls through a [`crate::ClusterInvoker`] behave. Dubbo's key names and defaults.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// `cluster`: the strategy (default failover).
    pub strategy: Strategy,
    /// `retries`: extra attempts after the first for failover (default 2, so 3 attempts; a
    /// negative value in Dubbo means one attempt, here 0). A per-call attachment `retries`
    /// overrides it. Capped so a call makes at most 16 attempts.
    pub retries: u32,
    /// `timeout`: per-attempt timeout (default 1000 ms). A per-call attachment `timeout` (ms)
    /// overrides it.
    pub timeout: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            strategy: Strategy::Failover,
            retries: 2,
            timeout: Duration::from_millis(1000),
        }
    }
}

impl ClusterConfig {
    /// Builder: strategy.
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.strategy = s;
        self
    }
    /// Builder: retries.
    pub fn retries(mut self, r: u32) -> Self {
        self.retries = r;
        self
    }
    /// Builder: per-attempt timeout.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
}
