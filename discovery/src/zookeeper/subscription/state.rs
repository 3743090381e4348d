//! What a subscription must read again ([`Dirty`]), what it last sent ([`Sent`]), and
//! sending to its receiver.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

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
    /// The reads of the last re-list that failed (`what: error`); they stay dirty.
    pub(super) failed: Vec<String>,
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
            failed: Vec::new(),
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
    /// The `APPLICATION_FIRST` fallback last sent (`Update::Fallback`).
    pub(super) fallback: Option<crate::migration::Fallback>,
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

/// The pause before reading again after re-lists with failed reads: 500 ms, doubling with
/// each further failed re-list up to 30 s, back to none after a re-list without a failure
/// (or a reconnect). A read that keeps failing (an ACL, a node too big for the call's timeout)
/// is then retried twice a minute, not twice a second. A watch event meanwhile is read at
/// once (with whatever else is dirty): a part that keeps failing never delays the others.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    /// Re-lists in a row with a failed read.
    failures: u32,
}

impl Backoff {
    pub(super) const FIRST: Duration = Duration::from_millis(500);
    pub(super) const MAX: Duration = Duration::from_secs(30);
    /// From this many failed re-lists in a row on, each one is logged as a warning.
    pub(super) const WARN_AFTER: u32 = 3;

    /// Records a re-list; the pause before the next one (zero when nothing failed).
    pub(super) fn record(&mut self, failed: bool) -> Duration {
        if !failed {
            self.failures = 0;
            return Duration::ZERO;
        }
        self.failures = self.failures.saturating_add(1);
        self.delay()
    }

    /// The pause after the failures so far.
    pub(super) fn delay(&self) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            n => Self::FIRST
                .saturating_mul(1 << (n - 1).min(6))
                .min(Self::MAX),
        }
    }

    /// Failed re-lists in a row.
    pub(super) fn failures(&self) -> u32 {
        self.failures
    }

    pub(super) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_relists_back_off_to_thirty_seconds_and_a_good_one_resets() {
        let mut b = Backoff::default();
        let pauses: Vec<u64> = (0..9).map(|_| b.record(true).as_millis() as u64).collect();
        assert_eq!(
            pauses,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(b.failures(), 9);
        assert_eq!(b.record(false), Duration::ZERO);
        assert_eq!((b.failures(), b.delay()), (0, Duration::ZERO));
        assert_eq!(b.record(true), Backoff::FIRST);
        b.reset();
        assert_eq!(b.delay(), Duration::ZERO);
        for _ in 0..100 {
            b.record(true);
        }
        assert_eq!(b.delay(), Backoff::MAX, "no overflow after many failures");
    }
}
