//! The differential oracle: Apache Dubbo itself decides.
//!
//! [`generate`] makes seeded cases for the decisions Dubbo's cluster layer takes from data alone:
//! warm-up weights, load-balancer picks, routed address lists, configurator results and
//! service-key matching. [`run_java`] answers a whole batch with Dubbo 3.3's own classes in
//! one JVM (the `oracle` program of `peers/java`, see its README); `tests/oracle.rs` answers
//! the same cases with Switchman's public APIs, and [`compare`] decides whether two answers
//! agree: deterministic answers must be equal, random ones (histograms of picks or routes) must
//! not be told apart by a chi-square test of homogeneity at [`SIGNIFICANCE`].
//!
//! Known differences are listed in `integration-tests/oracle-deviations.yaml` ([`Deviations`]):
//! a disagreement on a case that an entry matches (component, a glob on the case kind, and
//! optionally features the case must have) is counted as documented (or as open when the
//! entry's reason starts with `open:`), not as new. [`Tally`] prints the counts per component.
//!
//! A case is a JSON object (what the Java side reads) with `id`, `component`, `kind`,
//! `features` and the component's fields; every answer is a JSON object too, or
//! `{"error": "..."}`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::java_peer::peers_dir;

/// JVM options of the oracle: a small heap and the serial collector like the other peers, but
/// tiered compilation left on (a batch of thousands of cases runs long enough for C2 to pay).
pub const JVM_FLAGS: &[&str] = &[
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-Xmx512m",
    "-XX:-UsePerfData",
];

/// The components, in report order.
pub const COMPONENTS: [&str; 5] = [
    "warmup",
    "loadbalance",
    "router",
    "configurator",
    "servicekey",
];

/// Picks per histogram case (each side).
pub const HISTOGRAM_PICKS: u64 = 20_000;
/// Routes per case of a random router (v3.1 weighted destinations), each side.
pub const ROUTE_SAMPLES: u64 = 4_000;
/// Two histograms disagree when the chi-square test of homogeneity gives a p-value below this.
/// Small on purpose: hundreds of random cases run per batch and a false alarm fails CI, while
/// real parity gaps (a weight ignored, a tie broken differently) give p-values far below it.
pub const SIGNIFICANCE: f64 = 1e-6;
/// How long one Java oracle run may take.
pub const JAVA_TIMEOUT: Duration = Duration::from_secs(600);

/// The service every case is about.
pub const SERVICE: &str = "com.foo.Bar";

/// One generated case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Unique in the batch: `{component}-{n}`.
    pub id: String,
    /// One of [`COMPONENTS`].
    pub component: &'static str,
    /// What the case exercises, `{sub-kind}/{scenario}` (e.g. `roundrobin/all-zero`); the
    /// deviation file matches it with globs.
    pub kind: String,
    /// Finer properties the case has (`glob-middle`, `range-open-end`, `dollar-ref`, ...).
    pub features: Vec<String>,
    /// Seed for the Switchman side's random choices in this case.
    pub seed: u64,
    /// The case as the Java oracle reads it (`id`, `component`, `kind`, `features` included).
    pub input: Value,
}

impl Case {
    /// A string field of the input (empty when missing).
    pub fn str(&self, key: &str) -> &str {
        self.input.get(key).and_then(Value::as_str).unwrap_or("")
    }
}

/// `n` cases of every component, deterministic in `seed`.
pub fn generate(seed: u64, per_component: usize) -> Vec<Case> {
    let mut out = Vec::with_capacity(per_component * COMPONENTS.len());
    for (ci, &component) in COMPONENTS.iter().enumerate() {
        for n in 0..per_component {
            let case_seed = seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add((ci as u64) << 40)
                .wrapping_add(n as u64);
            let mut g = Gen::new(case_seed);
            let (kind, mut body) = match component {
                "warmup" => gen_warmup(&mut g),
                "loadbalance" => gen_loadbalance(&mut g),
                "router" => gen_router(&mut g),
                "configurator" => gen_configurator(&mut g),
                _ => gen_servicekey(&mut g),
            };
            let id = format!("{component}-{n:05}");
            let features: Vec<String> = g.features.into_iter().collect();
            let obj = body.as_object_mut().expect("case bodies are objects");
            obj.insert("id".into(), json!(id));
            obj.insert("component".into(), json!(component));
            obj.insert("kind".into(), json!(kind));
            obj.insert("features".into(), json!(features));
            obj.insert("seed".into(), json!(case_seed));
            out.push(Case {
                id,
                component,
                kind,
                features,
                seed: case_seed,
                input: body,
            });
        }
    }
    out
}

