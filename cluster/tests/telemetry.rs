//! The cluster invoker's metrics (OpenTelemetry RPC conventions through the `metrics` facade)
//! seen by a real recorder, and the call path's allocations with metric recording on.
//!
//! This test crate needs `unsafe` for `GlobalAlloc` (the library itself forbids it). The
//! allocation counter is per thread, so tests running in parallel do not disturb each other;
//! the recorder is global (installed once), and each test uses a service of its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use serde_json::Value;
use switchman_cluster::telemetry::{self, DURATION_BUCKETS};
use switchman_cluster::{BudgetConfig, ClusterConfig, ClusterInvoker};
use switchman_core::{
    BoxFuture, Error, Instance, Invocation, Invoker, Protocol, Result, ServiceKey,
};
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    /// Handles registered by this thread.
    static REGISTRATIONS: Cell<u64> = const { Cell::new(0) };
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

/// A histogram that records without allocating: count, sum and counts per bucket.
#[derive(Debug, Default)]
struct Hist {
    count: AtomicU64,
    sum_micros: AtomicU64,
    buckets: [AtomicU64; DURATION_BUCKETS.len()],
}

impl metrics::HistogramFn for Hist {
    fn record(&self, value: f64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((value * 1e6) as u64, Ordering::Relaxed);
        if let Some(b) = DURATION_BUCKETS.iter().position(|&le| value <= le) {
            self.buckets[b].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A recorder whose handles are atomics (recording allocates nothing), kept by key so the
/// tests can read them. Registering (first use of a label set) allocates, as any recorder's.
#[derive(Debug, Default)]
struct TestRecorder {
    counters: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<Key, Arc<Hist>>>,
}

fn registered() {
    REGISTRATIONS.with(|c| c.set(c.get() + 1));
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        registered();
        let mut m = self.counters.lock().unwrap();
        Counter::from_arc(m.entry(key.clone()).or_default().clone())
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        registered();
        let mut m = self.gauges.lock().unwrap();
        Gauge::from_arc(m.entry(key.clone()).or_default().clone())
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        registered();
        let mut m = self.histograms.lock().unwrap();
        Histogram::from_arc(m.entry(key.clone()).or_default().clone())
    }
}

fn recorder() -> &'static TestRecorder {
    static R: OnceLock<&'static TestRecorder> = OnceLock::new();
    R.get_or_init(|| {
        let r: &'static TestRecorder = Box::leak(Box::default());
        metrics::set_global_recorder(r).expect("the only recorder of this test binary");
        r
    })
}

/// Held by every test of this binary for its whole run. Tracing caches per callsite whether
/// anything listens, process-wide: a test calling the cluster on another thread while the
/// span test installs its subscriber could leave the `call` and `attempt` callsites cached as
/// unheard (the span test then saw no span, about one run in 15 here). One at a time, the
/// subscriber's installation recomputes those caches before the span test calls.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn labels(key: &Key) -> BTreeMap<String, String> {
    key.labels()
        .map(|l| (l.key().to_string(), l.value().to_string()))
        .collect()
}

/// The histograms named `name` whose labels include `want`, as (labels, count, bucket counts).
fn histograms(name: &str, want: &[(&str, &str)]) -> Vec<(BTreeMap<String, String>, u64, Vec<u64>)> {
    let m = recorder().histograms.lock().unwrap();
    let mut out: Vec<_> = m
        .iter()
        .filter(|(k, _)| k.name() == name)
        .map(|(k, h)| (labels(k), h))
        .filter(|(l, _)| {
            want.iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(l, h)| {
            let buckets = h
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect();
            (l, h.count.load(Ordering::Relaxed), buckets)
        })
        .collect();
    out.sort();
    out
}

fn counter(name: &str, service: &str) -> u64 {
    let m = recorder().counters.lock().unwrap();
    m.iter()
        .filter(|(k, _)| {
            k.name() == name && labels(k).get("rpc_service").map(String::as_str) == Some(service)
        })
        .map(|(_, c)| c.load(Ordering::Relaxed))
        .sum()
}

/// Answers per port: `Ok(port)`, a transport error, a business error, or a short sleep. Its
/// futures are boxed (one allocation per attempt, as every `dyn Invoker`'s).
#[derive(Debug)]
struct Scripted;

impl Invoker for Scripted {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        _inv: &'a Invocation,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let port = target.port();
        Box::pin(async move {
            match port {
                1..=99 => Ok(Value::from(port)),
                100..=199 => Err(Error::transport("connection refused")),
                200..=299 => Err(Error::business("IllegalStateException")),
                _ => {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    Ok(Value::from(port))
                }
            }
        })
    }
}

