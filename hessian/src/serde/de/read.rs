//! The byte reader and the limits' accounting: bytes, lengths checked against the limits
//! and the input left, tags, numbers, strings (borrowed when they can be) and binaries.

use std::borrow::Cow;

use super::{Bin, Deserializer, Text};
use crate::serde::error::{Error, Result};
use crate::tag::*;

impl<'de> Deserializer<'de> {
    // ----- raw bytes ----------------------------------------------------------------------

    #[cold]
    pub(super) fn eof(&self) -> Error {
        Error::at("unexpected end of input", self.input.len())
    }

    #[inline]
    pub(super) fn remaining(&self) -> usize {
        self.input.len().saturating_sub(self.pos)
    }

    #[inline]
    pub(super) fn byte(&mut self) -> Result<u8> {
        let b = *self.input.get(self.pos).ok_or_else(|| self.eof())?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub(super) fn peek(&self) -> Result<u8> {
        self.input.get(self.pos).copied().ok_or_else(|| self.eof())
    }

    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&'de [u8]> {
        let input: &'de [u8] = self.input;
        let end = self.pos.checked_add(n).filter(|&e| e <= input.len());
        let end = end.ok_or_else(|| self.eof())?;
        let s = &input[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    #[inline]
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    #[inline]
    pub(super) fn u16(&mut self) -> Result<usize> {
        Ok(usize::from(u16::from_be_bytes(self.array::<2>()?)))
    }

    // ----- accounting ---------------------------------------------------------------------

    #[inline]
    pub(super) fn charge(&mut self, nodes: usize, bytes: usize, at: usize) -> Result<()> {
        self.nodes = self.nodes.saturating_add(nodes);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > self.limits.max_nodes || self.bytes > self.limits.max_bytes {
            return Err(self.over_budget(at));
        }
        Ok(())
    }

    #[cold]
    fn over_budget(&self, at: usize) -> Error {
        if self.nodes > self.limits.max_nodes {
            Error::at(
                format!("more than {} values (max_nodes)", self.limits.max_nodes),
                at,
            )
        } else {
            Error::at(
                format!(
                    "more than {} bytes of text and binary (max_bytes)",
                    self.limits.max_bytes
                ),
                at,
            )
        }
    }

    #[inline]
    pub(super) fn check_len(&self, len: usize, available: usize, at: usize) -> Result<()> {
        if len > self.limits.max_len || len > available {
            return Err(self.too_long(len, available, at));
        }
        Ok(())
    }

    #[cold]
    fn too_long(&self, len: usize, available: usize, at: usize) -> Error {
        if len > self.limits.max_len {
            Error::at(
                format!(
                    "length {len} is over the limit {} (max_len)",
                    self.limits.max_len
                ),
                at,
            )
        } else {
            Error::at(
                format!("length {len} is more than the {available} bytes left"),
                at,
            )
        }
    }

    // ----- tags, numbers, text ------------------------------------------------------------

    /// The tag of the next value (class definitions before it read), counted as one value.
    #[inline]
    pub(super) fn value_tag(&mut self) -> Result<(u8, usize)> {
        loop {
            let at = self.pos;
            let tag = self.byte()?;
            if tag == BC_CLASS_DEF {
                self.class_def(at)?;
                continue;
            }
            self.charge(1, 0, at)?;
            return Ok((tag, at));
        }
    }

    #[inline]
    pub(super) fn int_after(&mut self, tag: u8, at: usize) -> Result<i32> {
        match tag {
            0x80..=0xbf => Ok(i32::from(tag) - i32::from(BC_INT_ZERO)),
            0xc0..=0xcf => {
                let b = self.byte()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_BYTE_ZERO)) << 8) + i32::from(b))
            }
            0xd0..=0xd7 => {
                let [b1, b2] = self.array::<2>()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_SHORT_ZERO)) << 16)
                    + (i32::from(b1) << 8)
                    + i32::from(b2))
            }
            BC_INT => Ok(i32::from_be_bytes(self.array::<4>()?)),
            other => Err(Error::at(
                format!("expected an int, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    #[inline]
    pub(super) fn read_int(&mut self) -> Result<i32> {
        let at = self.pos;
        let tag = self.byte()?;
        self.int_after(tag, at)
    }

    /// A length: an int, not negative, within `max_len` and the input left (each element
    /// takes at least a byte).
    #[inline]
    pub(super) fn read_len(&mut self) -> Result<usize> {
        let at = self.pos;
        let n = self.read_int()?;
        let n = usize::try_from(n).map_err(|_| Error::at("negative length", at))?;
        self.check_len(n, self.remaining(), at)?;
        Ok(n)
    }

    #[inline]
    pub(super) fn long_after(&mut self, tag: u8) -> Result<i64> {
        Ok(match tag {
            0xd8..=0xef => i64::from(tag) - i64::from(BC_LONG_ZERO),
            0xf0..=0xff => {
                let b = self.byte()?;
                ((i64::from(tag) - i64::from(BC_LONG_BYTE_ZERO)) << 8) + i64::from(b)
            }
            0x38..=0x3f => {
                let [b1, b2] = self.array::<2>()?;
                ((i64::from(tag) - i64::from(BC_LONG_SHORT_ZERO)) << 16)
                    + (i64::from(b1) << 8)
                    + i64::from(b2)
            }
            BC_LONG_INT => i64::from(i32::from_be_bytes(self.array::<4>()?)),
            _ => i64::from_be_bytes(self.array::<8>()?),
        })
    }

    #[inline]
    pub(super) fn double_after(&mut self, tag: u8) -> Result<f64> {
        Ok(match tag {
            BC_DOUBLE_ZERO => 0.0,
            BC_DOUBLE_ONE => 1.0,
            BC_DOUBLE_BYTE => f64::from(self.byte()? as i8),
            BC_DOUBLE_SHORT => f64::from(i16::from_be_bytes(self.array::<2>()?)),
            BC_DOUBLE_MILL => 0.001 * f64::from(i32::from_be_bytes(self.array::<4>()?)),
            _ => f64::from_bits(u64::from_be_bytes(self.array::<8>()?)),
        })
    }

    #[inline]
    pub(super) fn date_after(&mut self, tag: u8) -> Result<i64> {
        if tag == BC_DATE {
            Ok(i64::from_be_bytes(self.array::<8>()?))
        } else {
            Ok(i64::from(i32::from_be_bytes(self.array::<4>()?)) * 60_000)
        }
    }

    /// A string chunk header after its tag: (UTF-16 units, whether it is the last chunk).
    #[inline]
    pub(super) fn string_chunk(&mut self, tag: u8, at: usize) -> Result<(usize, bool)> {
        Ok(match tag {
            0x00..=0x1f => (usize::from(tag - BC_STRING_DIRECT), true),
            0x30..=0x33 => {
                let b = self.byte()?;
                (
                    (usize::from(tag - BC_STRING_SHORT) << 8) + usize::from(b),
                    true,
                )
            }
            BC_STRING_CHUNK => (self.u16()?, false),
            BC_STRING => (self.u16()?, true),
            other => {
                return Err(Error::at(
                    format!("expected a string, found tag 0x{other:02x}"),
                    at,
                ));
            }
        })
    }

    /// A string whose tag was just read: borrowed from the input when it is one chunk of
    /// plain UTF-8 (no surrogates), else decoded.
    #[inline]
    pub(super) fn string_after(&mut self, tag: u8, at: usize) -> Result<Text<'de>> {
        let (len, last) = self.string_chunk(tag, at)?;
        self.check_len(len, self.remaining(), at)?;
        if last {
            // ASCII, the common case: as many bytes as UTF-16 units.
            let input: &'de [u8] = self.input;
            if let Some(bytes) = input.get(self.pos..self.pos + len)
                && bytes.is_ascii()
                && let Ok(s) = std::str::from_utf8(bytes)
            {
                self.pos += len;
                self.charge(0, len, at)?;
                return Ok(Text::Borrowed(s));
            }
        }
        self.string_rest(len, last, at)
    }

    /// [`Self::string_after`] past its first chunk's header, for text that is not one chunk
    /// of ASCII.
    fn string_rest(&mut self, len: usize, last: bool, at: usize) -> Result<Text<'de>> {
        if last {
            let start = self.pos;
            let input: &'de [u8] = self.input;
            let mut end = start;
            let mut plain = true;
            for _ in 0..len {
                let Some(&b0) = input.get(end) else {
                    plain = false;
                    break;
                };
                let w = match b0 {
                    0x00..=0x7f => 1,
                    0xc0..=0xdf => 2,
                    // 0xed 0xa0..: a surrogate, Java's way of writing non-BMP chars.
                    0xed if input.get(end + 1).is_some_and(|&b| b >= 0xa0) => {
                        plain = false;
                        break;
                    }
                    0xe0..=0xef => 3,
                    _ => {
                        plain = false;
                        break;
                    }
                };
                end += w;
            }
            if plain
                && end <= input.len()
                && let Ok(s) = std::str::from_utf8(&input[start..end])
            {
                self.pos = end;
                self.charge(0, s.len(), at)?;
                return Ok(Text::Borrowed(s));
            }
        }
        let s = self.string_units(len, last, at)?;
        self.charge(0, s.len(), at)?;
        Ok(Text::Owned(s))
    }

    /// A string decoded unit by unit from its first chunk's body on.
    pub(super) fn string_units(
        &mut self,
        mut len: usize,
        mut last: bool,
        at: usize,
    ) -> Result<String> {
        let mut s = String::new();
        let mut total = 0usize;
        let mut high: Option<(u16, usize)> = None;
        loop {
            total += len;
            self.check_len(total, total - len + self.remaining(), at)?;
            s.reserve(len);
            for _ in 0..len {
                let unit_at = self.pos;
                let unit = self.utf8_unit()?;
                crate::utf16::push_unit(&mut s, &mut high, unit, unit_at)
                    .map_err(|(what, at)| Error::at(what, at))?;
            }
            if last {
                break;
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = self.string_chunk(tag, chunk_at).map_err(|_| {
                Error::at(
                    format!("expected a string chunk, found tag 0x{tag:02x}"),
                    chunk_at,
                )
            })?;
        }
        if let Some((_, h_at)) = high {
            return Err(Error::at("unpaired high surrogate", h_at));
        }
        Ok(s)
    }

    pub(super) fn utf8_unit(&mut self) -> Result<u16> {
        let at = self.pos;
        let b0 = self.byte()?;
        if b0 < 0x80 {
            return Ok(u16::from(b0));
        }
        let cont = |d: &mut Self| -> Result<u16> {
            let p = d.pos;
            let b = d.byte()?;
            if b & 0xc0 == 0x80 {
                Ok(u16::from(b & 0x3f))
            } else {
                Err(Error::at("bad UTF-8 continuation byte", p))
            }
        };
        if b0 & 0xe0 == 0xc0 {
            let b1 = cont(self)?;
            Ok((u16::from(b0 & 0x1f) << 6) | b1)
        } else if b0 & 0xf0 == 0xe0 {
            let b1 = cont(self)?;
            let b2 = cont(self)?;
            Ok((u16::from(b0 & 0x0f) << 12) | (b1 << 6) | b2)
        } else {
            Err(Error::at(format!("bad UTF-8 lead byte 0x{b0:02x}"), at))
        }
    }

    pub(super) fn binary_chunk(&mut self, tag: u8, at: usize) -> Result<(usize, bool)> {
        Ok(match tag {
            0x20..=0x2f => (usize::from(tag - BC_BINARY_DIRECT), true),
            0x34..=0x37 => {
                let b = self.byte()?;
                (
                    (usize::from(tag - BC_BINARY_SHORT) << 8) + usize::from(b),
                    true,
                )
            }
            BC_BINARY_CHUNK => (self.u16()?, false),
            BC_BINARY => (self.u16()?, true),
            other => {
                return Err(Error::at(
                    format!("expected a binary chunk, found tag 0x{other:02x}"),
                    at,
                ));
            }
        })
    }

    pub(super) fn binary_after(&mut self, tag: u8, at: usize) -> Result<Bin<'de>> {
        let (mut len, mut last) = self.binary_chunk(tag, at)?;
        if last {
            self.check_len(len, self.remaining(), at)?;
            let b = self.take(len)?;
            self.charge(0, len, at)?;
            return Ok(Bin::Borrowed(b));
        }
        let mut out = Vec::new();
        loop {
            self.check_len(out.len() + len, out.len() + self.remaining(), at)?;
            let b = self.take(len)?;
            out.extend_from_slice(b);
            if last {
                break;
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = self.binary_chunk(tag, chunk_at)?;
        }
        self.charge(0, out.len(), at)?;
        Ok(Bin::Owned(out))
    }

    /// A class's or field's name: borrowed from the input when it can be.
    pub(super) fn name(&mut self) -> Result<Cow<'de, str>> {
        let at = self.pos;
        let tag = self.byte()?;
        Ok(match self.string_after(tag, at)? {
            Text::Borrowed(s) => Cow::Borrowed(s),
            Text::Owned(s) => Cow::Owned(s),
        })
    }
}
