//! Behaviour that must match Dubbo exactly: the round-robin sequence and the consistent-hash
//! ring (vectors computed independently from Dubbo's `ConsistentHashSelector` algorithm), and
//! the ring's stability when an instance leaves.

use crate::common;

use std::sync::Arc;
use std::time::SystemTime;

use common::endpoints;
use serde_json::json;
use switchman_core::{Instance, Invocation};
use switchman_loadbalance::{
    ConsistentHashBalance, Endpoint, LoadBalance, PickContext, RoundRobinBalance, key_point,
    pick_untried, ring_points,
};

fn named(addrs: &[&str]) -> Vec<Endpoint> {
    addrs
        .iter()
        .map(|a| {
            let (h, p) = a.rsplit_once(':').unwrap();
            Endpoint::new(Arc::new(Instance::builder(h, p.parse().unwrap()).build()))
        })
        .collect()
}

fn pick_with(p: &dyn switchman_loadbalance::Picker, eps: &[Endpoint], inv: &Invocation) -> usize {
    let ctx = PickContext {
        invocation: inv,
        tried: &[],
    };
    p.pick(eps, &ctx, &mut fastrand::Rng::with_seed(0)).unwrap()
}

#[test]
fn roundrobin_five_one_one() {
    let eps = endpoints(&[5, 1, 1]);
    let p = RoundRobinBalance::new().prepare(&eps, (0..3).collect(), SystemTime::now());
    let inv = Invocation::new("sayHello");
    let names = ["A", "B", "C"];
    let seq: Vec<&str> = (0..14)
        .map(|_| names[pick_with(p.as_ref(), &eps, &inv)])
        .collect();
    assert_eq!(seq.join(" "), "A A B A C A A A A B A C A A");
}

/// Retries and hedges (a pick with something already tried) do not take turns from the
/// rotation: first attempts keep the exact sequence, and retries spread by weight.
#[test]
fn roundrobin_retries_leave_the_rotation_alone() {
    let eps = endpoints(&[5, 1, 1]);
    let p = RoundRobinBalance::new().prepare(&eps, (0..3).collect(), SystemTime::now());
    let inv = Invocation::new("sayHello");
    let mut rng = fastrand::Rng::with_seed(1);
    let mut firsts = Vec::new();
    let mut retries = [0u32; 3];
    for _ in 0..7_000 {
        let first = pick_with(p.as_ref(), &eps, &inv);
        firsts.push(first);
        let tried = [first];
        let ctx = PickContext {
            invocation: &inv,
            tried: &tried,
        };
        retries[p.pick(&eps, &ctx, &mut rng).unwrap()] += 1;
    }
    let names = ["A", "B", "C"];
    let seq: Vec<&str> = firsts[..14].iter().map(|&i| names[i]).collect();
    assert_eq!(seq.join(" "), "A A B A C A A A A B A C A A");
    let a = firsts.iter().filter(|&&i| i == 0).count();
    assert_eq!(a, 5_000, "first attempts keep exact shares");
    // Weighted random over 7,000 draws: 5/7 = 5,000 expected, 3 sigma ~ 115.
    assert!((4_850..=5_150).contains(&retries[0]), "{retries:?}");
}

#[test]
fn roundrobin_state_is_per_method() {
    let eps = endpoints(&[2, 1]);
    let p = RoundRobinBalance::new().prepare(&eps, (0..2).collect(), SystemTime::now());
    let a = Invocation::new("alpha");
    let b = Invocation::new("beta");
    // Interleaved calls: each method sees its own sequence A B A... (2,1 → A B A).
    let seq: Vec<usize> = (0..3)
        .flat_map(|_| {
            [
                pick_with(p.as_ref(), &eps, &a),
                pick_with(p.as_ref(), &eps, &b),
            ]
        })
        .collect();
    assert_eq!(seq, [0, 0, 1, 1, 0, 0]);
}

