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
//!
//! A key that is a pattern (`*`, a group list; [`ServiceKey::is_pattern`]) is Dubbo's
//! non-concrete `NacosServiceName`: it has no service name to subscribe to. As Dubbo's
//! `NacosRegistry.filterServiceNames`, the task lists the group's services and subscribes to
//! every `providers:{interface}:{version}:{group}` name the key accepts
//! ([`compatible_names`]), merging their lists into one; each instance carries the key of the
//! name it came from. Unlike Dubbo, which lists once when it subscribes, the task lists again
//! every [`Watch::list_every`], so a group registered later is seen without a restart. A name
//! once subscribed stays subscribed for the life of the subscription (its instances leave
//! when Nacos pushes them gone), so a listing that misses a name, say one that moved between
//! pages while they were read, never drops live providers.
//!
//! A concrete Dubbo-naming key also reads the Dubbo 3 application-level instances of its
//! interface ([`AppSide`], `app.rs`): the mapping config, the application services and their
//! metadata. The consumer's migration step (`crate::migration`) picks which of the two lists
//! is published; the mapping, migration rule and report reads run in this task (a mapping read is
//! served from the SDK's cache once its listener is registered, a report is read once per new
//! revision), each bounded by [`SDK_CALL_TIMEOUT`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigService};
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, ServiceInstance,
};
use switchman_core::{Instance, ServiceKey};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::app::AppSide;
use super::mapping;
use super::rules::{RuleState, provider_app_data_ids};
use super::sdk::{
    Clients, ConfigForwarder, NamingForwarder, RULE_POLL, SDK_CALL_TIMEOUT, current_list,
    event_service, subscribe_name, unsubscribe_name,
};
use super::subscription::Watch;
use crate::Update;
use crate::deltas::{Deltas, free_after_yield};

/// Service names per page of a listing (Dubbo's `nacos.service.names.pagination.size`).
const LIST_PAGE_SIZE: i32 = 100;
/// Most pages one listing reads (100,000 names).
const MAX_LIST_PAGES: i32 = 1000;

/// Maps a full Nacos list of the service of provider key `key` onto instances, keeping only
/// the wanted clusters.
pub(crate) fn map_list(w: &Watch, key: &ServiceKey, list: &[ServiceInstance]) -> Vec<Instance> {
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
        .filter_map(|si| mapping::to_instance(key, w.dubbo_naming, si))
        .collect()
}

/// The names among `names` (a listing of the group's services) that a subscription of the
/// pattern `key` takes, each with the provider key it stands for: names of Dubbo's form
/// ([`ServiceKey::from_nacos_service_name`]) naming one service (not a pattern themselves,
/// as Dubbo's `isCompatible` wants a concrete name) that `key` [accepts](ServiceKey::accepts).
pub(crate) fn compatible_names(
    key: &ServiceKey,
    names: impl IntoIterator<Item = String>,
) -> BTreeMap<String, ServiceKey> {
    names
        .into_iter()
        .filter_map(|name| {
            let provider = ServiceKey::from_nacos_service_name(&name)?;
            (!provider.is_pattern() && key.accepts(&provider)).then_some((name, provider))
        })
        .collect()
}

/// Every service name of `group`, page by page (at most [`MAX_LIST_PAGES`]).
async fn list_services(naming: &NamingService, group: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for page in 1..=MAX_LIST_PAGES {
        let listed = tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            naming.get_service_list(page, LIST_PAGE_SIZE, Some(group.to_string())),
        )
        .await;
        let (names, count) = match listed {
            Ok(Ok(page)) => page,
            Ok(Err(e)) => return Err(format!("listing the services of group {group}: {e}")),
            Err(_) => {
                return Err(format!(
                    "listing the services of group {group} timed out after {SDK_CALL_TIMEOUT:?}"
                ));
            }
        };
        let got = names.len();
        out.extend(names);
        if got == 0 || out.len() >= usize::try_from(count).unwrap_or(0) {
            return Ok(out);
        }
    }
    warn!(
        group,
        names = out.len(),
        "more services than one listing reads; only these were considered"
    );
    Ok(out)
}

