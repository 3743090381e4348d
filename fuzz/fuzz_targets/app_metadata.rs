//! Application-level discovery's inputs: a ZooKeeper instance node's Curator JSON, a Nacos
//! interface-to-application mapping, a provider's `MetadataInfo` (the JSON report, or the
//! Hessian2 answer of its MetadataService), and the service definition it publishes in the
//! metadata report, and a Nacos instance list read over the HTTP open API. Each parses or is
//! refused, never a panic; an instance and its metadata give endpoint URLs that parse back; a
//! definition read stays within its bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchman_core::Url;
use switchman_discovery::fuzzing::{curator_instance, nacos_http_list, nacos_mapping};
use switchman_discovery::metadata::{
    MAX_METHODS, MAX_PARAMETERS, MetadataInfo, ServiceDefinition,
};
use switchman_hessian::{Decoder, to_json};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // Curator JSON and MetadataInfo in one input, split at the first NUL.
    let (node, report) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    match mode % 6 {
        0 => {
            let Ok(instance) = curator_instance("demo", node) else {
                return;
            };
            let _ = instance.advertised_endpoints();
            let Some(revision) = instance.revision().map(str::to_string) else {
                return;
            };
            let _ = instance.metadata_targets(&revision);
            if let Ok(info) = MetadataInfo::from_slice(report) {
                for url in instance.endpoints(&info, "com.foo.Bar") {
                    let text = url.to_string();
                    assert!(Url::parse(&text).is_ok(), "{text:?} does not parse back");
                }
            }
        }
        1 => {
            let _ = MetadataInfo::from_slice(rest);
        }
        3 => {
            if let Ok(d) = ServiceDefinition::parse(rest, "fuzz") {
                assert!(d.methods.len() <= MAX_METHODS);
                assert!(d.methods.iter().all(|m| m.parameter_types.len() <= MAX_PARAMETERS));
                assert!(d.methods.windows(2).all(|w| w[0] != w[1]), "sorted, no duplicates");
                let _ = d.instead_of("add");
            }
        }
        4 => {
            if let Ok((kept, dropped)) = nacos_http_list(rest) {
                assert!(kept + dropped <= rest.len(), "{kept} + {dropped} hosts in {} bytes", rest.len());
            }
        }
        2 => {
            // What a MetadataService answers over dubbo:// or Triple: Hessian2.
            if let Ok(v) = Decoder::new(rest).read() {
                let _ = MetadataInfo::from_json(&to_json(&v));
            }
        }
        _ => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            for app in nacos_mapping(text) {
                assert!(
                    !app.is_empty() && !app.contains(',') && !app.contains('@'),
                    "{app:?}"
                );
            }
        }
    }
});
