//! Condition-rule cases: providers, invocations, rule lines (v2 text, v3.0 and v3.1 YAML).

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::*;

// ---------------------------------------------------------------------------------------------
// router

pub(super) const METHODS: &[&str] = &[
    "findUser",
    "findOrder",
    "getUser",
    "save",
    "listAll",
    "ping",
];

/// A provider's parameters for routing cases.
pub(super) fn router_providers(g: &mut Gen, tags: bool) -> Vec<String> {
    let n = g.rng.usize(3..=8);
    let mut addrs: Vec<(String, u16)> = Vec::new();
    while addrs.len() < n {
        let host = format!("10.0.{}.{}", g.pick(&[0, 0, 1]), g.rng.u32(1..7));
        let port = g.pick(&[20880u16, 20880, 20881, 20882]);
        if !addrs.iter().any(|a| a.0 == host && a.1 == port) {
            addrs.push((host, port));
        }
    }
    addrs
        .into_iter()
        .map(|(host, port)| {
            let mut params = vec![kv("application", g.pick(&["prov-a", "prov-a", "prov-b"]))];
            if g.chance(0.8) {
                params.push(kv("zone", g.pick(&["z1", "z2", "z3"])));
            }
            if g.chance(0.6) {
                params.push(kv("env", g.pick(&["gray", "prod", "canary"])));
            }
            if g.chance(0.5) {
                params.push(kv("region", g.pick(&["hz", "bj"])));
            }
            if g.chance(0.5) {
                let size = if g.chance(0.1) {
                    "big".to_string()
                } else {
                    g.rng.u32(1..200).to_string()
                };
                params.push(kv("size", size));
            }
            if g.chance(0.3) {
                params.push(kv("version", g.pick(&["1.0", "2.0"])));
            }
            if tags && g.chance(0.35) {
                params.push(kv("dubbo.tag", g.pick(&["gray", "blue", "gray|team1"])));
            }
            provider_url(&host, port, &params)
        })
        .collect()
}

pub(super) fn url_param<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    let q = url.split_once('?')?.1;
    q.split('&').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k == key).then_some(v)
    })
}

pub(super) fn url_host_port(url: &str) -> (String, u16) {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    let hp = rest.split(['/', '?']).next().unwrap_or("");
    match hp.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().unwrap_or(0)),
        None => (hp.to_string(), 0),
    }
}

/// One condition `key op values` of a *when* (`when = true`) or *then* part; notes features.
pub(super) fn condition(g: &mut Gen, when: bool, inv: &Value, providers: &[String]) -> String {
    // What the key reads, for the features that depend on the values chosen below.
    // Some(None): a missing argument; Some(Some(integer)): whether it reads as an integer.
    let mut argument: Option<Option<bool>> = None;
    let mut non_int_sizes = false;
    let (key, values): (String, Vec<&str>) = if when {
        match g.rng.u32(0..10) {
            0..=3 => (
                "method".into(),
                vec![
                    "findUser", "find*", "*User", "f*r", "get*", "save", "*", "listAll", "*o*r",
                    "ping",
                ],
            ),
            4 | 5 => {
                let i = g.pick(&[0usize, 0, 1]);
                g.feat("arguments");
                argument = Some(inv["args"].get(i).map(|_| integer_argument(inv, i)));
                (
                    format!("arguments[{i}]"),
                    vec![
                        "1~100", "~50", "100~", "5", "vip", "a*", "1.5", "true", "null", "x1",
                        "5.0", "*.0", "-3.0",
                    ],
                )
            }
            6 => {
                let k = g.pick(&["env", "trace", "dubbo.tag"]);
                g.feat("attachments");
                if k.contains('.') {
                    g.feat("attachment-dotted-key");
                }
                (
                    format!("attachments[{k}]"),
                    vec!["gray", "prod", "t*", "*", "blue"],
                )
            }
            7 => ("application".into(), vec!["shop", "batch", "s*"]),
            8 => ("host".into(), vec!["10.0.9.9", "10.0.9.*", "10.0.9.10"]),
            _ => {
                let k = g.pick(&["zone", "env", "region", "consumer.application"]);
                if k.starts_with("consumer.") {
                    g.feat("key-prefix");
                }
                g.feat("consumer-param");
                (k.to_string(), vec!["z1", "gray", "hz", "shop", "$zone"])
            }
        }
    } else {
        match g.rng.u32(0..12) {
            0..=2 => (
                "zone".into(),
                vec!["$zone", "z1", "z2", "z*", "$zone", "z3"],
            ),
            3 => ("env".into(), vec!["gray", "prod", "$env", "canary"]),
            4 => ("region".into(), vec!["$region", "hz", "bj"]),
            5 => (
                "host".into(),
                vec!["10.0.0.*", "10.0.0.1", "10.0.1.*", "$host"],
            ),
            6 => ("port".into(), vec!["20880", "20881", "2088*"]),
            7 => (
                "address".into(),
                vec!["*:20881", "10.0.0.1:20880", "10.0.0.*"],
            ),
            8 => ("application".into(), vec!["prov-a", "prov-*", "prov-b"]),
            9 => {
                non_int_sizes = providers
                    .iter()
                    .any(|p| url_param(p, "size") == Some("big"));
                ("size".into(), vec!["1~100", "~50", "100~", "20~180", "7"])
            }
            10 => ("version".into(), vec!["1.0", "2.0", "*"]),
            _ => {
                g.feat("key-prefix");
                ("provider.zone".into(), vec!["z1", "z2"])
            }
        }
    };
    let neg = g.chance(0.25);
    let n = if g.chance(0.25) { 2 } else { 1 };
    let mut vals: Vec<String> = Vec::new();
    while vals.len() < n {
        let v = g.pick(&values).to_string();
        if !vals.contains(&v) {
            vals.push(v);
        }
    }
    if neg {
        g.feat("negation");
    }
    if vals.len() > 1 {
        g.feat("list");
    }
    let mut s = format!("{key} {} {}", if neg { "!=" } else { "=" }, vals.join(","));
    // Sometimes the same key again with the other operator (one merged condition).
    if g.chance(0.08) {
        let v = g.pick(&values).to_string();
        let _ = write!(s, " & {key} {} {v}", if neg { "=" } else { "!=" });
        vals.push(v);
        g.feat("match-and-mismatch");
    }
    for v in &vals {
        note_value(g, v, when);
    }
    let ranged = vals.iter().any(|v| v.contains('~'));
    match argument {
        // Dubbo compares a placeholder for a missing argument: `!=` and `*` match, and a
        // range reads it as 0.
        Some(None) if s.contains("!=") || ranged || vals.iter().any(|v| v == "*") => {
            g.feat("argument-missing");
        }
        Some(Some(integer)) if ranged && !integer => g.feat("range-on-non-int-argument"),
        _ => {}
    }
    if non_int_sizes && ranged {
        g.feat("range-on-non-int-param");
    }
    s
}

