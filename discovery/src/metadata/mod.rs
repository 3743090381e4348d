//! Dubbo 3 application-level metadata: what a provider's `MetadataInfo` says, where its
//! `MetadataService` listens, and how an application instance becomes endpoints.
//!
//! Dubbo 3 registers applications, not interfaces: an application instance (ZooKeeper's
//! `/services/{app}/{host:port}`, a Nacos instance of the service `{app}`) carries only its
//! address and a few metadata keys, among them the **revision** of its `MetadataInfo` (the
//! services it exports, with their protocols, ports and parameters). The `MetadataInfo` of a
//! revision is either in the metadata report (`metadata-type=remote`, ZooKeeper's
//! `/dubbo/metadata/{app}/{revision}`) or only in the provider's own
//! `org.apache.dubbo.metadata.MetadataService` (`metadata-type=local`, Dubbo 3's default),
//! which the consumer calls: `getMetadataInfo(revision)` on the protocol and port the instance
//! advertises in `dubbo.metadata-service.url-params` (Dubbo's `StandardMetadataServiceURLBuilder`),
//! service group = the application name, version `1.0.0`.
//!
//! This module holds the registry-neutral parts:
//!
//! - [`MetadataInfo`] / [`ServiceInfo`]: Dubbo's POJOs, parsed once from JSON (the metadata
//!   report's form, and what the Hessian-decoded answer of `getMetadataInfo` turns into);
//! - [`AppInstance`]: one application instance, its [`MetadataServiceTarget`]s and its
//!   endpoints ([`AppInstance::endpoints`], mapped as Dubbo's `ServiceInstancesChangedListener`
//!   and `InstanceAddressURL` do);
//! - [`MetadataFetcher`]: the small contract a transport implements to call a
//!   `MetadataService` (the discovery crate has no transport: `switchman-cluster`'s
//!   `metadata_service::MetadataServiceClient` speaks dubbo:// and tri://);
//! - [`MetadataCache`]: one fetch per (application, revision), shared by every instance and
//!   every subscription, bounded, with timeouts and a bounded retry with backoff.
//!
//! The process-wide cache that registries use is set up by [`install_fetcher`] (`switchman::
//! Reference` does it); without one, instances whose metadata is only local are held out and a
//! warning says why, once.

mod cache;
mod definition;
mod export;
mod instance;
#[cfg(feature = "nacos")]
#[allow(dead_code)] // Building blocks the Nacos adapter is to plug in (see its module docs).
pub(crate) mod nacos;
#[cfg_attr(not(any(feature = "zookeeper", feature = "nacos")), allow(dead_code))]
pub(crate) mod resolver;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value as Json;
use switchman_core::{BoxFuture, Result};

pub use cache::{
    DEFAULT_CAPACITY, FetchSettings, Lookup, MAX_CACHE_BYTES, MAX_INFO_BYTES, MetadataCache,
    MetadataStats, WaitToken,
};
pub use definition::{
    MAX_DEFINITION_BYTES, MAX_METHODS, MAX_PARAMETERS, MethodSignature, ServiceDefinition,
    nacos_data_ids, zookeeper_path,
};
pub use export::{
    AppPublication, AppRegistrations, AppRemoval, ExportSettings, ExportedMetadata,
    METADATA_SERVICE_PORT_PARAM, METADATA_SERVICE_PROTOCOL_PARAM, METADATA_VERSION_KEY,
    RegisterMode, exported,
};
pub use instance::{
    AppInstance, ENDPOINTS_KEY, REVISION_KEY, STORAGE_TYPE_KEY, StorageType, URL_PARAMS_KEY,
    URLS_KEY,
};

/// The interface of Dubbo's metadata service.
pub const METADATA_SERVICE: &str = "org.apache.dubbo.metadata.MetadataService";
/// Its version (`MetadataService.VERSION`); its group is the application name.
pub const METADATA_SERVICE_VERSION: &str = "1.0.0";
/// The revision of an application that exports nothing (`RevisionResolver.EMPTY_REVISION`).
pub const EMPTY_REVISION: &str = "0";
/// The largest number of services one `MetadataInfo` may carry (more is refused as bad data).
pub const MAX_SERVICES: usize = 4096;
/// The largest number of parameters one service may carry.
pub const MAX_PARAMS: usize = 4096;

/// A provider application's `MetadataInfo` for one revision: the services it exports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataInfo {
    /// The application name.
    pub app: String,
    /// The revision (a digest of the services; empty when the answer did not say).
    pub revision: String,
    /// By Dubbo's match key, `{group}/{interface}:{version}:{protocol}`.
    pub services: BTreeMap<String, ServiceInfo>,
}

