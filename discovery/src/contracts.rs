//! The traits code outside Switchman implements, in one place, with no adapter behind them.
//!
//! An out-of-tree registry adapter depends on `switchman-discovery` with its default
//! features (none: no ZooKeeper or Nacos client is compiled) and implements [`Registry`]
//! (sending [`Update`]s) and, for providers, [`Registrar`]. Another discovery system can
//! stand in for the whole directory by implementing [`Directory`]: the cluster invoker only
//! asks it for the current [`Snapshot`]. Balancers implement [`LoadBalance`] and [`Picker`],
//! routers of your own [`Router`] and [`RouterStage`]; application-level metadata comes through a [`MetadataFetcher`]. The cluster-side traits
//! (the transport's `Invoker`, a custom `ClusterStrategy`) are re-exported with these by
//! `switchman_cluster::contracts`.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

/// In the [`Directory`] signature: re-exported, so an implementation needs no extra
/// dependency (a directory of your own keeps its snapshot in an `ArcSwap` too).
pub use arc_swap::{ArcSwap, Guard};

pub use crate::metadata::MetadataFetcher;
pub use crate::registry::{Registrar, Registry, Update, UpdateReceiver};
pub use crate::snapshot::Snapshot;
pub use switchman_loadbalance::{Endpoint, LoadBalance, PickContext, Picker};
pub use switchman_router::{ConsumerInfo, Router, RouterChain, RouterStage};

use crate::RegistryDirectory;
use crate::directory::DirectoryConfig;
use switchman_core::Instance;

/// Anything that hands out snapshots of one service: the [`RegistryDirectory`], a
/// [`FixedDirectory`] for tests and fixed fleets, or your own discovery system.
///
/// [`Directory::snapshot`] is called on every attempt of every call: it must not lock or
/// allocate (an `ArcSwap::load` is what the registry directory does).
pub trait Directory: Send + Sync + fmt::Debug + 'static {
    /// The current snapshot, for the moment of one route and pick.
    fn snapshot(&self) -> Guard<Arc<Snapshot>>;

    /// The current snapshot, to keep (across `.await`s included).
    fn load(&self) -> Arc<Snapshot> {
        Guard::into_inner(self.snapshot())
    }

    /// A receiver that sees every published epoch, for those who follow changes (a transport
    /// dropping connections of endpoints that left). `None`: this directory never changes.
    fn epochs(&self) -> Option<watch::Receiver<u64>> {
        None
    }

    /// What the registry adapter last decided from when it reads both discovery levels
    /// ([`RegistryDirectory::lists`]). `None` by default.
    fn lists(&self) -> Option<crate::migration::Lists> {
        None
    }

    /// Dubbo's `APPLICATION_FIRST` per-call fallback ([`crate::migration`]): the
    /// interface-level snapshot a call may use instead of [`Directory::snapshot`]'s, and the
    /// percent of calls that stay on the latter. Asked once per call; must not lock. `None`
    /// (the default): calls never fall back.
    fn fallback(&self) -> Option<FallbackSnapshot> {
        None
    }
}

/// What [`Directory::fallback`] gives: the interface-level snapshot and the percent of calls
/// that stay on the directory's own snapshot (0..=100).
#[derive(Debug, Clone)]
pub struct FallbackSnapshot {
    /// The interface-level snapshot.
    pub snapshot: Arc<Snapshot>,
    /// Percent of calls that do not use it (Dubbo's `proportion`).
    pub proportion: u8,
}

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
    current: ArcSwap<Snapshot>,
    /// The same snapshot, for `load`: a reference-count increment.
    fixed: Arc<Snapshot>,
}

impl fmt::Debug for FixedDirectory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedDirectory")
            .field("snapshot", &self.current.load())
            .finish()
    }
}

impl FixedDirectory {
    /// The snapshot of `instances` (two with the same [`Instance::key`]: the later wins, as in
    /// a registry update) under `config`.
    pub fn new(config: &DirectoryConfig, instances: impl IntoIterator<Item = Instance>) -> Self {
        let fixed = Arc::new(Snapshot::fixed(
            config,
            instances.into_iter().map(Arc::new).collect(),
        ));
        FixedDirectory {
            current: ArcSwap::new(fixed.clone()),
            fixed,
        }
    }
}

impl Directory for FixedDirectory {
    fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    fn load(&self) -> Arc<Snapshot> {
        self.fixed.clone()
    }
}
