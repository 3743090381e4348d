//! The admin endpoint (feature `admin`): Dubbo's QOS port for a Rust process, as JSON over
//! HTTP.
//!
//! | request | answer |
//! |---|---|
//! | `GET /services` | the services this process consumes (one per [`Reference`](crate::Reference) or directory listed here) and the providers it exports, with their state |
//! | `GET /snapshot/{service}` | one consumed service: every instance with its weight, current warm-up weight, zone, tag, group and version, its state (`routable`, `warming`, `ejected` with the time left, `draining`, `disabled`) and its live counters |
//! | `GET /metrics` | the Prometheus scrape of the process's recorder (see [`set_metrics_handle`]) |
//! | `POST /offline[?service=PATTERN]` | unregisters the matching exported providers from every registry (Dubbo's QOS `offline`): consumers stop calling them, the server keeps serving the calls in flight |
//! | `POST /online[?service=PATTERN]` | registers them again (Dubbo's QOS `online`) |
//!
//! `{service}` is the service key as `/services` lists it (`group/interface:version`, or the
//! bare interface); the interface alone also names a service when one reference of it is
//! listed. `PATTERN` is Dubbo's: a regular expression that must match the whole service key
//! (or its interface); without it every exported provider matches.
//!
//! The listener binds exactly the address it is given: use a loopback one (`127.0.0.1:22222`,
//! Dubbo's QOS port) unless it must be reachable from other hosts. Even then, `POST` commands
//! are refused from peers that are not on loopback unless [`Admin::accept_foreign_ip`] allows
//! them (Dubbo's `qos.accept.foreign.ip`, false by default).
//!
//! One builder call on a consumer, [`ReferenceBuilder::admin`](crate::ReferenceBuilder::admin);
//! for a provider, [`Exported`] plus [`Admin::provider`]:
//!
//! ```no_run
//! # async fn demo(registrar: std::sync::Arc<dyn switchman::discovery::Registrar>, instance: switchman::Instance) -> switchman::Result<()> {
//! use switchman::admin::{Admin, Exported};
//!
//! let admin = Admin::bind("127.0.0.1:22222".parse().unwrap()).await?;
//! let exported = Exported::new(instance).registry("zookeeper://127.0.0.1:2181", registrar);
//! for e in exported.online().await {
//!     eprintln!("{e}"); // the registrar keeps retrying in the background
//! }
//! let _listed = admin.provider(&exported);
//! // ... `curl -X POST 127.0.0.1:22222/offline` drains it before a deploy
//! # Ok(()) }
//! ```
//!
//! Nothing here is on the call path: requests read the directory's current snapshot and the
//! instances' atomic counters. A listed consumer has one background task that notices
//! endpoints leaving the snapshot, to show them as `draining` while calls to them are in
//! flight or for [`DRAIN_GRACE`] after they left.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Value, json};
use switchman_cluster::ClusterInvoker;
use switchman_core::{Error, Instance, Result};
use switchman_discovery::{Directory, Registrar, RegistryDirectory, Snapshot};
use switchman_loadbalance::{Endpoint, InstanceStats, effective_weight};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long an endpoint that left the snapshot is shown as `draining` when no call to it is in
/// flight any more: the HTTP invoker's drain grace, after which its idle connections close.
pub const DRAIN_GRACE: Duration = switchman_cluster::DEFAULT_DRAIN_GRACE;

/// Endpoints remembered as draining per service, at most (the oldest go first).
const MAX_DEPARTED: usize = 1024;

/// How long one registry operation of `POST /offline` or `/online` may take.
const REGISTRY_OP_TIMEOUT: Duration = Duration::from_secs(5);

/// The process's Prometheus handle, rendered by every admin endpoint's `GET /metrics`.
static METRICS: OnceLock<PrometheusHandle> = OnceLock::new();

/// The admin endpoints running in this process, for [`Admin::shared`].
static LIVE: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Makes `GET /metrics` of every admin endpoint of this process answer with `handle`'s scrape
/// (one recorder per process, so one handle). Returns `false` when a handle was set already
/// (that one stays).
///
/// ```no_run
/// # fn main() -> switchman::Result<()> {
/// switchman::admin::set_metrics_handle(switchman::install_metrics_recorder()?);
/// # Ok(()) }
/// ```
pub fn set_metrics_handle(handle: PrometheusHandle) -> bool {
    METRICS.set(handle).is_ok()
}

