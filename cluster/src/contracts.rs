//! Every trait code outside Switchman implements, in one module: the discovery side (a
//! registry adapter and its `Update`s, a directory, a balancer, a metadata fetcher; see
//! [`switchman_discovery::contracts`], which depends on no adapter) and the cluster side (the
//! transport behind each attempt, a fault-tolerance strategy).

pub use crate::call::{Attempter, Call, Pick};
pub use crate::plan::Plan;
pub use crate::strategy::ClusterStrategy;
pub use switchman_core::{Invoker, MakeEndpoint};
pub use switchman_discovery::contracts::*;
