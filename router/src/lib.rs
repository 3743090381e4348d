//! The router chain.
//!
//! Routers narrow the instance list before the balancer picks. Dubbo re-runs every router on
//! every call; Switchman splits each rule into the part that depends only on the instance list
//! and the consumer (computed once per snapshot or rule change by [`RouterChain::build`]) and the
//! part that reads the invocation (method, arguments, attachments), evaluated per call by
//! [`RouteTable::route`] without allocating in the common cases.
//!
//! The result of routing is one of a finite set of precomputed candidate subsets
//! ([`RouteTable::subsets`]); the directory builds one balancer table per subset, so a call does
//! route + pick with no O(n) work.
//!
//! # Rules
//!
//! A [`RouterChain`] holds rules by their config-centre key (see [`keys`]), each in one of
//! Dubbo 3.3's formats, detected from the text:
//!
//! - v2 condition text, `when => then`, one rule per line (or one `condition://` route URL);
//! - v3.0 condition YAML (`conditions:` a pipeline of v2 strings, with `force`, `enabled`,
//!   `priority`, `runtime`, `scope`, `key`);
//! - v3.1 condition YAML (`configVersion: v3.1`, `from`/`to` with weighted destinations);
//! - tag rules (`tags:` with `addresses`, or v3.0 `match` selectors).
//!
//! The chain runs the tag stage first, then service-scope condition rules, then
//! application-scope ones, higher `priority` first within a scope. `router/README.md` documents
//! every grammar feature and outcome, and where Switchman knowingly differs from Dubbo.
//!
//! ```
//! use std::sync::Arc;
//! use switchman_core::{Instance, Invocation, Url};
//! use switchman_router::{ConsumerInfo, Route, RouterChain};
//!
//! let chain = RouterChain::new()
//!     .with_rule("com.foo.Bar::.condition-router", "method = find* => port = 20881")
//!     .unwrap();
//! let instances: Vec<Arc<Instance>> = ["dubbo://10.0.0.1:20880/com.foo.Bar", "dubbo://10.0.0.2:20881/com.foo.Bar"]
//!     .iter()
//!     .map(|u| Arc::new(Instance::from_url(&Url::parse(u).unwrap()).unwrap()))
//!     .collect();
//! let table = chain.build(&instances, &ConsumerInfo::new("10.0.9.9", "shop"));
//! let mut rng = fastrand::Rng::with_seed(1);
//! let Route::Subset(i) = table.route(&Invocation::new("findUser"), &mut rng) else { panic!() };
//! assert_eq!(&*table.subsets()[i], &[1]);
//! assert_eq!(table.route(&Invocation::new("save"), &mut rng), Route::Subset(0));
//! ```
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

use std::sync::Arc;

use switchman_core::{Instance, Invocation};

mod bitset;
mod condition;
mod consumer;
mod custom;
mod error;
mod explain;
mod pattern;
mod rule;
pub mod source;
mod table;
mod tag;

pub use condition::lint_v2;
pub use consumer::ConsumerInfo;
pub use custom::{MAX_ROUTER_SETS, MAX_ROUTER_SUBSETS, Router, RouterStage};
pub use error::RuleError;
pub use explain::{Explanation, ProviderVerdict};
pub use rule::MAX_RULE_BYTES;
pub use source::{FileRuleSource, RuleSource, keys};
pub use table::{MAX_SUBSETS, SLOW_ROUTES};

use rule::Rule;
use table::{Machine, Trans, slow};

/// The outcome of routing one call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route<'a> {
    /// Use precomputed subset `i` of [`RouteTable::subsets`].
    Subset(usize),
    /// A subset that was not precomputed (rare: only when a chain would need more than
    /// [`MAX_SUBSETS`] distinct candidate sets). The table keeps the last [`SLOW_ROUTES`] of
    /// them by what they depend on, so a call of a shape seen before gets the same set again
    /// without work over every instance; the snapshot keeps a balancer table per set.
    Computed(Arc<[u32]>),
    /// Rules forbid this call (a `false` then-part, a forced empty result, a forced tag with
    /// no provider, traffic disabled); the string names the rule and why.
    Forbidden(&'a str),
}

/// The ordered set of routing rules, by key. Cheap to clone; immutable: updates return a new
/// chain, so an invalid rule leaves the chain in force untouched.
#[derive(Debug, Clone, Default)]
pub struct RouterChain {
    rules: Arc<[Arc<Rule>]>,
    /// Routers of your own, run after the rules in this order ([`RouterChain::with_router`]).
    routers: Arc<[Arc<dyn Router>]>,
}

