//! `switchman top`: a live terminal view of one consumer, read from its admin endpoint
//! (`switchman top --admin 127.0.0.1:PORT [SERVICE]`), or of a registry subscription
//! (`switchman top REGISTRY SERVICE`): one row per instance with its weight, zone, tag, state,
//! share of recent attempts, p50/p99, errors and ejections, under a header with calls/s,
//! success rate, retries and budget refusals. `--once` prints the same table as text.
//!
//! Through an admin endpoint, `GET /snapshot/{service}` gives the instances, their states
//! and their attempt counters, `GET /metrics` the call, retry and per-instance attempt
//! histograms; rates, shares and percentiles are the differences between two reads, over the
//! last `--window` seconds. A registry subscription makes no calls: its rows have no traffic.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table, TableState};
use serde_json::Value;
use switchman_core::ServiceKey;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use tokio::sync::watch;

/// The smallest terminal the view draws in.
const MIN_WIDTH: u16 = 72;
const MIN_HEIGHT: u16 = 8;

/// Arguments of `switchman top`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopArgs {
    /// Registry address (zookeeper://h:p, nacos://h:p, a static YAML file; a cluster as
    /// zookeeper://h1:p1,h2:p2 or nacos://h1:p1,h2:p2, or ?backup=h2:p2 on either), followed by
    /// SERVICE: view a registry subscription. With --admin: just SERVICE, optional (default:
    /// the first consumer the endpoint lists).
    registry: Option<String>,
    /// Service (Dubbo interface, or a plain Nacos service name); with --admin its key as the
    /// endpoint lists it (`group/interface:version`) or its interface.
    service: Option<String>,
    /// A consumer's admin endpoint to read (`switchman call --admin ...`): PORT alone means
    /// 127.0.0.1:PORT.
    #[arg(long, value_name = "ADDR", value_parser = crate::admin::parse_admin_addr)]
    admin: Option<SocketAddr>,
    /// Dubbo group (registry view).
    #[arg(long, default_value = "")]
    group: String,
    /// Dubbo version (registry view).
    #[arg(long, default_value = "")]
    version: String,
    /// Seconds between refreshes; with --once, the interval the rates are measured over.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Rates, shares, errors and percentiles cover the last this-many seconds.
    #[arg(long, default_value_t = 10.0)]
    window: f64,
    /// Print the table once as text and exit (after one interval through an admin endpoint,
    /// so that rates mean something).
    #[arg(long)]
    pub(crate) once: bool,
    /// Sort column: address, state, weight, zone, share, p50, p99, errors, ejections (keys s / S
    /// cycle, r reverses).
    #[arg(long, default_value = "address")]
    sort: String,
    /// Reverse the sort order.
    #[arg(long)]
    reverse: bool,
    /// Show only the rows whose address, protocol, zone, tag or state contain TEXT (key /).
    #[arg(long)]
    filter: Option<String>,
    /// Seconds to wait for the first answer: the registry's, or the admin endpoint's with a
    /// consumer listed (with --once; the live view keeps trying).
    #[arg(long, default_value_t = 5)]
    timeout: u64,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

// ---- reading the sources ----

/// One read of the source.
#[derive(Debug, Clone)]
struct Poll {
    at: Instant,
    snapshot: Value,
    metrics: Option<Scrape>,
}

/// What `/metrics` says about the shown service.
#[derive(Debug, Clone, Default, PartialEq)]
struct Scrape {
    calls: f64,
    calls_failed: f64,
    retries: f64,
    refused: f64,
    /// Cumulative attempt-duration buckets per instance address: (upper bound s, count).
    buckets: HashMap<String, Vec<(f64, f64)>>,
}

