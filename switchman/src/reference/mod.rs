//! [`Reference`]: Dubbo's `ReferenceConfig` in Rust.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use switchman_cluster::dubbo::ClientTls;
use switchman_cluster::{Balancer, ClusterConfig, ClusterInvoker, ProtocolInvoker, Strategy};
use switchman_core::{Error, Invocation, Invoker, MakeEndpoint, Result, ServiceKey};
use switchman_discovery::{DirectoryConfig, Registry, RegistryDirectory, registry_from_url};
use switchman_loadbalance::LoadBalance;
use tracing::warn;

mod consumer;

use consumer::{ConsumerRegistration, consumer_info, registers_consumers, registration_url};

/// How long [`ReferenceBuilder::connect`] waits for the first providers by default (Dubbo's
/// `check=true` waits for the registry's first answer; 3 s bounds that here).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);

/// How long a failed [`ReferenceBuilder::connect`] looks at the registry for other groups and
/// versions of the interface, to say what it found instead.
const PROBE: Duration = Duration::from_millis(800);

/// A consumer of one service: the directory of its providers, the cluster invoker over them
/// and the protocol invokers (dubbo://, Triple, HTTP), as Dubbo's `ReferenceConfig.get()`
/// gives you. Cheap to clone; clones share the connections, statistics and retry budget. A
/// `tower::Service<Invocation>`.
///
/// ```no_run
/// # async fn demo() -> switchman::Result<()> {
/// use serde_json::json;
///
/// let demo = switchman::Reference::new("org.example.DemoService")
///     .registry("nacos://127.0.0.1:8848")
///     .connect()
///     .await?;
/// // dubbo:// providers: with Java parameter types (typed), or without (generic).
/// let sum = demo.call_typed("add", &["int", "int"], json!([2, 3])).await?;
/// let hello = demo.call("sayHello", json!(["world"])).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Reference {
    cluster: ClusterInvoker,
    directory: Arc<RegistryDirectory>,
    registry: String,
    /// The providers' published definitions, read when a call's signature is not theirs.
    definitions: Arc<crate::definitions::Definitions>,
    /// Registered as a consumer while any clone lives ([`ReferenceBuilder::register_consumer`]).
    _consumer: Option<Arc<ConsumerRegistration>>,
    /// Listed on an admin endpoint while any clone lives ([`ReferenceBuilder::admin`]).
    #[cfg(feature = "admin")]
    admin: Option<Arc<crate::admin::Listing>>,
}

