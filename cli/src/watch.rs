//! `switchman watch REGISTRY SERVICE`: one JSON line per published snapshot.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use switchman_core::ServiceKey;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, RegistryDirectory, Snapshot, registry_from_url,
};

/// Arguments of `switchman watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// Registry address: zookeeper://h:p, nacos://h:p?namespace=.., or a static YAML file.
    registry: String,
    /// Service (Dubbo interface, or a plain Nacos service name).
    service: String,
    /// Dubbo group.
    #[arg(long, default_value = "")]
    group: String,
    /// Dubbo version.
    #[arg(long, default_value = "")]
    version: String,
    /// Print the first snapshot and exit.
    #[arg(long)]
    once: bool,
    /// Give up (exit 2) after this many seconds without the registry's first answer.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
    /// Show the registry's empty list as it is (`publish`) or keep the last one (`keep`).
    #[arg(long, default_value = "publish", value_parser = ["publish", "keep"])]
    empty: String,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

pub(crate) fn snapshot_json(s: &Snapshot) -> serde_json::Value {
    let instances: Vec<_> = s
        .instances()
        .iter()
        .map(|i| {
            json!({
                "address": i.address(),
                "group": i.service().group.as_ref(),
                "version": i.service().version.as_ref(),
                "weight": i.weight(),
                "protocol": i.protocol().as_str(),
                "zone": i.zone(),
                "enabled": i.enabled(),
                "healthy": i.healthy(),
                "routable": s.index_of(i.key()).is_some(),
            })
        })
        .collect();
    json!({"epoch": s.epoch(), "service": s.service().to_string(), "instances": instances})
}

pub(crate) fn run(args: WatchArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchman watch: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        if let Err(e) = args.metrics.start() {
            eprintln!("switchman watch: {e}");
            return ExitCode::from(2);
        }
        let registry = match registry_from_url(&args.registry) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("switchman watch: {e}");
                return ExitCode::from(2);
            }
        };
        let key = ServiceKey::with(&args.service, &args.group, &args.version);
        let policy = if args.empty == "keep" {
            EmptyPolicy::KeepLast
        } else {
            EmptyPolicy::Publish
        };
        let dir = match RegistryDirectory::subscribe(
            registry.as_ref(),
            DirectoryConfig::new(key).empty_policy(policy),
        )
        .await
        {
            Ok(d) => d,
            Err(e) => {
                eprintln!("switchman watch: {e}");
                return ExitCode::from(2);
            }
        };
        let mut epochs = dir.epochs();
        let first = dir
            .wait_until(Duration::from_secs(args.timeout), |s| s.epoch() > 0)
            .await;
        let mut last = match first {
            Ok(s) => {
                println!("{}", snapshot_json(&s));
                s.epoch()
            }
            Err(_) => {
                // The same words and exit code as `switchman call` for a registry that is down.
                eprintln!(
                    "switchman watch: no provider: {} did not answer within {}s (subscribing to {})",
                    args.registry, args.timeout, args.service
                );
                return ExitCode::from(2);
            }
        };
        if args.once {
            return ExitCode::SUCCESS;
        }
        loop {
            tokio::select! {
                changed = epochs.changed() => {
                    if changed.is_err() {
                        return ExitCode::FAILURE;
                    }
                    let s = dir.load();
                    if s.epoch() > last {
                        last = s.epoch();
                        println!("{}", snapshot_json(&s));
                    }
                }
                _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
            }
        }
    })
}
