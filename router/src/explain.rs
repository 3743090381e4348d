//! Routing one call from scratch with a trace, for `switchman route --explain`.

use std::sync::Arc;

use switchman_core::{Instance, Invocation};

use crate::consumer::ConsumerInfo;
use crate::rule::{Rule, Stage};
use crate::table::{Machine, StepKind, ordered, provider_value};

/// What happened to one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderVerdict {
    /// Index into the instance list.
    pub index: usize,
    /// Whether the provider is a candidate for the call.
    pub kept: bool,
    /// Why it was kept or dropped.
    pub why: String,
}

/// The trace of routing one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The rules, in the order the chain runs them.
    pub rules: Vec<String>,
    /// What each stage did with the call.
    pub steps: Vec<String>,
    /// One verdict per provider, in input order.
    pub providers: Vec<ProviderVerdict>,
    /// Set when the rules forbid the call: the rule and why.
    pub forbidden: Option<String>,
}

impl Explanation {
    /// Indexes of the providers kept, ascending.
    pub fn kept(&self) -> Vec<usize> {
        self.providers
            .iter()
            .filter(|p| p.kept)
            .map(|p| p.index)
            .collect()
    }
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Tag => "tag",
        Stage::ServiceAffinity => "affinity (service scope)",
        Stage::ApplicationAffinity => "affinity (application scope)",
        Stage::Service => "service scope",
        Stage::Application => "application scope",
    }
}

pub(crate) fn explain(
    rules: &[Arc<Rule>],
    instances: &[Arc<Instance>],
    consumer: &ConsumerInfo,
    inv: &Invocation,
    rng: &mut fastrand::Rng,
) -> Explanation {
    let m = Machine::build(rules, instances, consumer);
    let rule_lines = ordered(rules)
        .iter()
        .map(|r| {
            format!(
                "{}: {}, {}, priority {}, force {}, enabled {}",
                r.key,
                r.format,
                stage_name(r.stage),
                r.meta.priority,
                r.meta.force,
                r.meta.enabled
            )
        })
        .collect();
    let mut steps = Vec::new();
    let mut why: Vec<Option<String>> = vec![None; instances.len()];
    let mut forbidden = None;
    if instances.is_empty() {
        return Explanation {
            rules: rule_lines,
            steps: vec!["no provider".into()],
            providers: Vec::new(),
            forbidden: None,
        };
    }
    steps.push(m.tag.describe(inv, &m.states));
    let s0 = m.tag.initial(inv, &m.states);
    let st = &m.states[s0 as usize];
    let (tag, _) = m.tag.request(inv);
    for (i, inst) in instances.iter().enumerate() {
        if !st.set.contains(i) {
            let own = inst.param("dubbo.tag").filter(|t| !t.is_empty());
            why[i] = Some(match (tag, own) {
                (None, Some(t)) => format!("dropped by the tag router: it has tag `{t}` and the call has none"),
                (None, None) => "dropped by the tag router: it is in a dynamic tag group and the call has no tag".into(),
                (Some(req), Some(t)) => format!("dropped by the tag router: it has tag `{t}`, the call asks for `{req}`"),
                (Some(req), None) => format!("dropped by the tag router: it has no tag matching `{req}`"),
            });
        }
    }
    let mut set = st.set.clone();
    if st.subset.is_none() {
        forbidden = Some(st.reason.to_string());
    } else {
        let mut pick = |t: u64| rng.u64(0..t);
        for step in &m.steps {
            if !step.when_matches(inv) {
                steps.push(format!(
                    "{}: `{}`: when does not match this call: skipped",
                    step.rule_key, step.text
                ));
                continue;
            }
            match step.apply(&set, &mut pick) {
                Ok(Some(next)) => {
                    steps.push(format!(
                        "{}: `{}`: when matches; {} -> {} provider(s)",
                        step.rule_key,
                        step.text,
                        set.count(),
                        next.count()
                    ));
                    for i in set.iter().filter(|&i| !next.contains(i)) {
                        why[i] = Some(then_reason(step, &instances[i]));
                    }
                    set = next;
                }
                Ok(None) => steps.push(format!(
                    "{}: `{}`: when matches, but no provider matches then and force is false: rule ignored",
                    step.rule_key, step.text
                )),
                Err(reason) => {
                    steps.push(reason.to_string());
                    for i in set.iter() {
                        why[i] = Some(format!("dropped: {reason}"));
                    }
                    forbidden = Some(reason.to_string());
                    break;
                }
            }
        }
    }
    let providers = why
        .into_iter()
        .enumerate()
        .map(|(index, w)| match w {
            Some(why) => ProviderVerdict {
                index,
                kept: false,
                why,
            },
            None => ProviderVerdict {
                index,
                kept: forbidden.is_none(),
                why: if forbidden.is_none() {
                    "kept: matched by every rule that applied".into()
                } else {
                    "dropped: the call is forbidden".into()
                },
            },
        })
        .collect();
    Explanation {
        rules: rule_lines,
        steps,
        providers,
        forbidden,
    }
}

fn then_reason(step: &crate::table::CompiledStep, inst: &Instance) -> String {
    if let StepKind::Multi(_) = step.kind {
        return format!(
            "dropped by {}: `{}`: not in the destination chosen",
            step.rule_key, step.text
        );
    }
    let mut buf = String::new();
    for (name, key, pair) in step.then_pairs.first().into_iter().flatten() {
        let v = provider_value(inst, key, &mut buf);
        if !pair.is_match(v, false) {
            let shown = match v {
                Some(v) => format!("is `{v}`"),
                None => "is missing".to_string(),
            };
            return format!(
                "dropped by {}: `{}`: its `{name}` {shown}",
                step.rule_key, step.text
            );
        }
    }
    format!(
        "dropped by {}: `{}`: then does not match",
        step.rule_key, step.text
    )
}
