use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use switchman_core::{Error, ErrorKind, Instance, Invocation, ServiceKey};
use switchman_loadbalance::{Endpoint, LoadBalance, PickContext, Picker, pick_untried};
use switchman_router::{ConsumerInfo, Route, RouteTable, RouterChain};

/// One immutable view of a service: its instances, the router chain's precomputed state and
/// one balancer table per routed subset. Published by the directory; read per call with one
/// atomic load.
///
/// The directory's balancer has its tables built with the snapshot. Settings may name other
/// balancers (per method, or a provider's registered `loadbalance`): their tables are built
/// on first use, once per snapshot and balancer ([`Snapshot::balancing`]), never per call.
pub struct Snapshot {
    /// Process-unique ([`Snapshot::id`]): what every per-snapshot cache keys on.
    id: u64,
    epoch: u64,
    service: ServiceKey,
    /// Every instance the registry reported (after overrides), sorted by address.
    all: Arc<[Arc<Instance>]>,
    /// The available instances (enabled and healthy), sorted by address: what routing sees.
    endpoints: Arc<[Endpoint]>,
    pub(crate) index: Arc<AddrMap<usize>>,
    pub(crate) routes: Arc<RouteTable>,
    pickers: Vec<Box<dyn Picker>>,
    balancer: Arc<dyn LoadBalance>,
    /// Tables of other balancers, built on first use (only while settings are resolved for
    /// this snapshot, never on the call path).
    extra: Mutex<Vec<Arc<PickerSet>>>,
    /// Tables of subsets routed per call ([`Route::Computed`]: more distinct candidate sets
    /// than the route table precomputes), by balancer and members, kept for this snapshot's
    /// life: a call routed to a set seen before picks from its table instead of building one
    /// (a consistent-hash ring, a weight table) again. At most [`COMPUTED_TABLES`], oldest out.
    computed: Mutex<Vec<ComputedTable>>,
    /// True when the registry's list is empty but the empty-list protection kept the previous
    /// one.
    protected: bool,
    /// What consumer rules set for this consumer ([`Snapshot::consumer_overrides`]).
    consumer_overrides: Arc<BTreeMap<String, String>>,
}

/// The most tables of per-call subsets one snapshot keeps ([`Snapshot::pick`]).
pub(crate) const COMPUTED_TABLES: usize = 64;

/// A table built for a subset routed per call.
struct ComputedTable {
    /// The balancer that built it (compared by identity).
    balancer: Arc<dyn LoadBalance>,
    members: Arc<[u32]>,
    picker: Arc<dyn Picker>,
}

/// One balancer's tables for every routed subset of one snapshot.
pub struct PickerSet {
    balancer: Arc<dyn LoadBalance>,
    pickers: Vec<Box<dyn Picker>>,
}

impl fmt::Debug for PickerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PickerSet")
            .field("balancer", &self.balancer.name())
            .field("subsets", &self.pickers.len())
            .finish()
    }
}

impl PickerSet {
    /// The balancer these tables were built by.
    pub fn balancer(&self) -> &Arc<dyn LoadBalance> {
        &self.balancer
    }
}

/// Which balancer's tables one method uses in each routed subset of one snapshot: Dubbo reads
/// `loadbalance` from the first routed provider's URL (`invokers.get(0)`), so two subsets may
/// use two balancers. Made by [`Snapshot::balancing`] once per snapshot and method; a call
/// reads two array slots.
pub struct Balancing {
    /// The [`Snapshot::id`] of the snapshot these tables belong to.
    snapshot: u64,
    /// The tables in use; `None` is the snapshot's own.
    sets: Vec<Option<Arc<PickerSet>>>,
    /// Per routed subset: index into `sets`.
    by_subset: Box<[u8]>,
    /// Per endpoint, for a subset routed on the spot whose first member it is.
    by_endpoint: Box<[u8]>,
}

