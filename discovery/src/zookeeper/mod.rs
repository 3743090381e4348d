//! The ZooKeeper adapter (feature `zookeeper`): Dubbo's interface-level layout, the config
//! centre, Dubbo 3 application-level instances, and provider registration.
//!
//! # Address
//!
//! `zookeeper://[user:password@]host[:port][/chroot]?backup=h2:p2,h3:p3&...` (Dubbo writes
//! extra servers as `backup`; `zk://` works too), or the connect-string form
//! `zookeeper://h1:p1,h2:p2,h3:p3[/chroot]?...` (the same servers, `Url::parse_registry`; at
//! most 64). Parameters:
//!
//! | parameter | default | meaning |
//! |---|---|---|
//! | `backup` | | more servers, comma-separated `host[:port]` |
//! | `session` | 60000 | session timeout (ms, 1 to a day), Dubbo's default |
//! | `timeout` | 5000 | the timeout of each ZooKeeper call and connect attempt (ms, 1 to a day) |
//! | `group` | `dubbo` | the registry root (`/dubbo`), as in Dubbo |
//! | `application` | | the consumer's application: its config-centre keys are watched too |
//! | `protocol` | any | the protocols this consumer accepts, e.g. `tri,http` |
//! | `provided-by` | | applications to read app-level instances from, instead of the mapping (not read then, as in Dubbo) |
//! | `app-level` | `true` | also read application-level instances |
//! | `migration.step` | `APPLICATION_FIRST` | Dubbo's consumer migration step, `FORCE_INTERFACE`, `APPLICATION_FIRST` or `FORCE_APPLICATION`, unless the `{application}.migration` rule says otherwise (see `migration.rs`) |
//! | `migration.threshold` | `0.0` | the address-count ratio by which the application level covers the interface level |
//! | `migration.force` / `migration.delay` | `false` / `0` | skip the check of a `FORCE_*` step change / wait this many seconds before it |
//! | `legacy-routers` | `true` | apply the `condition://` rules under `/dubbo/{interface}/routers` (Dubbo 2.x; Java Dubbo 3.x ignores them) |
//! | `watch` | `auto` | `persistent` (recursive watches, ZooKeeper 3.6+), `oneshot` (re-armed one-shot watches), `auto` (persistent, one-shot when the server has none) |
//! | `metadata-timeout` | 5000 | timeout of one call to a provider's `MetadataService` (ms), Dubbo's |
//! | `metadata-retry` | 10000 | the longest pause between retries of a `MetadataInfo` that could not be fetched (ms) |
//! | `register-mode` | `interface` | provider side: `interface`, `instance` (the Dubbo 3 application instance, mapping and metadata; `register_app.rs`) or `all` |
//! | `metadata-type` | `local` | provider side, application level: `remote` also writes `/dubbo/metadata/{app}/{revision}` |
//! | `secure` (`zookeeper.client.secure`) | `false` | TLS to every server (`tls.rs`); the Java client's `zookeeper.clientCnxnSocket` is accepted and not needed |
//! | `tls.ca` (`zookeeper.ssl.trustStore.location`) | | PEM file of the CA that signed the servers' certificates; required with `secure=true` |
//! | `tls.cert` (`zookeeper.ssl.keyStore.location`) | | PEM client certificate chain, for servers with `ssl.clientAuth=need`; may hold the key too (ZooKeeper's PEM key store) |
//! | `tls.key` | the `tls.cert` file | PEM private key of the client certificate (unencrypted) |
//! | `tls.hostname-verification` (`zookeeper.ssl.hostnameVerification`) | `true` | `false`: the certificate chain is checked, not the name |
//! | `sasl` | | `digest-md5` (SASL DIGEST-MD5, `sasl.rs`), `gssapi` (Kerberos, feature `zookeeper-gssapi`) or `none`; implied by `sasl.username` or `sasl.jaas` |
//! | `sasl.username`, `sasl.password` | | the SASL user (else `sasl.jaas`, else the address's `user:password`) |
//! | `sasl.jaas` (`java.security.auth.login.config`) | | a JAAS file whose `DigestLoginModule` entry gives the SASL user and password, or whose `Krb5LoginModule` asks for GSSAPI |
//! | `sasl.service`, `sasl.host` (`zookeeper.sasl.client.username`, `zookeeper.server.principal`) | `zookeeper`, each server's host | GSSAPI: the server principal `service/host` |
//! | `sasl.jaas.section` (`zookeeper.sasl.clientconfig`) | `Client` | the JAAS section read |
//! | `zookeeper.sasl.client` | `true` | `false`: no SASL, as in Java |
//!
//! `zookeeper.ssl.trustStore.type`/`keyStore.type` may only say `PEM`: a JKS or PKCS#12 store is
//! an error that says to export it as PEM, and so is `zookeeper.ssl.keyStore.password` (an
//! encrypted key). The files are read when the URL is parsed; a handshake failure is logged
//! with the server, the reason and the CA or client certificate file.
//!
//! A user and password authenticate the session with the `digest` scheme; nodes we create
//! (provider nodes and their parents, the chroot) then get the creator-all ACL (only this
//! identity can change them), otherwise anyone-all, as Dubbo's Curator client does. SASL
//! authenticates the session too (both when `sasl=digest-md5` takes the address's user) and
//! does not change the ACLs; a server that refuses it (a wrong password, or SASL required and
//! not given) fails the callers waiting for a session at once, with the reason.
//!
//! # Subscribing
//!
//! [`Registry::subscribe`] returns at once and works in a background task: it watches
//! `/dubbo/{interface}` (persistent recursive watches, ZooKeeper 3.6+) and the config centre,
//! sends a [`Update::Reset`](crate::Update::Reset) with the first list of a session and after a
//! reconnect and [`Update::Add`](crate::Update::Add)/[`Update::Remove`](crate::Update::Remove)
//! of what changed after later lists, the override rules of
//! `/dubbo/{interface}/configurators` and of the `*.configurators` config-centre keys as
//! [`Update::Configurators`](crate::Update::Configurators), and the routing rules
//! (`*.condition-router`, `*.tag-router`, and the legacy `condition://` URLs under
//! `/dubbo/{interface}/routers` unless `legacy-routers=false`) as
//! [`Update::Rule`](crate::Update::Rule). After a
//! reconnect it re-lists; after a session expiry it builds a new session, re-creates the
//! registered providers, re-adds its watches and re-lists. Bad nodes are logged with their path
//! and skipped; the last good rules stay.
//!
//! A read that fails keeps its part to be read again and the last good lists in use; re-lists
//! that keep failing back off (500 ms doubling to 30 s, at once again after a reconnect or a
//! good re-list; a watch event is still read at once, so a part that keeps failing never
//! delays the others) and, from the third in a row, each is logged as a warning naming the
//! nodes and errors.
//!
//! Big fleets: `getChildren` of `/dubbo/{interface}/providers` is one reply holding every
//! child's name (about 580 bytes for a Java Dubbo 3.3 provider URL). ZooKeeper's `jute.maxbuffer`
//! (default 0xfffff bytes) does not limit it on the server (3.8 checks what it reads, not what
//! it sends), and zookeeper-client reads a reply of any length, so no parameter is needed
//! here: 20,000 providers (an 11.8 MB reply) are listed (`integration-tests/benches/big_fleet.rs`).
//! Java clients on the same registry refuse a reply of `jute.maxbuffer` bytes or more
//! ("Packet len N is out of range!", about 1,840 such providers) and reconnect in a loop until
//! their JVM runs with `-Djute.maxbuffer=` a larger value. A bigger list only needs the call
//! `timeout` to cover its transfer.
//!
//! # Registering
//!
//! [`Registrar::register`] creates the ephemeral `/dubbo/{interface}/providers/{encoded URL}`
//! node Java Dubbo writes (parameters in key order, `side=provider`, `dynamic=true`,
//! `timestamp`), with persistent parents, keeps re-creating it on every new session, and
//! removes it on [`Registrar::unregister`] or when the last handle of the registry is dropped.

