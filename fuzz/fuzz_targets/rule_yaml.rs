//! The YAML rule parsers (condition v3.0/v3.1 and tag rules): accepted or rejected with an
//! error naming the key, never a panic; an accepted rule routes calls without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "support.rs"]
mod support;
use support::route_some_calls;

fuzz_target!(|data: &[u8]| {
    let Some((selector, text)) = support::mode_and_text(data) else {
        return;
    };
    let key = match selector % 3 {
        0 => "demo.tag-router",
        1 => "com.foo.Bar.condition-router",
        _ => "demo.condition-router",
    };
    route_some_calls(key, text);
});
