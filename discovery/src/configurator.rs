//! Overrides (Dubbo "configurators"): operator rules that change providers' typed values
//! (weight, enabled, parameters) without touching the registration.
//!
//! A rule applies to every provider (`0.0.0.0` / no address), to a host, or to one
//! `host:port`. As in Dubbo, rules for all providers apply first and more specific ones later,
//! so the specific ones win. Rules are typed when they arrive; applying them never re-parses
//! text on the call path (the directory applies them when it builds a snapshot).

use std::collections::BTreeMap;

use switchman_core::{Error, Instance, Result, ServiceKey};

/// Whom a rule configures: the providers a directory lists, or the consuming application
/// itself (dubbo-admin's consumer rules: `side: consumer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Side {
    /// The providers (the default, as in Dubbo).
    #[default]
    Provider,
    /// The consumer: `address` is the consumer's host, `applications` the consumer's; the
    /// parameters (`timeout`, `retries`, `loadbalance`, `cluster`, `mock`, `{method}.timeout`,
    /// ...) override the consumer's own settings for the service
    /// ([`crate::Snapshot::consumer_overrides`]).
    Consumer,
}

/// One override rule.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Configurator {
    /// Whom it configures (providers unless said otherwise).
    pub side: Side,
    /// `host` or `host:port` the rule is for (for a consumer rule: the consumer's host);
    /// `None` for every provider (every consumer).
    pub address: Option<String>,
    /// Limit to providers (consumers) of these applications (empty: any).
    pub applications: Vec<String>,
    /// Limit to providers of these services, matched with [`ServiceKey::accepts`] (so `*`
    /// parts match anything); empty: any service. Dubbo checks the rule's service key
    /// against the provider's.
    pub services: Vec<ServiceKey>,
    /// Disabled rules are kept but not applied.
    pub enabled: bool,
    /// Parameters set on matching providers, read exactly as the same keys of a provider URL
    /// ([`Instance::from_url`]), whether the rule was parsed from registry data or built in
    /// code. Typed ones: `weight` (an integer; a negative one is 0, as Dubbo balances with
    /// `max(weight, 0)`), `disabled` (when present and not empty it decides alone: `true`, in
    /// any case, removes the provider from routing), else `enabled` (anything but `true`, in
    /// any case, removes it).
    pub parameters: BTreeMap<String, String>,
}

impl Configurator {
    /// A rule for every provider.
    pub fn for_all() -> Self {
        Configurator {
            side: Side::Provider,
            address: None,
            applications: Vec::new(),
            services: Vec::new(),
            enabled: true,
            parameters: BTreeMap::new(),
        }
    }

    /// A rule for `host` or `host:port` (`0.0.0.0` and `*` mean every provider).
    pub fn for_address(address: &str) -> Self {
        let a = address.trim();
        let address = if a.is_empty() || a == "0.0.0.0" || a == "*" || a.starts_with("0.0.0.0:") {
            None
        } else {
            Some(a.to_string())
        };
        Configurator {
            address,
            ..Self::for_all()
        }
    }

    /// Builder: a rule for consumers (see [`Side::Consumer`]).
    pub fn consumer_side(mut self) -> Self {
        self.side = Side::Consumer;
        self
    }

    /// Builder: one parameter.
    pub fn param(mut self, key: &str, value: &str) -> Self {
        self.parameters.insert(key.to_string(), value.to_string());
        self
    }

    /// Checks the typed parameters so a bad rule is rejected when it arrives, not when
    /// applied.
    pub fn validate(&self) -> Result<()> {
        if let Some(w) = self.parameters.get("weight") {
            // The provider-URL rule: any integer up to u32::MAX, a negative one counts as 0.
            let ok = w
                .trim()
                .parse::<i64>()
                .is_ok_and(|n| u32::try_from(n.max(0)).is_ok());
            if !ok {
                return Err(Error::bad_config(format!(
                    "override for {}: weight={w:?} is not an integer up to {}",
                    self.address.as_deref().unwrap_or("0.0.0.0"),
                    u32::MAX
                )));
            }
        }
        Ok(())
    }

