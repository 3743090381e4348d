//! Application-level registration on ZooKeeper (`register-mode=instance` or `all`), as Java
//! Dubbo 3.3's `ZookeeperServiceDiscovery`, `ZookeeperMetadataReport` and
//! `MetadataServiceNameMapping` write it:
//!
//! - the ephemeral Curator node `/services/{app}/{host}:{port}`
//!   ([`AppPublication::curator_json`]), kept by the session like the interface-level
//!   provider nodes (re-created on every new session, with the current revision's data);
//! - the persistent mapping `/dubbo/mapping/{interface}`: the application appended to the
//!   comma-separated list with a versioned write (retried on a conflict), never dropping
//!   another application; not removed on unregister (Dubbo leaves it);
//! - with `metadata-type=remote`, the persistent report `/dubbo/metadata/{app}/{revision}`
//!   (the `MetadataInfo` JSON).
//!
//! What does not reach ZooKeeper within the registration's deadline is retried in the
//! background, bounded, while the instance is still registered.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchman_core::{Error, Instance, Result, Url};
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::session::{CallError, Session, acls, call, ensure_ephemeral};
use super::{DUBBO_ROOT, delete_node, forget_and_delete};
use crate::metadata::{
    AppPublication, AppRegistrations, AppRemoval, ExportSettings, RegisterMode, StorageType,
};

/// What the warnings call the node this registrar writes.
const APP_NODE: &str = "application instance node";

/// Background retries of a write that failed (each after a pause of up to 5 s).
const BACKGROUND_TRIES: u32 = 120;
/// Versioned-write attempts of the mapping under concurrent writers.
const MAPPING_CAS_TRIES: u32 = 10;

/// The application-level half of a ZooKeeper registrar (see the module docs).
#[derive(Debug)]
pub(crate) struct ZkAppRegistrar {
    regs: AppRegistrations,
    session: Arc<Session>,
    /// Instance node paths kept by the session.
    kept: Mutex<BTreeSet<String>>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn instance_path(app: &str, id: &str) -> String {
    format!("/services/{app}/{id}")
}

/// What one publication writes besides the instance node.
#[derive(Debug, Clone)]
struct Writes {
    path: String,
    data: Vec<u8>,
    mapping: String,
    app: String,
    report: Option<(String, Vec<u8>)>,
}

impl ZkAppRegistrar {
    /// Reads `register-mode` and `metadata-type` of the registry URL.
    pub(crate) fn from_url(url: &Url, session: Arc<Session>) -> Result<Self> {
        Ok(ZkAppRegistrar {
            regs: AppRegistrations::new(ExportSettings::from_url(url)?),
            session,
            kept: Mutex::new(BTreeSet::new()),
        })
    }

    /// The registry's register mode.
    pub(crate) fn mode(&self) -> RegisterMode {
        self.regs.settings().mode
    }

    fn writes(&self, p: &AppPublication, instance: &Instance) -> Writes {
        let report = (self.regs.settings().storage == StorageType::Remote).then(|| {
            (
                format!("{DUBBO_ROOT}/metadata/{}/{}", p.app, p.info.revision),
                p.info.to_report_json().into_bytes(),
            )
        });
        Writes {
            path: instance_path(&p.app, &p.id()),
            data: p.curator_json(now_ms()),
            mapping: format!(
                "{DUBBO_ROOT}/mapping/{}",
                instance.service().interface.as_ref()
            ),
            app: p.app.clone(),
            report,
        }
    }

