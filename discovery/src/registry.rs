use std::fmt;
use std::sync::Arc;

use switchman_core::{BoxFuture, Instance, Result, ServiceKey};

use crate::Configurator;
use tokio::sync::mpsc;

/// What a registry adapter tells the directory. Modeled on linkerd's `Update`: a full
/// [`Update::Reset`] after every (re)connect or full push keeps "this is the whole list" apart
/// from deltas.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Update {
    /// The complete current list (replaces everything).
    ///
    /// Instances are shared: an adapter that hands the same `Arc` again for an instance that
    /// did not change (the built-in ones keep what they parsed) lets the directory recognise
    /// it by pointer, without comparing it field by field, and the directory keeps that `Arc`
    /// instead of copying. [`Update::reset`] takes instances or `Arc`s.
    Reset(Vec<Arc<Instance>>),
    /// Instances added or changed (matched by endpoint key, [`Instance::key`]: address,
    /// protocol and service key). [`Update::add`] takes instances or `Arc`s.
    Add(Vec<Arc<Instance>>),
    /// Endpoints removed, each named by its [`Instance::key`]; a bare address (`host:port`)
    /// removes every endpoint at that address.
    Remove(Vec<String>),
    /// A routing rule (Dubbo config-centre key such as `{app}.condition-router` or
    /// `{interface}:{version}:{group}.condition-router`, `{app}.tag-router`) was set
    /// (`Some(text)`) or deleted (`None`). The directory validates it; a bad rule is logged and
    /// the previous rules stay in force.
    Rule {
        /// The rule's config-centre key.
        key: String,
        /// The rule text (v2 condition text or YAML), `None` when deleted.
        text: Option<String>,
    },
    /// The complete current set of override rules from one `source` (for example
    /// `/dubbo/com.foo.Bar/configurators` or a config-centre key); replaces that source's
    /// earlier rules. An empty list clears them.
    Configurators {
        /// Where the rules come from; rules of different sources are kept side by side.
        source: String,
        /// The rules, already parsed and validated.
        rules: Vec<Configurator>,
    },
    /// What an adapter with application-level discovery decided from (sent when it changes):
    /// kept by the directory for [`crate::RegistryDirectory::lists`], no snapshot of its own.
    Lists(crate::migration::Lists),
    /// Under Dubbo's `APPLICATION_FIRST` with the application level in use: the
    /// interface-level list that calls fall back to, and the share of calls that stay (see
    /// [`crate::migration`]); `None` when calls do not fall back. The directory keeps a
    /// second snapshot of it ([`crate::contracts::Directory::fallback`]).
    Fallback(Option<crate::migration::Fallback>),
}

impl Update {
    /// [`Update::Reset`] of `list`: [`Instance`]s or `Arc<Instance>`s.
    pub fn reset<I: Into<Arc<Instance>>>(list: impl IntoIterator<Item = I>) -> Self {
        Update::Reset(list.into_iter().map(Into::into).collect())
    }

    /// [`Update::Add`] of `list`: [`Instance`]s or `Arc<Instance>`s.
    pub fn add<I: Into<Arc<Instance>>>(list: impl IntoIterator<Item = I>) -> Self {
        Update::Add(list.into_iter().map(Into::into).collect())
    }
}

/// The receiving end of a subscription. Dropping it ends the adapter's watch.
pub type UpdateReceiver = mpsc::Receiver<Update>;

/// A service registry: ZooKeeper, Nacos, a static list... Adapters parse registry data once
/// into [`Instance`]s at the edge and emit [`Update`]s; nothing past the directory sees a URL
/// string or a registry client type.
pub trait Registry: Send + Sync + fmt::Debug {
    /// Subscribes to the providers of `service`. The first message should be a
    /// [`Update::Reset`] with the current list; later ones carry what changed
    /// ([`Update::Add`], [`Update::Remove`]; the built-in adapters diff the whole lists their
    /// registries hand them) or a new `Reset`.
    ///
    /// Adapters return the receiver at once, even while the registry is unreachable, and keep
    /// (re)connecting in the background, sending a fresh `Reset` after every (re)connect; the
    /// directory meanwhile serves its last snapshot or its snapshot cache. An `Err` means the
    /// request itself is invalid (a bad service key, bad credentials in the address).
    fn subscribe<'a>(&'a self, service: &'a ServiceKey) -> BoxFuture<'a, Result<UpdateReceiver>>;

    /// Makes a consumer of `service` visible where the registry shows consumers, as a Java
    /// Dubbo consumer is (`consumer` is its `consumer://host/interface?application=...` URL):
    /// ZooKeeper writes the ephemeral `/dubbo/{interface}/consumers/{encoded URL}` node and keeps
    /// it across sessions until [`Registry::unregister_consumer`]. Registries where Dubbo shows
    /// no consumers by default (Nacos, a static list) do nothing: the default.
    fn register_consumer<'a>(
        &'a self,
        service: &'a ServiceKey,
        consumer: &'a switchman_core::Url,
    ) -> BoxFuture<'a, Result<()>> {
        let _ = (service, consumer);
        Box::pin(async { Ok(()) })
    }

    /// Removes what [`Registry::register_consumer`] made visible.
    fn unregister_consumer<'a>(
        &'a self,
        service: &'a ServiceKey,
        consumer: &'a switchman_core::Url,
    ) -> BoxFuture<'a, Result<()>> {
        let _ = (service, consumer);
        Box::pin(async { Ok(()) })
    }

    /// The definition (methods and their Java parameter types) that the provider application
    /// `application` published for `service` in the registry's metadata report, as Java Dubbo
    /// 3 providers do by default (ZooKeeper `/dubbo/metadata/{interface}/.../provider/{app}`,
    /// the Nacos config `{interface}:{version}:{group}:provider:{app}`); `None` when there is
    /// none. Read only on rare paths (a call whose signature the provider lacks). Registries
    /// without a metadata report answer `None`: the default.
    fn service_definition<'a>(
        &'a self,
        service: &'a ServiceKey,
        application: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::metadata::ServiceDefinition>>> {
        let _ = (service, application);
        Box::pin(async { Ok(None) })
    }
}

/// The provider side of a registry: makes an instance visible to consumers.
///
/// `register` publishes the instance in the registry's own layout (for ZooKeeper the ephemeral
/// `/dubbo/{interface}/providers/{encoded URL}` node Java Dubbo writes; for Nacos an ephemeral
/// instance) and keeps it there across reconnects and session expiry until `unregister`.
pub trait Registrar: Send + Sync + fmt::Debug {
    /// Publishes `instance`.
    fn register<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, Result<()>>;
    /// Removes `instance`.
    fn unregister<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, Result<()>>;
}