#[test]
fn roundrobin_on_a_routed_subset_returns_global_indexes() {
    let eps = endpoints(&[9, 5, 9, 1, 9]);
    let p = RoundRobinBalance::new().prepare(&eps, Arc::from([1u32, 3]), SystemTime::now());
    let inv = Invocation::new("m");
    let seq: Vec<usize> = (0..6).map(|_| pick_with(p.as_ref(), &eps, &inv)).collect();
    assert_eq!(seq, [1, 1, 1, 3, 1, 1]);
}

#[test]
fn ring_points_match_dubbo_for_a_known_address() {
    // MD5("10.20.30.1:208800") = 401c3b0a 047eebf8 788cc3e6 827c9d2a; Dubbo reads each 4-byte
    // group little-endian: 0x0a3b1c40, 0xf8eb7e04, 0xe6c38c78, 0x2a9d7c82.
    let pts = ring_points("10.20.30.1:20880", 160);
    assert_eq!(pts.len(), 160);
    assert_eq!(
        &pts[..8],
        &[
            171_646_016,
            4_176_182_788,
            3_871_575_160,
            714_964_098,
            1_470_003_287,
            2_812_305_247,
            2_045_832_048,
            1_294_672_683
        ]
    );
    assert_eq!(
        ring_points("10.20.30.1:20880", 7).len(),
        4,
        "nodes / 4 digests"
    );
}

#[test]
fn keys_land_where_a_java_consumer_sends_them() {
    let eps = named(&["10.20.30.1:20880", "10.20.30.2:20880", "10.20.30.3:20880"]);
    let p = ConsistentHashBalance::default().prepare(&eps, (0..3).collect(), SystemTime::now());
    // (key, key point, expected provider), from an independent model of Dubbo's TreeMap ring.
    let vectors = [
        ("alice", 3_001_189_475u32, 1usize),
        ("bob", 3_159_465_375, 0),
        ("carol", 2_149_163_177, 1),
        ("dave", 2_273_513_494, 0),
        ("42", 3_905_343_649, 1),
        ("", 3_649_838_548, 2),
        ("order-1001", 4_044_460_690, 0),
        ("order-1002", 1_214_216_451, 0),
        ("zzz", 1_807_264_755, 1),
        ("hello", 708_854_109, 1),
    ];
    for (key, point, owner) in vectors {
        let inv = Invocation::new("get").with_args(vec![json!(key)]);
        assert_eq!(key_point(&inv, &[0]), point, "{key:?}");
        assert_eq!(pick_with(p.as_ref(), &eps, &inv), owner, "{key:?}");
    }
    // The integer 42 hashes as Java's "42" too.
    let inv = Invocation::new("get").with_args(vec![json!(42)]);
    assert_eq!(pick_with(p.as_ref(), &eps, &inv), 1);
}

#[test]
fn removing_one_of_n_moves_about_one_nth_of_keys() {
    let n = 10;
    let eps = endpoints(&vec![100; n]);
    let lb = ConsistentHashBalance::default();
    let all = lb.prepare(&eps, (0..n as u32).collect(), SystemTime::now());
    let removed = 4u32;
    let fewer: Arc<[u32]> = (0..n as u32).filter(|&i| i != removed).collect();
    let less = lb.prepare(&eps, fewer, SystemTime::now());
    let keys = 20_000;
    let mut moved = 0;
    let mut on_removed = 0;
    for k in 0..keys {
        let inv = Invocation::new("get").with_args(vec![json!(format!("user-{k}"))]);
        let before = pick_with(all.as_ref(), &eps, &inv);
        let after = pick_with(less.as_ref(), &eps, &inv);
        if before == removed as usize {
            on_removed += 1;
            assert_ne!(after, before);
        } else {
            // Keys of the other instances stay put.
            assert_eq!(after, before, "user-{k}");
        }
        if after != before {
            moved += 1;
        }
    }
    assert_eq!(moved, on_removed);
    let share = moved as f64 / keys as f64;
    assert!((0.05..0.15).contains(&share), "moved {share}");
}

