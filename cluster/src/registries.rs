//! One reference over several registries: Dubbo's `ZoneAwareClusterInvoker`.
//!
//! Each registry has its own directory and [`ClusterInvoker`]; a call picks one registry's
//! cluster, as Dubbo does for a reference with several registries:
//!
//! 1. the first registry marked `preferred=true` that has an available provider;
//! 2. else, when the call carries the attachment `registry_zone` (or the reference has a
//!    default zone), the first registry whose `zone` equals it and has an available
//!    provider; with `registry_zone_force=true` and no such registry the call fails with
//!    [`ErrorKind::NoProvider`] naming the zone and the registries (Dubbo throws
//!    `IllegalStateException`);
//! 3. else a weighted random registry (its `weight`, default 100), when it has an available
//!    provider;
//! 4. else the first registry with an available provider; with none, the first registry
//!    (its cluster then fails with its own "no provider" error).
//!
//! "Available" is Dubbo's `cluster.availablecheck` (default `true`): a registry is available
//! when its snapshot has a routable provider. With `availablecheck=false` the checks in steps
//! 1–3 are skipped and the first matching registry is called even if it has none.

use serde_json::Value;
use switchman_core::{Error, ErrorKind, Invocation, Result, Url};

use crate::ClusterInvoker;

/// The invocation attachment naming the registry zone a call prefers.
pub const REGISTRY_ZONE: &str = "registry_zone";
/// The invocation attachment that makes [`REGISTRY_ZONE`] mandatory (`true`).
pub const REGISTRY_ZONE_FORCE: &str = "registry_zone_force";

/// One registry of a multi-registry reference.
#[derive(Debug, Clone)]
pub struct RegistryMember {
    name: String,
    zone: Option<String>,
    preferred: bool,
    weight: u32,
    cluster: ClusterInvoker,
}

impl RegistryMember {
    /// `cluster` over the registry called `name` (for errors and logs), weight 100, no zone.
    pub fn new(name: impl Into<String>, cluster: ClusterInvoker) -> Self {
        RegistryMember {
            name: name.into(),
            zone: None,
            preferred: false,
            weight: 100,
            cluster,
        }
    }

    /// Reads `zone`, `preferred` and `weight` from a registry URL's parameters, as Dubbo's
    /// registry config does (`zookeeper://h:2181?zone=z1&preferred=true&weight=50`). A value
    /// that does not parse is an error naming it.
    pub fn from_registry_url(url: &str, cluster: ClusterInvoker) -> Result<Self> {
        let parsed = Url::parse_registry(url).map_err(|e| {
            let shown = switchman_core::url::redacted_text(url);
            Error::bad_config(format!("registry {shown:?}: {e}"))
        })?;
        let mut m = RegistryMember::new(parsed.redacted(), cluster);
        if let Some(z) = parsed.param("zone").filter(|z| !z.is_empty()) {
            m.zone = Some(z.to_string());
        }
        if let Some(p) = parsed.param("preferred") {
            m.preferred = match p.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" | "" => false,
                _ => {
                    return Err(Error::bad_config(format!(
                        "registry {}: preferred={p:?} is neither true nor false",
                        parsed.redacted()
                    )));
                }
            };
        }
        if let Some(w) = parsed.param("weight") {
            m.weight = w.trim().parse().map_err(|_| {
                Error::bad_config(format!(
                    "registry {}: weight={w:?} is not a non-negative integer",
                    parsed.redacted()
                ))
            })?;
        }
        Ok(m)
    }

    /// The registry's zone.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// Marks the registry preferred.
    pub fn preferred(mut self, preferred: bool) -> Self {
        self.preferred = preferred;
        self
    }

    /// The registry's weight among registries (default 100).
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// The registry's cluster.
    pub fn cluster(&self) -> &ClusterInvoker {
        &self.cluster
    }

    /// The registry's name (its URL, password masked).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn available(&self) -> bool {
        !self.cluster.directory().load().endpoints().is_empty()
    }
}

/// Several registries' clusters behind one call, picked as Dubbo's `ZoneAwareClusterInvoker`
/// does (see the module docs).
#[derive(Debug, Clone)]
pub struct ZoneAwareRegistries {
    members: Vec<RegistryMember>,
    available_check: bool,
    default_zone: Option<String>,
}

