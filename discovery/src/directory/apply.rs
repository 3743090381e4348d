//! Applying one update, a routing rule or a set of override rules to the owner's state.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchman_core::Instance;
use tracing::{info, warn};

use super::state::{Change, Listed, Pending, Published, State};
use crate::{Configurator, Update, configurator};

impl State {
    pub(super) fn apply(&mut self, update: Update) {
        match update {
            Update::Reset(list) => {
                // In place: every listed entry is marked with this list; the unmarked ones
                // left. An instance the registry hands again as the same `Arc` costs one
                // lookup and a pointer comparison.
                self.lists = self.lists.wrapping_add(1);
                let this = self.lists;
                // What the list replaces, freed with the rest of what the next snapshot
                // replaces (one box for all of them).
                let mut replaced = Vec::new();
                let mut named = 0usize;
                self.registry
                    .reserve(list.len().saturating_sub(self.registry.len()));
                for inst in list {
                    let Some(entry) = self.registry.get_mut(inst.key()) else {
                        let address = self.address_key(inst.key());
                        self.pending = Pending::Full;
                        named += 1;
                        let entry = Listed {
                            instance: inst,
                            list: this,
                        };
                        self.registry.insert(address, entry);
                        continue;
                    };
                    if entry.list == this {
                        warn!(service = %self.config.service, endpoint = %inst.key(), "registry listed an endpoint twice; the later entry wins");
                        self.pending = Pending::Full;
                    } else {
                        entry.list = this;
                        named += 1;
                    }
                    if Arc::ptr_eq(&entry.instance, &inst) {
                        continue;
                    }
                    let changed = *entry.instance != *inst;
                    let old = std::mem::replace(&mut entry.instance, inst);
                    if changed {
                        // Rare (what changed): a second lookup for the shared key.
                        if let Some((address, _)) = self.registry.get_key_value(old.key()) {
                            let address = address.clone();
                            self.pending.touch(&address);
                        }
                    }
                    replaced.push(old);
                }
                if named != self.registry.len() {
                    // Some addresses left.
                    self.pending = Pending::Full;
                    // (The instances are freed later, with `replaced`.)
                    self.registry.retain(|_, entry| {
                        let stays = entry.list == this;
                        if !stays {
                            replaced.push(entry.instance.clone());
                        }
                        stays
                    });
                }
                if !replaced.is_empty() {
                    self.retired.push(Box::new(replaced));
                }
            }
            Update::Add(list) => {
                // The entries replaced, freed with the rest of what the next snapshot replaces
                // (one box for all of them).
                let mut replaced = Vec::new();
                for inst in list {
                    let (address, change) = self.reuse(&inst);
                    match change {
                        Change::Same => {}
                        Change::Replaced => self.pending.touch(&address),
                        Change::New => self.pending = Pending::Full,
                    }
                    let entry = Listed {
                        instance: inst,
                        list: self.lists,
                    };
                    replaced.extend(self.registry.insert(address, entry).map(|e| e.instance));
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
                        self.registry.retain(|_, e| e.instance.address() != k);
                        if self.registry.len() != before {
                            self.pending = Pending::Full;
                        }
                    }
                }
            }
            Update::Rule { key, text } => {
                if let Some(f) = &self.fallback {
                    f.apply(Update::Rule {
                        key: key.clone(),
                        text: text.clone(),
                    });
                }
                self.set_rule(key, text)
            }
            Update::Configurators { source, rules } => {
                if let Some(f) = &self.fallback {
                    f.apply(Update::Configurators {
                        source: source.clone(),
                        rules: rules.clone(),
                    });
                }
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
                // Consumer rules: what they set for this consumer; a change is a new snapshot
                // (the cluster resolves its settings per snapshot).
                let consumer = &self.config.consumer.url;
                let next = crate::configurator::consumer_parameters(
                    &self.rules,
                    consumer.host(),
                    consumer.param("application"),
                    &self.config.service,
                );
                if *self.consumer_overrides != next {
                    info!(service = %self.config.service, parameters = ?next, "consumer rules changed what this consumer uses");
                    self.consumer_overrides = Arc::new(next);
                    self.pending = Pending::Full;
                }
            }
            Update::Lists(lists) => self.decided = Some(lists),
            Update::Fallback(fallback) => self.set_fallback(fallback),
        }
    }

    /// Starts, feeds or stops the `APPLICATION_FIRST` fallback's directory: a directory of its
    /// own (this one's settings, rules and overrides, no cache file) whose snapshot calls use
    /// when they fall back to the interface level.
    fn set_fallback(&mut self, fallback: Option<crate::migration::Fallback>) {
        let service = &self.config.service;
        let Some(fallback) = fallback else {
            if self.fallback.take().is_some() {
                info!(service = %service, "interface-level fallback stopped");
                self.shared.has_fallback.store(false, Ordering::Release);
                self.shared.fallback.store(None);
            }
            return;
        };
        let proportion = fallback.proportion.min(100);
        let dir = match &self.fallback {
            Some(dir) => dir,
            None => {
                let mut config = self.config.clone();
                config.cache_file = None;
                let dir = super::RegistryDirectory::spawn(config, None);
                for (source, rules) in &self.configurators {
                    dir.apply(Update::Configurators {
                        source: source.clone(),
                        rules: rules.clone(),
                    });
                }
                info!(service = %service, interface_level = fallback.instances.len(), proportion,
                    "interface-level fallback started (APPLICATION_FIRST)");
                self.fallback.insert(dir)
            }
        };
        dir.apply(Update::Reset(fallback.instances));
        let current = self.shared.fallback.load();
        let same = current
            .as_ref()
            .is_some_and(|f| f.proportion == proportion && Arc::ptr_eq(&f.shared, &dir.shared));
        if !same {
            self.shared
                .fallback
                .store(Some(Arc::new(super::FallbackRef {
                    shared: dir.shared.clone(),
                    proportion,
                })));
            self.shared.has_fallback.store(true, Ordering::Release);
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

    /// The address key for a reported instance (the registry's, else [`State::address_key`])
    /// and how the instance relates to the one held there: the same `Arc` (recognised by
    /// pointer, without a comparison), an equal copy, or a change. The registry's map takes
    /// the pushed `Arc` in every case (here and in a whole list), so that an adapter which
    /// hands the same `Arc`s again (the built-in ones keep what they parsed) is recognised by
    /// pointer from its next list on, even when the directory started from copies (the
    /// snapshot cache). A snapshot keeps the objects it holds until it is rebuilt.
    pub(super) fn reuse(&self, inst: &Arc<Instance>) -> (Arc<str>, Change) {
        let same = |held: &Arc<Instance>| Arc::ptr_eq(held, inst) || **held == **inst;
        match self.registry.get_key_value(inst.key()) {
            Some((k, old)) if same(&old.instance) => (k.clone(), Change::Same),
            Some((k, _)) => (k.clone(), Change::Replaced),
            None => (self.address_key(inst.key()), Change::New),
        }
    }

    /// The key for an address the registry's map does not hold: the last snapshot's when it
    /// still holds the address (empty-list protection, or a departure not yet published), so
    /// an address is allocated once; else a new one.
    fn address_key(&self, key: &str) -> Arc<str> {
        match self.published_index.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
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
