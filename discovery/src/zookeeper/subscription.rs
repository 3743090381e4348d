//! One subscription: a task that watches a service's nodes and sends [`Update`]s.
//!
//! Per session it adds persistent recursive watches on `/dubbo/{interface}` (providers,
//! configurators and the legacy `routers` category), on the config-centre root `/dubbo/config/dubbo`, and, for the
//! application-level layout, on `/dubbo/mapping/{interface}`, `/services` and
//! `/dubbo/metadata`, plus the consumer application's migration rule node
//! `/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/{application}.migration`. Then it lists
//! everything once and re-reads only what events mark dirty. Which of the two lists goes out
//! (interface-level providers or application-level instances) is the migration step's choice
//! (`crate::migration`).
//! After every reconnect (`SyncConnected`) everything is re-listed, since persistent watches
//! can lose events across a reconnect (ZOOKEEPER-4698); after a session ends it waits for the
//! next session and starts over. Every ZooKeeper call has its own timeout; a failed read keeps
//! its part dirty and is retried.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use switchman_core::Instance;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::WatchMode;
use super::app;
use super::nodes::{self, MAX_NODE_DATA, ParsedProviders, ProviderFilter, RuleKind};
use super::reader::{Arms, Reader, Watches};
use super::session::{CallError, Conn, Session, call};
use crate::deltas::{Deltas, free_after_yield};
use crate::migration::{self, MigrationState, Source};
use crate::{Configurator, Update, override_parse};

/// Nodes under `/dubbo` that are not interfaces.
const NOT_INTERFACES: &[&str] = &["config", "mapping", "metadata"];

/// What must be read again.
#[derive(Debug, Default)]
struct Dirty {
    providers: bool,
    configurators: bool,
    routers: bool,
    app_level: bool,
    /// Every application-level node must be read again (new session, reconnect).
    app_full: bool,
    /// Application-level nodes that events named.
    app_paths: BTreeSet<String>,
    rules: BTreeSet<String>,
    all_rules: bool,
    /// The migration rule node must be read again.
    migration: bool,
    /// The migration step must be decided again (a delayed step change is due).
    decide: bool,
}

impl Dirty {
    fn everything() -> Self {
        Dirty {
            providers: true,
            configurators: true,
            routers: true,
            app_level: true,
            app_full: true,
            app_paths: BTreeSet::new(),
            rules: BTreeSet::new(),
            all_rules: true,
            migration: true,
            decide: false,
        }
    }

    fn any(&self) -> bool {
        self.providers
            || self.configurators
            || self.routers
            || self.app_level
            || self.all_rules
            || self.migration
            || self.decide
            || !self.rules.is_empty()
    }
}

/// What was last sent, so only changes are sent again.
#[derive(Debug, Default)]
struct Sent {
    interface_level: Vec<Arc<Instance>>,
    app_level: Vec<Arc<Instance>>,
    /// The decision last reported (`Update::Lists`), with application-level discovery.
    lists: Option<crate::migration::Lists>,
    /// Application instances, their revisions and metadata read so far.
    app: app::AppLevel,
    /// Provider nodes parsed so far.
    parsed: ParsedProviders,
    /// The merged list last sent: later lists go out as what changed.
    deltas: Deltas,
    configurators: BTreeMap<String, Vec<Configurator>>,
    rules: BTreeMap<String, Option<String>>,
    /// Rules from the legacy `/dubbo/{interface}/routers` children, by rule key.
    routers: BTreeMap<String, String>,
    apps: BTreeSet<String>,
    no_auth_reported: bool,
    /// The migration step (application-level discovery on); `None` with `app-level=false`
    /// and for interface `*`.
    migration: Option<MigrationState>,
}

enum Ended {
    /// The receiver was dropped or the registry shut down.
    Closed,
    /// The session ended; wait for the next one.
    Session,
}

