//! The owner task's state and its loop.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use switchman_core::{Instance, Invoker};
use switchman_loadbalance::InstanceStats;
use switchman_router::RouterChain;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Control, DirectoryConfig, Shared};
use crate::snapshot::{AddrMap, Snapshot};
use crate::{Configurator, UpdateReceiver};

pub(super) struct State {
    pub(super) config: DirectoryConfig,
    /// What the registry currently says, by address (an address key is allocated once and
    /// shared by every later map and snapshot). Updated in place, also by a whole list.
    pub(super) registry: AddrMap<Listed>,
    /// Counts whole lists (`Update::Reset`): an entry a list names is marked with it, the
    /// others have left.
    pub(super) lists: u32,
    /// What the last snapshot holds, sorted by address.
    pub(super) published: Vec<Published>,
    /// The position of each address in `published`: finds new ones and touched ones in O(1)
    /// (rebuilt when addresses come or go; a change of weights keeps every position).
    pub(super) published_index: AddrMap<u32>,
    /// What changed in `registry` since the last snapshot.
    pub(super) pending: Pending,
    /// Override rules by source.
    pub(super) configurators: BTreeMap<String, Vec<Configurator>>,
    /// Every source's rules in the order they apply (see [`apply_order`]).
    pub(super) rules: Vec<Configurator>,
    pub(super) epoch: u64,
    /// The router chain the last snapshot's route table was built with: when the configured
    /// chain is another one, the next snapshot is published and its table rebuilt.
    pub(super) routed_with: RouterChain,
    pub(super) shared: Arc<Shared>,
    pub(super) epoch_tx: watch::Sender<u64>,
    pub(super) cache_tx: Option<watch::Sender<Option<Vec<u8>>>>,
    /// Clients of endpoints that left, kept for the drain grace.
    pub(super) draining: Draining,
    /// An [`Update::Lists`] applied this turn: shown once the turn's snapshot is decided, so a
    /// reader who sees it also sees the lists the adapter sent before it.
    pub(super) decided: Option<crate::migration::Lists>,
    /// What the consumer rules set for this directory's consumer (see
    /// [`Snapshot::consumer_overrides`]).
    pub(super) consumer_overrides: Arc<std::collections::BTreeMap<String, String>>,
    /// The snapshot before the current one when the current one was patched from it.
    pub(super) spare: Option<Spare>,
    /// What the last update or snapshot replaced (a registry map, a published list, a
    /// snapshot, instances): freed after the next snapshot is visible and the directory's
    /// task has yielded once, so that a reader on the same thread sees the snapshot first.
    /// Freeing 100k entries is a reference-count write (and often a free) each.
    pub(super) retired: Vec<Box<dyn Send>>,
    /// The `APPLICATION_FIRST` fallback's directory (interface level), fed from this one:
    /// its list from [`crate::Update::Fallback`], every rule and setting as this one's.
    pub(super) fallback: Option<super::RegistryDirectory>,
}

/// The snapshot the current one was patched from (weights only: same instances in the same
/// order; its balancer tables shed when nobody held it at the swap), so that the next patch can bring its arrays up
/// to date in place (the entries two patches changed) instead of copying every entry of the
/// current ones, which at 100k instances is a reference-count write per instance.
pub(super) struct Spare {
    /// Owned when nobody else held it as it was replaced; else shared, until the calls on it
    /// have ended.
    pub(super) snapshot: Result<Snapshot, Arc<Snapshot>>,
    /// Where its arrays differ from the current snapshot's: a position in `all`, and in
    /// `endpoints` when the instance is routable.
    pub(super) stale: Vec<(usize, Option<usize>)>,
}

/// The clients of endpoints that left (only with a maker), until their drain grace ends: an
/// endpoint back before then gets its client again; after it, the client is dropped here
/// (and closes its connections once the calls still holding an old snapshot end).
#[derive(Default)]
pub(super) struct Draining {
    /// By key: found in O(1) when an endpoint comes back (a mass return after a registry
    /// blip does not scan the list once per endpoint).
    clients: AddrMap<(Arc<dyn Invoker>, Instant)>,
    /// When each grace ends, in the order they left (one grace for the directory); an entry
    /// whose endpoint came back meanwhile is skipped.
    order: VecDeque<(Arc<str>, Instant)>,
}

impl Draining {
    pub(super) fn push(&mut self, key: Arc<str>, service: Arc<dyn Invoker>, due: Instant) {
        debug!(endpoint = %key, "endpoint left: its client is kept for the drain grace");
        self.order.push_back((key.clone(), due));
        self.clients.insert(key, (service, due));
    }

    /// The client of `key` if it is still draining (it came back).
    pub(super) fn take(&mut self, key: &str) -> Option<Arc<dyn Invoker>> {
        self.clients.remove(key).map(|(s, _)| s)
    }

    /// Drops the clients whose grace ended by `now`.
    pub(super) fn expire(&mut self, now: Instant) {
        while self.order.front().is_some_and(|(_, due)| *due <= now) {
            let Some((key, due)) = self.order.pop_front() else {
                break;
            };
            // Still this departure's (not one that came back, or left again later).
            if self.clients.get(&key).is_some_and(|(_, d)| *d == due) {
                self.clients.remove(&key);
                debug!(endpoint = %key, "drain grace over: dropping the endpoint's client");
            }
        }
    }

    pub(super) fn next_due(&self) -> Option<Instant> {
        self.order.front().map(|(_, due)| *due)
    }
}

