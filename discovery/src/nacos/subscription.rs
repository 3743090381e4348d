//! What one subscription watches ([`Watch`], with its application-level settings,
//! [`AppLevelWatch`]) and the registry's count of live subscriptions per service
//! ([`Subscribers`]). Shared by `watch.rs` and `app.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::naming::{NamingEventListener, ServiceInstance};

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

/// A registry's live subscriptions per Nacos service and group (their listeners), and which
/// services are read over HTTP instead of through nacos-sdk (`http_list.rs`; see
/// "Services too large for nacos-sdk" in `sdk.rs`), with the last list read.
#[derive(Clone, Default)]
pub(crate) struct Subscribers(Arc<std::sync::Mutex<State>>);

impl std::fmt::Debug for Subscribers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Subscribers")
            .field("services", &s.services.len())
            .field("oversized", &s.oversized)
            .finish()
    }
}

type Listener = Arc<dyn NamingEventListener>;
type Name = (String, String);

#[derive(Default)]
struct State {
    services: BTreeMap<Name, Entry>,
    /// Services found too large for nacos-sdk: read over HTTP for the life of the registry.
    oversized: BTreeSet<Name>,
}

#[derive(Default)]
struct Entry {
    listeners: Vec<Listener>,
    /// The task that checks the size of a service read through the SDK (`sdk.rs`).
    probe: Option<tokio::task::AbortHandle>,
    /// `Some` while the service is read over HTTP.
    http: Option<HttpEntry>,
}

#[derive(Default)]
struct HttpEntry {
    /// The last good list (`None` before the first read).
    last: Option<Arc<Vec<ServiceInstance>>>,
    /// The task that reads it.
    poller: Option<tokio::task::AbortHandle>,
}

/// What [`Subscribers::release`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// Other subscriptions still read the service.
    Others,
    /// That was the last subscription; `http`: the service was read over HTTP (its reader
    /// is stopped), not through the SDK.
    Last { http: bool },
}

fn name(service: &str, group: &str) -> Name {
    (service.to_string(), group.to_string())
}

impl Subscribers {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more subscription of `service` in `group`, whose events go to `listener`;
    /// whether the service is known to be too large for nacos-sdk.
    pub(crate) fn acquire(&self, service: &str, group: &str, listener: &Listener) -> bool {
        let mut s = self.lock();
        let key = name(service, group);
        let oversized = s.oversized.contains(&key);
        s.services
            .entry(key)
            .or_default()
            .listeners
            .push(listener.clone());
        oversized
    }

    /// One subscription fewer (the one of `listener`).
    pub(crate) fn release(&self, service: &str, group: &str, listener: &Listener) -> Release {
        let mut s = self.lock();
        let key = name(service, group);
        let Some(entry) = s.services.get_mut(&key) else {
            return Release::Last { http: false };
        };
        if let Some(i) = entry
            .listeners
            .iter()
            .position(|l| Arc::ptr_eq(l, listener))
        {
            entry.listeners.remove(i);
        }
        if !entry.listeners.is_empty() {
            return Release::Others;
        }
        let entry = s.services.remove(&key).unwrap_or_default();
        let http = entry.http.is_some();
        if let Some(probe) = entry.probe {
            probe.abort();
        }
        if let Some(poller) = entry.http.and_then(|h| h.poller) {
            poller.abort();
        }
        Release::Last { http }
    }

    /// Marks `service` as read over HTTP from now on. `Some(listeners)` (the subscriptions'
    /// listeners) when it was not read over HTTP yet: the caller starts its reader and moves
    /// the listeners off the SDK; `None` when it already was, or nobody subscribes to it.
    pub(crate) fn to_http(&self, service: &str, group: &str) -> Option<Vec<Listener>> {
        let mut s = self.lock();
        let key = name(service, group);
        s.oversized.insert(key.clone());
        let entry = s.services.get_mut(&key)?;
        if entry.http.is_some() {
            return None;
        }
        entry.http = Some(HttpEntry::default());
        Some(entry.listeners.clone())
    }

    /// Records the task checking the size of `service` (read through the SDK); `false` (and
    /// the task aborted) when it has one already, or nobody subscribes to it any more.
    pub(crate) fn set_probe(
        &self,
        service: &str,
        group: &str,
        probe: tokio::task::AbortHandle,
    ) -> bool {
        let mut s = self.lock();
        match s.services.get_mut(&name(service, group)) {
            Some(e) if e.probe.is_none() && e.http.is_none() => {
                e.probe = Some(probe);
                true
            }
            _ => {
                probe.abort();
                false
            }
        }
    }

