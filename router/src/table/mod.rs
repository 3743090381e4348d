//! The per-snapshot route table: every rule compiled against one instance list and consumer,
//! and the chain unrolled into a small state machine over precomputed candidate subsets.
//!
//! A *state* is one candidate set (deduplicated); the tag stage maps a call to an initial
//! state, and each condition step maps a state to the next one when its *when* part matches
//! the call. Everything but the *when* checks and the tag lookup is done here, at build time.

mod build;
mod compile;
mod machine;
pub(crate) mod slow;
mod state;
mod step;
mod tag_stage;

pub use slow::SLOW_ROUTES;
pub use state::MAX_SUBSETS;

pub(crate) use build::ordered;
pub(crate) use compile::provider_value;
pub(crate) use machine::{Machine, Trans};
pub(crate) use step::{CompiledStep, StepKind};
