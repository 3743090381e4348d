//! The one YAML reader (`switchman_core::yaml`) on any text: a document is read or refused
//! with an error naming the input, never a panic, and what is read is within the limits —
//! nodes and depth with aliases expanded, scalar text — whatever the anchors and aliases.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_core::yaml::{self, Limit, Limits, Value};

/// (nodes, container depth, scalar bytes) of a read document.
fn measure(v: &Value, depth: usize, out: &mut (usize, usize, usize)) {
    out.0 += 1;
    out.1 = out.1.max(depth);
    match v {
        Value::String(s) => out.2 += s.len(),
        Value::Sequence(items) => items.iter().for_each(|i| measure(i, depth + 1, out)),
        Value::Mapping(m) => {
            for (k, v) in m {
                measure(k, depth + 1, out);
                measure(v, depth + 1, out);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // Small limits too, so that inputs of fuzzer size reach each limit.
    let limits = if selector & 1 == 0 {
        Limits::DEFAULT
    } else {
        Limits {
            max_bytes: 2048,
            max_depth: 6,
            max_nodes: 50,
        }
    };
    match yaml::from_str_with::<Value>(text, "fuzz input", &limits) {
        Ok(v) => {
            let mut m = (0, 0, 0);
            measure(&v, 0, &mut m);
            assert!(m.0 <= limits.max_nodes.max(1), "{} nodes: {text:?}", m.0);
            assert!(m.1 <= limits.max_depth, "depth {}: {text:?}", m.1);
            assert!(m.2 <= limits.max_text_bytes(), "{} bytes: {text:?}", m.2);
            // Printing and reading back as a typed value never panic either.
            let printed = v.to_string();
            let again: Value = yaml::from_value(v).expect("a Value reads back as a Value");
            assert_eq!(again.to_string(), printed);
        }
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz input: "), "{e}");
            assert!(!e.to_string().chars().any(char::is_control), "{e:?}");
            if text.len() > limits.max_bytes {
                assert_eq!(e.limit(), Some(Limit::Bytes), "{e}");
            }
        }
    }
});
