//! `switchman call REGISTRY SERVICE --method M`: calls through the cluster and reports, per
//! instance, how many attempts it received and how they ended.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchman::Reference;
use switchman_cluster::dubbo::{ClientTls, DubboInvoker};
use switchman_cluster::triple::{Payload, TripleInvoker};
use switchman_cluster::{ClusterConfig, ProtocolInvoker, Retries, Settings, Strategy};
use switchman_core::{BoxFuture, Error, Instance, Invocation, Invoker, Result};

/// Arguments of `switchman call`.
#[derive(Debug, clap::Args)]
pub(crate) struct CallArgs {
    /// Registry address: zookeeper://h:p, nacos://h:p?namespace=.., or a static YAML file.
    /// A cluster: zookeeper://h1:p1,h2:p2,h3:p3[/chroot] or nacos://h1:p1,h2:p2?namespace=..
    /// (or ?backup=h2:p2,h3:p3 on either; nacos also ?endpoint=host:port, an address server).
    registry: String,
    /// Service (Dubbo interface, or a plain Nacos service name).
    service: String,
    /// Method to call.
    #[arg(long)]
    method: String,
    /// Arguments as a JSON array (a single non-array value is wrapped).
    #[arg(long, default_value = "[]")]
    args: String,
    /// Java parameter types for dubbo:// calls, comma-separated (`int,int`,
    /// `java.lang.String`, `com.foo.User`). Without them a dubbo:// call is generic and the
    /// provider finds the method by name.
    #[arg(long, value_delimiter = ',')]
    types: Vec<String>,
    /// Send dubbo:// calls as Dubbo generic calls (`$invoke`, POJOs as maps) even with --types.
    #[arg(long)]
    generic: bool,
    /// Triple payload codec: `json` (default) or `raw` (bytes; see --data).
    #[arg(long, default_value = "json")]
    payload: String,
    /// With `--payload raw`: the request bytes, as text (replaces --args).
    #[arg(long)]
    data: Option<String>,
    /// Number of calls.
    #[arg(long, default_value_t = 1)]
    count: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Cluster strategy (Dubbo name).
    #[arg(long = "cluster", default_value = "failover")]
    strategy: String,
    /// Load balancer (Dubbo name).
    #[arg(long, default_value = "random")]
    loadbalance: String,
    /// Per-attempt timeout in ms, a consumer service-level setting: a provider's own
    /// `{method}.timeout` beats it, its service-level `timeout` does not. Unset: the
    /// provider's values, else Dubbo's default (1000 ms; 3000 ms to a tri:// provider).
    #[arg(long)]
    timeout: Option<u64>,
    /// Retries after a failed attempt (failover; background retries for failback), a consumer
    /// service-level setting. Unset: Dubbo's default (2; failback 3). Providers never set it.
    #[arg(long)]
    retries: Option<i64>,
    /// Dubbo group.
    #[arg(long, default_value = "")]
    group: String,
    /// Dubbo version.
    #[arg(long, default_value = "")]
    version: String,
    /// Attachment `key=value` (repeatable), e.g. `dubbo.tag=gray`.
    #[arg(long = "attachment")]
    attachments: Vec<String>,
    /// TLS to the dubbo:// and Triple providers that register `ssl-enabled=true`: the PEM
    /// file of the CA that signs their certificates (checked against each provider's
    /// registered host). Without it, a call to such a provider fails naming it.
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<std::path::PathBuf>,
    /// With --tls-ca: the client certificate chain (PEM) for providers that require one (mTLS).
    #[arg(long, value_name = "PEM", requires_all = ["tls_ca", "tls_key"])]
    tls_cert: Option<std::path::PathBuf>,
    /// With --tls-cert: its unencrypted private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// With --tls-ca: call over TLS only the dubbo:// and Triple providers that register
    /// `ssl-enabled=true`, the others in cleartext (default: every provider over TLS, as a
    /// Java consumer with an SslConfig does; the registry cannot then downgrade a link).
    #[arg(long, requires = "tls_ca")]
    tls_where_enabled: bool,
    /// Seconds to wait for the registry's first answer (an empty answer ends the call at once).
    #[arg(long, default_value_t = 5)]
    wait: u64,
    /// Print the report as JSON (per instance, `succeeded` and `failed` count attempts: a call
    /// retried on another instance counts on both).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    /// With --metrics: label attempt durations with the instance called (`server_address`,
    /// `server_port`): one series per instance.
    #[arg(long, requires = "metrics")]
    metrics_per_instance: bool,
    // With --admin the attempt histogram is labelled per instance (as with
    // --metrics-per-instance), so that `switchman top` shows each instance's latency.
    #[command(flatten)]
    admin: crate::admin::AdminArgs,
}

