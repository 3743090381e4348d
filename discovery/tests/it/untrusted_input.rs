//! Registry data and snapshot files are untrusted: the proptest versions of the fuzz targets
//! `fuzz/fuzz_targets/{snapshot_file,nacos_instance}.rs`, run in CI in seconds.

use proptest::prelude::*;
use switchman_core::{Instance, ServiceKey};
use switchman_discovery::cache;

fn key() -> ServiceKey {
    ServiceKey::with("com.foo.Bar", "g", "1.0")
}

/// Provider-URL-shaped entries: real ones, broken ones and noise.
fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("http://10.0.0.1:8080/com.foo.Bar?weight=7&zone=hz".to_string()),
        Just("tri://[::1]:50051?service=com.foo.Bar&timestamp=1700000000000".to_string()),
        Just("dubbo://10.0.0.2:20880/com.foo.Bar?weight=-1".to_string()),
        Just("http://h/no-port".to_string()),
        "[a-z]{1,4}://[a-z0-9.:\\[\\]@]{0,16}(/[a-z.]{0,8})?(\\?[a-z]{1,5}=[ -~]{0,8}(&[a-z]{1,5}=[a-z0-9]{0,4}){0,3})?",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_are_rejected_or_loaded_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = cache::parse(&bytes, "prop", &key());
    }

    #[test]
    fn a_well_formed_file_loads_its_valid_entries_and_saves_them_back(entries in proptest::collection::vec(entry(), 0..8)) {
        let doc = serde_json::json!({"service": key().to_string(), "saved_at_ms": 1, "instances": entries});
        let loaded = cache::parse(&serde_json::to_vec(&doc).unwrap(), "prop", &key()).unwrap();
        // Exactly the entries that parse on their own are kept.
        let valid = entries
            .iter()
            .filter(|e| switchman_core::Url::parse(e).ok().and_then(|u| Instance::from_url(&u).ok()).is_some())
            .count();
        prop_assert_eq!(loaded.len(), valid);
        let again = cache::parse(&cache::encode(&key(), &loaded), "prop", &key()).unwrap();
        fn addr(v: &[Instance]) -> Vec<(String, u32)> {
            v.iter().map(|i| (i.address().to_string(), i.weight())).collect()
        }
        prop_assert_eq!(addr(&again), addr(&loaded));
    }
}

#[test]
fn a_file_over_the_size_limit_is_rejected_with_its_name() {
    let big = vec![b' '; cache::MAX_CACHE_BYTES as usize + 1];
    let e = cache::parse(&big, "/var/cache/x.json", &key())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/var/cache/x.json") && e.contains("limit"),
        "{e}"
    );
}

#[cfg(feature = "nacos")]
mod nacos {
    use std::collections::HashMap;

    use nacos_sdk::api::naming::ServiceInstance;
    use proptest::prelude::*;
    use switchman_core::{MAX_PARAM_VALUE_BYTES, ServiceKey};
    use switchman_discovery::nacos::instance_from_nacos;

    const KNOWN: [&str; 10] = [
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
    ];

    fn metadata() -> impl Strategy<Value = HashMap<String, String>> {
        let k = prop_oneof![
            proptest::sample::select(KNOWN.to_vec()).prop_map(String::from),
            "[ -~]{0,8}"
        ];
        let v = prop_oneof![
            "[0-9]{0,12}",
            "-?[0-9.e]{0,8}",
            "true|false",
            "[ -~]{0,12}",
            any::<String>()
        ];
        proptest::collection::hash_map(k, v, 0..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_nacos_instance_maps_or_is_skipped_never_a_panic(
            ip in prop_oneof!["10\\.0\\.0\\.[0-9]{1,3}", "[ -~]{0,12}"],
            port in prop_oneof![0..70_000i32, any::<i32>()],
            weight in prop_oneof![any::<f64>(), 0.0..1000.0f64],
            healthy: bool,
            enabled: bool,
            cluster in proptest::option::of("[A-Z_a-z]{0,8}"),
            dubbo_naming: bool,
            metadata in metadata(),
        ) {
            let si = ServiceInstance {
                instance_id: None,
                ip: ip.clone(),
                port,
                weight,
                healthy,
                enabled,
                ephemeral: true,
                cluster_name: cluster,
                service_name: None,
                metadata,
            };
            let key = ServiceKey::with("com.foo.Bar", "g", "1.0");
            match instance_from_nacos(&key, dubbo_naming, &si) {
                Some(i) => {
                    prop_assert!((1..=65_535).contains(&port));
                    prop_assert!(switchman_core::is_valid_host(&ip), "{:?}", ip);
                    prop_assert_eq!(i.port() as i32, port);
                    prop_assert_eq!(i.host(), ip.as_str());
                    prop_assert_eq!(i.service(), &key);
                    if weight.is_nan() || weight <= 0.0 {
                        prop_assert_eq!(i.weight(), 0);
                    }
                }
                None => prop_assert!(
                    !(1..=65_535).contains(&port)
                        || !switchman_core::is_valid_host(&ip)
                        || si.metadata.iter().any(|(k, v)| k.len() + v.len() > MAX_PARAM_VALUE_BYTES)
                ),
            }
        }
    }

    #[test]
    fn oversized_metadata_skips_the_instance() {
        let si = ServiceInstance {
            instance_id: None,
            ip: "10.0.0.1".into(),
            port: 8080,
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            cluster_name: None,
            service_name: None,
            metadata: HashMap::from([("methods".to_string(), "m,".repeat(MAX_PARAM_VALUE_BYTES))]),
        };
        assert!(instance_from_nacos(&ServiceKey::new("S"), false, &si).is_none());
        let mut ok = si.clone();
        ok.metadata.clear();
        assert!(instance_from_nacos(&ServiceKey::new("S"), false, &ok).is_some());
    }
}

/// Entries `scripts/fuzz` found loading but not loading back after being saved, kept (fixed)
/// as regressions.
const FUZZ_REGRESSIONS: &[&str] = &[".://\u{fffd}\u{fffd}\u{fffd}.:00/0007\u{fffd}6\u{fffd}&=&"];

#[test]
fn fuzz_regressions_load_back_what_they_load() {
    for entry in FUZZ_REGRESSIONS {
        let doc = serde_json::json!({"service": key().to_string(), "saved_at_ms": 1, "instances": [entry]});
        let loaded = cache::parse(&serde_json::to_vec(&doc).unwrap(), "fuzz", &key()).unwrap();
        let saved = cache::encode(&key(), &loaded);
        let again = cache::parse(&saved, "fuzz", &key()).unwrap();
        assert_eq!(
            again.len(),
            loaded.len(),
            "{entry:?} saved as {}",
            String::from_utf8_lossy(&saved)
        );
    }
}