pub(super) fn note_value(g: &mut Gen, v: &str, when: bool) {
    let stars = v.matches('*').count();
    if v == "*" {
        g.feat("glob-any");
    } else if stars > 1 {
        g.feat("glob-multi");
    } else if stars == 1 {
        if v.ends_with('*') {
            g.feat("glob-prefix");
        } else if v.starts_with('*') {
            g.feat("glob-suffix");
        } else {
            g.feat("glob-middle");
        }
    }
    if v.contains('~') {
        g.feat("range");
        if v.starts_with('~') {
            g.feat("range-open-start");
        }
        if v.ends_with('~') {
            g.feat("range-open-end");
        }
    }
    if v.starts_with('$') {
        g.feat(if when { "dollar-in-when" } else { "dollar-ref" });
    }
}

/// One condition rule line (`when => then` and its variants).
pub(super) fn condition_line(g: &mut Gen, inv: &Value, providers: &[String]) -> String {
    let part = |g: &mut Gen, is_when: bool| -> String {
        let n = if g.chance(0.3) { 2 } else { 1 };
        (0..n)
            .map(|_| condition(g, is_when, inv, providers))
            .collect::<Vec<_>>()
            .join(" & ")
    };
    match g.scenario(&[
        (60, "when-then"),
        (9, "blank-when"),
        (4, "true-when"),
        (7, "blank-then"),
        (4, "false-then"),
        (8, "no-arrow"),
    ]) {
        "blank-when" => {
            g.feat("blank-when");
            format!("=> {}", part(g, false))
        }
        "true-when" => {
            g.feat("true-when");
            format!("true => {}", part(g, false))
        }
        "blank-then" => {
            g.feat("blank-then");
            format!("{} =>", part(g, true))
        }
        "false-then" => {
            g.feat("false-then");
            format!("{} => false", part(g, true))
        }
        "no-arrow" => {
            g.feat("no-arrow");
            part(g, false)
        }
        _ => format!("{} => {}", part(g, true), part(g, false)),
    }
}

/// A line Dubbo's parser rejects.
pub(super) fn invalid_line(g: &mut Gen) -> String {
    g.feat("invalid");
    g.pick(&[
        "method = find* && env = gray => zone = z1",
        ", method = find* => zone = z1",
        "= findUser => zone = z1",
        "method =! find* => zone = z1",
        "method = find* => zone == z1",
        "method = find* => , zone = z1",
    ])
    .to_string()
}

