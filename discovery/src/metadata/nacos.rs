//! Dubbo 3 application-level discovery on Nacos: the registry-neutral building blocks the
//! Nacos adapter's subscriptions use (`nacos/app.rs`). Layout, as Java Dubbo 3.3 writes it
//! (`NacosServiceDiscovery`, `NacosNamingServiceUtils`, `NacosMetadataReport`,
//! `MetadataServiceNameMapping`), checked against a Java 3.3 provider in rnacos 0.8.8:
//!
//! - application instances: the Nacos **service `{app}`** in the registry's group (Dubbo's
//!   `group`/`nacos.group` registry parameter, `DEFAULT_GROUP`), one instance per provider
//!   process, its Dubbo metadata (`dubbo.metadata.revision`, `dubbo.endpoints`,
//!   `dubbo.metadata-service.url-params`, `dubbo.metadata.storage-type`, `timestamp`, ...) as
//!   the instance metadata; consumers take the healthy, enabled ones (`selectInstances(..,
//!   true)`); the Nacos weight field is not Dubbo's weight (the service's `weight` parameter
//!   is);
//! - interface → applications: the **config** `data id = {interface}`, `group = mapping`,
//!   content `app1,app2` (`ServiceNameMapping.DEFAULT_MAPPING_GROUP`). Dubbo appends its
//!   application with a read, append and `publishConfigCas` (md5 of what it read, `"0"` for
//!   nothing) retried on conflict; Java Nacos enforces the md5, rnacos 0.8.8 ignores it
//!   (`cas_md5` is parsed, never checked), so two applications of one interface starting at
//!   the same moment leave only the last writer in the mapping. The registry's `provided-by`
//!   is the remedy;
//! - the metadata report (`metadata-type=remote`): the **config** `data id = {app}`,
//!   `group = {revision}`, content the `MetadataInfo` JSON.
//!
//! [`NacosAppLevel`] keeps one subscription's applications and instances and turns them into
//! endpoints through the shared [`Resolver`] (report first, then the provider's
//! `MetadataService` through the [`MetadataCache`](super::MetadataCache)), exactly as the
//! ZooKeeper adapter does; the adapter feeds it the mapping ([`NacosAppLevel::set_mapping`]),
//! the instance lists ([`NacosAppLevel::set_instances`]) and a report reader
//! ([`NacosAppLevel::refresh`] with [`read_config`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use nacos_sdk::api::config::ConfigService;
use nacos_sdk::api::naming::ServiceInstance;
use switchman_core::{Instance, ServiceKey, Url};
use tracing::debug;

use super::resolver::{Built, Resolver};
use super::{AppInstance, FetchSettings, MetadataCache};

/// The config group of Dubbo's interface → application mapping.
pub(crate) const MAPPING_GROUP: &str = "mapping";

/// The (data id, group) of the mapping config of `interface`.
pub(crate) fn mapping_config(interface: &str) -> (String, String) {
    (interface.to_string(), MAPPING_GROUP.to_string())
}

/// The (data id, group) of the metadata report of (`app`, `revision`).
pub(crate) fn report_config(app: &str, revision: &str) -> (String, String) {
    (app.to_string(), revision.to_string())
}

/// The applications a mapping config names (comma-separated; blanks and names a Nacos
/// service cannot have are dropped).
pub(crate) fn parse_mapping(content: &str) -> BTreeSet<String> {
    content
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty() && !a.contains('@') && a.len() <= 512)
        .map(str::to_string)
        .collect()
}

/// One Nacos instance of the service `app` as an application instance; `None` (logged at
/// debug) for one Dubbo would not use: disabled, unhealthy, of Nacos weight 0 (Dubbo reads
/// `selectInstances(.., healthy = true)`, which drops all three), or without a valid address.
pub(crate) fn app_instance(app: &str, si: &ServiceInstance) -> Option<AppInstance> {
    let port = u16::try_from(si.port).ok().filter(|p| *p > 0);
    let usable = si.enabled && si.healthy && si.weight > 0.0 && !si.ip.is_empty();
    let Some(port) = port.filter(|_| usable) else {
        debug!(application = app, ip = %si.ip, port = si.port, enabled = si.enabled, healthy = si.healthy, "application instance not used");
        return None;
    };
    Some(AppInstance {
        app: app.to_string(),
        host: si.ip.clone(),
        port,
        metadata: si
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    })
}

/// A config's content, `None` when it does not exist.
pub(crate) async fn read_config(
    config: &ConfigService,
    data_id: &str,
    group: &str,
) -> Result<Option<String>, String> {
    match config
        .get_config(data_id.to_string(), group.to_string())
        .await
    {
        Ok(resp) => Ok(Some(resp.content().to_string())),
        Err(nacos_sdk::api::error::Error::ConfigNotFound(_)) => Ok(None),
        Err(e) => Err(format!("config {data_id} in group {group}: {e}")),
    }
}