pub(crate) fn spawn(session: Arc<Session>, filter: ProviderFilter, tx: mpsc::Sender<Update>) {
    tokio::spawn(async move {
        let mut clients = session.clients();
        let mut sent = Sent::default();
        if let Some(app) = &session.config.application {
            sent.apps.insert(app.clone());
        }
        // Application-level discovery maps one interface to its applications: `*` has none.
        if session.config.app_level && filter.key.interface.as_ref() != "*" {
            sent.migration = Some(MigrationState::new(
                MigrationState::display_key(&filter.key),
                session.config.migration.clone(),
            ));
        }
        let mut served = 0u64;
        loop {
            // The next session's client (never the one that just ended).
            let conn = loop {
                if let Some(c) = clients
                    .borrow_and_update()
                    .clone()
                    .filter(|c| c.generation > served)
                {
                    break c;
                }
                tokio::select! {
                    r = clients.changed() => if r.is_err() { return },
                    _ = tx.closed() => return,
                }
            };
            served = conn.generation;
            match serve(&session, conn, &filter, &tx, &mut sent, &mut clients).await {
                Ended::Closed => return,
                Ended::Session => continue,
            }
        }
    });
}

/// The consumer application's migration rule node, when there is one to read (an
/// application is named and application-level discovery is on).
fn migration_path(cfg: &super::ZkConfig) -> Option<String> {
    let app = cfg.application.as_deref().filter(|a| !a.contains('/'))?;
    cfg.app_level.then(|| {
        format!(
            "{}/config/{}/{}",
            super::DUBBO_ROOT,
            migration::MIGRATION_GROUP,
            migration::rule_key(app)
        )
    })
}

fn config_root(_session: &Session) -> String {
    // Dubbo's config centre (namespace `dubbo`, group `dubbo`), whatever the registry root.
    format!("{}/config/dubbo", super::DUBBO_ROOT)
}

async fn add_watch(
    client: &zk::Client,
    timeout: Duration,
    path: &str,
) -> Result<zk::PersistentWatcher, CallError> {
    call(
        timeout,
        client.watch(path, zk::AddWatchMode::PersistentRecursive),
    )
    .await
}

