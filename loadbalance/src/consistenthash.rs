//! Dubbo's `consistenthash`: a ring built exactly as Dubbo's `ConsistentHashSelector` builds it,

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

use md5::{Digest, Md5};
use switchman_core::java_text::write_java_text;
use switchman_core::{Error, Invocation};

use crate::{Endpoint, LoadBalance, PickContext, Picker};

/// Dubbo's default `hash.nodes`.
pub const DEFAULT_HASH_NODES: u32 = 160;

/// Dubbo's `consistenthash`: a ring built exactly as Dubbo's `ConsistentHashSelector` builds it,
/// so a key lands on the provider a Java consumer would pick for the same provider set.
///
/// # The ring (as in Dubbo 3.3)
///
/// For each instance, in list order, and for `i` in `0..hash.nodes / 4`, take
/// `MD5(address + i)` (address is `host:port`, `i` in decimal); each 16-byte digest gives four
/// points, point `k` being the little-endian `u32` of bytes `4k..4k+4`. Dubbo stores the points
/// in a `TreeMap`, so when two points collide the one inserted last wins; the sorted arrays
/// here keep the same owner.
///
/// # The key
///
/// The arguments at the `hash.arguments` indexes (default `0`) are rendered as Java's
/// `String.valueOf` would render the object each becomes for its declared parameter type
/// (`Invocation::parameter_types`; untyped when not given) and concatenated; indexes past the
/// last argument are skipped. The key's point is the little-endian `u32` of the first four bytes
/// of its MD5, and the owner is the first ring point `>=` it, wrapping around to the first point.
/// The rendering is [`switchman_core::java_text`]'s: strings as is, `null`, `true`/`false`;
/// `5` passed as a `double` is `5.0`, as an `int` or untyped `5`; floating-point numbers like
/// `Double.toString` (`1.0E10`); a JSON array is a `List` (`[a, b]`), a JSON object a `HashMap`
/// (`{k1=v1, k2=v2}` in Java's bucket order). Java arrays render like lists and POJOs as compact
/// JSON: Java's texts for those (`[Ljava.lang.String;@1b6d3586`, `User@4e25154f`) hold an
/// identity hash that differs from JVM to JVM, so no two Java consumers agree on them either.
///
/// # Retries
///
/// A retry whose key owner was already tried goes to the key's successor on the ring: the
/// first point after the key's owned by an untried member. That is what Dubbo's reselect
/// answers when it runs the balancer over the untried instances (a ring of their points
/// only), so the retry target is stable: nodes 10.0.0.1/2/3:20880, key `"42"` owned by .2,
/// .2 fails: the retry goes to .3 every time.
///
/// # Differences from Dubbo
///
/// With more than 10 routed instances (Dubbo's `reselect.count`) Dubbo builds the reselect
/// ring from 10 instances drawn at random, so its retry target varies from call to call;
/// Switchman always takes the successor, as Dubbo does for smaller lists (a stable retry
/// target keeps a key's retries, and whatever they warm, on one instance).
///
/// Weights are ignored, as in Dubbo, with one exception: members whose configured weight is 0
/// are left off the ring while others have weight (operators use weight 0 to drain). The
/// lookup is a binary search over a bucket of the sorted points (a top-bits index narrows it
/// first), not a tree walk; the answer is the same.
#[derive(Debug, Clone)]
pub struct ConsistentHashBalance {
    replicas: u32,
    arguments: Arc<[usize]>,
}

/// The most virtual nodes per instance `hash.nodes` may ask for (Dubbo sets no bound; its
/// default is 160): a registry-supplied value cannot make one ring table unbounded.
pub const MAX_HASH_NODES: u32 = 4096;

/// The most points on one ring (8 bytes each while it is built): with more instances than
/// `MAX_RING_POINTS / hash.nodes`, each instance gets fewer virtual nodes.
pub const MAX_RING_POINTS: usize = 4 << 20;

impl Default for ConsistentHashBalance {
    fn default() -> Self {
        ConsistentHashBalance {
            replicas: DEFAULT_HASH_NODES,
            arguments: Arc::from([0usize]),
        }
    }
}

