//! The directory's tests: updates, patches and rebuilds, overrides, rules, the cache file, warm-up.

use std::time::SystemTime;

use switchman_core::Invocation;
use switchman_loadbalance::InstanceStats;

use super::*;
use crate::Configurator;

fn inst(port: u16, weight: u32) -> Instance {
    Instance::builder("10.0.0.1", port).weight(weight).build()
}

fn cfg() -> DirectoryConfig {
    DirectoryConfig::new(ServiceKey::new("com.foo.Bar"))
}

async fn settle(dir: &RegistryDirectory, epoch: u64) -> Arc<Snapshot> {
    dir.wait_until(Duration::from_secs(5), |s| s.epoch() >= epoch)
        .await
        .unwrap()
}

/// Waits until the directory has applied `n` updates in all (a barrier: after it, a snapshot
/// that did not come means the updates changed nothing).
async fn applied(dir: &RegistryDirectory, n: u64) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while dir.updates_applied() < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the directory applies its updates");
}

#[tokio::test]
async fn reset_add_remove_publish_new_epochs() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    assert_eq!(dir.load().epoch(), 0);
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    let s1 = settle(&dir, 1).await;
    assert_eq!(s1.instances().len(), 2);
    dir.apply(Update::add(vec![inst(3, 100)]));
    let s2 = settle(&dir, 2).await;
    assert_eq!(s2.instances().len(), 3);
    // Unchanged instances are shared between snapshots, and so is their live state.
    assert!(Arc::ptr_eq(
        &s1.endpoints()[0].instance,
        &s2.endpoints()[0].instance
    ));
    assert!(Arc::ptr_eq(
        &s1.endpoints()[0].stats,
        &s2.endpoints()[0].stats
    ));
    dir.apply(Update::Remove(vec!["10.0.0.1:1".into()]));
    let s3 = settle(&dir, 3).await;
    assert_eq!(
        s3.instances().iter().map(|i| i.port()).collect::<Vec<_>>(),
        vec![2, 3]
    );
}

/// The directory keeps the `Arc`s a registry hands it: a whole list that repeats them (an
/// adapter's list after a reconnect) keeps every unchanged instance as the same object, and
/// the one changed instance is the pushed `Arc`. Equal copies publish nothing; the registry's
/// map takes them, and the next rebuilt snapshot holds them.
#[tokio::test]
async fn pushed_arcs_are_kept_and_recognised_by_pointer() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    let list: Vec<Arc<Instance>> = (1..=3).map(|p| Arc::new(inst(p, 100))).collect();
    dir.apply(Update::Reset(list.clone()));
    let s1 = settle(&dir, 1).await;
    for (held, pushed) in s1.instances().iter().zip(&list) {
        assert!(Arc::ptr_eq(held, pushed), "{held:?}");
    }
    let edited = Arc::new(inst(2, 7));
    dir.apply(Update::Reset(vec![
        list[0].clone(),
        edited.clone(),
        list[2].clone(),
    ]));
    let s2 = settle(&dir, 2).await;
    let held = s2.instances();
    assert!(Arc::ptr_eq(&held[0], &list[0]) && Arc::ptr_eq(&held[2], &list[2]));
    assert!(Arc::ptr_eq(&held[1], &edited), "{:?}", held[1]);
    // Copies equal to what is held: no new snapshot.
    let copies: Vec<Arc<Instance>> = [inst(1, 100), inst(2, 7), inst(3, 100)]
        .into_iter()
        .map(Arc::new)
        .collect();
    dir.apply(Update::Reset(copies.clone()));
    dir.apply(Update::add([inst(3, 100)]));
    // The third and fourth updates of this directory.
    applied(&dir, 4).await;
    assert_eq!(dir.load().epoch(), 2, "equal copies published a snapshot");
    // An arrival rebuilds: the snapshot holds the copies the registry sent last.
    dir.apply(Update::add([inst(4, 100)]));
    let s3 = settle(&dir, 3).await;
    assert_eq!(s3.instances().len(), 4);
    assert!(Arc::ptr_eq(&s3.instances()[0], &copies[0]));
    assert!(Arc::ptr_eq(&s3.instances()[1], &copies[1]));
    assert_eq!(s3.instances()[2], s2.instances()[2]);
}

/// One process exporting com.foo.Bar under two groups on one port: two endpoints, each
/// with its own live statistics; removed one by one by key, or together by address.
#[tokio::test]
async fn two_groups_on_one_address_are_two_endpoints() {
    let grouped = |group: &str| {
        Instance::builder("10.0.0.1", 20880)
            .protocol(Protocol::Dubbo)
            .service(ServiceKey::with("com.foo.Bar", group, "1.0.0"))
            .build()
    };
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![
        grouped("g1"),
        grouped("g2"),
        inst(1, 100),
    ]));
    let s = settle(&dir, 1).await;
    let groups: Vec<&str> = s
        .endpoints()
        .iter()
        .map(|e| e.instance.service().group.as_ref())
        .collect();
    assert_eq!(
        groups,
        ["", "g1", "g2"],
        "sorted by address, then the rest of the key"
    );
    let (g1, g2) = (&s.endpoints()[1], &s.endpoints()[2]);
    assert!(!Arc::ptr_eq(&g1.stats, &g2.stats));
    assert_eq!(s.index_of(grouped("g2").key()), Some(2));
    assert_eq!(
        s.index_of("10.0.0.1:20880"),
        Some(1),
        "a bare address: the first there"
    );
    // A changed weight of one group touches that endpoint only.
    dir.apply(Update::add(vec![
        Instance::from_url(&grouped("g2").to_url().with_param("weight", "7")).unwrap(),
    ]));
    let s2 = settle(&dir, 2).await;
    assert_eq!(
        (
            s2.endpoints()[1].instance.weight(),
            s2.endpoints()[2].instance.weight()
        ),
        (100, 7)
    );
    assert!(Arc::ptr_eq(&s2.endpoints()[2].stats, &g2.stats));
    dir.apply(Update::Remove(vec![grouped("g1").key().to_string()]));
    let s3 = settle(&dir, 3).await;
    assert_eq!(s3.endpoints().len(), 2);
    assert_eq!(s3.endpoints()[1].instance.service().group.as_ref(), "g2");
    dir.apply(Update::add(vec![grouped("g1")]));
    settle(&dir, 4).await;
    dir.apply(Update::Remove(vec!["10.0.0.1:20880".into()]));
    let s5 = settle(&dir, 5).await;
    assert_eq!(
        s5.endpoints().len(),
        1,
        "a bare address removes every endpoint there"
    );
}

