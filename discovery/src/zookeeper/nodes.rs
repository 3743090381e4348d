//! What ZooKeeper nodes mean: provider children, override children, config-centre keys and the
//! node a provider registers. Pure functions, unit-tested without a server.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use switchman_core::{ErrorKind, Instance, ServiceKey, Url};
use tracing::{debug, warn};

use crate::Configurator;
use crate::override_parse;

/// Provider nodes parsed before, by parent path and node name. A re-list reads every name of
/// a `providers` node again (a 10k-provider service after any one change); with this only the
/// names not seen before are parsed, the others keep their `Arc` (so the change detection of
/// the subscription compares pointers), and a bad node is reported once, not at every change.
#[derive(Debug, Default)]
pub(crate) struct ParsedProviders {
    by_path: HashMap<String, Names>,
}

/// Node name to what it parsed to (`None`: skipped). foldhash, seeded per process: names are
/// written by whoever can write the registry.
type Names = HashMap<String, Option<Arc<Instance>>, foldhash::fast::RandomState>;

impl ParsedProviders {
    /// Every usable provider among `children` of `path`; bad ones are logged (once) and
    /// skipped.
    pub(crate) fn providers(
        &mut self,
        filter: &ProviderFilter,
        path: &str,
        children: Vec<String>,
    ) -> Vec<Arc<Instance>> {
        let mut seen = self.by_path.remove(path).unwrap_or_default();
        let mut now = Names::with_capacity_and_hasher(children.len(), Default::default());
        let mut out = Vec::with_capacity(children.len());
        for name in children {
            let parsed = match seen.remove(&name) {
                Some(parsed) => parsed,
                None => match filter.parse_child(&name) {
                    Ok(found) => found.map(Arc::new),
                    Err(e) => {
                        warn!(path, node = %shorten(&name), "skipping provider node: {e}");
                        None
                    }
                },
            };
            out.extend(parsed.clone());
            now.insert(name, parsed);
        }
        self.by_path.insert(path.to_string(), now);
        out
    }

    /// Forgets the nodes of `path` (it is gone).
    pub(crate) fn forget(&mut self, path: &str) {
        self.by_path.remove(path);
    }

    /// Forgets every path but `paths` (interfaces that went away under a `*` subscription).
    pub(crate) fn keep_only(&mut self, paths: &BTreeSet<String>) {
        self.by_path.retain(|p, _| paths.contains(p));
    }
}

/// Longest child name read (a URL-encoded provider URL); longer ones are skipped.
pub(crate) const MAX_NODE_NAME: usize = 16 * 1024;
/// Largest node payload read (rules, instance JSON, metadata); larger ones are skipped.
pub(crate) const MAX_NODE_DATA: usize = 256 * 1024;

/// The keys Dubbo's URL matching (`UrlUtils.isMatch`) and the directory's protocol filter
/// use on the consumer side.
#[derive(Debug, Clone)]
pub(crate) struct ProviderFilter {
    /// The subscribed key (`*` and comma lists allowed for group and version, `*` for the
    /// interface).
    pub(crate) key: ServiceKey,
    /// Accepted protocols (`protocol=tri,http` on the registry URL); empty: any.
    pub(crate) protocols: Vec<String>,
}

fn category_ok(url: &Url, want: &str) -> bool {
    match url.param("category") {
        None | Some("") => want == "providers",
        Some(c) => c.split(',').any(|c| c.trim() == want || c.trim() == "*"),
    }
}

/// The service key a Dubbo URL names: `interface` (else `service`, else the path), `group`,
/// `version`.
pub(crate) fn url_service_key(url: &Url) -> ServiceKey {
    let interface = url
        .param("interface")
        .or_else(|| url.param("service"))
        .filter(|s| !s.is_empty())
        .unwrap_or(url.path());
    ServiceKey::with(
        interface,
        url.param("group").unwrap_or(""),
        url.param("version").unwrap_or(""),
    )
}

