//! A watched routing-rules file: every rule in it reaches the directory as an
//! [`Update::Rule`], so it is validated and applied like a rule from a config centre.
//!
//! The file holds one or more rule documents (v2 condition text or Dubbo YAML, separated by
//! `---`; see the router's `FileRuleSource`). It is polled; on a change, changed rules are set
//! and rules no longer in the file are deleted. A file that does not parse is logged and
//! ignored: the rules in force stay.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use switchman_core::{Error, Result};
use tracing::warn;

use crate::{DirectoryUpdater, Update};

fn read_rules(path: &PathBuf) -> Result<BTreeMap<String, String>> {
    // An empty file (or only comments) means "no rules", not an error.
    if let Ok(text) = std::fs::read_to_string(path) {
        if text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            return Ok(BTreeMap::new());
        }
    }
    let chain =
        switchman_router::source::load(path).map_err(|e| Error::bad_config(e.to_string()))?;
    Ok(chain
        .keys()
        .filter_map(|k| chain.rule_text(k).map(|t| (k.to_string(), t.to_string())))
        .collect())
}

/// Loads `path` now (an error if it cannot be read or parsed) and keeps polling it every
/// `poll`, feeding rule changes to the directory behind `updater`. The task ends when the
/// directory is dropped.
pub fn watch_rules_file(
    updater: DirectoryUpdater,
    path: impl Into<PathBuf>,
    poll: Duration,
) -> Result<()> {
    let path = path.into();
    let mut current = read_rules(&path)?;
    for (k, t) in &current {
        updater.apply(Update::Rule {
            key: k.clone(),
            text: Some(t.clone()),
        });
    }
    let stamp = |p: &PathBuf| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
    };
    let mut last = stamp(&path);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(poll).await;
            if updater.is_closed() {
                return;
            }
            let now = stamp(&path);
            if now == last {
                continue;
            }
            last = now;
            match read_rules(&path) {
                Ok(next) => {
                    for (k, t) in &next {
                        if current.get(k) != Some(t) {
                            updater.apply(Update::Rule {
                                key: k.clone(),
                                text: Some(t.clone()),
                            });
                        }
                    }
                    for k in current.keys().filter(|k| !next.contains_key(*k)) {
                        updater.apply(Update::Rule {
                            key: k.clone(),
                            text: None,
                        });
                    }
                    current = next;
                }
                Err(e) => {
                    warn!(file = %path.display(), "rules file rejected, the rules in force stay: {e}")
                }
            }
        }
    });
    Ok(())
}