impl fmt::Debug for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reference")
            .field("registry", &self.registry)
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl Reference {
    // The builder is the shape Dubbo users know: `Reference::new(iface)...connect().await`.
    #[allow(clippy::new_ret_no_self)]
    /// Starts a reference to `interface` (a Dubbo interface, or a plain Nacos service name).
    pub fn new(interface: impl Into<String>) -> ReferenceBuilder {
        ReferenceBuilder {
            interface: interface.into(),
            registry: None,
            group: String::new(),
            version: String::new(),
            config: ClusterConfig::default(),
            check: true,
            wait: DEFAULT_WAIT,
            invoker: None,
            maker: None,
            balancer: None,
            routers: Vec::new(),
            empty_grace: None,
            register_consumer: true,
            consumer_params: Vec::new(),
            tls: Tls::default(),
            #[cfg(feature = "admin")]
            admin: None,
        }
    }

    /// Starts a reference to the Java interface `T` stands for, with its version and group
    /// set: `Reference::new_for::<dyn UserService>()` for a trait under
    /// `#[switchman::interface("org.example.UserService", version = "1.0.0")]`
    /// (which implements [`JavaInterface`](crate::JavaInterface) for `dyn UserService`).
    /// Add the registry and what else the reference needs, then connect it, typed with
    /// `<dyn UserService>::connect(builder)` or as a plain reference with
    /// [`ReferenceBuilder::connect`].
    ///
    /// ```no_run
    /// # #[derive(Debug, serde::Deserialize)]
    /// # struct User { id: i64 }
    /// use switchman::Reference;
    ///
    /// #[switchman::interface("org.example.UserService", version = "1.0.0")]
    /// trait UserService {
    ///     async fn get_user(&self, id: i64) -> switchman::Result<User>;
    /// }
    ///
    /// # async fn demo() -> switchman::Result<()> {
    /// let builder = Reference::new_for::<dyn UserService>().registry("zookeeper://127.0.0.1:2181");
    /// let users = <dyn UserService>::connect(builder).await?; // a UserServiceClient
    /// let user = users.get_user(7).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// `connect` is an inherent function of `dyn UserService`. Rust resolves the shorter
    /// `UserService::connect(..)` to it only in the 2015 and 2018 editions (a bare trait as a
    /// type); since 2021 that is "expected a type, found a trait", hence `<dyn UserService>`.
    /// In a 2018-edition crate the short form compiles as is:
    ///
    /// ```no_run,edition2018
    /// # #![allow(bare_trait_objects)]
    /// # #[derive(Debug, serde::Deserialize)]
    /// # struct User { id: i64 }
    /// use switchman::Reference;
    ///
    /// #[switchman::interface("org.example.UserService", version = "1.0.0")]
    /// trait UserService {
    ///     async fn get_user(&self, id: i64) -> switchman::Result<User>;
    /// }
    ///
    /// # async fn demo() -> switchman::Result<()> {
    /// let users = UserService::connect(Reference::new_for::<dyn UserService>().registry("zookeeper://127.0.0.1:2181")).await?;
    /// # let _ = users.get_user(7).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// ```compile_fail,E0782
    /// # #[derive(Debug, serde::Deserialize)]
    /// # struct User { id: i64 }
    /// # use switchman::Reference;
    /// # #[switchman::interface("org.example.UserService", version = "1.0.0")]
    /// # trait UserService {
    /// #     async fn get_user(&self, id: i64) -> switchman::Result<User>;
    /// # }
    /// # async fn demo() -> switchman::Result<()> {
    /// // Edition 2021 and later: write `<dyn UserService>::connect`.
    /// let users = UserService::connect(Reference::new_for::<dyn UserService>()).await?;
    /// # Ok(()) }
    /// ```
    pub fn new_for<T: ?Sized + crate::JavaInterface>() -> ReferenceBuilder {
        Reference::new(T::INTERFACE)
            .version(T::VERSION)
            .group(T::GROUP)
    }

    /// Calls `method` with `args` (a JSON array, or one value that becomes the only
    /// argument). dubbo:// providers are called generically (the provider finds the method by
    /// name); use [`Reference::call_typed`] for overloaded methods.
    pub async fn call(&self, method: &str, args: Value) -> Result<Value> {
        self.invoke(&Invocation::new(method).with_args(arguments(args)))
            .await
    }

    /// Calls `method` with its Java parameter types (`int`, `java.lang.String`,
    /// `com.foo.User`, ...): the method is selected by signature and each argument converted
    /// for its type.
    pub async fn call_typed(&self, method: &str, types: &[&str], args: Value) -> Result<Value> {
        self.invoke(
            &Invocation::new(method)
                .with_args(arguments(args))
                .with_types(types.iter().copied()),
        )
        .await
    }

    /// Calls with a full [`Invocation`] (attachments, per-call `timeout`/`retries`, ...).
    ///
    /// A typed dubbo:// call whose signature the provider does not have fails before any
    /// retry with an error that names the signature sent and, when the provider's application
    /// published its service definition in the registry's metadata report (Java Dubbo 3's
    /// default, on ZooKeeper and Nacos), the signatures it has: `signature mismatch: the
    /// provider 10.0.0.1:20880 has no add(long,long); it has add(int,int) ...`.
    pub async fn invoke(&self, invocation: &Invocation) -> Result<Value> {
        match self.cluster.invoke(invocation).await {
            Err(e) if crate::definitions::Definitions::explains(&e) => {
                // Boxed: the rare path stays out of every call's future.
                let definitions = self.definitions.clone();
                Err(Box::pin(async move { definitions.explain(e).await }).await)
            }
            done => done,
        }
    }

    /// The cluster invoker (settings, budget and failback counters).
    pub fn cluster(&self) -> &ClusterInvoker {
        &self.cluster
    }

    /// The directory of the service's providers (its current snapshot: `directory().load()`).
    pub fn directory(&self) -> &Arc<RegistryDirectory> {
        &self.directory
    }

    /// The address of the admin endpoint this reference is listed on
    /// ([`ReferenceBuilder::admin`]; the bound port when it asked for port 0).
    #[cfg(feature = "admin")]
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().map(|l| l.admin().addr())
    }
}