async fn directory(service: &str, instances: Vec<Instance>) -> Arc<RegistryDirectory> {
    let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new(service)), None);
    dir.apply(Update::reset(instances));
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
        .await
        .unwrap();
    Arc::new(dir)
}

fn at(port: u16, protocol: Protocol, service: &str) -> Instance {
    Instance::builder("10.0.0.1", port)
        .protocol(protocol)
        .service(ServiceKey::new(service))
        .build()
}

/// Call and attempt histograms by method, system, outcome and error type; the retry and
/// budget counters; buckets in seconds.
#[tokio::test]
async fn calls_and_attempts_are_recorded_by_the_rpc_conventions() {
    let _serial = SERIAL.lock().await;
    recorder();
    let svc = "test.Conventions";
    // Port 1 answers over Triple, port 150 refuses over dubbo://, port 250 fails with a
    // business error over HTTP.
    let ok = directory(svc, vec![at(1, Protocol::Tri, svc)]).await;
    let cluster = ClusterInvoker::new(ok, Arc::new(Scripted), ClusterConfig::default());
    // The recorded duration lies inside the test's own timing of the call, so every call
    // the test saw end within 0.5 ms must be in the first bucket. (How many do depends on
    // the machine's load: a CI run once saw one of five take longer.)
    let first_bucket = Duration::from_secs_f64(DURATION_BUCKETS[0]);
    let mut fast = 0;
    for _ in 0..20 {
        let started = Instant::now();
        cluster.invoke(&Invocation::new("find")).await.unwrap();
        fast += u64::from(started.elapsed() <= first_bucket);
    }
    assert!(fast > 0, "not one of 20 instant calls ended within 0.5 ms");
    let calls = histograms(telemetry::CALL_DURATION, &[("rpc_service", svc)]);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let (l, count, buckets) = &calls[0];
    assert_eq!(
        l,
        &BTreeMap::from([
            ("outcome".into(), "success".into()),
            ("rpc_method".into(), "find".into()),
            ("rpc_service".into(), svc.into()),
            ("rpc_system".into(), "triple".into()),
        ])
    );
    assert_eq!(*count, 20);
    assert!(
        (fast..=20).contains(&buckets[0]),
        "{fast} calls ended within 0.5 ms by the test's clock; the first bucket has {}",
        buckets[0]
    );

    // Every attempt refused: 1 call, 3 attempts (retries=2), all dubbo transport failures.
    let svc2 = "test.Conventions2";
    let refusing = directory(svc2, vec![at(150, Protocol::Dubbo, svc2)]).await;
    let failing = ClusterInvoker::new(refusing, Arc::new(Scripted), ClusterConfig::default())
        .with_budget(None);
    let e = failing.invoke(&Invocation::new("find")).await.unwrap_err();
    assert!(e.is_retryable());
    let failed = histograms(
        telemetry::CALL_DURATION,
        &[("rpc_service", svc2), ("outcome", "failure")],
    );
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0["error_type"], "transport");
    assert_eq!(failed[0].0["rpc_system"], "dubbo");
    assert_eq!(failed[0].1, 1);
    let attempts = histograms(telemetry::ATTEMPT_DURATION, &[("rpc_service", svc2)]);
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].1, 3);
    assert_eq!(counter(telemetry::RETRIES, svc2), 2);

    // A business error is the provider's answer: one attempt, error_type business.
    let svc3 = "test.Conventions3";
    let business = directory(svc3, vec![at(250, Protocol::Http, svc3)]).await;
    let c3 = ClusterInvoker::new(business, Arc::new(Scripted), ClusterConfig::default());
    c3.invoke(&Invocation::new("save")).await.unwrap_err();
    let b = histograms(telemetry::CALL_DURATION, &[("rpc_service", svc3)]);
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0].0["error_type"].as_str(), b[0].0["rpc_system"].as_str()),
        ("business", "http")
    );
    assert_eq!(counter(telemetry::RETRIES, svc3), 0);

    // No provider: no attempt; rpc_system none, error_type no_provider.
    let svc4 = "test.Conventions4";
    let empty = directory(svc4, vec![]).await;
    let c4 = ClusterInvoker::new(empty, Arc::new(Scripted), ClusterConfig::default());
    c4.invoke(&Invocation::new("find")).await.unwrap_err();
    let n = histograms(telemetry::CALL_DURATION, &[("rpc_service", svc4)]);
    assert_eq!(n.len(), 1);
    assert_eq!(
        (n[0].0["error_type"].as_str(), n[0].0["rpc_system"].as_str()),
        ("no_provider", "none")
    );
    assert!(histograms(telemetry::ATTEMPT_DURATION, &[("rpc_service", svc4)]).is_empty());
}