/// Runs one subscription until `tx`'s receiver is dropped. `_registry` (the registry's
/// shared state) lives as long as the subscription, so a subscription outlives the last
/// handle of its registry, as on ZooKeeper.
pub(crate) async fn run<R: Send + Sync + 'static>(
    w: Watch,
    mut clients_rx: watch::Receiver<Option<Clients>>,
    tx: mpsc::Sender<Update>,
    _registry: Arc<R>,
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
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let listener: Arc<dyn NamingEventListener> = Arc::new(NamingForwarder(ev_tx));
    // The subscribed names, each with the provider key of its instances.
    let mut names: BTreeMap<String, ServiceKey> = BTreeMap::new();
    // The last list of each name.
    let mut lists: BTreeMap<String, Vec<Arc<Instance>>> = BTreeMap::new();
    // Names to read again, with the event that said so (`None`: just subscribed).
    let mut dirty: BTreeMap<String, Option<Arc<NamingChangeEvent>>> = BTreeMap::new();
    // Whether the set of names is known: a pattern publishes nothing before its first listing.
    let mut listed = w.list_every.is_none();
    // Publish even if no list was read (the first listing found no name).
    let mut publish = false;
    if w.list_every.is_none() {
        subscribe_name(&clients, &w, &w.service_name, &listener).await;
        names.insert(w.service_name.clone(), w.key.clone());
        dirty.insert(w.service_name.clone(), None);
    }
    let mut list_tick =
        tokio::time::interval(w.list_every.unwrap_or(Duration::from_secs(24 * 3600)));
    list_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut list_failed = false;

    // Rules live in a task of their own so a slow config read never delays instance updates.
    let (apps_tx, apps_rx) = mpsc::unbounded_channel::<String>();
    let rule_task = w
        .rule_group
        .is_some()
        .then(|| tokio::spawn(run_rules(w.clone(), clients.clone(), apps_rx, tx.clone())));
    let mut apps: BTreeSet<String> = BTreeSet::new();
    // Nacos hands over the whole list each time; the directory gets what changed.
    let mut deltas = Deltas::default();
    // Application-level instances of the interface (Dubbo 3), merged below.
    let mut app_side = AppSide::new(&w, &clients);

    'events: loop {
        // Read what is dirty, then publish the merged list if anything changed.
        let mut changed = std::mem::take(&mut publish);
        let mut replaced = Vec::new();
        for (name, ev) in std::mem::take(&mut dirty) {
            let Some(key) = names.get(&name) else {
                continue;
            };
            let Some(list) = current_list(&clients, &w, &name, ev.as_deref()).await else {
                continue;
            };
            let instances: Vec<Arc<Instance>> =
                map_list(&w, key, &list).into_iter().map(Arc::new).collect();
            replaced.extend(lists.insert(name, instances));
            changed = true;
        }
        if let Some(a) = &mut app_side {
            changed |= a.sync(&clients, &w).await;
        }
        if changed && listed {
            let merged: Vec<Arc<Instance>> = match &mut app_side {
                None => lists.values().flatten().cloned().collect(),
                Some(a) => {
                    let interface_level: Vec<Arc<Instance>> =
                        lists.values().flatten().cloned().collect();
                    // The first list would say "no provider" only because application
                    // metadata is still being fetched: look again shortly (bounded by one
                    // fetch timeout).
                    if a.hold_first_list(interface_level.is_empty() && a.list().is_empty()) {
                        free_after_yield(replaced).await;
                        continue 'events;
                    }
                    a.choose(interface_level)
                }
            };
            let count = merged.len();
            let (updates, retired) = deltas.next(merged);
            if updates.is_empty() {
                debug!(service = %service, "nacos event without a change");
            } else {
                info!(service = %service, instances = count, "nacos pushed a new list");
                // Provider applications bring their own rule data ids (tag router, app conditions).
                let app_level = app_side.as_ref().map(|a| a.list()).unwrap_or_default();
                for app in lists
                    .values()
                    .flatten()
                    .chain(app_level)
                    .filter_map(|i| i.application())
                {
                    if !apps.contains(app) {
                        apps.insert(app.to_string());
                        let _ = apps_tx.send(app.to_string());
                    }
                }
                for update in updates {
                    if tx.send(update).await.is_err() {
                        break 'events;
                    }
                }
            }
            // After the lists: whoever sees this decision sees its list too.
            if let Some(lists) = app_side.as_mut().and_then(AppSide::take_lists)
                && tx.send(Update::Lists(lists)).await.is_err()
            {
                break 'events;
            }
            if let Some(fallback) = app_side.as_mut().and_then(AppSide::take_fallback)
                && tx.send(Update::Fallback(fallback)).await.is_err()
            {
                break 'events;
            }
            free_after_yield((retired, replaced)).await;
        }

        let app_event = async {
            match &mut app_side {
                Some(a) => a.next_event().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tx.closed() => break,
            ev = app_event => {
                if let Some(a) = &mut app_side {
                    a.on_event(ev);
                }
            }
            ev = ev_rx.recv() => {
                let Some(ev) = ev else { break };
                // A concrete subscription has one name, whatever the event calls it.
                let name_of = |ev: &NamingChangeEvent| match w.list_every {
                    None => w.service_name.clone(),
                    Some(_) => event_service(ev),
                };
                dirty.insert(name_of(&ev), Some(ev));
                while let Ok(newer) = ev_rx.try_recv() {
                    dirty.insert(name_of(&newer), Some(newer));
                }
            }
            _ = list_tick.tick(), if w.list_every.is_some() => {
                match list_services(&clients.naming, &w.group).await {
                    Ok(all) => {
                        list_failed = false;
                        for (name, key) in compatible_names(&w.key, all) {
                            if names.contains_key(&name) {
                                continue;
                            }
                            info!(service = %service, nacos_service = %name, "a compatible service appeared");
                            subscribe_name(&clients, &w, &name, &listener).await;
                            names.insert(name.clone(), key);
                            dirty.insert(name, None);
                        }
                        if !listed {
                            listed = true;
                            publish = true;
                        }
                    }
                    Err(e) if !list_failed => {
                        list_failed = true;
                        warn!(service = %service, "nacos service listing failed, retrying every {:?}: {e}", list_tick.period());
                    }
                    Err(e) => debug!(service = %service, "nacos service listing failed: {e}"),
                }
            }
        }
    }

    // The rule task ends by itself once the receiver is gone, removing its config listeners.
    drop(rule_task);
    if let Some(a) = app_side {
        a.close(&clients, &w).await;
    }
    for name in names.keys() {
        unsubscribe_name(&clients, &w, name, &listener).await;
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
    use crate::nacos::subscription::Subscribers;

    fn watch(clusters: &[&str]) -> Watch {
        Watch {
            key: ServiceKey::new("svc"),
            service_name: "svc".into(),
            list_every: None,
            group: "DEFAULT_GROUP".into(),
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
            dubbo_naming: false,
            rule_group: None,
            rule_ids: Vec::new(),
            subscribers: Subscribers::default(),
            app_level: None,
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
    fn cluster_filter_keeps_only_the_wanted_clusters() {
        let list = [
            si(1, Some("hz")),
            si(2, Some("sh")),
            si(3, None),
            si(4, Some(mapping::DEFAULT_CLUSTER)),
            si(-1, Some("hz")),
        ];
        let ports = |w: &Watch| {
            map_list(w, &w.key, &list)
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

    #[test]
    fn a_pattern_takes_every_compatible_concrete_name() {
        let names = || {
            [
                "providers:com.foo.Bar::g1",
                "providers:com.foo.Bar::g2",
                "providers:com.foo.Bar::",
                "providers:com.foo.Bar:1.0:g1",
                "providers:com.foo.Other::g1",
                "consumers:com.foo.Bar::g1",
                "providers:com.foo.Bar::*",
                "providers:com.foo.Bar::g1,g2",
                "order-service",
            ]
            .into_iter()
            .map(String::from)
        };
        let taken = |g: &str, v: &str| -> Vec<String> {
            compatible_names(&ServiceKey::with("com.foo.Bar", g, v), names())
                .into_keys()
                .collect()
        };
        assert_eq!(
            taken("*", ""),
            [
                "providers:com.foo.Bar::",
                "providers:com.foo.Bar::g1",
                "providers:com.foo.Bar::g2"
            ],
            "group * with no version: every group of the unversioned service"
        );
        assert_eq!(
            taken("g1,g2", ""),
            ["providers:com.foo.Bar::g1", "providers:com.foo.Bar::g2"]
        );
        assert_eq!(
            taken("g2, g1", ""),
            ["providers:com.foo.Bar::g1", "providers:com.foo.Bar::g2"],
            "list entries are trimmed, as UrlUtils.isMatch does"
        );
        assert_eq!(taken("g1,", ""), ["providers:com.foo.Bar::g1"]);
        assert_eq!(
            taken("g1", "*"),
            ["providers:com.foo.Bar:1.0:g1", "providers:com.foo.Bar::g1"]
        );
        assert_eq!(taken("*", "*").len(), 4);
        assert!(taken("g3,g4", "").is_empty());
        let keys = compatible_names(&ServiceKey::with("com.foo.Bar", "*", ""), names());
        assert_eq!(
            keys["providers:com.foo.Bar::g2"],
            ServiceKey::with("com.foo.Bar", "g2", ""),
            "each name's instances carry the name's own key"
        );
        let any = compatible_names(&ServiceKey::with("*", "*", "*"), names());
        assert!(any.contains_key("providers:com.foo.Other::g1") && any.len() == 5);
    }
}
