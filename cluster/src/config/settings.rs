//! One layer of settings (consumer global, service or method) with Dubbo's key names, and the
//! one parser every loader uses to turn a `key=value` into a typed value.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use switchman_core::Error;

use super::durations::{DEFAULT_TIMEOUT, parse_duration};
use super::provider::ProviderKeys;
use super::{
    Balancer, Forks, HashArguments, HashNodes, Hedge, Merger, Mock, Percent, Retries, Strategy,
};

/// Failback's default queue bound (`failbacktasks`).
pub(crate) const DEFAULT_FAILBACK_TASKS: NonZeroU32 = match NonZeroU32::new(100) {
    Some(n) => n,
    None => unreachable!(),
};

/// One layer of settings; `None` means "not set here, ask the next layer". Keys are Dubbo's.
///
/// Every value is typed and valid by construction: text is parsed only by the loaders
/// ([`ClusterConfig::from_yaml`](super::ClusterConfig::from_yaml), [`Settings::from_params`],
/// [`Settings::set`]), whose errors name the key and the value. Build one in code with the
/// setters:
///
/// ```
/// use std::time::Duration;
/// use switchman_cluster::{Hedge, Settings, Strategy};
///
/// let s = Settings::new()
///     .strategy(Strategy::Failover)
///     .retries(1)
///     .timeout(Duration::from_millis(300))
///     .hedge(Hedge::After(Duration::from_millis(30)));
/// assert_eq!(s.timeout, Some(Duration::from_millis(300)));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Settings {
    /// `cluster`.
    pub strategy: Option<Strategy>,
    /// `retries` (failover extra attempts; failback background retries). Read from the
    /// consumer only.
    pub retries: Option<Retries>,
    /// `timeout`, per attempt. A provider's `{method}.timeout` beats this layer unless it is
    /// a method layer; its `timeout` does not. Zero means Dubbo's default, 1000 ms, as
    /// `timeout=0` does in Dubbo.
    pub timeout: Option<Duration>,
    /// `forks` (forking): parallel attempts.
    pub forks: Option<Forks>,
    /// `sticky`: keep using the last selected instance while routing gives it to the call.
    /// A provider may register it too (Dubbo's precedence applies).
    pub sticky: Option<bool>,
    /// `actives`: consumer-side cap on concurrent calls per instance (0 = none); layered
    /// with the instance's own `actives` as `timeout` is.
    pub actives: Option<u32>,
    /// `mock`: degrade rule.
    pub mock: Option<Mock>,
    /// `broadcast.fail.percent`.
    pub broadcast_fail_percent: Option<Percent>,
    /// `failbacktasks`: pending background retries at most.
    pub failbacktasks: Option<NonZeroU32>,
    /// `hedge`: when to send a second attempt; off when unset.
    pub hedge: Option<Hedge>,
    /// `deadline`: bounds all attempts of a call together.
    pub deadline: Option<Duration>,
    /// `zone`: the consumer's zone (zone-aware).
    pub zone: Option<String>,
    /// `merger` (mergeable): see [`Merger`].
    pub merger: Option<Merger>,
    /// `loadbalance`: the balancer. A provider may register it too, per method or for the
    /// service (Dubbo's precedence applies; the first routed provider's registration counts,
    /// as Dubbo reads it from `invokers.get(0)`).
    pub loadbalance: Option<Balancer>,
    /// `hash.nodes` (consistenthash): virtual nodes per instance.
    pub hash_nodes: Option<HashNodes>,
    /// `hash.arguments` (consistenthash): the arguments the key is made of.
    pub hash_arguments: Option<HashArguments>,
}

/// The keys a settings layer may hold.
pub(crate) const SETTING_KEYS: [&str; 16] = [
    "cluster",
    "retries",
    "timeout",
    "forks",
    "sticky",
    "actives",
    "mock",
    "broadcast.fail.percent",
    "failbacktasks",
    "hedge",
    "deadline",
    "zone",
    "merger",
    "loadbalance",
    "hash.nodes",
    "hash.arguments",
];

impl Settings {
    /// An empty layer (nothing set).
    pub fn new() -> Settings {
        Settings::default()
    }

    /// Sets `cluster`.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// Sets `retries` (a count, or [`Retries::Negative`]).
    pub fn retries(mut self, retries: impl Into<Retries>) -> Self {
        self.retries = Some(retries.into());
        self
    }

    /// Sets `timeout` (per attempt; zero: Dubbo's default, 1000 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets `forks` (a count; `0` or [`Forks::All`]: every routed instance).
    pub fn forks(mut self, forks: impl Into<Forks>) -> Self {
        self.forks = Some(forks.into());
        self
    }

