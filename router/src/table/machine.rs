//! The state machine a route table runs: states, the tag stage, the compiled steps and the
//! transitions between states, and the slow path for transitions not precomputed.

use std::sync::Arc;

use switchman_core::Invocation;

use super::state::{State, StateId};
use super::step::CompiledStep;
use super::tag_stage::TagStage;
use crate::bitset::Bitset;

#[derive(Debug, Clone)]
pub(crate) enum Trans {
    To(StateId),
    /// Cumulative weights and targets; at least two.
    Weighted(Box<[(u64, StateId)]>),
    /// Not precomputed (state cap reached): evaluate with bitsets.
    Slow,
}

/// The state machine.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) n: usize,
    pub(crate) states: Vec<State>,
    pub(crate) tag: TagStage,
    pub(crate) steps: Vec<CompiledStep>,
    pub(crate) trans: Vec<Box<[Trans]>>,
    pub(crate) subsets: Vec<Arc<[u32]>>,
    pub(crate) trivial: bool,
    /// The sets computed on the slow path, by what they depend on (`slow.rs`).
    pub(crate) slow: Arc<super::slow::SlowRoutes>,
}

impl Machine {
    /// Evaluates the remaining steps from `start_step` with bitsets (the slow path).
    pub(crate) fn evaluate_from(
        &self,
        start_step: usize,
        set: Bitset,
        inv: &Invocation,
        pick: &mut dyn FnMut(u64) -> u64,
    ) -> Result<Bitset, &str> {
        let mut set = set;
        for step in &self.steps[start_step..] {
            if !step.when_matches(inv) {
                continue;
            }
            if let Some(next) = step.apply(&set, pick)? {
                set = next;
            }
        }
        Ok(set)
    }
}
