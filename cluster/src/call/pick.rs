//! What routing hands a strategy: one routed endpoint ([`Pick`]) or a call's routed
//! candidates ([`Candidates`]), each borrowing the plan it was routed in.

use std::fmt;
use std::sync::Arc;

use switchman_core::Instance;
use switchman_loadbalance::Endpoint;

use switchman_discovery::Snapshot;

use crate::plan::Plan;

/// One routed endpoint of one plan: what an attempt is made on. Only routing hands them
/// out ([`Call::select`](super::Call::select), [`Call::peek`](super::Call::peek), [`Call::candidates`](super::Call::candidates)), and a pick borrows the
/// plan it came from, so it cannot be used with another plan (an attempt takes the pick
/// alone) or after its own is gone:
///
/// ```
/// use switchman_cluster::{Call, Pick, Plan};
///
/// // A pick lives as long as the plan it was routed in.
/// fn pick_in<'s>(call: &mut Call<'_>, plan: &'s Plan) -> Pick<'s> {
///     call.select(plan).expect("a provider")
/// }
/// ```
///
/// ```compile_fail,E0515
/// use switchman_cluster::{Call, Pick};
///
/// // Not longer: the plan is dropped at the end of the function.
/// fn keep(call: &mut Call<'_>) -> Pick<'static> {
///     let plan = call.relist();
///     call.select(&plan).expect("a provider")
/// }
/// ```
#[derive(Clone, Copy)]
pub struct Pick<'s> {
    pub(super) plan: &'s Plan,
    pub(super) index: usize,
}

impl fmt::Debug for Pick<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pick")
            .field("endpoint", &self.endpoint().instance.key())
            .field("epoch", &self.plan.snapshot().epoch())
            .finish()
    }
}

impl PartialEq for Pick<'_> {
    /// The same endpoint of the same plan.
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index && std::ptr::eq(self.plan, other.plan)
    }
}

impl Eq for Pick<'_> {}

impl<'s> Pick<'s> {
    pub(crate) fn new(plan: &'s Plan, index: usize) -> Self {
        debug_assert!(index < plan.snapshot().endpoints().len());
        Pick { plan, index }
    }

    /// The endpoint's index in [`Pick::snapshot`]'s `endpoints()`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The endpoint: the instance and its live statistics.
    pub fn endpoint(&self) -> &'s Endpoint {
        &self.plan.snapshot().endpoints()[self.index]
    }

    /// The instance.
    pub fn instance(&self) -> &'s Arc<Instance> {
        &self.endpoint().instance
    }

    /// The snapshot this pick was routed in.
    pub fn snapshot(&self) -> &'s Snapshot {
        self.plan.snapshot()
    }

    /// The plan this pick was routed in.
    pub fn plan(&self) -> &'s Plan {
        self.plan
    }
}

/// The routed candidates of one call in one plan, in address order (see
/// [`Call::candidates`](super::Call::candidates)).
#[derive(Clone)]
pub struct Candidates<'s> {
    pub(super) plan: &'s Plan,
    pub(super) members: Arc<[u32]>,
}

impl fmt::Debug for Candidates<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidates")
            .field("epoch", &self.plan.snapshot().epoch())
            .field("len", &self.members.len())
            .finish()
    }
}

impl<'s> Candidates<'s> {
    /// How many.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The `k`-th candidate.
    pub fn get(&self, k: usize) -> Option<Pick<'s>> {
        self.members
            .get(k)
            .map(|&i| Pick::new(self.plan, i as usize))
    }

    /// Every candidate, in address order.
    pub fn iter(&self) -> impl Iterator<Item = Pick<'s>> + '_ {
        let plan = self.plan;
        self.members
            .iter()
            .map(move |&i| Pick::new(plan, i as usize))
    }

    /// The endpoint indexes (into the plan's snapshot's `endpoints()`).
    pub(crate) fn indexes(&self) -> &[u32] {
        &self.members
    }
}
