//! `switchman`: the command line of the Switchman cluster layer.
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod admin;
mod call;
mod demo;
mod lb;
mod metrics;
mod provider;
mod route;
mod top;
mod watch;

/// Dubbo-style service discovery, routing, load balancing and fault tolerance for Rust.
#[derive(Debug, Parser)]
#[command(name = "switchman", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Call a service through a registry and report the success rate and, per instance, the
    /// attempts it received (a retried call counts on each instance it tried).
    Call(call::CallArgs),
    /// Run the whole call path against 5 local providers and print what the caller saw.
    Demo(demo::DemoArgs),
    /// Load-balancer tools (`lb simulate`: print the picks a balancer makes).
    #[command(subcommand)]
    Lb(lb::LbCommand),
    /// Serve an in-process HTTP or Triple (`--protocol tri`) provider and register it until Ctrl-C or SIGTERM.
    Provider(provider::ProviderArgs),
    /// Dry-run a routing rule: print the provider URLs it keeps for a call (providers from a
    /// file or a registry).
    Route(route::RouteArgs),
    /// A live view of a consumer (through its --admin endpoint) or of a registry subscription:
    /// one row per instance with its weight, state, share of attempts, latency and errors.
    Top(top::TopArgs),
    /// Print one JSON line per snapshot a registry subscription publishes that shows something
    /// new (registered and effective weights, so a warm-up ramp shows).
    Watch(watch::WatchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo's faults are on purpose: its report says what happened, so only errors are
    // logged there unless RUST_LOG asks for more.
    let default_filter = match cli.command {
        Command::Demo(_) => "error",
        // The live view owns the terminal: log lines would tear it (RUST_LOG still works).
        Command::Top(ref a) if !a.once => "off",
        _ => "warn,zookeeper_client=error,nacos_sdk=off",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR set (no-color.org).
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    switchman_cluster::metadata_service::install();
    match cli.command {
        Command::Call(args) => call::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Lb(cmd) => lb::run(cmd),
        Command::Provider(args) => provider::run(args),
        Command::Route(args) => route::run(args),
        Command::Top(args) => top::run(args),
        Command::Watch(args) => watch::run(args),
    }
}