/// Where the rows come from.
enum Source {
    Admin {
        addr: SocketAddr,
        base: String,
        service: Option<String>,
    },
    Registry {
        directory: Arc<RegistryDirectory>,
        registry: String,
    },
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Admin { base, .. } => format!("admin {base}"),
            Source::Registry { registry, .. } => format!("registry {registry}"),
        }
    }

    fn traffic(&self) -> bool {
        matches!(self, Source::Admin { .. })
    }

    async fn poll(&mut self) -> Result<Poll, String> {
        match self {
            Source::Registry { directory, .. } => Ok(Poll {
                at: Instant::now(),
                snapshot: switchman::admin::snapshot_json(&**directory, None),
                metrics: None,
            }),
            Source::Admin {
                addr,
                base,
                service,
            } => {
                let addr = *addr;
                if service.is_none() {
                    let services = get(addr, "/services").await?;
                    let services: Value = serde_json::from_str(&services.1)
                        .map_err(|e| format!("{base}/services is not JSON: {e}"))?;
                    *service = services["consumers"]
                        .as_array()
                        .and_then(|c| c.first())
                        .and_then(|c| c["service"].as_str())
                        .map(str::to_string);
                }
                let Some(name) = service.clone() else {
                    return Err(format!("{base} lists no consumer (yet)"));
                };
                let (status, body) =
                    get(addr, &format!("/snapshot/{}", encode_path(&name))).await?;
                let snapshot: Value = serde_json::from_str(&body)
                    .map_err(|e| format!("{base}/snapshot/{name} is not JSON: {e}"))?;
                if status != 200 {
                    return Err(format!(
                        "{base}/snapshot/{name}: {}{}",
                        snapshot["error"].as_str().unwrap_or("failed"),
                        match snapshot["services"].as_array() {
                            Some(s) if !s.is_empty() => format!(
                                " (listed: {})",
                                s.iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            _ => String::new(),
                        }
                    ));
                }
                let key = snapshot["service"].as_str().unwrap_or(&name).to_string();
                let metrics = match get(addr, "/metrics").await? {
                    (200, text) => Some(scrape_for(&text, &key)),
                    _ => None,
                };
                Ok(Poll {
                    at: Instant::now(),
                    snapshot,
                    metrics,
                })
            }
        }
    }
}

/// The longest answer read from an admin endpoint.
const MAX_ANSWER: u64 = 64 << 20;

/// `GET path` on the admin endpoint at `addr` (plain HTTP/1.1, one request per connection,
/// bounded in time and size): (status, body).
async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = format!("http://{addr}{path}");
    let read = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut out = Vec::new();
        s.take(MAX_ANSWER).read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let raw = tokio::time::timeout(Duration::from_secs(3), read)
        .await
        .map_err(|_| format!("cannot read {url}: no answer within 3 s"))?
        .map_err(|e| format!("cannot read {url}: {e}"))?;
    parse_answer(&raw).ok_or_else(|| format!("cannot read {url}: not an HTTP answer"))
}

/// Status and body of an HTTP/1.1 answer (`Content-Length`, chunked, or up to the close).
fn parse_answer(raw: &[u8]) -> Option<(u16, String)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut chunked = false;
    let mut length = None;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if k == "content-length" {
            length = v.parse::<usize>().ok();
        }
    }
    let body = if chunked {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let eol = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(&rest[..eol]).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        out
    } else {
        match length {
            Some(n) => body.get(..n)?.to_vec(),
            None => body.to_vec(),
        }
    };
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Percent-encodes what may not stand in a URL path (`/` and `:` may: service keys keep them).
fn encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' | b':' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

// ---- the Prometheus text format ----