async fn serve(
    session: &Session,
    conn: Conn,
    filter: &ProviderFilter,
    tx: &mpsc::Sender<Update>,
    sent: &mut Sent,
    clients: &mut watch::Receiver<Option<Conn>>,
) -> Ended {
    let cfg = &session.config;
    let client = conn.client.clone();
    let iface = filter.key.interface.to_string();
    let base = if iface == "*" {
        cfg.root.clone()
    } else {
        format!("{}/{iface}", cfg.root)
    };
    let croot = config_root(session);
    let mut watch_paths = vec![base.clone(), croot.clone()];
    if cfg.app_level {
        watch_paths.push(format!("{}/mapping", super::DUBBO_ROOT));
        watch_paths.push("/services".to_string());
        watch_paths.push(format!("{}/metadata", super::DUBBO_ROOT));
    }
    watch_paths.extend(migration_path(cfg));
    // Persistent recursive watches unless the server lacks them (< 3.6) or `watch=oneshot`.
    let oneshot_mode = || Watches::Oneshot {
        arms: Arms::new(),
        states: client.state_watcher(),
    };
    let mut watches = if cfg.watch == WatchMode::Oneshot || session.oneshot_fallback() {
        oneshot_mode()
    } else {
        loop {
            match add_watches(&client, cfg.timeout, &watch_paths).await {
                Ok(w) => break Watches::Persistent(w),
                Err(CallError::Zk(zk::Error::Unimplemented)) if cfg.watch == WatchMode::Auto => {
                    warn!(registry = %cfg.redacted, "ZooKeeper has no persistent watches (before 3.6): using one-shot watches");
                    session.set_oneshot_fallback();
                    break oneshot_mode();
                }
                Err(e) => {
                    debug!(service = %filter.key, "cannot add watches yet: {e}");
                    if session_over(&client, &e) {
                        return Ended::Session;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                        _ = tx.closed() => return Ended::Closed,
                    }
                }
            }
        }
    };
    // zookeeper-client 0.11.2 does not restore persistent watches after a reconnect (its
    // `resend_watches` sends only the one-shot kinds), so they are added again after every
    // reconnect, before the re-list. One-shot watches are restored by the client and re-armed
    // by the re-list.
    let mut rewatch = false;
    let mut dirty = Dirty::everything();
    // A new session starts with the whole list (the `Registry` contract), then changes.
    sent.deltas.resend();
    let mut connected = true;
    loop {
        if connected && rewatch {
            if matches!(watches, Watches::Persistent(_)) {
                match add_watches(&client, cfg.timeout, &watch_paths).await {
                    Ok(w) => {
                        // The old watchers go after the new ones exist: no gap on the server.
                        watches = Watches::Persistent(w);
                        rewatch = false;
                        dirty = Dirty::everything();
                    }
                    Err(e) => {
                        debug!(service = %filter.key, "cannot re-add watches yet: {e}");
                        if session_over(&client, &e) {
                            return Ended::Session;
                        }
                    }
                }
            } else {
                rewatch = false;
            }
        }
        if connected && !rewatch && dirty.any() {
            let mut reader = Reader {
                client: &client,
                timeout: cfg.timeout,
                arms: watches.arms(),
            };
            match relist(session, &mut reader, filter, tx, sent, &mut dirty).await {
                Ok(()) => {}
                Err(Stop) => return Ended::Closed,
            }
        }
        let retry = if (dirty.any() || rewatch) && connected {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(3600)
        };
        // A migration step change waiting for its delay is looked at when it is due.
        let now = tokio::time::Instant::now();
        let due = sent.migration.as_ref().and_then(|m| m.next_check(now));
        let retry = match due {
            Some(due) => retry.min(due - now),
            None => retry,
        };
        // Wait for the next event (or a retry), then take whatever else is queued.
        let mut events = Vec::new();
        // Biased: a dropped receiver or a replaced session is noticed before the watchers are
        // polled again (a watcher whose session task is gone must not be polled).
        tokio::select! {
            biased;
            _ = tx.closed() => return Ended::Closed,
            r = clients.changed() => {
                let same = r.is_ok() && clients.borrow().as_ref().is_some_and(|c| c.generation == conn.generation);
                if !same {
                    return Ended::Session;
                }
            }
            ev = watches.next() => events.push(ev),
            // A revision's metadata was fetched (or failed): rebuild from what was read.
            () = sent.app.changed() => dirty.app_level = true,
            _ = tokio::time::sleep(retry) => {
                dirty.decide |= due.is_some_and(|d| d <= tokio::time::Instant::now());
            }
        }
        // A watcher must never be polled after a terminal session event (its channel closes).
        let terminal = |evs: &[zk::WatchedEvent]| {
            evs.iter()
                .any(|e| e.event_type == zk::EventType::Session && e.session_state.is_terminated())
        };
        while !terminal(&events) && events.len() < 10_000 && !tx.is_closed() {
            tokio::select! {
                biased;
                ev = watches.next() => events.push(ev),
                _ = std::future::ready(()) => break,
            }
        }
        for ev in events {
            match ev.event_type {
                zk::EventType::Session => match ev.session_state {
                    zk::SessionState::Disconnected => {
                        connected = false;
                        debug!(service = %filter.key, "ZooKeeper disconnected; serving the last lists");
                    }
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        if !connected {
                            debug!(service = %filter.key, "ZooKeeper reconnected; re-listing");
                        }
                        if !connected {
                            rewatch = true;
                            sent.deltas.resend();
                        }
                        connected = true;
                        // Events may have been lost while disconnected.
                        dirty = Dirty::everything();
                    }
                    // Terminal: the watchers must not be polled again.
                    _ => return Ended::Session,
                },
                _ => classify(&ev.path, &base, &croot, cfg, filter, &mut dirty),
            }
        }
    }
}

async fn add_watches(
    client: &zk::Client,
    timeout: Duration,
    paths: &[String],
) -> Result<Vec<zk::PersistentWatcher>, CallError> {
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        out.push(add_watch(client, timeout, p).await?);
    }
    Ok(out)
}

/// Whether `e` means this client's session is over (a new one is coming).
fn session_over(client: &zk::Client, e: &CallError) -> bool {
    client.state().is_terminated()
        || matches!(
            e,
            CallError::Zk(
                zk::Error::SessionExpired
                    | zk::Error::ClientClosed
                    | zk::Error::AuthFailed
                    | zk::Error::SessionMoved
            )
        )
}

