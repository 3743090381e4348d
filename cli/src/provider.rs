//! `switchman provider`: serves an in-process provider and registers it in a registry
//! (ZooKeeper or Nacos) until Ctrl-C or SIGTERM, then unregisters it. For tests, the demo and
//! docker-compose.
//!
//! `--protocol http` (default): the provider answers `POST /{service}/{method}` with
//! `{"from": NAME, "method": METHOD, "echo": ARGS}`; `--fail-percent` answers that share of
//! calls with 503 (a retryable failure for consumers) and `--delay-ms` delays every answer.
//!
//! `--protocol tri`: Triple for Java Dubbo 3 consumers of a plain interface (the wrapper
//! format, Hessian2 inside, typed or generic calls; `switchman_cluster::triple::serve_echo`),
//! registered as `tri://` with the parameters a Java consumer reads
//! (`switchman_cluster::triple::java_instance`). The same answer, as a Java map; failing
//! calls get `UNAVAILABLE`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use switchman::admin::Exported;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::triple::{EchoOptions, TripleServer, java_instance, serve_echo};
use switchman_core::{Instance, Protocol, ServiceKey};
use switchman_discovery::registrar_from_url;

/// Arguments of `switchman provider`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProviderArgs {
    /// Registry address: zookeeper://h:p[?backup=..] or nacos://h:p?namespace=..
    /// Repeat it to register in several registries.
    #[arg(long, required = true)]
    registry: Vec<String>,
    /// Service (Dubbo interface) to provide.
    #[arg(long)]
    service: String,
    /// Protocol served and registered: `http`, or `tri` (Triple for Java Dubbo 3 consumers of
    /// a plain interface).
    #[arg(long, default_value = "http")]
    protocol: String,
    /// With `--protocol tri`: method names to register (Dubbo's `methods`), comma-separated.
    /// Every method is answered whatever this says.
    #[arg(long, value_delimiter = ',')]
    methods: Vec<String>,
    /// Dubbo group.
    #[arg(long, default_value = "")]
    group: String,
    /// Dubbo version.
    #[arg(long, default_value = "")]
    version: String,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Host to register (default: the bind address; set it when binding 0.0.0.0).
    #[arg(long)]
    advertise: Option<String>,
    /// Weight registered (Dubbo's `weight`).
    #[arg(long, default_value_t = 100)]
    weight: u32,
    /// Warm-up registered, in ms (Dubbo's `warmup`; 0 turns warm-up off).
    #[arg(long, default_value_t = 0)]
    warmup_ms: u64,
    /// Name in the answers (default: the listen address).
    #[arg(long)]
    name: Option<String>,
    /// Application name registered.
    #[arg(long, default_value = "switchman-provider")]
    application: String,
    /// Share of calls answered with 503 (`tri`: `UNAVAILABLE`), in percent (0 to 100).
    #[arg(long, default_value_t = 0.0)]
    fail_percent: f64,
    /// Delay before every answer, in ms.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// With `--protocol http`, every request is recorded in
    /// `rpc_server_call_duration_seconds` (rpc_system, rpc_service, rpc_method, outcome,
    /// error_type = the HTTP status of a failure).
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    // POST /offline unregisters the provider from every registry (it keeps serving, so calls
    // in flight finish; Dubbo's QOS `offline`), POST /online registers it again.
    #[command(flatten)]
    admin: crate::admin::AdminArgs,
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn run_provider(args: ProviderArgs) -> Result<(), String> {
    if !(0.0..=100.0).contains(&args.fail_percent) {
        return Err(format!(
            "--fail-percent {} is not between 0 and 100",
            args.fail_percent
        ));
    }
    let admin = args.admin.start(&args.metrics, "provider").await?;
    let bind: SocketAddr = format!("{}:{}", args.bind, args.port)
        .parse()
        .or_else(|_| format!("[{}]:{}", args.bind, args.port).parse())
        .map_err(|_| format!("--bind {:?} is not an IP address", args.bind))?;
    let mut registrars = Vec::new();
    for r in &args.registry {
        registrars.push(registrar_from_url(r).map_err(|e| e.to_string())?);
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let key = ServiceKey::with(&args.service, &args.group, &args.version);
    let delay = Duration::from_millis(args.delay_ms);
    // The server lives until after unregistering; dropping it closes every connection.
    let (server, name, builder) = match args.protocol.trim().to_ascii_lowercase().as_str() {
        "http" => {
            let (server, name) = serve_http(bind, &args, delay).await?;
            let addr = server.addr();
            let host = args
                .advertise
                .clone()
                .unwrap_or_else(|| addr.ip().to_string());
            let builder = Instance::builder(host, addr.port())
                .protocol(Protocol::Http)
                .service(key);
            (Served::Http(server), name, builder)
        }
        "tri" => {
            let options = EchoOptions {
                name: args.name.clone(),
                fail_percent: args.fail_percent,
                delay,
            };
            let (server, name) = serve_echo(bind, options)
                .await
                .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
            let addr = server.addr();
            let host = args
                .advertise
                .clone()
                .unwrap_or_else(|| addr.ip().to_string());
            let methods: Vec<&str> = args
                .methods
                .iter()
                .map(|m| m.trim())
                .filter(|m| !m.is_empty())
                .collect();
            let builder = java_instance(&host, addr.port(), key, &methods);
            (Served::Tri(server), name, builder)
        }
        other => {
            return Err(format!("--protocol {other:?}: expected http or tri"));
        }
    };
    let instance = builder
        .weight(args.weight)
        .warmup(Duration::from_millis(args.warmup_ms))
        .timestamp_ms(now_ms)
        .application(&args.application)
        .param("name", &name)
        .build();
    // Registered through an `Exported`, which the admin endpoint's offline/online flip.
    let mut exported = Exported::new(instance.clone());
    for (url, registrar) in args.registry.iter().zip(registrars) {
        exported = exported.registry(url, registrar);
    }
    // A registrar that failed keeps retrying in the background; serve meanwhile.
    for e in exported.online().await {
        eprintln!("switchman provider: {e}");
    }
    let listing = admin.as_ref().map(|a| a.provider(&exported));
    println!(
        "{}",
        json!({"event": "serving", "name": name, "address": instance.address(), "protocol": instance.protocol().as_str(), "service": instance.service().to_string(), "weight": args.weight, "admin": admin.as_ref().map(|a| a.addr().to_string())})
    );
    shutdown_signal().await;
    // Unregisters where it is registered (not again after an admin `offline`), each bounded.
    for e in exported.offline().await {
        eprintln!("switchman provider: {e}");
    }
    drop(listing);
    drop(exported);
    drop(server);
    println!("{}", json!({"event": "stopped", "name": name}));
    Ok(())
}

/// The provider-side duration histogram (OpenTelemetry's `rpc.server.call.duration`).
const SERVER_DURATION: &str = "rpc_server_call_duration_seconds";

/// The labels of one request of the HTTP provider (a test tool: built per request).
fn server_labels(service: &str, method: &str, status: Option<&'static str>) -> Vec<metrics::Label> {
    let mut l = vec![
        metrics::Label::new("rpc_system", "http"),
        metrics::Label::new("rpc_service", service.to_string()),
        metrics::Label::new("rpc_method", method.to_string()),
        metrics::Label::new(
            "outcome",
            if status.is_some() {
                "failure"
            } else {
                "success"
            },
        ),
    ];
    if let Some(s) = status {
        l.push(metrics::Label::new("error_type", s));
    }
    l
}

/// The running server, whichever the protocol.
#[allow(dead_code)] // held for its Drop
enum Served {
    Http(HttpProvider),
    Tri(TripleServer),
}

/// The HTTP provider: `{"from", "method", "echo"}` answers, `--fail-percent` 503s.
async fn serve_http(
    bind: SocketAddr,
    args: &ProviderArgs,
    delay: Duration,
) -> Result<(HttpProvider, String), String> {
    let fail = args.fail_percent / 100.0;
    let name_slot = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let handler_name = name_slot.clone();
    let server = HttpProvider::serve(bind, move |req| {
        let name = handler_name.get().cloned().unwrap_or_default();
        let failing = fail > 0.0 && fastrand::f64() < fail;
        Box::pin(async move {
            let started = std::time::Instant::now();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let (labels, reply) = if failing {
                (
                    server_labels(&req.service, &req.method, Some("503")),
                    ProviderReply::Status(503, format!("{name} is failing on purpose")),
                )
            } else {
                (
                    server_labels(&req.service, &req.method, None),
                    ProviderReply::Ok(
                        json!({"from": name, "method": req.method, "echo": req.arguments}),
                    ),
                )
            };
            metrics::histogram!(SERVER_DURATION, labels).record(started.elapsed().as_secs_f64());
            reply
        })
    })
    .await
    .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| server.addr().to_string());
    let _ = name_slot.set(name.clone());
    Ok((server, name))
}

pub(crate) fn run(args: ProviderArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchman provider: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run_provider(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchman provider: {e}");
            ExitCode::from(2)
        }
    }
}
