//! The provider side of Dubbo 3 application-level discovery: what a Switchman provider
//! registered with `register-mode=instance` (or `all`) publishes, built as Java Dubbo 3.3
//! builds it, so that Java consumers in `FORCE_APPLICATION` (and Switchman's own) find it.
//!
//! - [`RegisterMode`]: the registry URL's `register-mode` (`interface`, `instance`, `all`;
//!   Dubbo's `dubbo.application.register-mode`). Switchman's default stays `interface`: what a
//!   Switchman provider registered before, and what every consumer (Dubbo 2.x, 3.x in any
//!   migration step, Switchman) finds; Dubbo 3.3's own default is `all`.
//! - [`ServiceInfo::from_instance`]: one registered [`Instance`] as a service of the
//!   application's `MetadataInfo`, its parameters filtered as Dubbo's
//!   `DefaultMetadataParamsFilter` does (no `timestamp`, `pid`, `bind.*`, `qos.*`, ...).
//! - [`MetadataInfo::calc_revision`]: Dubbo's `MetadataInfo.calAndGetRevision`, the MD5 (hex)
//!   of the application name followed by every service's `toDescString` in match-key order.
//! - [`AppRegistrations`]: per registry, the application instances (one per application and
//!   address) this process registered, their services and revisions; it gives the
//!   registrars the Curator node ([`AppPublication::curator_json`]) or the Nacos metadata
//!   ([`AppPublication::metadata`]) to write, and keeps the process-wide
//!   [`exported`] store that the provider's `MetadataService` answers from.
//!
//! Where the `MetadataService` answers (`dubbo.metadata-service.url-params`): on the
//! instance's own port when it is a `tri` (or `dubbo`) provider, else on the port and
//! protocol its parameters `metadata-service-port` / `metadata-service-protocol` name
//! (Dubbo's `dubbo.application.metadata-service-port`/`-protocol`); those two are not service
//! parameters and are left out of the `MetadataInfo`. A provider that serves TLS on its own
//! port (`ssl-enabled=true`, as Dubbo 3 registers it) says so there too (`"ssl-enabled":
//! "true"`), so that consumers fetch its metadata over TLS; a Java 3.3 provider does not (its
//! consumers use their TLS settings for every provider).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use md5::{Digest, Md5};
use serde_json::{Value as Json, json};
use switchman_core::{Error, Instance, Protocol, Result, Url};

use super::{
    EMPTY_REVISION, ENDPOINTS_KEY, METADATA_SERVICE_VERSION, MetadataInfo, REVISION_KEY,
    STORAGE_TYPE_KEY, ServiceInfo, StorageType, URL_PARAMS_KEY,
};

/// `meta-v`: the version of the `MetadataService` a consumer calls (`1.0.0`: the Hessian
/// interface; Java's `2.0.0` is protobuf `MetadataServiceV2`, which Switchman does not serve).
pub const METADATA_VERSION_KEY: &str = "meta-v";
/// Instance parameter: the port the provider's `MetadataService` answers on.
pub const METADATA_SERVICE_PORT_PARAM: &str = "metadata-service-port";
/// Instance parameter: the protocol of that port (`tri` or `dubbo`; default `tri`).
pub const METADATA_SERVICE_PROTOCOL_PARAM: &str = "metadata-service-protocol";

/// What Dubbo's `DefaultMetadataParamsFilter` keeps out of a service's parameters (a key
/// equal to one of these, ignoring case, or containing `.` followed by one).
const EXCLUDED_SERVICE_PARAMS: [&str; 13] = [
    "monitor",
    "bind.ip",
    "bind.port",
    "qos.enable",
    "qos.host",
    "qos.port",
    "qos.accept.foreign.ip",
    "validation",
    "interfaces",
    "pid",
    "timestamp",
    "heartbeat.timeout",
    "ipv6",
];
/// What it copies into the instance metadata instead.
const INSTANCE_PARAMS: [&str; 3] = ["heartbeat.timeout", "timestamp", "ipv6"];

/// Which registrations a provider makes (`register-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegisterMode {
    /// Interface level only (`/dubbo/{interface}/providers`, `providers:{interface}:..`):
    /// Switchman's default.
    #[default]
    Interface,
    /// Application level only: the application instance, the interface → application
    /// mapping, the `MetadataInfo` (served, and in the report with `metadata-type=remote`).
    Instance,
    /// Both (Dubbo 3.3's default).
    All,
}