fn classify(
    path: &str,
    base: &str,
    croot: &str,
    cfg: &super::ZkConfig,
    filter: &ProviderFilter,
    dirty: &mut Dirty,
) {
    if migration_path(cfg).is_some_and(|p| p == path) {
        dirty.migration = true;
        return;
    }
    if let Some(key) = path.strip_prefix(croot).and_then(|r| r.strip_prefix('/')) {
        dirty.rules.insert(key.to_string());
        return;
    }
    let rest = path
        .strip_prefix(base)
        .filter(|r| r.is_empty() || r.starts_with('/'));
    if let Some(rest) = rest {
        let mut parts = rest.split('/').filter(|s| !s.is_empty());
        let wildcard = filter.key.interface.as_ref() == "*";
        let first = parts.next();
        let category = if wildcard {
            match first {
                Some(f) if NOT_INTERFACES.contains(&f) => Some("-"),
                Some(_) => parts.next(),
                None => None,
            }
        } else {
            first
        };
        match category {
            Some("providers") => dirty.providers = true,
            Some("configurators") => dirty.configurators = true,
            Some("routers") => dirty.routers = true,
            // The interface node itself (or, for `*`, a new interface) appeared or went.
            None => {
                dirty.providers = true;
                dirty.configurators = true;
                dirty.routers = true;
            }
            _ => {}
        }
    }
    if cfg.app_level
        && (path.starts_with("/services")
            || path.starts_with(&format!("{}/mapping", super::DUBBO_ROOT))
            || path.starts_with(&format!("{}/metadata", super::DUBBO_ROOT)))
    {
        dirty.app_level = true;
        if dirty.app_paths.len() < 10_000 {
            dirty.app_paths.insert(path.to_string());
        } else {
            dirty.app_full = true;
        }
    }
}

/// The receiver is gone.
struct Stop;

async fn send(tx: &mpsc::Sender<Update>, u: Update) -> Result<(), Stop> {
    tx.send(u).await.map_err(|_| Stop)
}