impl fmt::Debug for Balancing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .sets
            .iter()
            .map(|s| s.as_ref().map_or("(directory's)", |s| s.balancer.name()))
            .collect();
        f.debug_struct("Balancing")
            .field("snapshot", &self.snapshot)
            .field("balancers", &names)
            .finish()
    }
}

impl Balancing {
    /// The [`Snapshot::id`] of the snapshot these tables belong to.
    pub fn snapshot_id(&self) -> u64 {
        self.snapshot
    }

    /// The balancer routed subset `k` uses; `None`: the snapshot's own.
    pub fn balancer_of_subset(&self, k: usize) -> Option<&Arc<dyn LoadBalance>> {
        let slot = *self.by_subset.get(k)? as usize;
        self.sets.get(slot)?.as_ref().map(|s| &s.balancer)
    }

    #[inline]
    fn set_of_subset(&self, k: usize) -> Option<&PickerSet> {
        let slot = *self.by_subset.get(k)? as usize;
        self.sets.get(slot)?.as_deref()
    }

    fn set_of_endpoint(&self, i: usize) -> Option<&PickerSet> {
        let slot = *self.by_endpoint.get(i)? as usize;
        self.sets.get(slot)?.as_deref()
    }
}

/// Most distinct balancers one method's [`Balancing`] holds (the directory's included); an
/// endpoint naming yet another one uses the directory's.
pub const MAX_BALANCERS: usize = 16;

/// Why routing gave no candidates (the error is built apart, off the call path).
enum Refusal<'s> {
    NoEndpoints,
    NoPick,
    Route(Route<'s>),
}

/// The routed candidates of one call: a precomputed subset of the snapshot, or (rarely) one
/// computed for this call. Borrowed from the snapshot: no reference count is touched for a
/// precomputed subset.
#[derive(Debug, Clone)]
pub struct Routed<'s> {
    subset: Option<usize>,
    members: Members<'s>,
}

#[derive(Debug, Clone)]
enum Members<'s> {
    Shared(&'s Arc<[u32]>),
    Owned(Arc<[u32]>),
}

impl<'s> Routed<'s> {
    /// The candidates: indexes into [`Snapshot::endpoints`], ascending.
    pub fn members(&self) -> &[u32] {
        match &self.members {
            Members::Shared(m) => m,
            Members::Owned(m) => m,
        }
    }

    /// The precomputed subset these candidates are (`None`: computed for this call).
    pub fn subset(&self) -> Option<usize> {
        self.subset
    }

    /// The first candidate (lowest address), whose registration Dubbo reads for the
    /// balancer and `sticky`.
    pub fn first(&self) -> Option<usize> {
        self.members().first().map(|&m| m as usize)
    }

    /// Whether endpoint `i` is a candidate (a binary search).
    pub fn contains(&self, i: usize) -> bool {
        u32::try_from(i).is_ok_and(|i| self.members().binary_search(&i).is_ok())
    }

    /// The candidates as a shared list (a reference-count increment).
    pub fn to_arc(&self) -> Arc<[u32]> {
        match &self.members {
            Members::Shared(m) => Arc::clone(m),
            Members::Owned(m) => m.clone(),
        }
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("epoch", &self.epoch)
            .field("service", &self.service)
            .field("instances", &self.all.len())
            .field("available", &self.endpoints.len())
            .field("subsets", &self.pickers.len())
            .field("balancer", &self.balancer.name())
            .field("protected", &self.protected)
            .finish()
    }
}

/// A map keyed by endpoint key ([`Instance::key`], which starts with the address). foldhash: several times faster than SipHash on short keys, and
/// seeded per process, so addresses chosen by whoever writes the registry cannot be crafted to
/// collide.
pub(crate) type AddrMap<V> = HashMap<Arc<str>, V, foldhash::fast::RandomState>;

