//! The provider parameters the dubbo:// transport reads (`connections`, `heartbeat`,
//! `payload`), each with a range.
//!
//! Whoever can write to the registry sets these numbers, so none is taken as it is: a value
//! out of its range is logged (at `warn` once per endpoint, naming the provider's address, the
//! parameter, the value and what applies instead) and replaced by the nearest bound or by the
//! consumer's own setting, never a panic, an abort or an unbounded resource:
//!
//! | parameter | range | out of range |
//! | --- | --- | --- |
//! | `connections` | 0 (one shared connection, Dubbo's default) to [`MAX_CONNECTIONS`] | above: [`MAX_CONNECTIONS`]; negative or not a number: 0 |
//! | `heartbeat` (ms) | [`MIN_HEARTBEAT`] to [`MAX_HEARTBEAT`] | 1 to 999: [`MIN_HEARTBEAT`]; above a day: [`MAX_HEARTBEAT`]; 0, negative or not a number: the consumer's interval (Java's `getPositiveParameter` does the same) |
//! | `payload` (bytes) | [`MIN_PAYLOAD`] and up; above the consumer's limit, the consumer's applies (as before) | below [`MIN_PAYLOAD`] (Dubbo's 0 "no limit" included), negative or not a number: the consumer's limit |
//!
//! The provider's `methods` (the names of its methods) are read here too, into
//! [`MethodNames`]: a call of a method it does not list is refused before it is sent.
//!
//! An endpoint's client reads them once, with the parameters it shares with Triple
//! (`prefer.serialization`, `serialization`, `ssl-enabled`, `release`: see
//! [`SharedParams`]), and again only when the directory hands it an instance whose values
//! changed; a direct [`DubboInvoker::call`](super::DubboInvoker::call) reads them per call and
//! logs out-of-range values at `debug`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use switchman_core::Instance;
use tracing::{debug, warn};

use super::ExchangeConfig;
use crate::protocol::endpoint_params::{Kept, ReadOnce, SharedParams, SharedRaw};

/// The most connections a provider's `connections` parameter opens to its address.
pub(crate) const MAX_CONNECTIONS: usize = 16;
/// The shortest heartbeat interval a provider's `heartbeat` parameter sets.
pub(crate) const MIN_HEARTBEAT: Duration = Duration::from_secs(1);
/// The longest heartbeat interval a provider's `heartbeat` parameter sets: a day.
pub(crate) const MAX_HEARTBEAT: Duration = Duration::from_secs(24 * 60 * 60);
/// The smallest request payload limit a provider's `payload` parameter sets.
pub(crate) const MIN_PAYLOAD: usize = 1024;

/// The parameters read, in the order of [`Seen::raw`].
const KEYS: [&str; 3] = ["connections", "heartbeat", "payload"];

/// What the transport takes from one provider's parameters, within their ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProviderParams {
    /// Connections to open to the address: 0 (one shared) to [`MAX_CONNECTIONS`].
    pub(crate) connections: usize,
    /// The heartbeat interval of new connections (`None`: the invoker's own).
    pub(crate) heartbeat: Option<Duration>,
    /// The largest request body sent (`None`: no limit, the consumer's `payload` being 0).
    pub(crate) payload: Option<usize>,
}

/// The consumer's side of the values: what applies when the provider's do not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Consumer {
    /// The heartbeat interval of the invoker's connections.
    pub(crate) heartbeat: Duration,
    /// Whether the consumer set its interval itself (then the provider's is not read).
    pub(crate) heartbeat_set: bool,
    /// The consumer's payload limit (0: none).
    pub(crate) payload: usize,
}

impl Consumer {
    /// The consumer's settings in `config`.
    pub(crate) fn new(config: &ExchangeConfig, heartbeat_set: bool) -> Self {
        Consumer {
            heartbeat: config.heartbeat,
            heartbeat_set,
            payload: config.payload,
        }
    }
}

