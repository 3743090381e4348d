//! Cluster configuration with Dubbo's key names and precedence.
//!
//! Layers, as Dubbo 3.3's `ServiceAddressURL` reads them: per-call attachments (`retries`,
//! `timeout`) > consumer method > provider method (`sayHello.timeout=...` registered by the
//! instance being called) > consumer (the service over the consumer global) > provider service
//! (registered by the instance being called) > Dubbo's defaults. Providers set only `timeout`
//! and `actives`, each instance for itself; every other key (`retries`, `forks`, `cluster`,
//! ...) comes from the consumer alone. The effective values are resolved once per snapshot
//! and method ([`Effective`], per-instance values precomputed for every endpoint), never
//! parsed per call.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use switchman_core::{Error, Invocation};
use switchman_loadbalance::OutlierConfig;

/// Maximum attempts of one call, whatever `retries` says.
pub const MAX_ATTEMPTS: usize = 16;

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

/// A degrade rule (`mock=...`), parsed once.
#[derive(Clone)]
pub enum Mock {
    /// `force:return <json>` / `force:throw [message]`: never call the providers.
    Force(MockAction),
    /// `fail:...` (or a bare `return`/`throw`): used when the call fails with a non-business error.
    Fail(MockAction),
}

/// A user fallback: gets the invocation and the failure that triggered it.
pub type FallbackFn =
    Arc<dyn Fn(&Invocation, Option<&Error>) -> Result<Value, Error> + Send + Sync>;

/// What a mock does.
#[derive(Clone)]
pub enum MockAction {
    /// Return this value.
    Return(Value),
    /// Fail with this message (a business error: the caller sees it, nothing retries it).
    Throw(String),
    /// Call a fallback function with the invocation and the error that triggered it.
    Fallback(FallbackFn),
}

impl fmt::Debug for MockAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MockAction::Return(v) => write!(f, "Return({v})"),
            MockAction::Throw(m) => write!(f, "Throw({m:?})"),
            MockAction::Fallback(_) => f.write_str("Fallback(..)"),
        }
    }
}

impl fmt::Debug for Mock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mock::Force(a) => write!(f, "Force({a:?})"),
            Mock::Fail(a) => write!(f, "Fail({a:?})"),
        }
    }
}

impl FromStr for Mock {
    type Err = Error;
    /// `force:return {"a":1}`, `fail:return null`, `return []`, `fail:throw`, `throw boom`.
    fn from_str(text: &str) -> Result<Self, Error> {
        let t = text.trim();
        let (force, rest) = if let Some(r) = t.strip_prefix("force:") {
            (true, r.trim())
        } else if let Some(r) = t.strip_prefix("fail:") {
            (false, r.trim())
        } else {
            (false, t)
        };
        let action = if let Some(v) = rest.strip_prefix("return") {
            let v = v.trim();
            if v.is_empty() || v == "null" || v == "empty" {
                MockAction::Return(Value::Null)
            } else {
                MockAction::Return(serde_json::from_str(v).map_err(|e| {
                    Error::bad_config(format!(
                        "mock {text:?}: the value after `return` is not JSON: {e}"
                    ))
                })?)
            }
        } else if let Some(m) = rest.strip_prefix("throw") {
            let m = m.trim();
            MockAction::Throw(if m.is_empty() {
                "mocked failure".to_string()
            } else {
                m.to_string()
            })
        } else {
            return Err(Error::bad_config(format!(
                "mock {text:?}: expected `[force:|fail:]return <json>` or `[force:|fail:]throw [message]`"
            )));
        };
        Ok(if force {
            Mock::Force(action)
        } else {
            Mock::Fail(action)
        })
    }
}

/// When to send a hedged second attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hedge {
    /// After a fixed delay.
    After(Duration),
    /// After the service's observed p95 latency (a fixed 50 ms until 20 calls were seen).
    P95,
}

/// `merger`: how the `mergeable` strategy combines the answers of several groups (Dubbo's
/// `MergeableClusterInvoker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merger {
    /// Not merging (`false`, `0`, `null`, `N/A` or empty, Dubbo's `ConfigUtils.isEmpty`): only
    /// the first group with an available provider is called.
    Off,
    /// `true` or `default`: by the answers' kind, as Dubbo's `MergerFactory` does by the
    /// return type: arrays concatenated, objects merged (a later group wins on a key);
    /// anything else (numbers, strings, booleans) has no merger and is an error. A merger set
    /// with `ClusterInvoker::with_merger` takes this place.
    Default,
    /// `list`, `array` or an array-element name (`int`, `long`, `string`, ...): arrays
    /// concatenated.
    List,
    /// `set`: arrays concatenated without repeated elements.
    Set,
    /// `map`: objects merged.
    Map,
}

impl FromStr for Merger {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        Ok(match lower.as_str() {
            "" | "false" | "0" | "null" | "n/a" => Merger::Off,
            "true" | "default" => Merger::Default,
            "list" | "array" | "boolean" | "byte" | "char" | "short" | "int" | "long" | "float"
            | "double" | "string" => Merger::List,
            "set" => Merger::Set,
            "map" => Merger::Map,
            _ if t.starts_with('.') => {
                return Err(Error::bad_config(format!(
                    "merger={t:?} calls a method of the Java result type, which JSON answers do not \
                     have; set a merger in code with ClusterInvoker::with_merger"
                )));
            }
            _ => {
                return Err(Error::bad_config(format!(
                    "merger={t:?} is not a merger (known: true, default, list, array, set, map, \
                     false)"
                )));
            }
        })
    }
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

