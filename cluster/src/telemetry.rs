//! Metrics and trace context of the cluster layer, by OpenTelemetry's RPC conventions.
//!
//! **Metrics** go through the [`metrics`] facade, so they cost nothing until the application
//! installs a recorder (`switchman::serve_metrics` installs the Prometheus one). Two
//! histograms in seconds, [`CALL_DURATION`] (one sample per call, retries included) and
//! [`ATTEMPT_DURATION`] (one per attempt on an instance), labelled `rpc_system` (`dubbo`,
//! `triple`, `http`), `rpc_service` (Dubbo's service key, `group/interface:version`),
//! `rpc_method`, `outcome` (`success`, `failure`) and, on failures, `error_type` (the
//! [`ErrorKind`] in snake case: `transport`, `timeout`, `business`, ...). Per-instance labels
//! (`server_address`, `server_port`) on the attempt histogram are opt-in
//! ([`ClusterInvoker::with_instance_metrics`](crate::ClusterInvoker::with_instance_metrics)):
//! one series per instance multiplies the series count by the fleet size.
//!
//! The histograms need buckets from the recorder: [`DURATION_BUCKETS`] (0.5 ms to 10 s) are the
//! ones `switchman::serve_metrics` sets for every metric whose name ends in
//! `_duration_seconds`.
//!
//! **Cost**: handles are resolved once per (method, system, outcome, error type) and kept in a
//! copy-on-write map read with one atomic load; a call finds its method's series in its call
//! plan (FNV-1a of the name into a table of 16, filled from that map the first time a
//! method is called under the plan) and records through the cached handles, with no lock, no
//! shared read-modify-write, no label vector and no allocation. A service sees at most
//! [`MAX_METHODS`] method names (more are labelled `_OTHER`), a method at most
//! [`MAX_INSTANCES`] instances (more are labelled `_OTHER`).
//!
//! **Trace context**: the W3C `traceparent` (and `tracestate`) of a call is the invocation's
//! attachment of that name ([`TRACEPARENT`]), set by the caller; every transport forwards it
//! unchanged, as an HTTP header, as Triple metadata and as a dubbo:// attachment, so the
//! provider's server span joins the caller's trace.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use metrics::{Counter, Gauge, Histogram, Unit};
use switchman_core::{Error, ErrorKind, Protocol};
use tracing::Span;

/// Duration of a whole call, retries, hedges and backoff included (histogram, seconds).
/// OpenTelemetry's `rpc.client.call.duration`.
pub const CALL_DURATION: &str = "rpc_client_call_duration_seconds";
/// Duration of one attempt on one instance (histogram, seconds).
pub const ATTEMPT_DURATION: &str = "rpc_client_attempt_duration_seconds";
/// Retries the retry budget allowed (counter).
pub const RETRIES: &str = "switchman_retries_total";
/// Retries the retry budget refused (counter).
pub const RETRY_BUDGET_REFUSED: &str = "switchman_retry_budget_refused_total";
/// Failback calls dropped because the queue was full (counter).
pub const FAILBACK_DROPPED: &str = "switchman_failback_dropped_total";
/// Failback calls waiting for a background retry (gauge).
pub const FAILBACK_PENDING: &str = "switchman_failback_pending";
/// Outlier ejections, first ones and re-ejections after a failed probe (counter).
pub const OUTLIER_EJECTIONS: &str = "switchman_outlier_ejections_total";
/// Instances out of rotation as outliers (gauge).
pub const OUTLIER_EJECTED: &str = "switchman_outlier_ejected";
/// Instances the registry lists for a service (gauge; set by the directory).
pub const DIRECTORY_INSTANCES: &str = "switchman_directory_instances";
/// Instances calls may be routed to, after protocol, enabled and empty-list filtering (gauge).
pub const DIRECTORY_ROUTABLE: &str = "switchman_directory_routable";
/// Snapshots the directory published (counter).
pub const DIRECTORY_SNAPSHOTS: &str = "switchman_directory_snapshots_total";

