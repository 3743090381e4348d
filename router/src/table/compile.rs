//! Compiling rules against one instance list and consumer: the consumer-only part of each
//! *when* is decided here, and each *then* becomes a set of providers.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use switchman_core::Instance;

use super::step::{CompiledStep, DynKey, StepKind};
use crate::bitset::Bitset;
use crate::condition::{Conjunction, Entry, Key, Step, Then};
use crate::consumer::ConsumerInfo;
use crate::pattern::MatchPair;
use crate::rule::Rule;

/// The consumer's value for a key (Dubbo's `toOriginalMap` of the consumer URL).
fn consumer_value(c: &ConsumerInfo, key: &Key) -> Option<String> {
    let u = &c.url;
    match key {
        Key::Host => Some(u.host().to_string()),
        Key::Port => u.port().filter(|&p| p > 0).map(|p| p.to_string()),
        Key::Address => Some(u.address()),
        Key::Protocol => Some(u.protocol().to_string()),
        Key::Path => Some(u.path().to_string()),
        Key::Param(k) => u.param(k).map(str::to_string),
        Key::Method | Key::Argument(_) | Key::Attachment(_) => None,
    }
}

/// Dubbo's `URL.getRawParameter` of the consumer, for `$name` in *then* parts.
pub(crate) fn consumer_ref(c: &ConsumerInfo, name: &str) -> Option<String> {
    let u = &c.url;
    match name {
        "protocol" => Some(u.protocol().to_string()),
        "host" => Some(u.host().to_string()),
        "port" => Some(u.port().unwrap_or(0).to_string()),
        "path" => Some(u.path().to_string()),
        "username" => u.username().map(str::to_string),
        "password" => u.password().map(str::to_string),
        other => u.param(other).map(str::to_string),
    }
}

/// A provider's value for a key (Dubbo's `toOriginalMap` of the provider URL).
pub(crate) fn provider_value<'a>(
    i: &'a Instance,
    key: &Key,
    port_buf: &'a mut String,
) -> Option<&'a str> {
    match key {
        Key::Host => Some(i.host()),
        Key::Port => {
            port_buf.clear();
            let _ = write!(port_buf, "{}", i.port());
            Some(port_buf.as_str())
        }
        Key::Address => Some(i.address()),
        Key::Protocol => Some(i.protocol().as_str()),
        Key::Path => Some(i.path()),
        Key::Param(k) => i.param(k),
        // No invocation in a *then* part (as in Dubbo): never matches.
        Key::Method | Key::Argument(_) | Key::Attachment(_) => None,
    }
}

/// Provider parameter values by key, read once per build (parameters live in a map; a rule
/// set usually tests the same few keys in many branches).
pub(crate) struct Columns<'a> {
    instances: &'a [Arc<Instance>],
    params: HashMap<Box<str>, Vec<Option<&'a str>>>,
}

impl<'a> Columns<'a> {
    pub(crate) fn new(instances: &'a [Arc<Instance>]) -> Self {
        Columns {
            instances,
            params: HashMap::new(),
        }
    }

    fn param(&mut self, k: &str) -> &[Option<&'a str>] {
        let instances = self.instances;
        self.params
            .entry(k.into())
            .or_insert_with(|| instances.iter().map(|i| i.param(k)).collect())
    }
}

/// Compiles a *then* conjunction against every provider. An empty conjunction matches
/// `empty_matches_all` (false for v2, true for v3.1 destinations, as in Dubbo).
fn then_set(
    conj: &Conjunction,
    cols: &mut Columns<'_>,
    consumer: &ConsumerInfo,
    empty_matches_all: bool,
) -> (Bitset, Vec<(Box<str>, Key, MatchPair)>) {
    let instances = cols.instances;
    let n = instances.len();
    let resolve = |name: &str| consumer_ref(consumer, name);
    let pairs: Vec<(Box<str>, Key, MatchPair)> = conj
        .entries
        .iter()
        .map(|e: &Entry| (e.name.clone(), e.key.clone(), e.compile(Some(&resolve))))
        .collect();
    if pairs.is_empty() {
        let set = if empty_matches_all {
            Bitset::full(n)
        } else {
            Bitset::empty(n)
        };
        return (set, pairs);
    }
    let mut keep = vec![true; n];
    let mut buf = String::new();
    for (_, key, pair) in &pairs {
        if let Key::Param(k) = key {
            let col = cols.param(k);
            for (slot, v) in keep.iter_mut().zip(col) {
                if *slot && !pair.is_match(*v, false) {
                    *slot = false;
                }
            }
        } else {
            for (slot, inst) in keep.iter_mut().zip(instances) {
                if *slot && !pair.is_match(provider_value(inst, key, &mut buf), false) {
                    *slot = false;
                }
            }
        }
    }
    (Bitset::from_fn(n, |i| keep[i]), pairs)
}