#[derive(Debug)]
struct Slot {
    parsed: Arc<AppInstance>,
    built: Option<Built>,
}

/// The application-level state of one Nacos subscription (see the module docs).
#[derive(Debug)]
pub(crate) struct NacosAppLevel {
    key: ServiceKey,
    /// The applications the mapping config named, as Dubbo keeps them (see
    /// [`NacosAppLevel::set_mapping`]).
    mapped: BTreeSet<String>,
    /// `mapped` and the registry's `provided-by`: the application services subscribed to.
    apps: BTreeSet<String>,
    /// Per application, its instances by `ip:port`.
    instances: BTreeMap<String, BTreeMap<String, Slot>>,
    resolver: Resolver,
}

impl NacosAppLevel {
    /// The state of a subscription to `key` (a concrete interface).
    pub(crate) fn new(key: ServiceKey) -> Self {
        NacosAppLevel {
            key,
            mapped: BTreeSet::new(),
            apps: BTreeSet::new(),
            instances: BTreeMap::new(),
            resolver: Resolver::default(),
        }
    }

    /// The mapping config's content (`None`: there is none) and the registry's `provided-by`
    /// applications: returns the application services to subscribe to now and those to drop.
    ///
    /// The mapping is taken as Dubbo's `ServiceDiscoveryRegistry.DefaultMappingListener`
    /// takes a change: an empty mapping, or one that only leaves applications out, changes
    /// nothing (Dubbo never removes an application from a mapping, so that is a lost write or
    /// a hand edit, and the instances it would drop are live); one that names an application
    /// not seen before replaces the set. When the registry URL names the applications
    /// (`provided-by`), they are the set and the mapping is not used, as in Dubbo
    /// (`ServiceDiscoveryRegistry` looks the mapping up only when the URL names none).
    pub(crate) fn set_mapping(
        &mut self,
        content: Option<&str>,
        provided_by: &[String],
    ) -> (Vec<String>, Vec<String>) {
        let apps: BTreeSet<String> = if provided_by.is_empty() {
            let mapped = content.map(parse_mapping).unwrap_or_default();
            if !mapped.is_subset(&self.mapped) {
                self.mapped = mapped;
            }
            self.mapped.clone()
        } else {
            provided_by.iter().cloned().collect()
        };
        let added = apps.difference(&self.apps).cloned().collect();
        let gone: Vec<String> = self.apps.difference(&apps).cloned().collect();
        for app in &gone {
            self.instances.remove(app);
        }
        self.apps = apps;
        (added, gone)
    }

    /// A push of the whole instance list of the application service `app`. Instances whose
    /// address and metadata did not change keep what was built for them.
    pub(crate) fn set_instances(&mut self, app: &str, list: &[ServiceInstance]) {
        if !self.apps.contains(app) {
            return;
        }
        let mut old = self.instances.remove(app).unwrap_or_default();
        let mut now = BTreeMap::new();
        for si in list {
            let Some(inst) = app_instance(app, si) else {
                continue;
            };
            let id = format!("{}:{}", inst.host, inst.port);
            let slot = match old.remove(&id) {
                Some(s) if *s.parsed == inst => s,
                // Changed (a new revision, say): the old endpoints stay until it is known.
                Some(s) => Slot {
                    parsed: Arc::new(inst),
                    built: s.built,
                },
                None => Slot {
                    parsed: Arc::new(inst),
                    built: None,
                },
            };
            now.insert(id, slot);
        }
        self.instances.insert(app.to_string(), now);
    }

    /// The application services subscribed to (the mapping's and `provided-by`).
    pub(crate) fn apps(&self) -> &BTreeSet<String> {
        &self.apps
    }

    /// Whether some instance with a revision has no endpoints yet (its metadata is being
    /// fetched, failed, or is not in the metadata report yet): the report is worth reading
    /// again.
    pub(crate) fn unresolved(&self) -> bool {
        self.instances
            .values()
            .flat_map(|m| m.values())
            .any(|s| s.built.is_none() && s.parsed.revision().is_some())
    }

    /// Resolves when the metadata cache has news: call [`NacosAppLevel::refresh`] then.
    pub(crate) async fn changed(&mut self) {
        self.resolver.changed().await
    }

    /// See [`Resolver::hold_first_list`].
    pub(crate) fn hold_first_list(&mut self, nothing: bool, settings: &FetchSettings) -> bool {
        self.resolver.hold_first_list(nothing, settings)
    }

