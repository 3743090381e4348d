//! [`DecodeError`], the decoder's error.

use std::fmt;

/// Why the bytes are not a Hessian value (or not within [`Limits`](crate::Limits)), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    what: String,
    offset: usize,
}

impl DecodeError {
    pub(super) fn new(what: impl Into<String>, offset: usize) -> Self {
        DecodeError {
            what: what.into(),
            offset,
        }
    }

    pub(crate) fn trailing(offset: usize) -> Self {
        DecodeError::new("bytes after the value", offset)
    }

    /// The offset of the byte at fault (the input's length when it ended too soon).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// What is wrong, without the offset.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hessian: {} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for DecodeError {}

pub(super) type Result<T> = std::result::Result<T, DecodeError>;
