//! Dubbo 3 application-level discovery on Nacos against the shared rnacos, with application
//! instances and metadata written through the open API the way Java Dubbo 3.3 lays them out
//! (service `{app}` in `DEFAULT_GROUP`, Dubbo metadata in the instance metadata; the metadata
//! report as config `{app}` in group `{revision}`; the mapping as config `{interface}` in
//! group `mapping`), served by in-process HTTP providers so calls go through. The Java 3.3
//! providers are in `java_app_level_nacos.rs`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::{ClusterConfig, ClusterInvoker, HttpInvoker};
use switchman_core::{Instance, Invocation, ServiceKey, Url};
use switchman_discovery::migration::Source;
use switchman_discovery::nacos::NacosRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Snapshot};
use switchman_integration_tests::nacos_api::{OpenApiInstance, publish_config};
use switchman_integration_tests::nacos_server::scratch_dir;
use switchman_integration_tests::{nacos, unique};

const WAIT: Duration = Duration::from_secs(20);

struct Cleanup {
    dir: std::path::PathBuf,
    instances: Vec<OpenApiInstance>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for i in &self.instances {
            let _ = i.deregister(&nacos());
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

async fn provider() -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |_req| {
        Box::pin(async { ProviderReply::Ok(json!("ok")) })
    })
    .await
    .expect("provider binds")
}

/// The instance a Java 3.3 provider with `register-mode=instance` and `metadata-type=remote`
/// writes (its Nacos weight is not Dubbo's weight and stays 1).
fn app_instance(app: &str, port: u16, revision: &str) -> OpenApiInstance {
    let mut i = OpenApiInstance::new(app, "127.0.0.1", port);
    i.metadata_json = json!({
        "dubbo.metadata.revision": revision,
        "dubbo.metadata.storage-type": "remote",
        "dubbo.endpoints": format!("[{{\"port\":{port},\"protocol\":\"http\"}}]"),
        "meta-v": "2.0.0",
        "timestamp": "1700000000000",
    })
    .to_string();
    i
}

/// The metadata report of (`app`, `revision`): `iface` over http, weight `weight`.
fn publish_report(app: &str, revision: &str, iface: &str, weight: u32) {
    let info = json!({
        "app": app, "revision": revision,
        "services": {format!("{iface}:http"): {
            "name": iface, "protocol": "http", "port": -1, "path": iface,
            "params": {"weight": weight.to_string(), "warmup": "0", "application": app,
                       "side": "provider", "interface": iface}
        }}
    });
    publish_config(&nacos(), app, revision, &info.to_string()).expect("publish report");
}

fn endpoints(s: &Snapshot) -> Vec<(u16, u32, Option<String>)> {
    let mut v: Vec<_> = s
        .endpoints()
        .iter()
        .map(|e| {
            let i: &Instance = &e.instance;
            (
                i.port(),
                i.weight(),
                i.param("dubbo.metadata.revision").map(str::to_string),
            )
        })
        .collect();
    v.sort();
    v
}

/// The shared rnacos as a registry with its cache in `cache_dir` and `query` appended.
fn registry(cache_dir: &std::path::Path, query: &str) -> NacosRegistry {
    let url = format!(
        "nacos://{}?cache_dir={}&{query}",
        nacos(),
        cache_dir.display()
    );
    NacosRegistry::from_url(&Url::parse(&url).unwrap()).unwrap()
}

/// A directory of `iface` (no group or version) subscribed to `reg`.
async fn subscribe(reg: &NacosRegistry, iface: &str) -> Arc<RegistryDirectory> {
    Arc::new(
        RegistryDirectory::subscribe(reg, DirectoryConfig::new(ServiceKey::new(iface)))
            .await
            .unwrap(),
    )
}

async fn wait_for(
    dir: &RegistryDirectory,
    what: &str,
    f: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    dir.wait_until(WAIT, f)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}; have {:?}", endpoints(&dir.load())))
}

