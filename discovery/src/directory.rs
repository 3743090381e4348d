use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use switchman_core::{Error, Instance, Protocol, Result, ServiceKey};
use switchman_loadbalance::{Endpoint, InstanceStats, LoadBalance, RandomBalance};
use switchman_router::{ConsumerInfo, RouterChain};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::snapshot::{AddrMap, AddrSet, Snapshot, SnapshotParts};
use crate::{Configurator, Registry, Update, UpdateReceiver, cache, configurator};

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
}

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

enum Control {
    Update(Update),
    Router(RouterChain),
    Balancer(Arc<dyn LoadBalance>),
}

struct Shared {
    current: ArcSwap<Snapshot>,
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
/// [`Snapshot`] with a higher epoch through one `ArcSwap::store`. Readers never lock: a call
/// does [`RegistryDirectory::load`] once per attempt. Dropping the directory stops the task.
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
            .field("current", &self.current.load())
            .finish()
    }
}

impl RegistryDirectory {
    /// A directory fed by `updates` (from a registry adapter or your own code). Must be called
    /// inside a tokio runtime.
    pub fn spawn(config: DirectoryConfig, updates: Option<UpdateReceiver>) -> Self {
        let empty = Snapshot::empty(config.service.clone(), config.balancer.clone());
        let shared = Arc::new(Shared {
            current: ArcSwap::from_pointee(empty),
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
            published: Vec::new(),
            published_addresses: AddrSet::default(),
            pending: Pending::Full,
            configurators: BTreeMap::new(),
            rules: Vec::new(),
            epoch: 0,
            routed_with: RouterChain::new(),
            shared: shared.clone(),
            epoch_tx,
            cache_tx,
        };
        if let Some(list) = cached {
            info!(service = %state.config.service, instances = list.len(), "starting from the snapshot cache");
            state.apply(Update::Reset(list));
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

    /// The current snapshot (one atomic load and a reference-count increment). Keep it as
    /// long as you like, across `.await`s included.
    pub fn load(&self) -> Arc<Snapshot> {
        self.shared.current.load_full()
    }

    /// The current snapshot for a moment: no write to the snapshot's shared reference count
    /// (arc-swap's per-thread debt slots), so threads reading at once do not bounce its cache
    /// line between cores. For a route and a pick, not to keep: each thread has a few slots,
    /// and guards held beyond them fall back to the reference count.
    pub fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.shared.current.load()
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

struct State {
    config: DirectoryConfig,
    /// What the registry currently says, by address (an address key is allocated once and
    /// shared by every later map and snapshot).
    registry: AddrMap<Arc<Instance>>,
    /// What the last snapshot holds, sorted by address.
    published: Vec<Published>,
    /// The addresses in `published`, to find new ones in O(1).
    published_addresses: AddrSet,
    /// What changed in `registry` since the last snapshot.
    pending: Pending,
    /// Override rules by source.
    configurators: BTreeMap<String, Vec<Configurator>>,
    /// Every source's rules in the order they apply (see [`apply_order`]).
    rules: Vec<Configurator>,
    epoch: u64,
    /// The router chain the last snapshot's route table was built with: when the configured
    /// chain is another one, the next snapshot is published and its table rebuilt.
    routed_with: RouterChain,
    shared: Arc<Shared>,
    epoch_tx: watch::Sender<u64>,
    cache_tx: Option<watch::Sender<Option<Vec<u8>>>>,
}

/// What changed in the registry's list since the last snapshot.
#[derive(Debug)]
enum Pending {
    /// Nothing.
    Clean,
    /// Only instances at addresses the last snapshot already holds; these addresses (possibly
    /// repeated). When every change is a weight change, the next snapshot is patched from the
    /// last one instead of rebuilt (see `State::publish_touched`).
    Touched(Vec<Arc<str>>),
    /// Only the override rules: every instance may have changed, none came or went. Patched
    /// like `Touched` when the rules changed only weights.
    Overrides,
    /// Addresses came or went, or the list was replaced wholesale: rebuild.
    Full,
}

impl Pending {
    fn touch(&mut self, address: &Arc<str>) {
        match self {
            Pending::Clean => *self = Pending::Touched(vec![address.clone()]),
            Pending::Touched(list) => list.push(address.clone()),
            Pending::Overrides => *self = Pending::Full,
            Pending::Full => {}
        }
    }

    fn overrides(&mut self) {
        match self {
            Pending::Clean | Pending::Overrides => *self = Pending::Overrides,
            Pending::Touched(_) | Pending::Full => *self = Pending::Full,
        }
    }
}

/// How a reported instance relates to the registry's current entry at its address.
enum Change {
    Same,
    Replaced,
    New,
}

/// One instance of the last snapshot.
struct Published {
    address: Arc<str>,
    /// As the registry reported it (what the cache file and empty-list protection keep).
    reported: Arc<Instance>,
    /// With the override rules applied (what the snapshot holds).
    effective: Arc<Instance>,
    /// Live state, kept across snapshots while the address stays.
    stats: Arc<InstanceStats>,
}

/// One writer per cache file writes the newest contents off the directory task.
fn spawn_cache_writer(path: PathBuf) -> watch::Sender<Option<Vec<u8>>> {
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
    async fn run(
        mut self,
        mut updates: Option<UpdateReceiver>,
        mut control: mpsc::UnboundedReceiver<Control>,
    ) {
        // The warm-up refresh: armed when a snapshot with warming instances is published, and
        // reset only then. Pinned across loop turns, so a stream of messages that publish
        // nothing cannot postpone it.
        let refresh = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(refresh);
        let mut armed = false;
        loop {
            let mut force = false;
            tokio::select! {
                u = async { updates.as_mut().unwrap().recv().await }, if updates.is_some() => match u {
                    Some(u) => self.apply(u),
                    None => {
                        warn!(service = %self.config.service, "registry subscription ended; keeping the last snapshot");
                        updates = None;
                        continue;
                    }
                },
                c = control.recv() => match c {
                    Some(Control::Update(u)) => self.apply(u),
                    Some(Control::Router(r)) => self.config.router = r,
                    Some(Control::Balancer(b)) => { self.config.balancer = b; force = true; }
                    None => return,
                },
                _ = refresh.as_mut(), if armed => { armed = false; force = true; }
            }
            // Coalesce whatever else is already queued, from both sources, into one snapshot:
            // a burst of pushes costs one rebuild, and a slow rebuild cannot build a backlog.
            let mut drained = true;
            while drained {
                drained = false;
                if let Some(rx) = updates.as_mut() {
                    while let Ok(u) = rx.try_recv() {
                        self.apply(u);
                        drained = true;
                    }
                }
                while let Ok(c) = control.try_recv() {
                    drained = true;
                    match c {
                        Control::Update(u) => self.apply(u),
                        Control::Router(r) => self.config.router = r,
                        Control::Balancer(b) => {
                            self.config.balancer = b;
                            force = true;
                        }
                    }
                }
            }
            let force = force || !self.config.router.is_same(&self.routed_with);
            if let Some(snap) = self.publish(force) {
                armed = match snap.refresh_after() {
                    Some(after) => {
                        refresh.as_mut().reset(tokio::time::Instant::now() + after);
                        true
                    }
                    None => false,
                };
            }
        }
    }

    fn apply(&mut self, update: Update) {
        match update {
            Update::Reset(list) => {
                let mut next = AddrMap::with_capacity_and_hasher(list.len(), Default::default());
                for inst in list {
                    let (address, inst, change) = self.reuse(inst);
                    match change {
                        Change::Same => {}
                        Change::Replaced => self.pending.touch(&address),
                        Change::New => self.pending = Pending::Full,
                    }
                    if let Some(dup) = next.insert(address, inst) {
                        warn!(service = %self.config.service, endpoint = %dup.key(), "registry listed an endpoint twice; the later entry wins");
                        self.pending = Pending::Full;
                    }
                }
                if next.len() != self.registry.len() {
                    // Some addresses left.
                    self.pending = Pending::Full;
                }
                self.registry = next;
            }
            Update::Add(list) => {
                for inst in list {
                    let (address, inst, change) = self.reuse(inst);
                    match change {
                        Change::Same => {}
                        Change::Replaced => self.pending.touch(&address),
                        Change::New => self.pending = Pending::Full,
                    }
                    self.registry.insert(address, inst);
                }
            }
            Update::Remove(keys) => {
                for k in keys {
                    if self.registry.remove(k.as_str()).is_some() {
                        self.pending = Pending::Full;
                    } else if !k.contains(' ') {
                        // A bare address: every endpoint there (a rare form; O(n)).
                        let before = self.registry.len();
                        self.registry.retain(|_, inst| inst.address() != k);
                        if self.registry.len() != before {
                            self.pending = Pending::Full;
                        }
                    }
                }
            }
            Update::Rule { key, text } => self.set_rule(key, text),
            Update::Configurators { source, rules } => {
                let (good, bad): (Vec<_>, Vec<_>) =
                    rules.into_iter().partition(|r| r.validate().is_ok());
                for r in &bad {
                    if let Err(e) = r.validate() {
                        warn!(service = %self.config.service, source = %source, "override rule skipped: {e}");
                    }
                }
                if good.is_empty() {
                    self.configurators.remove(&source);
                } else {
                    self.configurators.insert(source, good);
                }
                self.rules = apply_order(self.configurators.values().flatten());
                // Overrides can change any instance.
                self.pending.overrides();
            }
        }
    }

    /// Sets or deletes a routing rule. A rule that does not parse is logged with its key and
    /// position and skipped: the previous rules stay in force.
    fn set_rule(&mut self, key: String, text: Option<String>) {
        let service = &self.config.service;
        match text {
            None => {
                info!(service = %service, rule = %key, "routing rule removed");
                self.config.router = self.config.router.without_rule(&key);
            }
            Some(text) => match self.config.router.with_rule(&key, &text) {
                Ok(chain) => {
                    info!(service = %service, rule = %key, "routing rule applied");
                    self.config.router = chain;
                }
                Err(e) => {
                    warn!(service = %service, rule = %key, "routing rule rejected, previous rules stay in force: {e}")
                }
            },
        }
    }

    /// `instance` with the override rules applied, sharing the `Arc` of the previous snapshot
    /// when the result did not change.
    fn effective(&self, instance: &Arc<Instance>, prev: Option<&Published>) -> Arc<Instance> {
        let overridden = apply_in_order(&self.rules, instance);
        match overridden {
            None => instance.clone(),
            Some(o) => match prev {
                Some(p) if *p.effective == o => p.effective.clone(),
                _ => Arc::new(o),
            },
        }
    }

    /// The address key and `Arc` for a reported instance: both reused from the registry's
    /// current entry when the instance did not change, so unchanged instances are shared
    /// between snapshots and an address is allocated once.
    fn reuse(&self, inst: Instance) -> (Arc<str>, Arc<Instance>, Change) {
        match self.registry.get_key_value(inst.key()) {
            Some((k, old)) if **old == inst => (k.clone(), old.clone(), Change::Same),
            Some((k, _)) => (k.clone(), Arc::new(inst), Change::Replaced),
            None => (Arc::from(inst.key()), Arc::new(inst), Change::New),
        }
    }

    /// The instances the next snapshot is built from, sorted by address: the registry's, or
    /// under empty-list protection the last snapshot's. Addresses that stay keep their order
    /// from the last snapshot; only new ones are sorted and merged in.
    fn next_reported(&self, protected: bool) -> Vec<(Arc<str>, Arc<Instance>)> {
        if protected {
            return self
                .published
                .iter()
                .map(|p| (p.address.clone(), p.reported.clone()))
                .collect();
        }
        let mut kept: Vec<(Arc<str>, Arc<Instance>)> = Vec::with_capacity(self.registry.len());
        for p in &self.published {
            if let Some((k, v)) = self.registry.get_key_value(&*p.address) {
                kept.push((k.clone(), v.clone()));
            }
        }
        if kept.len() == self.registry.len() {
            return kept;
        }
        let mut fresh: Vec<(Arc<str>, Arc<Instance>)> = self
            .registry
            .iter()
            .filter(|(k, _)| !self.published_addresses.contains(&***k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        fresh.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if kept.is_empty() {
            return fresh;
        }
        let mut merged = Vec::with_capacity(kept.len() + fresh.len());
        let (mut a, mut b) = (kept.into_iter().peekable(), fresh.into_iter().peekable());
        loop {
            let take_a = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.0 <= y.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            merged.extend(if take_a { a.next() } else { b.next() });
        }
        merged
    }

    /// Publishes a snapshot for what changed since the last one (`force`: even if nothing
    /// did, to rebuild the tables). Returns it, or `None` when nothing changed.
    fn publish(&mut self, force: bool) -> Option<Arc<Snapshot>> {
        let pending = std::mem::replace(&mut self.pending, Pending::Clean);
        if !force {
            match pending {
                Pending::Clean => {
                    debug!(service = %self.config.service, epoch = self.epoch, "update changed nothing");
                    return None;
                }
                Pending::Touched(addresses) => {
                    if let Some(published) = self.publish_touched(Some(&addresses)) {
                        return published;
                    }
                }
                Pending::Overrides => {
                    if let Some(published) = self.publish_touched(None) {
                        return published;
                    }
                }
                Pending::Full => {}
            }
        }
        self.publish_full(force)
    }

    /// The patch path for updates that changed only weights (and warm-up or start time) of
    /// instances the last snapshot already holds: an operator tuning weights in the registry
    /// (`addresses`: the addresses the updates touched) or by override rules (`None`: every
    /// instance is looked at again under the new rules). The last
    /// snapshot's arrays are copied with the changed entries swapped in, its route table and
    /// address index are shared, and only the balancer tables are rebuilt; the directory's own
    /// list is patched in place. No pass over the other instances besides those copies.
    ///
    /// Returns `None` when the change is anything else (the caller rebuilds), else what
    /// [`State::publish`] returns.
    fn publish_touched(&mut self, addresses: Option<&[Arc<str>]>) -> Option<Option<Arc<Snapshot>>> {
        let current = self.shared.current.load_full();
        let n = self.published.len();
        if self.epoch == 0
            || current.is_protected()
            || self.config.router.reads_weighting()
            || !self.config.router.is_same(&self.routed_with)
            || n != self.registry.len()
        {
            return None;
        }
        // Past a quarter of the list, one rebuild is cheaper than patching.
        let limit = n / 4 + 1;
        // Plan every change before touching anything, so a fallback leaves the state intact.
        let mut changes: Vec<(usize, Arc<Instance>, Arc<Instance>)> = Vec::new();
        match addresses {
            Some(addresses) => {
                if addresses.len() > limit {
                    return None;
                }
                let mut positions = Vec::with_capacity(addresses.len());
                for address in addresses {
                    let at = self
                        .published
                        .binary_search_by(|p| (*p.address).cmp(address))
                        .ok()?;
                    positions.push(at);
                }
                positions.sort_unstable();
                positions.dedup();
                for at in positions {
                    let prev = &self.published[at];
                    let reported = self.registry.get(&*prev.address)?;
                    let effective = self.effective(reported, Some(prev));
                    if !Arc::ptr_eq(&prev.reported, reported)
                        || !Arc::ptr_eq(&prev.effective, &effective)
                    {
                        changes.push((at, reported.clone(), effective));
                    }
                }
            }
            // New override rules: the registry's list is the same, every effective instance
            // is computed again.
            None => {
                for (at, prev) in self.published.iter().enumerate() {
                    let effective = self.effective(&prev.reported, Some(prev));
                    if !Arc::ptr_eq(&prev.effective, &effective) {
                        if changes.len() == limit {
                            return None;
                        }
                        changes.push((at, prev.reported.clone(), effective));
                    }
                }
            }
        }
        let mut patched = 0usize;
        for (at, _, effective) in &changes {
            let prev = &self.published[*at];
            if Arc::ptr_eq(&prev.effective, effective) {
                continue;
            }
            // Anything routing reads (or availability) changed: not a weight change.
            if !effective.same_but_weight(&prev.effective) {
                return None;
            }
            patched += 1;
        }
        let reported_changed = changes
            .iter()
            .any(|(at, reported, _)| !Arc::ptr_eq(&self.published[*at].reported, reported));
        if patched == 0 {
            // What the registry says changed, what the snapshot holds did not (an override
            // masks it): keep the list and the cache file in step, publish nothing.
            for (at, reported, _) in changes {
                self.published[at].reported = reported;
            }
            if reported_changed {
                self.save_cache();
            }
            debug!(service = %self.config.service, epoch = self.epoch, "update changed nothing");
            return Some(None);
        }
        let mut all = current.instances().to_vec();
        let mut endpoints = current.endpoints().to_vec();
        for (at, reported, effective) in changes {
            let entry = &mut self.published[at];
            if !Arc::ptr_eq(&entry.effective, &effective) {
                all[at] = effective.clone();
                if let Some(e) = current.index_of(&entry.address) {
                    endpoints[e].instance = effective.clone();
                }
            }
            entry.reported = reported;
            entry.effective = effective;
        }
        self.epoch += 1;
        let snap = Arc::new(Snapshot::build(SnapshotParts {
            epoch: self.epoch,
            service: &self.config.service,
            all: all.into(),
            endpoints: endpoints.into(),
            addresses: Vec::new(),
            router: &self.config.router,
            consumer: &self.config.consumer,
            balancer: &self.config.balancer,
            protected: false,
            now: SystemTime::now(),
            same_routes_as: Some(&current),
        }));
        drop(current);
        let counts = Counts {
            added: 0,
            removed: 0,
            changed: patched,
            reported_changed,
        };
        self.install(snap.clone(), counts);
        Some(Some(snap))
    }

    /// The full path: pairs the registry's list (or, under empty-list protection, the last
    /// one) with the last snapshot's, keeping live stats and shared `Arc`s, and rebuilds the
    /// snapshot (the route table only when routing can see a difference).
    fn publish_full(&mut self, force: bool) -> Option<Arc<Snapshot>> {
        let service = &self.config.service;
        let protected = self.registry.is_empty()
            && self.config.empty_policy == EmptyPolicy::KeepLast
            && !self.published.is_empty();
        let reported = self.next_reported(protected);
        // Both lists are sorted by address and an address that stays shares its key: one
        // forward walk pairs each entry with its predecessor, mostly by pointer comparison.
        let (mut added, mut changed, mut reported_changed) = (0usize, 0usize, false);
        let mut j = 0;
        let mut next: Vec<Published> = Vec::with_capacity(reported.len());
        for (address, reported) in reported {
            let old = &self.published;
            while j < old.len()
                && !Arc::ptr_eq(&old[j].address, &address)
                && *old[j].address < *address
            {
                j += 1;
            }
            let prev = old
                .get(j)
                .filter(|p| Arc::ptr_eq(&p.address, &address) || p.address == address);
            let effective = self.effective(&reported, prev);
            let stats = match prev {
                Some(p) => {
                    changed += usize::from(!Arc::ptr_eq(&p.effective, &effective));
                    reported_changed |= !Arc::ptr_eq(&p.reported, &reported);
                    p.stats.clone()
                }
                None => {
                    added += 1;
                    Arc::new(InstanceStats::new())
                }
            };
            next.push(Published {
                address,
                reported,
                effective,
                stats,
            });
        }
        let current = self.shared.current.load();
        let unchanged = self.epoch > 0
            && current.is_protected() == protected
            && added == 0
            && changed == 0
            && next.len() == self.published.len();
        if unchanged && !force {
            debug!(service = %service, epoch = self.epoch, "update changed nothing");
            // The registry's entries may be new `Arc`s equal to the old ones: keep the
            // published list in step with the registry for the patch path, and the cache file
            // with what the registry says (an override may hide a change).
            self.published = next;
            if reported_changed && !protected {
                self.save_cache();
            }
            return None;
        }
        if protected && !current.is_protected() {
            warn!(service = %service, kept = next.len(), "registry reports no instance; empty-list protection keeps the last list");
        }
        let removed = self.published.len() - (next.len() - added);
        let initial = self.published.is_empty() && self.epoch <= 1;
        if initial {
            // Warm-up without a provider timestamp starts when the directory first sees an
            // instance. The first list is the fleet as it already runs, not instances that just
            // started: treat it as warm.
            for p in &next {
                p.stats.set_first_seen_ms(0);
            }
        }
        let all: Arc<[Arc<Instance>]> = next.iter().map(|p| p.effective.clone()).collect();
        let routable: Vec<&Published> = next
            .iter()
            .filter(|p| self.config.is_routable(&p.effective))
            .collect();
        let endpoints: Vec<Endpoint> = routable
            .iter()
            .map(|p| Endpoint {
                instance: p.effective.clone(),
                stats: p.stats.clone(),
            })
            .collect();
        // Same endpoints in the same order, differing at most in weights, under the same
        // rules (none reading weights): the route table still holds (an operator's weight
        // change rebuilds only the balancer tables).
        let same_routes = self.config.router.is_same(&self.routed_with)
            && self.epoch > 0
            && endpoints.len() == current.endpoints().len()
            && !self.config.router.reads_weighting()
            && endpoints.iter().zip(current.endpoints()).all(|(a, b)| {
                Arc::ptr_eq(&a.instance, &b.instance) || a.instance.same_but_weight(&b.instance)
            });
        self.routed_with = self.config.router.clone();
        // The address index is only rebuilt with the route table.
        let addresses = if same_routes {
            Vec::new()
        } else {
            routable.iter().map(|p| p.address.clone()).collect()
        };
        self.epoch += 1;
        let snap = Arc::new(Snapshot::build(SnapshotParts {
            epoch: self.epoch,
            service,
            all,
            endpoints: endpoints.into(),
            addresses,
            router: &self.config.router,
            consumer: &self.config.consumer,
            balancer: &self.config.balancer,
            protected,
            now: SystemTime::now(),
            same_routes_as: same_routes.then_some(&**current),
        }));
        drop(current);
        if added + removed > 0 {
            self.published_addresses = next.iter().map(|p| p.address.clone()).collect();
        }
        let previous = std::mem::replace(&mut self.published, next);
        let counts = Counts {
            added,
            removed,
            changed,
            reported_changed,
        };
        self.install(snap.clone(), counts);
        // Freed after the new snapshot is visible: not on the push-to-visible path.
        drop(previous);
        Some(snap)
    }

    /// Makes `snap` (built from `self.published`) the current snapshot: metrics, a log line,
    /// the cache file, then one `ArcSwap::swap`.
    fn install(&mut self, snap: Arc<Snapshot>, counts: Counts) {
        let service = &self.config.service;
        let Counts {
            added,
            removed,
            changed,
            reported_changed,
        } = counts;
        let label = service.to_string();
        metrics::gauge!("switchman_directory_instances", "rpc_service" => label.clone())
            .set(snap.instances().len() as f64);
        metrics::gauge!("switchman_directory_routable", "rpc_service" => label.clone())
            .set(snap.endpoints().len() as f64);
        metrics::counter!("switchman_directory_snapshots_total", "rpc_service" => label)
            .increment(1);
        if added + removed + changed > 0 || self.epoch == 1 {
            info!(service = %service, epoch = self.epoch, instances = snap.instances().len(),
                available = snap.endpoints().len(), added, removed, changed, "directory updated");
        } else {
            debug!(service = %service, epoch = self.epoch, "directory tables rebuilt");
        }
        if !snap.is_protected() && (added + removed > 0 || reported_changed || self.epoch == 1) {
            self.save_cache();
        }
        let previous = self.shared.current.swap(snap);
        let _ = self.epoch_tx.send(self.epoch);
        // Freed after the new snapshot is visible: not on the push-to-visible path.
        drop(previous);
    }
}

impl State {
    /// Hands what the registry reported (the published list) to the cache file's writer.
    fn save_cache(&self) {
        if let Some(tx) = &self.cache_tx {
            tx.send_replace(Some(cache::encode(
                &self.config.service,
                self.published.iter().map(|p| p.reported.as_ref()),
            )));
        }
    }
}

/// The override rules in the order they apply, each later one winning where two set the same
/// key. As Dubbo's `Configurator.compareTo` sorts them: rules for every provider first, then
/// the rules naming a host; within each group by `priority` (an integer parameter, default
/// 0; higher applies later and wins), then arrival order. A host:port rule comes after a
/// host rule of the same priority (Dubbo compares hosts only and keeps arrival order there).
fn apply_order<'a>(rules: impl IntoIterator<Item = &'a Configurator>) -> Vec<Configurator> {
    let mut ordered: Vec<Configurator> = rules.into_iter().cloned().collect();
    ordered.sort_by_key(|r| {
        let priority = r
            .parameters
            .get("priority")
            .and_then(|p| p.trim().parse::<i32>().ok())
            .unwrap_or(0);
        (r.specificity() > 0, priority, r.specificity())
    });
    ordered
}

/// `instance` with the matching `rules` applied in their order (see [`apply_order`]); `None`
/// when none matched.
fn apply_in_order(rules: &[Configurator], instance: &Instance) -> Option<Instance> {
    let mut out: Option<Instance> = None;
    for r in rules {
        let current = out.as_ref().unwrap_or(instance);
        if r.matches(current) {
            out = configurator::apply(std::iter::once(r), current).or(out);
        }
    }
    out
}

/// What a snapshot changed, for the log line and the cache file.
struct Counts {
    added: usize,
    removed: usize,
    changed: usize,
    reported_changed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::Invocation;

    fn inst(port: u16, weight: u32) -> Instance {
        Instance::builder("10.0.0.1", port).weight(weight).build()
    }

    fn cfg() -> DirectoryConfig {
        DirectoryConfig::new(ServiceKey::new("com.foo.Bar"))
    }

    async fn settle(dir: &RegistryDirectory, epoch: u64) -> Arc<Snapshot> {
        dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= epoch)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn reset_add_remove_publish_new_epochs() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        assert_eq!(dir.load().epoch(), 0);
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        let s1 = settle(&dir, 1).await;
        assert_eq!(s1.instances().len(), 2);
        dir.apply(Update::Add(vec![inst(3, 100)]));
        let s2 = settle(&dir, 2).await;
        assert_eq!(s2.instances().len(), 3);
        // Unchanged instances are shared between snapshots, and so is their live state.
        assert!(Arc::ptr_eq(
            &s1.endpoints()[0].instance,
            &s2.endpoints()[0].instance
        ));
        assert!(Arc::ptr_eq(
            &s1.endpoints()[0].stats,
            &s2.endpoints()[0].stats
        ));
        dir.apply(Update::Remove(vec!["10.0.0.1:1".into()]));
        let s3 = settle(&dir, 3).await;
        assert_eq!(
            s3.instances().iter().map(|i| i.port()).collect::<Vec<_>>(),
            vec![2, 3]
        );
    }

    /// One process exporting com.foo.Bar under two groups on one port: two endpoints, each
    /// with its own live statistics; removed one by one by key, or together by address.
    #[tokio::test]
    async fn two_groups_on_one_address_are_two_endpoints() {
        let grouped = |group: &str| {
            Instance::builder("10.0.0.1", 20880)
                .protocol(Protocol::Dubbo)
                .service(ServiceKey::with("com.foo.Bar", group, "1.0.0"))
                .build()
        };
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![
            grouped("g1"),
            grouped("g2"),
            inst(1, 100),
        ]));
        let s = settle(&dir, 1).await;
        let groups: Vec<&str> = s
            .endpoints()
            .iter()
            .map(|e| e.instance.service().group.as_ref())
            .collect();
        assert_eq!(
            groups,
            ["", "g1", "g2"],
            "sorted by address, then the rest of the key"
        );
        let (g1, g2) = (&s.endpoints()[1], &s.endpoints()[2]);
        assert!(!Arc::ptr_eq(&g1.stats, &g2.stats));
        assert_eq!(s.index_of(grouped("g2").key()), Some(2));
        assert_eq!(
            s.index_of("10.0.0.1:20880"),
            Some(1),
            "a bare address: the first there"
        );
        // A changed weight of one group touches that endpoint only.
        dir.apply(Update::Add(vec![
            Instance::from_url(&grouped("g2").to_url().with_param("weight", "7")).unwrap(),
        ]));
        let s2 = settle(&dir, 2).await;
        assert_eq!(
            (
                s2.endpoints()[1].instance.weight(),
                s2.endpoints()[2].instance.weight()
            ),
            (100, 7)
        );
        assert!(Arc::ptr_eq(&s2.endpoints()[2].stats, &g2.stats));
        dir.apply(Update::Remove(vec![grouped("g1").key().to_string()]));
        let s3 = settle(&dir, 3).await;
        assert_eq!(s3.endpoints().len(), 2);
        assert_eq!(s3.endpoints()[1].instance.service().group.as_ref(), "g2");
        dir.apply(Update::Add(vec![grouped("g1")]));
        settle(&dir, 4).await;
        dir.apply(Update::Remove(vec!["10.0.0.1:20880".into()]));
        let s5 = settle(&dir, 5).await;
        assert_eq!(
            s5.endpoints().len(),
            1,
            "a bare address removes every endpoint there"
        );
    }

    /// An override of `dubbo.tag`, `zone` or `warmup` changes what routing, zone preference
    /// and the balancer read, not only the parameter map.
    #[tokio::test]
    async fn overrides_of_tag_zone_and_warmup_take_effect_everywhere() {
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let a = Instance::builder("10.0.0.1", 1)
            .zone("z1")
            .timestamp_ms(now_ms - 1_000)
            .warmup(Duration::from_secs(600))
            .build();
        let b = Instance::builder("10.0.0.1", 2).zone("z1").build();
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![a, b]));
        let s = settle(&dir, 1).await;
        let mut rng = fastrand::Rng::with_seed(7);
        let share_of_a = |s: &Snapshot, inv: &Invocation, rng: &mut fastrand::Rng| {
            (0..2000)
                .filter(|_| s.select(inv, &[], rng).unwrap() == 0)
                .count()
        };
        let plain = Invocation::new("m");
        // `a` started a second ago with a 10-minute warm-up: almost no traffic.
        assert!(share_of_a(&s, &plain, &mut rng) < 60);
        // Warm-up: with `warmup=0` the instance that just started takes half of the picks.
        let rule = Configurator::for_address("10.0.0.1:1").param("warmup", "0");
        dir.apply(Update::Configurators {
            source: "ops".into(),
            rules: vec![rule.clone()],
        });
        let s = settle(&dir, 2).await;
        assert_eq!(s.instances()[0].warmup(), Duration::ZERO);
        let plain_a = share_of_a(&s, &plain, &mut rng);
        assert!((850..1150).contains(&plain_a), "{plain_a}");
        let gray = Invocation::new("m").with_attachment("dubbo.tag", "gray");
        // No instance is gray yet: a gray call falls back to the untagged ones (both).
        let gray_a = share_of_a(&s, &gray, &mut rng);
        assert!((850..1150).contains(&gray_a), "{gray_a}");
        dir.apply(Update::Configurators {
            source: "ops".into(),
            rules: vec![rule.param("dubbo.tag", "gray").param("zone", "z2")],
        });
        let s = settle(&dir, 3).await;
        let o = &s.instances()[0];
        assert_eq!(
            (o.tag(), o.zone(), o.warmup()),
            (Some("gray"), Some("z2"), Duration::ZERO)
        );
        // Tag routing: a gray call reaches only the now-gray instance, an untagged one only
        // the untagged instance.
        assert_eq!(share_of_a(&s, &gray, &mut rng), 2000);
        assert_eq!(share_of_a(&s, &plain, &mut rng), 0);
        // Clearing the rule restores the registry's values.
        dir.apply(Update::Configurators {
            source: "ops".into(),
            rules: vec![],
        });
        let s = settle(&dir, 4).await;
        assert_eq!(
            (s.instances()[0].tag(), s.instances()[0].zone()),
            (None, Some("z1"))
        );
    }

