//! Routers of your own (`Router`/`RouterStage`): run after the rules, prepared once per
//! instance list, a call only choosing among prepared subsets.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use switchman_core::{Instance, Invocation, Url};
use switchman_router::{
    ConsumerInfo, MAX_ROUTER_SUBSETS, Route, RouteTable, Router, RouterChain, RouterStage,
};

fn providers(n: usize) -> Vec<Arc<Instance>> {
    (0..n)
        .map(|i| {
            let url = format!(
                "dubbo://10.0.{}.{}:2088{}/com.foo.Bar?zone=z{}&application=prov",
                i / 256,
                i % 256,
                i % 2,
                i % 3
            );
            Arc::new(Instance::from_url(&Url::parse(&url).unwrap()).unwrap())
        })
        .collect()
}

fn consumer() -> ConsumerInfo {
    ConsumerInfo::new("10.1.1.1", "shop")
}

/// Narrows a call with the attachment `zone=zK` to the providers of zone `zK`; counts its
/// preparations.
#[derive(Debug, Default)]
struct ByZone {
    prepared: AtomicUsize,
}

#[derive(Debug)]
struct Zones {
    names: Vec<String>,
    sets: Vec<Vec<u32>>,
}

impl Router for ByZone {
    fn name(&self) -> &str {
        "by-zone"
    }

    fn prepare(&self, instances: &[Arc<Instance>], _: &ConsumerInfo) -> Box<dyn RouterStage> {
        self.prepared.fetch_add(1, Ordering::Relaxed);
        let mut z = Zones {
            names: Vec::new(),
            sets: Vec::new(),
        };
        for (i, inst) in instances.iter().enumerate() {
            let zone = inst.param("zone").unwrap_or("").to_string();
            match z.names.iter().position(|n| *n == zone) {
                Some(k) => z.sets[k].push(i as u32),
                None => {
                    z.names.push(zone);
                    z.sets.push(vec![i as u32]);
                }
            }
        }
        Box::new(z)
    }
}

impl RouterStage for Zones {
    fn sets(&self) -> &[Vec<u32>] {
        &self.sets
    }

    fn route(&self, invocation: &Invocation) -> Option<usize> {
        let zone = invocation.attachment("zone")?;
        // An unknown zone answers a set it did not declare.
        Some(
            self.names
                .iter()
                .position(|z| z == zone)
                .unwrap_or(usize::MAX),
        )
    }
}

