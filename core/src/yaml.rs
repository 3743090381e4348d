//! The one way Switchman reads YAML: rules and configurators from a config centre, migration
//! rules, static registry files, cluster configuration.
//!
//! Whoever can write to a shared registry writes the text every consumer parses, so each
//! document is bounded before and while it is read ([`Limits`], defaults in brackets):
//!
//! - **size** ([`MAX_BYTES`], 256 KiB): longer text is refused before parsing;
//! - **depth** ([`MAX_DEPTH`], 64): sequences and mappings nested deeper, aliases expanded;
//! - **nodes** ([`MAX_NODES`], 100,000): scalars, sequences and mappings in the document
//!   *after* alias expansion, so `x: &a [0,0,…]` with `y: [*a,*a,…]` (n×m nodes from n+m
//!   bytes) is refused as soon as the count passes the limit, in milliseconds and with
//!   memory proportional to the limit, not to n×m;
//! - **text** (four times the size limit, 1 MiB): scalar bytes after alias expansion, so an
//!   alias of a long string cannot be repeated into gigabytes either.
//!
//! An error names the input (`what`, e.g. `condition rule demo.Greeter.condition-router`)
//! and, when a limit ran out, which one ([`YamlError::limit`]).
//!
//! Parsing is [serde-saphyr](https://docs.rs/serde-saphyr) (pure Rust, no `unsafe` in
//! parsing), configured to read scalars as YAML 1.2's core schema, as serde_yaml did: only
//! `true`/`false` are booleans (callers that want YAML 1.1's `yes`/`on` read them from
//! strings), `010` and `1_000` stay strings, `.inf`/`.nan` are strings, duplicate keys are
//! errors, `<<` merge keys are merged (as SnakeYAML, and so Dubbo, does) and tags are ignored.
//! [`Value`] is the untyped document tree for callers that inspect YAML by hand.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_saphyr::budget::BudgetBreach;

mod value;
pub use value::{Mapping, Number, Value};

/// Default [`Limits::max_bytes`]: 256 KiB.
pub const MAX_BYTES: usize = 256 * 1024;
/// Default [`Limits::max_depth`].
pub const MAX_DEPTH: usize = 64;
/// Default [`Limits::max_nodes`].
pub const MAX_NODES: usize = 100_000;

/// Bounds on one YAML document. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest text accepted, in bytes (checked before parsing).
    pub max_bytes: usize,
    /// Deepest nesting of sequences and mappings, aliases expanded.
    pub max_depth: usize,
    /// Most nodes (scalars, sequences, mappings), each node an alias repeats counted again.
    pub max_nodes: usize,
}

impl Limits {
    /// [`MAX_BYTES`], [`MAX_DEPTH`], [`MAX_NODES`]: for anything a registry or config centre
    /// serves.
    pub const DEFAULT: Limits = Limits {
        max_bytes: MAX_BYTES,
        max_depth: MAX_DEPTH,
        max_nodes: MAX_NODES,
    };

    /// Most scalar bytes after alias expansion: four times [`Limits::max_bytes`].
    pub const fn max_text_bytes(&self) -> usize {
        self.max_bytes.saturating_mul(4)
    }