impl RouterChain {
    /// A chain with no rules: every available instance is a candidate (static provider tags
    /// still apply, as in Dubbo: a call without a tag never reaches a tagged provider).
    pub fn new() -> Self {
        RouterChain::default()
    }

    /// A new chain with the rule under `key` set to `text` (added, or replacing the rule with
    /// that key in place). The format is detected: v2 text, v3.0/v3.1 condition YAML, or tag
    /// YAML (a key ending in `.tag-router`, or YAML with `tags:`). On error, `self` is
    /// unchanged and the error names the key, the line and column, and the problem.
    pub fn with_rule(&self, key: &str, text: &str) -> Result<RouterChain, RuleError> {
        let rule = Arc::new(rule::parse_rule(key, text)?);
        Ok(self.with_parsed(rule))
    }

    fn with_parsed(&self, rule: Arc<Rule>) -> RouterChain {
        let mut rules: Vec<Arc<Rule>> = self.rules.to_vec();
        match rules.iter_mut().find(|r| r.key == rule.key) {
            Some(slot) => *slot = rule,
            None => rules.push(rule),
        }
        RouterChain {
            rules: rules.into(),
            routers: self.routers.clone(),
        }
    }

    /// A new chain without the rule under `key` (a deleted config-centre node).
    pub fn without_rule(&self, key: &str) -> RouterChain {
        let rules: Vec<Arc<Rule>> = self
            .rules
            .iter()
            .filter(|r| &*r.key != key)
            .cloned()
            .collect();
        RouterChain {
            rules: rules.into(),
            routers: self.routers.clone(),
        }
    }

    /// A new chain in which the rule under `key` has `force: true` (used by `switchman route
    /// --force` to try a v2 text rule, which has no field for it).
    pub fn with_force(&self, key: &str) -> RouterChain {
        let rules: Vec<Arc<Rule>> = self
            .rules
            .iter()
            .map(|r| {
                if &*r.key == key {
                    let mut c = (**r).clone();
                    c.meta.force = true;
                    Arc::new(c)
                } else {
                    r.clone()
                }
            })
            .collect();
        RouterChain {
            rules: rules.into(),
            routers: self.routers.clone(),
        }
    }

    /// A new chain with `router` run after the rules (and after the routers added before it),
    /// replacing a router of the same [`Router::name`] in place. Rules set or removed later
    /// keep it.
    pub fn with_router(&self, router: Arc<dyn Router>) -> RouterChain {
        let mut routers: Vec<Arc<dyn Router>> = self.routers.to_vec();
        match routers.iter_mut().find(|r| r.name() == router.name()) {
            Some(slot) => *slot = router,
            None => routers.push(router),
        }
        RouterChain {
            rules: self.rules.clone(),
            routers: routers.into(),
        }
    }

    /// A new chain without the router named `name`.
    pub fn without_router(&self, name: &str) -> RouterChain {
        let routers: Vec<Arc<dyn Router>> = self
            .routers
            .iter()
            .filter(|r| r.name() != name)
            .cloned()
            .collect();
        RouterChain {
            rules: self.rules.clone(),
            routers: routers.into(),
        }
    }

    /// The names of the routers of your own, in the order they run.
    pub fn router_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.routers.iter().map(|r| r.name())
    }

    /// The rule keys, in the order they were set.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.rules.iter().map(|r| &*r.key)
    }

    /// The text of the rule under `key`.
    pub fn rule_text(&self, key: &str) -> Option<&str> {
        self.rules.iter().find(|r| &*r.key == key).map(|r| &*r.raw)
    }

    /// Whether `other` is this very chain (a clone of it), not merely an equal one: every
    /// change (`with_rule`, `without_rule`, `with_force`) makes a new chain.
    pub fn is_same(&self, other: &RouterChain) -> bool {
        Arc::ptr_eq(&self.rules, &other.rules) && Arc::ptr_eq(&self.routers, &other.routers)
    }

    /// Whether a rule may read an instance's weight, warm-up or start timestamp (its text
    /// names one of them; a conservative check). When none does, a change of only those values
    /// leaves every routing result as it was, and a directory keeps its route table.
    /// A router of your own may read anything: with one, this is `true`.
    pub fn reads_weighting(&self) -> bool {
        !self.routers.is_empty()
            || self.rules.iter().any(|r| {
                let text = r.raw.to_ascii_lowercase();
                ["weight", "warmup", "timestamp"]
                    .iter()
                    .any(|w| text.contains(w))
            })
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the chain has no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Precomputes everything that depends only on `instances` and the consumer: the tag
    /// groups, every *then* set, the consumer-side part of every *when*, and the transitions
    /// between the resulting candidate sets.
    /// The routers of your own are prepared here too ([`Router::prepare`]), each of their
    /// sets intersected with the rules' subsets.
    pub fn build(&self, instances: &[Arc<Instance>], consumer: &ConsumerInfo) -> RouteTable {
        let m = Machine::build(&self.rules, instances, consumer);
        let custom = (!self.routers.is_empty()).then(|| {
            Arc::new(custom::Stages::build(
                &self.routers,
                instances,
                consumer,
                &m.subsets,
            ))
        });
        RouteTable { m, custom }
    }

    /// Routes one call from scratch and says why: which rules matched and why each provider
    /// was kept or dropped. For tools (`switchman route --explain`), not for the call path.
    pub fn explain(
        &self,
        instances: &[Arc<Instance>],
        consumer: &ConsumerInfo,
        invocation: &Invocation,
        rng: &mut fastrand::Rng,
    ) -> Explanation {
        explain::explain(&self.rules, instances, consumer, invocation, rng)
    }
}

