//! The tag stage: the request tag (or the consumer's) mapped to an initial state, with the
//! dynamic tag rule's groups and the providers' static tags precomputed.

use std::collections::HashMap;
use std::sync::Arc;

use switchman_core::{Instance, Invocation};

use super::state::{Interner, State, StateId, StrMap};
use crate::bitset::Bitset;
use crate::consumer::ConsumerInfo;
use crate::rule::{Body, Rule};
use crate::tag::{AddrPattern, TagRule};

const TAG_KEY: &str = "dubbo.tag";
const FORCE_TAG_KEY: &str = "dubbo.force.tag";

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

fn static_tag(i: &Instance) -> Option<&str> {
    i.tag().filter(|t| !t.is_empty())
}

pub(super) fn build_tag_stage(
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
        (self.tag(inv), self.force(inv))
    }

    /// The call's tag: its attachment's, else the consumer's.
    #[inline]
    fn tag<'a>(&'a self, inv: &'a Invocation) -> Option<&'a str> {
        // Most calls carry no attachment: every call asks this, and those skip the search.
        if inv.attachments.is_empty() {
            return self.consumer_tag.as_deref();
        }
        inv.attachment(TAG_KEY)
            .filter(|t| !t.is_empty())
            .or(self.consumer_tag.as_deref())
    }

    /// Whether the call's tag is forced: its attachment says so, else the consumer's setting.
    #[inline]
    fn force(&self, inv: &Invocation) -> bool {
        match inv.attachment(FORCE_TAG_KEY).filter(|v| !v.is_empty()) {
            Some(v) => v.eq_ignore_ascii_case("true"),
            None => self.consumer_force,
        }
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
    #[inline(always)]
    pub(crate) fn initial(&self, inv: &Invocation, states: &[State]) -> StateId {
        // A call without a tag (the common case) looks for no `force` attachment, and takes
        // no call of its own.
        match self.tag(inv) {
            None => self.untagged,
            Some(tag) => self.initial_tagged(tag, inv, states),
        }
    }

    /// [`TagStage::initial`] for a call with a tag.
    #[inline(never)]
    fn initial_tagged(&self, tag: &str, inv: &Invocation, states: &[State]) -> StateId {
        let force = self.force(inv);
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
