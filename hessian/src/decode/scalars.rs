//! Ints, lengths, strings and binaries after their tags.

use super::cursor::Decoder;
use super::error::{DecodeError, Result};
use crate::tag::*;

impl<'a> Decoder<'a> {
    /// An int whose tag was just read.
    pub(super) fn int_after(&mut self, tag: u8, at: usize) -> Result<i32> {
        match tag {
            0x80..=0xbf => Ok(i32::from(tag) - i32::from(BC_INT_ZERO)),
            0xc0..=0xcf => {
                let b = self.byte()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_BYTE_ZERO)) << 8) + i32::from(b))
            }
            0xd0..=0xd7 => {
                let [b1, b2] = self.bytes::<2>()?;
                Ok(((i32::from(tag) - i32::from(BC_INT_SHORT_ZERO)) << 16)
                    + (i32::from(b1) << 8)
                    + i32::from(b2))
            }
            BC_INT => self.i32(),
            other => Err(DecodeError::new(
                format!("expected an int, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    pub(super) fn read_int(&mut self) -> Result<i32> {
        let at = self.pos;
        let tag = self.byte()?;
        self.int_after(tag, at)
    }

    /// A list length: an int, not negative, within `max_len` and the input left (each element
    /// takes at least one byte).
    pub(super) fn read_len(&mut self) -> Result<usize> {
        let at = self.pos;
        let len = self.read_int()?;
        let len = usize::try_from(len).map_err(|_| DecodeError::new("negative length", at))?;
        self.check_len(len, self.remaining(), at)?;
        Ok(len)
    }

    /// A string whose first tag was just read: its chunks.
    pub(super) fn string_after(&mut self, tag: u8, at: usize) -> Result<String> {
        let (mut len, mut last) = match tag {
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
                return Err(DecodeError::new(
                    format!("expected a string, found tag 0x{other:02x}"),
                    at,
                ));
            }
        };
        let mut s = String::new();
        let mut total = 0usize;
        let mut high: Option<(u16, usize)> = None;
        loop {
            total += len;
            // Each UTF-16 unit takes one to three bytes.
            self.check_len(total, total - len + self.remaining(), at)?;
            s.reserve(len);
            for _ in 0..len {
                let unit_at = self.pos;
                let unit = self.utf8_unit()?;
                crate::utf16::push_unit(&mut s, &mut high, unit, unit_at)
                    .map_err(|(what, at)| DecodeError::new(what, at))?;
            }
            if last {
                break;
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = match tag {
                BC_STRING_CHUNK => (self.u16()?, false),
                BC_STRING => (self.u16()?, true),
                0x00..=0x1f => (usize::from(tag - BC_STRING_DIRECT), true),
                0x30..=0x33 => {
                    let b = self.byte()?;
                    (
                        (usize::from(tag - BC_STRING_SHORT) << 8) + usize::from(b),
                        true,
                    )
                }
                other => {
                    return Err(DecodeError::new(
                        format!("expected a string chunk, found tag 0x{other:02x}"),
                        chunk_at,
                    ));
                }
            };
        }
        if let Some((_, h_at)) = high {
            return Err(DecodeError::new("unpaired high surrogate", h_at));
        }
        Ok(s)
    }

    /// One UTF-16 unit in Hessian's UTF-8: one to three bytes, surrogates encoded on their own.
    fn utf8_unit(&mut self) -> Result<u16> {
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
                Err(DecodeError::new("bad UTF-8 continuation byte", p))
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
            Err(DecodeError::new(
                format!("bad UTF-8 lead byte 0x{b0:02x}"),
                at,
            ))
        }
    }

    /// A binary whose first tag was just read: its chunks.
    pub(super) fn binary_after(&mut self, tag: u8, at: usize) -> Result<Vec<u8>> {
        let (mut len, mut last) = match tag {
            0x20..=0x2f => (usize::from(tag - BC_BINARY_DIRECT), true),
            0x34..=0x37 => {
                let b = self.byte()?;
                (
                    (usize::from(tag - BC_BINARY_SHORT) << 8) + usize::from(b),
                    true,
                )
            }
            BC_BINARY_CHUNK => (self.u16()?, false),
            _ => (self.u16()?, true),
        };
        let mut out = Vec::new();
        loop {
            let total = out.len() + len;
            self.check_len(total, out.len() + self.remaining(), at)?;
            out.extend_from_slice(&self.input[self.pos..self.pos + len]);
            self.pos += len;
            if last {
                return Ok(out);
            }
            let chunk_at = self.pos;
            let tag = self.byte()?;
            (len, last) = match tag {
                BC_BINARY_CHUNK => (self.u16()?, false),
                BC_BINARY => (self.u16()?, true),
                0x20..=0x2f => (usize::from(tag - BC_BINARY_DIRECT), true),
                0x34..=0x37 => {
                    let b = self.byte()?;
                    (
                        (usize::from(tag - BC_BINARY_SHORT) << 8) + usize::from(b),
                        true,
                    )
                }
                other => {
                    return Err(DecodeError::new(
                        format!("expected a binary chunk, found tag 0x{other:02x}"),
                        chunk_at,
                    ));
                }
            };
        }
    }
}
