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

/// Anything that hands out snapshots of one service: the
/// [`RegistryDirectory`](crate::RegistryDirectory), a [`FixedDirectory`](crate::FixedDirectory)
/// for tests and fixed fleets, or your own discovery system.
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
    /// ([`RegistryDirectory::lists`](crate::RegistryDirectory::lists)). `None` by default.
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