/// With a tight budget and every attempt failing, refused retries are counted under the
/// service; the slow instance's samples land in the 5 ms bucket, not the first one.
#[tokio::test]
async fn budget_refusals_are_counted_and_durations_land_in_their_buckets() {
    let _serial = SERIAL.lock().await;
    recorder();
    let svc = "test.Budget";
    let dir = directory(svc, vec![at(150, Protocol::Http, svc)]).await;
    let budget = BudgetConfig {
        ratio: 0.0,
        min_per_sec: 1,
        window: Duration::from_secs(10),
    };
    let c = ClusterInvoker::new(dir, Arc::new(Scripted), ClusterConfig::default())
        .with_budget(Some(budget));
    for _ in 0..20 {
        c.invoke(&Invocation::new("find")).await.unwrap_err();
    }
    let refused = counter(telemetry::RETRY_BUDGET_REFUSED, svc);
    assert!((10..=20).contains(&refused), "{refused}");
    assert_eq!(refused, c.budget_refused());

    let slow = "test.Slow";
    let dir = directory(slow, vec![at(400, Protocol::Http, slow)]).await;
    let c = ClusterInvoker::new(dir, Arc::new(Scripted), ClusterConfig::default());
    c.invoke(&Invocation::new("find")).await.unwrap();
    let h = histograms(telemetry::ATTEMPT_DURATION, &[("rpc_service", slow)]);
    assert_eq!(h.len(), 1);
    let b = &h[0].2;
    let first = b.iter().position(|&n| n > 0).unwrap();
    assert!(
        DURATION_BUCKETS[first] >= 0.0025,
        "a 3 ms attempt is not under 2.5 ms: {b:?}"
    );
}

/// Per-instance labels only when asked for.
#[tokio::test]
async fn instance_labels_are_opt_in() {
    let _serial = SERIAL.lock().await;
    recorder();
    let svc = "test.PerInstance";
    let dir = directory(
        svc,
        vec![at(1, Protocol::Http, svc), at(2, Protocol::Http, svc)],
    )
    .await;
    let plain = ClusterInvoker::new(dir.clone(), Arc::new(Scripted), ClusterConfig::default());
    for _ in 0..10 {
        plain.invoke(&Invocation::new("a")).await.unwrap();
    }
    let h = histograms(telemetry::ATTEMPT_DURATION, &[("rpc_method", "a")]);
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(!h[0].0.contains_key("server_address"));

    let per = plain.with_instance_metrics(true);
    for _ in 0..40 {
        per.invoke(&Invocation::new("b")).await.unwrap();
    }
    let h = histograms(telemetry::ATTEMPT_DURATION, &[("rpc_method", "b")]);
    let ports: Vec<&str> = h
        .iter()
        .map(|(l, _, _)| l["server_port"].as_str())
        .collect();
    assert_eq!(ports, ["1", "2"], "{h:?}");
    assert!(h.iter().all(|(l, _, _)| l["server_address"] == "10.0.0.1"));
    assert_eq!(h.iter().map(|(_, n, _)| n).sum::<u64>(), 40);
}

/// The steady-state call path with a recorder installed: after the first call of each label
/// set, a successful call allocates only the transport's boxed future (routing, picking,
/// settings, the method and handle lookups, the histogram records and the spans allocate
/// nothing), with or without per-instance labels; and no handle is registered again, for
/// failures either.
#[test]
fn recording_metrics_adds_no_allocation_per_call() {
    let _serial = SERIAL.blocking_lock();
    recorder();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let svc = "test.Allocations";
    let (ok, failing) = rt.block_on(async {
        let ok = directory(
            svc,
            vec![at(1, Protocol::Tri, svc), at(2, Protocol::Tri, svc)],
        )
        .await;
        let fail = directory("test.Allocations2", vec![at(250, Protocol::Dubbo, svc)]).await;
        (
            ClusterInvoker::new(ok, Arc::new(Scripted), ClusterConfig::default()),
            ClusterInvoker::new(fail, Arc::new(Scripted), ClusterConfig::default()),
        )
    });
    let inv = Invocation::new("find");
    let per_instance = ok.clone().with_instance_metrics(true);
    for c in [&ok, &per_instance, &failing] {
        for _ in 0..100 {
            let _ = rt.block_on(c.invoke(&inv));
        }
    }
    let baseline = {
        // The same boxed future the invoker returns, to know what one costs here.
        let (_, n) = allocations(|| {
            let f: BoxFuture<'_, Result<Value>> = Box::pin(async { Ok(Value::Null) });
            rt.block_on(f)
        });
        n
    };
    assert_eq!(baseline, 1);
    let registrations = REGISTRATIONS.with(Cell::get);
    for (name, c) in [("aggregated", &ok), ("per-instance", &per_instance)] {
        let (_, n) = allocations(|| {
            for _ in 0..1000 {
                rt.block_on(c.invoke(&inv)).unwrap();
            }
        });
        assert_eq!(
            n, 1000,
            "{name}: one allocation per call (the transport's boxed future), got {n} in 1000 calls"
        );
    }
    // Failed calls allocate for their error (message, addresses tried); their metrics are
    // cached handles like a success's: nothing is registered again.
    for _ in 0..1000 {
        rt.block_on(failing.invoke(&inv)).unwrap_err();
    }
    assert_eq!(
        REGISTRATIONS.with(Cell::get),
        registrations,
        "no handle registered again in steady state"
    );
    let h = histograms(telemetry::CALL_DURATION, &[("rpc_service", svc)]);
    assert_eq!(h.iter().map(|(_, n, _)| n).sum::<u64>(), 2200, "{h:?}");
}

