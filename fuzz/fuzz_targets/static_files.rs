//! The files an operator points a consumer at: a static registry file gives instances and
//! one error per bad entry, or is refused whole; a rules file of several YAML documents gives a
//! router chain or an error naming the rule. Never a panic, within the YAML bounds; accepted
//! rules route only to real instances; a JAAS file (`sasl.jaas=`) gives sections or an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_discovery::fuzzing::jaas_sections;
use switchman_discovery::static_registry::parse_yaml;
use switchman_router::source::chain_from_text;

#[path = "support.rs"]
mod support;

fuzz_target!(|data: &[u8]| {
    let Some((mode, text)) = support::mode_and_text(data) else {
        return;
    };
    if mode % 3 == 2 {
        let _ = jaas_sections(text);
    } else if mode % 3 == 0 {
        if let Ok((instances, errors)) = parse_yaml(text, "providers.yaml") {
            for i in &instances {
                assert!(i.port() > 0, "{i:?}");
            }
            let _ = errors.iter().map(ToString::to_string).count();
        }
    } else if let Ok(chain) = chain_from_text(text, "demo.condition-router") {
        support::route_chain(&chain);
    }
});