impl ProviderFilter {
    /// One child of a `providers` node: `Ok(None)` when it is not for this consumer (another
    /// group, version, category or protocol; Dubbo's `empty://` placeholder), `Err` when it
    /// cannot be read.
    pub(crate) fn parse_child(&self, name: &str) -> Result<Option<Instance>, String> {
        if name.len() > MAX_NODE_NAME {
            return Err(format!(
                "node name of {} bytes is over the {MAX_NODE_NAME}-byte limit",
                name.len()
            ));
        }
        let url = Url::from_encoded(name).map_err(|e| e.to_string())?;
        self.accept_url(&url)
    }

    /// A provider URL (decoded): `Ok(None)` when it is not for this consumer, `Err` when it
    /// cannot be turned into an instance.
    pub(crate) fn accept_url(&self, url: &Url) -> Result<Option<Instance>, String> {
        let url = url.clone();
        if url.protocol() == "empty" || !category_ok(&url, "providers") {
            return Ok(None);
        }
        let key = url_service_key(&url);
        let interface_ok = self.key.interface.as_ref() == "*"
            || key.interface.as_ref() == "*"
            || key.interface == self.key.interface;
        // Group and version with Dubbo's rules (`*`, comma lists); the interface was checked.
        let mut probe = key;
        probe.interface = self.key.interface.clone();
        if !interface_ok || !self.key.accepts(&probe) {
            return Ok(None);
        }
        if !self.protocols.is_empty() && !self.protocols.iter().any(|p| p == url.protocol()) {
            return Ok(None);
        }
        Instance::from_url(&url)
            .map(Some)
            .map_err(|e| e.message().to_string())
    }

    /// The override rules among the `children` of a `configurators` node, with Dubbo's list
    /// semantics (`empty://` clears every rule; rules of other services are ignored). Bad and
    /// unsupported rules are logged and skipped.
    pub(crate) fn configurators(&self, path: &str, children: &[String]) -> Vec<Configurator> {
        let mut out = Vec::new();
        for name in children {
            if name.len() > MAX_NODE_NAME {
                warn!(path, node = %shorten(name), "skipping override node over the size limit");
                continue;
            }
            let url = match Url::from_encoded(name) {
                Ok(u) => u,
                Err(e) => {
                    warn!(path, node = %shorten(name), "skipping override node: {e}");
                    continue;
                }
            };
            if override_parse::is_clear_marker(&url) {
                out.clear();
                break;
            }
            let key = url_service_key(&url);
            if key.interface.as_ref() != "*" && self.key.interface.as_ref() != "*" {
                let mut probe = key.clone();
                probe.interface = self.key.interface.clone();
                if key.interface != self.key.interface || !self.key.accepts(&probe) {
                    continue;
                }
            }
            match override_parse::from_override_url_all(&url) {
                Ok(rules) => out.extend(rules),
                Err(e) if e.kind() == ErrorKind::Unsupported => {
                    debug!(path, url = %url.redacted(), "override not applied: {e}")
                }
                Err(e) => warn!(path, url = %url.redacted(), "skipping override: {e}"),
            }
        }
        out
    }
}