impl RegisterMode {
    /// Parses `interface`, `instance` or `all` (case-insensitive).
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "interface" => Ok(RegisterMode::Interface),
            "instance" => Ok(RegisterMode::Instance),
            "all" => Ok(RegisterMode::All),
            other => Err(format!(
                "register-mode={other:?} is not interface, instance or all"
            )),
        }
    }

    /// Whether interface-level registrations are made.
    pub fn interface(self) -> bool {
        matches!(self, RegisterMode::Interface | RegisterMode::All)
    }

    /// Whether application-level registrations are made.
    pub fn instance(self) -> bool {
        matches!(self, RegisterMode::Instance | RegisterMode::All)
    }

    /// The name Dubbo uses.
    pub fn as_str(self) -> &'static str {
        match self {
            RegisterMode::Interface => "interface",
            RegisterMode::Instance => "instance",
            RegisterMode::All => "all",
        }
    }
}

/// The provider-side settings of a registry URL: `register-mode` and `metadata-type`
/// (`local`, Dubbo's default, or `remote`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSettings {
    /// Which registrations are made.
    pub mode: RegisterMode,
    /// Where the `MetadataInfo` is kept besides the provider's own `MetadataService`.
    pub storage: StorageType,
}

impl ExportSettings {
    /// Reads `register-mode` and `metadata-type` of a registry URL; a bad value is an error
    /// naming the parameter and the registry.
    pub fn from_url(url: &Url) -> Result<Self> {
        let bad = |m: String| Error::bad_config(format!("registry {}: {m}", url.redacted()));
        let mode = match url.param("register-mode").map(str::trim) {
            None | Some("") => RegisterMode::default(),
            Some(v) => RegisterMode::parse(v).map_err(bad)?,
        };
        let storage = match url.param("metadata-type").map(str::trim) {
            None | Some("") => StorageType::Local,
            Some(v) if v.eq_ignore_ascii_case("local") => StorageType::Local,
            Some(v) if v.eq_ignore_ascii_case("remote") => StorageType::Remote,
            Some(v) => return Err(bad(format!("metadata-type={v:?} is not local or remote"))),
        };
        Ok(ExportSettings { mode, storage })
    }
}

fn excluded(key: &str) -> bool {
    EXCLUDED_SERVICE_PARAMS
        .iter()
        .any(|x| key.eq_ignore_ascii_case(x) || key.contains(&format!(".{x}")))
        || key == METADATA_SERVICE_PORT_PARAM
        || key == METADATA_SERVICE_PROTOCOL_PARAM
}

/// Java's `BaseServiceMetadata.buildServiceKey`: `group/interface:version`, blank parts left
/// out.
fn service_key(name: &str, group: &str, version: &str) -> String {
    let mut s = String::with_capacity(name.len() + group.len() + version.len() + 2);
    if !group.is_empty() {
        s.push_str(group);
        s.push('/');
    }
    s.push_str(name);
    if !version.is_empty() {
        s.push(':');
        s.push_str(version);
    }
    s
}

/// Java's `AbstractMap.toString` of a sorted map: `{k1=v1, k2=v2}`.
fn java_map_string(m: &BTreeMap<String, String>) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(k);
        s.push('=');
        s.push_str(v);
    }
    s.push('}');
    s
}

/// The provider URL of `instance` as a Java provider's exported URL carries it (what the
/// interface-level registrars write, `side=provider`, `dynamic=true`).
fn provider_url(instance: &Instance) -> Url {
    let mut u = instance.to_url();
    u.set_param("side", "provider");
    if u.param("dynamic").is_none() {
        u.set_param("dynamic", "true");
    }
    u
}

