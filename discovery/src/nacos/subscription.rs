//! What one subscription watches ([`Watch`], with its application-level settings,
//! [`AppLevelWatch`]) and the registry's count of live subscriptions per service
//! ([`Subscribers`]). Shared by `watch.rs` and `app.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use switchman_core::ServiceKey;

use crate::metadata::{FetchSettings, MetadataCache};
use crate::migration::MigrationDefaults;

/// What one subscription watches.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    /// The subscribed service.
    pub(crate) key: ServiceKey,
    /// Its Nacos service name (for a pattern, the name its key would have; logs only).
    pub(crate) service_name: String,
    /// `Some(interval)` when the key is a pattern: list the group's services every
    /// `interval` and subscribe to the compatible ones (see the module docs of `watch.rs`).
    pub(crate) list_every: Option<Duration>,
    /// Nacos group of the service.
    pub(crate) group: String,
    /// Keep only instances of these clusters (empty: all).
    pub(crate) clusters: Vec<String>,
    /// Dubbo naming (`providers:...`) rather than a plain name.
    pub(crate) dubbo_naming: bool,
    /// Config-centre group of the rules; `None` when rules are not watched.
    pub(crate) rule_group: Option<String>,
    /// Initial rule data ids.
    pub(crate) rule_ids: Vec<String>,
    /// Live subscriptions of the registry, per service.
    pub(crate) subscribers: Subscribers,
    /// Also read the application-level instances of the interface (Dubbo naming, a concrete
    /// key, `app-level=true`); see `app.rs`.
    pub(crate) app_level: Option<AppLevelWatch>,
}

/// The application-level settings of a subscription (from the registry URL).
#[derive(Debug, Clone)]
pub(crate) struct AppLevelWatch {
    /// Applications read besides the mapping's (`provided-by`).
    pub(crate) provided_by: Vec<String>,
    /// How `MetadataInfo`s are fetched from providers (`metadata-timeout`, `metadata-retry`).
    pub(crate) fetch: FetchSettings,
    /// The registry's own metadata cache; `None`: the process-wide one, if installed.
    pub(crate) cache: Option<Arc<MetadataCache>>,
    /// The registry URL's `migration.*` values.
    pub(crate) migration: MigrationDefaults,
    /// The consumer application, whose `{application}.migration` rule is watched.
    pub(crate) application: Option<String>,
}

/// Counts a registry's live subscriptions per Nacos service and group.
#[derive(Debug, Clone, Default)]
pub(crate) struct Subscribers(Arc<std::sync::Mutex<BTreeMap<(String, String), usize>>>);

impl Subscribers {
    /// One more subscription of `service` in `group`.
    pub(crate) fn acquire(&self, service: &str, group: &str) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((service.to_string(), group.to_string()))
            .or_default() += 1;
    }

    /// One subscription fewer; whether it was the last.
    pub(crate) fn release(&self, service: &str, group: &str) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (service.to_string(), group.to_string());
        match m.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                m.remove(&key);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_subscription_of_a_service_unsubscribes() {
        let s = Subscribers::default();
        s.acquire("a", "G");
        s.acquire("a", "G");
        s.acquire("b", "G");
        assert!(!s.release("a", "G"));
        assert!(s.release("a", "G"));
        assert!(s.release("b", "G"));
    }
}