    fn options(&self) -> serde_saphyr::Options {
        let max_nodes = self.max_nodes.max(1);
        let mut budget = serde_saphyr::Budget::default();
        budget.max_depth = self.max_depth;
        budget.max_nodes = max_nodes;
        // Every node is at most a start and an end event: the node count runs out first,
        // and the error names it.
        budget.max_events = max_nodes.saturating_mul(3).saturating_add(64);
        budget.max_aliases = max_nodes;
        budget.max_anchors = max_nodes;
        budget.max_merge_keys = max_nodes;
        budget.max_total_scalar_bytes = self.max_text_bytes();
        // An anchor inside an anchor is recorded once for each: bounded like the document.
        budget.max_recorded_anchor_events = max_nodes.saturating_mul(2);
        budget.max_recorded_anchor_bytes = self.max_text_bytes();
        // The node count bounds what aliases cost; the ratio heuristic would only refuse
        // documents that repeat one anchor often and cheaply (`metadata: *common`).
        budget.enforce_alias_anchor_ratio = false;
        let mut options = serde_saphyr::Options::default();
        options.budget = Some(budget);
        options.alias_limits.max_total_replayed_events = max_nodes.saturating_mul(2);
        options.alias_limits.max_replay_stack_depth = self.max_depth;
        options.strict_booleans = true;
        options.leading_zero_numbers_as_strings = true;
        options.underscored_numbers_as_strings = true;
        options.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::AsString;
        options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
        options.merge_keys = serde_saphyr::MergeKeyPolicy::Merge;
        options.with_snippet = false;
        options
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Which of the [`Limits`] a document ran over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_bytes`].
    Bytes,
    /// [`Limits::max_depth`].
    Depth,
    /// [`Limits::max_nodes`].
    Nodes,
    /// [`Limits::max_text_bytes`].
    Text,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Bytes => "size",
            Limit::Depth => "depth",
            Limit::Nodes => "node",
            Limit::Text => "text",
        })
    }
}

/// A YAML document that was refused: not YAML, not the shape asked for, or over a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    what: String,
    limit: Option<Limit>,
    message: String,
    line: Option<usize>,
    column: Option<usize>,
}

impl YamlError {
    /// What was being read (the `what` given to [`from_str`]).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The limit that ran out, if that is why the document was refused.
    pub fn limit(&self) -> Option<Limit> {
        self.limit
    }

    /// What was wrong, without [`YamlError::what`] and the position.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// [`YamlError::message`] and the position: the error without [`YamlError::what`], for
    /// callers whose own message already names the input.
    pub fn detail(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{} (line {l}, column {c})", self.message),
            (Some(l), None) => format!("{} (line {l})", self.message),
            _ => self.message.clone(),
        }
    }

    /// 1-based line of the problem, when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// 1-based column of the problem, when known.
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    fn new(what: &str, limit: Option<Limit>, message: String) -> Self {
        YamlError {
            what: what.to_string(),
            limit,
            message,
            line: None,
            column: None,
        }
    }

    fn from_saphyr(what: &str, limits: &Limits, err: &serde_saphyr::Error) -> Self {
        use serde_saphyr::Error as E;
        let mut inner = err;
        while let E::WithSnippet { error, .. } | E::AliasError { error, .. } = inner {
            inner = error;
        }
        let nodes = || {
            (
                Some(Limit::Nodes),
                format!(
                    "over the YAML node limit: more than {} nodes with aliases expanded",
                    limits.max_nodes
                ),
            )
        };
        let depth = || {
            (
                Some(Limit::Depth),
                format!(
                    "over the YAML depth limit: nested deeper than {} with aliases expanded",
                    limits.max_depth
                ),
            )
        };
        let text = || {
            (
                Some(Limit::Text),
                format!(
                    "over the YAML text limit: more than {} bytes of scalars with aliases expanded",
                    limits.max_text_bytes()
                ),
            )
        };
        let (limit, message) = match inner {
            E::Budget { breach, .. } => match breach {
                BudgetBreach::Depth { .. } => depth(),
                BudgetBreach::ScalarBytes { .. } | BudgetBreach::RecordedAnchorBytes { .. } => {
                    text()
                }
                BudgetBreach::Nodes { .. }
                | BudgetBreach::Events { .. }
                | BudgetBreach::Aliases { .. }
                | BudgetBreach::Anchors { .. }
                | BudgetBreach::MergeKeys { .. }
                | BudgetBreach::RecordedAnchorEvents { .. }
                | BudgetBreach::AliasAnchorRatio { .. } => nodes(),
                _ => (None, plain_message(inner)),
            },
            E::AliasReplayLimitExceeded { .. }
            | E::AliasExpansionLimitExceeded { .. }
            | E::AliasReplayCounterOverflow { .. } => nodes(),
            E::AliasReplayStackDepthExceeded { .. } => depth(),
            _ => (None, plain_message(inner)),
        };
        let mut e = YamlError::new(what, limit, message);
        if let Some(loc) = err.location().filter(|l| l.line() > 0) {
            e.line = usize::try_from(loc.line()).ok();
            e.column = usize::try_from(loc.column()).ok().filter(|c| *c > 0);
        }
        e
    }
}

/// The error's own words in serde-saphyr's user-facing wording, without the location (we add
/// ours) and without control characters (the text can quote hostile input), at most 300 bytes.
fn plain_message(err: &serde_saphyr::Error) -> String {
    use serde_saphyr::MessageFormatter;
    let words = serde_saphyr::UserMessageFormatter.format_message(err);
    let mut out: String = words
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > 300 {
        let mut cut = 300;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.detail())
    }
}

impl std::error::Error for YamlError {}

impl From<YamlError> for crate::Error {
    fn from(e: YamlError) -> Self {
        crate::Error::bad_config(e.to_string())
    }
}

/// Reads one YAML document into `T` within [`Limits::DEFAULT`]. `what` names the input in
/// errors (`"condition rule demo.Greeter.condition-router"`, a file path, ...).
pub fn from_str<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, YamlError> {
    from_str_with(text, what, &Limits::DEFAULT)
}

/// [`from_str`] with other limits.
pub fn from_str_with<T: DeserializeOwned>(
    text: &str,
    what: &str,
    limits: &Limits,
) -> Result<T, YamlError> {
    if text.len() > limits.max_bytes {
        return Err(YamlError::new(
            what,
            Some(Limit::Bytes),
            format!(
                "over the YAML size limit: {} bytes, the limit is {}",
                text.len(),
                limits.max_bytes
            ),
        ));
    }
    serde_saphyr::from_str_with_options(text, limits.options())
        .map_err(|e| YamlError::from_saphyr(what, limits, &e))
}

/// Reads a value out of a [`Value`] (a record in a list read as [`Value`]s, so that one bad
/// record is reported on its own). Errors are serde's words (`missing field ...`).
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    T::deserialize(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