/// The buckets of the duration histograms, in seconds: 0.5 ms to 10 s.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The attachment (and header) carrying the W3C trace context: forwarded unchanged.
pub const TRACEPARENT: &str = "traceparent";

/// Method names a service keeps series for; later ones are labelled `_OTHER`.
pub const MAX_METHODS: usize = 256;
/// Instances a method keeps per-instance series for; later ones are labelled `_OTHER`.
pub const MAX_INSTANCES: usize = 1024;

/// The label value for names past the caps.
const OTHER: &str = "_OTHER";

/// Describes every metric of this crate and of the directory (unit and help text) to the
/// installed recorder. Call it once after installing one; `switchman::serve_metrics` does.
pub fn describe() {
    metrics::describe_histogram!(
        CALL_DURATION,
        Unit::Seconds,
        "Duration of client calls, every attempt included"
    );
    metrics::describe_histogram!(
        ATTEMPT_DURATION,
        Unit::Seconds,
        "Duration of attempts on one instance"
    );
    metrics::describe_counter!(RETRIES, Unit::Count, "Retries the retry budget allowed");
    metrics::describe_counter!(
        RETRY_BUDGET_REFUSED,
        Unit::Count,
        "Retries the retry budget refused"
    );
    metrics::describe_counter!(
        FAILBACK_DROPPED,
        Unit::Count,
        "Failback calls dropped: the queue was full"
    );
    metrics::describe_gauge!(
        FAILBACK_PENDING,
        Unit::Count,
        "Failback calls waiting for a background retry"
    );
    metrics::describe_counter!(OUTLIER_EJECTIONS, Unit::Count, "Outlier ejections");
    metrics::describe_gauge!(
        OUTLIER_EJECTED,
        Unit::Count,
        "Instances out of rotation as outliers"
    );
    metrics::describe_gauge!(
        DIRECTORY_INSTANCES,
        Unit::Count,
        "Instances the registry lists"
    );
    metrics::describe_gauge!(
        DIRECTORY_ROUTABLE,
        Unit::Count,
        "Instances calls may be routed to"
    );
    metrics::describe_counter!(
        DIRECTORY_SNAPSHOTS,
        Unit::Count,
        "Snapshots the directory published"
    );
}

/// The `rpc_system` label: what protocol an attempt spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum System {
    Dubbo = 0,
    Triple = 1,
    Http = 2,
    /// No attempt was made (no provider), or a protocol Switchman does not speak.
    Other = 3,
}

const SYSTEMS: usize = 4;

impl System {
    pub(crate) fn of(protocol: &Protocol) -> System {
        match protocol {
            Protocol::Dubbo => System::Dubbo,
            Protocol::Tri => System::Triple,
            Protocol::Http | Protocol::Rest => System::Http,
            _ => System::Other,
        }
    }

    pub(crate) fn from_index(i: u8) -> System {
        match i {
            0 => System::Dubbo,
            1 => System::Triple,
            2 => System::Http,
            _ => System::Other,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            System::Dubbo => "dubbo",
            System::Triple => "triple",
            System::Http => "http",
            System::Other => "none",
        }
    }
}

/// How a call or an attempt ended: `success`, or `failure` with an error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Failure(ErrorKind),
}

/// Success plus one slot per error type (the eight kinds and one for kinds added later).
const OUTCOMES: usize = 10;

impl Outcome {
    pub(crate) fn of<T>(result: &Result<T, Error>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e) => Outcome::Failure(e.kind()),
        }
    }

    fn index(self) -> usize {
        match self {
            Outcome::Success => 0,
            Outcome::Failure(kind) => match kind {
                ErrorKind::Transport => 1,
                ErrorKind::Timeout => 2,
                ErrorKind::NoProvider => 3,
                ErrorKind::Forbidden => 4,
                ErrorKind::Business => 5,
                ErrorKind::BadConfig => 6,
                ErrorKind::LimitExceeded => 7,
                ErrorKind::Unsupported => 8,
                _ => 9,
            },
        }
    }

    /// The `outcome` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure(_) => "failure",
        }
    }

    /// The `error_type` label (`None` on success).
    pub(crate) fn error_type(self) -> Option<&'static str> {
        match self {
            Outcome::Success => None,
            Outcome::Failure(kind) => Some(error_type(kind)),
        }
    }
}

