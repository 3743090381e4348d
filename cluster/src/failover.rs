use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use switchman_core::{Error, Invocation, Invoker, Result};
use switchman_discovery::{RegistryDirectory, Snapshot};
use tracing::{debug, trace};

use crate::config::{ClusterConfig, MAX_ATTEMPTS, Strategy};

/// Calls a service through its directory with a fault-tolerance strategy.
///
/// Per attempt: one snapshot load, routing, an O(1)/O(log n) pick that avoids instances this
/// call already tried while untried ones remain, and the invoker call bounded by the timeout.
#[derive(Debug, Clone)]
pub struct ClusterInvoker {
    directory: Arc<RegistryDirectory>,
    invoker: Arc<dyn Invoker>,
    config: ClusterConfig,
}

/// The instances tried by one call, as indexes into the snapshot they were picked from,
/// kept on the stack. Remapped by address when the snapshot changes between attempts.
struct Tried {
    idx: [usize; MAX_ATTEMPTS],
    len: usize,
    snapshot: Option<Arc<Snapshot>>,
}

impl Tried {
    fn new() -> Self {
        Tried {
            idx: [0; MAX_ATTEMPTS],
            len: 0,
            snapshot: None,
        }
    }

    /// The tried indexes valid in `snap` (remapped by address if `snap` is newer).
    fn for_snapshot(&mut self, snap: &Arc<Snapshot>) -> &[usize] {
        if let Some(old) = &self.snapshot {
            if old.epoch() != snap.epoch() {
                let mut n = 0;
                for k in 0..self.len {
                    let addr = old.endpoints()[self.idx[k]].instance.address();
                    if let Some(i) = snap.index_of(addr) {
                        self.idx[n] = i;
                        n += 1;
                    }
                }
                self.len = n;
            }
        }
        self.snapshot = Some(snap.clone());
        &self.idx[..self.len]
    }

    fn push(&mut self, i: usize) {
        if self.len < MAX_ATTEMPTS {
            self.idx[self.len] = i;
            self.len += 1;
        }
    }
}

impl ClusterInvoker {
    /// A cluster invoker over `directory`, calling instances through `invoker`.
    pub fn new(
        directory: Arc<RegistryDirectory>,
        invoker: Arc<dyn Invoker>,
        config: ClusterConfig,
    ) -> Self {
        ClusterInvoker {
            directory,
            invoker,
            config,
        }
    }

    /// The directory this invoker reads.
    pub fn directory(&self) -> &Arc<RegistryDirectory> {
        &self.directory
    }

