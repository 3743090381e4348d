//! The Triple provider of `switchman provider --protocol tri`, as a library so tests run the
//! same code: a plain Java interface served to Java Dubbo 3 consumers ([`serve_echo`]) and
//! the instance to register for it ([`java_instance`]).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::json;
use switchman_core::{Instance, InstanceBuilder, Protocol, ServiceKey};

use super::TripleServer;
use super::status::{Code, Status};

/// The instance to register for a Triple provider of a plain Java interface, with what a Java
/// Dubbo 3.3 consumer reads from a provider URL: protocol `tri`, path and `interface` the
/// service, `prefer.serialization=hessian2` (a Java consumer sends the first serialization
/// listed there, and Switchman's server reads Hessian2 only), `dubbo=2.0.2`, `generic=false`,
/// `deprecated=false`, and `methods` when given. The registrars add `side=provider`,
/// `dynamic=true` and `timestamp`. Add weight, warm-up, application... on the builder.
pub fn java_instance(
    host: &str,
    port: u16,
    service: ServiceKey,
    methods: &[&str],
) -> InstanceBuilder {
    let path = service.interface.to_string();
    let mut b = Instance::builder(host, port)
        .protocol(Protocol::Tri)
        .path(&path)
        .service(service)
        .param("prefer.serialization", "hessian2")
        .param("dubbo", "2.0.2")
        .param("generic", "false")
        .param("deprecated", "false");
    if !methods.is_empty() {
        b = b.param("methods", &methods.join(","));
    }
    b
}

