//! The Prometheus text format of an admin endpoint's `/metrics`: what the view needs of it.

use std::collections::{BTreeMap, HashMap};

use super::*;

// ---- the Prometheus text format ----

/// One sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Parses the Prometheus text exposition format (comments skipped, label values unescaped).
/// Lines that do not parse are skipped.
pub(super) fn parse_prometheus(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

pub(super) fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        let end = loop {
            // key
            while chars
                .peek()
                .is_some_and(|(_, c)| *c == ',' || c.is_whitespace())
            {
                chars.next();
            }
            let (start, c) = *chars.peek()?;
            if c == '}' {
                break start + 1;
            }
            let mut key_end = start;
            while let Some(&(i, c)) = chars.peek() {
                if c == '=' {
                    key_end = i;
                    break;
                }
                chars.next();
            }
            let key = r[start..key_end].trim().to_string();
            chars.next(); // '='
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                let (_, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    '"' => break,
                    c => value.push(c),
                }
            }
            labels.push((key, value));
        };
        rest = &r[end..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name.to_string(), labels, value))
}

pub(super) fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The figures of `service` in a scrape.
pub(super) fn scrape_for(text: &str, service: &str) -> Scrape {
    let mut s = Scrape::default();
    let mut buckets: HashMap<String, BTreeMap<u64, (f64, f64)>> = HashMap::new();
    for (name, labels, value) in parse_prometheus(text) {
        if label(&labels, "rpc_service") != Some(service) {
            continue;
        }
        match name.as_str() {
            "rpc_client_call_duration_seconds_count" => {
                s.calls += value;
                if label(&labels, "outcome") == Some("failure") {
                    s.calls_failed += value;
                }
            }
            "switchman_retries_total" => s.retries += value,
            "switchman_retry_budget_refused_total" => s.refused += value,
            "rpc_client_attempt_duration_seconds_bucket" => {
                let (Some(host), Some(port), Some(le)) = (
                    label(&labels, "server_address"),
                    label(&labels, "server_port"),
                    label(&labels, "le"),
                ) else {
                    continue;
                };
                let le: f64 = match le {
                    "+Inf" => f64::INFINITY,
                    v => match v.parse() {
                        Ok(v) => v,
                        Err(_) => continue,
                    },
                };
                let address = if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                };
                // Keyed by the bound's bits: the bounds are positive, so their order is the
                // bits' order.
                let e = buckets
                    .entry(address)
                    .or_default()
                    .entry(le.to_bits())
                    .or_insert((le, 0.0));
                e.1 += value;
            }
            _ => {}
        }
    }
    s.buckets = buckets
        .into_iter()
        .map(|(a, b)| (a, b.into_values().collect()))
        .collect();
    s
}

/// `q` quantile (0..1) of cumulative buckets, interpolated inside the bucket as Prometheus's
/// `histogram_quantile` does; the highest finite bound when it falls in the `+Inf` bucket.
pub(super) fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut prev_le, mut prev_count) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(prev_le);
            }
            if count <= prev_count {
                return Some(le);
            }
            return Some(prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count));
        }
        prev_le = le;
        prev_count = count;
    }
    Some(prev_le)
}

/// `now − old` per bound (a bound missing in `old` counts from 0; a counter that went down was
/// reset: its current count is the difference).
pub(super) fn bucket_delta(now: &[(f64, f64)], old: Option<&Vec<(f64, f64)>>) -> Vec<(f64, f64)> {
    now.iter()
        .map(|&(le, c)| {
            let before = old
                .and_then(|o| o.iter().find(|(l, _)| *l == le))
                .map(|&(_, c)| c)
                .unwrap_or(0.0);
            (le, if c >= before { c - before } else { c })
        })
        .collect()
}
