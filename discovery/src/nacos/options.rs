//! The settings of a `nacos://` registry URL ([`NacosOptions`]), validated, and the nacos-sdk
//! clients built from them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigService, ConfigServiceBuilder};
use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder};
use nacos_sdk::api::props::ClientProps;
use switchman_core::{Error, Result, ServiceKey, Url};
use tracing::warn;

use super::*;

/// Nacos's default group.
pub(super) const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// Nacos's default HTTP port.
pub(super) const DEFAULT_PORT: u16 = 8848;
/// The default port of an address server (`endpoint`), Java Nacos's.
pub(super) const DEFAULT_ENDPOINT_PORT: u16 = 8080;
/// How many servers of a list one client build tries in turn (nacos-sdk checks a new
/// connection for about 4.5 s, then pauses 2 s, then 4 s, between two servers; the connector's
/// own retries go on after).
pub const BUILD_SERVERS: usize = 3;
/// Dubbo's config-centre group for governance rules.
pub(super) const DEFAULT_RULE_GROUP: &str = "dubbo";
/// How long `register`/`unregister` wait for the first connection.
pub(super) const REGISTER_WAIT: Duration = Duration::from_secs(15);
/// Bound on one register/deregister request.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Backoff between client build attempts while Nacos is unreachable.
pub(super) const BUILD_BACKOFF_MIN: Duration = Duration::from_millis(500);
pub(super) const BUILD_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Bound on one client build attempt.
pub(super) const BUILD_TIMEOUT: Duration = Duration::from_secs(20);
/// Default time between two service listings of a pattern subscription.
pub(super) const DEFAULT_LIST_INTERVAL: Duration = Duration::from_secs(10);
/// Shortest accepted `list_interval` (each listing is one request per 100 services).
pub(super) const MIN_LIST_INTERVAL: Duration = Duration::from_millis(100);
/// Default time between two health checks of a connected registry (`health_interval`).
pub(super) const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(2);
/// Shortest accepted `health_interval` (one cheap request per check).
pub(super) const MIN_HEALTH_INTERVAL: Duration = Duration::from_millis(100);
/// The largest `http-list-above` (1 GiB: far over any gRPC message nacos-sdk reads).
pub(super) const HTTP_ABOVE_MAX: u64 = 1024 * 1024 * 1024;

/// The trimmed value of `key`, if not empty.
pub(super) fn non_empty_param(url: &Url, key: &str) -> Option<String> {
    url.param(key)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The address server's `host:port` from `endpoint=host[:port]` and Java's `endpointPort`.
///
/// Strict, because nacos-sdk 0.8.3 turns it into `http://{host}:{port}/nacos/serverlist` with a
/// URL parser and panics on what that parser refuses: a host is a DNS name (letters, digits,
/// `-`, `_`, dots; the last label starting with a letter), an IPv4 address, or an IPv6 address
/// in brackets.
pub(super) fn endpoint_address(
    value: &str,
    port_param: Option<&str>,
) -> std::result::Result<String, String> {
    let bad = |why: &str| format!("endpoint={value:?}: {why}");
    if value.contains("://") || value.contains('/') {
        return Err(bad(
            "give the address server as host[:port] (the list is read from http://{host}:{port}/nacos/serverlist)",
        ));
    }
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("unclosed '[' in an IPv6 address"))?;
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(bad("not an IPv6 address"));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| bad("expected ':' after ']'"))?,
            ),
        };
        (format!("[{inside}]"), port)
    } else {
        let (host, port) = match value.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (value, None),
        };
        let name_ok = host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
            && host
                .rsplit('.')
                .next()
                .is_some_and(|last| last.starts_with(|c: char| c.is_ascii_alphabetic()));
        if !name_ok && host.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(bad("not a host name or IP address"));
        }
        (host.to_string(), port)
    };
    let parse_port = |p: &str, what: &str| {
        p.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{what}={p:?} is not a port"))
    };
    let port = match (port, port_param.map(str::trim).filter(|p| !p.is_empty())) {
        (Some(p), None) => parse_port(p, "endpoint port")?,
        (None, Some(p)) => parse_port(p, "endpointPort")?,
        (None, None) => DEFAULT_ENDPOINT_PORT,
        (Some(p), Some(q)) => {
            let (p, q) = (
                parse_port(p, "endpoint port")?,
                parse_port(q, "endpointPort")?,
            );
            if p != q {
                return Err(bad(&format!("its port {p} and endpointPort={q} disagree")));
            }
            p
        }
    };
    Ok(format!("{host}:{port}"))
}

