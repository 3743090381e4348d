//! [`MetadataCache`]: one `MetadataService` fetch per (application, revision).
//!
//! Every application instance names the revision of its `MetadataInfo`; all instances of one
//! build of an application share it. The cache keeps one entry per (application, revision):
//! the first [`MetadataCache::lookup`] starts one background fetch, every later lookup (other
//! instances, other subscriptions, a re-list) waits for that one. A fetch is a round of up to
//! [`FetchSettings::attempts`] attempts, each bounded by [`FetchSettings::timeout`] and
//! aimed at the next of the instances that share the revision, with a doubling pause between
//! them; a failed round marks the entry failed (a warning with the reason, once per entry)
//! and the fetch is tried again after a pause that doubles up to [`FetchSettings::retry_max`],
//! for as long as some subscription still waits for it (holds its [`WaitToken`]). Results and
//! failures are announced on [`MetadataCache::subscribe`]. Ready entries beyond the capacity
//! ([`DEFAULT_CAPACITY`] revisions) or beyond [`MAX_CACHE_BYTES`] of text in all are dropped least
//! recently used first; one `MetadataInfo` over [`MAX_INFO_BYTES`] (registry and provider
//! data: a provider's answer may be megabytes) is a failed fetch, not an entry.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tracing::{debug, info, warn};

use super::{MetadataFetcher, MetadataInfo, MetadataServiceTarget};

/// Ready entries kept by default.
pub const DEFAULT_CAPACITY: usize = 512;
/// The most text (names, parameters) all ready entries hold together: 64 MiB.
pub const MAX_CACHE_BYTES: usize = 64 << 20;
/// The most text one `MetadataInfo` may hold to be kept: 4 MiB (a real one is kilobytes).
pub const MAX_INFO_BYTES: usize = 4 << 20;
/// Fetches in flight at once, across all entries.
const MAX_CONCURRENT: usize = 16;
/// Distinct targets remembered per entry (instances sharing the revision).
const MAX_TARGETS: usize = 64;

/// How one revision is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSettings {
    /// The timeout of one attempt (Dubbo's metadata proxy timeout, 5 s).
    pub timeout: Duration,
    /// Attempts per round (Dubbo tries 3 times).
    pub attempts: u32,
    /// The pause after the first failed attempt of a round; it doubles after each.
    pub backoff: Duration,
    /// The first pause after a failed round; it doubles up to `retry_max`.
    pub retry_min: Duration,
    /// The longest pause between rounds (Dubbo retries every 10 s).
    pub retry_max: Duration,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            timeout: Duration::from_secs(5),
            attempts: 3,
            backoff: Duration::from_millis(250),
            retry_min: Duration::from_secs(1),
            retry_max: Duration::from_secs(10),
        }
    }
}

/// What the cache knows about a revision.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Fetched.
    Ready(Arc<MetadataInfo>),
    /// The first round of attempts is under way.
    Pending(WaitToken),
    /// The last round failed (`reason`); it is tried again while the token is held.
    Failed {
        /// Why the last attempt failed.
        reason: String,
        /// Keeps the retries going.
        token: WaitToken,
    },
}

/// Held by whoever waits for a revision; while one is held, a failed fetch is retried.
#[derive(Debug, Clone)]
pub struct WaitToken(#[allow(dead_code)] Arc<Interest>);

#[derive(Debug)]
struct Interest;

/// Counters of a [`MetadataCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetadataStats {
    /// Attempts made (each one call to the fetcher).
    pub fetches: u64,
    /// Attempts that brought a `MetadataInfo`.
    pub fetched: u64,
    /// Attempts that failed (error or timeout).
    pub failed: u64,
    /// Revisions held.
    pub cached: usize,
    /// Revisions being fetched or retried.
    pub pending: usize,
}

type Key = (String, String);

#[derive(Debug)]
enum Status {
    Fetching,
    Ready(Arc<MetadataInfo>),
    Failed(String),
}

