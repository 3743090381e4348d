//! Re-reading what events marked dirty (providers, application-level instances,
//! configurators, legacy routers, config-centre rules) and sending what changed.

use std::collections::BTreeSet;
use std::sync::Arc;

use switchman_core::Instance;
use tokio::sync::mpsc;
use tracing::{debug, warn};
use zookeeper_client as zk;

use super::paths::{NOT_INTERFACES, config_root};
use super::rules::{read_migration_rule, send_router_changes};
use super::state::{Dirty, Sent, Stop, send};
use crate::deltas::free_after_yield;
use crate::migration::Source;
use crate::zookeeper::ZkConfig;
use crate::zookeeper::nodes::{self, MAX_NODE_DATA, ParsedProviders, ProviderFilter, RuleKind};
use crate::zookeeper::reader::Reader;
use crate::zookeeper::session::{CallError, Session};
use crate::{Update, override_parse};

/// Re-reads what is dirty and sends what changed. A read that fails leaves its part dirty.
pub(super) async fn relist(
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
    dirty.failed.clear();
    if dirty.migration {
        match read_migration_rule(reader, cfg, sent).await {
            Ok(changed) => {
                dirty.migration = false;
                // A new rule may change the step once one is in force (the first decision
                // waits for the first lists).
                list_changed |=
                    changed && sent.migration.as_ref().is_some_and(|m| m.step().is_some());
            }
            Err(e) => {
                debug!(service = %filter.key, "cannot read the migration rule yet: {e}");
                dirty.failed.push(format!("the migration rule: {e}"));
            }
        }
    }
    if dirty.providers {
        match read_providers(reader, cfg, filter, &iface, &mut sent.parsed).await {
            Ok(list) => {
                dirty.providers = false;
                sent.interface_level = list;
                list_changed = true;
            }
            Err((path, CallError::Zk(zk::Error::NoAuth))) => {
                if !sent.no_auth_reported {
                    warn!(service = %filter.key, path, "not allowed to list providers (ACL): check the registry's user and password");
                    sent.no_auth_reported = true;
                }
                dirty.failed.push(format!("{path}: not allowed (ACL)"));
            }
            Err((path, e)) => {
                debug!(service = %filter.key, path, "cannot list providers yet: {e}");
                dirty.failed.push(format!("{path}: {e}"));
            }
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
                debug!(service = %filter.key, "cannot read application-level instances yet: {e}");
                dirty
                    .failed
                    .push(format!("application-level instances: {e}"));
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
            let fallback = sent
                .migration
                .as_ref()
                .and_then(|m| crate::migration::Fallback::of(m, source, &sent.interface_level));
            if sent.fallback != fallback {
                sent.fallback = fallback.clone();
                send(tx, Update::Fallback(fallback)).await?;
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
            Err(e) => {
                debug!(service = %filter.key, "cannot list configurators yet: {e}");
                dirty
                    .failed
                    .push(format!("{}/{iface}/configurators: {e}", cfg.root));
            }
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
                Err(e) => {
                    debug!(service = %filter.key, "cannot list routers yet: {e}");
                    dirty.failed.push(format!("{path}: {e}"));
                }
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
                dirty.failed.push(format!("{path}: {e}"));
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

/// The providers of the subscribed interface (of every interface for `*`); a failed read
/// names the node it failed on.
async fn read_providers(
    reader: &mut Reader<'_>,
    cfg: &ZkConfig,
    filter: &ProviderFilter,
    iface: &str,
    parsed: &mut ParsedProviders,
) -> Result<Vec<Arc<Instance>>, (String, CallError)> {
    let interfaces: Vec<String> = if iface == "*" {
        reader
            .children(&cfg.root)
            .await
            .map_err(|e| (cfg.root.clone(), e))?
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
        match reader
            .children(&path)
            .await
            .map_err(|e| (path.clone(), e))?
        {
            Some(children) => out.extend(parsed.providers(filter, &path, children)),
            None => parsed.forget(&path),
        }
        paths.insert(path);
    }
    parsed.keep_only(&paths);
    Ok(out)
}
