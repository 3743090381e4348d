//! Dubbo 3 application-level discovery on ZooKeeper.
//!
//! - `/dubbo/mapping/{interface}`: comma-separated applications that provide the interface
//!   (plus the registry URL's `provided-by` list).
//! - `/services/{app}/{host:port}`: one Curator `ServiceInstance` JSON per instance; its
//!   `payload.metadata` carries `dubbo.metadata.revision`, `dubbo.metadata.storage-type`,
//!   `dubbo.endpoints` (`[{"port":..,"protocol":..}]`) and, for local metadata,
//!   `dubbo.metadata-service.url-params` (where its `MetadataService` answers).
//! - `/dubbo/metadata/{app}/{revision}`: the `MetadataInfo` JSON (`services` keyed by
//!   `group/interface:version:protocol`, each with `name`, `group`, `version`, `protocol`,
//!   `port`, `path`, `params`), present when providers store metadata remotely.
//!
//! A revision's `MetadataInfo` comes from the metadata report when it is there; otherwise, for
//! instances with `local` metadata (Dubbo 3's default), from the provider's own
//! `MetadataService`, through the [`MetadataCache`](crate::metadata::MetadataCache) (one fetch
//! per application and revision, shared by every instance and subscription, retried while
//! it fails). Instances whose metadata is not known yet keep the endpoints of their previous
//! revision, if any; instances whose metadata cannot be had are held out (the cache warns
//! once with the reason) and join when it arrives, without blocking the others.
//!
//! State is kept between reads: an event under `/services/{app}/{node}` re-reads that one
//! node, `/services/{app}` its children (only new ones are read), the mapping node the
//! applications; a node whose bytes did not change is not parsed again, and endpoints whose
//! node and metadata did not change keep their `Arc`s. A revision change on an instance is
//! one node read and one fetch.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use serde::Deserialize;
use switchman_core::{Instance, Result as CoreResult, Url};
use tracing::{debug, warn};

use super::ZkConfig;
use super::nodes::{MAX_NODE_DATA, ProviderFilter};
use super::reader::Reader;
use super::session::CallError;
use crate::metadata::resolver::{Built, Key, Resolver};
use crate::metadata::{AppInstance, FetchSettings};

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
    metadata: BTreeMap<String, serde_json::Value>,
}

/// `metadata-timeout` and `metadata-retry` of the registry URL.
pub(crate) fn fetch_settings(url: &Url) -> CoreResult<FetchSettings> {
    let d = FetchSettings::default();
    Ok(FetchSettings {
        timeout: super::ms_param(url, "metadata-timeout", d.timeout)?,
        retry_max: super::ms_param(url, "metadata-retry", d.retry_max)?,
        retry_min: d
            .retry_min
            .min(super::ms_param(url, "metadata-retry", d.retry_max)?),
        ..d
    })
}

async fn read_small(reader: &mut Reader<'_>, path: &str) -> Result<Option<Vec<u8>>, CallError> {
    match reader.data(path).await? {
        Some(data) if data.len() > MAX_NODE_DATA => {
            warn!(
                path,
                bytes = data.len(),
                "node over the {MAX_NODE_DATA}-byte limit skipped"
            );
            Ok(None)
        }
        other => Ok(other),
    }
}

/// The Curator JSON of `/services/{app}/{child}` as an [`AppInstance`].
pub(crate) fn parse_node(app: &str, data: &[u8]) -> Result<AppInstance, String> {
    let inst: CuratorInstance =
        serde_json::from_slice(data).map_err(|e| format!("not Curator JSON: {e}"))?;
    let metadata = inst
        .payload
        .map(|p| p.metadata)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k, s)),
            serde_json::Value::Number(n) => Some((k, n.to_string())),
            serde_json::Value::Bool(b) => Some((k, b.to_string())),
            _ => None,
        })
        .collect();
    if inst.address.is_empty() {
        return Err("no address".into());
    }
    Ok(AppInstance {
        app: app.to_string(),
        host: inst.address,
        port: inst.port.unwrap_or(0),
        metadata,
    })
}

#[derive(Debug)]
struct Node {
    data: Vec<u8>,
    parsed: Option<Arc<AppInstance>>,
    built: Option<Built>,
}