#[derive(Debug)]
struct Entry {
    status: Status,
    /// The text its `MetadataInfo` holds, once ready ([`MetadataInfo::text_bytes`]).
    bytes: usize,
    used: u64,
    fetches: u64,
    targets: Vec<MetadataServiceTarget>,
    next_target: usize,
    interest: Weak<Interest>,
    warned: bool,
    /// Whether a task fetches it now (false once that task ended, even by its runtime
    /// shutting down: the next lookup starts another).
    running: bool,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<Key, Entry, foldhash::fast::RandomState>,
    clock: u64,
}

struct Inner {
    fetcher: Arc<dyn MetadataFetcher>,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    capacity: usize,
    permits: Semaphore,
    fetches: AtomicU64,
    fetched: AtomicU64,
    failed: AtomicU64,
}

/// One `MetadataService` fetch per (application, revision), shared and bounded (see the
/// module docs). Cheap to share behind an `Arc`; registries use the process-wide one
/// ([`super::install_fetcher`]).
pub struct MetadataCache {
    inner: Arc<Inner>,
}

impl fmt::Debug for MetadataCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataCache")
            .field("fetcher", &self.inner.fetcher)
            .field("capacity", &self.inner.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn announce(&self) {
        self.changed.send_modify(|g| *g = g.wrapping_add(1));
    }
}

impl MetadataCache {
    /// A cache in front of `fetcher`, keeping [`DEFAULT_CAPACITY`] ready revisions.
    pub fn new(fetcher: Arc<dyn MetadataFetcher>) -> Self {
        Self::with_capacity(fetcher, DEFAULT_CAPACITY)
    }

    /// A cache keeping at most `capacity` ready revisions (at least 1).
    pub fn with_capacity(fetcher: Arc<dyn MetadataFetcher>, capacity: usize) -> Self {
        MetadataCache {
            inner: Arc::new(Inner {
                fetcher,
                state: Mutex::new(State::default()),
                changed: watch::channel(0).0,
                capacity: capacity.max(1),
                permits: Semaphore::new(MAX_CONCURRENT),
                fetches: AtomicU64::new(0),
                fetched: AtomicU64::new(0),
                failed: AtomicU64::new(0),
            }),
        }
    }

    /// Changes whenever a fetch succeeds or a round fails: look up again then.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// The `MetadataInfo` of (`app`, `revision`) if fetched; otherwise starts (or joins) its
    /// fetch from `targets` (the `MetadataService`s of the instances with that revision,
    /// added to those already known) and says how it stands. Must be called inside a tokio
    /// runtime (the fetch runs as a task). Never waits.
    pub fn lookup(
        &self,
        app: &str,
        revision: &str,
        targets: &[MetadataServiceTarget],
        settings: &FetchSettings,
    ) -> Lookup {
        let key = (app.to_string(), revision.to_string());
        let mut state = self.inner.state();
        state.clock += 1;
        let now = state.clock;
        if let Some(entry) = state.entries.get_mut(&key) {
            entry.used = now;
            for t in targets {
                if entry.targets.len() < MAX_TARGETS && !entry.targets.contains(t) {
                    entry.targets.push(t.clone());
                }
            }
            let token = match &entry.status {
                Status::Ready(info) => return Lookup::Ready(info.clone()),
                _ => match entry.interest.upgrade() {
                    Some(i) => WaitToken(i),
                    None => {
                        let i = Arc::new(Interest);
                        entry.interest = Arc::downgrade(&i);
                        WaitToken(i)
                    }
                },
            };
            let lookup = match &entry.status {
                Status::Failed(reason) => Lookup::Failed {
                    reason: reason.clone(),
                    token,
                },
                _ => Lookup::Pending(token),
            };
            if !entry.running {
                // Its task is gone (its runtime shut down): this caller's runtime takes over.
                entry.running = true;
                drop(state);
                tokio::spawn(run(self.inner.clone(), key, settings.clone()));
            }
            return lookup;
        }
        let interest = Arc::new(Interest);
        let mut unique: Vec<MetadataServiceTarget> = Vec::new();
        for t in targets.iter().take(MAX_TARGETS) {
            if !unique.contains(t) {
                unique.push(t.clone());
            }
        }
        state.entries.insert(
            key.clone(),
            Entry {
                status: Status::Fetching,
                bytes: 0,
                used: now,
                fetches: 0,
                // Dubbo picks a random instance, so one instance does not serve every fetch.
                next_target: if unique.is_empty() {
                    0
                } else {
                    fastrand::usize(..unique.len())
                },
                targets: unique,
                interest: Arc::downgrade(&interest),
                warned: false,
                running: true,
            },
        );
        evict(&mut state, self.inner.capacity);
        drop(state);
        tokio::spawn(run(self.inner.clone(), key, settings.clone()));
        Lookup::Pending(WaitToken(interest))
    }