/// One sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Parses the Prometheus text exposition format (comments skipped, label values unescaped).
/// Lines that do not parse are skipped.
fn parse_prometheus(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
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

fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The figures of `service` in a scrape.
fn scrape_for(text: &str, service: &str) -> Scrape {
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
fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
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
fn bucket_delta(now: &[(f64, f64)], old: Option<&Vec<(f64, f64)>>) -> Vec<(f64, f64)> {
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

// ---- the table ----

/// One row of the view.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    address: String,
    protocol: String,
    group_version: String,
    weight: u64,
    current_weight: u64,
    zone: String,
    tag: String,
    /// `routable`, `warming`, `ejected`, `draining`, `disabled`.
    state: String,
    /// The state as shown: `ejected 28s`, `draining 2 in flight`, ...
    state_text: String,
    share: Option<f64>,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    errors: Option<u64>,
    ejections: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Header {
    service: String,
    source: String,
    epoch: u64,
    loadbalance: String,
    strategy: Option<String>,
    traffic: bool,
    /// Seconds the rates cover (None before two reads).
    span: Option<f64>,
    calls_per_sec: Option<f64>,
    success_rate: Option<f64>,
    retries_per_sec: Option<f64>,
    retries_total: Option<f64>,
    refused_total: Option<u64>,
    refused_recent: Option<u64>,
    states: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Default)]
struct View {
    header: Header,
    rows: Vec<Row>,
    /// The last read failed: why (the rows are from the read before).
    error: Option<String>,
}

fn counter(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn state_text(r: &Value) -> String {
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
fn compute(history: &VecDeque<Poll>, source: &str, traffic: bool) -> View {
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
const SORTS: [&str; 9] = [
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

fn parse_sort(s: &str) -> Result<usize, String> {
    let s = s.trim().to_ascii_lowercase();
    SORTS
        .iter()
        .position(|c| *c == s)
        .ok_or_else(|| format!("--sort {s:?}: expected one of {}", SORTS.join(", ")))
}

fn state_rank(state: &str) -> u8 {
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
fn arrange(rows: &[Row], sort: usize, reverse: bool, filter: &str) -> Vec<Row> {
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

fn dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn weight_text(r: &Row) -> String {
    if r.state == "warming" {
        format!("{}/{}", r.current_weight, r.weight)
    } else {
        r.weight.to_string()
    }
}

const COLUMNS: [&str; 12] = [
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

fn cells(r: &Row) -> [String; 12] {
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

fn header_lines(h: &Header, rows: usize, shown: usize) -> [String; 3] {
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
fn render_text(view: &View, rows: &[Row]) -> String {
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

// ---- running ----

async fn open_source(args: &TopArgs) -> Result<Source, String> {
    if let Some(addr) = args.admin {
        if args.service.is_some() {
            return Err(
                "with --admin give at most SERVICE (the endpoint knows its registry)".into(),
            );
        }
        return Ok(Source::Admin {
            addr,
            base: format!("http://{addr}"),
            service: args.registry.clone(),
        });
    }
    let (Some(registry), Some(service)) = (&args.registry, &args.service) else {
        return Err(
            "give REGISTRY SERVICE (a registry subscription) or --admin ADDR (a consumer's admin endpoint)"
                .into(),
        );
    };
    let reg = registry_from_url(registry).map_err(|e| e.to_string())?;
    let key = ServiceKey::with(service, &args.group, &args.version);
    let dir = RegistryDirectory::subscribe(reg.as_ref(), DirectoryConfig::new(key))
        .await
        .map_err(|e| e.to_string())?;
    dir.wait_until(Duration::from_secs(args.timeout), |s| s.epoch() > 0)
        .await
        .map_err(|_| {
            format!(
                "no provider: {} did not answer within {}s (subscribing to {service})",
                switchman_core::url::redacted_text(registry),
                args.timeout
            )
        })?;
    Ok(Source::Registry {
        directory: Arc::new(dir),
        // Shown in the header: every server as given, the password masked.
        registry: switchman_core::url::redacted_text(registry),
    })
}

fn seconds(v: f64, what: &str) -> Result<Duration, String> {
    if v.is_finite() && (0.05..=3600.0).contains(&v) {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!(
            "--{what} {v}: expected seconds between 0.05 and 3600"
        ))
    }
}

/// Reads the source every `interval`, keeping `window` of history; publishes each view.
async fn poller(
    mut source: Source,
    interval: Duration,
    window: Duration,
    tx: watch::Sender<Arc<View>>,
) {
    let mut history: VecDeque<Poll> = VecDeque::new();
    let (name, traffic) = (source.describe(), source.traffic());
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let view = match source.poll().await {
            Ok(p) => {
                // A snapshot of another service (the endpoint's list changed): start over.
                if history
                    .back()
                    .is_some_and(|b| b.snapshot["service"] != p.snapshot["service"])
                {
                    history.clear();
                }
                history.push_back(p);
                let now = Instant::now();
                while history.len() > 2 && now.duration_since(history[1].at) >= window {
                    history.pop_front();
                }
                compute(&history, &name, traffic)
            }
            Err(e) => {
                let mut last = (**tx.borrow()).clone();
                last.error = Some(e);
                if last.header.source.is_empty() {
                    last.header.source = name.clone();
                    last.header.traffic = traffic;
                }
                last
            }
        };
        if tx.send(Arc::new(view)).is_err() {
            return;
        }
    }
}

pub(crate) fn run(args: TopArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchman top: {e}");
            return ExitCode::FAILURE;
        }
    };
    let prepared = rt.block_on(async {
        let sort = parse_sort(&args.sort)?;
        let interval = seconds(args.interval, "interval")?;
        let window = seconds(args.window, "window")?;
        args.metrics.start()?;
        let source = open_source(&args).await?;
        Ok::<_, String>((sort, interval, window, source))
    });
    let (sort, interval, window, source) = match prepared {
        Ok(p) => p,
        Err(e) => {
            eprintln!("switchman top: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = args.filter.clone().unwrap_or_default();
    if args.once {
        let first = Duration::from_secs(args.timeout);
        return rt.block_on(once(source, first, interval, sort, args.reverse, &filter));
    }
    if !std::io::stdout().is_terminal() {
        eprintln!("switchman top: the output is not a terminal; use --once for a text table");
        return ExitCode::from(2);
    }
    let (tx, rx) = watch::channel(Arc::new(View::default()));
    let poll = rt.spawn(poller(source, interval, window, tx));
    let code = tui(rx, sort, args.reverse, filter);
    poll.abort();
    // The registry client may hold the runtime a while; do not wait for it.
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn once(
    mut source: Source,
    first: Duration,
    interval: Duration,
    sort: usize,
    reverse: bool,
    filter: &str,
) -> ExitCode {
    let (name, traffic) = (source.describe(), source.traffic());
    let mut history = VecDeque::new();
    let reads = if traffic { 2 } else { 1 };
    // The first read may wait for the endpoint to list its consumer (a process starting).
    let deadline = Instant::now() + first;
    for i in 0..reads {
        if i > 0 {
            tokio::time::sleep(interval).await;
        }
        loop {
            match source.poll().await {
                Ok(p) => {
                    history.push_back(p);
                    break;
                }
                Err(e) if i > 0 || Instant::now() >= deadline => {
                    eprintln!("switchman top: {e}");
                    return ExitCode::from(2);
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    let view = compute(&history, &name, traffic);
    let rows = arrange(&view.rows, sort, reverse, filter);
    print!("{}", render_text(&view, &rows));
    ExitCode::SUCCESS
}

/// What the keys have set.
struct Ui {
    sort: usize,
    reverse: bool,
    filter: String,
    /// Editing the filter (after `/`).
    editing: Option<String>,
    table: TableState,
}

enum Exit {
    Quit,
    TooSmall(u16, u16),
}

fn tui(rx: watch::Receiver<Arc<View>>, sort: usize, reverse: bool, filter: String) -> ExitCode {
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("switchman top: cannot use the terminal: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ui = Ui {
        sort,
        reverse,
        filter,
        editing: None,
        table: TableState::default(),
    };
    let result = ui_loop(&mut terminal, rx, &mut ui);
    ratatui::restore();
    match result {
        Ok(Exit::Quit) => ExitCode::SUCCESS,
        Ok(Exit::TooSmall(w, h)) => {
            eprintln!(
                "switchman top: the terminal is {w}x{h}; the view needs at least {MIN_WIDTH}x{MIN_HEIGHT} (use --once for a text table)"
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("switchman top: {e}");
            ExitCode::FAILURE
        }
    }
}

fn ui_loop(
    terminal: &mut ratatui::DefaultTerminal,
    rx: watch::Receiver<Arc<View>>,
    ui: &mut Ui,
) -> std::io::Result<Exit> {
    loop {
        let size = terminal.size()?;
        if size.width < MIN_WIDTH || size.height < MIN_HEIGHT {
            return Ok(Exit::TooSmall(size.width, size.height));
        }
        let view = rx.borrow().clone();
        terminal.draw(|f| draw(f, &view, ui))?;
        if !event::poll(Duration::from_millis(150))? {
            continue;
        }
        match event::read()? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                if let Some(edit) = ui.editing.as_mut() {
                    match k.code {
                        KeyCode::Enter => {
                            ui.filter = edit.clone();
                            ui.editing = None;
                        }
                        KeyCode::Esc => ui.editing = None,
                        KeyCode::Backspace => {
                            edit.pop();
                        }
                        KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                            edit.push(c)
                        }
                        _ => {}
                    }
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(Exit::Quit),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(Exit::Quit);
                    }
                    KeyCode::Char('s') => ui.sort = (ui.sort + 1) % SORTS.len(),
                    KeyCode::Char('S') => ui.sort = (ui.sort + SORTS.len() - 1) % SORTS.len(),
                    KeyCode::Char('r') => ui.reverse = !ui.reverse,
                    KeyCode::Char('/') => ui.editing = Some(ui.filter.clone()),
                    KeyCode::Char('c') => ui.filter.clear(),
                    KeyCode::Down | KeyCode::Char('j') => ui.table.select_next(),
                    KeyCode::Up | KeyCode::Char('k') => ui.table.select_previous(),
                    _ => {}
                }
            }
            // The next turn measures the new size.
            _ => {}
        }
    }
}

fn state_style(state: &str) -> Style {
    match state {
        "ejected" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "draining" => Style::default().fg(Color::Magenta),
        "warming" => Style::default().fg(Color::Yellow),
        "disabled" => Style::default().fg(Color::DarkGray),
        _ => Style::default().fg(Color::Green),
    }
}

fn draw(f: &mut ratatui::Frame<'_>, view: &View, ui: &mut Ui) {
    let rows = arrange(&view.rows, ui.sort, ui.reverse, &ui.filter);
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let lines = header_lines(&view.header, view.rows.len(), rows.len());
    let mut head_lines: Vec<Line<'_>> = vec![
        Line::from(Span::styled(
            format!("switchman top  {}", lines[0]),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(lines[1].clone()),
        Line::from(lines[2].clone()),
    ];
    if let Some(e) = &view.error {
        head_lines.push(Line::from(Span::styled(
            format!("! {e}"),
            Style::default().fg(Color::Red),
        )));
    } else if view.header.source.is_empty() {
        head_lines.push(Line::from("reading..."));
    }
    f.render_widget(Paragraph::new(head_lines), head);

    let widths = [
        Constraint::Min(15),
        Constraint::Length(5),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(22),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(5),
    ];
    let sorted = SORTS[ui.sort % SORTS.len()];
    let header = TableRow::new(COLUMNS.iter().map(|c| {
        let name = c.split(' ').next().unwrap_or(c).to_ascii_lowercase();
        let style = if name == sorted || (sorted == "ejections" && name == "eject") {
            Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        };
        Cell::from(*c).style(style)
    }));
    let table_rows = rows.iter().map(|r| {
        let c = cells(r);
        TableRow::new(c.into_iter().enumerate().map(|(i, v)| {
            let cell = Cell::from(v);
            if i == 6 {
                cell.style(state_style(&r.state))
            } else {
                cell
            }
        }))
    });
    let table = Table::new(table_rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::TOP))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    f.render_stateful_widget(table, body, &mut ui.table);

    let footer = match &ui.editing {
        Some(edit) => format!("filter: {edit}_   (Enter apply, Esc cancel)"),
        None => format!(
            "sort {}{} | filter {} | s/S sort  r reverse  / filter  c clear  q quit",
            sorted,
            if ui.reverse { " (reversed)" } else { "" },
            if ui.filter.is_empty() {
                "-"
            } else {
                &ui.filter
            }
        ),
    };
    f.render_widget(
        Paragraph::new(footer).style(Style::default().add_modifier(Modifier::DIM)),
        foot,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SCRAPE: &str = r#"# TYPE rpc_client_call_duration_seconds histogram
rpc_client_call_duration_seconds_count{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",outcome="success"} 90
rpc_client_call_duration_seconds_count{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",outcome="failure",error_type="transport"} 10
rpc_client_call_duration_seconds_count{rpc_system="http",rpc_service="other.Svc",rpc_method="hi",outcome="success"} 1000
switchman_retries_total{rpc_service="demo.Echo"} 7
switchman_retry_budget_refused_total{rpc_service="demo.Echo"} 2
rpc_client_attempt_duration_seconds_bucket{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",server_address="127.0.0.1",server_port="9001",outcome="success",le="0.001"} 50
rpc_client_attempt_duration_seconds_bucket{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",server_address="127.0.0.1",server_port="9001",outcome="success",le="0.01"} 90
rpc_client_attempt_duration_seconds_bucket{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",server_address="127.0.0.1",server_port="9001",outcome="success",le="+Inf"} 100
rpc_client_attempt_duration_seconds_bucket{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",server_address="127.0.0.1",server_port="9001",outcome="failure",error_type="timeout",le="0.001"} 0
rpc_client_attempt_duration_seconds_bucket{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",server_address="127.0.0.1",server_port="9001",outcome="failure",error_type="timeout",le="0.01"} 0
rpc_client_attempt_duration_seconds_bucket{rpc_system="http",rpc_service="demo.Echo",rpc_method="hi",server_address="127.0.0.1",server_port="9001",outcome="failure",error_type="timeout",le="+Inf"} 10
"#;

    #[test]
    fn prometheus_lines_parse_with_escapes_and_bad_lines_are_skipped() {
        let s = parse_line(r#"m{a="x\"y",b="p\\q\nr"} 1.5 1700000000"#).unwrap();
        assert_eq!(s.0, "m");
        assert_eq!(
            s.1,
            vec![
                ("a".to_string(), "x\"y".to_string()),
                ("b".to_string(), "p\\q\nr".to_string())
            ]
        );
        assert_eq!(s.2, 1.5);
        assert_eq!(
            parse_line("plain 3").unwrap(),
            ("plain".into(), vec![], 3.0)
        );
        assert_eq!(parse_line("m{} +Inf").unwrap().2, f64::INFINITY);
        assert!(parse_line("# HELP m x").is_none());
        assert!(parse_line(r#"m{a="unterminated} 1"#).is_none());
        assert!(parse_line("m notanumber").is_none());
    }

    #[test]
    fn a_scrape_gives_the_service_figures_and_per_instance_buckets() {
        let s = scrape_for(SCRAPE, "demo.Echo");
        assert_eq!(
            (s.calls, s.calls_failed, s.retries, s.refused),
            (100.0, 10.0, 7.0, 2.0)
        );
        // Success and failure series of one instance add up per bound.
        assert_eq!(
            s.buckets["127.0.0.1:9001"],
            vec![(0.001, 50.0), (0.01, 90.0), (f64::INFINITY, 110.0)]
        );
        assert_eq!(scrape_for(SCRAPE, "nobody"), Scrape::default());
    }

    #[test]
    fn quantiles_interpolate_inside_buckets_like_histogram_quantile() {
        let b = [(0.001, 50.0), (0.01, 90.0), (f64::INFINITY, 100.0)];
        // Rank 50 is the top of the first bucket.
        assert_eq!(quantile(0.5, &b), Some(0.001));
        // Rank 70: half-way through (0.001, 0.01].
        assert!((quantile(0.7, &b).unwrap() - 0.0055).abs() < 1e-12);
        // Rank 99 falls in +Inf: the highest finite bound.
        assert_eq!(quantile(0.99, &b), Some(0.01));
        assert_eq!(quantile(0.5, &[(0.001, 0.0), (f64::INFINITY, 0.0)]), None);
        assert_eq!(quantile(0.5, &[]), None);
        // Deltas: what happened between two reads.
        let old = vec![(0.001, 40.0), (0.01, 80.0), (f64::INFINITY, 80.0)];
        assert_eq!(
            bucket_delta(&b, Some(&old)),
            vec![(0.001, 10.0), (0.01, 10.0), (f64::INFINITY, 20.0)]
        );
    }

    fn instance(addr: &str, state: &str, ok: u64, failed: u64) -> Value {
        json!({"key": addr, "address": addr, "protocol": "http", "group": "", "version": "",
               "weight": 100, "current_weight": 100, "zone": null, "tag": null, "state": state,
               "succeeded": ok, "failed": failed, "ejections": u64::from(state == "ejected"),
               "ejected": {"left_ms": 12_345, "probe_due": false}})
    }

    fn poll(at: Instant, rows: Vec<Value>, scrape: &str, refused: u64) -> Poll {
        Poll {
            at,
            snapshot: json!({"service": "demo.Echo", "epoch": 3, "loadbalance": "random",
                "states": {"routable": 1, "ejected": 1},
                "cluster": {"strategy": "failover", "budget_refused": refused},
                "instances": rows}),
            metrics: Some(scrape_for(scrape, "demo.Echo")),
        }
    }

    #[test]
    fn rows_and_header_are_the_differences_between_two_reads() {
        let t0 = Instant::now();
        let before = poll(
            t0,
            vec![
                instance("127.0.0.1:9001", "routable", 100, 0),
                instance("127.0.0.1:9002", "ejected", 0, 5),
            ],
            &SCRAPE
                .replace("} 90\n", "} 40\n")
                .replace("} 10\n", "} 0\n")
                .replace("} 7\n", "} 1\n"),
            1,
        );
        let after = poll(
            t0 + Duration::from_secs(2),
            vec![
                instance("127.0.0.1:9001", "routable", 130, 0),
                instance("127.0.0.1:9002", "ejected", 0, 15),
            ],
            SCRAPE,
            2,
        );
        let history: VecDeque<Poll> = [before, after].into();
        let v = compute(&history, "admin http://x", true);
        let h = &v.header;
        assert_eq!(h.span, Some(2.0));
        // 60 more calls (50 ok, 10 failed) in 2 s; 6 retries.
        assert_eq!(h.calls_per_sec, Some(30.0));
        assert!((h.success_rate.unwrap() - 50.0 / 60.0).abs() < 1e-9);
        assert_eq!(h.retries_per_sec, Some(3.0));
        assert_eq!((h.refused_total, h.refused_recent), (Some(2), Some(1)));
        assert_eq!(h.strategy.as_deref(), Some("failover"));
        let [a, b] = v.rows.as_slice() else {
            panic!("{:?}", v.rows)
        };
        // 30 attempts on a, 10 on b.
        assert_eq!((a.share, a.errors), (Some(0.75), Some(0)));
        assert_eq!((b.share, b.errors), (Some(0.25), Some(10)));
        assert_eq!(b.state_text, "ejected 13s");
        assert_eq!(b.ejections, 1);
        // Only one read: no rates yet, and no fake zeros.
        let one: VecDeque<Poll> = [history[1].clone()].into();
        let v1 = compute(&one, "admin http://x", true);
        assert_eq!(
            (v1.header.calls_per_sec, v1.rows[0].share, v1.rows[0].errors),
            (None, None, None)
        );
        // A registry view has no traffic columns whatever the counters say.
        let v2 = compute(&history, "registry r", false);
        assert_eq!((v2.rows[0].share, v2.rows[0].errors), (None, None));
        let text = render_text(
            &v,
            &arrange(&v.rows, parse_sort("share").unwrap(), false, ""),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("demo.Echo via admin http://x | epoch 3 | random + failover"),
            "{text}"
        );
        assert!(
            lines[1].starts_with(
                "calls/s 30.0 | success 83.33% | retries/s 3.00 (total 7) | budget refused 2 (+1)"
            ),
            "{text}"
        );
        assert!(lines[4].starts_with("ADDRESS "), "{text}");
        assert!(
            lines[5].starts_with("127.0.0.1:9001") && lines[5].contains("75.0%"),
            "{text}"
        );
        assert!(
            lines[6].contains("ejected 13s") && lines[6].contains("25.0%"),
            "{text}"
        );
    }

    fn row(address: &str, state: &str, share: Option<f64>, zone: &str) -> Row {
        Row {
            address: address.into(),
            protocol: "http".into(),
            group_version: String::new(),
            weight: 100,
            current_weight: 100,
            zone: zone.into(),
            tag: String::new(),
            state: state.into(),
            state_text: state.into(),
            share,
            p50_ms: None,
            p99_ms: None,
            errors: None,
            ejections: 0,
        }
    }

    #[test]
    fn rows_sort_and_filter() {
        let rows = vec![
            row("10.0.0.2:1", "routable", Some(0.2), "b"),
            row("10.0.0.1:1", "ejected", Some(0.1), "a"),
            row("10.0.0.3:1", "routable", None, "a"),
        ];
        let addrs = |r: Vec<Row>| r.into_iter().map(|r| r.address).collect::<Vec<_>>();
        assert_eq!(
            addrs(arrange(&rows, 0, false, "")),
            ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]
        );
        let share = parse_sort("share").unwrap();
        assert_eq!(
            addrs(arrange(&rows, share, false, "")),
            ["10.0.0.2:1", "10.0.0.1:1", "10.0.0.3:1"]
        );
        assert_eq!(
            addrs(arrange(&rows, share, true, "")),
            ["10.0.0.3:1", "10.0.0.1:1", "10.0.0.2:1"]
        );
        let state = parse_sort("STATE").unwrap();
        assert_eq!(addrs(arrange(&rows, state, false, ""))[0], "10.0.0.1:1");
        assert_eq!(addrs(arrange(&rows, 0, false, "EJECT")), ["10.0.0.1:1"]);
        assert_eq!(addrs(arrange(&rows, 0, false, "0.0.3")), ["10.0.0.3:1"]);
        let e = parse_sort("fastest").unwrap_err();
        assert!(e.contains("\"fastest\"") && e.contains("p99"), "{e}");
        assert!(
            seconds(0.0, "interval")
                .unwrap_err()
                .contains("--interval 0")
        );
        assert_eq!(encode_path("g1/a.B:1.0 x"), "g1/a.B:1.0%20x");
    }

    #[test]
    fn http_answers_parse_by_length_chunks_or_close() {
        let by_length = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}trailing";
        assert_eq!(parse_answer(by_length), Some((200, "{}".to_string())));
        let chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_answer(chunked), Some((404, "abcde".to_string())));
        let to_close = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert_eq!(parse_answer(to_close), Some((200, "all of it".to_string())));
        assert_eq!(parse_answer(b"garbage"), None);
        assert_eq!(
            parse_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort"),
            None
        );
    }
}
