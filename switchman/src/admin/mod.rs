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
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Value, json};
use switchman_cluster::ClusterInvoker;
use switchman_core::{Error, Instance, Result};
use switchman_discovery::{Directory, Registrar, RegistryDirectory};
use switchman_loadbalance::Endpoint;
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

mod http;
mod rows;

use http::*;
pub use rows::snapshot_json;
use rows::*;

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

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
