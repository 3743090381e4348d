//! A provider's service definition, as Java Dubbo 3 publishes it in the metadata report: the
//! `FullServiceDefinition` JSON its `MetadataUtils.publishServiceDefinition` stores for every
//! exported interface (ZooKeeper `/dubbo/metadata/{interface}[/{version}][/{group}]/provider/
//! {application}`, the Nacos config `{interface}:{version}:{group}:provider:{application}` in
//! group `dubbo`). Consumers read it to say what a provider has when a call's signature is
//! not among its methods; only the methods' names and Java parameter types are kept.

use serde::Deserialize;
use switchman_core::ServiceKey;

/// The most bytes of a definition read (a Java interface with hundreds of methods and types
/// is tens of kilobytes).
pub const MAX_DEFINITION_BYTES: usize = 1 << 20;
/// The most methods kept from one definition.
pub const MAX_METHODS: usize = 4096;
/// The most parameters kept per method (Java allows 255).
pub const MAX_PARAMETERS: usize = 255;
/// The longest Java type name kept.
const MAX_TYPE_NAME: usize = 1024;

/// One method of a [`ServiceDefinition`]: `add(int,int)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodSignature {
    /// The Java method name.
    pub name: String,
    /// Its Java parameter types as the provider wrote them (`int`, `java.lang.String`,
    /// `java.util.List<java.lang.String>`).
    pub parameter_types: Vec<String>,
}

impl std::fmt::Display for MethodSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.name, self.parameter_types.join(","))
    }
}

/// The methods a provider's interface has, from its published definition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceDefinition {
    /// The interface (`canonicalName`).
    pub interface: String,
    /// Its methods, sorted by name then parameters (Java lists them in no set order).
    pub methods: Vec<MethodSignature>,
}

#[derive(Deserialize)]
struct RawDefinition {
    #[serde(rename = "canonicalName", default)]
    canonical_name: String,
    #[serde(default)]
    methods: Vec<RawMethod>,
}

#[derive(Deserialize)]
struct RawMethod {
    name: String,
    #[serde(rename = "parameterTypes", default)]
    parameter_types: Vec<String>,
}

impl ServiceDefinition {
    /// Parses the definition's JSON, bounded: at most [`MAX_DEFINITION_BYTES`] bytes,
    /// [`MAX_METHODS`] methods of at most [`MAX_PARAMETERS`] parameters, names and types of
    /// at most 1 KiB (serde_json bounds the nesting). Unknown fields are skipped. The error
    /// says what is wrong; `source` names where the bytes came from.
    pub fn parse(bytes: &[u8], source: &str) -> Result<ServiceDefinition, String> {
        if bytes.len() > MAX_DEFINITION_BYTES {
            return Err(format!(
                "the service definition in {source} has {} bytes, over the {MAX_DEFINITION_BYTES} read",
                bytes.len()
            ));
        }
        let raw: RawDefinition = serde_json::from_slice(bytes)
            .map_err(|e| format!("the service definition in {source} is not one: {e}"))?;
        if raw.methods.len() > MAX_METHODS {
            return Err(format!(
                "the service definition in {source} lists {} methods, over the {MAX_METHODS} read",
                raw.methods.len()
            ));
        }
        let long = |s: &str| s.len() > MAX_TYPE_NAME;
        let mut methods = Vec::with_capacity(raw.methods.len());
        for m in raw.methods {
            if m.parameter_types.len() > MAX_PARAMETERS
                || long(&m.name)
                || m.parameter_types.iter().any(|t| long(t))
            {
                return Err(format!(
                    "the service definition in {source} has a method over the bounds \
                     ({MAX_PARAMETERS} parameters, names of {MAX_TYPE_NAME} bytes)"
                ));
            }
            methods.push(MethodSignature {
                name: m.name,
                parameter_types: m.parameter_types,
            });
        }
        methods.sort_by(|a, b| (&a.name, &a.parameter_types).cmp(&(&b.name, &b.parameter_types)));
        methods.dedup();
        Ok(ServiceDefinition {
            interface: raw.canonical_name,
            methods,
        })
    }

    /// The methods named `name`.
    pub fn overloads<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a MethodSignature> {
        self.methods.iter().filter(move |m| m.name == name)
    }

    /// What a message says the provider has instead of a call to `method`: its overloads of
    /// `method` (`add(int,int), add(long,long)`), or, without any, every method's signature.
    pub fn instead_of(&self, method: &str) -> String {
        let same: Vec<String> = self.overloads(method).map(|m| m.to_string()).collect();
        let listed = if same.is_empty() {
            self.methods.iter().map(|m| m.to_string()).collect()
        } else {
            same
        };
        if listed.is_empty() {
            return "no methods".to_string();
        }
        listed.join(", ")
    }
}

