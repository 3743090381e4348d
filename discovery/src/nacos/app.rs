//! The application-level half of one Dubbo-naming subscription (Dubbo 3, `register-mode=
//! instance` or `all`): which provider applications serve the interface, their instances,
//! and their endpoints, merged by `watch.rs` with the interface-level list.
//!
//! Layout, as Java Dubbo 3.3 writes it in Nacos (see `metadata/nacos.rs`): the mapping is the
//! config `{interface}` in group `mapping` (`app1,app2`), plus the registry's `provided-by`
//! applications; each application is the Nacos service `{app}` in the registry's group; a
//! revision's `MetadataInfo` is the config `{app}` in group `{revision}` (`metadata-type=
//! remote`) or is fetched from the provider's `MetadataService` through the metadata cache
//! (`local`).
//!
//! Events only mark what is dirty ([`AppSide::next_event`], [`AppSide::on_event`]);
//! [`AppSide::sync`] then reads it: the mapping (a config listener, and a read every
//! [`RULE_POLL`](super::watch::RULE_POLL) because nacos-sdk 0.8.3 misses the first
//! publication of a data id that did not exist when the listener was added), the instance
//! lists of the applications pushed, and the metadata report of revisions not seen before.
//! Revisions whose metadata is not known yet are looked at again at every poll and whenever
//! the metadata cache has news.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigService};
use nacos_sdk::api::naming::{NamingChangeEvent, NamingEventListener};
use switchman_core::Instance;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::Clients;
use super::watch::{
    ConfigForwarder, NamingForwarder, RULE_POLL, SDK_CALL_TIMEOUT, Watch, current_list,
    event_service, subscribe_name, unsubscribe_name,
};
use crate::metadata::nacos::{NacosAppLevel, mapping_config, read_config};
use crate::metadata::{FetchSettings, MetadataCache};

/// The application-level settings of a subscription (from the registry URL).
#[derive(Debug, Clone)]
pub(crate) struct AppLevelWatch {
    /// Applications read besides the mapping's (`provided-by`).
    pub(crate) provided_by: Vec<String>,
    /// How `MetadataInfo`s are fetched from providers (`metadata-timeout`, `metadata-retry`).
    pub(crate) fetch: FetchSettings,
    /// The registry's own metadata cache; `None`: the process-wide one, if installed.
    pub(crate) cache: Option<Arc<MetadataCache>>,
}

/// How soon a first list held back (metadata still being fetched) is looked at again.
const HOLD_RECHECK: Duration = Duration::from_millis(200);

/// What woke the subscription up.
pub(crate) enum AppEvent {
    /// An application service's instances changed.
    Instances(Arc<NamingChangeEvent>),
    /// The mapping config changed.
    Mapping,
    /// Time to re-read the mapping and look at revisions not resolved yet.
    Poll,
    /// The metadata cache finished a fetch (or a round of failed attempts).
    Metadata,
    /// A held-back first list or a failed read is due again.
    Retry,
}

/// See the module docs.
pub(crate) struct AppSide {
    settings: AppLevelWatch,
    config: ConfigService,
    state: NacosAppLevel,
    naming_listener: Arc<dyn NamingEventListener>,
    naming_rx: mpsc::UnboundedReceiver<Arc<NamingChangeEvent>>,
    config_listener: Arc<dyn ConfigChangeListener>,
    config_rx: mpsc::UnboundedReceiver<ConfigResponse>,
    /// Whether the mapping's config listener is registered.
    listening: bool,
    /// The mapping's data id (the interface) and group (`mapping`).
    mapping_id: String,
    mapping_group: String,
    mapping_dirty: bool,
    /// The last mapping read (`None`: no such config), for logs.
    mapping: Option<String>,
    /// Applications whose instance list must be read, with the event that said so.
    dirty: BTreeMap<String, Option<Arc<NamingChangeEvent>>>,
    /// Whether the endpoints must be rebuilt.
    refresh: bool,
    /// Whether the metadata report of unresolved revisions is to be read again.
    recheck: bool,
    poll: tokio::time::Interval,
    retry_at: Option<Instant>,
    /// The application-level endpoints last built.
    list: Vec<Arc<Instance>>,
    read_failed: bool,
}

