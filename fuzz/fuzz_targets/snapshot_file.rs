//! The snapshot cache loader: any bytes are rejected with an error or give instances, never a
//! panic. Half the inputs are wrapped in a well-formed document so the fuzzer reaches the
//! per-entry URL and instance parsing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_core::ServiceKey;
use switchman_discovery::cache;

fuzz_target!(|data: &[u8]| {
    let key = ServiceKey::with("com.foo.Bar", "g", "1.0");
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let _ = cache::parse(rest, "fuzz", &key);
        return;
    }
    let text = String::from_utf8_lossy(rest);
    let entries: Vec<&str> = text.split('\n').collect();
    let doc = serde_json::json!({
        "service": key.to_string(),
        "saved_at_ms": 0,
        "instances": entries,
    });
    let bytes = serde_json::to_vec(&doc).expect("a JSON value serializes");
    let instances = cache::parse(&bytes, "fuzz", &key).expect("a well-formed document loads");
    assert!(instances.len() <= entries.len());
    // What loads is saved and loads back the same.
    let again = cache::parse(&cache::encode(&key, &instances), "fuzz", &key).expect("re-encoded");
    assert_eq!(again.len(), instances.len(), "{text:?}");
});
