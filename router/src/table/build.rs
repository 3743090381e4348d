//! Building the table: the rules ordered and compiled, then the chain unrolled into
//! transitions between interned states.

use std::collections::HashMap;
use std::sync::Arc;

use switchman_core::Instance;

use super::compile::{Columns, compile_affinity, compile_step};
use super::machine::{Machine, Trans};
use super::state::{Interner, MAX_SUBSETS, StateId};
use super::step::{StepKind, preferred};
use super::tag_stage::build_tag_stage;
use crate::bitset::Bitset;
use crate::consumer::ConsumerInfo;
use crate::rule::{Body, Rule, Stage};

/// Orders rules as the chain runs them: tag, service, application; higher priority first;
/// then in the order they were set.
pub(crate) fn ordered(rules: &[Arc<Rule>]) -> Vec<&Arc<Rule>> {
    let mut v: Vec<&Arc<Rule>> = rules.iter().collect();
    v.sort_by_key(|r| (r.stage, std::cmp::Reverse(r.meta.priority)));
    v
}

impl Machine {
    pub(crate) fn build(
        rules: &[Arc<Rule>],
        instances: &[Arc<Instance>],
        consumer: &ConsumerInfo,
    ) -> Machine {
        let n = instances.len();
        let mut it = Interner {
            states: Vec::new(),
            by_set: HashMap::new(),
            by_reason: HashMap::new(),
            n,
            spent: 0,
            budget: MAX_SUBSETS * n.div_ceil(64) * 64,
        };
        let full = it.must(Bitset::full(n), "no provider");
        debug_assert_eq!(full, 0);
        let ordered = ordered(rules);
        let tag_rule = ordered
            .iter()
            .find(|r| r.stage == Stage::Tag)
            .map(|r| &***r);
        let tag = build_tag_stage(tag_rule, instances, consumer, &mut it);
        let mut steps = Vec::new();
        let mut cols = Columns::new(instances);
        for r in ordered.iter().filter(|r| r.meta.enabled) {
            match &r.body {
                Body::Condition(cs) => {
                    for (i, s) in cs.iter().enumerate() {
                        if let Some(c) = compile_step(r, i, s, &mut cols, consumer) {
                            steps.push(c);
                        }
                    }
                }
                Body::Affinity(a) => {
                    if let Some(c) = compile_affinity(r, a, instances, consumer) {
                        steps.push(c);
                    }
                }
                Body::Tag(_) => {}
            }
        }
        // Unroll: states reachable before each step.
        let mut reach: Vec<StateId> = it
            .states
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.set.is_empty())
            .map(|(i, _)| i as StateId)
            .collect();
        let mut trans = Vec::with_capacity(steps.len());
        for step in &steps {
            let mut row: Vec<(StateId, Trans)> = Vec::new();
            let mut next = reach.clone();
            for &s in &reach {
                let set = it.states[s as usize].set.clone();
                let t = match &step.kind {
                    StepKind::Block => Trans::To(it.empty(&step.block_reason)),
                    StepKind::Keep(t) => {
                        let r = set.and(t);
                        if !r.is_empty() {
                            it.intern(r, "").map_or(Trans::Slow, Trans::To)
                        } else if step.force {
                            Trans::To(it.empty(&step.force_reason))
                        } else {
                            Trans::To(s)
                        }
                    }
                    StepKind::Prefer(t, share) => {
                        let r = set.and(t);
                        if preferred(&r, &set, *share) {
                            it.intern(r, "").map_or(Trans::Slow, Trans::To)
                        } else {
                            Trans::To(s)
                        }
                    }
                    StepKind::Multi(dests) if dests.is_empty() => {
                        Trans::To(it.empty(&step.block_reason))
                    }
                    StepKind::Multi(dests) => {
                        let mut cands = Vec::new();
                        let mut slow = false;
                        for (d, w) in dests {
                            let r = set.and(d);
                            if r.is_empty() {
                                continue;
                            }
                            match it.intern(r, "") {
                                Some(id) => cands.push((*w as u64, id)),
                                None => slow = true,
                            }
                        }
                        if slow {
                            Trans::Slow
                        } else if cands.is_empty() {
                            if step.force {
                                Trans::To(it.empty(&step.force_reason))
                            } else {
                                Trans::To(s)
                            }
                        } else if cands.len() == 1 {
                            Trans::To(cands[0].1)
                        } else {
                            let mut acc = 0;
                            Trans::Weighted(
                                cands
                                    .into_iter()
                                    .map(|(w, id)| {
                                        acc += w;
                                        (acc, id)
                                    })
                                    .collect(),
                            )
                        }
                    }
                };
                match &t {
                    Trans::To(id) => next.push(*id),
                    Trans::Weighted(v) => next.extend(v.iter().map(|(_, id)| *id)),
                    Trans::Slow => {}
                }
                row.push((s, t));
            }
            next.sort_unstable();
            next.dedup();
            next.retain(|&id| !it.states[id as usize].set.is_empty());
            reach = next;
            trans.push(row);
        }
        let count = it.states.len();
        let trans: Vec<Box<[Trans]>> = trans
            .into_iter()
            .map(|row| {
                let mut v = vec![Trans::Slow; count];
                for (s, t) in row {
                    v[s as usize] = t;
                }
                v.into_boxed_slice()
            })
            .collect();
        let mut states = it.states;
        let mut subsets = Vec::new();
        for s in states.iter_mut() {
            if !s.set.is_empty() || (n == 0 && subsets.is_empty()) {
                s.subset = Some(subsets.len() as u32);
                subsets.push(s.set.to_indexes());
            }
        }
        let trivial = n == 0;
        Machine {
            n,
            states,
            tag,
            steps,
            trans,
            subsets,
            trivial,
            slow: Arc::default(),
        }
    }
}
