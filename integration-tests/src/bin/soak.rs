//! Soak: a static registry whose 10k-instance list is replaced every 100 ms (1% of the weights
//! changed each time), a directory subscribed to it, and two threads routing and picking
//! continuously. Prints pick latency percentiles, RSS over the run, and push-to-visible latency:
//! each push encodes its round in the weight of the first instance, and the time the round was
//! handed to the registry is kept aside, so a reader that sees the round knows when it was sent.
//!
//! ```text
//! cargo run --release -p switchman-integration-tests --bin soak -- [SECONDS] [INSTANCES] [READERS]
//! ```
//!
//! Defaults: 60 s, 10,000 instances, 2 reader threads. Bounded: it stops by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use switchman_core::{Instance, Invocation, ServiceKey};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, StaticRegistry};

/// Nanosecond histogram: exact below 16 µs, one overflow bucket with the maximum kept aside.
struct Histogram {
    counts: Vec<u64>,
    max: u64,
    total: u64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: vec![0; 16_384],
            max: 0,
            total: 0,
        }
    }
    fn record(&mut self, ns: u64) {
        let i = (ns as usize).min(self.counts.len() - 1);
        self.counts[i] += 1;
        self.max = self.max.max(ns);
        self.total += 1;
    }
    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.max = self.max.max(other.max);
        self.total += other.total;
    }
    fn percentile(&self, p: f64) -> u64 {
        let want = ((p / 100.0) * self.total as f64).ceil() as u64;
        let mut seen = 0;
        for (ns, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want.max(1) {
                return ns as u64;
            }
        }
        self.max
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Rounds are told apart by the first instance's weight: `ROUND_BASE + round % ROUNDS`.
const ROUND_BASE: u32 = 1_000;
const ROUNDS: u64 = 1_000;

fn fleet(n: usize, round: u64) -> Vec<Instance> {
    (0..n)
        .map(|i| {
            let host = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
            // 1% of the weights change every round, so every push is a real change.
            let weight = if i == 0 {
                ROUND_BASE + (round % ROUNDS) as u32
            } else if (i as u64 + round).is_multiple_of(100) {
                50
            } else {
                100
            };
            Instance::builder(host, 20880)
                .service(ServiceKey::new("soak.Svc"))
                .weight(weight)
                .timestamp_ms(0)
                .build()
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let reader_threads: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let registry = Arc::new(StaticRegistry::new(fleet(n, 0)));
    let dir = Arc::new(rt.block_on(async {
        let dir = RegistryDirectory::subscribe(
            registry.as_ref(),
            DirectoryConfig::new(ServiceKey::new("soak.Svc")),
        )
        .await
        .expect("subscribe");
        dir.wait_until(Duration::from_secs(60), |s| s.endpoints().len() == n)
            .await
            .expect("first snapshot");
        dir
    }));
    // When each round (by its slot) was handed to the registry, ns since the Unix epoch.
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..ROUNDS).map(|_| AtomicU64::new(0)).collect());
    let rss_start = rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(seconds);

    let pusher = {
        let (registry, stop, sent) = (registry.clone(), stop.clone(), sent.clone());
        rt.spawn(async move {
            let mut round = 1;
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                // Building the list is the test's own work: the clock starts after it.
                let list = fleet(n, round);
                sent[(round % ROUNDS) as usize].store(now_ns(), Ordering::Relaxed);
                registry.set(list);
                round += 1;
            }
            round - 1
        })
    };

    let readers: Vec<_> = (0..reader_threads)
        .map(|seed| {
            let (dir, stop, sent) = (dir.clone(), stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed);
                let inv = Invocation::new("get");
                let mut picks = Histogram::new();
                let mut visible: Vec<u64> = Vec::new();
                let mut last_epoch = 0;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        let t = Instant::now();
                        let snap = dir.snapshot();
                        let i = snap.select(&inv, &[], &mut rng).expect("pick");
                        std::hint::black_box(i);
                        picks.record(t.elapsed().as_nanos() as u64);
                        if snap.epoch() != last_epoch {
                            last_epoch = snap.epoch();
                            let w = snap.instances()[0].weight();
                            if w >= ROUND_BASE {
                                let at = sent[(w - ROUND_BASE) as usize].load(Ordering::Relaxed);
                                if at > 0 {
                                    visible.push(now_ns().saturating_sub(at));
                                }
                            }
                        }
                    }
                }
                (picks, visible)
            })
        })
        .collect();

    // RSS once a second: the start is taken right after the first snapshot, before the
    // allocator has seen the steady churn of pushes; the warm point after a tenth of the run
    // (at least 5 s) is the baseline for "flat".
    let started = Instant::now();
    let warm_after = Duration::from_secs((seconds / 10).max(5)).min(Duration::from_secs(seconds));
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut next_sample = started;
    while Instant::now() < deadline {
        if Instant::now() >= next_sample {
            samples.push((started.elapsed().as_secs_f64(), rss_kib()));
            next_sample += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let mut picks = Histogram::new();
    let mut visible = Vec::new();
    for r in readers {
        let (h, v) = r.join().expect("reader");
        picks.merge(&h);
        visible.extend(v);
    }
    let rounds = rt.block_on(pusher).unwrap_or(0);
    let rss_end = rss_kib();
    visible.sort_unstable();
    let pct = |v: &[u64], p: f64| {
        if v.is_empty() {
            0
        } else {
            v[((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
        }
    };
    println!(
        "soak: {seconds} s, {n} instances, {rounds} pushes through a StaticRegistry (every 100 ms, 1% of weights changed), {reader_threads} reader threads"
    );
    println!(
        "picks: {} total, p50 {} ns, p99 {} ns, max {} ns (snapshot guard + route + pick)",
        picks.total,
        picks.percentile(50.0),
        picks.percentile(99.0),
        picks.max
    );
    println!(
        "push-to-visible: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} snapshots observed)",
        pct(&visible, 50.0) as f64 / 1e6,
        pct(&visible, 99.0) as f64 / 1e6,
        visible.last().copied().unwrap_or(0) as f64 / 1e6,
        visible.len()
    );
    let change = (rss_end as f64 - rss_start as f64) / rss_start.max(1) as f64 * 100.0;
    println!("rss: start {rss_start} KiB, end {rss_end} KiB ({change:+.1}%)");
    let steady: Vec<(f64, u64)> = samples
        .iter()
        .copied()
        .filter(|(t, _)| *t >= warm_after.as_secs_f64())
        .collect();
    if let (Some(&(t0, warm)), true) = (steady.first(), steady.len() >= 2) {
        let (lo, hi) = steady
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), &(_, r)| (lo.min(r), hi.max(r)));
        // Least-squares slope over the steady phase: a leak grows linearly, a plateau does not.
        let k = steady.len() as f64;
        let (mt, mr) = steady
            .iter()
            .fold((0.0, 0.0), |(a, b), &(t, r)| (a + t / k, b + r as f64 / k));
        let (num, den) = steady.iter().fold((0.0, 0.0), |(n, d), &(t, r)| {
            (n + (t - mt) * (r as f64 - mr), d + (t - mt) * (t - mt))
        });
        let slope_per_min = if den > 0.0 { num / den * 60.0 } else { 0.0 };
        let drift = (rss_end as f64 - warm as f64) / warm.max(1) as f64 * 100.0;
        println!(
            "rss after warm-up ({t0:.0} s): {warm} KiB -> end {rss_end} KiB ({drift:+.1}%), steady range {lo}..{hi} KiB, slope {slope_per_min:+.0} KiB/min"
        );
        // RSS moves in a sawtooth (allocator arenas filling and trimming), so single points
        // land anywhere in the band: compare the means of the first and last fifth instead.
        let fifth = (steady.len() / 5).max(1);
        let mean = |part: &[(f64, u64)]| {
            part.iter().map(|&(_, r)| r as f64).sum::<f64>() / part.len() as f64
        };
        let (first, last) = (
            mean(&steady[..fifth]),
            mean(&steady[steady.len() - fifth..]),
        );
        println!(
            "rss mean of the first and last fifth of the steady phase: {first:.0} KiB -> {last:.0} KiB ({:+.1}%)",
            (last - first) / first.max(1.0) * 100.0
        );
    }
}
