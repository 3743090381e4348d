//! Dubbo 3 application-level discovery on ZooKeeper.
//!
//! - `/dubbo/mapping/{interface}`: comma-separated applications that provide the interface
//!   (plus the registry URL's `provided-by` list).
//! - `/services/{app}/{host:port}`: one Curator `ServiceInstance` JSON per instance; its
//!   `payload.metadata` carries `dubbo.metadata.revision`, `dubbo.metadata.storage-type` and
//!   `dubbo.endpoints` (`[{"port":..,"protocol":..}]`).
//! - `/dubbo/metadata/{app}/{revision}`: the `MetadataInfo` JSON (`services` keyed by
//!   `group/interface:version:protocol`, each with `name`, `group`, `version`, `protocol`,
//!   `port`, `path`, `params`), present when providers store metadata remotely.
//!
//! Covered: instances whose revision's metadata is in ZooKeeper (`metadata-type=remote`).
//! Not covered: `local` metadata, which needs a call to the provider's own `MetadataService`
//! over the Dubbo protocol; such instances are skipped with a debug log.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use switchman_core::{Instance, Url};
use tracing::debug;

use super::ZkConfig;
use super::nodes::{MAX_NODE_DATA, ProviderFilter};
use super::reader::Reader;
use super::session::CallError;

#[derive(Debug, Deserialize)]
struct CuratorInstance {
    address: String,
    port: Option<u16>,
    #[serde(default)]
    payload: Option<Payload>,
}

#[derive(Debug, Deserialize)]
struct Payload {
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Endpoint {
    port: u16,
    protocol: String,
}

#[derive(Debug, Deserialize)]
struct MetadataInfo {
    #[serde(default)]
    services: BTreeMap<String, ServiceInfo>,
}

#[derive(Debug, Deserialize)]
struct ServiceInfo {
    name: String,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    version: Option<String>,
    protocol: String,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, String>,
}

async fn read_small(reader: &mut Reader<'_>, path: &str) -> Result<Option<Vec<u8>>, CallError> {
    match reader.data(path).await? {
        Some(data) if data.len() > MAX_NODE_DATA => {
            tracing::warn!(
                path,
                bytes = data.len(),
                "node over the {MAX_NODE_DATA}-byte limit skipped"
            );
            Ok(None)
        }
        other => Ok(other),
    }
}

/// The instances of every application mapped to the filter's interface.
pub(crate) async fn read_instances(
    reader: &mut Reader<'_>,
    cfg: &ZkConfig,
    filter: &ProviderFilter,
) -> Result<Vec<Instance>, CallError> {
    let iface = filter.key.interface.to_string();
    let mut apps: BTreeSet<String> = cfg.provided_by.iter().cloned().collect();
    if let Some(data) =
        read_small(reader, &format!("{}/mapping/{iface}", super::DUBBO_ROOT)).await?
    {
        let text = String::from_utf8_lossy(&data);
        apps.extend(
            text.split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty() && !a.contains('/'))
                .map(str::to_string),
        );
    }
    let mut out = Vec::new();
    let mut metadata_cache: BTreeMap<(String, String), Option<MetadataInfo>> = BTreeMap::new();
    for app in apps {
        let dir = format!("/services/{app}");
        let Some(children) = reader.children(&dir).await? else {
            continue;
        };
        for child in children {
            let path = format!("{dir}/{child}");
            let Some(data) = read_small(reader, &path).await? else {
                continue;
            };
            let inst: CuratorInstance = match serde_json::from_slice(&data) {
                Ok(i) => i,
                Err(e) => {
                    tracing::warn!(path, "skipping application instance: not Curator JSON: {e}");
                    continue;
                }
            };
            let meta = inst.payload.map(|p| p.metadata).unwrap_or_default();
            let Some(revision) = meta.get("dubbo.metadata.revision").cloned() else {
                debug!(path, "instance without a metadata revision skipped");
                continue;
            };
            let key = (app.clone(), revision.clone());
            if !metadata_cache.contains_key(&key) {
                let mpath = format!("{}/metadata/{app}/{revision}", super::DUBBO_ROOT);
                let info = match read_small(reader, &mpath).await? {
                    Some(d) => match serde_json::from_slice::<MetadataInfo>(&d) {
                        Ok(m) => Some(m),
                        Err(e) => {
                            tracing::warn!(path = mpath, "skipping metadata: {e}");
                            None
                        }
                    },
                    None => {
                        debug!(
                            path = mpath,
                            "no remote metadata (local metadata is not covered)"
                        );
                        None
                    }
                };
                metadata_cache.insert(key.clone(), info);
            }
            let Some(Some(info)) = metadata_cache.get(&key) else {
                continue;
            };
            let endpoints: Vec<Endpoint> = meta
                .get("dubbo.endpoints")
                .and_then(|e| serde_json::from_str(e).ok())
                .unwrap_or_default();
            for svc in info.services.values() {
                if svc.name != iface {
                    continue;
                }
                let port = svc
                    .port
                    .filter(|p| *p != 0)
                    .or_else(|| {
                        endpoints
                            .iter()
                            .find(|e| e.protocol == svc.protocol)
                            .map(|e| e.port)
                    })
                    .or(inst.port);
                let Some(port) = port else { continue };
                let mut url = Url::new(
                    &svc.protocol,
                    &inst.address,
                    Some(port),
                    svc.path.as_deref().unwrap_or(&svc.name),
                );
                for (k, v) in &svc.params {
                    url.set_param(k, v);
                }
                for (k, v) in &meta {
                    if !k.starts_with("dubbo.") && url.param(k).is_none() {
                        url.set_param(k, v);
                    }
                }
                url.set_param("interface", &svc.name);
                if let Some(g) = svc.group.as_deref().filter(|g| !g.is_empty()) {
                    url.set_param("group", g);
                }
                if let Some(v) = svc.version.as_deref().filter(|v| !v.is_empty()) {
                    url.set_param("version", v);
                }
                if url.param("application").is_none() {
                    url.set_param("application", &app);
                }
                match filter.accept_url(&url) {
                    Ok(Some(i)) => out.push(i),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(path, "skipping application instance: {e}"),
                }
            }
        }
    }
    Ok(out)
}
