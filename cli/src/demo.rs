//! `switchman demo`: the whole call path on 127.0.0.1 with no external server.
//!
//! Five in-process HTTP providers (one answers 503 to a third of its calls, one is slow) sit in
//! a static registry; a fixed number of calls go through the failover cluster invoker with
//! weighted random balancing; half-way, one provider's weight is raised in the registry and the
//! new snapshot takes effect without a restart. The report shows what the caller saw.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker, Strategy};
use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, StaticRegistry};
use switchman_loadbalance::OutlierConfig;

const SERVICE: &str = "demo.Greeter";

/// Arguments of `switchman demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Total calls (half before the weight change, half after).
    #[arg(long, default_value_t = 4000)]
    calls: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Run this cluster strategy only (Dubbo name). Without it: failover, then a table
    /// comparing every strategy on the same fleet.
    #[arg(long = "cluster")]
    strategy: Option<String>,
    /// Load balancer (Dubbo name).
    #[arg(long, default_value = "random")]
    loadbalance: String,
    /// Calls per strategy in the comparison table (0: no table).
    #[arg(long, default_value_t = 600)]
    compare_calls: usize,
    /// The weight given to provider p1 half-way (all start at 100).
    #[arg(long, default_value_t = 400)]
    new_weight: u32,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    // The main run's consumer is listed there while the demo runs.
    #[command(flatten)]
    admin: crate::admin::AdminArgs,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Behaviour {
    Healthy,
    /// Answers 503 to every third call.
    Flaky,
    /// Answers after 40 ms.
    Slow,
}

#[derive(Debug, Serialize)]
struct ProviderReport {
    name: String,
    address: String,
    behaviour: Behaviour,
    weight_before: u32,
    weight_after: u32,
    /// Share of all attempts in each phase.
    share_before: f64,
    share_after: f64,
    /// Ejected as an outlier at the end of the main run.
    ejected: bool,
    /// How many times it was ejected.
    ejections: u32,
}

#[derive(Debug, Serialize)]
struct Report {
    calls: usize,
    succeeded: usize,
    failed: usize,
    success_rate: f64,
    attempts_per_call: f64,
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    cluster: String,
    loadbalance: String,
    weight_change: serde_json::Value,
    providers: Vec<ProviderReport>,
    /// Every strategy on the same fleet (plain `switchman demo` only).
    strategies: Vec<StrategyRow>,
    elapsed_ms: u64,
}

#[derive(Debug, Serialize)]
struct StrategyRow {
    cluster: String,
    calls: usize,
    /// Calls that returned a provider's answer.
    answered: usize,
    /// Calls that returned an empty result instead of an error (failsafe, failback).
    empty: usize,
    /// Calls that returned an error.
    errors: usize,
    attempts_per_call: f64,
    latency_p99_ms: f64,
}

struct Provider {
    name: String,
    behaviour: Behaviour,
    server: HttpProvider,
}

async fn start_provider(name: &str, behaviour: Behaviour) -> std::io::Result<Provider> {
    let counter = Arc::new(AtomicU64::new(0));
    let reply_name = name.to_string();
    let server = HttpProvider::serve(
        "127.0.0.1:0".parse().expect("literal address"),
        move |req| {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            let name = reply_name.clone();
            Box::pin(async move {
                match behaviour {
                    Behaviour::Flaky if n % 3 == 2 => {
                        ProviderReply::Status(503, format!("{name} is overloaded"))
                    }
                    Behaviour::Slow => {
                        tokio::time::sleep(Duration::from_millis(40)).await;
                        ProviderReply::Ok(json!({"from": name, "echo": req.arguments}))
                    }
                    _ => ProviderReply::Ok(json!({"from": name, "echo": req.arguments})),
                }
            })
        },
    )
    .await?;
    Ok(Provider {
        name: name.to_string(),
        behaviour,
        server,
    })
}

/// The providers' hits once they have stopped moving (unchanged over 50 ms; at most about a
/// second), so that attempts still on the wire when a run ends are counted for that run.
async fn settled_hits(providers: &[Provider]) -> u64 {
    let sum = || providers.iter().map(|p| p.server.hits()).sum::<u64>();
    let mut last = sum();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = sum();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// Runs `count` calls with `concurrency` workers; returns (successes, latencies).
async fn drive(
    cluster: &Arc<ClusterInvoker>,
    count: usize,
    concurrency: usize,
    bar: &ProgressBar,
) -> (usize, usize, Vec<Duration>) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let cluster = cluster.clone();
        let next = next.clone();
        let bar = bar.clone();
        workers.push(tokio::spawn(async move {
            let mut ok = 0usize;
            let mut empty = 0usize;
            let mut lat = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let inv = Invocation::new("greet").with_args(vec![json!("switchman")]);
                let t = Instant::now();
                match cluster.invoke(&inv).await {
                    Ok(serde_json::Value::Null) => empty += 1,
                    Ok(_) => ok += 1,
                    Err(_) => {}
                }
                lat.push(t.elapsed());
                bar.inc(1);
            }
            (ok, empty, lat)
        }));
    }
    let mut ok = 0;
    let mut empty = 0;
    let mut lat = Vec::with_capacity(count);
    for w in workers {
        if let Ok((o, e, l)) = w.await {
            ok += o;
            empty += e;
            lat.extend(l);
        }
    }
    (ok, empty, lat)
}

