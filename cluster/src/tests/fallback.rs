//! Dubbo's `APPLICATION_FIRST` per call (`MigrationInvoker.invoke`): the interface-level
//! fallback a directory keeps ([`Update::Fallback`]) takes `100 - proportion` percent of the
//! calls, every call while the application level lists nothing, and a call whose
//! application-level candidates all refused it before anything was sent.

use super::*;
use switchman_discovery::EmptyPolicy;
use switchman_discovery::migration::Fallback;

/// `dir` falls back to `ports_` with `proportion`, once its fallback shows them.
async fn fall_back_to(dir: &RegistryDirectory, ports_: &[u16], proportion: u8) {
    dir.apply(Update::Fallback(Some(Fallback {
        instances: ports(ports_).into_iter().map(Arc::new).collect(),
        proportion,
    })));
    let mut want: Vec<u16> = ports_.to_vec();
    want.sort();
    for _ in 0..5000 {
        if let Some(f) = dir.fallback()
            && f.proportion == proportion
            && f.snapshot
                .endpoints()
                .iter()
                .map(|e| e.instance.port())
                .collect::<Vec<_>>()
                == want
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the fallback never showed {ports_:?} with {proportion}%");
}

/// How many of `n` calls port `port` answered.
async fn answered_by(c: &ClusterInvoker, n: usize, port: u16) -> usize {
    let mut k = 0;
    for _ in 0..n {
        if c.invoke(&inv()).await.unwrap() == json!(port) {
            k += 1;
        }
    }
    k
}

#[tokio::test(start_paused = true)]
async fn the_proportion_splits_calls_between_the_levels() {
    let fi = FaultInvoker::with(&[]);
    let dir = directory(ports(&[1])).await;
    let c = ClusterInvoker::new(dir.clone(), fi.clone(), ClusterConfig::default());
    // 100: every call on the directory's list (the application level).
    fall_back_to(&dir, &[2], 100).await;
    assert_eq!(answered_by(&c, 200, 1).await, 200);
    // 0: every call on the fallback (the interface level).
    fall_back_to(&dir, &[2], 0).await;
    assert_eq!(answered_by(&c, 200, 2).await, 200);
    // 30: 70% of the calls on the fallback, one draw per call (2000 calls: the share is
    // within 10 standard deviations of 0.7).
    fall_back_to(&dir, &[2], 30).await;
    let on_fallback = answered_by(&c, 2000, 2).await;
    assert!(
        (1200..=1600).contains(&on_fallback),
        "{on_fallback} of 2000"
    );
    // Stopped: back to the directory's list only.
    dir.apply(Update::Fallback(None));
    for _ in 0..5000 {
        if dir.fallback().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(answered_by(&c, 200, 1).await, 200);
}

/// The application level lists nothing (published empty): every call on the fallback.
#[tokio::test(start_paused = true)]
async fn an_empty_application_level_calls_the_fallback() {
    let fi = FaultInvoker::with(&[]);
    let dir = RegistryDirectory::spawn(
        DirectoryConfig::new(ServiceKey::new("com.foo.Bar")).empty_policy(EmptyPolicy::Publish),
        None,
    );
    dir.apply(Update::reset(ports(&[1])));
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
        .await
        .unwrap();
    dir.apply(Update::reset(Vec::<Instance>::new()));
    dir.wait_until(Duration::from_secs(5), |s| s.endpoints().is_empty())
        .await
        .unwrap();
    let dir = Arc::new(dir);
    fall_back_to(&dir, &[2], 100).await;
    let c = ClusterInvoker::new(
        dir.clone(),
        fi.clone(),
        ClusterConfig::default().strategy(Strategy::Failfast),
    );
    assert_eq!(answered_by(&c, 50, 2).await, 50);
}

/// Every application-level candidate refused the call before anything was sent (shutting
/// down, not reachable): the fallback takes it, under every strategy, with one attempt.
/// A failure after something was sent (refused mid-call, a timeout) is the call's answer: it
/// never moves to the other level.
#[tokio::test(start_paused = true)]
async fn a_call_nothing_at_the_application_level_could_take_moves_to_the_fallback() {
    let none = BudgetConfig {
        ratio: 0.0,
        min_per_sec: 0,
        window: Duration::from_secs(10),
    };
    for strategy in [Strategy::Failfast, Strategy::Failover, Strategy::Forking] {
        let fi = FaultInvoker::with(&[(1, &[Unavailable]), (2, &[Unreachable]), (3, &[Ok])]);
        let dir = directory(ports(&[1, 2])).await;
        fall_back_to(&dir, &[3], 100).await;
        let c = ClusterInvoker::new(dir, fi.clone(), ClusterConfig::default().strategy(strategy))
            .with_budget(Some(none));
        for k in 0..20 {
            assert_eq!(
                c.invoke(&inv()).await.unwrap(),
                json!(3),
                "{strategy:?} call {k}"
            );
        }
        let calls = fi.calls();
        assert!(
            calls.contains(&1) && calls.contains(&2),
            "{strategy:?}: {calls:?}"
        );
        assert_eq!(
            calls.iter().filter(|&&p| p == 3).count(),
            20,
            "{strategy:?}: one attempt per call on the fallback"
        );
    }
    // Sent, then failed: no fallback.
    for fault in [Refuse, Hang] {
        let fi = FaultInvoker::with(&[(1, &[fault]), (3, &[Ok])]);
        let dir = directory(ports(&[1])).await;
        fall_back_to(&dir, &[3], 100).await;
        let c = ClusterInvoker::new(
            dir,
            fi.clone(),
            ClusterConfig::default()
                .strategy(Strategy::Failfast)
                .timeout(Duration::from_millis(100)),
        );
        let e = c.invoke(&inv()).await.unwrap_err();
        assert!(e.is_retryable(), "{fault:?}: {e}");
        assert_eq!(fi.calls(), vec![1], "{fault:?}: the fallback never called");
    }
}
