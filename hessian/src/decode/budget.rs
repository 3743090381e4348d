//! Accounting against [`Limits`](crate::Limits): values and bytes produced, lengths.

use super::cursor::Decoder;
use super::error::{DecodeError, Result};
use super::tree::Slot;
use crate::value::Value;

impl<'a> Decoder<'a> {
    pub(super) fn charge(&mut self, nodes: usize, bytes: usize, at: usize) -> Result<()> {
        self.produced_nodes = self.produced_nodes.saturating_add(nodes);
        if self.produced_nodes > self.limits.max_nodes {
            return Err(DecodeError::new(
                format!("more than {} values (max_nodes)", self.limits.max_nodes),
                at,
            ));
        }
        self.produced_bytes = self.produced_bytes.saturating_add(bytes);
        if self.produced_bytes > self.limits.max_bytes {
            return Err(DecodeError::new(
                format!(
                    "more than {} bytes of text and binary (max_bytes)",
                    self.limits.max_bytes
                ),
                at,
            ));
        }
        Ok(())
    }

    /// Whether `n` more values fit in [`Limits::max_nodes`](crate::Limits::max_nodes).
    pub(super) fn check_nodes_left(&self, n: usize, at: usize) -> Result<()> {
        if n > self.limits.max_nodes.saturating_sub(self.produced_nodes) {
            return Err(DecodeError::new(
                format!(
                    "{n} elements would be more than {} values (max_nodes)",
                    self.limits.max_nodes
                ),
                at,
            ));
        }
        Ok(())
    }

    pub(super) fn leaf(&mut self, v: Value, at: usize) -> Result<Slot> {
        let bytes = match &v {
            Value::String(s) => s.len(),
            Value::Binary(b) => b.len(),
            _ => 0,
        };
        self.charge(1, bytes, at)?;
        Ok(Slot::Leaf(v))
    }

    pub(super) fn check_len(&self, len: usize, available: usize, at: usize) -> Result<()> {
        if len > self.limits.max_len {
            return Err(DecodeError::new(
                format!(
                    "length {len} is over the limit {} (max_len)",
                    self.limits.max_len
                ),
                at,
            ));
        }
        if len > available {
            return Err(DecodeError::new(
                format!("length {len} is more than the {available} bytes left"),
                at,
            ));
        }
        Ok(())
    }
}