type Outcome = std::result::Result<Value, String>;

/// Counts attempts per instance around the real invoker.
#[derive(Debug)]
struct Counting<I> {
    inner: I,
    per_instance: Mutex<BTreeMap<String, (u64, u64)>>,
}

impl<I: Invoker> Invoker for Counting<I> {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        inv: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let r = self.inner.invoke(target, inv, timeout).await;
            if let Ok(mut m) = self.per_instance.lock() {
                let e = m.entry(target.address().to_string()).or_default();
                if r.is_ok() { e.0 += 1 } else { e.1 += 1 }
            }
            r
        })
    }

    fn bounds_timeout(&self) -> bool {
        self.inner.bounds_timeout()
    }
}

type Parsed = (Vec<Value>, Vec<(String, String)>);

fn parse_args(args: &CallArgs) -> std::result::Result<Parsed, String> {
    if let Some(data) = &args.data {
        let mut att = Vec::new();
        for a in &args.attachments {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| format!("--attachment {a:?}: expected key=value"))?;
            att.push((k.to_string(), v.to_string()));
        }
        return Ok((vec![Value::String(data.clone())], att));
    }
    let v: Value = serde_json::from_str(&args.args)
        .map_err(|e| format!("--args {:?} is not JSON: {e}", args.args))?;
    let list = match v {
        Value::Array(a) => a,
        other => vec![other],
    };
    let mut att = Vec::new();
    for a in &args.attachments {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("--attachment {a:?}: expected key=value"))?;
        att.push((k.to_string(), v.to_string()));
    }
    Ok((list, att))
}

/// The consumer's settings: `--cluster`, and `--timeout`/`--retries` at the service level
/// only when given (unset, the providers' values and Dubbo's defaults apply).
fn cluster_config(args: &CallArgs) -> std::result::Result<ClusterConfig, String> {
    let strategy: Strategy = args.strategy.parse().map_err(|e: Error| e.to_string())?;
    let mut service = Settings::new().strategy(strategy);
    if let Some(ms) = args.timeout {
        // 0: Dubbo's default, as `timeout=0` is.
        service = service.timeout(Duration::from_millis(ms));
    }
    if let Some(r) = args.retries {
        service = service.retries(Retries::from_dubbo(r));
    }
    Ok(ClusterConfig::default().service_settings(service))
}

async fn run_calls(args: CallArgs) -> std::result::Result<Value, String> {
    if args.count == 0 {
        return Err("--count 0: make at least 1 call".into());
    }
    if args.concurrency == 0 {
        return Err("--concurrency 0: at least 1 call must be in flight".into());
    }
    let config = cluster_config(&args)?;
    let (arguments, attachments) = parse_args(&args)?;
    let admin = args.admin.start(&args.metrics, "call").await?;
    let payload: Payload = args.payload.parse().map_err(|e: switchman_core::Error| {
        format!("--payload {:?}: {}", args.payload, e.message())
    })?;
    let mut transport = ProtocolInvoker::new()
        .triple(TripleInvoker::new().payload(payload))
        .dubbo(DubboInvoker::new().generic(args.generic));
    let mut tls = None;
    if let Some(ca) = &args.tls_ca {
        let identity = args.tls_cert.as_deref().zip(args.tls_key.as_deref());
        let settings = ClientTls::from_files(ca, identity)
            .map_err(|e| format!("--tls-ca/--tls-cert/--tls-key: {}", e.message()))?
            .every_provider(!args.tls_where_enabled);
        transport = transport.tls(settings.clone());
        tls = Some(settings);
    }
    let counting = Arc::new(Counting {
        inner: transport,
        per_instance: Mutex::new(BTreeMap::new()),
    });
    // Dubbo's check=true: the registry's first answer decides; an empty one ends the call at
    // once with what the registry has instead. No answer within --wait: the same exit code.
    let mut builder = Reference::new(&args.service)
        .registry(&args.registry)
        .group(&args.group)
        .version(&args.version)
        .config(config)
        .loadbalance(&args.loadbalance)
        .invoker(counting.clone())
        .wait(Duration::from_secs(args.wait))
        .empty_grace(Duration::ZERO);
    if let Some(tls) = tls {
        // The transport has them for the calls; these serve application-level metadata
        // fetches (a TLS provider's MetadataService is on its TLS port).
        builder = builder.tls(tls);
    }
    if let Some(a) = &admin {
        // Listed there (per-instance attempt series on) while the calls run.
        builder = builder.admin(a.addr());
    }
    let reference = builder.connect().await.map_err(|e| e.to_string())?;
    let directory = reference.directory().clone();
    let cluster = match args.metrics_per_instance && admin.is_none() {
        true => reference.cluster().clone().with_instance_metrics(true),
        false => reference.cluster().clone(),
    };
    let mut inv = Invocation::new(&args.method)
        .with_args(arguments)
        .with_types(args.types.iter().map(|t| t.trim()));
    for (k, v) in attachments {
        inv.set_attachment(k, v);
    }
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..args.concurrency {
        let (cluster, inv, next) = (cluster.clone(), inv.clone(), next.clone());
        let count = args.count;
        workers.push(tokio::spawn(async move {
            let mut ok = 0usize;
            let mut last: Option<Outcome> = None;
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < count {
                let r = cluster.invoke(&inv).await;
                if r.is_ok() {
                    ok += 1;
                }
                last = Some(r.map_err(|e| e.to_string()));
            }
            (ok, last)
        }));
    }
    let mut ok = 0;
    let mut last = None;
    for w in workers {
        if let Ok((o, l)) = w.await {
            ok += o;
            if l.is_some() {
                last = l;
            }
        }
    }
    let per: BTreeMap<String, (u64, u64)> = counting
        .per_instance
        .lock()
        .map(|m| m.clone())
        .unwrap_or_default();
    // Per instance, attempts (a retried call counts on each instance it tried), not calls.
    let instances: Vec<Value> = per
        .iter()
        .map(|(addr, (s, f))| json!({"address": addr, "succeeded": s, "failed": f}))
        .collect();
    Ok(json!({
        "service": directory.load().service().to_string(),
        "method": args.method,
        "calls": args.count,
        "succeeded": ok,
        "success_rate": if args.count == 0 { 1.0 } else { ok as f64 / args.count as f64 },
        "instances": instances,
        "last_result": match last { Some(Ok(v)) => v, Some(Err(e)) => json!({"error": e}), None => Value::Null },
        "elapsed_ms": started.elapsed().as_millis() as u64,
    }))
}

