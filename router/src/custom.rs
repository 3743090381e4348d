//! Routers of your own (Dubbo's custom `StateRouter`), split as the rules are: what depends
//! on the instance list is prepared once per snapshot, a call only chooses.
//!
//! A [`Router`] prepares, for one instance list and consumer, a [`RouterStage`]: a few fixed
//! candidate sets ([`RouterStage::sets`]) and a per-call choice among them
//! ([`RouterStage::route`]). The chain runs the stages after its rules, in the order they were
//! added, each narrowing the rules' result to the intersection with the chosen set. Every
//! intersection is computed when the table is built, so a call stays a lookup: no allocation,
//! no lock, no work over the instances (past [`MAX_ROUTER_SUBSETS`] extra sets, the rest are
//! intersected per call, allocating).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use switchman_core::{Instance, Invocation};

use crate::{ConsumerInfo, Route};

/// The most candidate sets one stage may declare; those past it are ignored.
pub const MAX_ROUTER_SETS: usize = 64;

/// The most subsets the stages of one table add to the rules' own; an intersection past it is
/// computed per call instead of being prepared (the snapshot keeps a balancer table per subset).
pub const MAX_ROUTER_SUBSETS: usize = 256;

/// The most indexes the intersections of one table's stages read when it is built (about a
/// tenth of a second); those past it are intersected per call instead.
const MAX_BUILD_WORK: usize = 1 << 26;

/// A router of your own, added to a chain with
/// [`RouterChain::with_router`](crate::RouterChain::with_router).
///
/// ```
/// use std::sync::Arc;
/// use switchman_core::{Instance, Invocation};
/// use switchman_router::{ConsumerInfo, Route, Router, RouterChain, RouterStage};
///
/// /// Sends a call with the attachment `zone=z` to the providers in zone `z`.
/// #[derive(Debug)]
/// struct ByZone;
///
/// #[derive(Debug)]
/// struct Zones {
///     names: Vec<String>,
///     sets: Vec<Vec<u32>>,
/// }
///
/// impl Router for ByZone {
///     fn name(&self) -> &str {
///         "by-zone"
///     }
///     fn prepare(&self, instances: &[Arc<Instance>], _: &ConsumerInfo) -> Box<dyn RouterStage> {
///         let mut zones = Zones { names: Vec::new(), sets: Vec::new() };
///         for (i, inst) in instances.iter().enumerate() {
///             let zone = inst.param("zone").unwrap_or("").to_string();
///             match zones.names.iter().position(|z| *z == zone) {
///                 Some(k) => zones.sets[k].push(i as u32),
///                 None => {
///                     zones.names.push(zone);
///                     zones.sets.push(vec![i as u32]);
///                 }
///             }
///         }
///         Box::new(zones)
///     }
/// }
///
/// impl RouterStage for Zones {
///     fn sets(&self) -> &[Vec<u32>] {
///         &self.sets
///     }
///     fn route(&self, invocation: &Invocation) -> Option<usize> {
///         let zone = invocation.attachment("zone")?;
///         self.names.iter().position(|z| z == zone)
///     }
/// }
///
/// let chain = RouterChain::new().with_router(Arc::new(ByZone));
/// let instances: Vec<Arc<Instance>> = (1..=3)
///     .map(|i| {
///         let zone = if i == 2 { "b" } else { "a" };
///         Arc::new(Instance::builder(format!("10.0.0.{i}"), 20880).param("zone", zone).build())
///     })
///     .collect();
/// let table = chain.build(&instances, &ConsumerInfo::new("10.0.9.9", "shop"));
/// let mut rng = fastrand::Rng::with_seed(1);
/// let call = Invocation::new("find").with_attachment("zone", "b");
/// let Route::Subset(i) = table.route(&call, &mut rng) else { panic!() };
/// assert_eq!(&*table.subsets()[i], &[1]);
/// ```
pub trait Router: Send + Sync + fmt::Debug {
    /// The router's name, in logs and in the refusal of a call it leaves without providers.
    /// A chain holds one router per name.
    fn name(&self) -> &str;

    /// Prepares the stage for `instances` (the snapshot's providers, in its order) and the
    /// consumer: called when a snapshot's routes are built, never per call.
    fn prepare(&self, instances: &[Arc<Instance>], consumer: &ConsumerInfo)
    -> Box<dyn RouterStage>;
}

/// A [`Router`] prepared for one instance list.
pub trait RouterStage: Send + Sync + fmt::Debug {
    /// The candidate sets a call may be narrowed to: indexes into the instance list the stage
    /// was prepared for. Read once, when the table is built: indexes out of range are dropped,
    /// the order and duplicates do not matter, and sets past [`MAX_ROUTER_SETS`] are ignored.
    fn sets(&self) -> &[Vec<u32>];

    /// Per call (must not allocate, lock or scan the instances): `Some(k)` keeps only the
    /// candidates in `sets()[k]`; `None` leaves them as they are. A `k` past the sets refuses
    /// the call with an error naming the router.
    fn route(&self, invocation: &Invocation) -> Option<usize>;
}