fn parse_duration(t: &str) -> Option<Duration> {
    if let Some(ms) = t.strip_suffix("ms") {
        ms.trim().parse().ok().map(Duration::from_millis)
    } else if let Some(s) = t.strip_suffix('s') {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s >= 0.0 && s.is_finite())
            .map(Duration::from_secs_f64)
    } else {
        t.parse().ok().map(Duration::from_millis)
    }
}

/// One layer of settings; `None` means "not set here, ask the next layer". Keys are Dubbo's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `cluster`.
    #[serde(default, rename = "cluster")]
    pub strategy: Option<Strategy>,
    /// `retries` (failover extra attempts; failback background retries). Negative: one
    /// attempt under failover, Dubbo's 3 under failback. Read from the consumer only.
    #[serde(default)]
    pub retries: Option<i64>,
    /// `timeout` in ms, per attempt (`0`: Dubbo's 1000). A provider's `{method}.timeout`
    /// beats this layer unless it is a method layer; its `timeout` does not.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// `forks` (forking): parallel attempts; `<= 0` means all.
    #[serde(default)]
    pub forks: Option<i64>,
    /// `sticky`: keep using the last selected instance while routing gives it to the call.
    #[serde(default)]
    pub sticky: Option<bool>,
    /// `actives`: consumer-side cap on concurrent calls per instance (0 = none); layered
    /// with the instance's own `actives` as `timeout` is.
    #[serde(default)]
    pub actives: Option<u32>,
    /// `mock`: degrade rule.
    #[serde(default)]
    pub mock: Option<String>,
    /// `broadcast.fail.percent` (0..=100).
    #[serde(default, rename = "broadcast.fail.percent")]
    pub broadcast_fail_percent: Option<i64>,
    /// `failbacktasks`: pending background retries at most (`<= 0`: Dubbo's 100).
    #[serde(default)]
    pub failbacktasks: Option<i64>,
    /// `hedge`: `p95` or a delay (`30ms`); off when unset.
    #[serde(default)]
    pub hedge: Option<String>,
    /// `deadline` in ms: bounds all attempts of a call together.
    #[serde(default)]
    pub deadline: Option<u64>,
    /// `zone`: the consumer's zone (zone-aware).
    #[serde(default)]
    pub zone: Option<String>,
    /// `merger` (mergeable): `true`, `list`, `set`, `map`, ... or `false` (see [`Merger`]).
    #[serde(default)]
    pub merger: Option<String>,
}

impl Settings {
    /// Reads the keys a provider's registration sets for the calls it receives, `timeout` and
    /// `actives`, method-scoped (`{method}.timeout`) when `method` is given. Dubbo reads no
    /// other key from the provider: `retries`, `forks` and the rest are the consumer's.
    /// Values that are not integers are ignored.
    pub fn from_provider_params(
        params: &BTreeMap<String, String>,
        method: Option<&str>,
    ) -> Settings {
        let p = ProviderKeys::parse(params);
        let k = match method {
            Some(m) => p.method(m),
            None => p.service,
        };
        Settings {
            timeout: k.timeout.map(|t| t.max(0) as u64),
            actives: k.actives.map(|a| a.clamp(0, u32::MAX as i64) as u32),
            ..Settings::default()
        }
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
            hedge: self.hedge.clone().or_else(|| lower.hedge.clone()),
            deadline: self.deadline.or(lower.deadline),
            zone: self.zone.clone().or_else(|| lower.zone.clone()),
            merger: self.merger.clone().or_else(|| lower.merger.clone()),
        }
    }

    fn check(&self, what: &str) -> Result<(), Error> {
        if let Some(m) = &self.mock {
            m.parse::<Mock>()
                .map_err(|e| Error::bad_config(format!("{what}: {}", e.message())))?;
        }
        if let Some(h) = &self.hedge {
            h.parse::<Hedge>()
                .map_err(|e| Error::bad_config(format!("{what}: {}", e.message())))?;
        }
        if let Some(m) = &self.merger {
            m.parse::<Merger>()
                .map_err(|e| Error::bad_config(format!("{what}: {}", e.message())))?;
        }
        if let Some(p) = self.broadcast_fail_percent {
            if !(0..=100).contains(&p) {
                return Err(Error::bad_config(format!(
                    "{what}: broadcast.fail.percent={p} is outside 0..=100"
                )));
            }
        }
        Ok(())
    }
}