impl MetadataInfo {
    /// The bytes of text it holds (names, keys and values): what bounds it in a cache.
    pub fn text_bytes(&self) -> usize {
        let service = |k: &String, s: &ServiceInfo| {
            k.len()
                + s.name.len()
                + s.group.len()
                + s.version.len()
                + s.protocol.len()
                + s.path.len()
                + s.params
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>()
        };
        self.app.len()
            + self.revision.len()
            + self
                .services
                .iter()
                .map(|(k, s)| service(k, s))
                .sum::<usize>()
    }
}

/// One exported service of a [`MetadataInfo`] (Dubbo's `MetadataInfo.ServiceInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceInfo {
    /// The interface.
    pub name: String,
    /// The group (empty: none).
    pub group: String,
    /// The version (empty: none).
    pub version: String,
    /// The protocol it is exported over (`dubbo`, `tri`, ...).
    pub protocol: String,
    /// Its port; `None` when Dubbo wrote none (`-1`, `0`): the instance's endpoints decide.
    pub port: Option<u16>,
    /// The path (usually the interface).
    pub path: String,
    /// The service URL's parameters (Dubbo's `MetadataParamsFilter` kept them: `weight`,
    /// `methods`, `timeout`, `dubbo.tag`, ...; not `timestamp`, which is per instance).
    pub params: BTreeMap<String, String>,
}

fn text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl MetadataInfo {
    /// Parses Dubbo's JSON form (`{"app","revision","services":{key:{"name","group",
    /// "version","protocol","port","path","params"}}}`). Extra keys (the `"class"` of a
    /// decoded Java object) are ignored; a service without a name or protocol, or a
    /// `MetadataInfo` over the [`MAX_SERVICES`]/[`MAX_PARAMS`] bounds, is an error that names
    /// what is wrong.
    pub fn from_json(v: &Json) -> std::result::Result<Self, String> {
        let Json::Object(o) = v else {
            return Err(format!("MetadataInfo is not an object but {}", kind(v)));
        };
        let app = o.get("app").and_then(text).unwrap_or_default();
        let revision = o.get("revision").and_then(text).unwrap_or_default();
        let mut services = BTreeMap::new();
        match o.get("services") {
            None | Some(Json::Null) => {}
            Some(Json::Object(s)) => {
                if s.len() > MAX_SERVICES {
                    return Err(format!(
                        "MetadataInfo lists {} services, over the limit of {MAX_SERVICES}",
                        s.len()
                    ));
                }
                for (key, svc) in s {
                    let info = ServiceInfo::from_json(svc).map_err(|e| format!("{key}: {e}"))?;
                    services.insert(key.clone(), info);
                }
            }
            Some(other) => {
                return Err(format!(
                    "MetadataInfo services is not a map but {}",
                    kind(other)
                ));
            }
        }
        Ok(MetadataInfo {
            app,
            revision,
            services,
        })
    }

    /// Parses the metadata report's bytes (JSON text).
    pub fn from_slice(data: &[u8]) -> std::result::Result<Self, String> {
        let v: Json = serde_json::from_slice(data).map_err(|e| format!("not JSON: {e}"))?;
        Self::from_json(&v)
    }
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

impl ServiceInfo {
    fn from_json(v: &Json) -> std::result::Result<Self, String> {
        let Json::Object(o) = v else {
            return Err(format!("service is not an object but {}", kind(v)));
        };
        let field = |k: &str| o.get(k).and_then(text).unwrap_or_default();
        let name = field("name");
        if name.is_empty() {
            return Err("service without a name".into());
        }
        let protocol = field("protocol");
        if protocol.is_empty() {
            return Err(format!("service {name} without a protocol"));
        }
        let port = match o.get("port") {
            None | Some(Json::Null) => None,
            Some(p) => {
                let n = match p {
                    Json::Number(n) => n.as_i64(),
                    Json::String(s) => s.trim().parse::<i64>().ok(),
                    _ => None,
                }
                .ok_or_else(|| format!("service {name}: port {p} is not a number"))?;
                match n {
                    ..=0 => None,
                    1..=65535 => Some(n as u16),
                    _ => return Err(format!("service {name}: port {n} is out of range")),
                }
            }
        };
        let mut params = BTreeMap::new();
        match o.get("params") {
            None | Some(Json::Null) => {}
            Some(Json::Object(p)) => {
                if p.len() > MAX_PARAMS {
                    return Err(format!(
                        "service {name}: {} parameters, over the limit of {MAX_PARAMS}",
                        p.len()
                    ));
                }
                for (k, v) in p {
                    if let Some(t) = text(v) {
                        params.insert(k.clone(), t);
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "service {name}: params is not a map but {}",
                    kind(other)
                ));
            }
        }
        let path = match field("path") {
            p if p.is_empty() => name.clone(),
            p => p,
        };
        Ok(ServiceInfo {
            group: field("group"),
            version: field("version"),
            name,
            protocol,
            port,
            path,
            params,
        })
    }
}

/// Where one provider's `MetadataService` answers, from its instance metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetadataServiceTarget {
    /// The provider application: the service group to call.
    pub application: String,
    /// The revision to ask for.
    pub revision: String,
    /// The instance's host.
    pub host: String,
    /// The port of the protocol below.
    pub port: u16,
    /// `dubbo` or `tri`.
    pub protocol: String,
    /// The other `dubbo.metadata-service.url-params` (`prefer.serialization`, `version`,
    /// `token`, ...), for the transport.
    pub params: BTreeMap<String, String>,
}