/// What a stage does to one subset for one of its sets.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// The intersection is this subset of the table.
    Subset(usize),
    /// The intersection is empty.
    Empty,
    /// Over [`MAX_ROUTER_SUBSETS`]: intersected per call.
    Compute,
}

/// One prepared stage and its transitions.
struct Stage {
    stage: Box<dyn RouterStage>,
    /// Its sets, sorted and within range.
    sets: Vec<Arc<[u32]>>,
    /// `next[i][k]`: subset `i` narrowed to set `k`.
    next: Vec<Box<[Next]>>,
    /// The refusal of a call it leaves without providers.
    empty: Box<str>,
    /// The refusal of a call it answers with a set it did not declare.
    undeclared: Box<str>,
}

impl fmt::Debug for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stage")
            .field("stage", &self.stage)
            .field("sets", &self.sets.len())
            .finish_non_exhaustive()
    }
}

/// The stages of a table, and the subsets they add after the rules' own.
#[derive(Debug)]
pub(crate) struct Stages {
    stages: Vec<Stage>,
    /// The rules' subsets, then the stages' (what [`RouteTable::subsets`](crate::RouteTable::subsets) shows).
    pub(crate) subsets: Vec<Arc<[u32]>>,
}

/// The sorted, deduplicated members of `set` below `n`.
fn clean(set: &[u32], n: usize) -> Arc<[u32]> {
    let mut v: Vec<u32> = set.iter().copied().filter(|&i| (i as usize) < n).collect();
    v.sort_unstable();
    v.dedup();
    v.into()
}

/// The intersection of two ascending index lists.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

impl Stages {
    /// Prepares `routers` for `instances` over the rules' `subsets`.
    pub(crate) fn build(
        routers: &[Arc<dyn Router>],
        instances: &[Arc<Instance>],
        consumer: &ConsumerInfo,
        subsets: &[Arc<[u32]>],
    ) -> Stages {
        let n = instances.len();
        let mut all: Vec<Arc<[u32]>> = subsets.to_vec();
        let mut known: HashMap<Arc<[u32]>, usize> = all
            .iter()
            .enumerate()
            .map(|(i, s)| (s.clone(), i))
            .collect();
        let mut added = 0usize;
        let mut work = MAX_BUILD_WORK;
        let mut stages = Vec::with_capacity(routers.len());
        for router in routers {
            let stage = router.prepare(instances, consumer);
            let declared = stage.sets();
            let sets: Vec<Arc<[u32]>> = declared
                .iter()
                .take(MAX_ROUTER_SETS)
                .map(|s| clean(s, n))
                .collect();
            // Every subset known before this stage, narrowed by each of its sets.
            let before = all.len();
            let mut next = Vec::with_capacity(before);
            for i in 0..before {
                let row: Box<[Next]> = sets
                    .iter()
                    .map(|set| {
                        let cost = all[i].len() + set.len();
                        if cost > work {
                            return Next::Compute;
                        }
                        work -= cost;
                        let kept = intersect(&all[i], set);
                        if kept.is_empty() {
                            return Next::Empty;
                        }
                        let kept: Arc<[u32]> = kept.into();
                        if let Some(&k) = known.get(&kept) {
                            return Next::Subset(k);
                        }
                        if added == MAX_ROUTER_SUBSETS {
                            return Next::Compute;
                        }
                        added += 1;
                        all.push(kept.clone());
                        known.insert(kept, all.len() - 1);
                        Next::Subset(all.len() - 1)
                    })
                    .collect();
                next.push(row);
            }
            let name = router.name();
            stages.push(Stage {
                stage,
                sets,
                next,
                empty: format!("router {name} leaves no provider").into(),
                undeclared: format!("router {name} chose a candidate set it did not declare")
                    .into(),
            });
        }
        Stages {
            stages,
            subsets: all,
        }
    }

    /// The rules' result `route` narrowed by every stage.
    #[inline]
    pub(crate) fn route<'a>(&'a self, mut route: Route<'a>, invocation: &Invocation) -> Route<'a> {
        for s in &self.stages {
            let Some(k) = s.stage.route(invocation) else {
                continue;
            };
            let Some(set) = s.sets.get(k) else {
                return Route::Forbidden(&s.undeclared);
            };
            route = match route {
                Route::Subset(i) => match s.next.get(i).and_then(|row| row.get(k)) {
                    Some(Next::Subset(j)) => Route::Subset(*j),
                    Some(Next::Empty) => return Route::Forbidden(&s.empty),
                    // Past the cap, or a subset a later stage added (never for stage 0).
                    Some(Next::Compute) | None => match self.subsets.get(i) {
                        Some(members) => computed(members, set, &s.empty),
                        None => return Route::Forbidden(&s.undeclared),
                    },
                },
                Route::Computed(members) => computed(&members, set, &s.empty),
                forbidden @ Route::Forbidden(_) => return forbidden,
            };
            if let Route::Forbidden(_) = route {
                return route;
            }
        }
        route
    }
}

#[cold]
fn computed<'a>(members: &[u32], set: &[u32], empty: &'a str) -> Route<'a> {
    let kept = intersect(members, set);
    if kept.is_empty() {
        Route::Forbidden(empty)
    } else {
        Route::Computed(kept.into())
    }
}