/// How [`serve_echo`] answers.
#[derive(Debug, Clone, Default)]
pub struct EchoOptions {
    /// The name in the answers (default: the listen address).
    pub name: Option<String>,
    /// Share of calls answered `UNAVAILABLE` (a retryable failure), in percent.
    pub fail_percent: f64,
    /// Delay before every answer.
    pub delay: Duration,
    /// Serve over TLS with these settings ([`TripleServer::tls_config`]), the
    /// `MetadataService` too; register the instance with `ssl-enabled=true`.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

/// Serves every method of every service to Java Dubbo 3 consumers (typed or generic calls,
/// [`TripleServer::serve_java`]) with the answer of `switchman provider`'s HTTP provider, as a
/// Java map: `{"from": NAME, "method": METHOD, "echo": [ARGS...]}` (a generic call's method
/// and arguments, not `$invoke`'s). Calls to Dubbo's `MetadataService` get the
/// `MetadataInfo` this process publishes ([`TripleServer::metadata_service_answer`]).
/// Returns the server and the name it answers with.
pub async fn serve_echo(
    bind: SocketAddr,
    options: EchoOptions,
) -> std::io::Result<(TripleServer, String)> {
    let fail = options.fail_percent.clamp(0.0, 100.0) / 100.0;
    let delay = options.delay;
    let slot = Arc::new(OnceLock::<String>::new());
    let handler_name = slot.clone();
    let server = TripleServer::serve_java_tls(bind, options.tls, move |call| {
        let name = handler_name.get().cloned().unwrap_or_default();
        let failing = fail > 0.0 && fastrand::f64() < fail;
        Box::pin(async move {
            // Dubbo's MetadataService, for application-level discovery.
            if let Some(answer) = TripleServer::metadata_service_answer(&call) {
                return answer;
            }
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if failing {
                return Err(Status::new(
                    Code::Unavailable,
                    format!("{name} is failing on purpose"),
                ));
            }
            Ok(json!({"from": name, "method": call.method, "echo": call.args}))
        })
    })
    .await?;
    let name = options.name.unwrap_or_else(|| server.addr().to_string());
    let _ = slot.set(name.clone());
    Ok((server, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::triple::TripleInvoker;
    use serde_json::json;
    use switchman_core::{Invocation, Invoker};

    #[tokio::test]
    async fn the_echo_provider_answers_typed_and_generic_wrapper_calls() {
        let (server, name) = serve_echo(
            "127.0.0.1:0".parse().unwrap(),
            EchoOptions {
                name: Some("e1".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(name, "e1");
        let target = java_instance(
            "127.0.0.1",
            server.addr().port(),
            ServiceKey::new("com.foo.Echo"),
            &["hi"],
        )
        .build();
        assert_eq!(target.param("methods"), Some("hi"));
        let t = Duration::from_secs(5);
        // Its registration makes Switchman pick the wrapper codec.
        let inv = TripleInvoker::new();
        let typed = Invocation::new("hi")
            .with_args(vec![json!("x"), json!(2)])
            .with_types(["java.lang.String", "int"]);
        let got = inv.invoke(&target, &typed, t).await.unwrap();
        assert_eq!(got, json!({"from": "e1", "method": "hi", "echo": ["x", 2]}));
        let generic = Invocation::new("hi").with_args(vec![json!({"a": [1]})]);
        let got = inv.invoke(&target, &generic, t).await.unwrap();
        assert_eq!(
            got,
            json!({"from": "e1", "method": "hi", "echo": [{"a": [1]}]})
        );
        assert_eq!(server.hits(), 2);
    }

    #[tokio::test]
    async fn explicit_codecs_and_the_switch_beat_the_java_rule() {
        let (server, _) = serve_echo("127.0.0.1:0".parse().unwrap(), EchoOptions::default())
            .await
            .unwrap();
        let target =
            java_instance("127.0.0.1", server.addr().port(), ServiceKey::new("s"), &[]).build();
        let t = Duration::from_secs(5);
        let hi = Invocation::new("hi").with_args(vec![json!(1)]);
        let json_codec = Arc::new(crate::protocol::triple::JsonCodec);
        for inv in [
            TripleInvoker::new().service_codec("s", json_codec.clone()),
            TripleInvoker::new().method_codec("s", "hi", json_codec),
            TripleInvoker::new().java_wrapper(false),
        ] {
            // JSON is not a wrapper: the server says so, and the call is not retried.
            let e = inv.invoke(&target, &hi, t).await.unwrap_err();
            assert!(e.is_business() && !e.is_retryable(), "{e}");
            assert!(e.message().contains("INVALID_ARGUMENT"), "{e}");
        }
        assert!(TripleInvoker::new().invoke(&target, &hi, t).await.is_ok());
        assert_eq!(server.hits(), 4);
    }

    #[tokio::test]
    async fn the_echo_provider_serves_the_published_metadata_info() {
        use crate::metadata_service::MetadataServiceClient;
        use switchman_discovery::metadata::{
            AppRegistrations, ExportSettings, MetadataFetcher, MetadataServiceTarget, RegisterMode,
            StorageType,
        };
        let (server, _) = serve_echo("127.0.0.1:0".parse().unwrap(), EchoOptions::default())
            .await
            .unwrap();
        let port = server.addr().port();
        let instance = java_instance(
            "127.0.0.1",
            port,
            ServiceKey::with("x.Meta", "g", "1"),
            &["hi"],
        )
        .application("echo-meta-app")
        .build();
        let regs = AppRegistrations::new(ExportSettings {
            mode: RegisterMode::Instance,
            storage: StorageType::Local,
        });
        let published = regs.add(&instance).unwrap();
        let target = |revision: &str| MetadataServiceTarget {
            application: "echo-meta-app".into(),
            revision: revision.into(),
            host: "127.0.0.1".into(),
            port,
            protocol: "tri".into(),
            params: Default::default(),
        };
        let t = Duration::from_secs(5);
        let client = MetadataServiceClient::new();
        let got = client
            .fetch(&target(&published.info.revision), t)
            .await
            .unwrap();
        assert_eq!(got, *published.info);
        assert_eq!(got.services["g/x.Meta:1:tri"].params["methods"], "hi");
        assert_eq!(got.calc_revision(), published.info.revision);
        let e = client.fetch(&target("nope"), t).await.unwrap_err();
        assert!(
            e.message().contains("no MetadataInfo of revision nope"),
            "{e}"
        );
        regs.clear();
        let e = client
            .fetch(&target(&published.info.revision), t)
            .await
            .unwrap_err();
        assert!(e.message().contains("no MetadataInfo"), "withdrawn: {e}");
        // The MetadataService-only server answers the same way.
        let only = TripleServer::serve_metadata_service("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let again = regs.add(&instance).unwrap();
        let mut tg = target(&again.info.revision);
        tg.port = only.addr().port();
        assert_eq!(client.fetch(&tg, t).await.unwrap(), *again.info);
        regs.clear();
    }

    #[tokio::test]
    async fn failing_echo_answers_unavailable() {
        let (server, _) = serve_echo(
            "127.0.0.1:0".parse().unwrap(),
            EchoOptions {
                fail_percent: 100.0,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let target =
            java_instance("127.0.0.1", server.addr().port(), ServiceKey::new("s"), &[]).build();
        let e = TripleInvoker::new()
            .invoke(&target, &Invocation::new("ping"), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(e.is_retryable(), "{e}");
        assert!(e.message().contains("failing on purpose"), "{e}");
    }
}
