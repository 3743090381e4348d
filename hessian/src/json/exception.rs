//! Java throwables: [`JavaException`], [`java_exception`].

use std::fmt;

use crate::value::{Object, Value};

/// `java.lang.Throwable`'s own fields, left out of its JSON form (but `detailMessage` and
/// `cause`, given as `message` and `cause`).
pub(super) const THROWABLE_FIELDS: [&str; 4] = [
    "detailMessage",
    "cause",
    "stackTrace",
    "suppressedExceptions",
];

pub(super) fn is_throwable(o: &Object) -> bool {
    o.field("detailMessage").is_some()
        || (o.field("stackTrace").is_some() && o.field("cause").is_some())
}

/// A decoded `java.lang.Throwable`: class, message and cause chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaException {
    /// The exception's class.
    pub class: String,
    /// Its `detailMessage`.
    pub message: Option<String>,
    /// Its cause, when it has one other than itself.
    pub cause: Option<Box<JavaException>>,
}

impl fmt::Display for JavaException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => write!(f, "{}: {m}", self.class),
            None => f.write_str(&self.class),
        }
    }
}

impl std::error::Error for JavaException {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

/// A decoded java.lang.Throwable (any object with a `detailMessage` field, or Java's usual throwable shape), with its cause chain (stopping at a self-reference / Ref).
pub fn java_exception(v: &Value) -> Option<JavaException> {
    let Value::Object(o) = v else {
        return None;
    };
    if !is_throwable(o) {
        return None;
    }
    let message = o
        .field("detailMessage")
        .and_then(|m| m.str().map(str::to_owned));
    let cause = match o.field("cause") {
        Some(c) => java_exception(c).map(Box::new),
        None => None,
    };
    // A generic call's exception arrives wrapped in Dubbo's GenericException, which names the
    // original class and message: that is what the caller threw.
    if o.class.ends_with(".rpc.service.GenericException")
        && let Some(class) = o
            .field("exceptionClass")
            .and_then(|c| c.str())
            .filter(|c| !c.is_empty())
    {
        return Some(JavaException {
            class: class.to_string(),
            message: o
                .field("exceptionMessage")
                .and_then(|m| m.str().map(str::to_owned))
                .or(message),
            cause,
        });
    }
    Some(JavaException {
        class: o.class.clone(),
        message,
        cause,
    })
}
