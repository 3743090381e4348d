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

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

mod prometheus;
mod source;
mod table;
mod terminal;

use prometheus::*;
use source::*;
use table::*;
use terminal::*;

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
    // Shown in the header: every server as given, the password masked.
    let shown = switchman_core::url::redacted_text(registry);
    // A misspelled service or a wrong group/version: say so, and what exists, as `watch` does.
    let nothing = match dir.load().instances().is_empty() {
        true => {
            let others = crate::watch::other_keys(reg.as_ref(), service).await;
            Some(crate::watch::nothing_matches(
                &shown,
                dir.load().service(),
                &others,
            ))
        }
        false => None,
    };
    Ok(Source::Registry {
        directory: Arc::new(dir),
        registry: shown,
        nothing,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
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
}
