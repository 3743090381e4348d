//! The cluster crate's integration tests, one binary (one link step). `balancing_alloc.rs`
//! (a counting global allocator) and `telemetry.rs` (a process-wide tracing subscriber) stay
//! binaries of their own.

mod directory_contract;
mod endpoint_stacks;
mod http;
mod http_no_provider;
mod https;