async fn run_demo(args: &DemoArgs) -> Result<Report, String> {
    let strategy: Strategy = args
        .strategy
        .as_deref()
        .unwrap_or("failover")
        .parse()
        .map_err(|e: switchman_core::Error| e.to_string())?;
    if args.calls < 2 {
        return Err(format!(
            "--calls {} is too small: the demo needs at least 2 calls",
            args.calls
        ));
    }
    let admin = args.admin.start(&args.metrics, "demo").await?;
    let started = Instant::now();
    let plan = [
        ("p1", Behaviour::Healthy),
        ("p2", Behaviour::Healthy),
        ("p3", Behaviour::Flaky),
        ("p4", Behaviour::Healthy),
        ("p5", Behaviour::Slow),
    ];
    let mut providers = Vec::new();
    for (name, b) in plan {
        providers.push(
            start_provider(name, b)
                .await
                .map_err(|e| format!("cannot start provider {name}: {e}"))?,
        );
    }
    let key = ServiceKey::new(SERVICE);
    let instances: Vec<Instance> = providers
        .iter()
        .map(|p| {
            Instance::builder("127.0.0.1", p.server.addr().port())
                .service(key.clone())
                .param("name", &p.name)
                // Started long ago as far as warm-up is concerned: the demo is about weights.
                .timestamp_ms(0)
                .build()
        })
        .collect();
    let registry = StaticRegistry::new(instances);
    let balancer =
        switchman_loadbalance::balancer_by_name(&args.loadbalance).map_err(|e| e.to_string())?;
    let directory =
        RegistryDirectory::subscribe(&registry, DirectoryConfig::new(key).balancer(balancer))
            .await
            .map_err(|e| e.to_string())?;
    let directory = Arc::new(directory);
    directory
        .wait_until(Duration::from_secs(5), |s| {
            s.endpoints().len() == providers.len()
        })
        .await
        .map_err(|e| e.to_string())?;
    let config = ClusterConfig::default().strategy(strategy);
    let cluster = ClusterInvoker::new(directory.clone(), Arc::new(HttpInvoker::new()), config)
        // Per-instance attempt series with --admin, for `switchman top --admin`.
        .with_instance_metrics(admin.is_some());
    let cluster = Arc::new(cluster);
    let _listing = admin.as_ref().map(|a| a.cluster("static (demo)", &cluster));

    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.calls as u64)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {msg:<22} [{bar:40}] {pos}/{len} calls ({per_sec})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );

    let first = args.calls / 2;
    bar.set_message("weights 100 each");
    let (ok1, _, mut lat) = drive(&cluster, first, args.concurrency, &bar).await;
    let hits_before: Vec<u64> = providers.iter().map(|p| p.server.hits()).collect();

    // Raise p1's weight in the registry; the directory publishes a new snapshot.
    let epoch = directory.load().epoch();
    let new_weight = args.new_weight;
    registry.update(|list| list[0] = list[0].with_weight(new_weight));
    directory
        .wait_until(Duration::from_secs(5), |s| s.epoch() > epoch)
        .await
        .map_err(|e| e.to_string())?;

    bar.set_message(format!("p1 weight {new_weight}"));
    let (ok2, _, lat2) = drive(&cluster, args.calls - first, args.concurrency, &bar).await;
    bar.finish_and_clear();
    lat.extend(lat2);
    lat.sort();
    let hits_after: Vec<u64> = providers
        .iter()
        .zip(&hits_before)
        .map(|(p, b)| p.server.hits() - b)
        .collect();

    let total_before: u64 = hits_before.iter().sum();
    let total_after: u64 = hits_after.iter().sum();
    let share = |h: u64, t: u64| if t == 0 { 0.0 } else { h as f64 / t as f64 };
    let succeeded = ok1 + ok2;
    let snap = directory.load();
    let outlier_state = |addr: &str| {
        snap.index_of(addr)
            .map(|i| {
                let o = snap.endpoints()[i].stats.outlier();
                (o.is_ejected(), o.ejections())
            })
            .unwrap_or((false, 0))
    };
    let report = Report {
        calls: args.calls,
        succeeded,
        failed: args.calls - succeeded,
        success_rate: succeeded as f64 / args.calls as f64,
        attempts_per_call: (total_before + total_after) as f64 / args.calls as f64,
        latency_p50_ms: percentile(&lat, 50.0),
        latency_p99_ms: percentile(&lat, 99.0),
        cluster: strategy.to_string(),
        loadbalance: directory.load().balancer().name().to_string(),
        weight_change: json!({"provider": "p1", "from": 100, "to": new_weight}),
        providers: providers
            .iter()
            .enumerate()
            .map(|(i, p)| ProviderReport {
                name: p.name.clone(),
                address: p.server.addr().to_string(),
                behaviour: p.behaviour,
                weight_before: 100,
                weight_after: if i == 0 { new_weight } else { 100 },
                share_before: share(hits_before[i], total_before),
                share_after: share(hits_after[i], total_after),
                ejected: outlier_state(&p.server.addr().to_string()).0,
                ejections: outlier_state(&p.server.addr().to_string()).1,
            })
            .collect(),
        strategies: Vec::new(),
        elapsed_ms: 0,
    };
    let mut report = report;
    if args.strategy.is_none() && args.compare_calls > 0 {
        let bar = if args.json {
            ProgressBar::hidden()
        } else {
            ProgressBar::new((args.compare_calls * Strategy::ALL.len()) as u64)
        };
        for kind in Strategy::ALL {
            bar.set_message(format!("comparing {kind}"));
            // Ejection off here: every strategy meets the flaky provider, so the table shows
            // what each one does with its failures (the main run above shows ejection).
            let config = ClusterConfig::default()
                .strategy(kind)
                .outlier(OutlierConfig::disabled());
            let c = Arc::new(ClusterInvoker::new(
                directory.clone(),
                Arc::new(HttpInvoker::new()),
                config,
            ));
            // Settled before and after: a forking call's losing attempt may reach its
            // provider after the call ended, and must count for its own row, not the next.
            let before = settled_hits(&providers).await;
            let (answered, empty, mut lat) =
                drive(&c, args.compare_calls, args.concurrency, &bar).await;
            drop(c);
            let after = settled_hits(&providers).await;
            lat.sort();
            report.strategies.push(StrategyRow {
                cluster: kind.to_string(),
                calls: args.compare_calls,
                answered,
                empty,
                errors: args.compare_calls - answered - empty,
                attempts_per_call: (after - before) as f64 / args.compare_calls as f64,
                latency_p99_ms: percentile(&lat, 99.0),
            });
        }
        bar.finish_and_clear();
    }
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

