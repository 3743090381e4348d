//! What a subscription must read again ([`Dirty`]), what it last sent ([`Sent`]), and
//! sending to its receiver.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use switchman_core::Instance;
use tokio::sync::mpsc;

use crate::deltas::Deltas;
use crate::migration::MigrationState;
use crate::zookeeper::app;
use crate::zookeeper::nodes::ParsedProviders;
use crate::{Configurator, Update};

/// What must be read again.
#[derive(Debug, Default)]
pub(super) struct Dirty {
    pub(super) providers: bool,
    pub(super) configurators: bool,
    pub(super) routers: bool,
    pub(super) app_level: bool,
    /// Every application-level node must be read again (new session, reconnect).
    pub(super) app_full: bool,
    /// Application-level nodes that events named.
    pub(super) app_paths: BTreeSet<String>,
    pub(super) rules: BTreeSet<String>,
    pub(super) all_rules: bool,
    /// The migration rule node must be read again.
    pub(super) migration: bool,
    /// The migration step must be decided again (a delayed step change is due).
    pub(super) decide: bool,
}

impl Dirty {
    pub(super) fn everything() -> Self {
        Dirty {
            providers: true,
            configurators: true,
            routers: true,
            app_level: true,
            app_full: true,
            app_paths: BTreeSet::new(),
            rules: BTreeSet::new(),
            all_rules: true,
            migration: true,
            decide: false,
        }
    }

    pub(super) fn any(&self) -> bool {
        self.providers
            || self.configurators
            || self.routers
            || self.app_level
            || self.all_rules
            || self.migration
            || self.decide
            || !self.rules.is_empty()
    }
}

/// What was last sent, so only changes are sent again.
#[derive(Debug, Default)]
pub(super) struct Sent {
    pub(super) interface_level: Vec<Arc<Instance>>,
    pub(super) app_level: Vec<Arc<Instance>>,
    /// The decision last reported (`Update::Lists`), with application-level discovery.
    pub(super) lists: Option<crate::migration::Lists>,
    /// Application instances, their revisions and metadata read so far.
    pub(super) app: app::AppLevel,
    /// Provider nodes parsed so far.
    pub(super) parsed: ParsedProviders,
    /// The merged list last sent: later lists go out as what changed.
    pub(super) deltas: Deltas,
    pub(super) configurators: BTreeMap<String, Vec<Configurator>>,
    pub(super) rules: BTreeMap<String, Option<String>>,
    /// Rules from the legacy `/dubbo/{interface}/routers` children, by rule key.
    pub(super) routers: BTreeMap<String, String>,
    pub(super) apps: BTreeSet<String>,
    pub(super) no_auth_reported: bool,
    /// The migration step (application-level discovery on); `None` with `app-level=false`
    /// and for interface `*`.
    pub(super) migration: Option<MigrationState>,
}

/// The receiver is gone.
pub(super) struct Stop;

pub(super) async fn send(tx: &mpsc::Sender<Update>, u: Update) -> Result<(), Stop> {
    tx.send(u).await.map_err(|_| Stop)
}