/// An error kind as an `error_type` label: snake case, stable.
pub fn error_type(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Transport => "transport",
        ErrorKind::Timeout => "timeout",
        ErrorKind::NoProvider => "no_provider",
        ErrorKind::Forbidden => "forbidden",
        ErrorKind::Business => "business",
        ErrorKind::BadConfig => "bad_config",
        ErrorKind::LimitExceeded => "limit_exceeded",
        ErrorKind::Unsupported => "unsupported",
        _ => "other",
    }
}

/// A copy-on-write map read with one atomic load; writers (a key seen for the first time) take
/// a mutex and publish a new map. Past `cap` keys, new ones share one overflow value.
struct CowMap<V> {
    map: ArcSwap<HashMap<Box<str>, Arc<V>>>,
    write: Mutex<()>,
    overflow: OnceLock<Arc<V>>,
    cap: usize,
}

impl<V> CowMap<V> {
    fn new(cap: usize) -> Self {
        CowMap {
            map: ArcSwap::from_pointee(HashMap::new()),
            write: Mutex::new(()),
            overflow: OnceLock::new(),
            cap,
        }
    }

    /// The value of `key`, made with `make(label)` the first time (`label` is `key`, or
    /// `_OTHER` past the cap).
    #[inline]
    fn get(&self, key: &str, make: impl FnOnce(&str) -> V) -> Arc<V> {
        let map = self.map.load();
        if let Some(v) = map.get(key) {
            return v.clone();
        }
        if map.len() >= self.cap
            && let Some(v) = self.overflow.get()
        {
            return v.clone();
        }
        drop(map);
        self.insert(key, make)
    }

    #[cold]
    fn insert(&self, key: &str, make: impl FnOnce(&str) -> V) -> Arc<V> {
        let _serial = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.map.load_full();
        if let Some(v) = current.get(key) {
            return v.clone();
        }
        if current.len() >= self.cap {
            return self.overflow.get_or_init(|| Arc::new(make(OTHER))).clone();
        }
        let v = Arc::new(make(key));
        let mut next = HashMap::clone(&current);
        next.insert(key.into(), v.clone());
        self.map.store(Arc::new(next));
        v
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.load().len()
    }
}

/// Histogram handles of one label set per (system, outcome), registered on first use.
struct Slots {
    name: &'static str,
    /// `rpc_service`, `rpc_method` and, per instance, `server_address`, `server_port`.
    labels: Vec<(&'static str, Arc<str>)>,
    handles: [[OnceLock<Histogram>; OUTCOMES]; SYSTEMS],
}

impl Slots {
    fn new(name: &'static str, labels: Vec<(&'static str, Arc<str>)>) -> Self {
        Slots {
            name,
            labels,
            handles: std::array::from_fn(|_| std::array::from_fn(|_| OnceLock::new())),
        }
    }

    /// The handle for `(system, outcome)`: one atomic load once registered.
    #[inline]
    fn get(&self, system: System, outcome: Outcome) -> &Histogram {
        self.handles[system as usize][outcome.index()]
            .get_or_init(|| self.register(system, outcome))
    }

    #[cold]
    fn register(&self, system: System, outcome: Outcome) -> Histogram {
        let mut labels: Vec<metrics::Label> = Vec::with_capacity(self.labels.len() + 3);
        labels.push(metrics::Label::new("rpc_system", system.as_str()));
        for (k, v) in &self.labels {
            labels.push(metrics::Label::new(*k, v.to_string()));
        }
        labels.push(metrics::Label::new("outcome", outcome.as_str()));
        if let Some(t) = outcome.error_type() {
            labels.push(metrics::Label::new("error_type", t));
        }
        metrics::histogram!(self.name, labels)
    }
}

