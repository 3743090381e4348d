//! The application-level half of one Dubbo-naming subscription (Dubbo 3, `register-mode=
//! instance` or `all`): which provider applications serve the interface, their instances,
//! their endpoints, and the consumer's migration step, which picks the interface-level or the
//! application-level list for `watch.rs` to publish ([`AppSide::choose`], `crate::migration`).
//! The migration rule is the config `{application}.migration` in group
//! `DUBBO_SERVICEDISCOVERY_MIGRATION`, watched like the mapping (listener plus poll).
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
//! [`RULE_POLL`](super::sdk::RULE_POLL) because nacos-sdk 0.8.3 misses the first
//! publication of a data id that did not exist when the listener was added), the instance
//! lists of the applications pushed, and the metadata report of revisions not seen before.
//! Revisions whose metadata is not known yet are looked at again at every poll and whenever
//! the metadata cache has news.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigService};
use nacos_sdk::api::naming::{NamingChangeEvent, NamingEventListener};
use switchman_core::Instance;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::sdk::{
    Clients, ConfigForwarder, NamingForwarder, RULE_POLL, SDK_CALL_TIMEOUT, current_list,
    event_service, subscribe_name, unsubscribe_name,
};
use super::subscription::{AppLevelWatch, Watch};
use crate::metadata::nacos::{NacosAppLevel, mapping_config, read_config};
use crate::migration::{self, MigrationState, Source};

/// How soon a first list held back (metadata still being fetched) is looked at again.
const HOLD_RECHECK: Duration = Duration::from_millis(200);