    /// Sets `sticky`.
    pub fn sticky(mut self, sticky: bool) -> Self {
        self.sticky = Some(sticky);
        self
    }

    /// Sets `actives` (0: no cap).
    pub fn actives(mut self, actives: u32) -> Self {
        self.actives = Some(actives);
        self
    }

    /// Sets `mock` (parse one with `"fail:return null".parse::<Mock>()?`).
    pub fn mock(mut self, mock: Mock) -> Self {
        self.mock = Some(mock);
        self
    }

    /// Sets `broadcast.fail.percent`.
    pub fn broadcast_fail_percent(mut self, percent: Percent) -> Self {
        self.broadcast_fail_percent = Some(percent);
        self
    }

    /// Sets `failbacktasks`.
    pub fn failbacktasks(mut self, tasks: NonZeroU32) -> Self {
        self.failbacktasks = Some(tasks);
        self
    }

    /// Sets `hedge`.
    pub fn hedge(mut self, hedge: Hedge) -> Self {
        self.hedge = Some(hedge);
        self
    }

    /// Sets `deadline`.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets `zone`.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// Sets `merger`.
    pub fn merger(mut self, merger: Merger) -> Self {
        self.merger = Some(merger);
        self
    }

    /// Sets `loadbalance` (a [`BalancerKind`](switchman_loadbalance::BalancerKind) or your own
    /// `Arc<dyn LoadBalance>`).
    pub fn loadbalance(mut self, balancer: impl Into<Balancer>) -> Self {
        self.loadbalance = Some(balancer.into());
        self
    }

    /// Sets `hash.nodes`.
    pub fn hash_nodes(mut self, nodes: HashNodes) -> Self {
        self.hash_nodes = Some(nodes);
        self
    }

    /// Sets `hash.arguments`.
    pub fn hash_arguments(mut self, arguments: HashArguments) -> Self {
        self.hash_arguments = Some(arguments);
        self
    }