/// The resolved values for one method of one service (defaults are Dubbo's).
///
/// `timeout` and `actives` are what an instance that registered neither gets; an instance's
/// own registration can change them for the calls it receives ([`Effective::timeout_for`],
/// [`Effective::actives_for`]), precomputed for every endpoint of the snapshot the settings
/// were resolved for.
#[derive(Debug, Clone)]
pub struct Effective {
    /// Strategy.
    pub strategy: Strategy,
    /// Extra attempts (failover) or background retries (failback).
    pub retries: u32,
    /// Per-attempt timeout for an instance that registered none (consumer method > consumer
    /// > 1000 ms).
    pub timeout: Duration,
    /// Parallel attempts for forking; 0 = every candidate.
    pub forks: usize,
    /// Sticky instance.
    pub sticky: bool,
    /// Per-instance in-flight cap for an instance that registered none (None: no cap).
    pub actives: Option<u32>,
    /// Degrade rule.
    pub mock: Option<Mock>,
    /// Broadcast fail percent.
    pub broadcast_fail_percent: u32,
    /// Failback queue bound.
    pub failbacktasks: usize,
    /// Hedging policy.
    pub hedge: Option<Hedge>,
    /// Total time for all attempts.
    pub deadline: Option<Duration>,
    /// Consumer zone.
    pub zone: Option<String>,
    /// How `mergeable` combines groups; `None` when not set (merging then happens only with
    /// a merger set in code).
    pub merger: Option<Merger>,
    /// The snapshot epoch these settings were resolved for and, when some endpoint's
    /// registration changes them, every endpoint's limits.
    pub(crate) resolved_for: Option<(u64, Option<Arc<[Limits]>>)>,
    /// A `timeout` attachment set `timeout` for this call: it applies to every instance.
    pub(crate) timeout_forced: bool,
}

/// The values an instance's own registration can change for the calls it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) timeout: Duration,
    pub(crate) actives: Option<u32>,
}

impl Effective {
    fn from_settings(s: &Settings, strategy_default: Strategy) -> Effective {
        let strategy = s.strategy.unwrap_or(strategy_default);
        let failback = strategy == Strategy::Failback;
        Effective {
            strategy,
            retries: match s.retries {
                // Dubbo's failback takes a negative `retries` as its default, 3.
                Some(r) if r < 0 && failback => 3,
                Some(r) => r.clamp(0, u32::MAX as i64) as u32,
                None if failback => 3,
                None => 2,
            },
            timeout: positive_timeout(s.timeout.map(|t| t.min(i64::MAX as u64) as i64)),
            forks: match s.forks.unwrap_or(2) {
                f if f <= 0 => 0,
                f => f as usize,
            },
            sticky: s.sticky.unwrap_or(false),
            actives: s.actives.filter(|a| *a > 0),
            mock: s.mock.as_deref().and_then(|m| m.parse().ok()),
            broadcast_fail_percent: s
                .broadcast_fail_percent
                .map(|p| p.clamp(0, 100) as u32)
                .unwrap_or(100),
            failbacktasks: match s.failbacktasks {
                Some(t) if t > 0 => t as usize,
                // Dubbo: `failbacktasks <= 0` means its default, 100.
                _ => 100,
            },
            hedge: s.hedge.as_deref().and_then(|h| h.parse().ok()),
            deadline: s.deadline.map(Duration::from_millis),
            zone: s.zone.clone(),
            merger: s.merger.as_deref().and_then(|m| m.parse().ok()),
            resolved_for: None,
            timeout_forced: false,
        }
    }

    fn base_limits(&self) -> Limits {
        Limits {
            timeout: self.timeout,
            actives: self.actives,
        }
    }

    /// The limits of endpoint `i` of the snapshot at `epoch`; `None` when these settings were
    /// resolved for another snapshot. A forced (attachment) timeout is not applied here.
    #[inline]
    pub(crate) fn limits_at(&self, epoch: u64, i: usize) -> Option<Limits> {
        match &self.resolved_for {
            Some((e, per)) if *e == epoch => Some(
                per.as_ref()
                    .and_then(|p| p.get(i).copied())
                    .unwrap_or_else(|| self.base_limits()),
            ),
            _ => None,
        }
    }

    fn limits_or_base(&self, i: usize) -> Limits {
        let mut l = match &self.resolved_for {
            Some((_, Some(per))) => per.get(i).copied().unwrap_or_else(|| self.base_limits()),
            _ => self.base_limits(),
        };
        if self.timeout_forced {
            l.timeout = self.timeout;
        }
        l
    }

    /// The per-attempt timeout for endpoint `i` of the snapshot these settings were resolved
    /// for: consumer method > the instance's `{method}.timeout` > consumer > the instance's
    /// `timeout` > 1000 ms (a `timeout` attachment beats them all).
    pub fn timeout_for(&self, i: usize) -> Duration {
        self.limits_or_base(i).timeout
    }

    /// The in-flight cap for endpoint `i` of the snapshot these settings were resolved for,
    /// with the same precedence as [`Effective::timeout_for`].
    pub fn actives_for(&self, i: usize) -> Option<u32> {
        self.limits_or_base(i).actives
    }
}

/// Dubbo's `getMethodPositiveParameter`: the first layer that sets a value decides, and a
/// value that is not positive means the default, 1000 ms.
fn positive_timeout(t: Option<i64>) -> Duration {
    match t {
        Some(t) if t > 0 => Duration::from_millis(t as u64),
        _ => Duration::from_millis(1000),
    }
}

/// `timeout` and `actives` as one layer sets them (`None`: not set there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProviderLayer {
    timeout: Option<i64>,
    actives: Option<i64>,
}

/// What one provider's registration says about the calls it receives: service-level and
/// per-method `timeout` and `actives`. Parsed once per endpoint and snapshot.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProviderKeys {
    service: ProviderLayer,
    methods: Vec<(String, ProviderLayer)>,
}

