//! Application-level discovery of TLS providers (#30 item 2): the consumer fetches each
//! instance's `MetadataInfo` from its MetadataService with its own TLS settings, as its calls
//! go. A real Java Dubbo 3.3 Triple provider with TLS on (`peers/java --tls-cert-chain`,
//! Dubbo's `SslConfig`) registered only at application level (`register-mode=instance`) in the
//! shared ZooKeeper (`SWITCHMAN_ZK`): a `Reference` with the CA finds it and calls it; one
//! without TLS settings fails with an error saying the MetadataService serves TLS, not a hang.
//! Switchman's own Triple provider over TLS (the `switchman provider --protocol tri
//! --tls-cert` code: `serve_echo` with TLS, `ssl-enabled=true` registered) is found and called
//! the same way. Every test uses its own application, group and certificates.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use switchman::Reference;
use switchman_cluster::triple::{
    EchoOptions, SSL_ENABLED, TripleServer, java_instance, serve_echo,
};
use switchman_core::{ErrorKind, ServiceKey};
use switchman_discovery::registrar_from_url;
use switchman_integration_tests::java_peer::{self, DEMO_SERVICE, JavaProvider, ProviderOptions};
use switchman_integration_tests::{unique, zookeeper};

/// How long a consumer waits for the providers.
const WAIT: Duration = Duration::from_secs(30);

/// A test-only CA (ECDSA P-256, valid from 2020 to 2120), and a certificate for 127.0.0.1 and
/// localhost it signed with its unencrypted PKCS#8 key: the switchman crate's tests have no
/// certificate generator, and these are for loopback tests only.
const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBmDCCAT6gAwIBAgIUE7wyH1jEs49WEGPmARe6H2cuV9cwCgYIKoZIzj0EAwIw\n\
KTEnMCUGA1UEAwwec3dpdGNobWFuIHRlc3QgQ0EgKHRlc3RzIG9ubHkpMCAXDTIw\n\
MDEwMTAwMDAwMFoYDzIxMjAwMTAxMDAwMDAwWjApMScwJQYDVQQDDB5zd2l0Y2ht\n\
YW4gdGVzdCBDQSAodGVzdHMgb25seSkwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n\
AAQJRN31lC0E2f0+n3lBxLUV72ymN0vuSN4ey6SUS7hthtUVeLy/zdvm/+H6OX9R\n\
Epf1XLLUH11WtY14yb9rU1zFo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB\n\
/wQEAwIBBjAdBgNVHQ4EFgQUlGJN9NLcPGVUlUGh7xpu/MdrA2IwCgYIKoZIzj0E\n\
AwIDSAAwRQIhAI868smq/ibXypsn+sdz9RN09JddFiYwFK47W6iwzuOpAiBeLN7V\n\
mGAGANFjGSK8Z+2wtQxCHc7ag0x0JctuepJ+Og==\n\
-----END CERTIFICATE-----\n\
";
const SERVER_PEM: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBvjCCAWOgAwIBAgIURdNFyoIEiE7vi4mQx1QOosd1XZMwCgYIKoZIzj0EAwIw\n\
KTEnMCUGA1UEAwwec3dpdGNobWFuIHRlc3QgQ0EgKHRlc3RzIG9ubHkpMCAXDTIw\n\
MDEwMTAwMDAwMFoYDzIxMjAwMTAxMDAwMDAwWjAUMRIwEAYDVQQDDAkxMjcuMC4w\n\
LjEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAASUW+5EuOjJIOhe4QolCOCOGoP2\n\
7bRIDeyUjlozvMXeGkQpoWW6+2TnmR5fOWMflWxihqykVeQysh45d30ABfRmo3ww\n\
ejAaBgNVHREEEzARhwR/AAABgglsb2NhbGhvc3QwDAYDVR0TAQH/BAIwADAOBgNV\n\
HQ8BAf8EBAMCB4AwHQYDVR0lBBYwFAYIKwYBBQUHAwEGCCsGAQUFBwMCMB8GA1Ud\n\
IwQYMBaAFJRiTfTS3DxlVJVBoe8abvzHawNiMAoGCCqGSM49BAMCA0kAMEYCIQCZ\n\
M8BBEwQ81B16BKROr0lJZt4iwd94Dba8NKfB7TpuGgIhAMIGY7YR4fTRr8OQseJt\n\
lQZnokFWUEmGsMkoRSO67QT/\n\
-----END CERTIFICATE-----\n\
";
const SERVER_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgHNDkc2ffNqOtft/h\n\
NxE6THR/unPk1YcC7txVn98mPVKhRANCAASUW+5EuOjJIOhe4QolCOCOGoP27bRI\n\
DeyUjlozvMXeGkQpoWW6+2TnmR5fOWMflWxihqykVeQysh45d30ABfRm\n\
-----END PRIVATE KEY-----\n\
";

