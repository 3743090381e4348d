//! The call plan: one directory snapshot compiled for calls, off the call path.
//!
//! A [`Plan`] is a snapshot with what every call under it needs already resolved: the
//! settings of every method with settings of its own (and the service's for the others), each
//! endpoint's limits from its own registration (timeout, `actives`, `sticky`), the balancer
//! tables of every balancer the settings name, and the sum of the `actives` caps. The
//! resolution is built once per snapshot, by the first call that sees the snapshot, and shared
//! by every call after; a call takes its plan once and goes strictly downward from it (route,
//! pick, attempt) without resolving anything again.
//!
//! The cache keeps the resolution, not the snapshot: a plan pairs it with the directory's
//! current snapshot, so no cache keeps a snapshot (and the clients of endpoints that left it)
//! alive after the directory has moved on.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use switchman_discovery::{Balancing, Directory, LocalReads, Published, Snapshot};
use switchman_loadbalance::LoadBalance;

use crate::config::{
    BalancerSpec, ClusterConfig, Dynamic, Effective, Limits, ProviderKeys, equivalent,
};
use crate::telemetry::{Metrics, SeriesRef, SeriesTable};

/// One snapshot with the settings of every method resolved for it (see the module docs).
///
/// What a strategy routes and picks in: [`Call::plan`](crate::Call::plan) gives the plan the
/// call started with, [`Call::relist`](crate::Call::relist) the current one.
#[derive(Clone)]
pub struct Plan {
    snapshot: Arc<Snapshot>,
    resolved: Arc<Resolved>,
}

thread_local! {
    /// Each thread's last resolution per planner slot (see [`Published`]).
    static RESOLVED_READS: RefCell<LocalReads<Resolved>> =
        const { RefCell::new(LocalReads::new()) };
}

/// Every method's settings resolved for one snapshot.
struct Resolved {
    /// The [`Snapshot::id`] resolved for.
    snapshot: u64,
    default: Arc<Effective>,
    methods: HashMap<String, Arc<Effective>>,
    /// The metrics series of the methods called under this resolution.
    series: SeriesTable,
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("service", self.snapshot.service())
            .field("epoch", &self.snapshot.epoch())
            .field("endpoints", &self.snapshot.endpoints().len())
            .field("methods", &self.resolved.methods.len())
            .finish()
    }
}

impl Plan {
    /// The snapshot this plan was built for.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// The metrics series of `method`, from `metrics` the first time it is called under this
    /// plan's resolution, then borrowed from it.
    #[inline]
    pub(crate) fn series<'p>(&'p self, metrics: &Metrics, method: &str) -> SeriesRef<'p> {
        self.resolved.series.get(metrics, method)
    }

    /// The settings of `method` under this plan (a map lookup).
    pub fn settings(&self, method: &str) -> &Arc<Effective> {
        let r = &*self.resolved;
        r.methods.get(method).unwrap_or(&r.default)
    }

    /// The timeout, `actives` cap and stickiness of a call of `method` with `settings` to
    /// endpoint `i`: read from `settings` when they were resolved for this plan (an array
    /// read; a call's settings are, unless a strategy re-listed), else from this plan's own
    /// settings of `method`. A forced (attachment) timeout in `settings` applies to every
    /// endpoint.
    #[inline(always)]
    pub(crate) fn limits(&self, settings: &Effective, method: &str, i: usize) -> Limits {
        let mut l = match settings.limits_at(self.snapshot.id(), i) {
            Some(l) => l,
            None => self.own_limits(method, i),
        };
        if settings.timeout_forced {
            l.timeout = settings.timeout;
        }
        l
    }

    /// [`Plan::limits`] from this plan's own settings of `method` (a call's settings
    /// resolved for another plan: a strategy re-listed).
    #[inline(never)]
    fn own_limits(&self, method: &str, i: usize) -> Limits {
        let own = self.settings(method);
        own.limits_at(self.snapshot.id(), i)
            .unwrap_or_else(|| own.base_limits())
    }

    /// The balancer tables a call of `method` with `settings` uses (`None`: the directory's).
    #[inline]
    pub(crate) fn balancing<'a>(
        &'a self,
        settings: &'a Effective,
        method: &str,
    ) -> Option<&'a Balancing> {
        let id = self.snapshot.id();
        match settings.balancing_at(id) {
            Some(b) => b,
            None => self.settings(method).balancing_at(id).flatten(),
        }
    }

    /// The sum of the endpoints' `actives` caps; `None` when some endpoint has none.
    pub(crate) fn capacity(&self) -> Option<u64> {
        self.resolved
            .default
            .capacity_at(self.snapshot.id())
            .flatten()
    }
}

/// Builds plans and keeps the current one: the consumer's settings, the balancer objects of
/// the balancer settings seen (so that methods naming one share its tables), and the plan of
/// the newest snapshot built so far.
pub(crate) struct Planner {
    config: ClusterConfig,
    /// The resolution of the newest snapshot, from the first plan on.
    current: OnceLock<Published<Resolved>>,
    /// The resolution of the `APPLICATION_FIRST` fallback's newest snapshot (a second slot,
    /// so that calls alternating between both levels resolve neither again).
    fallback: OnceLock<Published<Resolved>>,
    /// Locked only while a plan is built.
    balancers: Mutex<Vec<(BalancerSpec, Arc<dyn LoadBalance>)>>,
}

