//! Comparing answers: equality, histograms (chi-square homogeneity).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::*;

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

pub(super) fn same(java: &Value, rust: &Value, what: &str) -> Verdict {
    if java == rust {
        Verdict::Agree
    } else {
        Verdict::Disagree(format!("{what}: Dubbo {java}, Switchman {rust}"))
    }
}

pub(super) fn counts_of_array(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

pub(super) fn counts_of_map(v: &Value) -> BTreeMap<String, u64> {
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

pub(super) fn ln_gamma(x: f64) -> f64 {
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
pub(super) fn gamma_q(s: f64, x: f64) -> f64 {
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
