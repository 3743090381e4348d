//! `switchman watch REGISTRY SERVICE`: one JSON line (or, with `--format text`, one block of
//! lines) per published snapshot. Each instance says where it was discovered: `"discovery":
//! "interface"` (a provider URL: ZooKeeper's `/dubbo/{interface}/providers`, Nacos's
//! `providers:...` service, a static file) or `"application"` (Dubbo 3 application-level
//! discovery), with the `"revision"` of its application's `MetadataInfo` (`null` for
//! interface-level instances), and the `"methods"` its service lists (the `methods` parameter
//! of its provider URL or of its service in the `MetadataInfo`; `null` when it has none), so a
//! provider upgraded in place with a new method shows it once the new revision is read.
//!
//! `"weight"` is the registered weight and `"effective_weight"` the one the balancer uses now
//! (lower while the instance warms up; `null` when it is not routable), so the warm-up ramp is
//! visible. A snapshot that shows nothing new (the directory republishes during warm-up) is
//! not printed. A first answer with no instance says on stderr that nothing matches and what
//! the registry has under other groups and versions; with `--once` it exits 2, as `call` does.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use serde_json::json;
use switchman_core::{Instance, ServiceKey};
use switchman_discovery::metadata::REVISION_KEY;
use switchman_discovery::{
    DirectoryConfig, EmptyPolicy, Registry, RegistryDirectory, Snapshot, registry_from_url,
};
use switchman_loadbalance::effective_weight;

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
    /// Print the first snapshot and exit (exit 2 when it lists no instance).
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

/// The weight the balancer gives a routable instance at `now`: the registered weight, ramped
/// up while it warms up; `None` when the instance is not routable.
fn weight_now(s: &Snapshot, i: &Instance, now: SystemTime) -> Option<u32> {
    let e = s.endpoints().get(s.index_of(i.key())?)?;
    Some(effective_weight(e, now))
}

pub(crate) fn snapshot_json(s: &Snapshot) -> serde_json::Value {
    let now = SystemTime::now();
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
                "effective_weight": weight_now(s, i, now),
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
/// weight (`weight=25/100 warming up` while it warms up), `discovery=interface|application`,
/// `revision=...`, `methods=a,b,...` and its state.
pub(crate) fn snapshot_text(s: &Snapshot) -> String {
    let now = SystemTime::now();
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
        let weight = match weight_now(s, i, now) {
            Some(w) if w != i.weight() => format!("{w}/{} warming up", i.weight()),
            _ => i.weight().to_string(),
        };
        out.push_str(&format!(
            "\n  {} {} weight={weight} discovery={discovery}",
            i.address(),
            i.protocol().as_str(),
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

/// What a snapshot shows, without its epoch: two snapshots that show the same are printed once.
fn shown(s: &Snapshot) -> serde_json::Value {
    let mut v = snapshot_json(s);
    if let Some(o) = v.as_object_mut() {
        o.remove("epoch");
    }
    v
}

/// The (group, version) pairs the registry lists for `interface` in any group and version,
/// read for up to a second ([`switchman::registered_keys`]).
pub(crate) async fn other_keys(
    registry: &dyn Registry,
    interface: &str,
) -> BTreeSet<(String, String)> {
    switchman::registered_keys(registry, interface, Duration::from_secs(1)).await
}

/// `nothing in REGISTRY matches KEY; the registry has version 2.0.0 in group g1 (--group,
/// --version)`, or that it lists the interface in no group or version at all.
pub(crate) fn nothing_matches(
    registry: &str,
    key: &ServiceKey,
    others: &BTreeSet<(String, String)>,
) -> String {
    let head = format!("nothing in {registry} matches {key}");
    if others.is_empty() {
        return format!(
            "{head}; the registry lists no provider of {} in any group or version (is the service name right?)",
            key.interface
        );
    }
    format!(
        "{head}; the registry has {} (choose with --group and --version)",
        switchman::registered_as(others)
    )
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
        // `false` once stdout is gone (`watch ... | head`): the watch ends there, no panic.
        let print = |s: &Snapshot| {
            let text = if args.format == "text" {
                snapshot_text(s)
            } else {
                snapshot_json(s).to_string()
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}").and_then(|()| out.flush()).is_ok()
        };
        let (mut last, mut last_shown) = match first {
            Ok(s) => {
                if !print(&s) {
                    return ExitCode::SUCCESS;
                }
                if s.instances().is_empty() {
                    let others = other_keys(registry.as_ref(), &args.service).await;
                    let registry = switchman_core::url::redacted_text(&args.registry);
                    let key = ServiceKey::with(&args.service, &args.group, &args.version);
                    eprintln!(
                        "switchman watch: {}",
                        nothing_matches(&registry, &key, &others)
                    );
                    if args.once {
                        return ExitCode::from(2);
                    }
                }
                (s.epoch(), shown(&s))
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
                        // Warm-up republishes snapshots: print those that show a change.
                        let now_shown = shown(&s);
                        if now_shown != last_shown {
                            if !print(&s) {
                                return ExitCode::SUCCESS;
                            }
                            last_shown = now_shown;
                        }
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
