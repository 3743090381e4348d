//! The nacos-sdk plumbing both halves of a subscription use (`watch.rs`, the interface level;
//! `app.rs`, the application level): the registry's clients, the listeners that forward SDK
//! events into the subscription's task, subscribing to and unsubscribing from a service name,
//! the current list of a name, and the bounds on SDK calls.
//!
//! # Services too large for nacos-sdk
//!
//! nacos-sdk 0.8.3 builds its tonic clients with tonic's default 4 MiB decoding limit, which
//! it does not let anyone change, and a Nacos server sends a service's whole instance list in
//! one gRPC message (rnacos: about 334 bytes per Dubbo application instance, so the limit
//! falls at about 12,500 of them; Java's Nacos client allows 10 MB). Past it, in the SDK:
//!
//! - a query or subscribe reply (a unary call) fails with `OutOfRange: decoded message
//!   length too large`; the SDK's redo task repeats the subscription after every reconnect
//!   and its updater repeats the query every 60 s at most, all failing the same way;
//! - a push of that list (a `NotifySubscriberRequest` on the connection's bi-stream, sent by
//!   the server after a subscription and after each change) ends the SDK's read loop of the
//!   stream (`while let Some(Ok(..))`): the connection is marked unhealthy and rebuilt, so
//!   every subscription of the client misses pushes while it reconnects, the redo task
//!   subscribes the large service again, and the next push breaks the new stream too.
//!
//! So a service is read over Nacos's HTTP open API instead (`http_list.rs`), re-read every
//! `list_interval`, once it is known to be too large: its SDK subscribe or list fails with
//! that error, or its list, as the SDK gave it or as a size check reads it over HTTP, is
//! over `http-list-above` bytes of JSON (default [`DEFAULT_HTTP_ABOVE`], 3.5 MiB: room for
//! one push's growth before the 4 MiB limit; the JSON is within a few percent of rnacos's
//! message), or `http-list-above=0` (every service). The size check ([`probe_size`]) is one
//! HTTP read [`PROBE_FIRST`] after the SDK subscription, then at doubling intervals up to
//! [`PROBE_EVERY`] (or [`PROBE_EVERY_SMALL`] while the list is under a quarter of the line,
//! so small services cost the server a whole-list read every 5 minutes, not every 30 s): the
//! SDK alone cannot tell (see there). The same HTTP read comes before
//! every SDK subscription, so a service already too large is never subscribed through the
//! SDK. A later switch unsubscribes the service's listeners from the SDK, retried until the
//! SDK takes it, which also ends its redo task and updater for the service: below the 4 MiB
//! limit (the point of the margin) the unsubscribe reply, which carries the whole list on
//! rnacos, still decodes. Past it the SDK keeps its redo task, which subscribes the service
//! again every 3 s, and each push of it breaks the connection every few seconds for as long
//! as the process runs (warned once): only a list that grows past the margin between two
//! checks gets there. The registry remembers a service once switched and never subscribes
//! it through the SDK again. With an
//! address server (`endpoint`) there is no server list to read from: the service then stays
//! unlisted, with an error naming the service.

use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigService};
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, ServiceInstance,
};
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use super::http_list::HttpReader;
use super::subscription::{Release, Watch};

/// The SDK clients of one registry, once connected.
#[derive(Clone)]
pub(crate) struct Clients {
    pub(crate) naming: NamingService,
    pub(crate) config: Option<ConfigService>,
    /// The TLS relays the clients talk through (`secure=true`, `tls.rs`): they live as long as
    /// the clients are held.
    pub(crate) _relay: Option<Arc<crate::tls_relay::Relay>>,
    /// How services too large for the SDK are read (see the module docs).
    pub(crate) http: Arc<HttpFallback>,
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

/// The default `http-list-above`: 3.5 MiB of instance list (see the module docs).
pub(crate) const DEFAULT_HTTP_ABOVE: u64 = 3584 * 1024;
/// When the size of a service read through the SDK is first checked, and the longest time
/// between two checks after.
const PROBE_FIRST: Duration = Duration::from_secs(1);
const PROBE_EVERY: Duration = Duration::from_secs(30);
/// The longest time between two checks of a service whose list was under a quarter of
/// `http-list-above` at the last one: it would have to grow fourfold in between to reach the
/// SDK's limit, and each check is a whole-list read on the server.
const PROBE_EVERY_SMALL: Duration = Duration::from_secs(300);
/// A Nacos cluster name no instance has (see [`sdk_unsubscribe_until_done`]).
const NO_CLUSTER: &str = "__switchman_no_cluster__";
/// How long a switch to HTTP keeps asking the SDK to unsubscribe (the connection may be
/// rebuilding after a push that was too large).
const UNSUBSCRIBE_TRIES: u32 = 60;

/// How a registry reads services too large for nacos-sdk (see the module docs).
#[derive(Debug)]
pub(crate) struct HttpFallback {
    /// `None` with an address server: no server list to read from.
    pub(crate) reader: Option<Arc<HttpReader>>,
    /// The estimated list size (bytes) above which a service is read over HTTP.
    pub(crate) above: u64,
    /// How often a service read over HTTP is read again (`list_interval`).
    pub(crate) every: Duration,
}

/// Whether an SDK error is tonic's refusal of a message over its decoding limit.
pub(crate) fn too_large(e: &nacos_sdk::api::error::Error) -> bool {
    e.to_string().contains("message length too large")
}

/// The size of `list` as JSON, about what a server sends for it (the JSON body of the gRPC
/// message is a little larger: it has a few more fields per instance).
pub(crate) fn encoded_size(list: &[ServiceInstance]) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, list);
    c.0
}