/// Re-reads what is dirty and sends what changed. A read that fails leaves its part dirty.
async fn relist(
    session: &Session,
    reader: &mut Reader<'_>,
    filter: &ProviderFilter,
    tx: &mpsc::Sender<Update>,
    sent: &mut Sent,
    dirty: &mut Dirty,
) -> Result<(), Stop> {
    let cfg = &session.config;
    let iface = filter.key.interface.to_string();
    let mut list_changed = std::mem::take(&mut dirty.decide);
    if dirty.migration {
        match read_migration_rule(reader, cfg, sent).await {
            Ok(changed) => {
                dirty.migration = false;
                // A new rule may change the step once one is in force (the first decision
                // waits for the first lists).
                list_changed |=
                    changed && sent.migration.as_ref().is_some_and(|m| m.step().is_some());
            }
            Err(e) => debug!(service = %filter.key, "cannot read the migration rule yet: {e}"),
        }
    }
    if dirty.providers {
        match read_providers(reader, cfg, filter, &iface, &mut sent.parsed).await {
            Ok(list) => {
                dirty.providers = false;
                sent.interface_level = list;
                list_changed = true;
            }
            Err(CallError::Zk(zk::Error::NoAuth)) => {
                if !sent.no_auth_reported {
                    warn!(service = %filter.key, "not allowed to list providers (ACL): check the registry's user and password");
                    sent.no_auth_reported = true;
                }
            }
            Err(e) => debug!(service = %filter.key, "cannot list providers yet: {e}"),
        }
    }
    if cfg.app_level && dirty.app_level && iface != "*" {
        match sent
            .app
            .refresh(reader, cfg, filter, dirty.app_full, &dirty.app_paths)
            .await
        {
            Ok(list) => {
                dirty.app_level = false;
                dirty.app_full = false;
                dirty.app_paths.clear();
                sent.app_level = list;
                list_changed = true;
            }
            Err(e) => {
                debug!(service = %filter.key, "cannot read application-level instances yet: {e}")
            }
        }
    } else {
        dirty.app_level = false;
    }
    // Nothing to send yet, or the step would use the application level, which has nothing
    // yet (its metadata is being fetched).
    let nothing = match &sent.migration {
        Some(m) => {
            (sent.interface_level.is_empty() && sent.app_level.is_empty())
                || m.first_list_waits(sent.app.apps(), sent.app_level.len())
        }
        None => sent.interface_level.is_empty(),
    };
    if list_changed && sent.app.hold_first_list(nothing, &cfg.metadata_fetch) {
        // The first list would say "no provider" only because application metadata is still
        // being fetched: look again shortly (bounded by one fetch timeout).
        dirty.app_level = true;
    } else if list_changed {
        // The migration step picks one of the two lists (interface level only without
        // application-level discovery).
        let source = match &mut sent.migration {
            Some(m) => m.choose(
                sent.app.apps(),
                sent.interface_level.len(),
                sent.app_level.len(),
                tokio::time::Instant::now(),
            ),
            None => Source::Interface,
        };
        let chosen = match source {
            Source::Interface => sent.interface_level.clone(),
            Source::Application => sent.app_level.clone(),
        };
        // New applications (of either list) bring their config-centre keys.
        for app in sent
            .interface_level
            .iter()
            .chain(&sent.app_level)
            .filter_map(|i| i.application())
        {
            if !sent.apps.contains(app) {
                sent.apps.insert(app.to_string());
                dirty.all_rules = true;
            }
        }
        // The whole list after a new session or a reconnect, otherwise only what changed.
        let (updates, retired) = sent.deltas.next(chosen);
        for update in updates {
            send(tx, update).await?;
        }
        // After the lists: whoever sees this decision sees its list too.
        if cfg.app_level && iface != "*" {
            let lists = crate::migration::Lists {
                step: sent.migration.as_ref().and_then(|m| m.step()),
                interface_level: sent.interface_level.len(),
                app_level: sent.app_level.len(),
                using: source,
            };
            if sent.lists != Some(lists) {
                sent.lists = Some(lists);
                send(tx, Update::Lists(lists)).await?;
            }
        }
        free_after_yield(retired).await;
    }
    if dirty.configurators {
        let result = if iface == "*" {
            Ok(Vec::new())
        } else {
            let path = format!("{}/{iface}/configurators", cfg.root);
            match reader.children(&path).await {
                Ok(Some(children)) => Ok((path.clone(), filter.configurators(&path, &children))),
                Ok(None) => Ok((path, Vec::new())),
                Err(e) => Err(e),
            }
            .map(|(p, r)| vec![(p, r)])
        };
        match result {
            Ok(sources) => {
                dirty.configurators = false;
                for (source, rules) in sources {
                    let unchanged = match sent.configurators.get(&source) {
                        Some(prev) => *prev == rules,
                        None => rules.is_empty(),
                    };
                    if !unchanged {
                        sent.configurators.insert(source.clone(), rules.clone());
                        send(tx, Update::Configurators { source, rules }).await?;
                    }
                }
            }
            Err(e) => debug!(service = %filter.key, "cannot list configurators yet: {e}"),
        }
    }
    if dirty.routers {
        if iface == "*" || !cfg.legacy_routers {
            dirty.routers = false;
        } else {
            let path = format!("{}/{iface}/routers", cfg.root);
            match reader.children(&path).await {
                Ok(children) => {
                    dirty.routers = false;
                    let now = filter.router_rules(&path, &children.unwrap_or_default());
                    send_router_changes(tx, &mut sent.routers, now).await?;
                }
                Err(e) => debug!(service = %filter.key, "cannot list routers yet: {e}"),
            }
        }
    }
    let keys = nodes::rule_keys(&filter.key, &sent.apps);
    let croot = config_root(session);
    let mut failed = BTreeSet::new();
    for (key, kind) in keys {
        if !dirty.all_rules && !dirty.rules.contains(&key) {
            continue;
        }
        let path = format!("{croot}/{key}");
        let text = match reader.data(&path).await {
            Ok(Some(data)) if data.len() > MAX_NODE_DATA => {
                warn!(
                    path,
                    bytes = data.len(),
                    "rule node over the {MAX_NODE_DATA}-byte limit skipped; the last good rule stays"
                );
                continue;
            }
            Ok(Some(data)) => match String::from_utf8(data) {
                Ok(s) if s.trim().is_empty() => None,
                Ok(s) => Some(s),
                Err(_) => {
                    warn!(
                        path,
                        "rule node is not UTF-8; skipped, the last good rule stays"
                    );
                    continue;
                }
            },
            Ok(None) => None,
            Err(e) => {
                debug!(path, "cannot read rule yet: {e}");
                failed.insert(key.clone());
                continue;
            }
        };
        match sent.rules.get(&key) {
            Some(prev) if *prev == text => continue,
            // A key that never existed: nothing to tell.
            None if text.is_none() => {
                sent.rules.insert(key, None);
                continue;
            }
            _ => {}
        }
        match kind {
            RuleKind::Router => {
                sent.rules.insert(key.clone(), text.clone());
                send(tx, Update::Rule { key, text }).await?;
            }
            RuleKind::Configurators => {
                let rules = match &text {
                    None => Vec::new(),
                    Some(t) => match override_parse::from_yaml(t, &path) {
                        Ok(r) => r,
                        Err(e) => {
                            warn!(
                                path,
                                "bad configurator rule skipped; the last good rules stay: {e}"
                            );
                            continue;
                        }
                    },
                };
                sent.rules.insert(key.clone(), text.clone());
                sent.configurators.insert(path.clone(), rules.clone());
                send(
                    tx,
                    Update::Configurators {
                        source: path,
                        rules,
                    },
                )
                .await?;
            }
        }
    }
    // Keys of events for nodes we do not use are dropped; failed reads stay dirty.
    dirty.rules = failed;
    dirty.all_rules = false;
    Ok(())
}