fn arguments(args: Value) -> Vec<Value> {
    match args {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        one => vec![one],
    }
}

impl tower_service::Service<Invocation> for Reference {
    type Response = Value;
    type Error = Error;
    type Future = crate::ReferenceFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        tower_service::Service::<Invocation>::poll_ready(&mut self.cluster, cx)
    }

    fn call(&mut self, invocation: Invocation) -> Self::Future {
        crate::ReferenceFuture::new(
            tower_service::Service::call(&mut self.cluster, invocation),
            self.definitions.clone(),
        )
    }
}

/// Builds a [`Reference`]; [`ReferenceBuilder::connect`] subscribes and waits.
#[must_use = "a reference does nothing until connect() is awaited"]
pub struct ReferenceBuilder {
    interface: String,
    registry: Option<String>,
    group: String,
    version: String,
    config: ClusterConfig,
    check: bool,
    wait: Duration,
    invoker: Option<Arc<dyn Invoker>>,
    maker: Option<Arc<dyn MakeEndpoint>>,
    balancer: Option<Result<Balancer>>,
    routers: Vec<Arc<dyn switchman_router::Router>>,
    empty_grace: Option<Duration>,
    register_consumer: bool,
    consumer_params: Vec<(String, String)>,
    tls: Tls,
    #[cfg(feature = "admin")]
    admin: Option<std::net::SocketAddr>,
}

/// The TLS settings given to a [`ReferenceBuilder`], read at `connect`.
#[derive(Default)]
struct Tls {
    settings: Option<ClientTls>,
    ca: Option<PathBuf>,
    identity: Option<(PathBuf, PathBuf)>,
    /// Set by `tls_every_provider` (else the `ClientTls` default, every provider).
    every_provider: Option<bool>,
}

impl Tls {
    /// The settings, files read now; `None` when none were given.
    fn build(&self, interface: &str) -> Result<Option<ClientTls>> {
        let tls = match (&self.settings, &self.ca, &self.identity) {
            (Some(t), None, None) => t.clone(),
            (Some(_), _, _) => {
                return Err(Error::bad_config(format!(
                    "reference to {interface}: give TLS either as ClientTls (.tls) or as files \
                     (.tls_ca, .tls_client_cert), not both"
                )));
            }
            (None, Some(ca), identity) => ClientTls::from_files(
                ca,
                identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
            )
            .map_err(|e| Error::bad_config(format!("reference to {interface}: {}", e.message())))?,
            (None, None, Some(_)) => {
                return Err(Error::bad_config(format!(
                    "reference to {interface}: a TLS client certificate without the CA that \
                     signs the providers' certificates (add .tls_ca(PATH))"
                )));
            }
            (None, None, None) => return Ok(None),
        };
        Ok(Some(match self.every_provider {
            Some(every) => tls.every_provider(every),
            None => tls,
        }))
    }
}

impl fmt::Debug for ReferenceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReferenceBuilder")
            .field("interface", &self.interface)
            .field("registry", &self.registry)
            .field("group", &self.group)
            .field("version", &self.version)
            .field("check", &self.check)
            .field("wait", &self.wait)
            .finish()
    }
}

impl ReferenceBuilder {
    /// The registry, as the CLI takes it: `zookeeper://h:p`, `nacos://h:p?namespace=..`, or
    /// a static providers file. Required.
    pub fn registry(mut self, url: impl Into<String>) -> Self {
        self.registry = Some(url.into());
        self
    }

