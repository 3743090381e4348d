//! Dynamic configuration as dubbo-admin writes it: a configurator YAML document or an
//! `override://` URL is accepted (every rule valid, applying it keeps the provider's address)
//! or rejected with an error, never a panic; consumer rules are matched and read without one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_core::{Instance, ServiceKey, Url};
use switchman_discovery::configurator::{self, Configurator};
use switchman_discovery::override_parse::{from_override_url_all, from_yaml};

#[path = "support.rs"]
mod support;

fn check(rules: &[Configurator]) {
    let provider = Instance::builder("10.0.0.1", 20880)
        .service(ServiceKey::new("com.foo.Bar"))
        .application("demo")
        .weight(100)
        .build();
    let key = ServiceKey::new("com.foo.Bar");
    for r in rules {
        r.validate().expect("an accepted rule is valid");
        let _ = r.matches_consumer("10.0.0.9", Some("shop"), &key);
    }
    if let Some(changed) = configurator::apply(rules, &provider) {
        assert_eq!(
            changed.address(),
            provider.address(),
            "a rule moved the provider"
        );
    }
    let _ = configurator::consumer_parameters(rules, "10.0.0.9", Some("shop"), &key);
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, text)) = support::mode_and_text(data) else {
        return;
    };
    if mode % 2 == 0 {
        if let Ok(rules) = from_yaml(text, "com.foo.Bar.configurators") {
            check(&rules);
        }
    } else if let Ok(url) = Url::parse(text) {
        if let Ok(rules) = from_override_url_all(&url) {
            check(&rules);
        }
    }
});
