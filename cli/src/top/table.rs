//! The table: rows and header computed from two reads, sorted and filtered, as text.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::*;

// ---- the table ----

/// One row of the view.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    pub(super) address: String,
    pub(super) protocol: String,
    pub(super) group_version: String,
    pub(super) weight: u64,
    pub(super) current_weight: u64,
    pub(super) zone: String,
    pub(super) tag: String,
    /// `routable`, `warming`, `ejected`, `draining`, `disabled`.
    pub(super) state: String,
    /// The state as shown: `ejected 28s`, `draining 2 in flight`, ...
    pub(super) state_text: String,
    pub(super) share: Option<f64>,
    pub(super) p50_ms: Option<f64>,
    pub(super) p99_ms: Option<f64>,
    pub(super) errors: Option<u64>,
    pub(super) ejections: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Header {
    pub(super) service: String,
    pub(super) source: String,
    pub(super) epoch: u64,
    pub(super) loadbalance: String,
    pub(super) strategy: Option<String>,
    pub(super) traffic: bool,
    /// Seconds the rates cover (None before two reads).
    pub(super) span: Option<f64>,
    pub(super) calls_per_sec: Option<f64>,
    pub(super) success_rate: Option<f64>,
    pub(super) retries_per_sec: Option<f64>,
    pub(super) retries_total: Option<f64>,
    pub(super) refused_total: Option<u64>,
    pub(super) refused_recent: Option<u64>,
    pub(super) states: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct View {
    pub(super) header: Header,
    pub(super) rows: Vec<Row>,
    /// The last read failed: why (the rows are from the read before).
    pub(super) error: Option<String>,
}

pub(super) fn counter(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

pub(super) fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

pub(super) fn state_text(r: &Value) -> String {
    match r["state"].as_str().unwrap_or("") {
        "ejected" => {
            let e = &r["ejected"];
            if e["probe_due"].as_bool() == Some(true) {
                "ejected, probe due".into()
            } else {
                format!("ejected {}s", counter(&e["left_ms"]).div_ceil(1000))
            }
        }
        "draining" => {
            let d = &r["draining"];
            match counter(&d["in_flight"]) {
                0 => format!("draining {}s", counter(&d["grace_left_ms"]).div_ceil(1000)),
                n => format!("draining ({n} in flight)"),
            }
        }
        other => other.to_string(),
    }
}

/// The rows and header from the reads in `history` (oldest first): deltas between the oldest
/// and the newest.
pub(super) fn compute(history: &VecDeque<Poll>, source: &str, traffic: bool) -> View {
    let Some(new) = history.back() else {
        return View::default();
    };
    let old = (history.len() > 1).then(|| &history[0]);
    let span = old.map(|o| new.at.duration_since(o.at).as_secs_f64().max(1e-3));
    let snap = &new.snapshot;
    let empty = Vec::new();
    let rows_json = snap["instances"].as_array().unwrap_or(&empty);
    let old_counts: HashMap<String, (u64, u64)> = old
        .and_then(|o| o.snapshot["instances"].as_array())
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    (
                        text(&r["key"]),
                        (counter(&r["succeeded"]), counter(&r["failed"])),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // Attempts and failures per row over the span (a row new in the span: all of its own).
    let deltas: Vec<(u64, u64)> = rows_json
        .iter()
        .map(|r| {
            let (ok, failed) = (counter(&r["succeeded"]), counter(&r["failed"]));
            let (ok0, failed0) = old_counts.get(&text(&r["key"])).copied().unwrap_or((0, 0));
            let (dok, dfailed) = (ok.saturating_sub(ok0), failed.saturating_sub(failed0));
            (dok + dfailed, dfailed)
        })
        .collect();
    let total: u64 = deltas.iter().map(|d| d.0).sum();
    let rows = rows_json
        .iter()
        .zip(&deltas)
        .map(|(r, &(attempts, failed))| {
            let address = text(&r["address"]);
            let latency = new
                .metrics
                .as_ref()
                .and_then(|m| m.buckets.get(&address))
                .map(|b| {
                    let before = old
                        .and_then(|o| o.metrics.as_ref())
                        .and_then(|m| m.buckets.get(&address));
                    bucket_delta(b, before)
                });
            let q = |p: f64| {
                latency
                    .as_deref()
                    .and_then(|b| quantile(p, b))
                    .map(|s| s * 1000.0)
            };
            let (g, v) = (text(&r["group"]), text(&r["version"]));
            Row {
                protocol: text(&r["protocol"]),
                group_version: match (g.is_empty(), v.is_empty()) {
                    (true, true) => String::new(),
                    (false, true) => g,
                    (true, false) => format!(":{v}"),
                    (false, false) => format!("{g}:{v}"),
                },
                weight: counter(&r["weight"]),
                current_weight: counter(&r["current_weight"]),
                zone: text(&r["zone"]),
                tag: text(&r["tag"]),
                state: text(&r["state"]),
                state_text: state_text(r),
                share: (traffic && span.is_some() && total > 0)
                    .then(|| attempts as f64 / total as f64),
                p50_ms: q(0.5),
                p99_ms: q(0.99),
                errors: (traffic && span.is_some()).then_some(failed),
                ejections: counter(&r["ejections"]),
                address,
            }
        })
        .collect();
    let delta = |f: fn(&Scrape) -> f64| -> Option<f64> {
        let (n, o) = (new.metrics.as_ref()?, old?.metrics.as_ref()?);
        Some((f(n) - f(o)).max(0.0))
    };
    let calls = delta(|s| s.calls);
    let failed = delta(|s| s.calls_failed);
    let refused_now = snap["cluster"]["budget_refused"].as_u64();
    let refused_old = old.and_then(|o| o.snapshot["cluster"]["budget_refused"].as_u64());
    let header = Header {
        service: text(&snap["service"]),
        source: source.to_string(),
        epoch: counter(&snap["epoch"]),
        loadbalance: text(&snap["loadbalance"]),
        strategy: snap["cluster"]["strategy"].as_str().map(str::to_string),
        traffic,
        span,
        calls_per_sec: calls.zip(span).map(|(c, s)| c / s),
        success_rate: calls
            .zip(failed)
            .filter(|(c, _)| *c > 0.0)
            .map(|(c, f)| 1.0 - f / c),
        retries_per_sec: delta(|s| s.retries).zip(span).map(|(r, s)| r / s),
        retries_total: new.metrics.as_ref().map(|m| m.retries),
        refused_total: refused_now,
        refused_recent: refused_now
            .zip(refused_old)
            .map(|(n, o)| n.saturating_sub(o)),
        states: snap["states"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), counter(v))).collect())
            .unwrap_or_default(),
    };
    View {
        header,
        rows,
        error: None,
    }
}

