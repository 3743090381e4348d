use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use switchman_core::{Error, ErrorKind, Instance, Invocation, ServiceKey};
use switchman_loadbalance::{Endpoint, LoadBalance, PickContext, Picker, pick_untried};
use switchman_router::{ConsumerInfo, Route, RouteTable, RouterChain};

/// One immutable view of a service: its instances, the router chain's precomputed state and
/// one balancer table per routed subset. Published by the directory; read per call with one
/// atomic load.
pub struct Snapshot {
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
    /// True when the registry's list is empty but the empty-list protection kept the previous
    /// one.
    protected: bool,
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
/// A set of addresses (see [`AddrMap`]).
pub(crate) type AddrSet = HashSet<Arc<str>, foldhash::fast::RandomState>;

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
        let pickers = routes
            .subsets()
            .iter()
            .map(|members| p.balancer.prepare(&p.endpoints, members.clone(), p.now))
            .collect();
        Snapshot {
            epoch: p.epoch,
            service: p.service.clone(),
            all: p.all,
            endpoints: p.endpoints,
            index,
            routes,
            pickers,
            balancer: p.balancer.clone(),
            protected: p.protected,
        }
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
        })
    }

    /// Monotonically increasing version; 0 before the first registry update.
    pub fn epoch(&self) -> u64 {
        self.epoch
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
        if self.endpoints.is_empty() {
            return Err(Error::no_provider(format!(
                "no available provider for {} (directory epoch {})",
                self.service, self.epoch
            )));
        }
        match self.routes.route(invocation, rng) {
            Route::Subset(i) => Ok(self
                .routes
                .subsets()
                .get(i)
                .cloned()
                .unwrap_or_else(|| Arc::from(Vec::new()))),
            Route::Computed(members) => Ok(members),
            Route::Forbidden(rule) => Err(Error::new(
                ErrorKind::Forbidden,
                format!(
                    "routing rule {rule} leaves no provider of {} for {}",
                    self.service, invocation.method
                ),
            )),
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
        if self.endpoints.is_empty() {
            return Err(Error::no_provider(format!(
                "no available provider for {} (directory epoch {})",
                self.service, self.epoch
            )));
        }
        let ctx = PickContext { invocation, tried };
        let picked = match self.routes.route(invocation, rng) {
            Route::Subset(i) => self
                .pickers
                .get(i)
                .and_then(|p| pick_untried(p.as_ref(), &self.endpoints, &ctx, rng)),
            Route::Computed(members) => {
                let picker = self
                    .balancer
                    .prepare(&self.endpoints, members, SystemTime::now());
                pick_untried(picker.as_ref(), &self.endpoints, &ctx, rng)
            }
            Route::Forbidden(rule) => {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    format!(
                        "routing rule {rule} leaves no provider of {} for {}",
                        self.service, invocation.method
                    ),
                ));
            }
        };
        picked.ok_or_else(|| {
            Error::new(
                ErrorKind::Forbidden,
                format!(
                    "routing leaves no provider of {} for method {}",
                    self.service, invocation.method
                ),
            )
        })
    }
}
