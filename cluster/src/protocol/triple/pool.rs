//! One HTTP/2 connection per provider address, multiplexed and shared by every call.
//!
//! The pool is keyed by `host:port`, so the same connection serves every service an address
//! provides and survives directory snapshots. A connection that closed (peer gone, GOAWAY,
//! keep-alive timeout) is replaced on the next call; concurrent callers wait for one connect
//! instead of each opening their own. Entries for addresses that left are dropped by
//! [`Pool::retain`] once their drain grace period has passed (an address that comes back
//! within it keeps its connection); in-flight calls on a dropped connection finish normally,
//! then hyper closes it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;
use std::time::Duration;

use tokio::time::Instant;

use http_body_util::Full;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use switchman_core::{Error, Result};

use crate::by_address::SharedByAddress;
use crate::protocol::tls::{ClientTls, handshake_error, server_name};
use tokio::net::TcpStream;
use tracing::{debug, info};

use bytes::Bytes;

pub(crate) type Sender = http2::SendRequest<Full<Bytes>>;

/// Connection settings.
#[derive(Clone)]
pub(crate) struct ConnectSettings {
    pub(crate) keep_alive_interval: Option<Duration>,
    pub(crate) keep_alive_timeout: Duration,
    /// TLS (ALPN `h2`) for the providers that take it, or every one (see [`ClientTls`]);
    /// `None`: cleartext h2c with prior knowledge.
    pub(crate) tls: Option<ClientTls>,
}

impl std::fmt::Debug for ConnectSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectSettings")
            .field("keep_alive_interval", &self.keep_alive_interval)
            .field("keep_alive_timeout", &self.keep_alive_timeout)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// The connection to one address: a pool entry, or owned by the endpoints at that address
/// (see [`Pool::endpoint_entry`]), in which case it is dropped with the last of them.
#[derive(Default)]
pub(crate) struct Entry {
    /// The live connection, if any: read without a lock on every call.
    current: ArcSwapOption<Sender>,
    /// Serializes connects to this address.
    connecting: tokio::sync::Mutex<()>,
}

impl Entry {
    fn live(&self) -> Option<Sender> {
        self.current
            .load()
            .as_deref()
            .filter(|s| !s.is_closed())
            .cloned()
    }

    /// A sender on the live connection to `address`, connecting when there is none.
    /// Errors are retryable transport errors (nothing was sent).
    /// `tls`: dial over TLS (chosen per instance by the caller).
    pub(crate) async fn get(
        &self,
        settings: &ConnectSettings,
        address: &str,
        tls: Option<&ClientTls>,
    ) -> Result<Sender> {
        if let Some(s) = self.live() {
            return Ok(s);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(s) = self.live() {
            return Ok(s);
        }
        // Not connected: nothing was sent, another instance can take the call.
        let sender = connect(settings, address, tls)
            .await
            .map_err(|e| e.with_unavailable(true))?;
        self.current.store(Some(Arc::new(sender.clone())));
        Ok(sender)
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.live().is_some()
    }

    /// Forgets the connection if it is closed (after a connection-level failure), so the
    /// next call reconnects.
    pub(crate) fn discard(&self) {
        let closed = self
            .current
            .load()
            .as_deref()
            .is_some_and(|s| s.is_closed());
        if closed {
            self.current.store(None);
        }
    }
}

/// The fewest entries at which a new address sweeps dead ones (see [`Pool::entry`]).
const MIN_SWEEP: usize = 64;

/// A pool entry and, once its address left every tracked directory, when it is dropped.
struct Slot {
    entry: Arc<Entry>,
    leaving: Option<Instant>,
}

/// The connections of one [`super::TripleInvoker`].
pub(crate) struct Pool {
    entries: Mutex<HashMap<String, Slot>>,
    /// The entry count at which the next new address first drops dead entries.
    sweep_at: std::sync::atomic::AtomicUsize,
    /// The connections owned by endpoints (made by the invoker as a `MakeEndpoint`), shared
    /// by the endpoints at one address.
    endpoints: SharedByAddress<Entry>,
    settings: ConnectSettings,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("addresses", &self.addresses())
            .finish()
    }
}

impl Pool {
    pub(crate) fn new(settings: ConnectSettings) -> Self {
        Pool {
            entries: Mutex::new(HashMap::new()),
            sweep_at: std::sync::atomic::AtomicUsize::new(MIN_SWEEP),
            endpoints: SharedByAddress::default(),
            settings,
        }
    }

    pub(crate) fn settings(&self) -> &ConnectSettings {
        &self.settings
    }

    /// The connection for an endpoint at `address`: the one the other live endpoints there
    /// share, else a new one. Not in the pool: it lives as long as its endpoints.
    pub(crate) fn endpoint_entry(&self, address: &str) -> Arc<Entry> {
        self.endpoints.get(address)
    }

    pub(crate) fn entry(&self, address: &str) -> Arc<Entry> {
        let mut map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = map.get(address) {
            return slot.entry.clone();
        }
        // Addresses of providers that went away (no live connection, no call holding the
        // entry) are dropped before the map grows past twice what the last sweep left (at
        // least MIN_SWEEP): bounded by the live addresses without anyone calling `retain`.
        use std::sync::atomic::Ordering;
        if map.len() >= self.sweep_at.load(Ordering::Relaxed).max(MIN_SWEEP) {
            map.retain(|_, slot| Arc::strong_count(&slot.entry) > 1 || slot.entry.is_connected());
            self.sweep_at
                .store((map.len() * 2).max(MIN_SWEEP), Ordering::Relaxed);
        }
        let e = Arc::new(Entry::default());
        map.insert(
            address.to_string(),
            Slot {
                entry: e.clone(),
                leaving: None,
            },
        );
        e
    }