    /// The Dubbo group (`*` or a comma list: any of them).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// The Dubbo version.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The fault-tolerance strategy (Dubbo's `cluster`, default failover).
    pub fn cluster(mut self, strategy: Strategy) -> Self {
        self.config = self.config.strategy(strategy);
        self
    }

    /// Retries after the first attempt (Dubbo's `retries`, default 2).
    pub fn retries(mut self, retries: u32) -> Self {
        self.config = self.config.retries(retries);
        self
    }

    /// The per-attempt timeout (Dubbo's `timeout`, default 1000 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.timeout(timeout);
        self
    }

    /// Every cluster setting at once (per-method settings, outlier ejection, mock, ...);
    /// replaces what `cluster`, `retries` and `timeout` set before it.
    pub fn config(mut self, config: ClusterConfig) -> Self {
        self.config = config;
        self
    }

    /// Whether [`ReferenceBuilder::connect`] waits for providers (Dubbo's `check`, default
    /// true). With `false` it returns at once and calls fail with
    /// [`ErrorKind::NoProvider`](crate::ErrorKind::NoProvider) until providers appear.
    pub fn check(mut self, check: bool) -> Self {
        self.check = check;
        self
    }

    /// How long `connect` waits for the first providers (default [`DEFAULT_WAIT`]).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Once the registry has answered with no provider, how much longer `connect` waits for
    /// one (default: the rest of `wait`). `Duration::ZERO` fails at once, as a command-line
    /// call does: the registry said the service is not there.
    pub fn empty_grace(mut self, grace: Duration) -> Self {
        self.empty_grace = Some(grace);
        self
    }

    /// The load balancer by Dubbo's name (`random`, the default, `roundrobin`,
    /// `leastactive`, `shortestresponse`, `consistenthash`, `p2c`); an unknown name fails
    /// `connect` with [`ErrorKind::BadConfig`](crate::ErrorKind::BadConfig). Dubbo's
    /// reference-level `loadbalance`: the service layer of the settings (it replaces one set
    /// there by [`ReferenceBuilder::config`]), so it beats a provider's registered
    /// `loadbalance` but not a provider's `{method}.loadbalance` or a method setting.
    pub fn loadbalance(mut self, name: &str) -> Self {
        self.balancer = Some(name.parse::<Balancer>());
        self
    }

    /// Your own load balancer (see [`LoadBalance`]), at the same level as
    /// [`ReferenceBuilder::loadbalance`].
    pub fn balancer(mut self, balancer: impl LoadBalance + 'static) -> Self {
        let balancer: Arc<dyn LoadBalance> = Arc::new(balancer);
        self.balancer = Some(Ok(Balancer::Custom(balancer)));
        self
    }

    /// Adds a router of your own, run after the routing rules the registry holds (and after
    /// the routers added before it); a router of a name already added takes its place.
    /// It is prepared once per snapshot of the providers and only chooses per call (see
    /// [`Router`](switchman_router::Router)).
    pub fn router(mut self, router: impl switchman_router::Router + 'static) -> Self {
        let router: Arc<dyn switchman_router::Router> = Arc::new(router);
        match self.routers.iter_mut().find(|r| r.name() == router.name()) {
            Some(slot) => *slot = router,
            None => self.routers.push(router),
        }
        self
    }

    /// One shared transport for every provider, called with the instance on each attempt
    /// (instead of a client per endpoint; see [`ReferenceBuilder::maker`]).
    pub fn invoker(mut self, invoker: impl Invoker + 'static) -> Self {
        self.invoker = Some(Arc::new(invoker));
        self
    }

    /// Makes each provider endpoint's own client when it appears (default: a
    /// [`ProtocolInvoker`]'s, for dubbo://, Triple and HTTP), kept while the endpoint stays and
    /// dropped (drained) after it leaves; wrap it per endpoint with
    /// [`switchman_cluster::LayeredMaker`] and tower layers. Ignored with
    /// [`ReferenceBuilder::invoker`].
    pub fn maker(mut self, maker: impl MakeEndpoint + 'static) -> Self {
        self.maker = Some(Arc::new(maker));
        self
    }

    /// Whether the reference registers itself as a consumer where the registry shows them, as a
    /// Java Dubbo consumer does (default `true`; ZooKeeper: the ephemeral
    /// `/dubbo/{interface}/consumers/{URL}` node dubbo-admin lists, removed when the last clone
    /// of the reference is dropped). `register-consumer=false` (or Dubbo's `register=false`) on
    /// the registry URL turns it off too.
    pub fn register_consumer(mut self, register: bool) -> Self {
        self.register_consumer = register;
        self
    }

    /// A parameter of this consumer (`region`, `zone`, ...), as routing rules read the
    /// consumer's URL: `consumer.region` in condition rules, the consumer's value in
    /// affinity rules (`affinityAware.key: region`).
    pub fn consumer_param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.consumer_params.push((key.into(), value.into()));
        self
    }

    /// TLS to the dubbo:// and Triple providers: every one is called over TLS (as a Java
    /// consumer with a client `SslConfig` calls them), or with
    /// [`ReferenceBuilder::tls_every_provider`]`(false)` only those whose URL says
    /// `ssl-enabled=true` (a Java provider with `<dubbo:protocol ssl-enabled="true">` and an
    /// `SslConfig`), the others in cleartext. Without TLS settings, calls to a provider that
    /// says `ssl-enabled=true` fail at once with a [`ErrorKind::BadConfig`](crate::ErrorKind::BadConfig)
    /// error naming it. For a transport of your own ([`ReferenceBuilder::invoker`]), set TLS on
    /// it too ([`ProtocolInvoker::tls`]): these settings then serve only the fetches below.
    ///
    /// Application-level discovery fetches each provider's `MetadataInfo` from its
    /// MetadataService with the same settings and the same rule (a Java 3.3 provider's
    /// instance does not say whether it serves TLS: with `tls_every_provider(false)` a fetch
    /// refused in cleartext is tried over TLS), through a metadata cache shared by the
    /// references with the same settings (`switchman_cluster::metadata_service::cache_with_tls`).
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls.settings = Some(tls);
        self
    }

    /// TLS trusting the CA certificates of the PEM file at `path` (Dubbo's
    /// `dubbo.ssl.client-trust-cert-collection-path`); read at `connect`, where an unreadable
    /// file fails with an error naming it. See [`ReferenceBuilder::tls`].
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca = Some(path.into());
        self
    }

    /// The client certificate chain and unencrypted private key (PEM files) presented to
    /// providers that require one (mTLS: Dubbo's `client-key-cert-chain-path` and
    /// `client-private-key-path`). Needs [`ReferenceBuilder::tls_ca`].
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.identity = Some((cert.into(), key.into()));
        self
    }

    /// Whether every dubbo:// and Triple provider is called over TLS (default `true`, as a
    /// Java consumer with a client `SslConfig` does: registry data cannot downgrade a link to
    /// cleartext). `false`: only those that say `ssl-enabled=true`, the others in cleartext,
    /// for a fleet moving to TLS (a registry writer can then turn a provider's TLS off).
    pub fn tls_every_provider(mut self, every: bool) -> Self {
        self.tls.every_provider = Some(every);
        self
    }

    /// Lists the reference on the process's admin endpoint at `addr` (feature `admin`; see
    /// [`crate::admin`]), bound by `connect` unless this process serves one there already
    /// (port 0: a new one on a free port, [`Reference::admin_addr`]). `addr` is bound as given:
    /// a loopback address (`127.0.0.1:22222`) unless the endpoint must be reachable from other
    /// hosts. The attempt histogram is labelled per instance (`server_address`, `server_port`)
    /// so that the endpoint's scrape gives each instance's latency.
    #[cfg(feature = "admin")]
    pub fn admin(mut self, addr: std::net::SocketAddr) -> Self {
        self.admin = Some(addr);
        self
    }

    /// Subscribes to the registry and, with `check` (the default), waits up to `wait` for the
    /// first non-empty provider list. Fails with [`ErrorKind::NoProvider`](crate::ErrorKind::NoProvider) naming the
    /// registry, what was read there and the groups and versions of the interface that do
    /// exist; with [`ErrorKind::BadConfig`](crate::ErrorKind::BadConfig) for a registry URL that does not parse.
    pub async fn connect(mut self) -> Result<Reference> {
        let Some(registry_url) = self.registry.clone() else {
            return Err(Error::bad_config(format!(
                "reference to {}: no registry (call .registry(\"zookeeper://host:port\"))",
                self.interface
            )));
        };
        let key = ServiceKey::with(&self.interface, &self.group, &self.version);
        let tls = self.tls.build(&self.interface)?;
        let mut consumer = consumer_info(&registry_url, &key).await;
        for (k, v) in &self.consumer_params {
            consumer.url.set_param(k, v);
        }
        let consumer_url = consumer.url.clone();
        let mut dir_config = DirectoryConfig::new(key.clone()).consumer(consumer);
        if !self.routers.is_empty() {
            let chain = self
                .routers
                .drain(..)
                .fold(switchman_router::RouterChain::new(), |chain, r| {
                    chain.with_router(r)
                });
            dir_config = dir_config.router(chain);
        }
        if let Some(balancer) = self.balancer.take() {
            let balancer = balancer?;
            // The directory builds this balancer's tables with every snapshot; the settings
            // name it so that it ranks as the consumer's choice.
            dir_config = dir_config.balancer(balancer.build());
            self.config.service.loadbalance = Some(balancer);
        }
        // Application-level instances with local metadata (Dubbo 3's default) are described
        // by their own MetadataService: registries fetch it through the shared client, or with
        // TLS settings through the cache of the references with those settings.
        let metadata = match &tls {
            Some(t) => Some(switchman_cluster::metadata_service::cache_with_tls(t)),
            None => {
                switchman_cluster::metadata_service::install();
                None
            }
        };
        // Without a transport of the user's, each endpoint gets its own client when it
        // appears (the protocol's), kept while it stays and drained after it leaves.
        let transport: Arc<dyn Invoker> = match self.invoker.take() {
            Some(i) => i,
            None => {
                // Calls name this consumer's application, as a Java consumer's do.
                let application = consumer_url.param("application").unwrap_or_default();
                let mut protocols = ProtocolInvoker::new().application(application);
                if let Some(tls) = tls {
                    protocols = protocols.tls(tls);
                }
                dir_config = match self.maker.take() {
                    Some(m) => dir_config.maker(m),
                    None => dir_config.maker(protocols.clone()),
                };
                // Not called while every endpoint has its own client.
                Arc::new(protocols)
            }
        };
        let registry = open_registry(&registry_url, metadata.clone())?;
        // What messages show: every server as written, the password masked.
        let shown = switchman_core::url::redacted_text(&registry_url);
        let subscribe = RegistryDirectory::subscribe(registry.as_ref(), dir_config);
        let directory = match tokio::time::timeout(self.wait, subscribe).await {
            Ok(d) => Arc::new(d?),
            Err(_) => {
                return Err(Error::no_provider(format!(
                    "{shown} did not answer within {:?} (subscribing to {})",
                    self.wait,
                    describe(&key)
                )));
            }
        };
        if self.check {
            let started = tokio::time::Instant::now();
            let mut ready = directory
                .wait_until(self.wait, |s| {
                    !s.endpoints().is_empty() || (self.empty_grace.is_some() && s.epoch() > 0)
                })
                .await
                .map(|s| !s.endpoints().is_empty());
            if let (Ok(false), Some(grace)) = (&ready, self.empty_grace) {
                // The registry answered with nothing: wait the grace, within what is left.
                let left = self.wait.saturating_sub(started.elapsed()).min(grace);
                ready = directory
                    .wait_until(left, |s| !s.endpoints().is_empty())
                    .await
                    .map(|_| true);
            }
            if !matches!(ready, Ok(true)) {
                let snap = directory.load();
                let message = if snap.epoch() == 0 {
                    format!(
                        "{shown} did not answer within {:?} (subscribing to {})",
                        self.wait,
                        describe(&key)
                    )
                } else if !snap.instances().is_empty() {
                    format!(
                        "no available provider for {} in {shown} after {:?}: {} listed, none enabled, healthy and speaking a callable protocol",
                        describe(&key),
                        self.wait,
                        snap.instances().len()
                    )
                } else {
                    let others = registered_keys(registry.as_ref(), &self.interface, PROBE).await;
                    format!(
                        "no provider for {} in {shown} (read {}){}",
                        describe(&key),
                        where_read(&registry_url, &key),
                        found_instead(&others)
                    )
                };
                let cache = metadata.or_else(switchman_discovery::metadata::shared_cache);
                let unfetched = cache.map(|c| metadata_failures(&c)).unwrap_or_default();
                return Err(Error::no_provider(format!("{message}{unfetched}")));
            }
        }
        let registration = if self.register_consumer && registers_consumers(&registry_url) {
            let url = registration_url(&consumer_url, &key);
            if let Err(e) = registry.register_consumer(&key, &url).await {
                warn!("{e}");
            }
            Some(Arc::new(ConsumerRegistration {
                registry: registry.clone(),
                key: key.clone(),
                url,
            }))
        } else {
            None
        };
        let cluster = ClusterInvoker::new(directory.clone(), transport, self.config);
        #[cfg(feature = "admin")]
        let (cluster, admin) = match self.admin {
            Some(addr) => {
                let cluster = cluster.with_instance_metrics(true);
                let admin = crate::admin::Admin::shared(addr).await?;
                let listing = admin.cluster(&registry_url, &cluster);
                (cluster, Some(Arc::new(listing)))
            }
            None => (cluster, None),
        };
        Ok(Reference {
            cluster,
            directory,
            registry: registry_url,
            definitions: Arc::new(crate::definitions::Definitions::new(registry)),
            _consumer: registration,
            #[cfg(feature = "admin")]
            admin,
        })
    }
}

