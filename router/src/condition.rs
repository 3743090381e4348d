//! Condition rules: the v2 `when => then` grammar, v3.0 YAML (a pipeline of v2 strings) and
//! v3.1 YAML (multi-destination `from`/`to`).

use switchman_core::yaml::{Mapping, Value};

use crate::error::RuleError;
use crate::pattern::{MatchPair, Pattern, Resolve};

/// What a condition key reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    /// `method`/`methods` in a *when* part: the invoked method.
    Method,
    /// `arguments[i]`: the i-th argument as text.
    Argument(usize),
    /// `attachments[key]`.
    Attachment(Box<str>),
    /// `host`.
    Host,
    /// `port`.
    Port,
    /// `address` (`host:port`).
    Address,
    /// `protocol`.
    Protocol,
    /// `path`.
    Path,
    /// Any other URL parameter (`application`, `zone`, `version`, ...).
    Param(Box<str>),
}

/// One `key = values` / `key != values` entry, values still as written (a `$name` in a *then*
/// part is resolved against the consumer when the table is built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) name: Box<str>,
    pub(crate) key: Key,
    pub(crate) matches: Vec<Box<str>>,
    pub(crate) mismatches: Vec<Box<str>>,
}

impl Entry {
    /// Compiles the values into patterns.
    pub(crate) fn compile(&self, resolve: Resolve<'_>) -> MatchPair {
        MatchPair {
            matches: self
                .matches
                .iter()
                .map(|v| Pattern::compile(v, resolve))
                .collect(),
            mismatches: self
                .mismatches
                .iter()
                .map(|v| Pattern::compile(v, resolve))
                .collect(),
        }
    }
}

/// A conjunction of entries (`a = 1 & b != 2`). Empty matches everything (for a *when*).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conjunction {
    pub(crate) entries: Vec<Entry>,
}

/// The *then* side of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Then {
    /// Blank or `false`: the call is blocked when *when* matches (whatever `force` says).
    Block,
    /// Keep the providers matching these conditions.
    Keep(Conjunction),
}

/// One v2 condition: `when => then`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct V2Condition {
    pub(crate) text: Box<str>,
    pub(crate) when: Conjunction,
    pub(crate) then: Then,
}

/// One destination of a v3.1 condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Destination {
    /// Empty matches every provider (a blank or `false` match, as in Dubbo 3.3).
    pub(crate) then: Conjunction,
    pub(crate) weight: u32,
}

/// One v3.1 condition: `from` a set of calls `to` weighted destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MultiDestCondition {
    pub(crate) text: Box<str>,
    pub(crate) when: Conjunction,
    /// Empty: traffic matching `from` is disabled.
    pub(crate) to: Vec<Destination>,
}

/// One step of a condition pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A v2 condition (from v2 text or a v3.0 `conditions:` item).
    V2(V2Condition),
    /// A v3.1 multi-destination condition.
    MultiDest(MultiDestCondition),
}

impl Step {
    pub(crate) fn when(&self) -> &Conjunction {
        match self {
            Step::V2(c) => &c.when,
            Step::MultiDest(c) => &c.when,
        }
    }
    pub(crate) fn text(&self) -> &str {
        match self {
            Step::V2(c) => &c.text,
            Step::MultiDest(c) => &c.text,
        }
    }
}

/// Which part of a condition is being parsed: `method` means the invoked method only in a
/// *when*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    When,
    Then,
}

/// A parse error inside one condition string: byte offset and message.
#[derive(Debug)]
pub(crate) struct CondError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