    /// Records the task reading `service` over HTTP; `false` (and the task aborted) when
    /// nobody subscribes to it any more.
    pub(crate) fn set_poller(
        &self,
        service: &str,
        group: &str,
        poller: tokio::task::AbortHandle,
    ) -> bool {
        let mut s = self.lock();
        match s
            .services
            .get_mut(&name(service, group))
            .and_then(|e| e.http.as_mut())
        {
            Some(h) => {
                h.poller = Some(poller);
                true
            }
            None => {
                poller.abort();
                false
            }
        }
    }

    /// `None`: `service` is not read over HTTP; `Some(last)`: it is, with its last good
    /// list (`None` before the first read).
    pub(crate) fn http_list(
        &self,
        service: &str,
        group: &str,
    ) -> Option<Option<Arc<Vec<ServiceInstance>>>> {
        let s = self.lock();
        let h = s.services.get(&name(service, group))?.http.as_ref()?;
        Some(h.last.clone())
    }

    /// Stores a list read over HTTP; the listeners to tell, `None` when nobody reads the
    /// service over HTTP any more (the reader then stops).
    pub(crate) fn store_http(
        &self,
        service: &str,
        group: &str,
        list: Arc<Vec<ServiceInstance>>,
    ) -> Option<Vec<Listener>> {
        let mut s = self.lock();
        let entry = s.services.get_mut(&name(service, group))?;
        entry.http.as_mut()?.last = Some(list);
        Some(entry.listeners.clone())
    }

    /// The services (name, group) found too large for nacos-sdk, or read over HTTP.
    pub(crate) fn oversized(&self) -> Vec<(String, String)> {
        self.lock().oversized.iter().cloned().collect()
    }

    /// Whether `service` is still read over HTTP by someone.
    pub(crate) fn still_http(&self, service: &str, group: &str) -> bool {
        let s = self.lock();
        s.services
            .get(&name(service, group))
            .is_some_and(|e| e.http.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nop;
    impl NamingEventListener for Nop {
        fn event(&self, _: Arc<nacos_sdk::api::naming::NamingChangeEvent>) {}
    }

    #[test]
    fn only_the_last_subscription_of_a_service_unsubscribes() {
        let s = Subscribers::default();
        let (l1, l2, l3): (Listener, Listener, Listener) =
            (Arc::new(Nop), Arc::new(Nop), Arc::new(Nop));
        assert!(!s.acquire("a", "G", &l1));
        s.acquire("a", "G", &l2);
        s.acquire("b", "G", &l3);
        assert_eq!(s.release("a", "G", &l1), Release::Others);
        assert_eq!(s.release("a", "G", &l2), Release::Last { http: false });
        assert_eq!(s.release("b", "G", &l3), Release::Last { http: false });
    }

    #[tokio::test]
    async fn a_service_once_too_large_stays_read_over_http() {
        let s = Subscribers::default();
        let (l1, l2): (Listener, Listener) = (Arc::new(Nop), Arc::new(Nop));
        s.acquire("big", "G", &l1);
        s.acquire("big", "G", &l2);
        assert!(s.http_list("big", "G").is_none());
        let moved = s.to_http("big", "G").expect("first switch");
        assert_eq!(moved.len(), 2);
        assert!(s.to_http("big", "G").is_none(), "only once");
        assert!(matches!(s.http_list("big", "G"), Some(None)));
        let poller = tokio::spawn(std::future::pending::<()>());
        assert!(s.set_poller("big", "G", poller.abort_handle()));
        let told = s.store_http("big", "G", Arc::new(Vec::new())).unwrap();
        assert_eq!(told.len(), 2);
        assert!(matches!(s.http_list("big", "G"), Some(Some(l)) if l.is_empty()));
        assert_eq!(s.release("big", "G", &l1), Release::Others);
        assert_eq!(s.release("big", "G", &l2), Release::Last { http: true });
        assert!(poller.await.unwrap_err().is_cancelled(), "the reader stops");
        assert!(!s.still_http("big", "G"));
        assert!(s.store_http("big", "G", Arc::new(Vec::new())).is_none());
        // A later subscription learns that the service is too large for the SDK.
        assert!(s.acquire("big", "G", &l1));
        assert!(s.to_http("big", "G").is_some());
    }
}