/// An override of `dubbo.tag`, `zone` or `warmup` changes what routing, zone preference
/// and the balancer read, not only the parameter map.
#[tokio::test]
async fn overrides_of_tag_zone_and_warmup_take_effect_everywhere() {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let a = Instance::builder("10.0.0.1", 1)
        .zone("z1")
        .timestamp_ms(now_ms - 1_000)
        .warmup(Duration::from_secs(600))
        .build();
    let b = Instance::builder("10.0.0.1", 2).zone("z1").build();
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![a, b]));
    let s = settle(&dir, 1).await;
    let mut rng = fastrand::Rng::with_seed(7);
    let share_of_a = |s: &Snapshot, inv: &Invocation, rng: &mut fastrand::Rng| {
        (0..2000)
            .filter(|_| s.select(inv, &[], rng).unwrap() == 0)
            .count()
    };
    let plain = Invocation::new("m");
    // `a` started a second ago with a 10-minute warm-up: almost no traffic.
    assert!(share_of_a(&s, &plain, &mut rng) < 60);
    // Warm-up: with `warmup=0` the instance that just started takes half of the picks.
    let rule = Configurator::for_address("10.0.0.1:1").param("warmup", "0");
    dir.apply(Update::Configurators {
        source: "ops".into(),
        rules: vec![rule.clone()],
    });
    let s = settle(&dir, 2).await;
    assert_eq!(s.instances()[0].warmup(), Duration::ZERO);
    let plain_a = share_of_a(&s, &plain, &mut rng);
    assert!((850..1150).contains(&plain_a), "{plain_a}");
    let gray = Invocation::new("m").with_attachment("dubbo.tag", "gray");
    // No instance is gray yet: a gray call falls back to the untagged ones (both).
    let gray_a = share_of_a(&s, &gray, &mut rng);
    assert!((850..1150).contains(&gray_a), "{gray_a}");
    dir.apply(Update::Configurators {
        source: "ops".into(),
        rules: vec![rule.param("dubbo.tag", "gray").param("zone", "z2")],
    });
    let s = settle(&dir, 3).await;
    let o = &s.instances()[0];
    assert_eq!(
        (o.tag(), o.zone(), o.warmup()),
        (Some("gray"), Some("z2"), Duration::ZERO)
    );
    // Tag routing: a gray call reaches only the now-gray instance, an untagged one only
    // the untagged instance.
    assert_eq!(share_of_a(&s, &gray, &mut rng), 2000);
    assert_eq!(share_of_a(&s, &plain, &mut rng), 0);
    // Clearing the rule restores the registry's values.
    dir.apply(Update::Configurators {
        source: "ops".into(),
        rules: vec![],
    });
    let s = settle(&dir, 4).await;
    assert_eq!(
        (s.instances()[0].tag(), s.instances()[0].zone()),
        (None, Some("z1"))
    );
}

/// A flood of messages that change nothing does not postpone the warm-up refresh: the
/// warming instance's weight still steps up on time.
#[tokio::test]
async fn warm_up_advances_under_a_flood_of_no_op_messages() {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // Weight 100 over 2 s: one step every 20 ms (refreshes at least 100 ms apart).
    let warming = Instance::builder("10.0.0.1", 1)
        .timestamp_ms(now_ms)
        .warmup(Duration::from_secs(2))
        .build();
    let dir = Arc::new(RegistryDirectory::spawn(cfg(), None));
    dir.apply(Update::reset(vec![warming.clone(), inst(2, 100)]));
    let first = settle(&dir, 1).await.epoch();
    // Identical lists every 10 ms (more often than the refresh period) for 1 s.
    let flood = {
        let (dir, warming) = (dir.clone(), warming.clone());
        tokio::spawn(async move {
            for _ in 0..100 {
                dir.apply(Update::reset(vec![warming.clone(), inst(2, 100)]));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    flood.await.unwrap();
    let refreshed = dir.load().epoch() - first;
    // About one refresh per 100 ms over the second; with the sleep re-created at every
    // message there would be none.
    assert!(
        refreshed >= 4,
        "{refreshed} warm-up refreshes during the flood"
    );
}

#[tokio::test]
async fn identical_reset_publishes_nothing() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::reset(vec![inst(1, 100)]));
    dir.apply(Update::reset(vec![inst(1, 7)]));
    let s = settle(&dir, 2).await;
    assert_eq!(s.epoch(), 2, "the identical reset must not bump the epoch");
    assert_eq!(s.instances()[0].weight(), 7);
}

#[tokio::test]
async fn empty_policy_keep_last_and_publish() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::Reset(vec![]));
    let s = settle(&dir, 2).await;
    assert!(s.is_protected());
    assert_eq!(s.endpoints().len(), 1);
    let mut rng = fastrand::Rng::with_seed(1);
    assert!(s.select(&Invocation::new("m"), &[], &mut rng).is_ok());
    // Instances coming back end the protection.
    dir.apply(Update::reset(vec![inst(2, 100)]));
    let s = settle(&dir, 3).await;
    assert!(!s.is_protected());
    assert_eq!(s.instances()[0].port(), 2);

    let dir = RegistryDirectory::spawn(cfg().empty_policy(EmptyPolicy::Publish), None);
    dir.apply(Update::reset(vec![inst(1, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::Reset(vec![]));
    let s = settle(&dir, 2).await;
    assert!(s.instances().is_empty());
    let e = s.select(&Invocation::new("m"), &[], &mut rng).unwrap_err();
    assert_eq!(e.kind(), switchman_core::ErrorKind::NoProvider);
}

#[tokio::test]
async fn overrides_change_typed_values_and_survive_registry_resets() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![
            Configurator::for_address("10.0.0.1:1").param("weight", "5"),
            Configurator::for_address("10.0.0.1:2").param("disabled", "true"),
            Configurator::for_all().param("weight", "bogus"),
        ],
    });
    let s = settle(&dir, 2).await;
    assert_eq!(s.instances()[0].weight(), 5);
    assert_eq!(
        s.endpoints().len(),
        1,
        "the disabled instance is not routable"
    );
    // A registry push re-applies the overrides; an identical push publishes nothing.
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    dir.apply(Update::add(vec![inst(3, 100)]));
    let s = settle(&dir, 3).await;
    assert_eq!(s.epoch(), 3);
    assert_eq!(s.instances()[0].weight(), 5);
    assert_eq!(s.instances()[2].weight(), 100);
    // Clearing the source restores the registry's values.
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![],
    });
    let s = settle(&dir, 4).await;
    assert_eq!(s.instances()[0].weight(), 100);
    assert_eq!(s.endpoints().len(), 3);
}

