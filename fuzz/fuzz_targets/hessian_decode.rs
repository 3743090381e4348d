//! The Hessian decoder: any bytes give values or a `DecodeError`, never a panic, within the
//! limits. Values that decode and hold no back reference (whose numbering depends on the rest
//! of the stream) or NaN encode to bytes that decode to the same values, and the same bytes
//! again. The JSON mapping of whatever decodes never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_hessian::{Decoder, Encoder, Limits, Value, java_exception, to_json};

/// Whether `v` holds a `Value::Ref` or a NaN (not equal to itself).
fn unstable(v: &Value) -> bool {
    match v {
        Value::Ref(_) => true,
        Value::Double(d) => d.is_nan(),
        Value::List(l) => l.items.iter().any(unstable),
        Value::Map(m) => m.entries.iter().any(|(k, v)| unstable(k) || unstable(v)),
        Value::Object(o) => o.fields.iter().any(|(_, v)| unstable(v)),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_nodes: 100_000,
        max_bytes: 16 << 20,
        ..Limits::default()
    };
    let mut dec = Decoder::with_limits(data, limits);
    let mut values = Vec::new();
    while !dec.is_at_end() {
        let before = dec.position();
        match dec.read() {
            Ok(v) => values.push(v),
            Err(e) => {
                assert!(e.offset() <= data.len(), "{e}");
                break;
            }
        }
        assert!(dec.position() > before, "a read consumed nothing");
    }
    for v in &values {
        let _ = to_json(v);
        let _ = java_exception(v);
    }
    let stable: Vec<&Value> = values.iter().filter(|v| !unstable(v)).collect();
    let mut enc = Encoder::new();
    for v in &stable {
        enc.write(v);
    }
    let bytes = enc.into_bytes();
    // Under the same limits: what they let through, they let through again.
    let mut dec = Decoder::with_limits(&bytes, limits);
    for v in &stable {
        assert_eq!(&&dec.read().expect("our own bytes decode"), v);
    }
    assert!(dec.is_at_end());
    let mut enc = Encoder::new();
    for v in &stable {
        enc.write(v);
    }
    assert_eq!(enc.into_bytes(), bytes, "encoding is deterministic");
});