    /// A flood of messages that change nothing does not postpone the warm-up refresh: the
    /// warming instance's weight still steps up on time.
    #[tokio::test]
    async fn warm_up_advances_under_a_flood_of_no_op_messages() {
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        // Weight 100 over 2 s: one step every 20 ms (refreshes at least 100 ms apart).
        let warming = Instance::builder("10.0.0.1", 1)
            .timestamp_ms(now_ms)
            .warmup(Duration::from_secs(2))
            .build();
        let dir = Arc::new(RegistryDirectory::spawn(cfg(), None));
        dir.apply(Update::Reset(vec![warming.clone(), inst(2, 100)]));
        let first = settle(&dir, 1).await.epoch();
        // Identical lists every 10 ms (more often than the refresh period) for 1 s.
        let flood = {
            let (dir, warming) = (dir.clone(), warming.clone());
            tokio::spawn(async move {
                for _ in 0..100 {
                    dir.apply(Update::Reset(vec![warming.clone(), inst(2, 100)]));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        flood.await.unwrap();
        let refreshed = dir.load().epoch() - first;
        // About one refresh per 100 ms over the second; with the sleep re-created at every
        // message there would be none.
        assert!(
            refreshed >= 4,
            "{refreshed} warm-up refreshes during the flood"
        );
    }

    #[tokio::test]
    async fn identical_reset_publishes_nothing() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Reset(vec![inst(1, 100)]));
        dir.apply(Update::Reset(vec![inst(1, 7)]));
        let s = settle(&dir, 2).await;
        assert_eq!(s.epoch(), 2, "the identical reset must not bump the epoch");
        assert_eq!(s.instances()[0].weight(), 7);
    }

    #[tokio::test]
    async fn empty_policy_keep_last_and_publish() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Reset(vec![]));
        let s = settle(&dir, 2).await;
        assert!(s.is_protected());
        assert_eq!(s.endpoints().len(), 1);
        let mut rng = fastrand::Rng::with_seed(1);
        assert!(s.select(&Invocation::new("m"), &[], &mut rng).is_ok());
        // Instances coming back end the protection.
        dir.apply(Update::Reset(vec![inst(2, 100)]));
        let s = settle(&dir, 3).await;
        assert!(!s.is_protected());
        assert_eq!(s.instances()[0].port(), 2);

        let dir = RegistryDirectory::spawn(cfg().empty_policy(EmptyPolicy::Publish), None);
        dir.apply(Update::Reset(vec![inst(1, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Reset(vec![]));
        let s = settle(&dir, 2).await;
        assert!(s.instances().is_empty());
        let e = s.select(&Invocation::new("m"), &[], &mut rng).unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::NoProvider);
    }

    #[tokio::test]
    async fn overrides_change_typed_values_and_survive_registry_resets() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![
                Configurator::for_address("10.0.0.1:1").param("weight", "5"),
                Configurator::for_address("10.0.0.1:2").param("disabled", "true"),
                Configurator::for_all().param("weight", "bogus"),
            ],
        });
        let s = settle(&dir, 2).await;
        assert_eq!(s.instances()[0].weight(), 5);
        assert_eq!(
            s.endpoints().len(),
            1,
            "the disabled instance is not routable"
        );
        // A registry push re-applies the overrides; an identical push publishes nothing.
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        dir.apply(Update::Add(vec![inst(3, 100)]));
        let s = settle(&dir, 3).await;
        assert_eq!(s.epoch(), 3);
        assert_eq!(s.instances()[0].weight(), 5);
        assert_eq!(s.instances()[2].weight(), 100);
        // Clearing the source restores the registry's values.
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![],
        });
        let s = settle(&dir, 4).await;
        assert_eq!(s.instances()[0].weight(), 100);
        assert_eq!(s.endpoints().len(), 3);
    }

    /// Dubbo sorts configurators by host (every-provider rules first), then by `priority`:
    /// among the rules naming a provider's host, the highest priority applies last and wins,
    /// whatever order they came in; a rule for every provider never beats one naming the host.
    #[tokio::test]
    async fn override_priority_orders_the_rules_of_one_host() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![
                Configurator::for_address("10.0.0.1:1")
                    .param("weight", "9")
                    .param("priority", "1"),
                Configurator::for_address("10.0.0.1")
                    .param("weight", "5")
                    .param("priority", "2"),
                Configurator::for_address("10.0.0.1")
                    .param("weight", "7")
                    .param("timeout", "300"),
                Configurator::for_all()
                    .param("weight", "1")
                    .param("timeout", "100")
                    .param("priority", "100"),
            ],
        });
        let s = settle(&dir, 2).await;
        let weights: Vec<u32> = s.instances().iter().map(|i| i.weight()).collect();
        assert_eq!(
            weights,
            [5, 5],
            "priority 2 beats 1 and 0; the host beats 0.0.0.0"
        );
        assert_eq!(s.instances()[1].param("timeout"), Some("300"));
        // Equal priorities: arrival order, a host:port rule after a host rule.
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![
                Configurator::for_address("10.0.0.1:2").param("weight", "3"),
                Configurator::for_address("10.0.0.1").param("weight", "4"),
                Configurator::for_address("10.0.0.1").param("weight", "6"),
            ],
        });
        let s = settle(&dir, 3).await;
        let weights: Vec<u32> = s.instances().iter().map(|i| i.weight()).collect();
        assert_eq!(weights, [6, 3]);
    }

    #[tokio::test]
    async fn snapshot_cache_serves_a_restart_without_registry() {
        let path =
            std::env::temp_dir().join(format!("switchman-dir-cache-{}.json", std::process::id()));
        std::fs::remove_file(&path).ok();
        {
            let dir = RegistryDirectory::spawn(cfg().cache_file(&path), None);
            dir.apply(Update::Reset(vec![inst(1, 30), inst(2, 70)]));
            settle(&dir, 1).await;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while !path.exists() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        // A new consumer whose registry never answers starts from the cache.
        let dir = RegistryDirectory::spawn(cfg().cache_file(&path), None);
        let s = dir.load();
        assert_eq!(s.epoch(), 1);
        assert_eq!(
            s.instances().iter().map(|i| i.weight()).collect::<Vec<_>>(),
            vec![30, 70]
        );
        let mut rng = fastrand::Rng::with_seed(5);
        assert!(s.select(&Invocation::new("m"), &[], &mut rng).is_ok());
        std::fs::remove_file(&path).ok();
    }

    #[tokio::test]
    async fn rules_from_the_registry_apply_and_bad_ones_keep_the_previous_rules() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        settle(&dir, 1).await;
        let key = "com.foo.Bar::.condition-router".to_string();
        dir.apply(Update::Rule {
            key: key.clone(),
            text: Some("method = m => port = 2".into()),
        });
        let s = settle(&dir, 2).await;
        let mut rng = fastrand::Rng::with_seed(9);
        for _ in 0..50 {
            let i = s.select(&Invocation::new("m"), &[], &mut rng).unwrap();
            assert_eq!(s.endpoints()[i].instance.port(), 2);
        }
        // A broken rule is rejected; the previous one keeps routing.
        dir.apply(Update::Rule {
            key: key.clone(),
            text: Some("method = m && host = 1.1.1.1 => port = 1".into()),
        });
        dir.apply(Update::Add(vec![inst(3, 100)]));
        let s = settle(&dir, 3).await;
        for _ in 0..50 {
            let i = s.select(&Invocation::new("m"), &[], &mut rng).unwrap();
            assert_eq!(s.endpoints()[i].instance.port(), 2);
        }
        dir.apply(Update::Rule { key, text: None });
        let s = settle(&dir, 4).await;
        let ports: std::collections::BTreeSet<u16> = (0..200)
            .map(|_| {
                s.endpoints()[s.select(&Invocation::new("m"), &[], &mut rng).unwrap()]
                    .instance
                    .port()
            })
            .collect();
        assert_eq!(ports.len(), 3);
    }

    #[tokio::test]
    async fn unsupported_protocols_are_listed_but_not_routed() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        let grpc = Instance::builder("10.0.0.1", 1)
            .protocol(Protocol::Other("grpc".into()))
            .build();
        let tri = Instance::builder("10.0.0.1", 2)
            .protocol(Protocol::Tri)
            .build();
        dir.apply(Update::Reset(vec![grpc, tri]));
        let s = settle(&dir, 1).await;
        assert_eq!(s.instances().len(), 2);
        assert_eq!(s.endpoints().len(), 1);
        assert_eq!(s.endpoints()[0].instance.port(), 2);
        let all = RegistryDirectory::spawn(cfg().protocols(vec![]), None);
        all.apply(Update::Reset(vec![
            Instance::builder("h", 1)
                .protocol(Protocol::Other("grpc".into()))
                .build(),
        ]));
        assert_eq!(settle(&all, 1).await.endpoints().len(), 1);
    }

    #[tokio::test]
    async fn a_watched_rules_file_routes_and_a_broken_edit_keeps_the_rules() {
        let path =
            std::env::temp_dir().join(format!("switchman-rules-{}.yaml", std::process::id()));
        std::fs::write(&path, "method = m => port = 2\n").unwrap();
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        let watch =
            crate::watch_rules_file(dir.updater(), &path, Duration::from_millis(20)).unwrap();
        let mut rng = fastrand::Rng::with_seed(2);
        let only = |s: &Snapshot, rng: &mut fastrand::Rng| -> std::collections::BTreeSet<u16> {
            (0..100)
                .map(|_| {
                    s.endpoints()[s.select(&Invocation::new("m"), &[], rng).unwrap()]
                        .instance
                        .port()
                })
                .collect()
        };
        let s = dir
            .wait_until(Duration::from_secs(5), |s| s.subset_count() > 1)
            .await
            .unwrap();
        assert_eq!(only(&s, &mut rng), [2].into());
        std::fs::write(&path, "method = m => port = 1\n").unwrap();
        let e = s.epoch();
        let s = dir
            .wait_until(Duration::from_secs(5), |s| s.epoch() > e)
            .await
            .unwrap();
        assert_eq!(only(&s, &mut rng), [1].into());
        std::fs::write(&path, "method = m && host = x => port = 2\n").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while watch.rejected() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(watch.rejected(), 1, "the watcher read the broken edit");
        assert_eq!(
            only(&dir.load(), &mut rng),
            [1].into(),
            "a broken file keeps the rules in force"
        );
        std::fs::write(&path, "").unwrap();
        let e = dir.load().epoch();
        let s = dir
            .wait_until(Duration::from_secs(5), |s| s.epoch() > e)
            .await
            .unwrap();
        assert_eq!(
            only(&s, &mut rng),
            [1, 2].into(),
            "removing the rule restores all providers"
        );
        std::fs::remove_file(&path).ok();
    }

    #[tokio::test]
    async fn the_first_list_is_warm_and_later_arrivals_warm_up() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        dir.apply(Update::Reset(vec![inst(1, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Add(vec![inst(2, 100)]));
        let s = settle(&dir, 2).await;
        let now = std::time::SystemTime::now();
        let w: Vec<u32> = s
            .endpoints()
            .iter()
            .map(|e| switchman_loadbalance::effective_weight(e, now))
            .collect();
        assert_eq!(w[0], 100, "present at start: no warm-up");
        assert_eq!(
            w[1], 1,
            "new since start, no provider timestamp: warming from first sight"
        );
    }

    #[tokio::test]
    async fn unavailable_instances_are_listed_but_never_selected() {
        let dir = RegistryDirectory::spawn(cfg(), None);
        let off = Instance::builder("10.0.0.1", 1).enabled(false).build();
        let sick = Instance::builder("10.0.0.1", 2).healthy(false).build();
        dir.apply(Update::Reset(vec![off, sick, inst(3, 100)]));
        let s = settle(&dir, 1).await;
        assert_eq!(s.instances().len(), 3);
        assert_eq!(s.endpoints().len(), 1);
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..100 {
            let i = s.select(&Invocation::new("m"), &[], &mut rng).unwrap();
            assert_eq!(s.endpoints()[i].instance.port(), 3);
        }
    }

    /// A weight-only push keeps the route table (the balancer tables see the new weights);
    /// anything routing reads, or a rule naming weights, rebuilds it.
    #[tokio::test]
    async fn weight_changes_reuse_the_route_table_and_routing_stays_right() {
        let zoned = |port: u16, zone: &str, weight: u32| {
            Instance::builder("10.0.0.1", port)
                .zone(zone)
                .param("zone", zone)
                .weight(weight)
                .build()
        };
        let chain = RouterChain::new()
            .with_rule("svc.condition-router", "method = find* => zone = z1")
            .unwrap();
        let dir = RegistryDirectory::spawn(cfg().router(chain), None);
        let list = |w: u32| vec![zoned(1, "z1", 100), zoned(2, "z1", w), zoned(3, "z2", 100)];
        dir.apply(Update::Reset(list(100)));
        let s1 = settle(&dir, 1).await;
        dir.apply(Update::Reset(list(0)));
        let s2 = settle(&dir, 2).await;
        assert!(
            Arc::ptr_eq(&s1.routes, &s2.routes),
            "weight-only: table kept"
        );
        assert!(Arc::ptr_eq(&s1.index, &s2.index));
        // Routing still right, and the new weight (0) applies: only port 1 for find*.
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..200 {
            let i = s2
                .select(&Invocation::new("findUser"), &[], &mut rng)
                .unwrap();
            assert_eq!(s2.endpoints()[i].instance.port(), 1);
        }
        // A zone change is a routing change: rebuilt, and routed by the new zone.
        dir.apply(Update::Add(vec![zoned(3, "z1", 100)]));
        let s3 = settle(&dir, 3).await;
        assert!(!Arc::ptr_eq(&s2.routes, &s3.routes));
        let picked: std::collections::BTreeSet<u16> = (0..200)
            .map(|_| {
                let i = s3
                    .select(&Invocation::new("findUser"), &[], &mut rng)
                    .unwrap();
                s3.endpoints()[i].instance.port()
            })
            .collect();
        assert_eq!(picked, [1, 3].into());
        // A rule that names weights: weight-only pushes rebuild.
        dir.set_router(
            RouterChain::new()
                .with_rule("svc.condition-router", "weight = 100 => zone = z1")
                .unwrap(),
        );
        let s4 = settle(&dir, 4).await;
        dir.apply(Update::Add(vec![zoned(2, "z1", 50)]));
        let s5 = settle(&dir, 5).await;
        assert!(!Arc::ptr_eq(&s4.routes, &s5.routes));
    }

    /// A weight-only push of a few addresses patches the last snapshot: the route table,
    /// address index and live stats stay, the entry is swapped at the right position of both
    /// arrays (they differ when an instance is not routable), and the cache file follows.
    #[tokio::test]
    async fn weight_only_deltas_patch_the_last_snapshot() {
        let cache =
            std::env::temp_dir().join(format!("switchman-dir-patch-{}.json", std::process::id()));
        std::fs::remove_file(&cache).ok();
        let chain = RouterChain::new()
            .with_rule("svc.condition-router", "method = find* => zone = z1")
            .unwrap();
        let dir = RegistryDirectory::spawn(cfg().router(chain).cache_file(&cache), None);
        let node = |port: u16, weight: u32, enabled: bool| {
            Instance::builder("10.0.0.1", port)
                .zone(if port % 2 == 0 { "z1" } else { "z2" })
                .param("zone", if port % 2 == 0 { "z1" } else { "z2" })
                .weight(weight)
                .enabled(enabled)
                .build()
        };
        // Port 2 is disabled: listed in `instances()`, absent from `endpoints()`.
        dir.apply(Update::Reset(
            (1..=6).map(|p| node(p, 100, p != 2)).collect(),
        ));
        let s1 = settle(&dir, 1).await;
        assert_eq!((s1.instances().len(), s1.endpoints().len()), (6, 5));
        s1.endpoints()[3]
            .stats
            .begin()
            .finish(Duration::from_millis(1), true);
        dir.apply(Update::Add(vec![node(4, 0, true), node(5, 30, true)]));
        let s2 = settle(&dir, 2).await;
        assert!(Arc::ptr_eq(&s1.routes, &s2.routes) && Arc::ptr_eq(&s1.index, &s2.index));
        let weights: Vec<(u16, u32)> = s2
            .endpoints()
            .iter()
            .map(|e| (e.instance.port(), e.instance.weight()))
            .collect();
        assert_eq!(weights, [(1, 100), (3, 100), (4, 0), (5, 30), (6, 100)]);
        assert_eq!(s2.instances()[3].weight(), 0);
        assert_eq!(s2.instances()[1].port(), 2);
        for (a, b) in s1.endpoints().iter().zip(s2.endpoints()) {
            assert!(Arc::ptr_eq(&a.stats, &b.stats), "live stats carried over");
        }
        assert_eq!(s2.endpoints()[3].stats.succeeded(), 1);
        // Weight 0 on port 4 leaves port 6 as the only z1 target for find*.
        let mut rng = fastrand::Rng::with_seed(9);
        for _ in 0..100 {
            let i = s2
                .select(&Invocation::new("findAll"), &[], &mut rng)
                .unwrap();
            assert_eq!(s2.endpoints()[i].instance.port(), 6);
        }
        // The cache file holds the new weights.
        let saved = loop {
            let found = cache::load(&cache, &ServiceKey::new("com.foo.Bar")).unwrap();
            if found
                .as_ref()
                .is_some_and(|l| l.iter().any(|i| i.weight() == 30))
            {
                break found.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(saved.len(), 6);
        std::fs::remove_file(&cache).ok();
        // Enabling port 2 is not a weight change: rebuilt, now routable.
        dir.apply(Update::Add(vec![node(2, 100, true)]));
        let s3 = settle(&dir, 3).await;
        assert!(!Arc::ptr_eq(&s2.routes, &s3.routes));
        assert_eq!(s3.endpoints().len(), 6);
        // The same address twice in one batch: the later entry counts.
        let epoch = dir.load().epoch();
        dir.apply(Update::Add(vec![node(1, 7, true), node(1, 8, true)]));
        let s4 = settle(&dir, epoch + 1).await;
        assert_eq!(s4.endpoints()[0].instance.weight(), 8);
        // An override rule that changes a weight is patched in too; clearing it restores it.
        let epoch = dir.load().epoch();
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![Configurator::for_address("10.0.0.1:3").param("weight", "9")],
        });
        let s5 = settle(&dir, epoch + 1).await;
        assert!(Arc::ptr_eq(&s4.routes, &s5.routes));
        assert_eq!(s5.endpoints()[2].instance.weight(), 9);
        assert_eq!(s5.instances()[2].weight(), 9);
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![],
        });
        let s6 = settle(&dir, epoch + 2).await;
        assert!(Arc::ptr_eq(&s4.routes, &s6.routes));
        assert_eq!(s6.endpoints()[2].instance.weight(), 100);
        // An override that disables an instance is a routing change: rebuilt.
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![Configurator::for_address("10.0.0.1:3").param("disabled", "true")],
        });
        let s7 = settle(&dir, epoch + 3).await;
        assert!(!Arc::ptr_eq(&s6.routes, &s7.routes));
        assert_eq!(s7.endpoints().len(), 5);
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![],
        });
        let s4 = settle(&dir, epoch + 4).await;
        // Re-sending what the directory holds publishes nothing.
        dir.apply(Update::Add(vec![node(1, 8, true)]));
        dir.apply(Update::Reset(
            s4.instances().iter().map(|i| (**i).clone()).collect(),
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(dir.load().epoch(), s4.epoch());
    }

    /// A registry change that an override rule hides publishes nothing, yet the cache file
    /// (what the registry says) follows it, on both the patch and the rebuild path.
    #[tokio::test]
    async fn a_change_hidden_by_an_override_updates_only_the_cache_file() {
        let cache =
            std::env::temp_dir().join(format!("switchman-dir-hidden-{}.json", std::process::id()));
        std::fs::remove_file(&cache).ok();
        let dir = RegistryDirectory::spawn(cfg().cache_file(&cache), None);
        dir.apply(Update::Reset(vec![inst(1, 100), inst(2, 100)]));
        settle(&dir, 1).await;
        dir.apply(Update::Configurators {
            source: "zk".into(),
            rules: vec![Configurator::for_address("10.0.0.1:1").param("weight", "5")],
        });
        settle(&dir, 2).await;
        let cached_weight = |w: u32| {
            let cache = cache.clone();
            async move {
                for _ in 0..500 {
                    let found = cache::load(&cache, &ServiceKey::new("com.foo.Bar")).unwrap();
                    if found.is_some_and(|l| l.iter().any(|i| i.port() == 1 && i.weight() == w)) {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                false
            }
        };
        // Patch path (a delta), then rebuild path (a whole list).
        dir.apply(Update::Add(vec![inst(1, 50)]));
        assert!(cached_weight(50).await);
        dir.apply(Update::Reset(vec![inst(1, 60), inst(2, 100)]));
        assert!(cached_weight(60).await);
        assert_eq!(dir.load().epoch(), 2, "nothing visible changed");
        assert_eq!(dir.load().instances()[0].weight(), 5);
        std::fs::remove_file(&cache).ok();
    }

    /// Random pushes (resets, deltas, removals; weight, zone and availability changes) against
    /// a model of what the registry says: after each one the snapshot lists exactly the
    /// model's instances in address order, routes only to available ones, and keeps the live
    /// stats of every address that stayed. Exercises the patch and the rebuild paths alike.
    #[tokio::test]
    async fn random_pushes_match_a_model_of_the_registry() {
        let chain = RouterChain::new()
            .with_rule("svc.condition-router", "method = find* => zone = z1")
            .unwrap();
        let dir = RegistryDirectory::spawn(cfg().router(chain), None);
        let mut rng = fastrand::Rng::with_seed(42);
        let mut model: BTreeMap<u16, Instance> = BTreeMap::new();
        let make = |rng: &mut fastrand::Rng, port: u16| {
            let zone = if rng.bool() { "z1" } else { "z2" };
            Instance::builder("10.0.0.1", port)
                .zone(zone)
                .param("zone", zone)
                .weight(rng.u32(0..=3) * 50)
                .enabled(rng.u8(..10) != 0)
                .build()
        };
        let mut stats_of: BTreeMap<u16, Arc<InstanceStats>> = BTreeMap::new();
        let mut overrides: Option<(u16, u32)> = None;
        // A marker instance that is always there; bumping its weight is a change that tells
        // when a step that changed nothing has been processed.
        let marker = |weight: u32| Instance::builder("10.0.0.2", 1).weight(weight).build();
        let mut marker_weight = 1;
        dir.apply(Update::Reset(vec![marker(marker_weight)]));
        settle(&dir, 1).await;
        let expected = |model: &BTreeMap<u16, Instance>, overrides: Option<(u16, u32)>| {
            model
                .values()
                .map(|i| {
                    let weight = match overrides {
                        Some((port, weight)) if port == i.port() => weight,
                        _ => i.weight(),
                    };
                    (i.port(), weight, i.enabled(), i.zone().map(str::to_string))
                })
                .collect::<Vec<_>>()
        };
        let mut last_state = expected(&model, overrides);
        let mut changed_steps = 0;
        for step in 0..400 {
            let epoch = dir.load().epoch();
            match rng.u8(..10) {
                0 => {
                    let list: Vec<Instance> = (0..rng.u16(1..40))
                        .map(|_| {
                            let port = rng.u16(1000..1040);
                            make(&mut rng, port)
                        })
                        .collect();
                    model = list.iter().map(|i| (i.port(), i.clone())).collect();
                    let mut list = list;
                    list.push(marker(marker_weight));
                    dir.apply(Update::Reset(list));
                }
                1 if !model.is_empty() => {
                    let ports: Vec<u16> = model.keys().copied().collect();
                    let gone = ports[rng.usize(..ports.len())];
                    model.remove(&gone);
                    dir.apply(Update::Remove(vec![format!("10.0.0.1:{gone}")]));
                }
                7 if !model.is_empty() => {
                    // An override of one weight (the model tracks it as the effective weight).
                    let ports: Vec<u16> = model.keys().copied().collect();
                    let port = ports[rng.usize(..ports.len())];
                    let weight = rng.u32(0..=3) * 50;
                    overrides = Some((port, weight));
                    dir.apply(Update::Configurators {
                        source: "ops".into(),
                        rules: vec![
                            Configurator::for_address(&format!("10.0.0.1:{port}"))
                                .param("weight", &weight.to_string()),
                        ],
                    });
                }
                8 => {
                    overrides = None;
                    dir.apply(Update::Configurators {
                        source: "ops".into(),
                        rules: vec![],
                    });
                }
                2..=6 if !model.is_empty() => {
                    // Weight-only changes of a few existing instances.
                    let ports: Vec<u16> = model.keys().copied().collect();
                    let mut delta = Vec::new();
                    for _ in 0..rng.usize(1..4) {
                        let port = ports[rng.usize(..ports.len())];
                        let old = &model[&port];
                        let changed = Instance::builder("10.0.0.1", port)
                            .zone(old.zone().unwrap())
                            .param("zone", old.zone().unwrap())
                            .weight(rng.u32(0..=3) * 50)
                            .enabled(old.enabled())
                            .build();
                        model.insert(port, changed.clone());
                        delta.push(changed);
                    }
                    dir.apply(Update::Add(delta));
                }
                _ => {
                    let port = rng.u16(1000..1040);
                    let inst = make(&mut rng, port);
                    model.insert(port, inst.clone());
                    dir.apply(Update::Add(vec![inst]));
                }
            }
            let state = expected(&model, overrides);
            let snap = if state != last_state {
                changed_steps += 1;
                settle(&dir, epoch + 1).await
            } else {
                marker_weight += 1;
                dir.apply(Update::Add(vec![marker(marker_weight)]));
                let w = marker_weight;
                dir.wait_until(Duration::from_secs(5), |s| {
                    s.instances()
                        .iter()
                        .any(|i| i.host() == "10.0.0.2" && i.weight() == w)
                })
                .await
                .unwrap()
            };
            last_state = state;
            let listed: Vec<(u16, u32, bool)> = snap
                .instances()
                .iter()
                .filter(|i| i.host() == "10.0.0.1")
                .map(|i| (i.port(), i.weight(), i.enabled()))
                .collect();
            let effective_weight = |i: &Instance| match overrides {
                Some((port, weight)) if port == i.port() => weight,
                _ => i.weight(),
            };
            let want: Vec<(u16, u32, bool)> = model
                .values()
                .map(|i| (i.port(), effective_weight(i), i.enabled()))
                .collect();
            assert_eq!(listed, want, "step {step}");
            for (i, ep) in snap.endpoints().iter().enumerate() {
                assert!(ep.instance.is_available());
                assert_eq!(snap.index_of(ep.instance.address()), Some(i));
                if ep.instance.host() == "10.0.0.1" {
                    let port = ep.instance.port();
                    assert_eq!(
                        ep.instance.weight(),
                        effective_weight(&model[&port]),
                        "step {step}"
                    );
                    let same = stats_of.entry(port).or_insert_with(|| ep.stats.clone());
                    assert!(
                        Arc::ptr_eq(same, &ep.stats),
                        "step {step}: stats of {port} lost"
                    );
                }
            }
            let routable = snap.endpoints().len();
            assert_eq!(
                routable,
                model.values().filter(|i| i.is_available()).count() + 1,
                "step {step}"
            );
            // Stats of addresses that left are forgotten (a returning address starts fresh).
            stats_of.retain(|port, _| model.get(port).is_some_and(|i| i.is_available()));
            let find = Invocation::new("findAll");
            // With an available z1 instance, find* goes to z1 (otherwise the non-forced
            // condition rule falls back to every instance).
            let z1 = model
                .values()
                .any(|i| i.is_available() && i.zone() == Some("z1"));
            let i = snap.select(&find, &[], &mut rng).unwrap();
            let picked = &snap.endpoints()[i].instance;
            assert!(
                !z1 || picked.zone() == Some("z1"),
                "step {step}: {picked:?}"
            );
        }
        assert!(changed_steps > 200, "{changed_steps}");
    }

    /// Readers running while the owner publishes many snapshots never see the epoch go
    /// backwards and always see a whole snapshot (its instance count matches its epoch).
    #[test]
    fn concurrent_readers_see_whole_snapshots_in_order() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = Arc::new(RegistryDirectory::spawn(cfg(), None));
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let mut readers = Vec::new();
            for _ in 0..3 {
                let dir = dir.clone();
                let stop = stop.clone();
                readers.push(std::thread::spawn(move || {
                    let mut last = 0;
                    let mut seen = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let s = dir.load();
                        assert!(
                            s.epoch() >= last,
                            "epoch went back from {last} to {}",
                            s.epoch()
                        );
                        last = s.epoch();
                        // Update k (epoch k) lists exactly k instances whose weights are all k.
                        if s.epoch() > 0 {
                            assert_eq!(s.instances().len() as u64, s.epoch());
                            assert!(s.instances().iter().all(|i| i.weight() as u64 == s.epoch()));
                        }
                        seen += 1;
                    }
                    seen
                }));
            }
            for k in 1..=200u32 {
                dir.apply(Update::Reset(
                    (0..k).map(|p| inst(p as u16 + 1, k)).collect(),
                ));
                dir.wait_until(Duration::from_secs(5), |s| s.epoch() == k as u64)
                    .await
                    .unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            for r in readers {
                assert!(r.join().unwrap() > 0);
            }
        });
    }
}
