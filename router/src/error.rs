use std::fmt;

/// A rule that could not be accepted. The chain that was in force stays in force.
///
/// The message names the rule key, where in the rule text the problem is (line and column,
/// 1-based, when known) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The rule key (`{interface}:{version}:{group}.condition-router`, `{app}.tag-router`, ...).
    pub key: String,
    /// 1-based line in the rule text, when known.
    pub line: Option<usize>,
    /// 1-based column in that line, when known.
    pub column: Option<usize>,
    /// What was wrong.
    pub message: String,
}

impl RuleError {
    pub(crate) fn new(key: &str, message: impl Into<String>) -> Self {
        RuleError {
            key: key.to_string(),
            line: None,
            column: None,
            message: message.into(),
        }
    }

    pub(crate) fn at(mut self, line: Option<usize>, column: Option<usize>) -> Self {
        self.line = line;
        self.column = column;
        self
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {}", self.key)?;
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " (line {l}, column {c})")?,
            (Some(l), None) => write!(f, " (line {l})")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for RuleError {}

impl From<RuleError> for switchman_core::Error {
    fn from(e: RuleError) -> Self {
        switchman_core::Error::bad_config(e.to_string())
    }
}
