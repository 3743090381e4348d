//! The consumer's own description, which rules read.

use switchman_core::Url;

/// The consumer's own description: its URL parameters (`application`, `host`, `dubbo.tag`,
/// ...), which `when` conditions match against and `$name` references read.
#[derive(Debug, Clone)]
pub struct ConsumerInfo {
    /// The consumer URL (`consumer://host/interface?application=..&...`).
    pub url: Url,
}

impl ConsumerInfo {
    /// A consumer at `host` with application name `application`.
    pub fn new(host: &str, application: &str) -> Self {
        let url = Url::new("consumer", host, None, "").with_param("application", application);
        ConsumerInfo { url }
    }

    /// A consumer described by a full URL (`consumer://10.0.0.9/com.foo.Bar?application=shop`).
    pub fn from_url(url: Url) -> Self {
        ConsumerInfo { url }
    }
}
