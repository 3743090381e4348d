//! Dubbo override data (`override://` URLs and the YAML configurator rules of Dubbo 2.7+/3)
//! parsed once into typed [`Configurator`]s.
//!
//! Registry adapters call these parsers when rule data arrives (ZooKeeper
//! `/dubbo/{interface}/configurators` children and `/dubbo/config/dubbo/*.configurators` nodes,
//! the Nacos config centre) and send the result as [`crate::Update::Configurators`]; nothing
//! re-reads rule text later.
//!
//! # What matches Dubbo
//!
//! - `override://0.0.0.0/...` applies to every provider, `override://host:port/...` to one
//!   provider. `enabled=false` switches the rule off; `disabled=true` takes the provider out
//!   of routing (`true` in any case; `disabled=false` enables a provider that registered
//!   `enabled=false`, and an empty `disabled` changes nothing); `weight` changes its weight (a
//!   negative weight is 0, as Dubbo balances with `max(weight, 0)`); any other parameter
//!   (`timeout`, `loadbalance`, ...) is set on the provider's parameters, and applies to that
//!   provider's calls only.
//! - `priority` (an integer, default 0) orders the rules for the same host: the higher
//!   applies later and wins (rules for every provider still apply before any rule naming a
//!   host). It is kept on the provider's parameters, as Dubbo does.
//! - The rule's own keys (`category`, `check`, `dynamic`, `enabled`, `group`, `version`,
//!   `application`, `side`, `configVersion`, `compatible_config`, `interfaces`, plus `interface`,
//!   `anyhost`, `providerAddresses`) are conditions, never copied onto providers.
//! - `application=X` (or the URL's user name, as Dubbo reads it) limits the rule to providers of
//!   application X; the rule's service key (`path` or `interface`, `group`, `version`) must
//!   be the provider's (`*` matches any service).
//! - `providerAddresses=a,b` narrows the rule to those providers (`0.0.0.0` and `0.0.0.0:*`
//!   mean all); an address that is only a host matches every port of that host.
//! - YAML: `configVersion`, `scope` (`service` with `key` = `[group/]interface[:version]`,
//!   or `application` with `key` = the application and per-item `services`), `enabled`, and
//!   `configs:` items with `addresses`, `providerAddresses`, `side`, `applications`,
//!   `parameters`, `type`/`enabled`. As in Dubbo's `ConfigParser`, an item's own `enabled` only
//!   counts when the item has a `type` other than `general` (and is then `false` unless given);
//!   otherwise the document's `enabled` (default `true`) decides. Without an explicit
//!   `side: provider` Dubbo checks only the host of an item address, so `10.0.0.1:20880`
//!   then means every provider on host 10.0.0.1; with `side: provider` it means that one
//!   provider. A JSON array of `override://` URL strings is accepted too (Dubbo's compatible
//!   form).
//! - Consumer rules (`side=consumer`, or a legacy `override://` URL whose host has no port,
//!   which Dubbo reads as a consumer address; YAML items with `side: consumer`, whose
//!   `addresses` are consumer hosts and whose `applications`, or an application-scope `key`,
//!   are consumer applications): parsed into [`crate::configurator::Side::Consumer`] rules. The
//!   directory applies the ones matching its consumer (host, application, service) to
//!   [`crate::Snapshot::consumer_overrides`], which override the consumer's own settings, as
//!   Dubbo's consumer configuration listeners do.
//!
//! # What is out of scope
//!
//! - A consumer rule limited to some providers (`providerAddresses` on a consumer item):
//!   reported as [`ErrorKind::Unsupported`] and skipped.
//! - Dubbo 3.0 `match:` conditions, legacy `~key` conditions, `absent://` rules and
//!   `0.0.0.0:port` addresses (every host on one port): reported as `Unsupported` and skipped,
//!   so a rule is never applied wider than it was written.
//!
//! Inputs are untrusted: texts over [`MAX_RULE_BYTES`] are refused and every error names the
//! source and what was wrong.

use switchman_core::{Error, ErrorKind, Result, ServiceKey, Url};

use crate::Configurator;
use crate::address::host_of;

/// Largest rule text accepted (256 KiB).
pub const MAX_RULE_BYTES: usize = 256 * 1024;

/// Keys that belong to the rule itself and are never copied onto providers.
const RULE_KEYS: &[&str] = &[
    "category",
    "check",
    "dynamic",
    "enabled",
    "group",
    "version",
    "application",
    "side",
    "configVersion",
    "compatible_config",
    "interfaces",
    "interface",
    "anyhost",
    "providerAddresses",
];

