//! The typed values of the settings that Dubbo writes as numbers with special meanings
//! (`retries=-1`, `forks=0`), bounded numbers (`broadcast.fail.percent`, `hash.nodes`), lists
//! (`hash.arguments`) and names (`loadbalance`). Each type holds only valid values: the
//! constructors that can fail say why, naming the value.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::Arc;

use switchman_core::Error;
use switchman_loadbalance::{
    BalancerKind, ConsistentHashBalance, DEFAULT_HASH_NODES, LoadBalance, MAX_HASH_NODES,
};

/// `retries`: how many times a failed call is tried again (failover: extra attempts on other
/// instances; failback: background retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Retries {
    /// This many retries after the first attempt.
    Count(u32),
    /// A negative `retries` as Dubbo reads it (`retries=-1`): a single attempt under
    /// failover, failback's default of 3 background retries under failback.
    Negative,
}

impl Retries {
    /// Dubbo's integer: a negative one is [`Retries::Negative`].
    pub fn from_dubbo(n: i64) -> Retries {
        match u32::try_from(n) {
            Ok(n) => Retries::Count(n),
            Err(_) if n < 0 => Retries::Negative,
            Err(_) => Retries::Count(u32::MAX),
        }
    }

    /// The retries this setting means under `failback` (true) or any other strategy.
    pub(crate) fn resolve(self, failback: bool) -> u32 {
        match self {
            Retries::Count(n) => n,
            Retries::Negative if failback => DEFAULT_FAILBACK_RETRIES,
            Retries::Negative => 0,
        }
    }
}

/// Failback's default `retries`.
pub(crate) const DEFAULT_FAILBACK_RETRIES: u32 = 3;

impl From<u32> for Retries {
    fn from(n: u32) -> Self {
        Retries::Count(n)
    }
}

impl FromStr for Retries {
    type Err = Error;
    /// An integer; a negative one is [`Retries::Negative`].
    fn from_str(s: &str) -> Result<Self, Error> {
        s.trim()
            .parse::<i64>()
            .map(Retries::from_dubbo)
            .map_err(|_| Error::bad_config(format!("retries={s:?} is not an integer")))
    }
}

impl fmt::Display for Retries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retries::Count(n) => write!(f, "{n}"),
            Retries::Negative => f.write_str("-1"),
        }
    }
}

/// `forks`: how many instances a forking call tries at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Forks {
    /// Every routed instance (Dubbo's `forks <= 0`, and any count at least the list size).
    All,
    /// At most this many distinct instances.
    Count(NonZeroU32),
}

impl Forks {
    /// Dubbo's integer: `0` or less is [`Forks::All`].
    pub fn from_dubbo(n: i64) -> Forks {
        match u32::try_from(n.max(0)).ok().and_then(NonZeroU32::new) {
            Some(n) => Forks::Count(n),
            None if n > 0 => Forks::Count(NonZeroU32::MAX),
            None => Forks::All,
        }
    }

    /// How many of `candidates` routed instances a call forks to (at least 1).
    pub fn of(self, candidates: usize) -> usize {
        match self {
            Forks::All => candidates,
            Forks::Count(n) => (n.get() as usize).min(candidates),
        }
        .max(1)
    }
}

impl Default for Forks {
    /// Dubbo's default, 2.
    fn default() -> Self {
        Forks::Count(NonZeroU32::new(2).expect("2 is not zero"))
    }
}

impl From<NonZeroU32> for Forks {
    fn from(n: NonZeroU32) -> Self {
        Forks::Count(n)
    }
}

/// `0` is [`Forks::All`], as Dubbo reads `forks=0`.
impl From<u32> for Forks {
    fn from(n: u32) -> Self {
        Forks::from_dubbo(i64::from(n))
    }
}

impl FromStr for Forks {
    type Err = Error;
    /// An integer; `0` or less is [`Forks::All`].
    fn from_str(s: &str) -> Result<Self, Error> {
        s.trim()
            .parse::<i64>()
            .map(Forks::from_dubbo)
            .map_err(|_| Error::bad_config(format!("forks={s:?} is not an integer")))
    }
}

/// A percentage, 0 to 100 (`broadcast.fail.percent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Percent(u8);

impl Percent {
    /// 100%.
    pub const ALL: Percent = Percent(100);

    /// `percent` when it is at most 100.
    pub fn new(percent: u32) -> Result<Percent, Error> {
        u8::try_from(percent)
            .ok()
            .filter(|p| *p <= 100)
            .map(Percent)
            .ok_or_else(|| Error::bad_config(format!("{percent} is outside 0..=100")))
    }

    /// The percentage.
    pub fn get(self) -> u32 {
        u32::from(self.0)
    }
}

impl FromStr for Percent {
    type Err = Error;
    /// `50` or `50%`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = s.trim();
        let t = t.strip_suffix('%').unwrap_or(t).trim();
        let n: i64 = t
            .parse()
            .map_err(|_| Error::bad_config(format!("{s:?} is not a percentage")))?;
        u32::try_from(n)
            .map_err(|_| Error::bad_config(format!("{n} is outside 0..=100")))
            .and_then(Percent::new)
    }
}