/// Serves `handle`'s scrape at every path of `addr` (what
/// [`serve_metrics`](crate::serve_metrics) does, for a recorder installed with
/// [`install_metrics_recorder`](crate::install_metrics_recorder)), from a task of the current
/// Tokio runtime, for as long as the runtime runs. Returns the bound address.
pub async fn serve_scrape(addr: SocketAddr, handle: PrometheusHandle) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::bad_config(format!("metrics endpoint on {addr}: {e}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let app = Router::new().fallback(get(move || {
        let h = handle.clone();
        async move { scrape(&h) }
    }));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(bound)
}

fn scrape(handle: &PrometheusHandle) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}

/// A running admin endpoint. Cheap to clone; the listener stops when the last clone (and
/// every [`Listing`] made through it) is dropped.
#[derive(Clone)]
pub struct Admin {
    shared: Arc<Shared>,
}

impl fmt::Debug for Admin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.shared.lock();
        f.debug_struct("Admin")
            .field("addr", &self.shared.addr)
            .field("consumers", &entries.consumers.len())
            .field("providers", &entries.providers.len())
            .finish()
    }
}

struct Shared {
    addr: SocketAddr,
    entries: Mutex<Entries>,
    accept_foreign: AtomicBool,
    next_id: AtomicU64,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
    upkeep: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(tx) = self
            .shutdown
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = tx.send(());
        }
        if let Some(t) = self
            .upkeep
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            t.abort();
        }
    }
}

#[derive(Default)]
struct Entries {
    consumers: BTreeMap<u64, Consumer>,
    providers: BTreeMap<u64, Exported>,
}

struct Consumer {
    registry: String,
    directory: Arc<dyn Directory>,
    cluster: Option<ClusterInvoker>,
    departed: Arc<Mutex<Vec<Departed>>>,
    tracker: JoinHandle<()>,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.tracker.abort();
    }
}

/// An endpoint that left the routable set.
#[derive(Clone)]
struct Departed {
    endpoint: Endpoint,
    left: Instant,
}

