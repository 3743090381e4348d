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
//!
//! `--register-mode instance` (or `all`, or the registry URL's `register-mode`) registers the
//! Dubbo 3 application instance of `--application` too (instead), with the interface →
//! application mapping, and serves Dubbo's `MetadataService` over Triple: on the provider's
//! own port with `--protocol tri`, on an extra Triple port (`--metadata-port`, default any)
//! with `--protocol http`. `--metadata-type remote` also writes the metadata report.
//!
//! `--tls-cert`/`--tls-key` (with `--protocol tri`): TLS on the provider's port (ALPN `h2`),
//! its MetadataService too, registered with `ssl-enabled=true` as Dubbo 3 registers a protocol
//! with `ssl-enabled` (and said in the instance's `dubbo.metadata-service.url-params`);
//! `--tls-client-ca` requires the consumers' certificates to be signed by that CA (mTLS).

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
    /// Registry address: zookeeper://h:p or nacos://h:p?namespace=..; a cluster:
    /// zookeeper://h1:p1,h2:p2,h3:p3[/chroot], nacos://h1:p1,h2:p2?namespace=.., or
    /// ?backup=h2:p2,h3:p3 on either (nacos also ?endpoint=host:port, an address server).
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
    /// Dubbo's register mode, for every --registry that does not set `register-mode` itself:
    /// `interface` (the default: `/dubbo/{interface}/providers`, `providers:{interface}:..`),
    /// `instance` (the Dubbo 3 application instance, mapping and MetadataService, what Java
    /// consumers in FORCE_APPLICATION read) or `all` (both; Dubbo 3.3's default).
    #[arg(long)]
    register_mode: Option<String>,
    /// Where application-level metadata is kept besides the MetadataService, for every
    /// --registry that does not set `metadata-type`: `local` (Dubbo's default) or `remote`
    /// (also the metadata report).
    #[arg(long)]
    metadata_type: Option<String>,
    /// With `--protocol http` and application-level registration: the port of the extra
    /// Triple server answering Dubbo's MetadataService (0: any free port).
    #[arg(long, default_value_t = 0)]
    metadata_port: u16,
    /// With `--protocol tri`: serve TLS with this certificate chain (PEM), registered with
    /// `ssl-enabled=true` (Dubbo's `server-key-cert-chain-path`).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// With --tls-cert: its unencrypted private key (PEM; Dubbo's `server-private-key-path`).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// With --tls-cert: require a client certificate signed by this CA (PEM; mTLS, Dubbo's
    /// `server-trust-cert-collection-path`).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_client_ca: Option<std::path::PathBuf>,
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
    if let Some(m) = &args.register_mode {
        switchman_discovery::metadata::RegisterMode::parse(m)
            .map_err(|e| format!("--register-mode: {e}"))?;
    }
    if let Some(t) = &args.metadata_type
        && !matches!(t.trim().to_ascii_lowercase().as_str(), "local" | "remote")
    {
        return Err(format!("--metadata-type {t:?} is not local or remote"));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            if served_protocol(&args) != "tri" {
                return Err(format!(
                    "--tls-cert: TLS is served with --protocol tri only, not {}",
                    args.protocol
                ));
            }
            Some(
                TripleServer::tls_config(cert, key, args.tls_client_ca.as_deref()).map_err(
                    |e| format!("--tls-cert/--tls-key/--tls-client-ca: {}", e.message()),
                )?,
            )
        }
        _ => None,
    };
    let registry_urls: Vec<String> = args
        .registry
        .iter()
        .map(|r| {
            let r = with_default_param(r, "register-mode", args.register_mode.as_deref());
            with_default_param(&r, "metadata-type", args.metadata_type.as_deref())
        })
        .collect();
    let mut registrars = Vec::new();
    let mut app_level = false;
    for r in &registry_urls {
        app_level |= registry_mode(r).instance();
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
                tls: tls.clone(),
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
            let mut builder = java_instance(&host, addr.port(), key, &methods);
            if tls.is_some() {
                // As Dubbo 3 registers a protocol with ssl-enabled.
                builder = builder.param(switchman_cluster::triple::SSL_ENABLED, "true");
            }
            (Served::Tri(server), name, builder)
        }
        other => {
            return Err(format!("--protocol {other:?}: expected http or tri"));
        }
    };
    // An HTTP provider has no Triple port of its own for the MetadataService: an extra one.
    let metadata_server = match (&served_protocol(&args), app_level) {
        (p, true) if p == "http" => {
            let at = SocketAddr::new(bind.ip(), args.metadata_port);
            Some(
                TripleServer::serve_metadata_service(at)
                    .await
                    .map_err(|e| format!("cannot listen on {at} for the MetadataService: {e}"))?,
            )
        }
        _ => None,
    };
    let builder = match &metadata_server {
        Some(m) => builder.param(
            switchman_discovery::metadata::METADATA_SERVICE_PORT_PARAM,
            &m.addr().port().to_string(),
        ),
        None => builder,
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
    for (url, registrar) in registry_urls.iter().zip(registrars) {
        exported = exported.registry(url, registrar);
    }
    // A registrar that failed keeps retrying in the background; serve meanwhile.
    for e in exported.online().await {
        eprintln!("switchman provider: {e}");
    }
    let listing = admin.as_ref().map(|a| a.provider(&exported));
    println!(
        "{}",
        json!({"event": "serving", "name": name, "address": instance.address(), "protocol": instance.protocol().as_str(), "service": instance.service().to_string(), "weight": args.weight, "admin": admin.as_ref().map(|a| a.addr().to_string()), "application": args.application, "app_level": app_level, "metadata_port": metadata_server.as_ref().map(|m| m.addr().port()), "tls": tls.is_some(), "mtls": tls.is_some() && args.tls_client_ca.is_some()})
    );
    shutdown_signal().await;
    // Unregisters where it is registered (not again after an admin `offline`), each bounded.
    for e in exported.offline().await {
        eprintln!("switchman provider: {e}");
    }
    drop(listing);
    drop(exported);
    drop(server);
    drop(metadata_server);
    println!("{}", json!({"event": "stopped", "name": name}));
    Ok(())
}