impl ConsistentHashBalance {
    /// A ring with `nodes` virtual nodes per instance (Dubbo's `hash.nodes`; rounded down to a
    /// multiple of 4, at least 4) hashing the arguments at `argument_indexes` (Dubbo's
    /// `hash.arguments`).
    pub fn new(nodes: u32, argument_indexes: &[usize]) -> Result<Self, Error> {
        if nodes < 4 {
            return Err(Error::bad_config(format!(
                "consistenthash: hash.nodes={nodes} is too small (at least 4: each MD5 digest gives 4 points)"
            )));
        }
        if nodes > MAX_HASH_NODES {
            return Err(Error::bad_config(format!(
                "consistenthash: hash.nodes={nodes} is too large (at most {MAX_HASH_NODES}; Dubbo's default is {DEFAULT_HASH_NODES})"
            )));
        }
        Ok(ConsistentHashBalance {
            replicas: nodes,
            arguments: Arc::from(argument_indexes),
        })
    }

    /// Parses Dubbo's parameters: `hash.nodes` (a number, default 160) and `hash.arguments`
    /// (comma-separated argument indexes, default `0`). Negative indexes are accepted and
    /// ignored, as Dubbo ignores them.
    pub fn from_params(nodes: Option<&str>, arguments: Option<&str>) -> Result<Self, Error> {
        let replicas = match nodes {
            None => DEFAULT_HASH_NODES,
            Some(s) => s.trim().parse::<u32>().map_err(|_| {
                Error::bad_config(format!(
                    "consistenthash: hash.nodes={s:?} is not a positive integer"
                ))
            })?,
        };
        let mut indexes = Vec::new();
        for part in arguments.unwrap_or("0").split(',') {
            let i: i64 = part.trim().parse().map_err(|_| {
                Error::bad_config(format!(
                    "consistenthash: hash.arguments={:?}: {part:?} is not an argument index",
                    arguments.unwrap_or("")
                ))
            })?;
            if let Ok(i) = usize::try_from(i) {
                indexes.push(i);
            }
        }
        Self::new(replicas, &indexes)
    }

    /// Virtual nodes per instance.
    pub fn nodes(&self) -> u32 {
        self.replicas
    }

    /// Argument indexes hashed into the key.
    pub fn argument_indexes(&self) -> &[usize] {
        &self.arguments
    }
}

/// The four ring points of one digest, as Dubbo's `hash(digest, k)` reads them.
fn digest_points(digest: &[u8]) -> [u32; 4] {
    std::array::from_fn(|k| {
        u32::from_le_bytes([
            digest[4 * k],
            digest[4 * k + 1],
            digest[4 * k + 2],
            digest[4 * k + 3],
        ])
    })
}

/// The ring points Dubbo computes for one address (in insertion order).
pub fn ring_points(address: &str, nodes: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(nodes as usize);
    let mut buf = String::with_capacity(address.len() + 10);
    for i in 0..nodes / 4 {
        buf.clear();
        buf.push_str(address);
        let _ = write!(buf, "{i}");
        out.extend(digest_points(&Md5::digest(buf.as_bytes())));
    }
    out
}

impl LoadBalance for ConsistentHashBalance {
    fn name(&self) -> &str {
        "consistenthash"
    }

    fn prepare(
        &self,
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        _now: SystemTime,
    ) -> Box<dyn Picker> {
        let any_positive = members
            .iter()
            .any(|&i| endpoints[i as usize].instance.weight() > 0);
        let on_ring: Vec<u32> = members
            .iter()
            .copied()
            .filter(|&i| !any_positive || endpoints[i as usize].instance.weight() > 0)
            .collect();
        // A ring of at most MAX_RING_POINTS: past it (only with very many instances), each
        // instance gets fewer virtual nodes than configured, so the table stays bounded.
        let fit = (MAX_RING_POINTS / on_ring.len().max(1)) as u32 / 4 * 4;
        let replicas = self.replicas.min(fit.max(4));
        if replicas < self.replicas {
            tracing::warn!(
                instances = on_ring.len(),
                configured = self.replicas,
                used = replicas,
                "consistenthash: fewer virtual nodes per instance, to keep the ring under {MAX_RING_POINTS} points"
            );
        }
        let per = (replicas / 4 * 4) as u64;
        // (point << 32 | insertion number): sorting puts equal points in insertion order, so
        // the last of a run is the owner Dubbo's TreeMap keeps.
        let mut keyed: Vec<u64> = Vec::with_capacity(on_ring.len() * per as usize);
        for (n, &i) in on_ring.iter().enumerate() {
            let address = endpoints[i as usize].instance.address();
            for (k, p) in ring_points(address, replicas).into_iter().enumerate() {
                keyed.push((p as u64) << 32 | (n as u64 * per + k as u64));
            }
        }
        keyed.sort_unstable();
        let mut points = Vec::with_capacity(keyed.len());
        let mut owners = Vec::with_capacity(keyed.len());
        for (j, &kv) in keyed.iter().enumerate() {
            let point = (kv >> 32) as u32;
            if keyed
                .get(j + 1)
                .is_some_and(|&next| (next >> 32) as u32 == point)
            {
                continue; // a later insertion owns this point
            }
            points.push(point);
            owners.push(on_ring[((kv & 0xffff_ffff) / per) as usize]);
        }
        drop(keyed);
        // Top-bits index: bucket b holds the points whose top `bits` bits equal b.
        let bits = (usize::BITS - points.len().leading_zeros()).clamp(4, 20);
        let shift = 32 - bits;
        let mut index = vec![0u32; (1usize << bits) + 1];
        let mut pos = 0usize;
        for (b, slot) in index.iter_mut().enumerate() {
            while pos < points.len() && ((points[pos] >> shift) as usize) < b {
                pos += 1;
            }
            *slot = pos as u32;
        }
        Box::new(ConsistentHashPicker {
            members,
            on_ring: on_ring.into_boxed_slice(),
            points: points.into_boxed_slice(),
            owners: owners.into_boxed_slice(),
            index: index.into_boxed_slice(),
            shift,
            arguments: self.arguments.clone(),
        })
    }
}