impl ProviderFilter {
    /// The routing rules among the `children` of a legacy `routers` node (what dubbo-admin
    /// 2.x and `registry.register(URL.valueOf("condition://..."))` write), by rule key
    /// `{path}/{child}`: the rule text is the child's URL, `condition://0.0.0.0/{interface}?
    /// category=routers&rule={URL-encoded rule}&force=..&priority=..&enabled=..&runtime=..`,
    /// which [`switchman_router::RouterChain::with_rule`] reads as Dubbo 2.7's
    /// `ConditionRouter(URL)` does.
    ///
    /// As Dubbo: the router type is the `router` parameter when set, else the protocol
    /// (`route://...?router=condition` is a condition rule too); a URL whose service key this
    /// consumer does not accept ([`ServiceKey::accepts`], as `UrlUtils.isMatch` filters what
    /// the registry notifies), with `enabled` other than `true`, or of another category is
    /// not a rule for it; `empty://` is skipped. Other router types (`script`, `file`, ...)
    /// and unreadable nodes are logged and skipped.
    pub(crate) fn router_rules(&self, path: &str, children: &[String]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for name in children {
            if name.len() > MAX_NODE_NAME {
                warn!(path, node = %shorten(name), "skipping router node over the size limit");
                continue;
            }
            let url = match Url::from_encoded(name) {
                Ok(u) => u,
                Err(e) => {
                    warn!(path, node = %shorten(name), "skipping router node: {e}");
                    continue;
                }
            };
            if url.protocol() == "empty" {
                continue;
            }
            if url.param("category").is_some_and(|c| !c.trim().is_empty())
                && !category_ok(&url, "routers")
            {
                debug!(path, url = %url.redacted(), "not a router URL (category); skipped");
                continue;
            }
            let key = url_service_key(&url);
            let interface_ok = self.key.interface.as_ref() == "*"
                || key.interface.as_ref() == "*"
                || key.interface == self.key.interface;
            let mut probe = key;
            probe.interface = self.key.interface.clone();
            if !interface_ok || !self.key.accepts(&probe) {
                continue;
            }
            // UrlUtils.isMatch drops a URL whose `enabled` reads false (Boolean.parseBoolean).
            if url
                .param("enabled")
                .map(str::trim)
                .is_some_and(|e| !e.is_empty() && !e.eq_ignore_ascii_case("true"))
            {
                debug!(path, url = %url.redacted(), "router URL with enabled=false ignored");
                continue;
            }
            let kind = url
                .param("router")
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or(url.protocol());
            if kind != "condition" {
                warn!(path, url = %url.redacted(), "router type {kind:?} is not supported (only condition rules); skipped");
                continue;
            }
            let shown = url.to_string();
            let text = format!("condition{}", &shown[url.protocol().len()..]);
            out.insert(format!("{path}/{name}"), text);
        }
        out
    }
}

/// A node name cut for logs.
pub(crate) fn shorten(name: &str) -> String {
    if name.len() <= 200 {
        return name.to_string();
    }
    let mut end = 200;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &name[..end])
}

/// What a config-centre key under `/dubbo/config/dubbo/` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleKind {
    /// Override YAML (`.configurators`).
    Configurators,
    /// A routing rule (`.condition-router`, `.tag-router`).
    Router,
}

/// The config-centre keys that concern `key` and the applications `apps` (the providers'
/// and the consumer's): Dubbo's `{interface}:{version}:{group}` (and the older
/// `{interface}[:{version}]` form), plus `{app}`, each with `.configurators` and
/// `.condition-router`, and `{app}.tag-router`.
pub(crate) fn rule_keys(key: &ServiceKey, apps: &BTreeSet<String>) -> Vec<(String, RuleKind)> {
    let mut out = Vec::new();
    if key.interface.as_ref() != "*" {
        let mut bases = vec![format!("{}:{}:{}", key.interface, key.version, key.group)];
        let mut compat = key.interface.to_string();
        for part in [&key.version, &key.group] {
            if !part.is_empty() {
                compat.push(':');
                compat.push_str(part);
            }
        }
        if !bases.contains(&compat) {
            bases.push(compat);
        }
        for b in bases {
            out.push((format!("{b}.configurators"), RuleKind::Configurators));
            out.push((format!("{b}.condition-router"), RuleKind::Router));
            out.push((format!("{b}.affinity-router"), RuleKind::Router));
        }
    }
    for app in apps {
        if app.is_empty() || app.contains('/') {
            continue;
        }
        out.push((format!("{app}.configurators"), RuleKind::Configurators));
        out.push((format!("{app}.condition-router"), RuleKind::Router));
        out.push((format!("{app}.tag-router"), RuleKind::Router));
        out.push((format!("{app}.affinity-router"), RuleKind::Router));
    }
    out
}