/// `url` with `key=value` added when it has no `key` of its own (`value` given).
fn with_default_param(url: &str, key: &str, value: Option<&str>) -> String {
    let Some(value) = value else {
        return url.to_string();
    };
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    if query.split('&').any(|kv| kv.split('=').next() == Some(key)) {
        return url.to_string();
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{key}={}", value.trim())
}

/// The `register-mode` of a registry address (default when absent or unreadable: the
/// registrar reports a bad one).
fn registry_mode(url: &str) -> switchman_discovery::metadata::RegisterMode {
    url.split_once('?')
        .map(|(_, q)| q)
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("register-mode="))
        .and_then(|m| switchman_discovery::metadata::RegisterMode::parse(m).ok())
        .unwrap_or_default()
}

fn served_protocol(args: &ProviderArgs) -> String {
    args.protocol.trim().to_ascii_lowercase()
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

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_discovery::metadata::RegisterMode;

    #[test]
    fn the_flags_fill_registry_urls_that_do_not_say() {
        let z = "zookeeper://127.0.0.1:2181";
        assert_eq!(
            with_default_param(z, "register-mode", Some("instance")),
            "zookeeper://127.0.0.1:2181?register-mode=instance"
        );
        let n = "nacos://h:8848?namespace=x&register-mode=all";
        assert_eq!(with_default_param(n, "register-mode", Some("instance")), n);
        assert_eq!(
            with_default_param(
                "nacos://h:8848?namespace=x",
                "metadata-type",
                Some("remote")
            ),
            "nacos://h:8848?namespace=x&metadata-type=remote"
        );
        assert_eq!(with_default_param(z, "register-mode", None), z);
        assert_eq!(registry_mode(n), RegisterMode::All);
        assert_eq!(registry_mode(z), RegisterMode::Interface);
    }
}
