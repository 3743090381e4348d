//! [`Error`]: what went wrong writing or reading typed values.

use std::fmt;

/// Why a Rust value could not be written as Hessian, or Hessian bytes could not be read into
/// a Rust type (with the byte offset where reading stopped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    what: String,
    offset: Option<usize>,
    /// Internal to the serializer: a struct whose field names are not known yet (see
    /// `ser/shape.rs`); never returned to a caller.
    pub(super) need_shape: bool,
}

impl Error {
    pub(super) fn new(what: impl Into<String>) -> Self {
        Error {
            what: what.into(),
            offset: None,
            need_shape: false,
        }
    }

    pub(super) fn at(what: impl Into<String>, offset: usize) -> Self {
        Error {
            what: what.into(),
            offset: Some(offset),
            need_shape: false,
        }
    }

    pub(super) fn need_shape() -> Self {
        Error {
            what: "a struct's field names are not known yet".into(),
            offset: None,
            need_shape: true,
        }
    }

    /// This error, at `offset` unless it already names one.
    pub(super) fn or_at(mut self, offset: usize) -> Self {
        self.offset.get_or_insert(offset);
        self
    }

    /// The byte offset of the fault, when reading (the input's length when it ended too soon).
    pub fn offset(&self) -> Option<usize> {
        self.offset
    }

    /// What is wrong, without the offset.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(at) => write!(f, "hessian: {} at byte {at}", self.what),
            None => write!(f, "hessian: {}", self.what),
        }
    }
}

impl std::error::Error for Error {}

impl ::serde::ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::new(msg.to_string())
    }
}

impl ::serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::new(msg.to_string())
    }
}

pub(super) type Result<T> = std::result::Result<T, Error>;
