//! [`MappingError`], why JSON is not a value of a Java type.

use std::fmt;

/// Why a JSON value cannot be an argument of the Java type asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingError {
    /// Path segments from the innermost out (`[2]`, `.name`).
    path: Vec<String>,
    message: String,
}

impl MappingError {
    pub(super) fn new(message: impl Into<String>) -> Self {
        MappingError {
            path: Vec::new(),
            message: message.into(),
        }
    }

    pub(super) fn at(mut self, segment: String) -> Self {
        self.path.push(segment);
        self
    }

    /// Where in the JSON value the error is, as `$`, `$[1].name`, ...
    pub fn path(&self) -> String {
        let mut p = String::from("$");
        for s in self.path.iter().rev() {
            p.push_str(s);
        }
        p
    }

    /// What is wrong, without the path.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path(), self.message)
        }
    }
}

impl std::error::Error for MappingError {}
