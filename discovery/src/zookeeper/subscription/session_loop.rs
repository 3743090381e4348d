//! One session of a subscription: its watches (persistent, or one-shot on old servers), the
//! event loop, and what a disconnect, a reconnect or the session's end does.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};
use zookeeper_client as zk;

use super::paths::{classify, config_root, migration_path};
use super::relist::relist;
use super::state::{Backoff, Dirty, Sent, Stop};
use crate::Update;
use crate::zookeeper::nodes::ProviderFilter;
use crate::zookeeper::reader::{Arms, Reader, Watches};
use crate::zookeeper::session::{CallError, Conn, Session, call};
use crate::zookeeper::{DUBBO_ROOT, WatchMode};

pub(super) enum Ended {
    /// The receiver was dropped or the registry shut down.
    Closed,
    /// The session ended; wait for the next one.
    Session,
}

async fn add_watch(
    client: &zk::Client,
    timeout: Duration,
    path: &str,
) -> Result<zk::PersistentWatcher, CallError> {
    call(
        timeout,
        client.watch(path, zk::AddWatchMode::PersistentRecursive),
    )
    .await
}

pub(super) async fn serve(
    session: &Session,
    conn: Conn,
    filter: &ProviderFilter,
    tx: &mpsc::Sender<Update>,
    sent: &mut Sent,
    clients: &mut watch::Receiver<Option<Conn>>,
) -> Ended {
    let cfg = &session.config;
    let client = conn.client.clone();
    let iface = filter.key.interface.to_string();
    let base = if iface == "*" {
        cfg.root.clone()
    } else {
        format!("{}/{iface}", cfg.root)
    };
    let croot = config_root(session);
    let mut watch_paths = vec![base.clone(), croot.clone()];
    if cfg.app_level {
        watch_paths.push(format!("{}/mapping", DUBBO_ROOT));
        watch_paths.push("/services".to_string());
        watch_paths.push(format!("{}/metadata", DUBBO_ROOT));
    }
    watch_paths.extend(migration_path(cfg));
    // Persistent recursive watches unless the server lacks them (< 3.6) or `watch=oneshot`.
    let oneshot_mode = || Watches::Oneshot {
        arms: Arms::new(),
        states: client.state_watcher(),
    };
    let mut watches = if cfg.watch == WatchMode::Oneshot || session.oneshot_fallback() {
        oneshot_mode()
    } else {
        loop {
            match add_watches(&client, cfg.timeout, &watch_paths).await {
                Ok(w) => break Watches::Persistent(w),
                Err(CallError::Zk(zk::Error::Unimplemented)) if cfg.watch == WatchMode::Auto => {
                    warn!(registry = %cfg.redacted, "ZooKeeper has no persistent watches (before 3.6): using one-shot watches");
                    session.set_oneshot_fallback();
                    break oneshot_mode();
                }
                Err(e) => {
                    debug!(service = %filter.key, "cannot add watches yet: {e}");
                    if session_over(&client, &e) {
                        return Ended::Session;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                        _ = tx.closed() => return Ended::Closed,
                    }
                }
            }
        }
    };
    // zookeeper-client 0.11.2 does not restore persistent watches after a reconnect (its
    // `resend_watches` sends only the one-shot kinds), so they are added again after every
    // reconnect, before the re-list. One-shot watches are restored by the client and re-armed
    // by the re-list.
    let mut rewatch = false;
    let mut dirty = Dirty::everything();
    // A new session starts with the whole list (the `Registry` contract), then changes.
    sent.deltas.resend();
    let mut connected = true;
    // Re-lists whose reads keep failing back off (`Backoff`); none before this instant. A
    // change announced by an event (`fresh`) is read at once even then: one part failing (an
    // ACL on a rule node) must not delay the provider list.
    let mut backoff = Backoff::default();
    let mut next_read = tokio::time::Instant::now();
    let mut fresh = false;
    loop {
        if connected && rewatch {
            if matches!(watches, Watches::Persistent(_)) {
                match add_watches(&client, cfg.timeout, &watch_paths).await {
                    Ok(w) => {
                        // The old watchers go after the new ones exist: no gap on the server.
                        watches = Watches::Persistent(w);
                        rewatch = false;
                        dirty = Dirty::everything();
                    }
                    Err(e) => {
                        debug!(service = %filter.key, "cannot re-add watches yet: {e}");
                        if session_over(&client, &e) {
                            return Ended::Session;
                        }
                    }
                }
            } else {
                rewatch = false;
            }
        }
        if connected
            && !rewatch
            && dirty.any()
            && (fresh || tokio::time::Instant::now() >= next_read)
        {
            fresh = false;
            let mut reader = Reader {
                client: &client,
                timeout: cfg.timeout,
                arms: watches.arms(),
            };
            match relist(session, &mut reader, filter, tx, sent, &mut dirty).await {
                Ok(()) => {}
                Err(Stop) => return Ended::Closed,
            }
            let pause = backoff.record(!dirty.failed.is_empty());
            next_read = tokio::time::Instant::now() + pause;
            if backoff.failures() >= Backoff::WARN_AFTER {
                warn!(
                    service = %filter.key,
                    registry = %cfg.redacted,
                    failures = backoff.failures(),
                    "cannot read {}; serving the last good lists ({} interface-level, {} application-level instances), next try in {pause:?}",
                    dirty.failed.join("; "),
                    sent.interface_level.len(),
                    sent.app_level.len(),
                );
            }
        }
        let now = tokio::time::Instant::now();
        let retry = if connected && dirty.any() && next_read > now {
            // Backing off: the failed parts are read again then, or with the next event.
            next_read - now
        } else if (dirty.any() || rewatch) && connected {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(3600)
        };
        // A migration step change waiting for its delay is looked at when it is due.
        let now = tokio::time::Instant::now();
        let due = sent.migration.as_ref().and_then(|m| m.next_check(now));
        let retry = match due {
            Some(due) => retry.min(due - now),
            None => retry,
        };
        // Wait for the next event (or a retry), then take whatever else is queued.
        let mut events = Vec::new();
        // Biased: a dropped receiver or a replaced session is noticed before the watchers are
        // polled again (a watcher whose session task is gone must not be polled).
        tokio::select! {
            biased;
            _ = tx.closed() => return Ended::Closed,
            r = clients.changed() => {
                let same = r.is_ok() && clients.borrow().as_ref().is_some_and(|c| c.generation == conn.generation);
                if !same {
                    return Ended::Session;
                }
            }
            ev = watches.next() => events.push(ev),
            // A revision's metadata was fetched (or failed): rebuild from what was read.
            () = sent.app.changed() => {
                dirty.app_level = true;
                fresh = true;
            }
            _ = tokio::time::sleep(retry) => {
                dirty.decide |= due.is_some_and(|d| d <= tokio::time::Instant::now());
            }
        }
        // A watcher must never be polled after a terminal session event (its channel closes).
        let terminal = |evs: &[zk::WatchedEvent]| {
            evs.iter()
                .any(|e| e.event_type == zk::EventType::Session && e.session_state.is_terminated())
        };
        while !terminal(&events) && events.len() < 10_000 && !tx.is_closed() {
            tokio::select! {
                biased;
                ev = watches.next() => events.push(ev),
                _ = std::future::ready(()) => break,
            }
        }
        for ev in events {
            match ev.event_type {
                zk::EventType::Session => match ev.session_state {
                    zk::SessionState::Disconnected => {
                        connected = false;
                        debug!(service = %filter.key, "ZooKeeper disconnected; serving the last lists");
                    }
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        if !connected {
                            debug!(service = %filter.key, "ZooKeeper reconnected; re-listing");
                        }
                        if !connected {
                            rewatch = true;
                            sent.deltas.resend();
                            // A new connection: read at once.
                            backoff.reset();
                            next_read = tokio::time::Instant::now();
                        }
                        connected = true;
                        // Events may have been lost while disconnected.
                        dirty = Dirty::everything();
                    }
                    // Terminal: the watchers must not be polled again.
                    _ => return Ended::Session,
                },
                _ => {
                    classify(&ev.path, &base, &croot, cfg, filter, &mut dirty);
                    fresh = true;
                }
            }
        }
    }
}

async fn add_watches(
    client: &zk::Client,
    timeout: Duration,
    paths: &[String],
) -> Result<Vec<zk::PersistentWatcher>, CallError> {
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        out.push(add_watch(client, timeout, p).await?);
    }
    Ok(out)
}

/// Whether `e` means this client's session is over (a new one is coming).
fn session_over(client: &zk::Client, e: &CallError) -> bool {
    client.state().is_terminated()
        || matches!(
            e,
            CallError::Zk(
                zk::Error::SessionExpired
                    | zk::Error::ClientClosed
                    | zk::Error::AuthFailed
                    | zk::Error::SessionMoved
            )
        )
}
