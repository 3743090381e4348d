//! Resolving the layers into the values one call uses ([`Effective`]): once per snapshot and
//! method, every endpoint's registration read once; per call only the `retries`/`timeout`
//! attachments are looked at.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use switchman_core::{Error, Invocation};
use switchman_discovery::Balancing;

use super::durations::{DEFAULT_TIMEOUT, positive_or_default};
use super::provider::{ProviderKeys, ProviderLayer};
use super::settings::{DEFAULT_FAILBACK_TASKS, SETTING_KEYS, parse_timeout};
use super::values::{BalancerSpec, DEFAULT_FAILBACK_RETRIES};
use super::{ClusterConfig, Forks, Hedge, Merger, Mock, Percent, Settings, Strategy};

/// The resolved values for one method of one service (defaults are Dubbo's).
///
/// `timeout`, `actives` and `sticky` are what an instance that registered none of them gets;
/// an instance's own registration can change them ([`Effective::timeout_for`],
/// [`Effective::actives_for`], [`Effective::sticky_for`]), precomputed for every endpoint of
/// the snapshot the settings were resolved for. So is the balancer
/// ([`Effective::loadbalance_for`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Effective {
    /// Strategy.
    pub strategy: Strategy,
    /// Extra attempts (failover) or background retries (failback).
    pub retries: u32,
    /// Per-attempt timeout for an instance that registered none (consumer method > consumer
    /// > 1000 ms).
    pub timeout: Duration,
    /// Parallel attempts for forking.
    pub forks: Forks,
    /// Sticky instance, for an instance that registered no `sticky`.
    pub sticky: bool,
    /// Per-instance in-flight cap for an instance that registered none (None: no cap).
    pub actives: Option<u32>,
    /// Degrade rule.
    pub mock: Option<Mock>,
    /// Broadcast fail percent.
    pub broadcast_fail_percent: Percent,
    /// Failback queue bound.
    pub failbacktasks: usize,
    /// Hedging policy.
    pub hedge: Option<Hedge>,
    /// Total time for all attempts.
    pub deadline: Option<Duration>,
    /// Consumer zone.
    pub zone: Option<String>,
    /// How `mergeable` combines groups; `None` when not set (merging then happens only with
    /// a merger set in code).
    pub merger: Option<Merger>,
    /// What these settings were resolved for (a snapshot), with the per-endpoint values.
    pub(crate) resolved_for: Option<ResolvedFor>,
    /// A `timeout` attachment set `timeout` for this call: it applies to every instance.
    pub(crate) timeout_forced: bool,
}

/// The snapshot a method's settings were resolved for, and what differs per endpoint.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedFor {
    pub(crate) snapshot: u64,
    /// Every endpoint's limits, when some endpoint's registration changes them.
    pub(crate) limits: Option<Arc<[Limits]>>,
    /// The balancer of each endpoint when it is the first routed one, when some is not the
    /// directory's (filled in by the invoker with the snapshot's tables).
    pub(crate) specs: Option<Arc<[BalancerSpec]>>,
    /// The balancer tables per routed subset, when some subset does not use the directory's.
    pub(crate) balancing: Option<Arc<Balancing>>,
    /// The sum of every endpoint's `actives` cap; `None` when some endpoint has none (or
    /// there is no endpoint): what `poll_ready` compares the attempts in flight with.
    pub(crate) capacity: Option<u64>,
}

/// The values an instance's own registration can change for the calls it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) timeout: Duration,
    pub(crate) actives: Option<u32>,
    /// Read from the first routed instance, as Dubbo's `select` does.
    pub(crate) sticky: bool,
}

impl Effective {
    fn from_settings(s: &Settings) -> Effective {
        let strategy = s.strategy.unwrap_or_default();
        let failback = strategy == Strategy::Failback;
        Effective {
            strategy,
            retries: match s.retries {
                Some(r) => r.resolve(failback),
                None if failback => DEFAULT_FAILBACK_RETRIES,
                None => 2,
            },
            timeout: s
                .timeout
                .map(positive_or_default)
                .unwrap_or(DEFAULT_TIMEOUT),
            forks: s.forks.unwrap_or_default(),
            sticky: s.sticky.unwrap_or(false),
            actives: s.actives.filter(|a| *a > 0),
            mock: s.mock.clone(),
            broadcast_fail_percent: s.broadcast_fail_percent.unwrap_or(Percent::ALL),
            failbacktasks: s.failbacktasks.unwrap_or(DEFAULT_FAILBACK_TASKS).get() as usize,
            hedge: s.hedge,
            deadline: s.deadline,
            zone: s.zone.clone(),
            merger: s.merger,
            resolved_for: None,
            timeout_forced: false,
        }
    }