impl ProviderKeys {
    /// Reads `timeout`, `actives` and `{method}.timeout`, `{method}.actives` (the method is
    /// what precedes the first dot, as Dubbo's `URLParam` splits keys). A `default.timeout`
    /// or `default.actives` (registered by Dubbo 2.6 providers) counts as the service-level
    /// key when that is absent, as Dubbo 3 reads it. Values that are not integers are ignored.
    pub(crate) fn parse(params: &BTreeMap<String, String>) -> ProviderKeys {
        let mut out = ProviderKeys::default();
        let mut legacy = ProviderLayer::default();
        for (k, v) in params {
            let (method, key) = match k.split_once('.') {
                Some((m, key)) => (Some(m), key),
                None => (None, k.as_str()),
            };
            if key != "timeout" && key != "actives" {
                continue;
            }
            let Ok(n) = v.trim().parse::<i64>() else {
                continue;
            };
            let layer = match method {
                None => &mut out.service,
                Some("default") => &mut legacy,
                Some(m) => match out.methods.iter().position(|(name, _)| name == m) {
                    Some(at) => &mut out.methods[at].1,
                    None => {
                        out.methods.push((m.to_string(), ProviderLayer::default()));
                        &mut out.methods.last_mut().expect("just pushed").1
                    }
                },
            };
            if key == "timeout" {
                layer.timeout = Some(n);
            } else {
                layer.actives = Some(n);
            }
        }
        out.service.timeout = out.service.timeout.or(legacy.timeout);
        out.service.actives = out.service.actives.or(legacy.actives);
        out
    }

    fn method(&self, m: &str) -> ProviderLayer {
        self.methods
            .iter()
            .find(|(name, _)| name == m)
            .map(|(_, l)| *l)
            .unwrap_or_default()
    }

    fn is_empty(&self) -> bool {
        self.service == ProviderLayer::default() && self.methods.is_empty()
    }
}

/// Consumer-side configuration of one service: global defaults, the service's own settings,
/// and per-method settings.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// Consumer global layer (lowest consumer precedence).
    pub global: Settings,
    /// Consumer service layer.
    pub service: Settings,
    /// Consumer method layers.
    pub methods: HashMap<String, Settings>,
    /// User fallback for `mock` (`fail:` semantics) set in code.
    pub fallback: Option<MockAction>,
    /// Outlier ejection for the service (on by default; see [`OutlierConfig`]). In the YAML
    /// file: the `outlier.*` keys at the global or service level.
    pub outlier: OutlierConfig,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceDoc {
    #[serde(flatten)]
    settings: Settings,
    #[serde(default)]
    methods: HashMap<String, Settings>,
}

#[derive(Deserialize)]
struct FileDoc {
    #[serde(flatten)]
    global: Settings,
    #[serde(default)]
    services: HashMap<String, ServiceDoc>,
}