/// The CA, certificate and key as files in a scratch directory removed on drop.
struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pki(tag: &str) -> Pki {
    let dir = std::env::temp_dir().join(unique(tag));
    std::fs::create_dir_all(&dir).unwrap();
    let p = Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        dir,
    };
    for (path, text) in [
        (&p.ca, CA_PEM),
        (&p.cert, SERVER_PEM),
        (&p.key, SERVER_KEY_PEM),
    ] {
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
    p
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

fn registry() -> String {
    format!("zookeeper://{}", zookeeper())
}

/// The reply of `sayHello(who)` from the providers of `group`, through `reference`.
async fn say_hello(reference: &Reference, who: &str) -> serde_json::Value {
    reference
        .call_typed("sayHello", &["java.lang.String"], json!([who]))
        .await
        .unwrap_or_else(|e| panic!("sayHello({who}): {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_tls_provider_at_application_level_is_found_with_the_ca_and_refused_without() {
    if java_peer::skipped("a_java_tls_provider_at_application_level_...") {
        return;
    }
    let pki = pki("switchman-app-tls");
    let app = unique("app-tls");
    let g = unique("g-app-tls");
    let provider = JavaProvider::start(
        &ProviderOptions::zookeeper(&zookeeper())
            .protocol("tri")
            .application(&app)
            .group(&g)
            .register_mode("instance")
            .param("warmup", "0")
            .tls(path(&pki.cert), path(&pki.key)),
    );

    // With the CA: the MetadataService answers over TLS, then the call goes over TLS.
    let reference = Reference::new(DEMO_SERVICE)
        .registry(registry())
        .group(&g)
        .tls_ca(&pki.ca)
        .wait(WAIT)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("the TLS provider of {app}: {e}"));
    let snap = reference.directory().load();
    let found: Vec<_> = snap
        .endpoints()
        .iter()
        .map(|e| e.instance.clone())
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].application(), Some(app.as_str()));
    assert!(
        found[0].param("dubbo.metadata.revision").is_some(),
        "found at application level: {:?}",
        found[0]
    );
    let reply = say_hello(&reference, "app-level tls").await;
    assert_eq!(
        reply,
        json!(format!("hello, app-level tls from {}", provider.name()))
    );

    // Without TLS settings: the metadata fetch is refused in cleartext and the error says the
    // MetadataService serves TLS and what to set; bounded by the wait, not a hang.
    let started = Instant::now();
    let e = Reference::new(DEMO_SERVICE)
        .registry(registry())
        .group(&g)
        .wait(Duration::from_secs(10))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoProvider, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("the metadata of application {app}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("tri://{}", provider.address())),
        "{text}"
    );
    assert!(text.contains("answers a TLS handshake"), "{text}");
    assert!(text.contains("tls_ca"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(15), "bounded");
    let calls = provider.calls_of_settled("sayHello", 1, Duration::from_secs(2));
    assert_eq!(calls, 1, "only the call over TLS arrived");
}

/// Switchman's Triple provider over TLS, registered as `switchman provider --protocol tri
/// --tls-cert .. --register-mode instance` registers it.
struct RustTlsProvider {
    _server: TripleServer,
    _registrar: std::sync::Arc<dyn switchman_discovery::Registrar>,
    name: String,
}

async fn rust_tls_provider(pki: &Pki, app: &str, group: &str) -> RustTlsProvider {
    let tls = TripleServer::tls_config(&pki.cert, &pki.key, None).unwrap();
    let (server, name) = serve_echo(
        "127.0.0.1:0".parse().unwrap(),
        EchoOptions {
            name: Some(format!("rust-tls-{app}")),
            tls: Some(tls),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let instance = java_instance(
        "127.0.0.1",
        server.addr().port(),
        ServiceKey::with(DEMO_SERVICE, group, ""),
        &["sayHello"],
    )
    .param(SSL_ENABLED, "true")
    .application(app)
    .build();
    let registrar = registrar_from_url(&format!("{}?register-mode=all", registry())).unwrap();
    registrar.register(&instance).await.unwrap();
    RustTlsProvider {
        _server: server,
        _registrar: registrar,
        name,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchman_triple_provider_over_tls_is_called_through_the_registry() {
    let pki = pki("switchman-rust-tls");
    let app = unique("rust-tls");
    let g = unique("g-rust-tls");
    let provider = rust_tls_provider(&pki, &app, &g).await;
    let expected = json!({"from": provider.name, "method": "sayHello", "echo": ["tls"]});

    // Interface level (`ssl-enabled=true` on the URL) and application level (its
    // MetadataService over TLS, `ssl-enabled` in the url-params): both with the CA, the
    // second also where enabled only (what the instance says decides).
    for (migration, every) in [
        ("FORCE_INTERFACE", true),
        ("FORCE_APPLICATION", true),
        ("FORCE_APPLICATION", false),
    ] {
        let reference = Reference::new(DEMO_SERVICE)
            .registry(format!("{}?migration.step={migration}", registry()))
            .group(&g)
            .tls_ca(&pki.ca)
            .tls_every_provider(every)
            .wait(WAIT)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{migration}, every provider {every}: {e}"));
        let found = reference.directory().load();
        let instance = &found.endpoints()[0].instance;
        assert_eq!(instance.param(SSL_ENABLED), Some("true"), "{instance:?}");
        assert_eq!(
            instance.param("dubbo.metadata.revision").is_some(),
            migration == "FORCE_APPLICATION",
            "{migration}: {instance:?}"
        );
        let reply = say_hello(&reference, "tls").await;
        assert_eq!(reply, expected, "{migration}");
    }

    // Without TLS settings: the instance says its MetadataService takes TLS, so the fetch
    // fails at once with the error that says what to set.
    let e = Reference::new(DEMO_SERVICE)
        .registry(format!("{}?migration.step=FORCE_APPLICATION", registry()))
        .group(&g)
        .wait(Duration::from_secs(10))
        .connect()
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("the metadata of application {app}")),
        "{text}"
    );
    assert!(text.contains("ssl-enabled=true"), "{text}");
}