pub(crate) mod app;
pub(crate) mod jaas;
mod nodes;
mod reader;
mod register_app;
pub(crate) mod sasl;
mod session;
mod subscription;
mod tls;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchman_core::{BoxFuture, Error, Instance, Result, ServiceKey, Url};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use crate::{Registrar, Registry, UpdateReceiver};
use nodes::ProviderFilter;
use session::{CallError, Session, call, ensure_ephemeral};

/// Where Dubbo keeps the config centre, mapping and metadata (whatever the registry `group`).
pub(crate) const DUBBO_ROOT: &str = "/dubbo";
/// Dubbo's default ZooKeeper session timeout.
const DEFAULT_SESSION: Duration = Duration::from_secs(60);
/// Default timeout of one ZooKeeper call.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How subscriptions watch nodes (`watch=` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchMode {
    /// Persistent recursive watches; one-shot watches when the server is older than 3.6.
    Auto,
    /// Persistent recursive watches only.
    Persistent,
    /// One-shot watches re-armed after every read (what a 3.4/3.5 server needs).
    Oneshot,
}

/// Parsed registry address.
pub(crate) struct ZkConfig {
    /// `host:port,host:port` for the client.
    pub(crate) servers: String,
    /// `/chroot`, if any.
    pub(crate) chroot: Option<String>,
    /// `user:password` for digest authentication.
    pub(crate) auth: Option<String>,
    pub(crate) session_timeout: Duration,
    /// Timeout of each call and connect attempt.
    pub(crate) timeout: Duration,
    /// Registry root, `/dubbo` unless `group` says otherwise.
    pub(crate) root: String,
    /// The consumer's application.
    pub(crate) application: Option<String>,
    pub(crate) protocols: Vec<String>,
    pub(crate) provided_by: Vec<String>,
    pub(crate) app_level: bool,
    /// The migration step's values the registry URL gives (`migration.*`).
    pub(crate) migration: crate::migration::MigrationDefaults,
    /// Apply the legacy `/dubbo/{interface}/routers` rules.
    pub(crate) legacy_routers: bool,
    pub(crate) watch: WatchMode,
    /// How application metadata is fetched from a provider's MetadataService
    /// (`metadata-timeout`, `metadata-retry`).
    pub(crate) metadata_fetch: crate::metadata::FetchSettings,
    /// This registry's metadata cache; unset: the process-wide one.
    pub(crate) metadata_cache: std::sync::OnceLock<Arc<crate::metadata::MetadataCache>>,
    /// The address for logs (password masked).
    pub(crate) redacted: String,
    /// TLS to the servers (`secure=true`, `tls.rs`).
    pub(crate) tls: Option<tls::ZkTls>,
    /// SASL authentication of the session (`sasl=digest-md5`, `sasl.rs`).
    pub(crate) sasl: Option<sasl::ZkSasl>,
}