/// Dubbo sorts configurators by host (every-provider rules first), then by `priority`:
/// among the rules naming a provider's host, the highest priority applies last and wins,
/// whatever order they came in; a rule for every provider never beats one naming the host.
#[tokio::test]
async fn override_priority_orders_the_rules_of_one_host() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![
            Configurator::for_address("10.0.0.1:1")
                .param("weight", "9")
                .param("priority", "1"),
            Configurator::for_address("10.0.0.1")
                .param("weight", "5")
                .param("priority", "2"),
            Configurator::for_address("10.0.0.1")
                .param("weight", "7")
                .param("timeout", "300"),
            Configurator::for_all()
                .param("weight", "1")
                .param("timeout", "100")
                .param("priority", "100"),
        ],
    });
    let s = settle(&dir, 2).await;
    let weights: Vec<u32> = s.instances().iter().map(|i| i.weight()).collect();
    assert_eq!(
        weights,
        [5, 5],
        "priority 2 beats 1 and 0; the host beats 0.0.0.0"
    );
    assert_eq!(s.instances()[1].param("timeout"), Some("300"));
    // Equal priorities: arrival order, a host:port rule after a host rule.
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![
            Configurator::for_address("10.0.0.1:2").param("weight", "3"),
            Configurator::for_address("10.0.0.1").param("weight", "4"),
            Configurator::for_address("10.0.0.1").param("weight", "6"),
        ],
    });
    let s = settle(&dir, 3).await;
    let weights: Vec<u32> = s.instances().iter().map(|i| i.weight()).collect();
    assert_eq!(weights, [6, 3]);
}

#[tokio::test]
async fn snapshot_cache_serves_a_restart_without_registry() {
    let path =
        std::env::temp_dir().join(format!("switchman-dir-cache-{}.json", std::process::id()));
    std::fs::remove_file(&path).ok();
    {
        let dir = RegistryDirectory::spawn(cfg().cache_file(&path), None);
        dir.apply(Update::reset(vec![inst(1, 30), inst(2, 70)]));
        settle(&dir, 1).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !path.exists() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // A new consumer whose registry never answers starts from the cache.
    let dir = RegistryDirectory::spawn(cfg().cache_file(&path), None);
    let s = dir.load();
    assert_eq!(s.epoch(), 1);
    assert_eq!(
        s.instances().iter().map(|i| i.weight()).collect::<Vec<_>>(),
        vec![30, 70]
    );
    let mut rng = fastrand::Rng::with_seed(5);
    assert!(s.select(&Invocation::new("m"), &[], &mut rng).is_ok());
    std::fs::remove_file(&path).ok();
}

#[tokio::test]
async fn rules_from_the_registry_apply_and_bad_ones_keep_the_previous_rules() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    settle(&dir, 1).await;
    let key = "com.foo.Bar::.condition-router".to_string();
    dir.apply(Update::Rule {
        key: key.clone(),
        text: Some("method = m => port = 2".into()),
    });
    let s = settle(&dir, 2).await;
    let mut rng = fastrand::Rng::with_seed(9);
    for _ in 0..50 {
        let i = s.select(&Invocation::new("m"), &[], &mut rng).unwrap();
        assert_eq!(s.endpoints()[i].instance.port(), 2);
    }
    // A broken rule is rejected; the previous one keeps routing.
    dir.apply(Update::Rule {
        key: key.clone(),
        text: Some("method = m && host = 1.1.1.1 => port = 1".into()),
    });
    dir.apply(Update::add(vec![inst(3, 100)]));
    let s = settle(&dir, 3).await;
    for _ in 0..50 {
        let i = s.select(&Invocation::new("m"), &[], &mut rng).unwrap();
        assert_eq!(s.endpoints()[i].instance.port(), 2);
    }
    dir.apply(Update::Rule { key, text: None });
    let s = settle(&dir, 4).await;
    let ports: std::collections::BTreeSet<u16> = (0..200)
        .map(|_| {
            s.endpoints()[s.select(&Invocation::new("m"), &[], &mut rng).unwrap()]
                .instance
                .port()
        })
        .collect();
    assert_eq!(ports.len(), 3);
}

#[tokio::test]
async fn unsupported_protocols_are_listed_but_not_routed() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    let grpc = Instance::builder("10.0.0.1", 1)
        .protocol(Protocol::Other("grpc".into()))
        .build();
    let tri = Instance::builder("10.0.0.1", 2)
        .protocol(Protocol::Tri)
        .build();
    dir.apply(Update::reset(vec![grpc, tri]));
    let s = settle(&dir, 1).await;
    assert_eq!(s.instances().len(), 2);
    assert_eq!(s.endpoints().len(), 1);
    assert_eq!(s.endpoints()[0].instance.port(), 2);
    let all = RegistryDirectory::spawn(cfg().protocols(vec![]), None);
    all.apply(Update::reset(vec![
        Instance::builder("h", 1)
            .protocol(Protocol::Other("grpc".into()))
            .build(),
    ]));
    assert_eq!(settle(&all, 1).await.endpoints().len(), 1);
}

