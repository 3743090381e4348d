//! The provider parameters both the dubbo:// and the Triple transport read, parsed into
//! [`SharedParams`] by one parser: `prefer.serialization` and `serialization` (whether the
//! provider takes hessian2), `ssl-enabled` (whether it takes TLS) and `release` (whether it is
//! a Java Dubbo release).
//!
//! An endpoint's client reads them once, when it is made, and again only when the directory
//! hands it an instance whose values changed ([`EndpointShared`] for Triple; dubbo:// keeps
//! them, as [`SharedRaw`] and [`SharedParams`], beside its own parameters in its
//! `EndpointParams`). A direct call through the invoker reads them per call with
//! [`SharedParams::of`]: the same parser.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use switchman_core::{Error, ErrorKind, Instance, Result};

/// The URL parameter by which a provider says it takes TLS (Dubbo's `SSL_ENABLED_KEY`).
pub const SSL_ENABLED: &str = "ssl-enabled";

/// The parameters read, in the order of [`SharedRaw`].
const KEYS: [&str; 4] = [
    "prefer.serialization",
    "serialization",
    SSL_ENABLED,
    "release",
];

/// What a provider's `prefer.serialization` and `serialization` parameters say of hessian2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Serialization {
    /// Neither names a serialization: the protocol's default applies.
    Unstated,
    /// They name `hessian2` (any case), maybe among others.
    Hessian2,
    /// They name others only: the names as the errors list them (`fastjson2,protobuf`:
    /// trimmed, comma-joined, in their order, `prefer.serialization`'s first).
    Others(Arc<str>),
}

/// What the dubbo:// and Triple transports take from a provider's shared parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedParams {
    /// The serialization verdict.
    pub(crate) serialization: Serialization,
    /// `ssl-enabled=true` (any case, spaces around): the provider takes TLS (Dubbo's
    /// `ProtocolConfig.sslEnabled`).
    pub(crate) ssl_enabled: bool,
    /// `release` starts with a digit: a Java Dubbo release (`3.3.2`), not a Go or Python one.
    pub(crate) java_release: bool,
}

/// The values read, in the order of [`KEYS`].
type Raw<'a> = [Option<&'a str>; 4];

fn raw_of(target: &Instance) -> Raw<'_> {
    KEYS.map(|k| target.param(k))
}

#[cfg(test)]
thread_local! {
    /// How many times [`SharedParams::read`] ran on this thread.
    static READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times the shared parameters were parsed on this thread (tests of "read once").
#[cfg(test)]
pub(crate) fn reads() -> usize {
    READS.with(|r| r.get())
}

#[cfg(test)]
thread_local! {
    /// How many times kept values were compared with an instance's on this thread.
    static COMPARES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many times an endpoint compared the values it kept with an instance's, on this thread
/// (tests of "a pointer compared, no parameter read").
#[cfg(test)]
pub(crate) fn compares() -> usize {
    COMPARES.with(|r| r.get())
}

impl SharedParams {
    /// `target`'s shared parameters, read for one call.
    pub(crate) fn of(target: &Instance) -> Self {
        Self::read(&raw_of(target))
    }

    /// The parser: `raw` are the values of [`KEYS`].
    fn read(raw: &Raw<'_>) -> Self {
        #[cfg(test)]
        READS.with(|r| r.set(r.get() + 1));
        let [prefer, single, ssl, release] = *raw;
        SharedParams {
            serialization: serialization(prefer, single),
            ssl_enabled: is_true(ssl),
            java_release: release.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())),
        }
    }

    /// Whether the provider accepts hessian2 over dubbo:// (neither parameter set means Dubbo
    /// 2's default, hessian2); else an [`ErrorKind::Unsupported`] error naming the provider at
    /// `address` and what it accepts.
    pub(crate) fn check_hessian2(&self, address: &str) -> Result<()> {
        match &self.serialization {
            Serialization::Unstated | Serialization::Hessian2 => Ok(()),
            Serialization::Others(offered) => Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{address} accepts serialization {offered} over dubbo://; Switchman speaks \
                     hessian2 only"
                ),
            )),
        }
    }

    /// Whether the provider looks like a Java Dubbo Triple provider of a plain interface, which
    /// accepts the wrapper format with Hessian2 inside: its serialization parameters name
    /// hessian2, or name none and its `release` is a Java Dubbo one.
    pub(crate) fn speaks_wrapper(&self) -> bool {
        match self.serialization {
            Serialization::Hessian2 => true,
            Serialization::Unstated => self.java_release,
            Serialization::Others(_) => false,
        }
    }
}

/// Whether `target` is the very instance `kept` (an endpoint's values read from it): a
/// pointer comparison, what a call with its endpoint's current instance costs.
#[inline]
pub(crate) fn is_kept(kept: Option<&Arc<Instance>>, target: &Instance) -> bool {
    kept.is_some_and(|i| std::ptr::eq(&**i, target))
}

/// Whether `target` registered `ssl-enabled=true` (for the callers that need only that).
pub(crate) fn ssl_enabled(target: &Instance) -> bool {
    is_true(target.param(SSL_ENABLED))
}

