//! Real Java Apache Dubbo 3.3 peers (`peers/java`, see its README.md): a provider of
//! `io.switchman.peers.DemoService` over dubbo:// or tri:// (or of the protobuf service
//! [`IDL_SERVICE`] over tri://), a generic-invocation consumer, and
//! Hessian2 vectors written and read by Dubbo's own serializer.
//!
//! The built peers are the directory in `$SWITCHMAN_JAVA_PEERS` (set by `scripts/test`), else
//! what `scripts/install-java-peers` prints (it builds once into the cache directory outside the
//! clone, offline when the cache has everything). Every JVM gets the same small, fast-starting
//! settings ([`JVM_FLAGS`]). A [`JavaProvider`] is killed (SIGKILL) when dropped.

mod flags;
mod jvm;
mod options;
mod peers;
mod programs;
mod provider;

pub use flags::{BENCH_JVM_FLAGS, JVM_FLAGS, token_true_jvm_flags};
pub use options::ProviderOptions;
pub use peers::{
    DEMO_SERVICE, DEMO_SERVICE_V2_JAR, IDL_PROTO_SERVICE, IDL_SERVICE, peers_dir, skipped,
};
pub use programs::{
    BENCH_TIMEOUT, JavaConsumer, JavaFleet, RUN_TIMEOUT, force_application_adds, run_bench,
    run_consumer, vectors_bench, vectors_decode, vectors_encode,
};
pub use provider::{JavaProvider, PROVIDER_STDOUT_THREAD, START_TIMEOUT, TERMINATE_TIMEOUT};
