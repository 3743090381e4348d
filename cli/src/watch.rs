//! `switchman watch REGISTRY SERVICE`: one JSON line (or, with `--format text`, one block of
//! lines) per published snapshot. Each instance says where it was discovered: `"discovery":
//! "interface"` (a provider URL: ZooKeeper's `/dubbo/{interface}/providers`, Nacos's
//! `providers:...` service, a static file) or `"application"` (Dubbo 3 application-level
//! discovery), with the `"revision"` of its application's `MetadataInfo` (`null` for
//! interface-level instances), and the `"methods"` its service lists (the `methods` parameter
//! of its provider URL or of its service in the `MetadataInfo`; `null` when it has none), so a
//! provider upgraded in place with a new method shows it once the new revision is read.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use switchman_core::{Instance, ServiceKey};
use switchman_discovery::metadata::REVISION_KEY;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, RegistryDirectory, Snapshot, registry_from_url,
};

/// Arguments of `switchman watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// Registry address: zookeeper://h:p, nacos://h:p?namespace=.., or a static YAML file.
    /// A cluster: zookeeper://h1:p1,h2:p2,h3:p3[/chroot] or nacos://h1:p1,h2:p2?namespace=..
    /// (or ?backup=h2:p2,h3:p3 on either; nacos also ?endpoint=host:port, an address server).
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
    /// `json`: one JSON line per snapshot; `text`: a header line and one line per instance.
    #[arg(long, default_value = "json", value_parser = ["json", "text"])]
    format: String,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    #[command(flatten)]
    admin: crate::admin::AdminArgs,
}

/// Where an instance was discovered, and the revision of its application's metadata:
/// application-level endpoints keep `dubbo.metadata.revision` (Dubbo's instance metadata).
fn discovery(i: &Instance) -> (&'static str, Option<&str>) {
    match i.param(REVISION_KEY).filter(|r| !r.is_empty()) {
        Some(rev) => ("application", Some(rev)),
        None => ("interface", None),
    }
}

/// The method names the instance's service lists (Dubbo's `methods` parameter, comma-separated),
/// `None` when it has none.
fn methods(i: &Instance) -> Option<Vec<&str>> {
    let m: Vec<&str> = i
        .param("methods")?
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    (!m.is_empty()).then_some(m)
}

pub(crate) fn snapshot_json(s: &Snapshot) -> serde_json::Value {
    let instances: Vec<_> = s
        .instances()
        .iter()
        .map(|i| {
            let (discovery, revision) = discovery(i);
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
                "discovery": discovery,
                "revision": revision,
                "methods": methods(i),
            })
        })
        .collect();
    json!({"epoch": s.epoch(), "service": s.service().to_string(), "instances": instances})
}

/// The human form: `epoch N SERVICE: K instances`, then per instance its address, protocol,
/// weight, `discovery=interface|application`, `revision=...`, `methods=a,b,...` and its state.
pub(crate) fn snapshot_text(s: &Snapshot) -> String {
    let mut out = format!(
        "epoch {} {}: {} instance{}",
        s.epoch(),
        s.service(),
        s.instances().len(),
        if s.instances().len() == 1 { "" } else { "s" }
    );
    for i in s.instances().iter() {
        let (discovery, revision) = discovery(i);
        let state = if s.index_of(i.key()).is_some() {
            "routable"
        } else if !i.enabled() {
            "disabled"
        } else if !i.healthy() {
            "unhealthy"
        } else {
            "not routable"
        };
        out.push_str(&format!(
            "\n  {} {} weight={} discovery={discovery}",
            i.address(),
            i.protocol().as_str(),
            i.weight()
        ));
        if let Some(rev) = revision {
            out.push_str(&format!(" revision={rev}"));
        }
        let svc = i.service();
        if !svc.group.is_empty() || !svc.version.is_empty() {
            out.push_str(&format!(" group={} version={}", svc.group, svc.version));
        }
        if let Some(zone) = i.zone() {
            out.push_str(&format!(" zone={zone}"));
        }
        if let Some(m) = methods(i) {
            out.push_str(&format!(" methods={}", m.join(",")));
        }
        out.push_str(&format!(" {state}"));
    }
    out
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
        let admin = match args.admin.start(&args.metrics, "watch").await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("switchman watch: {e}");
                return ExitCode::from(2);
            }
        };
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
            Ok(d) => std::sync::Arc::new(d),
            Err(e) => {
                eprintln!("switchman watch: {e}");
                return ExitCode::from(2);
            }
        };
        let _listing = admin.as_ref().map(|a| a.directory(&args.registry, &dir));
        let mut epochs = dir.epochs();
        let first = dir
            .wait_until(Duration::from_secs(args.timeout), |s| s.epoch() > 0)
            .await;
        let print = |s: &Snapshot| {
            if args.format == "text" {
                println!("{}", snapshot_text(s));
            } else {
                println!("{}", snapshot_json(s));
            }
        };
        let mut last = match first {
            Ok(s) => {
                print(&s);
                s.epoch()
            }
            Err(_) => {
                // The same words and exit code as `switchman call` for a registry that is down.
                eprintln!(
                    "switchman watch: no provider: {} did not answer within {}s (subscribing to {})",
                    switchman_core::url::redacted_text(&args.registry),
                    args.timeout,
                    args.service
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
                        print(&s);
                    }
                }
                _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::Url;

    fn instance(url: &str) -> Instance {
        Instance::from_url(&Url::parse(url).unwrap()).unwrap()
    }

    #[test]
    fn methods_are_the_listed_names_or_none() {
        let i = instance("dubbo://127.0.0.1:20880/io.x.Demo?methods=sayHello,greet,,add,");
        assert_eq!(methods(&i), Some(vec!["sayHello", "greet", "add"]));
        assert_eq!(
            methods(&instance("dubbo://127.0.0.1:20880/io.x.Demo")),
            None
        );
        assert_eq!(
            methods(&instance("dubbo://127.0.0.1:20880/io.x.Demo?methods=")),
            None
        );
    }
}