/// A registry number, read leniently (surrounding spaces, a sign).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Number {
    /// Zero or more (saturated at `u64::MAX`).
    Natural(u64),
    /// Below zero.
    Negative,
    /// Not an integer (`1e3`, `0x10`, `12 ms`, empty).
    Invalid,
}

fn number(raw: &str) -> Number {
    let t = raw.trim();
    let (negative, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Number::Invalid;
    }
    let n = digits.parse::<u64>().unwrap_or(u64::MAX);
    if negative && n != 0 {
        Number::Negative
    } else {
        Number::Natural(n)
    }
}

/// A value out of its range, and what applies instead.
struct OutOfRange {
    key: &'static str,
    range: &'static str,
    applies: String,
}

/// At most 64 characters of a registry value, for a log line.
struct Shown<'a>(&'a str);

impl fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(64) {
            Some((end, _)) => write!(f, "{:?}...", &self.0[..end]),
            None => write!(f, "{:?}", self.0),
        }
    }
}

fn connections(raw: &str) -> (usize, Option<OutOfRange>) {
    const RANGE: &str = "0 (one shared connection) to 16";
    match number(raw) {
        Number::Natural(n) if n <= MAX_CONNECTIONS as u64 => (n as usize, None),
        Number::Natural(_) => (
            MAX_CONNECTIONS,
            Some(OutOfRange {
                key: "connections",
                range: RANGE,
                applies: format!("{MAX_CONNECTIONS} (the most accepted)"),
            }),
        ),
        Number::Negative | Number::Invalid => (
            0,
            Some(OutOfRange {
                key: "connections",
                range: RANGE,
                applies: "0 (Dubbo's default: one shared connection)".into(),
            }),
        ),
    }
}

fn heartbeat(raw: &str, consumer: &Consumer) -> (Option<Duration>, Option<OutOfRange>) {
    const RANGE: &str = "1000 to 86400000 ms";
    let out = |applies: String| OutOfRange {
        key: "heartbeat",
        range: RANGE,
        applies,
    };
    match number(raw) {
        Number::Natural(0) | Number::Negative | Number::Invalid => (
            None,
            Some(out(format!(
                "the consumer's interval ({} ms)",
                consumer.heartbeat.as_millis()
            ))),
        ),
        Number::Natural(ms) => {
            let every = Duration::from_millis(ms);
            if every < MIN_HEARTBEAT {
                let applies = format!("{} ms (the shortest accepted)", MIN_HEARTBEAT.as_millis());
                (Some(MIN_HEARTBEAT), Some(out(applies)))
            } else if every > MAX_HEARTBEAT {
                let applies = format!("{} ms (the longest accepted)", MAX_HEARTBEAT.as_millis());
                (Some(MAX_HEARTBEAT), Some(out(applies)))
            } else {
                (Some(every), None)
            }
        }
    }
}

/// The provider's own limit, when accepted (the consumer's smaller one still applies).
fn payload(raw: &str, consumer: &Consumer) -> (Option<usize>, Option<OutOfRange>) {
    match number(raw) {
        Number::Natural(n) if n >= MIN_PAYLOAD as u64 => {
            (Some(usize::try_from(n).unwrap_or(usize::MAX)), None)
        }
        _ => {
            let applies = if consumer.payload == 0 {
                "the consumer's (no limit)".to_string()
            } else {
                format!("the consumer's limit ({} bytes)", consumer.payload)
            };
            (
                None,
                Some(OutOfRange {
                    key: "payload",
                    range: "1024 bytes or more",
                    applies,
                }),
            )
        }
    }
}