    /// The fetched `MetadataInfo` of (`app`, `revision`), without starting anything.
    pub fn get(&self, app: &str, revision: &str) -> Option<Arc<MetadataInfo>> {
        let state = self.inner.state();
        match state
            .entries
            .get(&(app.to_string(), revision.to_string()))
            .map(|e| &e.status)
        {
            Some(Status::Ready(info)) => Some(info.clone()),
            _ => None,
        }
    }

    /// Attempts made for (`app`, `revision`) while its entry is held (0 once dropped).
    pub fn fetches(&self, app: &str, revision: &str) -> u64 {
        self.inner
            .state()
            .entries
            .get(&(app.to_string(), revision.to_string()))
            .map_or(0, |e| e.fetches)
    }

    /// Attempts made for `app`'s revisions whose entries are held, by revision.
    pub fn fetches_of(&self, app: &str) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .inner
            .state()
            .entries
            .iter()
            .filter(|((a, _), _)| a == app)
            .map(|((_, r), e)| (r.clone(), e.fetches))
            .collect();
        out.sort();
        out
    }

    /// The revisions whose last round of fetches failed and is being retried, with why:
    /// (application, revision, reason), sorted. What a consumer that found no provider can
    /// add to its error (a provider's MetadataService refused TLS, or cleartext...).
    pub fn failures(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = self
            .inner
            .state()
            .entries
            .iter()
            .filter_map(|((a, r), e)| match &e.status {
                Status::Failed(reason) => Some((a.clone(), r.clone(), reason.clone())),
                _ => None,
            })
            .collect();
        out.sort();
        out
    }

    /// The counters.
    pub fn stats(&self) -> MetadataStats {
        let (cached, pending) = {
            let state = self.inner.state();
            let cached = state
                .entries
                .values()
                .filter(|e| matches!(e.status, Status::Ready(_)))
                .count();
            (cached, state.entries.len() - cached)
        };
        MetadataStats {
            fetches: self.inner.fetches.load(Ordering::Relaxed),
            fetched: self.inner.fetched.load(Ordering::Relaxed),
            failed: self.inner.failed.load(Ordering::Relaxed),
            cached,
            pending,
        }
    }
}

/// Drops the least recently used ready entries over `capacity` entries or [`MAX_CACHE_BYTES`] of
/// text (entries being fetched are kept: someone waits for them).
fn evict(state: &mut State, capacity: usize) {
    loop {
        let (ready, bytes) = state
            .entries
            .values()
            .filter(|e| matches!(e.status, Status::Ready(_)))
            .fold((0usize, 0usize), |(n, b), e| {
                (n + 1, b.saturating_add(e.bytes))
            });
        if ready <= capacity && bytes <= MAX_CACHE_BYTES {
            return;
        }
        let oldest = state
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.status, Status::Ready(_)))
            .min_by_key(|(_, e)| e.used)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => {
                state.entries.remove(&k);
            }
            None => return,
        }
    }
}

