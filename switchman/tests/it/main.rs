//! The `switchman` crate's integration tests, one binary (one link step): the admin endpoint
//! and the `Reference` API over a static list, ZooKeeper, application-level discovery and the
//! load balancers. Only `admin` installs the process's metrics recorder.

mod admin;
mod demo_user;
mod interface_macro;
mod readme;
mod reference_app_level;
mod reference_loadbalance;
mod reference_signatures;
mod reference_static;
mod reference_tls_app_level;
mod reference_typed;
mod reference_zookeeper;