const CATEGORIES: &[&str] = &[
    "configurators",
    "dynamicconfigurators",
    "appdynamicconfigurators",
];

fn unsupported(msg: String) -> Error {
    Error::new(ErrorKind::Unsupported, msg)
}

/// Whether `url` is one of Dubbo's "clear every override" markers (`empty://...`). An
/// override URL with no parameter at all is skipped, as Dubbo 3 does.
pub fn is_clear_marker(url: &Url) -> bool {
    url.protocol() == "empty"
}

/// Parses one `override://` URL (as found, decoded, under `/dubbo/{interface}/configurators`).
///
/// Errors: [`ErrorKind::BadConfig`] for a malformed rule
/// (wrong protocol or category, bad weight, no parameter); `Unsupported` for consumer-side and
/// other rules this crate does not apply (see the module docs). A rule whose
/// `providerAddresses` name several providers cannot be one [`Configurator`]: use
/// [`from_override_url_all`].
pub fn from_override_url(url: &Url) -> Result<Configurator> {
    let mut all = from_override_url_all(url)?;
    match all.len() {
        1 => Ok(all.remove(0)),
        0 => Err(unsupported(format!(
            "override {}: its host and providerAddresses exclude each other; it applies to no provider",
            url.redacted()
        ))),
        n => Err(Error::bad_config(format!(
            "override {}: names {n} providers; use from_override_url_all",
            url.redacted()
        ))),
    }
}

