use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A Dubbo service key: interface, group and version. Empty group or version means "none".
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceKey {
    /// Interface (or plain service name for Spring-Cloud-style services).
    pub interface: Arc<str>,
    /// Group, empty for none.
    #[serde(default)]
    pub group: Arc<str>,
    /// Version, empty for none.
    #[serde(default)]
    pub version: Arc<str>,
}

impl ServiceKey {
    /// A key with no group and no version.
    pub fn new(interface: impl AsRef<str>) -> Self {
        Self::with(interface, "", "")
    }

    /// A key with group and version (empty strings for none).
    pub fn with(
        interface: impl AsRef<str>,
        group: impl AsRef<str>,
        version: impl AsRef<str>,
    ) -> Self {
        ServiceKey {
            interface: Arc::from(interface.as_ref()),
            group: Arc::from(group.as_ref()),
            version: Arc::from(version.as_ref()),
        }
    }

    /// The Nacos service name Dubbo uses: `providers:{interface}:{version}:{group}`.
    pub fn nacos_service_name(&self) -> String {
        format!(
            "providers:{}:{}:{}",
            self.interface, self.version, self.group
        )
    }

    /// Whether `other` (a provider's key) is accepted by this (a consumer's) key, with Dubbo's
    /// rules: `*` matches anything, a comma list matches any of its entries, and an empty
    /// consumer group or version matches only an empty provider one.
    pub fn accepts(&self, other: &ServiceKey) -> bool {
        fn part(want: &str, have: &str) -> bool {
            if want == "*" {
                return true;
            }
            if want.contains(',') {
                return want.split(',').any(|w| w.trim() == have);
            }
            want == have
        }
        (self.interface.as_ref() == "*" || self.interface == other.interface)
            && part(&self.group, &other.group)
            && part(&self.version, &other.version)
    }
}

impl fmt::Display for ServiceKey {
    /// Dubbo's service key string: `group/interface:version`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}/", self.group)?;
        }
        f.write_str(&self.interface)?;
        if !self.version.is_empty() {
            write!(f, ":{}", self.version)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_nacos_name() {
        let k = ServiceKey::with("com.foo.Bar", "g1", "1.0.0");
        assert_eq!(k.to_string(), "g1/com.foo.Bar:1.0.0");
        assert_eq!(k.nacos_service_name(), "providers:com.foo.Bar:1.0.0:g1");
        assert_eq!(
            ServiceKey::new("com.foo.Bar").nacos_service_name(),
            "providers:com.foo.Bar::"
        );
    }

    #[test]
    fn accepts_wildcards_and_lists() {
        let p = ServiceKey::with("com.foo.Bar", "a", "1.0");
        assert!(ServiceKey::with("com.foo.Bar", "*", "*").accepts(&p));
        assert!(ServiceKey::with("com.foo.Bar", "b,a", "1.0").accepts(&p));
        assert!(!ServiceKey::with("com.foo.Bar", "b", "1.0").accepts(&p));
        assert!(!ServiceKey::new("com.foo.Bar").accepts(&p));
    }
}
