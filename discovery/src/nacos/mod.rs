//! The Nacos adapter (feature `nacos`).

use switchman_core::{BoxFuture, Error, Result, ServiceKey, Url};

use crate::{Registry, UpdateReceiver};

/// A Nacos registry.
#[derive(Debug, Clone)]
pub struct NacosRegistry {
    url: Url,
}

impl NacosRegistry {
    /// Validates the registry URL; connects lazily, in the background.
    pub fn from_url(url: &Url) -> Result<Self> {
        Ok(NacosRegistry { url: url.clone() })
    }
}

impl Registry for NacosRegistry {
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

impl crate::Registrar for NacosRegistry {
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