#[tokio::test]
async fn a_watched_rules_file_routes_and_a_broken_edit_keeps_the_rules() {
    let path = std::env::temp_dir().join(format!("switchman-rules-{}.yaml", std::process::id()));
    std::fs::write(&path, "method = m => port = 2\n").unwrap();
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    let watch = crate::watch_rules_file(dir.updater(), &path, Duration::from_millis(20)).unwrap();
    let mut rng = fastrand::Rng::with_seed(2);
    let only = |s: &Snapshot, rng: &mut fastrand::Rng| -> std::collections::BTreeSet<u16> {
        (0..100)
            .map(|_| {
                s.endpoints()[s.select(&Invocation::new("m"), &[], rng).unwrap()]
                    .instance
                    .port()
            })
            .collect()
    };
    let s = dir
        .wait_until(Duration::from_secs(5), |s| s.subset_count() > 1)
        .await
        .unwrap();
    assert_eq!(only(&s, &mut rng), [2].into());
    std::fs::write(&path, "method = m => port = 1\n").unwrap();
    let e = s.epoch();
    let s = dir
        .wait_until(Duration::from_secs(5), |s| s.epoch() > e)
        .await
        .unwrap();
    assert_eq!(only(&s, &mut rng), [1].into());
    std::fs::write(&path, "method = m && host = x => port = 2\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while watch.rejected() == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(watch.rejected(), 1, "the watcher read the broken edit");
    assert_eq!(
        only(&dir.load(), &mut rng),
        [1].into(),
        "a broken file keeps the rules in force"
    );
    std::fs::write(&path, "").unwrap();
    let e = dir.load().epoch();
    let s = dir
        .wait_until(Duration::from_secs(5), |s| s.epoch() > e)
        .await
        .unwrap();
    assert_eq!(
        only(&s, &mut rng),
        [1, 2].into(),
        "removing the rule restores all providers"
    );
    std::fs::remove_file(&path).ok();
}

#[tokio::test]
async fn the_first_list_is_warm_and_later_arrivals_warm_up() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::add(vec![inst(2, 100)]));
    let s = settle(&dir, 2).await;
    let now = std::time::SystemTime::now();
    let w: Vec<u32> = s
        .endpoints()
        .iter()
        .map(|e| switchman_loadbalance::effective_weight(e, now))
        .collect();
    assert_eq!(w[0], 100, "present at start: no warm-up");
    assert_eq!(
        w[1], 1,
        "new since start, no provider timestamp: warming from first sight"
    );
}

#[tokio::test]
async fn unavailable_instances_are_listed_but_never_selected() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    let off = Instance::builder("10.0.0.1", 1).enabled(false).build();
    let sick = Instance::builder("10.0.0.1", 2).healthy(false).build();
    dir.apply(Update::reset(vec![off, sick, inst(3, 100)]));
    let s = settle(&dir, 1).await;
    assert_eq!(s.instances().len(), 3);
    assert_eq!(s.endpoints().len(), 1);
    let mut rng = fastrand::Rng::with_seed(3);
    for _ in 0..100 {
        let i = s.select(&Invocation::new("m"), &[], &mut rng).unwrap();
        assert_eq!(s.endpoints()[i].instance.port(), 3);
    }
}

/// A weight-only push keeps the route table (the balancer tables see the new weights);
/// anything routing reads, or a rule naming weights, rebuilds it.
#[tokio::test]
async fn weight_changes_reuse_the_route_table_and_routing_stays_right() {
    let zoned = |port: u16, zone: &str, weight: u32| {
        Instance::builder("10.0.0.1", port)
            .zone(zone)
            .param("zone", zone)
            .weight(weight)
            .build()
    };
    let chain = RouterChain::new()
        .with_rule("svc.condition-router", "method = find* => zone = z1")
        .unwrap();
    let dir = RegistryDirectory::spawn(cfg().router(chain), None);
    let list = |w: u32| vec![zoned(1, "z1", 100), zoned(2, "z1", w), zoned(3, "z2", 100)];
    dir.apply(Update::reset(list(100)));
    let s1 = settle(&dir, 1).await;
    dir.apply(Update::reset(list(0)));
    let s2 = settle(&dir, 2).await;
    assert!(
        Arc::ptr_eq(&s1.routes, &s2.routes),
        "weight-only: table kept"
    );
    assert!(Arc::ptr_eq(&s1.index, &s2.index));
    // Routing still right, and the new weight (0) applies: only port 1 for find*.
    let mut rng = fastrand::Rng::with_seed(5);
    for _ in 0..200 {
        let i = s2
            .select(&Invocation::new("findUser"), &[], &mut rng)
            .unwrap();
        assert_eq!(s2.endpoints()[i].instance.port(), 1);
    }
    // A zone change is a routing change: rebuilt, and routed by the new zone.
    dir.apply(Update::add(vec![zoned(3, "z1", 100)]));
    let s3 = settle(&dir, 3).await;
    assert!(!Arc::ptr_eq(&s2.routes, &s3.routes));
    let picked: std::collections::BTreeSet<u16> = (0..200)
        .map(|_| {
            let i = s3
                .select(&Invocation::new("findUser"), &[], &mut rng)
                .unwrap();
            s3.endpoints()[i].instance.port()
        })
        .collect();
    assert_eq!(picked, [1, 3].into());
    // A rule that names weights: weight-only pushes rebuild.
    dir.set_router(
        RouterChain::new()
            .with_rule("svc.condition-router", "weight = 100 => zone = z1")
            .unwrap(),
    );
    let s4 = settle(&dir, 4).await;
    dir.apply(Update::add(vec![zoned(2, "z1", 50)]));
    let s5 = settle(&dir, 5).await;
    assert!(!Arc::ptr_eq(&s4.routes, &s5.routes));
}

