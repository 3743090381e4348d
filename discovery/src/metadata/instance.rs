//! One application instance: its revision, where its `MetadataService` answers, and the
//! endpoints it serves once its `MetadataInfo` is known.

use std::collections::BTreeMap;

use serde_json::Value as Json;
use switchman_core::Url;

use super::{EMPTY_REVISION, MetadataInfo, MetadataServiceTarget, ServiceInfo};

/// `dubbo.metadata.revision`: the revision of the instance's `MetadataInfo`.
pub const REVISION_KEY: &str = "dubbo.metadata.revision";
/// `dubbo.metadata.storage-type`: `local` (default) or `remote`.
pub const STORAGE_TYPE_KEY: &str = "dubbo.metadata.storage-type";
/// `dubbo.endpoints`: `[{"port":20880,"protocol":"dubbo"}, ...]`.
pub const ENDPOINTS_KEY: &str = "dubbo.endpoints";
/// `dubbo.metadata-service.url-params`: the MetadataService URL's parameters (JSON).
pub const URL_PARAMS_KEY: &str = "dubbo.metadata-service.url-params";
/// `dubbo.metadata-service.urls`: Spring Cloud Alibaba's list of MetadataService URLs.
pub const URLS_KEY: &str = "dubbo.metadata-service.urls";

/// Instance metadata keys that describe discovery itself and are not provider parameters.
const DISCOVERY_KEYS: [&str; 6] = [
    ENDPOINTS_KEY,
    URL_PARAMS_KEY,
    URLS_KEY,
    STORAGE_TYPE_KEY,
    "meta-v",
    "dubbo.metadata.cluster",
];

/// Where an instance keeps its `MetadataInfo` (`dubbo.metadata.storage-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageType {
    /// Only in the provider's `MetadataService` (Dubbo 3's default).
    Local,
    /// In the metadata report (ZooKeeper's `/dubbo/metadata/{app}/{revision}`, Nacos config).
    Remote,
}

/// One application instance as a registry lists it (ZooKeeper's Curator `ServiceInstance`,
/// a Nacos instance of the service `{app}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppInstance {
    /// The application (the registry's service name).
    pub app: String,
    /// Its host.
    pub host: String,
    /// Its port (the first protocol's).
    pub port: u16,
    /// Its metadata (`payload.metadata` in ZooKeeper, instance metadata in Nacos).
    pub metadata: BTreeMap<String, String>,
}

impl AppInstance {
    /// Its revision; `None` without one or for the empty revision `0` (Dubbo skips both).
    pub fn revision(&self) -> Option<&str> {
        self.metadata
            .get(REVISION_KEY)
            .map(|r| r.trim())
            .filter(|r| !r.is_empty() && *r != EMPTY_REVISION)
    }

    /// Where its `MetadataInfo` is kept.
    pub fn storage_type(&self) -> StorageType {
        match self.metadata.get(STORAGE_TYPE_KEY).map(|s| s.trim()) {
            Some(s) if s.eq_ignore_ascii_case("remote") => StorageType::Remote,
            _ => StorageType::Local,
        }
    }

