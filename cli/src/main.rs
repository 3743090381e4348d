//! `switchman`: the command line of the Switchman cluster layer.
#![forbid(unsafe_code)]
#![warn(missing_debug_implementations, rust_2018_idioms)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod lb;
mod route;

/// Dubbo-style service discovery, routing, load balancing and fault tolerance for Rust.
#[derive(Debug, Parser)]
#[command(name = "switchman", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load-balancer tools (`lb simulate`: print the picks a balancer makes).
    #[command(subcommand)]
    Lb(lb::LbCommand),
    /// Dry-run a routing rule: print the provider URLs it keeps for a call.
    Route(route::RouteArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Lb(cmd) => lb::run(cmd),
        Command::Route(args) => route::run(args),
    }
}