struct ConsistentHashPicker {
    members: Arc<[u32]>,
    /// The members with points on the ring (ascending).
    on_ring: Box<[u32]>,
    points: Box<[u32]>,
    /// Global endpoint index owning each point.
    owners: Box<[u32]>,
    index: Box<[u32]>,
    shift: u32,
    arguments: Arc<[usize]>,
}

impl std::fmt::Debug for ConsistentHashPicker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsistentHashPicker")
            .field("members", &self.members.len())
            .field("points", &self.points.len())
            .field("arguments", &self.arguments)
            .finish()
    }
}

impl ConsistentHashPicker {
    /// The position of the first point `>= h`, wrapping around.
    #[inline]
    fn position(&self, h: u32) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let b = (h >> self.shift) as usize;
        let (lo, hi) = (self.index[b] as usize, self.index[b + 1] as usize);
        let pos = lo + self.points[lo..hi].partition_point(|&p| p < h);
        Some(if pos == self.points.len() { 0 } else { pos })
    }

    /// The owner of the first point `>= h`, wrapping around.
    #[inline]
    fn lookup(&self, h: u32) -> Option<usize> {
        self.position(h).map(|pos| self.owners[pos] as usize)
    }
}

impl Picker for ConsistentHashPicker {
    fn pick(
        &self,
        _endpoints: &[Endpoint],
        ctx: &PickContext<'_>,
        _rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        self.lookup(key_point(ctx.invocation, &self.arguments))
    }

    fn members(&self) -> &[u32] {
        &self.members
    }

    /// Dubbo's reselect builds a ring over the untried members and looks the key up there: the
    /// owner of the first point at or after the key's that belongs to an untried member, which
    /// is this walk along the full ring. `None` when every member on the ring was tried.
    fn pick_untried(
        &self,
        _endpoints: &[Endpoint],
        ctx: &PickContext<'_>,
        _rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        // Distinct tried members on the ring (the tried list is short: a call's attempts).
        let tried_on_ring = ctx
            .tried
            .iter()
            .enumerate()
            .filter(|&(k, t)| {
                !ctx.tried[..k].contains(t)
                    && u32::try_from(*t).is_ok_and(|t| self.on_ring.binary_search(&t).is_ok())
            })
            .count();
        if tried_on_ring >= self.on_ring.len() {
            return None;
        }
        let start = self.position(key_point(ctx.invocation, &self.arguments))?;
        let n = self.points.len();
        (0..n)
            .map(|k| self.owners[(start + k) % n] as usize)
            .find(|i| !ctx.tried.contains(i))
    }
}

/// MD5 fed through `fmt::Write`, so keys are hashed without building them.
struct HashWriter(Md5);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