/// `hash.nodes`: virtual nodes per instance on a consistent-hash ring (at least 4: each MD5
/// digest gives 4 points; rounded down to a multiple of 4 as Dubbo does; at most
/// [`MAX_HASH_NODES`], 4096, so a registry-supplied value cannot make a ring unbounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HashNodes(u32);

impl HashNodes {
    /// Dubbo's default, 160.
    pub const DEFAULT: HashNodes = HashNodes(DEFAULT_HASH_NODES);

    /// `nodes` when it is at least 4 and at most [`MAX_HASH_NODES`].
    pub fn new(nodes: u32) -> Result<HashNodes, Error> {
        if nodes < 4 {
            return Err(Error::bad_config(format!(
                "{nodes} is too small (at least 4: each MD5 digest gives 4 ring points)"
            )));
        }
        if nodes > MAX_HASH_NODES {
            return Err(Error::bad_config(format!(
                "{nodes} is too large (at most {MAX_HASH_NODES}; Dubbo's default is {DEFAULT_HASH_NODES})"
            )));
        }
        Ok(HashNodes(nodes))
    }

    /// The count.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl FromStr for HashNodes {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let n: u32 = s
            .trim()
            .parse()
            .map_err(|_| Error::bad_config(format!("{s:?} is not a whole number")))?;
        HashNodes::new(n)
    }
}

/// `hash.arguments`: the indexes of the arguments a consistent-hash key is made of (at least
/// one; Dubbo's default is the first argument, `0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HashArguments(Arc<[usize]>);

impl HashArguments {
    /// `indexes` when there is at least one.
    pub fn new(indexes: &[usize]) -> Result<HashArguments, Error> {
        if indexes.is_empty() {
            return Err(Error::bad_config(
                "no argument index (the key needs at least one, e.g. 0)",
            ));
        }
        Ok(HashArguments(Arc::from(indexes)))
    }

    /// Dubbo's default: the first argument.
    pub fn first() -> HashArguments {
        HashArguments(Arc::from([0usize]))
    }

    /// The indexes.
    pub fn indexes(&self) -> &[usize] {
        &self.0
    }
}

impl FromStr for HashArguments {
    type Err = Error;
    /// Comma-separated indexes (`0,1`); negative indexes are accepted and ignored, as Dubbo
    /// ignores them, but at least one index must remain.
    fn from_str(s: &str) -> Result<Self, Error> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let i: i64 = part.trim().parse().map_err(|_| {
                Error::bad_config(format!("{part:?} in {s:?} is not an argument index"))
            })?;
            if let Ok(i) = usize::try_from(i) {
                out.push(i);
            }
        }
        HashArguments::new(&out).map_err(|e| Error::bad_config(format!("{s:?}: {}", e.message())))
    }
}

/// `loadbalance`: a built-in balancer by Dubbo's name, or your own balancer object.
#[derive(Clone)]
#[non_exhaustive]
pub enum Balancer {
    /// A built-in balancer by name; for `consistenthash` the `hash.nodes` and
    /// `hash.arguments` settings apply.
    Named(BalancerKind),
    /// A balancer object used as it is (the `hash.*` settings do not apply to it).
    Custom(Arc<dyn LoadBalance>),
}

impl Balancer {
    /// The balancer object: a built-in one with its default parameters (the `hash.*`
    /// settings apply when the settings are resolved), or yours.
    pub fn build(&self) -> Arc<dyn LoadBalance> {
        match self {
            Balancer::Named(k) => k.build(),
            Balancer::Custom(b) => b.clone(),
        }
    }

    /// The balancer's name (Dubbo's for the built-in ones).
    pub fn name(&self) -> &str {
        match self {
            Balancer::Named(k) => k.as_str(),
            Balancer::Custom(b) => b.name(),
        }
    }
}

impl fmt::Debug for Balancer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Balancer::Named(k) => write!(f, "Named({k})"),
            Balancer::Custom(b) => write!(f, "Custom({b:?})"),
        }
    }
}

impl PartialEq for Balancer {
    /// Built-in ones by name, custom ones by identity.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Balancer::Named(a), Balancer::Named(b)) => a == b,
            (Balancer::Custom(a), Balancer::Custom(b)) => same_object(a, b),
            _ => false,
        }
    }
}

impl From<BalancerKind> for Balancer {
    fn from(k: BalancerKind) -> Self {
        Balancer::Named(k)
    }
}

impl From<Arc<dyn LoadBalance>> for Balancer {
    fn from(b: Arc<dyn LoadBalance>) -> Self {
        Balancer::Custom(b)
    }
}

impl FromStr for Balancer {
    type Err = Error;
    /// A built-in name (`random`, `roundrobin`, `leastactive`, `shortestresponse`,
    /// `consistenthash`, `p2c`/`adaptive`), case-insensitive.
    fn from_str(s: &str) -> Result<Self, Error> {
        s.parse::<BalancerKind>().map(Balancer::Named)
    }
}

