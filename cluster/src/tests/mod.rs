//! Deterministic strategy tests over a fault-injecting invoker on tokio paused time.

mod balancing;
mod fallback;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, Result, ServiceKey,
};
use switchman_discovery::{Configurator, DirectoryConfig, RegistryDirectory, Update};

use crate::{
    BudgetConfig, Call, ClusterConfig, ClusterInvoker, ClusterStrategy, Forks, Hedge, Percent,
    Retries, Settings, Strategy,
};

/// Behaviour per port: a script of outcomes consumed one per call (the last one repeats).
#[derive(Debug, Clone, Copy)]
enum Fault {
    Ok,
    Refuse,
    Hang,
    Slow(u64),
    Business,
    /// A 503 with `connection: close`: retry elsewhere, no outlier strike.
    Drain,
    /// No connection could be made: nothing sent.
    Unreachable,
    /// Shutting down (a dubbo:// readonly event): nothing sent.
    Unavailable,
}
use Fault::*;

#[derive(Debug, Default)]
struct FaultInvoker {
    plan: Mutex<HashMap<u16, Vec<Fault>>>,
    calls: Mutex<Vec<u16>>,
    cancelled: Mutex<Vec<u16>>,
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
    fn sorted_calls(&self) -> Vec<u16> {
        let mut c = self.calls();
        c.sort();
        c
    }
}

struct CancelGuard<'a>(&'a FaultInvoker, u16, bool);
impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        if !self.2 {
            self.0.cancelled.lock().unwrap().push(self.1);
        }
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
            let script = plan.entry(port).or_insert_with(|| vec![Ok]);
            if script.len() > 1 {
                script.remove(0)
            } else {
                script[0]
            }
        };
        Box::pin(async move {
            let mut guard = CancelGuard(self, port, false);
            let r = match fault {
                Ok => Result::Ok(Value::from(port)),
                Refuse => Err(Error::transport(format!("connection refused by {port}"))),
                Business => Err(Error::business("IllegalArgumentException")),
                Drain => {
                    Err(Error::transport(format!("{port} is draining")).with_outlier_strike(false))
                }
                Unreachable => {
                    Err(Error::transport(format!("no connection to {port}")).with_unavailable(true))
                }
                Unavailable => Err(Error::transport(format!("{port} is shutting down"))
                    .with_outlier_strike(false)
                    .with_leaving()),
                Slow(ms) => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Result::Ok(Value::from(port))
                }
                Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Result::Ok(Value::Null)
                }
            };
            guard.2 = true;
            r
        })
    }
}

async fn directory(instances: Vec<Instance>) -> Arc<RegistryDirectory> {
    let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("com.foo.Bar")), None);
    dir.apply(Update::reset(instances));
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
        .await
        .unwrap();
    Arc::new(dir)
}

fn ports(ports: &[u16]) -> Vec<Instance> {
    ports
        .iter()
        .map(|&p| Instance::builder("10.0.0.1", p).build())
        .collect()
}

async fn cluster(
    ports_: &[u16],
    invoker: Arc<FaultInvoker>,
    config: ClusterConfig,
) -> ClusterInvoker {
    ClusterInvoker::new(directory(ports(ports_)).await, invoker, config)
}

fn inv() -> Invocation {
    Invocation::new("m")
}

#[tokio::test(start_paused = true)]
async fn failover_tries_each_instance_once_then_returns_last_error() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert_eq!(
        fi.sorted_calls(),
        vec![1, 2, 3],
        "retries=2: 3 attempts, none repeated"
    );
    assert_eq!(e.kind(), ErrorKind::Transport);
    assert_eq!(e.tried().len(), 3);
}

/// A transport whose first call changes the fleet (an instance that sorts before the others
/// comes, shifting every index) and waits until the directory shows it; every call fails.
#[derive(Debug)]
struct Shifting {
    dir: Arc<RegistryDirectory>,
    calls: Mutex<Vec<String>>,
}

impl Invoker for Shifting {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        _inv: &'a Invocation,
        _t: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let first = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(target.address().to_string());
            calls.len() == 1
        };
        Box::pin(async move {
            if first {
                let mut grown = vec![Instance::builder("10.0.0.0", 9).build()];
                grown.extend(ports(&[1, 2]));
                self.dir.apply(Update::reset(grown));
                self.dir
                    .wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 3)
                    .await
                    .unwrap();
            }
            Err(Error::transport(format!("refused by {}", target.address())))
        })
    }
}

/// Failover re-lists before a retry; when the fleet changed meanwhile, what the call tried is
/// carried over by address (the indexes shifted), so no instance is tried twice.
#[tokio::test(start_paused = true)]
async fn failover_never_retries_an_instance_when_the_fleet_changed_between_attempts() {
    for round in 0..20 {
        let dir = directory(ports(&[1, 2])).await;
        let t = Arc::new(Shifting {
            dir: dir.clone(),
            calls: Mutex::new(Vec::new()),
        });
        let c = ClusterInvoker::new(dir, t.clone(), ClusterConfig::default());
        let e = c.invoke(&inv()).await.unwrap_err();
        let mut calls = t.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 3, "round {round}: retries=2 ({e})");
        assert_ne!(
            calls[0], "10.0.0.0:9",
            "round {round}: the first pick is from the old fleet"
        );
        calls.sort();
        calls.dedup();
        assert_eq!(calls.len(), 3, "round {round}: an instance was tried twice");
    }
}

#[tokio::test(start_paused = true)]
async fn failover_succeeds_on_a_healthy_instance() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Ok])]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    for _ in 0..50 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(3));
    }
}

#[tokio::test(start_paused = true)]
async fn business_errors_are_not_retried() {
    let fi = FaultInvoker::with(&[(1, &[Business]), (2, &[Business])]);
    let c = cluster(&[1, 2], fi.clone(), ClusterConfig::default()).await;
    assert!(c.invoke(&inv()).await.unwrap_err().is_business());
    assert_eq!(fi.calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_retried_and_bounded_by_the_attempt_timeout() {
    let fi = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang]), (3, &[Hang])]);
    let c = cluster(
        &[1, 2, 3],
        fi.clone(),
        ClusterConfig::default().timeout(Duration::from_millis(250)),
    )
    .await;
    let start = tokio::time::Instant::now();
    assert!(c.invoke(&inv()).await.unwrap_err().is_timeout());
    assert_eq!(fi.calls().len(), 3);
    assert_eq!(start.elapsed(), Duration::from_millis(750));
}

/// A client that bounds its own attempts (`Invoker::bounds_timeout`) gets no second timer
/// from the cluster: its own timeout error is the one the caller sees. Any other client is
/// cut at the attempt's timeout by the cluster.
#[tokio::test(start_paused = true)]
async fn only_clients_that_do_not_bound_their_timeout_get_the_clusters_timer() {
    /// Answers its own timeout error 1 ms after the timeout it was given.
    #[derive(Debug)]
    struct OwnTimer(bool);
    impl Invoker for OwnTimer {
        fn invoke<'a>(
            &'a self,
            _target: &'a Instance,
            _inv: &'a Invocation,
            t: Duration,
        ) -> BoxFuture<'a, Result<Value>> {
            Box::pin(async move {
                tokio::time::sleep(t + Duration::from_millis(1)).await;
                Err(Error::timeout("the client's own timer"))
            })
        }
        fn bounds_timeout(&self) -> bool {
            self.0
        }
    }
    for bounds in [true, false] {
        let config = ClusterConfig::default()
            .strategy(Strategy::Failfast)
            .timeout(Duration::from_millis(250));
        let c = ClusterInvoker::new(
            directory(ports(&[1])).await,
            Arc::new(OwnTimer(bounds)),
            config,
        );
        let start = tokio::time::Instant::now();
        let e = c.invoke(&inv()).await.unwrap_err();
        assert!(e.is_timeout(), "{e}");
        if bounds {
            assert!(e.message().contains("the client's own timer"), "{e}");
            assert_eq!(start.elapsed(), Duration::from_millis(251));
        } else {
            assert!(e.message().contains("did not answer m within 250ms"), "{e}");
            assert_eq!(start.elapsed(), Duration::from_millis(250));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn per_call_attachments_override_retries_and_timeout() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    c.invoke(&inv().with_attachment("retries", "0"))
        .await
        .unwrap_err();
    assert_eq!(fi.calls().len(), 1);
    let c2 = cluster(
        &[1, 2, 3],
        FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang]), (3, &[Hang])]),
        ClusterConfig::default(),
    )
    .await;
    let start = tokio::time::Instant::now();
    c2.invoke(
        &inv()
            .with_attachment("timeout", "10")
            .with_attachment("retries", "1"),
    )
    .await
    .unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(20));
}