impl Admin {
    /// Binds a new admin endpoint on `addr` (port 0: any free port; see [`Admin::addr`]) and
    /// serves it from a task of the current Tokio runtime. Fails, naming `addr`, when it cannot
    /// be bound.
    pub async fn bind(addr: SocketAddr) -> Result<Admin> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::bad_config(format!("admin endpoint on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| Error::bad_config(format!("admin endpoint on {addr}: {e}")))?;
        let (tx, rx) = oneshot::channel::<()>();
        let shared = Arc::new(Shared {
            addr: bound,
            entries: Mutex::new(Entries::default()),
            accept_foreign: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            shutdown: Mutex::new(Some(tx)),
            upkeep: Mutex::new(None),
        });
        let app = router(Arc::downgrade(&shared));
        tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await;
        });
        // Histograms of a recorder nobody scrapes grow until upkeep drains them.
        let upkeep = tokio::spawn(async {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tick.tick().await;
                if let Some(h) = METRICS.get() {
                    h.run_upkeep();
                }
            }
        });
        *shared.upkeep.lock().unwrap_or_else(|p| p.into_inner()) = Some(upkeep);
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&shared));
        Ok(Admin { shared })
    }

    /// The admin endpoint this process already serves on `addr`, or a new one bound there
    /// (always a new one for port 0). What [`ReferenceBuilder::admin`](crate::ReferenceBuilder::admin)
    /// uses, so several references share one port.
    pub async fn shared(addr: SocketAddr) -> Result<Admin> {
        if let Some(a) = Self::running(addr) {
            return Ok(a);
        }
        match Self::bind(addr).await {
            Ok(a) => Ok(a),
            // Bound meanwhile by another reference of this process: join it.
            Err(e) => Self::running(addr).ok_or(e),
        }
    }

    fn running(addr: SocketAddr) -> Option<Admin> {
        if addr.port() == 0 {
            return None;
        }
        let live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.iter()
            .filter_map(Weak::upgrade)
            .find(|s| s.addr == addr)
            .map(|shared| Admin { shared })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Whether `POST /offline` and `/online` are accepted from peers that are not on loopback
    /// (default `false`, Dubbo's `qos.accept.foreign.ip`). `GET` requests are answered to
    /// whoever can reach the listener.
    pub fn accept_foreign_ip(&self, accept: bool) -> &Self {
        self.shared.accept_foreign.store(accept, Ordering::Relaxed);
        self
    }

    /// Lists a consumer's cluster invoker (its directory, retry budget and failback queue)
    /// under its service key, until the returned [`Listing`] is dropped. `registry` is shown
    /// in `/services` (passwords masked). Must be called inside a Tokio runtime.
    pub fn cluster(&self, registry: &str, cluster: &ClusterInvoker) -> Listing {
        self.consumer(registry, cluster.directory().clone(), Some(cluster.clone()))
    }

    /// Lists a directory without a cluster invoker (a subscription that makes no calls), until
    /// the returned [`Listing`] is dropped. Must be called inside a Tokio runtime.
    pub fn directory(&self, registry: &str, directory: &Arc<RegistryDirectory>) -> Listing {
        self.consumer(registry, directory.clone() as Arc<dyn Directory>, None)
    }

    fn consumer(
        &self,
        registry: &str,
        directory: Arc<dyn Directory>,
        cluster: Option<ClusterInvoker>,
    ) -> Listing {
        let departed = Arc::new(Mutex::new(Vec::new()));
        let tracker = tokio::spawn(track_departures(directory.clone(), departed.clone()));
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.lock().consumers.insert(
            id,
            Consumer {
                registry: redact(registry),
                directory,
                cluster,
                departed,
                tracker,
            },
        );
        Listing {
            admin: self.clone(),
            id,
        }
    }

    /// Lists an exported provider, so that `POST /offline` and `/online` act on it, until the
    /// returned [`Listing`] is dropped.
    pub fn provider(&self, exported: &Exported) -> Listing {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.lock().providers.insert(id, exported.clone());
        Listing {
            admin: self.clone(),
            id,
        }
    }
}

/// What the admin endpoint shows of one consumer or provider, for as long as it lives.
/// Dropping it takes the entry off the endpoint.
pub struct Listing {
    admin: Admin,
    id: u64,
}

impl Listing {
    /// The admin endpoint it is listed on.
    pub fn admin(&self) -> &Admin {
        &self.admin
    }
}

impl fmt::Debug for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listing")
            .field("addr", &self.admin.addr())
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        let (consumer, provider) = {
            let mut e = self.admin.shared.lock();
            (e.consumers.remove(&self.id), e.providers.remove(&self.id))
        };
        // Dropped outside the lock (a consumer's drop aborts its tracker).
        drop((consumer, provider));
    }
}

/// A provider instance registered in one or more registries that can be taken offline and
/// brought back: Dubbo's `ProviderModel` with its registered flags, which the QOS commands
/// `offline` and `online` flip. Cheap to clone (clones share the state).
#[derive(Clone)]
pub struct Exported {
    inner: Arc<ExportedInner>,
}

struct ExportedInner {
    instance: Instance,
    registries: Vec<(String, Arc<dyn Registrar>)>,
    /// Whether each registry holds the instance; the lock serialises offline and online.
    registered: tokio::sync::Mutex<Vec<bool>>,
    online: AtomicBool,
}

impl fmt::Debug for Exported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exported")
            .field("service", &self.inner.instance.service().to_string())
            .field("address", &self.inner.instance.address())
            .field("registries", &self.inner.registries.len())
            .field("online", &self.is_online())
            .finish()
    }
}

impl Exported {
    /// `instance`, registered nowhere yet: add registries with [`Exported::registry`], then
    /// call [`Exported::online`].
    pub fn new(instance: Instance) -> Exported {
        Exported {
            inner: Arc::new(ExportedInner {
                instance,
                registries: Vec::new(),
                registered: tokio::sync::Mutex::new(Vec::new()),
                online: AtomicBool::new(false),
            }),
        }
    }

