//! `Reference` over a static providers file: the balancer settings take effect.

use serde_json::json;
use switchman::Reference;
use switchman::cluster::provider::{HttpProvider, ProviderReply};

async fn provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_| {
        Box::pin(async move { ProviderReply::Ok(json!(name)) })
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadbalance_by_name_applies() {
    let (a, b) = (provider("a").await, provider("b").await);
    let dir = std::env::temp_dir().join(format!("switchman-ref-static-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    std::fs::write(
        &file,
        format!(
            "- http://{}/demo.Echo?weight=100\n- http://{}/demo.Echo?weight=100\n",
            a.addr(),
            b.addr()
        ),
    )
    .unwrap();
    let echo = Reference::new("demo.Echo")
        .registry(file.to_str().unwrap())
        .loadbalance("roundrobin")
        .connect()
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(echo.call("echo", json!([])).await.unwrap());
    }
    // Round robin alternates (random would repeat one with probability 31/32).
    for pair in seen.windows(2) {
        assert_ne!(pair[0], pair[1], "{seen:?}");
    }
    assert_eq!((a.hits(), b.hits()), (3, 3));
    std::fs::remove_dir_all(&dir).ok();
}
