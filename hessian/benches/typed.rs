//! A typed argument or result through Hessian: the `Value` path the `dubbo://` body takes
//! today (Rust → `serde_json::Value` → `from_json` → `Encoder`; `Decoder` → `to_json` →
//! `serde_json::from_value`) against the serde path (`to_vec` / `from_slice`), for a 6-field
//! POJO and a list of 100 of them.
//!
//! ```text
//! cargo bench -p switchman-hessian --bench typed -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Allocations per call are counted by a counting global allocator and printed before the
//! timings (`alloc: ...` lines).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use switchman_hessian::serde::java;
use switchman_hessian::{Decoder, Encoder, from_json, from_slice, to_json, to_vec};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CLASS: &str = "io.switchman.peers.Pojo";
const LIST: &str = "java.util.List<io.switchman.peers.Pojo>";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.Pojo")]
struct Pojo {
    id: i64,
    name: String,
    age: i32,
    score: f64,
    active: bool,
    #[serde(with = "java::date")]
    created: i64,
}

fn pojo(i: i64) -> Pojo {
    Pojo {
        id: i,
        name: format!("user-{i}"),
        age: 20 + i as i32,
        score: i as f64 * 1.5,
        active: i % 2 == 0,
        created: 1_700_000_000_000 + i,
    }
}

fn value_encode<T: Serialize>(v: &T, java_type: &str) -> Vec<u8> {
    let json = serde_json::to_value(v).expect("to JSON");
    let value = from_json(&json, Some(java_type)).expect("from JSON");
    let mut e = Encoder::new();
    e.write(&value);
    e.into_bytes()
}

fn value_decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> T {
    let v = Decoder::new(bytes).read().expect("decodes");
    serde_json::from_value(to_json(&v)).expect("from JSON")
}

fn allocs(name: &str, mut f: impl FnMut()) {
    f();
    const CALLS: u64 = 200;
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..CALLS {
        f();
    }
    let per = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / CALLS as f64;
    println!("alloc: {name}: {per:.1} allocations per call");
}

fn case<T>(c: &mut Criterion, name: &str, v: &T, java_type: &str)
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug,
{
    let value_bytes = value_encode(v, java_type);
    let typed_bytes = to_vec(v).expect("encodes");
    assert_eq!(&from_slice::<T>(&typed_bytes).expect("decodes"), v);
    assert_eq!(&value_decode::<T>(&value_bytes), v);
    assert_eq!(&from_slice::<T>(&value_bytes).expect("decodes"), v);

    allocs(&format!("typed/{name}/value/encode"), || {
        black_box(value_encode(v, java_type));
    });
    allocs(&format!("typed/{name}/serde/encode"), || {
        black_box(to_vec(v).unwrap());
    });
    allocs(&format!("typed/{name}/value/decode"), || {
        black_box(value_decode::<T>(&value_bytes));
    });
    allocs(&format!("typed/{name}/serde/decode"), || {
        black_box(from_slice::<T>(&typed_bytes).unwrap());
    });

    let mut g = c.benchmark_group(format!("typed/{name}"));
    g.bench_function("value/encode", |b| {
        b.iter(|| black_box(value_encode(black_box(v), java_type)))
    });
    g.bench_function("serde/encode", |b| {
        b.iter(|| black_box(to_vec(black_box(v)).unwrap()))
    });
    g.bench_function("value/decode", |b| {
        b.iter(|| black_box(value_decode::<T>(black_box(&value_bytes))))
    });
    g.bench_function("serde/decode", |b| {
        b.iter(|| black_box(from_slice::<T>(black_box(&typed_bytes)).unwrap()))
    });
    g.finish();
}

fn bench_typed(c: &mut Criterion) {
    case(c, "pojo", &pojo(7), CLASS);
    let list: Vec<Pojo> = (0..100).map(pojo).collect();
    case(c, "list100", &list, LIST);
}

criterion_group!(benches, bench_typed);
criterion_main!(benches);