pub(crate) fn run(args: CallArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchman call: {e}");
            return ExitCode::FAILURE;
        }
    };
    let as_json = args.json;
    match rt.block_on(run_calls(args)) {
        Ok(report) => {
            if as_json {
                println!("{report}");
            } else {
                println!(
                    "{} {}: {}/{} succeeded ({:.2}%) in {} ms",
                    report["service"].as_str().unwrap_or(""),
                    report["method"].as_str().unwrap_or(""),
                    report["succeeded"],
                    report["calls"],
                    report["success_rate"].as_f64().unwrap_or(0.0) * 100.0,
                    report["elapsed_ms"]
                );
                let instances = report["instances"].as_array();
                if instances.is_some_and(|l| !l.is_empty()) {
                    // Attempts, not calls: a call failover retried counts on each instance it tried.
                    println!(
                        "  attempts per instance (a retried call counts on each instance tried):"
                    );
                }
                for i in instances.into_iter().flatten() {
                    println!(
                        "  {:<24} {:>8} ok {:>6} failed",
                        i["address"].as_str().unwrap_or(""),
                        i["succeeded"],
                        i["failed"]
                    );
                }
                match &report["last_result"] {
                    Value::String(text) => println!("last result: {text}"),
                    other => println!("last result: {other}"),
                }
            }
            if report["succeeded"] == report["calls"] {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("switchman call: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CallArgs,
    }

    fn config(extra: &[&str]) -> ClusterConfig {
        let argv = ["call", "reg.yaml", "com.foo.Bar", "--method", "sayHello"];
        let cli = Cli::parse_from(argv.iter().chain(extra));
        cluster_config(&cli.args).unwrap()
    }

    fn provider(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Without `--timeout`/`--retries` the consumer sets nothing: the provider's `timeout`
    /// applies, then Dubbo's defaults; with them they are consumer service-level settings.
    #[test]
    fn timeout_and_retries_are_consumer_service_settings_only_when_given() {
        let p = provider(&[("timeout", "2000"), ("retries", "0")]);
        let e = config(&[]).resolve(Some("sayHello"), &p);
        assert_eq!((e.timeout.as_millis(), e.retries), (2000, 2));
        let e = config(&[]).resolve(Some("sayHello"), &BTreeMap::new());
        assert_eq!(e.timeout.as_millis(), 1000);
        let cfg = config(&["--timeout", "300", "--retries", "5"]);
        assert_eq!(
            (
                cfg.resolve(None, &p).timeout.as_millis(),
                cfg.resolve(None, &p).retries
            ),
            (300, 5),
            "the consumer beats the provider's service-level timeout"
        );
        let p = provider(&[("sayHello.timeout", "3000")]);
        assert_eq!(
            cfg.resolve(Some("sayHello"), &p).timeout.as_millis(),
            3000,
            "the provider's method-level timeout beats the consumer's service-level one"
        );
    }
}
