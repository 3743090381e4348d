//! The Nacos adapter (feature `nacos`), on the official `nacos-sdk` (gRPC, Nacos 2.x/3.x).
//!
//! ```text
//! nacos://[user:pass@]127.0.0.1:8848?namespace=dev&group=DEFAULT_GROUP&naming=dubbo
//!        &clusters=hz,sh&application=shop&cache_dir=/var/cache/switchman-nacos
//! nacos://10.0.0.1:8848,10.0.0.2:8848,10.0.0.3?namespace=dev     (a cluster)
//! nacos://10.0.0.1:8848?backup=10.0.0.2:8848,10.0.0.3            (the same, Dubbo's form)
//! nacos://nacos?endpoint=addr.example:8080&namespace=dev         (an address server)
//! ```
//!
//! Servers: the authority may list several (`Url::parse_registry`), `backup` adds more (Java
//! Dubbo's `NacosNamingServiceUtils` passes host:port plus `backup` as Nacos's `serverAddr`);
//! port 8848 where missing; at most 64. nacos-sdk connects to one of them (picked at random)
//! and moves to the next on a reconnect. One client build tries up to [`BUILD_SERVERS`] of
//! them in turn, and the naming and config clients are first built at once: a dead server
//! picked first costs about 6.5 s at the first connection (nacos-sdk's connection checks,
//! then a 2 s pause), not a failed build. `endpoint=host[:port]` (port 8080 by default, or
//! Java's `endpointPort`) names an address server instead: nacos-sdk reads the server list
//! from `http://{endpoint}/nacos/serverlist?namespace=..` when it connects and every 30 s
//! after, and the URL's own servers are then not used (as in Java Nacos, where the endpoint
//! wins too). `grpc_port` applies to every server; without it each server's gRPC port is its
//! HTTP port + 1000.
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `backup` | none | more servers, comma-separated `host[:port]` |
//! | `endpoint` | none | the address server, `host[:port]` (see above) |
//! | `endpointPort` | `8080` | the address server's port when `endpoint` has none (Java's) |
//! | `namespace` | empty (public) | Nacos namespace id |
//! | `group` | `DEFAULT_GROUP` | Nacos group of the services |
//! | `naming` | `dubbo` | `dubbo`: service `providers:{interface}:{version}:{group}` as Java Dubbo registers it; `plain`: the interface is the Nacos service name (Spring Cloud style) |
//! | `clusters` | all | keep only instances of these Nacos clusters (comma list) |
//! | `username`, `password` | none | Nacos auth (also as `user:pass@` in the address) |
//! | `application` | none | the consumer application: also watch `{app}.condition-router` and `{app}.configurators` |
//! | `rules` | `true` | `false`: do not watch the config centre |
//! | `rule_group` | `dubbo` | config-centre group of the rules |
//! | `cache_dir` | `$TMPDIR/switchman-nacos` | nacos-sdk's own disk cache (never `$HOME`) |
//! | `grpc_port` | HTTP port + 1000 | Nacos gRPC port, of every server |
//! | `list_interval` | `10000` | ms between two listings of the group's services for a key that is a pattern (see below), and between two HTTP reads of a service too large for nacos-sdk (`sdk.rs`) |
//! | `http-list-above` | 3670016 | bytes of JSON instance list over which a service is read through the HTTP open API instead of nacos-sdk (`sdk.rs`, "Services too large for nacos-sdk"); `0`: every service |
//! | `http-list-max-bytes` | 67108864 | the largest HTTP instance-list answer read (`http_list.rs`) |
//! | `health_interval` | `2000` | ms between two checks that the server still answers (100 to 3600000); a check may take 1.5 intervals, at least 1 s, before the server counts as unreachable |
//! | `app-level` | `true` | also read Dubbo 3 application-level instances (Dubbo naming, a concrete key; see `app.rs`) |
//! | `provided-by` | | applications to read application-level instances from, instead of the mapping's (not read then, as in Dubbo) |
//! | `migration.step` | `APPLICATION_FIRST` | Dubbo's consumer migration step, `FORCE_INTERFACE`, `APPLICATION_FIRST` or `FORCE_APPLICATION`, unless the `{application}.migration` rule (group `DUBBO_SERVICEDISCOVERY_MIGRATION`) says otherwise (see `migration.rs`) |
//! | `migration.threshold` | `0.0` | the address-count ratio by which the application level covers the interface level |
//! | `migration.force` / `migration.delay` | `false` / `0` | skip the check of a `FORCE_*` step change / wait this many seconds before it |
//! | `metadata-timeout` | 5000 | timeout of one call to a provider's `MetadataService` (ms), Dubbo's |
//! | `metadata-retry` | 10000 | the longest pause between retries of a `MetadataInfo` that could not be fetched (ms) |
//! | `register-mode` | `interface` | provider side: `interface`, `instance` (the Dubbo 3 application instance `{app}`, mapping and metadata; `register_app.rs`) or `all` |
//! | `metadata-type` | `local` | provider side, application level: `remote` also publishes the config `{app}` in group `{revision}` |
//! | `secure` (`nacos.remote.client.rpc.tls.enable`) | `false` | TLS to every server, HTTP (the login) and gRPC, through in-process relays (`tls.rs`); not with `endpoint` |
//! | `tls.ca` (`nacos.remote.client.rpc.tls.trustCollectionChainPath`) | | PEM file of the CA that signed the servers' certificates; required with `secure=true` |
//! | `tls.cert` (`nacos.remote.client.rpc.tls.certChainFile`) | | PEM client certificate chain (mTLS; `...tls.mutualAuth=true` requires it); may hold the key too |
//! | `tls.key` (`nacos.remote.client.rpc.tls.certPrivateKeyFile`) | the `tls.cert` file | PEM private key of the client certificate (unencrypted) |
//! | `tls.hostname-verification` | `true` | `false`: the certificate chain is checked, not the name |
//!
//! The names in parentheses are the Nacos Java client's properties, which Dubbo passes from the
//! registry URL to the client: they are aliases (two that disagree are an error).
//! `...tls.certPrivateKeyPwd` and `...tls.trustAll=true` are refused, `...tls.provider`,
//! `...tls.protocols` and `...tls.ciphers` accepted and not used.
//!
//! Plain naming has no Dubbo group or version: subscribing a key that has either is an error
//! (the Nacos group is the registry's `group`).
//!
//! A Dubbo-naming key that is a [pattern](ServiceKey::is_pattern) (group or version `*`, a
//! group list `g1,g2`, interface `*`) has no service name of its own: the subscription lists
//! the group's services every `list_interval`, subscribes to every name
//! `providers:{interface}:{version}:{group}` the key [accepts](ServiceKey::accepts) and
//! merges their instances, each carrying its own service key (see `watch.rs`).
//!
//! The SDK clients are built in the background on first use, retried with backoff while Nacos is
//! unreachable, so [`Registry::subscribe`] returns at once and the directory serves its snapshot
//! cache meanwhile. Client settings that matter: `env_first(false)` (a stray `.env` or
//! `NACOS_CLIENT_*` variable cannot override the URL) and `naming_push_empty_protection(false)`:
//! the SDK's protection would silently drop a push that lists no instance (or only unhealthy or
//! zero-weight ones), hiding "all instances gone" from the directory, whose
//! [`EmptyPolicy`](crate::EmptyPolicy) decides instead.
//!
//! A subscription keeps its registry's clients alive: it outlives the last handle of the
//! registry, as on ZooKeeper.
//!
//! Instance mapping and the weight rule: see `mapping.rs` (documented in the README);
//! config-centre rules: `rules.rs`; Dubbo 3 application-level discovery (the interface →
//! application mapping, the application services, metadata from the report or the
//! provider's `MetadataService`): `app.rs`.

