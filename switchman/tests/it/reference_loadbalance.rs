//! `Reference::loadbalance` is Dubbo's reference-level `loadbalance`: it beats the providers'
//! service-level `loadbalance`, not their `{method}.loadbalance` (issue #16 item 5).

use serde_json::{Value, json};
use switchman::Reference;
use switchman::cluster::provider::{HttpProvider, ProviderReply};

async fn provider(name: &'static str) -> HttpProvider {
    HttpProvider::serve("127.0.0.1:0".parse().unwrap(), move |_| {
        Box::pin(async move { ProviderReply::Ok(json!(name)) })
    })
    .await
    .unwrap()
}

/// Who answered `n` calls of `method` with the one argument `arg`.
async fn answers(r: &Reference, method: &str, arg: Value, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(r.call(method, json!([arg.clone()])).await.unwrap());
    }
    out
}

fn alternates(seen: &[Value]) -> bool {
    seen.windows(2).all(|w| w[0] != w[1])
}

fn one_answer(seen: &[Value]) -> bool {
    seen.windows(2).all(|w| w[0] == w[1])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_references_loadbalance_ranks_between_provider_method_and_provider_service() {
    let (a, b) = (provider("a").await, provider("b").await);
    let dir = std::env::temp_dir().join(format!("switchman-ref-lb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("providers.yaml");
    let params = "loadbalance=consistenthash&find.loadbalance=consistenthash";
    std::fs::write(
        &file,
        format!(
            "- http://{}/demo.Echo?{params}\n- http://{}/demo.Echo?{params}\n",
            a.addr(),
            b.addr()
        ),
    )
    .unwrap();
    let registry = file.to_str().unwrap();

    // Nothing on the consumer: the providers' consistenthash, one key, one provider.
    let plain = Reference::new("demo.Echo")
        .registry(registry)
        .connect()
        .await
        .unwrap();
    let seen = answers(&plain, "echo", json!("k1"), 8).await;
    assert!(one_answer(&seen), "{seen:?}");
    assert_eq!(
        plain.cluster().settings("echo").loadbalance_for(0),
        Some("consistenthash")
    );

    // The reference's roundrobin beats the providers' service value ...
    let rr = Reference::new("demo.Echo")
        .registry(registry)
        .loadbalance("roundrobin")
        .connect()
        .await
        .unwrap();
    let seen = answers(&rr, "echo", json!("k1"), 8).await;
    assert!(
        alternates(&seen),
        "reference beats provider service: {seen:?}"
    );
    // ... and not their method value.
    let seen = answers(&rr, "find", json!("k1"), 8).await;
    assert!(
        one_answer(&seen),
        "provider method beats reference: {seen:?}"
    );
    assert_eq!(
        rr.cluster().settings("find").loadbalance_for(0),
        Some("consistenthash")
    );
    std::fs::remove_dir_all(&dir).ok();
}