/// How Nacos service names are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `providers:{interface}:{version}:{group}`, URL parameters as metadata (Java Dubbo).
    Dubbo,
    /// The interface is the service name (Spring Cloud style).
    Plain,
}

/// The validated settings of a `nacos://` registry URL. `Debug` masks the password.
#[derive(Clone, PartialEq)]
pub struct NacosOptions {
    /// The Nacos servers, `host:port` (HTTP port) separated by commas, as nacos-sdk takes them.
    pub server_addr: String,
    /// The address server (`endpoint`), `host:port`: when set, nacos-sdk reads the server list
    /// from it and `server_addr` is not used.
    pub endpoint: Option<String>,
    /// Explicit gRPC port (default: the SDK's HTTP port + 1000).
    pub grpc_port: Option<u16>,
    /// Namespace id (empty: public).
    pub namespace: String,
    /// Nacos group of the services.
    pub group: String,
    /// Naming scheme.
    pub naming: Naming,
    /// Cluster filter (empty: all).
    pub clusters: Vec<String>,
    /// Auth user.
    pub username: Option<String>,
    /// Auth password.
    pub password: Option<String>,
    /// The consumer application (app-level rules).
    pub application: Option<String>,
    /// Config-centre group of the rules; `None`: rules not watched.
    pub rule_group: Option<String>,
    /// nacos-sdk's disk cache.
    pub cache_dir: PathBuf,
    /// Time between two listings of the group's services, for subscriptions whose key is a
    /// pattern (`*`, a group list).
    pub list_interval: Duration,
    /// Time between two checks that the server still answers (`health_interval`).
    pub health_interval: Duration,
    /// Also read Dubbo 3 application-level instances (`app-level`, Dubbo naming only).
    pub app_level: bool,
    /// Applications to read application-level instances from, instead of the mapping's
    /// (`provided-by`; the mapping is then not read, as in Dubbo).
    pub provided_by: Vec<String>,
    /// How `MetadataInfo`s are fetched from providers' `MetadataService`
    /// (`metadata-timeout`, `metadata-retry`).
    pub metadata_fetch: crate::metadata::FetchSettings,
    /// The migration step's values the registry URL gives (`migration.*`).
    pub migration: crate::migration::MigrationDefaults,
    /// The estimated size (bytes) of an instance list above which its service is read over
    /// Nacos's HTTP open API instead of nacos-sdk (`http-list-above`; 0: every service).
    pub http_list_above: u64,
    /// The largest HTTP instance list answer read (`http-list-max-bytes`).
    pub http_list_max_bytes: usize,
}

impl std::fmt::Debug for NacosOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NacosOptions")
            .field("server_addr", &self.server_addr)
            .field("endpoint", &self.endpoint)
            .field("grpc_port", &self.grpc_port)
            .field("namespace", &self.namespace)
            .field("group", &self.group)
            .field("naming", &self.naming)
            .field("clusters", &self.clusters)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("application", &self.application)
            .field("rule_group", &self.rule_group)
            .field("cache_dir", &self.cache_dir)
            .field("list_interval", &self.list_interval)
            .field("app_level", &self.app_level)
            .field("provided_by", &self.provided_by)
            .field("metadata_fetch", &self.metadata_fetch)
            .field("migration", &self.migration)
            .field("http_list_above", &self.http_list_above)
            .field("http_list_max_bytes", &self.http_list_max_bytes)
            .finish()
    }
}

