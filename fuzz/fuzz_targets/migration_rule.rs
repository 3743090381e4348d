//! Dubbo's migration rule (`{application}.migration`): accepted or rejected with an error,
//! never a panic, within the YAML bounds; an accepted rule resolves a step for any consumer.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use switchman_discovery::migration::{MigrationDefaults, MigrationRule};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(Some(rule)) = MigrationRule::parse(text) {
        let apps: BTreeSet<String> = ["demo".to_string()].into();
        let _ = rule.resolve("com.foo.Bar:1.0", &apps, &MigrationDefaults::default());
        let _ = rule.resolve(
            "com.foo.Bar",
            &BTreeSet::new(),
            &MigrationDefaults::default(),
        );
    }
});