/// Splits a *when* into its consumer-only part (evaluated now) and its per-call part.
fn compile_when(conj: &Conjunction, consumer: &ConsumerInfo) -> (bool, Vec<(DynKey, MatchPair)>) {
    let mut dynamic = Vec::new();
    for e in &conj.entries {
        let pair = e.compile(None);
        match &e.key {
            Key::Method => dynamic.push((DynKey::Method, pair)),
            Key::Argument(i) => dynamic.push((DynKey::Argument(*i), pair)),
            Key::Attachment(k) => dynamic.push((DynKey::Attachment(k.clone()), pair)),
            other => {
                if !pair.is_match(consumer_value(consumer, other).as_deref(), true) {
                    return (false, Vec::new());
                }
            }
        }
    }
    (true, dynamic)
}

/// An affinity rule as a step: the providers whose parameter equals the consumer's. A
/// consumer without the parameter has nothing to prefer: no step (Dubbo would compare with
/// a missing value and keep no provider).
pub(super) fn compile_affinity(
    rule: &Rule,
    a: &crate::rule::Affinity,
    instances: &[Arc<Instance>],
    consumer: &ConsumerInfo,
) -> Option<CompiledStep> {
    let mine = consumer.url.param(&a.key).filter(|v| !v.is_empty())?;
    let mut set = Bitset::empty(instances.len());
    for (i, inst) in instances.iter().enumerate() {
        if inst.param(&a.key) == Some(mine) {
            set.insert(i);
        }
    }
    let text: Box<str> = format!("{} = {mine} (ratio {}%)", a.key, a.ratio).into();
    Some(CompiledStep {
        rule_key: rule.key.clone(),
        force_reason: "".into(),
        text,
        force: false,
        dyn_when: Vec::new(),
        kind: StepKind::Prefer(set, a.ratio / 100.0),
        then_pairs: Vec::new(),
        block_reason: "".into(),
    })
}

pub(super) fn compile_step(
    rule: &Rule,
    idx: usize,
    step: &Step,
    cols: &mut Columns<'_>,
    consumer: &ConsumerInfo,
) -> Option<CompiledStep> {
    let (static_ok, dyn_when) = compile_when(step.when(), consumer);
    if !static_ok {
        return None;
    }
    let key = &rule.key;
    let text: Box<str> = step.text().into();
    let (kind, then_pairs, block_reason) = match step {
        Step::V2(c) => match &c.then {
            Then::Block => (
                StepKind::Block,
                Vec::new(),
                format!("{key}: condition #{} `{text}` blocks the call", idx + 1),
            ),
            Then::Keep(conj) => {
                let (set, pairs) = then_set(conj, cols, consumer, false);
                (StepKind::Keep(set), vec![pairs], String::new())
            }
        },
        Step::MultiDest(m) => {
            let mut dests = Vec::new();
            let mut all_pairs = Vec::new();
            for d in &m.to {
                let (set, pairs) = then_set(&d.then, cols, consumer, true);
                dests.push((set, d.weight));
                all_pairs.push(pairs);
            }
            (
                StepKind::Multi(dests),
                all_pairs,
                format!(
                    "{key}: condition #{} `{text}` disables this traffic (no `to`)",
                    idx + 1
                ),
            )
        }
    };
    Some(CompiledStep {
        rule_key: rule.key.clone(),
        force_reason: format!(
            "{key}: condition #{} `{text}` left no provider and force is true",
            idx + 1
        )
        .into(),
        text,
        force: rule.meta.force,
        dyn_when,
        kind,
        then_pairs,
        block_reason: block_reason.into(),
    })
}
