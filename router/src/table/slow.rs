//! The slow path's memory. A call whose route the table could not precompute (more distinct
//! candidate sets than [`crate::MAX_SUBSETS`]) is routed with bitsets over every instance:
//! O(n) work and an allocation. What it gives depends only on where it started (the step and
//! the state the table reached) and on which of the remaining steps' *when* matched the call,
//! so the result is kept under exactly that, and a call of the same shape takes it from here:
//! O(steps), no O(n) work, no allocation. Results that involved a weighted draw (v3.1
//! destinations) are random and not kept; neither are refusals (rare: a forced empty result).

use std::sync::{Arc, Mutex, PoisonError};

use switchman_core::Invocation;

use super::state::StateId;
use super::step::CompiledStep;

/// How many computed sets one route table keeps (oldest out).
pub const SLOW_ROUTES: usize = 64;
/// A call matching more of the remaining steps than this is not kept (its key would not fit).
const MAX_MATCHED: usize = 4;

/// What a slow-path result depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlowKey {
    step: u32,
    state: StateId,
    matched: [u32; MAX_MATCHED],
    len: u8,
}

impl SlowKey {
    /// The key of a call entering the slow path at step `step` (of `steps`) in `state`;
    /// `None` when it matches more than four of the remaining steps.
    pub(crate) fn of(
        steps: &[CompiledStep],
        step: usize,
        state: StateId,
        inv: &Invocation,
    ) -> Option<SlowKey> {
        let mut key = SlowKey {
            step: u32::try_from(step).ok()?,
            state,
            matched: [0; MAX_MATCHED],
            len: 0,
        };
        for (j, s) in steps.iter().enumerate().skip(step) {
            if s.when_matches(inv) {
                let slot = key.matched.get_mut(usize::from(key.len))?;
                *slot = u32::try_from(j).ok()?;
                key.len += 1;
            }
        }
        Some(key)
    }
}

/// The computed sets of one route table (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct SlowRoutes {
    kept: Mutex<Vec<(SlowKey, Arc<[u32]>)>>,
}

impl SlowRoutes {
    pub(crate) fn get(&self, key: &SlowKey) -> Option<Arc<[u32]>> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().find(|(k, _)| k == key).map(|(_, s)| s.clone())
    }

    pub(crate) fn put(&self, key: SlowKey, set: Arc<[u32]>) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.iter().any(|(k, _)| *k == key) {
            return;
        }
        if kept.len() >= SLOW_ROUTES {
            kept.remove(0);
        }
        kept.push((key, set));
    }
}