impl ProviderParams {
    /// Reads `target`'s parameters (`raw`: their values, in the order of [`KEYS`]), logging
    /// each value out of range at `warn` when `loud`, else at `debug`.
    fn read(target: &Instance, raw: &[Option<&str>; 3], consumer: &Consumer, loud: bool) -> Self {
        let mut rejected = Vec::new();
        let mut check = |value: &str, out: Option<OutOfRange>| {
            if let Some(out) = out {
                rejected.push((value.to_string(), out));
            }
        };
        let connections = raw[0].map_or(0, |v| {
            let (n, out) = connections(v);
            check(v, out);
            n
        });
        let heartbeat = match raw[1] {
            Some(v) if !consumer.heartbeat_set => {
                let (every, out) = heartbeat(v, consumer);
                check(v, out);
                every
            }
            _ => None,
        };
        let provider_payload = raw[2].and_then(|v| {
            let (limit, out) = payload(v, consumer);
            check(v, out);
            limit
        });
        let payload = match (consumer.payload, provider_payload) {
            (0, p) => p,
            (c, None) => Some(c),
            (c, Some(p)) => Some(c.min(p)),
        };
        let address = target.address();
        for (value, out) in rejected {
            let (parameter, range, applies) = (out.key, out.range, out.applies);
            let value = Shown(&value);
            if loud {
                warn!(address, parameter, ?value, range, %applies, "a provider parameter is out of range; another value applies");
            } else {
                debug!(address, parameter, ?value, range, %applies, "a provider parameter is out of range; another value applies");
            }
        }
        ProviderParams {
            connections,
            heartbeat,
            payload,
        }
    }

    /// `target`'s parameters, read for one call (out-of-range values logged at `debug`).
    pub(crate) fn for_call(target: &Instance, consumer: &Consumer) -> Self {
        Self::read(target, &raw_of(target), consumer, false)
    }
}

fn raw_of(target: &Instance) -> [Option<&str>; 3] {
    KEYS.map(|k| target.param(k))
}

/// The most method names an error message lists.
const LISTED_NAMES: usize = 16;
/// The most characters of method names an error message lists.
const LISTED_CHARS: usize = 240;

/// The method names a provider registered (Java's `methods=add,count,echo`, names only, what
/// `Wrapper.getMethodNames()` lists), to refuse a call of a method it does not have before it
/// is sent. Absent, empty or `*` (a generic provider: any method): nothing is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MethodNames {
    /// Sorted, without duplicates or empty names.
    names: Box<[Box<str>]>,
}

impl MethodNames {
    /// The names in a `methods` value; `None` when it checks nothing.
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        let mut names: Vec<Box<str>> = raw
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(Into::into)
            .collect();
        if names.is_empty() || names.iter().any(|n| &**n == "*") {
            return None;
        }
        names.sort_unstable();
        names.dedup();
        Some(MethodNames {
            names: names.into_boxed_slice(),
        })
    }

    /// Whether `method` is one of them.
    pub(crate) fn has(&self, method: &str) -> bool {
        self.names.binary_search_by(|n| (**n).cmp(method)).is_ok()
    }

    /// The names for a message: `add, count, echo`, cut after [`LISTED_NAMES`] names or
    /// [`LISTED_CHARS`] characters with `... (N more)`.
    pub(crate) fn listed(&self) -> String {
        listed(self.names.iter().map(|n| &**n))
    }
}

/// `names` joined for a message, cut as [`MethodNames::listed`] says.
pub(crate) fn listed<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = names.len();
    let mut out = String::new();
    for (i, n) in names.enumerate() {
        if i == LISTED_NAMES || (i > 0 && out.len() + n.len() > LISTED_CHARS) {
            out.push_str(&format!(", ... ({} more)", total - i));
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        // A name from the registry: at most 64 characters of it.
        match n.char_indices().nth(64) {
            Some((end, _)) => {
                out.push_str(&n[..end]);
                out.push_str("...");
            }
            None => out.push_str(n),
        }
    }
    out
}

