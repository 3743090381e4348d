//! Building the next snapshot (patched from the last one, or rebuilt) and installing it.

use std::sync::Arc;
use std::time::SystemTime;

use switchman_core::Instance;
use switchman_loadbalance::{Endpoint, InstanceStats};
use tracing::{debug, info, warn};

use super::EmptyPolicy;
use super::state::{Pending, Published, Spare, State};
use crate::snapshot::{Snapshot, SnapshotParts};

impl State {
    /// The instances the next snapshot is built from, sorted by address: the registry's, or
    /// under empty-list protection the last snapshot's. Addresses that stay keep their order
    /// from the last snapshot; only new ones are sorted and merged in.
    pub(super) fn next_reported(&self, protected: bool) -> Vec<(Arc<str>, Arc<Instance>)> {
        if protected {
            return self
                .published
                .iter()
                .map(|p| (p.address.clone(), p.reported.clone()))
                .collect();
        }
        let mut kept: Vec<(Arc<str>, Arc<Instance>)> = Vec::with_capacity(self.registry.len());
        for p in &self.published {
            if let Some((k, v)) = self.registry.get_key_value(&*p.address) {
                kept.push((k.clone(), v.instance.clone()));
            }
        }
        if kept.len() == self.registry.len() {
            return kept;
        }
        let mut fresh: Vec<(Arc<str>, Arc<Instance>)> = self
            .registry
            .iter()
            .filter(|(k, _)| !self.published_index.contains_key(&***k))
            .map(|(k, v)| (k.clone(), v.instance.clone()))
            .collect();
        fresh.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if kept.is_empty() {
            return fresh;
        }
        let mut merged = Vec::with_capacity(kept.len() + fresh.len());
        let (mut a, mut b) = (kept.into_iter().peekable(), fresh.into_iter().peekable());
        loop {
            let take_a = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.0 <= y.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            merged.extend(if take_a { a.next() } else { b.next() });
        }
        merged
    }

    /// Publishes a snapshot for what changed since the last one (`force`: even if nothing
    /// did, to rebuild the tables). Returns it, or `None` when nothing changed.
    pub(super) fn publish(&mut self, force: bool) -> Option<Arc<Snapshot>> {
        let pending = std::mem::replace(&mut self.pending, Pending::Clean);
        if !force {
            match pending {
                Pending::Clean => {
                    debug!(service = %self.config.service, epoch = self.epoch, "update changed nothing");
                    return None;
                }
                Pending::Touched(addresses) => {
                    if let Some(published) = self.publish_touched(Some(&addresses)) {
                        return published;
                    }
                }
                Pending::Overrides => {
                    if let Some(published) = self.publish_touched(None) {
                        return published;
                    }
                }
                Pending::Full => {}
            }
        }
        self.publish_full(force)
    }

