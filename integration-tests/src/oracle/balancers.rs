//! Cases for warm-up weights and load-balancer picks.

use serde_json::{Value, json};

use super::*;

// ---------------------------------------------------------------------------------------------
// warmup

pub(super) const WEIGHTS: &[i64] = &[1, 2, 3, 7, 10, 33, 50, 99, 100, 101, 200, 333, 1000, 65535];
pub(super) const WARMUPS: &[i64] = &[1, 7, 1000, 60_000, 599_999, 600_000, 1_234_567];

/// `{"provider", "uptime_ms" (null: no timestamp), "method"}`: the weight Dubbo's
/// `AbstractLoadBalance.getWeight` gives (warm-up included).
pub(super) fn gen_warmup(g: &mut Gen) -> (String, Value) {
    let scenario = g.scenario(&[
        (30, "ramp"),
        (20, "step-boundary"),
        (6, "warm"),
        (4, "uptime-zero"),
        (5, "future-near"),
        (4, "future-far"),
        (5, "no-timestamp"),
        (5, "zero-weight"),
        (4, "negative-weight"),
        (4, "zero-warmup"),
        (4, "method-weight"),
        (5, "default-weight"),
        (4, "default-warmup"),
    ]);
    let mut weight = g.pick(WEIGHTS);
    let mut warmup = Some(g.pick(WARMUPS));
    match scenario {
        "zero-weight" => weight = 0,
        "negative-weight" => weight = g.pick(&[-1, -7, -100]),
        "zero-warmup" => warmup = Some(0),
        "default-warmup" => warmup = None,
        _ => {}
    }
    let wu = warmup.unwrap_or(600_000);
    let ramp = |g: &mut Gen| {
        if wu > 1 { g.rng.i64(1..wu) } else { 1 }
    };
    let uptime: Option<i64> = match scenario {
        "step-boundary" => {
            let w = weight.max(1);
            let k = g.rng.i64(1..=w);
            let at = ((k as f64) * wu as f64 / w as f64).ceil() as i64 + g.pick(&[-1, 0, 1]);
            Some(at.clamp(1, (wu - 1).max(1)))
        }
        "warm" => Some(g.rng.i64(wu..=wu * 3)),
        "uptime-zero" => Some(0),
        "future-near" => Some(-g.rng.i64(1..=wu.max(1))),
        "future-far" => Some(-g.rng.i64(wu + 1..=wu * 3 + 2)),
        "no-timestamp" => None,
        "zero-warmup" => Some(g.pick(&[1, 50, -50])),
        _ => Some(ramp(g)),
    };
    let method = g.pick(&["sayHello", "find", "get"]);
    let mut params = vec![kv("application", "prov-a")];
    if scenario != "default-weight" {
        params.push(kv("weight", weight));
    }
    if let Some(w) = warmup {
        params.push(kv("warmup", w));
    }
    if scenario == "method-weight" {
        params.push(kv(&format!("{method}.weight"), g.pick(&[5, 50, 300])));
        g.feat("method-weight");
    }
    if uptime.is_some_and(|u| u < 0) {
        g.feat("future-timestamp");
    }
    let body = json!({
        "provider": provider_url("10.0.0.1", 20880, &params),
        "uptime_ms": uptime,
        "method": method,
    });
    (format!("warmup/{scenario}"), body)
}

// ---------------------------------------------------------------------------------------------
// loadbalance

/// A warm-up uptime in the middle of a weight step (so the clock moving a little during the
/// Java run does not change a weight).
pub(super) fn mid_step_uptime(g: &mut Gen, weight: i64, warmup: i64) -> i64 {
    let w = weight.max(1);
    let k = g.rng.i64(0..w);
    (((k as f64) + 0.5) * warmup as f64 / w as f64) as i64
}