impl ClusterConfig {
    /// Builder: strategy (service layer).
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.service.strategy = Some(s);
        self
    }
    /// Builder: retries (service layer).
    pub fn retries(mut self, r: u32) -> Self {
        self.service.retries = Some(r as i64);
        self
    }
    /// Builder: per-attempt timeout (service layer).
    pub fn timeout(mut self, t: Duration) -> Self {
        self.service.timeout = Some(t.as_millis() as u64);
        self
    }
    /// Builder: settings for one method.
    pub fn method(mut self, name: &str, settings: Settings) -> Self {
        self.methods.insert(name.to_string(), settings);
        self
    }
    /// Builder: the service layer as a whole.
    pub fn service_settings(mut self, settings: Settings) -> Self {
        self.service = settings;
        self
    }
    /// Builder: outlier-ejection settings (`OutlierConfig::disabled()` turns it off).
    pub fn outlier(mut self, outlier: OutlierConfig) -> Self {
        self.outlier = outlier;
        self
    }
    /// Builder: a fallback function used on non-business failures (like `mock=fail:...`).
    pub fn fallback(
        mut self,
        f: impl Fn(&Invocation, Option<&Error>) -> Result<Value, Error> + Send + Sync + 'static,
    ) -> Self {
        self.fallback = Some(MockAction::Fallback(Arc::new(f)));
        self
    }

    /// Loads the configuration for `interface` from YAML (or JSON):
    ///
    /// ```yaml
    /// cluster: failover        # consumer global
    /// retries: 2
    /// timeout: 1000
    /// services:
    ///   com.foo.Bar:           # consumer service; keys: cluster, retries, timeout, forks,
    ///     cluster: forking     # sticky, actives, mock, broadcast.fail.percent,
    ///     forks: 3             # failbacktasks, hedge, deadline, zone, merger
    ///     methods:
    ///       sayHello: { retries: 0, timeout: 300 }
    /// ```
    ///
    /// Outlier ejection is per service, set at the global or service level (not per method):
    /// `outlier.enabled`, `outlier.consecutive`, `outlier.success-rate` (`0.8` or `80%`),
    /// `outlier.window`, `outlier.minimum-volume`, `outlier.base-penalty`,
    /// `outlier.max-penalty` (durations: `30s`, `500ms` or ms), `outlier.max-ejection-percent`.
    ///
    /// Unknown keys and invalid values are errors naming the key.
    pub fn from_yaml(text: &str, interface: &str) -> Result<ClusterConfig, Error> {
        let mut raw: serde_norway::Value = serde_norway::from_str(text)
            .map_err(|e| Error::bad_config(format!("cluster config: {e}")))?;
        let mut outlier = OutlierConfig::default();
        take_outlier(&mut raw, "cluster config", &mut outlier)?;
        if let Some(services) = raw.get_mut("services").and_then(|s| s.as_mapping_mut()) {
            for (name, svc) in services.iter_mut() {
                let name = name.as_str().unwrap_or("?");
                let mut own = outlier;
                take_outlier(svc, &format!("cluster config, service {name}"), &mut own)?;
                if name == interface {
                    outlier = own;
                }
            }
        }
        check_keys(&raw, "cluster config", &["services"])?;
        if let Some(services) = raw.get("services").and_then(|s| s.as_mapping()) {
            for (name, svc) in services {
                let name = name.as_str().unwrap_or("?");
                check_keys(
                    svc,
                    &format!("cluster config, service {name}"),
                    &["methods"],
                )?;
            }
        }
        let doc: FileDoc = serde_norway::from_value(raw)
            .map_err(|e| Error::bad_config(format!("cluster config: {e}")))?;
        doc.global.check("cluster config (global)")?;
        let mut cfg = ClusterConfig {
            global: doc.global,
            outlier,
            ..ClusterConfig::default()
        };
        for (name, svc) in doc.services {
            svc.settings
                .check(&format!("cluster config, service {name}"))?;
            for (m, s) in &svc.methods {
                s.check(&format!("cluster config, service {name}, method {m}"))?;
            }
            if name == interface {
                cfg.service = svc.settings;
                cfg.methods = svc.methods;
            }
        }
        Ok(cfg)
    }

    /// Validates every layer (mock, hedge and percent syntax).
    pub fn validate(&self) -> Result<(), Error> {
        self.global.check("global")?;
        self.service.check("service")?;
        for (m, s) in &self.methods {
            s.check(&format!("method {m}"))?;
        }
        Ok(())
    }

    /// Resolves the layers for `method` (or the service default) for a call to the provider
    /// that registered `provider`: consumer method > provider method > consumer (service over
    /// global) > provider service > Dubbo's defaults for `timeout` and `actives`; consumer
    /// method > consumer for every other key.
    pub fn resolve(&self, method: Option<&str>, provider: &BTreeMap<String, String>) -> Effective {
        let mut e = self.consumer_side(method);
        let keys = ProviderKeys::parse(provider);
        let l = self.limits(method, &keys);
        e.timeout = l.timeout;
        e.actives = l.actives;
        e
    }

    /// The settings for `method` over the endpoints of the snapshot at `epoch`, whose
    /// registrations are `providers` (in endpoint order).
    pub(crate) fn resolve_for_snapshot(
        &self,
        method: Option<&str>,
        epoch: u64,
        providers: &[ProviderKeys],
    ) -> Effective {
        let mut e = self.consumer_side(method);
        let base = e.base_limits();
        let mut differs = false;
        let limits: Vec<Limits> = providers
            .iter()
            .map(|p| {
                let l = if p.is_empty() {
                    base
                } else {
                    self.limits(method, p)
                };
                differs |= l != base;
                l
            })
            .collect();
        e.resolved_for = Some((epoch, differs.then(|| Arc::from(limits))));
        e
    }

    /// Every key but the provider-settable ones: consumer method > consumer service >
    /// consumer global > default. `timeout`/`actives` as for an instance that registered
    /// neither.
    fn consumer_side(&self, method: Option<&str>) -> Effective {
        let consumer_method = method
            .and_then(|m| self.methods.get(m))
            .cloned()
            .unwrap_or_default();
        let merged = consumer_method.over(&self.service).over(&self.global);
        let mut e = Effective::from_settings(&merged, Strategy::Failover);
        if e.mock.is_none() {
            e.mock = self.fallback.clone().map(Mock::Fail);
        }
        e
    }

    /// `timeout` and `actives` for a call of `method` to the provider whose keys are `p`.
    fn limits(&self, method: Option<&str>, p: &ProviderKeys) -> Limits {
        let cm = method.and_then(|m| self.methods.get(m));
        let pm = method.map(|m| p.method(m)).unwrap_or_default();
        let c = |f: fn(&Settings) -> Option<i64>| {
            cm.and_then(f)
                .or_else(|| f(&self.service))
                .or_else(|| f(&self.global))
        };
        let cm_timeout = cm.and_then(|s| s.timeout.map(clamp_u64));
        let timeout = cm_timeout
            .or(pm.timeout)
            .or_else(|| c(|s| s.timeout.map(clamp_u64)))
            .or(p.service.timeout);
        let cm_actives = cm.and_then(|s| s.actives.map(i64::from));
        let actives = cm_actives
            .or(pm.actives)
            .or_else(|| c(|s| s.actives.map(i64::from)))
            .or(p.service.actives);
        Limits {
            timeout: positive_timeout(timeout),
            actives: actives
                .filter(|a| *a > 0)
                .map(|a| a.min(u32::MAX as i64) as u32),
        }
    }

    /// Method names that have settings of their own (consumer side, or `{method}.timeout` /
    /// `{method}.actives` registered by any of `providers`).
    pub(crate) fn method_names(&self, providers: &[ProviderKeys]) -> Vec<String> {
        let mut names: Vec<String> = self.methods.keys().cloned().collect();
        for p in providers {
            for (m, _) in &p.methods {
                if !names.iter().any(|n| n == m) {
                    names.push(m.clone());
                }
            }
        }
        names
    }
}