/// Whether two balancer handles are the same object (data pointers; vtables may differ).
pub(crate) fn same_object(a: &Arc<dyn LoadBalance>, b: &Arc<dyn LoadBalance>) -> bool {
    std::ptr::eq(Arc::as_ptr(a) as *const (), Arc::as_ptr(b) as *const ())
}

/// The balancer one call uses in one routed subset, as the settings resolve it (`loadbalance`
/// and, for `consistenthash`, `hash.nodes` and `hash.arguments`, each by Dubbo's precedence).
#[derive(Debug, Clone)]
pub(crate) enum BalancerSpec {
    /// Nothing names a balancer: the directory's own (Dubbo's `random` unless it was given
    /// another), whose tables every snapshot already carries.
    Directory {
        /// `hash.*` set without `loadbalance`: applies when the directory's balancer is a
        /// consistent hash.
        hash: Option<(HashNodes, HashArguments)>,
    },
    /// A built-in by name, with its ring parameters (defaults for the other kinds).
    Named(BalancerKind, HashNodes, HashArguments),
    /// An object set in code.
    Custom(Arc<dyn LoadBalance>),
}

impl PartialEq for BalancerSpec {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (BalancerSpec::Directory { hash: a }, BalancerSpec::Directory { hash: b }) => a == b,
            (BalancerSpec::Named(k, n, a), BalancerSpec::Named(l, m, b)) => {
                k == l && n == m && a == b
            }
            (BalancerSpec::Custom(a), BalancerSpec::Custom(b)) => same_object(a, b),
            _ => false,
        }
    }
}

impl BalancerSpec {
    /// The spec for `loadbalance` and the `hash.*` values the layers resolved to.
    pub(crate) fn of(
        balancer: Option<&Balancer>,
        nodes: Option<HashNodes>,
        arguments: Option<&HashArguments>,
    ) -> BalancerSpec {
        let hash = || {
            (
                nodes.unwrap_or(HashNodes::DEFAULT),
                arguments.cloned().unwrap_or_else(HashArguments::first),
            )
        };
        match balancer {
            None => BalancerSpec::Directory {
                hash: (nodes.is_some() || arguments.is_some()).then(hash),
            },
            Some(Balancer::Named(BalancerKind::ConsistentHash)) => {
                let (n, a) = hash();
                BalancerSpec::Named(BalancerKind::ConsistentHash, n, a)
            }
            Some(Balancer::Named(k)) => {
                BalancerSpec::Named(*k, HashNodes::DEFAULT, HashArguments::first())
            }
            Some(Balancer::Custom(b)) => BalancerSpec::Custom(b.clone()),
        }
    }

    /// Whether this spec names a balancer with `directory` as the directory's (a `hash.*`
    /// without `loadbalance` does only over a consistent hash).
    pub(crate) fn build_needs(&self, directory: &Arc<dyn LoadBalance>) -> bool {
        match self {
            BalancerSpec::Directory { hash: None } => false,
            BalancerSpec::Directory { hash: Some(_) } => {
                directory.name() == BalancerKind::ConsistentHash.as_str()
            }
            _ => true,
        }
    }

    /// Whether this is the directory's balancer with nothing changed.
    pub(crate) fn is_directory(&self) -> bool {
        matches!(self, BalancerSpec::Directory { hash: None })
    }

    /// The balancer object this spec names, given the directory's balancer `directory`
    /// (`None`: the directory's own tables apply; a `hash.*` without `loadbalance` changes
    /// the directory's balancer only when it is a consistent hash).
    pub(crate) fn build(&self, directory: &Arc<dyn LoadBalance>) -> Option<Arc<dyn LoadBalance>> {
        Some(match self {
            BalancerSpec::Directory { hash: None } => return None,
            BalancerSpec::Directory { hash: Some((n, a)) } => {
                if directory.name() != BalancerKind::ConsistentHash.as_str() {
                    return None;
                }
                Arc::new(consistent_hash(*n, a))
            }
            BalancerSpec::Named(BalancerKind::ConsistentHash, n, a) => {
                Arc::new(consistent_hash(*n, a))
            }
            BalancerSpec::Named(k, _, _) => k.build(),
            BalancerSpec::Custom(b) => b.clone(),
        })
    }
}

fn consistent_hash(n: HashNodes, a: &HashArguments) -> ConsistentHashBalance {
    ConsistentHashBalance::new(n.get(), a.indexes())
        .unwrap_or_else(|_| ConsistentHashBalance::default())
}

/// Whether `a` builds the same tables as `b`: the same object, or two built-in balancers of
/// one name and configuration (compared by their `Debug` form, once per snapshot).
pub(crate) fn equivalent(a: &Arc<dyn LoadBalance>, b: &Arc<dyn LoadBalance>) -> bool {
    same_object(a, b) || (a.name() == b.name() && format!("{a:?}") == format!("{b:?}"))
}