mod app;
mod auth;
pub(crate) mod http_list;
mod mapping;
mod options;
mod register_app;
mod rules;
mod sdk;
mod subscription;
mod tls;
mod watch;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use nacos_sdk::api::config::ConfigService;
use nacos_sdk::api::naming::{NamingService, ServiceInstance};
use switchman_core::{BoxFuture, Error, Instance, Result, ServiceKey, Url};
use tokio::sync::{mpsc, watch as tokio_watch};
use tracing::{debug, info, warn};

use crate::{Registrar, Registry, UpdateReceiver};

use options::*;
pub use options::{BUILD_SERVERS, NacosOptions, Naming};
pub(crate) use sdk::Clients;
use sdk::SDK_CALL_TIMEOUT;

/// The mapping the adapter applies to every instance Nacos lists for `key` (`dubbo_naming`:
/// the service is named `providers:{interface}:{version}:{group}`); `None`, logged, for an
/// instance it skips (invalid port or address, metadata over the limits of
/// [`switchman_core::check_metadata`]). Public for tools and the fuzz target.
pub fn instance_from_nacos(
    key: &ServiceKey,
    dubbo_naming: bool,
    instance: &ServiceInstance,
) -> Option<Instance> {
    mapping::to_instance(key, dubbo_naming, instance)
}

struct Inner {
    opts: NacosOptions,
    redacted: String,
    clients: tokio_watch::Sender<Option<Clients>>,
    started: AtomicBool,
    /// What this registry registered, by Nacos service name and address (see
    /// [`NacosRegistry::send_instance`]).
    registered: tokio::sync::Mutex<BTreeMap<String, BTreeMap<String, ServiceInstance>>>,
    /// Live subscriptions per service.
    subscribers: subscription::Subscribers,
    /// This registry's metadata cache; unset: the process-wide one.
    metadata_cache: std::sync::OnceLock<Arc<crate::metadata::MetadataCache>>,
    /// Application-level registrations (`register-mode`, `register_app.rs`).
    app: register_app::NacosAppRegistrar,
    /// TLS to the servers (`secure=true`, `tls.rs`).
    tls: Option<tls::NacosTls>,
}

/// A Nacos registry: subscribes (consumer side) and registers (provider side) through one pair
/// of nacos-sdk clients (naming and config) built on first use.
#[derive(Clone)]
pub struct NacosRegistry {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NacosRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NacosRegistry")
            .field("url", &self.inner.redacted)
            .field("connected", &self.inner.clients.borrow().is_some())
            .finish()
    }
}