/// `provided-by` alone finds an application (and then replaces the mapping, as in Dubbo); an
/// interface-level entry at one of their addresses changes nothing (`APPLICATION_FIRST`: the
/// three application-level endpoints cover the one interface-level provider); an instance moving to a new revision
/// (a new report) and an instance leaving are pushed; calls follow the weights of the
/// metadata report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provided_by_mapping_reports_and_pushes() {
    let iface = unique("it.nacos.AppLevel").replace('-', "_");
    let (app1, app2) = (unique("nacos-app1"), unique("nacos-app2"));
    let (p1, p2, p3) = (provider().await, provider().await, provider().await);
    let port = |p: &HttpProvider| p.addr().port();
    publish_report(&app1, "r100", &iface, 100);
    publish_report(&app1, "r300", &iface, 300);
    publish_report(&app2, "r9", &iface, 9);
    let mut cleanup = Cleanup {
        dir: scratch_dir("switchman-nacos-app"),
        instances: vec![
            app_instance(&app1, port(&p1), "r100"),
            app_instance(&app1, port(&p2), "r300"),
            app_instance(&app2, port(&p3), "r9"),
        ],
    };
    for i in &cleanup.instances {
        i.register(&nacos()).expect("register");
    }
    // No mapping names app1 yet: provided-by does.
    let reg = registry(&cleanup.dir, &format!("provided-by={app1}"));
    let dir = subscribe(&reg, &iface).await;
    let snap = wait_for(&dir, "app1's two instances", |s| s.endpoints().len() == 2).await;
    let r = |s: &str| Some(s.to_string());
    assert_eq!(
        endpoints(&snap),
        {
            let mut v = vec![(port(&p1), 100, r("r100")), (port(&p2), 300, r("r300"))];
            v.sort();
            v
        },
        "weights and revisions from the metadata report"
    );
    for e in snap.endpoints() {
        assert_eq!(e.instance.application(), Some(app1.as_str()));
        assert_eq!(e.instance.protocol().as_str(), "http");
    }
    let cluster = ClusterInvoker::new(
        dir.clone(),
        Arc::new(HttpInvoker::new()),
        ClusterConfig::default(),
    );
    for k in 0..400 {
        let r = cluster.invoke(&Invocation::new("echo")).await;
        assert!(r.is_ok(), "call {k}: {r:?}");
    }
    let (a, b) = (p1.hits(), p2.hits());
    eprintln!("400 calls: weight 100 got {a}, weight 300 got {b}");
    let share = b as f64 / 400.0;
    assert!((0.65..=0.85).contains(&share), "{a}:{b}");

    // provided-by names the applications and the mapping is then not read, as in Dubbo
    // (asserted with a barrier on ZooKeeper, java_app_level.rs, and in the Nacos adapter's unit
    // test): a consumer naming both applications reads both, the mapping published or not.
    publish_config(&nacos(), &iface, "mapping", &app2).unwrap();
    drop(cluster);
    drop(dir);
    let reg = registry(&cleanup.dir, &format!("provided-by={app1},{app2}"));
    let dir = subscribe(&reg, &iface).await;
    let snap = wait_for(&dir, "app1's and app2's instances", |s| {
        s.endpoints().len() == 3
    })
    .await;
    assert!(endpoints(&snap).contains(&(port(&p3), 9, r("r9"))));

    // The same provider registered at the interface level too (register-mode=all): the
    // migration step (APPLICATION_FIRST, no rule) keeps the application-level list, which
    // covers the interface-level one.
    let mut iface_level =
        OpenApiInstance::new(&format!("providers:{iface}::"), "127.0.0.1", port(&p3));
    iface_level.metadata_json =
        json!({"protocol": "http", "weight": "7", "warmup": "0", "side": "provider"}).to_string();
    iface_level.register(&nacos()).unwrap();
    cleanup.instances.push(iface_level);
    // The adapter's decision once it read the interface-level instance (sent after the list
    // it publishes): the application level stays.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let decided = loop {
        match dir.lists() {
            Some(l) if l.interface_level > 0 => break l,
            other => assert!(
                std::time::Instant::now() < deadline,
                "the interface-level instance never read: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(decided.using, Source::Application, "{decided:?}");
    let snap = dir.load();
    assert!(
        endpoints(&snap).contains(&(port(&p3), 9, r("r9"))),
        "{:?}",
        endpoints(&snap)
    );
    assert_eq!(snap.endpoints().len(), 3, "{:?}", endpoints(&snap));

    // p2 is upgraded in place: a new revision, its report published first (as Dubbo does).
    publish_report(&app1, "r500", &iface, 500);
    cleanup.instances[1] = app_instance(&app1, port(&p2), "r500");
    cleanup.instances[1].update(&nacos()).unwrap();
    wait_for(&dir, "p2's new revision", |s| {
        endpoints(s).contains(&(port(&p2), 500, r("r500")))
    })
    .await;

    // p1 leaves.
    cleanup.instances[0].deregister(&nacos()).unwrap();
    let snap = wait_for(&dir, "p1 gone", |s| {
        !s.endpoints().iter().any(|e| e.instance.port() == port(&p1))
    })
    .await;
    assert_eq!(endpoints(&snap), {
        let mut v = vec![(port(&p2), 500, r("r500")), (port(&p3), 9, r("r9"))];
        v.sort();
        v
    });
}

/// `app-level=false` reads the interface level only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_level_false_ignores_application_instances() {
    let iface = unique("it.nacos.NoAppLevel").replace('-', "_");
    let app = unique("nacos-app-off");
    let p = provider().await;
    publish_report(&app, "r1", &iface, 100);
    let cleanup = Cleanup {
        dir: scratch_dir("switchman-nacos-app-off"),
        instances: vec![app_instance(&app, p.addr().port(), "r1")],
    };
    cleanup.instances[0].register(&nacos()).unwrap();
    let on = registry(&cleanup.dir, &format!("provided-by={app}"));
    let off = registry(&cleanup.dir, &format!("provided-by={app}&app-level=false"));
    let key = ServiceKey::new(&iface);
    let dir_on = RegistryDirectory::subscribe(&on, DirectoryConfig::new(key.clone()))
        .await
        .unwrap();
    let dir_off = RegistryDirectory::subscribe(&off, DirectoryConfig::new(key))
        .await
        .unwrap();
    wait_for(&dir_on, "the application instance", |s| {
        s.endpoints().len() == 1
    })
    .await;
    let snap = wait_for(&dir_off, "a first list", |s| s.epoch() > 0).await;
    assert!(snap.endpoints().is_empty(), "{:?}", endpoints(&snap));
    // A later write is the barrier: once an interface-level instance registered after the
    // application instance is listed, the application instance would have been too.
    let mut later = OpenApiInstance::new(&format!("providers:{iface}::"), "192.0.2.1", 20880);
    later.metadata_json = json!({"protocol": "http", "side": "provider"}).to_string();
    later.register(&nacos()).unwrap();
    let snap = wait_for(&dir_off, "the later interface-level instance", |s| {
        !s.endpoints().is_empty()
    })
    .await;
    let listed: Vec<String> = snap
        .endpoints()
        .iter()
        .map(|e| e.instance.address().to_string())
        .collect();
    assert_eq!(listed, vec!["192.0.2.1:20880".to_string()]);
    assert!(dir_off.lists().is_none(), "no application-level side");
    later.deregister(&nacos()).unwrap();
}
