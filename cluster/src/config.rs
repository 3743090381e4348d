//! Cluster configuration with Dubbo's key names and precedence.
//!
//! Layers, highest first: per-call attachments (`retries`, `timeout`) > consumer method >
//! consumer service > provider method (`sayHello.timeout=...` registered in the provider's URL
//! or metadata) > provider service > consumer global > Dubbo's defaults. The effective values
//! are resolved once per snapshot and method ([`Effective`]), never parsed per call.

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
    /// `retries` (failover extra attempts; failback background retries). Negative: none.
    #[serde(default)]
    pub retries: Option<i64>,
    /// `timeout` in ms, per attempt.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// `forks` (forking): parallel attempts; `<= 0` means all.
    #[serde(default)]
    pub forks: Option<i64>,
    /// `sticky`: keep using the last instance that answered while it stays in the list.
    #[serde(default)]
    pub sticky: Option<bool>,
    /// `actives`: consumer-side cap on concurrent calls per instance (0 = none).
    #[serde(default)]
    pub actives: Option<u32>,
    /// `mock`: degrade rule.
    #[serde(default)]
    pub mock: Option<String>,
    /// `broadcast.fail.percent` (0..=100).
    #[serde(default, rename = "broadcast.fail.percent")]
    pub broadcast_fail_percent: Option<i64>,
    /// `failbacktasks`: pending background retries at most.
    #[serde(default)]
    pub failbacktasks: Option<usize>,
    /// `hedge`: `p95` or a delay (`30ms`); off when unset.
    #[serde(default)]
    pub hedge: Option<String>,
    /// `deadline` in ms: bounds all attempts of a call together.
    #[serde(default)]
    pub deadline: Option<u64>,
    /// `zone`: the consumer's zone (zone-aware).
    #[serde(default)]
    pub zone: Option<String>,
}

impl Settings {
    /// Reads the keys a provider may register (`timeout`, `retries`, `forks`, `actives`) from
    /// its parameters, method-scoped (`{method}.timeout`) when `method` is given.
    pub fn from_provider_params(
        params: &BTreeMap<String, String>,
        method: Option<&str>,
    ) -> Settings {
        let get = |k: &str| -> Option<&String> {
            match method {
                Some(m) => params.get(&format!("{m}.{k}")),
                None => params.get(k),
            }
        };
        let num = |k: &str| get(k).and_then(|v| v.trim().parse::<i64>().ok());
        Settings {
            retries: num("retries"),
            timeout: num("timeout").filter(|t| *t > 0).map(|t| t as u64),
            forks: num("forks"),
            actives: num("actives").filter(|a| *a >= 0).map(|a| a as u32),
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
#[derive(Debug, Clone)]
pub struct Effective {
    /// Strategy.
    pub strategy: Strategy,
    /// Extra attempts (failover) or background retries (failback).
    pub retries: u32,
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Parallel attempts for forking; 0 = every candidate.
    pub forks: usize,
    /// Sticky instance.
    pub sticky: bool,
    /// Per-instance in-flight cap (None: no cap).
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
}

impl Effective {
    fn from_settings(s: &Settings, strategy_default: Strategy) -> Effective {
        let strategy = s.strategy.unwrap_or(strategy_default);
        let default_retries = if strategy == Strategy::Failback { 3 } else { 2 };
        Effective {
            strategy,
            retries: s
                .retries
                .map(|r| r.max(0) as u32)
                .unwrap_or(default_retries),
            timeout: Duration::from_millis(s.timeout.unwrap_or(1000)),
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
            failbacktasks: s.failbacktasks.unwrap_or(100),
            hedge: s.hedge.as_deref().and_then(|h| h.parse().ok()),
            deadline: s.deadline.map(Duration::from_millis),
            zone: s.zone.clone(),
        }
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
    ///     forks: 3             # failbacktasks, hedge, deadline, zone
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

    /// Resolves the layers for `method` (or the service default) given the provider's
    /// registered parameters.
    pub fn resolve(&self, method: Option<&str>, provider: &BTreeMap<String, String>) -> Effective {
        let provider_service = Settings::from_provider_params(provider, None);
        let provider_method = method
            .map(|m| Settings::from_provider_params(provider, Some(m)))
            .unwrap_or_default();
        let consumer_method = method
            .and_then(|m| self.methods.get(m))
            .cloned()
            .unwrap_or_default();
        let merged = consumer_method
            .over(&self.service)
            .over(&provider_method)
            .over(&provider_service)
            .over(&self.global);
        let mut e = Effective::from_settings(&merged, Strategy::Failover);
        if e.mock.is_none() {
            e.mock = self.fallback.clone().map(Mock::Fail);
        }
        e
    }

    /// Method names that have settings of their own (consumer side, or provider
    /// `{method}.{key}` parameters).
    pub(crate) fn method_names(&self, provider: &BTreeMap<String, String>) -> Vec<String> {
        let mut names: Vec<String> = self.methods.keys().cloned().collect();
        for k in provider.keys() {
            if let Some((m, key)) = k.rsplit_once('.') {
                if matches!(key, "timeout" | "retries" | "forks" | "actives")
                    && !names.iter().any(|n| n == m)
                {
                    names.push(m.to_string());
                }
            }
        }
        names
    }
}

/// The keys a settings layer may hold.
pub(crate) const SETTING_KEYS: [&str; 12] = [
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
        o.retries = r.max(0) as u32;
    }
    if let Some(t) = timeout {
        o.timeout = Duration::from_millis(t);
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

    #[test]
    fn precedence_is_consumer_method_service_provider_method_provider_service_global() {
        let provider = params(&[
            ("timeout", "400"),
            ("sayHello.timeout", "300"),
            ("retries", "5"),
        ]);
        let mut cfg = ClusterConfig {
            global: Settings {
                timeout: Some(900),
                retries: Some(7),
                forks: Some(4),
                ..Default::default()
            },
            ..Default::default()
        };
        // Provider service beats consumer global.
        let e = cfg.resolve(None, &provider);
        assert_eq!((e.timeout.as_millis(), e.retries, e.forks), (400, 5, 4));
        // Provider method beats provider service.
        assert_eq!(
            cfg.resolve(Some("sayHello"), &provider).timeout.as_millis(),
            300
        );
        // Consumer service beats provider method.
        cfg.service.timeout = Some(200);
        assert_eq!(
            cfg.resolve(Some("sayHello"), &provider).timeout.as_millis(),
            200
        );
        // Consumer method beats everything.
        cfg = cfg.method(
            "sayHello",
            Settings {
                timeout: Some(100),
                ..Default::default()
            },
        );
        assert_eq!(
            cfg.resolve(Some("sayHello"), &provider).timeout.as_millis(),
            100
        );
        assert_eq!(
            cfg.resolve(Some("other"), &provider).timeout.as_millis(),
            200
        );
        let names = cfg.method_names(&provider);
        assert!(names.contains(&"sayHello".to_string()));
        // Per-call attachments beat all layers.
        let inv = Invocation::new("sayHello")
            .with_attachment("timeout", "50")
            .with_attachment("retries", "0");
        let o = apply_attachments(&cfg.resolve(Some("sayHello"), &provider), &inv).unwrap();
        assert_eq!((o.timeout.as_millis(), o.retries), (50, 0));
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