/// Providers, uptimes, stats and invocations for one balancer; see the Java `Balancers`.
pub(super) fn gen_loadbalance(g: &mut Gen) -> (String, Value) {
    let balancer = g.scenario(&[
        (25, "random"),
        (25, "roundrobin"),
        (15, "leastactive"),
        (15, "shortestresponse"),
        (20, "consistenthash"),
    ]);
    let scenario = match balancer {
        "random" => g.scenario(&[
            (30, "weights"),
            (10, "equal"),
            (15, "zero-weights"),
            (6, "all-zero"),
            (15, "warming"),
            (8, "unweighted-first"),
            (16, "many"),
            (10, "retry"),
            (2, "retry-all-tried"),
        ]),
        "roundrobin" => g.scenario(&[
            (30, "weights"),
            (8, "equal"),
            (12, "zero-weights"),
            (6, "all-zero"),
            (14, "warming"),
            (18, "methods"),
            (12, "gcd"),
        ]),
        "leastactive" => g.scenario(&[
            (35, "actives"),
            (20, "ties"),
            (12, "zero-weight-idle"),
            (15, "warming"),
            (8, "large"),
            (10, "equal"),
            (10, "retry"),
        ]),
        "shortestresponse" => g.scenario(&[
            (30, "samples"),
            (15, "ties"),
            (12, "ms-granularity"),
            (13, "active"),
            (10, "failures"),
            (10, "no-samples"),
            (10, "zero-weight"),
        ]),
        _ => g.scenario(&[
            (25, "string-keys"),
            (15, "int-keys"),
            (16, "typed-keys"),
            (10, "double-keys"),
            (8, "bool-null"),
            (12, "two-arguments"),
            (6, "arguments-out-of-range"),
            (12, "nodes"),
            (8, "zero-weight"),
            (4, "single"),
            (12, "retry"),
            (2, "retry-all-tried"),
        ]),
    };
    let n = match scenario {
        "many" => g.rng.usize(5..=12),
        "large" => g.rng.usize(20..=24),
        "single" => 1,
        _ => g.rng.usize(2..=8),
    };
    let mut weights: Vec<Option<i64>> = (0..n)
        .map(|_| Some(g.pick(&[1, 2, 3, 5, 10, 50, 100, 200])))
        .collect();
    match scenario {
        "equal" | "ties" => {
            let w = g.pick(&[1, 100, 7]);
            if scenario == "equal" {
                weights.iter_mut().for_each(|x| *x = Some(w));
            }
        }
        "zero-weights" | "zero-weight" => {
            let zeros = g.rng.usize(1..n.max(2));
            for w in weights.iter_mut().take(zeros) {
                *w = Some(0);
            }
            g.rng.shuffle(&mut weights);
            if weights.iter().all(|w| *w == Some(0)) {
                weights[0] = Some(100);
            }
        }
        "all-zero" => weights.iter_mut().for_each(|x| *x = Some(0)),
        "zero-weight-idle" => weights[0] = Some(0),
        "unweighted-first" => weights[0] = None,
        "gcd" => {
            for w in weights.iter_mut() {
                *w = Some(10 * g.pick(&[1, 2, 3, 6]));
            }
        }
        _ => {}
    }
    if balancer == "consistenthash" && scenario != "zero-weight" && g.chance(0.6) {
        weights.iter_mut().for_each(|w| *w = None);
    }
    let warmup = 600_000;
    let uptimes: Vec<Option<i64>> = (0..n)
        .map(|i| {
            if scenario == "warming" && g.chance(0.6) {
                Some(mid_step_uptime(g, weights[i].unwrap_or(100), warmup))
            } else if scenario == "warming" || g.chance(0.2) {
                Some(g.rng.i64(warmup..warmup * 10))
            } else {
                None
            }
        })
        .collect();
    if uptimes.iter().any(Option::is_some) {
        g.feat("timestamps");
    }
    // Hash parameters (read from the first provider, as Dubbo does).
    let mut hash_params: Vec<(String, String)> = Vec::new();
    if balancer == "consistenthash" {
        match scenario {
            "two-arguments" => hash_params.push(kv("hash.arguments", "0,1")),
            "arguments-out-of-range" => {
                hash_params.push(kv("hash.arguments", g.pick(&["1", "2", "0,3"])))
            }
            "nodes" => hash_params.push(kv("hash.nodes", g.pick(&[4, 8, 40, 161, 163, 320]))),
            "typed-keys" if g.chance(0.4) => hash_params.push(kv("hash.arguments", "0,1")),
            _ => {}
        }
    }
    let mut providers = Vec::with_capacity(n);
    for (i, weight) in weights.iter().enumerate() {
        let host = format!("10.0.{}.{}", i / 8, i % 8 + 1);
        let port = 20880 + (i % 3) as u16;
        let mut params = vec![kv("application", "prov-a")];
        if let Some(w) = weight {
            params.push(kv("weight", w));
        }
        if i == 0 {
            params.extend(hash_params.iter().cloned());
        }
        providers.push(provider_url(&host, port, &params));
    }
    // Stats (leastactive, shortestresponse).
    let mut stats: Vec<Value> = Vec::new();
    if balancer == "leastactive" {
        let same = g.rng.u32(0..3);
        for i in 0..n {
            let active = match scenario {
                "ties" | "equal" => same,
                "zero-weight-idle" => {
                    if i == 0 {
                        0
                    } else {
                        g.rng.u32(1..4)
                    }
                }
                _ => g.rng.u32(0..4),
            };
            stats.push(json!({"active": active}));
        }
    }
    if balancer == "shortestresponse" {
        let base: Vec<i64> = (0..g.rng.usize(1..4)).map(|_| g.rng.i64(1..40)).collect();
        for i in 0..n {
            let succeeded: Vec<i64> = match scenario {
                "no-samples" => Vec::new(),
                "ties" => base.clone(),
                "ms-granularity" => {
                    if i % 2 == 0 {
                        vec![2]
                    } else {
                        vec![2, 3]
                    }
                }
                "samples" => (0..g.rng.usize(0..5)).map(|_| g.rng.i64(1..50)).collect(),
                // Whole-millisecond averages, so these scenarios do not also hit the known
                // millisecond-granularity difference.
                _ => {
                    let v = g.rng.i64(1..50);
                    vec![v; g.rng.usize(0..5)]
                }
            };
            let failed: Vec<i64> = if scenario == "failures" && g.chance(0.5) {
                g.feat("failures");
                (0..g.rng.usize(1..4)).map(|_| g.rng.i64(1..50)).collect()
            } else {
                Vec::new()
            };
            let active = if scenario == "active" {
                g.rng.u32(0..3)
            } else {
                0
            };
            let sum: i64 = succeeded.iter().sum();
            if !succeeded.is_empty() && sum % succeeded.len() as i64 != 0 {
                // Dubbo averages in whole milliseconds (integer division).
                g.feat("sub-ms-average");
            }
            stats.push(json!({"active": active, "succeeded_ms": succeeded, "failed_ms": failed}));
        }
    }
    // Invocations.
    let mode = match balancer {
        "roundrobin" | "consistenthash" => "sequence",
        _ => "histogram",
    };
    let mut invocations = Vec::new();
    let count = match balancer {
        "roundrobin" => {
            let total: i64 = weights.iter().map(|w| w.unwrap_or(100).max(0)).sum();
            (total.clamp(5, 120) * 2) as usize
        }
        "consistenthash" => 40,
        _ => 1,
    };
    let methods: Vec<&str> = if scenario == "methods" {
        vec!["find", "get", "save"][..g.rng.usize(2..=3)].to_vec()
    } else {
        vec!["find"]
    };
    for _ in 0..count {
        let method = g.pick(&methods);
        if scenario == "typed-keys" {
            let (args, types): (Vec<Value>, Vec<&str>) = (0..2).map(|_| typed_hash_arg(g)).unzip();
            invocations.push(json!({"method": method, "args": args, "types": types}));
            continue;
        }
        let args: Vec<Value> = if balancer == "consistenthash" {
            hash_args(g, scenario)
        } else {
            vec![json!("x")]
        };
        invocations.push(json!({"method": method, "args": args}));
    }
    if weights.contains(&Some(0)) {
        g.feat("zero-weight");
    }
    // Retries: the picks avoid the instances already tried in the call (Dubbo's reselect).
    let tried: Option<Vec<usize>> = match scenario {
        "retry" => {
            let mut all: Vec<usize> = (0..n).collect();
            g.rng.shuffle(&mut all);
            let k = g.rng.usize(1..n.max(2));
            let mut t: Vec<usize> = all[..k.min(n - 1).max(1)].to_vec();
            t.sort_unstable();
            Some(t)
        }
        "retry-all-tried" => Some((0..n).collect()),
        _ => None,
    };
    if tried.is_some() {
        g.feat("retry");
    }
    let mut body = json!({
        "balancer": balancer,
        "service": SERVICE,
        "consumer": format!("consumer://10.0.9.9/{SERVICE}?application=shop&interface={SERVICE}"),
        "providers": providers,
        "uptimes_ms": uptimes,
        "stats": stats,
        "invocations": invocations,
        "mode": mode,
        "picks": HISTOGRAM_PICKS,
    });
    if let Some(t) = tried {
        body["tried"] = json!(t);
    }
    (format!("{balancer}/{scenario}"), body)
}