/// The registry at `url`; with `metadata`, one that fetches application-level metadata
/// through that cache instead of the process-wide one.
fn open_registry(
    url: &str,
    metadata: Option<Arc<switchman_discovery::metadata::MetadataCache>>,
) -> Result<Arc<dyn Registry>> {
    match metadata {
        Some(cache) => switchman_discovery::registry_with_cache(url, cache),
        None => registry_from_url(url),
    }
}

/// `; the MetadataService of app (revision r) could not be fetched: why` for the revisions
/// `cache` fails to fetch (at most 3), or nothing.
fn metadata_failures(cache: &switchman_discovery::metadata::MetadataCache) -> String {
    let failures = cache.failures();
    let mut out = String::new();
    for (app, revision, reason) in failures.iter().take(3) {
        out.push_str(&format!(
            "; the metadata of application {app} (revision {revision}) cannot be fetched: {reason}"
        ));
    }
    if failures.len() > 3 {
        out.push_str(&format!("; and {} more", failures.len() - 3));
    }
    out
}

/// `com.foo.Bar:1.0.0 in group g1`, Dubbo's way of naming a service key in messages.
fn describe(key: &ServiceKey) -> String {
    let mut s = key.interface.to_string();
    if !key.version.is_empty() {
        s.push(':');
        s.push_str(&key.version);
    }
    if !key.group.is_empty() {
        s.push_str(" in group ");
        s.push_str(&key.group);
    }
    s
}

