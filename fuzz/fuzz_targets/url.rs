//! The Dubbo URL parser: never panics; what it accepts prints back to text that parses to the
//! same URL; the node-name (percent-encoded) form round-trips too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_core::Url;
use switchman_core::url::{decode_component, encode_component};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Url::from_encoded(text);
    if let Ok(decoded) = decode_component(text) {
        assert_eq!(
            decode_component(&encode_component(&decoded)).as_deref(),
            Ok(decoded.as_str())
        );
    }
    if let Ok(url) = Url::parse(text) {
        let printed = url.to_string();
        let again = Url::parse(&printed).unwrap_or_else(|e| {
            panic!("{text:?} parsed, but its printed form {printed:?} does not: {e}")
        });
        assert_eq!(again, url, "round trip of {text:?} through {printed:?}");
        let _ = url.redacted();
        let _ = switchman_core::Instance::from_url(&url);
    }
});
