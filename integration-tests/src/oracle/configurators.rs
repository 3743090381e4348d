//! Configurator cases: override URLs and YAML configs.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::*;

// ---------------------------------------------------------------------------------------------
// configurator

/// Parameters the configurator cases set (and whose results are compared).
pub const WATCHED: &[&str] = &["timeout", "loadbalance", "retries", "cluster"];

pub(super) fn override_url(g: &mut Gen, provider_host: &str, provider_port: u16) -> String {
    let addr = match g.rng.u32(0..10) {
        0..=4 => "0.0.0.0".to_string(),
        5..=7 => format!("{provider_host}:{provider_port}"),
        8 => {
            g.feat("other-provider");
            format!("{provider_host}:{}", provider_port + 1)
        }
        _ => {
            g.feat("host-only");
            provider_host.to_string()
        }
    };
    let mut service = SERVICE.to_string();
    let mut extra = String::new();
    match g.rng.u32(0..20) {
        0 => {
            g.feat("service-mismatch");
            service = "com.foo.Other".into();
        }
        1 => {
            g.feat("service-any");
            service = "*".into();
        }
        2 => {
            g.feat("group-mismatch");
            extra.push_str("&group=g2");
        }
        3 => {
            g.feat("rule-version");
            extra.push_str("&version=1.0");
        }
        _ => {}
    }
    let mut s = format!("override://{addr}/{service}?category=configurators&dynamic=false{extra}");
    match g.rng.u32(0..12) {
        0 => {
            g.feat("application");
            let _ = write!(s, "&application={}", g.pick(&["prov-a", "prov-b", "*"]));
        }
        1 => {
            g.feat("rule-disabled");
            s.push_str("&enabled=false");
        }
        2 => {
            g.feat("priority");
            let _ = write!(s, "&priority={}", g.rng.u32(0..4));
        }
        3 => {
            g.feat("v27");
            let _ = write!(s, "&configVersion=v2.7&side=provider");
            if g.chance(0.5) {
                g.feat("provider-addresses");
                let _ = write!(
                    s,
                    "&providerAddresses={}",
                    g.pick(&[
                        format!("{provider_host}:{provider_port}"),
                        format!("{provider_host}:{}", provider_port + 1),
                        "0.0.0.0".to_string(),
                        provider_host.to_string(),
                    ])
                );
            }
        }
        _ => {}
    }
    let mut set_any = false;
    if g.chance(0.6) {
        let _ = write!(s, "&weight={}", g.pick(&[0, 1, 7, 50, 200]));
        set_any = true;
    }
    if g.chance(0.15) {
        g.feat("disable-provider");
        let _ = write!(s, "&disabled={}", g.pick(&["true", "false"]));
        set_any = true;
    }
    if g.chance(0.6) || !set_any {
        let k = g.pick(WATCHED);
        let v = match k {
            "timeout" => g.pick(&["100", "300", "5000"]),
            "loadbalance" => g.pick(&["roundrobin", "leastactive"]),
            "retries" => g.pick(&["0", "5"]),
            _ => g.pick(&["failfast", "failsafe"]),
        };
        let _ = write!(s, "&{k}={v}");
    }
    s
}