/// The provider's `timeout` bounds the attempts it receives; its `retries` do not stop the
/// consumer's failover (Dubbo reads `retries` from the consumer URL only).
#[tokio::test(start_paused = true)]
async fn provider_timeout_applies_but_provider_retries_do_not() {
    // The provider registered timeout=100 and m.retries=0; the consumer sets nothing.
    let insts = vec![
        Instance::builder("10.0.0.1", 1)
            .param("timeout", "100")
            .param("retries", "0")
            .param("m.retries", "0")
            .build(),
        Instance::builder("10.0.0.1", 2)
            .param("timeout", "100")
            .param("m.retries", "0")
            .build(),
    ];
    let fi = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang])]);
    let c = ClusterInvoker::new(directory(insts).await, fi.clone(), ClusterConfig::default());
    let start = tokio::time::Instant::now();
    c.invoke(&inv()).await.unwrap_err();
    assert_eq!(
        (fi.calls().len(), start.elapsed()),
        (3, Duration::from_millis(300)),
        "Dubbo's retries=2 with the provider's 100 ms per attempt"
    );
    // A consumer method setting beats the provider's.
    let cfg = ClusterConfig::default().method(
        "m",
        Settings::new()
            .retries(1)
            .timeout(Duration::from_millis(40)),
    );
    let fi = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang])]);
    let c = ClusterInvoker::new(c.directory().clone(), fi.clone(), cfg);
    let start = tokio::time::Instant::now();
    c.invoke(&inv()).await.unwrap_err();
    assert_eq!(
        (fi.calls().len(), start.elapsed()),
        (2, Duration::from_millis(80))
    );
}

/// 10.0.0.1 registers timeout=200, 10.0.0.2 timeout=5000 and answers in 1 s: calls to .2
/// succeed (each attempt is bounded by the timeout of the instance it goes to, not by the
/// first provider's).
#[tokio::test(start_paused = true)]
async fn provider_settings_come_from_the_instance_being_called() {
    let insts = vec![
        Instance::builder("10.0.0.1", 1)
            .param("timeout", "200")
            .build(),
        Instance::builder("10.0.0.2", 2)
            .param("timeout", "5000")
            .build(),
    ];
    let fi = FaultInvoker::with(&[(1, &[Slow(1000)]), (2, &[Slow(1000)])]);
    // Outlier ejection off: .1 times out on every call and would soon be ejected.
    let c = ClusterInvoker::new(
        directory(insts).await,
        fi.clone(),
        ClusterConfig::default()
            .strategy(Strategy::Failfast)
            .outlier(crate::OutlierConfig::disabled()),
    );
    let (mut ok, mut timed_out) = (0, 0);
    for _ in 0..40 {
        let before = fi.calls().len();
        let start = tokio::time::Instant::now();
        let r = c.invoke(&inv()).await;
        let port = fi.calls()[before];
        match port {
            2 => {
                assert_eq!(r.unwrap(), Value::from(2));
                assert_eq!(start.elapsed(), Duration::from_millis(1000));
                ok += 1;
            }
            _ => {
                assert!(r.unwrap_err().is_timeout());
                assert_eq!(start.elapsed(), Duration::from_millis(200));
                timed_out += 1;
            }
        }
    }
    assert!(ok > 5 && timed_out > 5, "{ok} ok, {timed_out} timed out");
    let s = c.settings("m");
    let snap = c.directory().load();
    let at = |a: &str| snap.index_of(a).unwrap();
    assert_eq!(s.timeout_for(at("10.0.0.1:1")), Duration::from_millis(200));
    assert_eq!(s.timeout_for(at("10.0.0.2:2")), Duration::from_millis(5000));
}

/// An override that sets `timeout` on one address applies to that address only.
#[tokio::test(start_paused = true)]
async fn an_override_timeout_applies_to_its_address_only() {
    let dir = directory(vec![
        Instance::builder("10.0.0.1", 1).build(),
        Instance::builder("10.0.0.2", 2).build(),
    ])
    .await;
    dir.apply(Update::Configurators {
        source: "test".into(),
        rules: vec![Configurator::for_address("10.0.0.2:2").param("timeout", "5000")],
    });
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 2)
        .await
        .unwrap();
    let fi = FaultInvoker::with(&[(1, &[Slow(1500)]), (2, &[Slow(1500)])]);
    let c = ClusterInvoker::new(
        dir,
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Failfast),
    );
    for _ in 0..20 {
        let before = fi.calls().len();
        let r = c.invoke(&inv()).await;
        match fi.calls()[before] {
            2 => assert_eq!(r.unwrap(), Value::from(2)),
            _ => assert!(r.unwrap_err().is_timeout(), "1000 ms default on .1"),
        }
    }
    assert!(fi.calls().contains(&1) && fi.calls().contains(&2));
}

/// `actives` registered by one instance caps that instance only.
#[tokio::test(start_paused = true)]
async fn provider_actives_caps_only_its_instance() {
    let insts = vec![
        Instance::builder("10.0.0.1", 1)
            .param("actives", "1")
            .build(),
        Instance::builder("10.0.0.1", 2).build(),
    ];
    let fi = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang])]);
    // `leastactive`: by the second call the provider with fewer in flight is chosen, so
    // provider 1 is asked at least once whatever the draws (with `random` all eight could
    // land on provider 2).
    let c = ClusterInvoker::new(
        directory(insts).await,
        fi.clone(),
        ClusterConfig::default()
            .timeout(Duration::from_secs(100))
            .loadbalance(switchman_loadbalance::BalancerKind::LeastActive),
    );
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.invoke(&inv()).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(hits(&fi, 1), 1, "capped at one call in flight");
    assert_eq!(hits(&fi, 2), 7, "no cap of its own");
    for h in handles {
        h.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn failfast_makes_one_attempt() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse])]);
    let c = cluster(
        &[1, 2],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Failfast),
    )
    .await;
    c.invoke(&inv()).await.unwrap_err();
    assert_eq!(fi.calls().len(), 1);
}

/// failsafe swallows invocation failures only: "no provider" (none listed, none routed) is
/// raised before the strategy runs, and a business error travels to the caller.
#[tokio::test(start_paused = true)]
async fn failsafe_swallows_invocation_failures_only() {
    let fi = FaultInvoker::with(&[(1, &[Refuse, Hang, Business])]);
    let c = cluster(
        &[1],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Failsafe),
    )
    .await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::Null, "refused");
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::Null, "timed out");
    assert!(
        c.invoke(&inv()).await.unwrap_err().is_business(),
        "the provider's exception reaches the caller"
    );
    assert_eq!(fi.calls().len(), 3);
    let empty = cluster(
        &[],
        FaultInvoker::with(&[]),
        ClusterConfig::default().strategy(Strategy::Failsafe),
    )
    .await;
    assert_eq!(
        empty.invoke(&inv()).await.unwrap_err().kind(),
        ErrorKind::NoProvider
    );
    // Routing leaves no provider (a tagged call, forced): an error too.
    let tagged = ClusterInvoker::new(
        directory(vec![Instance::builder("10.0.0.1", 1).tag("gray").build()]).await,
        FaultInvoker::with(&[]),
        ClusterConfig::default().strategy(Strategy::Failsafe),
    );
    let e = tagged.invoke(&inv()).await.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Forbidden | ErrorKind::NoProvider),
        "{e}"
    );
}

