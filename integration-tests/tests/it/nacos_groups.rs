//! A Dubbo-naming subscription whose group is a pattern (`*`, `g1,g2`) against the shared
//! rnacos (`SWITCHMAN_NACOS`): Dubbo's `NacosRegistry` lists the server's services and
//! subscribes to every compatible `providers:{interface}:{version}:{group}` name; Switchman
//! does the same and lists again every `list_interval`, so a group registered later is seen
//! without a restart (issue 17, item 6).

use std::time::Duration;

use serde_json::json;
use std::sync::Arc;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{Invocation, ServiceKey, Url};
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Snapshot};
use switchman_integration_tests::nacos_api::OpenApiInstance;
use switchman_integration_tests::nacos_server::scratch_dir;
use switchman_integration_tests::{nacos, unique};

/// First list of a fresh client: connect, list, subscribe, first push.
const FIRST_LIST: Duration = Duration::from_secs(10);
/// The listing interval the test asks for.
const LIST_INTERVAL_MS: u64 = 500;
/// A new group: one listing, one subscription, one push (rnacos batches pushes up to 1 s).
const NEW_GROUP: Duration = Duration::from_secs(6);
/// One push.
const PUSH: Duration = Duration::from_secs(3);

struct Cache(std::path::PathBuf);

impl Drop for Cache {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

fn registry() -> (NacosRegistry, Cache) {
    let cache = scratch_dir("switchman-nacos-groups");
    let url = format!(
        "nacos://{}?cache_dir={}&rules=false&list_interval={LIST_INTERVAL_MS}",
        nacos(),
        cache.display()
    );
    let reg = NacosRegistry::from_url(&Url::parse(&url).unwrap()).expect("valid nacos URL");
    (reg, Cache(cache))
}

async fn provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_req| {
        Box::pin(async move { ProviderReply::Ok(json!([name])) })
    })
    .await
    .expect("provider binds")
}

/// A provider of `iface` in `group` as Java Dubbo registers it: service
/// `providers:{iface}::{group}`, URL parameters as metadata (persistent, see `nacos_api`).
fn dubbo_instance(iface: &str, group: &str, p: &HttpProvider) -> OpenApiInstance {
    let name = ServiceKey::with(iface, group, "").nacos_service_name();
    let mut i = OpenApiInstance::new(&name, "127.0.0.1", p.addr().port());
    i.metadata_json = format!(
        r#"{{"protocol":"http","path":"{iface}","interface":"{iface}","group":"{group}","side":"provider","warmup":"0"}}"#
    );
    i
}

/// The groups of the instances in `s`, sorted.
fn groups(s: &Snapshot) -> Vec<String> {
    let mut g: Vec<String> = s
        .instances()
        .iter()
        .map(|i| i.service().group.to_string())
        .collect();
    g.sort();
    g
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_and_list_groups_see_every_compatible_service_and_later_groups() {
    let iface = unique("it.groups.Echo").replace('-', "_");
    let p1 = provider("g1").await;
    let p2 = provider("g2").await;
    let p3 = provider("g3").await;
    let i1 = dubbo_instance(&iface, "g1", &p1);
    let i2 = dubbo_instance(&iface, "g2", &p2);
    let i3 = dubbo_instance(&iface, "g3", &p3);
    i1.register(&nacos()).expect("register g1");
    i2.register(&nacos()).expect("register g2");

    let (reg, _cache) = registry();
    let star = Arc::new(
        RegistryDirectory::subscribe(
            &reg,
            DirectoryConfig::new(ServiceKey::with(&iface, "*", "")),
        )
        .await
        .expect("subscribe group *"),
    );
    let listed = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(ServiceKey::with(&iface, "g1,g2", "")),
    )
    .await
    .expect("subscribe group list");
    let one = RegistryDirectory::subscribe(
        &reg,
        DirectoryConfig::new(ServiceKey::with(&iface, "g1", "")),
    )
    .await
    .expect("subscribe g1");

    let s = star
        .wait_until(FIRST_LIST, |s| s.instances().len() == 2)
        .await
        .expect("group * sees the providers of g1 and g2");
    assert_eq!(
        groups(&s),
        ["g1", "g2"],
        "each instance keeps its own group"
    );
    let s = listed
        .wait_until(FIRST_LIST, |s| s.instances().len() == 2)
        .await
        .expect("group list g1,g2 sees both");
    assert_eq!(groups(&s), ["g1", "g2"]);
    let s = one
        .wait_until(FIRST_LIST, |s| s.instances().len() == 1)
        .await
        .expect("a concrete group is still one service");
    assert_eq!(groups(&s), ["g1"]);

    // Calls through the merged directory. A reference to several groups is mergeable in
    // Dubbo: without a merger only the first group with a provider answers (by name for `*`),
    // with `merger=list` every group does, and the answers are concatenated.
    let first_only = ClusterInvoker::new(
        star.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    for k in 0..50 {
        let v = first_only
            .invoke(&Invocation::new("hello"))
            .await
            .unwrap_or_else(|e| panic!("call {k}: {e}"));
        assert_eq!(v, json!(["g1"]), "call {k}: the first group answers");
    }
    let mut config = ClusterConfig::default();
    config.service.merger = Some(switchman_cluster::Merger::List);
    let merged = ClusterInvoker::new(star.clone(), Arc::new(HttpInvoker::new()), config);
    for k in 0..20 {
        let v = merged
            .invoke(&Invocation::new("hello"))
            .await
            .unwrap_or_else(|e| panic!("merged call {k}: {e}"));
        let mut from: Vec<String> = v
            .as_array()
            .unwrap_or_else(|| panic!("merged call {k}: {v}"))
            .iter()
            .map(|x| x.as_str().unwrap_or("?").to_string())
            .collect();
        from.sort();
        assert_eq!(from, ["g1", "g2"], "merged call {k}: both groups answer");
    }

    // A group registered later appears without a restart, within one listing interval and
    // a push; the list g1,g2 does not take it.
    i3.register(&nacos()).expect("register g3");
    let s = star
        .wait_until(NEW_GROUP, |s| s.instances().len() == 3)
        .await
        .expect("group * sees g3, registered after it subscribed");
    assert_eq!(groups(&s), ["g1", "g2", "g3"]);
    tokio::time::sleep(Duration::from_millis(3 * LIST_INTERVAL_MS)).await;
    assert_eq!(
        groups(&listed.load()),
        ["g1", "g2"],
        "g3 is not in the list"
    );

    // A provider that leaves one of the merged services leaves the merged list.
    i2.deregister(&nacos()).expect("deregister g2");
    let s = star
        .wait_until(PUSH, |s| s.instances().len() == 2)
        .await
        .expect("g2's provider leaves");
    assert_eq!(groups(&s), ["g1", "g3"]);
    listed
        .wait_until(PUSH, |s| s.instances().len() == 1)
        .await
        .expect("and leaves the listed subscription too");

    i1.deregister(&nacos()).ok();
    i3.deregister(&nacos()).ok();
}
