//! Cluster configuration with Dubbo's key names and precedence.
//!
//! Layers, as Dubbo 3.3's `ServiceAddressURL` reads them: per-call attachments (`retries`,
//! `timeout`) > consumer method > provider method (`sayHello.timeout=...` registered by the
//! instance being called) > consumer (the service over the consumer global) > provider service
//! (registered by the instance being called) > Dubbo's defaults. Providers set only
//! `timeout`, `actives`, `loadbalance`, `sticky`, `hash.nodes` and `hash.arguments`, each
//! instance for itself; every other key (`retries`, `forks`, `cluster`, ...) comes from the
//! consumer alone. The effective values are resolved once per snapshot and method
//! ([`Effective`], per-instance values precomputed for every endpoint), never parsed per
//! call.
//!
//! | module | owns |
//! |---|---|
//! | `strategy` | [`Strategy`], the `cluster` names |
//! | `mock` | [`Mock`], [`MockAction`], the degrade rule syntax |
//! | `hedge` | [`Hedge`] |
//! | `merger` | [`Merger`] |
//! | `durations` | duration syntax, Dubbo's default timeout |
//! | `values` | [`Retries`], [`Forks`], [`Percent`], [`HashNodes`], [`HashArguments`], [`Balancer`] |
//! | `settings` | [`Settings`] (one layer), the key parser every loader uses |
//! | `provider` | the keys a provider's registration sets |
//! | `resolve` | [`Effective`]: layers resolved per snapshot, method and endpoint; attachments |
//! | `yaml` | [`ClusterConfig::from_yaml`] |

mod durations;
mod hedge;
mod merger;
mod mock;
mod provider;
mod resolve;
mod settings;
mod strategy;
mod values;
mod yaml;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{Error, Invocation};
use switchman_loadbalance::OutlierConfig;

pub use durations::{DEFAULT_TIMEOUT, MAX_PROVIDER_TIMEOUT, TRIPLE_DEFAULT_TIMEOUT};
pub(crate) use durations::{deadline_after, deadline_from};
pub use hedge::Hedge;
pub use merger::{Merger, MergerFn};
pub use mock::{FallbackFn, Mock, MockAction};
pub(crate) use provider::ProviderKeys;
pub use resolve::Effective;
pub(crate) use resolve::{Dynamic, Limits, apply_attachments};
pub use settings::Settings;
pub use strategy::Strategy;
pub use values::{Balancer, Forks, HashArguments, HashNodes, Percent, Retries};
pub(crate) use values::{BalancerSpec, equivalent};

/// Maximum attempts of one call, whatever `retries` says.
pub const MAX_ATTEMPTS: usize = 16;

/// Consumer-side configuration of one service: global defaults, the service's own settings,
/// and per-method settings.
///
/// Every value in it is typed and valid (see [`Settings`]), so a
/// [`ClusterInvoker`](crate::ClusterInvoker) built from it cannot hold invalid settings:
/// text is checked where it is parsed ([`ClusterConfig::from_yaml`], [`Settings::set`],
/// [`Settings::from_params`]), with errors naming the key and the value.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
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

impl ClusterConfig {
    /// Dubbo's defaults everywhere (failover, `retries=2`, `timeout=1000`, random).
    pub fn new() -> Self {
        ClusterConfig::default()
    }
    /// Builder: strategy (service layer).
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.service.strategy = Some(s);
        self
    }
    /// Builder: retries (service layer).
    pub fn retries(mut self, r: impl Into<Retries>) -> Self {
        self.service.retries = Some(r.into());
        self
    }
    /// Builder: per-attempt timeout (service layer).
    pub fn timeout(mut self, t: Duration) -> Self {
        self.service.timeout = Some(t);
        self
    }
    /// Builder: the balancer (service layer): a [`BalancerKind`](switchman_loadbalance::BalancerKind)
    /// by Dubbo's name, or your own `Arc<dyn LoadBalance>`.
    pub fn loadbalance(mut self, balancer: impl Into<Balancer>) -> Self {
        self.service.loadbalance = Some(balancer.into());
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
    /// Builder: the global layer as a whole.
    pub fn global_settings(mut self, settings: Settings) -> Self {
        self.global = settings;
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
}
