//! The balancers' integration tests, one module per concern, in one test binary (one link step
//! instead of one per file). `zero_alloc` stays a binary of its own: it counts every
//! allocation of the process with a global allocator, which other tests running at the same
//! time would disturb.

#[path = "../common/mod.rs"]
mod common;
mod distribution;
mod dubbo_compat;
mod load_aware;
mod properties;