/// The series of one method of one service.
pub(crate) struct MethodSeries {
    call: Slots,
    attempt: Slots,
    /// Per-instance attempt series (only when per-instance labels are on), by address.
    instances: CowMap<Slots>,
    service: Arc<str>,
    method: Arc<str>,
}

impl MethodSeries {
    fn new(service: Arc<str>, method: &str) -> Self {
        let method: Arc<str> = method.into();
        let labels = vec![
            ("rpc_service", service.clone()),
            ("rpc_method", method.clone()),
        ];
        MethodSeries {
            call: Slots::new(CALL_DURATION, labels.clone()),
            attempt: Slots::new(ATTEMPT_DURATION, labels),
            instances: CowMap::new(MAX_INSTANCES),
            service,
            method,
        }
    }

    /// Records a call that took `elapsed`.
    #[inline]
    pub(crate) fn record_call(&self, system: System, outcome: Outcome, elapsed: Duration) {
        self.call.get(system, outcome).record(elapsed.as_secs_f64());
    }

    /// The `rpc_method` label (`_OTHER` for the series methods past the cap share).
    fn method(&self) -> &str {
        &self.method
    }
}

/// Slots of a [`SeriesTable`].
const PLANNED_METHODS: usize = 16;

/// The series of the methods called under one call plan, each found in [`Metrics`] the first
/// time it is called under the plan and then borrowed by every call that holds the plan: no
/// shared map read, no hash of the name with SipHash and no reference count per call. A
/// method whose slot another method took, and the methods past the cap, take their series
/// from [`Metrics`] as before.
pub(crate) struct SeriesTable {
    slots: [OnceLock<Arc<MethodSeries>>; PLANNED_METHODS],
}

impl Default for SeriesTable {
    fn default() -> Self {
        SeriesTable {
            slots: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl SeriesTable {
    /// The slot of `method` (a collision only sends a method to [`Metrics::method`]).
    fn slot(method: &str) -> usize {
        switchman_core::method_slot(method, PLANNED_METHODS)
    }

    /// The series of `method`, borrowed from this table when it has it or room for it.
    #[inline]
    pub(crate) fn get<'t>(&'t self, metrics: &Metrics, method: &str) -> SeriesRef<'t> {
        let slot = &self.slots[Self::slot(method)];
        if let Some(s) = slot.get()
            && s.method() == method
        {
            return SeriesRef::Planned(s);
        }
        Self::fill(slot, metrics, method)
    }

    #[cold]
    fn fill<'t>(
        slot: &'t OnceLock<Arc<MethodSeries>>,
        metrics: &Metrics,
        method: &str,
    ) -> SeriesRef<'t> {
        let series = metrics.method(method);
        if series.method() == method {
            let _ = slot.set(series.clone());
            if let Some(s) = slot.get()
                && s.method() == method
            {
                return SeriesRef::Planned(s);
            }
        }
        SeriesRef::Owned(series)
    }
}

/// A method's series as a call holds it: borrowed from its plan's [`SeriesTable`], or its own
/// reference.
pub(crate) enum SeriesRef<'a> {
    Planned(&'a MethodSeries),
    Owned(Arc<MethodSeries>),
}

impl std::ops::Deref for SeriesRef<'_> {
    type Target = MethodSeries;

    #[inline]
    fn deref(&self) -> &MethodSeries {
        match self {
            SeriesRef::Planned(s) => s,
            SeriesRef::Owned(s) => s,
        }
    }
}

/// Everything the cluster invoker of one service records: the duration histograms per method
/// and the retry, budget, failback and outlier counters. Registered once per invoker.
pub(crate) struct Metrics {
    service: Arc<str>,
    per_instance: bool,
    methods: CowMap<MethodSeries>,
    pub(crate) retries: Counter,
    pub(crate) budget_refused: Counter,
    pub(crate) failback_dropped: Counter,
    pub(crate) failback_pending: Gauge,
    pub(crate) outlier_ejections: Counter,
    pub(crate) outlier_ejected: Gauge,
}