impl NacosRegistry {
    /// Validates the registry URL; connects lazily, in the background, on the first
    /// subscribe or register.
    pub fn from_url(url: &Url) -> Result<Self> {
        let opts = NacosOptions::from_url(url)?;
        let app = register_app::NacosAppRegistrar::from_url(url)?;
        let servers: Vec<&str> = opts.server_addr.split(',').collect();
        let tls =
            tls::NacosTls::from_url(url, &servers, opts.grpc_port, opts.endpoint.is_some())
                .map_err(|why| Error::bad_config(format!("registry {}: {why}", url.redacted())))?;
        let (clients, _) = tokio_watch::channel(None);
        Ok(NacosRegistry {
            inner: Arc::new(Inner {
                opts,
                redacted: url.redacted(),
                clients,
                started: AtomicBool::new(false),
                registered: tokio::sync::Mutex::new(BTreeMap::new()),
                subscribers: subscription::Subscribers::default(),
                metadata_cache: std::sync::OnceLock::new(),
                app,
                tls,
            }),
        })
    }

    /// Uses `cache` for the `MetadataInfo` of application instances with local metadata,
    /// instead of the process-wide cache ([`crate::metadata::install_fetcher`]). Takes effect
    /// for subscriptions made after the call; a second call is ignored.
    pub fn metadata_cache(self, cache: Arc<crate::metadata::MetadataCache>) -> Self {
        let _ = self.inner.metadata_cache.set(cache);
        self
    }

    /// The validated settings.
    pub fn options(&self) -> &NacosOptions {
        &self.inner.opts
    }

    /// The Nacos services (name, group) this registry reads over the HTTP open API instead
    /// of nacos-sdk: found too large for the SDK's 4 MiB gRPC messages or over
    /// `http-list-above` (see "Big fleets" in the README), in name order.
    pub fn services_read_over_http(&self) -> Vec<(String, String)> {
        self.inner.subscribers.oversized()
    }

    /// Starts the background connector once; returns a receiver of the clients.
    fn clients(&self) -> tokio_watch::Receiver<Option<Clients>> {
        if !self.inner.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(connect(Arc::downgrade(&self.inner)));
        }
        self.inner.clients.subscribe()
    }

    async fn clients_within(&self, wait: Duration) -> Result<Clients> {
        let mut rx = self.clients();
        let found = tokio::time::timeout(wait, async {
            loop {
                if let Some(c) = rx.borrow_and_update().clone() {
                    return Some(c);
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        })
        .await;
        match found {
            Ok(Some(c)) => Ok(c),
            _ => Err(Error::transport(format!(
                "nacos {}: not connected after {wait:?}",
                self.inner.redacted
            ))),
        }
    }
}

/// Builds the clients, retrying with backoff, until built or the registry is dropped.
///
/// Every failed nacos-sdk 0.8.3 build leaves one idle SDK task behind (its redo scheduler),
/// which is why the backoff grows to [`BUILD_BACKOFF_MAX`] rather than retrying fast forever.
async fn connect(inner: Weak<Inner>) {
    let mut delay = BUILD_BACKOFF_MIN;
    let mut naming = None;
    let mut config = None;
    // The first failure is a warning, the retries after it `debug`; the connection, once made,
    // says how long it took (once per event, never per retry).
    let started = std::time::Instant::now();
    let mut failures = 0u32;
    // With TLS: the relays (started once), and the options nacos-sdk is built with, which
    // name the relays instead of the servers (`tls.rs`).
    let mut relay: Option<Arc<crate::tls_relay::Relay>> = None;
    let mut relayed: Option<NacosOptions> = None;
    loop {
        let Some(me) = inner.upgrade() else { return };
        if let Some(tls) = &me.tls
            && relay.is_none()
        {
            match tls.relay().await {
                Ok(r) => {
                    let mut o = me.opts.clone();
                    o.server_addr = r.connect_string().to_string();
                    // The relay pairs' gRPC ports are their HTTP ports + 1000.
                    o.grpc_port = None;
                    relayed = Some(o);
                    relay = Some(Arc::new(r));
                }
                Err(e) => {
                    not_ready(&me, &mut failures, delay, "naming", &Error::transport(e));
                    drop(me);
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(BUILD_BACKOFF_MAX);
                    continue;
                }
            }
        }
        let opts = relayed.as_ref().unwrap_or(&me.opts);
        // A failed build over TLS also says what the relays saw (the server, the CA file).
        let why = |e: Error| match (&me.tls, &relay) {
            (Some(tls), Some(r)) => {
                let servers = tls.servers();
                let seen = r.take_error().map(|t| format!(": {t}")).unwrap_or_default();
                Error::transport(format!("{e} (over TLS to {servers}){seen}"))
            }
            _ => e,
        };
        let wants_config =
            me.opts.rule_group.is_some() || me.opts.app_level || me.app.mode().instance();
        // With several servers both clients are first built at once: each build may pick a
        // dead server first and pause before the next (about 6.5 s in nacos-sdk 0.8.3), and
        // the two pauses then overlap. With one server, one after the other, so that while it
        // is down only the naming build fails (every failed build leaves an SDK task behind).
        let together =
            naming.is_none() && config.is_none() && wants_config && opts.several_servers();
        let (built_naming, built_config) = if together {
            let (n, c) = tokio::join!(build_naming(opts), build_config(opts));
            (Some(n), Some(c))
        } else if naming.is_none() {
            (Some(build_naming(opts).await), None)
        } else {
            (None, None)
        };
        match built_naming {
            Some(Ok(n)) => naming = Some(n),
            Some(Err(e)) => not_ready(&me, &mut failures, delay, "naming", &why(e)),
            None => {}
        }
        let built_config = match built_config {
            None if naming.is_some() && config.is_none() && wants_config => {
                Some(build_config(opts).await)
            }
            other => other,
        };
        match built_config {
            Some(Ok(c)) => config = Some(c),
            Some(Err(e)) => not_ready(&me, &mut failures, delay, "config", &why(e)),
            None => {}
        }
        if let Some(n) = &naming
            && (config.is_some() || !wants_config)
        {
            if failures > 0 {
                info!(registry = %me.redacted, after_ms = started.elapsed().as_millis() as u64,
                        retries = failures, "connected to nacos");
            } else {
                info!(registry = %me.redacted, "connected to nacos");
            }
            me.clients.send_replace(Some(Clients {
                naming: n.clone(),
                config: config.take(),
                _relay: relay.clone(),
                http: Arc::new(http_fallback(&me.opts, opts)),
            }));
            tokio::spawn(watch_health(inner.clone(), n.clone(), relay));
            return;
        }
        drop(me);
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(BUILD_BACKOFF_MAX);
    }
}

/// How the registry reads services too large for nacos-sdk (`sdk.rs`): from the servers
/// `opts` names (over TLS, the relays that `connected` names instead), with the registry's
/// credentials; no reader with an address server.
fn http_fallback(opts: &NacosOptions, connected: &NacosOptions) -> sdk::HttpFallback {
    let reader = opts.endpoint.is_none().then(|| {
        Arc::new(http_list::HttpReader::new(
            connected
                .server_addr
                .split(',')
                .map(str::to_string)
                .collect(),
            opts.namespace.clone(),
            opts.username
                .as_deref()
                .map(|u| (u, opts.password.as_deref().unwrap_or(""))),
            opts.http_list_max_bytes,
        ))
    });
    sdk::HttpFallback {
        reader,
        above: opts.http_list_above,
        every: opts.list_interval,
    }
}

/// One naming client build, [supervised](supervised).
async fn build_naming(opts: &NacosOptions) -> Result<NamingService> {
    let opts = opts.clone();
    supervised("naming", async move { opts.build_naming().await }).await
}

/// One config client build, [supervised](supervised).
async fn build_config(opts: &NacosOptions) -> Result<ConfigService> {
    let opts = opts.clone();
    supervised("config", async move { opts.build_config().await }).await
}

/// Runs `build` in a task of its own: a panic inside nacos-sdk (0.8.3 has `expect`s on
/// server answers) fails that build, which the connector retries with backoff, instead of
/// ending the connector for the life of the process.
async fn supervised<T: Send + 'static>(
    client: &str,
    build: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    match tokio::spawn(build).await {
        Ok(built) => built,
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Err(Error::transport(format!(
                "nacos {client} client: nacos-sdk panicked while connecting: {why}"
            )))
        }
        Err(e) => Err(Error::transport(format!(
            "nacos {client} client: the build was cancelled: {e}"
        ))),
    }
}