pub(super) fn yaml_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub(super) fn gen_invocation(g: &mut Gen) -> Value {
    let method = g.pick(METHODS);
    let nargs = g.pick(&[0usize, 1, 1, 1, 2]);
    let args: Vec<Value> = (0..nargs)
        .map(|_| {
            let int = json!(g.rng.i64(1..200));
            g.pick(&[
                int.clone(),
                int,
                json!("vip"),
                json!("x1"),
                json!("abc"),
                json!(1.5),
                json!(true),
                Value::Null,
                json!(-3),
            ])
        })
        .collect();
    let mut att = Map::new();
    if g.chance(0.4) {
        att.insert("env".into(), json!(g.pick(&["gray", "prod"])));
    }
    if g.chance(0.2) {
        att.insert("trace".into(), json!("t1"));
    }
    let mut inv = json!({"method": method, "args": args, "attachments": att});
    // Declared parameter types: `arguments[i]` reads the Java text of the object the type
    // makes of the JSON (42 as a double is "42.0").
    if !args.is_empty() && g.chance(0.3) {
        g.feat("typed-arguments");
        let types: Vec<&str> = args
            .iter()
            .map(|a| match a {
                Value::Number(n) if n.is_i64() => g.pick(&[
                    "double",
                    "java.lang.Double",
                    "long",
                    "int",
                    "java.lang.Integer",
                ]),
                Value::Number(_) => g.pick(&["double", "java.lang.Double"]),
                Value::Bool(_) => "boolean",
                Value::String(_) => "java.lang.String",
                _ => g.pick(&["java.lang.Double", "java.lang.String"]),
            })
            .collect();
        if types.iter().any(|t| t.ends_with("ouble")) {
            g.feat("typed-double-argument");
        }
        inv["types"] = json!(types);
    }
    inv
}

/// Whether argument `i` of `inv` reads as an integer (Dubbo's ranges compare integers): a JSON
/// integer not declared as a floating-point type.
pub(super) fn integer_argument(inv: &Value, i: usize) -> bool {
    let declared_float = inv["types"][i].as_str().is_some_and(|t| {
        matches!(
            t,
            "double" | "java.lang.Double" | "float" | "java.lang.Float"
        )
    });
    inv["args"][i].is_i64() && !declared_float
}

pub(super) fn consumer_url(g: &mut Gen, tag: Option<&str>) -> String {
    let host = g.pick(&["10.0.9.9", "10.0.9.9", "10.0.9.10"]);
    let mut s = format!(
        "consumer://{host}/{SERVICE}?application={}&interface={SERVICE}",
        g.pick(&["shop", "shop", "batch"])
    );
    if g.chance(0.7) {
        let _ = write!(s, "&zone={}", g.pick(&["z1", "z2"]));
    }
    if g.chance(0.5) {
        let _ = write!(s, "&env={}", g.pick(&["gray", "prod"]));
    }
    if g.chance(0.3) {
        s.push_str("&region=hz");
    }
    if let Some(t) = tag {
        let _ = write!(s, "&dubbo.tag={t}");
    }
    s
}

pub(super) fn v30_yaml(g: &mut Gen, scope: &str, key: &str, lines: &[String]) -> String {
    let force = g.chance(0.4);
    let enabled = !g.chance(0.08);
    if force {
        g.feat("force");
    }
    if !enabled {
        g.feat("disabled");
    }
    let mut s = format!(
        "configVersion: v3.0\nscope: {scope}\nkey: {key}\nforce: {force}\nenabled: {enabled}\nruntime: {}\n",
        g.chance(0.5)
    );
    if g.chance(0.3) {
        let _ = writeln!(s, "priority: {}", g.rng.u32(0..5));
    }
    s.push_str("conditions:\n");
    for l in lines {
        let _ = writeln!(s, "  - {}", yaml_quote(l));
    }
    s
}

pub(super) fn v31_yaml(
    g: &mut Gen,
    scope: &str,
    key: &str,
    inv: &Value,
    providers: &[String],
) -> String {
    let force = g.chance(0.4);
    if force {
        g.feat("force");
    }
    let mut s = format!(
        "configVersion: v3.1\nscope: {scope}\nkey: {key}\nforce: {force}\nenabled: true\nruntime: true\nconditions:\n"
    );
    for _ in 0..g.rng.usize(1..=2) {
        s.push_str("  - from:\n");
        if g.chance(0.15) {
            g.feat("blank-from");
            s.push_str("      match:\n");
        } else {
            let n = if g.chance(0.3) { 2 } else { 1 };
            let when: Vec<String> = (0..n).map(|_| condition(g, true, inv, providers)).collect();
            let _ = writeln!(s, "      match: {}", yaml_quote(&when.join(" & ")));
        }
        if g.chance(0.1) {
            g.feat("no-to");
            continue;
        }
        s.push_str("    to:\n");
        let dests = g.rng.usize(1..=3);
        if dests > 1 {
            g.feat("multi-destination");
        }
        for _ in 0..dests {
            if g.chance(0.08) {
                g.feat("blank-destination");
                s.push_str("      - match: ''\n");
            } else {
                let then = condition(g, false, inv, providers);
                let _ = writeln!(s, "      - match: {}", yaml_quote(&then));
            }
            if g.chance(0.7) {
                let w = g.pick(&[10, 20, 50, 80, 100, 300, 0, -5]);
                if w <= 0 {
                    g.feat("nonpositive-weight");
                }
                let _ = writeln!(s, "        weight: {w}");
            }
        }
    }
    s
}
