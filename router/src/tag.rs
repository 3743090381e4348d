//! Tag rules (`{app}.tag-router`): dynamic tags by address or by v3.0 `match` selectors.

use std::net::Ipv4Addr;

#[cfg(test)]
use switchman_core::Instance;
use switchman_core::yaml::{Mapping, Value};

use crate::condition::{RuleMeta, parse_meta, yaml_text};

/// Largest compiled size of one tag-rule regex (the `regex` crate never backtracks; this
/// bounds memory and build time for untrusted rules).
pub(crate) const REGEX_SIZE_LIMIT: usize = 64 * 1024;

/// A v3.0 `match` selector on one provider parameter.
#[derive(Debug, Clone)]
pub(crate) enum StringMatch {
    Exact(String),
    Prefix(String),
    Regex(regex::Regex),
    /// Matches only the literal value, or anything when the wildcard is `*`.
    Wildcard(String),
    Empty,
    NoEmpty,
    /// A selector with no known field: never matches (as in Dubbo).
    Nothing,
}

impl StringMatch {
    pub(crate) fn is_match(&self, input: Option<&str>) -> bool {
        match (self, input) {
            (StringMatch::Exact(e), Some(i)) => i == e,
            (StringMatch::Prefix(p), Some(i)) => i.starts_with(p.as_str()),
            (StringMatch::Regex(r), Some(i)) => r.is_match(i),
            (StringMatch::Wildcard(w), Some(i)) => i == w || w == "*",
            (StringMatch::Empty, i) => i.is_none_or(str::is_empty),
            (StringMatch::NoEmpty, i) => i.is_some_and(|i| !i.is_empty()),
            _ => false,
        }
    }
}

/// One `match` item: parameter `key` and its selector.
#[derive(Debug, Clone)]
pub(crate) struct ParamMatch {
    pub(crate) key: String,
    pub(crate) value: StringMatch,
}

/// One tag of a rule.
#[derive(Debug, Clone)]
pub(crate) struct Tag {
    pub(crate) name: String,
    pub(crate) addresses: Vec<String>,
    /// Only read for `configVersion: v3.0` rules and tags without addresses (as Dubbo).
    pub(crate) matches: Vec<ParamMatch>,
}

/// A parsed tag rule.
#[derive(Debug, Clone)]
pub(crate) struct TagRule {
    pub(crate) meta: RuleMeta,
    pub(crate) v30: bool,
    pub(crate) tags: Vec<Tag>,
}

fn parse_string_match(v: &Value, what: &str) -> Result<StringMatch, String> {
    let Some(m) = v.as_mapping() else {
        return Err(format!(
            "{what}: `value` must be a mapping such as {{exact: v}}"
        ));
    };
    // Dubbo checks the fields in this order and uses the first one set.
    let get = |k: &str| m.get(k).filter(|v| !v.is_null()).and_then(yaml_text);
    if let Some(e) = get("exact") {
        return Ok(StringMatch::Exact(e));
    }
    if let Some(p) = get("prefix") {
        return Ok(StringMatch::Prefix(p));
    }
    if let Some(r) = get("regex") {
        // Java's `String.matches` is a whole-string match.
        let re = regex::RegexBuilder::new(&format!("^(?:{r})$"))
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("{what}: bad regex {r:?}: {e}"))?;
        return Ok(StringMatch::Regex(re));
    }
    if let Some(w) = get("wildcard") {
        return Ok(StringMatch::Wildcard(w));
    }
    if get("empty").is_some() {
        return Ok(StringMatch::Empty);
    }
    if get("noempty").is_some() {
        return Ok(StringMatch::NoEmpty);
    }
    Ok(StringMatch::Nothing)
}