/// Dubbo's `cluster.availablecheck`: an endpoint that cannot take the call (shutting down,
/// not connected: nothing sent) is skipped for another one under every strategy, and that is
/// not a retry. With failfast and provider 1 shutting down, every call answers from 2, with
/// no retry taken from an empty budget (before: about half the calls failed).
#[tokio::test]
async fn unavailable_endpoints_are_skipped_under_every_strategy() {
    let none = BudgetConfig {
        ratio: 0.0,
        min_per_sec: 0,
        window: Duration::from_secs(10),
    };
    for strategy in [
        Strategy::Failfast,
        Strategy::Failsafe,
        Strategy::Failback,
        Strategy::Failover,
    ] {
        let fi = FaultInvoker::with(&[(1, &[Unavailable]), (2, &[Ok])]);
        let c = cluster(
            &[1, 2],
            fi.clone(),
            ClusterConfig::default().strategy(strategy),
        )
        .await
        .with_budget(Some(none));
        for k in 0..40 {
            let v = c.invoke(&inv()).await.unwrap();
            assert_eq!(v, json!(2), "{strategy:?} call {k}");
        }
        assert_eq!(
            c.budget_refused(),
            0,
            "{strategy:?}: skipping is not a retry"
        );
        assert!(
            fi.calls().contains(&1),
            "{strategy:?}: 1 was picked and skipped"
        );
    }
    // Every endpoint unavailable: the last one's error, after trying each once.
    let fi = FaultInvoker::with(&[(1, &[Unavailable]), (2, &[Unavailable])]);
    let c = cluster(
        &[1, 2],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Failfast),
    )
    .await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(
        e.is_unavailable() && e.message().contains("shutting down"),
        "{e}"
    );
    assert_eq!(fi.calls().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn failback_answers_null_then_retries_with_backoff_in_the_background() {
    let fi = FaultInvoker::with(&[(1, &[Refuse, Refuse, Ok])]);
    let c = cluster(
        &[1],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Failback),
    )
    .await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::Null);
    assert_eq!(c.failback_pending(), 1);
    // Retry 1 after 0.5–1.5 s fails, retry 2 after another 1–3 s succeeds.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(fi.calls().len(), 1, "no retry before the first backoff");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(fi.calls().len(), 3);
    assert_eq!(c.failback_pending(), 0);
}

/// Dubbo's failback: `retries=-1` means its default of 3 background retries.
#[tokio::test(start_paused = true)]
async fn failback_negative_retries_mean_three() {
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let cfg = ClusterConfig::default().service_settings(
        Settings::new()
            .strategy(Strategy::Failback)
            .retries(Retries::Negative),
    );
    let c = cluster(&[1], fi.clone(), cfg).await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::Null);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(fi.calls().len(), 1 + 3);
    assert_eq!(c.failback_pending(), 0);
}

/// Each background retry avoids the instance the previous attempt failed on (Dubbo's
/// `RetryTimerTask` selects with the last invoker excluded).
#[tokio::test(start_paused = true)]
async fn failback_retries_avoid_the_instance_that_just_failed() {
    for _ in 0..5 {
        let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse])]);
        let cfg = ClusterConfig::default()
            .service_settings(Settings::new().strategy(Strategy::Failback).retries(5));
        let c = cluster(&[1, 2], fi.clone(), cfg).await.with_budget(None);
        c.invoke(&inv()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        let calls = fi.calls();
        assert_eq!(calls.len(), 6);
        assert!(
            calls.windows(2).all(|w| w[0] != w[1]),
            "every retry on the other instance: {calls:?}"
        );
    }
}

/// Failback's background retries draw on the service's retry budget like failover's: with a
/// budget that allows none, the provider sees only the first attempt and the refusals are
/// counted; and the pause between retries stops doubling at a minute (it reached 18 h).
#[tokio::test(start_paused = true)]
async fn failback_retries_take_the_retry_budget_and_back_off_at_most_a_minute() {
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let cfg = ClusterConfig::default()
        .service_settings(Settings::new().strategy(Strategy::Failback).retries(4));
    let none = BudgetConfig {
        ratio: 0.0,
        min_per_sec: 0,
        window: Duration::from_secs(10),
    };
    let c = cluster(&[1], fi.clone(), cfg.clone())
        .await
        .with_budget(Some(none));
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::Null);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(
        fi.calls().len(),
        1,
        "no background retry past an empty budget"
    );
    assert_eq!(c.budget_refused(), 4);
    assert_eq!(c.failback_pending(), 0);

    // Without a budget, 12 retries: 1+2+4+...+32 s, then 60 s each, ×[0.5, 1.5) jitter:
    // at most 1.5 × (63 + 6 × 60) s = 634.5 s in all, where uncapped doubling needs hours.
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let cfg = ClusterConfig::default()
        .service_settings(Settings::new().strategy(Strategy::Failback).retries(12));
    let c = cluster(&[1], fi.clone(), cfg).await.with_budget(None);
    c.invoke(&inv()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(634_500)).await;
    assert_eq!(fi.calls().len(), 1 + 12);
}

#[tokio::test(start_paused = true)]
async fn failback_queue_is_bounded_and_retries_stop_when_the_invoker_is_dropped() {
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let cfg = ClusterConfig::default()
        .strategy(Strategy::Failback)
        .service_settings(
            Settings::new()
                .strategy(Strategy::Failback)
                .failbacktasks(NonZeroU32::new(3).unwrap()),
        );
    let c = cluster(&[1], fi.clone(), cfg).await;
    for _ in 0..5 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), Value::Null);
    }
    assert_eq!(
        c.failback_pending(),
        3,
        "two calls were dropped: the queue holds 3"
    );
    drop(c);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        fi.calls().len(),
        5,
        "no background retry runs once the invoker is gone"
    );
}

#[tokio::test(start_paused = true)]
async fn forking_takes_the_first_answer_and_cancels_the_rest() {
    let fi = FaultInvoker::with(&[(1, &[Slow(300)]), (2, &[Slow(50)]), (3, &[Slow(300)])]);
    let cfg = ClusterConfig::default().service_settings(
        Settings::new()
            .strategy(Strategy::Forking)
            .forks(Forks::All),
    );
    let c = cluster(&[1, 2, 3], fi.clone(), cfg).await;
    let start = tokio::time::Instant::now();
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(2));
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    assert_eq!(
        fi.sorted_calls(),
        vec![1, 2, 3],
        "forks=0 means every instance"
    );
    let mut cancelled = fi.cancelled.lock().unwrap().clone();
    cancelled.sort();
    assert_eq!(cancelled, vec![1, 3]);
}

#[tokio::test(start_paused = true)]
async fn forking_uses_distinct_instances_and_returns_the_last_error_when_all_fail() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
    let cfg = ClusterConfig::default().strategy(Strategy::Forking); // forks default 2
    let c = cluster(&[1, 2, 3], fi.clone(), cfg).await;
    let e = c.invoke(&inv()).await.unwrap_err();
    let calls = fi.sorted_calls();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0], calls[1]);
    assert_eq!(e.kind(), ErrorKind::Transport);
}

#[tokio::test(start_paused = true)]
async fn broadcast_calls_everyone_and_fail_percent_stops_early() {
    let fi = FaultInvoker::with(&[(1, &[Ok]), (2, &[Business]), (3, &[Ok])]);
    let c = cluster(
        &[1, 2, 3],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Broadcast),
    )
    .await;
    assert!(
        c.invoke(&inv()).await.unwrap_err().is_business(),
        "any failure fails the call"
    );
    assert_eq!(fi.calls(), vec![1, 2, 3], "every instance, in order");

    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Ok]), (4, &[Ok])]);
    let settings = Settings::new()
        .strategy(Strategy::Broadcast)
        .broadcast_fail_percent(Percent::new(50).unwrap());
    let c = cluster(
        &[1, 2, 3, 4],
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    )
    .await;
    c.invoke(&inv()).await.unwrap_err();
    assert_eq!(
        fi.calls(),
        vec![1, 2],
        "4 × 50% = 2 failures stop the broadcast"
    );

    let fi = FaultInvoker::with(&[(1, &[Ok]), (2, &[Ok])]);
    let c = cluster(
        &[1, 2],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Broadcast),
    )
    .await;
    assert_eq!(
        c.invoke(&inv()).await.unwrap(),
        Value::from(2),
        "the last result"
    );
}