/// The application-level state of one subscription (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct AppLevel {
    apps: BTreeSet<String>,
    /// Whether the applications were read once.
    started: bool,
    nodes: BTreeMap<String, BTreeMap<String, Node>>,
    resolver: Resolver,
}

impl AppLevel {
    /// Resolves when the metadata cache has news (a fetch succeeded or failed); never when
    /// no fetch was started.
    pub(crate) async fn changed(&mut self) {
        self.resolver.changed().await
    }

    /// The applications read for the interface (the mapping's and `provided-by`), for the
    /// `applications:` entries of a migration rule.
    pub(crate) fn apps(&self) -> &BTreeSet<String> {
        &self.apps
    }

    /// See [`Resolver::hold_first_list`].
    pub(crate) fn hold_first_list(&mut self, nothing: bool, settings: &FetchSettings) -> bool {
        self.resolver.hold_first_list(nothing, settings)
    }

    /// Reads what changed and returns the application-level instances of the filter's
    /// interface. `full` re-reads everything (a new session, a reconnect); otherwise only the
    /// `paths` that events named (under `/services`, `/dubbo/mapping`, `/dubbo/metadata`), and
    /// revisions still waiting are looked up again in the cache.
    pub(crate) async fn refresh(
        &mut self,
        reader: &mut Reader<'_>,
        cfg: &ZkConfig,
        filter: &ProviderFilter,
        full: bool,
        paths: &BTreeSet<String>,
    ) -> Result<Vec<Arc<Instance>>, CallError> {
        let full = full || !self.started;
        let iface = filter.key.interface.to_string();
        let mapping = format!("{}/mapping/{iface}", super::DUBBO_ROOT);
        let mut fresh_apps = BTreeSet::new();
        if full || paths.contains(&mapping) {
            let mut apps: BTreeSet<String> = cfg.provided_by.iter().cloned().collect();
            // The registry URL's provided-by names the applications and the mapping is not
            // read, as in Dubbo (ServiceDiscoveryRegistry looks it up only when none is named).
            if apps.is_empty()
                && let Some(data) = read_small(reader, &mapping).await?
            {
                let text = String::from_utf8_lossy(&data);
                apps.extend(
                    text.split(',')
                        .map(str::trim)
                        .filter(|a| !a.is_empty() && !a.contains('/'))
                        .map(str::to_string),
                );
            }
            fresh_apps = apps.difference(&self.apps).cloned().collect();
            self.nodes.retain(|a, _| apps.contains(a));
            self.apps = apps;
            self.started = true;
        }
        for app in self.apps.clone() {
            let dir = format!("/services/{app}");
            let mut read = HashSet::new();
            if full || fresh_apps.contains(&app) || paths.contains(&dir) {
                match reader.children(&dir).await? {
                    None => {
                        self.nodes.remove(&app);
                    }
                    Some(children) => {
                        let names: HashSet<&String> = children.iter().collect();
                        let known = self.nodes.entry(app.clone()).or_default();
                        known.retain(|c, _| names.contains(c));
                        let unread: Vec<String> = children
                            .iter()
                            .filter(|c| full || !known.contains_key(*c))
                            .cloned()
                            .collect();
                        for child in unread {
                            self.read_node(reader, &app, &child).await?;
                            read.insert(child);
                        }
                    }
                }
            }
            let prefix = format!("{dir}/");
            let changed: Vec<String> = paths
                .range(prefix.clone()..)
                .take_while(|p| p.starts_with(&prefix))
                .filter_map(|p| p.strip_prefix(&prefix))
                .filter(|c| !c.is_empty() && !c.contains('/') && !read.contains(*c))
                .map(str::to_string)
                .collect();
            for child in changed {
                self.read_node(reader, &app, &child).await?;
            }
        }
        // The revisions in use: the metadata report first, then the cache.
        let report_path = |k: &Key| format!("{}/metadata/{}/{}", super::DUBBO_ROOT, k.0, k.1);
        let to_read = self.resolver.begin(
            self.nodes
                .values()
                .flat_map(|n| n.values())
                .filter_map(|n| n.parsed.as_ref()),
            |k| full || paths.contains(&report_path(k)),
        );
        for key in to_read {
            let path = report_path(&key);
            let data = read_small(reader, &path).await?;
            self.resolver.report(&key, data.as_deref(), &path);
        }
        let cache = cfg
            .metadata_cache
            .get()
            .cloned()
            .or_else(crate::metadata::shared_cache);
        self.resolver.finish(cache.as_deref(), &cfg.metadata_fetch);
        let mut out = Vec::new();
        for (app, nodes) in &mut self.nodes {
            for (child, node) in nodes.iter_mut() {
                let Some(inst) = &node.parsed else { continue };
                let source = format!("/services/{app}/{child}");
                out.extend(
                    self.resolver
                        .endpoints(inst, &mut node.built, &iface, &source, |u| {
                            filter.accept_url(u)
                        })
                        .iter()
                        .cloned(),
                );
            }
        }
        Ok(out)
    }

