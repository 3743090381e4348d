//! YAML alias bombs (#26 item 1): `x: &a [0,0,…n]` and `y: [*a,*a,…m]` around a valid
//! document is n×m nodes from n+m bytes. Every YAML reader refuses one at the node limit of
//! `switchman_core::yaml`, and what was in force stays.

use std::time::Duration;

use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_discovery::static_registry::parse_yaml;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};

/// The bomb after `doc`, about `size` bytes in all.
fn alias_bomb(doc: &str, size: usize) -> String {
    let room = size.saturating_sub(doc.len() + 20);
    format!(
        "{doc}x: &a [{}]\ny: [{}]\n",
        vec!["0"; room / 4].join(","),
        vec!["*a"; room / 6].join(",")
    )
}

#[test]
fn a_static_registry_file_with_a_bomb_is_refused_naming_the_file_and_the_limit() {
    let providers = "providers:\n  - http://10.0.0.1:8080\n  - {address: \"10.0.0.2:8080\"}\n";
    for size in [5 * 1024, 64 * 1024] {
        let e = parse_yaml(
            &alias_bomb(providers, size),
            "/etc/switchman/providers.yaml",
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("/etc/switchman/providers.yaml: over the YAML node limit"),
            "{size}: {e}"
        );
    }
    // The same file without the bomb is two providers.
    let (ok, errors) = parse_yaml(providers, "p.yaml").unwrap();
    assert_eq!((ok.len(), errors.len()), (2, 0));
}

#[tokio::test]
async fn a_bomb_rule_pushed_to_a_directory_leaves_the_good_rule_routing() {
    let inst = |port| Instance::builder("10.0.0.1", port).build();
    let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("demo.Greeter")), None);
    let settle = |epoch: u64| dir.wait_until(Duration::from_secs(10), move |s| s.epoch() >= epoch);
    let ports = |s: &switchman_discovery::Snapshot| {
        let mut rng = fastrand::Rng::with_seed(3);
        (0..100)
            .map(|_| {
                let i = s
                    .select(&Invocation::new("sayHello"), &[], &mut rng)
                    .unwrap();
                s.endpoints()[i].instance.port()
            })
            .collect::<std::collections::BTreeSet<u16>>()
    };
    dir.apply(Update::reset(vec![inst(1), inst(2)]));
    settle(1).await.unwrap();
    let key = "demo.Greeter::.condition-router".to_string();
    let rule = |port: u16| {
        format!(
            "scope: service\nkey: demo.Greeter\nforce: true\nconditions:\n  - method = sayHello => port = {port}\n"
        )
    };
    dir.apply(Update::Rule {
        key: key.clone(),
        text: Some(rule(2)),
    });
    dir.apply(Update::add(vec![inst(3)]));
    assert_eq!(ports(&settle(2).await.unwrap()), [2].into());
    // A bomb that would route to port 1 (5 KB: the old parser accepted it in about a second),
    // then a sentinel: the directory read both, in order.
    dir.apply(Update::Rule {
        key,
        text: Some(alias_bomb(&rule(1), 5 * 1024)),
    });
    dir.apply(Update::add(vec![inst(4)]));
    let s = settle(3).await.unwrap();
    assert_eq!(s.instances().len(), 4, "the sentinel arrived");
    assert_eq!(ports(&s), [2].into(), "the good rule still routes");
}
