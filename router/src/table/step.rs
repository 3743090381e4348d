//! A compiled condition step and what it does to one call: the per-call part of its *when*,
//! and the step applied to a candidate set.

use std::sync::Arc;

use serde_json::Value;
use switchman_core::Invocation;
use switchman_core::java_text::with_java_text;

use crate::bitset::Bitset;
use crate::condition::Key;
use crate::pattern::MatchPair;

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
pub(super) fn preferred(r: &Bitset, set: &Bitset, share: f64) -> bool {
    let (kept, all) = (r.count(), set.count());
    kept > 0 && all > 0 && kept as f64 >= share * all as f64
}

/// Calls `f` with an argument as text: `String.valueOf` of the Java object it becomes for its
/// declared type `java_type` (`Invocation::parameter_types[i]`; `None`: untyped), as
/// [`switchman_core::java_text`] renders it. Strings are passed as is and numbers formatted on
/// the stack, so scalar arguments cost no allocation; collections and POJOs allocate.
pub(crate) fn with_arg_text<R>(v: &Value, java_type: Option<&str>, f: impl FnOnce(&str) -> R) -> R {
    with_java_text(v, java_type, f)
}

impl CompiledStep {
    /// The per-call part of the *when*.
    #[inline]
    pub(crate) fn when_matches(&self, inv: &Invocation) -> bool {
        self.dyn_when.iter().all(|(k, pair)| match k {
            DynKey::Method => pair.is_match(Some(&inv.method), true),
            DynKey::Argument(i) => match inv.arguments.get(*i) {
                None => false,
                Some(v) => with_arg_text(v, inv.parameter_types.get(*i).map(String::as_str), |s| {
                    pair.is_match(Some(s), true)
                }),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use switchman_core::{Instance, Url};

    use super::*;
    use crate::{ConsumerInfo, Route, RouterChain};

    #[test]
    fn argument_text_follows_the_declared_type() {
        for (v, t, want) in [
            (json!("vip"), None, "vip"),
            (json!("vip"), Some("java.lang.String"), "vip"),
            (json!(5), None, "5"),
            (json!(5), Some("double"), "5.0"),
            (json!(5), Some("java.lang.Double"), "5.0"),
            (json!(5.0), Some("int"), "5"),
            (json!(1.5), None, "1.5"),
            (json!(1e10), None, "1.0E10"),
            (json!(null), Some("double"), "null"),
            (json!(true), None, "true"),
            (json!(["a", "b"]), Some("java.util.List"), "[a, b]"),
            (json!(["a", "b"]), None, "[a, b]"),
            (json!({"k": 1}), None, "{k=1}"),
            (json!({"id": 1}), Some("com.foo.User"), r#"{"id":1}"#),
        ] {
            assert_eq!(with_arg_text(&v, t, str::to_owned), want, "{v} as {t:?}");
        }
    }

    fn routed_ports(rule: &str, inv: &Invocation) -> Vec<u16> {
        let providers: Vec<Arc<Instance>> = [
            "dubbo://10.0.0.1:20880/com.foo.Bar?application=prov",
            "dubbo://10.0.0.2:20881/com.foo.Bar?application=prov",
        ]
        .iter()
        .map(|u| Arc::new(Instance::from_url(&Url::parse(u).unwrap()).unwrap()))
        .collect();
        let consumer = ConsumerInfo::from_url(
            Url::parse("consumer://10.1.1.1/com.foo.Bar?application=shop").unwrap(),
        );
        let table = RouterChain::new()
            .with_rule("com.foo.Bar::.condition-router", rule)
            .unwrap()
            .build(&providers, &consumer);
        let kept: Vec<u32> = match table.route(inv, &mut fastrand::Rng::with_seed(7)) {
            Route::Subset(i) => table.subsets()[i].to_vec(),
            Route::Computed(s) => s.to_vec(),
            other => panic!("unexpected outcome {other:?}"),
        };
        kept.iter().map(|&i| providers[i as usize].port()).collect()
    }

    #[test]
    fn arguments_match_the_java_text_of_the_declared_type() {
        let rule = "arguments[0] = 5.0 => port = 20881";
        let untyped = Invocation::new("m").with_args(vec![json!(5)]);
        let typed = untyped.clone().with_types(["double"]);
        // Untyped, 5 is the Integer 5: "5" does not match 5.0, the rule does not apply.
        assert_eq!(routed_ports(rule, &untyped), vec![20880, 20881]);
        // Declared double, it is the Double 5.0.
        assert_eq!(routed_ports(rule, &typed), vec![20881]);
        let list = Invocation::new("m")
            .with_args(vec![json!(["a", "b"])])
            .with_types(["java.util.List<java.lang.String>"]);
        assert_eq!(
            routed_ports("arguments[0] = [a* => port = 20881", &list),
            vec![20881]
        );
    }
}
