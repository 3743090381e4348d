//! `switchman route ...`: dry-run a routing rule against a provider list.
//!
//! Operators use it to test a rule before publishing it: it prints the provider URLs the rule
//! keeps for one call, one per line, in input order (nothing when the result is empty or the
//! call is forbidden). `--explain` adds, on stderr, which rule matched the call and why each
//! provider was kept or dropped. A rule that does not parse exits with status 2 and the error
//! (rule key, line, column, problem) on stderr.
//!
//! The providers come from a file (`--providers`) or from a registry (`--registry`): the list
//! it holds now for the consumer URL's interface, group and version.
use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchman_core::{Instance, Invocation, ServiceKey, Url};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, registry_from_url};
use switchman_router::{ConsumerInfo, Route, RouterChain, source};

/// Arguments of `switchman route`.
#[derive(Debug, clap::Args)]
pub(crate) struct RouteArgs {
    /// The rule file (`-` for stdin): v2 condition text (`when => then`, one per line), v3.0 or
    /// v3.1 condition YAML, or a tag rule (YAML with `tags:`); several YAML documents may be
    /// separated by `---`.
    #[arg(long, value_name = "FILE")]
    rule: String,
    /// The consumer URL (`consumer://10.0.0.9/com.foo.Bar?application=shop&dubbo.tag=gray`).
    #[arg(long, value_name = "URL")]
    consumer: String,
    /// File with one provider URL per line (blank lines and `#` comments skipped).
    #[arg(long, value_name = "FILE", required_unless_present = "registry")]
    providers: Option<PathBuf>,
    /// Read the providers from a registry instead (zookeeper://h:p, nacos://h:p, a static YAML
    /// file): those it lists now for the consumer URL's interface and its `group` and `version`
    /// parameters.
    #[arg(long, value_name = "URL", conflicts_with = "providers")]
    registry: Option<String>,
    /// With --registry: seconds to wait for the registry's answer.
    #[arg(long, value_name = "S", default_value_t = 5, requires = "registry")]
    timeout: u64,
    /// The invoked method.
    #[arg(long, value_name = "M", default_value = "")]
    method: String,
    /// An argument of the call, in order; read as JSON when it parses (`42`, `true`, `null`,
    /// `"x"`), else as a string.
    #[arg(long = "arg", value_name = "VALUE")]
    args: Vec<String>,
    /// An attachment of the call (`dubbo.tag=gray`, `dubbo.force.tag=true`, ...).
    #[arg(long = "attachment", value_name = "K=V")]
    attachments: Vec<String>,
    /// Treat the rule as `force: true` (an empty result forbids the call instead of being
    /// ignored); v2 text has no field for it.
    #[arg(long)]
    force: bool,
    /// Explain on stderr which rule matched and why each provider was kept or dropped.
    #[arg(long)]
    explain: bool,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("switchman route: {msg}");
    ExitCode::from(2)
}

fn read_providers(path: &PathBuf) -> Result<(Vec<String>, Vec<Arc<Instance>>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut lines = Vec::new();
    let mut instances = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let url = if !l.contains("://") && l.contains("%3A%2F%2F") {
            Url::from_encoded(l)
        } else {
            Url::parse(l)
        }
        .map_err(|e| format!("{}:{}: {e}", path.display(), no + 1))?;
        let inst =
            Instance::from_url(&url).map_err(|e| format!("{}:{}: {e}", path.display(), no + 1))?;
        lines.push(l.to_string());
        instances.push(Arc::new(inst));
    }
    Ok((lines, instances))
}

/// The providers `registry` lists now for `consumer`'s interface, group and version, as
/// provider URLs (after the registry's overrides) and instances.
fn registry_providers(
    registry: &str,
    consumer: &Url,
    timeout: Duration,
) -> Result<(Vec<String>, Vec<Arc<Instance>>), String> {
    let interface = consumer.path().trim_start_matches('/');
    if interface.is_empty() {
        return Err(format!(
            "--consumer {consumer}: name the interface in its path to read its providers from --registry"
        ));
    }
    let key = ServiceKey::with(
        interface,
        consumer.param("group").unwrap_or_default(),
        consumer.param("version").unwrap_or_default(),
    );
    let shown = switchman_core::url::redacted_text(registry);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let registry = registry_from_url(registry).map_err(|e| e.to_string())?;
        let dir = tokio::time::timeout(
            timeout,
            RegistryDirectory::subscribe(registry.as_ref(), DirectoryConfig::new(key.clone())),
        )
        .await
        .map_err(|_| format!("{shown} did not answer within {timeout:?}"))?
        .map_err(|e| e.to_string())?;
        let snap = dir
            .wait_until(timeout, |s| s.epoch() > 0)
            .await
            .map_err(|_| format!("{shown} did not answer within {timeout:?}"))?;
        if snap.instances().is_empty() {
            return Err(format!("{shown} lists no provider of {key}"));
        }
        let instances = snap.instances().to_vec();
        let lines = instances.iter().map(|i| i.to_url().to_string()).collect();
        Ok((lines, instances))
    })
}