/// The sortable columns, in the order `s` cycles through them.
pub(super) const SORTS: [&str; 9] = [
    "address",
    "state",
    "weight",
    "zone",
    "share",
    "p50",
    "p99",
    "errors",
    "ejections",
];

pub(super) fn parse_sort(s: &str) -> Result<usize, String> {
    let s = s.trim().to_ascii_lowercase();
    SORTS
        .iter()
        .position(|c| *c == s)
        .ok_or_else(|| format!("--sort {s:?}: expected one of {}", SORTS.join(", ")))
}

pub(super) fn state_rank(state: &str) -> u8 {
    match state {
        "ejected" => 0,
        "draining" => 1,
        "warming" => 2,
        "disabled" => 3,
        _ => 4,
    }
}

/// The rows to show: filtered by `filter` (case-insensitive substring), sorted by column
/// `sort` (numbers: largest first; absent values last), ties by address.
pub(super) fn arrange(rows: &[Row], sort: usize, reverse: bool, filter: &str) -> Vec<Row> {
    let f = filter.to_ascii_lowercase();
    let mut out: Vec<Row> = rows
        .iter()
        .filter(|r| {
            f.is_empty()
                || [
                    &r.address,
                    &r.protocol,
                    &r.zone,
                    &r.tag,
                    &r.state_text,
                    &r.group_version,
                ]
                .iter()
                .any(|v| v.to_ascii_lowercase().contains(&f))
        })
        .cloned()
        .collect();
    let num = |v: Option<f64>| v.unwrap_or(f64::NEG_INFINITY);
    out.sort_by(|a, b| {
        let o = match SORTS[sort % SORTS.len()] {
            "state" => state_rank(&a.state).cmp(&state_rank(&b.state)),
            "weight" => b.current_weight.cmp(&a.current_weight),
            "zone" => a.zone.cmp(&b.zone),
            "share" => num(b.share).total_cmp(&num(a.share)),
            "p50" => num(b.p50_ms).total_cmp(&num(a.p50_ms)),
            "p99" => num(b.p99_ms).total_cmp(&num(a.p99_ms)),
            "errors" => b.errors.cmp(&a.errors),
            "ejections" => b.ejections.cmp(&a.ejections),
            _ => std::cmp::Ordering::Equal,
        };
        o.then_with(|| a.address.cmp(&b.address))
    });
    if reverse {
        out.reverse();
    }
    out
}

