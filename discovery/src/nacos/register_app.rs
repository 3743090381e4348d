//! Application-level registration on Nacos (`register-mode=instance` or `all`), as Java Dubbo
//! 3.3's `NacosServiceDiscovery`, `NacosMetadataReport` and `MetadataServiceNameMapping`
//! write it (the layout the consumer side reads, `metadata/nacos.rs`):
//!
//! - an ephemeral instance of the Nacos service `{app}` in the registry's group, its address
//!   the provider's and its metadata Dubbo's instance metadata
//!   ([`AppPublication::metadata`]); the SDK registers it again after a reconnect;
//! - the mapping config `{interface}` in group `mapping`: the application appended to the
//!   comma-separated list (a CAS publish on the md5 read, retried on a conflict), never
//!   dropping another application; left in place on unregister, as in Dubbo;
//! - with `metadata-type=remote`, the report config `{app}` in group `{revision}`.

use std::collections::{BTreeMap, HashMap};

use nacos_sdk::api::naming::ServiceInstance;
use switchman_core::{Error, Instance, Result, Url};
use tracing::{info, warn};

use super::mapping::DEFAULT_CLUSTER;
use super::{Clients, NacosRegistry, REGISTER_WAIT, REQUEST_TIMEOUT};
use crate::metadata::nacos::{mapping_config, read_config, report_config};
use crate::metadata::{
    AppPublication, AppRegistrations, AppRemoval, ExportSettings, RegisterMode, StorageType,
};

/// CAS attempts of the mapping under concurrent writers.
const MAPPING_CAS_TRIES: u32 = 10;

/// The application-level half of a Nacos registrar.
#[derive(Debug)]
pub(crate) struct NacosAppRegistrar {
    regs: AppRegistrations,
    /// What is registered, by application and address.
    registered: tokio::sync::Mutex<BTreeMap<String, BTreeMap<String, ServiceInstance>>>,
}

impl NacosAppRegistrar {
    /// Reads `register-mode` and `metadata-type` of the registry URL.
    pub(crate) fn from_url(url: &Url) -> Result<Self> {
        Ok(NacosAppRegistrar {
            regs: AppRegistrations::new(ExportSettings::from_url(url)?),
            registered: tokio::sync::Mutex::new(BTreeMap::new()),
        })
    }

    /// The registry's register mode.
    pub(crate) fn mode(&self) -> RegisterMode {
        self.regs.settings().mode
    }
}

impl Drop for NacosAppRegistrar {
    fn drop(&mut self) {
        // The instances go with the SDK client; the revisions are no longer served.
        self.regs.clear();
    }
}

fn service_instance(p: &AppPublication) -> ServiceInstance {
    ServiceInstance {
        instance_id: None,
        ip: p.host.clone(),
        port: i32::from(p.port),
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: Some(DEFAULT_CLUSTER.to_string()),
        service_name: None,
        metadata: p
            .metadata()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>(),
    }
}

async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    fut: impl std::future::Future<Output = std::result::Result<T, E>>,
) -> Result<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::transport(format!("{what}: {e}"))),
        Err(_) => Err(Error::timeout(format!(
            "{what}: no answer within {REQUEST_TIMEOUT:?}"
        ))),
    }
}

impl NacosRegistry {
    /// Registers (`register`) or removes `instance`'s service at application level.
    pub(super) async fn app_level(&self, instance: &Instance, register: bool) -> Result<()> {
        let me = &self.inner.app;
        let removal = if register {
            None
        } else {
            match me.regs.remove(instance) {
                None => return Ok(()),
                r => r,
            }
        };
        let publication = if register {
            Some(me.regs.add(instance)?)
        } else {
            match &removal {
                Some(AppRemoval::Update(p)) => Some(p.clone()),
                _ => None,
            }
        };
        let clients = self.clients_within(REGISTER_WAIT).await?;
        let group = self.inner.opts.group.clone();
        let redacted = &self.inner.redacted;
        if let Some(p) = &publication
            && me.regs.settings().storage == StorageType::Remote
        {
            publish_report(&clients, p, redacted).await?;
        }
        let mut registered = me.registered.lock().await;
        match (&publication, &removal) {
            (Some(p), _) => {
                let set = registered.entry(p.app.clone()).or_default();
                set.insert(p.id(), service_instance(p));
                send(&clients, &p.app, &group, set, None, redacted).await?;
                if register {
                    append_mapping(
                        &clients,
                        instance.service().interface.as_ref(),
                        &p.app,
                        redacted,
                    )
                    .await?;
                }
                info!(registry = %redacted, app = %p.app, instance = %p.id(), revision = %p.info.revision,
                    service = %instance.service(), "application instance registered");
            }
            (None, Some(AppRemoval::Gone { app, id, .. })) => {
                let set = registered.entry(app.clone()).or_default();
                let gone = set.remove(id);
                if let Some(si) = gone {
                    send(&clients, app, &group, set, Some(si), redacted).await?;
                }
                if set.is_empty() {
                    registered.remove(app);
                }
                info!(registry = %redacted, %app, instance = %id, "application instance unregistered");
            }
            _ => {}
        }
        Ok(())
    }
}