fn is_sep(c: u8) -> bool {
    matches!(c, b'&' | b'!' | b'=' | b',')
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Splits a condition string the way Dubbo's `([&!=,]*)\s*([^&!=,\s]+)` finds tokens:
/// (offset, separator, content).
fn tokens(s: &str) -> Vec<(usize, &str, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    while start < b.len() {
        let mut e1 = start;
        while e1 < b.len() && is_sep(b[e1]) {
            e1 += 1;
        }
        let mut e2 = e1;
        while e2 < b.len() && is_ws(b[e2]) {
            e2 += 1;
        }
        let mut e3 = e2;
        while e3 < b.len() && !is_sep(b[e3]) && !is_ws(b[e3]) {
            e3 += 1;
        }
        if e3 > e2 {
            out.push((start, &s[start..e1], &s[e2..e3]));
            start = e3;
        } else {
            start += 1;
        }
    }
    out
}

fn strip_role_prefix(key: &str) -> &str {
    key.strip_prefix("consumer.")
        .or_else(|| key.strip_prefix("provider."))
        .unwrap_or(key)
}

fn classify(name: &str, side: Side, offset: usize) -> Result<Key, CondError> {
    let err = |message: String| CondError { offset, message };
    if let Some(rest) = name.strip_prefix("arguments[") {
        let idx = rest
            .strip_suffix(']')
            .filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| {
                err(format!(
                    "`{name}`: expected `arguments[N]` with N a non-negative integer"
                ))
            })?;
        let idx = idx
            .parse::<usize>()
            .map_err(|_| err(format!("`{name}`: argument index too large")))?;
        return Ok(Key::Argument(idx));
    }
    if let Some(rest) = name.strip_prefix("attachments[") {
        let k = rest
            .strip_suffix(']')
            .filter(|k| !k.is_empty())
            .ok_or_else(|| err(format!("`{name}`: expected `attachments[key]`")))?;
        return Ok(Key::Attachment(k.into()));
    }
    Ok(match name {
        "method" | "methods" if side == Side::When => Key::Method,
        "host" => Key::Host,
        "port" => Key::Port,
        "address" => Key::Address,
        "protocol" => Key::Protocol,
        "path" => Key::Path,
        other => Key::Param(other.into()),
    })
}

/// Parses `a = 1,2 & b != 3` (Dubbo's `parseRule`). The same key joined with `&` merges; a
/// key that starts a new clause without `&` (after whitespace) replaces an earlier one, as in
/// Dubbo.
pub(crate) fn parse_conjunction(s: &str, side: Side) -> Result<Conjunction, CondError> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut current: Option<usize> = None;
    // Which list of the current entry the last value went to: Some(true) = matches.
    let mut values: Option<bool> = None;
    for (offset, sep, content) in tokens(s) {
        match sep {
            "" | "&" => {
                let name = strip_role_prefix(content);
                let key = classify(name, side, offset + sep.len())?;
                let existing = entries.iter().position(|e| *e.name == *name);
                let fresh = Entry {
                    name: name.into(),
                    key,
                    matches: Vec::new(),
                    mismatches: Vec::new(),
                };
                let idx = match (sep, existing) {
                    ("&", Some(i)) => i,
                    ("", Some(i)) => {
                        entries[i] = fresh;
                        i
                    }
                    _ => {
                        entries.push(fresh);
                        entries.len() - 1
                    }
                };
                current = Some(idx);
                values = None;
            }
            "=" | "!=" => {
                let Some(i) = current else {
                    return Err(CondError {
                        offset,
                        message: format!("`{sep}` before `{content}` has no key on its left"),
                    });
                };
                let is_match = sep == "=";
                if is_match {
                    entries[i].matches.push(content.into());
                } else {
                    entries[i].mismatches.push(content.into());
                }
                values = Some(is_match);
            }
            "," => {
                let (Some(i), Some(is_match)) = (current, values) else {
                    return Err(CondError {
                        offset,
                        message: format!("`,` before `{content}` does not follow a value"),
                    });
                };
                if is_match {
                    entries[i].matches.push(content.into());
                } else {
                    entries[i].mismatches.push(content.into());
                }
            }
            other => {
                return Err(CondError {
                    offset,
                    message: format!(
                        "malformed separator `{other}` before `{content}` (expected `&`, `=`, `!=` or `,`)"
                    ),
                });
            }
        }
    }
    Ok(Conjunction { entries })
}

/// What a v2 condition accepts only leniently, as Dubbo does, and probably not as meant:
/// no `=>` (the whole rule is then the `then` part and applies to every call), a key that
/// starts a clause without `&` after a value (Dubbo reads an implicit `&`, and a repeated key
/// replaces the earlier one), and a key with no value. Empty for a rule that reads cleanly or
/// does not parse at all (the parser reports that).
pub fn lint_v2(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let t = text.trim();
    if t.is_empty() || t.starts_with('#') || parse_v2(t).is_err() {
        return out;
    }
    let parts: Vec<(&str, &str)> = match t.find("=>") {
        Some(i) => vec![("when", &t[..i]), ("then", &t[i + 2..])],
        None => {
            out.push(format!(
                "{t:?} has no `=>`: it is read as a then part that applies to every call"
            ));
            vec![("then", t)]
        }
    };
    for (side, part) in parts {
        let mut key: Option<&str> = None;
        let mut has_value = false;
        for (_, sep, content) in tokens(part) {
            match sep {
                "" | "&" => {
                    if let Some(k) = key.filter(|_| !has_value) {
                        out.push(format!("{side} part: `{k}` has no value"));
                    }
                    if sep.is_empty() && key.is_some() {
                        out.push(format!(
                            "{side} part: `{content}` starts a condition without `&`: read as `& {content}`"
                        ));
                    }
                    key = Some(content);
                    has_value = false;
                }
                _ => has_value = true,
            }
        }
        if let Some(k) = key.filter(|_| !has_value)
            && !matches!(k, "true" | "false")
        {
            out.push(format!("{side} part: `{k}` has no value"));
        }
    }
    out
}

