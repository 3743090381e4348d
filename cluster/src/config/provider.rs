//! What a provider's registration says about the calls it receives: the keys Dubbo 3.3 reads
//! from the provider URL (`ServiceAddressURL` falls back to it after the consumer's values),
//! service-level and per method. Parsed once per endpoint and snapshot, never per call.

use std::collections::BTreeMap;
use std::time::Duration;

use switchman_loadbalance::BalancerKind;
use tracing::{debug, warn};

use super::durations::{MAX_PROVIDER_TIMEOUT, TRIPLE_DEFAULT_TIMEOUT};
use super::{Balancer, HashArguments, HashNodes, Settings};

/// The keys a provider registers for its callers. Dubbo reads `timeout` and `actives` for the
/// instance being called, and `loadbalance`, `sticky`, `hash.nodes` and `hash.arguments`
/// from the first routed provider's URL (`AbstractClusterInvoker.initLoadBalance`,
/// `select`, `ConsistentHashSelector`).
pub(crate) const PROVIDER_KEYS: [&str; 6] = [
    "timeout",
    "actives",
    "loadbalance",
    "sticky",
    "hash.nodes",
    "hash.arguments",
];

/// The provider keys as one layer sets them (`None`: not set there).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProviderLayer {
    /// Positive, or zero for a value that is not (then the protocol's default applies).
    pub(crate) timeout: Option<Duration>,
    /// 0: no cap.
    pub(crate) actives: Option<u32>,
    pub(crate) loadbalance: Option<BalancerKind>,
    pub(crate) sticky: Option<bool>,
    pub(crate) hash_nodes: Option<HashNodes>,
    pub(crate) hash_arguments: Option<HashArguments>,
}

impl ProviderLayer {
    /// Reads `value` for `key`, as Dubbo would: integers for `timeout` and `actives` (not
    /// positive: the default / no cap), `sticky` true only for `true` in any case (Java's
    /// `Boolean.parseBoolean`). A value Dubbo could not use either (`loadbalance=fastest`,
    /// `timeout=soon`) is ignored, with a debug line: registry data is not the consumer's to
    /// fix.
    fn set(&mut self, key: &str, value: &str) {
        let t = value.trim();
        let ok = match key {
            "timeout" => t.parse::<i64>().ok().map(|n| {
                // Not positive: the protocol's default (Dubbo's getMethodPositiveParameter),
                // decided where the endpoint's protocol is known.
                self.timeout = Some(if n <= 0 {
                    Duration::ZERO
                } else if n as u64 > MAX_PROVIDER_TIMEOUT.as_millis() as u64 {
                    warn!(
                        key,
                        value, "a provider's timeout over a day (registry data): taken as one day"
                    );
                    MAX_PROVIDER_TIMEOUT
                } else {
                    Duration::from_millis(n as u64)
                })
            }),
            "actives" => t
                .parse::<i64>()
                .ok()
                .map(|n| self.actives = Some(u32::try_from(n.max(0)).unwrap_or(u32::MAX))),
            "loadbalance" => t.parse().ok().map(|k| self.loadbalance = Some(k)),
            "sticky" => {
                self.sticky = Some(t.eq_ignore_ascii_case("true"));
                Some(())
            }
            "hash.nodes" => t.parse().ok().map(|n| self.hash_nodes = Some(n)),
            "hash.arguments" => t.parse().ok().map(|a| self.hash_arguments = Some(a)),
            _ => Some(()),
        };
        if ok.is_none() {
            debug!(
                key,
                value, "ignoring a provider parameter that does not parse"
            );
        }
    }

    /// This layer over `lower`.
    pub(crate) fn over(&self, lower: &ProviderLayer) -> ProviderLayer {
        ProviderLayer {
            timeout: self.timeout.or(lower.timeout),
            actives: self.actives.or(lower.actives),
            loadbalance: self.loadbalance.or(lower.loadbalance),
            sticky: self.sticky.or(lower.sticky),
            hash_nodes: self.hash_nodes.or(lower.hash_nodes),
            hash_arguments: self
                .hash_arguments
                .clone()
                .or_else(|| lower.hash_arguments.clone()),
        }
    }

    /// As a settings layer.
    pub(crate) fn to_settings(&self) -> Settings {
        Settings {
            timeout: self.timeout,
            actives: self.actives,
            loadbalance: self.loadbalance.map(Balancer::Named),
            sticky: self.sticky,
            hash_nodes: self.hash_nodes,
            hash_arguments: self.hash_arguments.clone(),
            ..Settings::default()
        }
    }
}

/// One provider's registration: its service-level keys and its per-method ones.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProviderKeys {
    service: ProviderLayer,
    methods: Vec<(String, ProviderLayer)>,
    /// The protocol's default timeout when it is not Dubbo's 1000 ms (`tri`: 3000 ms).
    default_timeout: Option<Duration>,
}

impl ProviderKeys {
    /// Reads the [`PROVIDER_KEYS`] and their per-method forms `{method}.{key}` (the method is
    /// what precedes the first dot, as Dubbo's `URLParam` splits keys; `hash.nodes` itself is
    /// the service-level key). A `default.{key}` (registered by Dubbo 2.6 providers) counts as
    /// the service-level key when that is absent, as Dubbo 3 reads it. Empty values are not
    /// set (Dubbo's `StringUtils.isEmpty` falls through to the next layer).
    pub(crate) fn parse(params: &BTreeMap<String, String>) -> ProviderKeys {
        let mut out = ProviderKeys::default();
        let mut legacy = ProviderLayer::default();
        for (k, v) in params {
            let (method, key) = if PROVIDER_KEYS.contains(&k.as_str()) {
                (None, k.as_str())
            } else {
                match k.split_once('.') {
                    Some((m, key)) if PROVIDER_KEYS.contains(&key) => (Some(m), key),
                    _ => continue,
                }
            };
            if v.trim().is_empty() {
                continue;
            }
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
            layer.set(key, v);
        }
        out.service = out.service.over(&legacy);
        out
    }

    /// These keys of a provider speaking `protocol`: a `tri` provider's calls get Triple's
    /// default timeout ([`TRIPLE_DEFAULT_TIMEOUT`]) when no layer sets a positive one.
    pub(crate) fn protocol(mut self, protocol: &str) -> ProviderKeys {
        self.default_timeout = (protocol == "tri").then_some(TRIPLE_DEFAULT_TIMEOUT);
        self
    }

    /// The protocol's default timeout, when it is not Dubbo's.
    pub(crate) fn default_timeout(&self) -> Option<Duration> {
        self.default_timeout
    }

    /// The service-level layer.
    pub(crate) fn service(&self) -> &ProviderLayer {
        &self.service
    }

    /// The layer of method `m`, when the provider registered keys for it.
    pub(crate) fn method(&self, m: &str) -> Option<&ProviderLayer> {
        self.methods
            .iter()
            .find(|(name, _)| name == m)
            .map(|(_, l)| l)
    }

    /// The methods with keys of their own.
    pub(crate) fn method_names(&self) -> impl Iterator<Item = &str> {
        self.methods.iter().map(|(m, _)| m.as_str())
    }

    /// Whether the provider registered none of the keys.
    pub(crate) fn is_empty(&self) -> bool {
        self.service == ProviderLayer::default()
            && self.methods.is_empty()
            && self.default_timeout.is_none()
    }
}
