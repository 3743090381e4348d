//! The consumer side of a reference in the registry: its own description (what routing rules
//! read) and its registration, where the registry shows consumers.

use std::sync::Arc;
use std::time::Duration;

use switchman_core::ServiceKey;
use tracing::warn;

/// A consumer registration, removed when the last clone of its reference goes.
pub(super) struct ConsumerRegistration {
    pub(super) registry: Arc<dyn switchman_discovery::Registry>,
    pub(super) key: ServiceKey,
    pub(super) url: switchman_core::Url,
}

impl Drop for ConsumerRegistration {
    fn drop(&mut self) {
        // Without a runtime the registry's session ends with the process (ephemeral node).
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (registry, key, url) = (self.registry.clone(), self.key.clone(), self.url.clone());
            rt.spawn(async move {
                if let Err(e) = registry.unregister_consumer(&key, &url).await {
                    warn!("{e}");
                }
            });
        }
    }
}

/// Whether the registry URL leaves consumer registration on (`register-consumer=false` and
/// Dubbo's `register=false` turn it off).
pub(super) fn registers_consumers(registry_url: &str) -> bool {
    let Ok(url) = switchman_core::Url::parse(registry_url) else {
        return true;
    };
    let off = |k: &str| {
        url.param(k)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    };
    !(off("register-consumer") || off("register"))
}

/// The consumer URL a Java Dubbo 3.3 consumer registers (what dubbo-admin and `ls` show):
/// `consumer://host/interface?application=..&category=consumers&check=false&interface=..&side=consumer&...`.
pub(super) fn registration_url(
    consumer: &switchman_core::Url,
    key: &ServiceKey,
) -> switchman_core::Url {
    let mut url = switchman_core::Url::new("consumer", consumer.host(), None, &key.interface)
        .with_param(
            "application",
            consumer
                .param("application")
                .unwrap_or("switchman-consumer"),
        )
        .with_param("category", "consumers")
        .with_param("check", "false")
        .with_param("dubbo", "2.0.2")
        .with_param("interface", &key.interface)
        .with_param("pid", &std::process::id().to_string())
        .with_param("side", "consumer")
        .with_param("switchman", env!("CARGO_PKG_VERSION"))
        .with_param(
            "timestamp",
            &std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0)
                .to_string(),
        );
    if !key.group.is_empty() {
        url = url.with_param("group", &key.group);
    }
    if !key.version.is_empty() {
        url = url.with_param("version", &key.version);
    }
    url
}

/// This consumer as routing rules and consumer rules (dubbo-admin's `side: consumer`) see it:
/// the registry URL's `application` (Dubbo's consumer application; `switchman-consumer`
/// without one) and the host this process reaches the registry from: `DUBBO_IP_TO_REGISTRY`
/// when set (as in Dubbo), else the local address of a UDP socket connected to the registry's
/// first server (no packet is sent), else 127.0.0.1.
pub(super) async fn consumer_info(
    registry_url: &str,
    key: &ServiceKey,
) -> switchman_router::ConsumerInfo {
    let url = switchman_core::Url::parse(registry_url).ok();
    let application = url
        .as_ref()
        .and_then(|u| u.param("application"))
        .filter(|a| !a.is_empty())
        .unwrap_or("switchman-consumer")
        .to_string();
    let from_env = std::env::var("DUBBO_IP_TO_REGISTRY")
        .ok()
        .filter(|h| !h.trim().is_empty());
    let host = match (from_env, &url) {
        (Some(h), _) => h.trim().to_string(),
        (None, Some(u)) => {
            let server = (
                u.host().trim_matches(['[', ']']).to_string(),
                u.port().unwrap_or(1),
            );
            let v6 = matches!(server.0.parse(), Ok(std::net::IpAddr::V6(_)));
            let local = async {
                let socket =
                    tokio::net::UdpSocket::bind(if v6 { "[::]:0" } else { "0.0.0.0:0" }).await?;
                socket.connect(server).await?;
                socket.local_addr()
            };
            // A name is resolved: bounded, and 127.0.0.1 when it does not answer.
            match tokio::time::timeout(Duration::from_secs(2), local).await {
                Ok(Ok(a)) => a.ip().to_string(),
                _ => "127.0.0.1".to_string(),
            }
        }
        (None, None) => "127.0.0.1".to_string(),
    };
    let consumer = switchman_core::Url::new("consumer", &host, None, &key.interface)
        .with_param("application", &application);
    switchman_router::ConsumerInfo::from_url(consumer)
}