/// Most balancer settings remembered (each distinct `loadbalance`/`hash.*` combination the
/// consumer or a provider names); past it, a balancer is built for the plan at hand.
const MAX_BALANCER_SPECS: usize = 64;

impl Planner {
    pub(crate) fn new(config: ClusterConfig) -> Self {
        Planner {
            config,
            current: OnceLock::new(),
            fallback: OnceLock::new(),
            balancers: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The plan of `directory`'s current snapshot: the resolution built already (an owned
    /// reference for one atomic read-modify-write when this thread read it before, see
    /// [`Published`]), or built now by the first call to see the snapshot.
    #[inline]
    pub(crate) fn current(&self, directory: &dyn Directory) -> Plan {
        self.plan_in(&self.current, directory.load())
    }

    /// The plan of `snapshot`, the `APPLICATION_FIRST` fallback's (its own cache slot).
    #[inline]
    pub(crate) fn fallback(&self, snapshot: Arc<Snapshot>) -> Plan {
        self.plan_in(&self.fallback, snapshot)
    }

    /// The plan of `snapshot` with the resolution cached in `slot`, or built now.
    #[inline]
    fn plan_in(&self, slot: &OnceLock<Published<Resolved>>, snapshot: Arc<Snapshot>) -> Plan {
        match slot.get().map(|p| p.load_local(&RESOLVED_READS)) {
            Some(resolved) if resolved.snapshot == snapshot.id() => Plan { snapshot, resolved },
            cached => self.resolve_into(slot, cached, snapshot),
        }
    }

    /// [`Planner::plan_in`] for a snapshot not resolved yet: resolves it, and keeps the
    /// resolution in `slot` unless a newer one is there.
    #[cold]
    fn resolve_into(
        &self,
        slot: &OnceLock<Published<Resolved>>,
        cached: Option<Arc<Resolved>>,
        snapshot: Arc<Snapshot>,
    ) -> Plan {
        let resolved = Arc::new(self.resolve(&snapshot));
        match slot.get() {
            None => {
                // Another call's first plan may have got there first: then it stays.
                let _ = slot.set(Published::new(resolved.clone()));
            }
            // An older snapshot (read before a change) does not replace a newer resolution.
            Some(p) if cached.is_none_or(|c| c.snapshot < resolved.snapshot) => {
                p.swap(resolved.clone());
            }
            Some(_) => {}
        }
        Plan { snapshot, resolved }
    }

    /// Resolves every method's settings for `snap` (each endpoint's registration read once,
    /// the balancer tables the settings name built or shared).
    fn resolve(&self, snap: &Snapshot) -> Resolved {
        let id = snap.id();
        let providers: Vec<ProviderKeys> = snap
            .endpoints()
            .iter()
            .map(|e| {
                ProviderKeys::parse(e.instance.params()).protocol(e.instance.protocol().as_str())
            })
            .collect();
        // What consumer rules set for this consumer, over its own settings.
        let dynamic = Dynamic::parse(snap.consumer_overrides(), snap.service());
        // The balancer of each distinct spec, looked up once for this plan (endpoints and
        // methods mostly share one or two specs).
        let mut memo: Vec<(BalancerSpec, Option<Arc<dyn LoadBalance>>)> = Vec::new();
        let mut with_tables = |method: Option<&str>| {
            let mut e = self
                .config
                .resolve_for_snapshot_with(method, id, &providers, &dynamic);
            if let Some(r) = e.resolved_for.as_mut()
                && let Some(specs) = r.specs.clone()
            {
                r.balancing = snap.balancing(|i| {
                    let spec = specs.get(i)?;
                    if let Some((_, b)) = memo.iter().find(|(s, _)| s == spec) {
                        return b.clone();
                    }
                    let b = self.balancer_for(spec, snap.balancer());
                    if memo.len() < MAX_BALANCER_SPECS {
                        memo.push((spec.clone(), b.clone()));
                    }
                    b
                });
            }
            Arc::new(e)
        };
        let methods = self
            .config
            .method_names(&providers, &dynamic)
            .into_iter()
            .map(|m| {
                let e = with_tables(Some(&m));
                (m, e)
            })
            .collect();
        let default = with_tables(None);
        Resolved {
            snapshot: id,
            default,
            methods,
            series: SeriesTable::default(),
        }
    }

    /// The balancer object for `spec` (`None`: the directory's `directory` builds the same
    /// tables), the same one every time for the same spec so that a plan shares its tables
    /// across the methods naming it.
    fn balancer_for(
        &self,
        spec: &BalancerSpec,
        directory: &Arc<dyn LoadBalance>,
    ) -> Option<Arc<dyn LoadBalance>> {
        if spec.is_directory() {
            return None;
        }
        let b = {
            let mut known = self.balancers.lock().unwrap_or_else(|e| e.into_inner());
            match known.iter().find(|(s, _)| s == spec) {
                // The directory's balancer may have changed since (set_balancer).
                Some((_, b)) if spec.build_needs(directory) => b.clone(),
                Some(_) => return None,
                None => {
                    let built = spec.build(directory)?;
                    if known.len() < MAX_BALANCER_SPECS {
                        known.push((spec.clone(), built.clone()));
                    }
                    built
                }
            }
        };
        (!equivalent(&b, directory)).then_some(b)
    }
}
