//! The per-snapshot route table: every rule compiled against one instance list and consumer,
//! and the chain unrolled into a small state machine over precomputed candidate subsets.
//!
//! A *state* is one candidate set (deduplicated); the tag stage maps a call to an initial
//! state, and each condition step maps a state to the next one when its *when* part matches
//! the call. Everything but the *when* checks and the tag lookup is done here, at build time.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;
use switchman_core::{Instance, Invocation};

use crate::ConsumerInfo;
use crate::bitset::Bitset;
use crate::condition::{Conjunction, Entry, Key, Step, Then};
use crate::pattern::MatchPair;
use crate::rule::{Body, Rule, Stage};
use crate::tag::{AddrPattern, TagRule};

/// How much a table precomputes: the candidate sets the condition steps produce may take as
/// much memory as this many sets of one bit per instance (a small set is stored as its
/// members, 32 bits each, so it costs far less). Calls whose route would need more take the
/// slow path ([`crate::Route::Computed`]). The tag stage's sets are not counted: static tags
/// partition the instances (one tag each), so their groups hold at most one entry per
/// instance in all, and with up to 8 condition steps no count of distinct tags reaches the
/// limit.
pub const MAX_SUBSETS: usize = 256;

pub(crate) type StateId = u32;

const TAG_KEY: &str = "dubbo.tag";
const FORCE_TAG_KEY: &str = "dubbo.force.tag";

/// A small string-keyed map: linear scan when small, hashed when large.
#[derive(Debug, Clone)]
pub(crate) enum StrMap {
    Small(Vec<(Box<str>, StateId)>),
    Large(HashMap<Box<str>, StateId>),
}

