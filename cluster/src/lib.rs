//! The cluster layer: what one call does across the instances of a service.
//!
//! A [`ClusterInvoker`] loads the directory's snapshot once per attempt, routes and picks an
//! instance (no lock, no allocation on that path), calls it through an
//! [`Invoker`](switchman_core::Invoker) such as [`HttpInvoker`], and lets the configured
//! strategy decide what a failure means. Only retryable failures (transport, timeout) are
//! retried; a business error is the provider's answer and returns at once.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod config;
mod failover;
mod http_invoker;
#[cfg(feature = "provider")]
pub mod provider;

pub use config::{ClusterConfig, MAX_ATTEMPTS, Strategy};
pub use failover::ClusterInvoker;
pub use http_invoker::{HttpInvoker, RestRoute};

/// The README's Rust examples, compiled as doctests so they stay true.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