/// The provider URL registered for `instance`, as Java Dubbo writes it: the instance's URL
/// with `side=provider`, `dynamic=true`, `timestamp`, and the parameters in key order (Java's
/// `URL.toFullString` sorts them).
pub(crate) fn registration_url(instance: &Instance) -> Url {
    let mut u = instance.to_url();
    u.set_param("side", "provider");
    if u.param("dynamic").is_none() {
        u.set_param("dynamic", "true");
    }
    if u.param("timestamp").is_none() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        u.set_param("timestamp", &now.to_string());
    }
    let mut params: Vec<(String, String)> = u.params().to_vec();
    params.sort();
    let mut sorted = Url::new(u.protocol(), u.host(), u.port(), u.path());
    for (k, v) in params {
        sorted.set_param(&k, &v);
    }
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::url::encode_component;

    fn filter(key: ServiceKey) -> ProviderFilter {
        ProviderFilter {
            key,
            protocols: Vec::new(),
        }
    }

    fn enc(s: &str) -> String {
        encode_component(s)
    }

    #[test]
    fn filters_like_dubbo() {
        let f = filter(ServiceKey::with("com.foo.Bar", "", "1.0"));
        let ok = enc(
            "dubbo://10.0.0.1:20880/com.foo.Bar?interface=com.foo.Bar&version=1.0&side=provider&weight=30",
        );
        let i = f.parse_child(&ok).unwrap().unwrap();
        assert_eq!((i.address(), i.weight()), ("10.0.0.1:20880", 30));
        let other_version =
            enc("dubbo://10.0.0.1:20881/com.foo.Bar?interface=com.foo.Bar&version=2.0");
        assert!(f.parse_child(&other_version).unwrap().is_none());
        let grouped =
            enc("dubbo://10.0.0.1:20882/com.foo.Bar?interface=com.foo.Bar&version=1.0&group=g");
        assert!(f.parse_child(&grouped).unwrap().is_none());
        let wrong_category =
            enc("override://10.0.0.1:20883/com.foo.Bar?version=1.0&category=configurators");
        assert!(f.parse_child(&wrong_category).unwrap().is_none());
        assert!(
            f.parse_child(&enc("empty://0.0.0.0/com.foo.Bar?version=1.0"))
                .unwrap()
                .is_none()
        );
        // Disabled providers are kept, marked unavailable (Instance reads `enabled`).
        let off = enc("dubbo://10.0.0.1:20884/com.foo.Bar?version=1.0&enabled=false");
        assert!(!f.parse_child(&off).unwrap().unwrap().is_available());
        // Wildcards and lists.
        let any = filter(ServiceKey::with("com.foo.Bar", "*", "*"));
        assert!(any.parse_child(&grouped).unwrap().is_some());
        let list = filter(ServiceKey::with("com.foo.Bar", "a,g", "1.0"));
        assert!(list.parse_child(&grouped).unwrap().is_some());
        let all = filter(ServiceKey::with("*", "*", "*"));
        assert!(all.parse_child(&other_version).unwrap().is_some());
        // Another interface under the same node is not ours.
        let alien = enc("dubbo://10.0.0.1:1/com.foo.Baz?version=1.0");
        assert!(f.parse_child(&alien).unwrap().is_none());
    }

    #[test]
    fn protocol_list_and_bad_nodes() {
        let f = ProviderFilter {
            key: ServiceKey::new("svc"),
            protocols: vec!["tri".into(), "http".into()],
        };
        assert!(
            f.parse_child(&enc("tri://127.0.0.1:50051?service=svc"))
                .unwrap()
                .is_some()
        );
        assert!(
            f.parse_child(&enc("dubbo://127.0.0.1:20880/svc"))
                .unwrap()
                .is_none()
        );
        assert!(
            f.parse_child("tri%3A%2F%2Fbad%ZZ")
                .unwrap_err()
                .contains("hex")
        );
        assert!(
            f.parse_child(&enc("http://127.0.0.1/svc"))
                .unwrap_err()
                .contains("port")
        );
        assert!(
            f.parse_child(&"a".repeat(MAX_NODE_NAME + 1))
                .unwrap_err()
                .contains("limit")
        );
        let children = vec![
            enc("http://127.0.0.1:1/svc?weight=5"),
            "garbage%".to_string(),
            enc("http://127.0.0.1:2/svc?weight=heavy"),
        ];
        let mut parsed = ParsedProviders::default();
        let path = "/dubbo/svc/providers";
        let list = parsed.providers(&f, path, children.clone());
        assert_eq!(list.len(), 1, "only the good node survives");
        assert_eq!(list[0].weight(), 5);
        // Listed again with one more node: the known node keeps its Arc, the new one is parsed.
        let mut more = children.clone();
        more.push(enc("http://127.0.0.1:3/svc?weight=7"));
        let again = parsed.providers(&f, path, more);
        assert_eq!(again.len(), 2);
        assert!(Arc::ptr_eq(&list[0], &again[0]));
        assert_eq!(again[1].weight(), 7);
        // A node that went away is forgotten: back again, it is parsed anew.
        parsed.providers(&f, path, Vec::new());
        let back = parsed.providers(&f, path, children);
        assert!(!Arc::ptr_eq(&list[0], &back[0]));
        assert_eq!(back[0].weight(), 5);
    }

    #[test]
    fn override_children_follow_dubbo_list_rules() {
        let f = filter(ServiceKey::new("com.foo.Bar"));
        let rules = f.configurators(
            "/dubbo/com.foo.Bar/configurators",
            &[
                enc("override://0.0.0.0/com.foo.Bar?category=configurators&weight=10"),
                enc("override://10.0.0.1:1/com.foo.Bar?category=configurators&weight=bad"),
                enc("override://0.0.0.0/com.foo.Bar?group=other&weight=3"),
                enc("override://10.0.0.5/com.foo.Bar?timeout=1"),
            ],
        );
        assert_eq!(rules.len(), 2, "{rules:?}");
        assert_eq!(
            rules[0].parameters.get("weight").map(String::as_str),
            Some("10")
        );
        // A host without a port names a consumer: a consumer rule for that host.
        assert_eq!(rules[1].side, crate::configurator::Side::Consumer);
        assert_eq!(rules[1].address.as_deref(), Some("10.0.0.5"));
        let cleared = f.configurators(
            "p",
            &[
                enc("override://0.0.0.0/com.foo.Bar?weight=10"),
                enc("empty://0.0.0.0/com.foo.Bar?category=configurators"),
            ],
        );
        assert!(cleared.is_empty());
    }

    #[test]
    fn router_children_become_condition_rules_for_this_consumer_only() {
        let f = filter(ServiceKey::with("com.foo.Bar", "g1", ""));
        let rule = enc("host = 10.0.0.9 => host != 10.0.0.1");
        let mine = format!(
            "condition://0.0.0.0/com.foo.Bar?category=routers&dynamic=false&force=false&group=g1&priority=2&rule={rule}&runtime=false"
        );
        let legacy = format!(
            "route://0.0.0.0/com.foo.Bar?category=routers&router=condition&group=g1&rule={rule}"
        );
        let children: Vec<String> = [
            mine.clone(),
            legacy.clone(),
            // Another group, no group at all (Dubbo's isMatch: not for a g1 consumer).
            format!("condition://0.0.0.0/com.foo.Bar?category=routers&group=g2&rule={rule}"),
            format!("condition://0.0.0.0/com.foo.Bar?category=routers&rule={rule}"),
            format!("condition://0.0.0.0/com.foo.Bar?category=routers&group=g1&enabled=false&rule={rule}"),
            "script://0.0.0.0/com.foo.Bar?category=routers&group=g1&rule=x".to_string(),
            format!("condition://0.0.0.0/com.foo.Bar?category=providers&group=g1&rule={rule}"),
            "empty://0.0.0.0/com.foo.Bar?category=routers&group=g1".to_string(),
        ]
        .iter()
        .map(|u| enc(u))
        .chain(["bad%ZZ".to_string()])
        .collect();
        let path = "/dubbo/com.foo.Bar/routers";
        let rules = f.router_rules(path, &children);
        assert_eq!(rules.len(), 2, "{rules:?}");
        assert_eq!(rules[&format!("{path}/{}", enc(&mine))], mine);
        let route = &rules[&format!("{path}/{}", enc(&legacy))];
        assert!(
            route.starts_with("condition://0.0.0.0/com.foo.Bar?"),
            "{route}"
        );
        // The texts are rules the router chain takes: force, priority and the decoded rule.
        for (key, text) in &rules {
            switchman_router::RouterChain::new()
                .with_rule(key, text)
                .unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        // A consumer of every group takes the g2 and the group-less rule too (`*` is any).
        let any = filter(ServiceKey::with("com.foo.Bar", "*", ""));
        assert_eq!(any.router_rules(path, &children).len(), 4);
        let none = filter(ServiceKey::new("com.foo.Bar"));
        assert_eq!(
            none.router_rules(path, &children).len(),
            1,
            "the group-less rule"
        );
    }

    /// A legacy router URL and the v3 `{service}.condition-router` rule both apply, one after
    /// the other (each narrows what the other left), as Dubbo 2.7 chained every router.
    #[test]
    fn a_legacy_router_and_the_v3_service_rule_both_apply() {
        use switchman_core::Invocation;
        use switchman_router::{ConsumerInfo, Route, RouterChain};
        let f = filter(ServiceKey::new("com.foo.Bar"));
        let path = "/dubbo/com.foo.Bar/routers";
        let legacy = format!(
            "condition://0.0.0.0/com.foo.Bar?category=routers&rule={}",
            enc("=> port = 1,2")
        );
        let rules = f.router_rules(path, &[enc(&legacy)]);
        let (key, text) = rules.iter().next().unwrap();
        let chain = RouterChain::new()
            .with_rule(key, text)
            .unwrap()
            .with_rule(
                "com.foo.Bar::.condition-router",
                "configVersion: v3.0\nscope: service\nkey: com.foo.Bar\nconditions:\n  - '=> port = 2,3'\n",
            )
            .unwrap();
        let instances: Vec<Arc<Instance>> = (1..=3)
            .map(|p| Arc::new(Instance::builder("10.0.0.1", p).build()))
            .collect();
        let table = chain.build(&instances, &ConsumerInfo::new("10.0.9.9", "shop"));
        let mut rng = fastrand::Rng::with_seed(1);
        let Route::Subset(i) = table.route(&Invocation::new("m"), &mut rng) else {
            panic!("routed to a precomputed subset")
        };
        assert_eq!(&*table.subsets()[i], &[1], "only port 2 passes both");
    }

    #[test]
    fn rule_keys_and_registration_form() {
        let apps: BTreeSet<String> = ["shop".to_string()].into();
        let keys = rule_keys(&ServiceKey::with("com.foo.Bar", "g", "1.0"), &apps);
        let names: Vec<_> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "com.foo.Bar:1.0:g.configurators",
                "com.foo.Bar:1.0:g.condition-router",
                "com.foo.Bar:1.0:g.affinity-router",
                "shop.configurators",
                "shop.condition-router",
                "shop.tag-router",
                "shop.affinity-router"
            ]
        );
        let plain = rule_keys(&ServiceKey::new("com.foo.Bar"), &BTreeSet::new());
        assert_eq!(plain[0].0, "com.foo.Bar::.configurators");
        assert_eq!(plain[3].0, "com.foo.Bar.configurators");

        let i = Instance::builder("10.0.0.1", 8080)
            .service(ServiceKey::with("com.foo.Bar", "g", "1.0"))
            .application("shop")
            .weight(50)
            .build();
        let u = registration_url(&i);
        let keys: Vec<_> = u.params().iter().map(|(k, _)| k.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "Java writes parameters in key order");
        assert_eq!(u.param("side"), Some("provider"));
        assert_eq!(u.param("dynamic"), Some("true"));
        assert!(u.param("timestamp").is_some());
        let back = filter(ServiceKey::with("com.foo.Bar", "g", "1.0"))
            .parse_child(&u.to_encoded())
            .unwrap()
            .unwrap();
        assert_eq!(
            (back.address(), back.weight(), back.application()),
            ("10.0.0.1:8080", 50, Some("shop"))
        );
    }
}
