//! The registry directory as a [`Directory`], and [`FixedDirectory`]: a directory over a
//! fixed list, built as the registry directory would build it.

use std::fmt;
use std::sync::Arc;

use arc_swap::Guard;
use switchman_core::Instance;
use tokio::sync::watch;

use super::{DirectoryConfig, RegistryDirectory};
use crate::contracts::{Directory, FallbackSnapshot};
use crate::snapshot::Snapshot;

impl Directory for RegistryDirectory {
    fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        RegistryDirectory::snapshot(self)
    }

    fn load(&self) -> Arc<Snapshot> {
        RegistryDirectory::load(self)
    }

    fn epochs(&self) -> Option<watch::Receiver<u64>> {
        Some(RegistryDirectory::epochs(self))
    }

    fn lists(&self) -> Option<crate::migration::Lists> {
        RegistryDirectory::lists(self)
    }

    fn fallback(&self) -> Option<FallbackSnapshot> {
        RegistryDirectory::fallback(self)
    }
}

/// A directory over a fixed list of instances: one snapshot, built once with the config's
/// router, balancer, consumer and callable protocols, exactly as the registry directory
/// would build it for that list (epoch 1). No task, no registry.
pub struct FixedDirectory {
    fixed: Arc<Snapshot>,
}

impl fmt::Debug for FixedDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedDirectory")
            .field("snapshot", &self.fixed)
            .finish()
    }
}

impl FixedDirectory {
    /// The snapshot of `instances` (two with the same [`Instance::key`]: the later wins, as in
    /// a registry update) under `config`.
    pub fn new(config: &DirectoryConfig, instances: impl IntoIterator<Item = Instance>) -> Self {
        FixedDirectory {
            fixed: Arc::new(Snapshot::fixed(
                config,
                instances.into_iter().map(Arc::new).collect(),
            )),
        }
    }
}

impl Directory for FixedDirectory {
    /// The one snapshot (a reference-count increment: it never changes).
    fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        Guard::from_inner(self.fixed.clone())
    }

    fn load(&self) -> Arc<Snapshot> {
        self.fixed.clone()
    }
}