impl MetadataServiceTarget {
    /// `protocol://host:port`, for logs.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.protocol, self.host, self.port)
        } else {
            format!("{}://{}:{}", self.protocol, self.host, self.port)
        }
    }
}

/// Calls a provider's `MetadataService.getMetadataInfo(revision)`. Implemented by
/// `switchman_cluster::metadata_service::MetadataServiceClient` (dubbo:// and tri://); tests
/// implement it with fakes. The [`MetadataCache`] decides when and how often it is called.
pub trait MetadataFetcher: Send + Sync + fmt::Debug + 'static {
    /// One attempt: the `MetadataInfo` of `target.revision`, or an error saying why not
    /// (the provider answered nothing within `timeout`, refused, has no such revision...).
    fn fetch<'a>(
        &'a self,
        target: &'a MetadataServiceTarget,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<MetadataInfo>>;
}

static SHARED: OnceLock<Arc<MetadataCache>> = OnceLock::new();

/// Installs `fetcher` behind the process-wide [`MetadataCache`] that registries use for
/// `metadata-type=local` instances, and returns that cache. The first call wins: later calls
/// return the cache already installed (its fetcher unchanged).
pub fn install_fetcher(fetcher: Arc<dyn MetadataFetcher>) -> Arc<MetadataCache> {
    SHARED
        .get_or_init(|| Arc::new(MetadataCache::new(fetcher)))
        .clone()
}

/// The process-wide [`MetadataCache`], once [`install_fetcher`] ran.
pub fn shared_cache() -> Option<Arc<MetadataCache>> {
    SHARED.get().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_report_and_the_decoded_java_object() {
        let report = br#"{"app":"appr","revision":"312c","services":{"io.switchman.peers.DemoService:dubbo":{"name":"io.switchman.peers.DemoService","params":{"side":"provider","weight":"30","methods":"add,sayHello"},"path":"io.switchman.peers.DemoService","port":43779,"protocol":"dubbo"}}}"#;
        let m = MetadataInfo::from_slice(report).unwrap();
        assert_eq!((m.app.as_str(), m.revision.as_str()), ("appr", "312c"));
        let s = &m.services["io.switchman.peers.DemoService:dubbo"];
        assert_eq!(s.port, Some(43779));
        assert_eq!(s.params["weight"], "30");
        assert_eq!(s.group, "");
        // Hessian → JSON of the Java object: a "class" key, port -1, a group, no path.
        let decoded = json!({
            "class": "org.apache.dubbo.metadata.MetadataInfo",
            "app": "a", "revision": "r",
            "services": {"g/x.Y:1.0:tri": {
                "class": "org.apache.dubbo.metadata.MetadataInfo$ServiceInfo",
                "name": "x.Y", "group": "g", "version": "1.0", "protocol": "tri",
                "port": -1, "path": null, "params": {"timeout": 500}
            }}
        });
        let m = MetadataInfo::from_json(&decoded).unwrap();
        let s = &m.services["g/x.Y:1.0:tri"];
        assert_eq!((s.port, s.path.as_str()), (None, "x.Y"));
        assert_eq!(s.params["timeout"], "500");
    }

    #[test]
    fn bad_metadata_is_an_error_naming_the_part() {
        for (bad, want) in [
            (json!([]), "not an object"),
            (json!({"services": []}), "services is not a map"),
            (
                json!({"services": {"k": {"protocol": "dubbo"}}}),
                "k: service without a name",
            ),
            (
                json!({"services": {"k": {"name": "x"}}}),
                "without a protocol",
            ),
            (
                json!({"services": {"k": {"name": "x", "protocol": "dubbo", "port": 70000}}}),
                "out of range",
            ),
            (
                json!({"services": {"k": {"name": "x", "protocol": "dubbo", "port": "p"}}}),
                "not a number",
            ),
            (
                json!({"services": {"k": {"name": "x", "protocol": "dubbo", "params": 1}}}),
                "params is not a map",
            ),
        ] {
            let e = MetadataInfo::from_json(&bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
        assert!(
            MetadataInfo::from_slice(b"{nope")
                .unwrap_err()
                .contains("not JSON")
        );
    }
}