/// The key's ring point: the selected arguments rendered as Java text for their declared types
/// ([`switchman_core::java_text`]) and concatenated, MD5, first 4 bytes little-endian.
pub fn key_point(invocation: &Invocation, argument_indexes: &[usize]) -> u32 {
    let mut w = HashWriter(Md5::new());
    for &i in argument_indexes {
        if let Some(v) = invocation.arguments.get(i) {
            let java_type = invocation.parameter_types.get(i).map(String::as_str);
            // HashWriter never fails, and the renderer fails only when its writer does.
            let _ = write_java_text(&mut w, v, java_type);
        }
    }
    digest_points(&w.0.finalize())[0]
}

#[cfg(test)]
mod tests {

    #[test]
    fn hash_nodes_past_the_bound_are_refused() {
        let e = ConsistentHashBalance::from_params(Some("2000000000"), None).unwrap_err();
        assert!(e.to_string().contains("at most 4096"), "{e}");
        assert!(ConsistentHashBalance::new(MAX_HASH_NODES, &[0]).is_ok());
        assert!(ConsistentHashBalance::new(MAX_HASH_NODES + 1, &[0]).is_err());
    }
    use super::*;
    use serde_json::{Value, json};

    fn md5_point(s: &str) -> u32 {
        digest_points(&Md5::digest(s.as_bytes()))[0]
    }

    #[test]
    fn key_renders_arguments_like_java() {
        let point =
            |args: Vec<Value>, idx: &[usize]| key_point(&Invocation::new("m").with_args(args), idx);
        assert_eq!(point(vec![json!("abc")], &[0]), md5_point("abc"));
        assert_eq!(point(vec![json!(42)], &[0]), md5_point("42"));
        assert_eq!(point(vec![json!(2.0)], &[0]), md5_point("2.0"));
        assert_eq!(point(vec![json!(1e10)], &[0]), md5_point("1.0E10"));
        assert_eq!(
            point(vec![json!(true), json!(null)], &[0, 1]),
            md5_point("truenull")
        );
        assert_eq!(
            point(vec![json!("a"), json!(7)], &[1, 0, 5]),
            md5_point("7a")
        );
        assert_eq!(point(vec![], &[0]), md5_point(""));
        // Untyped arrays and objects are an ArrayList and a HashMap.
        assert_eq!(point(vec![json!(["a", "b"])], &[0]), md5_point("[a, b]"));
        assert_eq!(
            point(vec![json!({"k": [1, 2]})], &[0]),
            md5_point("{k=[1, 2]}")
        );
    }

    #[test]
    fn key_renders_by_the_declared_parameter_types() {
        let point = |args: Vec<Value>, types: &[&str], idx: &[usize]| {
            key_point(
                &Invocation::new("m")
                    .with_args(args)
                    .with_types(types.iter().copied()),
                idx,
            )
        };
        // 5 passed as a double is the Double 5.0; 5.0 passed as a long is the Long 5.
        assert_eq!(point(vec![json!(5)], &["double"], &[0]), md5_point("5.0"));
        assert_eq!(
            point(vec![json!(5)], &["java.lang.Double"], &[0]),
            md5_point("5.0")
        );
        assert_eq!(point(vec![json!(5.0)], &["long"], &[0]), md5_point("5"));
        assert_eq!(
            point(vec![json!(["a", "b"])], &["java.util.List"], &[0]),
            md5_point("[a, b]")
        );
        assert_eq!(
            point(
                vec![json!("u1"), json!(2), json!([1])],
                &[
                    "java.lang.String",
                    "float",
                    "java.util.List<java.lang.Double>"
                ],
                &[2, 0, 1]
            ),
            md5_point("[1.0]u12.0")
        );
        // Fewer types than arguments: the rest are untyped.
        assert_eq!(
            point(vec![json!(5), json!(5)], &["double"], &[0, 1]),
            md5_point("5.05")
        );
    }

    #[test]
    fn params_parse_and_validate() {
        let b = ConsistentHashBalance::from_params(Some("320"), Some("0, 2,-1")).unwrap();
        assert_eq!(b.nodes(), 320);
        assert_eq!(b.argument_indexes(), &[0, 2]);
        let d = ConsistentHashBalance::from_params(None, None).unwrap();
        assert_eq!((d.nodes(), d.argument_indexes()), (160, &[0usize][..]));
        let e = ConsistentHashBalance::from_params(Some("abc"), None).unwrap_err();
        assert!(e.to_string().contains("hash.nodes=\"abc\""), "{e}");
        let e = ConsistentHashBalance::from_params(None, Some("0,x")).unwrap_err();
        assert!(e.to_string().contains("\"x\""), "{e}");
        assert!(ConsistentHashBalance::new(3, &[0]).is_err());
    }
}