/// Logs a failed client build: the first failure of a registry as a warning, the retries
/// after it at `debug`.
fn not_ready(me: &Inner, failures: &mut u32, delay: Duration, client: &str, e: &Error) {
    if *failures == 0 {
        warn!(registry = %me.redacted, "nacos {client} client not ready, retrying in the background: {e}");
    } else {
        debug!(registry = %me.redacted, "nacos {client} client still not ready, retrying in {delay:?}: {e}");
    }
    *failures += 1;
}

/// Logs the server going away and coming back, once per event (the nacos-sdk reconnects and
/// re-registers on its own and says nothing): a cheap call (one page of one service name)
/// every `health_interval`; the first failure is a warning, the next success says how long the
/// server was unreachable. Every check is one `debug` line (`nacos health check`, `ok`), so a
/// reader can count checks instead of waiting. Ends when the registry is dropped.
async fn watch_health(
    inner: Weak<Inner>,
    naming: NamingService,
    relay: Option<Arc<crate::tls_relay::Relay>>,
) {
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        let Some(every) = inner.upgrade().map(|me| me.opts.health_interval) else {
            return;
        };
        tokio::time::sleep(every).await;
        let Some(me) = inner.upgrade() else { return };
        let group = me.opts.group.clone();
        let redacted = me.redacted.clone();
        drop(me);
        // One and a half intervals (3 s by default), at least a second: a slow answer is not
        // an outage.
        let within = (every * 3 / 2).max(Duration::from_secs(1));
        let answer = tokio::time::timeout(within, naming.get_service_list(1, 1, Some(group))).await;
        debug!(registry = %redacted, ok = matches!(answer, Ok(Ok(_))), "nacos health check");
        // Over TLS, what the relays saw since the last check (a failed handshake: the server
        // and the CA file).
        let tls = relay
            .as_ref()
            .and_then(|r| r.take_error())
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        match (answer, down_since) {
            (Ok(Ok(_)), None) => {}
            (Ok(Ok(_)), Some(since)) => {
                info!(registry = %redacted, down_ms = since.elapsed().as_millis() as u64,
                    "nacos reachable again");
                down_since = None;
            }
            (Ok(Err(e)), None) => {
                warn!(registry = %redacted, "nacos unreachable: {e}{tls}");
                down_since = Some(std::time::Instant::now());
            }
            (Err(_), None) => {
                warn!(registry = %redacted, "nacos unreachable: no answer within {within:?}{tls}");
                down_since = Some(std::time::Instant::now());
            }
            (_, Some(_)) => {}
        }
    }
}