fn clamp_u64(t: u64) -> i64 {
    t.min(i64::MAX as u64) as i64
}

/// The keys a settings layer may hold.
pub(crate) const SETTING_KEYS: [&str; 13] = [
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
];

fn check_keys(v: &serde_norway::Value, what: &str, extra: &[&str]) -> Result<(), Error> {
    let Some(map) = v.as_mapping() else {
        return Err(Error::bad_config(format!(
            "{what}: expected a mapping of settings"
        )));
    };
    for k in map.keys() {
        let k = k.as_str().unwrap_or("");
        if !SETTING_KEYS.contains(&k) && !extra.contains(&k) {
            return Err(Error::bad_config(format!(
                "{what}: unknown key {k:?} (known: {}, {})",
                SETTING_KEYS.join(", "),
                extra.join(", ")
            )));
        }
    }
    Ok(())
}

/// The outlier-ejection keys of a settings layer.
pub(crate) const OUTLIER_KEYS: [&str; 8] = [
    "outlier.enabled",
    "outlier.consecutive",
    "outlier.success-rate",
    "outlier.window",
    "outlier.minimum-volume",
    "outlier.base-penalty",
    "outlier.max-penalty",
    "outlier.max-ejection-percent",
];

/// Removes the `outlier.*` keys from the mapping `v` and applies them to `cfg`.
fn take_outlier(
    v: &mut serde_norway::Value,
    what: &str,
    cfg: &mut OutlierConfig,
) -> Result<(), Error> {
    let Some(map) = v.as_mapping_mut() else {
        return Ok(()); // check_keys reports it
    };
    let keys: Vec<String> = map
        .keys()
        .filter_map(|k| k.as_str())
        .filter(|k| k.starts_with("outlier."))
        .map(str::to_string)
        .collect();
    for key in keys {
        let value = map
            .remove(key.as_str())
            .unwrap_or(serde_norway::Value::Null);
        let bad = |expected: &str| {
            Error::bad_config(format!(
                "{what}: {key} must be {expected} (got {})",
                serde_norway::to_string(&value)
                    .unwrap_or_default()
                    .trim_end()
            ))
        };
        let text = match &value {
            serde_norway::Value::String(s) => s.trim().to_string(),
            serde_norway::Value::Number(n) => n.to_string(),
            serde_norway::Value::Bool(b) => b.to_string(),
            _ => String::new(),
        };
        let count = || text.parse::<u32>().map_err(|_| bad("a whole number"));
        let duration = || parse_duration(&text).ok_or_else(|| bad("a duration such as 30s"));
        match key.as_str() {
            "outlier.enabled" => cfg.enabled = text.parse().map_err(|_| bad("true or false"))?,
            "outlier.consecutive" => cfg.consecutive_failures = count()?,
            "outlier.success-rate" => {
                let rate = match text.strip_suffix('%') {
                    Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                    None => text.parse::<f64>(),
                };
                cfg.success_rate = rate
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| bad("a fraction in 0..=1 or a percentage"))?;
            }
            "outlier.window" => cfg.window = duration()?,
            "outlier.minimum-volume" => cfg.minimum_volume = count()?,
            "outlier.base-penalty" => cfg.base_penalty = duration()?,
            "outlier.max-penalty" => cfg.max_penalty = duration()?,
            "outlier.max-ejection-percent" => {
                cfg.max_ejection_percent = count()
                    .ok()
                    .filter(|p| *p <= 100)
                    .ok_or_else(|| bad("a percentage in 0..=100"))?;
            }
            _ => {
                return Err(Error::bad_config(format!(
                    "{what}: unknown key {key:?} (known: {})",
                    OUTLIER_KEYS.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// Per-call overrides from attachments: `retries`, `timeout` (ms).
pub(crate) fn apply_attachments(e: &Effective, inv: &Invocation) -> Option<Effective> {
    let retries = inv
        .attachment("retries")
        .and_then(|r| r.trim().parse::<i64>().ok());
    let timeout = inv
        .attachment("timeout")
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|t| *t > 0);
    if retries.is_none() && timeout.is_none() {
        return None;
    }
    let mut o = e.clone();
    if let Some(r) = retries {
        o.retries = r.clamp(0, u32::MAX as i64) as u32;
    }
    if let Some(t) = timeout {
        o.timeout = Duration::from_millis(t);
        o.timeout_forced = true;
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_dubbos() {
        let e = ClusterConfig::default().resolve(None, &BTreeMap::new());
        assert_eq!(e.strategy, Strategy::Failover);
        assert_eq!(e.retries, 2);
        assert_eq!(e.timeout, Duration::from_millis(1000));
        assert_eq!(e.forks, 2);
        assert_eq!(e.broadcast_fail_percent, 100);
        assert_eq!(e.failbacktasks, 100);
        assert!(!e.sticky);
        let fb = ClusterConfig::default()
            .strategy(Strategy::Failback)
            .resolve(None, &BTreeMap::new());
        assert_eq!(fb.retries, 3, "failback retries default to 3");
    }

    /// Dubbo 3.3's `ServiceAddressURL.getMethodParameter`: consumer method > provider method
    /// > consumer (reference over `<dubbo:consumer>`) > provider > default.
    #[test]
    fn precedence_is_consumer_method_provider_method_consumer_provider() {
        // Provider `sayHello.timeout=3000`, consumer service `timeout=500`: 3000.
        let provider = params(&[("sayHello.timeout", "3000"), ("timeout", "2000")]);
        let cfg = ClusterConfig::default().timeout(Duration::from_millis(500));
        assert_eq!(
            cfg.resolve(Some("sayHello"), &provider).timeout.as_millis(),
            3000
        );
        assert_eq!(
            cfg.resolve(Some("other"), &provider).timeout.as_millis(),
            500,
            "the consumer beats the provider's service-level value"
        );
        // Consumer global `timeout=300`, provider `timeout=2000`: 300.
        let cfg = ClusterConfig {
            global: Settings {
                timeout: Some(300),
                ..Default::default()
            },
            ..Default::default()
        };
        let provider = params(&[("timeout", "2000")]);
        assert_eq!(cfg.resolve(None, &provider).timeout.as_millis(), 300);
        // Nothing on the consumer: the provider's, then Dubbo's 1000 ms.
        let none = ClusterConfig::default();
        assert_eq!(none.resolve(None, &provider).timeout.as_millis(), 2000);
        assert_eq!(
            none.resolve(None, &BTreeMap::new()).timeout.as_millis(),
            1000
        );
        // A consumer method beats the provider method.
        let provider = params(&[("sayHello.timeout", "3000"), ("sayHello.actives", "4")]);
        let cfg = ClusterConfig::default().method(
            "sayHello",
            Settings {
                timeout: Some(100),
                ..Default::default()
            },
        );
        let e = cfg.resolve(Some("sayHello"), &provider);
        assert_eq!((e.timeout.as_millis(), e.actives), (100, Some(4)));
        // `actives` follows the same layers.
        let cfg = ClusterConfig::default().service_settings(Settings {
            actives: Some(9),
            ..Default::default()
        });
        assert_eq!(cfg.resolve(Some("sayHello"), &provider).actives, Some(4));
        assert_eq!(
            cfg.resolve(None, &params(&[("actives", "2")])).actives,
            Some(9)
        );
        // Per-call attachments beat all layers.
        let inv = Invocation::new("sayHello")
            .with_attachment("timeout", "50")
            .with_attachment("retries", "0");
        let o = apply_attachments(&cfg.resolve(Some("sayHello"), &provider), &inv).unwrap();
        assert_eq!((o.timeout.as_millis(), o.retries), (50, 0));
        assert_eq!(o.timeout_for(0).as_millis(), 50);
    }

    /// `retries` and `forks` are the consumer's: a provider's `retries=0` does not stop a
    /// consumer's failover.
    #[test]
    fn retries_and_forks_come_from_the_consumer_only() {
        let provider = params(&[("retries", "0"), ("sayHello.retries", "0"), ("forks", "5")]);
        let e = ClusterConfig::default().resolve(Some("sayHello"), &provider);
        assert_eq!((e.retries, e.forks), (2, 2), "Dubbo's defaults");
        let cfg = ClusterConfig {
            global: Settings {
                retries: Some(7),
                forks: Some(4),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = cfg.resolve(Some("sayHello"), &provider);
        assert_eq!((e.retries, e.forks), (7, 4));
        let names = cfg.method_names(&[ProviderKeys::parse(&provider)]);
        assert!(
            names.is_empty(),
            "provider retries make no method of their own"
        );
    }

    /// Per endpoint of a snapshot: each instance's registration sets its own values.
    #[test]
    fn snapshot_resolution_is_per_endpoint() {
        let providers = [
            ProviderKeys::parse(&params(&[("timeout", "200")])),
            ProviderKeys::parse(&params(&[("timeout", "5000"), ("m.actives", "3")])),
            ProviderKeys::parse(&BTreeMap::new()),
        ];
        let cfg = ClusterConfig::default();
        let e = cfg.resolve_for_snapshot(Some("m"), 7, &providers);
        let t: Vec<u128> = (0..3).map(|i| e.timeout_for(i).as_millis()).collect();
        assert_eq!(t, [200, 5000, 1000]);
        assert_eq!(
            (0..3).map(|i| e.actives_for(i)).collect::<Vec<_>>(),
            [None, Some(3), None]
        );
        assert!(e.limits_at(8, 0).is_none(), "resolved for epoch 7 only");
        // Dubbo 2.6's `default.timeout` is the service-level value when `timeout` is absent.
        let legacy = ProviderKeys::parse(&params(&[("default.timeout", "700")]));
        let both = ProviderKeys::parse(&params(&[("default.timeout", "700"), ("timeout", "9")]));
        let e = cfg.resolve_for_snapshot(None, 7, &[legacy, both]);
        assert_eq!(
            (e.timeout_for(0).as_millis(), e.timeout_for(1).as_millis()),
            (700, 9)
        );
        // No endpoint registers anything: no per-endpoint array.
        let plain = cfg.resolve_for_snapshot(None, 7, &providers[2..]);
        assert!(matches!(plain.resolved_for, Some((7, None))));
    }

    #[test]
    fn failback_negative_retries_and_tasks_take_dubbos_defaults() {
        let cfg = ClusterConfig::default().service_settings(Settings {
            strategy: Some(Strategy::Failback),
            retries: Some(-1),
            failbacktasks: Some(0),
            ..Default::default()
        });
        let e = cfg.resolve(None, &BTreeMap::new());
        assert_eq!((e.retries, e.failbacktasks), (3, 100));
        let e =
            ClusterConfig::from_yaml("cluster: failback\nretries: -1\nfailbacktasks: -5\n", "x")
                .unwrap()
                .resolve(None, &BTreeMap::new());
        assert_eq!((e.retries, e.failbacktasks), (3, 100));
        // Failover keeps `retries <= -1` as one attempt.
        let e = ClusterConfig::default()
            .service_settings(Settings {
                retries: Some(-1),
                ..Default::default()
            })
            .resolve(None, &BTreeMap::new());
        assert_eq!(e.retries, 0);
    }

    #[test]
    fn yaml_with_dubbo_keys_and_clear_errors() {
        let text = "cluster: failfast\ntimeout: 800\nservices:\n  com.foo.Bar:\n    cluster: forking\n    forks: 3\n    broadcast.fail.percent: 50\n    methods:\n      sayHello: { retries: 0, mock: 'fail:return {\"x\": 1}' }\n";
        let cfg = ClusterConfig::from_yaml(text, "com.foo.Bar").unwrap();
        let e = cfg.resolve(Some("sayHello"), &BTreeMap::new());
        assert_eq!(
            (
                e.strategy,
                e.forks,
                e.retries,
                e.timeout.as_millis(),
                e.broadcast_fail_percent
            ),
            (Strategy::Forking, 3, 0, 800, 50)
        );
        assert!(matches!(e.mock, Some(Mock::Fail(MockAction::Return(_)))));
        let other = ClusterConfig::from_yaml(text, "com.foo.Other")
            .unwrap()
            .resolve(None, &BTreeMap::new());
        assert_eq!(other.strategy, Strategy::Failfast);

        let e = ClusterConfig::from_yaml("cluster: teleport\n", "x").unwrap_err();
        assert!(e.to_string().contains("teleport"), "{e}");
        let e = ClusterConfig::from_yaml("retires: 3\n", "x").unwrap_err();
        assert!(e.to_string().contains("retires"), "{e}");
        let e = ClusterConfig::from_yaml("services:\n  x:\n    mock: 'fail:return {'\n", "x")
            .unwrap_err();
        assert!(e.to_string().contains("not JSON"), "{e}");
        let e = ClusterConfig::from_yaml("broadcast.fail.percent: 150\n", "x").unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
    }

    #[test]
    fn outlier_keys_at_global_and_service_level() {
        let text = "outlier.consecutive: 3\noutlier.base-penalty: 10s\nservices:\n  com.foo.Bar:\n    outlier.success-rate: 90%\n    outlier.max-ejection-percent: 34\n    outlier.window: 60000\n  com.foo.Off:\n    outlier.enabled: false\n";
        let o = ClusterConfig::from_yaml(text, "com.foo.Bar")
            .unwrap()
            .outlier;
        assert_eq!(o.consecutive_failures, 3);
        assert_eq!(o.base_penalty, Duration::from_secs(10));
        assert_eq!(o.success_rate, 0.9);
        assert_eq!(o.max_ejection_percent, 34);
        assert_eq!(o.window, Duration::from_secs(60));
        assert_eq!(o.max_penalty, Duration::from_secs(300), "default kept");
        assert!(o.enabled);
        let off = ClusterConfig::from_yaml(text, "com.foo.Off")
            .unwrap()
            .outlier;
        assert!(!off.enabled);
        assert_eq!(off.consecutive_failures, 3, "global layer applies");
        assert_eq!(
            ClusterConfig::from_yaml("timeout: 5\n", "x")
                .unwrap()
                .outlier,
            OutlierConfig::default()
        );
        for (bad, needle) in [
            ("outlier.consecutive: lots\n", "outlier.consecutive"),
            ("outlier.success-rate: 1.5\n", "outlier.success-rate"),
            (
                "outlier.max-ejection-percent: 150\n",
                "outlier.max-ejection-percent",
            ),
            ("outlier.penalty: 3s\n", "outlier.penalty"),
            (
                "services:\n  x:\n    methods:\n      m: { outlier.consecutive: 2 }\n",
                "outlier.consecutive",
            ),
        ] {
            let e = ClusterConfig::from_yaml(bad, "x").unwrap_err();
            assert!(e.to_string().contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn mock_and_hedge_syntax() {
        assert!(matches!(
            "force:return [1,2]".parse::<Mock>().unwrap(),
            Mock::Force(MockAction::Return(Value::Array(_)))
        ));
        assert!(matches!(
            "return".parse::<Mock>().unwrap(),
            Mock::Fail(MockAction::Return(Value::Null))
        ));
        assert!(
            matches!("fail:throw busy".parse::<Mock>().unwrap(), Mock::Fail(MockAction::Throw(m)) if m == "busy")
        );
        assert!("force:explode".parse::<Mock>().is_err());
        assert_eq!("p95".parse::<Hedge>().unwrap(), Hedge::P95);
        assert_eq!(
            "30ms".parse::<Hedge>().unwrap(),
            Hedge::After(Duration::from_millis(30))
        );
        assert_eq!(
            "0.5s".parse::<Hedge>().unwrap(),
            Hedge::After(Duration::from_millis(500))
        );
        assert!("soon".parse::<Hedge>().is_err());
    }
}