    /// Adds a registry (`name` is shown by `/services`, passwords masked). Only before the
    /// first clone.
    pub fn registry(mut self, name: &str, registrar: Arc<dyn Registrar>) -> Exported {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => {
                inner.registries.push((redact(name), registrar));
                inner.registered.get_mut().push(false);
            }
            None => tracing::warn!(
                registry = %redact(name),
                "Exported::registry after the instance was shared: registry not added"
            ),
        }
        self
    }

    /// The instance.
    pub fn instance(&self) -> &Instance {
        &self.inner.instance
    }

    /// Whether the instance is meant to be registered (after [`Exported::online`], until
    /// [`Exported::offline`]).
    pub fn is_online(&self) -> bool {
        self.inner.online.load(Ordering::Relaxed)
    }

    /// Registers the instance in every registry that does not hold it (Dubbo's QOS `online`).
    /// Returns the failures, each naming its registry; a registrar that failed keeps trying in
    /// the background (the built-in ones do), so the instance counts as registered there.
    pub async fn online(&self) -> Vec<Error> {
        let mut registered = self.inner.registered.lock().await;
        let mut errors = Vec::new();
        for (i, (name, registrar)) in self.inner.registries.iter().enumerate() {
            if registered[i] {
                continue;
            }
            let r = tokio::time::timeout(
                REGISTRY_OP_TIMEOUT,
                registrar.register(&self.inner.instance),
            )
            .await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push(Error::timeout(format!(
                    "registering in {name} took more than {REGISTRY_OP_TIMEOUT:?}"
                ))),
            }
            registered[i] = true;
        }
        self.inner.online.store(true, Ordering::Relaxed);
        tracing::info!(service = %self.inner.instance.service(), address = self.inner.instance.address(),
            failed = errors.len(), "provider online");
        errors
    }

    /// Unregisters the instance from every registry that holds it (Dubbo's QOS `offline`):
    /// consumers stop sending new calls once their registry tells them; the server keeps
    /// serving, so calls in flight finish. Returns the failures, each naming its registry.
    pub async fn offline(&self) -> Vec<Error> {
        let mut registered = self.inner.registered.lock().await;
        let mut errors = Vec::new();
        for (i, (name, registrar)) in self.inner.registries.iter().enumerate() {
            if !registered[i] {
                continue;
            }
            let r = tokio::time::timeout(
                REGISTRY_OP_TIMEOUT,
                registrar.unregister(&self.inner.instance),
            )
            .await;
            match r {
                Ok(Ok(())) => registered[i] = false,
                Ok(Err(e)) => {
                    registered[i] = false;
                    errors.push(e);
                }
                Err(_) => errors.push(Error::timeout(format!(
                    "unregistering from {name} took more than {REGISTRY_OP_TIMEOUT:?}"
                ))),
            }
        }
        self.inner.online.store(false, Ordering::Relaxed);
        tracing::info!(service = %self.inner.instance.service(), address = self.inner.instance.address(),
            failed = errors.len(), "provider offline");
        errors
    }

    fn describe(&self) -> Value {
        let i = &self.inner.instance;
        json!({
            "service": i.service().to_string(),
            "interface": i.service().interface.as_ref(),
            "group": i.service().group.as_ref(),
            "version": i.service().version.as_ref(),
            "address": i.address(),
            "protocol": i.protocol().as_str(),
            "weight": i.weight(),
            "state": if self.is_online() { "online" } else { "offline" },
            "registries": self.inner.registries.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        })
    }
}

/// `user:password@` and secret parameters masked.
fn redact(registry: &str) -> String {
    // As written (a server list included), the password and secret parameters masked.
    switchman_core::url::redacted_text(registry)
}