impl Metrics {
    pub(crate) fn new(service: String, per_instance: bool) -> Self {
        let label = || metrics::Label::new("rpc_service", service.clone());
        Metrics {
            retries: metrics::counter!(RETRIES, vec![label()]),
            budget_refused: metrics::counter!(RETRY_BUDGET_REFUSED, vec![label()]),
            failback_dropped: metrics::counter!(FAILBACK_DROPPED, vec![label()]),
            failback_pending: metrics::gauge!(FAILBACK_PENDING, vec![label()]),
            outlier_ejections: metrics::counter!(OUTLIER_EJECTIONS, vec![label()]),
            outlier_ejected: metrics::gauge!(OUTLIER_EJECTED, vec![label()]),
            methods: CowMap::new(MAX_METHODS),
            per_instance,
            service: service.into(),
        }
    }

    /// The `rpc_service` label.
    pub(crate) fn service(&self) -> &str {
        &self.service
    }

    /// Whether attempts carry per-instance labels.
    pub(crate) fn per_instance(&self) -> bool {
        self.per_instance
    }

    /// The series of `method` (a hash lookup; registered the first time).
    #[inline]
    pub(crate) fn method(&self, method: &str) -> Arc<MethodSeries> {
        self.methods
            .get(method, |m| MethodSeries::new(self.service.clone(), m))
    }

    /// Records an attempt on `(host, port)` that took `elapsed`.
    #[inline]
    pub(crate) fn record_attempt(
        &self,
        series: &MethodSeries,
        system: System,
        target: &switchman_core::Instance,
        outcome: Outcome,
        elapsed: Duration,
    ) {
        let secs = elapsed.as_secs_f64();
        if !self.per_instance {
            series.attempt.get(system, outcome).record(secs);
            return;
        }
        let (address, host, port) = (target.address(), target.host(), target.port());
        let slots = series.instances.get(address, |label| {
            let (host, port): (Arc<str>, Arc<str>) = if label == OTHER {
                (OTHER.into(), OTHER.into())
            } else {
                (host.into(), port.to_string().into())
            };
            Slots::new(
                ATTEMPT_DURATION,
                vec![
                    ("rpc_service", series.service.clone()),
                    ("rpc_method", series.method.clone()),
                    ("server_address", host),
                    ("server_port", port),
                ],
            )
        });
        slots.get(system, outcome).record(secs);
    }
}

/// What one call shares with its attempts: its method's series, the attempts made so far and
/// the protocol of the latest one (the call's `rpc_system`). Lives on the call's stack.
pub(crate) struct CallTelemetry<'a> {
    pub(crate) series: SeriesRef<'a>,
    attempts: std::sync::atomic::AtomicU32,
    system: std::sync::atomic::AtomicU8,
}

impl<'a> CallTelemetry<'a> {
    pub(crate) fn new(series: SeriesRef<'a>) -> Self {
        CallTelemetry {
            series,
            attempts: std::sync::atomic::AtomicU32::new(0),
            system: std::sync::atomic::AtomicU8::new(System::Other as u8),
        }
    }

    /// Counts an attempt over `system`; returns its number (1 for the first).
    #[inline]
    pub(crate) fn begin_attempt(&self, system: System) -> u32 {
        use std::sync::atomic::Ordering::Relaxed;
        self.system.store(system as u8, Relaxed);
        self.attempts.fetch_add(1, Relaxed) + 1
    }

