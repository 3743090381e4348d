//! One routing rule as stored under a config-centre key: format detection and parsing.

use std::sync::Arc;

use switchman_core::Url;
use switchman_core::yaml::{self, Value};

use crate::condition::{
    CondVersion, RuleMeta, Scope, Step, cond_error, cond_version, find_line, parse_meta,
    parse_multi_dest, parse_v2, yaml_bool, yaml_int,
};
use crate::error::RuleError;
use crate::tag::{TagRule, parse_tag_rule};

/// The largest rule text accepted (bytes).
pub const MAX_RULE_BYTES: usize = 64 * 1024;

/// Where a rule runs in the chain: tag, then affinity (service, then provider application:
/// Dubbo 3.3.6's orders 130 and 135), then service-scope conditions, then
/// application-scope conditions (Dubbo's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Stage {
    Tag,
    ServiceAffinity,
    ApplicationAffinity,
    Service,
    Application,
}

/// The parsed body of a rule.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    /// A condition rule: a pipeline of steps.
    Condition(Vec<Step>),
    /// A tag rule.
    Tag(TagRule),
    /// An affinity rule (Dubbo 3.3.6 `{key}.affinity-router`): prefer the providers whose
    /// parameter `key` equals the consumer's, when they are at least `ratio` percent of the
    /// candidates.
    Affinity(Affinity),
}

/// The body of an affinity rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Affinity {
    /// The parameter compared (`region`, `zone`, ...).
    pub(crate) key: String,
    /// The least share of the candidates (0 to 100 percent) the preferred ones must be.
    pub(crate) ratio: f64,
}

/// A validated rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) key: Arc<str>,
    pub(crate) raw: Arc<str>,
    pub(crate) meta: RuleMeta,
    pub(crate) stage: Stage,
    pub(crate) body: Body,
    /// How the text was read, for `--explain`.
    pub(crate) format: &'static str,
}

/// Whether the text is YAML (a mapping) rather than v2 condition text: its first meaningful
/// line is `---`, a `%` directive, or `identifier:`.
pub(crate) fn looks_like_yaml(text: &str) -> bool {
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return false;
    };
    if line.starts_with("---") || line.starts_with('%') {
        return true;
    }
    let ident_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .unwrap_or(line.len());
    if ident_end == 0 {
        return false;
    }
    let rest = line[ident_end..].trim_start();
    rest.starts_with(':') && (rest.len() == 1 || rest[1..].starts_with([' ', '\t']))
}

fn stage_from_key(key: &str, scope: Option<Scope>) -> Stage {
    match scope {
        Some(Scope::Service) => Stage::Service,
        Some(Scope::Application) => Stage::Application,
        None => match key.strip_suffix(".condition-router") {
            // `{interface}:{version}:{group}` has colons; an application name does not.
            Some(k) if !k.contains(':') => Stage::Application,
            _ => Stage::Service,
        },
    }
}

/// Parses a rule stored under `key`.
pub(crate) fn parse_rule(key: &str, text: &str) -> Result<Rule, RuleError> {
    if text.len() > MAX_RULE_BYTES {
        return Err(RuleError::new(
            key,
            format!(
                "rule text is {} bytes; the limit is {MAX_RULE_BYTES}",
                text.len()
            ),
        ));
    }
    if text.trim().is_empty() {
        return Err(RuleError::new(key, "rule text is empty"));
    }
    let is_tag_key = key.ends_with(".tag-router");
    if key.ends_with(".affinity-router") {
        return parse_affinity(key, text);
    }
    if looks_like_yaml(text) {
        parse_yaml(key, text, is_tag_key)
    } else if is_tag_key {
        Err(RuleError::new(
            key,
            "a tag rule must be YAML (`tags:` with `name` and `addresses` or `match`)",
        ))
    } else {
        parse_text(key, text)
    }
}