    /// The limits of an endpoint whose registration changes none of them.
    pub(crate) fn base_limits(&self) -> Limits {
        Limits {
            timeout: self.timeout,
            actives: self.actives,
            sticky: self.sticky,
        }
    }

    /// The limits of endpoint `i` of the snapshot with id `snapshot`; `None` when these settings were
    /// resolved for another snapshot. A forced (attachment) timeout is not applied here.
    #[inline(always)]
    pub(crate) fn limits_at(&self, snapshot: u64, i: usize) -> Option<Limits> {
        match &self.resolved_for {
            Some(r) if r.snapshot == snapshot => Some(
                r.limits
                    .as_ref()
                    .and_then(|p| p.get(i).copied())
                    .unwrap_or_else(|| self.base_limits()),
            ),
            _ => None,
        }
    }

    /// The sum of the endpoints' `actives` caps for the snapshot with id `snapshot` (`Some(None)`: some
    /// endpoint is uncapped); `None` when these settings were resolved for another snapshot.
    #[inline]
    pub(crate) fn capacity_at(&self, snapshot: u64) -> Option<Option<u64>> {
        match &self.resolved_for {
            Some(r) if r.snapshot == snapshot => Some(r.capacity),
            _ => None,
        }
    }

    /// The balancer tables for the snapshot with id `snapshot`: `Some(None)` when every subset uses
    /// the directory's own, `None` when these settings were resolved for another snapshot.
    #[inline]
    pub(crate) fn balancing_at(&self, snapshot: u64) -> Option<Option<&Balancing>> {
        match &self.resolved_for {
            Some(r) if r.snapshot == snapshot => Some(r.balancing.as_deref()),
            _ => None,
        }
    }

    fn limits_or_base(&self, i: usize) -> Limits {
        let mut l = match &self.resolved_for {
            Some(ResolvedFor {
                limits: Some(per), ..
            }) => per.get(i).copied().unwrap_or_else(|| self.base_limits()),
            _ => self.base_limits(),
        };
        if self.timeout_forced {
            l.timeout = self.timeout;
        }
        l
    }

    /// The per-attempt timeout for endpoint `i` of the snapshot these settings were resolved
    /// for: consumer method > the instance's `{method}.timeout` > consumer > the instance's
    /// `timeout` > 1000 ms (a `timeout` attachment beats them all).
    pub fn timeout_for(&self, i: usize) -> Duration {
        self.limits_or_base(i).timeout
    }

    /// The in-flight cap for endpoint `i` of the snapshot these settings were resolved for,
    /// with the same precedence as [`Effective::timeout_for`].
    pub fn actives_for(&self, i: usize) -> Option<u32> {
        self.limits_or_base(i).actives
    }

    /// Whether a call whose first routed endpoint is `i` keeps a sticky instance, with the
    /// same precedence as [`Effective::timeout_for`].
    pub fn sticky_for(&self, i: usize) -> bool {
        self.limits_or_base(i).sticky
    }

    /// The name of the balancer a call uses when endpoint `i` of the snapshot these settings
    /// were resolved for is its first routed one (Dubbo reads `loadbalance` from
    /// `invokers.get(0)`): consumer method > the instance's `{method}.loadbalance` > consumer
    /// > the instance's `loadbalance`; `None` when nothing names one (the directory's own).
    pub fn loadbalance_for(&self, i: usize) -> Option<&str> {
        let spec = self.resolved_for.as_ref()?.specs.as_ref()?.get(i)?;
        match spec {
            BalancerSpec::Directory { .. } => None,
            BalancerSpec::Named(k, _, _) => Some(k.as_str()),
            BalancerSpec::Custom(b) => Some(b.name()),
        }
    }
}

/// What consumer rules set for this consumer ([`switchman_discovery::Snapshot::consumer_overrides`],
/// dubbo-admin's `side: consumer` configurators), as layers over the consumer's own: the
/// service-level keys over its service and global layers, `{method}.{key}` over its method
/// layer, as Dubbo's consumer configuration listeners override the reference's URL.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dynamic {
    service: Settings,
    methods: BTreeMap<String, Settings>,
}