/// `ssl-enabled`'s reading: `true` in any case, spaces around.
fn is_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The verdict of `prefer.serialization` (a comma list) and `serialization`: allocates only
/// for [`Serialization::Others`].
fn serialization(prefer: Option<&str>, single: Option<&str>) -> Serialization {
    let offered = || {
        prefer
            .unwrap_or("")
            .split(',')
            .chain(single)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    let mut any = false;
    for s in offered() {
        if s.eq_ignore_ascii_case("hessian2") {
            return Serialization::Hessian2;
        }
        any = true;
    }
    if !any {
        return Serialization::Unstated;
    }
    let mut list = String::new();
    for s in offered() {
        if !list.is_empty() {
            list.push(',');
        }
        list.push_str(s);
    }
    Serialization::Others(list.into())
}

/// The shared values one endpoint read (to tell whether another instance's differ).
#[derive(Debug, Clone)]
pub(crate) struct SharedRaw([Option<Box<str>>; 4]);

impl SharedRaw {
    /// `target`'s values and their parse, for an endpoint to keep.
    pub(crate) fn read(target: &Instance) -> (Self, SharedParams) {
        let raw = raw_of(target);
        (
            SharedRaw(raw.map(|v| v.map(Into::into))),
            SharedParams::read(&raw),
        )
    }

    /// `target`'s values and their parse when they differ from these; `None` when the same.
    pub(crate) fn changed(&self, target: &Instance) -> Option<(Self, SharedParams)> {
        #[cfg(test)]
        COMPARES.with(|r| r.set(r.get() + 1));
        let raw = raw_of(target);
        if raw.iter().zip(&self.0).all(|(a, b)| *a == b.as_deref()) {
            return None;
        }
        Some((
            SharedRaw(raw.map(|v| v.map(Into::into))),
            SharedParams::read(&raw),
        ))
    }
}

/// What an endpoint's client reads of its instance, kept in a [`Kept`].
pub(crate) trait ReadOnce: Clone {
    /// What reading needs besides the instance (the consumer's own settings).
    type Context;

    /// `target`'s values when they differ from these (`None`: the same), read again; `loud`:
    /// what is out of range logged at `warn` (else at `debug`).
    fn changed(&self, target: &Instance, cx: &Self::Context, loud: bool) -> Option<Self>;
}

/// What one endpoint's client read, and from which instance.
struct Held<V> {
    /// The instance read, while the calls come with that one (held, so the address compared
    /// cannot belong to another instance); `None` after a change.
    instance: Option<Arc<Instance>>,
    /// Whether `instance` was handed over by the directory ([`Kept::adopt`]): the endpoint's
    /// current one, so a call with another is a straggler with an older one.
    adopted: bool,
    values: V,
}

/// Values an endpoint's client read of its instance when it was made (its token, its
/// parameters). A call with that instance costs a pointer comparison. When the directory
/// hands the endpoint its new instance ([`Kept::adopt`], `Invoker::instance_changed`), what
/// changed is read again and calls with that one compare a pointer again. A call with another
/// instance compares its values with those kept: before any hand-over it reads and keeps
/// what changed; after one (a call still in flight with the instance before) it reads for
/// itself, quietly, and leaves what was adopted.
pub(crate) struct Kept<V> {
    held: ArcSwap<Held<V>>,
}

impl<V: ReadOnce> Kept<V> {
    /// `values`, read from `instance`.
    pub(crate) fn new(instance: &Arc<Instance>, values: V) -> Self {
        Kept {
            held: ArcSwap::from_pointee(Held {
                instance: Some(instance.clone()),
                adopted: false,
                values,
            }),
        }
    }

    /// `f` of the values of `target`, this endpoint's current instance.
    #[inline]
    pub(crate) fn with<R>(&self, target: &Instance, cx: &V::Context, f: impl FnOnce(&V) -> R) -> R {
        let held = self.held.load();
        if is_kept(held.instance.as_ref(), target) {
            return f(&held.values);
        }
        let Some(values) = held.values.changed(target, cx, !held.adopted) else {
            return f(&held.values);
        };
        let out = f(&values);
        if !held.adopted {
            let next = Arc::new(Held {
                instance: None,
                adopted: false,
                values,
            });
            // Not over what `adopt` stored meanwhile.
            self.held.compare_and_swap(&held, next);
        }
        out
    }

    /// Takes `instance` as the endpoint's current one (see `Invoker::instance_changed`): its
    /// values read again if they changed, and calls with it compare a pointer.
    pub(crate) fn adopt(&self, instance: &Arc<Instance>, cx: &V::Context) {
        let held = self.held.load();
        if is_kept(held.instance.as_ref(), instance) {
            return;
        }
        let values = held
            .values
            .changed(instance, cx, true)
            .unwrap_or_else(|| held.values.clone());
        self.held.store(Arc::new(Held {
            instance: Some(instance.clone()),
            adopted: true,
            values,
        }));
    }

    /// `f` of the values kept now (for `Debug`).
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&V) -> R) -> R {
        f(&self.held.load().values)
    }
}

