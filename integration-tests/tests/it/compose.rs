//! `docker-compose.yml` is checked without a Docker engine: it parses, every service it names
//! (in `depends_on`) is defined, every port it publishes is used by the scenario (some other
//! service's command addresses `service:port`), and the scenario's pieces are wired as the
//! README says (healthchecks, providers registered under their own service name).

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;

fn compose() -> BTreeMap<String, Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docker-compose.yml");
    let text = std::fs::read_to_string(path).expect("docker-compose.yml at the repository root");
    let doc: Value = serde_norway::from_str(&text).expect("docker-compose.yml is YAML");
    let services = doc
        .get("services")
        .and_then(Value::as_mapping)
        .expect("a services mapping");
    services
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().expect("service names are strings").to_string(),
                v.clone(),
            )
        })
        .collect()
}

/// Every string of a service's `command` (list or string form), joined by spaces.
fn command(service: &Value) -> String {
    match service.get("command") {
        Some(Value::Sequence(parts)) => parts
            .iter()
            .map(|p| p.as_str().expect("command parts are strings"))
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

fn depends_on(service: &Value) -> BTreeMap<String, Option<String>> {
    match service.get("depends_on") {
        Some(Value::Sequence(list)) => list
            .iter()
            .map(|v| (v.as_str().expect("names").to_string(), None))
            .collect(),
        Some(Value::Mapping(m)) => m
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().expect("names").to_string(),
                    v.get("condition")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                )
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Container ports a service publishes (`"host:container"`, `"container"` or long syntax).
fn published(service: &Value) -> Vec<u16> {
    let Some(Value::Sequence(ports)) = service.get("ports") else {
        return Vec::new();
    };
    ports
        .iter()
        .map(|p| match p {
            Value::String(s) => s
                .rsplit(':')
                .next()
                .and_then(|c| c.split('/').next())
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("port mapping {s:?} is not host:container")),
            Value::Number(n) => n.as_u64().expect("a port") as u16,
            Value::Mapping(_) => p
                .get("target")
                .and_then(Value::as_u64)
                .expect("long-syntax ports have a target") as u16,
            other => panic!("unexpected port entry {other:?}"),
        })
        .collect()
}

#[test]
fn every_named_service_is_defined_and_every_published_port_is_used() {
    let services = compose();
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    for want in [
        "zookeeper",
        "nacos",
        "provider1",
        "provider2",
        "provider3",
        "consumer",
    ] {
        assert!(names.contains(want), "service {want} is defined");
    }
    for (name, svc) in &services {
        for dep in depends_on(svc).keys() {
            assert!(
                names.contains(dep.as_str()),
                "{name} depends on {dep}, which is not defined"
            );
        }
        assert!(
            svc.get("image").is_some() || svc.get("build").is_some(),
            "{name} has an image or a build"
        );
    }
    let mut published_any = false;
    for (name, svc) in &services {
        for port in published(svc) {
            published_any = true;
            let target = format!("{name}:{port}");
            let users: Vec<&String> = services
                .iter()
                .filter(|(other, s)| *other != name && command(s).contains(&target))
                .map(|(other, _)| other)
                .collect();
            assert!(
                !users.is_empty(),
                "{name} publishes {port} but no service of the scenario uses {target}"
            );
        }
    }
    assert!(published_any, "the registries are published for the host");
}

#[test]
fn providers_register_reachable_addresses_and_consumers_wait_for_them() {
    let services = compose();
    let providers: Vec<(&String, &Value)> = services
        .iter()
        .filter(|(n, _)| n.starts_with("provider"))
        .collect();
    assert_eq!(providers.len(), 3, "three demo providers");
    for (name, svc) in &providers {
        let cmd = command(svc);
        assert!(
            cmd.contains(" provider "),
            "{name} runs `switchman provider`"
        );
        assert!(
            cmd.contains(&format!("--advertise {name}")),
            "{name} registers its own service name, which other containers resolve"
        );
        let port = cmd
            .split("--port ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("a fixed --port");
        let health = format!("{:?}", svc.get("healthcheck").expect("a healthcheck"));
        assert!(
            health.contains(port),
            "{name}'s healthcheck probes its port {port}"
        );
        for registry in ["zookeeper", "nacos"] {
            assert_eq!(
                depends_on(svc).get(registry).cloned().flatten().as_deref(),
                Some("service_healthy"),
                "{name} waits for a healthy {registry}"
            );
        }
    }
    for registry in ["zookeeper", "nacos"] {
        assert!(
            services[registry].get("healthcheck").is_some(),
            "{registry} has a healthcheck"
        );
    }
    for consumer in services.keys().filter(|n| n.starts_with("consumer")) {
        let svc = &services[consumer];
        assert!(
            command(svc).contains(" call "),
            "{consumer} runs `switchman call`"
        );
        let deps = depends_on(svc);
        for (p, _) in &providers {
            assert_eq!(
                deps.get(p.as_str()).cloned().flatten().as_deref(),
                Some("service_healthy"),
                "{consumer} waits for a healthy {p}"
            );
        }
    }
}
