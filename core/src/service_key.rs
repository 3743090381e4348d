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

    /// Whether this key names a set of services rather than one: `*` for the interface,
    /// group or version, or a comma in the group or version (a list). A registry that names
    /// services by their key (Nacos) has to list the services and pick the ones this key
    /// [accepts](ServiceKey::accepts) instead of looking the name up.
    pub fn is_pattern(&self) -> bool {
        [&self.interface, &self.group, &self.version]
            .iter()
            .any(|p| p.as_ref() == "*")
            || self.group.contains(',')
            || self.version.contains(',')
    }

    /// The provider key a Nacos service name of Dubbo's form stands for:
    /// `providers:{interface}:{version}:{group}`, exactly four `:`-separated parts, category
    /// `providers`, a non-empty interface (as Dubbo's `NacosRegistry.isConformRules` and
    /// `NacosServiceName`). `None` for any other name (a consumer, a Spring Cloud service,
    /// an application).
    pub fn from_nacos_service_name(name: &str) -> Option<ServiceKey> {
        let mut parts = name.split(':');
        let (category, interface, version, group) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || category != "providers" || interface.is_empty() {
            return None;
        }
        Some(ServiceKey::with(interface, group, version))
    }

    /// Whether `other` (a provider's key) is accepted by this (a consumer's) key, with the rules
    /// of Dubbo's `UrlUtils.isMatch` (the interface-level registry's consumer/provider match):
    /// `*` matches anything; a consumer group may be a comma list matching any of its
    /// (trimmed) entries, never an empty provider group; a version is one value compared
    /// as is (`1.0.0,2.0.0` is not a list and accepts no provider unless one registered that
    /// very string); an empty consumer group or version matches only an empty provider one.
    pub fn accepts(&self, other: &ServiceKey) -> bool {
        let group_ok = match &*self.group {
            "*" => true,
            want if want == &*other.group => true,
            want if want.contains(',') => {
                !other.group.is_empty() && want.split(',').any(|w| w.trim() == &*other.group)
            }
            _ => false,
        };
        let version_ok = &*self.version == "*" || self.version == other.version;
        (self.interface.as_ref() == "*" || self.interface == other.interface)
            && group_ok
            && version_ok
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

    #[test]
    fn patterns_and_nacos_names() {
        for (g, v, pattern) in [
            ("", "", false),
            ("g1", "1.0", false),
            ("*", "", true),
            ("", "*", true),
            ("g1,g2", "", true),
            ("g1,", "", true),
            ("", "1.0,2.0", true),
        ] {
            assert_eq!(
                ServiceKey::with("com.foo.Bar", g, v).is_pattern(),
                pattern,
                "group {g:?} version {v:?}"
            );
        }
        assert!(ServiceKey::new("*").is_pattern());
        for k in [
            ServiceKey::with("com.foo.Bar", "g1", "1.0.0"),
            ServiceKey::new("com.foo.Bar"),
            ServiceKey::with("com.foo.Bar", "g,h", ""),
        ] {
            assert_eq!(
                ServiceKey::from_nacos_service_name(&k.nacos_service_name()),
                Some(k.clone()),
                "round trip of {k}"
            );
        }
        for name in [
            "consumers:com.foo.Bar::",
            "providers:com.foo.Bar:1.0",
            "providers:com.foo.Bar:1.0:g:extra",
            "providers::1.0:g",
            "order-service",
            "",
        ] {
            assert_eq!(ServiceKey::from_nacos_service_name(name), None, "{name:?}");
        }
    }

    /// Dubbo's `UrlUtils.isMatch` splits the consumer's group on commas, never its version.
    #[test]
    fn version_lists_are_not_lists_and_group_lists_never_match_an_empty_group() {
        let v1 = ServiceKey::with("com.foo.Bar", "", "1.0.0");
        let v2 = ServiceKey::with("com.foo.Bar", "", "2.0.0");
        let listed = ServiceKey::with("com.foo.Bar", "", "1.0.0,2.0.0");
        assert!(!listed.accepts(&v1) && !listed.accepts(&v2));
        assert!(
            listed.accepts(&ServiceKey::with("com.foo.Bar", "", "1.0.0,2.0.0")),
            "the same string still matches"
        );
        assert!(ServiceKey::with("com.foo.Bar", "", "*").accepts(&v2));
        let groups = ServiceKey::with("com.foo.Bar", "a, b,", "");
        assert!(groups.accepts(&ServiceKey::with("com.foo.Bar", "b", "")));
        assert!(!groups.accepts(&ServiceKey::new("com.foo.Bar")));
    }
}