/// The chain's precomputed state for one instance list.
#[derive(Debug, Clone)]
pub struct RouteTable {
    m: Machine,
    /// The routers of your own, prepared (`None`: the chain has none).
    custom: Option<Arc<custom::Stages>>,
}

impl RouteTable {
    /// The distinct candidate subsets (indexes into the instance list, ascending).
    /// Subset 0 is the result when no rule applies (every instance).
    #[inline]
    pub fn subsets(&self) -> &[Arc<[u32]>] {
        match &self.custom {
            Some(c) => &c.subsets,
            None => &self.m.subsets,
        }
    }

    /// Routes one call: the per-invocation part of every rule (the tag lookup, the *when*
    /// checks on method, arguments and attachments, a weighted draw for v3.1 destinations).
    /// Allocates nothing unless the result is a [`Route::Computed`] set not seen before.
    #[inline]
    pub fn route(&self, invocation: &Invocation, rng: &mut fastrand::Rng) -> Route<'_> {
        // The rules' result is returned where it is made: passing it through a local first
        // cost 10 ns per call (the `call_path` bench's `route_pick`, a store-forwarding stall
        // on the moved value).
        if let Some(stages) = &self.custom {
            return self.route_with(stages, invocation, rng);
        }
        self.route_rules(invocation, rng)
    }

    /// [`RouteTable::route`] with routers of one's own after the rules.
    #[inline(never)]
    fn route_with<'a>(
        &'a self,
        stages: &'a custom::Stages,
        invocation: &Invocation,
        rng: &mut fastrand::Rng,
    ) -> Route<'a> {
        stages.route(self.route_rules(invocation, rng), invocation)
    }

    /// The rules' part of [`RouteTable::route`].
    #[inline(always)]
    fn route_rules(&self, invocation: &Invocation, rng: &mut fastrand::Rng) -> Route<'_> {
        let m = &self.m;
        if m.trivial {
            return Route::Subset(0);
        }
        let mut s = m.tag.initial(invocation, &m.states);
        for (k, step) in m.steps.iter().enumerate() {
            let st = &m.states[s as usize];
            if st.subset.is_none() {
                return Route::Forbidden(&st.reason);
            }
            if !step.when_matches(invocation) {
                continue;
            }
            s = match &m.trans[k][s as usize] {
                Trans::To(t) => *t,
                Trans::Weighted(opts) => {
                    let total = opts.last().map_or(1, |o| o.0);
                    let r = rng.u64(0..total);
                    opts.iter()
                        .find(|(end, _)| r < *end)
                        .map_or(s, |(_, id)| *id)
                }
                Trans::Slow => {
                    // A call of a shape seen before takes the set computed then (table/slow.rs).
                    let key = slow::SlowKey::of(&m.steps, k, s, invocation);
                    if let Some(kept) = key.as_ref().and_then(|key| m.slow.get(key)) {
                        return Route::Computed(kept);
                    }
                    let set = st.set.clone();
                    let mut drew = false;
                    let mut pick = |t| {
                        drew = true;
                        rng.u64(0..t)
                    };
                    return match m.evaluate_from(k, set, invocation, &mut pick) {
                        Ok(set) => {
                            let members = set.to_indexes();
                            if let (Some(key), false) = (key, drew) {
                                m.slow.put(key, members.clone());
                            }
                            Route::Computed(members)
                        }
                        Err(reason) => Route::Forbidden(reason),
                    };
                }
            };
        }
        let st = &m.states[s as usize];
        match st.subset {
            Some(i) => Route::Subset(i as usize),
            None => Route::Forbidden(&st.reason),
        }
    }

    /// Number of instances the table was built for.
    pub fn len(&self) -> usize {
        self.m.n
    }

    /// Whether the table was built for an empty instance list.
    pub fn is_empty(&self) -> bool {
        self.m.n == 0
    }
}
