//! Which nodes a subscription watches, and what an event on one of them marks dirty.

use super::state::Dirty;
use crate::migration;
use crate::zookeeper::nodes::ProviderFilter;
use crate::zookeeper::session::Session;
use crate::zookeeper::{DUBBO_ROOT, ZkConfig};

/// Nodes under `/dubbo` that are not interfaces.
pub(super) const NOT_INTERFACES: &[&str] = &["config", "mapping", "metadata"];

/// The consumer application's migration rule node, when there is one to read (an
/// application is named and application-level discovery is on).
pub(super) fn migration_path(cfg: &ZkConfig) -> Option<String> {
    let app = cfg.application.as_deref().filter(|a| !a.contains('/'))?;
    cfg.app_level.then(|| {
        format!(
            "{}/config/{}/{}",
            DUBBO_ROOT,
            migration::MIGRATION_GROUP,
            migration::rule_key(app)
        )
    })
}

pub(super) fn config_root(_session: &Session) -> String {
    // Dubbo's config centre (namespace `dubbo`, group `dubbo`), whatever the registry root.
    format!("{}/config/dubbo", DUBBO_ROOT)
}

pub(super) fn classify(
    path: &str,
    base: &str,
    croot: &str,
    cfg: &ZkConfig,
    filter: &ProviderFilter,
    dirty: &mut Dirty,
) {
    if migration_path(cfg).is_some_and(|p| p == path) {
        dirty.migration = true;
        return;
    }
    if let Some(key) = path.strip_prefix(croot).and_then(|r| r.strip_prefix('/')) {
        dirty.rules.insert(key.to_string());
        return;
    }
    let rest = path
        .strip_prefix(base)
        .filter(|r| r.is_empty() || r.starts_with('/'));
    if let Some(rest) = rest {
        let mut parts = rest.split('/').filter(|s| !s.is_empty());
        let wildcard = filter.key.interface.as_ref() == "*";
        let first = parts.next();
        let category = if wildcard {
            match first {
                Some(f) if NOT_INTERFACES.contains(&f) => Some("-"),
                Some(_) => parts.next(),
                None => None,
            }
        } else {
            first
        };
        match category {
            Some("providers") => dirty.providers = true,
            Some("configurators") => dirty.configurators = true,
            Some("routers") => dirty.routers = true,
            // The interface node itself (or, for `*`, a new interface) appeared or went.
            None => {
                dirty.providers = true;
                dirty.configurators = true;
                dirty.routers = true;
            }
            _ => {}
        }
    }
    if cfg.app_level
        && (path.starts_with("/services")
            || path.starts_with(&format!("{}/mapping", DUBBO_ROOT))
            || path.starts_with(&format!("{}/metadata", DUBBO_ROOT)))
    {
        dirty.app_level = true;
        if dirty.app_paths.len() < 10_000 {
            dirty.app_paths.insert(path.to_string());
        } else {
            dirty.app_full = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::{ServiceKey, Url};

    fn dirty_for(key: ServiceKey, path: &str) -> Dirty {
        let cfg = ZkConfig::from_url(&Url::parse("zookeeper://h:1").unwrap()).unwrap();
        let filter = ProviderFilter {
            key,
            protocols: Vec::new(),
        };
        let base = if filter.key.interface.as_ref() == "*" {
            "/dubbo".to_string()
        } else {
            format!("/dubbo/{}", filter.key.interface)
        };
        let mut d = Dirty::default();
        classify(path, &base, "/dubbo/config/dubbo", &cfg, &filter, &mut d);
        d
    }

    #[test]
    fn the_migration_rule_node_is_watched_for_the_consumer_application() {
        let cfg = |q: &str| {
            ZkConfig::from_url(&Url::parse(&format!("zookeeper://h:1{q}")).unwrap()).unwrap()
        };
        let path = "/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/shop.migration";
        assert_eq!(
            migration_path(&cfg("?application=shop")).as_deref(),
            Some(path)
        );
        assert_eq!(migration_path(&cfg("")), None, "no consumer application");
        assert_eq!(
            migration_path(&cfg("?application=shop&app-level=false")),
            None
        );
        let c = cfg("?application=shop");
        let filter = ProviderFilter {
            key: ServiceKey::new("a.B"),
            protocols: Vec::new(),
        };
        let mut d = Dirty::default();
        classify(
            path,
            "/dubbo/a.B",
            "/dubbo/config/dubbo",
            &c,
            &filter,
            &mut d,
        );
        assert!(d.migration && !d.providers && d.rules.is_empty());
        let mut d = Dirty::default();
        let other = "/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/cart.migration";
        classify(
            other,
            "/dubbo/a.B",
            "/dubbo/config/dubbo",
            &c,
            &filter,
            &mut d,
        );
        assert!(!d.any(), "another consumer's rule");
    }

    #[test]
    fn events_mark_only_their_part_dirty() {
        let k = ServiceKey::new("a.B");
        let d = dirty_for(k.clone(), "/dubbo/a.B/providers/dubbo%3A%2F%2Fx");
        assert!(d.providers && !d.configurators && !d.app_level && d.rules.is_empty());
        let d = dirty_for(k.clone(), "/dubbo/a.B/configurators/override%3A%2F%2Fx");
        assert!(d.configurators && !d.providers);
        let d = dirty_for(k.clone(), "/dubbo/a.B/routers/condition%3A%2F%2Fx");
        assert!(d.routers && !d.providers && !d.configurators);
        let d = dirty_for(k.clone(), "/dubbo/a.B/consumers/c");
        assert!(!d.any(), "consumer nodes change nothing");
        let d = dirty_for(k.clone(), "/dubbo/a.BExtra/providers/p");
        assert!(!d.any(), "another interface sharing the prefix");
        let d = dirty_for(k.clone(), "/dubbo/config/dubbo/a.B::.condition-router");
        assert_eq!(
            d.rules.iter().collect::<Vec<_>>(),
            vec!["a.B::.condition-router"]
        );
        let d = dirty_for(k.clone(), "/services/shop/10.0.0.1:20880");
        assert!(d.app_level && !d.providers);
        let all = ServiceKey::new("*");
        let d = dirty_for(all.clone(), "/dubbo/x.Y/providers/p");
        assert!(d.providers);
        let d = dirty_for(all, "/dubbo/mapping/x.Y");
        assert!(d.app_level && !d.providers, "mapping is not an interface");
    }
}
