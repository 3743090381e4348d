//! A providers node whose children do not fit ZooKeeper's default packet limit
//! (`jute.maxbuffer`, 0xfffff bytes), on the shared server of `scripts/test`.
//!
//! The limit is a client-side one for reads: ZooKeeper 3.8 checks what it *reads* against its
//! `jute.maxbuffer` (requests: a node's data, a `multi`), but sends a `getChildren` reply of
//! any size. The Java client (Curator, Java Dubbo, `zkCli.sh`) refuses a reply of
//! `jute.maxbuffer` bytes or more ("Packet len N is out of range!") and reconnects, again and
//! again, unless its JVM runs with a larger `-Djute.maxbuffer`. zookeeper-client (Rust) reads
//! a reply of any length, so Switchman lists such a node; this test holds it to that at the
//! smallest fleet that crosses the limit, and to a 1% change of that fleet being pushed.
//! The timed figures up to 20,000 providers are `benches/big_fleet.rs`.

use std::collections::HashSet;
use std::time::Duration;

use switchman_core::url::encode_component;
use switchman_core::{ServiceKey, Url};
use switchman_discovery::zookeeper::ZookeeperRegistry;
use switchman_discovery::{DirectoryConfig, RegistryDirectory, Snapshot};
use switchman_integration_tests::ports::FAKE_PORTS;
use switchman_integration_tests::zk_server::raw_client;
use switchman_integration_tests::{unique, zookeeper};
use zookeeper_client as zk;

const WAIT: Duration = Duration::from_secs(30);

/// ZooKeeper's default `jute.maxbuffer` (both sides): the Java client refuses a reply whose
/// length is this or more.
const JUTE_MAXBUFFER: usize = 0xfffff;

/// Fake provider `i`: a port of the fake band on 127.0.0.1, 127.0.0.2, ... (never dialled).
fn addr(i: usize) -> (String, u16) {
    let ports = usize::from(FAKE_PORTS.end - FAKE_PORTS.start);
    (
        format!("127.0.0.{}", 1 + i / ports),
        FAKE_PORTS.start + (i % ports) as u16,
    )
}

/// The node Java Dubbo 3.3 writes for provider `i` (about 580 bytes).
fn node(iface: &str, i: usize) -> String {
    let (host, port) = addr(i);
    encode_component(&format!(
        "dubbo://{host}:{port}/{iface}?anyhost=true&application=big-fleet-provider\
         &background=false&deprecated=false&dubbo=2.0.2&dynamic=true&executor-management-mode=isolation\
         &file-cache=true&generic=false&interface={iface}\
         &methods=add,count,echo,fail,getUser,nothing,ping,save,sayHello,slow,whoami\
         &pid={}&prefer.serialization=hessian2,fastjson2&release=3.3.6&service-name-mapping=true\
         &side=provider&timestamp=1700000000000",
        10000 + i
    ))
}

/// The length of the `getChildren` reply listing `names`, as the Java client checks it: the
/// reply header (xid, zxid, err), the vector's count, each name with its length.
fn reply_len(names: &[String]) -> usize {
    16 + 4 + names.iter().map(|n| 4 + n.len()).sum::<usize>()
}

async fn create_all(client: &zk::Client, parent: &str, names: &[String]) {
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let paths: Vec<String> = names.iter().map(|n| format!("{parent}/{n}")).collect();
    // Each request goes out when its future is made: all in flight at once.
    let pending: Vec<_> = paths.iter().map(|p| client.create(p, b"", &opts)).collect();
    for (p, f) in paths.iter().zip(pending) {
        match f.await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => panic!("create {p}: {e}"),
        }
    }
}

async fn delete_all(client: &zk::Client, parent: &str, names: &[String]) {
    let paths: Vec<String> = names.iter().map(|n| format!("{parent}/{n}")).collect();
    let pending: Vec<_> = paths.iter().map(|p| client.delete(p, None)).collect();
    for (p, f) in paths.iter().zip(pending) {
        match f.await {
            Ok(()) | Err(zk::Error::NoNode) => {}
            Err(e) => panic!("delete {p}: {e}"),
        }
    }
}

fn addrs(range: std::ops::Range<usize>) -> HashSet<String> {
    range
        .map(|i| {
            let (h, p) = addr(i);
            format!("{h}:{p}")
        })
        .collect()
}

/// Exactly the addresses `want`.
fn exactly(s: &Snapshot, want: &HashSet<String>) -> bool {
    s.instances().len() == want.len() && s.instances().iter().all(|i| want.contains(i.address()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_node_over_the_default_jute_maxbuffer_is_read_and_its_changes_pushed() {
    let iface = unique("it.zk.BigFleet").replace('-', "_");
    let client = raw_client(&zookeeper(), WAIT).await;
    let parent = format!("/dubbo/{iface}/providers");
    client
        .mkdir(
            &parent,
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
    // The smallest fleet whose listing a default Java client refuses.
    let mut names = Vec::new();
    while reply_len(&names) < JUTE_MAXBUFFER {
        names.push(node(&iface, names.len()));
    }
    let n = names.len();
    assert!(
        (1700..1900).contains(&n),
        "about 1,800 Java-sized provider URLs fill 1 MiB, got {n}"
    );
    create_all(&client, &parent, &names).await;
    let listed = client.list_children(&parent).await.unwrap();
    assert_eq!(listed.len(), n, "the server sends the whole list");

    let url = format!("zookeeper://{}?app-level=false", zookeeper());
    let reg = ZookeeperRegistry::from_url(&Url::parse(&url).unwrap()).unwrap();
    let dir = RegistryDirectory::subscribe(&reg, DirectoryConfig::new(ServiceKey::new(&iface)))
        .await
        .unwrap();
    let all = addrs(0..n);
    dir.wait_until(WAIT, |s| exactly(s, &all))
        .await
        .unwrap_or_else(|e| panic!("{n} providers ({} bytes) listed: {e}", reply_len(&names)));

    // 1% of the fleet leaves, as many new ones come: pushed as one more list of the big node.
    let k = n / 100;
    let gone: Vec<String> = names[..k].to_vec();
    let added: Vec<String> = (n..n + k).map(|i| node(&iface, i)).collect();
    tokio::join!(
        delete_all(&client, &parent, &gone),
        create_all(&client, &parent, &added)
    );
    let now = addrs(k..n + k);
    dir.wait_until(WAIT, |s| exactly(s, &now))
        .await
        .expect("the 1% change is visible");

    drop(dir);
    delete_all(&client, &parent, &names[k..]).await;
    delete_all(&client, &parent, &added).await;
    let _ = client.delete(&parent, None).await;
    let _ = client.delete(&format!("/dubbo/{iface}"), None).await;
}
