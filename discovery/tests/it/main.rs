//! The discovery crate's integration tests, one binary (one link step): untrusted registry
//! data (the proptest twins of `fuzz/`) and YAML bombs. `hostile_tags.rs` stays a binary of
//! its own: it counts allocations with a global allocator.

mod untrusted_input;
mod yaml_bombs;
