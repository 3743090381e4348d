//! The registry directory: one owner task per service turns registry updates into immutable
//! snapshots and publishes them with one atomic swap.
//!
//! - [`state`]: the owner task's state and its loop (updates, control messages, the warm-up
//!   refresh timer);
//! - [`apply`]: applying one update, routing rules and override rules to the state;
//! - [`publish`]: building the next snapshot, by patching the last one (weight changes) or
//!   rebuilding it, and installing it (metrics, log line, cache file, swap);
//! - [`cache_writer`]: the snapshot cache file, written off the owner task.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use switchman_core::{Error, Instance, Invoker, MakeEndpoint, Protocol, Result, ServiceKey};
use switchman_loadbalance::{LoadBalance, RandomBalance};
use switchman_router::{ConsumerInfo, RouterChain};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::published::{LocalReads, Published};
use crate::snapshot::{AddrMap, Snapshot};
use crate::{Registry, Update, UpdateReceiver, cache};

mod apply;
mod cache_writer;
mod fixed;
mod publish;
mod state;
#[cfg(test)]
mod tests;

use cache_writer::spawn_cache_writer;
pub use fixed::FixedDirectory;
use state::{Pending, State};

/// What the directory does when the registry reports that a service has no instance left.
///
/// Switchman's default is [`EmptyPolicy::KeepLast`] (Dubbo's default is to publish the empty
/// list). An empty push is far more often a registry-side accident (a session expiry, a
/// namespace mix-up, a restarted Nacos that has not yet received re-registrations) than a
/// fleet that really vanished at once; keeping the last list keeps calls flowing, and if the
/// providers really are gone the calls fail with transport errors anyway. Choose
/// [`EmptyPolicy::Publish`] when draining every provider must stop traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmptyPolicy {
    /// Keep serving the last non-empty list (empty-list protection on).
    #[default]
    KeepLast,
    /// Publish the empty list: calls fail with "no provider" until instances return.
    Publish,
}

/// How a directory is set up.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DirectoryConfig {
    /// The service whose providers the directory holds.
    pub service: ServiceKey,
    /// The consumer's own description (for routing rules).
    pub consumer: ConsumerInfo,
    /// The balancer whose tables each snapshot carries.
    pub balancer: Arc<dyn LoadBalance>,
    /// Routing rules.
    pub router: RouterChain,
    /// Empty-list policy.
    pub empty_policy: EmptyPolicy,
    /// Protocols the consumer can call (default `dubbo`, `tri`, `http`, `rest`). Instances
    /// speaking anything else (for example `grpc://` or `injvm://`) are listed in the snapshot
    /// but never routed to, and a warning names them once. Empty: every protocol is routable.
    pub protocols: Vec<Protocol>,
    /// Snapshot cache file: loaded at start (so calls work while the registry is down) and
    /// rewritten whenever the registry's list changes. `None`: no cache.
    pub cache_file: Option<PathBuf>,
    /// Makes each endpoint's own client when it first appears ([`MakeEndpoint`]); `None`:
    /// endpoints have none and the cluster's shared transport calls them.
    pub maker: Option<Arc<dyn MakeEndpoint>>,
    /// How long the client of an endpoint that left is kept before it is dropped (and so
    /// drained): default 10 s, Dubbo's shutdown wait. An endpoint back within it keeps its
    /// client and statistics.
    pub drain_grace: Duration,
}

/// Default of [`DirectoryConfig::drain_grace`]: 10 s, Dubbo's shutdown wait.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(10);

impl DirectoryConfig {
    /// Defaults: weighted random, no rules, [`EmptyPolicy::KeepLast`], consumer on 127.0.0.1.
    pub fn new(service: ServiceKey) -> Self {
        DirectoryConfig {
            service,
            consumer: ConsumerInfo::new("127.0.0.1", "switchman-consumer"),
            balancer: Arc::new(RandomBalance),
            router: RouterChain::new(),
            empty_policy: EmptyPolicy::default(),
            cache_file: None,
            maker: None,
            drain_grace: DEFAULT_DRAIN_GRACE,
            protocols: vec![
                Protocol::Dubbo,
                Protocol::Tri,
                Protocol::Http,
                Protocol::Rest,
            ],
        }
    }

    /// Sets the callable protocols (empty: all).
    pub fn protocols(mut self, protocols: Vec<Protocol>) -> Self {
        self.protocols = protocols;
        self
    }

    /// Whether `instance` can receive calls: available and speaking a callable protocol.
    pub fn is_routable(&self, instance: &Instance) -> bool {
        instance.is_available()
            && (self.protocols.is_empty() || self.protocols.contains(instance.protocol()))
    }

    /// Gives every endpoint its own client, made by `maker` when the endpoint first appears
    /// (see [`MakeEndpoint`]).
    pub fn maker(mut self, maker: impl MakeEndpoint + 'static) -> Self {
        self.maker = Some(Arc::new(maker));
        self
    }

    /// Sets how long the client of an endpoint that left is kept (see
    /// [`DirectoryConfig::drain_grace`]).
    pub fn drain_grace(mut self, grace: Duration) -> Self {
        self.drain_grace = grace;
        self
    }