/// What changed in the registry's list since the last snapshot.
#[derive(Debug)]
pub(super) enum Pending {
    /// Nothing.
    Clean,
    /// Only instances at addresses the last snapshot already holds; these addresses (possibly
    /// repeated). When every change is a weight change, the next snapshot is patched from the
    /// last one instead of rebuilt (see `State::publish_touched`).
    Touched(Vec<Arc<str>>),
    /// Only the override rules: every instance may have changed, none came or went. Patched
    /// like `Touched` when the rules changed only weights.
    Overrides,
    /// Addresses came or went, or the list was replaced wholesale: rebuild.
    Full,
}

impl Pending {
    pub(super) fn touch(&mut self, address: &Arc<str>) {
        match self {
            Pending::Clean => *self = Pending::Touched(vec![address.clone()]),
            Pending::Touched(list) => list.push(address.clone()),
            Pending::Overrides => *self = Pending::Full,
            Pending::Full => {}
        }
    }

    pub(super) fn overrides(&mut self) {
        match self {
            Pending::Clean | Pending::Overrides => *self = Pending::Overrides,
            Pending::Touched(_) | Pending::Full => *self = Pending::Full,
        }
    }
}

/// One entry of the registry's list.
pub(super) struct Listed {
    pub(super) instance: Arc<Instance>,
    /// The last whole list that named it (see `State::lists`).
    pub(super) list: u32,
}

/// How a reported instance relates to the registry's current entry at its address.
pub(super) enum Change {
    Same,
    Replaced,
    New,
}

/// One instance of the last snapshot.
pub(super) struct Published {
    pub(super) address: Arc<str>,
    /// As the registry reported it (what the cache file and empty-list protection keep).
    pub(super) reported: Arc<Instance>,
    /// With the override rules applied (what the snapshot holds).
    pub(super) effective: Arc<Instance>,
    /// Live state, kept across snapshots while the address stays.
    pub(super) stats: Arc<InstanceStats>,
    /// The endpoint's own client (with a maker), kept while it stays.
    pub(super) service: Option<Arc<dyn Invoker>>,
}

impl State {
    /// Applies a control message (counted in `applied` when it is an update); returns whether
    /// the next snapshot must be rebuilt. Router and balancer changes reach the fallback's
    /// directory too.
    fn control(&mut self, c: Control, applied: &mut u64) -> bool {
        match c {
            Control::Update(u) => {
                self.apply(u);
                *applied += 1;
                false
            }
            Control::Router(r) => {
                if let Some(f) = &self.fallback {
                    f.set_router(r.clone());
                }
                self.config.router = r;
                false
            }
            Control::Balancer(b) => {
                if let Some(f) = &self.fallback {
                    f.set_balancer(b.clone());
                }
                self.config.balancer = b;
                true
            }
        }
    }

    pub(super) async fn run(
        mut self,
        mut updates: Option<UpdateReceiver>,
        mut control: mpsc::UnboundedReceiver<Control>,
    ) {
        // The warm-up refresh: armed when a snapshot with warming instances is published, and
        // reset only then. Pinned across loop turns, so a stream of messages that publish
        // nothing cannot postpone it.
        let refresh = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(refresh);
        let mut armed = false;
        // The next drain-grace end (pinned like the refresh).
        let drain = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(drain);
        let mut drain_at: Option<Instant> = None;
        loop {
            let mut force = false;
            // Updates applied in this turn, counted once the turn's snapshot is decided.
            let mut applied = 0u64;
            tokio::select! {
                u = async { updates.as_mut().unwrap().recv().await }, if updates.is_some() => match u {
                    Some(u) => { self.apply(u); applied += 1; }
                    None => {
                        warn!(service = %self.config.service, "registry subscription ended; keeping the last snapshot");
                        updates = None;
                        continue;
                    }
                },
                c = control.recv() => match c {
                    Some(c) => force |= self.control(c, &mut applied),
                    None => return,
                },
                _ = refresh.as_mut(), if armed => { armed = false; force = true; }
                _ = drain.as_mut(), if drain_at.is_some() => {
                    self.draining.expire(Instant::now());
                    drain_at = None;
                }
            }
            // Coalesce whatever else is already queued, from both sources, into one snapshot:
            // a burst of pushes costs one rebuild, and a slow rebuild cannot build a backlog.
            let mut drained = true;
            while drained {
                drained = false;
                if let Some(rx) = updates.as_mut() {
                    while let Ok(u) = rx.try_recv() {
                        self.apply(u);
                        applied += 1;
                        drained = true;
                    }
                }
                while let Ok(c) = control.try_recv() {
                    drained = true;
                    force |= self.control(c, &mut applied);
                }
            }
            let force = force || !self.config.router.is_same(&self.routed_with);
            if let Some(snap) = self.publish(force) {
                armed = match snap.refresh_after() {
                    Some(after) => {
                        refresh.as_mut().reset(tokio::time::Instant::now() + after);
                        true
                    }
                    None => false,
                };
                drop(snap);
                if !self.retired.is_empty() {
                    // Readers on this thread (a current-thread runtime) see the new snapshot
                    // before what it replaced is freed.
                    tokio::task::yield_now().await;
                }
            }
            self.retired.clear();
            if let Some(lists) = self.decided.take() {
                *self.shared.lists.lock().unwrap_or_else(|p| p.into_inner()) = Some(lists);
            }
            if applied > 0 {
                self.shared
                    .applied
                    .fetch_add(applied, std::sync::atomic::Ordering::Release);
            }
            let next_drain = self.draining.next_due();
            if next_drain != drain_at {
                if let Some(due) = next_drain {
                    drain.as_mut().reset(due);
                }
                drain_at = next_drain;
            }
        }
    }
}