impl NacosOptions {
    /// Parses and validates a `nacos://` URL.
    pub fn from_url(url: &Url) -> Result<Self> {
        let bad = |why: String| Error::bad_config(format!("registry {}: {why}", url.redacted()));
        if url.protocol() != "nacos" {
            return Err(bad(format!("expected nacos://, got {}://", url.protocol())));
        }
        if url.host().is_empty() {
            return Err(bad("missing host".into()));
        }
        let servers = url.servers(DEFAULT_PORT)?;
        let naming = match url.param("naming").map(str::trim) {
            None | Some("") | Some("dubbo") => Naming::Dubbo,
            Some("plain") => Naming::Plain,
            Some(other) => {
                return Err(bad(format!(
                    "naming={other:?} is not one of \"dubbo\", \"plain\""
                )));
            }
        };
        let grpc_port = match url.param("grpc_port") {
            None => None,
            Some(p) => Some(
                p.trim()
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad(format!("grpc_port={p:?} is not a port")))?,
            ),
        };
        if grpc_port.is_none() {
            // nacos-sdk adds 1000 to the HTTP port (a u16): say so rather than overflow there.
            for server in &servers {
                let port = server
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.parse::<u16>().ok())
                    .unwrap_or(DEFAULT_PORT);
                if port > u16::MAX - 1000 {
                    return Err(bad(format!(
                        "server {server}: its gRPC port would be {port} + 1000, over 65535; give grpc_port"
                    )));
                }
            }
        }
        let endpoint = match non_empty_param(url, "endpoint") {
            Some(e) => Some(endpoint_address(&e, url.param("endpointPort")).map_err(&bad)?),
            None if non_empty_param(url, "endpointPort").is_some() => {
                return Err(bad("endpointPort without endpoint".into()));
            }
            None => None,
        };
        let list_interval = match url.param("list_interval").map(str::trim) {
            None | Some("") => DEFAULT_LIST_INTERVAL,
            Some(ms) => ms
                .parse::<u64>()
                .ok()
                .map(Duration::from_millis)
                .filter(|d| *d >= MIN_LIST_INTERVAL && *d <= Duration::from_secs(86_400))
                .ok_or_else(|| {
                    bad(format!(
                        "list_interval={ms:?} is not a number of milliseconds from {} to 86400000",
                        MIN_LIST_INTERVAL.as_millis()
                    ))
                })?,
        };
        let health_interval = match url.param("health_interval").map(str::trim) {
            None | Some("") => DEFAULT_HEALTH_INTERVAL,
            Some(ms) => ms
                .parse::<u64>()
                .ok()
                .map(Duration::from_millis)
                .filter(|d| *d >= MIN_HEALTH_INTERVAL && *d <= Duration::from_secs(3600))
                .ok_or_else(|| {
                    bad(format!(
                        "health_interval={ms:?} is not a number of milliseconds from {} to 3600000",
                        MIN_HEALTH_INTERVAL.as_millis()
                    ))
                })?,
        };
        let rules = match url.param("rules").map(str::trim) {
            None | Some("") | Some("true") => true,
            Some("false") => false,
            Some(other) => return Err(bad(format!("rules={other:?} is not true or false"))),
        };
        let app_level = match url.param("app-level").map(str::trim) {
            None | Some("") | Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(bad(format!("app-level={other:?} is not true or false")));
            }
        };
        let ms = |key: &str, default: Duration| -> Result<Duration> {
            match url.param(key).map(str::trim) {
                None | Some("") => Ok(default),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| {
                        bad(format!(
                            "{key}={v:?} is not a positive number of milliseconds"
                        ))
                    }),
            }
        };
        let fetch = crate::metadata::FetchSettings::default();
        let retry_max = ms("metadata-retry", fetch.retry_max)?;
        let metadata_fetch = crate::metadata::FetchSettings {
            timeout: ms("metadata-timeout", fetch.timeout)?,
            retry_min: fetch.retry_min.min(retry_max),
            retry_max,
            ..fetch
        };
        let mut provided_by: Vec<String> = Vec::new();
        for app in url
            .param("provided-by")
            .unwrap_or("")
            .split(',')
            .map(str::trim)
        {
            if app.is_empty() {
                continue;
            }
            if app.contains('@') || app.len() > 512 {
                return Err(bad(format!(
                    "provided-by: {app:?} cannot be a Nacos service name"
                )));
            }
            if !provided_by.iter().any(|a| a == app) {
                provided_by.push(app.to_string());
            }
        }
        let http_list_above = match url.param("http-list-above").map(str::trim) {
            None | Some("") => super::sdk::DEFAULT_HTTP_ABOVE,
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|b| *b <= HTTP_ABOVE_MAX)
                .ok_or_else(|| {
                    bad(format!(
                        "http-list-above={v:?} is not a number of bytes from 0 to {HTTP_ABOVE_MAX}"
                    ))
                })?,
        };
        let (min, max) = super::http_list::MAX_BYTES_RANGE;
        let http_list_max_bytes = match url.param("http-list-max-bytes").map(str::trim) {
            None | Some("") => super::http_list::DEFAULT_MAX_BYTES,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|b| (min..=max).contains(b))
                .ok_or_else(|| {
                    bad(format!(
                        "http-list-max-bytes={v:?} is not a number of bytes from {min} to {max}"
                    ))
                })?,
        };
        let non_empty = |k: &str| non_empty_param(url, k);
        let username = url
            .username()
            .map(str::to_string)
            .or_else(|| non_empty("username"));
        let password = url
            .password()
            .map(str::to_string)
            .or_else(|| non_empty("password"));
        if password.is_some() && username.is_none() {
            return Err(bad("a password without a username".into()));
        }
        let clusters = url
            .param("clusters")
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        Ok(NacosOptions {
            server_addr: servers.join(","),
            endpoint,
            grpc_port,
            namespace: url.param("namespace").unwrap_or("").trim().to_string(),
            group: non_empty("group").unwrap_or_else(|| DEFAULT_GROUP.to_string()),
            naming,
            clusters,
            username,
            password,
            application: non_empty("application"),
            rule_group: rules
                .then(|| non_empty("rule_group").unwrap_or_else(|| DEFAULT_RULE_GROUP.into())),
            cache_dir: non_empty("cache_dir")
                .map(PathBuf::from)
                .unwrap_or_else(|| std::env::temp_dir().join("switchman-nacos")),
            list_interval,
            health_interval,
            app_level: app_level && naming == Naming::Dubbo,
            provided_by,
            metadata_fetch,
            migration: crate::migration::MigrationDefaults::from_params(|k| url.param(k))
                .map_err(bad)?,
            http_list_above,
            http_list_max_bytes,
        })
    }

    /// The Nacos service name of `key` under this naming scheme.
    pub fn service_name(&self, key: &ServiceKey) -> Result<String> {
        if key.interface.is_empty() {
            return Err(Error::bad_config("nacos: empty service name"));
        }
        match self.naming {
            Naming::Dubbo => Ok(key.nacos_service_name()),
            Naming::Plain if key.group.is_empty() && key.version.is_empty() => {
                Ok(key.interface.to_string())
            }
            Naming::Plain => Err(Error::bad_config(format!(
                "nacos: plain naming has no Dubbo group or version ({key}); use naming=dubbo, or the registry's group= for the Nacos group"
            ))),
        }
    }

    /// Whether the clients may choose among several servers (a list, or an address server).
    pub(super) fn several_servers(&self) -> bool {
        self.endpoint.is_some() || self.server_addr.contains(',')
    }

    /// What the clients connect to, for messages: the servers, or the address server.
    pub fn target(&self) -> String {
        match &self.endpoint {
            Some(e) => format!("(servers from the address server {e})"),
            None => self.server_addr.clone(),
        }
    }

    pub(super) fn client_props(&self) -> ClientProps {
        let mut props = ClientProps::new()
            .server_addr(self.server_addr.clone())
            .namespace(self.namespace.clone())
            .app_name(
                self.application
                    .clone()
                    .unwrap_or_else(|| "switchman".into()),
            )
            // Explicit configuration wins over a stray .env file or NACOS_CLIENT_* variable.
            .env_first(false)
            // The directory's EmptyPolicy decides about empty lists, not the SDK.
            .naming_push_empty_protection(false)
            .load_cache_at_start(false)
            .cache_dir(self.cache_dir.clone());
        if let Some(p) = self.grpc_port {
            props = props.remote_grpc_port(p);
        }
        let servers = match &self.endpoint {
            Some(e) => {
                props = props.endpoint(e.clone());
                // Unknown until the address server answers.
                BUILD_SERVERS
            }
            None => self.server_addr.split(',').count().min(BUILD_SERVERS),
        };
        if servers > 1 {
            // One build tries one server (picked at random) unless told more, with the SDK's
            // only knob for it (deprecated without a replacement in 0.8.3): a dead server picked
            // first then costs a 2 s pause before the next, not a failed build and the
            // connector's backoff.
            #[allow(deprecated)]
            {
                props = props.max_retries(servers as u32);
            }
        }
        // The credentials stay out of the SDK's props (printable with `{:?}`): the login
        // plugin holds them (`auth.rs`).
        props
    }

    /// Creates the SDK's cache directories up front: nacos-sdk creates them in a background
    /// task that can lose the race with its first write (a warning and a retry).
    pub(super) fn prepare_cache_dir(&self) {
        let ns = if self.namespace.is_empty() {
            "public"
        } else {
            self.namespace.as_str()
        };
        for module in ["naming", "config"] {
            let dir = self.cache_dir.join(module).join(ns);
            if let Err(e) = std::fs::create_dir_all(&dir) {
                warn!(dir = %dir.display(), "cannot create the nacos-sdk cache directory: {e}");
            }
        }
    }

    /// The login of a client built with these options (none without a `username`): the
    /// adapter's own (`auth.rs`), not nacos-sdk's, which logs the password.
    pub(super) fn login(&self) -> Option<Arc<dyn nacos_sdk::api::plugin::AuthPlugin>> {
        let user = self.username.as_deref()?;
        Some(Arc::new(auth::NacosLogin::new(
            user,
            self.password.as_deref().unwrap_or(""),
        )))
    }

    pub(super) async fn build_naming(&self) -> Result<NamingService> {
        self.prepare_cache_dir();
        let mut b = NamingServiceBuilder::new(self.client_props());
        if let Some(login) = self.login() {
            b = b.with_auth_plugin(login);
        }
        match tokio::time::timeout(BUILD_TIMEOUT, b.build()).await {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => Err(Error::transport(format!("nacos {}: {e}", self.target()))),
            Err(_) => Err(Error::timeout(format!(
                "nacos {}: connecting timed out",
                self.target()
            ))),
        }
    }

    pub(super) async fn build_config(&self) -> Result<ConfigService> {
        let mut b = ConfigServiceBuilder::new(self.client_props());
        if let Some(login) = self.login() {
            b = b.with_auth_plugin(login);
        }
        match tokio::time::timeout(BUILD_TIMEOUT, b.build()).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(Error::transport(format!(
                "nacos config {}: {e}",
                self.target()
            ))),
            Err(_) => Err(Error::timeout(format!(
                "nacos config {}: connecting timed out",
                self.target()
            ))),
        }
    }
}