/// The next [`Snapshot::id`]; starts at 1, so 0 is never a snapshot's.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(crate) struct SnapshotParts<'a> {
    pub(crate) epoch: u64,
    pub(crate) service: &'a ServiceKey,
    pub(crate) all: Arc<[Arc<Instance>]>,
    pub(crate) endpoints: Arc<[Endpoint]>,
    /// The address of each endpoint (shared keys: no allocation per snapshot); unused (may be
    /// empty) with `same_routes_as`.
    pub(crate) addresses: Vec<Arc<str>>,
    pub(crate) router: &'a RouterChain,
    pub(crate) consumer: &'a ConsumerInfo,
    pub(crate) balancer: &'a Arc<dyn LoadBalance>,
    pub(crate) protected: bool,
    pub(crate) now: SystemTime,
    /// A previous snapshot whose endpoints are these, in the same order, differing at most in
    /// weights (see `Instance::same_but_weight`), under the same rules: its route table and
    /// address index hold for this one and are shared instead of rebuilt.
    pub(crate) same_routes_as: Option<&'a Snapshot>,
    /// With `same_routes_as`: the endpoints (indexes, ascending) whose instance or statistics
    /// differ from that snapshot's; the balancer tables are patched from its tables for them
    /// ([`Picker::patched`]).
    pub(crate) changed: &'a [u32],
    /// The consumer rules' parameters for this consumer.
    pub(crate) consumer_overrides: Arc<BTreeMap<String, String>>,
}

impl Snapshot {
    pub(crate) fn build(p: SnapshotParts<'_>) -> Snapshot {
        let (routes, index) = match p.same_routes_as {
            Some(prev) => (prev.routes.clone(), prev.index.clone()),
            None => {
                let instances: Vec<Arc<Instance>> =
                    p.endpoints.iter().map(|e| e.instance.clone()).collect();
                let index: AddrMap<usize> = p
                    .addresses
                    .into_iter()
                    .enumerate()
                    .map(|(i, a)| (a, i))
                    .collect();
                (
                    Arc::new(p.router.build(&instances, p.consumer)),
                    Arc::new(index),
                )
            }
        };
        // After a weights-only change under the same balancer, each subset's table is patched
        // from the previous one (its members are the same: the route table is shared).
        let previous = p
            .same_routes_as
            .filter(|prev| Arc::ptr_eq(&prev.balancer, p.balancer));
        let pickers = routes
            .subsets()
            .iter()
            .enumerate()
            .map(|(k, members)| {
                previous
                    .and_then(|prev| prev.pickers.get(k))
                    .and_then(|before| before.patched(&p.endpoints, members, p.changed, p.now))
                    .unwrap_or_else(|| p.balancer.prepare(&p.endpoints, members.clone(), p.now))
            })
            .collect();
        Snapshot {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            epoch: p.epoch,
            service: p.service.clone(),
            all: p.all,
            endpoints: p.endpoints,
            index,
            routes,
            pickers,
            balancer: p.balancer.clone(),
            extra: Mutex::new(Vec::new()),
            computed: Mutex::new(Vec::new()),
            protected: p.protected,
            consumer_overrides: p.consumer_overrides,
        }
    }

    /// Whether every balancer table's weights are those a build from scratch gives now (for
    /// tests of the patch paths).
    #[cfg(test)]
    pub(crate) fn tables_match_full_build(&self) -> bool {
        self.routes
            .subsets()
            .iter()
            .zip(&self.pickers)
            .all(|(members, picker)| {
                let full =
                    self.balancer
                        .prepare(&self.endpoints, members.clone(), SystemTime::now());
                full.settled_weights() == picker.settled_weights()
            })
            && self.routes.subsets().len() == self.pickers.len()
    }

    /// The arrays of a snapshot nobody else holds any more, to be patched into the next one
    /// (see the directory's patch path); the rest is dropped.
    pub(crate) fn into_arrays(self) -> (Arc<[Arc<Instance>]>, Arc<[Endpoint]>) {
        (self.all, self.endpoints)
    }