    /// Re-reads one instance node (gone: forgotten). Unchanged bytes are not parsed again.
    async fn read_node(
        &mut self,
        reader: &mut Reader<'_>,
        app: &str,
        child: &str,
    ) -> Result<(), CallError> {
        let path = format!("/services/{app}/{child}");
        let data = read_small(reader, &path).await?;
        let nodes = self.nodes.entry(app.to_string()).or_default();
        let Some(data) = data else {
            nodes.remove(child);
            return Ok(());
        };
        if nodes.get(child).is_some_and(|n| n.data == data) {
            return Ok(());
        }
        let parsed = match parse_node(app, &data) {
            Ok(i) => {
                if i.revision().is_none() {
                    debug!(path, "instance without a metadata revision skipped");
                }
                Some(Arc::new(i))
            }
            Err(e) => {
                warn!(path, "skipping application instance: {e}");
                None
            }
        };
        // The endpoints of the previous revision stay until the new one is known.
        let built = nodes.remove(child).and_then(|n| n.built);
        nodes.insert(
            child.to_string(),
            Node {
                data,
                parsed,
                built,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::StorageType;

    #[test]
    fn curator_json_parses_and_bad_nodes_say_why() {
        let data = br#"{"name":"appd","id":"127.0.0.1:35521","address":"127.0.0.1","port":35521,"sslPort":null,"payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":"127.0.0.1:35521","name":"appd","metadata":{"dubbo.endpoints":"[{\"port\":35521,\"protocol\":\"dubbo\"}]","dubbo.metadata-service.url-params":"{\"prefer.serialization\":\"hessian2,fastjson2\",\"version\":\"1.0.0\",\"dubbo\":\"2.0.2\",\"release\":\"3.3.6\",\"side\":\"provider\",\"port\":\"35521\",\"protocol\":\"dubbo\"}","dubbo.metadata.revision":"19def50c50f6a5dc8a902f068742937c","dubbo.metadata.storage-type":"local","meta-v":"1.0.0","timestamp":"1796144892768"}},"registrationTimeUTC":1796144893997,"serviceType":"DYNAMIC","uriSpec":null}"#;
        let i = parse_node("appd", data).unwrap();
        assert_eq!((i.host.as_str(), i.port), ("127.0.0.1", 35521));
        assert_eq!(i.revision(), Some("19def50c50f6a5dc8a902f068742937c"));
        assert_eq!(i.storage_type(), StorageType::Local);
        let t = i
            .metadata_targets("19def50c50f6a5dc8a902f068742937c")
            .unwrap();
        assert_eq!((t[0].protocol.as_str(), t[0].port), ("dubbo", 35521));
        assert!(parse_node("a", b"{").unwrap_err().contains("Curator"));
        assert!(
            parse_node("a", br#"{"address":""}"#)
                .unwrap_err()
                .contains("no address")
        );
    }

    #[test]
    fn fetch_settings_from_the_registry_url() {
        let s = fetch_settings(
            &Url::parse("zookeeper://h:1?metadata-timeout=800&metadata-retry=500").unwrap(),
        )
        .unwrap();
        assert_eq!(s.timeout, std::time::Duration::from_millis(800));
        assert_eq!(s.retry_max, std::time::Duration::from_millis(500));
        assert!(s.retry_min <= s.retry_max);
        let e = fetch_settings(&Url::parse("zookeeper://h:1?metadata-timeout=soon").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("metadata-timeout"), "{e}");
    }
}