/// Remembers the endpoints that leave `directory`'s routable set, for `draining`.
async fn track_departures(directory: Arc<dyn Directory>, departed: Arc<Mutex<Vec<Departed>>>) {
    // A directory that never changes has no departures to follow, only drains to prune.
    let mut epochs = directory.epochs();
    let mut last: HashMap<Arc<str>, Endpoint> = HashMap::new();
    let mut prune = tokio::time::interval(Duration::from_secs(1));
    loop {
        {
            let snap = directory.load();
            let now: HashSet<&str> = snap.endpoints().iter().map(|e| e.instance.key()).collect();
            let now_inst = Instant::now();
            let mut d = departed.lock().unwrap_or_else(|p| p.into_inner());
            for (key, ep) in &last {
                if !now.contains(key.as_ref()) {
                    d.push(Departed {
                        endpoint: ep.clone(),
                        left: now_inst,
                    });
                }
            }
            d.retain(|x| {
                !now.contains(x.endpoint.instance.key())
                    && (x.endpoint.stats.active() > 0 || x.left.elapsed() < DRAIN_GRACE)
            });
            let excess = d.len().saturating_sub(MAX_DEPARTED);
            d.drain(..excess);
            drop(d);
            last = snap
                .endpoints()
                .iter()
                .map(|e| (Arc::from(e.instance.key()), e.clone()))
                .collect();
        }
        tokio::select! {
            changed = async { match epochs.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            } } => if !changed { return },
            _ = prune.tick() => {}
        }
    }
}

/// The JSON `GET /snapshot/{service}` answers for `directory` (and its cluster invoker, when
/// there is one): every instance the registry lists, with its state and counters. For tools
/// that read a directory themselves (`switchman top REGISTRY SERVICE`); endpoints that left
/// are not known here, so none is `draining`.
pub fn snapshot_json(directory: &dyn Directory, cluster: Option<&ClusterInvoker>) -> Value {
    describe_snapshot(&directory.load(), cluster, &[])
}

fn describe_snapshot(
    snap: &Snapshot,
    cluster: Option<&ClusterInvoker>,
    departed: &[Departed],
) -> Value {
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut rows: Vec<Value> = Vec::with_capacity(snap.instances().len());
    let mut seen: HashSet<&str> = HashSet::new();
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for inst in snap.instances() {
        seen.insert(inst.key());
        let row = match snap.index_of(inst.key()) {
            Some(i) if snap.endpoints()[i].instance.key() == inst.key() => {
                endpoint_row(&snap.endpoints()[i], now, wall)
            }
            _ => match departed
                .iter()
                .find(|d| d.endpoint.instance.key() == inst.key())
            {
                Some(d) => draining_row(d, inst, true, now, wall),
                None => disabled_row(inst),
            },
        };
        *counts.entry(state_name(&row)).or_default() += 1;
        rows.push(row);
    }
    for d in departed {
        if seen.insert(d.endpoint.instance.key()) {
            let row = draining_row(d, &d.endpoint.instance, false, now, wall);
            *counts.entry("draining").or_default() += 1;
            rows.push(row);
        }
    }
    let mut out = json!({
        "service": snap.service().to_string(),
        "interface": snap.service().interface.as_ref(),
        "group": snap.service().group.as_ref(),
        "version": snap.service().version.as_ref(),
        "epoch": snap.epoch(),
        "loadbalance": snap.balancer().name(),
        "protected": snap.is_protected(),
        "states": counts,
        "instances": rows,
    });
    if let Some(c) = cluster {
        out["cluster"] = json!({
            "strategy": c.settings("").strategy.to_string(),
            "budget_refused": c.budget_refused(),
            "failback_pending": c.failback_pending(),
        });
    }
    out
}

fn state_name(row: &Value) -> &'static str {
    match row["state"].as_str() {
        Some("routable") => "routable",
        Some("warming") => "warming",
        Some("ejected") => "ejected",
        Some("draining") => "draining",
        _ => "disabled",
    }
}

fn base_row(inst: &Instance, current_weight: u32) -> Value {
    json!({
        "key": inst.key(),
        "address": inst.address(),
        "protocol": inst.protocol().as_str(),
        "group": inst.service().group.as_ref(),
        "version": inst.service().version.as_ref(),
        "application": inst.application(),
        "weight": inst.weight(),
        "current_weight": current_weight,
        "warmup_ms": inst.warmup().as_millis() as u64,
        "zone": inst.zone(),
        "tag": inst.tag(),
    })
}

fn counters(row: &mut Value, stats: &InstanceStats, now: Instant) {
    row["active"] = json!(stats.active());
    row["succeeded"] = json!(stats.succeeded());
    row["failed"] = json!(stats.failed());
    row["consecutive_failures"] = json!(stats.consecutive_failures());
    row["ejections"] = json!(stats.outlier().ejections());
    row["response_avg_us"] = json!(stats.window_average_us(now));
}

