//! [`Resolver`]: the registry-neutral half of an application-level subscription: which
//! revisions its instances name, where each revision's `MetadataInfo` comes from (the
//! metadata report, else the [`MetadataCache`]), and each instance's endpoints.
//!
//! A registry adapter keeps its instances (ZooKeeper nodes, Nacos instances) and, per refresh:
//!
//! 1. [`Resolver::begin`] with every instance: the revisions in use; returns the keys whose
//!    metadata report the adapter must read now (new revisions, and those `recheck` names);
//! 2. [`Resolver::report`] with what it read for each (`None`: not there);
//! 3. [`Resolver::finish`]: the rest are asked of the cache (local metadata) or held out;
//! 4. [`Resolver::endpoints`] per instance, with the instance's [`Built`] slot, which keeps the
//!    endpoints' `Arc`s while nothing changed and the previous revision's endpoints while a new
//!    one is being fetched.
//!
//! [`Resolver::changed`] resolves when the cache has news; the adapter then refreshes without
//! reading the registry (steps 1, 3 and 4 only find the news).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use switchman_core::{Instance, Url};
use tokio::sync::watch;
use tracing::warn;

use super::{
    AppInstance, FetchSettings, Lookup, MetadataCache, MetadataInfo, StorageType, WaitToken,
};

/// (application, revision).
pub(crate) type Key = (String, String);

