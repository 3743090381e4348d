use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use switchman_core::{Error, Result, Url};

use crate::{Registrar, Registry, StaticRegistry};

/// A registry that both subscribes and registers (ZooKeeper, Nacos).
trait Remote: Registry + Registrar {}
impl<T: Registry + Registrar> Remote for T {}

/// Opens a ZooKeeper or Nacos adapter; `Ok(None)` for any other scheme. The address may list
/// several servers (`h1:p,h2:p` in the authority, or `?backup=`): [`Url::parse_registry`].
fn open_remote(address: &str) -> Result<Option<Arc<dyn Remote>>> {
    let url = Url::parse_registry(address).map_err(|e| Error::bad_config(e.to_string()))?;
    let remote: Option<Arc<dyn Remote>> = match url.protocol() {
        #[cfg(feature = "zookeeper")]
        "zookeeper" | "zk" => Some(Arc::new(crate::zookeeper::ZookeeperRegistry::from_url(
            &url,
        )?)),
        #[cfg(feature = "nacos")]
        "nacos" => Some(Arc::new(crate::nacos::NacosRegistry::from_url(&url)?)),
        #[cfg(not(feature = "zookeeper"))]
        "zookeeper" | "zk" => return Err(feature_off(&url, "zookeeper")),
        #[cfg(not(feature = "nacos"))]
        "nacos" => return Err(feature_off(&url, "nacos")),
        _ => None,
    };
    Ok(remote)
}

/// A registry this build was compiled without.
#[cfg(not(all(feature = "zookeeper", feature = "nacos")))]
fn feature_off(url: &Url, feature: &str) -> Error {
    Error::bad_config(format!(
        "registry {}: this build has no {feature} registry: enable the `{feature}` feature of \
         the `switchman` crate (features = [\"{feature}\"])",
        url.redacted()
    ))
}

/// `host:port` (a name or IPv4 address, a port of digits), or a list of them.
fn looks_like_host_port(s: &str) -> bool {
    s.split(',').all(|one| match one.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && !port.is_empty()
                && port.chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    })
}

fn unknown(address: &str, what: &str) -> Error {
    let shown = Url::parse_registry(address)
        .map(|u| u.redacted())
        .unwrap_or_else(|_| address.to_string());
    Error::bad_config(format!(
        "registry {shown}: unknown or disabled registry type (expected {what})"
    ))
}

/// Opens a registry from its URL:
///
/// - `zookeeper://host:port[,host:port...][/chroot]?...` (feature `zookeeper`)
/// - `nacos://host:port[,host:port...]?namespace=..&group=..&username=..&password=..` (feature
///   `nacos`; also `?backup=host:port,...` and `?endpoint=` for an address server)
/// - `file:///path/providers.yaml` or a plain path: a [`StaticRegistry`] polled every second
///
/// Must be called inside a tokio runtime.
pub fn registry_from_url(address: &str) -> Result<Arc<dyn Registry>> {
    let address = address.trim();
    check_scheme(address)?;
    let file = if address.contains("://") {
        address.strip_prefix("file://")
    } else {
        Some(address)
    };
    if let Some(path) = file {
        if !address.contains("://") && looks_like_host_port(path) && !Path::new(path).exists() {
            // `127.0.0.1:2181` is a registry without its scheme far more often than a file.
            return Err(Error::bad_config(format!(
                "registry {path}: no such file; a registry address needs its scheme: \
                 zookeeper://{path} or nacos://{path}"
            )));
        }
        return Ok(Arc::new(StaticRegistry::from_file(
            path,
            Duration::from_secs(1),
        )?));
    }
    match open_remote(address)? {
        Some(remote) => Ok(remote),
        None => Err(unknown(address, "zookeeper://, nacos:// or a file path")),
    }
}

/// Opens the registry at `address` as [`registry_from_url`] does, its
/// application-level subscriptions fetching `MetadataInfo` through `cache` instead of the
/// process-wide cache: ZooKeeper and Nacos (`metadata_cache` on their adapters); other
/// registries, which have no application level, are opened as they are. `switchman::Reference`
/// opens its registry so when it has TLS settings (its MetadataService fetches go over TLS).
pub fn registry_with_cache(
    address: &str,
    cache: Arc<crate::metadata::MetadataCache>,
) -> Result<Arc<dyn Registry>> {
    let Ok(url) = Url::parse_registry(address.trim()) else {
        return registry_from_url(address);
    };
    match url.protocol() {
        #[cfg(feature = "zookeeper")]
        "zookeeper" | "zk" => Ok(Arc::new(
            crate::zookeeper::ZookeeperRegistry::from_url(&url)?.metadata_cache(cache),
        )),
        #[cfg(feature = "nacos")]
        "nacos" => Ok(Arc::new(
            crate::nacos::NacosRegistry::from_url(&url)?.metadata_cache(cache),
        )),
        _ => {
            drop(cache);
            registry_from_url(address)
        }
    }
}