    /// Takes the balancer tables out of a retired snapshot kept only for its arrays, so that
    /// they are not held meanwhile.
    pub(crate) fn shed_tables(&mut self) -> (Vec<Box<dyn Picker>>, Vec<Arc<PickerSet>>) {
        let extra = std::mem::take(self.extra.get_mut().unwrap_or_else(|e| e.into_inner()));
        (std::mem::take(&mut self.pickers), extra)
    }

    /// The snapshot the registry directory would publish first for `instances` under
    /// `config` (epoch 1; sorted by key, the later of two with one key kept; only available
    /// instances of a callable protocol routed; each with a client from the config's maker,
    /// if any). For [`crate::FixedDirectory`] and
    /// your own [`crate::contracts::Directory`].
    pub fn fixed(config: &crate::DirectoryConfig, instances: Vec<Arc<Instance>>) -> Snapshot {
        let mut by_key: std::collections::BTreeMap<&str, &Arc<Instance>> =
            std::collections::BTreeMap::new();
        for i in &instances {
            by_key.insert(i.key(), i);
        }
        let all: Arc<[Arc<Instance>]> = by_key.values().map(|i| Arc::clone(i)).collect();
        let routable: Vec<Arc<Instance>> = all
            .iter()
            .filter(|i| config.is_routable(i))
            .cloned()
            .collect();
        let endpoints: Arc<[Endpoint]> = routable
            .iter()
            .map(|i| {
                let mut e = Endpoint::new(Arc::clone(i));
                e.service = config.make(i);
                // A fixed fleet is already running: warm, as the directory's first list.
                e.stats.set_first_seen_ms(0);
                e
            })
            .collect();
        Snapshot::build(SnapshotParts {
            epoch: 1,
            service: &config.service,
            all,
            endpoints,
            addresses: routable.iter().map(|i| Arc::from(i.key())).collect(),
            router: &config.router,
            consumer: &config.consumer,
            balancer: &config.balancer,
            protected: false,
            now: SystemTime::now(),
            same_routes_as: None,
            changed: &[],
            consumer_overrides: Arc::default(),
        })
    }

    /// An empty snapshot (epoch 0) for a service nobody has reported yet.
    pub fn empty(service: ServiceKey, balancer: Arc<dyn LoadBalance>) -> Snapshot {
        Snapshot::build(SnapshotParts {
            epoch: 0,
            service: &service,
            all: Arc::from(Vec::new()),
            endpoints: Arc::from(Vec::new()),
            addresses: Vec::new(),
            router: &RouterChain::new(),
            consumer: &ConsumerInfo::new("127.0.0.1", "switchman"),
            balancer: &balancer,
            protected: false,
            now: SystemTime::now(),
            same_routes_as: None,
            changed: &[],
            consumer_overrides: Arc::default(),
        })
    }

    /// The parameters that consumer rules (dubbo-admin's `side: consumer` configurators, see
    /// [`crate::configurator::Side::Consumer`]) set for this consumer of this service:
    /// `timeout`, `retries`, `loadbalance`, `cluster`, `mock`, `{method}.timeout`, ... as
    /// strings, later rules winning. The cluster invoker lays them over the consumer's own
    /// settings. Empty when no rule matches.
    pub fn consumer_overrides(&self) -> &BTreeMap<String, String> {
        &self.consumer_overrides
    }

    /// Monotonically increasing version of one directory's view; 0 before the first registry
    /// update. For people and logs: a directory of one's own may repeat it (every
    /// [`Snapshot::fixed`] is epoch 1), so nothing may cache by it; use [`Snapshot::id`].
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Unique among the snapshots of this process, and larger for a snapshot built later: the
    /// key of every cache of what a snapshot implies (balancer tables per method, per-endpoint
    /// limits, resolved settings). Two snapshots never share one, whoever built them.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The service this snapshot describes.
    pub fn service(&self) -> &ServiceKey {
        &self.service
    }

