//! Shared by the rule targets (a module of each).
#![allow(dead_code)]
use std::sync::Arc;

use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_router::{ConsumerInfo, Route, RouterChain};

/// Parses `text` as the rule stored under `key`; when accepted, builds the route table over a
/// few instances and routes a few calls.
pub fn route_some_calls(key: &str, text: &str) {
    if let Ok(chain) = RouterChain::new().with_rule(key, text) {
        route_chain(&chain);
    }
}

/// Builds the route table of `chain` over a few instances and routes a few calls: every
/// member routed to is one of them.
pub fn route_chain(chain: &RouterChain) {
    let instances: Vec<Arc<Instance>> = [
        ("10.0.0.1", 20880, "gray", "hz"),
        ("10.0.0.2", 20880, "", "sh"),
        ("10.0.0.3", 8080, "blue", ""),
        ("192.168.1.9", 20881, "gray", "hz"),
    ]
    .iter()
    .map(|(host, port, tag, zone)| {
        let mut b = Instance::builder(*host, *port)
            .service(ServiceKey::new("com.foo.Bar"))
            .param("application", "demo")
            .param("version", "1.0");
        if !tag.is_empty() {
            b = b.tag(*tag);
        }
        if !zone.is_empty() {
            b = b.zone(*zone);
        }
        Arc::new(b.build())
    })
    .collect();
    let table = chain.build(&instances, &ConsumerInfo::new("10.0.0.9", "shop"));
    let mut rng = fastrand::Rng::with_seed(7);
    for inv in [
        Invocation::new("sayHello"),
        Invocation::new("getUser").with_args(vec![serde_json::json!(1), serde_json::json!("x")]),
        Invocation::new("sayHello").with_attachment("dubbo.tag", "gray"),
    ] {
        let members: &[u32] = match table.route(&inv, &mut rng) {
            Route::Subset(k) => &table.subsets()[k],
            Route::Computed(ref s) => &s.clone(),
            Route::Forbidden(_) => &[],
            other => panic!("an outcome the fuzz target does not know: {other:?}"),
        };
        for &i in members {
            assert!(
                (i as usize) < instances.len(),
                "subset member {i} out of range"
            );
        }
    }
}

/// The fuzzer's first byte (which form the target reads) and the rest as UTF-8 text; `None`
/// without a first byte or when the rest is not UTF-8.
pub fn mode_and_text(data: &[u8]) -> Option<(u8, &str)> {
    let (&mode, rest) = data.split_first()?;
    Some((mode, std::str::from_utf8(rest).ok()?))
}
