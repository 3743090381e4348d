//! Property tests: arbitrary values round-trip; arbitrary bytes never panic the decoder (the
//! quick twin of the `hessian_decode` fuzz target).

use proptest::prelude::*;
use switchman_hessian::{Decoder, Encoder, Limits, List, Map, Object, Value, from_json, to_json};

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("java.util.LinkedList".to_owned()),
        Just("[int".to_owned()),
        Just("com.foo.X".to_owned()),
        "[a-zA-Z.$\\[]{1,12}",
    ]
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        (-40_000i32..40_000).prop_map(f64::from),
        (-3_000_000i32..3_000_000).prop_map(|m| 0.001 * f64::from(m)),
        Just(f64::INFINITY),
    ]
    // NaN is not equal to itself; Java writes -0.0 as 0.0.
    .prop_filter("NaN", |d| !d.is_nan())
    .prop_map(|d| if d == 0.0 { 0.0 } else { d })
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::Int),
        (-300_000i32..300_000).prop_map(Value::Int),
        any::<i64>().prop_map(Value::Long),
        (-300_000i64..300_000).prop_map(Value::Long),
        double().prop_map(Value::Double),
        any::<String>().prop_map(Value::String),
        "[a😀é中]{0,40}".prop_map(Value::String),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Binary),
        any::<i64>().prop_map(Value::Date),
        (-100_000i64..100_000).prop_map(|m| Value::Date(m * 60_000)),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 10, |inner| {
        prop_oneof![
            (
                proptest::option::of(name()),
                proptest::collection::vec(inner.clone(), 0..10)
            )
                .prop_map(|(class, items)| Value::List(List { class, items })),
            (
                proptest::option::of(name()),
                proptest::collection::vec((inner.clone(), inner.clone()), 0..5)
            )
                .prop_map(|(class, entries)| Value::Map(Map { class, entries })),
            (
                prop_oneof![Just("A".to_owned()), Just("B".to_owned()), name()],
                proptest::collection::vec(("[a-c]{1,3}", inner), 0..5)
            )
                .prop_map(|(class, fields)| Value::Object(Object { class, fields })),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// One stream of several values: each comes back equal, class definitions and type names
    /// shared between them.
    #[test]
    fn values_round_trip(values in proptest::collection::vec(value(), 1..4)) {
        let mut enc = Encoder::new();
        for v in &values {
            enc.write(v);
        }
        let bytes = enc.into_bytes();
        let mut dec = Decoder::new(&bytes);
        for v in &values {
            prop_assert_eq!(&dec.read().unwrap(), v);
        }
        prop_assert!(dec.is_at_end());
    }

    /// Decoding arbitrary bytes ends in values or an error, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        decode_everything(&bytes);
    }

    /// Same, from bytes that are mostly valid: an encoding with a few bytes changed.
    #[test]
    fn damaged_encodings_never_panic(
        v in value(),
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = switchman_hessian::to_bytes(&v);
        for (i, b) in damage {
            let i = i.index(bytes.len());
            bytes[i] = b;
        }
        decode_everything(&bytes);
    }

    /// JSON → Value → bytes → Value → JSON keeps plain JSON.
    #[test]
    fn plain_json_round_trips(j in json()) {
        let v = from_json(&j, None).unwrap();
        let back = Decoder::new(&switchman_hessian::to_bytes(&v)).read().unwrap();
        prop_assert_eq!(to_json(&back), j);
    }
}

/// What the `hessian_decode` fuzz target checks: values or an error, never a panic; what
/// decodes without back references or NaN encodes to bytes that decode to it again.
fn decode_everything(bytes: &[u8]) {
    let limits = Limits {
        max_nodes: 10_000,
        ..Limits::default()
    };
    let mut dec = Decoder::with_limits(bytes, limits);
    let mut values = Vec::new();
    while !dec.is_at_end() {
        let before = dec.position();
        match dec.read() {
            Ok(v) => values.push(v),
            Err(e) => {
                assert!(e.offset() <= bytes.len(), "{e}");
                break;
            }
        }
        assert!(dec.position() > before);
    }
    for v in &values {
        let _ = to_json(v);
        let _ = switchman_hessian::java_exception(v);
    }
    let stable: Vec<&Value> = values.iter().filter(|v| !unstable(v)).collect();
    let mut enc = Encoder::new();
    for v in &stable {
        enc.write(v);
    }
    let again = enc.into_bytes();
    let mut dec = Decoder::new(&again);
    for v in &stable {
        assert_eq!(&&dec.read().expect("our own bytes decode"), v);
    }
    assert!(dec.is_at_end());
}

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

fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value as J;
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        any::<i64>().prop_map(J::from),
        (-1e6f64..1e6)
            .prop_filter("integral floats read back as ints", |f| f.fract() != 0.0)
            .prop_map(J::from),
        "[a-z😀]{0,8}".prop_map(J::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(J::Array),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..6)
                .prop_map(|m| { J::Object(m.into_iter().filter(|(k, _)| k != "class").collect()) }),
        ]
    })
}
