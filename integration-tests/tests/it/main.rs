//! The integration tests against the real ZooKeeper and rnacos that `scripts/test` starts, the
//! Java Dubbo 3.3 peers and the Python Dubbo peer: one module per concern, in one test binary
//! (one link step instead of one per file; linkerd's `app/integration` and tokio's
//! `tests-integration` do the same). Tests isolate themselves by names (a unique interface,
//! group or application each), not by processes.
//!
//! Four files stay binaries of their own: `chaos` (its figures time recoveries, which other
//! tests running beside it would disturb) and the three log tests (`registry_health_logs`,
//! `nacos_health_logs`, `zookeeper_logs`), which each install a process-wide tracing
//! subscriber that captures every line.

mod big_fleet;
mod compose;
mod hessian_typed;
mod java_app_level;
mod java_app_level_nacos;
mod java_dubbo;
mod java_groups;
mod java_loadbalance;
mod java_peers;
mod java_signatures;
mod java_tls;
mod java_triple;
mod migration;
mod nacos_app_level;
mod nacos_groups;
mod nacos_http_list;
mod nacos_registry;
mod nacos_restart;
mod nacos_tls;
mod oracle;
mod registry_zones;
mod rust_provider_app_level;
mod scenario_oracle;
mod servers_up;
mod test_pki;
mod thread_logs;
mod traceparent;
mod triple_python_peer;
mod zookeeper_registry;
mod zookeeper_routers;
mod zookeeper_sasl;
mod zookeeper_session;
mod zookeeper_tls;