pub(super) fn dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

pub(super) fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

pub(super) fn weight_text(r: &Row) -> String {
    if r.state == "warming" {
        format!("{}/{}", r.current_weight, r.weight)
    } else {
        r.weight.to_string()
    }
}

pub(super) const COLUMNS: [&str; 12] = [
    "ADDRESS",
    "PROTO",
    "GROUP:VER",
    "WEIGHT",
    "ZONE",
    "TAG",
    "STATE",
    "SHARE",
    "P50 ms",
    "P99 ms",
    "ERRORS",
    "EJECT",
];

pub(super) fn cells(r: &Row) -> [String; 12] {
    [
        r.address.clone(),
        r.protocol.clone(),
        dash(&r.group_version).to_string(),
        weight_text(r),
        dash(&r.zone).to_string(),
        dash(&r.tag).to_string(),
        r.state_text.clone(),
        r.share
            .map(|s| format!("{:.1}%", s * 100.0))
            .unwrap_or_else(|| "-".into()),
        opt(r.p50_ms, 2),
        opt(r.p99_ms, 2),
        r.errors
            .map(|e| e.to_string())
            .unwrap_or_else(|| "-".into()),
        r.ejections.to_string(),
    ]
}

pub(super) fn header_lines(h: &Header, rows: usize, shown: usize) -> [String; 3] {
    let mut first = format!(
        "{} via {} | epoch {} | {}",
        dash(&h.service),
        h.source,
        h.epoch,
        dash(&h.loadbalance)
    );
    if let Some(s) = &h.strategy {
        first.push_str(&format!(" + {s}"));
    }
    let second = if !h.traffic {
        "registry view: this subscription makes no calls, so no traffic columns".to_string()
    } else {
        format!(
            "calls/s {} | success {} | retries/s {} (total {}) | budget refused {} (+{}) | over {}",
            opt(h.calls_per_sec, 1),
            h.success_rate
                .map(|r| format!("{:.2}%", r * 100.0))
                .unwrap_or_else(|| "-".into()),
            opt(h.retries_per_sec, 2),
            opt(h.retries_total, 0),
            h.refused_total
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            h.refused_recent
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            h.span
                .map(|s| format!("{s:.1}s"))
                .unwrap_or_else(|| "- (first read)".into()),
        )
    };
    let states: Vec<String> = h.states.iter().map(|(k, v)| format!("{v} {k}")).collect();
    let third = format!(
        "instances {rows}{}{}",
        if states.is_empty() {
            String::new()
        } else {
            format!(": {}", states.join(", "))
        },
        if shown < rows {
            format!(" ({shown} shown)")
        } else {
            String::new()
        }
    );
    [first, second, third]
}

/// The `--once` text: the header lines, a blank line, the table with aligned columns.
pub(super) fn render_text(view: &View, rows: &[Row]) -> String {
    let mut out = String::new();
    for l in header_lines(&view.header, view.rows.len(), rows.len()) {
        out.push_str(&l);
        out.push('\n');
    }
    out.push('\n');
    let body: Vec<[String; 12]> = rows.iter().map(cells).collect();
    let mut widths: Vec<usize> = COLUMNS.iter().map(|c| c.len()).collect();
    for r in &body {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Text columns left-aligned, numbers right-aligned.
    let right = |i: usize| i >= 7 || i == 3;
    let line = |cols: &[String]| {
        let parts: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if right(i) {
                    format!("{c:>w$}", w = widths[i])
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    out.push_str(&line(&COLUMNS.map(String::from)));
    out.push('\n');
    for r in &body {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}
