//! Tag-rule cases and the router component's generator.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::*;

pub(super) fn tag_yaml(g: &mut Gen, providers: &[String]) -> String {
    let v30 = g.chance(0.7);
    let force = g.chance(0.3);
    let enabled = !g.chance(0.08);
    if force {
        g.feat("tag-rule-force");
    }
    if !enabled {
        g.feat("disabled");
    }
    let mut s = format!(
        "configVersion: {}\nforce: {force}\nenabled: {enabled}\nruntime: true\nkey: prov-a\ntags:\n",
        if v30 { "v3.0" } else { "v2.7" }
    );
    let names = ["gray", "blue", "gray|team1", "canary"];
    let count = g.rng.usize(1..=3);
    let mut used = Vec::new();
    for _ in 0..count {
        let name = g.pick(&names);
        if used.contains(&name) {
            continue;
        }
        used.push(name);
        let _ = writeln!(s, "  - name: {}", yaml_quote(name));
        if v30 && g.chance(0.35) {
            g.feat("tag-match");
            let key = g.pick(&["env", "zone", "region"]);
            let (op, val) = g.pick(&[
                ("exact", "gray"),
                ("exact", "z1"),
                ("prefix", "ca"),
                ("prefix", "z"),
                ("regex", "z[12]"),
                ("wildcard", "g*"),
                ("noempty", "x"),
                ("empty", "x"),
            ]);
            if op == "wildcard" || op == "empty" || op == "noempty" {
                g.feat(&format!("tag-match-{op}"));
            }
            let _ = write!(
                s,
                "    match:\n      - key: {key}\n        value:\n          {op}: {}\n",
                yaml_quote(val)
            );
        } else {
            let mut addrs = Vec::new();
            for _ in 0..g.rng.usize(1..=3) {
                let p = g.pick(providers);
                let (host, port) = url_host_port(&p);
                let a = match g.rng.u32(0..10) {
                    0..=4 => format!("{host}:{port}"),
                    5 => host.clone(),
                    6 => {
                        g.feat("tag-address-glob");
                        format!("{}.*", host.rsplit_once('.').map_or("10.0.0", |x| x.0))
                    }
                    7 => {
                        g.feat("tag-address-anyhost");
                        format!("0.0.0.0:{port}")
                    }
                    8 => {
                        g.feat("tag-address-cidr");
                        "10.0.0.0/24".to_string()
                    }
                    _ => {
                        g.feat("tag-address-range");
                        "10.0.0.1-3".to_string()
                    }
                };
                if !addrs.contains(&a) {
                    addrs.push(a);
                }
            }
            let quoted: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
            let _ = writeln!(s, "    addresses: [{}]", quoted.join(", "));
        }
    }
    s
}