/// The spans of one call as a tracing layer sees them: name, fields, parent.
mod spans {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing_subscriber::layer::{Context, Layer};
    use tracing_subscriber::registry::LookupSpan;

    #[derive(Debug, Clone, Default)]
    pub(crate) struct Seen {
        pub(crate) name: String,
        pub(crate) level: String,
        pub(crate) parent: Option<String>,
        pub(crate) fields: BTreeMap<String, String>,
    }

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .insert(field.name().to_string(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_string(), value.to_string());
        }
    }

    /// Keeps every span, in creation order.
    #[derive(Clone, Default)]
    pub(crate) struct Spans(pub(crate) Arc<Mutex<Vec<(u64, Seen)>>>);

    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let mut seen = Seen {
                name: attrs.metadata().name().to_string(),
                level: attrs.metadata().level().to_string(),
                parent: ctx
                    .span(id)
                    .and_then(|s| s.parent())
                    .map(|p| p.name().to_string()),
                ..Seen::default()
            };
            attrs.record(&mut Fields(&mut seen.fields));
            self.0.lock().unwrap().push((id.into_u64(), seen));
        }

        fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
            let mut all = self.0.lock().unwrap();
            if let Some((_, seen)) = all.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
                values.record(&mut Fields(&mut seen.fields));
            }
        }
    }
}

/// A call span at `info` (service, method, cluster strategy, then outcome, error type and
/// attempts) around one `info` attempt span per attempt (endpoint, attempt number, system,
/// outcome).
#[test]
fn calls_and_attempts_are_traced_at_info_with_their_fields() {
    let _serial = SERIAL.blocking_lock();
    use tracing_subscriber::layer::SubscriberExt;
    recorder();
    let layer = spans::Spans::default();
    let subscriber = tracing_subscriber::registry().with(layer.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let svc = "test.Spans";
    tracing::subscriber::with_default(subscriber, || {
        rt.block_on(async {
            let dir = directory(svc, vec![at(150, Protocol::Dubbo, svc)]).await;
            let c = ClusterInvoker::new(dir, Arc::new(Scripted), ClusterConfig::default())
                .with_budget(None);
            c.invoke(&Invocation::new("find")).await.unwrap_err();
        })
    });
    let all = layer.0.lock().unwrap().clone();
    let calls: Vec<_> = all.iter().filter(|(_, s)| s.name == "call").collect();
    assert_eq!(calls.len(), 1, "{all:?}");
    let call = &calls[0].1;
    assert_eq!(call.level, "INFO");
    let f = |k: &str| call.fields.get(k).map(String::as_str);
    assert_eq!(f("rpc.service"), Some(svc));
    assert_eq!(f("rpc.method"), Some("find"));
    assert_eq!(f("cluster"), Some("failover"));
    assert_eq!(f("outcome"), Some("failure"));
    assert_eq!(f("error_type"), Some("transport"));
    assert_eq!(f("attempts"), Some("3"));
    let attempts: Vec<_> = all.iter().filter(|(_, s)| s.name == "attempt").collect();
    assert_eq!(attempts.len(), 3, "{all:?}");
    for (n, (_, a)) in attempts.iter().enumerate() {
        assert_eq!(a.level, "INFO");
        assert_eq!(a.parent.as_deref(), Some("call"));
        assert_eq!(a.fields["endpoint"], "10.0.0.1:150");
        assert_eq!(a.fields["attempt"], (n + 1).to_string());
        assert_eq!(a.fields["rpc.system"], "dubbo");
        assert_eq!(a.fields["outcome"], "failure");
        assert_eq!(a.fields["error_type"], "transport");
    }
}
