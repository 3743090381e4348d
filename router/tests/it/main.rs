//! The router crate's integration tests, one binary (one link step): the chain's behaviour
//! through its public API, the cached path against a from-scratch reference (proptest), and
//! untrusted rule text (the proptest twins of `fuzz/`).

mod cached_vs_reference;
mod chain;
mod custom_routers;
mod untrusted_rules;