/// Subscribes `listener` to `name`. The listener is registered before the request goes out,
/// and the SDK repeats the subscription after every reconnect, so a failure is not final. A
/// service known to be too large for the SDK (or every service, `http-list-above=0`) is read
/// over HTTP instead.
pub(crate) async fn subscribe_name(
    clients: &Clients,
    w: &Watch,
    name: &str,
    listener: &Arc<dyn NamingEventListener>,
) {
    let oversized = w.subscribers.acquire(name, &w.group, listener);
    let service = &w.key;
    if oversized || clients.http.above == 0 {
        let why = if oversized {
            "known to be too large for nacos-sdk"
        } else {
            "http-list-above=0"
        };
        to_http(clients, w, name, why, false).await;
        return;
    }
    // Its size first: a service the SDK cannot read must never be subscribed there (see the
    // module docs). A failed read leaves it to the SDK and the later checks.
    if let Some(reader) = &clients.http.reader {
        match http_size(reader, name, &w.group, clients.http.above).await {
            Ok(Err(why)) => {
                to_http(clients, w, name, &why, false).await;
                return;
            }
            Ok(Ok(_)) => {}
            Err(e) => {
                debug!(service = %service, nacos_service = %name, "nacos list size check failed: {e}")
            }
        }
    }
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
        Ok(Err(e)) if too_large(&e) => {
            to_http(clients, w, name, &e.to_string(), true).await;
            return;
        }
        Ok(Err(e)) => {
            warn!(service = %service, nacos_service = %name, "nacos subscribe failed, the SDK retries: {e}")
        }
        Err(_) => {
            warn!(service = %service, nacos_service = %name, "nacos subscribe timed out, the SDK retries")
        }
    }
    let probe = tokio::spawn(probe_size(clients.clone(), w.clone(), name.to_string()));
    w.subscribers
        .set_probe(name, &w.group, probe.abort_handle());
}

/// Checks the size of `name`'s list while the SDK reads it (see the module docs): one HTTP
/// read [`PROBE_FIRST`] after the subscription, then at doubling intervals up to
/// [`PROBE_EVERY`] ([`PROBE_EVERY_SMALL`] while the list is under a quarter of the line); an
/// answer over `http-list-above` bytes moves the service to HTTP. The
/// SDK cannot tell: a server may send the subscribe reply before the service grew (rnacos
/// answered 0 instances, then a push of 2,803 of 14,000 that it was still applying, then
/// only lists too large to decode), and the SDK's cache then keeps the short list while each
/// push of the full one breaks its connection: the 111 instances once seen out of 14,000.
async fn probe_size(clients: Clients, w: Watch, name: String) {
    let Some(reader) = clients.http.reader.clone() else {
        return;
    };
    let above = clients.http.above;
    let mut wait = PROBE_FIRST;
    let mut cap = PROBE_EVERY;
    loop {
        tokio::time::sleep(wait).await;
        if w.subscribers.http_list(&name, &w.group).is_some() {
            return;
        }
        match http_size(&reader, &name, &w.group, above).await {
            Ok(Err(why)) => {
                to_http(&clients, &w, &name, &why, true).await;
                return;
            }
            Ok(Ok(bytes)) => {
                cap = if bytes < above / 4 {
                    PROBE_EVERY_SMALL
                } else {
                    PROBE_EVERY
                };
            }
            Err(e) => {
                debug!(service = %w.key, nacos_service = %name, "nacos list size check failed: {e}")
            }
        }
        wait = (wait * 2).min(cap);
    }
}