    /// The client of a new endpoint, if this directory makes them.
    pub(crate) fn make(&self, instance: &Arc<Instance>) -> Option<Arc<dyn Invoker>> {
        self.maker.as_ref().map(|m| m.make(instance))
    }

    /// Sets the snapshot cache file.
    pub fn cache_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.cache_file = Some(path.into());
        self
    }

    /// Sets the balancer.
    pub fn balancer(mut self, balancer: Arc<dyn LoadBalance>) -> Self {
        self.balancer = balancer;
        self
    }

    /// Sets the routing rules.
    pub fn router(mut self, router: RouterChain) -> Self {
        self.router = router;
        self
    }

    /// Sets the consumer description.
    pub fn consumer(mut self, consumer: ConsumerInfo) -> Self {
        self.consumer = consumer;
        self
    }

    /// Sets the empty-list policy.
    pub fn empty_policy(mut self, policy: EmptyPolicy) -> Self {
        self.empty_policy = policy;
        self
    }
}

/// The fallback directory as readers see it.
struct FallbackRef {
    shared: Arc<Shared>,
    proportion: u8,
}

enum Control {
    Update(Update),
    Router(RouterChain),
    Balancer(Arc<dyn LoadBalance>),
}

thread_local! {
    /// Each thread's last snapshot per directory (see [`Published`]).
    static SNAPSHOT_READS: std::cell::RefCell<LocalReads<Snapshot>> =
        const { std::cell::RefCell::new(LocalReads::new()) };
}

struct Shared {
    current: Published<Snapshot>,
    /// The `APPLICATION_FIRST` fallback: the interface-level directory's state and the share
    /// of calls that stay on this one ([`Update::Fallback`]).
    fallback: arc_swap::ArcSwapOption<FallbackRef>,
    /// Whether `fallback` may be set: read first, so that a directory without one (the common
    /// case) answers `None` with one plain load instead of arc-swap's guard (two locked
    /// instructions and about 90 others per call). Set after a fallback is stored, cleared
    /// before it is removed.
    has_fallback: std::sync::atomic::AtomicBool,
    /// Updates the owner task has applied (published or not).
    applied: std::sync::atomic::AtomicU64,
    /// The adapter's last [`Update::Lists`].
    lists: std::sync::Mutex<Option<crate::migration::Lists>>,
}

/// Feeds [`Update`]s to a [`RegistryDirectory`] from anywhere (see
/// [`RegistryDirectory::updater`]).
#[derive(Clone)]
pub struct DirectoryUpdater {
    control: mpsc::UnboundedSender<Control>,
}

impl std::fmt::Debug for DirectoryUpdater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectoryUpdater")
            .field("closed", &self.control.is_closed())
            .finish()
    }
}

impl DirectoryUpdater {
    /// Sends an update (ignored once the directory is gone).
    pub fn apply(&self, update: Update) {
        let _ = self.control.send(Control::Update(update));
    }

    /// Whether the directory is gone.
    pub fn is_closed(&self) -> bool {
        self.control.is_closed()
    }
}

/// The always-current view of one service's providers.
///
/// One task owns the state: it applies registry [`Update`]s, the empty-list policy, rule and
/// balancer changes, rebuilds route subsets and balancer tables, and publishes a new immutable
/// [`Snapshot`] with a higher epoch through one `ArcSwap` swap ([`Published`]). Readers never
/// lock: a call does [`RegistryDirectory::load`] once per attempt. Dropping the directory stops
/// the task.
#[derive(Debug)]
pub struct RegistryDirectory {
    shared: Arc<Shared>,
    control: mpsc::UnboundedSender<Control>,
    epochs: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("current", &self.current)
            .finish()
    }
}

impl RegistryDirectory {
    /// A directory fed by `updates` (from a registry adapter or your own code). Must be called
    /// inside a tokio runtime.
    pub fn spawn(config: DirectoryConfig, updates: Option<UpdateReceiver>) -> Self {
        let empty = Snapshot::empty(config.service.clone(), config.balancer.clone());
        let shared = Arc::new(Shared {
            current: Published::new(Arc::new(empty)),
            fallback: Default::default(),
            has_fallback: Default::default(),
            applied: std::sync::atomic::AtomicU64::new(0),
            lists: std::sync::Mutex::new(None),
        });
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (epoch_tx, epoch_rx) = watch::channel(0);
        let cache_tx = config.cache_file.clone().map(spawn_cache_writer);
        let cached =
            config
                .cache_file
                .as_ref()
                .and_then(|path| match cache::load(path, &config.service) {
                    Ok(found) => found,
                    Err(e) => {
                        warn!(service = %config.service, "ignoring the snapshot cache: {e}");
                        None
                    }
                });
        let mut state = State {
            config,
            registry: AddrMap::default(),
            lists: 0,
            published: Vec::new(),
            published_index: AddrMap::default(),
            pending: Pending::Full,
            configurators: BTreeMap::new(),
            rules: Vec::new(),
            epoch: 0,
            routed_with: RouterChain::new(),
            shared: shared.clone(),
            epoch_tx,
            cache_tx,
            draining: Default::default(),
            decided: None,
            consumer_overrides: Default::default(),
            spare: None,
            retired: Vec::new(),
            fallback: None,
        };
        if let Some(list) = cached {
            info!(service = %state.config.service, instances = list.len(), "starting from the snapshot cache");
            state.apply(Update::reset(list));
            state.publish(false);
        }
        let task = tokio::spawn(state.run(updates, control_rx));
        RegistryDirectory {
            shared,
            control: control_tx,
            epochs: epoch_rx,
            task,
        }
    }