    /// The application-level endpoints of the subscribed interface. Revisions not seen before
    /// (and, with `recheck_reports`, every revision not ready) are looked up in the metadata
    /// report through `read_report(data id, group)`; the others come from `cache`. An error of
    /// the reader stops the refresh (retry later); nothing is lost.
    pub(crate) async fn refresh<F, Fut>(
        &mut self,
        read_report: F,
        cache: Option<&MetadataCache>,
        settings: &FetchSettings,
        recheck_reports: bool,
    ) -> Result<Vec<Arc<Instance>>, String>
    where
        F: Fn(String, String) -> Fut,
        Fut: Future<Output = Result<Option<String>, String>>,
    {
        let to_read = self.resolver.begin(
            self.instances
                .values()
                .flat_map(|m| m.values())
                .map(|s| &s.parsed),
            |_| recheck_reports,
        );
        for key in to_read {
            let (data_id, group) = report_config(&key.0, &key.1);
            let content = read_report(data_id.clone(), group.clone()).await?;
            let source = format!("Nacos config {data_id} in group {group}");
            self.resolver
                .report(&key, content.as_deref().map(str::as_bytes), &source);
        }
        self.resolver.finish(cache, settings);
        let key = self.key.clone();
        let iface = key.interface.to_string();
        let accept = |url: &Url| -> Result<Option<Instance>, String> {
            let inst = Instance::from_url(url).map_err(|e| e.message().to_string())?;
            let mut probe = inst.service().clone();
            probe.interface = key.interface.clone();
            Ok(key.accepts(&probe).then_some(inst))
        };
        let mut out = Vec::new();
        for (app, slots) in &mut self.instances {
            for (id, slot) in slots.iter_mut() {
                let source = format!("Nacos service {app}, instance {id}");
                out.extend(
                    self.resolver
                        .endpoints(&slot.parsed, &mut slot.built, &iface, &source, accept)
                        .iter()
                        .cloned(),
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataFetcher, MetadataInfo, MetadataServiceTarget};
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;
    use switchman_core::{BoxFuture, Result};

    #[derive(Debug, Default)]
    struct Counting(AtomicU64);

    impl MetadataFetcher for Counting {
        fn fetch<'a>(
            &'a self,
            t: &'a MetadataServiceTarget,
            _timeout: Duration,
        ) -> BoxFuture<'a, Result<MetadataInfo>> {
            Box::pin(async move {
                self.0.fetch_add(1, Ordering::SeqCst);
                Ok(MetadataInfo::from_json(&serde_json::json!({
                    "app": t.application, "revision": t.revision,
                    "services": {"g/x.Y::dubbo": {"name": "x.Y", "group": "g", "protocol": "dubbo",
                                                  "port": -1, "params": {"weight": "30"}}}
                }))
                .unwrap())
            })
        }
    }

    /// What a Java 3.3 provider with `register-mode=instance` registers in Nacos.
    fn si(port: i32, rev: &str, storage: &str) -> ServiceInstance {
        let md: HashMap<String, String> = [
            ("dubbo.metadata.revision", rev.to_string()),
            ("dubbo.metadata.storage-type", storage.to_string()),
            ("dubbo.endpoints", format!("[{{\"port\":{port},\"protocol\":\"dubbo\"}}]")),
            (
                "dubbo.metadata-service.url-params",
                format!("{{\"prefer.serialization\":\"hessian2,fastjson2\",\"version\":\"1.0.0\",\"port\":\"{port}\",\"protocol\":\"dubbo\"}}"),
            ),
            ("meta-v", "1.0.0".to_string()),
            ("timestamp", "1700000000000".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        ServiceInstance {
            ip: "10.0.0.1".into(),
            port,
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: md,
            ..Default::default()
        }
    }

    #[test]
    fn layout_and_instances() {
        assert_eq!(mapping_config("x.Y"), ("x.Y".into(), "mapping".into()));
        assert_eq!(report_config("shop", "r1"), ("shop".into(), "r1".into()));
        assert_eq!(
            parse_mapping(" shop, ,cart,shop"),
            ["cart".to_string(), "shop".to_string()].into()
        );
        let i = app_instance("shop", &si(20880, "r1", "local")).unwrap();
        assert_eq!(
            (i.host.as_str(), i.port, i.revision()),
            ("10.0.0.1", 20880, Some("r1"))
        );
        for bad in [
            ServiceInstance {
                healthy: false,
                ..si(1, "r", "local")
            },
            ServiceInstance {
                enabled: false,
                ..si(1, "r", "local")
            },
            ServiceInstance {
                weight: 0.0,
                ..si(1, "r", "local")
            },
            si(0, "r", "local"),
            si(70000, "r", "local"),
        ] {
            assert!(app_instance("shop", &bad).is_none(), "{bad:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn local_metadata_is_fetched_once_and_remote_read_from_the_report() {
        let fetcher = Arc::new(Counting::default());
        let cache = MetadataCache::new(fetcher.clone());
        let s = FetchSettings::default();
        let mut a = NacosAppLevel::new(ServiceKey::with("x.Y", "g", ""));
        let (add, gone) = a.set_mapping(Some("shop,cart"), &[]);
        assert_eq!(add, vec!["cart", "shop"]);
        assert!(gone.is_empty());
        a.set_instances(
            "shop",
            &[si(20880, "r1", "local"), si(20881, "r1", "local")],
        );
        a.set_instances("cart", &[si(20990, "c1", "remote")]);
        let reads: Arc<Mutex<Vec<(String, String)>>> = Default::default();
        let reader = |id: String, group: String| {
            let reads = reads.clone();
            async move {
                reads.lock().unwrap().push((id.clone(), group.clone()));
                Ok(match (id.as_str(), group.as_str()) {
                    ("cart", "c1") => Some(r#"{"app":"cart","revision":"c1","services":{"g/x.Y::tri":{"name":"x.Y","group":"g","protocol":"tri","port":50051,"params":{}}}}"#.to_string()),
                    _ => None,
                })
            }
        };
        let first = a.refresh(reader, Some(&cache), &s, false).await.unwrap();
        // The remote one at once; the local ones once fetched.
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].address(), "10.0.0.1:50051");
        a.changed().await;
        let list = a.refresh(reader, Some(&cache), &s, false).await.unwrap();
        assert_eq!(list.len(), 3, "{list:?}");
        assert_eq!(fetcher.0.load(Ordering::SeqCst), 1, "one fetch for r1");
        assert_eq!(reads.lock().unwrap().len(), 2, "each report read once");
        let w: Vec<u32> = list.iter().map(|i| i.weight()).collect();
        assert!(w.contains(&30));
        // Another group's consumer takes none of them.
        let mut other = NacosAppLevel::new(ServiceKey::with("x.Y", "h", ""));
        other.set_mapping(Some("shop"), &[]);
        other.set_instances("shop", &[si(20880, "r1", "local")]);
        let none = other
            .refresh(reader, Some(&cache), &s, false)
            .await
            .unwrap();
        assert!(none.is_empty());
        // As Dubbo: a mapping that only leaves applications out, or an empty one, changes
        // nothing; one naming a new application replaces the set.
        let extra: [String; 0] = [];
        assert_eq!(a.set_mapping(Some("shop"), &extra), (vec![], vec![]));
        assert_eq!(a.set_mapping(Some(" "), &extra), (vec![], vec![]));
        assert_eq!(a.set_mapping(None, &extra), (vec![], vec![]));
        assert!(!a.unresolved());
        let (add, gone) = a.set_mapping(Some("shop,cart2"), &extra);
        assert_eq!(
            (add, gone),
            (vec!["cart2".to_string()], vec!["cart".to_string()])
        );
        assert_eq!(a.apps().iter().collect::<Vec<_>>(), ["cart2", "shop"]);
        let list = a.refresh(reader, Some(&cache), &s, false).await.unwrap();
        assert_eq!(list.len(), 2, "cart's instance went with it");
        // A reader error stops the refresh and says why.
        a.set_instances("shop", &[si(20882, "r9", "local")]);
        assert!(a.unresolved(), "r9 is not known yet");
        let e = a
            .refresh(
                |_, _| async { Err("Nacos down".to_string()) },
                Some(&cache),
                &s,
                false,
            )
            .await
            .unwrap_err();
        assert_eq!(e, "Nacos down");
    }

    /// `provided-by` names the applications and the mapping is not used, as in Dubbo's
    /// `ServiceDiscoveryRegistry` (it looks the mapping up only when the URL names none).
    #[test]
    fn provided_by_replaces_the_mapping() {
        let mut a = NacosAppLevel::new(ServiceKey::with("x.Y", "g", ""));
        let named = ["extra".to_string()];
        assert_eq!(
            a.set_mapping(Some("shop,cart"), &named),
            (vec!["extra".to_string()], vec![])
        );
        assert_eq!(a.apps().iter().collect::<Vec<_>>(), ["extra"]);
        // A mapping naming more applications later changes nothing.
        assert_eq!(
            a.set_mapping(Some("shop,cart,more"), &named),
            (vec![], vec![])
        );
        assert_eq!(a.apps().iter().collect::<Vec<_>>(), ["extra"]);
    }
}
