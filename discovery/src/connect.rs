use std::sync::Arc;
use std::time::Duration;

use switchman_core::{Error, Result, Url};

use crate::{Registrar, Registry, StaticRegistry};

/// Opens a registry from its URL:
///
/// - `zookeeper://host:port[,host:port...][/chroot]?...` (feature `zookeeper`)
/// - `nacos://host:port?namespace=..&group=..&username=..&password=..` (feature `nacos`)
/// - `file:///path/providers.yaml` or a plain path: a [`StaticRegistry`] polled every second
///
/// Must be called inside a tokio runtime.
pub fn registry_from_url(address: &str) -> Result<Arc<dyn Registry>> {
    let address = address.trim();
    if !address.contains("://") {
        return Ok(Arc::new(StaticRegistry::from_file(
            address,
            Duration::from_secs(1),
        )?));
    }
    if let Some(path) = address.strip_prefix("file://") {
        return Ok(Arc::new(StaticRegistry::from_file(
            path,
            Duration::from_secs(1),
        )?));
    }
    let url = Url::parse(address).map_err(|e| Error::bad_config(e.to_string()))?;
    match url.protocol() {
        #[cfg(feature = "zookeeper")]
        "zookeeper" | "zk" => Ok(Arc::new(crate::zookeeper::ZookeeperRegistry::from_url(
            &url,
        )?)),
        #[cfg(feature = "nacos")]
        "nacos" => Ok(Arc::new(crate::nacos::NacosRegistry::from_url(&url)?)),
        other => Err(Error::bad_config(format!(
            "registry {}: unknown or disabled registry type {other:?} (expected zookeeper://, nacos:// or a file path)",
            url.redacted()
        ))),
    }
}

/// Opens the provider side of a registry from its URL (`zookeeper://...`, `nacos://...`).
/// Must be called inside a tokio runtime.
pub fn registrar_from_url(address: &str) -> Result<Arc<dyn Registrar>> {
    #[cfg(feature = "zookeeper")]
    if let Some(r) = zookeeper_server_list(address.trim())? {
        return Ok(Arc::new(r));
    }
    let url = Url::parse(address.trim()).map_err(|e| Error::bad_config(e.to_string()))?;
    match url.protocol() {
        #[cfg(feature = "zookeeper")]
        "zookeeper" | "zk" => Ok(Arc::new(crate::zookeeper::ZookeeperRegistry::from_url(
            &url,
        )?)),
        #[cfg(feature = "nacos")]
        "nacos" => Ok(Arc::new(crate::nacos::NacosRegistry::from_url(&url)?)),
        other => Err(Error::bad_config(format!(
            "registry {}: cannot register providers in {other:?} (expected zookeeper:// or nacos://)",
            url.redacted()
        ))),
    }
}

/// `zookeeper://h1:2181,h2:2181[/chroot]`: a server list is not a single URL authority, so it
/// goes to the adapter's own parser.
#[cfg(feature = "zookeeper")]
fn zookeeper_server_list(address: &str) -> Result<Option<crate::zookeeper::ZookeeperRegistry>> {
    let rest = match address
        .strip_prefix("zookeeper://")
        .or_else(|| address.strip_prefix("zk://"))
    {
        Some(r) => r,
        None => return Ok(None),
    };
    let servers = rest.split(['/', '?']).next().unwrap_or("");
    if !servers.contains(',') {
        return Ok(None);
    }
    crate::zookeeper::ZookeeperRegistry::from_address(address).map(Some)
}
