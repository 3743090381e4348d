//! The snapshot cache file: the newest contents handed to one writer task per file.

use std::path::PathBuf;

use tokio::sync::watch;
use tracing::warn;

use super::state::State;
use crate::cache;

/// One writer per cache file writes the newest contents off the directory task.
pub(super) fn spawn_cache_writer(path: PathBuf) -> watch::Sender<Option<Vec<u8>>> {
    let (tx, mut rx) = watch::channel::<Option<Vec<u8>>>(None);
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let Some(bytes) = rx.borrow_and_update().clone() else {
                continue;
            };
            let path = path.clone();
            if let Ok(Err((path, e))) = tokio::task::spawn_blocking(move || {
                cache::store(&path, &bytes).map_err(|e| (path, e))
            })
            .await
            {
                warn!(file = %path.display(), "cannot write the snapshot cache: {e}");
            }
        }
    });
    tx
}

impl State {
    /// Hands what the registry reported (the published list) to the cache file's writer.
    pub(super) fn save_cache(&self) {
        if let Some(tx) = &self.cache_tx {
            tx.send_replace(Some(cache::encode(
                &self.config.service,
                self.published.iter().map(|p| p.reported.as_ref()),
            )));
        }
    }
}