    /// Publishes `instance`'s application instance, mapping and (remote) report.
    pub(crate) async fn register(&self, instance: &Instance) -> Result<()> {
        let p = self.regs.add(instance)?;
        let w = self.writes(&p, instance);
        self.session.keep(&w.path, &w.data);
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(w.path.clone());
        let cfg = &self.session.config;
        let deadline = tokio::time::Instant::now() + cfg.timeout * 2;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.write_all(&w, left).await {
                Ok(()) => {
                    info!(registry = %cfg.redacted, app = %p.app, instance = %p.id(),
                        revision = %p.info.revision, service = %instance.service(),
                        "application instance registered");
                    return Ok(());
                }
                Err(CallError::Refused(why)) => {
                    return Err(Error::bad_config(format!(
                        "registry {}: cannot register the application instance of {}: {why}",
                        cfg.redacted, p.app
                    )));
                }
                Err(CallError::Zk(
                    e @ (zk::Error::NoAuth | zk::Error::InvalidAcl | zk::Error::AuthFailed),
                )) => {
                    return Err(Error::bad_config(format!(
                        "registry {}: cannot write the application instance {}: {e}",
                        cfg.redacted, w.path
                    )));
                }
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    self.retry_in_background(w.clone());
                    return Err(Error::transport(format!(
                        "registry {}: application instance {} not registered yet ({e}); it will be written when ZooKeeper answers",
                        cfg.redacted, w.path
                    )));
                }
                Err(e) => {
                    debug!(path = %w.path, "application registration attempt failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn retry_in_background(&self, w: Writes) {
        let session = self.session.clone();
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(200);
            for _ in 0..BACKGROUND_TRIES {
                if !session.is_kept(&w.path) {
                    return;
                }
                let t = session.config.timeout;
                match write_all(&session, &w, t).await {
                    Ok(()) => {
                        info!(path = %w.path, "application instance registered after a retry");
                        return;
                    }
                    Err(e) => debug!(path = %w.path, "application registration retry failed: {e}"),
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            warn!(path = %w.path, "application instance still not fully written after {BACKGROUND_TRIES} retries; a new session re-creates the instance node");
        });
    }

    async fn write_all(&self, w: &Writes, wait: Duration) -> std::result::Result<(), CallError> {
        write_all(&self.session, w, wait).await
    }

    /// Removes `instance`'s service: the application instance goes with its last service
    /// (the mapping stays, as in Dubbo); otherwise its node gets the new revision.
    pub(crate) async fn unregister(&self, instance: &Instance) -> Result<()> {
        let Some(removal) = self.regs.remove(instance) else {
            return Ok(());
        };
        let cfg = &self.session.config;
        match removal {
            AppRemoval::Update(p) => {
                let w = self.writes(&p, instance);
                self.session.keep(&w.path, &w.data);
                match self.write_all(&w, cfg.timeout).await {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        self.retry_in_background(w.clone());
                        Err(Error::transport(format!(
                            "registry {}: cannot update {} now ({e}); retrying in the background",
                            cfg.redacted, w.path
                        )))
                    }
                }
            }
            AppRemoval::Gone { app, id, .. } => {
                let path = instance_path(&app, &id);
                self.session.forget(&path);
                self.kept
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&path);
                if delete_node(&self.session, &path, APP_NODE).await {
                    info!(registry = %cfg.redacted, %app, instance = %id, "application instance unregistered");
                    Ok(())
                } else {
                    Err(Error::transport(format!(
                        "registry {}: could not delete {path} now; it goes when the session ends",
                        cfg.redacted
                    )))
                }
            }
        }
    }
}

impl Drop for ZkAppRegistrar {
    fn drop(&mut self) {
        self.regs.clear();
        let paths = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()));
        forget_and_delete(&self.session, paths.into_iter().collect(), APP_NODE);
    }
}

async fn write_all(
    session: &Session,
    w: &Writes,
    wait: Duration,
) -> std::result::Result<(), CallError> {
    let conn = session.client(wait).await?;
    let client = &conn.client;
    let cfg = &session.config;
    let t = cfg.timeout;
    // The report first: a consumer that sees the new revision finds its metadata.
    if let Some((path, data)) = &w.report {
        put_persistent(client, session, path, data).await?;
    }
    ensure_ephemeral(client, cfg, &w.path, &w.data).await?;
    // Ours already (an earlier revision, or created by a new session): the current data.
    call(t, client.set_data(&w.path, &w.data, None)).await?;
    append_mapping(client, session, &w.mapping, &w.app).await
}

/// Creates or overwrites a persistent node (parents created).
async fn put_persistent(
    client: &zk::Client,
    session: &Session,
    path: &str,
    data: &[u8],
) -> std::result::Result<(), CallError> {
    let t = session.config.timeout;
    let mode = zk::CreateMode::Persistent.with_acls(acls(&session.config));
    if let Some((parent, _)) = path.rsplit_once('/')
        && !parent.is_empty()
    {
        call(t, client.mkdir(parent, &mode)).await?;
    }
    match call(t, client.create(path, data, &mode)).await {
        Ok(_) => Ok(()),
        Err(CallError::Zk(zk::Error::NodeExists)) => {
            call(t, client.set_data(path, data, None)).await.map(|_| ())
        }
        Err(e) => Err(e),
    }
}

/// Appends `app` to the comma-separated mapping node, as `ZookeeperMetadataReport.
/// registerServiceAppMapping` does: a versioned write of what was read plus `,app`, retried
/// on a conflict; nothing to do when `app` is listed already.
async fn append_mapping(
    client: &zk::Client,
    session: &Session,
    path: &str,
    app: &str,
) -> std::result::Result<(), CallError> {
    let t = session.config.timeout;
    let mode = zk::CreateMode::Persistent.with_acls(acls(&session.config));
    for _ in 0..MAPPING_CAS_TRIES {
        match call(t, client.get_data(path)).await {
            Ok((data, stat)) => {
                let text = String::from_utf8_lossy(&data).into_owned();
                if text.split(',').map(str::trim).any(|a| a == app) {
                    return Ok(());
                }
                let content = if text.trim().is_empty() {
                    app.to_string()
                } else {
                    format!("{text},{app}")
                };
                match call(
                    t,
                    client.set_data(path, content.as_bytes(), Some(stat.version)),
                )
                .await
                {
                    Ok(_) => return Ok(()),
                    Err(CallError::Zk(zk::Error::BadVersion | zk::Error::NoNode)) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(CallError::Zk(zk::Error::NoNode)) => {
                if let Some((parent, _)) = path.rsplit_once('/') {
                    call(t, client.mkdir(parent, &mode)).await?;
                }
                match call(t, client.create(path, app.as_bytes(), &mode)).await {
                    Ok(_) => return Ok(()),
                    Err(CallError::Zk(zk::Error::NodeExists)) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    warn!(
        path,
        app, "the interface-application mapping kept changing under us; not appended"
    );
    Err(CallError::Zk(zk::Error::BadVersion))
}
