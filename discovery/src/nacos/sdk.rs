//! The nacos-sdk plumbing both halves of a subscription use (`watch.rs`, the interface level;
//! `app.rs`, the application level): the registry's clients, the listeners that forward SDK
//! events into the subscription's task, subscribing to and unsubscribing from a service name,
//! the current list of a name, and the bounds on SDK calls.

use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigService};
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, ServiceInstance,
};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::subscription::Watch;

/// The SDK clients of one registry, once connected.
#[derive(Clone)]
pub(crate) struct Clients {
    pub(crate) naming: NamingService,
    pub(crate) config: Option<ConfigService>,
    /// The TLS relays the clients talk through (`secure=true`, `tls.rs`): they live as long as
    /// the clients are held.
    pub(crate) _relay: Option<Arc<crate::tls_relay::Relay>>,
}

/// How often watched config data ids are re-read (see the module docs of `watch.rs`).
pub(crate) const RULE_POLL: Duration = Duration::from_secs(2);
/// Bound on each SDK call made from the task.
pub(crate) const SDK_CALL_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct NamingForwarder(pub(crate) mpsc::UnboundedSender<Arc<NamingChangeEvent>>);

impl NamingEventListener for NamingForwarder {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let _ = self.0.send(event);
    }
}

pub(crate) struct ConfigForwarder(pub(crate) mpsc::UnboundedSender<ConfigResponse>);

impl ConfigChangeListener for ConfigForwarder {
    fn notify(&self, config: ConfigResponse) {
        let _ = self.0.send(config);
    }
}

/// The service name an event is for (some SDK versions prefix `{group}@@`).
pub(crate) fn event_service(ev: &NamingChangeEvent) -> String {
    match ev.service_name.split_once("@@") {
        Some((_, name)) => name.to_string(),
        None => ev.service_name.clone(),
    }
}

/// Subscribes `listener` to `name`. The listener is registered before the request goes out,
/// and the SDK repeats the subscription after every reconnect, so a failure is not final.
pub(crate) async fn subscribe_name(
    clients: &Clients,
    w: &Watch,
    name: &str,
    listener: &Arc<dyn NamingEventListener>,
) {
    w.subscribers.acquire(name, &w.group);
    let service = &w.key;
    match tokio::time::timeout(
        SDK_CALL_TIMEOUT,
        clients.naming.subscribe(
            name.to_string(),
            Some(w.group.clone()),
            Vec::new(),
            listener.clone(),
        ),
    )
    .await
    {
        Ok(Ok(())) => {
            info!(service = %service, nacos_service = %name, group = %w.group, "subscribed")
        }
        Ok(Err(e)) => {
            warn!(service = %service, nacos_service = %name, "nacos subscribe failed, the SDK retries: {e}")
        }
        Err(_) => {
            warn!(service = %service, nacos_service = %name, "nacos subscribe timed out, the SDK retries")
        }
    }
}

/// Ends this subscription's interest in `name`.
///
/// nacos-sdk's unsubscribe also ends the server-side subscription and the SDK's polling of
/// the service, which other subscriptions of this registry to the same service still need:
/// only the last one unsubscribes (the others' listeners stay registered, inert).
pub(crate) async fn unsubscribe_name(
    clients: &Clients,
    w: &Watch,
    name: &str,
    listener: &Arc<dyn NamingEventListener>,
) {
    if w.subscribers.release(name, &w.group) {
        let _ = tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            clients.naming.unsubscribe(
                name.to_string(),
                Some(w.group.clone()),
                Vec::new(),
                listener.clone(),
            ),
        )
        .await;
    }
}

/// The newest full list of `name`: the SDK's cache (updated in order before listeners run),
/// else the event's own list; `None` when neither is there (the next event brings it).
pub(crate) async fn current_list(
    clients: &Clients,
    group: &str,
    name: &str,
    ev: Option<&NamingChangeEvent>,
) -> Option<Vec<ServiceInstance>> {
    let cached = tokio::time::timeout(
        SDK_CALL_TIMEOUT,
        clients.naming.get_all_instances(
            name.to_string(),
            Some(group.to_string()),
            Vec::new(),
            true,
        ),
    )
    .await;
    match cached {
        Ok(Ok(list)) => Some(list),
        _ => ev.map(|ev| ev.instances.clone().unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_their_service_with_or_without_the_group_prefix() {
        let ev = |name: &str| NamingChangeEvent {
            service_name: name.into(),
            group_name: "DEFAULT_GROUP".into(),
            clusters: String::new(),
            instances: None,
        };
        assert_eq!(event_service(&ev("providers:a::g")), "providers:a::g");
        assert_eq!(
            event_service(&ev("DEFAULT_GROUP@@providers:a::g")),
            "providers:a::g"
        );
    }
}