/// Parses one `override://` URL into one rule per provider address it names (one for most
/// rules; several when `providerAddresses` lists several; none when its host and
/// `providerAddresses` exclude each other).
pub fn from_override_url_all(url: &Url) -> Result<Vec<Configurator>> {
    let what = || url.redacted();
    match url.protocol() {
        "override" => {}
        "absent" => {
            return Err(unsupported(format!(
                "override {}: absent:// rules are not supported",
                what()
            )));
        }
        other => {
            return Err(Error::bad_config(format!(
                "override {}: protocol {other:?} is not override://",
                what()
            )));
        }
    }
    if let Some(cat) = url.param("category")
        && !cat.split(',').any(|c| CATEGORIES.contains(&c.trim()))
    {
        return Err(Error::bad_config(format!(
            "override {}: category {cat:?} is not a configurator category",
            what()
        )));
    }
    let side = url.param("side").unwrap_or("provider");
    if side != "provider" && side != "consumer" && side != "*" {
        return Err(Error::bad_config(format!(
            "override {}: side={side:?} is neither provider nor consumer",
            what()
        )));
    }
    if let Some((k, _)) = url.params().iter().find(|(k, _)| k.starts_with('~')) {
        return Err(unsupported(format!(
            "override {}: condition key {k:?} is not supported",
            what()
        )));
    }
    let any_host = url.host() == "0.0.0.0" || url.host() == "*";
    let v27 = url.param("configVersion").is_some_and(|v| !v.is_empty());
    // A consumer rule: `side=consumer`, or (legacy, as Dubbo reads it) a host without a port
    // that is not every host, which names a consumer. Its host is the consumer's.
    let legacy_consumer = !v27 && !any_host && url.port().is_none_or(|p| p == 0);
    if side == "consumer" || legacy_consumer {
        return consumer_rule(url, (!any_host).then(|| bracket(url.host())));
    }
    // The host constraint: None = every provider.
    let host_rule: Option<String> = if v27 {
        // Dubbo 2.7+: only the host is compared; providerAddresses carries ports.
        (!any_host).then(|| bracket(url.host()))
    } else {
        match url.port().filter(|p| *p != 0) {
            Some(p) if any_host => {
                return Err(unsupported(format!(
                    "override {}: 0.0.0.0:{p} (every host on one port) is not supported",
                    what()
                )));
            }
            Some(p) => Some(format!("{}:{p}", bracket(url.host()))),
            // Every host (a host without a port is a consumer rule, above).
            None => None,
        }
    };
    let mut base = scoped(url)?;
    for (k, v) in url.params() {
        if RULE_KEYS.contains(&k.as_str()) {
            continue;
        }
        match k.as_str() {
            // Dubbo balances with `max(weight, 0)`: a negative weight is 0.
            "weight" => {
                let w = v.trim();
                let w = match w.parse::<i64>() {
                    Ok(n) if n < 0 => "0",
                    _ => w,
                };
                base.parameters.insert(k.clone(), w.to_string());
            }
            // Dubbo reads `disabled` only when it is not empty, as Java's
            // `Boolean.parseBoolean` (`true` in any case); an empty one changes nothing.
            "disabled" => {
                let d = v.trim();
                if !d.is_empty() {
                    let on = d.eq_ignore_ascii_case("true");
                    base.parameters
                        .insert(k.clone(), if on { "true" } else { "false" }.into());
                }
            }
            "priority" => {
                if v.trim().parse::<i32>().is_err() {
                    return Err(Error::bad_config(format!(
                        "override {}: priority={v:?} is not an integer",
                        what()
                    )));
                }
                base.parameters.insert(k.clone(), v.trim().to_string());
            }
            _ => {
                base.parameters.insert(k.clone(), v.clone());
            }
        }
    }
    if base.parameters.is_empty() {
        return Err(Error::bad_config(format!(
            "override {}: sets no parameter",
            what()
        )));
    }
    let provider_addrs: Vec<&str> = url
        .param("providerAddresses")
        .map(|p| {
            p.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    if provider_addrs.is_empty() {
        out.push(with_address(&base, host_rule.as_deref()));
    } else {
        let mut seen = Vec::new();
        for pa in provider_addrs {
            let narrowed = narrow(host_rule.as_deref(), pa)
                .map_err(|e| unsupported(format!("override {}: {e}", what())))?;
            if let Some(addr) = narrowed
                && !seen.contains(&addr)
            {
                out.push(with_address(&base, addr.as_deref()));
                seen.push(addr);
            }
        }
    }
    for r in &out {
        r.validate()
            .map_err(|e| Error::bad_config(format!("override {}: {}", what(), e.message())))?;
    }
    Ok(out)
}

/// The rule keys and service scope of `url` as one rule ([`from_override_url_all`] reads the
/// same): the application, the enabled flag and the service key.
fn scoped(url: &Url) -> Result<Configurator> {
    let what = || url.redacted();
    let mut base = Configurator::for_all();
    base.enabled = url
        .param("enabled")
        .is_none_or(|v| v.trim().eq_ignore_ascii_case("true"));
    let app = url
        .param("application")
        .or(url.username())
        .filter(|a| !a.is_empty() && *a != "*");
    if let Some(a) = app {
        base.applications = vec![a.to_string()];
    }
    let interface = url
        .param("interface")
        .filter(|s| !s.is_empty())
        .unwrap_or(url.path());
    if interface.is_empty() {
        return Err(Error::bad_config(format!(
            "override {}: names no service (no path, no interface parameter)",
            what()
        )));
    }
    if interface != "*" {
        base.services = vec![ServiceKey::with(
            interface,
            url.param("group").unwrap_or(""),
            url.param("version").unwrap_or(""),
        )];
    }
    Ok(base)
}

/// A consumer rule (dubbo-admin's `side: consumer`): for the consumers at `host` (`None`:
/// every consumer) of the rule's application, consuming its service. Its parameters override
/// the consumer's own settings; `providerAddresses` (calls to some providers only) is not
/// supported and the rule is skipped rather than applied wider than written.
fn consumer_rule(url: &Url, host: Option<String>) -> Result<Vec<Configurator>> {
    let what = || url.redacted();
    if url.param("providerAddresses").is_some_and(|p| {
        p.split(',')
            .any(|a| !matches!(a.trim(), "" | "0.0.0.0" | "0.0.0.0:*" | "*"))
    }) {
        return Err(unsupported(format!(
            "override {}: a consumer rule limited to some providers (providerAddresses) is not supported",
            what()
        )));
    }
    let mut rule = scoped(url)?.consumer_side();
    rule.address = host;
    for (k, v) in url.params() {
        if !RULE_KEYS.contains(&k.as_str()) {
            rule.parameters.insert(k.clone(), v.trim().to_string());
        }
    }
    if rule.parameters.is_empty() {
        return Err(Error::bad_config(format!(
            "override {}: sets no parameter",
            what()
        )));
    }
    Ok(vec![rule])
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn with_address(base: &Configurator, address: Option<&str>) -> Configurator {
    let mut c = base.clone();
    c.address = address.map(str::to_string);
    c
}

/// Intersects a host constraint (`None`: any) with one `providerAddresses` entry.
/// `Ok(None)`: they exclude each other; `Ok(Some(None))`: every provider.
#[allow(clippy::option_option)]
fn narrow(
    host_rule: Option<&str>,
    provider_address: &str,
) -> Result<Option<Option<String>>, String> {
    let pa = provider_address.trim();
    let pa_any = pa == "0.0.0.0" || pa == "0.0.0.0:*" || pa == "*";
    if !pa_any && pa.starts_with("0.0.0.0:") {
        return Err(format!(
            "provider address {pa:?} (every host on one port) is not supported"
        ));
    }
    Ok(match (host_rule, pa_any) {
        (None, true) => Some(None),
        (None, false) => Some(Some(pa.to_string())),
        (Some(h), true) => Some(Some(h.to_string())),
        (Some(h), false) => {
            let rule_host = host_of(h).trim_matches(['[', ']']);
            if host_of(pa).trim_matches(['[', ']']) == rule_host {
                // The more specific of the two: a host:port wins over a bare host.
                if pa.len() >= h.len() {
                    Some(Some(pa.to_string()))
                } else {
                    Some(Some(h.to_string()))
                }
            } else {
                None
            }
        }
    })
}

/// Parses Dubbo 2.7+/3 configurator YAML (the `*.configurators` config-centre keys) or the
/// compatible JSON array of `override://` URL strings. `source` names where the text came from
/// (a ZooKeeper path, a Nacos data id) and appears in every error.
///
/// Whole-document problems (too large, not YAML, missing `key`, an item without
/// `parameters`) fail the whole text, so the caller keeps its last good rules. Items that are
/// consumer-side or use unsupported features are skipped (logged at debug level).
pub fn from_yaml(text: &str, source: &str) -> Result<Vec<Configurator>> {
    use switchman_core::yaml::{self, Value};
    if text.len() > MAX_RULE_BYTES {
        return Err(Error::bad_config(format!(
            "{source}: configurator rule of {} bytes is over the {MAX_RULE_BYTES}-byte limit",
            text.len()
        )));
    }
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    // Bounded (switchman_core::yaml): an alias bomb is refused at the node limit.
    let doc: Value = yaml::from_str(text, source).map_err(|e| match e.limit() {
        Some(_) => Error::from(e),
        None => Error::bad_config(format!("{source}: not YAML: {}", e.detail())),
    })?;
    let bad = |msg: String| Error::bad_config(format!("{source}: {msg}"));
    if let Value::Sequence(items) = &doc {
        // Dubbo's compatible form: a JSON array of override URLs.
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let Value::String(s) = item else {
                return Err(bad(format!("entry {i} of the URL list is not a string")));
            };
            let url = Url::parse(s.trim()).map_err(|e| bad(format!("entry {i}: {e}")))?;
            if is_clear_marker(&url) {
                out.clear();
                break;
            }
            match from_override_url_all(&url) {
                Ok(rules) => out.extend(rules),
                Err(e) if e.kind() == ErrorKind::Unsupported => {
                    tracing::debug!(source, entry = i, "override skipped: {e}");
                }
                Err(e) => return Err(bad(format!("entry {i}: {}", e.message()))),
            }
        }
        return Ok(out);
    }
    let Value::Mapping(map) = &doc else {
        return Err(bad(
            "expected a mapping with configVersion, scope, key and configs".into(),
        ));
    };
    let get = |k: &str| map.get(k);
    let scalar = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    };
    let config_version = get("configVersion").and_then(scalar);
    let scope = get("scope")
        .and_then(scalar)
        .unwrap_or_else(|| "service".to_string());
    if scope != "service" && scope != "application" {
        return Err(bad(format!(
            "scope {scope:?} is neither service nor application"
        )));
    }
    let key = get("key")
        .and_then(scalar)
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| bad("missing key (the service or application the rule is for)".into()))?;
    let doc_enabled = match get("enabled") {
        None | Some(Value::Null) => true,
        Some(v) => scalar(v).is_some_and(|s| s.trim().eq_ignore_ascii_case("true")),
    };
    let configs = match get("configs") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Sequence(s)) => s,
        Some(_) => return Err(bad("configs is not a list".into())),
    };
    let mut out = Vec::new();
    for (i, item) in configs.iter().enumerate() {
        let Value::Mapping(item) = item else {
            return Err(bad(format!("configs[{i}] is not a mapping")));
        };
        let iget = |k: &str| item.get(k);
        let list = |k: &str| -> Result<Vec<String>> {
            match iget(k) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Sequence(s)) => s
                    .iter()
                    .map(|v| {
                        scalar(v).ok_or_else(|| {
                            bad(format!("configs[{i}].{k} holds a non-scalar entry"))
                        })
                    })
                    .collect(),
                Some(v) => scalar(v)
                    .map(|s| vec![s])
                    .ok_or_else(|| bad(format!("configs[{i}].{k} is not a list"))),
            }
        };
        let side = iget("side").and_then(scalar);
        let item_type = iget("type").and_then(scalar);
        let item_enabled = iget("enabled")
            .and_then(scalar)
            .is_some_and(|s| s.trim().eq_ignore_ascii_case("true"));
        let enabled = match item_type.as_deref() {
            None | Some("general") => doc_enabled,
            Some(_) => item_enabled,
        };
        let params = match iget("parameters") {
            Some(Value::Mapping(m)) if !m.is_empty() => m,
            _ => {
                return Err(bad(format!(
                    "configs[{i}] has no parameters: a configurator must change at least one"
                )));
            }
        };
        if iget("match").is_some_and(|m| !m.is_null()) {
            tracing::debug!(
                source,
                item = i,
                "configurator item with match conditions skipped: not supported"
            );
            continue;
        }
        let mut addresses = list("addresses")?;
        if addresses.is_empty() {
            addresses.push("0.0.0.0".into());
        }
        let mut provider_addresses = list("providerAddresses")?;
        if provider_addresses.is_empty() && side.as_deref() == Some("provider") {
            provider_addresses = addresses.clone();
        }
        // The services (keys) and applications this item is for.
        let (services, app_limit): (Vec<String>, Vec<String>) = if scope == "application" {
            let mut s = list("services")?;
            if s.is_empty() {
                s.push("*".into());
            }
            (s, vec![key.clone()])
        } else {
            (vec![key.clone()], list("applications")?)
        };
        for addr in &addresses {
            for svc in &services {
                let (iface, group, version) = split_service_key(svc);
                let mut url =
                    Url::new("override", addr_host_for_url(addr), addr_port(addr), &iface);
                if !group.is_empty() {
                    url.set_param("group", &group);
                }
                if !version.is_empty() {
                    url.set_param("version", &version);
                }
                url.set_param("category", "dynamicconfigurators");
                if let Some(s) = &side {
                    url.set_param("side", s);
                }
                for (k, v) in params {
                    let (Some(k), Some(v)) = (scalar(k), scalar(v)) else {
                        return Err(bad(format!(
                            "configs[{i}].parameters holds a non-scalar key or value"
                        )));
                    };
                    url.set_param(&k, &v);
                }
                if !provider_addresses.is_empty() {
                    url.set_param("providerAddresses", &provider_addresses.join(","));
                }
                url.set_param("enabled", if enabled { "true" } else { "false" });
                url.set_param("configVersion", config_version.as_deref().unwrap_or("null"));
                let apps: Vec<Option<&String>> = if app_limit.is_empty() {
                    vec![None]
                } else {
                    app_limit.iter().map(Some).collect()
                };
                for app in apps {
                    let mut u = url.clone();
                    if let Some(a) = app {
                        u.set_param("application", a);
                    }
                    match from_override_url_all(&u) {
                        Ok(rules) => out.extend(rules),
                        Err(e) if e.kind() == ErrorKind::Unsupported => {
                            tracing::debug!(source, item = i, "configurator item skipped: {e}");
                        }
                        Err(e) => return Err(bad(format!("configs[{i}]: {}", e.message()))),
                    }
                }
            }
        }
    }
    Ok(out)
}

