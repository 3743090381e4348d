//! The typed values: what each accepts and what Dubbo's numbers mean.

use std::num::NonZeroU32;
use std::time::Duration;

use serde_json::Value;

use super::super::*;

#[test]
fn mock_and_hedge_syntax() {
    assert!(matches!(
        "force:return [1,2]".parse::<Mock>().unwrap(),
        Mock::Force(MockAction::Return(Value::Array(_)))
    ));
    assert!(matches!(
        "return".parse::<Mock>().unwrap(),
        Mock::Fail(MockAction::Return(Value::Null))
    ));
    assert!(
        matches!("fail:throw busy".parse::<Mock>().unwrap(), Mock::Fail(MockAction::Throw(m)) if m == "busy")
    );
    assert!("force:explode".parse::<Mock>().is_err());
    // Dubbo's parseMockValue: quoted and unquoted text, numbers and booleans.
    let returned = |m: &str| match m.parse::<Mock>().unwrap() {
        Mock::Force(MockAction::Return(v)) | Mock::Fail(MockAction::Return(v)) => v,
        other => panic!("{m}: {other:?}"),
    };
    assert_eq!(returned("return hello"), Value::from("hello"));
    assert_eq!(returned("force:return 'a b'"), Value::from("a b"));
    assert_eq!(returned("return \"x\""), Value::from("x"));
    assert_eq!(returned("return 42"), Value::from(42));
    assert_eq!(returned("return false"), Value::from(false));
    assert_eq!(returned("return empty"), Value::Null);
    assert!(
        "return {".parse::<Mock>().is_err(),
        "an object must be JSON"
    );
    assert_eq!("p95".parse::<Hedge>().unwrap(), Hedge::P95);
    assert_eq!(
        "30ms".parse::<Hedge>().unwrap(),
        Hedge::After(Duration::from_millis(30))
    );
    assert_eq!(
        "0.5s".parse::<Hedge>().unwrap(),
        Hedge::After(Duration::from_millis(500))
    );
    assert!("soon".parse::<Hedge>().is_err());
    assert!("-1s".parse::<Hedge>().is_err());
}

#[test]
fn dubbo_numbers_with_special_meanings_become_variants() {
    assert_eq!(Retries::from_dubbo(-1), Retries::Negative);
    assert_eq!(Retries::from_dubbo(3), Retries::Count(3));
    assert_eq!(Retries::Negative.resolve(true), 3, "failback's default");
    assert_eq!(Retries::Negative.resolve(false), 0, "failover: one attempt");
    assert_eq!("-5".parse::<Retries>().unwrap(), Retries::Negative);
    assert!("x".parse::<Retries>().is_err());

    assert_eq!(Forks::from_dubbo(0), Forks::All);
    assert_eq!(Forks::from_dubbo(-3), Forks::All);
    assert_eq!(Forks::from(0u32), Forks::All);
    assert_eq!(
        Forks::from_dubbo(3),
        Forks::Count(NonZeroU32::new(3).unwrap())
    );
    assert_eq!(Forks::All.of(5), 5);
    assert_eq!(Forks::from_dubbo(3).of(2), 2, "at most the candidates");
    assert_eq!(Forks::from_dubbo(3).of(0), 1, "at least one");
}

#[test]
fn bounded_values_refuse_what_is_out_of_range() {
    assert_eq!(Percent::new(100).unwrap().get(), 100);
    assert!(Percent::new(101).unwrap_err().message().contains("101"));
    assert_eq!("50%".parse::<Percent>().unwrap().get(), 50);
    assert!("-1".parse::<Percent>().is_err());
    assert!(HashNodes::new(3).is_err());
    assert_eq!(HashNodes::new(4).unwrap().get(), 4);
    assert!(HashArguments::new(&[]).is_err());
    assert_eq!("0,-1,2".parse::<HashArguments>().unwrap().indexes(), [0, 2]);
    assert!("-1".parse::<HashArguments>().is_err(), "nothing left");
    assert!("a".parse::<HashArguments>().is_err());
}

#[test]
fn timeouts_read_dubbo_milliseconds_and_durations() {
    let mut s = Settings::new();
    s.set("timeout", "250").unwrap();
    assert_eq!(s.timeout, Some(Duration::from_millis(250)));
    s.set("timeout", "-1").unwrap();
    assert_eq!(
        s.timeout,
        Some(DEFAULT_TIMEOUT),
        "not positive: Dubbo's default"
    );
    s.set("timeout", "2s").unwrap();
    assert_eq!(s.timeout, Some(Duration::from_secs(2)));
    // In code, zero is Dubbo's default too.
    let e = ClusterConfig::default()
        .timeout(Duration::ZERO)
        .resolve(None, &Default::default());
    assert_eq!(e.timeout, DEFAULT_TIMEOUT);
}

#[test]
fn a_layer_over_another_keeps_what_it_sets() {
    let upper = Settings::new().retries(1).merger(Merger::List);
    let lower = Settings::new()
        .retries(5)
        .timeout(Duration::from_millis(9))
        .zone("z1");
    let s = upper.over(&lower);
    assert_eq!(s.retries, Some(Retries::Count(1)));
    assert_eq!(s.timeout, Some(Duration::from_millis(9)));
    assert_eq!(s.zone.as_deref(), Some("z1"));
    assert_eq!(s.merger, Some(Merger::List));
}
