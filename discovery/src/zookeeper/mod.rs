//! The Zookeeper adapter (feature `zookeeper`).

use switchman_core::{BoxFuture, Error, Result, ServiceKey, Url};

use crate::{Registry, UpdateReceiver};

/// A Zookeeper registry.
#[derive(Debug, Clone)]
pub struct ZookeeperRegistry {
    url: Url,
}

impl ZookeeperRegistry {
    /// Validates the registry URL; connects lazily, in the background.
    pub fn from_url(url: &Url) -> Result<Self> {
        Ok(ZookeeperRegistry { url: url.clone() })
    }
}

impl Registry for ZookeeperRegistry {
    fn subscribe<'a>(&'a self, service: &'a ServiceKey) -> BoxFuture<'a, Result<UpdateReceiver>> {
        Box::pin(async move {
            Err(Error::new(
                switchman_core::ErrorKind::Unsupported,
                format!(
                    "{}: subscribing to {service} is not implemented yet",
                    self.url.redacted()
                ),
            ))
        })
    }
}

impl crate::Registrar for ZookeeperRegistry {
    fn register<'a>(&'a self, instance: &'a switchman_core::Instance) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            Err(Error::new(
                switchman_core::ErrorKind::Unsupported,
                format!(
                    "{}: registering {} is not implemented yet",
                    self.url.redacted(),
                    instance.address()
                ),
            ))
        })
    }
    fn unregister<'a>(
        &'a self,
        instance: &'a switchman_core::Instance,
    ) -> BoxFuture<'a, Result<()>> {
        self.register(instance)
    }
}