impl Dynamic {
    /// Parses the rules' parameters with [`Settings::set`]. Registry data: a value that does
    /// not parse is logged (naming the service, key and value) and skipped, the rest apply;
    /// keys that are not settings (`priority`, ...) are ignored.
    pub(crate) fn parse(
        params: &BTreeMap<String, String>,
        service: &dyn std::fmt::Display,
    ) -> Dynamic {
        let mut d = Dynamic::default();
        for (k, v) in params {
            let (layer, key) = if SETTING_KEYS.contains(&k.as_str()) {
                (&mut d.service, k.as_str())
            } else {
                match k.split_once('.') {
                    Some((m, key)) if !m.is_empty() && SETTING_KEYS.contains(&key) => {
                        (d.methods.entry(m.to_string()).or_default(), key)
                    }
                    _ => continue,
                }
            };
            if let Err(e) = layer.set(key, v) {
                tracing::warn!(service = %service, "consumer rule parameter {k} skipped: {e}");
            }
        }
        d
    }
}

/// The consumer's layers for one method, merged once: the method layer, and the service over
/// the global layer (each under what consumer rules set).
struct Consumer {
    method: Option<Settings>,
    rest: Settings,
}

impl Consumer {
    /// Dubbo's `getMethodParameter`: consumer method > provider method > consumer > provider.
    fn pick<T: Clone>(
        &self,
        p: Option<&ProviderLayer>,
        pm: Option<&ProviderLayer>,
        consumer: impl Fn(&Settings) -> Option<T>,
        provider: impl Fn(&ProviderLayer) -> Option<T>,
    ) -> Option<T> {
        self.method
            .as_ref()
            .and_then(&consumer)
            .or_else(|| pm.and_then(&provider))
            .or_else(|| consumer(&self.rest))
            .or_else(|| p.and_then(&provider))
    }

    /// The limits of a call to a provider with these layers; `default_timeout`: its protocol's
    /// (Dubbo's 1000 ms, Triple's 3000 ms), for no layer or a value that is not positive.
    fn limits(
        &self,
        p: Option<&ProviderLayer>,
        pm: Option<&ProviderLayer>,
        default_timeout: Duration,
    ) -> Limits {
        Limits {
            timeout: self
                .pick(p, pm, |s| s.timeout, |l| l.timeout)
                .filter(|t| !t.is_zero())
                .unwrap_or(default_timeout),
            actives: self
                .pick(p, pm, |s| s.actives, |l| l.actives)
                .filter(|a| *a > 0),
            sticky: self
                .pick(p, pm, |s| s.sticky, |l| l.sticky)
                .unwrap_or(false),
        }
    }

    fn balancer(&self, p: Option<&ProviderLayer>, pm: Option<&ProviderLayer>) -> BalancerSpec {
        let lb = self.pick(
            p,
            pm,
            |s| s.loadbalance.clone(),
            |l| l.loadbalance.map(super::Balancer::Named),
        );
        let nodes = self.pick(p, pm, |s| s.hash_nodes, |l| l.hash_nodes);
        let args = self.pick(
            p,
            pm,
            |s| s.hash_arguments.clone(),
            |l| l.hash_arguments.clone(),
        );
        BalancerSpec::of(lb.as_ref(), nodes, args.as_ref())
    }
}

impl ClusterConfig {
    fn consumer(&self, method: Option<&str>, dynamic: &Dynamic) -> Consumer {
        let own = method.and_then(|m| self.methods.get(m));
        let ruled = method.and_then(|m| dynamic.methods.get(m));
        Consumer {
            method: match (ruled, own) {
                (Some(r), Some(o)) => Some(r.over(o)),
                (Some(r), None) => Some(r.clone()),
                (None, o) => o.cloned(),
            },
            rest: dynamic.service.over(&self.service.over(&self.global)),
        }
    }

    /// Resolves the layers for `method` (or the service default) for a call to the provider
    /// that registered `provider`: consumer method > provider method > consumer (service over
    /// global) > provider service > Dubbo's defaults for `timeout`, `actives`, `sticky` and
    /// the balancer; consumer method > consumer for every other key.
    pub fn resolve(&self, method: Option<&str>, provider: &BTreeMap<String, String>) -> Effective {
        let keys = ProviderKeys::parse(provider);
        let mut e = self.resolve_for_snapshot(method, 0, std::slice::from_ref(&keys));
        let l = e.limits_or_base(0);
        e.timeout = l.timeout;
        e.actives = l.actives;
        e.sticky = l.sticky;
        e
    }

    /// The settings for `method` over the endpoints of the snapshot with id `snapshot`, whose
    /// registrations are `providers` (in endpoint order). The balancer tables are left for
    /// the invoker to fill in (`ResolvedFor::balancing`).
    pub(crate) fn resolve_for_snapshot(
        &self,
        method: Option<&str>,
        snapshot: u64,
        providers: &[ProviderKeys],
    ) -> Effective {
        self.resolve_for_snapshot_with(method, snapshot, providers, &Dynamic::default())
    }

