//! The JVM options the peers run under.

/// JVM options for quick starts and a small footprint (C1 only, serial GC, 256 MiB heap).
pub const JVM_FLAGS: &[&str] = &[
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-Xmx256m",
    "-XX:-UsePerfData",
];

/// [`JVM_FLAGS`] and Dubbo's `dubbo.provider.token=true`: the provider's default
/// `ProviderConfig` asks for a token, so the export registers a random UUID as its `token`
/// (what `<dubbo:provider token="true"/>` or `@DubboService(token = "true")` do). For
/// [`JavaProvider::start_with_jvm_flags`].
///
/// [`JavaProvider::start_with_jvm_flags`]: super::JavaProvider::start_with_jvm_flags
pub fn token_true_jvm_flags() -> Vec<&'static str> {
    let mut flags = JVM_FLAGS.to_vec();
    flags.push("-Ddubbo.provider.token=true");
    flags
}

/// JVM options of the benchmark's JVMs (`benches/dubbo_java.rs`: the provider and the Java
/// consumer `bench`): the JVM's own defaults (tiered C1 + C2, the default collector) with a
/// 512 MiB heap, unlike [`JVM_FLAGS`], which trade peak speed for quick starts.
pub const BENCH_JVM_FLAGS: &[&str] = &["-Xms512m", "-Xmx512m", "-XX:-UsePerfData"];