/// Where Java Dubbo 3's metadata report keeps the definition `application` published for
/// `service`, under the ZooKeeper root `root` (`/dubbo`): `MetadataIdentifier`'s path, where an
/// empty version or group is left out.
pub fn zookeeper_path(root: &str, service: &ServiceKey, application: &str) -> String {
    let mut path = format!(
        "{}/metadata/{}",
        root.trim_end_matches('/'),
        switchman_core::percent::encode_java(&service.interface)
    );
    for part in [&service.version, &service.group] {
        if !part.is_empty() {
            path.push('/');
            path.push_str(part);
        }
    }
    path.push_str("/provider/");
    path.push_str(application);
    path
}

/// The Nacos config data ids that definition may have (`MetadataIdentifier`'s unique key), in
/// the metadata report's group (`dubbo` by default): Java Dubbo 3.3 writes an unset version or
/// group as empty (`com.foo.Bar::g1:provider:app`, seen from a 3.3 provider); a key where
/// they are left out (`MetadataIdentifier`'s form for absent ones) is the second try.
pub fn nacos_data_ids(service: &ServiceKey, application: &str) -> Vec<String> {
    let full = format!(
        "{}:{}:{}:provider:{application}",
        service.interface, service.version, service.group
    );
    let mut compact = format!("{}:", service.interface);
    for part in [&service.version, &service.group] {
        if !part.is_empty() {
            compact.push_str(part);
            compact.push(':');
        }
    }
    compact.push_str("provider:");
    compact.push_str(application);
    if compact == full {
        vec![full]
    } else {
        vec![full, compact]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA: &str = r#"{"annotations":[],"canonicalName":"io.switchman.peers.DemoService","codeSource":"x.jar","methods":[{"annotations":[],"name":"add","parameterTypes":["int","int"],"parameters":[],"returnType":"int"},{"annotations":[],"name":"count","parameterTypes":["java.util.List<java.lang.String>"],"parameters":[],"returnType":"long"},{"name":"ping","parameterTypes":[],"returnType":"void"}],"parameters":{"side":"provider"},"types":[{"type":"int"}]}"#;

    #[test]
    fn reads_what_java_publishes() {
        let d = ServiceDefinition::parse(JAVA.as_bytes(), "test").unwrap();
        assert_eq!(d.interface, "io.switchman.peers.DemoService");
        let all: Vec<String> = d.methods.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            all,
            [
                "add(int,int)",
                "count(java.util.List<java.lang.String>)",
                "ping()"
            ]
        );
        assert_eq!(d.instead_of("add"), "add(int,int)");
        assert_eq!(
            d.instead_of("sub"),
            "add(int,int), count(java.util.List<java.lang.String>), ping()"
        );
    }

    #[test]
    fn refuses_what_is_over_the_bounds_or_not_a_definition() {
        let big = vec![b' '; MAX_DEFINITION_BYTES + 1];
        assert!(
            ServiceDefinition::parse(&big, "zk")
                .unwrap_err()
                .contains("over the")
        );
        assert!(
            ServiceDefinition::parse(b"[1,2]", "zk")
                .unwrap_err()
                .contains("is not one")
        );
        let many = format!(
            r#"{{"methods":[{}]}}"#,
            vec![r#"{"name":"m","parameterTypes":[]}"#; MAX_METHODS + 1].join(",")
        );
        assert!(
            ServiceDefinition::parse(many.as_bytes(), "zk")
                .unwrap_err()
                .contains("methods, over")
        );
        let wide = format!(
            r#"{{"methods":[{{"name":"m","parameterTypes":[{}]}}]}}"#,
            vec![r#""int""#; MAX_PARAMETERS + 1].join(",")
        );
        assert!(ServiceDefinition::parse(wide.as_bytes(), "zk").is_err());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(ServiceDefinition::parse(deep.as_bytes(), "zk").is_err());
    }

    #[test]
    fn keys_as_dubbo_writes_them() {
        let plain = ServiceKey::with("com.foo.Bar", "", "");
        assert_eq!(
            zookeeper_path("/dubbo", &plain, "app"),
            "/dubbo/metadata/com.foo.Bar/provider/app"
        );
        assert_eq!(
            nacos_data_ids(&plain, "app"),
            ["com.foo.Bar:::provider:app", "com.foo.Bar:provider:app"]
        );
        assert_eq!(
            nacos_data_ids(&ServiceKey::with("com.foo.Bar", "g1", ""), "app"),
            [
                "com.foo.Bar::g1:provider:app",
                "com.foo.Bar:g1:provider:app"
            ]
        );
        let full = ServiceKey::with("com.foo.Bar", "g1", "1.0.0");
        assert_eq!(
            zookeeper_path("/dubbo/", &full, "app"),
            "/dubbo/metadata/com.foo.Bar/1.0.0/g1/provider/app"
        );
        assert_eq!(
            nacos_data_ids(&full, "app"),
            ["com.foo.Bar:1.0.0:g1:provider:app"]
        );
    }
}
