//! `switchman lb simulate`: print the instance a balancer picks for each call, then the shares.
//!
//! ```text
//! switchman lb simulate --lb roundrobin --instances 'a=5,b=1,c=1' --calls 7
//! switchman lb simulate --lb consistenthash --instances-file providers.txt --key alice --key bob
//! ```
//!
//! Instances come either inline (`name[=weight]`, comma-separated, weight 100 when omitted) or
//! from a file of Dubbo provider URLs, one per line (blank lines and `#` comments skipped),
//! named `host:port`. Inline instances are fully warmed up; URL instances that carry a
//! `timestamp` warm up from it as in a real consumer. No call is made, so the balancers that
//! read live load (`leastactive`, `shortestresponse`, `p2c`) see idle instances and pick by
//! weight. `roundrobin` and `consistenthash` are deterministic; `--seed` makes the others
//! repeatable.
use std::collections::HashSet;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

use switchman_core::{Instance, Invocation, Url};
use switchman_loadbalance::{
    BalancerKind, ConsistentHashBalance, Endpoint, LoadBalance, PickContext,
};

/// Load-balancer subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LbCommand {
    /// Print the instance picked for each call, then the shares.
    Simulate(SimulateArgs),
}

/// Arguments of `switchman lb simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
    /// Balancer: random, roundrobin, leastactive, shortestresponse, consistenthash, p2c
    /// (alias adaptive).
    #[arg(long = "lb", value_name = "NAME")]
    lb: String,
    /// Instances as `name=weight,...` (weight 100 when omitted), e.g. `a=5,b=1,c=1`.
    #[arg(
        long,
        value_name = "SPEC",
        conflicts_with = "instances_file",
        required_unless_present = "instances_file"
    )]
    instances: Option<String>,
    /// File with one Dubbo provider URL per line; instances are named `host:port`.
    #[arg(long, value_name = "FILE")]
    instances_file: Option<PathBuf>,
    /// Number of calls (default: the number of --key values, else 20).
    #[arg(long, value_name = "N")]
    calls: Option<u64>,
    /// A call's first argument (the consistent-hash key); repeat for several, used in turn.
    #[arg(long = "key", value_name = "K")]
    keys: Vec<String>,
    /// Seed for the random balancers (default: random).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Method name of the calls (round-robin state is per method).
    #[arg(long, value_name = "NAME", default_value = "call")]
    method: String,
    /// Consistent hash: virtual nodes per instance (Dubbo's hash.nodes).
    #[arg(long, value_name = "N")]
    hash_nodes: Option<String>,
    /// Consistent hash: argument indexes forming the key (Dubbo's hash.arguments).
    #[arg(long, value_name = "LIST")]
    hash_arguments: Option<String>,
}

pub(crate) fn run(cmd: LbCommand) -> ExitCode {
    match cmd {
        LbCommand::Simulate(args) => match simulate(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Input(msg)) => {
                eprintln!("switchman lb simulate: {msg}");
                ExitCode::from(2)
            }
            Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(Failure::Output(e)) => {
                eprintln!("switchman lb simulate: cannot write output: {e}");
                ExitCode::from(1)
            }
        },
    }
}

enum Failure {
    Input(String),
    Output(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

/// A simulated instance: display name and endpoint.
struct Named {
    name: String,
    endpoint: Endpoint,
}

fn parse_spec(spec: &str) -> Result<Vec<Named>, Failure> {
    let mut out = Vec::new();
    for item in spec.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(Failure::Input(format!(
                "--instances {spec:?}: empty entry (expected name=weight,...)"
            )));
        }
        let (name, weight) = match item.rsplit_once('=') {
            Some((n, w)) => {
                let w = w.trim().parse::<u32>().map_err(|_| {
                    Failure::Input(format!(
                        "--instances {spec:?}: weight {w:?} of {n:?} is not a non-negative integer"
                    ))
                })?;
                (n.trim(), w)
            }
            None => (item, switchman_core::DEFAULT_WEIGHT),
        };
        if name.is_empty() {
            return Err(Failure::Input(format!(
                "--instances {spec:?}: an entry has no name"
            )));
        }
        // `host:port` names are real addresses (they matter to consistenthash); others get
        // port 0.
        let builder = match name.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>())) {
            Some((host, Ok(port))) if !host.is_empty() => Instance::builder(host, port),
            _ => Instance::builder(name, 0),
        };
        let instance = builder.weight(weight).timestamp_ms(0).build();
        out.push(Named {
            name: name.to_string(),
            endpoint: Endpoint::new(Arc::new(instance)),
        });
    }
    Ok(out)
}