#[test]
fn zero_weight_instances_are_left_off_the_ring() {
    let mut eps = named(&["10.20.30.1:20880", "10.20.30.2:20880", "10.20.30.3:20880"]);
    eps[1] = Endpoint::new(Arc::new(eps[1].instance.with_weight(0)));
    let p = ConsistentHashBalance::default().prepare(&eps, (0..3).collect(), SystemTime::now());
    for k in 0..2000 {
        let inv = Invocation::new("get").with_args(vec![json!(k)]);
        assert_ne!(pick_with(p.as_ref(), &eps, &inv), 1);
    }
}

#[test]
fn hash_arguments_select_the_key() {
    let eps = named(&["10.20.30.1:20880", "10.20.30.2:20880", "10.20.30.3:20880"]);
    let lb = ConsistentHashBalance::new(160, &[1]).unwrap();
    let p = lb.prepare(&eps, (0..3).collect(), SystemTime::now());
    // Argument 1 is the key: "alice" → provider 1 whatever argument 0 says.
    for first in ["x", "y", "z"] {
        let inv = Invocation::new("get").with_args(vec![json!(first), json!("alice")]);
        assert_eq!(pick_with(p.as_ref(), &eps, &inv), 1);
    }
}

/// Dubbo's reselect runs the balancer over the untried instances: on a ring, the key's
/// successor among them. Nodes 10.0.0.1/2/3:20880, key "42" owned by .2, .2 failed: the
/// retry goes to .3 every time (not .1 or .3 at random).
#[test]
fn consistenthash_retry_goes_to_the_keys_successor() {
    let eps = named(&["10.0.0.1:20880", "10.0.0.2:20880", "10.0.0.3:20880"]);
    let lb = ConsistentHashBalance::default();
    let p = lb.prepare(&eps, (0..3).collect(), SystemTime::now());
    let inv = Invocation::new("get").with_args(vec![json!("42")]);
    assert_eq!(
        pick_with(p.as_ref(), &eps, &inv),
        1,
        "\"42\" is owned by .2"
    );
    let mut rng = fastrand::Rng::with_seed(9);
    for _ in 0..200 {
        let ctx = PickContext {
            invocation: &inv,
            tried: &[1],
        };
        assert_eq!(pick_untried(p.as_ref(), &eps, &ctx, &mut rng), Some(2));
    }
    // Every key, any tried set: the ring of the untried members (Dubbo's reselect) agrees.
    for k in 0..500 {
        let inv = Invocation::new("get").with_args(vec![json!(format!("user-{k}"))]);
        let owner = pick_with(p.as_ref(), &eps, &inv);
        let untried: Arc<[u32]> = (0..3u32).filter(|&i| i as usize != owner).collect();
        let reselect = lb.prepare(&eps, untried, SystemTime::now());
        let ctx = PickContext {
            invocation: &inv,
            tried: &[owner],
        };
        assert_eq!(
            pick_untried(p.as_ref(), &eps, &ctx, &mut rng),
            Some(pick_with(reselect.as_ref(), &eps, &inv)),
            "user-{k}"
        );
        // Two tried: the last one left.
        let second = pick_untried(p.as_ref(), &eps, &ctx, &mut rng).unwrap();
        let tried = [owner, second];
        let ctx = PickContext {
            invocation: &inv,
            tried: &tried,
        };
        let last = pick_untried(p.as_ref(), &eps, &ctx, &mut rng).unwrap();
        assert!(!tried.contains(&last), "user-{k}");
        // All tried: the owner again, as Dubbo.
        let all = [owner, second, last];
        let ctx = PickContext {
            invocation: &inv,
            tried: &all,
        };
        assert_eq!(pick_untried(p.as_ref(), &eps, &ctx, &mut rng), Some(owner));
    }
}