/// Parses one v2 condition (`when => then`), prefixes `consumer.`/`provider.` stripped.
pub(crate) fn parse_v2(text: &str) -> Result<V2Condition, CondError> {
    let (when_raw, then_raw, then_offset) = match text.find("=>") {
        Some(i) => (Some(&text[..i]), &text[i + 2..], i + 2),
        None => (None, text, 0),
    };
    let when = match when_raw.map(str::trim) {
        None | Some("") | Some("true") => Conjunction::default(),
        Some(_) => parse_conjunction(when_raw.unwrap_or(""), Side::When)?,
    };
    let then = match then_raw.trim() {
        "" | "false" => Then::Block,
        _ => Then::Keep(
            parse_conjunction(then_raw, Side::Then).map_err(|e| CondError {
                offset: e.offset + then_offset,
                ..e
            })?,
        ),
    };
    Ok(V2Condition {
        text: text.trim().into(),
        when,
        then,
    })
}

/// The common fields of a YAML rule (Dubbo's `AbstractRouterRule`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleMeta {
    pub(crate) scope: Option<Scope>,
    pub(crate) key: Option<String>,
    pub(crate) enabled: bool,
    pub(crate) force: bool,
    pub(crate) runtime: bool,
    pub(crate) priority: i32,
}

impl Default for RuleMeta {
    fn default() -> Self {
        RuleMeta {
            scope: None,
            key: None,
            enabled: true,
            force: false,
            runtime: true,
            priority: 0,
        }
    }
}

/// Where a condition rule sits in the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Scope {
    /// Service scope (`{interface}:{version}:{group}.condition-router`): applied first.
    Service,
    /// Application scope (`{app}.condition-router`): applied after service-scope rules.
    Application,
}

/// Reads a YAML 1.1-style boolean (SnakeYAML, which Dubbo uses, reads `yes`/`on` as true).
pub(crate) fn yaml_bool(v: &Value, field: &str) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" => Ok(true),
            "false" | "no" | "off" | "n" => Ok(false),
            _ => Err(format!("`{field}`: expected true or false, found {s:?}")),
        },
        other => Err(format!(
            "`{field}`: expected true or false, found {other:?}"
        )),
    }
}

pub(crate) fn yaml_int(v: &Value, field: &str) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| format!("`{field}`: expected an integer, found {n}")),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("`{field}`: expected an integer, found {s:?}")),
        other => Err(format!("`{field}`: expected an integer, found {other:?}")),
    }
}

/// The text of a scalar as Java's `String.valueOf` would print it.
pub(crate) fn yaml_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => None,
        _ => None,
    }
}

/// Reads the common fields. Unknown fields are ignored, as Dubbo does.
pub(crate) fn parse_meta(map: &Mapping) -> Result<RuleMeta, String> {
    let mut meta = RuleMeta::default();
    for (k, v) in map {
        let Some(k) = k.as_str() else { continue };
        if v.is_null() {
            continue;
        }
        match k {
            "enabled" => meta.enabled = yaml_bool(v, k)?,
            "force" => meta.force = yaml_bool(v, k)?,
            "runtime" => meta.runtime = yaml_bool(v, k)?,
            "priority" => {
                meta.priority = i32::try_from(yaml_int(v, k)?)
                    .map_err(|_| "`priority`: out of range".to_string())?
            }
            "scope" => {
                meta.scope = Some(match yaml_text(v).as_deref() {
                    Some("service") => Scope::Service,
                    Some("application") => Scope::Application,
                    _ => {
                        return Err(format!(
                            "`scope`: expected service or application, found {v:?}"
                        ));
                    }
                })
            }
            "key" => meta.key = yaml_text(v),
            _ => {}
        }
    }
    Ok(meta)
}