    /// 0 for every provider, 1 for a host, 2 for a host and port.
    pub fn specificity(&self) -> u8 {
        match &self.address {
            None => 0,
            Some(a) if a.starts_with('[') => {
                if a.contains("]:") {
                    2
                } else {
                    1
                }
            }
            Some(a) if a.contains(':') => 2,
            Some(_) => 1,
        }
    }

    /// Whether the rule is for `instance` (a provider; never for a consumer rule).
    pub fn matches(&self, instance: &Instance) -> bool {
        if !self.enabled || self.side != Side::Provider {
            return false;
        }
        let addr_ok = match &self.address {
            None => true,
            Some(a) => {
                a == instance.address()
                    || a == instance.host()
                    || a.trim_matches(['[', ']']) == instance.host()
            }
        };
        let app_ok = self.applications.is_empty()
            || instance
                .application()
                .is_some_and(|app| self.applications.iter().any(|a| a == app));
        let service_ok =
            self.services.is_empty() || self.services.iter().any(|s| s.accepts(instance.service()));
        addr_ok && app_ok && service_ok
    }

    /// Whether the rule is a consumer rule for the consumer at `host` of application
    /// `application` consuming `service`: its address is every consumer or that host (a
    /// port in it is ignored: a consumer is named by its host), its applications include
    /// `application` (or there are none), and its services accept `service`.
    pub fn matches_consumer(
        &self,
        host: &str,
        application: Option<&str>,
        service: &ServiceKey,
    ) -> bool {
        if !self.enabled || self.side != Side::Consumer {
            return false;
        }
        let addr_ok = match &self.address {
            None => true,
            Some(a) => {
                let h = a
                    .strip_prefix('[')
                    .and_then(|r| r.split_once(']'))
                    .map(|(h, _)| h)
                    .unwrap_or_else(|| a.rsplit_once(':').map_or(a.as_str(), |(h, _)| h));
                h == host || a == host
            }
        };
        let app_ok = self.applications.is_empty()
            || application.is_some_and(|app| self.applications.iter().any(|a| a == app));
        let service_ok =
            self.services.is_empty() || self.services.iter().any(|s| s.accepts(service));
        addr_ok && app_ok && service_ok
    }

    /// Sets the rule's parameters on `instance` through [`Instance::with_params`], so every
    /// typed field (weight, warm-up, timestamp, zone, tag, enabled, …) follows them as if the
    /// registry had listed them. A value that does not parse (`weight=abc`) is skipped and
    /// the rule's other parameters still apply.
    fn apply_to(&self, instance: Instance) -> Instance {
        let all = self
            .parameters
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()));
        match instance.with_params(all) {
            Ok(out) => out,
            Err(_) => {
                self.parameters
                    .iter()
                    .fold(instance, |out, (k, v)| match out.with_param(k, v) {
                        Ok(next) => next,
                        Err(e) => {
                            tracing::debug!("override parameter skipped: {e}");
                            out
                        }
                    })
            }
        }
    }
}