    /// The patch path for updates that changed only weights (and warm-up or start time) of
    /// instances the last snapshot already holds: an operator tuning weights in the registry
    /// (`addresses`: the addresses the updates touched) or by override rules (`None`: every
    /// instance is looked at again under the new rules). The last
    /// snapshot's arrays are copied with the changed entries swapped in, its route table and
    /// address index are shared, and only the balancer tables are rebuilt; the directory's own
    /// list is patched in place. No pass over the other instances besides those copies.
    ///
    /// Returns `None` when the change is anything else (the caller rebuilds), else what
    /// [`State::publish`] returns.
    pub(super) fn publish_touched(
        &mut self,
        addresses: Option<&[Arc<str>]>,
    ) -> Option<Option<Arc<Snapshot>>> {
        let current = self.shared.current.load_full();
        let n = self.published.len();
        if self.epoch == 0
            || current.is_protected()
            || self.config.router.reads_weighting()
            || !self.config.router.is_same(&self.routed_with)
            || n != self.registry.len()
        {
            return None;
        }
        // Past a quarter of the list, one rebuild is cheaper than patching.
        let limit = n / 4 + 1;
        // Plan every change before touching anything, so a fallback leaves the state intact.
        let mut changes: Vec<(usize, Arc<Instance>, Arc<Instance>)> = Vec::new();
        match addresses {
            Some(addresses) => {
                if addresses.len() > limit {
                    return None;
                }
                let mut positions = Vec::with_capacity(addresses.len());
                for address in addresses {
                    let at = *self.published_index.get(&**address)? as usize;
                    positions.push(at);
                }
                positions.sort_unstable();
                positions.dedup();
                for at in positions {
                    let prev = &self.published[at];
                    let reported = &self.registry.get(&*prev.address)?.instance;
                    let effective = self.effective(reported, Some(prev));
                    if !Arc::ptr_eq(&prev.reported, reported)
                        || !Arc::ptr_eq(&prev.effective, &effective)
                    {
                        changes.push((at, reported.clone(), effective));
                    }
                }
            }
            // New override rules: the registry's list is the same, every effective instance
            // is computed again.
            None => {
                for (at, prev) in self.published.iter().enumerate() {
                    let effective = self.effective(&prev.reported, Some(prev));
                    if !Arc::ptr_eq(&prev.effective, &effective) {
                        if changes.len() == limit {
                            return None;
                        }
                        changes.push((at, prev.reported.clone(), effective));
                    }
                }
            }
        }
        let mut patched = 0usize;
        for (at, _, effective) in &changes {
            let prev = &self.published[*at];
            if Arc::ptr_eq(&prev.effective, effective) {
                continue;
            }
            // Anything routing reads (or availability) changed: not a weight change.
            if !effective.same_but_weight(&prev.effective) {
                return None;
            }
            patched += 1;
        }
        let reported_changed = changes
            .iter()
            .any(|(at, reported, _)| !Arc::ptr_eq(&self.published[*at].reported, reported));
        if patched == 0 {
            // What the registry says changed, what the snapshot holds did not (an override
            // masks it): keep the list and the cache file in step, publish nothing.
            for (at, reported, _) in changes {
                self.published[at].reported = reported;
            }
            if reported_changed {
                self.save_cache();
            }
            debug!(service = %self.config.service, epoch = self.epoch, "update changed nothing");
            return Some(None);
        }
        let mut updates: Vec<(usize, Option<usize>, Arc<Instance>)> = Vec::with_capacity(patched);
        let mut replaced: Vec<Arc<Instance>> = Vec::with_capacity(2 * changes.len());
        for (at, reported, effective) in changes {
            let entry = &mut self.published[at];
            if !Arc::ptr_eq(&entry.effective, &effective) {
                updates.push((at, current.index_of(&entry.address), effective.clone()));
                if let Some(client) = &entry.service {
                    // Before the snapshot routing to it: its calls come with this one.
                    client.instance_changed(&effective);
                }
            }
            replaced.push(std::mem::replace(&mut entry.reported, reported));
            replaced.push(std::mem::replace(&mut entry.effective, effective));
        }
        let (all, endpoints) = self.patched_arrays(&current, &updates, &mut replaced);
        self.retired.push(Box::new(replaced));
        let mut changed: Vec<u32> = updates
            .iter()
            .filter_map(|u| u.1)
            .map(|e| e as u32)
            .collect();
        changed.sort_unstable();
        changed.dedup();
        self.epoch += 1;
        let snap = Arc::new(Snapshot::build(SnapshotParts {
            epoch: self.epoch,
            service: &self.config.service,
            all,
            endpoints,
            addresses: Vec::new(),
            router: &self.config.router,
            consumer: &self.config.consumer,
            balancer: &self.config.balancer,
            protected: false,
            now: SystemTime::now(),
            same_routes_as: Some(&current),
            changed: &changed,
            consumer_overrides: self.consumer_overrides.clone(),
        }));
        drop(current);
        let counts = Counts {
            added: 0,
            removed: 0,
            changed: patched,
            reported_changed,
        };
        let previous = self.install(snap.clone(), counts);
        // Kept to be patched into the next snapshot. Its balancer tables go now when nobody
        // else holds it; a call still in flight on it keeps it whole until it ends, and the
        // next patch reuses its arrays if it has ended by then (`patched_arrays`). With a
        // maker too: the spare's endpoints are the current ones, so it keeps no client alive
        // that the current snapshot does not. (Unwrapped, not `get_mut`: readers' threads
        // keep a `Weak` of the snapshots they read, see `Published`; once the last strong
        // reference is ours, none of them can upgrade it any more.)
        let previous = Arc::try_unwrap(previous).map(|mut prev| {
            self.retired.push(Box::new(prev.shed_tables()));
            prev
        });
        let stale = updates.into_iter().map(|(at, e, _)| (at, e)).collect();
        self.spare = Some(Spare {
            snapshot: previous,
            stale,
        });
        Some(Some(snap))
    }