impl Registry for NacosRegistry {
    fn service_definition<'a>(
        &'a self,
        service: &'a ServiceKey,
        application: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::metadata::ServiceDefinition>>> {
        Box::pin(async move {
            if service.interface.is_empty() || application.is_empty() {
                return Ok(None);
            }
            let clients = self.clients_within(SDK_CALL_TIMEOUT).await?;
            // No config client (no rules, no application level): no metadata report read.
            let Some(config) = clients.config.as_ref() else {
                return Ok(None);
            };
            let group = self
                .inner
                .opts
                .rule_group
                .clone()
                .unwrap_or_else(|| DEFAULT_RULE_GROUP.to_string());
            for data_id in crate::metadata::nacos_data_ids(service, application) {
                let read = crate::metadata::nacos::read_config(config, &data_id, &group);
                let content = match tokio::time::timeout(SDK_CALL_TIMEOUT, read).await {
                    Ok(Ok(Some(c))) => c,
                    Ok(Ok(None)) => continue,
                    Ok(Err(e)) => {
                        return Err(Error::transport(format!(
                            "nacos {}: {e}",
                            self.inner.redacted
                        )));
                    }
                    Err(_) => {
                        return Err(Error::transport(format!(
                            "nacos {}: config {data_id} in group {group}: no answer within {SDK_CALL_TIMEOUT:?}",
                            self.inner.redacted
                        )));
                    }
                };
                let source = format!(
                    "nacos {} config {data_id} in group {group}",
                    self.inner.redacted
                );
                return crate::metadata::ServiceDefinition::parse(content.as_bytes(), &source)
                    .map(Some)
                    .map_err(Error::bad_config);
            }
            Ok(None)
        })
    }

    fn subscribe<'a>(&'a self, service: &'a ServiceKey) -> BoxFuture<'a, Result<UpdateReceiver>> {
        Box::pin(async move {
            let opts = &self.inner.opts;
            let service_name = opts.service_name(service)?;
            // Dubbo's NacosRegistry: a concrete name is subscribed as is, a pattern through
            // the service list (NacosServiceName.isCompatible).
            let pattern = opts.naming == Naming::Dubbo && service.is_pattern();
            let w = subscription::Watch {
                key: service.clone(),
                service_name,
                list_every: pattern.then_some(opts.list_interval),
                group: opts.group.clone(),
                clusters: opts.clusters.clone(),
                dubbo_naming: opts.naming == Naming::Dubbo,
                rule_group: opts.rule_group.clone(),
                rule_ids: rules::service_data_ids(service, opts.application.as_deref()),
                subscribers: self.inner.subscribers.clone(),
                // Dubbo's ServiceDiscoveryRegistry maps one interface to its applications: a
                // pattern names none.
                app_level: (opts.app_level && !pattern).then(|| subscription::AppLevelWatch {
                    provided_by: opts.provided_by.clone(),
                    fetch: opts.metadata_fetch.clone(),
                    cache: self.inner.metadata_cache.get().cloned(),
                    migration: opts.migration.clone(),
                    application: opts.application.clone(),
                }),
            };
            let (tx, rx) = mpsc::channel(64);
            tokio::spawn(watch::run(w, self.clients(), tx, self.inner.clone()));
            Ok(rx)
        })
    }
}

impl NacosRegistry {
    /// Registers or deregisters one instance.
    ///
    /// nacos-sdk 0.8.3 keeps one re-registration ("redo") task per service and request type,
    /// so two instances of one service registered one by one would leave only the last to be
    /// registered again after a reconnect. The registrar therefore registers a lone instance
    /// with a plain register request and, from the second instance of a service on, the whole
    /// set with one batch request, whose redo task then covers every instance. After a
    /// deregistration the remaining set is sent again as a batch. Known SDK limitation: once
    /// every instance of a batch-registered service is deregistered, the SDK's batch redo task
    /// still holds the last set and would register it again after a reconnect of this client.
    async fn send_instance(&self, instance: &Instance, register: bool) -> Result<()> {
        let opts = &self.inner.opts;
        let service_name = opts.service_name(instance.service())?;
        let clients = self.clients_within(REGISTER_WAIT).await?;
        let si = mapping::to_service_instance(instance);
        let what = if register { "register" } else { "deregister" };
        let group = Some(opts.group.clone());
        let mut registered = self.inner.registered.lock().await;
        let set = registered.entry(service_name.clone()).or_default();
        let call = async {
            if register {
                set.insert(instance.address().to_string(), si.clone());
                if set.len() == 1 {
                    clients
                        .naming
                        .register_instance(service_name.clone(), group, si)
                        .await
                } else {
                    clients
                        .naming
                        .batch_register_instance(
                            service_name.clone(),
                            group,
                            set.values().cloned().collect(),
                        )
                        .await
                }
            } else {
                set.remove(instance.address());
                clients
                    .naming
                    .deregister_instance(service_name.clone(), group.clone(), si)
                    .await?;
                if set.is_empty() {
                    Ok(())
                } else {
                    clients
                        .naming
                        .batch_register_instance(
                            service_name.clone(),
                            group,
                            set.values().cloned().collect(),
                        )
                        .await
                }
            }
        };
        let result = tokio::time::timeout(REQUEST_TIMEOUT, call).await;
        if registered.get(&service_name).is_some_and(|s| s.is_empty()) {
            registered.remove(&service_name);
        }
        match result {
            Ok(Ok(())) => {
                info!(service = %service_name, address = instance.address(), weight = instance.weight(), "nacos {what}ed");
                Ok(())
            }
            Ok(Err(e)) => Err(Error::transport(format!(
                "nacos {}: {what} {} in {service_name}: {e}",
                self.inner.redacted,
                instance.address()
            ))),
            Err(_) => Err(Error::timeout(format!(
                "nacos {}: {what} {} in {service_name} timed out",
                self.inner.redacted,
                instance.address()
            ))),
        }
    }
}

