//! Containers and back references: depth and ref numbering as lists, maps and objects open
//! and close, and refs read by replaying the referenced value from its offset.

use super::Deserializer;
use crate::serde::error::{Error, Result};
use crate::tag::*;

/// A list, map or object entered by [`Deserializer::open`], to give back to
/// [`Deserializer::close`]: its ref number (none while replaying a ref, which numbers nothing).
#[must_use]
pub(super) struct Opened(Option<usize>);

impl<'de> Deserializer<'de> {
    /// Enters a list, map or object whose tag is at `at`: depth, and its ref number.
    #[inline]
    pub(super) fn open(&mut self, at: usize) -> Result<Opened> {
        if self.depth >= self.limits.max_depth {
            return Err(Error::at(
                format!("nested deeper than {} (max_depth)", self.limits.max_depth),
                at,
            ));
        }
        if self.replaying == 0 {
            if self.refs.len() >= self.limits.max_refs {
                return Err(Error::at(
                    format!(
                        "more than {} lists, maps and objects (max_refs)",
                        self.limits.max_refs
                    ),
                    at,
                ));
            }
            if self.refs.capacity() == 0 {
                // Room for the containers of a typical body (one in 8 bytes), at most 16 KiB
                // at first: one allocation instead of a growth from 4.
                self.refs.reserve((self.remaining() / 8).clamp(4, 1024));
            }
            self.refs.push((at, false));
            self.depth += 1;
            return Ok(Opened(Some(self.refs.len() - 1)));
        }
        self.depth += 1;
        Ok(Opened(None))
    }

    /// Leaves a container: it is complete, a ref may now refer to it.
    #[inline]
    pub(super) fn close(&mut self, opened: Opened) {
        self.depth -= 1;
        if let Some(i) = opened.0
            && let Some(r) = self.refs.get_mut(i)
        {
            r.1 = true;
        }
    }

    /// The ref number of the container whose tag is at `at`.
    pub(super) fn ref_number(&self, at: usize) -> Option<usize> {
        self.refs.binary_search_by_key(&at, |r| r.0).ok()
    }

    /// After a `0x51` tag: the offset of the complete value it refers to.
    pub(super) fn ref_target(&mut self, at: usize) -> Result<usize> {
        let n = self.read_int()?;
        let Some(&(target, done)) = usize::try_from(n).ok().and_then(|i| self.refs.get(i)) else {
            return Err(Error::at(
                format!(
                    "ref {n} out of range ({} values to refer to)",
                    self.refs.len()
                ),
                at,
            ));
        };
        if !done {
            return Err(Error::at(
                format!("ref {n} to a value still being read (a cycle)"),
                at,
            ));
        }
        Ok(target)
    }

    /// Reads the value at `target` again with `f`, then goes on after the ref.
    pub(super) fn replay<T>(
        &mut self,
        target: usize,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let back = self.pos;
        self.pos = target;
        self.replaying += 1;
        let r = f(self);
        self.replaying -= 1;
        self.pos = back;
        r
    }

    /// Whether the next bytes are `0x51 n`, a ref to the container at `at`: consumed if so.
    pub(super) fn self_ref(&mut self, at: usize) -> Result<bool> {
        let Some(me) = self.ref_number(at) else {
            return Ok(false);
        };
        if self.peek()? != BC_REF {
            return Ok(false);
        }
        let start = self.pos;
        self.pos += 1;
        let is_me = self.read_int().ok() == i32::try_from(me).ok();
        if is_me {
            self.charge(1, 0, start)?;
        } else {
            self.pos = start;
        }
        Ok(is_me)
    }
}
