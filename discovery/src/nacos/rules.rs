//! Governance rules from the Nacos config centre, as Dubbo keeps them there when Nacos is the
//! registry: group `dubbo`, one data id per rule.
//!
//! | data id | becomes |
//! |---|---|
//! | `{interface}:{version}:{group}.condition-router` | [`Update::Rule`] |
//! | `{app}.condition-router` (consumer and provider applications) | [`Update::Rule`] |
//! | `{app}.tag-router` (provider applications) | [`Update::Rule`] |
//! | `{interface}:{version}:{group}.configurators` | [`Update::Configurators`] |
//! | `{app}.configurators` (consumer application) | [`Update::Configurators`] |
//!
//! Blank parts of the service key stay empty, as in Dubbo's colon-separated key
//! (`com.foo.Bar::`). Configurator text is parsed here, once, by
//! [`override_parse::from_yaml`](crate::override_parse::from_yaml); a text that does not parse is
//! logged and nothing is sent, so the directory keeps the previous rules of that data id.
//!
//! The consumer's migration rule (`{app}.migration`, group `DUBBO_SERVICEDISCOVERY_MIGRATION`)
//! is not a router or configurator rule: it decides which provider list is published, so the
//! application-level side reads it (`app.rs`, `crate::migration`).

use std::collections::BTreeMap;

use switchman_core::ServiceKey;
use tracing::{info, warn};

use crate::Update;

/// What kind of rule a data id holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleKind {
    /// `.condition-router` or `.tag-router`: sent as text for the router chain.
    Router,
    /// `.configurators`: parsed into override rules.
    Configurators,
}

/// Dubbo's colon-separated service key: `{interface}:{version}:{group}`.
pub(crate) fn colon_key(key: &ServiceKey) -> String {
    format!("{}:{}:{}", key.interface, key.version, key.group)
}

/// The data ids watched for a service with consumer application `consumer_app`.
pub(crate) fn service_data_ids(key: &ServiceKey, consumer_app: Option<&str>) -> Vec<String> {
    let k = colon_key(key);
    let mut ids = vec![
        format!("{k}.condition-router"),
        format!("{k}.configurators"),
        format!("{k}.affinity-router"),
    ];
    if let Some(app) = consumer_app.filter(|a| !a.is_empty()) {
        ids.push(format!("{app}.condition-router"));
        ids.push(format!("{app}.configurators"));
    }
    ids
}

/// The data ids watched for a provider application seen in the instance list.
pub(crate) fn provider_app_data_ids(app: &str) -> [String; 3] {
    [
        format!("{app}.tag-router"),
        format!("{app}.condition-router"),
        format!("{app}.affinity-router"),
    ]
}

/// The kind of rule in `data_id`, `None` for anything else.
pub(crate) fn kind_of(data_id: &str) -> Option<RuleKind> {
    if data_id.ends_with(".condition-router")
        || data_id.ends_with(".tag-router")
        || data_id.ends_with(".affinity-router")
    {
        Some(RuleKind::Router)
    } else if data_id.ends_with(".configurators") {
        Some(RuleKind::Configurators)
    } else {
        None
    }
}

/// Remembers what was sent per data id so repeated reads (listener and poll) send nothing.
#[derive(Debug, Default)]
pub(crate) struct RuleState {
    /// Last content per data id: `None` absent (or never seen).
    last: BTreeMap<String, Option<String>>,
}

impl RuleState {
    /// Starts tracking `data_id`; returns whether it is new.
    pub(crate) fn track(&mut self, data_id: &str) -> bool {
        if self.last.contains_key(data_id) {
            return false;
        }
        self.last.insert(data_id.to_string(), None);
        true
    }

