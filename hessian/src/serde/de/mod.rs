//! [`Deserializer`]: Hessian bytes straight into Rust types, bounded by [`Limits`].
//!
//! Back references (`0x51 n`) are read by reading the referenced list, map or object again
//! from its recorded offset: every value of such a replay counts against
//! [`Limits::max_nodes`] and its text against [`Limits::max_bytes`], so refs cannot amplify
//! past the budget; a ref to a value still being read (a cycle) is an error, except a
//! `cause` field that refers to its own object (Java's "no cause" in a `Throwable`), which
//! reads as `null`.
//!
//! Here: the [`Deserializer`] and its state. `read`: bytes, numbers, strings and binaries,
//! and the limits' accounting; `refs`: containers' depth and ref numbers, and ref replay;
//! `any`: `deserialize_any` (the JSON-like mapping and the raw form), lists and maps;
//! `objects`: class definitions, type names and objects; `dispatch`: the `deserialize_*`
//! methods.

mod any;
mod dispatch;
mod objects;
mod read;
mod refs;

use std::borrow::Cow;

use ::serde::de::Deserialize;

use super::error::Result;
use crate::Limits;
use crate::bignum;

/// The most 32-bit word operations one deserializer spends rendering `BigInteger`s as
/// decimal (in `deserialize_any`), as `to_json` does.
const BIGNUM_WORK: u64 = 16 * (bignum::MAX_WORDS as u64) * (bignum::MAX_WORDS as u64);

/// Reads typed values from one Hessian 2.0 stream in a byte slice: class definitions, type
/// names and back references are shared by the values read one after another, as in one
/// `Hessian2Input`. [`Deserializer::read`] reads the next value; [`Deserializer::position`]
/// tells how many bytes were consumed.
///
/// It is also a `serde::Deserializer` (`T::deserialize(&mut de)`). After an error, stop
/// reading from it.
#[derive(Debug)]
pub struct Deserializer<'de> {
    input: &'de [u8],
    pos: usize,
    limits: Limits,
    depth: usize,
    nodes: usize,
    bytes: usize,
    classes: Vec<Class<'de>>,
    /// Type names seen (only their number matters: type refs are checked against it).
    types: usize,
    /// Lists, maps and objects by ref number: (offset of their tag, complete).
    refs: Vec<(usize, bool)>,
    /// Nonzero while reading a back reference again: nothing new is numbered or defined.
    replaying: usize,
    bignum_work: u64,
}

/// A class definition; its names are borrowed from the input unless they had to be decoded.
#[derive(Debug)]
struct Class<'de> {
    name: Cow<'de, str>,
    fields: Vec<Cow<'de, str>>,
    /// The index of a field named `cause` (a Throwable's, which may refer to its object).
    cause: Option<usize>,
    /// The last Rust field list this class was compared with (its address and length) and
    /// whether it names the same fields in the same order: such a struct is read by position.
    positional: Option<((usize, usize), bool)>,
}

/// How `deserialize_any` presents values: `Json` as this crate's JSON mapping does (what a
/// `serde_json::Value` or an untagged enum sees), `Raw` for typed reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Json,
    Raw,
}

enum Text<'de> {
    Borrowed(&'de str),
    Owned(String),
}

enum Bin<'de> {
    Borrowed(&'de [u8]),
    Owned(Vec<u8>),
}

impl<'de> Deserializer<'de> {
    /// A deserializer with the limits for its input's size ([`Limits::for_input`]).
    pub fn new(input: &'de [u8]) -> Self {
        Self::with_limits(input, Limits::for_input(input.len()))
    }

    /// A deserializer with the given limits.
    pub fn with_limits(input: &'de [u8], limits: Limits) -> Self {
        Deserializer {
            input,
            pos: 0,
            limits,
            depth: 0,
            nodes: 0,
            bytes: 0,
            classes: Vec::new(),
            types: 0,
            refs: Vec::new(),
            replaying: 0,
            bignum_work: BIGNUM_WORK,
        }
    }

    /// Reads the next value as a `T`.
    pub fn read<T: Deserialize<'de>>(&mut self) -> Result<T> {
        T::deserialize(&mut *self).map_err(|e| e.or_at(self.pos))
    }

    /// The offset of the next byte to read: the bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub fn is_at_end(&self) -> bool {
        self.pos >= self.input.len()
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}