/// Providers, consumer, rules and one invocation; see the Java `Routers`.
pub(super) fn gen_router(g: &mut Gen) -> (String, Value) {
    let scenario = g.scenario(&[
        (22, "v2"),
        (8, "v2url"),
        (18, "v30"),
        (16, "v31"),
        (16, "tag"),
        (6, "tag-static"),
        (9, "chain"),
        (5, "invalid"),
    ]);
    let tags = matches!(scenario, "tag" | "tag-static" | "chain");
    let providers = router_providers(g, tags);
    let mut inv = gen_invocation(g);
    // Request tag.
    let mut consumer_tag = None;
    if tags {
        let t = g.pick(&["gray", "blue", "gray|team1", "canary", "none", "none"]);
        if t != "none" {
            if t.contains('|') {
                g.feat("tag-level");
            }
            if g.chance(0.3) {
                consumer_tag = Some(t);
                g.feat("consumer-tag");
            } else {
                inv["attachments"]["dubbo.tag"] = json!(t);
            }
        }
        if g.chance(0.25) {
            let f = g.pick(&["true", "false"]);
            inv["attachments"]["dubbo.force.tag"] = json!(f);
            if f == "true" {
                g.feat("force-tag");
            }
        }
    }
    let consumer = consumer_url(g, consumer_tag);
    let app = url_param(&consumer, "application")
        .unwrap_or("shop")
        .to_string();
    let service_key = format!("{SERVICE}::.condition-router");
    let app_key = format!("{app}.condition-router");
    let mut rules: Vec<Value> = Vec::new();
    let push = |rules: &mut Vec<Value>, key: &str, format: &str, scope: &str, text: String| {
        rules.push(json!({"key": key, "format": format, "scope": scope, "text": text}));
    };
    match scenario {
        "v2" => {
            let n = g.pick(&[1, 1, 1, 2, 3]);
            if n > 1 {
                g.feat("multi-line");
            }
            let lines: Vec<String> = (0..n)
                .map(|_| condition_line(g, &inv, &providers))
                .collect();
            let scope = if g.chance(0.2) {
                "application"
            } else {
                "service"
            };
            let key = if scope == "service" {
                &service_key
            } else {
                &app_key
            };
            push(&mut rules, key, "v2", scope, lines.join("\n"));
        }
        "v2url" => {
            let line = condition_line(g, &inv, &providers);
            let force = g.chance(0.4);
            if force {
                g.feat("force");
            }
            let mut url = format!(
                "condition://0.0.0.0/{SERVICE}?category=routers&dynamic=false&force={force}"
            );
            if g.chance(0.1) {
                g.feat("disabled");
                url.push_str("&enabled=false");
            }
            let _ = write!(
                url,
                "&rule={}",
                switchman_core::url::encode_component(&line)
            );
            push(&mut rules, &service_key, "v2url", "service", url);
        }
        "v30" | "invalid" => {
            let n = g.pick(&[1, 1, 2, 3]);
            let mut lines: Vec<String> = (0..n)
                .map(|_| condition_line(g, &inv, &providers))
                .collect();
            if scenario == "invalid" {
                let at = g.rng.usize(..lines.len());
                lines[at] = invalid_line(g);
            }
            let scope = if g.chance(0.25) {
                "application"
            } else {
                "service"
            };
            let (key, rkey) = if scope == "service" {
                (service_key.as_str(), SERVICE.to_string())
            } else {
                (app_key.as_str(), app.clone())
            };
            if scenario == "invalid" && g.chance(0.4) {
                push(&mut rules, key, "v2", scope, lines.join("\n"));
            } else {
                let text = v30_yaml(g, scope, &rkey, &lines);
                push(&mut rules, key, "yaml", scope, text);
            }
        }
        "v31" => {
            let scope = if g.chance(0.25) {
                "application"
            } else {
                "service"
            };
            let (key, rkey) = if scope == "service" {
                (service_key.as_str(), SERVICE.to_string())
            } else {
                (app_key.as_str(), app.clone())
            };
            let text = v31_yaml(g, scope, &rkey, &inv, &providers);
            push(&mut rules, key, "yaml", scope, text);
        }
        "tag" => {
            let text = tag_yaml(g, &providers);
            push(&mut rules, "prov-a.tag-router", "tag", "application", text);
        }
        "tag-static" => {}
        _ => {
            // chain: tag rule, a service rule, an application rule.
            if g.chance(0.7) {
                let text = tag_yaml(g, &providers);
                push(&mut rules, "prov-a.tag-router", "tag", "application", text);
            }
            let lines = vec![condition_line(g, &inv, &providers)];
            if g.chance(0.5) {
                push(&mut rules, &service_key, "v2", "service", lines.join("\n"));
            } else {
                let text = v30_yaml(g, "service", SERVICE, &lines);
                push(&mut rules, &service_key, "yaml", "service", text);
            }
            let lines = vec![condition_line(g, &inv, &providers)];
            let text = v30_yaml(g, "application", &app, &lines);
            push(&mut rules, &app_key, "yaml", "application", text);
        }
    }
    let random = rules
        .iter()
        .any(|r| r["text"].as_str().is_some_and(|t| t.contains("v3.1")));
    let body = json!({
        "service": SERVICE,
        "consumer": consumer,
        "providers": providers,
        "rules": rules,
        "invocation": inv,
        "samples": if random { ROUTE_SAMPLES } else { 1 },
    });
    (scenario.to_string(), body)
}
