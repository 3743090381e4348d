//! The Nacos instance mapping: any instance Nacos could list (any ip text, port, weight
//! including NaN and infinities, flags, cluster name, metadata) maps to an instance or is
//! skipped, never a panic; a mapped instance has a real port and a bounded weight.
#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nacos_sdk::api::naming::ServiceInstance;
use switchman_core::ServiceKey;
use switchman_discovery::nacos::instance_from_nacos;

#[derive(Debug, Arbitrary)]
struct Input {
    dubbo_naming: bool,
    ip: String,
    port: i32,
    weight: f64,
    healthy: bool,
    enabled: bool,
    cluster_name: Option<String>,
    metadata: Vec<(Key, String)>,
}

/// Metadata keys the mapping reads, or any text.
#[derive(Debug, Arbitrary)]
enum Key {
    Known(u8),
    Any(String),
}

const KNOWN: [&str; 12] = [
    "protocol",
    "path",
    "weight",
    "warmup",
    "timestamp",
    "zone",
    "enabled",
    "disabled",
    "application",
    "dubbo.tag",
    "interface",
    "version",
];

fuzz_target!(|input: Input| {
    let metadata: HashMap<String, String> = input
        .metadata
        .into_iter()
        .map(|(k, v)| {
            let k = match k {
                Key::Known(i) => KNOWN[usize::from(i) % KNOWN.len()].to_string(),
                Key::Any(s) => s,
            };
            (k, v)
        })
        .collect();
    let si = ServiceInstance {
        instance_id: None,
        ip: input.ip,
        port: input.port,
        weight: input.weight,
        healthy: input.healthy,
        enabled: input.enabled,
        ephemeral: true,
        cluster_name: input.cluster_name,
        service_name: None,
        metadata,
    };
    let key = ServiceKey::with("com.foo.Bar", "g", "1.0");
    if let Some(i) = instance_from_nacos(&key, input.dubbo_naming, &si) {
        assert_ne!(i.port(), 0);
        assert_eq!(i.service(), &key);
        let _ = i.to_url().to_string();
    }
});
