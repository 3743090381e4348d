//! One subscription: the task that turns nacos-sdk events into [`Update`]s.
//!
//! The SDK calls listeners on its own runtime. The listeners here only forward the event into
//! an unbounded channel; everything else (mapping, diffing, rule parsing) happens in this task
//! on the caller's runtime.
//!
//! Two nacos-sdk 0.8.3 behaviours shape the task:
//!
//! - Each naming event is handed to its listener in a task of its own, so two quick events can
//!   arrive out of order. The event is therefore only a signal: the task reads the SDK's service
//!   cache, which the SDK updates in order before it notifies. The first list goes out whole
//!   ([`Update::Reset`]), later ones as what changed (`Deltas`).
//! - A config listener added while its data id does not exist yet never hears about the first
//!   publication (the SDK swallows the first change after a failed initial read). The task
//!   therefore also reads every watched data id every [`RULE_POLL`]; a read of an existing
//!   data id is served from the SDK's cache, so only absent data ids cost a request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigService};
use nacos_sdk::api::naming::{NamingChangeEvent, NamingEventListener, ServiceInstance};
use switchman_core::{Instance, ServiceKey};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::rules::{RuleState, provider_app_data_ids};
use super::{Clients, mapping};
use crate::Update;
use crate::deltas::{Deltas, free_after_yield};

/// How often watched config data ids are re-read (see the module docs).
pub(crate) const RULE_POLL: Duration = Duration::from_secs(2);
/// Bound on each SDK call made from the task.
const SDK_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// What one subscription watches.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    /// The subscribed service.
    pub(crate) key: ServiceKey,
    /// Its Nacos service name.
    pub(crate) service_name: String,
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

struct NamingForwarder(mpsc::UnboundedSender<Arc<NamingChangeEvent>>);

impl NamingEventListener for NamingForwarder {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let _ = self.0.send(event);
    }
}

struct ConfigForwarder(mpsc::UnboundedSender<ConfigResponse>);

impl ConfigChangeListener for ConfigForwarder {
    fn notify(&self, config: ConfigResponse) {
        let _ = self.0.send(config);
    }
}

/// Maps a full Nacos list onto instances, keeping only the wanted clusters.
pub(crate) fn map_list(w: &Watch, list: &[ServiceInstance]) -> Vec<Instance> {
    list.iter()
        .filter(|si| {
            w.clusters.is_empty()
                || w.clusters.iter().any(|c| {
                    si.cluster_name
                        .as_deref()
                        .unwrap_or(mapping::DEFAULT_CLUSTER)
                        == c
                })
        })
        .filter_map(|si| mapping::to_instance(&w.key, w.dubbo_naming, si))
        .collect()
}

/// Runs one subscription until `tx`'s receiver is dropped.
pub(crate) async fn run(
    w: Watch,
    mut clients_rx: watch::Receiver<Option<Clients>>,
    tx: mpsc::Sender<Update>,
) {
    let clients = loop {
        if let Some(c) = clients_rx.borrow_and_update().clone() {
            break c;
        }
        tokio::select! {
            changed = clients_rx.changed() => if changed.is_err() { return },
            _ = tx.closed() => return,
        }
    };
    let service = w.key.to_string();
    w.subscribers.acquire(&w.service_name, &w.group);
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let listener: Arc<dyn NamingEventListener> = Arc::new(NamingForwarder(ev_tx));
    // The listener is registered before the request goes out, and the SDK repeats the
    // subscription after every reconnect, so a failure here is not final.
    match tokio::time::timeout(
        SDK_CALL_TIMEOUT,
        clients.naming.subscribe(
            w.service_name.clone(),
            Some(w.group.clone()),
            Vec::new(),
            listener.clone(),
        ),
    )
    .await
    {
        Ok(Ok(())) => {
            info!(service = %service, nacos_service = %w.service_name, group = %w.group, "subscribed")
        }
        Ok(Err(e)) => warn!(service = %service, "nacos subscribe failed, the SDK retries: {e}"),
        Err(_) => warn!(service = %service, "nacos subscribe timed out, the SDK retries"),
    }

    // Rules live in a task of their own so a slow config read never delays instance updates.
    let (apps_tx, apps_rx) = mpsc::unbounded_channel::<String>();
    let rule_task = w
        .rule_group
        .is_some()
        .then(|| tokio::spawn(run_rules(w.clone(), clients.clone(), apps_rx, tx.clone())));
    let mut apps: BTreeSet<String> = BTreeSet::new();
    // Nacos hands over the whole list each time; the directory gets what changed.
    let mut deltas = Deltas::default();

    'events: loop {
        let ev = tokio::select! {
            _ = tx.closed() => break,
            ev = ev_rx.recv() => ev,
        };
        let Some(mut ev) = ev else { break };
        while let Ok(newer) = ev_rx.try_recv() {
            ev = newer;
        }
        let list = current_list(&clients, &w, &ev).await;
        let instances: Vec<Arc<Instance>> = map_list(&w, &list).into_iter().map(Arc::new).collect();
        let (updates, retired) = deltas.next(instances.clone());
        if updates.is_empty() {
            debug!(service = %service, "nacos event without a change");
            continue;
        }
        info!(service = %service, instances = instances.len(), "nacos pushed a new list");
        // Provider applications bring their own rule data ids (tag router, app conditions).
        for app in instances.iter().filter_map(|i| i.application()) {
            if apps.insert(app.to_string()) {
                let _ = apps_tx.send(app.to_string());
            }
        }
        for update in updates {
            if tx.send(update).await.is_err() {
                break 'events;
            }
        }
        free_after_yield((retired, list)).await;
    }

    // The rule task ends by itself once the receiver is gone, removing its config listeners.
    drop(rule_task);
    // nacos-sdk's unsubscribe also ends the server-side subscription and the SDK's polling of
    // the service, which other subscriptions of this registry to the same service still need:
    // only the last one unsubscribes (the others' listeners stay registered, inert).
    if w.subscribers.release(&w.service_name, &w.group) {
        let _ = tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            clients.naming.unsubscribe(
                w.service_name.clone(),
                Some(w.group.clone()),
                Vec::new(),
                listener,
            ),
        )
        .await;
    }
    debug!(service = %service, "nacos subscription ended");
}