/// The rule text as YAML, through the bounded reader (an alias bomb is refused at the node
/// limit, not expanded: `switchman_core::yaml`); the error names the key, line and column.
fn read_yaml(key: &str, text: &str) -> Result<Value, RuleError> {
    yaml::from_str(text, &format!("rule {key}")).map_err(|e| {
        let message = match e.limit() {
            Some(_) => e.message().to_string(),
            None => format!("invalid YAML: {}", e.message()),
        };
        RuleError::new(key, message).at(e.line(), e.column())
    })
}

/// An error about `field`, placed at the line where `field:` appears in the text.
fn field_error(key: &str, text: &str, msg: String, field: &str) -> RuleError {
    let pos = find_line(text, &format!("{field}:"));
    RuleError::new(key, msg).at(pos.map(|p| p.0), pos.map(|p| p.1))
}

fn parse_yaml(key: &str, text: &str, is_tag_key: bool) -> Result<Rule, RuleError> {
    let value = read_yaml(key, text)?;
    let Some(map) = value.as_mapping() else {
        return Err(RuleError::new(key, "a YAML rule must be a mapping").at(Some(1), None));
    };
    let field_err = |msg: String, field: &str| field_error(key, text, msg, field);
    if is_tag_key || map.contains_key("tags") {
        let tag = parse_tag_rule(map).map_err(|m| {
            let field = m
                .trim_start_matches('`')
                .split(['`', '['])
                .next()
                .unwrap_or("tags")
                .to_string();
            field_err(m, &field)
        })?;
        return Ok(Rule {
            key: key.into(),
            raw: text.into(),
            meta: tag.meta.clone(),
            stage: Stage::Tag,
            body: Body::Tag(tag),
            format: "tag rule (YAML)",
        });
    }
    let meta = parse_meta(map).map_err(|m| {
        let field = m.trim_start_matches('`').split('`').next().unwrap_or("");
        field_err(m.clone(), field)
    })?;
    let version = cond_version(map).map_err(|m| field_err(m, "configVersion"))?;
    let conditions = match map.get("conditions") {
        Some(Value::Sequence(items)) if !items.is_empty() => items,
        _ => {
            return Err(field_err(
                "a condition rule needs a non-empty `conditions:` list".into(),
                "conditions",
            ));
        }
    };
    let mut steps = Vec::with_capacity(conditions.len());
    for (i, item) in conditions.iter().enumerate() {
        match version {
            CondVersion::V30 => {
                let Some(s) = crate::condition::yaml_text(item) else {
                    return Err(field_err(
                        format!("`conditions[{i}]` must be a `when => then` string"),
                        "conditions",
                    ));
                };
                let c = parse_v2(&s).map_err(|e| cond_error(key, text, &s, None, e))?;
                steps.push(Step::V2(c));
            }
            CondVersion::V31 => {
                let c = parse_multi_dest(item).map_err(|m| {
                    let needle = item
                        .as_mapping()
                        .and_then(|m| m.get("from"))
                        .and_then(|f| f.as_mapping())
                        .and_then(|f| f.get("match"))
                        .and_then(crate::condition::yaml_text)
                        .unwrap_or_else(|| "conditions".into());
                    let pos = find_line(text, &needle);
                    RuleError::new(key, format!("`conditions[{i}]`: {m}"))
                        .at(pos.map(|p| p.0), pos.map(|p| p.1))
                })?;
                steps.push(Step::MultiDest(c));
            }
        }
    }
    Ok(Rule {
        key: key.into(),
        raw: text.into(),
        stage: stage_from_key(key, meta.scope),
        meta,
        body: Body::Condition(steps),
        format: match version {
            CondVersion::V30 => "condition rule (YAML v3.0)",
            CondVersion::V31 => "condition rule (YAML v3.1, multi-destination)",
        },
    })
}

