//! The [`Decoder`] itself and its reading of raw bytes.

use super::error::{DecodeError, Result};
use super::limits::Limits;
use super::tree::{ClassDef, Node};

/// Reads one Hessian 2.0 stream from a byte slice: class definitions, type names and back
/// references are shared by the values read one after another, as in one `Hessian2Input`.
///
/// A back reference to a value already complete gives a copy of it (charged to
/// [`Limits::max_nodes`] and [`Limits::max_bytes`] in full, so chains of references cannot
/// blow up); one to a value still being decoded gives [`Value::Ref`](crate::Value::Ref). After an error the
/// decoder's position and tables are unspecified: stop reading from it.
#[derive(Debug)]
pub struct Decoder<'a> {
    pub(super) input: &'a [u8],
    pub(super) pos: usize,
    pub(super) limits: Limits,
    pub(super) classes: Vec<ClassDef>,
    pub(super) types: Vec<String>,
    pub(super) nodes: Vec<Node>,
    pub(super) produced_nodes: usize,
    pub(super) produced_bytes: usize,
}

impl<'a> Decoder<'a> {
    pub(super) fn remaining(&self) -> usize {
        self.input.len().saturating_sub(self.pos)
    }

    pub(super) fn byte(&mut self) -> Result<u8> {
        match self.input.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(DecodeError::new(
                "unexpected end of input",
                self.input.len(),
            )),
        }
    }

    pub(super) fn peek(&self) -> Result<u8> {
        self.input
            .get(self.pos)
            .copied()
            .ok_or_else(|| DecodeError::new("unexpected end of input", self.input.len()))
    }

    pub(super) fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.pos.checked_add(N).filter(|&e| e <= self.input.len());
        match end {
            Some(end) => {
                let mut out = [0u8; N];
                out.copy_from_slice(&self.input[self.pos..end]);
                self.pos = end;
                Ok(out)
            }
            None => Err(DecodeError::new(
                "unexpected end of input",
                self.input.len(),
            )),
        }
    }

    pub(super) fn u16(&mut self) -> Result<usize> {
        Ok(usize::from(u16::from_be_bytes(self.bytes::<2>()?)))
    }

    pub(super) fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.bytes::<4>()?))
    }

    pub(super) fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.bytes::<8>()?))
    }
}