/// A provider shutting down (its readonly event) is left out of a broadcast: the others
/// answer the call (Dubbo calls it and fails the call). One that cannot be reached still
/// fails it, and a broadcast where every instance is leaving fails.
#[tokio::test(start_paused = true)]
async fn broadcast_leaves_out_instances_shutting_down() {
    let fi = FaultInvoker::with(&[(1, &[Ok]), (2, &[Unavailable]), (3, &[Ok])]);
    let broadcast = || ClusterConfig::default().strategy(Strategy::Broadcast);
    let c = cluster(&[1, 2, 3], fi.clone(), broadcast()).await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(3));
    assert_eq!(fi.calls(), vec![1, 2, 3]);

    let fi = FaultInvoker::with(&[(1, &[Ok]), (2, &[Unreachable]), (3, &[Ok])]);
    let c = cluster(&[1, 2, 3], fi.clone(), broadcast()).await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(e.message().contains("no connection to 2"), "{e}");

    let fi = FaultInvoker::with(&[(1, &[Unavailable]), (2, &[Unavailable])]);
    let c = cluster(&[1, 2], fi.clone(), broadcast()).await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(
        e.is_leaving() && e.message().contains("shutting down"),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn available_takes_the_first_instance_in_order() {
    let fi = FaultInvoker::with(&[]);
    let c = cluster(
        &[7, 3, 5],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Available),
    )
    .await;
    for _ in 0..10 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(3));
    }
}

/// A provider shutting down (its connections got the read-only event: nothing can be sent) is
/// passed over for the next instance in order, as Java's `isAvailable()` check does; when
/// every one is, the last one's error.
#[tokio::test(start_paused = true)]
async fn available_passes_over_a_provider_shutting_down() {
    let fi = FaultInvoker::with(&[(3, &[Unavailable, Unavailable, Unavailable])]);
    let c = cluster(
        &[7, 3, 5],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Available),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(5));
    }
    assert_eq!(fi.calls(), vec![3, 5, 3, 5, 3, 5]);

    let fi = FaultInvoker::with(&[(1, &[Unavailable]), (2, &[Unavailable])]);
    let c = cluster(
        &[1, 2],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Available),
    )
    .await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(e.message().contains("shutting down"), "{e}");
    assert_eq!(fi.calls(), vec![1, 2]);
}

#[tokio::test(start_paused = true)]
async fn available_skips_an_instance_ejected_as_an_outlier() {
    let fi = FaultInvoker::with(&[(3, &[Refuse])]);
    let c = cluster(
        &[7, 3, 5],
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Available),
    )
    .await;
    for _ in 0..5 {
        c.invoke(&inv()).await.unwrap_err();
    }
    // Five strikes in a row eject port 3: the first available instance is now port 5.
    for _ in 0..10 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(5));
    }
    assert_eq!(fi.calls().iter().filter(|p| **p == 3).count(), 5);
}

/// Answers by group: `a` [1, 2] (its instance on port 10 refuses), `b` [3], `c` unreachable
/// (nothing sent), `d` a business error, `t` a timeout.
#[derive(Debug, Default)]
struct ByGroup {
    calls: Mutex<Vec<(String, u16)>>,
}
impl Invoker for ByGroup {
    fn invoke<'a>(
        &'a self,
        t: &'a Instance,
        _i: &'a Invocation,
        _d: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        let g = t.service().group.to_string();
        self.calls.lock().unwrap().push((g.clone(), t.port()));
        let port = t.port();
        Box::pin(async move {
            match g.as_str() {
                "a" if port == 10 => Err(Error::transport("10 refuses")),
                "a" => Result::Ok(json!([1, 2])),
                "b" => Result::Ok(json!([3])),
                "d" => Err(Error::business("group d says no")),
                "t" => Err(Error::timeout("group t timed out")),
                _ => Err(Error::transport("group c is down").with_unavailable(true)),
            }
        })
    }
}

/// Two instances in group a (one refusing), one in each of b, c, d and t; all on one
/// address, so the groups are told apart by endpoint identity alone.
async fn grouped_cluster(
    consumer_group: &str,
    config: ClusterConfig,
) -> (ClusterInvoker, Arc<ByGroup>) {
    let insts: Vec<Instance> = [
        ("a", 10),
        ("a", 11),
        ("b", 12),
        ("c", 13),
        ("d", 14),
        ("t", 15),
    ]
    .iter()
    // What a registry adapter lists for the consumer's groups.
    .filter(|(g, _)| consumer_group == "*" || consumer_group.split(',').any(|w| w == *g))
    .map(|(g, port)| {
        Instance::builder("10.0.0.1", *port)
            .service(ServiceKey::with("com.foo.Bar", g, ""))
            .build()
    })
    .collect();
    let dir = RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::with("com.foo.Bar", consumer_group, "")),
        None,
    );
    dir.apply(Update::reset(insts));
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
        .await
        .unwrap();
    let by = Arc::new(ByGroup::default());
    let c = ClusterInvoker::new(Arc::new(dir), by.clone(), config).with_budget(None);
    (c, by)
}

fn merger(m: &str) -> ClusterConfig {
    ClusterConfig::default().service_settings(Settings::new().merger(m.parse().unwrap()))
}

#[tokio::test(start_paused = true)]
async fn mergeable_without_a_merger_calls_the_first_available_group_only() {
    // `a,b` makes the reference mergeable by itself (the configured strategy is failover);
    // no merger: only group a is called, failing over inside it from port 10 to 11.
    let (c, by) = grouped_cluster("a,b", ClusterConfig::default()).await;
    for _ in 0..20 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), json!([1, 2]));
    }
    let calls = by.calls.lock().unwrap().clone();
    assert!(calls.iter().all(|(g, _)| g == "a"), "{calls:?}");
    assert!(calls.iter().any(|(_, p)| *p == 10) && calls.iter().any(|(_, p)| *p == 11));
    // The consumer's order decides which group is first.
    let (c, _) = grouped_cluster("b,a", ClusterConfig::default()).await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), json!([3]));
    // A group that cannot take the call (nothing sent) passes it to the next one...
    let (c, _) = grouped_cluster("c,b", merger("false")).await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), json!([3]));
    // ...but a group that may have run it (a timeout) or answered with an error ends it with
    // its error, as Dubbo rethrows it.
    let (c, by) = grouped_cluster("t,b", merger("false")).await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(by.calls.lock().unwrap().iter().all(|(g, _)| g == "t"));
    let (c, _) = grouped_cluster("d,b", merger("false")).await;
    assert!(c.invoke(&inv()).await.unwrap_err().is_business());
}

/// With a merger, a group answering with a business error is dropped, as Dubbo drops a result
/// carrying an exception; a group that fails otherwise fails the whole call instead of a merge
/// silently lacking it.
#[tokio::test(start_paused = true)]
async fn mergeable_with_a_merger_fails_rather_than_returning_a_partial_merge() {
    let (c, _) = grouped_cluster("a,b,d", merger("true")).await;
    assert_eq!(
        c.invoke(&inv()).await.unwrap(),
        json!([1, 2, 3]),
        "d dropped"
    );
    for (groups, failing) in [("a,b,t", "t"), ("a,b,c", "c")] {
        let (c, _) = grouped_cluster(groups, merger("true")).await;
        let e = c.invoke(&inv()).await.unwrap_err();
        assert!(
            e.message().contains(&format!("group {failing} failed")),
            "{e}"
        );
        assert!(!e.is_retryable(), "{e}");
    }
}