    /// Every instance the registry reported, sorted by address (available or not).
    pub fn instances(&self) -> &[Arc<Instance>] {
        &self.all
    }

    /// The instances routing and balancing choose from (enabled and healthy), sorted by
    /// address. Indexes returned by [`Snapshot::select`] point into this slice.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The index of the available endpoint whose [`Instance::key`] is `key`, if present; given
    /// a bare address (`host:port`), the first endpoint at that address (several endpoints
    /// share one when a process exports a service under several groups or versions).
    pub fn index_of(&self, key: &str) -> Option<usize> {
        match self.index.get(key) {
            Some(&i) => Some(i),
            None if !key.contains(' ') => self.index_of_address(key),
            None => None,
        }
    }

    /// The index of the first available endpoint at `address` (`host:port`), if any. Keys
    /// start with the address, so the endpoints are in address order: a binary search.
    pub fn index_of_address(&self, address: &str) -> Option<usize> {
        let at = self
            .endpoints
            .partition_point(|e| e.instance.address() < address);
        (self
            .endpoints
            .get(at)
            .is_some_and(|e| e.instance.address() == address))
        .then_some(at)
    }

    /// Whether the empty-list protection is holding on to a previous list.
    pub fn is_protected(&self) -> bool {
        self.protected
    }

    /// The balancer this snapshot's tables were built for.
    pub fn balancer(&self) -> &Arc<dyn LoadBalance> {
        &self.balancer
    }

    /// The number of distinct routed subsets (one balancer table each).
    pub fn subset_count(&self) -> usize {
        self.pickers.len()
    }

    /// When the balancer tables should be rebuilt even without a change (warm-up).
    pub(crate) fn refresh_after(&self) -> Option<Duration> {
        self.pickers.iter().filter_map(|p| p.refresh_after()).min()
    }

    /// The routed candidates for `invocation` (indexes into [`Snapshot::endpoints`], in address
    /// order), for strategies that call every candidate or walk them in order (broadcast,
    /// available). A reference-count increment in the common case.
    pub fn candidates(
        &self,
        invocation: &Invocation,
        rng: &mut fastrand::Rng,
    ) -> Result<Arc<[u32]>, Error> {
        self.route(invocation, rng).map(|r| r.to_arc())
    }

