//! Registry data cannot push calls off the fast path: a fleet with 1,000 distinct static
//! `dubbo.tag` values and a condition rule still routes and picks every call from
//! precomputed tables, with zero allocations per call (counted by a global allocator
//! wrapper; this test crate needs `unsafe` for `GlobalAlloc`, the library forbids it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};
use switchman_router::{Route, RouterChain};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the thread-local counter is a
// const-initialised `Cell`, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (r, ALLOCS.with(Cell::get) - before)
}

#[test]
fn the_counter_sees_allocations() {
    let (_, n) = allocations(|| vec![1u8; 64]);
    assert!(n >= 1);
}

#[tokio::test]
async fn a_thousand_distinct_tags_and_a_condition_rule_stay_on_the_fast_path() {
    const TAGS: usize = 1_000;
    // Three instances per tag (3,000 in all), two zones, plus 100 untagged ones.
    let mut list = Vec::new();
    for t in 0..TAGS {
        for k in 0..3u16 {
            let zone = if k == 0 { "z1" } else { "z2" };
            list.push(
                Instance::builder(format!("10.{}.{}.{k}", t / 250, t % 250), 20880)
                    .zone(zone)
                    .param("zone", zone)
                    .tag(&format!("t{t}"))
                    .build(),
            );
        }
    }
    for u in 0..100u16 {
        let zone = if u % 2 == 0 { "z1" } else { "z2" };
        list.push(
            Instance::builder("10.9.9.9", 1000 + u)
                .zone(zone)
                .param("zone", zone)
                .build(),
        );
    }
    let chain = RouterChain::new()
        .with_rule("svc.condition-router", "method = find* => zone = z2")
        .unwrap();
    let dir = RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::new("com.foo.Bar")).router(chain.clone()),
        None,
    );
    dir.apply(Update::reset(list));
    let snap = dir
        .wait_until(Duration::from_secs(30), |s| {
            s.endpoints().len() == 3 * TAGS + 100
        })
        .await
        .unwrap();
    // The route table precomputes every (tag, rule) combination.
    let instances: Vec<_> = snap.instances().to_vec();
    let table = chain.build(
        &instances,
        &switchman_router::ConsumerInfo::new("127.0.0.1", "c"),
    );
    let calls: Vec<Invocation> = (0..TAGS)
        .step_by(7)
        .flat_map(|t| {
            [
                Invocation::new("findUser").with_attachment("dubbo.tag", format!("t{t}")),
                Invocation::new("save").with_attachment("dubbo.tag", format!("t{t}")),
            ]
        })
        .chain([Invocation::new("findUser"), Invocation::new("save")])
        .collect();
    let mut rng = fastrand::Rng::with_seed(5);
    for inv in &calls {
        assert!(
            matches!(table.route(inv, &mut rng), Route::Subset(_)),
            "{inv:?} took the computed path"
        );
    }
    // Route + pick of each call: right answers, no allocation.
    let mut picked = Vec::with_capacity(calls.len() * 10);
    let (_, allocs) = allocations(|| {
        for _ in 0..10 {
            for inv in &calls {
                picked.push(snap.select(inv, &[], &mut rng).unwrap());
            }
        }
    });
    assert_eq!(allocs, 0, "allocations in {} calls", picked.len());
    for (k, &i) in picked.iter().enumerate() {
        let inv = &calls[k % calls.len()];
        let ep = &snap.endpoints()[i].instance;
        assert_eq!(ep.tag(), inv.attachment("dubbo.tag"), "{inv:?}");
        if inv.method.starts_with("find") {
            assert_eq!(ep.zone(), Some("z2"), "{inv:?}");
        }
    }
}