fn addr_port(addr: &str) -> Option<u16> {
    let a = addr.trim();
    let tail = if let Some(rest) = a.strip_prefix('[') {
        rest.split_once("]:").map(|(_, p)| p)
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => Some(p),
            _ => None,
        }
    };
    tail.and_then(|p| p.parse().ok())
}

fn addr_host_for_url(addr: &str) -> &str {
    host_of(addr.trim()).trim_matches(['[', ']'])
}

/// `[group/]interface[:version]` (Dubbo's service key string) into its parts.
fn split_service_key(key: &str) -> (String, String, String) {
    let key = key.trim();
    let (group, rest) = match key.split_once('/') {
        Some((g, r)) if !g.is_empty() => (g, r),
        _ => ("", key),
    };
    let (iface, version) = match rest.split_once(':') {
        Some((i, v)) if !i.is_empty() => (i, v),
        _ => (rest, ""),
    };
    (iface.to_string(), group.to_string(), version.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::Instance;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn params(kv: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn provider(host: &str, port: u16, app: &str) -> Instance {
        Instance::builder(host, port)
            .service(ServiceKey::new("com.foo.Bar"))
            .application(app)
            .build()
    }

    #[test]
    fn legacy_override_urls() {
        let all = from_override_url(&url(
            "override://0.0.0.0/com.foo.Bar?category=configurators&dynamic=false&enabled=true&weight=200&timeout=300",
        ))
        .unwrap();
        assert_eq!(all.address, None);
        assert!(all.enabled);
        assert_eq!(all.services, vec![ServiceKey::new("com.foo.Bar")]);
        assert_eq!(
            all.parameters.iter().collect::<Vec<_>>(),
            vec![
                (&"timeout".to_string(), &"300".to_string()),
                (&"weight".to_string(), &"200".to_string())
            ]
        );
        let one = from_override_url(&url(
            "override://10.0.0.1:20880/com.foo.Bar?category=configurators&disabled=true&application=app",
        ))
        .unwrap();
        assert_eq!(one.address.as_deref(), Some("10.0.0.1:20880"));
        assert_eq!(one.applications, vec!["app".to_string()]);
        assert!(one.matches(&provider("10.0.0.1", 20880, "app")));
        assert!(!one.matches(&provider("10.0.0.1", 20881, "app")));
        assert!(!one.matches(&provider("10.0.0.1", 20880, "other")));
        // enabled=false switches the rule off; it is still parsed.
        let off = from_override_url(&url(
            "override://0.0.0.0/com.foo.Bar?enabled=false&weight=1",
        ))
        .unwrap();
        assert!(!off.enabled);
        // A rule for another service or group never matches.
        let grouped =
            from_override_url(&url("override://0.0.0.0/com.foo.Bar?group=g&weight=1")).unwrap();
        assert!(!grouped.matches(&provider("10.0.0.1", 1, "app")));
        let any = from_override_url(&url("override://0.0.0.0/*?weight=1")).unwrap();
        assert!(any.services.is_empty());
    }

    /// Consumer rules: `side=consumer`, or a legacy host without a port (a consumer address,
    /// as Dubbo reads it), configure consumers, never providers.
    #[test]
    fn consumer_rules_are_for_consumers() {
        use crate::configurator::Side;
        let key = ServiceKey::new("com.foo.Bar");
        let all = from_override_url(&url(
            "override://0.0.0.0/com.foo.Bar?side=consumer&application=shop&timeout=6000&category=configurators",
        ))
        .unwrap();
        assert_eq!(all.side, Side::Consumer);
        assert_eq!(all.address, None);
        assert_eq!(all.parameters, params(&[("timeout", "6000")]));
        assert!(
            !all.matches(&provider("10.0.0.1", 1, "shop")),
            "not a provider rule"
        );
        assert!(all.matches_consumer("10.9.9.9", Some("shop"), &key));
        assert!(!all.matches_consumer("10.9.9.9", Some("cart"), &key));
        assert!(!all.matches_consumer("10.9.9.9", Some("shop"), &ServiceKey::new("x.Y")));
        let legacy = from_override_url(&url("override://10.0.0.9/com.foo.Bar?retries=0")).unwrap();
        assert_eq!(legacy.side, Side::Consumer);
        assert!(legacy.matches_consumer("10.0.0.9", None, &key));
        assert!(!legacy.matches_consumer("10.0.0.8", None, &key));
        let rules = [all, legacy];
        assert_eq!(
            crate::configurator::consumer_parameters(&rules, "10.0.0.9", Some("shop"), &key),
            params(&[("timeout", "6000"), ("retries", "0")])
        );
    }

    #[test]
    fn out_of_scope_and_bad_rules_are_errors_with_kinds() {
        let cases = [
            (
                "override://0.0.0.0/com.foo.Bar?side=consumer&timeout=1&providerAddresses=10.0.0.1:1",
                ErrorKind::Unsupported,
                "providerAddresses",
            ),
            (
                "override://0.0.0.0/com.foo.Bar?side=consumer&category=configurators",
                ErrorKind::BadConfig,
                "no parameter",
            ),
            (
                "override://0.0.0.0/com.foo.Bar?~application=x&weight=1",
                ErrorKind::Unsupported,
                "~application",
            ),
            (
                "override://0.0.0.0:20880/com.foo.Bar?weight=1",
                ErrorKind::Unsupported,
                "one port",
            ),
            (
                "absent://0.0.0.0/com.foo.Bar?weight=1",
                ErrorKind::Unsupported,
                "absent",
            ),
            (
                "dubbo://0.0.0.0/com.foo.Bar?weight=1",
                ErrorKind::BadConfig,
                "protocol",
            ),
            (
                "override://0.0.0.0/com.foo.Bar?category=providers&weight=1",
                ErrorKind::BadConfig,
                "category",
            ),
            (
                "override://0.0.0.0/com.foo.Bar?weight=heavy",
                ErrorKind::BadConfig,
                "weight",
            ),
            (
                "override://0.0.0.0/com.foo.Bar?category=configurators",
                ErrorKind::BadConfig,
                "no parameter",
            ),
        ];
        for (u, kind, text) in cases {
            let e = from_override_url(&url(u)).unwrap_err();
            assert_eq!(e.kind(), kind, "{u}: {e}");
            assert!(e.to_string().contains(text), "{u}: {e}");
        }
        assert!(is_clear_marker(&url(
            "empty://0.0.0.0/com.foo.Bar?category=configurators"
        )));
    }

    #[test]
    fn weight_disabled_and_priority_values_read_as_dubbo_reads_them() {
        let r = from_override_url(&url(
            "override://10.0.0.1:20880/com.foo.Bar?weight=-5&disabled=TRUE&priority=3",
        ))
        .unwrap();
        let get = |k: &str| r.parameters.get(k).map(String::as_str);
        assert_eq!(
            (get("weight"), get("disabled"), get("priority")),
            (Some("0"), Some("true"), Some("3"))
        );
        let p = provider("10.0.0.1", 20880, "app");
        let applied = crate::configurator::apply([&r], &p).unwrap();
        assert_eq!(applied.weight(), 0, "kept, with weight 0");
        assert!(!applied.enabled());
        // `disabled=false` enables a provider registered with `enabled=false`.
        let off = Instance::from_url(&url(
            "dubbo://10.0.0.1:20880/com.foo.Bar?application=app&enabled=false",
        ))
        .unwrap();
        let on = from_override_url(&url("override://10.0.0.1:20880/com.foo.Bar?disabled=False"))
            .unwrap();
        assert!(crate::configurator::apply([&on], &off).unwrap().enabled());
        // An empty `disabled` changes nothing.
        let empty = from_override_url(&url(
            "override://10.0.0.1:20880/com.foo.Bar?disabled=&timeout=5",
        ))
        .unwrap();
        assert!(
            !crate::configurator::apply([&empty], &off)
                .unwrap()
                .enabled()
        );
        let e = from_override_url(&url(
            "override://0.0.0.0/com.foo.Bar?weight=1&priority=high",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("priority=\"high\""), "{e}");
    }

    #[test]
    fn provider_addresses_narrow_the_rule() {
        let rules = from_override_url_all(&url(
            "override://0.0.0.0/com.foo.Bar?configVersion=v2.7&providerAddresses=10.0.0.1:80,10.0.0.2&weight=5",
        ))
        .unwrap();
        let addrs: Vec<_> = rules.iter().map(|r| r.address.clone()).collect();
        assert_eq!(
            addrs,
            vec![Some("10.0.0.1:80".into()), Some("10.0.0.2".into())]
        );
        // Host and provider address exclude each other: no rule.
        let none = from_override_url_all(&url(
            "override://10.0.0.3/com.foo.Bar?configVersion=v2.7&providerAddresses=10.0.0.1:80&weight=5",
        ))
        .unwrap();
        assert!(none.is_empty());
    }

    const SERVICE_YAML: &str = r#"
configVersion: v2.7
scope: service
key: com.foo.Bar
enabled: true
configs:
  - addresses: ["10.0.0.1:20880"]
    side: provider
    parameters:
      weight: 300
  - addresses: [0.0.0.0]
    applications: [app, app2]
    parameters:
      timeout: 500
  - side: consumer
    parameters:
      timeout: 9000
  - type: weight
    addresses: [10.0.0.2]
    parameters:
      weight: 1
"#;

    #[test]
    fn service_scope_yaml() {
        let rules = from_yaml(
            SERVICE_YAML,
            "/dubbo/config/dubbo/com.foo.Bar::.configurators",
        )
        .unwrap();
        // Item 1: one provider; item 2: one rule per application; item 3: a consumer rule
        // (every consumer); item 4: typed item without its own enabled flag, off as in Dubbo.
        assert_eq!(rules.len(), 5, "{rules:#?}");
        let consumer: Vec<_> = rules
            .iter()
            .filter(|r| r.side == crate::configurator::Side::Consumer)
            .collect();
        assert_eq!(consumer.len(), 1);
        assert_eq!(consumer[0].address, None);
        assert_eq!(consumer[0].parameters, params(&[("timeout", "9000")]));
        let rules: Vec<_> = rules
            .iter()
            .filter(|r| r.side == crate::configurator::Side::Provider)
            .cloned()
            .collect();
        assert_eq!(rules[0].address.as_deref(), Some("10.0.0.1:20880"));
        assert_eq!(
            rules[0].parameters.get("weight").map(String::as_str),
            Some("300")
        );
        assert!(rules[0].matches(&provider("10.0.0.1", 20880, "x")));
        assert!(!rules[0].matches(&provider("10.0.0.1", 20881, "x")));
        assert_eq!(rules[1].applications, vec!["app".to_string()]);
        assert_eq!(rules[2].applications, vec!["app2".to_string()]);
        assert_eq!(rules[1].address, None);
        assert!(!rules[3].enabled);
        assert_eq!(rules[3].address.as_deref(), Some("10.0.0.2"));
        for r in &rules {
            assert!(
                !r.parameters.contains_key("side") && !r.parameters.contains_key("configVersion")
            );
        }
    }

    #[test]
    fn application_scope_yaml_limits_to_app_and_services() {
        let text = r#"
configVersion: v3.0
scope: application
key: shop
configs:
  - services: ["g1/com.foo.Bar:1.0"]
    parameters: { weight: 7 }
  - parameters: { loadbalance: roundrobin }
"#;
        let rules = from_yaml(text, "shop.configurators").unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[0].services,
            vec![ServiceKey::with("com.foo.Bar", "g1", "1.0")]
        );
        assert_eq!(rules[0].applications, vec!["shop".to_string()]);
        assert!(rules[1].services.is_empty());
        let p = Instance::builder("10.0.0.1", 1)
            .service(ServiceKey::with("com.foo.Bar", "g1", "1.0"))
            .application("shop")
            .build();
        assert!(rules[0].matches(&p));
        assert!(!rules[0].matches(&provider("10.0.0.1", 1, "shop")));
    }

    #[test]
    fn json_array_and_disabled_documents() {
        let rules = from_yaml(
            r#"["override://0.0.0.0/com.foo.Bar?weight=3", "override://10.0.0.8/com.foo.Bar?weight=4"]"#,
            "compat",
        )
        .unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules[1].side,
            crate::configurator::Side::Consumer,
            "a host without a port names a consumer"
        );
        let off = from_yaml(
            "configVersion: v2.7\nkey: com.foo.Bar\nenabled: false\nconfigs:\n  - parameters: {weight: 1}\n",
            "s",
        )
        .unwrap();
        assert!(!off[0].enabled);
        assert!(from_yaml("", "s").unwrap().is_empty());
    }

    #[test]
    fn alias_bombs_are_refused_naming_the_source_and_the_limit() {
        let rule = "configVersion: v3.0\nscope: service\nkey: demo.Greeter\nconfigs:\n  - side: provider\n    parameters:\n      weight: 200\n";
        for size in [5 * 1024, 64 * 1024] {
            let room = size - rule.len() - 20;
            let bomb = format!(
                "{rule}x: &a [{}]\ny: [{}]\n",
                vec!["0"; room / 4].join(","),
                vec!["*a"; room / 6].join(",")
            );
            let e = from_yaml(&bomb, "/dubbo/config/dubbo/demo.Greeter.configurators").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig);
            assert!(
                e.message().starts_with(
                    "/dubbo/config/dubbo/demo.Greeter.configurators: over the YAML node limit"
                ),
                "{size}: {e}"
            );
        }
    }

    #[test]
    fn bad_yaml_names_the_source_and_problem() {
        let cases = [
            ("key: [unclosed", "not YAML"),
            ("configVersion: v2.7\nconfigs: []\n", "missing key"),
            (
                "key: a.B\nconfigs:\n  - addresses: [0.0.0.0]\n",
                "no parameters",
            ),
            ("key: a.B\nscope: galaxy\n", "scope"),
            (
                "key: a.B\nconfigs:\n  - parameters: {weight: lots}\n",
                "weight",
            ),
            ("key: a.B\nconfigs: 3\n", "not a list"),
        ];
        for (text, want) in cases {
            let e = from_yaml(text, "the-source").unwrap_err();
            assert!(e.to_string().contains("the-source"), "{e}");
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
        let big = "#".repeat(MAX_RULE_BYTES + 1);
        assert!(
            from_yaml(&big, "s")
                .unwrap_err()
                .to_string()
                .contains("limit")
        );
    }
}