/// Declares the sets it is given (unsorted, duplicated, out of range: as a careless router
/// might) and chooses the set named by the `set` attachment.
#[derive(Debug)]
struct Given(&'static str, Vec<Vec<u32>>);

#[derive(Debug)]
struct GivenStage(Vec<Vec<u32>>);

impl Router for Given {
    fn name(&self) -> &str {
        self.0
    }

    fn prepare(&self, _: &[Arc<Instance>], _: &ConsumerInfo) -> Box<dyn RouterStage> {
        Box::new(GivenStage(self.1.clone()))
    }
}

impl RouterStage for GivenStage {
    fn sets(&self) -> &[Vec<u32>] {
        &self.0
    }

    fn route(&self, invocation: &Invocation) -> Option<usize> {
        invocation.attachment("set")?.parse().ok()
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Out {
    Precomputed(Vec<u32>),
    Computed(Vec<u32>),
    Forbidden(String),
}

fn run(table: &RouteTable, inv: &Invocation) -> Out {
    let mut rng = fastrand::Rng::with_seed(7);
    match table.route(inv, &mut rng) {
        Route::Subset(i) => Out::Precomputed(table.subsets()[i].to_vec()),
        Route::Computed(s) => Out::Computed(s.to_vec()),
        Route::Forbidden(r) => Out::Forbidden(r.to_string()),
        other => panic!("an outcome this test does not know: {other:?}"),
    }
}

fn call(zone: Option<&str>) -> Invocation {
    let inv = Invocation::new("find");
    match zone {
        Some(z) => inv.with_attachment("zone", z),
        None => inv,
    }
}

#[test]
fn a_router_narrows_calls_to_the_set_it_chooses() {
    let router = Arc::new(ByZone::default());
    let chain = RouterChain::new().with_router(router.clone());
    let table = chain.build(&providers(6), &consumer());
    assert_eq!(router.prepared.load(Ordering::Relaxed), 1);
    assert_eq!(run(&table, &call(Some("z1"))), Out::Precomputed(vec![1, 4]));
    assert_eq!(run(&table, &call(Some("z0"))), Out::Precomputed(vec![0, 3]));
    // No choice: every provider.
    assert_eq!(
        run(&table, &call(None)),
        Out::Precomputed(vec![0, 1, 2, 3, 4, 5])
    );
    // Routing never prepares again.
    assert_eq!(router.prepared.load(Ordering::Relaxed), 1);
}

#[test]
fn a_router_runs_after_the_rules_on_what_they_kept() {
    let chain = RouterChain::new()
        .with_rule(
            "com.foo.Bar::.condition-router",
            "method = find => port = 20881",
        )
        .unwrap()
        .with_router(Arc::new(ByZone::default()));
    let table = chain.build(&providers(6), &consumer());
    // Port 20881: 1, 3, 5; zone z1: 1, 4.
    assert_eq!(run(&table, &call(Some("z1"))), Out::Precomputed(vec![1]));
    // Port 20881 and zone z2 (2, 5): 5.
    assert_eq!(run(&table, &call(Some("z2"))), Out::Precomputed(vec![5]));
    // Another method: the rule does not apply, the router does.
    let save = Invocation::new("save").with_attachment("zone", "z2");
    assert_eq!(run(&table, &save), Out::Precomputed(vec![2, 5]));
}

#[test]
fn a_router_leaving_no_provider_refuses_the_call_naming_it() {
    let chain = RouterChain::new()
        .with_rule("com.foo.Bar::.condition-router", "=> port = 20880")
        .unwrap()
        .with_router(Arc::new(Given("odd-only", vec![vec![1, 3, 5]])));
    let table = chain.build(&providers(6), &consumer());
    let inv = Invocation::new("find").with_attachment("set", "0");
    assert_eq!(
        run(&table, &inv),
        Out::Forbidden("router odd-only leaves no provider".into())
    );
}

#[test]
fn a_set_the_router_did_not_declare_refuses_the_call() {
    let chain = RouterChain::new().with_router(Arc::new(ByZone::default()));
    let table = chain.build(&providers(3), &consumer());
    assert_eq!(
        run(&table, &call(Some("nowhere"))),
        Out::Forbidden("router by-zone chose a candidate set it did not declare".into())
    );
}

#[test]
fn declared_sets_are_cleaned_not_trusted() {
    let sets = vec![vec![5, 1, 1, 99, u32::MAX, 3]];
    let chain = RouterChain::new().with_router(Arc::new(Given("messy", sets)));
    let table = chain.build(&providers(6), &consumer());
    let inv = Invocation::new("find").with_attachment("set", "0");
    assert_eq!(run(&table, &inv), Out::Precomputed(vec![1, 3, 5]));
}

#[test]
fn routers_run_in_order_and_a_name_is_replaced_in_place() {
    let chain = RouterChain::new()
        .with_router(Arc::new(Given("a", vec![vec![0, 1, 2, 3]])))
        .with_router(Arc::new(ByZone::default()))
        .with_router(Arc::new(Given("a", vec![vec![2, 3, 4, 5]])));
    assert_eq!(chain.router_names().collect::<Vec<_>>(), ["a", "by-zone"]);
    let table = chain.build(&providers(6), &consumer());
    let inv = call(Some("z2")).with_attachment("set", "0");
    // {2,3,4,5} then zone z2 {2,5}.
    assert_eq!(run(&table, &inv), Out::Precomputed(vec![2, 5]));
    let without = chain.without_router("a").build(&providers(6), &consumer());
    assert_eq!(run(&without, &inv), Out::Precomputed(vec![2, 5]));
    // Zone z1 is {1,4}: the first "a" would have kept 1, the one that replaced it keeps 4.
    let inv = call(Some("z1")).with_attachment("set", "0");
    assert_eq!(run(&table, &inv), Out::Precomputed(vec![4]));
    assert_eq!(run(&without, &inv), Out::Precomputed(vec![1, 4]));
}

#[test]
fn rules_set_later_keep_the_routers() {
    let chain = RouterChain::new()
        .with_router(Arc::new(ByZone::default()))
        .with_rule("com.foo.Bar::.condition-router", "=> port = 20880")
        .unwrap();
    assert!(chain.reads_weighting(), "a router may read anything");
    let table = chain.build(&providers(6), &consumer());
    assert_eq!(run(&table, &call(Some("z0"))), Out::Precomputed(vec![0]));
    let cleared = chain.without_rule("com.foo.Bar::.condition-router");
    assert!(!cleared.is_same(&chain));
    let table = cleared.build(&providers(6), &consumer());
    assert_eq!(run(&table, &call(Some("z0"))), Out::Precomputed(vec![0, 3]));
}

#[test]
fn past_the_subset_cap_intersections_are_computed_per_call() {
    // 64 blocks of 8 providers, then 8 sets taking the r-th provider of every block: 512
    // distinct single-provider intersections, past the cap.
    let blocks: Vec<Vec<u32>> = (0..64u32).map(|j| (j * 8..j * 8 + 8).collect()).collect();
    let columns: Vec<Vec<u32>> = (0..8u32)
        .map(|r| (0..64u32).map(|j| j * 8 + r).collect())
        .collect();
    let chain = RouterChain::new()
        .with_router(Arc::new(Given("blocks", blocks)))
        .with_router(Arc::new(Keyed("columns", "column", columns)));
    let table = chain.build(&providers(512), &consumer());
    assert_eq!(table.subsets().len(), 1 + MAX_ROUTER_SUBSETS);
    let mut computed = 0;
    for j in 0..64u32 {
        for r in 0..8u32 {
            let inv = Invocation::new("find")
                .with_attachment("set", j.to_string())
                .with_attachment("column", r.to_string());
            match run(&table, &inv) {
                Out::Precomputed(v) => assert_eq!(v, vec![j * 8 + r]),
                Out::Computed(v) => {
                    assert_eq!(v, vec![j * 8 + r]);
                    computed += 1;
                }
                other => panic!("block {j}, column {r}: {other:?}"),
            }
        }
    }
    // 64 blocks, 8 columns and 184 singletons prepared: the other 328 computed.
    assert_eq!(computed, 512 - (MAX_ROUTER_SUBSETS - 64 - 8));
}

/// [`Given`] choosing by another attachment.
#[derive(Debug)]
struct Keyed(&'static str, &'static str, Vec<Vec<u32>>);

#[derive(Debug)]
struct KeyedStage(&'static str, Vec<Vec<u32>>);

impl Router for Keyed {
    fn name(&self) -> &str {
        self.0
    }

    fn prepare(&self, _: &[Arc<Instance>], _: &ConsumerInfo) -> Box<dyn RouterStage> {
        Box::new(KeyedStage(self.1, self.2.clone()))
    }
}

impl RouterStage for KeyedStage {
    fn sets(&self) -> &[Vec<u32>] {
        &self.1
    }

    fn route(&self, invocation: &Invocation) -> Option<usize> {
        invocation.attachment(self.0)?.parse().ok()
    }
}
