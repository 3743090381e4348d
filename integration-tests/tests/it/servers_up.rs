//! The real servers started by `scripts/test` are up and reachable from Rust with the official
//! client crates: a ZooKeeper create/read and a Nacos register/list through nacos-sdk.

use std::time::Duration;

use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder, ServiceInstance};
use nacos_sdk::api::props::ClientProps;
use switchman_integration_tests::{nacos, unique, zookeeper};
use zookeeper_client as zk;

#[tokio::test]
async fn zookeeper_create_and_read() {
    let client = tokio::time::timeout(
        Duration::from_secs(10),
        zk::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(&zookeeper()),
    )
    .await
    .expect("connect within 10 s")
    .expect("connect to ZooKeeper");
    let path = format!("/{}", unique("switchman-it"));
    let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    client
        .create(&path, b"hello from switchman", &options)
        .await
        .expect("create");
    let (data, stat) = client.get_data(&path).await.expect("read back");
    assert_eq!(data, b"hello from switchman");
    assert_eq!(stat.data_length, data.len() as i32);
    client.delete(&path, None).await.expect("delete");
    assert!(matches!(
        client.get_data(&path).await,
        Err(zk::Error::NoNode)
    ));
}

async fn naming(cache: &std::path::Path) -> NamingService {
    let props = ClientProps::new()
        .server_addr(nacos())
        .namespace("")
        .app_name("switchman-it")
        // Explicit config wins over stray NACOS_CLIENT_* variables or a .env file.
        .env_first(false)
        .cache_dir(cache.to_path_buf());
    NamingServiceBuilder::new(props)
        .build()
        .await
        .expect("nacos-sdk connects to rnacos")
}

#[tokio::test]
async fn nacos_register_and_list() {
    let cache = std::env::temp_dir().join(unique("switchman-nacos-cache"));
    let ns = naming(&cache).await;
    let service = unique("switchman.it.Echo");
    let instance = ServiceInstance {
        ip: "127.0.0.1".into(),
        port: 18080,
        weight: 2.5,
        metadata: [("protocol".to_string(), "http".to_string())]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    ns.register_instance(service.clone(), None, instance)
        .await
        .expect("register");

    // rnacos batches pushes (0.1–1 s): poll the list for up to 5 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let listed = loop {
        let list = ns
            .get_all_instances(service.clone(), None, vec![], false)
            .await
            .expect("list");
        if !list.is_empty() || tokio::time::Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].ip.as_str(), listed[0].port),
        ("127.0.0.1", 18080)
    );
    assert_eq!(listed[0].weight, 2.5);
    assert_eq!(
        listed[0].metadata.get("protocol").map(String::as_str),
        Some("http")
    );

    // The open API sees the same instance.
    let url = format!(
        "http://{}/nacos/v1/ns/instance/list?serviceName={service}",
        nacos()
    );
    // reqwest's `rustls-no-provider` (the workspace's HTTPS choice) needs a process-wide
    // crypto provider for a default client.
    let _ = switchman_cluster::triple::rustls::crypto::ring::default_provider().install_default();
    let body: serde_json::Value = reqwest::get(url)
        .await
        .expect("open API")
        .json()
        .await
        .expect("JSON");
    let hosts = body["hosts"].as_array().cloned().unwrap_or_default();
    assert_eq!(hosts.len(), 1, "{body}");
    assert_eq!(hosts[0]["port"], 18080);
    std::fs::remove_dir_all(&cache).ok();
}