/// A weight-only push of a few addresses patches the last snapshot: the route table,
/// address index and live stats stay, the entry is swapped at the right position of both
/// arrays (they differ when an instance is not routable), and the cache file follows.
#[tokio::test]
async fn weight_only_deltas_patch_the_last_snapshot() {
    let cache =
        std::env::temp_dir().join(format!("switchman-dir-patch-{}.json", std::process::id()));
    std::fs::remove_file(&cache).ok();
    let chain = RouterChain::new()
        .with_rule("svc.condition-router", "method = find* => zone = z1")
        .unwrap();
    let dir = RegistryDirectory::spawn(cfg().router(chain).cache_file(&cache), None);
    let node = |port: u16, weight: u32, enabled: bool| {
        Instance::builder("10.0.0.1", port)
            .zone(if port.is_multiple_of(2) { "z1" } else { "z2" })
            .param("zone", if port.is_multiple_of(2) { "z1" } else { "z2" })
            .weight(weight)
            .enabled(enabled)
            .build()
    };
    // Port 2 is disabled: listed in `instances()`, absent from `endpoints()`.
    dir.apply(Update::reset((1..=6).map(|p| node(p, 100, p != 2))));
    let s1 = settle(&dir, 1).await;
    assert_eq!((s1.instances().len(), s1.endpoints().len()), (6, 5));
    s1.endpoints()[3]
        .stats
        .begin()
        .finish(Duration::from_millis(1), true);
    dir.apply(Update::add(vec![node(4, 0, true), node(5, 30, true)]));
    let s2 = settle(&dir, 2).await;
    assert!(Arc::ptr_eq(&s1.routes, &s2.routes) && Arc::ptr_eq(&s1.index, &s2.index));
    let weights: Vec<(u16, u32)> = s2
        .endpoints()
        .iter()
        .map(|e| (e.instance.port(), e.instance.weight()))
        .collect();
    assert_eq!(weights, [(1, 100), (3, 100), (4, 0), (5, 30), (6, 100)]);
    assert_eq!(s2.instances()[3].weight(), 0);
    assert_eq!(s2.instances()[1].port(), 2);
    for (a, b) in s1.endpoints().iter().zip(s2.endpoints()) {
        assert!(Arc::ptr_eq(&a.stats, &b.stats), "live stats carried over");
    }
    assert_eq!(s2.endpoints()[3].stats.succeeded(), 1);
    // Weight 0 on port 4 leaves port 6 as the only z1 target for find*.
    let mut rng = fastrand::Rng::with_seed(9);
    for _ in 0..100 {
        let i = s2
            .select(&Invocation::new("findAll"), &[], &mut rng)
            .unwrap();
        assert_eq!(s2.endpoints()[i].instance.port(), 6);
    }
    // The cache file holds the new weights.
    let saved = loop {
        let found = cache::load(&cache, &ServiceKey::new("com.foo.Bar")).unwrap();
        if found
            .as_ref()
            .is_some_and(|l| l.iter().any(|i| i.weight() == 30))
        {
            break found.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(saved.len(), 6);
    std::fs::remove_file(&cache).ok();
    // Enabling port 2 is not a weight change: rebuilt, now routable.
    dir.apply(Update::add(vec![node(2, 100, true)]));
    let s3 = settle(&dir, 3).await;
    assert!(!Arc::ptr_eq(&s2.routes, &s3.routes));
    assert_eq!(s3.endpoints().len(), 6);
    // The same address twice in one batch: the later entry counts.
    let epoch = dir.load().epoch();
    dir.apply(Update::add(vec![node(1, 7, true), node(1, 8, true)]));
    let s4 = settle(&dir, epoch + 1).await;
    assert_eq!(s4.endpoints()[0].instance.weight(), 8);
    // An override rule that changes a weight is patched in too; clearing it restores it.
    let epoch = dir.load().epoch();
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![Configurator::for_address("10.0.0.1:3").param("weight", "9")],
    });
    let s5 = settle(&dir, epoch + 1).await;
    assert!(Arc::ptr_eq(&s4.routes, &s5.routes));
    assert_eq!(s5.endpoints()[2].instance.weight(), 9);
    assert_eq!(s5.instances()[2].weight(), 9);
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![],
    });
    let s6 = settle(&dir, epoch + 2).await;
    assert!(Arc::ptr_eq(&s4.routes, &s6.routes));
    assert_eq!(s6.endpoints()[2].instance.weight(), 100);
    // An override that disables an instance is a routing change: rebuilt.
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![Configurator::for_address("10.0.0.1:3").param("disabled", "true")],
    });
    let s7 = settle(&dir, epoch + 3).await;
    assert!(!Arc::ptr_eq(&s6.routes, &s7.routes));
    assert_eq!(s7.endpoints().len(), 5);
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![],
    });
    let s4 = settle(&dir, epoch + 4).await;
    // Re-sending what the directory holds publishes nothing.
    dir.apply(Update::add(vec![node(1, 8, true)]));
    dir.apply(Update::reset(s4.instances().iter().map(|i| (**i).clone())));
    // The ninth and tenth updates of this directory.
    applied(&dir, 10).await;
    assert_eq!(dir.load().epoch(), s4.epoch());
}