/// Cases saved earlier (to replay or minimise a disagreement): `{"cases": [input...]}`, or a
/// report (`SWITCHMAN_ORACLE_REPORT`) whose disagreements' cases are taken.
///
/// # Errors
/// When a case lacks `id` or names an unknown component.
pub fn cases_from_json(doc: &Value) -> Result<Vec<Case>, String> {
    let inputs: Vec<&Value> = match (doc.get("cases"), doc.get("disagreements")) {
        (Some(Value::Array(a)), _) => a.iter().collect(),
        (_, Some(Value::Array(a))) => a.iter().map(|d| &d["case"]).collect(),
        _ => return Err("expected {\"cases\": [...]} or a report".into()),
    };
    inputs
        .into_iter()
        .map(|input| {
            let id = input["id"].as_str().ok_or("a case without id")?.to_string();
            let comp = input["component"].as_str().unwrap_or("");
            let component = COMPONENTS
                .iter()
                .copied()
                .find(|c| *c == comp)
                .ok_or_else(|| format!("{id}: unknown component {comp:?}"))?;
            let features = input["features"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Ok(Case {
                id,
                component,
                kind: input["kind"].as_str().unwrap_or("").to_string(),
                features,
                seed: input["seed"].as_u64().unwrap_or(0),
                input: input.clone(),
            })
        })
        .collect()
}

/// The generator's state for one case: its random source and the features noted so far.
struct Gen {
    rng: fastrand::Rng,
    features: BTreeSet<String>,
}

impl Gen {
    fn new(seed: u64) -> Self {
        Gen {
            rng: fastrand::Rng::with_seed(seed),
            features: BTreeSet::new(),
        }
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.rng.usize(..xs.len())].clone()
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.f64() < p
    }

    fn feat(&mut self, f: &str) {
        self.features.insert(f.to_string());
    }

    /// A scenario by weight: `(weight, name)`.
    fn scenario(&mut self, table: &[(u32, &'static str)]) -> &'static str {
        let total: u32 = table.iter().map(|t| t.0).sum();
        let mut r = self.rng.u32(..total);
        for &(w, name) in table {
            if r < w {
                return name;
            }
            r -= w;
        }
        table[table.len() - 1].1
    }
}

fn provider_url(host: &str, port: u16, params: &[(String, String)]) -> String {
    let mut s = format!("dubbo://{host}:{port}/{SERVICE}?interface={SERVICE}");
    for (k, v) in params {
        let _ = write!(s, "&{k}={v}");
    }
    s
}

fn kv(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

// ---------------------------------------------------------------------------------------------
// warmup

const WEIGHTS: &[i64] = &[1, 2, 3, 7, 10, 33, 50, 99, 100, 101, 200, 333, 1000, 65535];
const WARMUPS: &[i64] = &[1, 7, 1000, 60_000, 599_999, 600_000, 1_234_567];

/// `{"provider", "uptime_ms" (null: no timestamp), "method"}`: the weight Dubbo's
/// `AbstractLoadBalance.getWeight` gives (warm-up included).
fn gen_warmup(g: &mut Gen) -> (String, Value) {
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
fn mid_step_uptime(g: &mut Gen, weight: i64, warmup: i64) -> i64 {
    let w = weight.max(1);
    let k = g.rng.i64(0..w);
    (((k as f64) + 0.5) * warmup as f64 / w as f64) as i64
}

/// Providers, uptimes, stats and invocations for one balancer; see the Java `Balancers`.
fn gen_loadbalance(g: &mut Gen) -> (String, Value) {
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

fn hash_args(g: &mut Gen, scenario: &str) -> Vec<Value> {
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

// ---------------------------------------------------------------------------------------------
// router

const METHODS: &[&str] = &[
    "findUser",
    "findOrder",
    "getUser",
    "save",
    "listAll",
    "ping",
];

/// A provider's parameters for routing cases.
fn router_providers(g: &mut Gen, tags: bool) -> Vec<String> {
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

fn url_param<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    let q = url.split_once('?')?.1;
    q.split('&').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k == key).then_some(v)
    })
}

fn url_host_port(url: &str) -> (String, u16) {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    let hp = rest.split(['/', '?']).next().unwrap_or("");
    match hp.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().unwrap_or(0)),
        None => (hp.to_string(), 0),
    }
}

/// One condition `key op values` of a *when* (`when = true`) or *then* part; notes features.
fn condition(g: &mut Gen, when: bool, inv: &Value, providers: &[String]) -> String {
    // What the key reads, for the features that depend on the values chosen below.
    let mut argument: Option<Option<&Value>> = None;
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
                argument = Some(inv["args"].get(i));
                (
                    format!("arguments[{i}]"),
                    vec![
                        "1~100", "~50", "100~", "5", "vip", "a*", "1.5", "true", "null", "x1",
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
        Some(Some(a)) if ranged && !a.is_i64() => g.feat("range-on-non-int-argument"),
        _ => {}
    }
    if non_int_sizes && ranged {
        g.feat("range-on-non-int-param");
    }
    s
}

fn note_value(g: &mut Gen, v: &str, when: bool) {
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
fn condition_line(g: &mut Gen, inv: &Value, providers: &[String]) -> String {
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
fn invalid_line(g: &mut Gen) -> String {
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

fn yaml_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn gen_invocation(g: &mut Gen) -> Value {
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
    json!({"method": method, "args": args, "attachments": att})
}

fn consumer_url(g: &mut Gen, tag: Option<&str>) -> String {
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

fn v30_yaml(g: &mut Gen, scope: &str, key: &str, lines: &[String]) -> String {
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

fn v31_yaml(g: &mut Gen, scope: &str, key: &str, inv: &Value, providers: &[String]) -> String {
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

fn tag_yaml(g: &mut Gen, providers: &[String]) -> String {
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
fn gen_router(g: &mut Gen) -> (String, Value) {
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

// ---------------------------------------------------------------------------------------------
// configurator

/// Parameters the configurator cases set (and whose results are compared).
pub const WATCHED: &[&str] = &["timeout", "loadbalance", "retries", "cluster"];

fn override_url(g: &mut Gen, provider_host: &str, provider_port: u16) -> String {
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

fn config_yaml(g: &mut Gen, provider_host: &str, provider_port: u16) -> String {
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
fn note_same_key_twice(g: &mut Gen, keys: &[Vec<&str>]) {
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
fn gen_configurator(g: &mut Gen) -> (String, Value) {
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

// ---------------------------------------------------------------------------------------------
// servicekey

fn gen_servicekey(g: &mut Gen) -> (String, Value) {
    let flavor = g.pick(&["ismatch", "ismatch", "nacos"]);
    let (cg, cg_shape) = g.pick(&[
        ("", "empty"),
        ("a", "exact"),
        ("b", "exact"),
        ("*", "star"),
        ("a,b", "list"),
        ("b,c", "list"),
        ("a, b", "list"),
        ("a,", "list"),
    ]);
    let (cv, cv_shape) = g.pick(&[
        ("", "empty"),
        ("1.0", "exact"),
        ("2.0", "exact"),
        ("*", "star"),
        ("1.0,2.0", "list"),
        ("2.0,3.0", "list"),
    ]);
    let pg = g.pick(&["", "a", "b", "c", ""]);
    let pv = g.pick(&["", "1.0", "2.0", ""]);
    if cg.contains(", ") {
        g.feat("list-with-space");
    }
    if cg_shape == "list" && cg.split(',').filter(|x| !x.trim().is_empty()).count() < 2 {
        g.feat("list-single-entry");
    }
    if cv_shape == "list" {
        g.feat("version-list");
    }
    if cg_shape == "list" && pg.is_empty() {
        g.feat("group-list-vs-empty-group");
    }
    let (ci, pi) = match g.rng.u32(0..12) {
        // The Nacos registry subscribes to every service for "*" (an admin's view), which
        // NacosServiceName alone does not model.
        0 if flavor != "nacos" => {
            g.feat("interface-star");
            ("*", SERVICE)
        }
        1 => {
            g.feat("interface-mismatch");
            (SERVICE, "com.foo.Other")
        }
        _ => (SERVICE, SERVICE),
    };
    let body = json!({
        "flavor": flavor,
        "consumer": {"interface": ci, "group": cg, "version": cv},
        "provider": {"interface": pi, "group": pg, "version": pv},
    });
    (
        format!("{flavor}/group-{cg_shape}/version-{cv_shape}"),
        body,
    )
}

// ---------------------------------------------------------------------------------------------
// the Java side

/// The Java oracle's answers for one batch, by case id.
#[derive(Debug)]
pub struct JavaRun {
    /// `{id: answer}`.
    pub answers: BTreeMap<String, Value>,
    /// Dubbo's version, as `Version.getVersion()` reports it.
    pub dubbo_version: String,
    /// Time the Java side spent on the cases (after start-up).
    pub elapsed_ms: u64,
    /// Wall time of the whole JVM run.
    pub wall: Duration,
}

/// Runs the Java oracle (one JVM) on every case.
///
/// # Errors
/// When java cannot start, the run exceeds [`JAVA_TIMEOUT`], exits with an error or prints no
/// result; the message carries its stderr.
pub fn run_java(cases: &[Case]) -> Result<JavaRun, String> {
    let dir = std::env::temp_dir().join(crate::unique("switchman-oracle"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let input: PathBuf = dir.join("cases.json");
    let output: PathBuf = dir.join("answers.json");
    let doc = json!({"cases": cases.iter().map(|c| &c.input).collect::<Vec<_>>()});
    std::fs::write(&input, doc.to_string()).map_err(|e| format!("{}: {e}", input.display()))?;
    let started = Instant::now();
    let mut child = Command::new("java")
        .args(JVM_FLAGS)
        .arg("-jar")
        .arg(peers_dir().join("switchman-java-peers.jar"))
        .arg("oracle")
        .arg("--cases")
        .arg(&input)
        .arg("--out")
        .arg(&output)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("java does not start: {e}"))?;
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() > JAVA_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let wall = started.elapsed();
    let err = err_reader.join().unwrap_or_default();
    let tail: String = {
        let cut = err.len().saturating_sub(8000);
        let mut c = cut;
        while !err.is_char_boundary(c) {
            c += 1;
        }
        err[c..].to_string()
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => return Err(format!("java oracle exited {s}; stderr:\n{tail}")),
        None => {
            return Err(format!(
                "java oracle ran longer than {JAVA_TIMEOUT:?} and was killed; stderr:\n{tail}"
            ));
        }
    }
    let text = std::fs::read_to_string(&output)
        .map_err(|e| format!("{}: {e}; stderr:\n{tail}", output.display()))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("the oracle printed bad JSON: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut answers = BTreeMap::new();
    for r in doc["results"].as_array().into_iter().flatten() {
        if let Some(id) = r["id"].as_str() {
            let mut a = r.clone();
            if let Some(o) = a.as_object_mut() {
                o.remove("id");
            }
            answers.insert(id.to_string(), a);
        }
    }
    Ok(JavaRun {
        answers,
        dubbo_version: doc["dubbo_version"].as_str().unwrap_or("?").to_string(),
        elapsed_ms: doc["elapsed_ms"].as_u64().unwrap_or(0),
        wall,
    })
}

// ---------------------------------------------------------------------------------------------
// comparison

/// Whether two answers to one case agree.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Equal (deterministic) or not told apart (distributions).
    Agree,
    /// Different; the text says how.
    Disagree(String),
}

/// Compares Dubbo's answer (`java`) with Switchman's (`rust`) for `case`.
pub fn compare(case: &Case, java: &Value, rust: &Value) -> Verdict {
    let je = java.get("error");
    let re = rust.get("error");
    match (je, re) {
        (Some(_), Some(_)) => return Verdict::Agree,
        (Some(e), None) => {
            return Verdict::Disagree(format!("Dubbo failed ({e}), Switchman answered"));
        }
        (None, Some(e)) => {
            return Verdict::Disagree(format!("Switchman failed ({e}), Dubbo answered"));
        }
        (None, None) => {}
    }
    match case.component {
        "warmup" => same(&java["weight"], &rust["weight"], "weight"),
        "loadbalance" => {
            if let (Some(j), Some(r)) = (java.get("histogram"), rust.get("histogram")) {
                histograms(&counts_of_array(j), &counts_of_array(r))
            } else {
                same(&java["picks"], &rust["picks"], "picks")
            }
        }
        "router" => {
            let j = counts_of_map(&java["routes"]);
            let r = counts_of_map(&rust["routes"]);
            if case.input["samples"].as_u64().unwrap_or(1) <= 1 {
                same(&java["routes"], &rust["routes"], "routed providers")
            } else {
                let keys: BTreeSet<&String> = j.keys().chain(r.keys()).collect();
                let a: Vec<u64> = keys.iter().map(|k| *j.get(*k).unwrap_or(&0)).collect();
                let b: Vec<u64> = keys.iter().map(|k| *r.get(*k).unwrap_or(&0)).collect();
                match histograms(&a, &b) {
                    Verdict::Agree => Verdict::Agree,
                    Verdict::Disagree(m) => Verdict::Disagree(format!(
                        "route distributions differ ({m}); routes {:?}",
                        keys
                    )),
                }
            }
        }
        "configurator" => {
            for k in ["weight", "enabled", "params"] {
                if let Verdict::Disagree(m) = same(&java[k], &rust[k], k) {
                    return Verdict::Disagree(m);
                }
            }
            Verdict::Agree
        }
        _ => same(&java["match"], &rust["match"], "match"),
    }
}

fn same(java: &Value, rust: &Value, what: &str) -> Verdict {
    if java == rust {
        Verdict::Agree
    } else {
        Verdict::Disagree(format!("{what}: Dubbo {java}, Switchman {rust}"))
    }
}

fn counts_of_array(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

fn counts_of_map(v: &Value) -> BTreeMap<String, u64> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, x)| (k.clone(), x.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Two histograms over the same categories: the chi-square test of homogeneity at
/// [`SIGNIFICANCE`]. Categories empty on both sides are left out.
pub fn histograms(java: &[u64], rust: &[u64]) -> Verdict {
    if java.len() != rust.len() {
        return Verdict::Disagree(format!(
            "{} categories from Dubbo, {} from Switchman",
            java.len(),
            rust.len()
        ));
    }
    let (stat, df, p) = chi_square_homogeneity(java, rust);
    if p < SIGNIFICANCE {
        Verdict::Disagree(format!(
            "chi-square {stat:.1} on {df} degrees of freedom, p = {p:.2e} < {SIGNIFICANCE:e}: \
             Dubbo {java:?}, Switchman {rust:?}"
        ))
    } else {
        Verdict::Agree
    }
}

/// Pearson's chi-square test of homogeneity of two count vectors: `(statistic, degrees of
/// freedom, p-value)`. Categories empty in both are dropped; one category left gives p = 1.
pub fn chi_square_homogeneity(a: &[u64], b: &[u64]) -> (f64, usize, f64) {
    let cells: Vec<(f64, f64)> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| **x + **y > 0)
        .map(|(x, y)| (*x as f64, *y as f64))
        .collect();
    let na: f64 = cells.iter().map(|c| c.0).sum();
    let nb: f64 = cells.iter().map(|c| c.1).sum();
    if cells.len() < 2 || na == 0.0 || nb == 0.0 {
        let p = if (na == 0.0) != (nb == 0.0) { 0.0 } else { 1.0 };
        return (0.0, 0, p);
    }
    let n = na + nb;
    let mut stat = 0.0;
    for &(x, y) in &cells {
        let col = x + y;
        let ea = col * na / n;
        let eb = col * nb / n;
        stat += (x - ea).powi(2) / ea + (y - eb).powi(2) / eb;
    }
    let df = cells.len() - 1;
    (stat, df, chi_square_sf(stat, df as f64))
}

/// The chi-square survival function `P(X >= x)` for `k` degrees of freedom: the regularized
/// upper incomplete gamma function `Q(k/2, x/2)`.
pub fn chi_square_sf(x: f64, k: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    gamma_q(k / 2.0, x / 2.0)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9).
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Regularized upper incomplete gamma `Q(s, x)`: series for `x < s + 1`, else a continued
/// fraction (Lentz).
fn gamma_q(s: f64, x: f64) -> f64 {
    if x < s + 1.0 {
        let mut sum = 1.0 / s;
        let mut term = sum;
        let mut n = s;
        for _ in 0..10_000 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        let p = sum * (-x + s * x.ln() - ln_gamma(s)).exp();
        (1.0 - p).clamp(0.0, 1.0)
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - s;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - s);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        ((-x + s * x.ln() - ln_gamma(s)).exp() * h).clamp(0.0, 1.0)
    }
}

// ---------------------------------------------------------------------------------------------
// deviations

/// One entry of `oracle-deviations.yaml`.
#[derive(Debug, Clone)]
pub struct Deviation {
    /// The component it is about.
    pub component: String,
    /// Glob on the case kind (`*` is any run of characters).
    pub kind: String,
    /// Features the case must all have (none: any case of the kind).
    pub features: Vec<String>,
    /// Why the answers differ; `open: ...` for a difference not resolved yet.
    pub reason: String,
}

impl Deviation {
    /// Whether the reason marks it as not resolved yet (`open: ...`).
    pub fn is_open(&self) -> bool {
        self.reason.trim_start().starts_with("open:")
    }

    /// Whether the entry covers `case`.
    pub fn matches(&self, case: &Case) -> bool {
        self.component == case.component
            && glob(&self.kind, &case.kind)
            && self.features.iter().all(|f| case.features.contains(f))
    }
}

/// The documented deviations.
#[derive(Debug, Clone, Default)]
pub struct Deviations {
    /// In file order; the first match counts.
    pub entries: Vec<Deviation>,
}

impl Deviations {
    /// From the parsed YAML document: `{"deviations": [{component, kind, features?, reason}]}`.
    ///
    /// # Errors
    /// When an entry lacks `component`, `kind` or `reason`, or names an unknown component.
    pub fn from_value(doc: &Value) -> Result<Deviations, String> {
        let mut entries = Vec::new();
        for (i, e) in doc["deviations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let field = |k: &str| {
                e[k].as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("deviation #{}: missing {k}", i + 1))
            };
            let component = field("component")?;
            if !COMPONENTS.contains(&component.as_str()) {
                return Err(format!(
                    "deviation #{}: unknown component {component:?} (one of {COMPONENTS:?})",
                    i + 1
                ));
            }
            let features = e["features"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            entries.push(Deviation {
                component,
                kind: field("kind")?,
                features,
                reason: field("reason")?,
            });
        }
        Ok(Deviations { entries })
    }

    /// The first entry covering `case`.
    pub fn matching(&self, case: &Case) -> Option<(usize, &Deviation)> {
        self.entries
            .iter()
            .enumerate()
            .find(|(_, d)| d.matches(case))
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// tally

/// How one case came out.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case id.
    pub id: String,
    /// Its component.
    pub component: &'static str,
    /// Its kind.
    pub kind: String,
    /// Its features.
    pub features: Vec<String>,
    /// `None` when both sides agree; else how they differ.
    pub disagreement: Option<String>,
    /// The deviation entry (index in the file) that covers the disagreement.
    pub deviation: Option<(usize, Deviation)>,
    /// The case input.
    pub input: Value,
    /// Dubbo's answer.
    pub java: Value,
    /// Switchman's answer.
    pub rust: Value,
}

impl Outcome {
    /// A disagreement no deviation entry covers.
    pub fn is_new(&self) -> bool {
        self.disagreement.is_some() && self.deviation.is_none()
    }
}

/// Counts per component.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// `component → [run, agreed, documented, open, new]`.
    pub counts: BTreeMap<&'static str, [usize; 5]>,
    /// Every case's outcome, in batch order.
    pub outcomes: Vec<Outcome>,
}

impl Tally {
    /// Records one outcome.
    pub fn add(&mut self, o: Outcome) {
        let c = self.counts.entry(o.component).or_default();
        c[0] += 1;
        match (&o.disagreement, &o.deviation) {
            (None, _) => c[1] += 1,
            (Some(_), Some((_, d))) if d.is_open() => c[3] += 1,
            (Some(_), Some(_)) => c[2] += 1,
            (Some(_), None) => c[4] += 1,
        }
        self.outcomes.push(o);
    }

    /// New disagreements (not covered by any deviation).
    pub fn new_disagreements(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| o.is_new())
    }

    /// The counts table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<14}{:>7}{:>8}{:>12}{:>7}{:>7}\n",
            "component", "run", "agreed", "documented", "open", "new"
        );
        let mut total = [0usize; 5];
        for comp in COMPONENTS {
            let c = self.counts.get(comp).copied().unwrap_or_default();
            for (t, x) in total.iter_mut().zip(c) {
                *t += x;
            }
            let _ = writeln!(
                s,
                "{comp:<14}{:>7}{:>8}{:>12}{:>7}{:>7}",
                c[0], c[1], c[2], c[3], c[4]
            );
        }
        let _ = writeln!(
            s,
            "{:<14}{:>7}{:>8}{:>12}{:>7}{:>7}",
            "total", total[0], total[1], total[2], total[3], total[4]
        );
        s
    }

    /// Disagreements grouped by the deviation entry that covers them (documented and open),
    /// with one example each, then every new disagreement with its case.
    pub fn details(&self, deviations: &Deviations) -> String {
        let mut s = String::new();
        let mut by_entry: BTreeMap<usize, Vec<&Outcome>> = BTreeMap::new();
        for o in &self.outcomes {
            if let (Some(_), Some((i, _))) = (&o.disagreement, &o.deviation) {
                by_entry.entry(*i).or_default().push(o);
            }
        }
        for (i, d) in deviations.entries.iter().enumerate() {
            let hits = by_entry.get(&i).map_or(0, Vec::len);
            let _ = writeln!(
                s,
                "deviation #{} [{} {}{}]: {hits} case(s){} — {}",
                i + 1,
                d.component,
                d.kind,
                if d.features.is_empty() {
                    String::new()
                } else {
                    format!(" +{}", d.features.join(","))
                },
                if hits == 0 { " (none this run)" } else { "" },
                d.reason
            );
            if let Some(first) = by_entry.get(&i).and_then(|v| v.first()) {
                let _ = writeln!(
                    s,
                    "    e.g. {} ({}): {}",
                    first.id,
                    first.kind,
                    first.disagreement.as_deref().unwrap_or("")
                );
            }
        }
        for o in self.new_disagreements() {
            let _ = writeln!(
                s,
                "\nNEW {} [{}] features {:?}\n  {}\n  case: {}\n  Dubbo:     {}\n  Switchman: {}",
                o.id,
                o.kind,
                o.features,
                o.disagreement.as_deref().unwrap_or(""),
                o.input,
                o.java,
                o.rust
            );
        }
        s
    }

    /// Every disagreement as JSON (for `SWITCHMAN_ORACLE_REPORT`).
    pub fn report(&self) -> Value {
        let list: Vec<Value> = self
            .outcomes
            .iter()
            .filter(|o| o.disagreement.is_some())
            .map(|o| {
                json!({
                    "id": o.id,
                    "component": o.component,
                    "kind": o.kind,
                    "features": o.features,
                    "disagreement": o.disagreement,
                    "deviation": o.deviation.as_ref().map(|(i, d)| json!({"index": i + 1, "reason": d.reason})),
                    "case": o.input,
                    "dubbo": o.java,
                    "switchman": o.rust,
                })
            })
            .collect();
        json!({"disagreements": list})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi_square_sf_matches_tables() {
        // Critical values: P(X >= x) for k degrees of freedom.
        for (x, k, p) in [
            (3.841, 1.0, 0.05),
            (6.635, 1.0, 0.01),
            (10.828, 1.0, 0.001),
            (5.991, 2.0, 0.05),
            (16.266, 3.0, 0.001),
            (18.307, 10.0, 0.05),
            (29.588, 10.0, 0.001),
            (124.342, 100.0, 0.05),
        ] {
            let got = chi_square_sf(x, k);
            assert!((got - p).abs() / p < 0.01, "x={x} k={k}: {got} vs {p}");
        }
        assert_eq!(chi_square_sf(0.0, 3.0), 1.0);
        assert!(chi_square_sf(1000.0, 3.0) < 1e-100);
    }

    /// Draws `n` samples from `probs` (cumulative search).
    fn draw(probs: &[f64], n: u64, rng: &mut fastrand::Rng) -> Vec<u64> {
        let mut h = vec![0u64; probs.len()];
        for _ in 0..n {
            let mut r = rng.f64();
            let mut i = 0;
            while i + 1 < probs.len() && r >= probs[i] {
                r -= probs[i];
                i += 1;
            }
            h[i] += 1;
        }
        h
    }

    #[test]
    fn the_distribution_test_accepts_equal_and_rejects_skewed() {
        let mut rng = fastrand::Rng::with_seed(42);
        let fair = [0.5, 0.25, 0.125, 0.125];
        let skewed = [0.45, 0.3, 0.125, 0.125];
        let mut accepted = 0;
        for _ in 0..50 {
            let a = draw(&fair, HISTOGRAM_PICKS, &mut rng);
            let b = draw(&fair, HISTOGRAM_PICKS, &mut rng);
            if histograms(&a, &b) == Verdict::Agree {
                accepted += 1;
            }
            let c = draw(&skewed, HISTOGRAM_PICKS, &mut rng);
            assert!(
                matches!(histograms(&a, &c), Verdict::Disagree(_)),
                "a 5-point shift must be detected: {a:?} vs {c:?}"
            );
        }
        assert_eq!(accepted, 50, "same distributions must agree");
        // Uniform where Dubbo weighs (the typical parity gap).
        let weighted = draw(&[0.7, 0.1, 0.1, 0.1], HISTOGRAM_PICKS, &mut rng);
        let uniform = draw(&[0.25; 4], HISTOGRAM_PICKS, &mut rng);
        assert!(matches!(
            histograms(&weighted, &uniform),
            Verdict::Disagree(_)
        ));
        // A side that never picks what the other picks often.
        assert!(matches!(
            histograms(&[10_000, 10_000, 0], &[10_000, 9_000, 1_000]),
            Verdict::Disagree(_)
        ));
        assert_eq!(histograms(&[20_000, 0], &[20_000, 0]), Verdict::Agree);
    }

    #[test]
    fn globs() {
        assert!(glob("roundrobin/*", "roundrobin/all-zero"));
        assert!(glob("*/all-zero", "random/all-zero"));
        assert!(glob("*", "x"));
        assert!(glob("a*b*c", "a-b-c"));
        assert!(!glob("a*b*c", "a-c-b"));
        assert!(glob("v2", "v2"));
        assert!(!glob("v2", "v2url"));
    }

    #[test]
    fn generation_is_deterministic_and_complete() {
        let a = generate(7, 30);
        let b = generate(7, 30);
        assert_eq!(a.len(), 30 * COMPONENTS.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.input, y.input);
        }
        let ids: BTreeSet<&str> = a.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), a.len(), "ids are unique");
        for c in &a {
            assert_eq!(c.input["component"], json!(c.component));
        }
    }

    #[test]
    fn deviations_match_by_kind_and_features() {
        let doc = json!({"deviations": [
            {"component": "router", "kind": "v2*", "features": ["range-open-end"], "reason": "known"},
            {"component": "loadbalance", "kind": "roundrobin/all-zero", "reason": "open: x"},
        ]});
        let d = Deviations::from_value(&doc).unwrap();
        let mut case = generate(1, 1).remove(2);
        case.kind = "v2".into();
        case.features = vec!["range-open-end".into(), "list".into()];
        assert_eq!(d.matching(&case).map(|m| m.0), Some(0));
        case.features.clear();
        assert!(d.matching(&case).is_none());
        assert!(d.entries[1].is_open());
        assert!(
            Deviations::from_value(
                &json!({"deviations": [{"component": "x", "kind": "*", "reason": "r"}]})
            )
            .is_err()
        );
    }
}
