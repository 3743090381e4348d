//! Applying one update, a routing rule or a set of override rules to the owner's state.

use std::sync::Arc;

use switchman_core::Instance;
use tracing::{info, warn};

use super::state::{Change, Pending, Published, State};
use crate::snapshot::AddrMap;
use crate::{Configurator, Update, configurator};

impl State {
    pub(super) fn apply(&mut self, update: Update) {
        match update {
            Update::Reset(list) => {
                let mut next = AddrMap::with_capacity_and_hasher(list.len(), Default::default());
                for inst in list {
                    let (address, inst, change) = self.reuse(inst);
                    match change {
                        Change::Same => {}
                        Change::Replaced => self.pending.touch(&address),
                        Change::New => self.pending = Pending::Full,
                    }
                    if let Some(dup) = next.insert(address, inst) {
                        warn!(service = %self.config.service, endpoint = %dup.key(), "registry listed an endpoint twice; the later entry wins");
                        self.pending = Pending::Full;
                    }
                }
                if next.len() != self.registry.len() {
                    // Some addresses left.
                    self.pending = Pending::Full;
                }
                let previous = std::mem::replace(&mut self.registry, next);
                // Its entries are shared (the keys by every later map, the instances by the
                // snapshots): dropping it is a reference-count write per entry, done after
                // the next snapshot is visible.
                self.retired.push(Box::new(previous));
            }
            Update::Add(list) => {
                // The entries replaced, freed with the rest of what the next snapshot replaces
                // (one box for all of them).
                let mut replaced = Vec::new();
                for inst in list {
                    let (address, inst, change) = self.reuse(inst);
                    match change {
                        Change::Same => {}
                        Change::Replaced => self.pending.touch(&address),
                        Change::New => self.pending = Pending::Full,
                    }
                    replaced.extend(self.registry.insert(address, inst));
                }
                if !replaced.is_empty() {
                    self.retired.push(Box::new(replaced));
                }
            }
            Update::Remove(keys) => {
                for k in keys {
                    if self.registry.remove(k.as_str()).is_some() {
                        self.pending = Pending::Full;
                    } else if !k.contains(' ') {
                        // A bare address: every endpoint there (a rare form; O(n)).
                        let before = self.registry.len();
                        self.registry.retain(|_, inst| inst.address() != k);
                        if self.registry.len() != before {
                            self.pending = Pending::Full;
                        }
                    }
                }
            }
            Update::Rule { key, text } => self.set_rule(key, text),
            Update::Configurators { source, rules } => {
                let (good, bad): (Vec<_>, Vec<_>) =
                    rules.into_iter().partition(|r| r.validate().is_ok());
                for r in &bad {
                    if let Err(e) = r.validate() {
                        warn!(service = %self.config.service, source = %source, "override rule skipped: {e}");
                    }
                }
                if good.is_empty() {
                    self.configurators.remove(&source);
                } else {
                    self.configurators.insert(source, good);
                }
                self.rules = apply_order(self.configurators.values().flatten());
                // Overrides can change any instance.
                self.pending.overrides();
            }
        }
    }

    /// Sets or deletes a routing rule. A rule that does not parse is logged with its key and
    /// position and skipped: the previous rules stay in force.
    pub(super) fn set_rule(&mut self, key: String, text: Option<String>) {
        let service = &self.config.service;
        match text {
            None => {
                info!(service = %service, rule = %key, "routing rule removed");
                self.config.router = self.config.router.without_rule(&key);
            }
            Some(text) => match self.config.router.with_rule(&key, &text) {
                Ok(chain) => {
                    info!(service = %service, rule = %key, "routing rule applied");
                    self.config.router = chain;
                }
                Err(e) => {
                    warn!(service = %service, rule = %key, "routing rule rejected, previous rules stay in force: {e}")
                }
            },
        }
    }

    /// `instance` with the override rules applied, sharing the `Arc` of the previous snapshot
    /// when the result did not change.
    pub(super) fn effective(
        &self,
        instance: &Arc<Instance>,
        prev: Option<&Published>,
    ) -> Arc<Instance> {
        let overridden = apply_in_order(&self.rules, instance);
        match overridden {
            None => instance.clone(),
            Some(o) => match prev {
                Some(p) if *p.effective == o => p.effective.clone(),
                _ => Arc::new(o),
            },
        }
    }

    /// The address key and `Arc` for a reported instance: both reused from the registry's
    /// current entry when the instance did not change, so unchanged instances are shared
    /// between snapshots and an address is allocated once. An address the registry no longer
    /// lists but the last snapshot still holds (empty-list protection, or a departure not yet
    /// published) shares the snapshot's key, and its instance when equal.
    pub(super) fn reuse(&self, inst: Instance) -> (Arc<str>, Arc<Instance>, Change) {
        match self.registry.get_key_value(inst.key()) {
            Some((k, old)) if **old == inst => (k.clone(), old.clone(), Change::Same),
            Some((k, _)) => (k.clone(), Arc::new(inst), Change::Replaced),
            None => match self.published_index.get_key_value(inst.key()) {
                Some((k, &at)) => {
                    let held = self.published.get(at as usize).map(|p| &p.reported);
                    match held {
                        Some(held) if **held == inst => (k.clone(), held.clone(), Change::New),
                        _ => (k.clone(), Arc::new(inst), Change::New),
                    }
                }
                None => (Arc::from(inst.key()), Arc::new(inst), Change::New),
            },
        }
    }
}

/// The override rules in the order they apply, each later one winning where two set the same
/// key. As Dubbo's `Configurator.compareTo` sorts them: rules for every provider first, then
/// the rules naming a host; within each group by `priority` (an integer parameter, default
/// 0; higher applies later and wins), then arrival order. A host:port rule comes after a
/// host rule of the same priority (Dubbo compares hosts only and keeps arrival order there).
pub(super) fn apply_order<'a>(
    rules: impl IntoIterator<Item = &'a Configurator>,
) -> Vec<Configurator> {
    let mut ordered: Vec<Configurator> = rules.into_iter().cloned().collect();
    ordered.sort_by_key(|r| {
        let priority = r
            .parameters
            .get("priority")
            .and_then(|p| p.trim().parse::<i32>().ok())
            .unwrap_or(0);
        (r.specificity() > 0, priority, r.specificity())
    });
    ordered
}

/// `instance` with the matching `rules` applied in their order (see [`apply_order`]); `None`
/// when none matched.
pub(super) fn apply_in_order(rules: &[Configurator], instance: &Instance) -> Option<Instance> {
    let mut out: Option<Instance> = None;
    for r in rules {
        let current = out.as_ref().unwrap_or(instance);
        if r.matches(current) {
            out = configurator::apply(std::iter::once(r), current).or(out);
        }
    }
    out
}
