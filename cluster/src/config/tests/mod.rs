//! Tests of the configuration: precedence, the loaders, the typed values.

mod loaders;
mod precedence;
mod values;

use std::collections::BTreeMap;

pub(super) fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
