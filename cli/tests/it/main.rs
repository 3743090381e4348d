//! The command line's integration tests, one binary (one link step): each module drives the
//! built `switchman` binary (`CARGO_BIN_EXE_switchman`) against real servers where it needs
//! them; `support` holds what several share.

mod admin;
mod call_java_dubbo;
mod call_watch;
mod cli_output;
mod demo;
mod lb_simulate;
mod metrics;
mod provider_app_level;
mod route_cli;
mod support;
mod top;
mod watch_app_level;