fn endpoint_row(ep: &Endpoint, now: Instant, wall: SystemTime) -> Value {
    let inst = &ep.instance;
    let current = effective_weight(ep, wall);
    let mut row = base_row(inst, current);
    let outlier = ep.stats.outlier();
    let state = if outlier.is_ejected() {
        let left = outlier
            .ejected_until()
            .map(|u| u.saturating_duration_since(now))
            .unwrap_or_default();
        row["ejected"] = json!({
            "left_ms": left.as_millis() as u64,
            // The penalty is over: the next pick that reaches it makes the probe call.
            "probe_due": left.is_zero(),
            "ejections": outlier.ejections(),
        });
        "ejected"
    } else if current < inst.weight() {
        row["warming"] = json!({
            "current_weight": current,
            "weight": inst.weight(),
            "uptime_ms": uptime_ms(inst, &ep.stats, wall),
        });
        "warming"
    } else {
        "routable"
    };
    row["state"] = json!(state);
    row["routable"] = json!(true);
    counters(&mut row, &ep.stats, now);
    row
}

/// `inst` is the registry's current entry when it still lists the endpoint (`listed`), or the
/// endpoint's last one.
fn draining_row(
    d: &Departed,
    inst: &Instance,
    listed: bool,
    now: Instant,
    wall: SystemTime,
) -> Value {
    let stats = &d.endpoint.stats;
    let mut row = base_row(inst, effective_weight(&d.endpoint, wall));
    let ago = now.saturating_duration_since(d.left);
    row["state"] = json!("draining");
    row["routable"] = json!(false);
    row["draining"] = json!({
        "in_flight": stats.active(),
        "left_ms_ago": ago.as_millis() as u64,
        "grace_left_ms": DRAIN_GRACE.saturating_sub(ago).as_millis() as u64,
        "listed": listed,
    });
    counters(&mut row, stats, now);
    row
}

fn disabled_row(inst: &Instance) -> Value {
    let mut row = base_row(inst, 0);
    let reason = if !inst.enabled() {
        "disabled by the provider or an override (enabled=false)".to_string()
    } else if !inst.healthy() {
        "reported unhealthy by the registry".to_string()
    } else {
        format!("protocol {} is not callable here", inst.protocol().as_str())
    };
    row["state"] = json!("disabled");
    row["routable"] = json!(false);
    row["disabled"] = json!({ "reason": reason });
    row
}

fn uptime_ms(inst: &Instance, stats: &InstanceStats, wall: SystemTime) -> u64 {
    let now_ms = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    now_ms.saturating_sub(inst.timestamp_ms().unwrap_or_else(|| stats.first_seen_ms()))
}

// ---- HTTP ----

type AdminState = Weak<Shared>;

fn router(state: AdminState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/services", get(services))
        .route("/snapshot", get(snapshot_without_service))
        .route("/snapshot/", get(snapshot_without_service))
        .route("/snapshot/{*service}", get(snapshot))
        .route("/metrics", get(metrics))
        .route("/offline", post(offline))
        .route("/online", post(online))
        .fallback(not_found)
        .with_state(state)
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn gone() -> Response {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": "the admin endpoint is shutting down"}),
    )
}

const ENDPOINTS: [&str; 6] = [
    "GET /services",
    "GET /snapshot/{service}",
    "GET /metrics",
    "POST /offline[?service=PATTERN]",
    "POST /online[?service=PATTERN]",
    "GET /",
];

async fn index() -> Response {
    answer(
        StatusCode::OK,
        json!({"switchman": env!("CARGO_PKG_VERSION"), "endpoints": ENDPOINTS}),
    )
}

async fn not_found(uri: axum::http::Uri) -> Response {
    answer(
        StatusCode::NOT_FOUND,
        json!({"error": format!("no admin endpoint at {}", uri.path()), "endpoints": ENDPOINTS}),
    )
}