/// The condition-rule versions Dubbo 3.3 reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CondVersion {
    /// v2 text or v3.0 YAML `conditions:` strings.
    V30,
    /// v3.1 multi-destination YAML.
    V31,
}

/// Reads `configVersion` as Dubbo's `ConditionRuleParser` does: `v3.1*` is multi-destination,
/// anything sorting after `v3.1` is unsupported, the rest (or none) is v3.0.
pub(crate) fn cond_version(map: &Mapping) -> Result<CondVersion, String> {
    let Some(v) = map.get("configVersion").and_then(yaml_text) else {
        return Ok(CondVersion::V30);
    };
    let lower = v.to_ascii_lowercase();
    if lower.starts_with("v3.1") {
        Ok(CondVersion::V31)
    } else if lower.as_str() > "v3.1" {
        Err(format!(
            "`configVersion`: {v:?} is not supported (v3.1 and below are)"
        ))
    } else {
        Ok(CondVersion::V30)
    }
}

/// Parses a v3.1 `conditions:` item (`from: {match}`, `to: [{match, weight}]`).
pub(crate) fn parse_multi_dest(item: &Value) -> Result<MultiDestCondition, String> {
    let Some(map) = item.as_mapping() else {
        return Err("a v3.1 condition must be a mapping with `from` and `to`".into());
    };
    let from_match = match map.get("from") {
        None | Some(Value::Null) => None,
        Some(Value::Mapping(m)) => m.get("match").and_then(yaml_text),
        Some(_) => return Err("`from` must be a mapping with `match`".into()),
    };
    let when = match from_match.as_deref().map(str::trim) {
        None | Some("") | Some("true") => Conjunction::default(),
        Some(_) => parse_conjunction(from_match.as_deref().unwrap_or(""), Side::When)
            .map_err(|e| format!("`from.match` at offset {}: {}", e.offset, e.message))?,
    };
    let mut to = Vec::new();
    match map.get("to") {
        None | Some(Value::Null) => {}
        Some(Value::Sequence(items)) => {
            for (i, d) in items.iter().enumerate() {
                let Some(dm) = d.as_mapping() else {
                    return Err(format!("`to[{i}]` must be a mapping with `match`"));
                };
                let m = dm.get("match").and_then(yaml_text);
                let then = match m.as_deref().map(str::trim) {
                    None | Some("") | Some("false") => Conjunction::default(),
                    Some(_) => {
                        parse_conjunction(m.as_deref().unwrap_or(""), Side::Then).map_err(|e| {
                            format!("`to[{i}].match` at offset {}: {}", e.offset, e.message)
                        })?
                    }
                };
                let weight = match dm.get("weight") {
                    None | Some(Value::Null) => 100,
                    Some(w) => {
                        let w = yaml_int(w, "weight").map_err(|e| format!("`to[{i}]`: {e}"))?;
                        if w <= 0 {
                            100
                        } else {
                            u32::try_from(w).map_err(|_| format!("`to[{i}].weight`: too large"))?
                        }
                    }
                };
                to.push(Destination { then, weight });
            }
        }
        Some(_) => return Err("`to` must be a list of destinations".into()),
    }
    let dests: Vec<String> = map
        .get("to")
        .and_then(Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .zip(&to)
                .map(|(d, parsed)| {
                    let m = d
                        .as_mapping()
                        .and_then(|m| m.get("match"))
                        .and_then(yaml_text)
                        .unwrap_or_default();
                    format!("{} (weight {})", m.trim(), parsed.weight)
                })
                .collect()
        })
        .unwrap_or_default();
    let text = format!(
        "from {} to [{}]",
        from_match.as_deref().map_or("", str::trim),
        dests.join(", ")
    );
    Ok(MultiDestCondition {
        text: text.into(),
        when,
        to,
    })
}

/// Maps a byte offset in `text` to a 1-based (line, column).
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |i| offset - i - 1) + 1;
    (line, col)
}

/// Finds the first line of `haystack` containing the first line of `needle` (to point a YAML
/// item's error at its line).
pub(crate) fn find_line(haystack: &str, needle: &str) -> Option<(usize, usize)> {
    let first = needle.lines().map(str::trim).find(|l| !l.is_empty())?;
    haystack
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find(first).map(|c| (i + 1, c + 1)))
}

