use std::fmt;

use switchman_core::{BoxFuture, Instance, Result, ServiceKey};
use tokio::sync::mpsc;

/// What a registry adapter tells the directory. Modeled on linkerd's `Update`: a full
/// [`Update::Reset`] after every (re)connect or full push keeps "this is the whole list" apart
/// from deltas.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// The complete current list (replaces everything).
    Reset(Vec<Instance>),
    /// Instances added or changed (matched by address).
    Add(Vec<Instance>),
    /// Addresses (`host:port`) removed.
    Remove(Vec<String>),
}

/// The receiving end of a subscription. Dropping it ends the adapter's watch.
pub type UpdateReceiver = mpsc::Receiver<Update>;

/// A service registry: ZooKeeper, Nacos, a static list... Adapters parse registry data once
/// into [`Instance`]s at the edge and emit [`Update`]s; nothing past the directory sees a URL
/// string or a registry client type.
pub trait Registry: Send + Sync + fmt::Debug {
    /// Subscribes to the providers of `service`. The first message should be a
    /// [`Update::Reset`] with the current list.
    fn subscribe<'a>(&'a self, service: &'a ServiceKey) -> BoxFuture<'a, Result<UpdateReceiver>>;
}