    /// Subscribes `registry` to `config.service` and spawns the directory on its updates.
    pub async fn subscribe(registry: &dyn Registry, config: DirectoryConfig) -> Result<Self> {
        let rx = registry.subscribe(&config.service).await?;
        Ok(Self::spawn(config, Some(rx)))
    }

    /// How many [`Update`]s the directory has applied so far, whether or not they changed
    /// anything (an update that changes nothing publishes no snapshot). Counted after each
    /// update's effect is in the directory's state: a caller that sent `n` updates can wait for
    /// the count to pass them and then know a missing snapshot means "no change", not "not
    /// yet". Updates queued together are applied together and published as one snapshot.
    pub fn updates_applied(&self) -> u64 {
        self.shared
            .applied
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// What the registry adapter last decided from, when it reads both levels (ZooKeeper and
    /// Nacos with application-level discovery): the migration step, each level's size, the
    /// list in use. `None` before its first decision and for other adapters.
    pub fn lists(&self) -> Option<crate::migration::Lists> {
        *self.shared.lists.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Under `APPLICATION_FIRST` with the application level in use: the interface-level
    /// snapshot calls fall back to and the percent of calls that stay on this directory's
    /// (see [`crate::migration`]). `None` otherwise, and until the fallback's first snapshot.
    pub fn fallback(&self) -> Option<crate::contracts::FallbackSnapshot> {
        if !self
            .shared
            .has_fallback
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return None;
        }
        let f = self.shared.fallback.load();
        let f = f.as_ref()?;
        let snapshot = f.shared.current.load_local(&SNAPSHOT_READS);
        (snapshot.epoch() > 0).then_some(crate::contracts::FallbackSnapshot {
            snapshot,
            proportion: f.proportion,
        })
    }

    /// The current snapshot (a thread that read this snapshot before: a reference-count
    /// increment; else arc-swap's `load_full`, see [`Published`]). Keep it as long as you
    /// like, across `.await`s included.
    pub fn load(&self) -> Arc<Snapshot> {
        self.shared.current.load_local(&SNAPSHOT_READS)
    }

    /// The current snapshot for a moment: no write to the snapshot's shared reference count
    /// (arc-swap's per-thread debt slots), so threads reading at once do not bounce its cache
    /// line between cores. For a route and a pick, not to keep: each thread has a few slots,
    /// and guards held beyond them fall back to the reference count.
    pub fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.shared.current.guard()
    }

    /// Feeds an update directly (besides the registry's).
    pub fn apply(&self, update: Update) {
        let _ = self.control.send(Control::Update(update));
    }

    /// A cloneable handle that feeds updates to this directory from other tasks (rule
    /// watchers, your own sources). Updates sent after the directory is dropped are ignored.
    pub fn updater(&self) -> DirectoryUpdater {
        DirectoryUpdater {
            control: self.control.clone(),
        }
    }

    /// Replaces the routing rules; a new snapshot is published.
    pub fn set_router(&self, router: RouterChain) {
        let _ = self.control.send(Control::Router(router));
    }

    /// Replaces the balancer; a new snapshot is published.
    pub fn set_balancer(&self, balancer: Arc<dyn LoadBalance>) {
        let _ = self.control.send(Control::Balancer(balancer));
    }

    /// A receiver that observes every published epoch.
    pub fn epochs(&self) -> watch::Receiver<u64> {
        self.epochs.clone()
    }

    /// Waits until a published snapshot satisfies `ready` (or `timeout` passes) and returns it.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut ready: impl FnMut(&Snapshot) -> bool,
    ) -> Result<Arc<Snapshot>> {
        let mut rx = self.epochs.clone();
        let fut = async {
            loop {
                let snap = self.load();
                if ready(&snap) {
                    return Ok(snap);
                }
                // Not held while waiting: the snapshot it replaces is freed by the directory
                // (on its task), not by this waiter when it wakes.
                drop(snap);
                if rx.changed().await.is_err() {
                    return Err(Error::no_provider("directory task stopped"));
                }
            }
        };
        match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => {
                let snap = self.load();
                Err(Error::timeout(format!(
                    "directory for {} not ready after {timeout:?} (epoch {}, {} instances)",
                    snap.service(),
                    snap.epoch(),
                    snap.instances().len()
                )))
            }
        }
    }
}

impl Drop for RegistryDirectory {
    fn drop(&mut self) {
        self.task.abort();
    }
}