    /// Parses `value` for the Dubbo key `key` into this layer; the error names both. The one
    /// parser of the YAML, URL and attachment loaders:
    ///
    /// | key | value |
    /// |---|---|
    /// | `cluster` | a strategy name |
    /// | `retries` | an integer (negative: [`Retries::Negative`]) |
    /// | `timeout` | milliseconds, or a duration (`800ms`, `1.5s`); 0 or less: Dubbo's 1000 ms |
    /// | `forks` | an integer (0 or less: every instance) |
    /// | `sticky` | `true` or `false` |
    /// | `actives` | an integer (0 or less: no cap) |
    /// | `mock` | `[force:\|fail:]return <json>`, `[force:\|fail:]throw [message]` |
    /// | `broadcast.fail.percent` | 0 to 100 |
    /// | `failbacktasks` | an integer (0 or less: Dubbo's 100) |
    /// | `hedge` | `p95` or a delay |
    /// | `deadline` | milliseconds or a duration, more than 0 |
    /// | `zone` | any text |
    /// | `merger` | see [`Merger`] |
    /// | `loadbalance` | a balancer name |
    /// | `hash.nodes` | a whole number, at least 4 |
    /// | `hash.arguments` | comma-separated argument indexes |
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let bad = |why: &str| Error::bad_config(format!("{key}={value:?}: {why}"));
        let with = |e: Error| Error::bad_config(format!("{key}={value:?}: {}", e.message()));
        let t = value.trim();
        match key {
            "cluster" => self.strategy = Some(t.parse().map_err(with)?),
            "retries" => {
                let n: i64 = t.parse().map_err(|_| bad("not an integer"))?;
                self.retries = Some(Retries::from_dubbo(n));
            }
            "timeout" => {
                self.timeout = Some(parse_timeout(t).ok_or_else(|| {
                    bad("not a number of milliseconds or a duration such as 800ms")
                })?)
            }
            "forks" => {
                let n: i64 = t.parse().map_err(|_| bad("not an integer"))?;
                self.forks = Some(Forks::from_dubbo(n));
            }
            "sticky" => {
                self.sticky = Some(parse_bool(t).ok_or_else(|| bad("expected true or false"))?)
            }
            "actives" => {
                let n: i64 = t.parse().map_err(|_| bad("not an integer"))?;
                self.actives = Some(u32::try_from(n.max(0)).unwrap_or(u32::MAX));
            }
            "mock" => self.mock = Some(t.parse().map_err(with)?),
            "broadcast.fail.percent" => {
                let n: i64 = t.parse().map_err(|_| bad("not an integer"))?;
                self.broadcast_fail_percent = Some(
                    u32::try_from(n)
                        .ok()
                        .and_then(|n| Percent::new(n).ok())
                        .ok_or_else(|| bad("outside 0..=100"))?,
                );
            }
            "failbacktasks" => {
                let n: i64 = t.parse().map_err(|_| bad("not an integer"))?;
                self.failbacktasks = Some(
                    u32::try_from(n)
                        .ok()
                        .and_then(NonZeroU32::new)
                        .unwrap_or(if n > 0 {
                            NonZeroU32::MAX
                        } else {
                            DEFAULT_FAILBACK_TASKS
                        }),
                );
            }
            "hedge" => self.hedge = Some(t.parse().map_err(with)?),
            "deadline" => {
                let d = parse_duration(t).ok_or_else(|| {
                    bad("not a number of milliseconds or a duration such as 800ms")
                })?;
                if d.is_zero() {
                    return Err(bad(
                        "a deadline must be longer than 0 (leave it out for none)",
                    ));
                }
                self.deadline = Some(d);
            }
            "zone" => self.zone = Some(t.to_string()),
            "merger" => self.merger = Some(t.parse().map_err(with)?),
            "loadbalance" => self.loadbalance = Some(t.parse().map_err(with)?),
            "hash.nodes" => self.hash_nodes = Some(t.parse().map_err(with)?),
            "hash.arguments" => self.hash_arguments = Some(t.parse().map_err(with)?),
            _ => {
                return Err(Error::bad_config(format!(
                    "unknown key {key:?} (known: {})",
                    SETTING_KEYS.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// A layer from URL-style parameters with Dubbo's key names (a consumer URL's query, a
    /// `--param` list): every known key is parsed with [`Settings::set`]; the first invalid
    /// value is an error naming its key and value. Keys that are not settings are ignored
    /// (a URL carries many: `application`, `interface`, ...).
    pub fn from_params(params: &BTreeMap<String, String>) -> Result<Settings, Error> {
        let mut s = Settings::new();
        for (k, v) in params {
            if SETTING_KEYS.contains(&k.as_str()) {
                s.set(k, v)?;
            }
        }
        Ok(s)
    }

    /// Reads the keys a provider's registration sets for the calls it receives, method-scoped
    /// (`{method}.timeout`, ...) over the service-level ones when `method` is given: `timeout`,
    /// `actives`, `loadbalance`, `sticky`, `hash.nodes` and `hash.arguments`. Dubbo reads no
    /// other key from the provider: `retries`, `forks` and the rest are the consumer's.
    /// Registry data is not the consumer's to fix: a value that does not parse is ignored.
    pub fn from_provider_params(
        params: &BTreeMap<String, String>,
        method: Option<&str>,
    ) -> Settings {
        let p = ProviderKeys::parse(params);
        let service = p.service();
        let k = match method.and_then(|m| p.method(m)) {
            Some(m) => m.over(service),
            None => service.clone(),
        };
        k.to_settings()
    }

    /// This layer over `lower`: every value set here wins.
    pub fn over(&self, lower: &Settings) -> Settings {
        Settings {
            strategy: self.strategy.or(lower.strategy),
            retries: self.retries.or(lower.retries),
            timeout: self.timeout.or(lower.timeout),
            forks: self.forks.or(lower.forks),
            sticky: self.sticky.or(lower.sticky),
            actives: self.actives.or(lower.actives),
            mock: self.mock.clone().or_else(|| lower.mock.clone()),
            broadcast_fail_percent: self.broadcast_fail_percent.or(lower.broadcast_fail_percent),
            failbacktasks: self.failbacktasks.or(lower.failbacktasks),
            hedge: self.hedge.or(lower.hedge),
            deadline: self.deadline.or(lower.deadline),
            zone: self.zone.clone().or_else(|| lower.zone.clone()),
            merger: self.merger.or(lower.merger),
            loadbalance: self
                .loadbalance
                .clone()
                .or_else(|| lower.loadbalance.clone()),
            hash_nodes: self.hash_nodes.or(lower.hash_nodes),
            hash_arguments: self
                .hash_arguments
                .clone()
                .or_else(|| lower.hash_arguments.clone()),
        }
    }
}

/// `timeout`: milliseconds (Dubbo's form; 0 or less is Dubbo's default, 1000 ms) or a
/// duration with a unit.
pub(crate) fn parse_timeout(t: &str) -> Option<Duration> {
    match t.parse::<i64>() {
        Ok(n) if n <= 0 => Some(DEFAULT_TIMEOUT),
        Ok(n) => Some(Duration::from_millis(n as u64)),
        Err(_) => parse_duration(t).map(|d| if d.is_zero() { DEFAULT_TIMEOUT } else { d }),
    }
}

fn parse_bool(t: &str) -> Option<bool> {
    if t.eq_ignore_ascii_case("true") {
        Some(true)
    } else if t.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}