    /// Routes `invocation`: its candidates, or the error a call gets when there are none (no
    /// provider listed, or rules forbid the call). The cached route part plus the per-call
    /// checks; no lock, and no allocation for a precomputed subset.
    #[inline]
    pub fn route<'s>(
        &'s self,
        invocation: &Invocation,
        rng: &mut fastrand::Rng,
    ) -> Result<Routed<'s>, Error> {
        self.routed(invocation, rng)
            .map_err(|r| self.refusal(r, invocation))
    }

    /// [`Snapshot::route`] without building the error (the call path stays small).
    #[inline(always)]
    fn routed<'s>(
        &'s self,
        invocation: &Invocation,
        rng: &mut fastrand::Rng,
    ) -> Result<Routed<'s>, Refusal<'s>> {
        if self.endpoints.is_empty() {
            return Err(Refusal::NoEndpoints);
        }
        match self.routes.route(invocation, rng) {
            Route::Subset(i) => match self.routes.subsets().get(i) {
                Some(members) => Ok(Routed {
                    subset: Some(i),
                    members: Members::Shared(members),
                }),
                None => Err(Refusal::NoPick),
            },
            Route::Computed(members) => Ok(Routed {
                subset: None,
                members: Members::Owned(members),
            }),
            other => Err(Refusal::Route(other)),
        }
    }

    #[cold]
    #[inline(never)]
    fn refusal(&self, r: Refusal<'_>, invocation: &Invocation) -> Error {
        match r {
            Refusal::NoEndpoints => Error::no_provider(format!(
                "no available provider for {} (directory epoch {})",
                self.service, self.epoch
            )),
            Refusal::NoPick => Error::new(
                ErrorKind::Forbidden,
                format!(
                    "routing leaves no provider of {} for method {}",
                    self.service, invocation.method
                ),
            ),
            Refusal::Route(Route::Forbidden(rule)) => Error::new(
                ErrorKind::Forbidden,
                format!(
                    "routing rule {rule} leaves no provider of {} for {}",
                    self.service, invocation.method
                ),
            ),
            Refusal::Route(other) => Error::new(
                ErrorKind::Forbidden,
                format!(
                    "routing gave {other:?} for {} of {}, which this directory does not know",
                    invocation.method, self.service
                ),
            ),
        }
    }

    /// Routes `invocation` and picks an endpoint, avoiding the `tried` indexes while untried
    /// candidates remain. The cached route part plus an O(1)/O(log n) pick; no lock and no
    /// allocation unless it fails.
    pub fn select(
        &self,
        invocation: &Invocation,
        tried: &[usize],
        rng: &mut fastrand::Rng,
    ) -> Result<usize, Error> {
        let routed = match self.routed(invocation, rng) {
            Ok(r) => r,
            Err(r) => return Err(self.refusal(r, invocation)),
        };
        let ctx = PickContext { invocation, tried };
        match self.pick_in(&routed, None, &ctx, rng) {
            Some(i) => Ok(i),
            None => Err(self.refusal(Refusal::NoPick, invocation)),
        }
    }

    /// Picks one of `routed` (routed by this snapshot) with the balancer `balancing` names for
    /// its subset (`None`, or tables of another snapshot: the directory's balancer), avoiding
    /// the `tried` indexes while untried candidates remain. O(1)/O(log n) for a precomputed
    /// subset; a subset computed for this call builds its table on the spot.
    #[inline]
    pub fn pick(
        &self,
        routed: &Routed<'_>,
        balancing: Option<&Balancing>,
        invocation: &Invocation,
        tried: &[usize],
        rng: &mut fastrand::Rng,
    ) -> Result<usize, Error> {
        let ctx = PickContext { invocation, tried };
        match self.pick_in(routed, balancing, &ctx, rng) {
            Some(i) => Ok(i),
            None => Err(self.refusal(Refusal::NoPick, invocation)),
        }
    }

    #[inline(always)]
    fn pick_in(
        &self,
        routed: &Routed<'_>,
        balancing: Option<&Balancing>,
        ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        let balancing = balancing.filter(|b| b.snapshot == self.id);
        match routed.subset {
            Some(k) => {
                let picker = match balancing.and_then(|b| b.set_of_subset(k)) {
                    Some(set) => set.pickers.get(k),
                    None => self.pickers.get(k),
                };
                pick_untried(picker?.as_ref(), &self.endpoints, ctx, rng)
            }
            None => self.pick_computed(routed, balancing, ctx, rng),
        }
    }

    /// A subset routed for this call: its table built on the spot (rare; see [`Route`]).
    #[inline(never)]
    fn pick_computed(
        &self,
        routed: &Routed<'_>,
        balancing: Option<&Balancing>,
        ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        let balancer = routed
            .first()
            .and_then(|f| balancing?.set_of_endpoint(f))
            .map_or(&self.balancer, |s| &s.balancer);
        let picker = self.computed_table(balancer, routed);
        pick_untried(picker.as_ref(), &self.endpoints, ctx, rng)
    }

    /// The table of `balancer` over the members of `routed` (a per-call subset): the one kept
    /// from an earlier call, else built now and kept (see [`Snapshot::computed`]).
    fn computed_table(
        &self,
        balancer: &Arc<dyn LoadBalance>,
        routed: &Routed<'_>,
    ) -> Arc<dyn Picker> {
        // The router keeps the sets it computed (a call of a known shape gets the same `Arc`),
        // so the identity check finds a kept table at once; equal contents still match.
        let members = routed.to_arc();
        let lock = || self.computed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = lock().iter().find(|t| {
            Arc::ptr_eq(&t.balancer, balancer)
                && (Arc::ptr_eq(&t.members, &members) || *t.members == *members)
        }) {
            return t.picker.clone();
        }
        let picker: Arc<dyn Picker> =
            Arc::from(balancer.prepare(&self.endpoints, members.clone(), SystemTime::now()));
        let mut kept = lock();
        if kept.len() >= COMPUTED_TABLES {
            kept.remove(0);
        }
        kept.push(ComputedTable {
            balancer: balancer.clone(),
            members,
            picker: picker.clone(),
        });
        picker
    }

    /// The tables one method uses in each routed subset, given the balancer it uses when
    /// endpoint `i` is a subset's first member (`balancer_of(i)`; `None`: the directory's).
    /// Each balancer's tables are built once per snapshot, on first use here, and shared by
    /// every method that names it (balancers are told apart by identity: pass the same `Arc`
    /// for the same balancer). `None` when every subset uses the directory's own tables: the
    /// call path is then unchanged. O(endpoints + subsets) plus the builds; for the settings'
    /// resolution, never per call.
    pub fn balancing(
        &self,
        mut balancer_of: impl FnMut(usize) -> Option<Arc<dyn LoadBalance>>,
    ) -> Option<Arc<Balancing>> {
        let mut chosen: Vec<Option<Arc<dyn LoadBalance>>> = vec![None];
        let mut by_endpoint = Vec::with_capacity(self.endpoints.len());
        for i in 0..self.endpoints.len() {
            let slot = match balancer_of(i) {
                None => 0,
                Some(b) if same_balancer(&b, &self.balancer) => 0,
                Some(b) => match chosen
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| same_balancer(c, &b)))
                {
                    Some(at) => at,
                    None if chosen.len() < MAX_BALANCERS => {
                        chosen.push(Some(b));
                        chosen.len() - 1
                    }
                    None => {
                        tracing::warn!(service = %self.service, balancer = b.name(), max = MAX_BALANCERS,
                            "too many distinct balancers for one method; using the directory's");
                        0
                    }
                },
            };
            by_endpoint.push(slot as u8);
        }
        if by_endpoint.iter().all(|&s| s == 0) {
            return None;
        }
        let by_subset = self
            .routes
            .subsets()
            .iter()
            .map(|m| m.first().map_or(0, |&f| by_endpoint[f as usize]))
            .collect();
        let sets = chosen
            .into_iter()
            .map(|b| b.map(|b| self.picker_set(&b)))
            .collect();
        Some(Arc::new(Balancing {
            snapshot: self.id,
            sets,
            by_subset,
            by_endpoint: by_endpoint.into_boxed_slice(),
        }))
    }

    /// `balancer`'s tables for every routed subset: built on the first request, then shared.
    pub fn picker_set(&self, balancer: &Arc<dyn LoadBalance>) -> Arc<PickerSet> {
        let mut extra = self.extra.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = extra.iter().find(|s| same_balancer(&s.balancer, balancer)) {
            return set.clone();
        }
        let now = SystemTime::now();
        let set = Arc::new(PickerSet {
            balancer: balancer.clone(),
            pickers: self
                .routes
                .subsets()
                .iter()
                .map(|members| balancer.prepare(&self.endpoints, members.clone(), now))
                .collect(),
        });
        extra.push(set.clone());
        set
    }

    /// How many other balancers' tables this snapshot has built so far.
    pub fn extra_balancers(&self) -> usize {
        self.extra.lock().map_or(0, |e| e.len())
    }
}

/// The same balancer object (data pointers compared: two handles to one balancer may carry
/// different vtable pointers).
fn same_balancer(a: &Arc<dyn LoadBalance>, b: &Arc<dyn LoadBalance>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}