    /// [`ClusterConfig::resolve_for_snapshot`] under what consumer rules set (`dynamic`).
    pub(crate) fn resolve_for_snapshot_with(
        &self,
        method: Option<&str>,
        snapshot: u64,
        providers: &[ProviderKeys],
        dynamic: &Dynamic,
    ) -> Effective {
        let mut e = self.consumer_side(method, dynamic);
        let consumer = self.consumer(method, dynamic);
        let base = e.base_limits();
        let base_spec = consumer.balancer(None, None);
        let mut limits_differ = false;
        let mut spec_named = !base_spec.is_directory();
        let mut limits = Vec::with_capacity(providers.len());
        let mut specs = Vec::with_capacity(providers.len());
        for p in providers {
            if p.is_empty() {
                limits.push(base);
                specs.push(base_spec.clone());
                continue;
            }
            let pm = method.and_then(|m| p.method(m));
            let l = consumer.limits(
                Some(p.service()),
                pm,
                p.default_timeout().unwrap_or(DEFAULT_TIMEOUT),
            );
            limits_differ |= l != base;
            limits.push(l);
            let s = consumer.balancer(Some(p.service()), pm);
            spec_named |= !s.is_directory();
            specs.push(s);
        }
        let capacity = if limits.is_empty() {
            None
        } else {
            limits
                .iter()
                .try_fold(0u64, |sum, l| l.actives.map(|a| sum + u64::from(a)))
        };
        e.resolved_for = Some(ResolvedFor {
            snapshot,
            limits: limits_differ.then(|| Arc::from(limits)),
            specs: spec_named.then(|| Arc::from(specs)),
            balancing: None,
            capacity,
        });
        e
    }

    /// Every key but the provider-settable ones: consumer method > consumer service >
    /// consumer global > default. `timeout`/`actives`/`sticky` as for an instance that
    /// registered none.
    fn consumer_side(&self, method: Option<&str>, dynamic: &Dynamic) -> Effective {
        let c = self.consumer(method, dynamic);
        let merged = match &c.method {
            Some(m) => m.over(&c.rest),
            None => c.rest.clone(),
        };
        let mut e = Effective::from_settings(&merged);
        if e.mock.is_none() {
            e.mock = self.fallback.clone().map(Mock::Fail);
        }
        e
    }

    /// Method names that have settings of their own (consumer side, or provider keys
    /// registered per method by any of `providers`).
    pub(crate) fn method_names(
        &self,
        providers: &[ProviderKeys],
        dynamic: &Dynamic,
    ) -> Vec<String> {
        let mut names: Vec<String> = self.methods.keys().cloned().collect();
        for m in dynamic.methods.keys() {
            if !names.contains(m) {
                names.push(m.clone());
            }
        }
        for p in providers {
            for m in p.method_names() {
                if !names.iter().any(|n| n == m) {
                    names.push(m.to_string());
                }
            }
        }
        names
    }
}

/// Per-call overrides from attachments: `retries` and `timeout` (ms, or a duration), parsed
/// as the loaders parse them; a value that does not parse fails the call with an error naming
/// the attachment. A `timeout` that is not positive is ignored (the settings apply); a
/// negative `retries` means no retry, as Dubbo's `calculateInvokeTimes` reads it.
#[inline]
pub(crate) fn apply_attachments(
    e: &Effective,
    inv: &Invocation,
) -> Result<Option<Box<Effective>>, Error> {
    // Most calls carry no attachment: they do not enter the search.
    if inv.attachments.is_empty() {
        return Ok(None);
    }
    override_from_attachments(e, inv)
}

#[inline(never)]
fn override_from_attachments(
    e: &Effective,
    inv: &Invocation,
) -> Result<Option<Box<Effective>>, Error> {
    let retries = inv.attachment("retries");
    let timeout = inv.attachment("timeout");
    if retries.is_none() && timeout.is_none() {
        return Ok(None);
    }
    // Boxed: the rare case does not enlarge every call's future.
    let mut o = Box::new(e.clone());
    if let Some(r) = retries {
        let n: i64 = r
            .trim()
            .parse()
            .map_err(|_| Error::bad_config(format!("attachment retries={r:?}: not an integer")))?;
        o.retries = u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    }
    if let Some(t) = timeout {
        let positive = t.trim().parse::<i64>().map_or(true, |n| n > 0);
        if positive {
            o.timeout = parse_timeout(t.trim()).ok_or_else(|| {
                Error::bad_config(format!(
                    "attachment timeout={t:?}: not a number of milliseconds or a duration such as 800ms"
                ))
            })?;
            o.timeout_forced = true;
        }
    }
    Ok(Some(o))
}