/// The parameters the consumer rules among `rules` set for the consumer at `host` of
/// `application` consuming `service`: rules for every consumer first, then host rules, each
/// group in the given order, later ones winning key by key. Empty when none matches.
pub fn consumer_parameters<'a>(
    rules: impl IntoIterator<Item = &'a Configurator>,
    host: &str,
    application: Option<&str>,
    service: &ServiceKey,
) -> BTreeMap<String, String> {
    let mut matching: Vec<&Configurator> = rules
        .into_iter()
        .filter(|r| r.matches_consumer(host, application, service))
        .collect();
    matching.sort_by_key(|r| r.address.is_some());
    let mut out = BTreeMap::new();
    for r in matching {
        for (k, v) in &r.parameters {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Applies `rules` to `instance`: rules for every provider first, then host rules, then
/// host:port rules, each group in the given order. Returns `None` when no rule matched.
pub fn apply<'a>(
    rules: impl IntoIterator<Item = &'a Configurator>,
    instance: &Instance,
) -> Option<Instance> {
    let mut matching: Vec<&Configurator> =
        rules.into_iter().filter(|r| r.matches(instance)).collect();
    if matching.is_empty() {
        return None;
    }
    matching.sort_by_key(|r| r.specificity());
    Some(
        matching
            .into_iter()
            .fold(instance.clone(), |i, r| r.apply_to(i)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(host: &str, port: u16) -> Instance {
        Instance::builder(host, port)
            .weight(100)
            .application("app")
            .build()
    }

    #[test]
    fn specific_rules_win_over_general_ones() {
        let rules = vec![
            Configurator::for_address("10.0.0.1:80").param("weight", "7"),
            Configurator::for_address("0.0.0.0")
                .param("weight", "50")
                .param("timeout", "300"),
            Configurator::for_address("10.0.0.1").param("weight", "20"),
        ];
        let a = apply(&rules, &inst("10.0.0.1", 80)).unwrap();
        assert_eq!(a.weight(), 7);
        assert_eq!(a.param("timeout"), Some("300"));
        let b = apply(&rules, &inst("10.0.0.1", 81)).unwrap();
        assert_eq!(b.weight(), 20);
        let c = apply(&rules, &inst("10.0.0.2", 80)).unwrap();
        assert_eq!(c.weight(), 50);
    }

    #[test]
    fn disabled_removes_and_disabled_rules_do_nothing() {
        let off = Configurator::for_address("10.0.0.1:80").param("disabled", "true");
        assert!(!apply([&off], &inst("10.0.0.1", 80)).unwrap().is_available());
        let mut idle = Configurator::for_all().param("weight", "1");
        idle.enabled = false;
        assert!(apply([&idle], &inst("10.0.0.1", 80)).is_none());
        let mut other_app = Configurator::for_all().param("weight", "1");
        other_app.applications = vec!["billing".into()];
        assert!(apply([&other_app], &inst("10.0.0.1", 80)).is_none());
    }

    /// A rule built in code reads `disabled` and `enabled` as the YAML and `override://` paths
    /// (and provider URLs) do: case-insensitive, `disabled` deciding when present.
    #[test]
    fn flags_of_rules_built_in_code_ignore_case_and_disabled_wins() {
        let enabled_after = |params: &[(&str, &str)]| {
            let rule = params
                .iter()
                .fold(Configurator::for_address("10.0.0.1:80"), |r, (k, v)| {
                    r.param(k, v)
                });
            rule.validate().unwrap();
            apply([&rule], &inst("10.0.0.1", 80)).unwrap().enabled()
        };
        assert!(!enabled_after(&[("disabled", "TRUE")]));
        assert!(!enabled_after(&[("disabled", " True ")]));
        assert!(!enabled_after(&[("enabled", "FALSE")]));
        assert!(!enabled_after(&[("enabled", "no")]), "only `true` is true");
        assert!(enabled_after(&[("enabled", "True")]));
        assert!(enabled_after(&[("disabled", "False")]));
        assert!(
            enabled_after(&[("disabled", "false"), ("enabled", "false")]),
            "disabled wins when present"
        );
        assert!(
            !enabled_after(&[("disabled", "TRUE"), ("enabled", "TRUE")]),
            "disabled wins when present"
        );
        // A rule re-enabling a provider that registered `enabled=false`.
        let off = Instance::from_url(
            &switchman_core::Url::parse("http://10.0.0.1:80/svc?enabled=false").unwrap(),
        )
        .unwrap();
        assert!(!off.enabled());
        let on = Configurator::for_all().param("disabled", "FALSE");
        assert!(apply([&on], &off).unwrap().enabled());
    }

    /// A negative weight in a rule built in code is 0, as in an `override://` URL (Dubbo's
    /// `max(weight, 0)`), instead of failing validation.
    #[test]
    fn a_negative_weight_in_code_is_zero() {
        let rule = Configurator::for_address("10.0.0.1").param("weight", "-5");
        rule.validate().expect("a negative weight is valid");
        let out = apply([&rule], &inst("10.0.0.1", 80)).unwrap();
        assert_eq!(out.weight(), 0);
        assert!(out.enabled(), "kept, with weight 0");
        assert!(
            Configurator::for_all()
                .param("weight", "4294967296")
                .validate()
                .is_err()
        );
    }

    #[test]
    fn bad_weight_is_rejected_by_validate() {
        let e = Configurator::for_address("10.0.0.1")
            .param("weight", "heavy")
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("weight=\"heavy\""), "{e}");
    }
}
