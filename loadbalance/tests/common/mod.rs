//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::SystemTime;

use switchman_core::{Instance, Invocation};
use switchman_loadbalance::{Endpoint, LoadBalance, PickContext, Picker};

/// Fully warmed-up endpoints `10.0.<i/250>.<i%250>:20880` with the given weights.
pub fn endpoints(weights: &[u32]) -> Vec<Endpoint> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let host = format!("10.0.{}.{}", i / 250, i % 250 + 1);
            let inst = Instance::builder(host, 20880)
                .weight(w)
                .timestamp_ms(0)
                .build();
            Endpoint::new(Arc::new(inst))
        })
        .collect()
}

/// A picker over every endpoint.
pub fn prepare_all(lb: &dyn LoadBalance, eps: &[Endpoint]) -> Box<dyn Picker> {
    lb.prepare(eps, (0..eps.len() as u32).collect(), SystemTime::now())
}

/// Picks `calls` times with a fixed seed; returns hits per endpoint index.
pub fn histogram(picker: &dyn Picker, eps: &[Endpoint], calls: usize, seed: u64) -> Vec<u64> {
    let inv = Invocation::new("sayHello");
    let ctx = PickContext {
        invocation: &inv,
        tried: &[],
    };
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut hits = vec![0u64; eps.len()];
    for _ in 0..calls {
        hits[picker.pick(eps, &ctx, &mut rng).expect("non-empty")] += 1;
    }
    hits
}

/// Critical values of the chi-square distribution at significance 0.001, for 1..=10 degrees of
/// freedom.
const CHI2_CRIT_0_001: [f64; 10] = [
    10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588,
];

/// Pearson's chi-square statistic of `observed` against `weights` (zero-weight cells must be
/// empty and are left out).
pub fn chi_square(observed: &[u64], weights: &[u32]) -> (f64, usize) {
    let n: u64 = observed.iter().sum();
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    let mut stat = 0.0;
    let mut cells = 0;
    for (&o, &w) in observed.iter().zip(weights) {
        if w == 0 {
            assert_eq!(o, 0, "zero-weight cell was picked");
            continue;
        }
        let e = n as f64 * w as f64 / total;
        stat += (o as f64 - e).powi(2) / e;
        cells += 1;
    }
    (stat, cells - 1)
}

/// Asserts the hits fit the weights at significance 0.001.
pub fn assert_fits(observed: &[u64], weights: &[u32], what: &str) {
    let (stat, df) = chi_square(observed, weights);
    let crit = CHI2_CRIT_0_001[df - 1];
    assert!(
        stat < crit,
        "{what}: chi-square {stat:.2} >= {crit} (df {df}); hits {observed:?}, weights {weights:?}"
    );
}