/// Parses a tag rule from its YAML mapping.
pub(crate) fn parse_tag_rule(map: &Mapping) -> Result<TagRule, String> {
    let meta = parse_meta(map)?;
    let v30 = map
        .get("configVersion")
        .and_then(yaml_text)
        .is_some_and(|v| v.starts_with("v3.0"));
    let mut tags = Vec::new();
    match map.get("tags") {
        Some(Value::Sequence(items)) => {
            for (i, item) in items.iter().enumerate() {
                let Some(tm) = item.as_mapping() else {
                    return Err(format!("`tags[{i}]` must be a mapping with `name`"));
                };
                let name = tm
                    .get("name")
                    .and_then(yaml_text)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| format!("`tags[{i}]` has no `name`"))?;
                let addresses = match tm.get("addresses") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Sequence(a)) => a.iter().filter_map(yaml_text).collect(),
                    Some(_) => return Err(format!("`tags[{i}].addresses` must be a list")),
                };
                let mut matches = Vec::new();
                if v30 {
                    match tm.get("match") {
                        None | Some(Value::Null) => {}
                        Some(Value::Sequence(ms)) => {
                            for (j, m) in ms.iter().enumerate() {
                                let what = format!("`tags[{i}].match[{j}]`");
                                let mm = m
                                    .as_mapping()
                                    .ok_or_else(|| format!("{what} must be a mapping"))?;
                                let key = mm
                                    .get("key")
                                    .and_then(yaml_text)
                                    .ok_or_else(|| format!("{what} has no `key`"))?;
                                let value = match mm.get("value") {
                                    None | Some(Value::Null) => StringMatch::Nothing,
                                    Some(v) => parse_string_match(v, &what)?,
                                };
                                matches.push(ParamMatch { key, value });
                            }
                        }
                        Some(_) => return Err(format!("`tags[{i}].match` must be a list")),
                    }
                }
                tags.push(Tag {
                    name,
                    addresses,
                    matches,
                });
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err("`tags` must be a list".into()),
    }
    if tags.is_empty() {
        return Err("a tag rule needs at least one entry under `tags`".into());
    }
    Ok(TagRule { meta, v30, tags })
}

/// A compiled tag address pattern: Dubbo's `NetUtils.matchIpExpression` without DNS: `*`,
/// `host`, `host:port`, `0.0.0.0:port` (any host on that port), IPv4 with `*` or `a-b`
/// segments, IPv4 CIDR `a.b.c.d/n`, IPv6 written out exactly (`[::1]:80` or `::1`).
#[derive(Debug, Clone)]
pub(crate) enum AddrPattern {
    Any,
    AnyHostOnPort(u16),
    Cidr {
        net: u32,
        mask: u32,
    },
    Host {
        host: String,
        port: Option<u16>,
    },
    Segments {
        segs: [(u8, u8); 4],
        port: Option<u16>,
    },
    Never,
}

impl AddrPattern {
    pub(crate) fn compile(pattern: &str) -> AddrPattern {
        let pattern = pattern.trim();
        if pattern == "*" || pattern == "*.*.*.*" {
            return AddrPattern::Any;
        }
        if let Some(rest) = pattern.strip_prefix("0.0.0.0:") {
            return match rest.parse::<u16>() {
                Ok(p) => AddrPattern::AnyHostOnPort(p),
                Err(_) => AddrPattern::Never,
            };
        }
        if let Some((net, bits)) = pattern.split_once('/') {
            return match (net.parse::<Ipv4Addr>(), bits.parse::<u32>()) {
                (Ok(net), Ok(bits)) if bits <= 32 => {
                    let mask = if bits == 0 {
                        0
                    } else {
                        u32::MAX << (32 - bits)
                    };
                    AddrPattern::Cidr {
                        net: u32::from(net) & mask,
                        mask,
                    }
                }
                _ => AddrPattern::Never,
            };
        }
        let (phost, pport) = if let Some(rest) = pattern.strip_prefix('[') {
            match rest.split_once(']') {
                Some((h, tail)) => (h, tail.strip_prefix(':')),
                None => return AddrPattern::Never,
            }
        } else if pattern.matches(':').count() == 1 {
            let (h, p) = pattern.split_once(':').expect("one colon");
            (h, Some(p))
        } else {
            (pattern, None)
        };
        let port = match pport {
            None | Some("*") | Some("") => None,
            Some(p) => match p.parse::<u16>() {
                Ok(p) => Some(p),
                Err(_) => return AddrPattern::Never,
            },
        };
        if !phost.contains('*') && !phost.contains('-') {
            return AddrPattern::Host {
                host: phost.to_string(),
                port,
            };
        }
        let parts: Vec<&str> = phost.split('.').collect();
        if parts.len() != 4 {
            return AddrPattern::Never;
        }
        let mut segs = [(0u8, 255u8); 4];
        for (slot, seg) in segs.iter_mut().zip(parts) {
            *slot = if seg == "*" {
                (0, 255)
            } else if let Some((lo, hi)) = seg.split_once('-') {
                match (lo.parse::<u8>(), hi.parse::<u8>()) {
                    (Ok(lo), Ok(hi)) => (lo, hi),
                    _ => return AddrPattern::Never,
                }
            } else {
                match seg.parse::<u8>() {
                    Ok(v) => (v, v),
                    Err(_) => return AddrPattern::Never,
                }
            };
        }
        AddrPattern::Segments { segs, port }
    }