impl StrMap {
    fn from_pairs(pairs: Vec<(Box<str>, StateId)>) -> Self {
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

/// Reads of the invocation a *when* part makes.
#[derive(Debug, Clone)]
pub(crate) enum DynKey {
    Method,
    Argument(usize),
    Attachment(Box<str>),
}

/// A compiled condition step.
#[derive(Debug, Clone)]
pub(crate) struct CompiledStep {
    pub(crate) rule_key: Arc<str>,
    pub(crate) text: Box<str>,
    pub(crate) force: bool,
    pub(crate) dyn_when: Vec<(DynKey, MatchPair)>,
    pub(crate) kind: StepKind,
    /// For `--explain`: the compiled *then* entries per destination.
    pub(crate) then_pairs: Vec<Vec<(Box<str>, Key, MatchPair)>>,
    pub(crate) block_reason: Box<str>,
    pub(crate) force_reason: Box<str>,
}

#[derive(Debug, Clone)]
pub(crate) enum StepKind {
    /// v2: blank/false *then*.
    Block,
    /// v2: keep the providers in the set.
    Keep(Bitset),
    /// v3.1: weighted destinations (empty = traffic disabled).
    Multi(Vec<(Bitset, u32)>),
    /// Affinity: the providers in the set, when they are not none and at least this share
    /// (0.0 to 1.0) of the set; else the set unchanged.
    Prefer(Bitset, f64),
}

/// Whether an affinity step keeps `r` out of `set` (see [`StepKind::Prefer`]).
fn preferred(r: &Bitset, set: &Bitset, share: f64) -> bool {
    let (kept, all) = (r.count(), set.count());
    kept > 0 && all > 0 && kept as f64 >= share * all as f64
}

#[derive(Debug, Clone)]
pub(crate) enum Trans {
    To(StateId),
    /// Cumulative weights and targets; at least two.
    Weighted(Box<[(u64, StateId)]>),
    /// Not precomputed (state cap reached): evaluate with bitsets.
    Slow,
}

/// The tag stage, precomputed.
#[derive(Debug, Clone)]
pub(crate) struct TagStage {
    pub(crate) rule_key: Option<Arc<str>>,
    /// Dynamic rule: tag name → its set (possibly an empty state when the rule forces).
    pub(crate) dynamic: Option<(StrMap, bool)>,
    pub(crate) statics: StrMap,
    /// Providers a call without tag (or a tagged call falling back) may reach.
    pub(crate) untagged: StateId,
    pub(crate) forced_empty: StateId,
    pub(crate) consumer_tag: Option<Box<str>>,
    pub(crate) consumer_force: bool,
}

/// The state machine.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) n: usize,
    pub(crate) states: Vec<State>,
    pub(crate) tag: TagStage,
    pub(crate) steps: Vec<CompiledStep>,
    pub(crate) trans: Vec<Box<[Trans]>>,
    pub(crate) subsets: Vec<Arc<[u32]>>,
    pub(crate) trivial: bool,
    /// The sets computed on the slow path, by what they depend on (`slow.rs`).
    pub(crate) slow: Arc<crate::slow::SlowRoutes>,
}

struct Interner {
    states: Vec<State>,
    by_set: HashMap<Bitset, StateId>,
    by_reason: HashMap<Box<str>, StateId>,
    n: usize,
    /// Bits the capped (condition-step) sets hold so far, against `budget`.
    spent: usize,
    budget: usize,
}

impl Interner {
    fn intern(&mut self, set: Bitset, reason: &str) -> Option<StateId> {
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

    fn must(&mut self, set: Bitset, reason: &str) -> StateId {
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

    fn empty(&mut self, reason: &str) -> StateId {
        self.intern(Bitset::empty(self.n), reason)
            .expect("empty sets are always interned")
    }
}

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

/// A small on-stack buffer for formatting numbers without allocating.
struct StackBuf {
    buf: [u8; 64],
    len: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Calls `f` with an argument as text (`String.valueOf` of the Java value: strings as is,
/// `null`, `true`/`false`, numbers as JSON prints them, objects and arrays as JSON).
pub(crate) fn with_arg_text<R>(v: &Value, f: impl FnOnce(&str) -> R) -> R {
    match v {
        Value::String(s) => f(s),
        Value::Null => f("null"),
        Value::Bool(true) => f("true"),
        Value::Bool(false) => f("false"),
        Value::Number(n) => {
            let mut b = StackBuf {
                buf: [0; 64],
                len: 0,
            };
            if write!(b, "{n}").is_ok() {
                f(std::str::from_utf8(&b.buf[..b.len]).unwrap_or(""))
            } else {
                f(&n.to_string())
            }
        }
        other => f(&other.to_string()),
    }
}

impl CompiledStep {
    /// The per-call part of the *when*.
    #[inline]
    pub(crate) fn when_matches(&self, inv: &Invocation) -> bool {
        self.dyn_when.iter().all(|(k, pair)| match k {
            DynKey::Method => pair.is_match(Some(&inv.method), true),
            DynKey::Argument(i) => match inv.arguments.get(*i) {
                None => false,
                Some(v) => with_arg_text(v, |s| pair.is_match(Some(s), true)),
            },
            DynKey::Attachment(a) => pair.is_match(inv.attachment(a), true),
        })
    }

    /// The step applied to a set (the uncached semantics). Returns the new set, or the reason
    /// it became empty. `pick` chooses among weighted destinations.
    pub(crate) fn apply(
        &self,
        set: &Bitset,
        pick: &mut dyn FnMut(u64) -> u64,
    ) -> Result<Option<Bitset>, &str> {
        match &self.kind {
            StepKind::Block => Err(&self.block_reason),
            StepKind::Keep(t) => {
                let r = set.and(t);
                if !r.is_empty() {
                    Ok(Some(r))
                } else if self.force {
                    Err(&self.force_reason)
                } else {
                    Ok(None)
                }
            }
            StepKind::Prefer(t, share) => {
                let r = set.and(t);
                Ok(preferred(&r, set, *share).then_some(r))
            }
            StepKind::Multi(dests) => {
                if dests.is_empty() {
                    return Err(&self.block_reason);
                }
                let cands: Vec<(Bitset, u32)> = dests
                    .iter()
                    .map(|(d, w)| (set.and(d), *w))
                    .filter(|(r, _)| !r.is_empty())
                    .collect();
                match cands.len() {
                    0 if self.force => Err(&self.force_reason),
                    0 => Ok(None),
                    1 => Ok(cands.into_iter().next().map(|c| c.0)),
                    _ => {
                        let total: u64 = cands.iter().map(|c| c.1 as u64).sum();
                        let mut r = pick(total);
                        for (s, w) in cands {
                            if r < w as u64 {
                                return Ok(Some(s));
                            }
                            r -= w as u64;
                        }
                        unreachable!("r < total")
                    }
                }
            }
        }
    }
}

/// An affinity rule as a step: the providers whose parameter equals the consumer's. A
/// consumer without the parameter has nothing to prefer: no step (Dubbo would compare with
/// a missing value and keep no provider).
fn compile_affinity(
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

fn compile_step(
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

/// Orders rules as the chain runs them: tag, service, application; higher priority first;
/// then in the order they were set.
pub(crate) fn ordered(rules: &[Arc<Rule>]) -> Vec<&Arc<Rule>> {
    let mut v: Vec<&Arc<Rule>> = rules.iter().collect();
    v.sort_by_key(|r| (r.stage, std::cmp::Reverse(r.meta.priority)));
    v
}

fn static_tag(i: &Instance) -> Option<&str> {
    i.tag().filter(|t| !t.is_empty())
}

fn build_tag_stage(
    rule: Option<&Rule>,
    instances: &[Arc<Instance>],
    consumer: &ConsumerInfo,
    it: &mut Interner,
) -> TagStage {
    let n = instances.len();
    let static_empty = Bitset::from_fn(n, |i| static_tag(&instances[i]).is_none());
    // Static tag groups, in order of first appearance (a map: any number of distinct tags
    // costs one lookup per instance).
    let mut groups: Vec<(Box<str>, Bitset)> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for (idx, inst) in instances.iter().enumerate() {
        if let Some(t) = static_tag(inst) {
            let g = *group_of.entry(t).or_insert_with(|| {
                groups.push((t.into(), Bitset::empty(n)));
                groups.len() - 1
            });
            groups[g].1.insert(idx);
        }
    }
    let statics = StrMap::from_pairs(
        groups
            .into_iter()
            .map(|(t, b)| {
                let id = it.must(b, "");
                (t, id)
            })
            .collect(),
    );
    let forced_empty =
        it.empty("tag router: no provider has the requested tag and dubbo.force.tag is true");
    let consumer_tag = consumer
        .url
        .param(TAG_KEY)
        .filter(|t| !t.is_empty())
        .map(Into::into);
    let consumer_force = consumer
        .url
        .param(FORCE_TAG_KEY)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));

    let dyn_rule: Option<(&Rule, &TagRule)> = rule.and_then(|r| match &r.body {
        Body::Tag(t) if r.meta.enabled => Some((r, t)),
        _ => None,
    });
    let Some((rule, tr)) = dyn_rule else {
        let untagged = it.must(static_empty, "tag router: no provider without a tag");
        return TagStage {
            rule_key: None,
            dynamic: None,
            statics,
            untagged,
            forced_empty,
            consumer_tag,
            consumer_force,
        };
    };
    // Dubbo's TagRouterRule.init: address tags first, then (v3.0) match tags; a later tag of
    // the same name replaces an earlier one.
    let mut named: Vec<(Box<str>, Bitset)> = Vec::new();
    let mut put = |name: &str, set: Bitset| match named.iter_mut().find(|(n, _)| &**n == name) {
        Some(slot) => slot.1 = set,
        None => named.push((name.into(), set)),
    };
    let ips: Vec<Option<std::net::Ipv4Addr>> =
        instances.iter().map(|i| i.host().parse().ok()).collect();
    for t in tr.tags.iter().filter(|t| !t.addresses.is_empty()) {
        let pats: Vec<AddrPattern> = t
            .addresses
            .iter()
            .map(|a| AddrPattern::compile(a))
            .collect();
        let set = Bitset::from_fn(n, |i| {
            let inst = &instances[i];
            pats.iter()
                .any(|p| p.matches(inst.host(), ips[i], inst.port()))
        });
        put(&t.name, set);
    }
    if tr.v30 {
        for t in tr
            .tags
            .iter()
            .filter(|t| t.addresses.is_empty() && !t.matches.is_empty())
        {
            let matched: std::collections::HashSet<&str> = instances
                .iter()
                .filter(|i| t.matches.iter().all(|m| m.value.is_match(i.param(&m.key))))
                .map(|i| i.address())
                .collect();
            if !matched.is_empty() {
                put(
                    &t.name,
                    Bitset::from_fn(n, |i| matched.contains(instances[i].address())),
                );
            }
        }
    }
    let union = named.iter().fold(Bitset::empty(n), |acc, (_, s)| acc.or(s));
    let fallback = static_empty.and_not(&union);
    let untagged = it.must(fallback, "tag router: every provider is tagged");
    let names = named
        .into_iter()
        .map(|(name, set)| {
            let reason = format!(
                "{}: no provider for tag `{name}` and the rule's force is true",
                rule.key
            );
            let id = it.must(set, &reason);
            (name, id)
        })
        .collect();
    TagStage {
        rule_key: Some(rule.key.clone()),
        dynamic: Some((StrMap::from_pairs(names), rule.meta.force)),
        statics,
        untagged,
        forced_empty,
        consumer_tag,
        consumer_force,
    }
}

impl TagStage {
    /// The request tag and whether it is forced.
    #[inline]
    pub(crate) fn request<'a>(&'a self, inv: &'a Invocation) -> (Option<&'a str>, bool) {
        let tag = inv
            .attachment(TAG_KEY)
            .filter(|t| !t.is_empty())
            .or(self.consumer_tag.as_deref());
        let force = match inv.attachment(FORCE_TAG_KEY).filter(|v| !v.is_empty()) {
            Some(v) => v.eq_ignore_ascii_case("true"),
            None => self.consumer_force,
        };
        (tag, force)
    }

    /// Dubbo's `selectAddressByTagLevel`: `a|b|c`, then `a|b`, then `a` (unless forced).
    #[inline]
    fn select(names: &StrMap, tag: &str, force: bool) -> Option<StateId> {
        if force || !tag.contains('|') {
            return names.get(tag);
        }
        let mut end = tag.len();
        loop {
            if let Some(id) = names.get(&tag[..end]) {
                return Some(id);
            }
            end = tag[..end].rfind('|')?;
        }
    }

    /// The initial state for a call.
    #[inline]
    pub(crate) fn initial(&self, inv: &Invocation, states: &[State]) -> StateId {
        let (tag, force) = self.request(inv);
        let Some(tag) = tag else {
            return self.untagged;
        };
        let found = match &self.dynamic {
            Some((names, rule_force)) => match Self::select(names, tag, force) {
                Some(id) if states[id as usize].subset.is_some() || *rule_force => {
                    return id;
                }
                Some(_) => None,
                None => self.statics.get(tag),
            },
            None => self.statics.get(tag),
        };
        match found {
            Some(id) => id,
            None if force => self.forced_empty,
            None => self.untagged,
        }
    }

    /// Why the tag stage chose what it chose, for `--explain`.
    pub(crate) fn describe(&self, inv: &Invocation, states: &[State]) -> String {
        let (tag, force) = self.request(inv);
        let id = self.initial(inv, states);
        let src = match (&self.rule_key, tag) {
            (_, None) => "call has no tag: only providers without a tag".to_string(),
            (Some(k), Some(t)) => format!("request tag `{t}` (force={force}), dynamic rule {k}"),
            (None, Some(t)) => format!("request tag `{t}` (force={force}), static tags only"),
        };
        let outcome = if id == self.untagged && tag.is_some() {
            "no provider has this tag: falling back to untagged providers".to_string()
        } else if states[id as usize].subset.is_none() {
            states[id as usize].reason.to_string()
        } else {
            format!("{} provider(s)", states[id as usize].set.count())
        };
        format!("tag router: {src} -> {outcome}")
    }
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

    /// Evaluates the remaining steps from `start_step` with bitsets (the slow path).
    pub(crate) fn evaluate_from(
        &self,
        start_step: usize,
        set: Bitset,
        inv: &Invocation,
        pick: &mut dyn FnMut(u64) -> u64,
    ) -> Result<Bitset, &str> {
        let mut set = set;
        for step in &self.steps[start_step..] {
            if !step.when_matches(inv) {
                continue;
            }
            if let Some(next) = step.apply(&set, pick)? {
                set = next;
            }
        }
        Ok(set)
    }
}