pub(super) fn hash_args(g: &mut Gen, scenario: &str) -> Vec<Value> {
    let one = |g: &mut Gen| -> Value {
        match scenario {
            "int-keys" => json!(g.rng.i64(-1000..100_000)),
            "double-keys" => {
                let x = g.pick(&[
                    1.5,
                    2.0,
                    0.1,
                    1e10,
                    1e-5,
                    0.001,
                    123_456_789.0,
                    1e7,
                    9_999_999.0,
                    -0.5,
                    3.25e21,
                ]);
                json!(x)
            }
            "bool-null" => g.pick(&[json!(true), json!(false), Value::Null, json!("null")]),
            _ => json!(format!(
                "{}{}",
                g.pick(&["user", "order", "k", "", "Ω", "a b"]),
                g.rng.u32(0..10_000)
            )),
        }
    };
    match scenario {
        "two-arguments" => vec![one(g), json!(g.rng.i64(0..1000))],
        "arguments-out-of-range" => vec![one(g)],
        _ => {
            let mut v = vec![one(g)];
            if g.chance(0.3) {
                v.push(json!("second"));
            }
            v
        }
    }
}

/// One argument with its declared Java type (`Invocation::parameter_types`): the key is the
/// Java text of the object that type makes of the JSON (`5` as a `double` is `5.0`, a list
/// `[a, b]`, a map in `HashMap` order). Floats stay below 10^7 and doubles below 10^15: past
/// them JDK 17 prints digits JDK 19+ does not (documented in `switchman_core::java_text`).
pub(super) fn typed_hash_arg(g: &mut Gen) -> (Value, &'static str) {
    let word = |g: &mut Gen| {
        format!(
            "{}{}",
            g.pick(&["user", "order", "k", "", "Ω", "a b", "Aa", "BB"]),
            g.rng.u32(0..50)
        )
    };
    match g.rng.u32(0..9) {
        0 | 1 => {
            g.feat("typed-double");
            let any = json!(g.rng.i64(-1000..100_000));
            let v = g.pick(&[
                json!(5),
                json!(100),
                json!(-3),
                json!(0),
                json!(123_456_789),
                json!(1.5),
                json!(0.1),
                json!(1e10),
                json!(1e-5),
                json!(2.0),
                json!(9_999_999),
                any,
            ]);
            (v, g.pick(&["double", "java.lang.Double"]))
        }
        2 => {
            g.feat("typed-long");
            let t = g.pick(&["long", "java.lang.Long", "int"]);
            let any = json!(g.rng.i64(-1000..100_000));
            let big = if t == "int" {
                json!(i32::MAX)
            } else {
                json!(3_000_000_000i64)
            };
            // 7.0: a whole JSON float is the integer 7.
            (g.pick(&[any, big, json!(7.0), json!(-1)]), t)
        }
        3 => {
            g.feat("typed-float");
            let v = g.pick(&[
                json!(0.1),
                json!(1.5),
                json!(3),
                json!(2_417_552.25),
                json!(1e-4),
            ]);
            (v, g.pick(&["float", "java.lang.Float"]))
        }
        4 => {
            g.feat("typed-list");
            let items: Vec<Value> = (0..g.rng.usize(0..5)).map(|_| json!(word(g))).collect();
            let t = g.pick(&["java.util.List", "java.util.List<java.lang.String>"]);
            (Value::Array(items), t)
        }
        5 => {
            g.feat("typed-set");
            let items: Vec<Value> = (0..g.rng.usize(0..8)).map(|_| json!(word(g))).collect();
            (Value::Array(items), "java.util.Set")
        }
        6 => {
            g.feat("typed-map");
            // Up to 30 keys: the table grows from 16 to 32 and 64 buckets.
            let n = g.pick(&[1usize, 2, 5, 12, 13, 25, 30]);
            let m: serde_json::Map<String, Value> = (0..n)
                .map(|_| (word(g), json!(g.rng.i64(0..100))))
                .collect();
            (
                Value::Object(m),
                g.pick(&["java.util.Map", "java.util.HashMap"]),
            )
        }
        7 => {
            g.feat("typed-bigdecimal");
            let v = g.pick(&["1.50", "1e10", "0.0000001", "-0", "123.456e2", "7", "0.00"]);
            (json!(v), "java.math.BigDecimal")
        }
        _ => (json!(word(g)), "java.lang.String"),
    }
}