    /// The configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    fn attempts_for(&self, invocation: &Invocation) -> usize {
        let retries = match self.config.strategy {
            Strategy::Failfast => 0,
            Strategy::Failover => invocation
                .attachment("retries")
                .and_then(|r| r.trim().parse::<i64>().ok())
                .map(|r| r.max(0) as usize)
                .unwrap_or(self.config.retries as usize),
        };
        (retries + 1).min(MAX_ATTEMPTS)
    }

    fn timeout_for(&self, invocation: &Invocation) -> Duration {
        invocation
            .attachment("timeout")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(self.config.timeout)
    }

    /// Makes one call. Returns the provider's result, or the last error with the addresses
    /// tried.
    pub async fn invoke(&self, invocation: &Invocation) -> Result<Value> {
        let attempts = self.attempts_for(invocation);
        let timeout = self.timeout_for(invocation);
        let mut rng = fastrand::Rng::new();
        let mut tried = Tried::new();
        let mut tried_addrs: Vec<String> = Vec::new();
        let mut last_err: Option<Error> = None;
        for attempt in 0..attempts {
            // Re-list before every attempt: a retry sees instances added or removed meanwhile.
            let snap = self.directory.load();
            let picked = snap.select(invocation, tried.for_snapshot(&snap), &mut rng);
            let i = match picked {
                Ok(i) => i,
                // No provider / forbidden: nothing to retry on. Report the earlier failure if any.
                Err(e) => return Err(last_err.unwrap_or(e).with_tried(tried_addrs)),
            };
            tried.push(i);
            let ep = &snap.endpoints()[i];
            trace!(attempt, address = ep.instance.address(), method = %invocation.method, "attempt");
            let started = Instant::now();
            let guard = ep.stats.begin();
            let result = match tokio::time::timeout(
                timeout,
                self.invoker.invoke(&ep.instance, invocation, timeout),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => Err(Error::timeout(format!(
                    "{} did not answer {} within {timeout:?}",
                    ep.instance.address(),
                    invocation.method
                ))),
            };
            let served = match &result {
                Ok(_) => true,
                Err(e) => e.is_business(),
            };
            guard.finish(started.elapsed(), served);
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    tried_addrs.push(ep.instance.address().to_string());
                    if !e.is_retryable() {
                        return Err(e.with_tried(tried_addrs));
                    }
                    debug!(attempt, address = ep.instance.address(), error = %e, "attempt failed");
                    last_err = Some(e);
                }
            }
        }
        let e = last_err.unwrap_or_else(|| Error::no_provider("no attempt was made"));
        Err(e.with_tried(tried_addrs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use switchman_core::{BoxFuture, ErrorKind, Instance, ServiceKey};
    use switchman_discovery::{DirectoryConfig, Update};

    /// Behaviour per port: a script of outcomes consumed one per call (the last one repeats).
    #[derive(Debug, Clone, Copy)]
    enum Fault {
        Ok,
        Refuse,
        Hang,
        Business,
    }

    #[derive(Debug, Default)]
    struct FaultInvoker {
        plan: Mutex<HashMap<u16, Vec<Fault>>>,
        calls: Mutex<Vec<u16>>,
    }

    impl FaultInvoker {
        fn with(plan: &[(u16, &[Fault])]) -> Arc<Self> {
            let inv = FaultInvoker::default();
            for (port, faults) in plan {
                inv.plan.lock().unwrap().insert(*port, faults.to_vec());
            }
            Arc::new(inv)
        }
        fn calls(&self) -> Vec<u16> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Invoker for FaultInvoker {
        fn invoke<'a>(
            &'a self,
            target: &'a Instance,
            _inv: &'a Invocation,
            _t: Duration,
        ) -> BoxFuture<'a, Result<Value>> {
            let port = target.port();
            self.calls.lock().unwrap().push(port);
            let fault = {
                let mut plan = self.plan.lock().unwrap();
                let script = plan.entry(port).or_insert_with(|| vec![Fault::Ok]);
                if script.len() > 1 {
                    script.remove(0)
                } else {
                    script[0]
                }
            };
            Box::pin(async move {
                match fault {
                    Fault::Ok => Ok(Value::from(port)),
                    Fault::Refuse => Err(Error::transport(format!("connection refused by {port}"))),
                    Fault::Business => Err(Error::business("IllegalArgumentException")),
                    Fault::Hang => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        Ok(Value::Null)
                    }
                }
            })
        }
    }

    async fn cluster(
        ports: &[u16],
        invoker: Arc<FaultInvoker>,
        config: ClusterConfig,
    ) -> ClusterInvoker {
        let dir =
            RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("com.foo.Bar")), None);
        dir.apply(Update::Reset(
            ports
                .iter()
                .map(|&p| Instance::builder("10.0.0.1", p).build())
                .collect(),
        ));
        dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
            .await
            .unwrap();
        ClusterInvoker::new(Arc::new(dir), invoker, config)
    }

    #[tokio::test(start_paused = true)]
    async fn failover_tries_each_instance_once_then_returns_last_error() {
        use Fault::*;
        let inv = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
        let c = cluster(&[1, 2, 3], inv.clone(), ClusterConfig::default()).await;
        let e = c.invoke(&Invocation::new("m")).await.unwrap_err();
        let mut calls = inv.calls();
        assert_eq!(calls.len(), 3, "retries=2 means 3 attempts");
        calls.sort();
        assert_eq!(
            calls,
            vec![1, 2, 3],
            "no instance is tried twice while untried ones remain"
        );
        assert_eq!(e.kind(), ErrorKind::Transport);
        assert_eq!(e.tried().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn failover_succeeds_on_a_healthy_instance() {
        use Fault::*;
        let inv = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Ok])]);
        let c = cluster(&[1, 2, 3], inv.clone(), ClusterConfig::default()).await;
        for _ in 0..50 {
            assert_eq!(
                c.invoke(&Invocation::new("m")).await.unwrap(),
                Value::from(3)
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn business_errors_are_not_retried() {
        use Fault::*;
        let inv = FaultInvoker::with(&[(1, &[Business]), (2, &[Business])]);
        let c = cluster(&[1, 2], inv.clone(), ClusterConfig::default()).await;
        let e = c.invoke(&Invocation::new("m")).await.unwrap_err();
        assert!(e.is_business());
        assert_eq!(inv.calls().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn timeouts_are_retried_and_bounded_by_the_per_attempt_timeout() {
        use Fault::*;
        let inv = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang]), (3, &[Hang])]);
        let cfg = ClusterConfig::default().timeout(Duration::from_millis(250));
        let c = cluster(&[1, 2, 3], inv.clone(), cfg).await;
        let start = tokio::time::Instant::now();
        let e = c.invoke(&Invocation::new("m")).await.unwrap_err();
        assert!(e.is_timeout());
        assert_eq!(inv.calls().len(), 3);
        assert_eq!(start.elapsed(), Duration::from_millis(750));
    }

    #[tokio::test(start_paused = true)]
    async fn per_call_attachments_override_retries_and_timeout() {
        use Fault::*;
        let inv = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
        let c = cluster(&[1, 2, 3], inv.clone(), ClusterConfig::default()).await;
        c.invoke(&Invocation::new("m").with_attachment("retries", "0"))
            .await
            .unwrap_err();
        assert_eq!(inv.calls().len(), 1);
        let c2 = cluster(
            &[1, 2, 3],
            FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang]), (3, &[Hang])]),
            ClusterConfig::default(),
        )
        .await;
        let start = tokio::time::Instant::now();
        c2.invoke(
            &Invocation::new("m")
                .with_attachment("timeout", "10")
                .with_attachment("retries", "1"),
        )
        .await
        .unwrap_err();
        assert_eq!(start.elapsed(), Duration::from_millis(20));
    }

    #[tokio::test(start_paused = true)]
    async fn failfast_makes_one_attempt() {
        use Fault::*;
        let inv = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse])]);
        let c = cluster(
            &[1, 2],
            inv.clone(),
            ClusterConfig::default().strategy(Strategy::Failfast),
        )
        .await;
        c.invoke(&Invocation::new("m")).await.unwrap_err();
        assert_eq!(inv.calls().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_sees_instances_added_after_the_first_attempt() {
        use Fault::*;
        // The only instance refuses; while the call is running a healthy one appears.
        let inv = FaultInvoker::with(&[(1, &[Refuse, Refuse, Refuse]), (9, &[Ok])]);
        let c = cluster(&[1], inv.clone(), ClusterConfig::default().retries(1)).await;
        let dir = c.directory().clone();
        let slow = Arc::new(SlowFirst {
            inner: inv.clone(),
            dir: dir.clone(),
        });
        let c = ClusterInvoker::new(dir, slow, ClusterConfig::default().retries(1));
        assert_eq!(
            c.invoke(&Invocation::new("m")).await.unwrap(),
            Value::from(9)
        );
    }

    /// Adds instance 9 to the directory during the first attempt.
    #[derive(Debug)]
    struct SlowFirst {
        inner: Arc<FaultInvoker>,
        dir: Arc<RegistryDirectory>,
    }

    impl Invoker for SlowFirst {
        fn invoke<'a>(
            &'a self,
            target: &'a Instance,
            inv: &'a Invocation,
            t: Duration,
        ) -> BoxFuture<'a, Result<Value>> {
            Box::pin(async move {
                if self.inner.calls().is_empty() {
                    self.dir
                        .apply(Update::Add(vec![Instance::builder("10.0.0.1", 9).build()]));
                    self.dir
                        .wait_until(Duration::from_secs(5), |s| s.epoch() >= 2)
                        .await
                        .unwrap();
                }
                self.inner.invoke(target, inv, t).await
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_provider_is_reported_before_any_attempt() {
        let inv = FaultInvoker::with(&[]);
        let c = cluster(&[], inv.clone(), ClusterConfig::default()).await;
        let e = c.invoke(&Invocation::new("m")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoProvider);
        assert!(inv.calls().is_empty());
    }
}