impl AppSide {
    /// The application-level side of `w`; `None` when `w` has none (plain naming, a pattern,
    /// `app-level=false`) or the registry has no config client.
    pub(crate) fn new(w: &Watch, clients: &Clients) -> Option<AppSide> {
        let settings = w.app_level.clone()?;
        let Some(config) = clients.config.clone() else {
            warn!(service = %w.key, "application-level discovery needs the Nacos config client, which is not built: reading interface-level instances only");
            return None;
        };
        let (naming_tx, naming_rx) = mpsc::unbounded_channel();
        let (config_tx, config_rx) = mpsc::unbounded_channel();
        let (mapping_id, mapping_group) = mapping_config(&w.key.interface);
        let mut poll = tokio::time::interval(RULE_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is the first read, done by the first `sync` already.
        poll.reset();
        Some(AppSide {
            settings,
            config,
            state: NacosAppLevel::new(w.key.clone()),
            naming_listener: Arc::new(NamingForwarder(naming_tx)),
            naming_rx,
            config_listener: Arc::new(ConfigForwarder(config_tx)),
            config_rx,
            listening: false,
            mapping_id,
            mapping_group,
            mapping_dirty: true,
            mapping: None,
            dirty: BTreeMap::new(),
            refresh: true,
            recheck: false,
            poll,
            retry_at: None,
            list: Vec::new(),
            read_failed: false,
        })
    }

    /// The application-level endpoints last built.
    pub(crate) fn list(&self) -> &[Arc<Instance>] {
        &self.list
    }

    /// The next thing to look at (cancel-safe: every source keeps what it did not hand out).
    pub(crate) async fn next_event(&mut self) -> AppEvent {
        let retry_at = self.retry_at;
        let retry = async move {
            match retry_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ev = self.naming_rx.recv() => match ev {
                Some(ev) => AppEvent::Instances(ev),
                // The sender lives in `self`: never closed.
                None => std::future::pending().await,
            },
            c = self.config_rx.recv() => match c {
                Some(_) => AppEvent::Mapping,
                None => std::future::pending().await,
            },
            _ = self.poll.tick() => AppEvent::Poll,
            () = self.state.changed() => AppEvent::Metadata,
            () = retry => AppEvent::Retry,
        }
    }

    /// Marks what `ev` says is dirty.
    pub(crate) fn on_event(&mut self, ev: AppEvent) {
        match ev {
            AppEvent::Instances(ev) => {
                self.instances_changed(ev);
                while let Ok(newer) = self.naming_rx.try_recv() {
                    self.instances_changed(newer);
                }
            }
            AppEvent::Mapping => self.mapping_dirty = true,
            AppEvent::Poll => {
                self.mapping_dirty = true;
                if self.state.unresolved() {
                    self.refresh = true;
                    self.recheck = true;
                }
            }
            AppEvent::Metadata => self.refresh = true,
            AppEvent::Retry => {
                self.retry_at = None;
                self.refresh = true;
            }
        }
    }

    fn instances_changed(&mut self, ev: Arc<NamingChangeEvent>) {
        let name = event_service(&ev);
        if self.state.apps().contains(&name) {
            self.dirty.insert(name, Some(ev));
        } else {
            // An application dropped from the mapping that another subscription of this
            // registry still reads (its listener stays registered with the SDK).
            debug!(nacos_service = %name, "event of an application not read here ignored");
        }
    }

    /// Whether the first list must wait (see [`NacosAppLevel::hold_first_list`]); if so, it
    /// is looked at again shortly.
    pub(crate) fn hold_first_list(&mut self, nothing: bool) -> bool {
        let hold = self.state.hold_first_list(nothing, &self.settings.fetch);
        if hold {
            self.retry_at
                .get_or_insert_with(|| Instant::now() + HOLD_RECHECK);
        }
        hold
    }

    /// Reads what is dirty; returns whether the application-level list was rebuilt.
    pub(crate) async fn sync(&mut self, clients: &Clients, w: &Watch) -> bool {
        if self.mapping_dirty {
            self.read_mapping(clients, w).await;
        }
        for (app, ev) in std::mem::take(&mut self.dirty) {
            if !self.state.apps().contains(&app) {
                continue;
            }
            // `None`: neither the SDK's cache nor the event has the list; the next event does.
            if let Some(list) = current_list(clients, &w.group, &app, ev.as_deref()).await {
                self.state.set_instances(&app, &list);
                self.refresh = true;
            }
        }
        if !self.refresh {
            return false;
        }
        let cache = self
            .settings
            .cache
            .clone()
            .or_else(crate::metadata::shared_cache);
        let config = &self.config;
        let read = |data_id: String, group: String| async move {
            match tokio::time::timeout(SDK_CALL_TIMEOUT, read_config(config, &data_id, &group))
                .await
            {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "config {data_id} in group {group}: no answer within {SDK_CALL_TIMEOUT:?}"
                )),
            }
        };
        let recheck = std::mem::take(&mut self.recheck);
        match self
            .state
            .refresh(read, cache.as_deref(), &self.settings.fetch, recheck)
            .await
        {
            Ok(list) => {
                self.refresh = false;
                self.read_failed = false;
                self.list = list;
                true
            }
            Err(e) => {
                // Read again at the next poll; the endpoints built so far stay.
                if !self.read_failed {
                    warn!(service = %w.key, "cannot read the metadata report, retrying every {RULE_POLL:?}: {e}");
                    self.read_failed = true;
                }
                self.recheck = recheck;
                self.retry_at
                    .get_or_insert_with(|| Instant::now() + RULE_POLL);
                false
            }
        }
    }

    async fn read_mapping(&mut self, clients: &Clients, w: &Watch) {
        if !self.listening {
            let added = tokio::time::timeout(
                SDK_CALL_TIMEOUT,
                self.config.add_listener(
                    self.mapping_id.clone(),
                    self.mapping_group.clone(),
                    self.config_listener.clone(),
                ),
            )
            .await;
            self.listening = matches!(added, Ok(Ok(())));
        }
        let read = tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            read_config(&self.config, &self.mapping_id, &self.mapping_group),
        )
        .await;
        let content = match read {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                debug!(service = %w.key, "cannot read the interface-application mapping yet: {e}");
                return;
            }
            Err(_) => {
                debug!(service = %w.key, "reading the interface-application mapping timed out");
                return;
            }
        };
        self.mapping_dirty = false;
        if content.is_some() && self.mapping != content {
            debug!(service = %w.key, mapping = ?content, "interface-application mapping read");
        }
        // Cheap and idempotent: only a change subscribes or unsubscribes anything.
        let (added, gone) = self
            .state
            .set_mapping(content.as_deref(), &self.settings.provided_by);
        self.mapping = content;
        for app in gone {
            info!(service = %w.key, application = %app, "no longer mapped to the interface: its instances leave");
            unsubscribe_name(clients, w, &app, &self.naming_listener).await;
            self.dirty.remove(&app);
            self.refresh = true;
        }
        for app in added {
            info!(service = %w.key, application = %app, "reading the application's instances (application-level discovery)");
            subscribe_name(clients, w, &app, &self.naming_listener).await;
            self.dirty.insert(app, None);
        }
    }

    /// Ends the subscription's interest in the applications and the mapping.
    pub(crate) async fn close(self, clients: &Clients, w: &Watch) {
        for app in self.state.apps() {
            unsubscribe_name(clients, w, app, &self.naming_listener).await;
        }
        if self.listening {
            let _ = tokio::time::timeout(
                SDK_CALL_TIMEOUT,
                self.config.remove_listener(
                    self.mapping_id.clone(),
                    self.mapping_group.clone(),
                    self.config_listener.clone(),
                ),
            )
            .await;
        }
    }
}

