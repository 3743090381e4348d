//! [`Error`]: what went wrong writing or reading typed values.

use std::fmt;

/// Why a Rust value could not be written as Hessian, or Hessian bytes could not be read into
/// a Rust type (with the byte offset where reading stopped).
///
/// One pointer wide (boxed), so that every `Result` the reader and writer pass along stays
/// small on the path where nothing goes wrong.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<Inner>);

#[derive(Clone, PartialEq, Eq)]
struct Inner {
    what: String,
    offset: Option<usize>,
    /// Internal to the serializer: a struct whose field names are not known yet (see
    /// `ser/shape.rs`); never returned to a caller.
    need_shape: bool,
}

impl Error {
    #[cold]
    pub(super) fn new(what: impl Into<String>) -> Self {
        Error(Box::new(Inner {
            what: what.into(),
            offset: None,
            need_shape: false,
        }))
    }

    #[cold]
    pub(super) fn at(what: impl Into<String>, offset: usize) -> Self {
        Error(Box::new(Inner {
            what: what.into(),
            offset: Some(offset),
            need_shape: false,
        }))
    }

    #[cold]
    pub(super) fn need_shape() -> Self {
        Error(Box::new(Inner {
            what: "a struct's field names are not known yet".into(),
            offset: None,
            need_shape: true,
        }))
    }

    /// Whether this is the serializer's internal [`Error::need_shape`].
    pub(super) fn is_need_shape(&self) -> bool {
        self.0.need_shape
    }

    /// This error, at `offset` unless it already names one.
    pub(super) fn or_at(mut self, offset: usize) -> Self {
        self.0.offset.get_or_insert(offset);
        self
    }

    /// The byte offset of the fault, when reading (the input's length when it ended too soon).
    pub fn offset(&self) -> Option<usize> {
        self.0.offset
    }

    /// What is wrong, without the offset.
    pub fn what(&self) -> &str {
        &self.0.what
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("what", &self.0.what)
            .field("offset", &self.0.offset)
            .field("need_shape", &self.0.need_shape)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner { what, offset, .. } = &*self.0;
        match *offset {
            Some(at) => write!(f, "hessian: {what} at byte {at}"),
            None => write!(f, "hessian: {what}"),
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