impl Registrar for NacosRegistry {
    /// Registers `instance` as an ephemeral Nacos instance (the SDK registers it again after
    /// every reconnect) with its weight (`weight / 100` in the Nacos field, the integer in
    /// metadata) and its URL parameters as metadata.
    /// With `register-mode=instance`/`all`, also the application instance, the mapping and
    /// (`metadata-type=remote`) the report (`register_app.rs`).
    fn register<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mode = self.inner.app.mode();
            let app = match mode.instance() {
                true => self.app_level(instance, true).await,
                false => Ok(()),
            };
            match mode.interface() {
                true => self.send_instance(instance, true).await.and(app),
                false => app,
            }
        })
    }

    fn unregister<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let app = self.app_level(instance, false).await;
            match self.inner.app.mode().interface() {
                true => self.send_instance(instance, false).await.and(app),
                false => app,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[tokio::test]
    async fn a_panic_inside_a_build_is_a_failed_build() {
        let e = super::supervised::<()>("naming", async {
            panic!("Response text conversion should succeed")
        })
        .await
        .unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::Transport);
        assert_eq!(
            e.message(),
            "nacos naming client: nacos-sdk panicked while connecting: Response text conversion should succeed"
        );
        assert_eq!(
            super::supervised("config", async { Ok(7) }).await.unwrap(),
            7
        );
    }

    use super::*;
    use switchman_core::url::MAX_SERVERS;

    fn opts(url: &str) -> Result<NacosOptions> {
        NacosOptions::from_url(&Url::parse(url).unwrap())
    }

    #[test]
    fn url_defaults() {
        let o = opts("nacos://127.0.0.1:8848").unwrap();
        assert_eq!(o.server_addr, "127.0.0.1:8848");
        assert_eq!(
            (o.namespace.as_str(), o.group.as_str()),
            ("", DEFAULT_GROUP)
        );
        assert_eq!(o.naming, Naming::Dubbo);
        assert!(o.clusters.is_empty());
        assert_eq!((o.username.as_deref(), o.password.as_deref()), (None, None));
        assert_eq!(o.rule_group.as_deref(), Some("dubbo"));
        assert_eq!(o.cache_dir, std::env::temp_dir().join("switchman-nacos"));
        assert_eq!(o.list_interval, DEFAULT_LIST_INTERVAL);
        assert_eq!(o.health_interval, DEFAULT_HEALTH_INTERVAL);
        assert_eq!(
            opts("nacos://127.0.0.1:8848?health_interval=250")
                .unwrap()
                .health_interval,
            Duration::from_millis(250)
        );
        assert!(o.app_level && o.provided_by.is_empty());
        assert_eq!(o.metadata_fetch, crate::metadata::FetchSettings::default());
        assert_eq!(
            opts("nacos://nacos.local").unwrap().server_addr,
            "nacos.local:8848"
        );
    }

    #[test]
    fn url_parameters() {
        let o = opts(
            "nacos://127.0.0.1:18848?namespace=dev&group=G&naming=plain&clusters=hz,%20sh,&username=u&password=p&application=shop&cache_dir=/tmp/x&grpc_port=19848&rule_group=gov",
        )
        .unwrap();
        assert_eq!(o.namespace, "dev");
        assert_eq!(o.group, "G");
        assert_eq!(o.naming, Naming::Plain);
        assert_eq!(o.clusters.len(), 2);
        assert_eq!(o.clusters[0], "hz");
        assert_eq!(
            (o.username.as_deref(), o.password.as_deref()),
            (Some("u"), Some("p"))
        );
        assert_eq!(o.application.as_deref(), Some("shop"));
        assert_eq!(o.cache_dir, PathBuf::from("/tmp/x"));
        assert_eq!(o.grpc_port, Some(19848));
        assert_eq!(o.rule_group.as_deref(), Some("gov"));
        assert_eq!(
            opts("nacos://127.0.0.1:8848?list_interval=500")
                .unwrap()
                .list_interval,
            Duration::from_millis(500)
        );
        let o = opts(
            "nacos://127.0.0.1:8848?provided-by=shop,cart,,shop&metadata-timeout=800&metadata-retry=500",
        )
        .unwrap();
        assert_eq!(o.provided_by, ["shop", "cart"]);
        assert_eq!(o.metadata_fetch.timeout, Duration::from_millis(800));
        assert_eq!(o.metadata_fetch.retry_max, Duration::from_millis(500));
        assert!(o.metadata_fetch.retry_min <= o.metadata_fetch.retry_max);
        assert!(
            !opts("nacos://127.0.0.1:8848?app-level=false")
                .unwrap()
                .app_level
        );
        assert!(
            !opts("nacos://127.0.0.1:8848?naming=plain")
                .unwrap()
                .app_level,
            "application-level discovery is Dubbo's"
        );
        let o = opts("nacos://admin:secret@127.0.0.1:8848?rules=false").unwrap();
        assert_eq!(
            (o.username.as_deref(), o.password.as_deref()),
            (Some("admin"), Some("secret"))
        );
        assert!(
            !format!("{o:?}").contains("secret"),
            "Debug masks the password"
        );
        assert_eq!(o.rule_group, None);
    }

    #[test]
    fn bad_urls_name_the_problem() {
        for (url, want) in [
            ("nacos://127.0.0.1:8848?naming=spring", "naming=\"spring\""),
            ("nacos://127.0.0.1:8848?grpc_port=x", "grpc_port=\"x\""),
            ("nacos://127.0.0.1:8848?rules=maybe", "rules=\"maybe\""),
            (
                "nacos://127.0.0.1:8848?list_interval=10",
                "list_interval=\"10\"",
            ),
            (
                "nacos://127.0.0.1:8848?list_interval=soon",
                "list_interval=\"soon\"",
            ),
            (
                "nacos://127.0.0.1:8848?health_interval=50",
                "health_interval=\"50\"",
            ),
            (
                "nacos://127.0.0.1:8848?health_interval=3600001",
                "health_interval=\"3600001\"",
            ),
            (
                "nacos://127.0.0.1:8848?password=p",
                "password without a username",
            ),
            (
                "nacos://127.0.0.1:8848?app-level=maybe",
                "app-level=\"maybe\"",
            ),
            (
                "nacos://127.0.0.1:8848?migration.step=LATER",
                "migration.step=\"LATER\"",
            ),
            (
                "nacos://127.0.0.1:8848?metadata-timeout=soon",
                "metadata-timeout=\"soon\"",
            ),
            (
                "nacos://127.0.0.1:8848?metadata-retry=0",
                "metadata-retry=\"0\"",
            ),
            (
                "nacos://127.0.0.1:8848?provided-by=a@@b",
                "provided-by: \"a@@b\"",
            ),
            ("zookeeper://127.0.0.1:2181", "expected nacos://"),
        ] {
            let e = opts(url).unwrap_err();
            assert!(e.to_string().contains(want), "{url}: {e}");
            assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
        }
        // The password never appears in messages.
        let e = opts("nacos://u:hunter2@127.0.0.1:8848?naming=x").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    /// What `registry_from_url` does with an address: the server-list parser, then the options.
    fn listed(address: &str) -> Result<NacosOptions> {
        let url = Url::parse_registry(address).map_err(|e| Error::bad_config(e.to_string()))?;
        NacosOptions::from_url(&url)
    }

    #[test]
    fn server_lists_in_the_authority_in_backup_or_from_an_address_server() {
        for (address, servers) in [
            ("nacos://a:8848,b:8848,c:8848", "a:8848,b:8848,c:8848"),
            ("nacos://a:8848?backup=b:8848,c", "a:8848,b:8848,c:8848"),
            ("nacos://a,b:9?backup=c:7", "a:8848,b:9,c:7"),
            (
                "nacos://u:p@[::1],10.0.0.2/x?namespace=dev",
                "[::1]:8848,10.0.0.2:8848",
            ),
            ("nacos://a:8848,a:8848", "a:8848"),
        ] {
            let o = listed(address).unwrap();
            assert_eq!(o.server_addr, servers, "{address}");
            assert_eq!(o.endpoint, None);
            assert_eq!(o.target(), servers);
        }
        let o = listed("nacos://a:8848,b:8850?grpc_port=9848&namespace=dev").unwrap();
        assert_eq!(o.grpc_port, Some(9848), "one gRPC port for every server");
        assert_eq!(o.namespace, "dev");
        // A port whose gRPC port (+ 1000) would not exist needs grpc_port.
        assert!(listed("nacos://a:64535").is_ok());
        assert!(listed("nacos://a:65000?grpc_port=9848").is_ok());
        for (address, want) in [
            (
                "nacos://a:65000",
                "server a:65000: its gRPC port would be 65000 + 1000",
            ),
            ("nacos://a,b:64536", "server b:64536"),
            ("nacos://a?backup=b:65535", "server b:65535"),
        ] {
            let e = listed(address).unwrap_err();
            assert!(e.to_string().contains(want), "{address}: {e}");
        }
        // The address server: host[:port], Java's endpointPort, port 8080 by default.
        for (params, endpoint) in [
            ("endpoint=as.example", "as.example:8080"),
            ("endpoint=10.0.0.9:9090", "10.0.0.9:9090"),
            ("endpoint=as&endpointPort=9000", "as:9000"),
            ("endpoint=as:9000&endpointPort=9000", "as:9000"),
            ("endpoint=[::1]:1", "[::1]:1"),
            ("endpoint=[fe80::1]", "[fe80::1]:8080"),
            ("endpoint=nacos-as_1.svc.local", "nacos-as_1.svc.local:8080"),
            ("endpoint=", ""),
        ] {
            let o = listed(&format!("nacos://a:8848,b:8848?{params}")).unwrap();
            assert_eq!(o.endpoint.as_deref().unwrap_or(""), endpoint, "{params}");
            if !endpoint.is_empty() {
                assert_eq!(
                    o.target(),
                    format!("(servers from the address server {endpoint})")
                );
            }
        }
    }

    #[test]
    fn bad_server_lists_and_address_servers_are_bad_config() {
        let many = (0..MAX_SERVERS)
            .map(|i| format!("10.0.{}.1", i))
            .collect::<Vec<_>>()
            .join(",");
        for (address, want) in [
            ("nacos://a:8848,,b:8848", "empty server in the host list"),
            ("nacos://,a", "empty server in the host list"),
            ("nacos://a:8848,", "empty server in the host list"),
            ("nacos://a:8848,b:88a48", "port is not a number"),
            ("nacos://a:8848,b:99999", "port is not a number"),
            ("nacos://a:8848,b c", "invalid character in host"),
            ("nacos://a:0", "port 0"),
            ("nacos://a?backup=b,,c", "empty server"),
            ("nacos://a?backup=b:x", "backup server \"b:x\""),
            ("nacos://a?backup=b:0", "backup server \"b:0\": port 0"),
            (
                &*format!("nacos://a:1?backup={many}"),
                "more than 64 servers",
            ),
            (&*format!("nacos://a:1,{many}"), "more than 64 servers"),
            ("nacos://a?endpoint=http://as/list", "host[:port]"),
            ("nacos://a?endpoint=as/list", "host[:port]"),
            (
                "nacos://a?endpoint=999.1.1.1",
                "not a host name or IP address",
            ),
            ("nacos://a?endpoint=as.123", "not a host name or IP address"),
            ("nacos://a?endpoint=a..b", "not a host name or IP address"),
            ("nacos://a?endpoint=%C3%A9", "not a host name or IP address"),
            ("nacos://a?endpoint=[zz]:1", "not an IPv6 address"),
            ("nacos://a?endpoint=[::1", "unclosed"),
            ("nacos://a?endpoint=[::1]x", "expected ':'"),
            (
                "nacos://a?endpoint=as:0",
                "endpoint port=\"0\" is not a port",
            ),
            ("nacos://a?endpoint=as:x:1", "is not a port"),
            (
                "nacos://a?endpoint=as&endpointPort=x",
                "endpointPort=\"x\" is not a port",
            ),
            ("nacos://a?endpoint=as:1&endpointPort=2", "disagree"),
            (
                "nacos://a?endpointPort=9000",
                "endpointPort without endpoint",
            ),
        ] {
            let e = listed(address).unwrap_err();
            assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig, "{address}");
            assert!(e.to_string().contains(want), "{address}: {e}");
            // The message names the address (its first server at least).
            assert!(e.to_string().contains("nacos://"), "{address}: {e}");
        }
        let e = listed("nacos://u:hunter2@a:1,b:x").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn service_names_per_naming_scheme() {
        let dubbo = opts("nacos://127.0.0.1:8848").unwrap();
        let plain = opts("nacos://127.0.0.1:8848?naming=plain").unwrap();
        let k = ServiceKey::with("com.foo.Bar", "g", "1.0");
        assert_eq!(
            dubbo.service_name(&k).unwrap(),
            "providers:com.foo.Bar:1.0:g"
        );
        assert_eq!(
            dubbo.service_name(&ServiceKey::new("com.foo.Bar")).unwrap(),
            "providers:com.foo.Bar::"
        );
        assert_eq!(
            plain
                .service_name(&ServiceKey::new("order-service"))
                .unwrap(),
            "order-service"
        );
        assert!(
            plain
                .service_name(&k)
                .unwrap_err()
                .to_string()
                .contains("plain naming")
        );
        assert!(dubbo.service_name(&ServiceKey::new("")).is_err());
    }

    #[tokio::test]
    async fn subscribe_returns_at_once_while_nacos_is_down() {
        // Nothing listens on port 1: the receiver comes back immediately, and the bad key is
        // still refused synchronously.
        let dir = std::env::temp_dir().join(format!("switchman-nacos-unit-{}", std::process::id()));
        let url = format!(
            "nacos://127.0.0.1:1?cache_dir={}&naming=plain",
            dir.display()
        );
        let reg = NacosRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
        let rx = tokio::time::timeout(
            Duration::from_secs(2),
            reg.subscribe(&ServiceKey::new("svc")),
        )
        .await
        .expect("subscribe must not wait for Nacos");
        let mut rx = rx.unwrap();
        assert!(rx.try_recv().is_err(), "nothing to report yet");
        assert!(
            reg.subscribe(&ServiceKey::with("svc", "g", ""))
                .await
                .is_err()
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