/// Reads the migration rule node into the subscription's migration state (a node over the
/// size limit or not UTF-8 is logged, the last good rule stays).
async fn read_migration_rule(
    reader: &mut Reader<'_>,
    cfg: &super::ZkConfig,
    sent: &mut Sent,
) -> Result<bool, CallError> {
    let (Some(path), Some(state)) = (migration_path(cfg), sent.migration.as_mut()) else {
        return Ok(false);
    };
    Ok(match reader.data(&path).await? {
        Some(data) if data.len() > MAX_NODE_DATA => {
            warn!(
                path,
                bytes = data.len(),
                "migration rule node over the {MAX_NODE_DATA}-byte limit skipped; the last good rule stays"
            );
            false
        }
        Some(data) => match String::from_utf8(data) {
            Ok(text) => state.set_rule_text(Some(&text), &path),
            Err(_) => {
                warn!(
                    path,
                    "migration rule node is not UTF-8; skipped, the last good rule stays"
                );
                false
            }
        },
        None => state.set_rule_text(None, &path),
    })
}

/// Sends what changed between the legacy router rules last sent and `now`: a rule update for
/// every new or changed node, a deletion for every node gone (Dubbo rebuilds its URL routers
/// from the whole list at every notification).
async fn send_router_changes(
    tx: &mpsc::Sender<Update>,
    sent: &mut BTreeMap<String, String>,
    now: BTreeMap<String, String>,
) -> Result<(), Stop> {
    let gone: Vec<String> = sent
        .keys()
        .filter(|k| !now.contains_key(*k))
        .cloned()
        .collect();
    for key in gone {
        sent.remove(&key);
        info!(rule = %key, "legacy router rule removed");
        send(tx, Update::Rule { key, text: None }).await?;
    }
    for (key, text) in now {
        if sent.get(&key) != Some(&text) {
            // Java Dubbo 3.x ignores these URLs: say so, a forgotten node can surprise.
            info!(rule = %key, "legacy router rule (Dubbo 2.x routers category) applies; legacy-routers=false ignores them as Java Dubbo 3.x does");
            sent.insert(key.clone(), text.clone());
            send(
                tx,
                Update::Rule {
                    key,
                    text: Some(text),
                },
            )
            .await?;
        }
    }
    Ok(())
}

