//! Shared helpers for the integration tests: where the real servers started by
//! `scripts/test` listen.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod chaos;
pub mod java_peer;
pub mod kdc;
pub mod logs;
pub mod nacos_api;
pub mod nacos_server;
pub mod oracle;
pub mod ports;
pub mod python_peer;
pub mod zk_server;

/// The address (`127.0.0.1:port`) in environment variable `var`, set by `scripts/test`.
///
/// # Panics
/// When the variable is missing: these tests need the servers `scripts/test` starts, and a
/// silent skip would hide that they did not run.
pub fn server_addr(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{var} is not set: run the tests with scripts/test, which starts ZooKeeper and rnacos"
        ),
    }
}

/// ZooKeeper's client address.
pub fn zookeeper() -> String {
    server_addr("SWITCHMAN_ZK")
}

/// rnacos's HTTP address (gRPC is on the HTTP port + 1000).
pub fn nacos() -> String {
    server_addr("SWITCHMAN_NACOS")
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}