/// A registry change that an override rule hides publishes nothing, yet the cache file
/// (what the registry says) follows it, on both the patch and the rebuild path.
#[tokio::test]
async fn a_change_hidden_by_an_override_updates_only_the_cache_file() {
    let cache =
        std::env::temp_dir().join(format!("switchman-dir-hidden-{}.json", std::process::id()));
    std::fs::remove_file(&cache).ok();
    let dir = RegistryDirectory::spawn(cfg().cache_file(&cache), None);
    dir.apply(Update::reset(vec![inst(1, 100), inst(2, 100)]));
    settle(&dir, 1).await;
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![Configurator::for_address("10.0.0.1:1").param("weight", "5")],
    });
    settle(&dir, 2).await;
    let cached_weight = |w: u32| {
        let cache = cache.clone();
        async move {
            for _ in 0..500 {
                let found = cache::load(&cache, &ServiceKey::new("com.foo.Bar")).unwrap();
                if found.is_some_and(|l| l.iter().any(|i| i.port() == 1 && i.weight() == w)) {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            false
        }
    };
    // Patch path (a delta), then rebuild path (a whole list).
    dir.apply(Update::add(vec![inst(1, 50)]));
    assert!(cached_weight(50).await);
    dir.apply(Update::reset(vec![inst(1, 60), inst(2, 100)]));
    assert!(cached_weight(60).await);
    assert_eq!(dir.load().epoch(), 2, "nothing visible changed");
    assert_eq!(dir.load().instances()[0].weight(), 5);
    std::fs::remove_file(&cache).ok();
}

/// Random pushes (resets, deltas, removals; weight, zone and availability changes) against
/// a model of what the registry says: after each one the snapshot lists exactly the
/// model's instances in address order, routes only to available ones, and keeps the live
/// stats of every address that stayed. Exercises the patch and the rebuild paths alike.
#[tokio::test]
async fn random_pushes_match_a_model_of_the_registry() {
    let chain = RouterChain::new()
        .with_rule("svc.condition-router", "method = find* => zone = z1")
        .unwrap();
    let dir = RegistryDirectory::spawn(cfg().router(chain), None);
    let mut rng = fastrand::Rng::with_seed(42);
    let mut model: BTreeMap<u16, Instance> = BTreeMap::new();
    let make = |rng: &mut fastrand::Rng, port: u16| {
        let zone = if rng.bool() { "z1" } else { "z2" };
        Instance::builder("10.0.0.1", port)
            .zone(zone)
            .param("zone", zone)
            .weight(rng.u32(0..=3) * 50)
            .enabled(rng.u8(..10) != 0)
            .build()
    };
    let mut stats_of: BTreeMap<u16, Arc<InstanceStats>> = BTreeMap::new();
    let mut overrides: Option<(u16, u32)> = None;
    // A marker instance that is always there; bumping its weight is a change that tells
    // when a step that changed nothing has been processed.
    let marker = |weight: u32| Instance::builder("10.0.0.2", 1).weight(weight).build();
    let mut marker_weight = 1;
    dir.apply(Update::reset(vec![marker(marker_weight)]));
    settle(&dir, 1).await;
    let expected = |model: &BTreeMap<u16, Instance>, overrides: Option<(u16, u32)>| {
        model
            .values()
            .map(|i| {
                let weight = match overrides {
                    Some((port, weight)) if port == i.port() => weight,
                    _ => i.weight(),
                };
                (i.port(), weight, i.enabled(), i.zone().map(str::to_string))
            })
            .collect::<Vec<_>>()
    };
    let mut last_state = expected(&model, overrides);
    let mut changed_steps = 0;
    for step in 0..400 {
        let epoch = dir.load().epoch();
        match rng.u8(..10) {
            0 => {
                let list: Vec<Instance> = (0..rng.u16(1..40))
                    .map(|_| {
                        let port = rng.u16(1000..1040);
                        make(&mut rng, port)
                    })
                    .collect();
                model = list.iter().map(|i| (i.port(), i.clone())).collect();
                let mut list = list;
                list.push(marker(marker_weight));
                dir.apply(Update::reset(list));
            }
            1 if !model.is_empty() => {
                let ports: Vec<u16> = model.keys().copied().collect();
                let gone = ports[rng.usize(..ports.len())];
                model.remove(&gone);
                dir.apply(Update::Remove(vec![format!("10.0.0.1:{gone}")]));
            }
            7 if !model.is_empty() => {
                // An override of one weight (the model tracks it as the effective weight).
                let ports: Vec<u16> = model.keys().copied().collect();
                let port = ports[rng.usize(..ports.len())];
                let weight = rng.u32(0..=3) * 50;
                overrides = Some((port, weight));
                dir.apply(Update::Configurators {
                    source: "ops".into(),
                    rules: vec![
                        Configurator::for_address(&format!("10.0.0.1:{port}"))
                            .param("weight", &weight.to_string()),
                    ],
                });
            }
            8 => {
                overrides = None;
                dir.apply(Update::Configurators {
                    source: "ops".into(),
                    rules: vec![],
                });
            }
            2..=6 if !model.is_empty() => {
                // Weight-only changes of a few existing instances.
                let ports: Vec<u16> = model.keys().copied().collect();
                let mut delta = Vec::new();
                for _ in 0..rng.usize(1..4) {
                    let port = ports[rng.usize(..ports.len())];
                    let old = &model[&port];
                    let changed = Instance::builder("10.0.0.1", port)
                        .zone(old.zone().unwrap())
                        .param("zone", old.zone().unwrap())
                        .weight(rng.u32(0..=3) * 50)
                        .enabled(old.enabled())
                        .build();
                    model.insert(port, changed.clone());
                    delta.push(changed);
                }
                dir.apply(Update::add(delta));
            }
            _ => {
                let port = rng.u16(1000..1040);
                let inst = make(&mut rng, port);
                model.insert(port, inst.clone());
                dir.apply(Update::add(vec![inst]));
            }
        }
        let state = expected(&model, overrides);
        let snap = if state != last_state {
            changed_steps += 1;
            settle(&dir, epoch + 1).await
        } else {
            marker_weight += 1;
            dir.apply(Update::add(vec![marker(marker_weight)]));
            let w = marker_weight;
            dir.wait_until(Duration::from_secs(5), |s| {
                s.instances()
                    .iter()
                    .any(|i| i.host() == "10.0.0.2" && i.weight() == w)
            })
            .await
            .unwrap()
        };
        last_state = state;
        let listed: Vec<(u16, u32, bool)> = snap
            .instances()
            .iter()
            .filter(|i| i.host() == "10.0.0.1")
            .map(|i| (i.port(), i.weight(), i.enabled()))
            .collect();
        let effective_weight = |i: &Instance| match overrides {
            Some((port, weight)) if port == i.port() => weight,
            _ => i.weight(),
        };
        let want: Vec<(u16, u32, bool)> = model
            .values()
            .map(|i| (i.port(), effective_weight(i), i.enabled()))
            .collect();
        assert_eq!(listed, want, "step {step}");
        for (i, ep) in snap.endpoints().iter().enumerate() {
            assert!(ep.instance.is_available());
            assert_eq!(snap.index_of(ep.instance.address()), Some(i));
            if ep.instance.host() == "10.0.0.1" {
                let port = ep.instance.port();
                assert_eq!(
                    ep.instance.weight(),
                    effective_weight(&model[&port]),
                    "step {step}"
                );
                let same = stats_of.entry(port).or_insert_with(|| ep.stats.clone());
                assert!(
                    Arc::ptr_eq(same, &ep.stats),
                    "step {step}: stats of {port} lost"
                );
            }
        }
        let routable = snap.endpoints().len();
        assert_eq!(
            routable,
            model.values().filter(|i| i.is_available()).count() + 1,
            "step {step}"
        );
        // Stats of addresses that left are forgotten (a returning address starts fresh).
        stats_of.retain(|port, _| model.get(port).is_some_and(|i| i.is_available()));
        let find = Invocation::new("findAll");
        // With an available z1 instance, find* goes to z1 (otherwise the non-forced
        // condition rule falls back to every instance).
        let z1 = model
            .values()
            .any(|i| i.is_available() && i.zone() == Some("z1"));
        let i = snap.select(&find, &[], &mut rng).unwrap();
        let picked = &snap.endpoints()[i].instance;
        assert!(
            !z1 || picked.zone() == Some("z1"),
            "step {step}: {picked:?}"
        );
    }
    assert!(changed_steps > 200, "{changed_steps}");
}

/// Readers running while the owner publishes many snapshots never see the epoch go
/// backwards and always see a whole snapshot (its instance count matches its epoch).
#[test]
fn concurrent_readers_see_whole_snapshots_in_order() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = Arc::new(RegistryDirectory::spawn(cfg(), None));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut readers = Vec::new();
        for _ in 0..3 {
            let dir = dir.clone();
            let stop = stop.clone();
            readers.push(std::thread::spawn(move || {
                let mut last = 0;
                let mut seen = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let s = dir.load();
                    assert!(
                        s.epoch() >= last,
                        "epoch went back from {last} to {}",
                        s.epoch()
                    );
                    last = s.epoch();
                    // Update k (epoch k) lists exactly k instances whose weights are all k.
                    if s.epoch() > 0 {
                        assert_eq!(s.instances().len() as u64, s.epoch());
                        assert!(s.instances().iter().all(|i| i.weight() as u64 == s.epoch()));
                    }
                    seen += 1;
                }
                seen
            }));
        }
        for k in 1..=200u32 {
            dir.apply(Update::reset((0..k).map(|p| inst(p as u16 + 1, k))));
            dir.wait_until(Duration::from_secs(5), |s| s.epoch() == k as u64)
                .await
                .unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
    });
}