fn read_file(path: &PathBuf) -> Result<Vec<Named>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("--instances-file {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("{}:{}", path.display(), n + 1);
        let url = Url::parse(line).map_err(|e| Failure::Input(format!("{}: {e}", at())))?;
        let instance =
            Instance::from_url(&url).map_err(|e| Failure::Input(format!("{}: {e}", at())))?;
        let endpoint = Endpoint::new(Arc::new(instance));
        // Without a provider timestamp, treat the instance as long known (no warm-up).
        endpoint.stats.set_first_seen_ms(0);
        out.push(Named {
            name: endpoint.instance.address().to_string(),
            endpoint,
        });
    }
    if out.is_empty() {
        return Err(Failure::Input(format!(
            "--instances-file {}: no provider URL in the file",
            path.display()
        )));
    }
    Ok(out)
}

fn balancer(args: &SimulateArgs) -> Result<Arc<dyn LoadBalance>, Failure> {
    let kind: BalancerKind = args
        .lb
        .parse()
        .map_err(|e: switchman_core::Error| Failure::Input(format!("--lb: {}", e.message())))?;
    if kind == BalancerKind::ConsistentHash {
        let ch = ConsistentHashBalance::from_params(
            args.hash_nodes.as_deref(),
            args.hash_arguments.as_deref(),
        )
        .map_err(|e| Failure::Input(e.message().to_string()))?;
        return Ok(Arc::new(ch));
    }
    if args.hash_nodes.is_some() || args.hash_arguments.is_some() {
        return Err(Failure::Input(format!(
            "--hash-nodes/--hash-arguments only apply to consistenthash, not {kind}"
        )));
    }
    Ok(kind.build())
}

fn simulate(args: &SimulateArgs) -> Result<(), Failure> {
    let lb = balancer(args)?;
    let instances = match (&args.instances, &args.instances_file) {
        (Some(spec), _) => parse_spec(spec)?,
        (None, Some(path)) => read_file(path)?,
        (None, None) => {
            return Err(Failure::Input(
                "give --instances or --instances-file".to_string(),
            ));
        }
    };
    let mut seen = HashSet::new();
    for i in &instances {
        if !seen.insert(i.endpoint.instance.address()) {
            return Err(Failure::Input(format!(
                "instance {:?} is listed twice",
                i.name
            )));
        }
    }
    let endpoints: Vec<Endpoint> = instances.iter().map(|i| i.endpoint.clone()).collect();
    let picker = lb.prepare(
        &endpoints,
        (0..endpoints.len() as u32).collect(),
        SystemTime::now(),
    );
    let calls = args.calls.unwrap_or(if args.keys.is_empty() {
        20
    } else {
        args.keys.len() as u64
    });
    let mut rng = fastrand::Rng::with_seed(args.seed.unwrap_or_else(|| fastrand::u64(..)));
    let invocations: Vec<Invocation> = if args.keys.is_empty() {
        vec![Invocation::new(args.method.clone())]
    } else {
        args.keys
            .iter()
            .map(|k| {
                Invocation::new(args.method.clone())
                    .with_args(vec![serde_json::Value::String(k.clone())])
            })
            .collect()
    };

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut hits = vec![0u64; endpoints.len()];
    for c in 0..calls {
        let ctx = PickContext {
            invocation: &invocations[(c % invocations.len() as u64) as usize],
            tried: &[],
        };
        let Some(i) = picker.pick(&endpoints, &ctx, &mut rng) else {
            return Err(Failure::Input("no instance to pick from".to_string()));
        };
        hits[i] += 1;
        writeln!(out, "{}", instances[i].name)?;
    }

    // Summary: shares against what the weights ask for (consistenthash ignores weights).
    let weighted = lb.name() != "consistenthash";
    let total_weight: u64 = endpoints
        .iter()
        .map(|e| switchman_loadbalance::effective_weight(e, SystemTime::now()) as u64)
        .sum();
    let width = instances
        .iter()
        .map(|i| i.name.len())
        .max()
        .unwrap_or(0)
        .max(8);
    writeln!(out)?;
    writeln!(out, "# {calls} calls, {}", lb.name())?;
    writeln!(
        out,
        "# {:<width$}  {:>6}  {:>8}  {:>7}  {:>8}",
        "instance", "weight", "picks", "share", "expected"
    )?;
    for (i, named) in instances.iter().enumerate() {
        let share = if calls == 0 {
            0.0
        } else {
            100.0 * hits[i] as f64 / calls as f64
        };
        let w = switchman_loadbalance::effective_weight(&named.endpoint, SystemTime::now());
        let expected = if weighted && total_weight > 0 {
            format!("{:.1}%", 100.0 * w as f64 / total_weight as f64)
        } else {
            "-".to_string()
        };
        writeln!(
            out,
            "# {:<width$}  {:>6}  {:>8}  {:>6.1}%  {:>8}",
            named.name, w, hits[i], share, expected
        )?;
    }
    out.flush()?;
    Ok(())
}