impl fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkConfig")
            .field("address", &self.redacted)
            .field("servers", &self.servers)
            .field("chroot", &self.chroot)
            .field("authenticated", &self.auth.is_some())
            .field("session_timeout", &self.session_timeout)
            .field("timeout", &self.timeout)
            .field("root", &self.root)
            .field("tls", &self.tls)
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// The longest `session` or `timeout` a ZooKeeper URL may give: one day.
const MAX_MS: u64 = 24 * 3600 * 1000;

fn ms_param(url: &Url, key: &str, default: Duration) -> Result<Duration> {
    match url.param(key) {
        None | Some("") => Ok(default),
        // At most a day: a session or call timeout beyond that is a typo, and
        // `18446744073709551615` would overflow the deadlines computed from it.
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 && ms <= MAX_MS => Ok(Duration::from_millis(ms)),
            _ => Err(Error::bad_config(format!(
                "registry {}: {key}={v:?} is not a number of milliseconds from 1 to {MAX_MS}",
                url.redacted()
            ))),
        },
    }
}

fn list_param(url: &Url, key: &str) -> Vec<String> {
    url.param(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl ZkConfig {
    fn from_url(url: &Url) -> Result<Self> {
        let bad = |msg: String| Error::bad_config(format!("registry {}: {msg}", url.redacted()));
        if !matches!(url.protocol(), "zookeeper" | "zk") {
            return Err(bad(format!("{:?} is not zookeeper://", url.protocol())));
        }
        // The URL's host, then `backup` (the comma list of the address, Url::parse_registry).
        let servers = url.servers(2181)?;
        let path = url.path().trim_matches('/');
        let chroot = if path.is_empty() || path == "org.apache.dubbo.registry.RegistryService" {
            None
        } else {
            if path
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
            {
                return Err(bad(format!("chroot /{path} is not a valid ZooKeeper path")));
            }
            Some(format!("/{path}"))
        };
        let auth = match (url.username(), url.password()) {
            (None, _) => None,
            (Some(u), p) if !u.is_empty() => Some(format!("{u}:{}", p.unwrap_or(""))),
            _ => return Err(bad("empty user name".into())),
        };
        let group = url.param("group").unwrap_or("dubbo").trim_matches('/');
        if group.is_empty() || group.contains('/') {
            return Err(bad(format!("group {group:?} is not a single path segment")));
        }
        let app_level = match url.param("app-level") {
            None | Some("true") => true,
            Some("false") => false,
            Some(v) => return Err(bad(format!("app-level={v:?} is neither true nor false"))),
        };
        let legacy_routers = match url.param("legacy-routers") {
            None | Some("true") => true,
            Some("false") => false,
            Some(v) => {
                return Err(bad(format!(
                    "legacy-routers={v:?} is neither true nor false"
                )));
            }
        };
        let watch = match url.param("watch") {
            None | Some("auto") => WatchMode::Auto,
            Some("persistent") => WatchMode::Persistent,
            Some("oneshot") => WatchMode::Oneshot,
            Some(v) => {
                return Err(bad(format!(
                    "watch={v:?} is not auto, persistent or oneshot"
                )));
            }
        };
        let mut redacted_url = url.clone();
        if url.password().is_some() {
            redacted_url.set_credentials(url.username(), Some("***"));
        }
        let tls = tls::ZkTls::from_url(url, &servers).map_err(bad)?;
        let sasl = sasl::ZkSasl::from_url(url).map_err(bad)?;
        if let (Some(sasl), Some(_)) = (&sasl, &tls) {
            sasl.check_relayed(servers.len()).map_err(bad)?;
        }
        Ok(ZkConfig {
            servers: servers.join(","),
            chroot,
            auth,
            session_timeout: ms_param(url, "session", DEFAULT_SESSION)?,
            timeout: ms_param(url, "timeout", DEFAULT_TIMEOUT)?,
            root: format!("/{group}"),
            application: url
                .param("application")
                .filter(|a| !a.is_empty())
                .map(str::to_string),
            protocols: list_param(url, "protocol"),
            provided_by: list_param(url, "provided-by"),
            app_level,
            migration: crate::migration::MigrationDefaults::from_params(|k| url.param(k))
                .map_err(bad)?,
            legacy_routers,
            watch,
            metadata_fetch: app::fetch_settings(url)?,
            metadata_cache: std::sync::OnceLock::new(),
            redacted: redacted_url.redacted(),
            tls,
            sasl,
        })
    }
}

/// A ZooKeeper registry: subscribe to providers, register providers. Cheap to clone (clones
/// share one session). The session starts on first use and ends when the last handle and the
/// last subscription are gone.
#[derive(Debug, Clone)]
pub struct ZookeeperRegistry {
    inner: Arc<Handle>,
}

#[derive(Debug)]
struct Handle {
    session: Arc<Session>,
    /// Registered providers: (service, address) → node path.
    mine: Mutex<BTreeMap<(String, String), String>>,
    /// Application-level registrations (`register-mode`, `register_app.rs`).
    app: register_app::ZkAppRegistrar,
}

impl ZookeeperRegistry {
    /// Validates the registry URL; connects lazily, in the background, on first use.
    pub fn from_url(url: &Url) -> Result<Self> {
        let config = ZkConfig::from_url(url)?;
        let session = Arc::new(Session::new(config));
        let app = register_app::ZkAppRegistrar::from_url(url, session.clone())?;
        Ok(ZookeeperRegistry {
            inner: Arc::new(Handle {
                session,
                app,
                mine: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// Like [`ZookeeperRegistry::from_url`] for an address that lists servers with commas
    /// (`zookeeper://h1:2181,h2:2181/chroot?...`, the Java connect-string form), which is not a
    /// single Dubbo URL.
    pub fn from_address(address: &str) -> Result<Self> {
        let url =
            Url::parse_registry(address.trim()).map_err(|e| Error::bad_config(e.to_string()))?;
        Self::from_url(&url)
    }

    /// Uses `cache` for the `MetadataInfo` of application instances with local metadata,
    /// instead of the process-wide cache ([`crate::metadata::install_fetcher`]). Takes effect
    /// if called before the first subscription; later calls are ignored.
    pub fn metadata_cache(self, cache: Arc<crate::metadata::MetadataCache>) -> Self {
        let _ = self.config().metadata_cache.set(cache);
        self
    }

    fn config(&self) -> &ZkConfig {
        &self.inner.session.config
    }

    fn provider_path(&self, instance: &Instance) -> Result<String> {
        let iface = instance.service().interface.as_ref();
        if iface.is_empty() || iface == "*" || iface.contains('/') {
            return Err(Error::bad_config(format!(
                "cannot register {}: its service interface {iface:?} cannot name a ZooKeeper node",
                instance.address()
            )));
        }
        let url = nodes::registration_url(instance);
        Ok(format!(
            "{}/{iface}/providers/{}",
            self.config().root,
            url.to_encoded()
        ))
    }
}

impl ZookeeperRegistry {
    fn consumer_path(&self, service: &ServiceKey, consumer: &Url) -> Result<String> {
        let iface = service.interface.as_ref();
        if iface.is_empty() || iface == "*" || iface.contains('/') {
            return Err(Error::bad_config(format!(
                "cannot register a consumer of {iface:?}: the interface cannot name a ZooKeeper node"
            )));
        }
        Ok(format!(
            "{}/{iface}/consumers/{}",
            self.config().root,
            consumer.to_encoded()
        ))
    }
}

impl Registry for ZookeeperRegistry {
    fn register_consumer<'a>(
        &'a self,
        service: &'a ServiceKey,
        consumer: &'a Url,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let path = self.consumer_path(service, consumer)?;
            let session = &self.inner.session;
            session.ensure_started();
            // Kept first: every new session re-creates it (the first one included).
            session.keep(&path, consumer.host().as_bytes());
            let cfg = &session.config;
            let created = match session.client(cfg.timeout).await {
                Ok(conn) => {
                    ensure_ephemeral(&conn.client, cfg, &path, consumer.host().as_bytes()).await
                }
                Err(e) => Err(e),
            };
            match created {
                Ok(()) => {
                    info!(registry = %cfg.redacted, service = %service, "consumer registered");
                    Ok(())
                }
                Err(e) => {
                    // Not fatal for the consumer: the node follows with the next session, or
                    // with a retry here while it is still wanted.
                    let shown = format!(
                        "registry {}: consumer node not created yet ({e})",
                        cfg.redacted
                    );
                    create_in_background(
                        session.clone(),
                        path,
                        consumer.host().as_bytes().to_vec(),
                        "consumer",
                    );
                    Err(Error::transport(shown))
                }
            }
        })
    }

    fn unregister_consumer<'a>(
        &'a self,
        service: &'a ServiceKey,
        consumer: &'a Url,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let path = self.consumer_path(service, consumer)?;
            let session = &self.inner.session;
            if session.forget(&path) && !delete_node(session, &path, "consumer node").await {
                return Err(Error::transport(format!(
                    "registry {}: could not delete {path} now; it goes when the session ends",
                    session.config.redacted
                )));
            }
            Ok(())
        })
    }

    fn service_definition<'a>(
        &'a self,
        service: &'a ServiceKey,
        application: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::metadata::ServiceDefinition>>> {
        Box::pin(async move {
            let parts = [
                service.interface.as_ref(),
                service.version.as_ref(),
                service.group.as_ref(),
                application,
            ];
            // Names a node path cannot hold (or that would climb out of it) have no node.
            if service.interface.is_empty()
                || application.is_empty()
                || parts
                    .iter()
                    .any(|p| p.contains('/') || *p == "." || *p == "..")
            {
                return Ok(None);
            }
            let cfg = self.config();
            let path = crate::metadata::zookeeper_path(&cfg.root, service, application);
            let failed = |e: CallError| {
                Error::transport(format!("registry {}: reading {path}: {e}", cfg.redacted))
            };
            let conn = self
                .inner
                .session
                .client(cfg.timeout)
                .await
                .map_err(failed)?;
            let mut reader = reader::Reader {
                client: &conn.client,
                timeout: cfg.timeout,
                arms: None,
            };
            match reader.data(&path).await.map_err(failed)? {
                None => Ok(None),
                Some(bytes) => crate::metadata::ServiceDefinition::parse(
                    &bytes,
                    &format!("{} {path}", cfg.redacted),
                )
                .map(Some)
                .map_err(Error::bad_config),
            }
        })
    }

    fn subscribe<'a>(&'a self, service: &'a ServiceKey) -> BoxFuture<'a, Result<UpdateReceiver>> {
        Box::pin(async move {
            let iface = service.interface.as_ref();
            if iface.is_empty() || iface.contains('/') {
                return Err(Error::bad_config(format!(
                    "registry {}: cannot subscribe to {service:?}: the interface must be a non-empty name without '/'",
                    self.config().redacted
                )));
            }
            let (tx, rx) = mpsc::channel(64);
            let session = self.inner.session.clone();
            session.ensure_started();
            subscription::spawn(
                session,
                ProviderFilter {
                    key: service.clone(),
                    protocols: self.config().protocols.clone(),
                },
                tx,
            );
            Ok(rx)
        })
    }
}

impl Registrar for ZookeeperRegistry {
    fn register<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            // register-mode=instance/all: the application instance first (register_app.rs).
            let app = match self.inner.app.mode().instance() {
                true => self.inner.app.register(instance).await,
                false => Ok(()),
            };
            if !self.inner.app.mode().interface() {
                return app;
            }
            let path = self.provider_path(instance)?;
            let key = (
                instance.service().to_string(),
                instance.address().to_string(),
            );
            let previous = {
                let mut mine = self.inner.mine.lock().unwrap_or_else(|p| p.into_inner());
                mine.insert(key, path.clone())
            };
            let session = &self.inner.session;
            if let Some(old) = previous.filter(|old| *old != path) {
                session.forget(&old);
                delete_node(session, &old, "provider node").await;
            }
            // Kept first: whatever happens below, every new session re-creates it.
            session.keep(&path, instance.host().as_bytes());
            let cfg = &session.config;
            let deadline = tokio::time::Instant::now() + cfg.timeout * 2;
            loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let attempt = match session.client(left).await {
                    Ok(conn) => {
                        ensure_ephemeral(&conn.client, cfg, &path, instance.host().as_bytes()).await
                    }
                    Err(e) => Err(e),
                };
                match attempt {
                    Ok(()) => {
                        info!(registry = %cfg.redacted, service = %instance.service(), address = instance.address(), "provider registered");
                        return app;
                    }
                    Err(CallError::Refused(why)) => {
                        return Err(Error::bad_config(format!(
                            "registry {}: cannot register {} of {}: {why}",
                            cfg.redacted,
                            instance.address(),
                            instance.service()
                        )));
                    }
                    Err(CallError::Zk(
                        e @ (zk::Error::NoAuth | zk::Error::InvalidAcl | zk::Error::AuthFailed),
                    )) => {
                        return Err(Error::bad_config(format!(
                            "registry {}: cannot create {path}: {e}",
                            cfg.redacted
                        )));
                    }
                    Err(e) if tokio::time::Instant::now() >= deadline => {
                        // Keep trying in the background until created or unregistered (a new
                        // session would re-create it too, but the session may survive).
                        create_in_background(
                            session.clone(),
                            path.clone(),
                            instance.host().as_bytes().to_vec(),
                            "provider",
                        );
                        return Err(Error::transport(format!(
                            "registry {}: provider {} not registered yet ({e}); it will be created when ZooKeeper answers",
                            cfg.redacted,
                            instance.address()
                        )));
                    }
                    Err(e) => {
                        debug!(path, "registration attempt failed, retrying: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        })
    }

    fn unregister<'a>(&'a self, instance: &'a Instance) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let key = (
                instance.service().to_string(),
                instance.address().to_string(),
            );
            let path = self
                .inner
                .mine
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            let app = self.inner.app.unregister(instance).await;
            let Some(path) = path else {
                return app;
            };
            let session = &self.inner.session;
            session.forget(&path);
            if delete_node(session, &path, "provider node").await {
                info!(registry = %session.config.redacted, service = %instance.service(), address = instance.address(), "provider unregistered");
                app
            } else {
                Err(Error::transport(format!(
                    "registry {}: could not delete {path} now; it goes when the session ends",
                    session.config.redacted
                )))
            }
        })
    }
}