#[tokio::test(start_paused = true)]
async fn mergeable_with_a_merger_calls_every_group_and_merges() {
    let (c, by) = grouped_cluster("a,b,d", merger("true")).await;
    for _ in 0..10 {
        assert_eq!(
            c.invoke(&inv()).await.unwrap(),
            json!([1, 2, 3]),
            "a (after failing over from 10 to 11) and b; d answered with an error, dropped"
        );
    }
    let calls = by.calls.lock().unwrap().clone();
    assert!(calls.iter().any(|(g, _)| g == "d"));
    // A list merger concatenates; a map merger refuses arrays with an error naming them.
    let (c, _) = grouped_cluster("b,a", merger("list")).await;
    assert_eq!(
        c.invoke(&inv()).await.unwrap(),
        json!([3, 1, 2]),
        "the consumer's order"
    );
    let (c, _) = grouped_cluster("a,b", merger("map")).await;
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(e.to_string().contains("objects"), "{e}");
    // A merger in code merges without the setting.
    let (c, _) = grouped_cluster("a,b", ClusterConfig::default()).await;
    let c = c.with_merger(|v| Result::Ok(json!(v.len())));
    assert_eq!(c.invoke(&inv()).await.unwrap(), json!(2));
    // Dubbo's merger names are checked when the settings load.
    assert!(".addAll".parse::<crate::Merger>().is_err());
    assert!(
        ClusterConfig::from_yaml("merger: sum\n", "x")
            .unwrap_err()
            .message()
            .contains("sum")
    );
}

#[test]
fn the_default_merge_has_no_scalar_merger() {
    assert_eq!(
        crate::merge_results(vec![json!({"a": 1}), json!({"b": 2, "a": 3})]).unwrap(),
        json!({"a": 3, "b": 2})
    );
    assert_eq!(
        crate::merge_results(vec![json!([1]), Value::Null, json!([2])]).unwrap(),
        json!([1, 2])
    );
    // Numbers are not summed: Dubbo has no merger for single values.
    assert!(crate::merge_results(vec![json!(2), json!(3)]).is_err());
    assert!(crate::merge_results(vec![json!("x"), json!([1])]).is_err());
}

#[tokio::test(start_paused = true)]
async fn zone_aware_prefers_the_consumers_zone() {
    let insts = vec![
        Instance::builder("10.0.0.1", 1).zone("east").build(),
        Instance::builder("10.0.0.1", 2).zone("west").build(),
        Instance::builder("10.0.0.1", 3).zone("west").build(),
    ];
    let fi = FaultInvoker::with(&[]);
    let settings = Settings::new().strategy(Strategy::ZoneAware).zone("east");
    let c = ClusterInvoker::new(
        directory(insts).await,
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    );
    let hits = {
        let mut east = 0;
        for _ in 0..200 {
            if c.invoke(&inv()).await.unwrap() == 1 {
                east += 1;
            }
        }
        east
    };
    assert!(hits > 190, "in-zone picks: {hits}/200");
}

#[tokio::test(start_paused = true)]
async fn sticky_keeps_the_selected_instance_until_it_leaves() {
    let fi = FaultInvoker::with(&[]);
    let settings = Settings::new().sticky(true);
    let dir = directory(ports(&[1, 2, 3])).await;
    let c = ClusterInvoker::new(
        dir.clone(),
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    );
    let first = c.invoke(&inv()).await.unwrap();
    for _ in 0..20 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), first);
    }
    // The sticky instance disappears: calls move elsewhere and stick there.
    let gone = first.as_u64().unwrap() as u16;
    let rest: Vec<u16> = [1, 2, 3].into_iter().filter(|p| *p != gone).collect();
    dir.apply(Update::reset(ports(&rest)));
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 2)
        .await
        .unwrap();
    let next = c.invoke(&inv()).await.unwrap();
    assert_ne!(next, first);
    for _ in 0..20 {
        assert_eq!(c.invoke(&inv()).await.unwrap(), next);
    }
}

/// A (tag gray) and B (untagged), sticky: a `dubbo.tag=gray` call goes to A; the next call
/// without a tag is not routed to A, so the sticky instance is dropped and it goes to B.
#[tokio::test(start_paused = true)]
async fn sticky_is_dropped_when_routing_does_not_give_it() {
    let insts = vec![
        Instance::builder("10.0.0.1", 1).tag("gray").build(),
        Instance::builder("10.0.0.2", 2).build(),
    ];
    let fi = FaultInvoker::with(&[]);
    let settings = Settings::new().sticky(true);
    let c = ClusterInvoker::new(
        directory(insts).await,
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    );
    let gray = inv().with_attachment("dubbo.tag", "gray");
    for _ in 0..3 {
        assert_eq!(c.invoke(&gray).await.unwrap(), Value::from(1));
        assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(2));
    }
}

/// Dubbo remembers the selected instance, not only one that succeeded: with failfast and
/// every instance failing, all calls keep going to the first one selected.
#[tokio::test(start_paused = true)]
async fn sticky_remembers_the_selected_instance_even_when_it_fails() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
    let settings = Settings::new().strategy(Strategy::Failfast).sticky(true);
    let c = cluster(
        &[1, 2, 3],
        fi.clone(),
        ClusterConfig::default()
            .service_settings(settings)
            .outlier(crate::OutlierConfig::disabled()),
    )
    .await;
    for _ in 0..20 {
        c.invoke(&inv()).await.unwrap_err();
    }
    let calls = fi.calls();
    assert!(calls.iter().all(|&p| p == calls[0]), "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn actives_cap_skips_busy_instances_and_fails_fast_when_all_are_busy() {
    let fi = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang])]);
    let settings = Settings::new().actives(1).timeout(Duration::from_secs(10));
    let c = cluster(
        &[1, 2],
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    )
    .await;
    let c1 = c.clone();
    let c2 = c.clone();
    let h1 = tokio::spawn(async move { c1.invoke(&inv()).await });
    let h2 = tokio::spawn(async move { c2.invoke(&inv()).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        fi.sorted_calls(),
        vec![1, 2],
        "the second call skipped the busy instance"
    );
    let e = c.invoke(&inv()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert_eq!(
        fi.calls().len(),
        2,
        "no attempt when every instance is at its cap"
    );
    h1.abort();
    h2.abort();
}

#[tokio::test(start_paused = true)]
async fn mock_force_never_calls_and_fail_mock_answers_only_non_business_failures() {
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let force = Settings::new().mock("force:return {\"cached\": true}".parse().unwrap());
    let c = cluster(
        &[1],
        fi.clone(),
        ClusterConfig::default().service_settings(force),
    )
    .await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), json!({"cached": true}));
    assert!(fi.calls().is_empty());

    let fail = Settings::new().mock("fail:return []".parse().unwrap());
    let c = cluster(
        &[1],
        fi.clone(),
        ClusterConfig::default().service_settings(fail.clone()),
    )
    .await;
    assert_eq!(c.invoke(&inv()).await.unwrap(), json!([]));
    let biz = FaultInvoker::with(&[(1, &[Business])]);
    let c = cluster(&[1], biz, ClusterConfig::default().service_settings(fail)).await;
    assert!(
        c.invoke(&inv()).await.unwrap_err().is_business(),
        "business errors are not mocked"
    );

    let cfg = ClusterConfig::default().fallback(|inv, cause| {
        Result::Ok(json!({"fallback": inv.method, "because": cause.map(|e| e.kind().as_str())}))
    });
    let c = cluster(&[1], FaultInvoker::with(&[(1, &[Refuse])]), cfg).await;
    assert_eq!(
        c.invoke(&inv()).await.unwrap(),
        json!({"fallback": "m", "because": "transport"})
    );
    let thrown = Settings::new().mock("fail:throw degraded".parse().unwrap());
    let c = cluster(
        &[1],
        FaultInvoker::with(&[(1, &[Refuse])]),
        ClusterConfig::default().service_settings(thrown),
    )
    .await;
    assert!(
        c.invoke(&inv())
            .await
            .unwrap_err()
            .message()
            .contains("degraded")
    );
}

