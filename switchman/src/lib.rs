//! Switchman: Apache Dubbo's cluster layer for Rust consumers.
//!
//! One crate to depend on. It subscribes to registries (ZooKeeper and Nacos behind the
//! features `zookeeper` and `nacos`, or a static list), keeps an always-current, atomically
//! swapped view of every provider, routes each call through condition and tag rules, picks an
//! instance with a load balancer and makes the call fault tolerant, over dubbo:// (Hessian2),
//! Triple or HTTP.
//!
//! Start with [`Reference`], Dubbo's `ReferenceConfig`:
//!
//! ```no_run
//! # async fn demo() -> switchman::Result<()> {
//! use std::time::Duration;
//! use serde_json::json;
//!
//! let greeter = switchman::Reference::new("com.example.Greeter")
//!     .registry("zookeeper://127.0.0.1:2181")
//!     .group("g1")
//!     .version("1.0.0")
//!     .cluster(switchman::Strategy::Failover)
//!     .retries(2)
//!     .timeout(Duration::from_millis(800))
//!     .connect()
//!     .await?; // waits for providers (Dubbo's check=true)
//! let reply = greeter.call("sayHello", json!(["world"])).await?;
//! # Ok(()) }
//! ```
//!
//! The stages are crates of their own, re-exported here: [`core`] (instances, invocations,
//! errors), [`discovery`] (registries and the directory), [`router`], [`loadbalance`],
//! [`cluster`] (strategies and the dubbo://, Triple and HTTP invokers) and [`hessian`].
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

#[cfg(feature = "admin")]
pub mod admin;
mod definitions;
#[cfg(feature = "idl")]
mod idl;
#[cfg(feature = "prometheus")]
mod prometheus;
mod reference;
mod typed;

pub use definitions::ReferenceFuture;
/// The replies of a server-streaming IDL call ([`Reference::call_idl_server_stream`]).
#[cfg(feature = "idl")]
pub use idl::Streaming;
#[cfg(feature = "prometheus")]
pub use prometheus::{install_metrics_recorder, serve_metrics};
pub use reference::{DEFAULT_WAIT, Reference, ReferenceBuilder, registered_as, registered_keys};
pub use typed::{JavaArgs, JavaInterface, JavaType};

/// A typed client from a Rust trait (the README's "Typed calls").
pub use switchman_macros::interface;
pub use typed::CallContext;

/// The protobuf runtime of IDL calls ([`Reference::call_idl`]); `switchman-build`'s generated
/// messages derive through it (feature `idl`).
#[cfg(feature = "idl")]
pub use prost;

/// The random number generator in the [`loadbalance::Picker`] signature.
pub use fastrand;
pub use switchman_cluster as cluster;
pub use switchman_core as core;
pub use switchman_discovery as discovery;
pub use switchman_hessian as hessian;
pub use switchman_loadbalance as loadbalance;
pub use switchman_router as router;

/// TLS settings for dubbo:// and Triple providers ([`ReferenceBuilder::tls`]).
pub use switchman_cluster::dubbo::ClientTls;
pub use switchman_cluster::{ClusterConfig, ClusterInvoker, ProtocolInvoker, Settings, Strategy};
pub use switchman_core::{Error, ErrorKind, Instance, Invocation, Invoker, Result, ServiceKey};
pub use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
/// A provider's Java exception (class, message, cause chain): the cause of a business [`Error`],
/// read with `error.cause::<JavaException>()`.
pub use switchman_hessian::JavaException;

/// The README's Rust examples, compiled as doctests so they stay true.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