/// An affinity rule, as Dubbo 3.3.6's `AffinityRuleParser` reads it:
///
/// ```yaml
/// configVersion: v3.1     # required, v3.1*
/// scope: service          # or application (then `key` is the provider application)
/// key: com.foo.Bar
/// enabled: true
/// affinityAware:
///   key: region           # the parameter compared with the consumer's
///   ratio: 20             # 0 to 100 (default 0)
/// ```
fn parse_affinity(key: &str, text: &str) -> Result<Rule, RuleError> {
    let value = read_yaml(key, text)?;
    let Some(map) = value.as_mapping() else {
        return Err(
            RuleError::new(key, "an affinity rule must be a YAML mapping").at(Some(1), None),
        );
    };
    let field_err = |msg: String, field: &str| field_error(key, text, msg, field);
    let meta = parse_meta(map).map_err(|m| {
        let field = m.trim_start_matches('`').split('`').next().unwrap_or("");
        field_err(m.clone(), field)
    })?;
    let version = map
        .get("configVersion")
        .and_then(crate::condition::yaml_text)
        .unwrap_or_default();
    if !version.starts_with("v3.1") {
        return Err(field_err(
            format!("an affinity rule needs `configVersion: v3.1` (found {version:?})"),
            "configVersion",
        ));
    }
    let Some(aware) = map.get("affinityAware").and_then(Value::as_mapping) else {
        return Err(field_err(
            "an affinity rule needs `affinityAware:` with `key` and `ratio`".into(),
            "affinityAware",
        ));
    };
    let affinity_key = aware
        .get("key")
        .and_then(crate::condition::yaml_text)
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| field_err("`affinityAware.key` is missing or empty".into(), "key"))?;
    let ratio = match aware.get("ratio") {
        None | Some(Value::Null) => 0.0,
        Some(v) => crate::condition::yaml_text(v)
            .and_then(|t| t.trim().parse::<f64>().ok())
            .filter(|r| (0.0..=100.0).contains(r))
            .ok_or_else(|| {
                field_err(
                    format!("`affinityAware.ratio` must be a number from 0 to 100, found {v:?}"),
                    "ratio",
                )
            })?,
    };
    let stage = match meta.scope {
        Some(Scope::Application) => Stage::ApplicationAffinity,
        Some(Scope::Service) => Stage::ServiceAffinity,
        None => match key.strip_suffix(".affinity-router") {
            Some(k) if !k.contains(':') => Stage::ApplicationAffinity,
            _ => Stage::ServiceAffinity,
        },
    };
    Ok(Rule {
        key: key.into(),
        raw: text.into(),
        stage,
        meta,
        body: Body::Affinity(Affinity {
            key: affinity_key,
            ratio,
        }),
        format: "affinity rule (YAML v3.1)",
    })
}

/// v2 text: one `when => then` per line (`#` comment lines and blank lines skipped), or one
/// Dubbo route URL `condition://0.0.0.0/{service}?rule=...&force=..&priority=..`.
fn parse_text(key: &str, text: &str) -> Result<Rule, RuleError> {
    let trimmed = text.trim();
    if trimmed.starts_with("condition://") || trimmed.starts_with("condition%3A") {
        return parse_route_url(key, trimmed);
    }
    let mut steps = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let c = parse_v2(line.trim_end_matches(['\n', '\r']))
            .map_err(|e| cond_error(key, text, line, Some(start), e))?;
        steps.push(Step::V2(c));
    }
    if steps.is_empty() {
        return Err(RuleError::new(key, "no condition in rule text"));
    }
    let meta = RuleMeta {
        runtime: false,
        ..RuleMeta::default()
    };
    Ok(Rule {
        key: key.into(),
        raw: text.into(),
        stage: stage_from_key(key, None),
        meta,
        body: Body::Condition(steps),
        format: "condition rule (v2 text)",
    })
}