/// Consecutive weight patches bring the snapshot before the last one up to date in place
/// (when nobody holds it) or copy the last one (when a reader still holds the older one):
/// either way every snapshot holds exactly the weights pushed, in both arrays, and a snapshot
/// a reader holds never changes under it.
#[tokio::test]
async fn consecutive_patches_reuse_the_spare_snapshot_and_stay_exact() {
    let dir = RegistryDirectory::spawn(cfg(), None);
    // Port 3 is disabled: in `instances()` only, so the two arrays' positions differ.
    let node = |port: u16, weight: u32| {
        Instance::builder("10.0.0.1", port)
            .weight(weight)
            .enabled(port != 3)
            .build()
    };
    let mut weights: Vec<u32> = vec![100; 8];
    dir.apply(Update::reset((1..=8).map(|p| node(p, 100))));
    settle(&dir, 1).await;
    let mut rng = fastrand::Rng::with_seed(5);
    let mut held: Option<(Arc<Snapshot>, Vec<u32>)> = None;
    for round in 0..60u32 {
        // One to three ports get a new weight (port 3 included: not routable).
        let changed: Vec<u16> = (0..rng.usize(1..=3)).map(|_| rng.u16(1..=8)).collect();
        let delta: Vec<Instance> = changed
            .iter()
            .map(|&p| {
                let w = 1 + rng.u32(0..500);
                weights[p as usize - 1] = w;
                node(p, w)
            })
            .collect();
        let epoch = dir.load().epoch();
        dir.apply(Update::add(delta));
        let snap = settle(&dir, epoch + 1).await;
        assert_eq!(snap.epoch(), epoch + 1, "round {round}");
        let all: Vec<u32> = snap.instances().iter().map(|i| i.weight()).collect();
        assert_eq!(all, weights, "round {round}: instances()");
        let routable: Vec<(u16, u32)> = snap
            .endpoints()
            .iter()
            .map(|e| (e.instance.port(), e.instance.weight()))
            .collect();
        let want: Vec<(u16, u32)> = (1..=8u16)
            .filter(|&p| p != 3)
            .map(|p| (p, weights[p as usize - 1]))
            .collect();
        assert_eq!(routable, want, "round {round}: endpoints()");
        assert!(
            snap.tables_match_full_build(),
            "round {round}: patched balancer tables"
        );
        for (e, i) in snap
            .endpoints()
            .iter()
            .zip(snap.instances().iter().filter(|i| i.port() != 3))
        {
            assert!(
                Arc::ptr_eq(&e.instance, i),
                "round {round}: both arrays share the instance"
            );
        }
        // Every seventh round a reader keeps a snapshot for a few rounds: it must not change.
        if let Some((old, seen)) = &held {
            let now: Vec<u32> = old.instances().iter().map(|i| i.weight()).collect();
            assert_eq!(&now, seen, "round {round}: a held snapshot changed");
            if round % 7 == 3 {
                held = None;
            }
        } else if round % 7 == 0 {
            held = Some((snap.clone(), all));
        }
    }
}

