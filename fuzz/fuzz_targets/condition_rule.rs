//! The condition-rule text parser (Dubbo v2 `when => then`), through the public API: a rule is
//! accepted or rejected with an error, never a panic; an accepted rule builds a route table and
//! routes calls without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "support.rs"]
mod support;
use support::route_some_calls;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Never YAML here (the YAML forms have their own target): a v2 text rule.
    if text.contains(':') && text.contains('\n') {
        return;
    }
    route_some_calls("com.foo.Bar.condition-router", text);
});