/// Sends the application's instances: one alone with a plain register, several as a batch
/// (see `NacosRegistry::send_instance` for why); `gone` is deregistered first.
async fn send(
    clients: &Clients,
    app: &str,
    group: &str,
    set: &BTreeMap<String, ServiceInstance>,
    gone: Option<ServiceInstance>,
    redacted: &str,
) -> Result<()> {
    let what = format!("nacos {redacted}: application instance of {app}");
    if let Some(si) = gone {
        bounded(
            &what,
            clients
                .naming
                .deregister_instance(app.to_string(), Some(group.to_string()), si),
        )
        .await?;
    }
    let mut all = set.values().cloned();
    match (all.next(), set.len()) {
        (None, _) => Ok(()),
        (Some(si), 1) => {
            bounded(
                &what,
                clients
                    .naming
                    .register_instance(app.to_string(), Some(group.to_string()), si),
            )
            .await
        }
        _ => {
            bounded(
                &what,
                clients.naming.batch_register_instance(
                    app.to_string(),
                    Some(group.to_string()),
                    set.values().cloned().collect(),
                ),
            )
            .await
        }
    }
}

fn config_client<'a>(
    clients: &'a Clients,
    redacted: &str,
) -> Result<&'a nacos_sdk::api::config::ConfigService> {
    clients.config.as_ref().ok_or_else(|| {
        Error::bad_config(format!(
            "nacos {redacted}: register-mode=instance needs the config service, which this registry does not start"
        ))
    })
}

async fn publish_report(clients: &Clients, p: &AppPublication, redacted: &str) -> Result<()> {
    let config = config_client(clients, redacted)?;
    let (data_id, group) = report_config(&p.app, &p.info.revision);
    let what = format!("nacos {redacted}: metadata report {data_id} in group {group}");
    let ok = bounded(
        &what,
        config.publish_config(
            data_id.clone(),
            group.clone(),
            p.info.to_report_json(),
            None,
        ),
    )
    .await?;
    if ok {
        Ok(())
    } else {
        Err(Error::transport(format!("{what}: refused")))
    }
}

/// Appends `app` to the mapping config of `interface` (see the module docs).
async fn append_mapping(
    clients: &Clients,
    interface: &str,
    app: &str,
    redacted: &str,
) -> Result<()> {
    let config = config_client(clients, redacted)?;
    let (data_id, group) = mapping_config(interface);
    let what = format!("nacos {redacted}: mapping {data_id} in group {group}");
    for _ in 0..MAPPING_CAS_TRIES {
        let current = match tokio::time::timeout(
            REQUEST_TIMEOUT,
            config.get_config(data_id.clone(), group.clone()),
        )
        .await
        {
            Ok(Ok(resp)) => Some((resp.content().to_string(), resp.md5().to_string())),
            Ok(Err(nacos_sdk::api::error::Error::ConfigNotFound(_))) => None,
            Ok(Err(e)) => return Err(Error::transport(format!("{what}: {e}"))),
            Err(_) => {
                return Err(Error::timeout(format!(
                    "{what}: no answer within {REQUEST_TIMEOUT:?}"
                )));
            }
        };
        let published = match current {
            Some((text, _)) if text.split(',').map(str::trim).any(|a| a == app) => return Ok(()),
            Some((text, md5)) if !text.trim().is_empty() && !md5.is_empty() => {
                bounded(
                    &what,
                    config.publish_config_cas(
                        data_id.clone(),
                        group.clone(),
                        format!("{text},{app}"),
                        None,
                        md5,
                    ),
                )
                .await
            }
            _ => {
                bounded(
                    &what,
                    config.publish_config(data_id.clone(), group.clone(), app.to_string(), None),
                )
                .await
            }
        };
        match published {
            Ok(true) => {
                // Nacos may not check the md5 (rnacos does not): read back, try again if a
                // concurrent writer's list replaced ours.
                match read_config(config, &data_id, &group).await {
                    Ok(Some(t)) if t.split(',').map(str::trim).any(|a| a == app) => return Ok(()),
                    _ => continue,
                }
            }
            Ok(false) => continue,
            Err(e) => {
                warn!("{e}");
                continue;
            }
        }
    }
    Err(Error::transport(format!(
        "{what}: {app} could not be appended after {MAPPING_CAS_TRIES} attempts"
    )))
}