#[tokio::test(start_paused = true)]
async fn retry_budget_bounds_attempts_when_everything_fails() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    for _ in 0..1000 {
        c.invoke(&inv()).await.unwrap_err();
    }
    let attempts = fi.calls().len() as f64;
    let floor = 10.0 * 10.0; // 10 retries/s over the 10 s window
    assert!(attempts <= 1.2 * 1000.0 + floor, "attempts {attempts}");
    assert!(
        attempts >= 1000.0 + 200.0,
        "the budget still allows 20% retries: {attempts}"
    );
    assert!(c.budget_refused() > 0);
    // Without a budget the same outage triples the load.
    let fi2 = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
    let c2 = ClusterInvoker::new(c.directory().clone(), fi2.clone(), ClusterConfig::default())
        .with_budget(None);
    for _ in 0..1000 {
        c2.invoke(&inv()).await.unwrap_err();
    }
    assert_eq!(fi2.calls().len(), 3000);
}

#[tokio::test(start_paused = true)]
async fn deadline_bounds_all_attempts_together() {
    let fi = FaultInvoker::with(&[(1, &[Hang]), (2, &[Hang]), (3, &[Hang])]);
    let settings = Settings::new()
        .timeout(Duration::from_millis(400))
        .deadline(Duration::from_millis(500));
    let c = cluster(
        &[1, 2, 3],
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    )
    .await;
    let start = tokio::time::Instant::now();
    assert!(c.invoke(&inv()).await.unwrap_err().is_timeout());
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(500),
        "second attempt got only the 100 ms left"
    );
    assert_eq!(fi.calls().len(), 2, "no third attempt after the deadline");
}

#[tokio::test(start_paused = true)]
async fn hedging_sends_a_second_attempt_after_the_delay_and_takes_the_first_answer() {
    let fi = FaultInvoker::with(&[(1, &[Slow(1000)]), (2, &[Slow(1000)])]);
    // Port 1 is slow on its first call only; give every instance a fast second script entry.
    fi.plan
        .lock()
        .unwrap()
        .insert(1, vec![Slow(1000), Slow(10)]);
    fi.plan.lock().unwrap().insert(2, vec![Slow(10)]);
    let settings = Settings::new()
        .hedge(Hedge::After(Duration::from_millis(30)))
        .timeout(Duration::from_secs(5));
    let c = cluster(
        &[1, 2],
        fi.clone(),
        ClusterConfig::default().service_settings(settings),
    )
    .await;
    let start = tokio::time::Instant::now();
    let v = c.invoke(&inv()).await.unwrap();
    let took = start.elapsed();
    if fi.calls()[0] == 1 {
        // The first attempt hit the slow instance: the hedge at 30 ms answered at 40 ms.
        assert_eq!(
            (v, took, fi.calls().len()),
            (Value::from(2), Duration::from_millis(40), 2)
        );
    } else {
        assert_eq!(
            (v, took, fi.calls().len()),
            (Value::from(2), Duration::from_millis(10), 1)
        );
    }
}

/// `hedge=p95` waits for the 95th percentile of the answers to the calls that hedge so: the
/// latencies of a method that does not hedge (here 30 answers of a second each) do not hold
/// back the hedge of one that does.
#[tokio::test(start_paused = true)]
async fn hedging_at_p95_waits_for_the_p95_of_the_calls_that_hedge() {
    let fi = FaultInvoker::with(&[(1, &[Slow(1000)]), (2, &[Slow(1000)])]);
    let config = ClusterConfig::default()
        .service_settings(Settings::new().timeout(Duration::from_secs(5)))
        .method(
            "m",
            Settings::new()
                .hedge(Hedge::P95)
                .timeout(Duration::from_secs(5)),
        );
    let c = cluster(&[1, 2], fi.clone(), config).await;
    let slow = Invocation::new("slow");
    for _ in 0..30 {
        assert!(c.invoke(&slow).await.is_ok());
    }
    // 20 answers in 10 ms: the p95 is the upper bound of their bucket, 16.384 ms.
    for port in [1, 2] {
        fi.plan.lock().unwrap().insert(port, vec![Slow(10)]);
    }
    for _ in 0..20 {
        assert!(c.invoke(&inv()).await.is_ok());
    }
    // Port 1 now slow: a call that goes there first is hedged to port 2 after 16.384 ms.
    fi.plan.lock().unwrap().insert(1, vec![Slow(1000)]);
    let mut hedged = None;
    for _ in 0..64 {
        let before = fi.calls().len();
        let start = tokio::time::Instant::now();
        let v = c.invoke(&inv()).await.unwrap();
        if fi.calls()[before] == 1 {
            hedged = Some((v, start.elapsed(), fi.calls().len() - before));
            break;
        }
    }
    // tokio's timer fires on whole milliseconds: the hedge leaves at 17 ms.
    assert_eq!(
        hedged,
        Some((Value::from(2), Duration::from_millis(17 + 10), 2))
    );
}

#[tokio::test(start_paused = true)]
async fn retry_sees_instances_added_after_the_first_attempt() {
    #[derive(Debug)]
    struct AddsNine {
        dir: Arc<RegistryDirectory>,
    }
    impl Invoker for AddsNine {
        fn invoke<'a>(
            &'a self,
            t: &'a Instance,
            _i: &'a Invocation,
            _d: Duration,
        ) -> BoxFuture<'a, Result<Value>> {
            Box::pin(async move {
                if t.port() == 9 {
                    return Result::Ok(Value::from(9));
                }
                self.dir
                    .apply(Update::add(vec![Instance::builder("10.0.0.1", 9).build()]));
                self.dir
                    .wait_until(Duration::from_secs(5), |s| s.epoch() >= 2)
                    .await
                    .unwrap();
                Err(Error::transport("refused"))
            })
        }
    }
    let dir = directory(ports(&[1])).await;
    let c = ClusterInvoker::new(
        dir.clone(),
        Arc::new(AddsNine { dir }),
        ClusterConfig::default().retries(1),
    );
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(9));
}

#[tokio::test(start_paused = true)]
async fn no_provider_is_reported_before_any_attempt() {
    let fi = FaultInvoker::with(&[]);
    for strategy in [
        Strategy::Failover,
        Strategy::Failfast,
        Strategy::Failback,
        Strategy::Forking,
        Strategy::Broadcast,
    ] {
        let c = cluster(&[], fi.clone(), ClusterConfig::default().strategy(strategy)).await;
        let e = c.invoke(&inv()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoProvider, "{strategy}");
    }
    assert!(fi.calls().is_empty());
}

/// The README's custom strategy: try the highest-weight tier first, then the next tier.
#[derive(Debug)]
struct TieredByWeight;