    /// Attempts made so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The protocol of the latest attempt (`none` before the first).
    pub(crate) fn system(&self) -> System {
        System::from_index(self.system.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// Polls a pinned future with `span` entered, as `tracing`'s `Instrumented` does, but
/// through a reference: the future stays where it was pinned instead of being moved into
/// the wrapper and with it into the awaiting future. (The future is dropped outside the
/// span: nothing in a call's future logs when dropped.)
pub(crate) struct InSpan<'a, F: ?Sized> {
    span: &'a Span,
    fut: Pin<&'a mut F>,
}

impl<'a, F: Future + ?Sized> InSpan<'a, F> {
    pub(crate) fn new(span: &'a Span, fut: Pin<&'a mut F>) -> Self {
        InSpan { span, fut }
    }
}

impl<F: Future + ?Sized> Future for InSpan<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.fut.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_span_half_a_millisecond_to_ten_seconds_in_order() {
        assert_eq!(DURATION_BUCKETS[0], 0.0005);
        assert_eq!(DURATION_BUCKETS[DURATION_BUCKETS.len() - 1], 10.0);
        assert!(DURATION_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn outcomes_have_distinct_slots_and_labels() {
        let kinds = [
            ErrorKind::Transport,
            ErrorKind::Timeout,
            ErrorKind::NoProvider,
            ErrorKind::Forbidden,
            ErrorKind::Business,
            ErrorKind::BadConfig,
            ErrorKind::LimitExceeded,
            ErrorKind::Unsupported,
        ];
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(Outcome::Success.index()));
        let mut names = std::collections::HashSet::new();
        for k in kinds {
            let o = Outcome::Failure(k);
            assert!(o.index() < OUTCOMES);
            assert!(seen.insert(o.index()), "{k:?}");
            let t = o.error_type().unwrap();
            assert!(
                t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{t}"
            );
            assert!(names.insert(t));
            assert_eq!(o.as_str(), "failure");
        }
        assert_eq!(Outcome::Success.error_type(), None);
    }

    #[test]
    fn method_names_past_the_cap_share_one_series() {
        let m: CowMap<String> = CowMap::new(2);
        assert_eq!(*m.get("a", str::to_string), "a");
        assert_eq!(*m.get("b", str::to_string), "b");
        assert_eq!(*m.get("c", str::to_string), OTHER);
        assert_eq!(*m.get("d", |_| unreachable!("the overflow exists")), OTHER);
        assert_eq!(*m.get("a", |_| unreachable!("a exists")), "a");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn a_plans_table_lends_each_method_its_series_and_sends_the_rest_to_the_map() {
        let metrics = Metrics::new("it.Table".into(), false);
        let table = SeriesTable::default();
        // From the map the first time, lent by the table after: the map's series.
        assert!(
            matches!(table.get(&metrics, "find"), SeriesRef::Planned(s) if s.method() == "find")
        );
        let SeriesRef::Planned(lent) = table.get(&metrics, "find") else {
            panic!("find is in the table")
        };
        assert!(std::ptr::eq(lent, &*metrics.method("find")));
        // A method whose slot "find" holds: its own series, from the map; "find" keeps the slot.
        let other = (0..)
            .map(|i| format!("m{i}"))
            .find(|m| SeriesTable::slot(m) == SeriesTable::slot("find"))
            .unwrap();
        let SeriesRef::Owned(own) = table.get(&metrics, &other) else {
            panic!("{other}'s slot is taken by find")
        };
        assert_eq!(own.method(), other);
        assert!(Arc::ptr_eq(&own, &metrics.method(&other)));
        assert!(
            matches!(table.get(&metrics, "find"), SeriesRef::Planned(s) if s.method() == "find")
        );
        // Past the cap: the shared `_OTHER` series, never lent under another method's name.
        for i in 0..MAX_METHODS {
            metrics.method(&format!("x{i}"));
        }
        let late = (0..)
            .map(|i| format!("late{i}"))
            .find(|m| SeriesTable::slot(m) != SeriesTable::slot("find"))
            .unwrap();
        for _ in 0..2 {
            let got = table.get(&metrics, &late);
            assert!(matches!(&got, SeriesRef::Owned(s) if s.method() == OTHER));
        }
    }
}