pub(super) fn config_yaml(g: &mut Gen, provider_host: &str, provider_port: u16) -> String {
    let app_scope = g.chance(0.3);
    let enabled = !g.chance(0.1);
    if !enabled {
        g.feat("rule-disabled");
    }
    let mut s = if app_scope {
        g.feat("scope-application");
        format!(
            "configVersion: v3.0\nscope: application\nkey: {}\nenabled: {enabled}\nconfigs:\n",
            g.pick(&["prov-a", "prov-a", "prov-b"])
        )
    } else {
        let key = g.pick(&[
            SERVICE.to_string(),
            SERVICE.to_string(),
            format!("g1/{SERVICE}"),
            format!("{SERVICE}:1.0"),
            "com.foo.Other".to_string(),
        ]);
        if key != SERVICE {
            g.feat("service-key-variant");
        }
        format!("configVersion: v3.0\nscope: service\nkey: {key}\nenabled: {enabled}\nconfigs:\n")
    };
    let items = g.rng.usize(1..=3);
    if items > 1 {
        g.feat("several");
    }
    let mut item_keys: Vec<Vec<&str>> = Vec::new();
    for _ in 0..items {
        s.push_str("  - ");
        let mut first = true;
        let mut field = |s: &mut String, text: String| {
            if !first {
                s.push_str("    ");
            }
            first = false;
            s.push_str(&text);
            s.push('\n');
        };
        if g.chance(0.7) {
            let addrs: Vec<String> = (0..g.rng.usize(1..=2))
                .map(|_| match g.rng.u32(0..6) {
                    0 | 1 => "0.0.0.0".to_string(),
                    2 | 3 => format!("{provider_host}:{provider_port}"),
                    4 => provider_host.to_string(),
                    _ => format!("{provider_host}:{}", provider_port + 1),
                })
                .collect();
            let q: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
            field(&mut s, format!("addresses: [{}]", q.join(", ")));
        }
        if g.chance(0.15) {
            g.feat("provider-addresses");
            field(
                &mut s,
                format!("providerAddresses: [\"{provider_host}:{provider_port}\"]"),
            );
        }
        if g.chance(0.6) {
            g.feat("side-provider");
            field(&mut s, "side: provider".into());
        } else {
            g.feat("item-without-side");
        }
        if app_scope && g.chance(0.5) {
            g.feat("services");
            field(
                &mut s,
                format!("services: [{}]", g.pick(&[SERVICE, "com.foo.Other", "*"])),
            );
        }
        if !app_scope && g.chance(0.2) {
            g.feat("applications");
            field(
                &mut s,
                format!("applications: [{}]", g.pick(&["prov-a", "prov-b"])),
            );
        }
        if g.chance(0.1) {
            g.feat("item-type");
            field(&mut s, format!("type: {}", g.pick(&["general", "other"])));
            field(&mut s, format!("enabled: {}", g.chance(0.5)));
        }
        let mut params = Vec::new();
        if g.chance(0.6) {
            params.push(format!("weight: {}", g.pick(&[0, 1, 7, 50, 200])));
        }
        if g.chance(0.15) {
            g.feat("disable-provider");
            params.push(format!("disabled: {}", g.pick(&["true", "false"])));
        }
        if g.chance(0.6) || params.is_empty() {
            let k = g.pick(WATCHED);
            params.push(format!(
                "{k}: {}",
                match k {
                    "timeout" => "300",
                    "loadbalance" => "leastactive",
                    "retries" => "4",
                    _ => "failfast",
                }
            ));
        }
        item_keys.push(
            params
                .iter()
                .map(|p| {
                    let k = p.split(':').next().unwrap_or("");
                    WATCHED
                        .iter()
                        .chain(["weight", "disabled"].iter())
                        .copied()
                        .find(|w| *w == k)
                        .unwrap_or("")
                })
                .collect(),
        );
        field(&mut s, "parameters:".into());
        for p in params {
            let _ = writeln!(s, "      {p}");
        }
    }
    note_same_key_twice(g, &item_keys);
    s
}

/// Notes `same-key-twice` when two rules set the same provider parameter (their order then
/// decides the result).
pub(super) fn note_same_key_twice(g: &mut Gen, keys: &[Vec<&str>]) {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for rule in keys {
        let mine: BTreeSet<&str> = rule.iter().copied().collect();
        if mine.iter().any(|k| seen.contains(k)) {
            g.feat("same-key-twice");
        }
        seen.extend(mine);
    }
}

/// One provider and override rules (URLs or YAML); see the Java `Configurators`.
pub(super) fn gen_configurator(g: &mut Gen) -> (String, Value) {
    let scenario = g.scenario(&[(55, "override"), (45, "yaml")]);
    let host = format!("10.0.0.{}", g.rng.u32(1..4));
    let port = g.pick(&[20880u16, 20881]);
    let mut params = vec![kv("application", "prov-a"), kv("side", "provider")];
    if g.chance(0.5) {
        params.push(kv("weight", g.pick(&[100, 10, 300])));
    }
    if g.chance(0.5) {
        params.push(kv("timeout", 1000));
    }
    match g.rng.u32(0..20) {
        0 => {
            g.feat("provider-enabled-param");
            params.push(kv("enabled", g.pick(&["false", "true"])));
        }
        1 => {
            g.feat("provider-disabled-param");
            params.push(kv("disabled", g.pick(&["false", "true"])));
        }
        2 => {
            g.feat("provider-enabled-and-disabled");
            params.push(kv("enabled", g.pick(&["false", "true"])));
            params.push(kv("disabled", g.pick(&["false", "true"])));
        }
        _ => {}
    }
    if g.chance(0.15) {
        g.feat("provider-group");
        params.push(kv("group", "g1"));
    }
    if g.chance(0.15) {
        g.feat("provider-version");
        params.push(kv("version", "1.0"));
    }
    let provider = provider_url(&host, port, &params);
    let body = if scenario == "override" {
        let n = g.rng.usize(1..=4);
        let urls: Vec<String> = (0..n).map(|_| override_url(g, &host, port)).collect();
        let keys: Vec<Vec<&str>> = urls
            .iter()
            .map(|u| {
                u.split_once('?')
                    .map_or("", |x| x.1)
                    .split('&')
                    .filter_map(|kv| kv.split_once('=').map(|x| x.0))
                    .filter(|k| *k == "weight" || *k == "disabled" || WATCHED.contains(k))
                    .collect()
            })
            .collect();
        note_same_key_twice(g, &keys);
        if n > 1 {
            g.feat("several");
            let specific = |u: &String| !u.starts_with("override://0.0.0.0");
            if let Some(first_general) = urls.iter().position(|u| !specific(u))
                && urls[..first_general].iter().any(specific)
            {
                g.feat("specific-before-general");
            }
        }
        json!({"provider": provider, "format": "override", "urls": urls, "watch": WATCHED})
    } else {
        let text = config_yaml(g, &host, port);
        json!({"provider": provider, "format": "yaml", "text": text, "watch": WATCHED})
    };
    (scenario.to_string(), body)
}
