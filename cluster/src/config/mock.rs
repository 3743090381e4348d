//! `mock`: Dubbo's degrade rule, parsed once (`force:return <json>`, `fail:throw [message]`,
//! ...), and the user fallback that can take its place.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde_json::Value;
use switchman_core::{Error, Invocation};

/// A degrade rule (`mock=...`), parsed once.
#[derive(Clone)]
#[non_exhaustive]
pub enum Mock {
    /// `force:return <json>` / `force:throw [message]`: never call the providers.
    Force(MockAction),
    /// `fail:...` (or a bare `return`/`throw`): used when the call fails with a non-business error.
    Fail(MockAction),
}

/// A user fallback: gets the invocation and the failure that triggered it.
pub type FallbackFn =
    Arc<dyn Fn(&Invocation, Option<&Error>) -> Result<Value, Error> + Send + Sync>;

/// What a mock does.
#[derive(Clone)]
#[non_exhaustive]
pub enum MockAction {
    /// Return this value.
    Return(Value),
    /// Fail with this message (a business error: the caller sees it, nothing retries it).
    Throw(String),
    /// Call a fallback function with the invocation and the error that triggered it.
    Fallback(FallbackFn),
}

impl fmt::Debug for MockAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MockAction::Return(v) => write!(f, "Return({v})"),
            MockAction::Throw(m) => write!(f, "Throw({m:?})"),
            MockAction::Fallback(_) => f.write_str("Fallback(..)"),
        }
    }
}

impl fmt::Debug for Mock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mock::Force(a) => write!(f, "Force({a:?})"),
            Mock::Fail(a) => write!(f, "Fail({a:?})"),
        }
    }
}

/// The value of `return <value>`, as Dubbo's `MockInvoker.parseMockValue` reads it: nothing,
/// `null` and `empty` are null (Dubbo's `empty` is the return type's empty value, which a JSON
/// call does not know); `{...}` and `[...]` must be JSON; a number, `true` or `false` is that
/// JSON value; a quoted text (`"a"` or `'a'`) is the text inside; anything else is the text
/// itself (`return hello` returns "hello", as in Dubbo).
fn return_value(v: &str, text: &str) -> Result<Value, Error> {
    if v.is_empty() || v == "null" || v == "empty" {
        return Ok(Value::Null);
    }
    if v.starts_with(['{', '[']) {
        return serde_json::from_str(v).map_err(|e| {
            Error::bad_config(format!(
                "mock {text:?}: the value after `return` is not JSON: {e}"
            ))
        });
    }
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return Ok(Value::String(inner.to_string()));
        }
    }
    Ok(serde_json::from_str::<Value>(v)
        .ok()
        .filter(|j| j.is_number() || j.is_boolean())
        .unwrap_or_else(|| Value::String(v.to_string())))
}

impl FromStr for Mock {
    type Err = Error;
    /// `force:return {"a":1}`, `fail:return null`, `return []`, `fail:throw`, `throw boom`.
    fn from_str(text: &str) -> Result<Self, Error> {
        let t = text.trim();
        let (force, rest) = if let Some(r) = t.strip_prefix("force:") {
            (true, r.trim())
        } else if let Some(r) = t.strip_prefix("fail:") {
            (false, r.trim())
        } else {
            (false, t)
        };
        let action = if let Some(v) = rest.strip_prefix("return") {
            MockAction::Return(return_value(v.trim(), text)?)
        } else if let Some(m) = rest.strip_prefix("throw") {
            let m = m.trim();
            MockAction::Throw(if m.is_empty() {
                "mocked failure".to_string()
            } else {
                m.to_string()
            })
        } else {
            return Err(Error::bad_config(format!(
                "mock {text:?}: expected `[force:|fail:]return <json>` or `[force:|fail:]throw [message]`"
            )));
        };
        Ok(if force {
            Mock::Force(action)
        } else {
            Mock::Fail(action)
        })
    }
}
