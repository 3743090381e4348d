//! Hessian2 per object, side by side in one run: Java's hessian-lite (Dubbo 3.3.6's "hessian2"
//! serialization, as a Dubbo consumer or provider pays it per call: the peers' `vectors bench`
//! under C2) against Switchman's serde path (`switchman_hessian::to_vec` / `from_slice`), for
//! `User.sample(7)` (8 fields: long, String, int, double, boolean, Date, List<String>,
//! Map<String,Object>) and a list of 100 users: encoded, decoded, and both in turn
//! (`encode+decode`: what one value costs a call, written on one side and read on the other).
//! The Rust struct declares its fields in the order hessian-lite writes them, so it is read by
//! position; `list100/decode-by-name` reads the same bytes into one that declares them in the
//! Java source's order, by field name. Each case warms up and is timed for `--seconds`
//! (default 2) in each language; nanoseconds per operation.
//!
//! ```text
//! SWITCHMAN_JAVA_PEERS=$(scripts/install-java-peers) \
//!   cargo bench -p switchman-integration-tests --bench codec_java [-- --seconds 2]
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does) it does nothing. With
//! `--features mimalloc` the Rust side allocates through mimalloc instead of the system's
//! allocator (glibc's malloc here): the output's first line says which.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use switchman_hessian::serde::java;
use switchman_hessian::{from_slice, to_vec};
use switchman_integration_tests::java_peer::{self, vectors_bench};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The Rust side's allocator, for the output.
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "the system allocator"
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename = "io.switchman.peers.User")]
struct User {
    attributes: HashMap<String, i32>,
    tags: Vec<String>,
    #[serde(with = "java::date")]
    created: SystemTime,
    active: bool,
    score: f64,
    age: i32,
    name: String,
    id: i64,
}

/// `User` with its fields in the Java source's order, not the order hessian-lite writes them:
/// read by field name (`list100/decode-by-name`).
#[derive(Debug, Deserialize)]
#[serde(rename = "io.switchman.peers.User")]
#[allow(dead_code)]
struct UserByName {
    id: i64,
    name: String,
    age: i32,
    score: f64,
    active: bool,
    #[serde(with = "java::date")]
    created: SystemTime,
    tags: Vec<String>,
    attributes: HashMap<String, i32>,
}

/// What `User.sample(id)` makes on the Java side.
fn sample(id: i64) -> User {
    User {
        id,
        name: format!("u{id}"),
        age: 20 + id as i32,
        score: id as f64 * 1.5,
        active: id % 2 == 0,
        created: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + id as u64),
        tags: vec![format!("t{id}")],
        attributes: HashMap::from([("n".to_string(), id as i32)]),
    }
}

/// Nanoseconds per `op`, after warming up for `seconds` and timing for `seconds`.
fn time<T>(seconds: f64, mut op: impl FnMut() -> T) -> f64 {
    let budget = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    while start.elapsed() < budget {
        black_box(op());
    }
    let (mut n, start) = (0u64, Instant::now());
    while start.elapsed() < budget {
        for _ in 0..100 {
            black_box(op());
        }
        n += 100;
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    if java_peer::skipped("codec_java bench") {
        return;
    }
    let seconds: f64 = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    let java: HashMap<String, (f64, u64)> = vectors_bench(seconds)
        .into_iter()
        .map(|v| {
            (
                v["case"].as_str().unwrap_or_default().to_string(),
                (
                    v["ns"].as_f64().unwrap_or(f64::NAN),
                    v["bytes"].as_u64().unwrap_or(0),
                ),
            )
        })
        .collect();
    let user = sample(7);
    let list: Vec<User> = (0..100).map(sample).collect();
    let user_bytes = to_vec(&user).expect("a user");
    let list_bytes = to_vec(&list).expect("a list");
    assert_eq!(from_slice::<User>(&user_bytes).unwrap(), user);
    let rust = [
        (
            "user/encode",
            user_bytes.len(),
            time(seconds, || to_vec(&user).unwrap()),
        ),
        (
            "user/decode",
            user_bytes.len(),
            time(seconds, || from_slice::<User>(&user_bytes).unwrap()),
        ),
        (
            "user/encode+decode",
            user_bytes.len(),
            time(seconds, || {
                from_slice::<User>(&to_vec(&user).unwrap()).unwrap()
            }),
        ),
        (
            "list100/encode",
            list_bytes.len(),
            time(seconds, || to_vec(&list).unwrap()),
        ),
        (
            "list100/decode",
            list_bytes.len(),
            time(seconds, || from_slice::<Vec<User>>(&list_bytes).unwrap()),
        ),
        (
            "list100/encode+decode",
            list_bytes.len(),
            time(seconds, || {
                from_slice::<Vec<User>>(&to_vec(&list).unwrap()).unwrap()
            }),
        ),
        // The same bytes into a struct that names its fields in another order: by name.
        // Java's column is its `list100/decode`.
        (
            "list100/decode-by-name",
            list_bytes.len(),
            time(seconds, || {
                from_slice::<Vec<UserByName>>(&list_bytes).unwrap()
            }),
        ),
    ];
    println!("codec_java: {seconds} s per case and language; Rust on {ALLOCATOR_NAME}");
    println!(
        "{:22} {:>12} {:>12} {:>8} {:>12} {:>12}",
        "case", "java ns", "serde ns", "java/serde", "java bytes", "serde bytes"
    );
    for (case, bytes, ns) in rust {
        let java_case = case.strip_suffix("-by-name").unwrap_or(case);
        let (jns, jbytes) = java.get(java_case).copied().unwrap_or((f64::NAN, 0));
        println!(
            "{case:22} {jns:>12.0} {ns:>12.0} {:>8.2} {jbytes:>12} {bytes:>12}",
            jns / ns
        );
    }
}