/// Reads `name`'s list over HTTP and measures it as [`encoded_size`] does (the HTTP answer
/// has more fields per instance than the gRPC message: about 490 bytes against 410 for a
/// Dubbo application instance on rnacos): `Ok(answer bytes)` when it is within `above`,
/// `Err(why)` when it is over.
async fn http_size(
    reader: &HttpReader,
    name: &str,
    group: &str,
    above: u64,
) -> Result<Result<u64, String>, String> {
    let body = reader.body(name, group).await?;
    // The JSON of the instances alone is shorter than the answer.
    if body.len() as u64 <= above {
        return Ok(Ok(body.len() as u64));
    }
    let list = super::http_list::parse_list(&body, name, group)?;
    drop(body);
    let size = encoded_size(&list.instances);
    debug!(
        nacos_service = name,
        instances = list.instances.len(),
        bytes = size,
        "nacos list size checked"
    );
    if size > above {
        return Ok(Err(format!(
            "{} instances, about {size} bytes, over http-list-above={above}",
            list.instances.len()
        )));
    }
    Ok(Ok(size))
}

/// Reads `name` over HTTP from now on (see the module docs): starts its reader and, when
/// `from_sdk`, unsubscribes its listeners from the SDK.
async fn to_http(clients: &Clients, w: &Watch, name: &str, why: &str, from_sdk: bool) {
    let Some(listeners) = w.subscribers.to_http(name, &w.group) else {
        return;
    };
    let service = &w.key;
    let Some(reader) = clients.http.reader.clone() else {
        error!(service = %service, nacos_service = %name, group = %w.group,
            "the instance list cannot be read: too large for nacos-sdk ({why}), and with an \
             address server (endpoint) there is no server to read it from over HTTP; list the \
             servers in the registry URL instead");
        return;
    };
    if from_sdk {
        warn!(service = %service, nacos_service = %name, group = %w.group,
            "reading the instance list over the HTTP open API every {:?} from now on: too large \
             for nacos-sdk's 4 MiB gRPC messages ({why})", clients.http.every);
        let naming = clients.naming.clone();
        let (name, group, service) = (name.to_string(), w.group.clone(), service.to_string());
        tokio::spawn(async move {
            for l in listeners {
                sdk_unsubscribe_until_done(&naming, &name, &group, &service, l).await;
            }
        });
    } else {
        info!(service = %service, nacos_service = %name, group = %w.group,
            "reading the instance list over the HTTP open API every {:?} ({why})", clients.http.every);
    }
    let task = tokio::spawn(poll_http(
        reader,
        w.subscribers.clone(),
        name.to_string(),
        w.group.clone(),
        clients.http.every,
    ));
    w.subscribers
        .set_poller(name, &w.group, task.abort_handle());
}

