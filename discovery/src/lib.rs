//! Service discovery: registries push typed [`Update`]s into a [`RegistryDirectory`], which
//! owns the instance state in one task and publishes immutable [`Snapshot`]s through
//! `arc-swap`.
//!
//! ```text
//! registry adapter ──Update──► directory task ──ArcSwap::store──► Snapshot (epoch n)
//!   (parse once)                (diff, empty-list policy,          ▲
//!                                router + balancer tables)         │ load() per call, no lock
//! ```
//!
//! Everything that depends only on the instance list (route subsets, balancer tables) is built
//! in the directory task when something changes; a call does one atomic load plus
//! [`Snapshot::select`].
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod address;
pub mod cache;
pub mod configurator;
mod connect;
pub mod contracts;
mod deltas;
mod directory;
#[doc(hidden)]
pub mod fuzzing;
pub mod metadata;
pub mod migration;
#[cfg(feature = "nacos")]
pub mod nacos;
pub mod override_parse;
pub mod published;
mod registry;
mod rules_file;
mod snapshot;
pub mod static_registry;
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
mod tls_relay;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

pub use configurator::Configurator;
pub use connect::{registrar_from_url, registry_from_url, registry_with_cache};
pub use contracts::Directory;
pub use directory::{
    DEFAULT_DRAIN_GRACE, DirectoryConfig, DirectoryUpdater, EmptyPolicy, FixedDirectory,
    RegistryDirectory,
};
pub use published::{LocalReads, Published};
pub use registry::{Registrar, Registry, Update, UpdateReceiver};
pub use rules_file::{RulesFileWatch, watch_rules_file};
pub use snapshot::{Balancing, MAX_BALANCERS, PickerSet, Routed, Snapshot};
pub use static_registry::StaticRegistry;