    pub(crate) fn tls_settings(&self) -> Option<ClientTls> {
        self.settings.tls.clone()
    }

    pub(crate) fn keep_alive_settings(&self) -> (Option<Duration>, Duration) {
        (
            self.settings.keep_alive_interval,
            self.settings.keep_alive_timeout,
        )
    }

    /// Keeps the entries whose address satisfies `keep`. The others are dropped `grace` after
    /// the first call that found them gone (at once for a zero grace); an address kept again
    /// before that keeps its connection. A dropped connection closes once its in-flight calls
    /// finish. Returns when the next pending drop is due, if any.
    pub(crate) fn retain(
        &self,
        mut keep: impl FnMut(&str) -> bool,
        grace: Duration,
    ) -> Option<Instant> {
        let now = Instant::now();
        let mut map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|addr, slot| {
            if keep(addr) {
                if slot.leaving.take().is_some() {
                    debug!(address = %addr, "address is back: its Triple connection stays");
                }
                return true;
            }
            let due = *slot.leaving.get_or_insert_with(|| {
                if !grace.is_zero() {
                    info!(address = %addr, ?grace, "address left: no new calls; its Triple connection closes after the grace period");
                }
                now + grace
            });
            if due > now {
                return true;
            }
            info!(address = %addr, "dropping the Triple connection of an address that left");
            false
        });
        map.values().filter_map(|slot| slot.leaving).min()
    }

    /// The addresses with an entry, sorted.
    pub(crate) fn addresses(&self) -> Vec<String> {
        let map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut v: Vec<String> = map.keys().cloned().collect();
        v.sort();
        v
    }

    /// The addresses with a live (open) connection, sorted.
    pub(crate) fn connected(&self) -> Vec<String> {
        let map = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut v: Vec<String> = map
            .iter()
            .filter(|(_, slot)| slot.entry.live().is_some())
            .map(|(a, _)| a.clone())
            .collect();
        v.sort();
        v
    }
}

/// Opens an HTTP/2 connection to `address` (over TLS with `tls`).
async fn connect(
    settings: &ConnectSettings,
    address: &str,
    tls: Option<&ClientTls>,
) -> Result<Sender> {
    let tcp = TcpStream::connect(address)
        .await
        .map_err(|e| Error::transport(format!("cannot connect to {address}")).with_source(e))?;
    let _ = tcp.set_nodelay(true);
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new());
    if let Some(interval) = settings.keep_alive_interval {
        builder
            .keep_alive_interval(interval)
            .keep_alive_timeout(settings.keep_alive_timeout)
            .keep_alive_while_idle(true);
    }
    let handshake_failed = |e: hyper::Error| {
        Error::transport(format!("HTTP/2 handshake with {address} failed")).with_source(e)
    };
    let addr = address.to_string();
    let sender = match tls {
        None => {
            let (sender, conn) = builder
                .handshake(TokioIo::new(tcp))
                .await
                .map_err(handshake_failed)?;
            tokio::spawn(watch_connection(conn, addr));
            sender
        }
        Some(tls) => {
            let name = server_name(address)?;
            let stream = tls
                .connector(true)
                .connect(name, tcp)
                .await
                .map_err(|e| handshake_error(address, e))?;
            if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(Error::transport(format!(
                    "{address} did not agree to HTTP/2 (ALPN h2) over TLS"
                ))
                .with_retryable(false));
            }
            let (sender, conn) = builder
                .handshake(TokioIo::new(stream))
                .await
                .map_err(handshake_failed)?;
            tokio::spawn(watch_connection(conn, addr));
            sender
        }
    };
    info!(
        address,
        tls = tls.is_some(),
        "Triple connection established"
    );
    Ok(sender)
}

async fn watch_connection<F: std::future::Future<Output = hyper::Result<()>>>(
    conn: F,
    addr: String,
) {
    match conn.await {
        Ok(()) => debug!(address = %addr, "Triple connection closed"),
        Err(e) => debug!(address = %addr, error = %e, "Triple connection ended"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries with no live connection and no caller holding them go when a new address comes
    /// and the map has reached twice what the last sweep left (at least 64); an entry a caller
    /// holds stays.
    #[test]
    fn dead_entries_are_swept_as_new_addresses_come() {
        let pool = Pool::new(ConnectSettings {
            keep_alive_interval: None,
            keep_alive_timeout: Duration::from_secs(1),
            tls: None,
        });
        let held = pool.entry("10.0.0.1:50051");
        for port in 1..64 {
            drop(pool.entry(&format!("10.0.1.1:{port}")));
        }
        assert_eq!(pool.addresses().len(), 64);
        let _next = pool.entry("10.0.0.2:50051");
        let mut left = pool.addresses();
        left.sort();
        assert_eq!(left, ["10.0.0.1:50051", "10.0.0.2:50051"]);
        assert!(!held.is_connected());
    }
}