/// Refuses a call of `method` when `names` (the provider's `methods`) do not list it: a
/// [`BadConfig`](switchman_core::ErrorKind::BadConfig) error naming the method and what the
/// provider at `address` has, before anything is sent. Retryable without an outlier strike:
/// another provider of the service (a newer release during a rolling upgrade) may have it.
/// Dubbo's built-in methods (`$echo`, `$invoke`...) are not listed and not checked.
pub(crate) fn check_method(
    address: &str,
    names: Option<&MethodNames>,
    method: &str,
) -> switchman_core::Result<()> {
    match names {
        Some(names) if !method.starts_with('$') && !names.has(method) => {
            Err(no_method(address, method, &names.listed()))
        }
        _ => Ok(()),
    }
}

/// [`check_method`] for a direct call, reading `target`'s `methods` without keeping them.
pub(crate) fn check_method_of(target: &Instance, method: &str) -> switchman_core::Result<()> {
    let Some(raw) = target.param("methods") else {
        return Ok(());
    };
    let mut any = false;
    for n in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if n == method || n == "*" {
            return Ok(());
        }
        any = true;
    }
    if !any || method.starts_with('$') {
        return Ok(());
    }
    let names = MethodNames::parse(raw);
    check_method(target.address(), names.as_ref(), method)
}

fn no_method(address: &str, method: &str, has: &str) -> switchman_core::Error {
    switchman_core::Error::bad_config(format!(
        "the provider {address} has no method {method}; it has {has} (not sent: its registered \
         `methods` do not list it)"
    ))
    .with_retryable(true)
    .with_outlier_strike(false)
}

/// What one endpoint's client read.
#[derive(Clone)]
struct Seen {
    /// The values read (in the order of [`KEYS`]).
    raw: [Option<Box<str>>; 3],
    params: ProviderParams,
    /// The `methods` value read, and its names.
    methods_raw: Option<Box<str>>,
    methods: Option<Arc<MethodNames>>,
    /// The shared values read (serialization, `ssl-enabled`...), and their parse.
    shared_raw: SharedRaw,
    shared: SharedParams,
}

/// What an endpoint's call reads: the parameters, the method names and the shared
/// parameters (serialization, `ssl-enabled`).
#[derive(Debug, Clone)]
pub(crate) struct Current {
    pub(crate) params: ProviderParams,
    pub(crate) methods: Option<Arc<MethodNames>>,
    pub(crate) shared: SharedParams,
}

impl Seen {
    /// What a call reads of it.
    fn current(&self) -> Current {
        Current {
            params: self.params,
            methods: self.methods.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl ReadOnce for Seen {
    type Context = Consumer;

    /// Reads again only what changed (logging what is out of range again).
    fn changed(&self, target: &Instance, consumer: &Consumer, loud: bool) -> Option<Seen> {
        let raw = raw_of(target);
        let methods_raw = target.param("methods");
        let shared_changed = self.shared_raw.changed(target);
        let same_raw = raw.iter().zip(&self.raw).all(|(a, b)| *a == b.as_deref());
        if same_raw && methods_raw == self.methods_raw.as_deref() && shared_changed.is_none() {
            return None;
        }
        let params = if same_raw {
            self.params
        } else {
            ProviderParams::read(target, &raw, consumer, loud)
        };
        let methods = if methods_raw == self.methods_raw.as_deref() {
            self.methods.clone()
        } else {
            methods_raw.and_then(MethodNames::parse).map(Arc::new)
        };
        let (shared_raw, shared) = match shared_changed {
            Some(changed) => changed,
            None => (self.shared_raw.clone(), self.shared.clone()),
        };
        Some(Seen {
            raw: raw.map(|v| v.map(Into::into)),
            params,
            methods_raw: methods_raw.map(Into::into),
            methods,
            shared_raw,
            shared,
        })
    }
}

/// An endpoint's provider parameters, read when the endpoint's client is made (see [`Kept`]:
/// a call with the endpoint's current instance compares a pointer; what changed is read
/// again, logging what is out of range again).
pub(crate) struct EndpointParams {
    kept: Kept<Seen>,
    consumer: Consumer,
}

impl fmt::Debug for EndpointParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kept.peek(|s| {
            f.debug_struct("EndpointParams")
                .field("params", &s.params)
                .finish_non_exhaustive()
        })
    }
}

impl EndpointParams {
    /// Reads `instance`'s parameters, for an invoker whose own settings are `consumer`.
    pub(crate) fn new(instance: &Arc<Instance>, consumer: Consumer) -> Self {
        let raw = raw_of(instance);
        let methods_raw = instance.param("methods");
        let (shared_raw, shared) = SharedRaw::read(instance);
        let seen = Seen {
            raw: raw.map(|v| v.map(Into::into)),
            params: ProviderParams::read(instance, &raw, &consumer, true),
            methods_raw: methods_raw.map(Into::into),
            methods: methods_raw.and_then(MethodNames::parse).map(Arc::new),
            shared_raw,
            shared,
        };
        EndpointParams {
            kept: Kept::new(instance, seen),
            consumer,
        }
    }

