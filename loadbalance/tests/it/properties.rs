//! Properties every balancer keeps, whatever the weights, subset and live state: a pick is a
//! member of the routed subset, and a zero-weight member is never picked while another member
//! has weight.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use proptest::prelude::*;
use serde_json::json;
use switchman_core::Invocation;
use switchman_loadbalance::{BalancerKind, LoadBalance, PickContext, RoundRobinBalance};

fn all_balancers() -> Vec<Arc<dyn LoadBalance>> {
    let mut v: Vec<Arc<dyn LoadBalance>> = [
        BalancerKind::Random,
        BalancerKind::RoundRobin,
        BalancerKind::LeastActive,
        BalancerKind::ShortestResponse,
        BalancerKind::ConsistentHash,
        BalancerKind::P2c,
    ]
    .into_iter()
    .map(BalancerKind::build)
    .collect();
    v.push(Arc::new(RoundRobinBalance::new().with_schedule_limit(0)));
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn picks_are_members_and_skip_zero_weight(
        weights in prop::collection::vec(prop_oneof![Just(0u32), 1u32..5, Just(100)], 1..40),
        mask in prop::collection::vec(any::<bool>(), 40),
        busy in prop::collection::vec(0usize..4, 40),
        latency_ms in prop::collection::vec(0u64..50, 40),
        seed in any::<u64>(),
    ) {
        let eps = common::endpoints(&weights);
        let members: Vec<u32> = (0..weights.len() as u32).filter(|&i| mask[i as usize]).collect();
        let now = Instant::now();
        let mut guards = Vec::new();
        for (i, e) in eps.iter().enumerate() {
            for _ in 0..busy[i] {
                guards.push(e.stats.begin());
            }
            if latency_ms[i] % 3 == 0 {
                e.stats.record(Duration::from_millis(latency_ms[i]), latency_ms[i] % 2 == 0, now);
            }
        }
        let any_positive = members.iter().any(|&i| weights[i as usize] > 0);
        let mut rng = fastrand::Rng::with_seed(seed);
        for lb in all_balancers() {
            let p = lb.prepare(&eps, Arc::from(members.clone()), SystemTime::now());
            prop_assert_eq!(p.members(), &members[..]);
            for k in 0..50 {
                let inv = Invocation::new("m").with_args(vec![json!(k)]);
                let ctx = PickContext { invocation: &inv, tried: &[] };
                let got = p.pick(&eps, &ctx, &mut rng);
                if members.is_empty() {
                    prop_assert_eq!(got, None);
                    continue;
                }
                let got = got.unwrap();
                prop_assert!(members.contains(&(got as u32)), "{} picked {}", lb.name(), got);
                if any_positive {
                    prop_assert!(weights[got] > 0, "{} picked zero-weight {}", lb.name(), got);
                }
            }
        }
    }
}