impl ServiceInfo {
    /// `instance` as one service of its application's `MetadataInfo`, as Dubbo's
    /// `ServiceInfo(URL, filters)` builds it from the exported URL: name, group and version
    /// of its service key, its protocol, port and path, and its URL parameters without the
    /// ones `DefaultMetadataParamsFilter` excludes.
    pub fn from_instance(instance: &Instance) -> ServiceInfo {
        let url = provider_url(instance);
        let key = instance.service();
        let params = url
            .params()
            .iter()
            .filter(|(k, _)| !excluded(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        ServiceInfo {
            name: key.interface.to_string(),
            group: key.group.to_string(),
            version: key.version.to_string(),
            protocol: instance.protocol().as_str().to_string(),
            port: Some(instance.port()),
            path: url.path().to_string(),
            params,
        }
    }

    /// Dubbo's service key, `group/interface:version`.
    pub fn service_key(&self) -> String {
        service_key(&self.name, &self.group, &self.version)
    }

    /// Dubbo's match key, `group/interface:version:protocol`: the key of the service in
    /// [`MetadataInfo::services`].
    pub fn match_key(&self) -> String {
        let mut k = self.service_key();
        if !self.protocol.is_empty() {
            k.push(':');
            k.push_str(&self.protocol);
        }
        k
    }

    /// Java's `ServiceInfo.toDescString`: match key, port, path and the sorted parameters.
    fn desc_string(&self) -> String {
        let port = self.port.map(i32::from).unwrap_or(-1);
        format!(
            "{}{port}{}{}",
            self.match_key(),
            self.path,
            java_map_string(&self.params)
        )
    }

    fn report_json(&self) -> Json {
        let mut o = serde_json::Map::new();
        o.insert("name".into(), json!(self.name));
        if !self.group.is_empty() {
            o.insert("group".into(), json!(self.group));
        }
        if !self.version.is_empty() {
            o.insert("version".into(), json!(self.version));
        }
        o.insert("protocol".into(), json!(self.protocol));
        o.insert("port".into(), json!(self.port.map(i32::from).unwrap_or(-1)));
        o.insert("path".into(), json!(self.path));
        o.insert("params".into(), json!(self.params));
        Json::Object(o)
    }

    fn java_json(&self) -> Json {
        let blank = |s: &str| if s.is_empty() { Json::Null } else { json!(s) };
        json!({
            "class": "org.apache.dubbo.metadata.MetadataInfo$ServiceInfo",
            "name": self.name,
            "group": blank(&self.group),
            "version": blank(&self.version),
            "protocol": self.protocol,
            "port": self.port.map(i32::from).unwrap_or(-1),
            "path": self.path,
            "params": self.params,
        })
    }
}

impl MetadataInfo {
    /// The `MetadataInfo` of `app` exporting `services` (keyed by their match keys), its
    /// revision computed.
    pub fn of_services(app: &str, services: impl IntoIterator<Item = ServiceInfo>) -> Self {
        let mut info = MetadataInfo {
            app: app.to_string(),
            revision: String::new(),
            services: services.into_iter().map(|s| (s.match_key(), s)).collect(),
        };
        info.revision = info.calc_revision();
        info
    }

    /// Dubbo's `MetadataInfo.calAndGetRevision`: `0` without services, else the lower-case
    /// hex MD5 of the UTF-8 of the application name followed by every service's
    /// `toDescString` (match key, port, path, `{k=v, ...}` of the sorted parameters), in
    /// match-key order.
    pub fn calc_revision(&self) -> String {
        if self.services.is_empty() {
            return EMPTY_REVISION.to_string();
        }
        let mut text = self.app.clone();
        for s in self.services.values() {
            text.push_str(&s.desc_string());
        }
        let digest = Md5::digest(text.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The metadata report's JSON (`/dubbo/metadata/{app}/{revision}`, the Nacos config
    /// `{app}` in group `{revision}`), as Java's `JsonUtils.toJson(metadataInfo)` writes it.
    pub fn to_report_json(&self) -> String {
        let services: serde_json::Map<String, Json> = self
            .services
            .iter()
            .map(|(k, s)| (k.clone(), s.report_json()))
            .collect();
        json!({"app": self.app, "revision": self.revision, "services": services}).to_string()
    }

    /// The answer of `MetadataService.getMetadataInfo` as JSON for the hessian crate's
    /// mapping: objects of `org.apache.dubbo.metadata.MetadataInfo` and its `ServiceInfo`
    /// (a `"class"` member each), what a Java consumer decodes; blank group and version are
    /// `null`, as in Java.
    pub fn to_java_json(&self) -> Json {
        let services: serde_json::Map<String, Json> = self
            .services
            .iter()
            .map(|(k, s)| (k.clone(), s.java_json()))
            .collect();
        json!({
            "class": "org.apache.dubbo.metadata.MetadataInfo",
            "app": self.app,
            "revision": self.revision,
            "services": services,
        })
    }
}

/// The `MetadataInfo`s this process's registrars publish, by revision: what its
/// `MetadataService` answers (`getMetadataInfo(revision)`, Dubbo's
/// `MetadataServiceDelegation`: the current `MetadataInfo` of that revision, else nothing).
/// Each (application, revision) is counted: it stays while a registrar still publishes it.
#[derive(Debug, Default)]
pub struct ExportedMetadata {
    by_revision: Mutex<HashMap<String, (Arc<MetadataInfo>, usize)>>,
}

impl ExportedMetadata {
    /// Publishes `info` (one more holder of its revision).
    pub fn publish(&self, info: Arc<MetadataInfo>) {
        let mut m = self.by_revision.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(info.revision.clone()).or_insert((info, 0)).1 += 1;
    }

    /// One holder of `revision` less; gone with the last.
    pub fn withdraw(&self, revision: &str) {
        let mut m = self.by_revision.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.get_mut(revision) {
            e.1 -= 1;
            if e.1 == 0 {
                m.remove(revision);
            }
        }
    }

    /// The `MetadataInfo` of `revision`, if published; with `app` given (the call's group), only
    /// that application's.
    pub fn lookup(&self, app: Option<&str>, revision: &str) -> Option<Arc<MetadataInfo>> {
        let m = self.by_revision.lock().unwrap_or_else(|p| p.into_inner());
        m.get(revision.trim())
            .map(|(i, _)| i.clone())
            .filter(|i| app.is_none_or(|a| a.is_empty() || a == i.app))
    }
}

/// The process-wide [`ExportedMetadata`].
pub fn exported() -> &'static ExportedMetadata {
    static E: OnceLock<ExportedMetadata> = OnceLock::new();
    E.get_or_init(ExportedMetadata::default)
}

/// Where an application instance's `MetadataService` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MetadataEndpoint {
    protocol: String,
    port: u16,
    /// Served over TLS: the instance's own port, registered with `ssl-enabled=true`.
    ssl: bool,
}

/// One application instance this registry publishes.
#[derive(Debug)]
struct AppState {
    host: String,
    port: u16,
    protocol: String,
    endpoint: Option<MetadataEndpoint>,
    /// Instance-level parameters (`timestamp`, ...), of the first service registered.
    instance_params: BTreeMap<String, String>,
    /// By instance key ([`Instance::key`]).
    services: BTreeMap<String, ServiceInfo>,
    info: Arc<MetadataInfo>,
}

/// What a registrar writes for one application instance.
#[derive(Debug, Clone)]
pub struct AppPublication {
    /// The application.
    pub app: String,
    /// The instance's host.
    pub host: String,
    /// The instance's port (its first protocol's).
    pub port: u16,
    /// The `MetadataInfo` now published, its revision computed.
    pub info: Arc<MetadataInfo>,
    /// The revision this one replaces (the same application instance before this change).
    pub previous: Option<String>,
    /// The instance metadata (see [`AppPublication::metadata`]).
    metadata: BTreeMap<String, String>,
}

impl AppPublication {
    /// `{host}:{port}`: the Curator node name and id, the Nacos instance address.
    pub fn id(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The instance metadata Java Dubbo 3.3 writes: `dubbo.metadata.revision`,
    /// `dubbo.metadata.storage-type`, `dubbo.endpoints`, `dubbo.metadata-service.url-params`
    /// (when a `MetadataService` is served), `meta-v`, and the instance-level parameters
    /// (`timestamp`).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The Curator `ServiceInstance` JSON of `/services/{app}/{host}:{port}` (payload class
    /// `org.apache.dubbo.registry.zookeeper.ZookeeperInstance`), as Dubbo's
    /// `ZookeeperServiceDiscovery` writes it; `registered_ms`: `registrationTimeUTC`.
    pub fn curator_json(&self, registered_ms: u64) -> Vec<u8> {
        let id = self.id();
        json!({
            "name": self.app,
            "id": id,
            "address": self.host,
            "port": self.port,
            "sslPort": null,
            "payload": {
                "@class": "org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
                "id": id,
                "name": self.app,
                "metadata": self.metadata,
            },
            "registrationTimeUTC": registered_ms,
            "serviceType": "DYNAMIC",
            "uriSpec": null,
        })
        .to_string()
        .into_bytes()
    }
}

/// What [`AppRegistrations::remove`] leaves.
#[derive(Debug, Clone)]
pub enum AppRemoval {
    /// The application instance still exports services: publish this.
    Update(AppPublication),
    /// Its last service went: remove the instance (its last revision given).
    Gone {
        /// The application.
        app: String,
        /// `{host}:{port}`.
        id: String,
        /// The revision withdrawn.
        revision: String,
    },
}

/// The application instances one registry publishes (see the module docs). Updates the
/// process-wide [`exported`] store as services come and go.
#[derive(Debug)]
pub struct AppRegistrations {
    settings: ExportSettings,
    /// By (application, host:port).
    apps: Mutex<BTreeMap<(String, String), AppState>>,
}

fn metadata_endpoint(instance: &Instance) -> std::result::Result<Option<MetadataEndpoint>, String> {
    if let Some(p) = instance.param(METADATA_SERVICE_PORT_PARAM) {
        let port = p
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{METADATA_SERVICE_PORT_PARAM}={p:?} is not a port"))?;
        let protocol = instance
            .param(METADATA_SERVICE_PROTOCOL_PARAM)
            .map(|p| p.trim().to_ascii_lowercase())
            .unwrap_or_else(|| "tri".into());
        if !matches!(protocol.as_str(), "tri" | "dubbo") {
            return Err(format!(
                "{METADATA_SERVICE_PROTOCOL_PARAM}={protocol:?} is not tri or dubbo"
            ));
        }
        return Ok(Some(MetadataEndpoint {
            protocol,
            port,
            ssl: false,
        }));
    }
    Ok(match instance.protocol() {
        Protocol::Tri | Protocol::Dubbo => Some(MetadataEndpoint {
            protocol: instance.protocol().as_str().to_string(),
            port: instance.port(),
            ssl: instance
                .param("ssl-enabled")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        }),
        _ => None,
    })
}

impl AppRegistrations {
    /// Empty, with the registry's settings.
    pub fn new(settings: ExportSettings) -> Self {
        AppRegistrations {
            settings,
            apps: Mutex::new(BTreeMap::new()),
        }
    }

    /// The registry's settings.
    pub fn settings(&self) -> ExportSettings {
        self.settings
    }

    /// Adds (or replaces) `instance`'s service in its application instance and returns what
    /// to publish. An error, naming the instance, when it has no application, or when its
    /// metadata would be served nowhere (`metadata-type=local` and neither a `tri`/`dubbo`
    /// provider nor a `metadata-service-port`).
    pub fn add(&self, instance: &Instance) -> Result<AppPublication> {
        let bad = |m: String| {
            Error::bad_config(format!(
                "cannot register {} ({}) at application level: {m}",
                instance.address(),
                instance.service()
            ))
        };
        let app = instance
            .application()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| bad("it has no application name".into()))?;
        if app.contains('/') || app.contains(',') {
            return Err(bad(format!(
                "application {app:?} cannot name a registry node (no '/' or ',')"
            )));
        }
        let iface = instance.service().interface.as_ref();
        if iface.is_empty() || iface.contains('/') || iface.contains('*') {
            return Err(bad(format!("interface {iface:?} cannot be mapped")));
        }
        let endpoint = metadata_endpoint(instance).map_err(bad)?;
        if endpoint.is_none() && self.settings.storage == StorageType::Local {
            return Err(bad(format!(
                "a {} provider serves no MetadataService: set {METADATA_SERVICE_PORT_PARAM} (a Triple server answering it) or metadata-type=remote",
                instance.protocol().as_str()
            )));
        }
        let url = provider_url(instance);
        let key = (app.to_string(), instance.address().to_string());
        let mut apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
        let state = apps.entry(key).or_insert_with(|| AppState {
            host: instance.host().to_string(),
            port: instance.port(),
            protocol: instance.protocol().as_str().to_string(),
            endpoint: endpoint.clone(),
            instance_params: INSTANCE_PARAMS
                .iter()
                .filter_map(|k| url.param(k).map(|v| (k.to_string(), v.to_string())))
                .collect(),
            services: BTreeMap::new(),
            info: Arc::new(MetadataInfo::default()),
        });
        if endpoint.is_some() && state.endpoint.is_none() {
            state.endpoint = endpoint;
        }
        state.services.insert(
            instance.key().to_string(),
            ServiceInfo::from_instance(instance),
        );
        Ok(self.republish(app, state))
    }

    /// Removes `instance`'s service; `None` when this registry did not publish it.
    pub fn remove(&self, instance: &Instance) -> Option<AppRemoval> {
        let app = instance.application()?.trim().to_string();
        let key = (app.clone(), instance.address().to_string());
        let mut apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
        let state = apps.get_mut(&key)?;
        state.services.remove(instance.key())?;
        if state.services.is_empty() {
            let state = apps.remove(&key)?;
            exported().withdraw(&state.info.revision);
            let p = AppPublication {
                app: app.clone(),
                host: state.host.clone(),
                port: state.port,
                info: state.info.clone(),
                previous: None,
                metadata: BTreeMap::new(),
            };
            return Some(AppRemoval::Gone {
                id: p.id(),
                app,
                revision: state.info.revision.clone(),
            });
        }
        Some(AppRemoval::Update(self.republish(&app, state)))
    }

    /// Every application instance published now (to write again after a reconnect).
    pub fn current(&self) -> Vec<AppPublication> {
        let apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
        apps.iter()
            .map(|((app, _), s)| self.publication(app, s, None))
            .collect()
    }

    /// Forgets everything (the registry is going away), withdrawing the revisions; returns
    /// the (application, id) of the instances to remove.
    pub fn clear(&self) -> Vec<(String, String)> {
        let mut apps = self.apps.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *apps)
            .into_iter()
            .map(|((app, _), s)| {
                exported().withdraw(&s.info.revision);
                let p = self.publication(&app, &s, None);
                (app, p.id())
            })
            .collect()
    }

    fn republish(&self, app: &str, state: &mut AppState) -> AppPublication {
        let info = Arc::new(MetadataInfo::of_services(
            app,
            state.services.values().cloned(),
        ));
        let previous = (!state.info.revision.is_empty()).then(|| state.info.revision.clone());
        if previous.as_deref() != Some(info.revision.as_str()) {
            exported().publish(info.clone());
            if let Some(old) = &previous {
                exported().withdraw(old);
            }
        }
        state.info = info;
        self.publication(app, state, previous)
    }

    fn publication(&self, app: &str, s: &AppState, previous: Option<String>) -> AppPublication {
        let mut metadata = s.instance_params.clone();
        metadata.insert(REVISION_KEY.into(), s.info.revision.clone());
        metadata.insert(
            STORAGE_TYPE_KEY.into(),
            match self.settings.storage {
                StorageType::Local => "local",
                StorageType::Remote => "remote",
            }
            .into(),
        );
        let mut endpoints = vec![json!({"port": s.port, "protocol": s.protocol})];
        if let Some(e) = &s.endpoint {
            if e.port != s.port || e.protocol != s.protocol {
                endpoints.push(json!({"port": e.port, "protocol": e.protocol}));
            }
            // As Dubbo's ServiceInstanceMetadataUtils.getMetadataServiceParameter writes it.
            let mut params = json!({
                "prefer.serialization": "hessian2",
                "version": METADATA_SERVICE_VERSION,
                "dubbo": "2.0.2",
                "side": "provider",
                "port": e.port.to_string(),
                "protocol": e.protocol,
            });
            if e.ssl {
                params["ssl-enabled"] = json!("true");
            }
            metadata.insert(URL_PARAMS_KEY.into(), params.to_string());
        }
        metadata.insert(ENDPOINTS_KEY.into(), Json::Array(endpoints).to_string());
        metadata.insert(METADATA_VERSION_KEY.into(), METADATA_SERVICE_VERSION.into());
        AppPublication {
            app: app.to_string(),
            host: s.host.clone(),
            port: s.port,
            info: s.info.clone(),
            previous,
            metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::AppInstance;
    use switchman_core::ServiceKey;

    fn tri(app: &str, iface: &str, port: u16) -> Instance {
        Instance::builder("127.0.0.1", port)
            .protocol(Protocol::Tri)
            .path(iface)
            .service(ServiceKey::new(iface))
            .application(app)
            .timestamp_ms(1_700_000_000_000)
            .param("prefer.serialization", "hessian2")
            .param("methods", "add,sayHello")
            .param("pid", "42")
            .param("sayHello.timestamp", "1")
            .build()
    }

    #[test]
    fn register_modes_parse_and_default_to_interface() {
        let s = |u: &str| ExportSettings::from_url(&Url::parse(u).unwrap());
        let d = s("zookeeper://h:1").unwrap();
        assert_eq!(
            (d.mode, d.storage),
            (RegisterMode::Interface, StorageType::Local)
        );
        let i = s("zookeeper://h:1?register-mode=instance&metadata-type=remote").unwrap();
        assert_eq!(
            (i.mode, i.storage),
            (RegisterMode::Instance, StorageType::Remote)
        );
        assert!(i.mode.instance() && !i.mode.interface());
        let a = s("nacos://h:1?register-mode=ALL").unwrap();
        assert!(a.mode.instance() && a.mode.interface());
        let e = s("zookeeper://h:1?register-mode=app").unwrap_err();
        assert!(e.to_string().contains("register-mode=\"app\""), "{e}");
        let e = s("zookeeper://h:1?metadata-type=disk").unwrap_err();
        assert!(e.to_string().contains("metadata-type=\"disk\""), "{e}");
    }

    #[test]
    fn service_info_filters_params_as_dubbo() {
        let s = ServiceInfo::from_instance(&tri("shop", "x.Y", 50051));
        assert_eq!(s.match_key(), "x.Y:tri");
        assert_eq!((s.port, s.path.as_str()), (Some(50051), "x.Y"));
        assert_eq!(s.params["side"], "provider");
        assert_eq!(s.params["methods"], "add,sayHello");
        assert_eq!(s.params["application"], "shop");
        assert_eq!(s.params["interface"], "x.Y");
        for gone in ["pid", "timestamp", "sayHello.timestamp"] {
            assert!(!s.params.contains_key(gone), "{gone}");
        }
        let g = ServiceInfo {
            group: "g".into(),
            version: "1.0".into(),
            ..s.clone()
        };
        assert_eq!(g.match_key(), "g/x.Y:1.0:tri");
    }

    #[test]
    fn revision_is_the_md5_of_dubbos_desc_string() {
        let s = ServiceInfo {
            name: "x.Y".into(),
            group: String::new(),
            version: String::new(),
            protocol: "tri".into(),
            port: Some(50051),
            path: "x.Y".into(),
            params: [("b", "2"), ("a", "1")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let info = MetadataInfo::of_services("shop", [s]);
        // md5("shopx.Y:tri50051x.Y{a=1, b=2}"), computed independently.
        let want: String = Md5::digest(b"shopx.Y:tri50051x.Y{a=1, b=2}")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(info.revision, want);
        assert_eq!(info.revision.len(), 32);
        assert_eq!(MetadataInfo::of_services("shop", []).revision, "0");
        // The report form reads back the same, and so does the Java form.
        let back = MetadataInfo::from_slice(info.to_report_json().as_bytes()).unwrap();
        assert_eq!(back, info);
        assert_eq!(back.calc_revision(), info.revision);
        let java = MetadataInfo::from_json(&info.to_java_json()).unwrap();
        assert_eq!(java, info);
    }

    #[test]
    fn publications_carry_what_consumers_read() {
        let regs = AppRegistrations::new(ExportSettings {
            mode: RegisterMode::Instance,
            storage: StorageType::Local,
        });
        let a = tri("pubapp-1", "x.Y", 50051);
        let p = regs.add(&a).unwrap();
        let r1 = p.info.revision.clone();
        assert_eq!(p.previous, None);
        assert_eq!(
            exported().lookup(Some("pubapp-1"), &r1).unwrap().revision,
            r1
        );
        assert!(exported().lookup(Some("other"), &r1).is_none());
        // Read back as the consumer side reads a Curator node.
        let node: Json = serde_json::from_slice(&p.curator_json(1)).unwrap();
        assert_eq!(node["id"], "127.0.0.1:50051");
        assert_eq!(
            node["payload"]["@class"],
            "org.apache.dubbo.registry.zookeeper.ZookeeperInstance"
        );
        let inst = AppInstance {
            app: "pubapp-1".into(),
            host: "127.0.0.1".into(),
            port: 50051,
            metadata: p.metadata().clone(),
        };
        assert_eq!(inst.revision(), Some(r1.as_str()));
        assert_eq!(inst.storage_type(), StorageType::Local);
        let t = inst.metadata_targets(&r1).unwrap();
        assert_eq!((t[0].protocol.as_str(), t[0].port), ("tri", 50051));
        assert_eq!(p.metadata()["timestamp"], "1700000000000");
        assert_eq!(p.metadata()["meta-v"], "1.0.0");
        let urls = inst.endpoints(&p.info, "x.Y");
        assert_eq!(urls.len(), 1);
        assert_eq!(urls[0].port(), Some(50051));
        // A second service: a new revision, the old one withdrawn.
        let b = tri("pubapp-1", "a.B", 50051);
        let p2 = regs.add(&b).unwrap();
        assert_eq!(p2.previous.as_deref(), Some(r1.as_str()));
        assert_ne!(p2.info.revision, r1);
        assert!(exported().lookup(None, &r1).is_none());
        assert_eq!(p2.info.services.len(), 2);
        match regs.remove(&b).unwrap() {
            AppRemoval::Update(p3) => assert_eq!(p3.info.revision, r1),
            other => panic!("{other:?}"),
        }
        match regs.remove(&a).unwrap() {
            AppRemoval::Gone { app, id, revision } => {
                assert_eq!((app.as_str(), id.as_str()), ("pubapp-1", "127.0.0.1:50051"));
                assert_eq!(revision, r1);
            }
            other => panic!("{other:?}"),
        }
        assert!(exported().lookup(None, &r1).is_none());
        assert!(regs.remove(&a).is_none());
    }

    #[test]
    fn bad_instances_are_refused_naming_why() {
        let regs = AppRegistrations::new(ExportSettings {
            mode: RegisterMode::Instance,
            storage: StorageType::Local,
        });
        let no_app = Instance::builder("127.0.0.1", 1)
            .protocol(Protocol::Tri)
            .service(ServiceKey::new("x.Y"))
            .build();
        assert!(
            regs.add(&no_app)
                .unwrap_err()
                .to_string()
                .contains("no application")
        );
        let http = Instance::builder("127.0.0.1", 1)
            .protocol(Protocol::Http)
            .service(ServiceKey::new("x.Y"))
            .application("a")
            .build();
        let e = regs.add(&http).unwrap_err().to_string();
        assert!(e.contains("metadata-service-port"), "{e}");
        let bad_port = http.with_param(METADATA_SERVICE_PORT_PARAM, "x").unwrap();
        let e = regs.add(&bad_port).unwrap_err().to_string();
        assert!(e.contains("metadata-service-port=\"x\""), "{e}");
        let ok = http.with_param(METADATA_SERVICE_PORT_PARAM, "7").unwrap();
        let p = regs.add(&ok).unwrap();
        assert!(p.metadata()[URL_PARAMS_KEY].contains("\"port\":\"7\""));
        assert!(
            !p.info
                .services
                .values()
                .next()
                .unwrap()
                .params
                .contains_key(METADATA_SERVICE_PORT_PARAM)
        );
        assert!(!p.metadata()[URL_PARAMS_KEY].contains("ssl-enabled"));
        regs.clear();
    }

    #[test]
    fn a_tls_provider_says_so_where_its_metadata_service_answers() {
        let regs = AppRegistrations::new(ExportSettings {
            mode: RegisterMode::Instance,
            storage: StorageType::Local,
        });
        let tls = tri("ssl-app", "x.Tls", 50061)
            .with_param("ssl-enabled", "true")
            .unwrap();
        let p = regs.add(&tls).unwrap();
        let params: Json = serde_json::from_str(&p.metadata()[URL_PARAMS_KEY]).unwrap();
        assert_eq!(params["ssl-enabled"], "true", "{params}");
        assert_eq!(params["port"], "50061", "{params}");
        // Consumers read it back as a parameter of the MetadataService target.
        let inst = AppInstance {
            app: "ssl-app".into(),
            host: "127.0.0.1".into(),
            port: 50061,
            metadata: p.metadata().clone(),
        };
        let targets = inst.metadata_targets(&p.info.revision).unwrap();
        assert_eq!(
            targets[0].params.get("ssl-enabled").map(String::as_str),
            Some("true")
        );
        // Cleartext providers do not.
        let clear = regs.add(&tri("clear-app", "x.Clear", 50062)).unwrap();
        assert!(!clear.metadata()[URL_PARAMS_KEY].contains("ssl-enabled"));
        regs.clear();
    }
}