/// Watches the config-centre rules of one subscription until `tx` closes.
async fn run_rules(
    w: Watch,
    clients: Clients,
    mut apps_rx: mpsc::UnboundedReceiver<String>,
    tx: mpsc::Sender<Update>,
) {
    let (Some(config), Some(group)) = (clients.config.clone(), w.rule_group.clone()) else {
        return;
    };
    let (cfg_tx, mut cfg_rx) = mpsc::unbounded_channel();
    let cfg_listener: Arc<dyn ConfigChangeListener> = Arc::new(ConfigForwarder(cfg_tx));
    let mut rules = RuleState::default();
    let mut listening: BTreeSet<String> = BTreeSet::new();
    for id in &w.rule_ids {
        rules.track(id);
    }
    let mut poll = tokio::time::interval(RULE_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let updates: Vec<Update> = tokio::select! {
            _ = tx.closed() => break,
            app = apps_rx.recv() => {
                if let Some(app) = app {
                    for id in provider_app_data_ids(&app) {
                        rules.track(&id);
                    }
                    // Read the new data ids now rather than at the next tick.
                    poll.reset_immediately();
                }
                Vec::new()
            }
            c = cfg_rx.recv() => match c {
                Some(c) => rules.observe(c.data_id(), Some(c.content().clone())).into_iter().collect(),
                None => Vec::new(),
            },
            _ = poll.tick() => poll_rules(&config, &group, &mut rules, &mut listening, &cfg_listener).await,
        };
        for u in updates {
            if tx.send(u).await.is_err() {
                break;
            }
        }
    }
    for id in listening {
        let _ = tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            config.remove_listener(id, group.clone(), cfg_listener.clone()),
        )
        .await;
    }
}

/// The newest full list: the SDK's cache (updated in order before listeners run), else the
/// event's own list.
async fn current_list(
    clients: &Clients,
    w: &Watch,
    ev: &NamingChangeEvent,
) -> Vec<ServiceInstance> {
    let cached = tokio::time::timeout(
        SDK_CALL_TIMEOUT,
        clients.naming.get_all_instances(
            w.service_name.clone(),
            Some(w.group.clone()),
            Vec::new(),
            true,
        ),
    )
    .await;
    match cached {
        Ok(Ok(list)) => list,
        _ => ev.instances.clone().unwrap_or_default(),
    }
}

/// Re-reads every watched data id, (re)adding config listeners where missing.
async fn poll_rules(
    config: &ConfigService,
    group: &str,
    rules: &mut RuleState,
    listening: &mut BTreeSet<String>,
    cfg_listener: &Arc<dyn ConfigChangeListener>,
) -> Vec<Update> {
    let mut out = Vec::new();
    for id in rules.ids() {
        if !listening.contains(&id) {
            let added = tokio::time::timeout(
                SDK_CALL_TIMEOUT,
                config.add_listener(id.clone(), group.to_string(), cfg_listener.clone()),
            )
            .await;
            if matches!(added, Ok(Ok(()))) {
                listening.insert(id.clone());
            }
        }
        let read = tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            config.get_config(id.clone(), group.to_string()),
        )
        .await;
        let content = match read {
            Ok(Ok(resp)) => Some(resp.content().clone()),
            Ok(Err(nacos_sdk::api::error::Error::ConfigNotFound(_))) => None,
            Ok(Err(e)) => {
                debug!(data_id = %id, "config read failed: {e}");
                continue;
            }
            Err(_) => continue,
        };
        out.extend(rules.observe(&id, content));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(clusters: &[&str]) -> Watch {
        Watch {
            key: ServiceKey::new("svc"),
            service_name: "svc".into(),
            group: "DEFAULT_GROUP".into(),
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
            dubbo_naming: false,
            rule_group: None,
            rule_ids: Vec::new(),
            subscribers: Subscribers::default(),
        }
    }

    fn si(port: i32, cluster: Option<&str>) -> ServiceInstance {
        ServiceInstance {
            ip: "10.0.0.1".into(),
            port,
            cluster_name: cluster.map(str::to_string),
            ..Default::default()
        }
    }

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

    #[test]
    fn cluster_filter_keeps_only_the_wanted_clusters() {
        let list = [
            si(1, Some("hz")),
            si(2, Some("sh")),
            si(3, None),
            si(4, Some(mapping::DEFAULT_CLUSTER)),
            si(-1, Some("hz")),
        ];
        let ports = |w: &Watch| {
            map_list(w, &list)
                .iter()
                .map(|i| i.port())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ports(&watch(&[])),
            vec![1, 2, 3, 4],
            "no filter; bad port dropped"
        );
        assert_eq!(ports(&watch(&["hz"])), vec![1]);
        assert_eq!(ports(&watch(&["sh", "DEFAULT"])), vec![2, 3, 4]);
    }
}