/// Where the registry keeps `key`'s providers, for the error message.
fn where_read(registry: &str, key: &ServiceKey) -> String {
    let scheme = registry.split("://").next().unwrap_or("");
    match scheme {
        "zookeeper" | "zk" => format!("/dubbo/{}/providers", key.interface),
        "nacos" => format!(
            "Nacos service {} (a plain service name needs ?naming=plain)",
            key.nacos_service_name()
        ),
        _ => format!("the providers of {}", key.interface),
    }
}

/// The (group, version) pairs `registry` lists for `interface` under any group and version,
/// read for up to `wait` (where the registry reads `*`: ZooKeeper, Nacos, static files): what
/// a "no provider" message offers instead ([`registered_as`] words them).
pub async fn registered_keys(
    registry: &dyn Registry,
    interface: &str,
    wait: Duration,
) -> BTreeSet<(String, String)> {
    let any = ServiceKey::with(interface, "*", "*");
    let Ok(Ok(dir)) = tokio::time::timeout(
        wait,
        RegistryDirectory::subscribe(registry, DirectoryConfig::new(any)),
    )
    .await
    else {
        return BTreeSet::new();
    };
    let _ = dir.wait_until(wait, |s| !s.instances().is_empty()).await;
    let snap = dir.load();
    snap.instances()
        .iter()
        .map(|i| {
            (
                i.service().group.to_string(),
                i.service().version.to_string(),
            )
        })
        .collect()
}