impl ClusterStrategy for TieredByWeight {
    fn call<'a, 'c>(&'a self, call: &'a mut Call<'c>) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let plan = call.plan();
            let candidates = call.candidates(plan)?;
            let mut tiers: Vec<u32> = candidates.iter().map(|p| p.instance().weight()).collect();
            tiers.sort_unstable_by(|a, b| b.cmp(a));
            tiers.dedup();
            let mut last = Error::no_provider("no tier answered");
            for w in tiers {
                for pick in candidates.iter().filter(|p| p.instance().weight() == w) {
                    match call.attempter().attempt(pick).await {
                        Result::Ok(v) => return Result::Ok(v),
                        // The retry budget (or the deadline) said no: stop here.
                        Err(err) if !err.is_retryable() => return Err(call.fail(err)),
                        Err(err) => {
                            call.note_failure(pick);
                            last = err;
                        }
                    }
                }
            }
            Err(call.fail(last))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn custom_strategies_plug_in_without_a_registry_of_names() {
    let insts = vec![
        Instance::builder("10.0.0.1", 1).weight(10).build(),
        Instance::builder("10.0.0.1", 2).weight(300).build(),
        Instance::builder("10.0.0.1", 3).weight(300).build(),
    ];
    let fi = FaultInvoker::with(&[(2, &[Refuse]), (3, &[Refuse])]);
    let c = ClusterInvoker::new(directory(insts).await, fi.clone(), ClusterConfig::default())
        .with_strategy(TieredByWeight);
    assert_eq!(c.invoke(&inv()).await.unwrap(), Value::from(1));
    assert_eq!(fi.calls(), vec![2, 3, 1]);
}

/// The same strategy is budgeted although it never asks: with no budget left, its second
/// attempt is refused before anything is sent.
#[tokio::test(start_paused = true)]
async fn the_readme_strategy_is_budgeted() {
    let insts = vec![
        Instance::builder("10.0.0.1", 1).weight(10).build(),
        Instance::builder("10.0.0.1", 2).weight(300).build(),
        Instance::builder("10.0.0.1", 3).weight(300).build(),
    ];
    let fi = FaultInvoker::with(&[(2, &[Refuse]), (3, &[Refuse])]);
    let none_left = BudgetConfig {
        ratio: 0.0,
        min_per_sec: 0,
        window: Duration::from_secs(10),
    };
    let c = ClusterInvoker::new(directory(insts).await, fi.clone(), ClusterConfig::default())
        .with_budget(Some(none_left))
        .with_strategy(TieredByWeight);
    let e = c.invoke(&inv()).await.unwrap_err();
    assert_eq!(fi.calls(), vec![2], "one attempt, no retry");
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(e.message().contains("retry budget"), "{e}");
    assert_eq!(e.tried(), ["10.0.0.1:2"]);
    assert_eq!(c.budget_refused(), 1);
}

/// A strategy that retries forever without asking anyone: each retry after the first
/// attempt takes a withdrawal from the budget, so the loop ends when the budget does.
#[derive(Debug)]
struct Relentless;

impl ClusterStrategy for Relentless {
    fn call<'a, 'c>(&'a self, call: &'a mut Call<'c>) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            // Bounded only so that a broken budget fails the test instead of hanging it.
            for _ in 0..1000 {
                let plan = call.relist();
                let pick = call.select(&plan)?;
                match call.attempter().attempt(pick).await {
                    Result::Ok(v) => return Result::Ok(v),
                    Err(e) if e.kind() == ErrorKind::Transport => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(Error::transport("the loop was not stopped"))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_custom_strategy_retrying_in_a_loop_is_stopped_by_the_budget() {
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse])]);
    // 20% of calls and no floor: over 10 calls, retries at the 1st and 6th (withdrawals
    // below 0.2 × calls so far).
    let budget = BudgetConfig {
        ratio: 0.2,
        min_per_sec: 0,
        window: Duration::from_secs(10),
    };
    let c = cluster(&[1, 2], fi.clone(), ClusterConfig::default())
        .await
        .with_budget(Some(budget))
        .with_strategy(Relentless);
    for k in 0..10 {
        let e = c.invoke(&inv()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded, "call {k}: {e}");
        assert!(!e.is_retryable());
    }
    assert_eq!(
        fi.calls().len(),
        12,
        "10 first attempts and 2 budgeted retries"
    );
    assert_eq!(
        c.budget_refused(),
        10,
        "each call's loop ended on one refusal"
    );

    // Without a budget the loop still ends: at MAX_ATTEMPTS attempts per call.
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse])]);
    let c = cluster(&[1, 2], fi.clone(), ClusterConfig::default())
        .await
        .with_budget(None)
        .with_strategy(Relentless);
    let e = c.invoke(&inv()).await.unwrap_err();
    assert_eq!(fi.calls().len(), crate::MAX_ATTEMPTS, "{e}");
    assert!(e.message().contains("attempts"), "{e}");

    // A deadline stops it too, the attempter's own check.
    let fi = FaultInvoker::with(&[(1, &[Slow(100), Refuse]), (2, &[Slow(100), Refuse])]);
    let slow = |port| Instance::builder("10.0.0.1", port).build();
    let c = ClusterInvoker::new(
        directory(vec![slow(1), slow(2)]).await,
        fi.clone(),
        ClusterConfig::default().service_settings(
            Settings::new()
                .timeout(Duration::from_millis(30))
                .deadline(Duration::from_millis(100)),
        ),
    )
    .with_budget(None)
    .with_strategy(Relentless);
    let started = tokio::time::Instant::now();
    let e = c.invoke(&inv()).await.unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(
        started.elapsed() <= Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    assert!(fi.calls().len() <= 4, "{:?}", fi.calls());
}

/// Built-in strategies that ask before retrying are charged once per retry, not twice: a
/// budget of exactly two retries lets failover make its three attempts.
#[tokio::test(start_paused = true)]
async fn a_retry_asked_for_is_charged_once() {
    for (ratio, attempts, refused) in [(2.0, 3, 0), (1.0, 2, 1)] {
        let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse]), (3, &[Refuse])]);
        // No floor: one call deposits 1, so `ratio` retries are in the budget.
        let budget = BudgetConfig {
            ratio,
            min_per_sec: 0,
            window: Duration::from_secs(10),
        };
        let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default())
            .await
            .with_budget(Some(budget));
        let e = c.invoke(&inv()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "the last real error, {e}");
        assert_eq!(fi.calls().len(), attempts, "ratio {ratio}");
        assert_eq!(c.budget_refused(), refused, "ratio {ratio}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_cluster_invoker_is_a_tower_service() {
    use tower_service::Service;
    let fi = FaultInvoker::with(&[]);
    let mut svc = cluster(&[4], fi, ClusterConfig::default()).await;
    std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    assert_eq!(svc.call(inv()).await.unwrap(), Value::from(4));
}

#[test]
fn budget_config_default_is_twenty_percent_plus_ten_per_second() {
    let b = BudgetConfig::default();
    assert_eq!(
        (b.ratio, b.min_per_sec, b.window),
        (0.2, 10, Duration::from_secs(10))
    );
}

// ---- Outlier ejection ----

fn outlier_of(c: &ClusterInvoker, port: u16) -> bool {
    let snap = c.directory().load();
    let i = snap.index_of(&format!("10.0.0.1:{port}")).unwrap();
    snap.endpoints()[i].stats.outlier().is_ejected()
}

/// How long the ejection of `port` still lasts (zero when not ejected).
fn penalty_left(c: &ClusterInvoker, port: u16) -> Duration {
    let snap = c.directory().load();
    let i = snap.index_of(&format!("10.0.0.1:{port}")).unwrap();
    snap.endpoints()[i]
        .stats
        .outlier()
        .ejected_until()
        .map(|u| u.saturating_duration_since(tokio::time::Instant::now().into_std()))
        .unwrap_or_default()
}

/// A penalty's time left, read at the ejection: `nominal` ± 20% jitter, its end stored rounded
/// up to the millisecond (never shorter than the penalty, up to 1 ms longer).
#[track_caller]
fn assert_jittered(left: Duration, nominal: Duration) {
    assert!(
        left >= nominal.mul_f64(0.8) && left < nominal.mul_f64(1.2) + Duration::from_millis(1),
        "{nominal:?} ± 20%: {left:?}"
    );
}

fn hits(fi: &FaultInvoker, port: u16) -> usize {
    fi.calls().iter().filter(|&&p| p == port).count()
}

