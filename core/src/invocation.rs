use serde_json::Value;

/// One call: the method, its arguments as JSON values, and string attachments (Dubbo's
/// implicit parameters: `dubbo.tag`, per-call `timeout`/`retries` overrides, tracing ids...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Invocation {
    /// Method name.
    pub method: String,
    /// Arguments, in order.
    pub arguments: Vec<Value>,
    /// Attachments, in insertion order. Few in practice: a linear scan beats a map.
    pub attachments: Vec<(String, String)>,
    /// Java parameter types of the method (`java.lang.String`, `int`, `com.foo.User`, ...), for
    /// protocols that select the method by signature (dubbo://). Empty: not given; the dubbo://
    /// invoker then calls generically and the provider finds the method by name.
    pub parameter_types: Vec<String>,
}

impl Invocation {
    /// A call of `method` with no arguments.
    pub fn new(method: impl Into<String>) -> Self {
        Invocation {
            method: method.into(),
            ..Default::default()
        }
    }

    /// Sets the arguments.
    pub fn with_args(mut self, args: Vec<Value>) -> Self {
        self.arguments = args;
        self
    }

    /// Sets the Java parameter types (one per argument), e.g. `["int", "int"]`.
    pub fn with_types<S: Into<String>>(mut self, types: impl IntoIterator<Item = S>) -> Self {
        self.parameter_types = types.into_iter().map(Into::into).collect();
        self
    }

    /// Adds (or replaces) an attachment.
    pub fn with_attachment(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_attachment(key, value);
        self
    }

    /// Adds (or replaces) an attachment.
    pub fn set_attachment(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        if let Some(slot) = self.attachments.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.attachments.push((key, value));
        }
    }

    /// An attachment's value.
    pub fn attachment(&self, key: &str) -> Option<&str> {
        self.attachments
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}