/// The next target of `key` and the attempt counted; `None` when the entry is gone.
fn next_target(inner: &Inner, key: &Key) -> Option<Option<MetadataServiceTarget>> {
    let mut state = inner.state();
    let entry = state.entries.get_mut(key)?;
    if entry.targets.is_empty() {
        return Some(None);
    }
    let i = entry.next_target % entry.targets.len();
    entry.next_target = entry.next_target.wrapping_add(1);
    entry.fetches += 1;
    Some(Some(entry.targets[i].clone()))
}

fn jitter(d: Duration) -> Duration {
    // ±20%, so that many consumers do not retry in step.
    d.mul_f64(0.8 + 0.4 * fastrand::f64())
}

/// Marks its entry as no longer fetched when the task ends, however it ends.
struct Running {
    inner: Arc<Inner>,
    key: Key,
}

impl Drop for Running {
    fn drop(&mut self) {
        let orphaned = {
            let mut state = self.inner.state();
            match state.entries.get_mut(&self.key) {
                Some(e) => {
                    e.running = false;
                    !matches!(e.status, Status::Ready(_))
                }
                None => false,
            }
        };
        if orphaned {
            // Waiters look up again, which restarts the fetch on their runtime.
            self.inner.announce();
        }
    }
}

/// Fetches `key` until it is ready, or nobody waits for it after a failed round.
async fn run(inner: Arc<Inner>, key: Key, settings: FetchSettings) {
    let _running = Running {
        inner: inner.clone(),
        key: key.clone(),
    };
    let (app, revision) = (&key.0, &key.1);
    let attempts = settings.attempts.max(1);
    let mut pause = settings.retry_min;
    let mut rounds = 0u32;
    loop {
        rounds += 1;
        let mut reason = String::new();
        let mut backoff = settings.backoff;
        for attempt in 0..attempts {
            let Some(target) = next_target(&inner, &key) else {
                return;
            };
            let Some(target) = target else {
                reason = "no instance advertises a MetadataService".into();
                break;
            };
            inner.fetches.fetch_add(1, Ordering::Relaxed);
            let outcome = {
                let _permit = inner.permits.acquire().await;
                tokio::time::timeout(
                    settings.timeout + Duration::from_millis(250),
                    inner.fetcher.fetch(&target, settings.timeout),
                )
                .await
            };
            let result = match outcome {
                Ok(Ok(info)) if info.revision.is_empty() || info.revision == *revision => Ok(info),
                Ok(Ok(info)) => Err(format!(
                    "{} answered the MetadataInfo of revision {} instead",
                    target.address(),
                    info.revision
                )),
                Ok(Err(e)) => Err(format!("{}: {e}", target.address())),
                Err(_) => Err(format!(
                    "{} did not answer within {:?}",
                    target.address(),
                    settings.timeout
                )),
            };
            match result {
                Ok(info) if info.text_bytes() > MAX_INFO_BYTES => {
                    inner.failed.fetch_add(1, Ordering::Relaxed);
                    reason = format!(
                        "{}: a MetadataInfo of {} bytes of text, over the {MAX_INFO_BYTES} kept",
                        target.address(),
                        info.text_bytes()
                    );
                    debug!(application = %app, revision = %revision, "metadata fetch refused: {reason}");
                }
                Ok(info) => {
                    inner.fetched.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("switchman_metadata_fetches_total", "application" => app.clone(), "outcome" => "ok").increment(1);
                    let services = info.services.len();
                    let recovered = {
                        let mut state = inner.state();
                        let Some(entry) = state.entries.get_mut(&key) else {
                            return;
                        };
                        entry.bytes = info.text_bytes();
                        entry.status = Status::Ready(Arc::new(info));
                        let recovered = entry.warned;
                        evict(&mut state, inner.capacity);
                        recovered
                    };
                    if recovered {
                        info!(application = %app, revision = %revision, target = %target.address(), services, "application metadata fetched after failures; its instances join");
                    } else {
                        debug!(application = %app, revision = %revision, target = %target.address(), services, "application metadata fetched");
                    }
                    inner.announce();
                    return;
                }
                Err(e) => {
                    inner.failed.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("switchman_metadata_fetches_total", "application" => app.clone(), "outcome" => "error").increment(1);
                    debug!(application = %app, revision = %revision, attempt = attempt + 1, "metadata fetch failed: {e}");
                    reason = e;
                }
            }
            if attempt + 1 < attempts {
                tokio::time::sleep(jitter(backoff)).await;
                backoff = backoff.saturating_mul(2);
            }
        }
        let first = {
            let mut state = inner.state();
            let Some(entry) = state.entries.get_mut(&key) else {
                return;
            };
            entry.status = Status::Failed(reason.clone());
            !std::mem::replace(&mut entry.warned, true)
        };
        if first {
            warn!(application = %app, revision = %revision, "instances held out: their MetadataInfo cannot be fetched ({reason}); retrying");
        }
        inner.announce();
        tokio::time::sleep(jitter(pause)).await;
        pause = pause
            .saturating_mul(2)
            .min(settings.retry_max.max(settings.retry_min));
        // Nobody waits any more: forget it (a later lookup starts afresh).
        let mut state = inner.state();
        let abandoned = state
            .entries
            .get(&key)
            .is_none_or(|e| e.interest.strong_count() == 0);
        if abandoned {
            state.entries.remove(&key);
            debug!(application = %app, revision = %revision, rounds, "metadata fetch abandoned: no instance waits for it");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    use switchman_core::{BoxFuture, Error, Result};

    #[derive(Debug, Default)]
    struct Fake {
        calls: AtomicU64,
        failing: AtomicBool,
        silent: AtomicBool,
        hosts: Mutex<Vec<String>>,
    }

    impl MetadataFetcher for Fake {
        fn fetch<'a>(
            &'a self,
            target: &'a MetadataServiceTarget,
            _timeout: Duration,
        ) -> BoxFuture<'a, Result<MetadataInfo>> {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                self.hosts.lock().unwrap().push(target.host.clone());
                if self.silent.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                if self.failing.load(Ordering::SeqCst) {
                    return Err(Error::transport("connection refused"));
                }
                Ok(MetadataInfo {
                    app: target.application.clone(),
                    revision: target.revision.clone(),
                    services: BTreeMap::new(),
                })
            })
        }
    }

    fn target(host: &str, rev: &str) -> MetadataServiceTarget {
        MetadataServiceTarget {
            application: "shop".into(),
            revision: rev.into(),
            host: host.into(),
            port: 20880,
            protocol: "dubbo".into(),
            params: BTreeMap::new(),
        }
    }

    async fn settle(cache: &MetadataCache, app: &str, rev: &str) -> Lookup {
        let mut rx = cache.subscribe();
        for _ in 0..100 {
            match cache.lookup(app, rev, &[], &FetchSettings::default()) {
                Lookup::Pending(_) => {
                    let _ = tokio::time::timeout(Duration::from_secs(60), rx.changed()).await;
                }
                other => return other,
            }
        }
        panic!("never settled");
    }

    #[tokio::test(start_paused = true)]
    async fn many_instances_of_one_revision_make_one_fetch() {
        let fake = Arc::new(Fake::default());
        let cache = MetadataCache::new(fake.clone());
        let s = FetchSettings::default();
        let mut tokens = Vec::new();
        for i in 0..50 {
            match cache.lookup("shop", "r1", &[target(&format!("10.0.0.{i}"), "r1")], &s) {
                Lookup::Pending(t) => tokens.push(t),
                other => panic!("{other:?}"),
            }
        }
        let Lookup::Ready(a) = settle(&cache, "shop", "r1").await else {
            panic!()
        };
        let Lookup::Ready(b) = cache.lookup("shop", "r1", &[], &s) else {
            panic!()
        };
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
        assert_eq!(cache.fetches("shop", "r1"), 1);
        let st = cache.stats();
        assert_eq!(
            (st.fetches, st.fetched, st.cached, st.pending),
            (1, 1, 1, 0)
        );
        // Another revision is its own fetch.
        cache.lookup("shop", "r2", &[target("10.0.0.1", "r2")], &s);
        settle(&cache, "shop", "r2").await;
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
        assert_eq!(
            cache.fetches_of("shop"),
            vec![("r1".into(), 1), ("r2".into(), 1)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_retried_across_instances_while_someone_waits() {
        let fake = Arc::new(Fake::default());
        fake.failing.store(true, Ordering::SeqCst);
        let cache = MetadataCache::new(fake.clone());
        let s = FetchSettings::default();
        let targets = [target("10.0.0.1", "r1"), target("10.0.0.2", "r1")];
        let token = match cache.lookup("shop", "r1", &targets, &s) {
            Lookup::Pending(t) => t,
            other => panic!("{other:?}"),
        };
        let Lookup::Failed { reason, .. } = settle(&cache, "shop", "r1").await else {
            panic!()
        };
        assert!(reason.contains("connection refused"), "{reason}");
        assert!(reason.contains("dubbo://10.0.0."), "{reason}");
        assert_eq!(
            cache.failures(),
            vec![("shop".to_string(), "r1".to_string(), reason.clone())]
        );
        // One round: the bounded attempts, over both instances.
        assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
        let hosts: std::collections::BTreeSet<String> =
            fake.hosts.lock().unwrap().iter().cloned().collect();
        assert_eq!(hosts.len(), 2, "{hosts:?}");
        // It answers again: the next round fetches it.
        fake.failing.store(false, Ordering::SeqCst);
        let mut rx = cache.subscribe();
        tokio::time::timeout(Duration::from_secs(30), rx.changed())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            cache.lookup("shop", "r1", &[], &s),
            Lookup::Ready(_)
        ));
        assert!(cache.failures().is_empty());
        assert_eq!(fake.calls.load(Ordering::SeqCst), 4);
        drop(token);
    }

    #[tokio::test(start_paused = true)]
    async fn silent_providers_time_out_and_abandoned_fetches_stop() {
        let fake = Arc::new(Fake::default());
        fake.silent.store(true, Ordering::SeqCst);
        let cache = MetadataCache::new(fake.clone());
        let s = FetchSettings {
            timeout: Duration::from_secs(1),
            ..FetchSettings::default()
        };
        let token = cache.lookup("shop", "r1", &[target("10.0.0.1", "r1")], &s);
        let started = tokio::time::Instant::now();
        let Lookup::Failed { reason, .. } = settle(&cache, "shop", "r1").await else {
            panic!()
        };
        assert!(reason.contains("did not answer within 1s"), "{reason}");
        // 3 attempts of ~1 s and two pauses (0.25 s, 0.5 s, ±20%).
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(3600) && took < Duration::from_secs(5),
            "{took:?}"
        );
        drop(token);
        // Nobody waits: after the pause the entry goes and no more attempts are made.
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
        assert_eq!(cache.stats().pending, 0);
        assert_eq!(cache.fetches("shop", "r1"), 0);
    }

    #[test]
    fn a_fetch_whose_runtime_went_is_taken_over_by_the_next_lookup() {
        let fake = Arc::new(Fake::default());
        fake.silent.store(true, Ordering::SeqCst);
        let cache = MetadataCache::new(fake.clone());
        let s = FetchSettings::default();
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let token = first.block_on(async {
            let t = cache.lookup("shop", "r1", &[target("h", "r1")], &s);
            // Let the task start its (silent) attempt.
            tokio::time::sleep(Duration::from_millis(20)).await;
            t
        });
        drop(first);
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
        fake.silent.store(false, Ordering::SeqCst);
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        second.block_on(async {
            let Lookup::Ready(_) = settle(&cache, "shop", "r1").await else {
                panic!("not taken over")
            };
        });
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
        drop(token);
    }

    #[tokio::test(start_paused = true)]
    async fn ready_entries_are_bounded() {
        let fake = Arc::new(Fake::default());
        let cache = MetadataCache::with_capacity(fake.clone(), 2);
        for rev in ["a", "b", "c"] {
            cache.lookup("shop", rev, &[target("h", rev)], &FetchSettings::default());
            settle(&cache, "shop", rev).await;
        }
        assert_eq!(cache.stats().cached, 2);
        assert!(
            cache.get("shop", "a").is_none(),
            "the least recently used went"
        );
        assert!(cache.get("shop", "c").is_some());
    }

    /// Answers every revision `r<n>` with a `MetadataInfo` holding `n` KiB of parameter text.
    #[derive(Debug)]
    struct Sized;

    impl MetadataFetcher for Sized {
        fn fetch<'a>(
            &'a self,
            target: &'a MetadataServiceTarget,
            _timeout: Duration,
        ) -> BoxFuture<'a, Result<MetadataInfo>> {
            Box::pin(async move {
                let kib: usize = target
                    .revision
                    .trim_start_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .unwrap();
                let service = super::super::ServiceInfo {
                    name: "demo.Greeter".into(),
                    params: BTreeMap::from([("blob".to_string(), "x".repeat(kib << 10))]),
                    ..Default::default()
                };
                Ok(MetadataInfo {
                    app: target.application.clone(),
                    revision: target.revision.clone(),
                    services: BTreeMap::from([("demo.Greeter:dubbo".to_string(), service)]),
                })
            })
        }
    }

    /// Ready entries are bounded by the text they hold too, and one over
    /// [`MAX_INFO_BYTES`] is a failed fetch: a provider's answer cannot fill the memory.
    #[tokio::test(start_paused = true)]
    async fn ready_entries_are_bounded_in_bytes() {
        let cache = MetadataCache::new(Arc::new(Sized));
        let _big = cache.lookup(
            "shop",
            "r5000",
            &[target("h", "r5000")],
            &FetchSettings::default(),
        );
        let Lookup::Failed { reason, .. } = settle(&cache, "shop", "r5000").await else {
            panic!("a 5000 KiB MetadataInfo is refused")
        };
        assert!(reason.contains("over the 4194304 kept"), "{reason}");
        // 20 revisions of 4000 KiB each: 78 MiB, more than MAX_CACHE_BYTES (64 MiB).
        for k in 0..20 {
            let rev = format!("r{}", 4000 + k);
            cache.lookup(
                "shop",
                &rev,
                &[target("h", &rev)],
                &FetchSettings::default(),
            );
            settle(&cache, "shop", &rev).await;
        }
        let kept = cache.stats().cached;
        assert_eq!(kept, MAX_CACHE_BYTES / (4010 << 10), "kept {kept}");
        assert!(
            cache.get("shop", "r4000").is_none(),
            "the least recently used went"
        );
        assert!(cache.get("shop", "r4019").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wrong_revision_or_no_target_is_a_failure() {
        #[derive(Debug)]
        struct Other;
        impl MetadataFetcher for Other {
            fn fetch<'a>(
                &'a self,
                _t: &'a MetadataServiceTarget,
                _timeout: Duration,
            ) -> BoxFuture<'a, Result<MetadataInfo>> {
                Box::pin(async {
                    Ok(MetadataInfo {
                        revision: "other".into(),
                        ..MetadataInfo::default()
                    })
                })
            }
        }
        let cache = MetadataCache::new(Arc::new(Other));
        let _t = cache.lookup(
            "shop",
            "r1",
            &[target("h", "r1")],
            &FetchSettings::default(),
        );
        let Lookup::Failed { reason, .. } = settle(&cache, "shop", "r1").await else {
            panic!()
        };
        assert!(reason.contains("revision other instead"), "{reason}");
        let _u = cache.lookup("shop", "r9", &[], &FetchSettings::default());
        let Lookup::Failed { reason, .. } = settle(&cache, "shop", "r9").await else {
            panic!()
        };
        assert!(reason.contains("no instance advertises"), "{reason}");
    }
}
