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

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

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

/// A case's invocation `{"method", "args", "types", "attachments"}` as Switchman's
/// [`Invocation`](switchman_core::Invocation): `types` (optional) are the Java parameter types,
/// which decide the arguments' Java text (`switchman_core::java_text`), as the Java side sets
/// them with `setParameterTypes`.
pub fn invocation(j: &Value) -> switchman_core::Invocation {
    let mut inv = switchman_core::Invocation::new(j["method"].as_str().unwrap_or(""))
        .with_args(j["args"].as_array().cloned().unwrap_or_default());
    if let Some(types) = j["types"].as_array() {
        inv = inv.with_types(
            types
                .iter()
                .map(|t| t.as_str().unwrap_or("java.lang.Object")),
        );
    }
    if let Some(att) = j["attachments"].as_object() {
        for (k, v) in att {
            inv.set_attachment(k.clone(), v.as_str().unwrap_or_default());
        }
    }
    inv
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

mod balancers;
mod compare;
mod conditions;
mod configurators;
mod deviations;
mod java;
mod routers;
mod servicekey;
mod tally;

use balancers::*;
pub use compare::*;
use conditions::*;
pub use configurators::*;
pub use deviations::*;
pub use java::*;
use routers::*;
use servicekey::*;
pub use tally::*;

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