/// What woke the subscription up.
pub(crate) enum AppEvent {
    /// An application service's instances changed.
    Instances(Arc<NamingChangeEvent>),
    /// The mapping config changed.
    Mapping,
    /// The migration rule changed.
    Migration,
    /// A delayed migration step change is due.
    MigrationDue,
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
    /// The consumer's migration step.
    migration: MigrationState,
    /// The migration rule's data id (`None`: no consumer application named).
    migration_id: Option<String>,
    migration_listening: bool,
    migration_dirty: bool,
    /// The step must be decided again even if no list changed.
    decide: bool,
    /// The last decision, and whether it is still to be reported (`Update::Lists`).
    lists: Option<migration::Lists>,
    lists_unsent: bool,
    /// The last `APPLICATION_FIRST` fallback, and whether it is still to be sent
    /// (`Update::Fallback`).
    fallback: Option<migration::Fallback>,
    fallback_unsent: bool,
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
        let settings_migration = settings.migration.clone();
        let migration_id = settings
            .application
            .as_deref()
            .filter(|a| !a.is_empty())
            .map(migration::rule_key);
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
            migration: MigrationState::new(MigrationState::display_key(&w.key), settings_migration),
            migration_id,
            migration_listening: false,
            migration_dirty: true,
            decide: false,
            lists: None,
            lists_unsent: false,
            fallback: None,
            fallback_unsent: false,
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
        let due_at = self.migration.next_check(Instant::now());
        let due = async move {
            match due_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let migration_id = self.migration_id.as_deref();
        tokio::select! {
            ev = self.naming_rx.recv() => match ev {
                Some(ev) => AppEvent::Instances(ev),
                // The sender lives in `self`: never closed.
                None => std::future::pending().await,
            },
            c = self.config_rx.recv() => match c {
                Some(c) if c.group() == migration::MIGRATION_GROUP && Some(c.data_id().as_str()) == migration_id => AppEvent::Migration,
                Some(_) => AppEvent::Mapping,
                None => std::future::pending().await,
            },
            () = due => AppEvent::MigrationDue,
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
            AppEvent::Migration => self.migration_dirty = true,
            AppEvent::MigrationDue => self.decide = true,
            AppEvent::Poll => {
                self.mapping_dirty = true;
                self.migration_dirty = true;
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

    /// Whether the first list must wait (see [`NacosAppLevel::hold_first_list`]): there is
    /// nothing to send, or the migration step would use the application level, which has
    /// nothing yet; if so, it is looked at again shortly.
    pub(crate) fn hold_first_list(&mut self, nothing: bool) -> bool {
        let nothing = nothing
            || self
                .migration
                .first_list_waits(self.state.apps(), self.list.len());
        let hold = self.state.hold_first_list(nothing, &self.settings.fetch);
        if hold {
            self.retry_at
                .get_or_insert_with(|| Instant::now() + HOLD_RECHECK);
        }
        hold
    }

    /// Which list to publish, `interface_level` or the application-level one, as the
    /// migration step decides (see `crate::migration`).
    pub(crate) fn choose(&mut self, interface_level: Vec<Arc<Instance>>) -> Vec<Arc<Instance>> {
        let using = self.migration.choose(
            self.state.apps(),
            interface_level.len(),
            self.list.len(),
            Instant::now(),
        );
        let lists = migration::Lists {
            step: self.migration.step(),
            interface_level: interface_level.len(),
            app_level: self.list.len(),
            using,
        };
        if self.lists != Some(lists) {
            self.lists = Some(lists);
            self.lists_unsent = true;
        }
        let fallback = migration::Fallback::of(&self.migration, using, &interface_level);
        if self.fallback != fallback {
            self.fallback = fallback;
            self.fallback_unsent = true;
        }
        match using {
            Source::Interface => interface_level,
            Source::Application => self.list.clone(),
        }
    }

    /// The `APPLICATION_FIRST` fallback of the last [`AppSide::choose`] when it changed since
    /// it was last taken (`Some(None)`: calls no longer fall back).
    pub(crate) fn take_fallback(&mut self) -> Option<Option<migration::Fallback>> {
        std::mem::take(&mut self.fallback_unsent).then(|| self.fallback.clone())
    }

    /// The decision of the last [`AppSide::choose`] when it changed since it was last taken.
    pub(crate) fn take_lists(&mut self) -> Option<migration::Lists> {
        std::mem::take(&mut self.lists_unsent)
            .then_some(self.lists)
            .flatten()
    }

    /// Reads what is dirty; returns whether the application-level list was rebuilt or the
    /// migration step must be decided again.
    pub(crate) async fn sync(&mut self, clients: &Clients, w: &Watch) -> bool {
        let mut decide = std::mem::take(&mut self.decide);
        if self.migration_dirty {
            decide |= self.read_migration(w).await;
        }
        if self.mapping_dirty {
            self.read_mapping(clients, w).await;
        }
        for (app, ev) in std::mem::take(&mut self.dirty) {
            if !self.state.apps().contains(&app) {
                continue;
            }
            // `None`: neither the SDK's cache nor the event has the list; the next event does.
            if let Some(list) = current_list(clients, w, &app, ev.as_deref()).await {
                self.state.set_instances(&app, &list);
                self.refresh = true;
            }
        }
        if !self.refresh {
            return decide;
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
                decide
            }
        }
    }

    /// Reads the migration rule (adding its listener first if missing); whether the rule in
    /// use changed once a step is in force (the first decision waits for the first lists).
    /// A failed read keeps it dirty for the next poll; a bad rule is logged by the state and
    /// the last good rule stays.
    async fn read_migration(&mut self, w: &Watch) -> bool {
        let Some(id) = self.migration_id.clone() else {
            self.migration_dirty = false;
            return false;
        };
        let group = migration::MIGRATION_GROUP;
        if !self.migration_listening {
            let added = tokio::time::timeout(
                SDK_CALL_TIMEOUT,
                self.config.add_listener(
                    id.clone(),
                    group.to_string(),
                    self.config_listener.clone(),
                ),
            )
            .await;
            self.migration_listening = matches!(added, Ok(Ok(())));
        }
        let read =
            tokio::time::timeout(SDK_CALL_TIMEOUT, read_config(&self.config, &id, group)).await;
        let content = match read {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                debug!(service = %w.key, "cannot read the migration rule yet: {e}");
                return false;
            }
            Err(_) => {
                debug!(service = %w.key, "reading the migration rule timed out");
                return false;
            }
        };
        self.migration_dirty = false;
        let source = format!("config {id} in group {group}");
        self.migration.set_rule_text(content.as_deref(), &source) && self.migration.step().is_some()
    }

    async fn read_mapping(&mut self, clients: &Clients, w: &Watch) {
        if !self.settings.provided_by.is_empty() {
            // The registry URL names the applications: the mapping is not read (as Dubbo's
            // ServiceDiscoveryRegistry), only what provided-by names is subscribed.
            self.mapping_dirty = false;
            let (added, _) = self.state.set_mapping(None, &self.settings.provided_by);
            for app in added {
                info!(service = %w.key, application = %app, "reading the application's instances (provided-by; the mapping is not read)");
                subscribe_name(clients, w, &app, &self.naming_listener).await;
                self.dirty.insert(app, None);
            }
            return;
        }
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
        if let (true, Some(id)) = (self.migration_listening, self.migration_id.clone()) {
            let _ = tokio::time::timeout(
                SDK_CALL_TIMEOUT,
                self.config.remove_listener(
                    id,
                    migration::MIGRATION_GROUP.to_string(),
                    self.config_listener.clone(),
                ),
            )
            .await;
        }
    }
}
