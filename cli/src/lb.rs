//! `switchman lb ...` (owned by the load-balancer work).
use std::process::ExitCode;

/// Load-balancer subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum LbCommand {
    /// Print the instance picked for each call, then the shares.
    Simulate,
}

pub(crate) fn run(_cmd: LbCommand) -> ExitCode {
    eprintln!("lb simulate: not built yet");
    ExitCode::from(2)
}