/// The shared values one endpoint read, and their parse.
#[derive(Clone)]
struct Shared {
    raw: SharedRaw,
    params: SharedParams,
}

impl ReadOnce for Shared {
    type Context = ();

    fn changed(&self, target: &Instance, _: &(), _loud: bool) -> Option<Self> {
        let (raw, params) = self.raw.changed(target)?;
        Some(Shared { raw, params })
    }
}

/// An endpoint's shared parameters, read when the endpoint's client is made (see [`Kept`]).
pub(crate) struct EndpointShared {
    kept: Kept<Shared>,
}

impl fmt::Debug for EndpointShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kept.peek(|v| {
            f.debug_struct("EndpointShared")
                .field("params", &v.params)
                .finish_non_exhaustive()
        })
    }
}

impl EndpointShared {
    /// Reads `instance`'s shared parameters.
    pub(crate) fn new(instance: &Arc<Instance>) -> Self {
        let (raw, params) = SharedRaw::read(instance);
        EndpointShared {
            kept: Kept::new(instance, Shared { raw, params }),
        }
    }

    /// The shared parameters of `target`, this endpoint's current instance.
    pub(crate) fn get(&self, target: &Instance) -> SharedParams {
        self.kept.with(target, &(), |v| v.params.clone())
    }

    /// Takes `instance` as the endpoint's current one ([`Kept::adopt`]).
    pub(crate) fn adopt(&self, instance: &Arc<Instance>) {
        self.kept.adopt(instance, &());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(params: &[(&str, &str)]) -> Arc<Instance> {
        let mut b = Instance::builder("127.0.0.1", 20880);
        for (k, v) in params {
            b = b.param(k, v);
        }
        Arc::new(b.build())
    }

    fn of(params: &[(&str, &str)]) -> SharedParams {
        SharedParams::of(&with(params))
    }

    #[test]
    fn serialization_says_hessian2_unstated_or_the_others() {
        let s = |params: &[(&str, &str)]| of(params).serialization;
        assert_eq!(s(&[]), Serialization::Unstated);
        assert_eq!(
            s(&[("prefer.serialization", " , ")]),
            Serialization::Unstated
        );
        assert_eq!(
            s(&[("prefer.serialization", "fastjson2, HESSIAN2")]),
            Serialization::Hessian2
        );
        assert_eq!(s(&[("serialization", "hessian2")]), Serialization::Hessian2);
        assert_eq!(
            s(&[
                ("prefer.serialization", " fastjson2,,protobuf "),
                ("serialization", "kryo")
            ]),
            Serialization::Others("fastjson2,protobuf,kryo".into())
        );
        let e = of(&[("serialization", "protobuf")])
            .check_hessian2("127.0.0.1:20880")
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(
            e.message(),
            "127.0.0.1:20880 accepts serialization protobuf over dubbo://; Switchman speaks hessian2 only"
        );
        assert!(of(&[]).check_hessian2("a:1").is_ok());
    }

    #[test]
    fn ssl_enabled_and_the_wrapper_verdict() {
        assert!(of(&[("ssl-enabled", " TRUE ")]).ssl_enabled);
        for no in ["false", "yes", "1", ""] {
            assert!(!of(&[("ssl-enabled", no)]).ssl_enabled, "{no:?}");
        }
        assert!(!of(&[]).ssl_enabled);
        assert!(of(&[("prefer.serialization", "hessian2,fastjson2")]).speaks_wrapper());
        assert!(of(&[("release", "3.1.0")]).speaks_wrapper());
        assert!(!of(&[("release", "dubbo-golang-3.0")]).speaks_wrapper());
        assert!(
            !of(&[("serialization", "protobuf"), ("release", "3.3.0")]).speaks_wrapper(),
            "a named serialization wins over the release"
        );
    }

    #[test]
    fn an_endpoint_parses_once_and_again_only_when_the_values_change() {
        let first = with(&[("ssl-enabled", "true"), ("weight", "1")]);
        let before = reads();
        let e = EndpointShared::new(&first);
        for _ in 0..5 {
            assert!(e.get(&first).ssl_enabled);
        }
        assert_eq!(reads() - before, 1, "made: parsed once");
        // Another instance with the same values (an override changed its weight).
        let same = with(&[("ssl-enabled", "true"), ("weight", "2")]);
        assert!(e.get(&same).ssl_enabled);
        assert_eq!(reads() - before, 1, "the same values are not parsed again");
        let changed = with(&[("prefer.serialization", "hessian2")]);
        for _ in 0..3 {
            let now = e.get(&changed);
            assert!(!now.ssl_enabled && now.speaks_wrapper());
        }
        assert_eq!(reads() - before, 2, "a change is parsed once");
        assert!(e.get(&first).ssl_enabled, "the first instance's own values");
        assert!(format!("{e:?}").contains("ssl_enabled: true"), "{e:?}");
    }
}