impl ZoneAwareRegistries {
    /// Over `members`, in the order given (it decides "first"). At least one is needed.
    pub fn new(members: Vec<RegistryMember>) -> Result<Self> {
        if members.is_empty() {
            return Err(Error::bad_config(
                "a multi-registry reference needs a registry",
            ));
        }
        Ok(ZoneAwareRegistries {
            members,
            available_check: true,
            default_zone: None,
        })
    }

    /// Dubbo's `cluster.availablecheck` (default `true`).
    pub fn available_check(mut self, on: bool) -> Self {
        self.available_check = on;
        self
    }

    /// The zone calls prefer when they carry no `registry_zone` attachment.
    pub fn default_zone(mut self, zone: impl Into<String>) -> Self {
        self.default_zone = Some(zone.into());
        self
    }

    /// The registries, in order.
    pub fn members(&self) -> &[RegistryMember] {
        &self.members
    }

    /// The registry a call goes to (an index into [`ZoneAwareRegistries::members`]).
    pub fn choose(&self, invocation: &Invocation) -> Result<usize> {
        let ok = |m: &RegistryMember| !self.available_check || m.available();
        if let Some(i) = self.members.iter().position(|m| m.preferred && ok(m)) {
            return Ok(i);
        }
        let zone = invocation
            .attachment(REGISTRY_ZONE)
            .filter(|z| !z.is_empty())
            .or(self.default_zone.as_deref());
        if let Some(zone) = zone {
            if let Some(i) = self
                .members
                .iter()
                .position(|m| m.zone.as_deref() == Some(zone) && ok(m))
            {
                return Ok(i);
            }
            let force = invocation
                .attachment(REGISTRY_ZONE_FORCE)
                .is_some_and(|f| f.trim().eq_ignore_ascii_case("true"));
            if force {
                let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
                return Err(Error::new(
                    ErrorKind::NoProvider,
                    format!(
                        "no registry in zone {zone} has an available provider \
                         (registry_zone_force=true); registries: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        let total: u64 = self.members.iter().map(|m| m.weight as u64).sum();
        if total > 0 {
            let mut r = fastrand::u64(..total);
            for (i, m) in self.members.iter().enumerate() {
                if r < m.weight as u64 {
                    if m.available() {
                        return Ok(i);
                    }
                    break;
                }
                r -= m.weight as u64;
            }
        }
        Ok(self.members.iter().position(|m| m.available()).unwrap_or(0))
    }

    /// Makes one call through the chosen registry's cluster.
    pub async fn invoke(&self, invocation: &Invocation) -> Result<Value> {
        let i = self.choose(invocation)?;
        self.members[i].cluster.invoke(invocation).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use switchman_core::{BoxFuture, Instance, Invoker, ServiceKey};
    use switchman_discovery::{DirectoryConfig, RegistryDirectory, Update};

    use super::*;
    use crate::ClusterConfig;

    /// Answers with the instance's port.
    #[derive(Debug)]
    struct Port;
    impl Invoker for Port {
        fn invoke<'a>(
            &'a self,
            t: &'a Instance,
            _i: &'a Invocation,
            _d: Duration,
        ) -> BoxFuture<'a, Result<Value>> {
            let p = t.port();
            Box::pin(async move { Ok(Value::from(p)) })
        }
    }

    /// A registry's cluster with the given ports (none: a registry without providers).
    async fn registry(ports: &[u16]) -> ClusterInvoker {
        let dir = RegistryDirectory::spawn(DirectoryConfig::new(ServiceKey::new("a.B")), None);
        dir.apply(Update::reset(
            ports
                .iter()
                .map(|&p| Instance::builder("10.0.0.1", p).build()),
        ));
        dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= 1)
            .await
            .unwrap();
        ClusterInvoker::new(Arc::new(dir), Arc::new(Port), ClusterConfig::default())
    }

    fn zoned(zone: &str) -> Invocation {
        Invocation::new("m").with_attachment(REGISTRY_ZONE, zone)
    }

    #[tokio::test]
    async fn preferred_then_zone_then_weight_then_first_available() {
        let regs = ZoneAwareRegistries::new(vec![
            RegistryMember::new("a", registry(&[1]).await).zone("z1"),
            RegistryMember::new("b", registry(&[2]).await).zone("z2"),
            RegistryMember::new("c", registry(&[]).await)
                .zone("z3")
                .preferred(true),
        ])
        .unwrap();
        // The preferred registry has no provider: not chosen.
        assert_eq!(regs.invoke(&zoned("z2")).await.unwrap(), Value::from(2));
        assert_eq!(regs.invoke(&zoned("z1")).await.unwrap(), Value::from(1));
        // An unknown zone without force: by weight among the registries with providers.
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.insert(regs.invoke(&zoned("elsewhere")).await.unwrap().to_string());
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        // Forced zone with no registry there: a NoProvider error naming the zone.
        let forced = zoned("z3").with_attachment(REGISTRY_ZONE_FORCE, "TRUE");
        let e = regs.invoke(&forced).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoProvider);
        assert!(
            e.to_string().contains("z3") && e.to_string().contains("c"),
            "{e}"
        );
        // A preferred registry with providers takes every call.
        let regs = ZoneAwareRegistries::new(vec![
            RegistryMember::new("a", registry(&[1]).await).zone("z1"),
            RegistryMember::new("b", registry(&[2]).await).preferred(true),
        ])
        .unwrap();
        for _ in 0..20 {
            assert_eq!(regs.invoke(&zoned("z1")).await.unwrap(), Value::from(2));
        }
    }

    #[tokio::test]
    async fn weights_split_calls_and_availablecheck_off_calls_the_match() {
        let regs = ZoneAwareRegistries::new(vec![
            RegistryMember::new("a", registry(&[1]).await).weight(100),
            RegistryMember::new("b", registry(&[2]).await).weight(300),
        ])
        .unwrap();
        let mut b = 0;
        for _ in 0..2000 {
            if regs.invoke(&Invocation::new("m")).await.unwrap() == 2 {
                b += 1;
            }
        }
        assert!(
            (1350..1650).contains(&b),
            "weight 300 of 400 took {b} of 2000"
        );
        // availablecheck=false: the zone's registry is called though it has no provider.
        let regs = ZoneAwareRegistries::new(vec![
            RegistryMember::new("a", registry(&[1]).await),
            RegistryMember::new("b", registry(&[]).await).zone("z2"),
        ])
        .unwrap()
        .available_check(false);
        let e = regs.invoke(&zoned("z2")).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoProvider);
        // The default zone applies without an attachment.
        let regs = ZoneAwareRegistries::new(vec![
            RegistryMember::new("a", registry(&[1]).await).zone("z1"),
            RegistryMember::new("b", registry(&[2]).await).zone("z2"),
        ])
        .unwrap()
        .default_zone("z2");
        assert_eq!(
            regs.invoke(&Invocation::new("m")).await.unwrap(),
            Value::from(2)
        );
    }

    #[tokio::test]
    async fn registry_urls_give_zone_preferred_and_weight() {
        let m = RegistryMember::from_registry_url(
            "zookeeper://127.0.0.1:2181?zone=z1&preferred=TRUE&weight=7",
            registry(&[1]).await,
        )
        .unwrap();
        assert_eq!(
            (m.zone.as_deref(), m.preferred, m.weight),
            (Some("z1"), true, 7)
        );
        let e = RegistryMember::from_registry_url(
            "zookeeper://127.0.0.1:2181?weight=heavy",
            registry(&[1]).await,
        )
        .unwrap_err();
        assert!(e.to_string().contains("weight"), "{e}");
        assert!(ZoneAwareRegistries::new(vec![]).is_err());
        // A server list, as every registry address may be; an error shows no password.
        let m = RegistryMember::from_registry_url(
            "nacos://127.0.0.1:8848,127.0.0.1:8858?zone=z2",
            registry(&[1]).await,
        )
        .unwrap();
        assert_eq!(m.zone.as_deref(), Some("z2"));
        let e = RegistryMember::from_registry_url(
            "nacos://u:secret@127.0.0.1:8848,?zone=z2",
            registry(&[1]).await,
        )
        .unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
    }
}
