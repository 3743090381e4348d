//! A watched routing-rules file: every rule in it reaches the directory as an
//! [`Update::Rule`], so it is validated and applied like a rule from a config centre.
//!
//! The file holds one or more rule documents (v2 condition text or Dubbo YAML, separated by
//! `---`; see the router's `FileRuleSource`). It is polled and its content compared with the
//! last one read (not its mtime and length, which miss a same-length edit within one mtime
//! tick); on a change, changed rules are set and rules no longer in the file are deleted. A
//! file that does not parse is logged and ignored: the rules in force stay.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchman_core::{Error, Result};
use tracing::warn;

use crate::{DirectoryUpdater, Update};

fn read_rules(path: &PathBuf) -> Result<BTreeMap<String, String>> {
    // An empty file (or only comments) means "no rules", not an error.
    if let Ok(text) = std::fs::read_to_string(path)
        && text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(BTreeMap::new());
    }
    let chain =
        switchman_router::source::load(path).map_err(|e| Error::bad_config(e.to_string()))?;
    Ok(chain
        .keys()
        .filter_map(|k| chain.rule_text(k).map(|t| (k.to_string(), t.to_string())))
        .collect())
}

/// The largest rules file read (a rule is at most the router's `MAX_RULE_BYTES`; a file holds
/// several).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The file's bytes, or `None` when it cannot be read or is larger than [`MAX_FILE_BYTES`].
fn read_bytes(path: &PathBuf) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= MAX_FILE_BYTES).then_some(out)
}

/// What a [`watch_rules_file`] watcher has done so far: cheap to clone, the counters are
/// shared with the polling task.
#[derive(Debug, Clone, Default)]
pub struct RulesFileWatch {
    changes: Arc<AtomicU64>,
    rejected: Arc<AtomicU64>,
}

impl RulesFileWatch {
    /// Edits of the file that were read (content different from the last one read).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Edits that did not parse (the rules in force stayed).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }
}

/// Loads `path` now (an error if it cannot be read or parsed) and keeps polling it every
/// `poll`, feeding rule changes to the directory behind `updater`. The task ends when the
/// directory is dropped; the returned handle counts what it saw.
pub fn watch_rules_file(
    updater: DirectoryUpdater,
    path: impl Into<PathBuf>,
    poll: Duration,
) -> Result<RulesFileWatch> {
    let path = path.into();
    let mut current = read_rules(&path)?;
    for (k, t) in &current {
        updater.apply(Update::Rule {
            key: k.clone(),
            text: Some(t.clone()),
        });
    }
    let watch = RulesFileWatch::default();
    let counters = watch.clone();
    let mut last = read_bytes(&path);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(poll).await;
            if updater.is_closed() {
                return;
            }
            let now = read_bytes(&path);
            if now == last {
                continue;
            }
            last = now;
            counters.changes.fetch_add(1, Ordering::Relaxed);
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
                    counters.rejected.fetch_add(1, Ordering::Relaxed);
                    warn!(file = %path.display(), "rules file rejected, the rules in force stay: {e}")
                }
            }
        }
    });
    Ok(watch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DirectoryConfig, RegistryDirectory};
    use switchman_core::ServiceKey;

    #[tokio::test]
    async fn a_same_length_edit_that_keeps_the_mtime_is_seen() {
        let path =
            std::env::temp_dir().join(format!("switchman-rules-mtime-{}", std::process::id()));
        std::fs::write(&path, "method = m => port = 1\n").unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("x")), None);
        let watch = watch_rules_file(dir.updater(), &path, Duration::from_millis(10)).unwrap();
        std::fs::write(&path, "method = m => port = 2\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while watch.changes() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            watch.changes(),
            1,
            "only the content changed, and it was seen"
        );
        assert_eq!(watch.rejected(), 0);
        std::fs::remove_file(&path).ok();
    }
}