/// Interface-level entries win over application-level ones at the same address (a provider
/// registered both ways, `register-mode=all`), as on ZooKeeper.
pub(crate) fn merge(
    interface_level: impl Iterator<Item = Arc<Instance>> + Clone,
    app_level: &[Arc<Instance>],
) -> Vec<Arc<Instance>> {
    let mut merged: Vec<Arc<Instance>> = interface_level.clone().collect();
    if !app_level.is_empty() {
        let known: BTreeSet<String> = interface_level.map(|i| i.address().to_string()).collect();
        merged.extend(
            app_level
                .iter()
                .filter(|i| !known.contains(i.address()))
                .cloned(),
        );
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::Url;

    fn inst(url: &str) -> Arc<Instance> {
        Arc::new(Instance::from_url(&Url::parse(url).unwrap()).unwrap())
    }

    #[test]
    fn interface_level_wins_at_the_same_address() {
        let iface = [inst("dubbo://10.0.0.1:20880/x.Y?weight=10")];
        let app = [
            inst("dubbo://10.0.0.1:20880/x.Y?weight=99&dubbo.metadata.revision=r"),
            inst("tri://10.0.0.2:50051/x.Y?dubbo.metadata.revision=r"),
        ];
        let m = merge(iface.iter().cloned(), &app);
        let got: Vec<(String, u32)> = m
            .iter()
            .map(|i| (i.address().to_string(), i.weight()))
            .collect();
        assert_eq!(
            got,
            [
                ("10.0.0.1:20880".to_string(), 10),
                ("10.0.0.2:50051".to_string(), 100)
            ]
        );
        assert_eq!(merge(iface.iter().cloned(), &[]).len(), 1);
        assert_eq!(merge(std::iter::empty(), &app).len(), 2);
    }
}