/// Wraps a condition error with the rule key and a position in the whole rule text.
pub(crate) fn cond_error(
    key: &str,
    whole: &str,
    cond: &str,
    cond_offset_in_whole: Option<usize>,
    e: CondError,
) -> RuleError {
    let msg = format!("in condition {:?}: {}", cond.trim(), e.message);
    match cond_offset_in_whole {
        Some(base) => {
            let (l, c) = line_col(whole, base + e.offset);
            RuleError::new(key, msg).at(Some(l), Some(c))
        }
        None => match find_line(whole, cond) {
            Some((l, c)) => RuleError::new(key, msg).at(Some(l), Some(c + e.offset)),
            None => RuleError::new(key, msg),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conj(s: &str) -> Conjunction {
        parse_conjunction(s, Side::When).unwrap()
    }

    #[test]
    fn lenient_rules_are_named() {
        let w = lint_v2("method = find* zone = z1");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("has no `=>`"), "{w:?}");
        assert!(
            w[1].contains("`zone` starts a condition without `&`"),
            "{w:?}"
        );
        let w = lint_v2("method = find* => zone");
        assert_eq!(w, ["then part: `zone` has no value"]);
        assert!(lint_v2("method = find* => zone = z1 & port = 1").is_empty());
        assert!(lint_v2("=> false").is_empty());
        assert!(lint_v2("host = 1.2.3.4 => ").is_empty());
    }

    #[test]
    fn tokens_follow_dubbos_pattern() {
        let t = tokens("host = 1.2.3.4 & method != a,b");
        let seps: Vec<_> = t.iter().map(|(_, s, c)| (*s, *c)).collect();
        assert_eq!(
            seps,
            vec![
                ("", "host"),
                ("=", "1.2.3.4"),
                ("&", "method"),
                ("!=", "a"),
                (",", "b")
            ]
        );
    }

    #[test]
    fn same_key_merges_with_ampersand() {
        let c = conj("host = a & host = b & host != c");
        assert_eq!(c.entries.len(), 1);
        assert_eq!(c.entries[0].matches, vec!["a".into(), "b".into()]);
        assert_eq!(c.entries[0].mismatches, vec!["c".into()]);
    }

    #[test]
    fn prefixes_are_stripped_from_keys() {
        let c = parse_v2("consumer.host = 1.1.1.1 => provider.port = 20880").unwrap();
        assert_eq!(c.when.entries[0].key, Key::Host);
        let Then::Keep(t) = c.then else { panic!() };
        assert_eq!(t.entries[0].key, Key::Port);
    }

    #[test]
    fn when_and_then_shortcuts() {
        let c = parse_v2("=> host = a").unwrap();
        assert!(c.when.entries.is_empty());
        let c = parse_v2("true => host = a").unwrap();
        assert!(c.when.entries.is_empty());
        let c = parse_v2("host = a").unwrap();
        assert!(
            c.when.entries.is_empty(),
            "no `=>`: the text is the then part"
        );
        assert!(matches!(
            parse_v2("method = x =>").unwrap().then,
            Then::Block
        ));
        assert!(matches!(
            parse_v2("method = x => false").unwrap().then,
            Then::Block
        ));
    }

    #[test]
    fn keys_are_classified() {
        let c = conj(
            "method = a & arguments[2] = x & attachments[dubbo.tag] = g & application = app & address = 1:2",
        );
        let keys: Vec<_> = c.entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(
            keys,
            vec![
                Key::Method,
                Key::Argument(2),
                Key::Attachment("dubbo.tag".into()),
                Key::Param("application".into()),
                Key::Address
            ]
        );
        let t = parse_conjunction("method = a", Side::Then).unwrap();
        assert_eq!(t.entries[0].key, Key::Param("method".into()));
    }

    #[test]
    fn malformed_rules_are_errors_with_offsets() {
        let e = parse_conjunction("host = a && port = 1", Side::When).unwrap_err();
        assert!(e.message.contains("`&&`"), "{}", e.message);
        assert_eq!(e.offset, 9);
        let e = parse_conjunction("= a", Side::When).unwrap_err();
        assert!(e.message.contains("no key"));
        let e = parse_conjunction("host , a", Side::When).unwrap_err();
        assert!(e.message.contains("does not follow a value"));
        assert!(parse_conjunction("arguments[x] = 1", Side::When).is_err());
        assert!(parse_conjunction("attachments[] = 1", Side::When).is_err());
        let e = parse_v2("method = a => host = b &= c").unwrap_err();
        assert_eq!(&"method = a => host = b &= c"[e.offset..e.offset + 2], "&=");
    }

    #[test]
    fn line_and_column() {
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("abc", 0), (1, 1));
    }
}