async fn read_providers(
    reader: &mut Reader<'_>,
    cfg: &super::ZkConfig,
    filter: &ProviderFilter,
    iface: &str,
    parsed: &mut ParsedProviders,
) -> Result<Vec<Arc<Instance>>, CallError> {
    let interfaces: Vec<String> = if iface == "*" {
        reader
            .children(&cfg.root)
            .await?
            .unwrap_or_default()
            .into_iter()
            .filter(|c| !NOT_INTERFACES.contains(&c.as_str()))
            .collect()
    } else {
        vec![iface.to_string()]
    };
    let mut out = Vec::new();
    let mut paths = BTreeSet::new();
    for i in interfaces {
        let path = format!("{}/{i}/providers", cfg.root);
        match reader.children(&path).await? {
            Some(children) => out.extend(parsed.providers(filter, &path, children)),
            None => parsed.forget(&path),
        }
        paths.insert(path);
    }
    parsed.keep_only(&paths);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::{ServiceKey, Url};

    fn dirty_for(key: ServiceKey, path: &str) -> Dirty {
        let cfg =
            super::super::ZkConfig::from_url(&Url::parse("zookeeper://h:1").unwrap()).unwrap();
        let filter = ProviderFilter {
            key,
            protocols: Vec::new(),
        };
        let base = if filter.key.interface.as_ref() == "*" {
            "/dubbo".to_string()
        } else {
            format!("/dubbo/{}", filter.key.interface)
        };
        let mut d = Dirty::default();
        classify(path, &base, "/dubbo/config/dubbo", &cfg, &filter, &mut d);
        d
    }

    #[test]
    fn the_migration_rule_node_is_watched_for_the_consumer_application() {
        let cfg = |q: &str| {
            super::super::ZkConfig::from_url(&Url::parse(&format!("zookeeper://h:1{q}")).unwrap())
                .unwrap()
        };
        let path = "/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/shop.migration";
        assert_eq!(
            migration_path(&cfg("?application=shop")).as_deref(),
            Some(path)
        );
        assert_eq!(migration_path(&cfg("")), None, "no consumer application");
        assert_eq!(
            migration_path(&cfg("?application=shop&app-level=false")),
            None
        );
        let c = cfg("?application=shop");
        let filter = ProviderFilter {
            key: ServiceKey::new("a.B"),
            protocols: Vec::new(),
        };
        let mut d = Dirty::default();
        classify(
            path,
            "/dubbo/a.B",
            "/dubbo/config/dubbo",
            &c,
            &filter,
            &mut d,
        );
        assert!(d.migration && !d.providers && d.rules.is_empty());
        let mut d = Dirty::default();
        let other = "/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/cart.migration";
        classify(
            other,
            "/dubbo/a.B",
            "/dubbo/config/dubbo",
            &c,
            &filter,
            &mut d,
        );
        assert!(!d.any(), "another consumer's rule");
    }

    #[test]
    fn events_mark_only_their_part_dirty() {
        let k = ServiceKey::new("a.B");
        let d = dirty_for(k.clone(), "/dubbo/a.B/providers/dubbo%3A%2F%2Fx");
        assert!(d.providers && !d.configurators && !d.app_level && d.rules.is_empty());
        let d = dirty_for(k.clone(), "/dubbo/a.B/configurators/override%3A%2F%2Fx");
        assert!(d.configurators && !d.providers);
        let d = dirty_for(k.clone(), "/dubbo/a.B/routers/condition%3A%2F%2Fx");
        assert!(d.routers && !d.providers && !d.configurators);
        let d = dirty_for(k.clone(), "/dubbo/a.B/consumers/c");
        assert!(!d.any(), "consumer nodes change nothing");
        let d = dirty_for(k.clone(), "/dubbo/a.BExtra/providers/p");
        assert!(!d.any(), "another interface sharing the prefix");
        let d = dirty_for(k.clone(), "/dubbo/config/dubbo/a.B::.condition-router");
        assert_eq!(
            d.rules.iter().collect::<Vec<_>>(),
            vec!["a.B::.condition-router"]
        );
        let d = dirty_for(k.clone(), "/services/shop/10.0.0.1:20880");
        assert!(d.app_level && !d.providers);
        let all = ServiceKey::new("*");
        let d = dirty_for(all.clone(), "/dubbo/x.Y/providers/p");
        assert!(d.providers);
        let d = dirty_for(all, "/dubbo/mapping/x.Y");
        assert!(d.app_level && !d.providers, "mapping is not an interface");
    }
}