fn print_table(r: &Report) {
    println!(
        "switchman demo: {} calls to {SERVICE} through {} + {}",
        r.calls, r.cluster, r.loadbalance
    );
    println!();
    println!(
        "  {:<8} {:<18} {:<8} {:>14} {:>14}",
        "provider", "address", "kind", "share before", "share after"
    );
    for p in &r.providers {
        let kind = match p.behaviour {
            Behaviour::Healthy => "healthy",
            Behaviour::Flaky => "503 1/3",
            Behaviour::Slow => "slow",
        };
        println!(
            "  {:<8} {:<18} {:<8} {:>7.1}% (w{:<3}) {:>6.1}% (w{:<3}) {}",
            p.name,
            p.address,
            kind,
            p.share_before * 100.0,
            p.weight_before,
            p.share_after * 100.0,
            p.weight_after,
            if p.ejected {
                "ejected as an outlier"
            } else {
                ""
            }
        );
    }
    println!();
    println!("  calls             {}", r.calls);
    println!(
        "  succeeded         {} ({:.2}%)",
        r.succeeded,
        r.success_rate * 100.0
    );
    println!("  failed            {}", r.failed);
    println!("  attempts per call {:.3}", r.attempts_per_call);
    println!("  latency p50       {:.2} ms", r.latency_p50_ms);
    println!("  latency p99       {:.2} ms", r.latency_p99_ms);
    println!("  elapsed           {:.2} s", r.elapsed_ms as f64 / 1000.0);
    println!();
    println!(
        "  shares are of attempts; p1's weight went from 100 to {} half-way, through the registry;\n  \
         the flaky provider is ejected once its success rate falls below 80% over 20+ calls",
        r.providers[0].weight_after
    );
    if !r.strategies.is_empty() {
        println!();
        println!(
            "every strategy on the same fleet, outlier ejection off ({} calls each; empty = a null answer instead of an error):",
            r.strategies[0].calls
        );
        println!();
        println!(
            "  {:<11} {:>9} {:>7} {:>7} {:>14} {:>10}",
            "cluster", "answered", "empty", "errors", "attempts/call", "p99 ms"
        );
        for s in &r.strategies {
            println!(
                "  {:<11} {:>8.1}% {:>7} {:>7} {:>14.3} {:>10.2}",
                s.cluster,
                s.answered as f64 * 100.0 / s.calls.max(1) as f64,
                s.empty,
                s.errors,
                s.attempts_per_call,
                s.latency_p99_ms
            );
        }
    }
}

pub(crate) fn run(args: DemoArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchman demo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run_demo(&args)) {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("switchman demo: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                print_table(&report);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("switchman demo: {e}");
            ExitCode::from(2)
        }
    }
}