/// How a revision's metadata stands.
#[derive(Debug)]
enum Resolution {
    Ready(Arc<MetadataInfo>),
    /// A fetch is under way: instances keep their previous endpoints meanwhile.
    Waiting(#[allow(dead_code)] WaitToken),
    /// The fetch failed and is retried: instances are held out.
    Failed(#[allow(dead_code)] WaitToken),
    /// Not in the metadata report and nothing to fetch it from (remote storage, no client):
    /// held out until the report has it.
    Unavailable,
}

/// The endpoints last built for one instance.
#[derive(Debug)]
pub(crate) struct Built {
    source: Arc<AppInstance>,
    info: Arc<MetadataInfo>,
    endpoints: Vec<Arc<Instance>>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Resolver {
    revisions: HashMap<Key, Resolution>,
    /// The instances of each revision in use, from the last [`Resolver::begin`].
    wanted: BTreeMap<Key, Vec<Arc<AppInstance>>>,
    /// Keys already reported as held out (logged once).
    reported: HashSet<Key>,
    no_client_reported: bool,
    /// Announcements of the metadata cache, once it was asked.
    notify: Option<watch::Receiver<u64>>,
    /// When the first refresh began.
    first_read: Option<tokio::time::Instant>,
    /// Whether the subscription sent its first list.
    published: bool,
}

impl Resolver {
    /// Resolves when the metadata cache has news (a fetch succeeded or failed); never when no
    /// fetch was started.
    pub(crate) async fn changed(&mut self) {
        match &mut self.notify {
            Some(rx) => {
                if rx.changed().await.is_err() {
                    self.notify = None;
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// Whether the subscription should hold back its very first list: it would be empty
    /// (`nothing` else to send) while a revision's metadata is still being fetched, which a
    /// consumer waiting for providers (`check=true`, `switchman call`) would read as "no
    /// provider". Held for at most one fetch timeout from the first refresh; never once a
    /// list was sent, nor for a non-empty list.
    pub(crate) fn hold_first_list(&mut self, nothing: bool, settings: &FetchSettings) -> bool {
        if self.published {
            return false;
        }
        let waiting = self
            .revisions
            .values()
            .any(|r| matches!(r, Resolution::Waiting(_)));
        let within = self
            .first_read
            .is_some_and(|t| t.elapsed() < settings.timeout);
        if nothing && waiting && within {
            return true;
        }
        self.published = true;
        false
    }

    /// Step 1: the revisions `instances` name (instances without one are skipped). Forgets the
    /// others. Returns the keys whose metadata report should be read now: revisions not seen
    /// before, and revisions not ready for which `recheck` says the report may have changed.
    pub(crate) fn begin<'a>(
        &mut self,
        instances: impl IntoIterator<Item = &'a Arc<AppInstance>>,
        recheck: impl Fn(&Key) -> bool,
    ) -> Vec<Key> {
        self.first_read
            .get_or_insert_with(tokio::time::Instant::now);
        let mut wanted: BTreeMap<Key, Vec<Arc<AppInstance>>> = BTreeMap::new();
        for inst in instances {
            if let Some(rev) = inst.revision() {
                wanted
                    .entry((inst.app.clone(), rev.to_string()))
                    .or_default()
                    .push(inst.clone());
            }
        }
        self.revisions.retain(|k, _| wanted.contains_key(k));
        self.reported.retain(|k| wanted.contains_key(k));
        let read = wanted
            .keys()
            .filter(|k| match self.revisions.get(*k) {
                None => true,
                Some(Resolution::Ready(_)) => false,
                Some(_) => recheck(k),
            })
            .cloned()
            .collect();
        self.wanted = wanted;
        read
    }

    /// Step 2: the metadata report's content for `key` (`None`: not there); `source` names
    /// it in logs. A report that does not parse is logged and treated as missing.
    pub(crate) fn report(&mut self, key: &Key, data: Option<&[u8]>, source: &str) {
        let Some(data) = data else {
            // Read again: whatever it was is decided in `finish`.
            if matches!(self.revisions.get(key), Some(Resolution::Unavailable)) {
                self.revisions.remove(key);
            }
            return;
        };
        match MetadataInfo::from_slice(data) {
            Ok(m) => {
                self.revisions
                    .insert(key.clone(), Resolution::Ready(Arc::new(m)));
            }
            Err(e) => warn!(source, "skipping metadata: {e}"),
        }
    }

    /// Step 3: every revision not ready is asked of `cache` when some of its instances keep
    /// their metadata locally, else held out (logged once). `cache` is `None` when no
    /// MetadataService client is installed.
    pub(crate) fn finish(&mut self, cache: Option<&MetadataCache>, settings: &FetchSettings) {
        let keys: Vec<Key> = self.wanted.keys().cloned().collect();
        for key in keys {
            match self.revisions.get(&key) {
                Some(Resolution::Ready(_)) => continue,
                Some(Resolution::Unavailable) => continue,
                _ => {}
            }
            let local = self.wanted[&key]
                .iter()
                .any(|i| i.storage_type() == StorageType::Local);
            let r = match (cache, local) {
                (_, false) => {
                    if self.reported.insert(key.clone()) {
                        warn!(
                            application = %key.0,
                            revision = %key.1,
                            "instances held out: they store metadata remotely and the metadata report has none for this revision (or it does not parse)"
                        );
                    }
                    Resolution::Unavailable
                }
                (None, true) => {
                    if !self.no_client_reported {
                        self.no_client_reported = true;
                        warn!(
                            application = %key.0,
                            "instances held out: their metadata is local (in their MetadataService) and no MetadataService client is installed (switchman::Reference installs one; or call switchman::cluster::metadata_service::install())"
                        );
                    }
                    Resolution::Unavailable
                }
                (Some(cache), true) => self.ask(cache, settings, &key),
            };
            self.revisions.insert(key, r);
        }
    }

    fn ask(&mut self, cache: &MetadataCache, settings: &FetchSettings, key: &Key) -> Resolution {
        if self.notify.is_none() {
            // Subscribed before asking: the announcement of this very fetch is not missed.
            let mut rx = cache.subscribe();
            rx.borrow_and_update();
            self.notify = Some(rx);
        }
        let mut targets = Vec::new();
        for i in self.wanted[key]
            .iter()
            .filter(|i| i.storage_type() == StorageType::Local)
        {
            match i.metadata_targets(&key.1) {
                Ok(t) => targets.extend(t),
                Err(e) => {
                    if self.reported.insert(key.clone()) {
                        warn!(application = %key.0, revision = %key.1, instance = %format!("{}:{}", i.host, i.port), "cannot call this instance's MetadataService: {e}");
                    }
                }
            }
        }
        match cache.lookup(&key.0, &key.1, &targets, settings) {
            Lookup::Ready(info) => Resolution::Ready(info),
            Lookup::Pending(t) => Resolution::Waiting(t),
            Lookup::Failed { token, .. } => Resolution::Failed(token),
        }
    }

    /// Step 4: the endpoints of `inst` for `interface`, each passed through `accept` (the
    /// adapter's service-key and protocol filter; `Err` is logged with `source`). `built` is
    /// the instance's slot: reused while neither the instance nor its metadata changed, kept
    /// while its new revision is being fetched, emptied while it is held out.
    pub(crate) fn endpoints<'a>(
        &self,
        inst: &Arc<AppInstance>,
        built: &'a mut Option<Built>,
        interface: &str,
        source: &str,
        accept: impl Fn(&Url) -> Result<Option<Instance>, String>,
    ) -> &'a [Arc<Instance>] {
        let state = inst
            .revision()
            .and_then(|rev| self.revisions.get(&(inst.app.clone(), rev.to_string())));
        match state {
            Some(Resolution::Ready(info)) => {
                let fresh = built
                    .as_ref()
                    .is_some_and(|b| Arc::ptr_eq(&b.source, inst) && Arc::ptr_eq(&b.info, info));
                if !fresh {
                    let endpoints = inst
                        .endpoints(info, interface)
                        .iter()
                        .filter_map(|url| match accept(url) {
                            Ok(found) => found.map(Arc::new),
                            Err(e) => {
                                warn!(source, "skipping application instance: {e}");
                                None
                            }
                        })
                        .collect();
                    *built = Some(Built {
                        source: inst.clone(),
                        info: info.clone(),
                        endpoints,
                    });
                }
            }
            Some(Resolution::Waiting(_)) => {}
            _ => *built = None,
        }
        built.as_ref().map_or(&[], |b| &b.endpoints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataFetcher, MetadataServiceTarget};
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
                    "services": {"x.Y:dubbo": {"name": "x.Y", "protocol": "dubbo", "port": -1,
                                               "params": {"weight": "9"}}}
                }))
                .unwrap())
            })
        }
    }

    fn inst(host: &str, rev: &str, storage: &str) -> Arc<AppInstance> {
        Arc::new(AppInstance {
            app: "shop".into(),
            host: host.into(),
            port: 20880,
            metadata: [
                ("dubbo.metadata.revision", rev),
                ("dubbo.metadata.storage-type", storage),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        })
    }

    fn accept(url: &Url) -> Result<Option<Instance>, String> {
        Instance::from_url(url).map(Some).map_err(|e| e.to_string())
    }

    #[tokio::test(start_paused = true)]
    async fn fifty_instances_one_fetch_then_endpoints_each() {
        let fetcher = Arc::new(Counting::default());
        let cache = MetadataCache::new(fetcher.clone());
        let s = FetchSettings::default();
        let all: Vec<Arc<AppInstance>> = (0..50)
            .map(|i| inst(&format!("10.0.0.{i}"), "r1", "local"))
            .collect();
        let mut r = Resolver::default();
        let read = r.begin(&all, |_| false);
        assert_eq!(read, vec![("shop".to_string(), "r1".to_string())]);
        r.report(&read[0], None, "report");
        r.finish(Some(&cache), &s);
        // Waiting: no endpoints yet, and the empty first list is held back.
        let mut slots: Vec<Option<Built>> = (0..50).map(|_| None).collect();
        assert!(
            r.endpoints(&all[0], &mut slots[0], "x.Y", "t", accept)
                .is_empty()
        );
        assert!(r.hold_first_list(true, &s));
        r.changed().await;
        assert!(r.begin(&all, |_| false).is_empty(), "nothing to re-read");
        r.finish(Some(&cache), &s);
        let mut hosts = std::collections::BTreeSet::new();
        for (i, slot) in all.iter().zip(slots.iter_mut()) {
            let e = r.endpoints(i, slot, "x.Y", "t", accept);
            assert_eq!(e.len(), 1);
            assert_eq!(e[0].weight(), 9);
            hosts.insert(e[0].host().to_string());
        }
        assert_eq!(hosts.len(), 50);
        assert_eq!(fetcher.0.load(Ordering::SeqCst), 1);
        // Unchanged: the same Arcs.
        let a = r.endpoints(&all[3], &mut slots[3], "x.Y", "t", accept)[0].clone();
        let b = r.endpoints(&all[3], &mut slots[3], "x.Y", "t", accept)[0].clone();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!r.hold_first_list(true, &s), "a list was due");
    }

    #[tokio::test(start_paused = true)]
    async fn remote_instances_wait_for_the_report_and_no_client_holds_local_ones_out() {
        let s = FetchSettings::default();
        let remote = vec![inst("10.0.0.1", "r1", "remote")];
        let mut r = Resolver::default();
        let read = r.begin(&remote, |_| false);
        r.report(&read[0], None, "report");
        r.finish(None, &s);
        let mut slot = None;
        assert!(
            r.endpoints(&remote[0], &mut slot, "x.Y", "t", accept)
                .is_empty()
        );
        // Not read again until the report may have changed; then it is there.
        assert!(r.begin(&remote, |_| false).is_empty());
        let read = r.begin(&remote, |_| true);
        assert_eq!(read.len(), 1);
        let report = br#"{"app":"shop","revision":"r1","services":{"x.Y:tri":{"name":"x.Y","protocol":"tri","port":50051,"params":{}}}}"#;
        r.report(&read[0], Some(report), "report");
        r.finish(None, &s);
        let e = r.endpoints(&remote[0], &mut slot, "x.Y", "t", accept);
        assert_eq!(e[0].address(), "10.0.0.1:50051");
        // Local metadata without a client: held out.
        let local = vec![inst("10.0.0.2", "r2", "local")];
        let read = r.begin(&local, |_| false);
        r.report(&read[0], None, "report");
        r.finish(None, &s);
        let mut slot = None;
        assert!(
            r.endpoints(&local[0], &mut slot, "x.Y", "t", accept)
                .is_empty()
        );
        assert!(!r.hold_first_list(true, &s), "nothing is being fetched");
    }
}
