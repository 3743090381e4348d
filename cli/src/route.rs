//! `switchman route ...` (owned by the router work).
use std::process::ExitCode;

/// Arguments of `switchman route`.
#[derive(Debug, clap::Args)]
pub(crate) struct RouteArgs {}

pub(crate) fn run(_args: RouteArgs) -> ExitCode {
    eprintln!("route: not built yet");
    ExitCode::from(2)
}