    /// Whether a provider at `host` (`ip` when it is IPv4) and `port` matches.
    pub(crate) fn matches(&self, host: &str, ip: Option<Ipv4Addr>, port: u16) -> bool {
        match self {
            AddrPattern::Any => true,
            AddrPattern::AnyHostOnPort(p) => *p == port,
            AddrPattern::Cidr { net, mask } => ip.is_some_and(|ip| u32::from(ip) & mask == *net),
            AddrPattern::Host { host: h, port: p } => p.is_none_or(|p| p == port) && h == host,
            AddrPattern::Segments { segs, port: p } => {
                p.is_none_or(|p| p == port)
                    && ip.is_some_and(|ip| {
                        ip.octets()
                            .iter()
                            .zip(segs)
                            .all(|(o, (lo, hi))| lo <= o && o <= hi)
                    })
            }
            AddrPattern::Never => false,
        }
    }
}

/// Matches one pattern against one instance (compiles the pattern each time; for tests).
#[cfg(test)]
pub(crate) fn address_matches(pattern: &str, inst: &Instance) -> bool {
    AddrPattern::compile(pattern).matches(inst.host(), inst.host().parse().ok(), inst.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(host: &str, port: u16) -> Instance {
        Instance::builder(host, port).build()
    }

    #[test]
    fn address_patterns() {
        let i = inst("10.0.3.7", 20880);
        for yes in [
            "*",
            "10.0.3.7",
            "10.0.3.7:20880",
            "10.0.3.*",
            "10.0.1-5.*:20880",
            "10.0.0.0/16",
            "0.0.0.0:20880",
            "10.0.3.7:*",
        ] {
            assert!(address_matches(yes, &i), "{yes}");
        }
        for no in [
            "10.0.3.8",
            "10.0.3.7:1",
            "10.0.4-5.*",
            "10.1.0.0/16",
            "0.0.0.0:1",
            "garbage/x",
        ] {
            assert!(!address_matches(no, &i), "{no}");
        }
        let v6 = inst("::1", 80);
        assert!(address_matches("[::1]:80", &v6));
        assert!(address_matches("::1", &v6));
        assert!(!address_matches("[::1]:81", &v6));
    }

    #[test]
    fn string_match_selectors() {
        assert!(StringMatch::Exact("a".into()).is_match(Some("a")));
        assert!(!StringMatch::Exact("a".into()).is_match(None));
        assert!(StringMatch::Prefix("a".into()).is_match(Some("abc")));
        let re = regex::Regex::new("^(?:gr.y)$").unwrap();
        assert!(StringMatch::Regex(re.clone()).is_match(Some("gray")));
        assert!(!StringMatch::Regex(re).is_match(Some("grayx")));
        assert!(StringMatch::Wildcard("*".into()).is_match(Some("x")));
        assert!(StringMatch::Wildcard("x".into()).is_match(Some("x")));
        assert!(!StringMatch::Wildcard("x*".into()).is_match(Some("xy")));
        assert!(StringMatch::Empty.is_match(None));
        assert!(StringMatch::Empty.is_match(Some("")));
        assert!(StringMatch::NoEmpty.is_match(Some("a")));
        assert!(!StringMatch::NoEmpty.is_match(Some("")));
        assert!(!StringMatch::Nothing.is_match(Some("a")));
    }
}