#[tokio::test(start_paused = true)]
async fn five_consecutive_failures_eject_and_one_successful_probe_readmits() {
    let mut script = vec![Refuse; 5];
    script.extend([Slow(100), Ok]);
    let fi = FaultInvoker::with(&[(1, &script)]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    while hits(&fi, 1) < 5 {
        assert!(!outlier_of(&c, 1), "not before the 5th strike");
        c.invoke(&inv()).await.unwrap();
    }
    assert!(outlier_of(&c, 1), "ejected by the 5th consecutive failure");
    assert_jittered(penalty_left(&c, 1), Duration::from_secs(30));
    for _ in 0..100 {
        assert_ne!(c.invoke(&inv()).await.unwrap(), Value::from(1));
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    for _ in 0..50 {
        c.invoke(&inv()).await.unwrap();
    }
    assert_eq!(hits(&fi, 1), 5, "no call reaches it during the penalty");
    // Penalty over: 30 concurrent calls; exactly one is the probe (slow but fine).
    tokio::time::sleep(Duration::from_secs(17)).await;
    let invocation = inv();
    let calls: Vec<_> = (0..30).map(|_| c.invoke(&invocation)).collect();
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    assert_eq!(hits(&fi, 1), 6, "one probe at a time");
    assert!(!outlier_of(&c, 1), "a successful probe readmits");
    for _ in 0..90 {
        c.invoke(&inv()).await.unwrap();
    }
    assert!(hits(&fi, 1) > 6 + 5, "back in rotation: {}", hits(&fi, 1));
    let snap = c.directory().load();
    let i = snap.index_of("10.0.0.1:1").unwrap();
    assert_eq!(snap.endpoints()[i].stats.outlier().ejections(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_ejects_again_for_a_doubled_penalty() {
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    while hits(&fi, 1) < 5 {
        c.invoke(&inv()).await.unwrap();
    }
    assert!(outlier_of(&c, 1));
    tokio::time::sleep(Duration::from_secs(37)).await;
    while hits(&fi, 1) < 6 {
        c.invoke(&inv()).await.unwrap();
    }
    assert!(outlier_of(&c, 1), "the probe failed: ejected again");
    assert_jittered(penalty_left(&c, 1), Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(45)).await;
    for _ in 0..100 {
        c.invoke(&inv()).await.unwrap();
    }
    assert_eq!(hits(&fi, 1), 6, "still out 45 s later");
    tokio::time::sleep(Duration::from_secs(28)).await;
    while hits(&fi, 1) < 7 {
        c.invoke(&inv()).await.unwrap();
    }
    assert_jittered(penalty_left(&c, 1), Duration::from_secs(120));
}

#[tokio::test(start_paused = true)]
async fn a_low_success_rate_ejects_once_the_minimum_volume_is_reached() {
    // Every other call fails: never 5 in a row, but a 50% success rate.
    let script: Vec<Fault> = (0..40)
        .map(|k| if k % 2 == 0 { Ok } else { Refuse })
        .collect();
    let fi = FaultInvoker::with(&[(1, &script)]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    while hits(&fi, 1) < 20 {
        assert!(!outlier_of(&c, 1), "below the minimum volume of 20");
        c.invoke(&inv()).await.unwrap();
    }
    assert!(outlier_of(&c, 1), "50% < 80% over 20 calls");
    for _ in 0..100 {
        c.invoke(&inv()).await.unwrap();
    }
    assert_eq!(hits(&fi, 1), 20);
}

#[tokio::test(start_paused = true)]
async fn max_ejection_percent_keeps_half_the_instances_and_calls_still_go_out() {
    let fi = FaultInvoker::with(&[
        (1, &[Refuse]),
        (2, &[Refuse]),
        (3, &[Refuse]),
        (4, &[Refuse]),
    ]);
    let c = cluster(&[1, 2, 3, 4], fi.clone(), ClusterConfig::default())
        .await
        .with_budget(None);
    for _ in 0..100 {
        let before = fi.calls().len();
        assert_eq!(
            c.invoke(&inv()).await.unwrap_err().kind(),
            ErrorKind::Transport
        );
        assert_eq!(
            fi.calls().len(),
            before + 3,
            "every call still makes its attempts"
        );
    }
    let ejected = [1, 2, 3, 4].iter().filter(|&&p| outlier_of(&c, p)).count();
    assert_eq!(ejected, 2, "at most 50% of 4");
    // Only two instances can be picked first now; with everything ejected the pick goes on.
    let one = cluster(
        &[7],
        FaultInvoker::with(&[(7, &[Refuse])]),
        ClusterConfig::default(),
    )
    .await;
    for _ in 0..20 {
        one.invoke(&inv()).await.unwrap_err();
    }
    assert!(!outlier_of(&one, 7), "a lone instance is never ejected");
}

/// A fleet that fails as a whole, under concurrent calls from several threads: the guard
/// (one atomic count, no lock) lets exactly half be ejected, never more, and keeps that
/// across a new snapshot epoch (an arrival recounts once).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_all_failing_fleet_under_threads_ejects_exactly_half() {
    let all: Vec<u16> = (1..=20).collect();
    // Port 21 joins later, failing too.
    let faults: Vec<(u16, &[Fault])> = (1..=21).map(|p| (p, &[Refuse][..])).collect();
    let fi = FaultInvoker::with(&faults);
    let dir = directory(ports(&all)).await;
    let c =
        ClusterInvoker::new(dir.clone(), fi.clone(), ClusterConfig::default()).with_budget(None);
    let ejected = |c: &ClusterInvoker| {
        let snap = c.directory().load();
        snap.endpoints()
            .iter()
            .filter(|e| e.stats.outlier().is_ejected())
            .count()
    };
    let run = |c: &ClusterInvoker| {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move {
                    let mut max_seen = 0;
                    for _ in 0..25 {
                        let _ = c.invoke(&inv()).await;
                        max_seen = max_seen.max(ejected(&c));
                    }
                    max_seen
                })
            })
            .collect();
        async move {
            let mut max_seen = 0;
            for t in tasks {
                max_seen = max_seen.max(t.await.unwrap());
            }
            max_seen
        }
    };
    let max_seen = run(&c).await;
    assert_eq!(ejected(&c), 10, "half of 20");
    assert!(max_seen <= 10, "never more than half: saw {max_seen}");
    // One more (failing) instance: a new epoch; 50% of 21 still allows 10.
    let mut grown = ports(&all);
    grown.push(Instance::builder("10.0.0.1", 21).build());
    dir.apply(Update::reset(grown));
    dir.wait_until(Duration::from_secs(5), |s| s.endpoints().len() == 21)
        .await
        .unwrap();
    let max_seen = run(&c).await;
    assert_eq!(ejected(&c), 10, "50% of 21 rounds down");
    assert!(max_seen <= 10, "saw {max_seen}");
}

#[tokio::test(start_paused = true)]
async fn every_candidate_ejected_still_calls_one() {
    // Guard off (100%): both instances get ejected, and calls still go out.
    let cfg = ClusterConfig::default().outlier(crate::OutlierConfig {
        max_ejection_percent: 100,
        ..Default::default()
    });
    let fi = FaultInvoker::with(&[(1, &[Refuse]), (2, &[Refuse])]);
    let c = cluster(&[1, 2], fi.clone(), cfg).await.with_budget(None);
    for _ in 0..10 {
        c.invoke(&inv()).await.unwrap_err();
    }
    assert!(outlier_of(&c, 1) && outlier_of(&c, 2));
    let before = fi.calls().len();
    assert_eq!(
        c.invoke(&inv()).await.unwrap_err().kind(),
        ErrorKind::Transport
    );
    assert_eq!(
        fi.calls().len(),
        before + 3,
        "not failed by ejection alone: retries=2, both instances reused"
    );
}

#[tokio::test(start_paused = true)]
async fn business_errors_and_draining_are_not_strikes() {
    let fi = FaultInvoker::with(&[(1, &[Business]), (2, &[Drain]), (3, &[Ok])]);
    let c = cluster(&[1, 2, 3], fi.clone(), ClusterConfig::default()).await;
    for _ in 0..300 {
        let _ = c.invoke(&inv()).await;
    }
    assert!(hits(&fi, 1) > 50 && hits(&fi, 2) > 50);
    assert!(
        !outlier_of(&c, 1),
        "a business error is the instance's answer"
    );
    assert!(
        !outlier_of(&c, 2),
        "503 + connection: close means retry elsewhere"
    );
}

#[tokio::test(start_paused = true)]
async fn outlier_ejection_can_be_turned_off() {
    let fi = FaultInvoker::with(&[(1, &[Refuse])]);
    let c = cluster(
        &[1, 2, 3],
        fi.clone(),
        ClusterConfig::default().outlier(crate::OutlierConfig::disabled()),
    )
    .await;
    for _ in 0..100 {
        c.invoke(&inv()).await.unwrap();
    }
    assert!(!outlier_of(&c, 1));
    assert!(hits(&fi, 1) > 15);
}