/// Keeps trying to create the ephemeral node at `path` (a `what` registration) every 500 ms
/// until it exists or is no longer wanted (unregistered); a new session re-creates it too, but
/// the session may survive the failure.
fn create_in_background(session: Arc<Session>, path: String, data: Vec<u8>, what: &'static str) {
    tokio::spawn(async move {
        while session.is_kept(&path) {
            let t = session.config.timeout;
            if let Ok(conn) = session.client(t).await
                && ensure_ephemeral(&conn.client, &session.config, &path, &data)
                    .await
                    .is_ok()
            {
                info!(path, "{what} registered after a retry");
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
}

/// Deletes a node we created; whether it is gone.
/// Deletes the node at `path` (one already gone counts as deleted); `what` names it in the
/// warning when it cannot be deleted now.
pub(super) async fn delete_node(session: &Session, path: &str, what: &str) -> bool {
    let t = session.config.timeout;
    let Ok(conn) = session.client(t).await else {
        return false;
    };
    match call(t, conn.client.delete(path, None)).await {
        Ok(()) | Err(CallError::Zk(zk::Error::NoNode)) => true,
        Err(e) => {
            warn!(path, "cannot delete {what}: {e}");
            false
        }
    }
}

/// For an owner being dropped: the session stops re-creating `paths` and, as it may outlive
/// the owner (subscriptions share it), deletes them now, in the background.
pub(super) fn forget_and_delete(session: &Arc<Session>, paths: Vec<String>, what: &'static str) {
    if paths.is_empty() {
        return;
    }
    for p in &paths {
        session.forget(p);
    }
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let session = session.clone();
        rt.spawn(async move {
            for p in paths {
                delete_node(&session, &p, what).await;
            }
        });
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let paths: Vec<String> =
            std::mem::take(&mut *self.mine.lock().unwrap_or_else(|p| p.into_inner()))
                .into_values()
                .collect();
        forget_and_delete(&self.session, paths, "provider node");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(s: &str) -> Result<ZkConfig> {
        ZkConfig::from_url(&Url::parse(s).unwrap())
    }

    #[test]
    fn addresses_dubbo_writes() {
        let c = cfg("zookeeper://u:p@10.0.0.1:2181/apps/x?backup=10.0.0.2:2182,10.0.0.3&session=4000&timeout=700&protocol=tri,http&application=shop").unwrap();
        assert_eq!(c.servers, "10.0.0.1:2181,10.0.0.2:2182,10.0.0.3:2181");
        assert_eq!(c.chroot.as_deref(), Some("/apps/x"));
        assert_eq!(c.auth.as_deref(), Some("u:p"));
        assert_eq!(c.session_timeout, Duration::from_millis(4000));
        assert_eq!(c.timeout, Duration::from_millis(700));
        assert_eq!(c.protocols, vec!["tri", "http"]);
        assert_eq!(c.application.as_deref(), Some("shop"));
        assert_eq!(c.root, "/dubbo");
        assert!(!format!("{c:?}").contains(":p@"), "password never in Debug");
        assert!(!c.redacted.contains(":p@"));
        let d =
            cfg("zk://127.0.0.1/org.apache.dubbo.registry.RegistryService?group=other").unwrap();
        assert_eq!(
            (d.chroot, d.root.as_str(), d.servers.as_str()),
            (None, "/other", "127.0.0.1:2181")
        );
    }

    #[test]
    fn bad_addresses_are_rejected_with_reasons() {
        for (s, want) in [
            ("zookeeper://h:1?session=abc", "session"),
            ("zookeeper://h:1?timeout=0", "timeout"),
            ("zookeeper://h:1?timeout=18446744073709551615", "timeout"),
            ("zookeeper://h:1?session=86400001", "session"),
            ("zookeeper://h:1/a//b", "chroot"),
            ("zookeeper://h:1?backup=x/y", "backup"),
            ("zookeeper://h:1?app-level=maybe", "app-level"),
            (
                "zookeeper://h:1?migration.step=FORCE_APP",
                "migration.step=\"FORCE_APP\"",
            ),
            ("zookeeper://h:1?legacy-routers=no", "legacy-routers"),
            ("zookeeper://h:1?watch=sometimes", "watch"),
            ("nacos://h:1", "zookeeper"),
        ] {
            let e = cfg(s).unwrap_err();
            assert!(e.to_string().contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn comma_connect_string_form() {
        let r =
            ZookeeperRegistry::from_address("zookeeper://a:1,b:2,c:3/root?session=5000").unwrap();
        assert_eq!(r.config().servers, "a:1,b:2,c:3");
        assert_eq!(r.config().chroot.as_deref(), Some("/root"));
        let r = ZookeeperRegistry::from_address("zk://a,b:2?backup=c").unwrap();
        assert_eq!(r.config().servers, "a:2181,b:2,c:2181");
        for (bad, want) in [
            ("zookeeper://a:1,,b:2", "empty server"),
            ("zookeeper://a:1,b:x/root", "port"),
            ("zookeeper://a:1?backup=b:1,", "empty server"),
        ] {
            let e = ZookeeperRegistry::from_address(bad).unwrap_err();
            assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
            assert!(e.to_string().contains(want), "{bad}: {e}");
        }
    }
}
