//! In a process that installed no rustls crypto provider (its own test binary, one test), the
//! HTTP invoker builds and calls without panicking and without installing one process-wide.

use std::time::Duration;

use serde_json::json;
use switchman_cluster::HttpInvoker;
use switchman_cluster::provider::{HttpProvider, ProviderReply};
use switchman_cluster::triple::rustls;
use switchman_core::{Instance, Invocation, Invoker, ServiceKey};

#[tokio::test]
async fn a_cleartext_invoker_needs_no_process_wide_crypto_provider() {
    assert!(rustls::crypto::CryptoProvider::get_default().is_none());
    let invoker = HttpInvoker::new();
    let p = HttpProvider::serve("127.0.0.1:0".parse().unwrap(), |_req| {
        Box::pin(async { ProviderReply::Ok(json!("plain")) })
    })
    .await
    .unwrap();
    let target = Instance::builder("127.0.0.1", p.addr().port())
        .service(ServiceKey::new("com.foo.Plain"))
        .build();
    let out = invoker
        .invoke(&target, &Invocation::new("m"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(out, json!("plain"));
    assert!(
        rustls::crypto::CryptoProvider::get_default().is_none(),
        "nothing installed process-wide"
    );
}
