//! Per-call routing cost (method condition rule, tag rule, no rule) at 10, 1k and 10k
//! instances, the rebuild of a route table at 10k instances, and reading a hostile rule (a
//! YAML alias bomb, refused at the node limit).
//!
//! Kept short (small warm-up and measurement windows) so a full run stays bounded:
//! `cargo bench -p switchman-router --bench route`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use switchman_core::{Instance, Invocation};
use switchman_router::{ConsumerInfo, Route, RouterChain};

const SVC: &str = "com.foo.Bar::.condition-router";

fn instances(n: usize) -> Vec<Arc<Instance>> {
    (0..n)
        .map(|i| {
            let mut b = Instance::builder(
                format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256),
                20880 + (i % 2) as u16,
            )
            .param("zone", &format!("z{}", i % 4))
            .param("application", "prov");
            if i % 10 == 0 {
                b = b.tag("gray");
            }
            Arc::new(b.build())
        })
        .collect()
}

fn method_chain() -> RouterChain {
    RouterChain::new()
        .with_rule(SVC, "method = find* => zone = z1")
        .unwrap()
}

fn tag_chain() -> RouterChain {
    RouterChain::new()
        .with_rule(
            "prov.tag-router",
            "force: false\ntags:\n  - name: canary\n    addresses: [\"10.0.0.*\"]\n  - name: canary|eu\n    addresses: [\"10.0.1.*\"]\n",
        )
        .unwrap()
}

fn subset_len(r: Route<'_>) -> usize {
    match r {
        Route::Subset(i) => i,
        Route::Computed(s) => s.len(),
        Route::Forbidden(s) => s.len(),
        _ => 0,
    }
}

fn per_call(c: &mut Criterion) {
    let consumer = ConsumerInfo::new("10.9.9.9", "shop");
    let mut g = c.benchmark_group("route_per_call");
    for n in [10usize, 1_000, 10_000] {
        let inst = instances(n);
        let none = RouterChain::new().build(&inst, &consumer);
        let method = method_chain().build(&inst, &consumer);
        let tag = tag_chain().build(&inst, &consumer);
        let find = Invocation::new("findUser");
        let save = Invocation::new("save");
        let canary = Invocation::new("save").with_attachment("dubbo.tag", "canary|us");
        let mut rng = fastrand::Rng::with_seed(1);
        g.bench_with_input(BenchmarkId::new("no_rule", n), &n, |b, _| {
            b.iter(|| subset_len(none.route(black_box(&find), &mut rng)))
        });
        g.bench_with_input(BenchmarkId::new("method_rule_match", n), &n, |b, _| {
            b.iter(|| subset_len(method.route(black_box(&find), &mut rng)))
        });
        g.bench_with_input(BenchmarkId::new("method_rule_miss", n), &n, |b, _| {
            b.iter(|| subset_len(method.route(black_box(&save), &mut rng)))
        });
        g.bench_with_input(
            BenchmarkId::new("tag_rule_level_fallback", n),
            &n,
            |b, _| b.iter(|| subset_len(tag.route(black_box(&canary), &mut rng))),
        );
    }
    g.finish();
}

/// Rules that make more distinct candidate sets than the table precomputes: one rule per
/// method, each keeping all instances but one. A call of such a method takes the slow path.
fn slow_path(c: &mut Criterion) {
    let consumer = ConsumerInfo::new("10.9.9.9", "shop");
    let mut g = c.benchmark_group("route_slow_path");
    let n = 10_000;
    let inst = instances(n);
    let rules: String = (0..switchman_router::MAX_SUBSETS + 40)
        .map(|i| format!("method = m{i} => host != {}\n", inst[i].host()))
        .collect();
    let t = RouterChain::new()
        .with_rule(SVC, &rules)
        .unwrap()
        .build(&inst, &consumer);
    let mut rng = fastrand::Rng::with_seed(1);
    let calls: Vec<Invocation> = (0..switchman_router::MAX_SUBSETS + 40)
        .map(|i| Invocation::new(format!("m{i}")))
        .collect();
    let slow = calls
        .iter()
        .rev()
        .find(|c| matches!(t.route(c, &mut rng), Route::Computed(_)))
        .expect("a call on the slow path")
        .clone();
    g.bench_function(BenchmarkId::new("same_shape_again", n), |b| {
        b.iter(|| subset_len(t.route(black_box(&slow), &mut rng)))
    });
    g.finish();
}

fn rebuild(c: &mut Criterion) {
    let consumer = ConsumerInfo::new("10.9.9.9", "shop");
    let inst = instances(10_000);
    let chain = tag_chain()
        .with_rule(
            SVC,
            "method = find* => zone = z1\nmethod = save => port = 20881\narguments[0] = vip => zone = z2 & port = 20880\n",
        )
        .unwrap();
    let mut g = c.benchmark_group("route_rebuild");
    g.bench_function("tag_and_3_conditions_10k", |b| {
        b.iter(|| chain.build(black_box(&inst), &consumer))
    });
    let method = method_chain();
    g.bench_function("method_rule_10k", |b| {
        b.iter(|| method.build(black_box(&inst), &consumer))
    });
    g.finish();
}

/// `x: &a [0,0,…]` and `y: [*a,*a,…]` after a valid rule, `size` bytes in all: millions of
/// nodes once aliases are expanded.
fn alias_bomb(size: usize) -> String {
    let rule = "scope: service\nkey: com.foo.Bar\nconditions:\n  - method = find* => zone = z1\n";
    let room = size.saturating_sub(rule.len() + 20);
    format!(
        "{rule}x: &a [{}]\ny: [{}]\n",
        vec!["0"; room / 4].join(","),
        vec!["*a"; room / 6].join(",")
    )
}

fn hostile_rule(c: &mut Criterion) {
    let mut g = c.benchmark_group("rule_parse");
    for size in [10 * 1024, 64 * 1024] {
        let text = alias_bomb(size);
        g.bench_with_input(BenchmarkId::new("alias_bomb", size), &text, |b, text| {
            b.iter(|| {
                let refused = RouterChain::new().with_rule(SVC, black_box(text)).is_err();
                assert!(refused);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = per_call, slow_path, rebuild, hostile_rule
}
criterion_main!(benches);
