//! A compiled condition step and what it does to one call: the per-call part of its *when*,
//! and the step applied to a candidate set.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;
use switchman_core::Invocation;

use crate::bitset::Bitset;
use crate::condition::Key;
use crate::pattern::MatchPair;

/// Reads of the invocation a *when* part makes.
#[derive(Debug, Clone)]
pub(crate) enum DynKey {
    Method,
    Argument(usize),
    Attachment(Box<str>),
}

/// A compiled condition step.
#[derive(Debug, Clone)]
pub(crate) struct CompiledStep {
    pub(crate) rule_key: Arc<str>,
    pub(crate) text: Box<str>,
    pub(crate) force: bool,
    pub(crate) dyn_when: Vec<(DynKey, MatchPair)>,
    pub(crate) kind: StepKind,
    /// For `--explain`: the compiled *then* entries per destination.
    pub(crate) then_pairs: Vec<Vec<(Box<str>, Key, MatchPair)>>,
    pub(crate) block_reason: Box<str>,
    pub(crate) force_reason: Box<str>,
}

#[derive(Debug, Clone)]
pub(crate) enum StepKind {
    /// v2: blank/false *then*.
    Block,
    /// v2: keep the providers in the set.
    Keep(Bitset),
    /// v3.1: weighted destinations (empty = traffic disabled).
    Multi(Vec<(Bitset, u32)>),
    /// Affinity: the providers in the set, when they are not none and at least this share
    /// (0.0 to 1.0) of the set; else the set unchanged.
    Prefer(Bitset, f64),
}

/// Whether an affinity step keeps `r` out of `set` (see [`StepKind::Prefer`]).
pub(super) fn preferred(r: &Bitset, set: &Bitset, share: f64) -> bool {
    let (kept, all) = (r.count(), set.count());
    kept > 0 && all > 0 && kept as f64 >= share * all as f64
}

/// A small on-stack buffer for formatting numbers without allocating.
struct StackBuf {
    buf: [u8; 64],
    len: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Calls `f` with an argument as text (`String.valueOf` of the Java value: strings as is,
/// `null`, `true`/`false`, numbers as JSON prints them, objects and arrays as JSON).
pub(crate) fn with_arg_text<R>(v: &Value, f: impl FnOnce(&str) -> R) -> R {
    match v {
        Value::String(s) => f(s),
        Value::Null => f("null"),
        Value::Bool(true) => f("true"),
        Value::Bool(false) => f("false"),
        Value::Number(n) => {
            let mut b = StackBuf {
                buf: [0; 64],
                len: 0,
            };
            if write!(b, "{n}").is_ok() {
                f(std::str::from_utf8(&b.buf[..b.len]).unwrap_or(""))
            } else {
                f(&n.to_string())
            }
        }
        other => f(&other.to_string()),
    }
}

impl CompiledStep {
    /// The per-call part of the *when*.
    #[inline]
    pub(crate) fn when_matches(&self, inv: &Invocation) -> bool {
        self.dyn_when.iter().all(|(k, pair)| match k {
            DynKey::Method => pair.is_match(Some(&inv.method), true),
            DynKey::Argument(i) => match inv.arguments.get(*i) {
                None => false,
                Some(v) => with_arg_text(v, |s| pair.is_match(Some(s), true)),
            },
            DynKey::Attachment(a) => pair.is_match(inv.attachment(a), true),
        })
    }

    /// The step applied to a set (the uncached semantics). Returns the new set, or the reason
    /// it became empty. `pick` chooses among weighted destinations.
    pub(crate) fn apply(
        &self,
        set: &Bitset,
        pick: &mut dyn FnMut(u64) -> u64,
    ) -> Result<Option<Bitset>, &str> {
        match &self.kind {
            StepKind::Block => Err(&self.block_reason),
            StepKind::Keep(t) => {
                let r = set.and(t);
                if !r.is_empty() {
                    Ok(Some(r))
                } else if self.force {
                    Err(&self.force_reason)
                } else {
                    Ok(None)
                }
            }
            StepKind::Prefer(t, share) => {
                let r = set.and(t);
                Ok(preferred(&r, set, *share).then_some(r))
            }
            StepKind::Multi(dests) => {
                if dests.is_empty() {
                    return Err(&self.block_reason);
                }
                let cands: Vec<(Bitset, u32)> = dests
                    .iter()
                    .map(|(d, w)| (set.and(d), *w))
                    .filter(|(r, _)| !r.is_empty())
                    .collect();
                match cands.len() {
                    0 if self.force => Err(&self.force_reason),
                    0 => Ok(None),
                    1 => Ok(cands.into_iter().next().map(|c| c.0)),
                    _ => {
                        let total: u64 = cands.iter().map(|c| c.1 as u64).sum();
                        let mut r = pick(total);
                        for (s, w) in cands {
                            if r < w as u64 {
                                return Ok(Some(s));
                            }
                            r -= w as u64;
                        }
                        unreachable!("r < total")
                    }
                }
            }
        }
    }
}