    /// The tracked data ids.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.last.keys().cloned().collect()
    }

    /// The update for `data_id` now holding `content` (`None`: absent), if anything changed
    /// and the content is valid. Blank content counts as absent.
    pub(crate) fn observe(&mut self, data_id: &str, content: Option<String>) -> Option<Update> {
        let content = content.filter(|c| !c.trim().is_empty());
        let kind = kind_of(data_id)?;
        let last = self.last.get(data_id)?;
        if *last == content {
            return None;
        }
        let update = match kind {
            RuleKind::Router => Update::Rule {
                key: data_id.to_string(),
                text: content.clone(),
            },
            RuleKind::Configurators => {
                let rules = match &content {
                    None => Vec::new(),
                    Some(text) => match crate::override_parse::from_yaml(text, data_id) {
                        Ok(rules) => rules,
                        Err(e) => {
                            warn!(
                                data_id,
                                "configurator rule rejected, the previous rules stay: {e}"
                            );
                            // Remember the bad text so the poll does not log it every round.
                            self.last.insert(data_id.to_string(), content);
                            return None;
                        }
                    },
                };
                Update::Configurators {
                    source: data_id.to_string(),
                    rules,
                }
            }
        };
        info!(
            data_id,
            present = content.is_some(),
            "config-centre rule changed"
        );
        self.last.insert(data_id.to_string(), content);
        Some(update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_ids_follow_dubbo() {
        let key = ServiceKey::with("com.foo.Bar", "g1", "1.0");
        assert_eq!(
            service_data_ids(&key, Some("shop")),
            vec![
                "com.foo.Bar:1.0:g1.condition-router",
                "com.foo.Bar:1.0:g1.configurators",
                "com.foo.Bar:1.0:g1.affinity-router",
                "shop.condition-router",
                "shop.configurators",
            ]
        );
        assert_eq!(
            service_data_ids(&ServiceKey::new("com.foo.Bar"), None),
            vec![
                "com.foo.Bar::.condition-router",
                "com.foo.Bar::.configurators",
                "com.foo.Bar::.affinity-router"
            ]
        );
        assert_eq!(
            provider_app_data_ids("bar-app"),
            [
                "bar-app.tag-router",
                "bar-app.condition-router",
                "bar-app.affinity-router"
            ]
        );
        assert_eq!(kind_of("x.affinity-router"), Some(RuleKind::Router));
        assert_eq!(kind_of("x.tag-router"), Some(RuleKind::Router));
        assert_eq!(kind_of("x.configurators"), Some(RuleKind::Configurators));
        assert_eq!(kind_of("x.properties"), None);
    }

    #[test]
    fn rule_changes_are_sent_once_and_bad_configurators_are_kept_out() {
        let mut s = RuleState::default();
        let id = "com.foo.Bar::.condition-router";
        assert!(s.track(id));
        assert!(!s.track(id));
        assert_eq!(s.observe(id, None), None, "absent and still absent");
        let text = "scope: service\nkey: com.foo.Bar\nconditions:\n  - '=> host != 1.1.1.1'\n";
        assert_eq!(
            s.observe(id, Some(text.into())),
            Some(Update::Rule {
                key: id.into(),
                text: Some(text.into())
            })
        );
        assert_eq!(s.observe(id, Some(text.into())), None, "unchanged");
        assert_eq!(
            s.observe(id, Some("  ".into())),
            Some(Update::Rule {
                key: id.into(),
                text: None
            }),
            "blank content deletes"
        );
        assert_eq!(s.observe("untracked.tag-router", Some("x".into())), None);

        let cid = "com.foo.Bar::.configurators";
        s.track(cid);
        let good = "configVersion: v3.0\nscope: service\nkey: com.foo.Bar\nconfigs:\n  - addresses: [\"10.0.0.1:80\"]\n    side: provider\n    parameters:\n      weight: 7\n";
        match s.observe(cid, Some(good.into())) {
            Some(Update::Configurators { source, rules }) => {
                assert_eq!(source, cid);
                assert_eq!(rules.len(), 1);
                assert_eq!(
                    rules[0].parameters.get("weight").map(String::as_str),
                    Some("7")
                );
            }
            other => panic!("expected configurators, got {other:?}"),
        }
        assert_eq!(
            s.observe(cid, Some("configs: [unclosed".into())),
            None,
            "bad text keeps the old rules"
        );
        match s.observe(cid, None) {
            Some(Update::Configurators { rules, .. }) => assert!(rules.is_empty()),
            other => panic!("expected a clearing update, got {other:?}"),
        }
    }
}
