//! The table's states: candidate sets, deduplicated (interned) while the table is built, under
//! a memory budget for the sets the condition steps produce.

use std::collections::HashMap;

use crate::bitset::Bitset;

/// How much a table precomputes: the candidate sets the condition steps produce may take as
/// much memory as this many sets of one bit per instance (a small set is stored as its
/// members, 32 bits each, so it costs far less). Calls whose route would need more take the
/// slow path ([`crate::Route::Computed`]). The tag stage's sets are not counted: static tags
/// partition the instances (one tag each), so their groups hold at most one entry per
/// instance in all, and with up to 8 condition steps no count of distinct tags reaches the
/// limit.
pub const MAX_SUBSETS: usize = 256;

pub(crate) type StateId = u32;

/// A small string-keyed map: linear scan when small, hashed when large.
#[derive(Debug, Clone)]
pub(crate) enum StrMap {
    Small(Vec<(Box<str>, StateId)>),
    Large(HashMap<Box<str>, StateId>),
}

impl StrMap {
    pub(super) fn from_pairs(pairs: Vec<(Box<str>, StateId)>) -> Self {
        if pairs.len() <= 8 {
            StrMap::Small(pairs)
        } else {
            StrMap::Large(pairs.into_iter().collect())
        }
    }
    pub(crate) fn get(&self, k: &str) -> Option<StateId> {
        match self {
            StrMap::Small(v) => v.iter().find(|(n, _)| &**n == k).map(|(_, s)| *s),
            StrMap::Large(m) => m.get(k).copied(),
        }
    }
}

/// One candidate set.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) set: Bitset,
    /// Index into the subsets, or `None` for an empty set.
    pub(crate) subset: Option<u32>,
    /// Why the set is empty (names the rule).
    pub(crate) reason: Box<str>,
}

pub(super) struct Interner {
    pub(super) states: Vec<State>,
    pub(super) by_set: HashMap<Bitset, StateId>,
    pub(super) by_reason: HashMap<Box<str>, StateId>,
    pub(super) n: usize,
    /// Bits the capped (condition-step) sets hold so far, against `budget`.
    pub(super) spent: usize,
    pub(super) budget: usize,
}

impl Interner {
    pub(super) fn intern(&mut self, set: Bitset, reason: &str) -> Option<StateId> {
        if set.is_empty() {
            if let Some(&id) = self.by_reason.get(reason) {
                return Some(id);
            }
            let id = self.states.len() as StateId;
            self.states.push(State {
                set,
                subset: None,
                reason: reason.into(),
            });
            self.by_reason.insert(reason.into(), id);
            return Some(id);
        }
        if let Some(&id) = self.by_set.get(&set) {
            return Some(id);
        }
        let cost = set.cost_bits();
        if self.spent + cost > self.budget {
            return None;
        }
        self.spent += cost;
        let id = self.states.len() as StateId;
        self.by_set.insert(set.clone(), id);
        self.states.push(State {
            set,
            subset: None,
            reason: "".into(),
        });
        Some(id)
    }

    pub(super) fn must(&mut self, set: Bitset, reason: &str) -> StateId {
        // Tag-stage sets: never capped, and not counted (see `MAX_SUBSETS`).
        if set.is_empty() {
            return self.empty(reason);
        }
        if let Some(&id) = self.by_set.get(&set) {
            return id;
        }
        let id = self.states.len() as StateId;
        self.by_set.insert(set.clone(), id);
        self.states.push(State {
            set,
            subset: None,
            reason: "".into(),
        });
        id
    }

    pub(super) fn empty(&mut self, reason: &str) -> StateId {
        self.intern(Bitset::empty(self.n), reason)
            .expect("empty sets are always interned")
    }
}