    /// `dubbo.endpoints` as (protocol, port); empty when absent. A malformed value is an
    /// error naming it.
    pub fn advertised_endpoints(&self) -> Result<Vec<(String, u16)>, String> {
        let Some(raw) = self.metadata.get(ENDPOINTS_KEY) else {
            return Ok(Vec::new());
        };
        let v: Json = serde_json::from_str(raw)
            .map_err(|e| format!("{ENDPOINTS_KEY} {raw:?} is not JSON: {e}"))?;
        let Json::Array(items) = v else {
            return Err(format!("{ENDPOINTS_KEY} {raw:?} is not a list"));
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let protocol = item.get("protocol").and_then(Json::as_str);
            let port = item.get("port").and_then(json_port);
            match (protocol, port) {
                (Some(p), Some(port)) if !p.is_empty() => out.push((p.to_string(), port)),
                _ => {
                    return Err(format!(
                        "{ENDPOINTS_KEY}: entry {item} is not {{port, protocol}}"
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Where to call its `MetadataService`, best first: the protocol and port of
    /// `dubbo.metadata-service.url-params` (Dubbo's `StandardMetadataServiceURLBuilder`), else
    /// the first of `dubbo.metadata-service.urls` (Spring Cloud Alibaba), else dubbo:// on the
    /// instance's port (Dubbo's fallback without metadata); then the instance's other dubbo://
    /// and tri:// endpoints (a provider of several protocols exports the `1.0.0` service on
    /// its first one, which need not be the one advertised). An error when nothing usable is
    /// advertised (an unsupported protocol, malformed JSON), naming it.
    pub fn metadata_targets(&self, revision: &str) -> Result<Vec<MetadataServiceTarget>, String> {
        let target = |protocol: &str, host: &str, port: u16, params: &BTreeMap<String, String>| {
            MetadataServiceTarget {
                application: self.app.clone(),
                revision: revision.to_string(),
                host: host.to_string(),
                port,
                protocol: protocol.to_string(),
                params: params.clone(),
            }
        };
        let mut out: Vec<MetadataServiceTarget> = Vec::new();
        let mut params = BTreeMap::new();
        if let Some(raw) = self
            .metadata
            .get(URL_PARAMS_KEY)
            .filter(|r| !r.trim().is_empty())
        {
            let v: Json = serde_json::from_str(raw)
                .map_err(|e| format!("{URL_PARAMS_KEY} {raw:?} is not JSON: {e}"))?;
            let Json::Object(o) = v else {
                return Err(format!("{URL_PARAMS_KEY} {raw:?} is not a JSON object"));
            };
            for (k, v) in &o {
                match v {
                    Json::String(s) => params.insert(k.clone(), s.clone()),
                    Json::Number(n) => params.insert(k.clone(), n.to_string()),
                    Json::Bool(b) => params.insert(k.clone(), b.to_string()),
                    _ => None,
                };
            }
            let protocol = params.remove("protocol").unwrap_or_else(|| "dubbo".into());
            let port = params
                .remove("port")
                .and_then(|p| p.trim().parse::<u16>().ok())
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{URL_PARAMS_KEY} {raw:?} has no valid port"))?;
            out.push(target(&protocol, &self.host, port, &params));
        } else if let Some(raw) = self.metadata.get(URLS_KEY).filter(|r| !r.trim().is_empty()) {
            let urls: Vec<String> = serde_json::from_str(raw)
                .map_err(|e| format!("{URLS_KEY} {raw:?} is not a JSON list of URLs: {e}"))?;
            let first = urls
                .first()
                .ok_or_else(|| format!("{URLS_KEY} is an empty list"))?;
            let url = Url::parse(first).map_err(|e| format!("{URLS_KEY}: {first:?}: {e}"))?;
            let port = url
                .port()
                .ok_or_else(|| format!("{URLS_KEY}: {first:?} has no port"))?;
            let p: BTreeMap<String, String> = url.params().iter().cloned().collect();
            out.push(target(url.protocol(), url.host(), port, &p));
            params = p;
        } else if self.port > 0 {
            out.push(target("dubbo", &self.host, self.port, &params));
        }
        // Other dubbo:// and tri:// endpoints of the instance, for the 1.0.0 service.
        params.remove("version");
        if let Ok(endpoints) = self.advertised_endpoints() {
            for (protocol, port) in endpoints {
                let known = out.iter().any(|t| t.protocol == protocol && t.port == port);
                if !known && matches!(protocol.as_str(), "dubbo" | "tri") {
                    out.push(target(&protocol, &self.host, port, &params));
                }
            }
        }
        out.retain(|t| matches!(t.protocol.as_str(), "dubbo" | "tri"));
        if out.is_empty() {
            return Err(format!(
                "{}:{} advertises no MetadataService over dubbo:// or tri://",
                self.host, self.port
            ));
        }
        Ok(out)
    }

    /// The endpoints of `interface` that this instance serves according to `info`, as Dubbo's
    /// `ServiceInstancesChangedListener` maps them: one per matching service (one per protocol
    /// it is exported over), on the service's own port when it has one, else on the instance's
    /// advertised endpoint of that protocol, else on the instance's port. Parameters are
    /// looked up as `InstanceAddressURL` does: the service's (`weight`, `timeout`, `dubbo.tag`,
    /// ...) first, then the instance's metadata (`timestamp`, Dubbo's instance-level
    /// parameters, a `zone`, anything the service does not set). Discovery's own keys
    /// (`dubbo.endpoints`, `dubbo.metadata-service.*`, `meta-v`) are left out;
    /// `dubbo.metadata.revision` stays, to say where the endpoint came from.
    pub fn endpoints(&self, info: &MetadataInfo, interface: &str) -> Vec<Url> {
        let advertised = self.advertised_endpoints().unwrap_or_default();
        info.services
            .values()
            .filter(|s| s.name == interface)
            .filter_map(|s| self.endpoint(s, &advertised, info))
            .collect()
    }

    fn endpoint(
        &self,
        svc: &ServiceInfo,
        advertised: &[(String, u16)],
        info: &MetadataInfo,
    ) -> Option<Url> {
        let port = svc
            .port
            .or_else(|| {
                advertised
                    .iter()
                    .find(|(p, _)| *p == svc.protocol)
                    .map(|(_, port)| *port)
            })
            .or((self.port > 0).then_some(self.port))?;
        let mut url = Url::new(&svc.protocol, &self.host, Some(port), &svc.path);
        for (k, v) in &self.metadata {
            if !DISCOVERY_KEYS.contains(&k.as_str()) {
                url.set_param(k, v);
            }
        }
        for (k, v) in &svc.params {
            url.set_param(k, v);
        }
        url.set_param("interface", &svc.name);
        for (key, value) in [("group", &svc.group), ("version", &svc.version)] {
            if value.is_empty() {
                url.remove_param(key);
            } else {
                url.set_param(key, value);
            }
        }
        if url.param("application").is_none_or(str::is_empty) {
            url.set_param("application", &self.app);
        }
        let revision = self.revision().unwrap_or(info.revision.as_str());
        if !revision.is_empty() {
            url.set_param(REVISION_KEY, revision);
        }
        Some(url)
    }
}

fn json_port(v: &Json) -> Option<u16> {
    let n = match v {
        Json::Number(n) => n.as_u64()?,
        Json::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(meta: &[(&str, &str)]) -> AppInstance {
        AppInstance {
            app: "shop".into(),
            host: "10.0.0.7".into(),
            port: 20880,
            metadata: meta
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn targets_follow_the_url_params_then_other_endpoints() {
        // What a Java 3.3 tri:// provider writes (V2 advertised, V1 on the same port).
        let tri = instance(&[
            (REVISION_KEY, "r1"),
            (
                ENDPOINTS_KEY,
                r#"[{"port":50051,"protocol":"tri"},{"port":20880,"protocol":"dubbo"}]"#,
            ),
            (
                URL_PARAMS_KEY,
                r#"{"prefer.serialization":"hessian2,fastjson2","version":"2.0.0","side":"provider","port":"50051","protocol":"tri"}"#,
            ),
        ]);
        let t = tri.metadata_targets("r1").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].protocol.as_str(), t[0].port), ("tri", 50051));
        assert_eq!(t[0].params["prefer.serialization"], "hessian2,fastjson2");
        assert_eq!((t[1].protocol.as_str(), t[1].port), ("dubbo", 20880));
        assert!(!t[1].params.contains_key("version"));
        assert_eq!(
            (t[0].application.as_str(), t[0].revision.as_str()),
            ("shop", "r1")
        );
        // Without url-params: dubbo:// on the instance's port.
        let bare = instance(&[(REVISION_KEY, "r1")]);
        let t = bare.metadata_targets("r1").unwrap();
        assert_eq!((t[0].protocol.as_str(), t[0].port), ("dubbo", 20880));
        // Spring Cloud Alibaba's form.
        let sca = instance(&[(
            URLS_KEY,
            r#"["dubbo://10.0.0.8:20881/org.apache.dubbo.metadata.MetadataService?version=1.0.0"]"#,
        )]);
        let t = sca.metadata_targets("r").unwrap();
        assert_eq!((t[0].host.as_str(), t[0].port), ("10.0.0.8", 20881));
    }

    #[test]
    fn bad_advertisements_are_errors_naming_the_key() {
        for (meta, want) in [
            ((URL_PARAMS_KEY, "{nope"), "not JSON"),
            ((URL_PARAMS_KEY, "[1]"), "not a JSON object"),
            ((URL_PARAMS_KEY, r#"{"protocol":"dubbo"}"#), "no valid port"),
            (
                (URL_PARAMS_KEY, r#"{"protocol":"rest","port":"80"}"#),
                "no MetadataService over dubbo",
            ),
            ((URLS_KEY, "[]"), "empty list"),
        ] {
            let e = instance(&[meta]).metadata_targets("r").unwrap_err();
            assert!(e.contains(want), "{meta:?}: {e}");
        }
        let e = instance(&[(ENDPOINTS_KEY, r#"[{"port":"x"}]"#)])
            .advertised_endpoints()
            .unwrap_err();
        assert!(e.contains(ENDPOINTS_KEY), "{e}");
        assert_eq!(instance(&[(REVISION_KEY, "0")]).revision(), None);
        assert_eq!(instance(&[]).storage_type(), StorageType::Local);
        assert_eq!(
            instance(&[(STORAGE_TYPE_KEY, "remote")]).storage_type(),
            StorageType::Remote
        );
    }

    #[test]
    fn endpoints_are_mapped_as_dubbo_does() {
        let info = MetadataInfo::from_json(&json!({
            "app": "shop", "revision": "r1",
            "services": {
                "x.Y:dubbo": {"name": "x.Y", "protocol": "dubbo", "port": -1, "path": "x.Y",
                              "params": {"weight": "300", "timeout": "700", "application": "shop"}},
                "g/x.Y:1.0:tri": {"name": "x.Y", "group": "g", "version": "1.0", "protocol": "tri",
                                  "port": 50052, "path": "x.Y", "params": {}},
                "a.B:dubbo": {"name": "a.B", "protocol": "dubbo", "port": 20880, "params": {}}
            }
        }))
        .unwrap();
        let inst = instance(&[
            (REVISION_KEY, "r1"),
            (
                ENDPOINTS_KEY,
                r#"[{"port":20881,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]"#,
            ),
            (URL_PARAMS_KEY, r#"{"port":"20881","protocol":"dubbo"}"#),
            ("timestamp", "1700000000000"),
            ("weight", "5"),
            ("zone", "z1"),
        ]);
        let urls = inst.endpoints(&info, "x.Y");
        assert_eq!(urls.len(), 2, "{urls:?}");
        let tri = urls.iter().find(|u| u.protocol() == "tri").unwrap();
        // The service's own port wins over the advertised endpoint.
        assert_eq!(tri.port(), Some(50052));
        assert_eq!(
            (tri.param("group"), tri.param("version")),
            (Some("g"), Some("1.0"))
        );
        let dubbo = urls.iter().find(|u| u.protocol() == "dubbo").unwrap();
        // No service port: the advertised dubbo endpoint.
        assert_eq!((dubbo.host(), dubbo.port()), ("10.0.0.7", Some(20881)));
        // Service parameters win over instance metadata; the instance's fill the rest.
        assert_eq!(dubbo.param("weight"), Some("300"));
        assert_eq!(dubbo.param("timestamp"), Some("1700000000000"));
        assert_eq!(dubbo.param("zone"), Some("z1"));
        assert_eq!(dubbo.param("timeout"), Some("700"));
        assert_eq!(dubbo.param("interface"), Some("x.Y"));
        assert_eq!(dubbo.param("group"), None);
        assert_eq!(dubbo.param(REVISION_KEY), Some("r1"));
        assert_eq!(dubbo.param(URL_PARAMS_KEY), None);
        assert_eq!(dubbo.param(ENDPOINTS_KEY), None);
        // Instance weight applies where the service has none.
        assert_eq!(tri.param("weight"), Some("5"));
        assert_eq!(tri.param("application"), Some("shop"));
        // Without advertised endpoints: the instance's port.
        let plain = instance(&[(REVISION_KEY, "r1")]);
        let urls = plain.endpoints(&info, "x.Y");
        let dubbo = urls.iter().find(|u| u.protocol() == "dubbo").unwrap();
        assert_eq!(dubbo.port(), Some(20880));
        assert!(inst.endpoints(&info, "not.There").is_empty());
    }
}