async fn services(State(state): State<AdminState>) -> Response {
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    let (consumers, providers) = {
        let e = shared.lock();
        let consumers: Vec<Value> = e
            .consumers
            .values()
            .map(|c| {
                let snap = c.directory.load();
                let routable = snap
                    .endpoints()
                    .iter()
                    .filter(|ep| !ep.stats.outlier().is_ejected())
                    .count();
                let ejected = snap.endpoints().len() - routable;
                json!({
                    "service": snap.service().to_string(),
                    "interface": snap.service().interface.as_ref(),
                    "group": snap.service().group.as_ref(),
                    "version": snap.service().version.as_ref(),
                    "registry": c.registry,
                    "epoch": snap.epoch(),
                    "instances": snap.instances().len(),
                    "routable": routable,
                    "ejected": ejected,
                    "calls": c.cluster.is_some(),
                })
            })
            .collect();
        let providers: Vec<Value> = e.providers.values().map(Exported::describe).collect();
        (consumers, providers)
    };
    answer(
        StatusCode::OK,
        json!({"consumers": consumers, "providers": providers}),
    )
}

async fn snapshot_without_service(State(state): State<AdminState>) -> Response {
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    let listed = listed_services(&shared);
    answer(
        StatusCode::NOT_FOUND,
        json!({"error": "GET /snapshot/{service}: name a service", "services": listed}),
    )
}

fn listed_services(shared: &Shared) -> Vec<String> {
    shared
        .lock()
        .consumers
        .values()
        .map(|c| c.directory.load().service().to_string())
        .collect()
}

async fn snapshot(State(state): State<AdminState>, Path(service): Path<String>) -> Response {
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    let service = percent_decode(service.trim_matches('/'));
    let found = {
        let e = shared.lock();
        let all: Vec<&Consumer> = e.consumers.values().collect();
        let exact: Vec<&Consumer> = all
            .iter()
            .copied()
            .filter(|c| c.directory.load().service().to_string() == service)
            .collect();
        let matching = if exact.is_empty() {
            all.iter()
                .copied()
                .filter(|c| *c.directory.load().service().interface == *service)
                .collect()
        } else {
            exact
        };
        match matching.as_slice() {
            [one] => Ok((
                one.directory.clone(),
                one.cluster.clone(),
                one.departed.clone(),
            )),
            [] => Err(None),
            many => Err(Some(
                many.iter()
                    .map(|c| c.directory.load().service().to_string())
                    .collect::<Vec<_>>(),
            )),
        }
    };
    match found {
        Ok((dir, cluster, departed)) => {
            let departed = departed.lock().unwrap_or_else(|p| p.into_inner()).clone();
            answer(
                StatusCode::OK,
                describe_snapshot(&dir.load(), cluster.as_ref(), &departed),
            )
        }
        Err(None) => answer(
            StatusCode::NOT_FOUND,
            json!({
                "error": format!("no consumer of {service} is listed here"),
                "services": listed_services(&shared),
            }),
        ),
        Err(Some(many)) => answer(
            StatusCode::CONFLICT,
            json!({
                "error": format!("{service} names several services here: ask for one by its key"),
                "services": many,
            }),
        ),
    }
}

async fn metrics() -> Response {
    match METRICS.get() {
        Some(h) => scrape(h),
        None => (
            StatusCode::NOT_FOUND,
            "no metrics recorder here: install one with switchman::install_metrics_recorder() and \
             pass its handle to switchman::admin::set_metrics_handle (the CLI does both with --admin)\n",
        )
            .into_response(),
    }
}

async fn offline(
    State(state): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    command(state, peer, &headers, query, false).await
}

async fn online(
    State(state): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    command(state, peer, &headers, query, true).await
}

/// Why a command must be refused as a browser's, if it must: a web page the operator opens can
/// make the browser POST to a port on 127.0.0.1 (cross-site request forgery, answered by an
/// `Origin` header: browsers send it with every cross-origin POST and curl never does) or, through
/// a domain of its own that resolves to 127.0.0.1, as if it were that host (DNS rebinding,
/// answered by requiring a `Host` that is an IP address or `localhost` while commands are taken
/// from loopback only).
fn browser_refusal(headers: &HeaderMap, accept_foreign: bool) -> Option<String> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        return Some(format!(
            "a request with an Origin header ({}) is a browser's: commands are taken from clients such as curl only",
            String::from_utf8_lossy(origin.as_bytes())
        ));
    }
    if accept_foreign {
        return None;
    }
    let host = headers
        .get(header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .unwrap_or_default();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h),
    };
    let ok = name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok();
    (!ok).then(|| {
        format!(
            "Host {host:?} is neither an IP address nor localhost (a DNS name pointing at 127.0.0.1 is how a web page reaches this port)"
        )
    })
}