/// Opens the provider side of a registry from its URL (`zookeeper://...`, `nacos://...`).
/// Must be called inside a tokio runtime.
pub fn registrar_from_url(address: &str) -> Result<Arc<dyn Registrar>> {
    let address = address.trim();
    check_scheme(address)?;
    match open_remote(address)? {
        Some(remote) => Ok(remote),
        None => Err(unknown(address, "zookeeper:// or nacos://")),
    }
}

/// A registry scheme followed by something other than `://` (`zookeeper:/h:2181`,
/// `nacos:h:8848`) is a mistyped registry URL, not a file name: say so.
fn check_scheme(address: &str) -> Result<()> {
    let Some((scheme, rest)) = address.split_once(':') else {
        return Ok(());
    };
    let known = ["zookeeper", "zk", "nacos", "file"];
    if known.contains(&scheme.to_ascii_lowercase().as_str()) && !rest.starts_with("//") {
        let shown = address
            .split_once('@')
            .map_or(address.to_string(), |(_, host)| {
                format!("{scheme}:***@{host}")
            });
        return Err(Error::bad_config(format!(
            "registry {shown}: a malformed registry URL (expected {scheme}://host:port)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "zookeeper")]
    #[tokio::test]
    async fn zookeeper_connect_strings_open_both_sides() {
        for addr in [
            "zookeeper://127.0.0.1:2181",
            "zookeeper://127.0.0.1:2181,127.0.0.1:2182/chroot",
        ] {
            assert!(registry_from_url(addr).is_ok(), "{addr}");
            assert!(registrar_from_url(addr).is_ok(), "{addr}");
        }
    }

    #[cfg(feature = "nacos")]
    #[tokio::test]
    async fn nacos_server_lists_open_both_sides() {
        for addr in [
            "nacos://127.0.0.1:8848,127.0.0.1:8858",
            "nacos://127.0.0.1:8848?backup=127.0.0.1:8858,127.0.0.1",
            "nacos://127.0.0.1?endpoint=127.0.0.1:8080",
        ] {
            assert!(registry_from_url(addr).is_ok(), "{addr}");
            assert!(registrar_from_url(addr).is_ok(), "{addr}");
        }
    }

    #[tokio::test]
    async fn bad_server_lists_name_the_address() {
        for (bad, want) in [
            ("nacos://127.0.0.1:8848,,127.0.0.1:8858", "empty server"),
            ("nacos://127.0.0.1:8848,h:x", "port is not a number"),
            ("nacos://127.0.0.1:8848,", "empty server"),
            ("zookeeper://h:1,", "empty server"),
            ("zk://,h:1/root", "empty server"),
        ] {
            let e = registry_from_url(bad).unwrap_err();
            assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig, "{bad}");
            assert!(e.to_string().contains(want), "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{bad}: {e}");
            assert!(registrar_from_url(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn malformed_registry_urls_are_reported_as_such() {
        for bad in [
            "zookeeper:/127.0.0.1:2181",
            "nacos:127.0.0.1:8848",
            "ZK:/h:1",
        ] {
            let e = registry_from_url(bad).unwrap_err();
            assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
            assert!(
                e.to_string().contains("a malformed registry URL"),
                "{bad}: {e}"
            );
            assert!(registrar_from_url(bad).is_err());
        }
        let e = registry_from_url("nacos:user:pw@h:1").unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
    }

    /// Built without a registry feature (`cargo test -p switchman-discovery`, default
    /// features; the workspace build turns them on), its URL names the feature to enable.
    #[cfg(not(feature = "nacos"))]
    #[test]
    fn a_registry_built_without_its_feature_names_the_feature() {
        let e = registry_from_url("nacos://u:pw@127.0.0.1:8848").unwrap_err();
        assert!(
            e.to_string()
                .contains("enable the `nacos` feature of the `switchman` crate"),
            "{e}"
        );
        assert!(!e.to_string().contains("pw@"), "{e}");
    }

    #[tokio::test]
    async fn a_host_and_port_without_a_scheme_is_told_to_add_one() {
        for bare in ["127.0.0.1:2181", "zk-1.prod:2181,zk-2.prod:2181"] {
            let e = registry_from_url(bare).unwrap_err().to_string();
            assert!(
                e.contains(&format!("zookeeper://{bare} or nacos://{bare}")),
                "{e}"
            );
        }
        // A real path is still a file, and a missing one says so.
        let e = registry_from_url("providers.yaml").unwrap_err().to_string();
        assert!(!e.contains("needs its scheme"), "{e}");
    }

    #[tokio::test]
    async fn unknown_schemes_are_named_and_credentials_hidden() {
        let e = registry_from_url("eureka://admin:s3cret@h:1").unwrap_err();
        assert!(e.to_string().contains("eureka://admin:***@h:1"), "{e}");
        assert!(!e.to_string().contains("s3cret"));
        let e = registrar_from_url("/tmp/providers.yaml").unwrap_err();
        assert!(e.to_string().contains("/tmp/providers.yaml"), "{e}");
        assert!(
            registry_from_url("/nonexistent/providers.yaml")
                .unwrap_err()
                .to_string()
                .contains("/nonexistent")
        );
    }
}