fn parse_route_url(key: &str, text: &str) -> Result<Rule, RuleError> {
    let url = if text.starts_with("condition%3A") {
        Url::from_encoded(text)
    } else {
        Url::parse(text)
    }
    .map_err(|e| RuleError::new(key, format!("bad route URL: {e}")).at(Some(1), None))?;
    let rule = url.param("rule").ok_or_else(|| {
        RuleError::new(key, "route URL has no `rule` parameter").at(Some(1), None)
    })?;
    let rule = switchman_core::url::decode_component(rule)
        .map_err(|e| RuleError::new(key, format!("`rule` parameter: {e}")).at(Some(1), None))?;
    let mut meta = RuleMeta {
        runtime: false,
        ..RuleMeta::default()
    };
    let b = |name: &str, default: bool| -> Result<bool, RuleError> {
        match url.param(name) {
            None => Ok(default),
            Some(v) => yaml_bool(&Value::String(v.into()), name)
                .map_err(|m| RuleError::new(key, m).at(Some(1), None)),
        }
    };
    meta.force = b("force", false)?;
    meta.enabled = b("enabled", true)?;
    meta.runtime = b("runtime", false)?;
    if let Some(p) = url.param("priority") {
        meta.priority = yaml_int(&Value::String(p.into()), "priority")
            .ok()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| {
                RuleError::new(key, format!("`priority`: {p:?} is not an integer"))
                    .at(Some(1), None)
            })?;
    }
    let c = parse_v2(&rule).map_err(|e| {
        RuleError::new(
            key,
            format!("in `rule` {:?} at offset {}: {}", rule, e.offset, e.message),
        )
        .at(Some(1), None)
    })?;
    Ok(Rule {
        key: key.into(),
        raw: text.into(),
        stage: stage_from_key(key, None),
        meta,
        body: Body::Condition(vec![Step::V2(c)]),
        format: "condition rule (v2 route URL)",
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn detects_formats() {
        assert!(looks_like_yaml("configVersion: v3.0\nconditions: []"));
        assert!(looks_like_yaml("# c\n---\nforce: true"));
        assert!(looks_like_yaml("scope:\n"));
        assert!(!looks_like_yaml("method = find* => host = 1.2.3.4"));
        assert!(!looks_like_yaml("address = *:20880"));
        assert!(!looks_like_yaml("=> host = a"));
    }

    #[test]
    fn scope_from_key_and_yaml() {
        assert_eq!(
            stage_from_key("com.foo.Bar:1.0:g.condition-router", None),
            Stage::Service
        );
        assert_eq!(
            stage_from_key("com.foo.Bar::.condition-router", None),
            Stage::Service
        );
        assert_eq!(
            stage_from_key("demo-app.condition-router", None),
            Stage::Application
        );
        assert_eq!(
            stage_from_key("demo-app.condition-router", Some(Scope::Service)),
            Stage::Service
        );
    }

    #[test]
    fn v30_yaml() {
        let r = parse_rule(
            "app.condition-router",
            "configVersion: v3.0\nscope: application\nkey: app\nforce: true\npriority: 3\nenabled: true\nruntime: false\nconditions:\n  - method = a => host = 1.1.1.1\n  - => port = 1\n",
        )
        .unwrap();
        assert!(r.meta.force);
        assert!(!r.meta.runtime);
        assert_eq!(r.meta.priority, 3);
        assert_eq!(r.stage, Stage::Application);
        let Body::Condition(steps) = &r.body else {
            panic!()
        };
        assert_eq!(steps.len(), 2);
    }

    #[test]
    fn yaml_errors_name_key_and_line() {
        let e = parse_rule(
            "svc.condition-router",
            "configVersion: v3.0\nconditions:\n  - method = a => host = b\n  - method = a && b => host = c\n",
        )
        .unwrap_err();
        assert_eq!(e.key, "svc.condition-router");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("`&&`"), "{e}");
        let e = parse_rule("k", "force: maybe\nconditions: ['=> a = b']").unwrap_err();
        assert!(e.message.contains("force"), "{e}");
        assert_eq!(e.line, Some(1));
        let e = parse_rule("k", "force: true\n").unwrap_err();
        assert!(e.message.contains("conditions"), "{e}");
        let e = parse_rule("k", "configVersion: v3.2\nconditions: ['=> a = b']").unwrap_err();
        assert!(e.message.contains("v3.2"), "{e}");
        let e = parse_rule("k", "conditions: [unclosed\n").unwrap_err();
        assert!(e.message.contains("invalid YAML"), "{e}");
        assert!(e.line.is_some());
    }

    #[test]
    fn v2_text_errors_point_at_line_and_column() {
        let e = parse_rule("k", "method = a => host = b\nhost = c &&= d\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(2), Some(10)), "{e}");
    }

    #[test]
    fn size_limit_and_empty() {
        let big = "a".repeat(MAX_RULE_BYTES + 1);
        assert!(parse_rule("k", &big).unwrap_err().message.contains("limit"));
        assert!(parse_rule("k", "  \n").is_err());
        assert!(parse_rule("k", "# only a comment\n").is_err());
    }

    #[test]
    fn route_url_form() {
        let r = parse_rule(
            "k",
            "condition://0.0.0.0/com.foo.Bar?category=routers&force=true&priority=2&rule=method%3Dfind*%20%3D%3E%20host%3D1.2.3.4",
        )
        .unwrap();
        assert!(r.meta.force);
        assert_eq!(r.meta.priority, 2);
        let Body::Condition(steps) = &r.body else {
            panic!()
        };
        assert_eq!(steps[0].text(), "method=find* => host=1.2.3.4");
    }

    /// `x: &a [0,0,…]` and `y: [*a,*a,…]` around a valid rule: n×m nodes from `size` bytes.
    pub(crate) fn alias_bomb(rule: &str, size: usize) -> String {
        let room = size.saturating_sub(rule.len() + 20);
        format!(
            "{rule}x: &a [{}]\ny: [{}]\n",
            vec!["0"; room / 4].join(","),
            vec!["*a"; room / 6].join(",")
        )
    }

    #[test]
    fn alias_bombs_are_refused_at_the_yaml_node_limit() {
        let condition = "scope: service\nkey: demo.Greeter\nconditions:\n  - method = sayHello => host = 1.2.3.4\n";
        let tag = "key: shop\ntags:\n  - name: gray\n    addresses: [\"10.0.0.1:20880\"]\n";
        for (key, rule) in [
            ("demo.Greeter::.condition-router", condition),
            ("shop.tag-router", tag),
        ] {
            for size in [5 * 1024, MAX_RULE_BYTES] {
                let bomb = alias_bomb(rule, size);
                assert!(bomb.len() <= MAX_RULE_BYTES);
                let e = parse_rule(key, &bomb).unwrap_err();
                assert_eq!(e.key, key);
                assert!(
                    e.message
                        .starts_with("over the YAML node limit: more than 100000 nodes"),
                    "{size}: {e}"
                );
                assert!(e.line.is_some(), "{e}");
            }
        }
    }

    #[test]
    fn a_bomb_leaves_the_chain_in_force() {
        let key = "demo.Greeter::.condition-router";
        let good = "scope: service\nkey: demo.Greeter\nconditions:\n  - => port = 2\n";
        let chain = crate::RouterChain::new().with_rule(key, good).unwrap();
        // The bomb would route to port 1 if it were read.
        let bomb = alias_bomb(
            "scope: service\nkey: demo.Greeter\nconditions:\n  - => port = 1\n",
            5 * 1024,
        );
        let e = chain.with_rule(key, &bomb).unwrap_err();
        assert!(e.message.contains("node limit"), "{e}");
        assert_eq!(chain.rule_text(key), Some(good));
    }

    #[test]
    fn tag_rule_must_be_yaml_and_have_tags() {
        assert!(parse_rule("app.tag-router", "method = a => b = c").is_err());
        assert!(parse_rule("app.tag-router", "force: false\n").is_err());
        let r = parse_rule(
            "app.tag-router",
            "force: true\ntags:\n  - name: gray\n    addresses: [\"10.0.0.1:20880\"]\n",
        )
        .unwrap();
        assert_eq!(r.stage, Stage::Tag);
        let e = parse_rule(
            "app.tag-router",
            "configVersion: v3.0\ntags:\n  - name: g\n    match:\n      - key: env\n        value: {regex: \"(\"}\n",
        )
        .unwrap_err();
        assert!(e.message.contains("regex"), "{e}");
    }
}