fn invocation(args: &RouteArgs) -> Result<Invocation, String> {
    let values = args
        .args
        .iter()
        .map(|a| serde_json::from_str::<Value>(a).unwrap_or_else(|_| Value::String(a.clone())))
        .collect();
    let mut inv = Invocation::new(args.method.clone()).with_args(values);
    for a in &args.attachments {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("--attachment {a:?}: expected K=V"))?;
        inv.set_attachment(k, v);
    }
    Ok(inv)
}

pub(crate) fn run(args: RouteArgs) -> ExitCode {
    let (text, default_key) = if args.rule == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin()
            .take(source::MAX_FILE_BYTES as u64 + 1)
            .read_to_string(&mut s)
        {
            return fail(format!("cannot read the rule from stdin: {e}"));
        }
        (s, "stdin".to_string())
    } else {
        let path = PathBuf::from(&args.rule);
        match std::fs::read_to_string(&path) {
            Ok(s) => (
                s,
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| args.rule.clone()),
            ),
            Err(e) => return fail(format!("cannot read {}: {e}", path.display())),
        }
    };
    if text.len() > source::MAX_FILE_BYTES {
        return fail(format!(
            "rule text is larger than {} bytes",
            source::MAX_FILE_BYTES
        ));
    }
    let mut chain: RouterChain = match source::chain_from_text(&text, &default_key) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // v2 text rules that Dubbo (and Switchman) accept only leniently: a warning, exit 0.
    if !text.contains("conditions:") && !text.contains("tags:") {
        for (no, line) in text.lines().enumerate() {
            for w in switchman_router::lint_v2(line) {
                eprintln!("switchman route: warning: line {}: {w}", no + 1);
            }
        }
    }
    if args.force {
        let keys: Vec<String> = chain.keys().map(str::to_string).collect();
        for k in keys {
            chain = chain.with_force(&k);
        }
    }
    let consumer_url = match Url::parse(&args.consumer) {
        Ok(u) => u,
        Err(e) => return fail(format!("--consumer: {e}")),
    };
    let providers = match (&args.registry, &args.providers) {
        (Some(registry), _) => {
            registry_providers(registry, &consumer_url, Duration::from_secs(args.timeout))
        }
        (None, Some(file)) => read_providers(file),
        (None, None) => Err("give --providers FILE or --registry URL".to_string()),
    };
    let consumer = ConsumerInfo::from_url(consumer_url);
    let (lines, instances) = match providers {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let inv = match invocation(&args) {
        Ok(i) => i,
        Err(e) => return fail(e),
    };

    // The same seed for the cached route and the explanation, so a weighted v3.1 choice is
    // the same in both.
    let mut rng = fastrand::Rng::new();
    let mut explain_rng = rng.clone();
    let table = chain.build(&instances, &consumer);
    let kept: Vec<usize> = match table.route(&inv, &mut rng) {
        Route::Subset(i) => table.subsets()[i].iter().map(|&x| x as usize).collect(),
        Route::Computed(s) => s.iter().map(|&x| x as usize).collect(),
        // Forbidden, or an outcome this version does not know: nothing is kept.
        _ => Vec::new(),
    };
    if args.explain {
        let e = chain.explain(&instances, &consumer, &inv, &mut explain_rng);
        eprintln!("rules (in chain order):");
        for r in &e.rules {
            eprintln!("  {r}");
        }
        eprintln!(
            "call: method={:?} arguments={} attachments={:?}",
            inv.method,
            Value::Array(inv.arguments.clone()),
            inv.attachments
        );
        for s in &e.steps {
            eprintln!("  {s}");
        }
        eprintln!("providers:");
        for p in &e.providers {
            eprintln!(
                "  {} {}: {}",
                if p.kept { "kept   " } else { "dropped" },
                lines[p.index],
                p.why
            );
        }
        match &e.forbidden {
            Some(why) => eprintln!("result: call forbidden: {why}"),
            None => eprintln!("result: {} provider(s)", kept.len()),
        }
    }
    let mut out = String::new();
    for i in kept {
        out.push_str(&lines[i]);
        out.push('\n');
    }
    print!("{out}");
    ExitCode::SUCCESS
}