    /// The arrays of the next snapshot: the current one's with `updates` (position in `all`,
    /// in `endpoints` if routable, new instance) swapped in. Patched in place into the spare
    /// snapshot when nobody holds it any more (O(changes)); else copied from the current one
    /// (O(instances)).
    fn patched_arrays(
        &mut self,
        current: &Snapshot,
        updates: &[(usize, Option<usize>, Arc<Instance>)],
        replaced: &mut Vec<Arc<Instance>>,
    ) -> (Arc<[Arc<Instance>]>, Arc<[Endpoint]>) {
        if let Some(spare) = self.spare.take()
            && let Ok(snapshot) = spare.snapshot.or_else(Arc::try_unwrap)
        {
            let (mut all, mut endpoints) = snapshot.into_arrays();
            if let (Some(a), Some(e)) = (Arc::get_mut(&mut all), Arc::get_mut(&mut endpoints))
                && a.len() == current.instances().len()
                && e.len() == current.endpoints().len()
            {
                // Its stale entries first (what the last patch changed), then this one's.
                let stale = spare
                    .stale
                    .iter()
                    .map(|&(at, ep)| (at, ep, &current.instances()[at]));
                let fresh = updates.iter().map(|(at, ep, i)| (*at, *ep, i));
                for (at, ep, instance) in stale.chain(fresh) {
                    if let Some(ep) = ep {
                        replaced.push(std::mem::replace(&mut e[ep].instance, instance.clone()));
                    }
                    replaced.push(std::mem::replace(&mut a[at], instance.clone()));
                }
                return (all, endpoints);
            }
        }
        // No spare, one a call still holds, or not the current arrays' shape: a copy.
        let mut all = current.instances().to_vec();
        let mut endpoints = current.endpoints().to_vec();
        for (at, ep, instance) in updates {
            all[*at] = instance.clone();
            if let Some(ep) = ep {
                endpoints[*ep].instance = instance.clone();
            }
        }
        (all.into(), endpoints.into())
    }

    /// The full path: pairs the registry's list (or, under empty-list protection, the last
    /// one) with the last snapshot's, keeping live stats and shared `Arc`s, and rebuilds the
    /// snapshot (the route table only when routing can see a difference).
    pub(super) fn publish_full(&mut self, force: bool) -> Option<Arc<Snapshot>> {
        let service = &self.config.service;
        let protected = self.registry.is_empty()
            && self.config.empty_policy == EmptyPolicy::KeepLast
            && !self.published.is_empty();
        let reported = self.next_reported(protected);
        // Both lists are sorted by address and an address that stays shares its key: one
        // forward walk pairs each entry with its predecessor, mostly by pointer comparison.
        let (mut added, mut changed, mut reported_changed) = (0usize, 0usize, false);
        let mut j = 0;
        let mut next: Vec<Published> = Vec::with_capacity(reported.len());
        for (address, reported) in reported {
            let old = &self.published;
            while j < old.len()
                && !Arc::ptr_eq(&old[j].address, &address)
                && *old[j].address < *address
            {
                j += 1;
            }
            let prev = old
                .get(j)
                .filter(|p| Arc::ptr_eq(&p.address, &address) || p.address == address);
            let effective = self.effective(&reported, prev);
            let (stats, service) = match prev {
                Some(p) => {
                    let instance_changed = !Arc::ptr_eq(&p.effective, &effective);
                    changed += usize::from(instance_changed);
                    reported_changed |= !Arc::ptr_eq(&p.reported, &reported);
                    if let (true, Some(client)) = (instance_changed, &p.service) {
                        // Before the snapshot routing to it: its calls come with this one.
                        client.instance_changed(&effective);
                    }
                    (p.stats.clone(), p.service.clone())
                }
                None => {
                    added += 1;
                    // With a maker: the endpoint's client, again if it left within the drain
                    // grace (told its instance now), else a new one.
                    let service = match self.config.maker {
                        Some(_) => match self.draining.take(&address) {
                            Some(client) => {
                                client.instance_changed(&effective);
                                Some(client)
                            }
                            None => self.config.make(&effective),
                        },
                        None => None,
                    };
                    (Arc::new(InstanceStats::new()), service)
                }
            };
            next.push(Published {
                address,
                reported,
                effective,
                stats,
                service,
            });
        }
        let current = self.shared.current.guard();
        let unchanged = self.epoch > 0
            && current.is_protected() == protected
            && added == 0
            && changed == 0
            && next.len() == self.published.len()
            && *current.consumer_overrides() == *self.consumer_overrides;
        if unchanged && !force {
            debug!(service = %service, epoch = self.epoch, "update changed nothing");
            // The registry's entries may be new `Arc`s equal to the old ones: keep the
            // published list in step with the registry for the patch path, and the cache file
            // with what the registry says (an override may hide a change).
            self.published = next;
            if reported_changed && !protected {
                self.save_cache();
            }
            return None;
        }
        if protected && !current.is_protected() {
            warn!(service = %service, kept = next.len(), "registry reports no instance; empty-list protection keeps the last list");
        }
        let removed = self.published.len() - (next.len() - added);
        let initial = self.published.is_empty() && self.epoch <= 1;
        if initial {
            // Warm-up without a provider timestamp starts when the directory first sees an
            // instance. The first list is the fleet as it already runs, not instances that just
            // started: treat it as warm.
            for p in &next {
                p.stats.set_first_seen_ms(0);
            }
        }
        let all: Arc<[Arc<Instance>]> = next.iter().map(|p| p.effective.clone()).collect();
        let routable: Vec<&Published> = next
            .iter()
            .filter(|p| self.config.is_routable(&p.effective))
            .collect();
        let endpoints: Vec<Endpoint> = routable
            .iter()
            .map(|p| Endpoint {
                instance: p.effective.clone(),
                stats: p.stats.clone(),
                service: p.service.clone(),
            })
            .collect();
        // Same endpoints in the same order, differing at most in weights, under the same
        // rules (none reading weights): the route table still holds (an operator's weight
        // change rebuilds only the balancer tables).
        // Those that differ (in weights, or in statistics: an address that left and came back)
        // are collected for the balancer tables' patch.
        let mut changed_endpoints: Vec<u32> = Vec::new();
        let same_routes = self.config.router.is_same(&self.routed_with)
            && self.epoch > 0
            && endpoints.len() == current.endpoints().len()
            && !self.config.router.reads_weighting()
            && endpoints
                .iter()
                .zip(current.endpoints())
                .enumerate()
                .all(|(i, (a, b))| {
                    if Arc::ptr_eq(&a.instance, &b.instance) && Arc::ptr_eq(&a.stats, &b.stats) {
                        true
                    } else if a.instance.same_but_weight(&b.instance) {
                        changed_endpoints.push(i as u32);
                        true
                    } else {
                        false
                    }
                });
        self.routed_with = self.config.router.clone();
        // The address index is only rebuilt with the route table.
        let addresses = if same_routes {
            Vec::new()
        } else {
            routable.iter().map(|p| p.address.clone()).collect()
        };
        self.epoch += 1;
        let snap = Arc::new(Snapshot::build(SnapshotParts {
            epoch: self.epoch,
            service,
            all,
            endpoints: endpoints.into(),
            addresses,
            router: &self.config.router,
            consumer: &self.config.consumer,
            balancer: &self.config.balancer,
            protected,
            now: SystemTime::now(),
            same_routes_as: same_routes.then_some(&**current),
            changed: &changed_endpoints,
            consumer_overrides: self.consumer_overrides.clone(),
        }));
        drop(current);
        if added + removed > 0 {
            self.published_index = next
                .iter()
                .enumerate()
                .map(|(at, p)| (p.address.clone(), at as u32))
                .collect();
        }
        let previous = std::mem::replace(&mut self.published, next);
        if removed > 0 && self.config.maker.is_some() {
            let due = tokio::time::Instant::now() + self.config.drain_grace;
            for p in &previous {
                if let Some(service) = &p.service
                    && !self.published_index.contains_key(&*p.address)
                {
                    self.draining.push(p.address.clone(), service.clone(), due);
                }
            }
        }
        let counts = Counts {
            added,
            removed,
            changed,
            reported_changed,
        };
        let replaced = self.install(snap.clone(), counts);
        // Freed after the new snapshot is visible: not on the push-to-visible path. The spare
        // no longer matches the current arrays.
        let spare = self.spare.take();
        self.retired.push(Box::new((replaced, previous, spare)));
        Some(snap)
    }