/// Asks the SDK to unsubscribe `listener` from `name` until the server confirms (the SDK then
/// also drops its redo task and updater of the service), at most [`UNSUBSCRIBE_TRIES`] times a
/// second apart.
async fn sdk_unsubscribe_until_done(
    naming: &NamingService,
    name: &str,
    group: &str,
    service: &str,
    listener: Arc<dyn NamingEventListener>,
) {
    let unsubscribe = |clusters: Vec<String>| {
        tokio::time::timeout(
            SDK_CALL_TIMEOUT,
            naming.unsubscribe(
                name.to_string(),
                Some(group.to_string()),
                clusters,
                listener.clone(),
            ),
        )
    };
    let mut refused = 0;
    for attempt in 1..=UNSUBSCRIBE_TRIES {
        let mut done = unsubscribe(Vec::new()).await;
        if let Ok(Err(e)) = &done
            && too_large(e)
        {
            // The server unsubscribed, but its reply carries the whole list, which the SDK
            // cannot decode, so the SDK keeps its redo task (which would subscribe again after
            // a reconnect). The same unsubscription for a cluster no instance is in has a
            // short reply and ends that task (its key has no clusters).
            done = unsubscribe(vec![NO_CLUSTER.to_string()]).await;
            if matches!(&done, Ok(Err(e)) if too_large(e)) {
                // That reply carries the whole list too (rnacos): no retry can help.
                refused += 1;
                if refused == 3 {
                    break;
                }
            }
        }
        match done {
            Ok(Ok(())) => {
                debug!(
                    service,
                    nacos_service = name,
                    attempt,
                    "unsubscribed from nacos-sdk"
                );
                return;
            }
            Ok(Err(e)) => debug!(
                service,
                nacos_service = name,
                attempt,
                "nacos unsubscribe failed: {e}"
            ),
            Err(_) => debug!(
                service,
                nacos_service = name,
                attempt,
                "nacos unsubscribe timed out"
            ),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    warn!(
        service,
        nacos_service = name,
        "nacos-sdk did not take the unsubscription of a service too large for it: it keeps \
         subscribing it again, and each push of it breaks the client's connection (every \
         subscription of this registry then waits for the reconnect); a restart with the \
         service over http-list-above reads it over HTTP from the start"
    );
}

/// Reads `name` over HTTP every `every` while someone reads it so, storing each new list and
/// telling the listeners (an event without a list: they read it from the registry's state).
/// A failed read keeps the last good list.
async fn poll_http(
    reader: Arc<HttpReader>,
    subs: super::subscription::Subscribers,
    name: String,
    group: String,
    every: Duration,
) {
    let mut last: Option<u64> = None;
    let mut failing = false;
    loop {
        match reader.list(&name, &group).await {
            Ok(list) => {
                if failing {
                    info!(nacos_service = %name, group = %group, "the instance list is readable over HTTP again");
                    failing = false;
                }
                if last != Some(list.fingerprint) {
                    last = Some(list.fingerprint);
                    if list.dropped > 0 {
                        warn!(nacos_service = %name, group = %group, dropped = list.dropped,
                            "instances with an invalid address, port, weight or metadata ignored");
                    }
                    debug!(nacos_service = %name, group = %group, instances = list.instances.len(), "instance list read over HTTP");
                    let Some(listeners) = subs.store_http(&name, &group, Arc::new(list.instances))
                    else {
                        return;
                    };
                    let ev = Arc::new(NamingChangeEvent {
                        service_name: name.clone(),
                        group_name: group.clone(),
                        clusters: String::new(),
                        instances: None,
                    });
                    for l in listeners {
                        l.event(ev.clone());
                    }
                }
            }
            Err(e) if !failing => {
                failing = true;
                warn!(nacos_service = %name, group = %group, servers = %reader.servers(),
                    "cannot read the instance list over HTTP, keeping the last one; retrying every {every:?}: {e}");
            }
            Err(e) => {
                debug!(nacos_service = %name, group = %group, "instance list still unreadable over HTTP: {e}")
            }
        }
        if !subs.still_http(&name, &group) {
            return;
        }
        tokio::time::sleep(every).await;
    }
}

/// Ends this subscription's interest in `name`.
///
/// nacos-sdk's unsubscribe also ends the server-side subscription and the SDK's polling of
/// the service, which other subscriptions of this registry to the same service still need:
/// only the last one unsubscribes (the others' listeners stay registered, inert). A service
/// read over HTTP has no SDK subscription; its reader stops with the last subscription.
pub(crate) async fn unsubscribe_name(
    clients: &Clients,
    w: &Watch,
    name: &str,
    listener: &Arc<dyn NamingEventListener>,
) {
    if w.subscribers.release(name, &w.group, listener) == (Release::Last { http: false }) {
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

/// The newest full list of `name`: over HTTP, the last list read (see the module docs); else
/// the SDK's cache (updated in order before listeners run), else the event's own list; `None`
/// when there is none yet (the next event brings it).
pub(crate) async fn current_list(
    clients: &Clients,
    w: &Watch,
    name: &str,
    ev: Option<&NamingChangeEvent>,
) -> Option<Arc<Vec<ServiceInstance>>> {
    if let Some(last) = w.subscribers.http_list(name, &w.group) {
        return last;
    }
    let cached = tokio::time::timeout(
        SDK_CALL_TIMEOUT,
        clients
            .naming
            .get_all_instances(name.to_string(), Some(w.group.clone()), Vec::new(), true),
    )
    .await;
    match cached {
        Ok(Ok(list)) => {
            let size = encoded_size(&list);
            if size > clients.http.above {
                let why = format!(
                    "{} instances, about {size} bytes, over http-list-above={}",
                    list.len(),
                    clients.http.above
                );
                to_http(clients, w, name, &why, true).await;
            }
            Some(Arc::new(list))
        }
        Ok(Err(e)) if too_large(&e) => {
            to_http(clients, w, name, &e.to_string(), true).await;
            // The reader's first list comes as an event.
            None
        }
        _ => ev.map(|ev| Arc::new(ev.instances.clone().unwrap_or_default())),
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
