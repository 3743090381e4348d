//! The consumer's migration rule node and the legacy `routers` rules.

use std::collections::BTreeMap;

use tokio::sync::mpsc;
use tracing::{info, warn};

use super::paths::migration_path;
use super::state::{Sent, Stop, send};
use crate::Update;
use crate::zookeeper::ZkConfig;
use crate::zookeeper::nodes::MAX_NODE_DATA;
use crate::zookeeper::reader::Reader;
use crate::zookeeper::session::CallError;

/// Reads the migration rule node into the subscription's migration state (a node over the
/// size limit or not UTF-8 is logged, the last good rule stays).
pub(super) async fn read_migration_rule(
    reader: &mut Reader<'_>,
    cfg: &ZkConfig,
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
pub(super) async fn send_router_changes(
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