/// More candidate sets than a route table precomputes: those calls are routed per call, and a
/// set seen before picks from the table kept for it in this snapshot (the balancer prepares
/// once per set), not from one built per call (#26: registry data must not make every call
/// rebuild a table or a ring).
#[tokio::test]
async fn per_call_subsets_reuse_their_tables() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use switchman_loadbalance::{Endpoint, LoadBalance, Picker, RandomBalance};

    #[derive(Debug)]
    struct Counting(Arc<AtomicUsize>, RandomBalance);
    impl LoadBalance for Counting {
        fn name(&self) -> &str {
            "random"
        }
        fn prepare(
            &self,
            endpoints: &[Endpoint],
            members: Arc<[u32]>,
            now: SystemTime,
        ) -> Box<dyn Picker> {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.prepare(endpoints, members, now)
        }
    }

    let n = switchman_router::MAX_SUBSETS + 40;
    let rule: String = (0..n)
        .map(|i| format!("method = m{i} => id != {i}\n"))
        .collect();
    let chain = switchman_router::RouterChain::new()
        .with_rule("com.foo.Bar::.condition-router", &rule)
        .unwrap();
    let prepared = Arc::new(AtomicUsize::new(0));
    let balancer = Arc::new(Counting(prepared.clone(), RandomBalance));
    let dir = RegistryDirectory::spawn(cfg().router(chain).balancer(balancer), None);
    dir.apply(Update::reset((0..n).map(|i| {
        Instance::builder(format!("10.0.{}.{}", i / 200, i % 200 + 1), 20880)
            .param("id", &i.to_string())
            .build()
    })));
    let s = settle(&dir, 1).await;
    let mut rng = fastrand::Rng::with_seed(7);
    let per_call: Vec<usize> = (0..n)
        .filter(|i| {
            s.route(&Invocation::new(format!("m{i}")), &mut rng)
                .unwrap()
                .subset()
                .is_none()
        })
        .collect();
    assert!(!per_call.is_empty(), "some calls are routed per call");
    let before = prepared.load(Ordering::SeqCst);
    for &m in per_call.iter().take(3) {
        for _ in 0..50 {
            let i = s
                .select(&Invocation::new(format!("m{m}")), &[], &mut rng)
                .unwrap();
            assert_ne!(
                s.endpoints()[i].instance.param("id"),
                Some(m.to_string().as_str())
            );
        }
    }
    let sets = per_call.len().min(3);
    assert_eq!(
        prepared.load(Ordering::SeqCst) - before,
        sets,
        "one table per per-call set, not one per call"
    );
}

/// An adapter's decision (`Update::Lists`) is kept for `lists()` without a snapshot of its own,
/// and shown only once the updates sent before it are published.
#[tokio::test]
async fn an_adapters_decision_is_kept_without_a_new_snapshot() {
    use crate::migration::{Lists, MigrationStep, Source};
    let dir = RegistryDirectory::spawn(cfg(), None);
    assert_eq!(dir.lists(), None);
    let decided = Lists {
        step: Some(MigrationStep::ForceInterface),
        interface_level: 1,
        app_level: 2,
        using: Source::Interface,
    };
    dir.apply(Update::reset(vec![inst(1, 100)]));
    dir.apply(Update::Lists(decided));
    applied(&dir, 2).await;
    assert_eq!(dir.lists(), Some(decided));
    assert_eq!(dir.load().instances().len(), 1, "the list sent before it");
    let epoch = dir.load().epoch();
    let later = Lists {
        app_level: 0,
        ..decided
    };
    dir.apply(Update::Lists(later));
    applied(&dir, 3).await;
    assert_eq!(dir.lists(), Some(later));
    assert_eq!(dir.load().epoch(), epoch, "no snapshot for a decision");
}

/// Waits until the directory's fallback satisfies `ready`.
async fn fallback_until(
    dir: &RegistryDirectory,
    mut ready: impl FnMut(Option<&crate::contracts::FallbackSnapshot>) -> bool,
) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while !ready(dir.fallback().as_ref()) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the fallback directory follows");
}

/// `Update::Fallback` (APPLICATION_FIRST with the application level in use): a second
/// snapshot of the interface-level list, under the same override rules (those set before
/// and after it started) and routing rules, with its proportion; `None` stops it.
#[tokio::test]
async fn a_fallback_list_gets_a_snapshot_of_its_own_under_the_same_rules() {
    use crate::migration::Fallback;
    let dir = RegistryDirectory::spawn(cfg(), None);
    dir.apply(Update::reset(vec![inst(1, 100)]));
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![Configurator::for_address("10.0.0.1:2").param("weight", "7")],
    });
    settle(&dir, 1).await;
    assert!(dir.fallback().is_none());
    let fallback = |ports: &[u16], proportion| {
        Update::Fallback(Some(Fallback {
            instances: ports.iter().map(|&p| Arc::new(inst(p, 100))).collect(),
            proportion,
        }))
    };
    dir.apply(fallback(&[2, 3], 30));
    fallback_until(&dir, |f| {
        f.is_some_and(|f| f.snapshot.endpoints().len() == 2)
    })
    .await;
    let f = dir.fallback().unwrap();
    assert_eq!(f.proportion, 30);
    assert_eq!(
        f.snapshot.instances()[0].weight(),
        7,
        "the override set before"
    );
    assert_eq!(
        dir.load().endpoints().len(),
        1,
        "the directory's own list is unchanged"
    );
    // An override set now reaches the fallback too; a new list and proportion replace the old.
    dir.apply(Update::Configurators {
        source: "zk".into(),
        rules: vec![Configurator::for_address("10.0.0.1:3").param("disabled", "true")],
    });
    dir.apply(fallback(&[2, 3, 4], 100));
    fallback_until(&dir, |f| {
        f.is_some_and(|f| f.proportion == 100 && f.snapshot.instances().len() == 3)
    })
    .await;
    let f = dir.fallback().unwrap();
    let ports: Vec<u16> = f
        .snapshot
        .endpoints()
        .iter()
        .map(|e| e.instance.port())
        .collect();
    assert_eq!(ports, vec![2, 4], "3 disabled by the later override");
    assert_eq!(
        f.snapshot.instances()[0].weight(),
        100,
        "the earlier override replaced"
    );
    // A routing rule applies to both.
    dir.apply(Update::Rule {
        key: "com.foo.Bar::.condition-router".into(),
        text: Some("method = m => port = 4".into()),
    });
    fallback_until(&dir, |f| {
        f.is_some_and(|f| {
            let mut rng = fastrand::Rng::with_seed(1);
            f.snapshot
                .select(&Invocation::new("m"), &[], &mut rng)
                .is_ok_and(|i| f.snapshot.endpoints()[i].instance.port() == 4)
        })
    })
    .await;
    dir.apply(Update::Fallback(None));
    fallback_until(&dir, |f| f.is_none()).await;
}