/// `; the registry has version 2.0.0 in group g1, it registered without version or group`:
/// each (group, version) pair the registry lists, worded from both its group and its version.
fn found_instead(others: &BTreeSet<(String, String)>) -> String {
    if others.is_empty() {
        return "; the registry lists no provider of this interface in any group or version".into();
    }
    format!("; the registry has {}", registered_as(others))
}

/// `version 2.0.0 in group g1, it registered without version or group, ...`: the pairs of
/// [`registered_keys`] in words.
pub fn registered_as(keys: &BTreeSet<(String, String)>) -> String {
    let list: Vec<String> = keys
        .iter()
        .map(|(g, v)| match (g.is_empty(), v.is_empty()) {
            (true, true) => "it registered without version or group".to_string(),
            (false, true) => format!("it registered without version in group {g}"),
            (true, false) => format!("version {v} without group"),
            (false, false) => format!("version {v} in group {g}"),
        })
        .collect();
    list.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::ErrorKind;

    #[test]
    fn messages_name_keys_and_what_exists() {
        let key = ServiceKey::with("com.foo.Bar", "g1", "1.0.0");
        assert_eq!(describe(&key), "com.foo.Bar:1.0.0 in group g1");
        assert_eq!(describe(&ServiceKey::new("com.foo.Bar")), "com.foo.Bar");
        assert_eq!(
            where_read("zookeeper://127.0.0.1:2181", &key),
            "/dubbo/com.foo.Bar/providers"
        );
        assert!(where_read("nacos://h:8848", &key).contains("providers:com.foo.Bar:1.0.0:g1"));
        let others: BTreeSet<(String, String)> = [
            ("g1".to_string(), "2.0.0".to_string()),
            (String::new(), String::new()),
        ]
        .into();
        assert_eq!(
            found_instead(&others),
            "; the registry has it registered without version or group, version 2.0.0 in group g1"
        );
        let halves: BTreeSet<(String, String)> = [
            ("g2".to_string(), String::new()),
            (String::new(), "3.0.0".to_string()),
        ]
        .into();
        assert_eq!(
            found_instead(&halves),
            "; the registry has version 3.0.0 without group, it registered without version in group g2"
        );
        assert!(found_instead(&BTreeSet::new()).contains("no provider of this interface"));
        assert_eq!(arguments(serde_json::json!([1, 2])).len(), 2);
        assert_eq!(
            arguments(serde_json::json!("x")),
            vec![serde_json::json!("x")]
        );
        assert!(arguments(Value::Null).is_empty());
    }

    #[tokio::test]
    async fn a_reference_needs_a_registry_and_a_good_url() {
        let e = Reference::new("com.foo.Bar").connect().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
        assert!(e.message().contains("no registry"), "{e}");
        let e = Reference::new("com.foo.Bar")
            .registry("static.yaml")
            .loadbalance("fastest")
            .connect()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
        assert!(e.message().contains("fastest"), "{e}");
        let e = Reference::new("com.foo.Bar")
            .registry("bogus://h:1")
            .connect()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig, "{e}");
    }
}