    /// Makes `snap` (built from `self.published`) the current snapshot: metrics, a log line,
    /// the cache file, then one `ArcSwap::swap`.
    /// Returns the snapshot it replaced.
    pub(super) fn install(&mut self, snap: Arc<Snapshot>, counts: Counts) -> Arc<Snapshot> {
        let service = &self.config.service;
        let Counts {
            added,
            removed,
            changed,
            reported_changed,
        } = counts;
        let label = service.to_string();
        metrics::gauge!("switchman_directory_instances", "rpc_service" => label.clone())
            .set(snap.instances().len() as f64);
        metrics::gauge!("switchman_directory_routable", "rpc_service" => label.clone())
            .set(snap.endpoints().len() as f64);
        metrics::counter!("switchman_directory_snapshots_total", "rpc_service" => label)
            .increment(1);
        if added + removed + changed > 0 || self.epoch == 1 {
            info!(service = %service, epoch = self.epoch, instances = snap.instances().len(),
                available = snap.endpoints().len(), added, removed, changed, "directory updated");
        } else {
            debug!(service = %service, epoch = self.epoch, "directory tables rebuilt");
        }
        if !snap.is_protected() && (added + removed > 0 || reported_changed || self.epoch == 1) {
            self.save_cache();
        }
        let previous = self.shared.current.swap(snap);
        let _ = self.epoch_tx.send(self.epoch);
        previous
    }
}

/// What a snapshot changed, for the log line and the cache file.
pub(super) struct Counts {
    pub(super) added: usize,
    pub(super) removed: usize,
    pub(super) changed: usize,
    pub(super) reported_changed: bool,
}