    /// The parameters of `target`, this endpoint's current instance.
    #[cfg(test)]
    pub(crate) fn get(&self, target: &Instance) -> ProviderParams {
        self.current(target).params
    }

    /// The parameters, method names and shared parameters of `target`, this endpoint's
    /// current instance.
    pub(crate) fn current(&self, target: &Instance) -> Current {
        self.kept.with(target, &self.consumer, Seen::current)
    }

    /// Takes `instance` as the endpoint's current one ([`Kept::adopt`]).
    pub(crate) fn adopt(&self, instance: &Arc<Instance>) {
        self.kept.adopt(instance, &self.consumer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSUMER: Consumer = Consumer {
        heartbeat: Duration::from_secs(60),
        heartbeat_set: false,
        payload: 8 * 1024 * 1024,
    };

    fn with(params: &[(&str, &str)]) -> Arc<Instance> {
        let mut b = Instance::builder("127.0.0.1", 20880);
        for (k, v) in params {
            b = b.param(k, v);
        }
        Arc::new(b.build())
    }

    fn read(params: &[(&str, &str)], consumer: &Consumer) -> ProviderParams {
        ProviderParams::for_call(&with(params), consumer)
    }

    #[test]
    fn registered_method_names_refuse_an_unknown_method_before_the_call() {
        let names = MethodNames::parse(" sayHello,add,,count,add ").unwrap();
        assert!(names.has("add") && names.has("sayHello") && !names.has("addd"));
        assert_eq!(names.listed(), "add, count, sayHello");
        for none in ["", " , ", "*", "add,*"] {
            assert_eq!(MethodNames::parse(none), None, "{none:?}");
        }
        let e = check_method("127.0.0.1:20880", Some(&names), "addd").unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
        assert!(e.is_retryable(), "another provider may have it");
        assert!(
            e.message().starts_with(
                "the provider 127.0.0.1:20880 has no method addd; it has add, count, sayHello"
            ),
            "{}",
            e.message()
        );
        assert!(check_method("a:1", Some(&names), "add").is_ok());
        assert!(check_method("a:1", Some(&names), "$echo").is_ok());
        assert!(check_method("a:1", None, "anything").is_ok());
        // A direct call reads the same from the instance.
        let t = with(&[("methods", "add,count")]);
        assert!(check_method_of(&t, "count").is_ok());
        let e = check_method_of(&t, "cnt").unwrap_err();
        assert!(
            e.message()
                .starts_with("the provider 127.0.0.1:20880 has no method cnt; it has add, count"),
            "{}",
            e.message()
        );
        assert!(check_method_of(&with(&[]), "cnt").is_ok());
        assert!(check_method_of(&with(&[("methods", "*")]), "cnt").is_ok());
        // A long list is cut.
        let many: Vec<String> = (0..100).map(|i| format!("method{i:03}")).collect();
        let long = MethodNames::parse(&many.join(",")).unwrap().listed();
        assert!(long.len() < 300, "{long}");
        assert!(long.ends_with(", ... (84 more)"), "{long}");
        let huge = MethodNames::parse(&"m".repeat(10_000)).unwrap().listed();
        assert!(huge.len() < 100, "{huge}");
    }

    #[test]
    fn an_endpoint_reads_its_method_names_once_and_again_when_they_change() {
        let first = with(&[("methods", "add,count")]);
        let e = EndpointParams::new(&first, CONSUMER);
        let m1 = e.current(&first).methods.unwrap();
        assert!(Arc::ptr_eq(&m1, &e.current(&first).methods.unwrap()));
        let same = with(&[("methods", "add,count")]);
        assert!(
            Arc::ptr_eq(&m1, &e.current(&same).methods.unwrap()),
            "same text: kept"
        );
        let changed = with(&[("methods", "add,count,greet")]);
        assert!(e.current(&changed).methods.unwrap().has("greet"));
        assert!(e.current(&with(&[])).methods.is_none());
    }

    #[test]
    fn numbers_are_read_leniently_and_saturate() {
        assert_eq!(number("7"), Number::Natural(7));
        assert_eq!(number(" +7 "), Number::Natural(7));
        assert_eq!(number("-0"), Number::Natural(0));
        assert_eq!(number("-1"), Number::Negative);
        assert_eq!(number("18446744073709551615"), Number::Natural(u64::MAX));
        assert_eq!(number("99999999999999999999999"), Number::Natural(u64::MAX));
        for bad in ["", "-", "+", "1e3", "0x10", "1.5", "12 ms", "١٢"] {
            assert_eq!(number(bad), Number::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn connections_are_0_to_16() {
        let c = |v: &str| read(&[("connections", v)], &CONSUMER).connections;
        assert_eq!(read(&[], &CONSUMER).connections, 0);
        for (v, want) in [("0", 0), ("1", 1), ("16", 16)] {
            assert_eq!(c(v), want, "{v}");
        }
        for v in [
            "17",
            "20000",
            "1000000000",
            "18446744073709551615",
            "1e99999",
        ] {
            let want = if v == "1e99999" { 0 } else { 16 };
            assert_eq!(c(v), want, "{v}");
        }
        assert_eq!(c("-1"), 0);
        assert_eq!(c("many"), 0);
    }

    #[test]
    fn heartbeats_are_a_second_to_a_day() {
        let h = |v: &str| read(&[("heartbeat", v)], &CONSUMER).heartbeat;
        assert_eq!(read(&[], &CONSUMER).heartbeat, None);
        assert_eq!(h("1"), Some(MIN_HEARTBEAT));
        assert_eq!(h("999"), Some(MIN_HEARTBEAT));
        assert_eq!(h("1000"), Some(Duration::from_secs(1)));
        assert_eq!(h("30000"), Some(Duration::from_secs(30)));
        assert_eq!(h("86400000"), Some(MAX_HEARTBEAT));
        assert_eq!(h("86400001"), Some(MAX_HEARTBEAT));
        assert_eq!(h("18446744073709551615"), Some(MAX_HEARTBEAT));
        // Java's getPositiveParameter: not positive means the default.
        for v in ["0", "-5", "soon"] {
            assert_eq!(h(v), None, "{v}");
        }
        // A consumer's own interval wins: the provider's is not read.
        let set = Consumer {
            heartbeat_set: true,
            ..CONSUMER
        };
        assert_eq!(read(&[("heartbeat", "1")], &set).heartbeat, None);
    }

    #[test]
    fn payload_is_at_least_a_kib_and_never_above_the_consumers() {
        let p = |v: &str, c: &Consumer| read(&[("payload", v)], c).payload;
        let ours = Some(CONSUMER.payload);
        assert_eq!(read(&[], &CONSUMER).payload, ours);
        assert_eq!(p("1024", &CONSUMER), Some(1024));
        assert_eq!(p("65536", &CONSUMER), Some(65536));
        assert_eq!(p("2147483647", &CONSUMER), ours, "larger: ours applies");
        assert_eq!(p("18446744073709551615", &CONSUMER), ours);
        for v in ["0", "-1", "1023", "1", "big"] {
            assert_eq!(p(v, &CONSUMER), ours, "{v}");
        }
        // The consumer's 0 is no limit: the provider's applies, else none.
        let unlimited = Consumer {
            payload: 0,
            ..CONSUMER
        };
        assert_eq!(p("4096", &unlimited), Some(4096));
        assert_eq!(p("0", &unlimited), None);
        assert_eq!(read(&[], &unlimited).payload, None);
    }

    #[test]
    fn an_endpoint_reads_its_parameters_again_only_when_they_changed() {
        let first = with(&[("connections", "99"), ("heartbeat", "1"), ("weight", "1")]);
        let e = EndpointParams::new(&first, CONSUMER);
        let want = ProviderParams {
            connections: 16,
            heartbeat: Some(MIN_HEARTBEAT),
            payload: Some(CONSUMER.payload),
        };
        assert_eq!(e.get(&first), want);
        // Another instance with the same values (an override changed its weight).
        let same = with(&[("connections", "99"), ("heartbeat", "1"), ("weight", "2")]);
        assert_eq!(e.get(&same), want);
        let changed = with(&[("connections", "2"), ("payload", "2048")]);
        let now = ProviderParams {
            connections: 2,
            heartbeat: None,
            payload: Some(2048),
        };
        assert_eq!(e.get(&changed), now);
        assert_eq!(e.get(&changed), now);
        assert_eq!(e.get(&first), want, "the first instance's own values");
        assert!(format!("{e:?}").contains("connections: 16"), "{e:?}");
    }

    /// The log lines written at `warn` while `f` runs on this thread.
    fn warnings(f: impl FnOnce()) -> Vec<String> {
        use std::io::Write;
        use std::sync::Mutex;
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl Write for Lines {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn out_of_range_values_are_warned_once_per_endpoint() {
        let hostile = with(&[
            ("connections", "18446744073709551615"),
            ("heartbeat", "1"),
            ("payload", "0"),
        ]);
        let logged = warnings(|| {
            let e = EndpointParams::new(&hostile, CONSUMER);
            for _ in 0..3 {
                e.get(&hostile);
            }
            // Another instance with the same values: not logged again.
            let again = with(&[
                ("connections", "18446744073709551615"),
                ("heartbeat", "1"),
                ("payload", "0"),
                ("weight", "5"),
            ]);
            e.get(&again);
        });
        assert_eq!(logged.len(), 3, "{logged:#?}");
        for (line, parameter, value, applies) in [
            (
                &logged[0],
                "connections",
                "18446744073709551615",
                "16 (the most accepted)",
            ),
            (
                &logged[1],
                "heartbeat",
                "1",
                "1000 ms (the shortest accepted)",
            ),
            (
                &logged[2],
                "payload",
                "0",
                "the consumer's limit (8388608 bytes)",
            ),
        ] {
            assert!(line.contains("WARN"), "{line}");
            for field in [
                "address=\"127.0.0.1:20880\"".to_string(),
                format!("parameter=\"{parameter}\""),
                format!("value=\"{value}\""),
                format!("applies={applies}"),
            ] {
                assert!(line.contains(&field), "{field} in {line}");
            }
        }
        // In range: nothing logged. A direct call logs at debug only.
        let fine = with(&[
            ("connections", "2"),
            ("heartbeat", "30000"),
            ("payload", "4096"),
        ]);
        assert!(warnings(|| drop(EndpointParams::new(&fine, CONSUMER))).is_empty());
        assert!(
            warnings(|| {
                ProviderParams::for_call(&hostile, &CONSUMER);
            })
            .is_empty()
        );
    }

    #[test]
    fn long_values_are_shortened_in_logs() {
        let long = "9".repeat(500);
        let shown = format!("{:?}", Shown(&long));
        assert_eq!(shown, format!("{:?}...", "9".repeat(64)));
        assert_eq!(format!("{:?}", Shown("a\nb")), "\"a\\nb\"");
    }
}