async fn command(
    state: AdminState,
    peer: SocketAddr,
    headers: &HeaderMap,
    query: Option<String>,
    up: bool,
) -> Response {
    let name = if up { "online" } else { "offline" };
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    if let Some(why) = browser_refusal(headers, shared.accept_foreign.load(Ordering::Relaxed)) {
        return answer(
            StatusCode::FORBIDDEN,
            json!({"error": format!("POST /{name} refused: {why}")}),
        );
    }
    if !peer.ip().to_canonical().is_loopback() && !shared.accept_foreign.load(Ordering::Relaxed) {
        return answer(
            StatusCode::FORBIDDEN,
            json!({"error": format!(
                "POST /{name} from {} refused: commands are taken from loopback only unless the admin endpoint accepts foreign IPs (Dubbo's qos.accept.foreign.ip)",
                peer.ip()
            )}),
        );
    }
    let pattern = query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "service")
        .map(|(_, v)| percent_decode(v))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| ".*".to_string());
    let re = match regex::Regex::new(&format!("^(?:{pattern})$")) {
        Ok(r) => r,
        Err(e) => {
            return answer(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("service pattern {pattern:?} is not a regular expression: {e}")}),
            );
        }
    };
    let matched: Vec<Exported> = shared
        .lock()
        .providers
        .values()
        .filter(|p| {
            let key = p.instance().service();
            re.is_match(&key.to_string()) || re.is_match(&key.interface)
        })
        .cloned()
        .collect();
    drop(shared);
    if matched.is_empty() {
        // Dubbo's answer when nothing matches.
        return answer(
            StatusCode::NOT_FOUND,
            json!({"result": "service not found", "error": format!("no exported provider matches {pattern:?}")}),
        );
    }
    let mut errors = Vec::new();
    for p in &matched {
        let errs = if up {
            p.online().await
        } else {
            p.offline().await
        };
        errors.extend(errs.into_iter().map(|e| e.to_string()));
    }
    answer(
        StatusCode::OK,
        json!({
            "result": "OK",
            "providers": matched.iter().map(Exported::describe).collect::<Vec<_>>(),
            "errors": errors,
        }),
    )
}

/// `%XX` and `+` decoded (a malformed escape is kept as it is).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_from_browsers_and_rebound_names_are_refused() {
        let with = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(
                    axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            h
        };
        // curl's requests.
        for host in [
            "127.0.0.1:22222",
            "localhost:22222",
            "[::1]:22222",
            "LOCALHOST",
        ] {
            assert_eq!(
                browser_refusal(&with(&[("host", host)]), false),
                None,
                "{host}"
            );
        }
        // A page's cross-origin POST, even to a loopback Host.
        let e = browser_refusal(
            &with(&[
                ("host", "127.0.0.1:22222"),
                ("origin", "https://evil.example"),
            ]),
            false,
        )
        .unwrap();
        assert!(e.contains("Origin"), "{e}");
        assert!(
            browser_refusal(&with(&[("origin", "null")]), true).is_some(),
            "Origin is refused with foreign IPs accepted too"
        );
        // DNS rebinding: a name of the attacker's resolving to 127.0.0.1.
        let e = browser_refusal(&with(&[("host", "rebind.evil.example:22222")]), false).unwrap();
        assert!(e.contains("rebind.evil.example"), "{e}");
        assert!(
            browser_refusal(&with(&[]), false).is_some(),
            "no Host at all"
        );
        // With foreign IPs accepted, a host name is the operator's choice.
        assert_eq!(
            browser_refusal(&with(&[("host", "admin.internal:22222")]), true),
            None
        );
    }

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(
            percent_decode("g1%2Fcom.foo.Bar%3A1.0.0"),
            "g1/com.foo.Bar:1.0.0"
        );
        assert_eq!(percent_decode("a+b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%41"), "A");
    }

    #[test]
    fn registry_passwords_are_masked() {
        let shown = redact("nacos://nacos:secret@127.0.0.1:8848?namespace=x");
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(redact("providers.yaml"), "providers.yaml");
    }
}
