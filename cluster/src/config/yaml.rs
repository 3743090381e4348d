//! The YAML (or JSON) loader: Dubbo's key names at three levels (global, `services.{name}`,
//! `services.{name}.methods.{method}`), every value parsed by [`Settings::set`], every error
//! naming where, the key and the value.

use std::collections::HashMap;

use switchman_core::Error;
use switchman_loadbalance::OutlierConfig;

use super::durations::parse_duration;
use super::settings::SETTING_KEYS;
use super::{ClusterConfig, Settings};

/// The outlier-ejection keys of a settings layer (global or service level).
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

use switchman_core::yaml::{self, Mapping, Value};

impl ClusterConfig {
    /// Loads the configuration for `interface` from YAML (or JSON):
    ///
    /// ```yaml
    /// cluster: failover        # consumer global
    /// retries: 2
    /// timeout: 1000            # ms, or 800ms / 1.5s
    /// loadbalance: roundrobin
    /// services:
    ///   com.foo.Bar:           # consumer service; keys: cluster, retries, timeout, forks,
    ///     cluster: forking     # sticky, actives, mock, broadcast.fail.percent,
    ///     forks: 3             # failbacktasks, hedge, deadline, zone, merger,
    ///     methods:             # loadbalance, hash.nodes, hash.arguments
    ///       sayHello: { retries: 0, timeout: 300, loadbalance: consistenthash, hash.arguments: "0,1" }
    /// ```
    ///
    /// Outlier ejection is per service, set at the global or service level (not per method):
    /// `outlier.enabled`, `outlier.consecutive`, `outlier.success-rate` (`0.8` or `80%`),
    /// `outlier.window`, `outlier.minimum-volume`, `outlier.base-penalty`,
    /// `outlier.max-penalty` (durations: `30s`, `500ms` or ms), `outlier.max-ejection-percent`.
    ///
    /// Every service is checked, not only `interface`. Unknown keys and invalid values are
    /// errors naming the level, the key and the value (see [`Settings::set`] for the values).
    pub fn from_yaml(text: &str, interface: &str) -> Result<ClusterConfig, Error> {
        let what = "cluster config";
        // Bounded like every YAML we read (switchman_core::yaml).
        let raw: Value = yaml::from_str(text, what)?;
        let top = mapping(&raw, what)?;
        let mut cfg = ClusterConfig::default();
        let mut outlier = OutlierConfig::default();
        for (k, v) in top {
            let key = key_of(k, what)?;
            if key == "services" {
                continue;
            }
            if key.starts_with("outlier.") {
                apply_outlier(&mut outlier, key, v, what)?;
            } else {
                set(&mut cfg.global, key, v, what, &["services"])?;
            }
        }
        let mut chosen = outlier;
        if let Some(services) = top.get("services") {
            for (name, svc) in mapping(services, "cluster config, services")? {
                let name = key_of(name, "cluster config, services")?;
                let what = format!("cluster config, service {name}");
                let mut own = outlier;
                let mut settings = Settings::new();
                let mut methods = HashMap::new();
                for (k, v) in mapping(svc, &what)? {
                    let key = key_of(k, &what)?;
                    if key == "methods" {
                        for (m, ms) in mapping(v, &format!("{what}, methods"))? {
                            let m = key_of(m, &format!("{what}, methods"))?;
                            let what = format!("{what}, method {m}");
                            let mut s = Settings::new();
                            for (k, v) in mapping(ms, &what)? {
                                set(&mut s, key_of(k, &what)?, v, &what, &[])?;
                            }
                            methods.insert(m.to_string(), s);
                        }
                    } else if key.starts_with("outlier.") {
                        apply_outlier(&mut own, key, v, &what)?;
                    } else {
                        set(&mut settings, key, v, &what, &["methods"])?;
                    }
                }
                if name == interface {
                    cfg.service = settings;
                    cfg.methods = methods;
                    chosen = own;
                }
            }
        }
        cfg.outlier = chosen;
        Ok(cfg)
    }
}

fn mapping<'v>(v: &'v Value, what: &str) -> Result<&'v Mapping, Error> {
    v.as_mapping()
        .ok_or_else(|| Error::bad_config(format!("{what}: expected a mapping of settings")))
}

fn key_of<'v>(k: &'v Value, what: &str) -> Result<&'v str, Error> {
    k.as_str()
        .ok_or_else(|| Error::bad_config(format!("{what}: the key {} is not a string", render(k))))
}

fn render(v: &Value) -> String {
    v.to_string()
}

/// A scalar as text (numbers and booleans as written; a list of scalars comma-joined, as
/// `hash.arguments: [0, 1]`).
fn text(v: &Value, what: &str, key: &str) -> Result<String, Error> {
    Ok(match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        Value::Sequence(items) => {
            let parts: Result<Vec<String>, Error> = items
                .iter()
                .map(|i| match i {
                    Value::Sequence(_) | Value::Mapping(_) => Err(Error::bad_config(format!(
                        "{what}: {key} must be a value or a list of values (got {})",
                        render(v)
                    ))),
                    other => text(other, what, key),
                })
                .collect();
            parts?.join(",")
        }
        _ => {
            return Err(Error::bad_config(format!(
                "{what}: {key} must be a value (got {})",
                render(v)
            )));
        }
    })
}

fn set(s: &mut Settings, key: &str, v: &Value, what: &str, extra: &[&str]) -> Result<(), Error> {
    if !SETTING_KEYS.contains(&key) {
        let mut known: Vec<&str> = SETTING_KEYS.to_vec();
        known.extend_from_slice(extra);
        if !extra.is_empty() {
            // The global and service levels (not a method) also take the outlier keys.
            known.extend_from_slice(&OUTLIER_KEYS);
        }
        return Err(Error::bad_config(format!(
            "{what}: unknown key {key:?} (known: {})",
            known.join(", ")
        )));
    }
    let value = text(v, what, key)?;
    s.set(key, &value)
        .map_err(|e| Error::bad_config(format!("{what}: {}", e.message())))
}

/// Applies one `outlier.*` key to `cfg`.
fn apply_outlier(cfg: &mut OutlierConfig, key: &str, v: &Value, what: &str) -> Result<(), Error> {
    let t = text(v, what, key)?;
    let t = t.trim();
    let bad = |expected: &str| {
        Error::bad_config(format!(
            "{what}: {key} must be {expected} (got {})",
            render(v)
        ))
    };
    let count = || t.parse::<u32>().map_err(|_| bad("a whole number"));
    let duration = || parse_duration(t).ok_or_else(|| bad("a duration such as 30s"));
    match key {
        "outlier.enabled" => cfg.enabled = t.parse().map_err(|_| bad("true or false"))?,
        "outlier.consecutive" => cfg.consecutive_failures = count()?,
        "outlier.success-rate" => {
            let rate = match t.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                None => t.parse::<f64>(),
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alias_bomb_is_refused_at_the_yaml_node_limit() {
        let text = format!(
            "retries: 2\nx: &a [{}]\ny: [{}]\n",
            vec!["0"; 1200].join(","),
            vec!["*a"; 800].join(",")
        );
        let e = ClusterConfig::from_yaml(&text, "com.foo.Bar").unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
        assert!(
            e.message()
                .starts_with("cluster config: over the YAML node limit"),
            "{e}"
        );
    }
}
