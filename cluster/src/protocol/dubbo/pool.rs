//! The connections of one invoker, by provider address.
//!
//! Each address has `connections` slots (the provider's `connections=N`, 0 meaning one shared
//! connection, Dubbo's default; at most 16). Slots are filled lazily and taken in turn; a closed
//! connection is replaced the next time its slot comes up, and concurrent callers wait for one
//! connect instead of each opening their own. Readonly connections (the provider announced a
//! graceful shutdown) are skipped; when every connection of an address is readonly, the pool
//! refuses with a retryable error that is not an outlier strike, and opens nothing new. Beyond
//! Dubbo: a connection readonly for three heartbeat intervals (long after Java's 10 s shutdown
//! wait: the provider is still there, put back online) is replaced on next use.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use switchman_core::{Error, Result};

use crate::by_address::SharedByAddress;
use tokio::time::Instant;

use super::connection::{Connection, ExchangeConfig};
use super::params::MAX_CONNECTIONS;
use crate::protocol::tls::ClientTls;

/// Connections per provider address, shared by every call of one invoker. Cheap to clone;
/// clones share the connections.
#[derive(Clone, Default)]
pub struct Pool {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    config: ExchangeConfig,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// The entry count at which the next new address first drops dead entries.
    sweep_at: AtomicUsize,
    /// The connections owned by endpoints (made by the invoker as a `MakeEndpoint`), shared
    /// by the endpoints at one address.
    endpoints: SharedByAddress<Entry>,
}

/// The slots of one address: a pool entry, or owned by the endpoints at that address (see
/// [`Pool::endpoint_entry`]), in which case its connections close with the last of them.
#[derive(Default)]
pub(crate) struct Entry {
    slots: Mutex<Vec<Arc<Slot>>>,
    turn: AtomicUsize,
}

#[derive(Default)]
struct Slot {
    conn: Mutex<Option<Connection>>,
    /// Serializes connects of this slot.
    connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    fn current(&self) -> Option<Connection> {
        lock(&self.conn).clone()
    }
}

impl Entry {
    /// Whether one of its connections is open (not closed by the peer, an error or missed
    /// heartbeats).
    fn has_open_connection(&self) -> bool {
        lock(&self.slots)
            .iter()
            .any(|s| s.current().is_some_and(|c| !c.is_closed()))
    }
}

/// The fewest entries at which a new address sweeps dead ones (see [`Pool::get`]).
const MIN_SWEEP: usize = 64;

enum Pick {
    Ready(Connection),
    Draining,
    Connect(Arc<Slot>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = lock(&self.inner.entries);
        let mut addresses: Vec<(&str, usize)> = entries
            .iter()
            .map(|(a, e)| {
                let live = lock(&e.slots)
                    .iter()
                    .filter(|s| s.current().is_some_and(|c| !c.is_closed()))
                    .count();
                (a.as_str(), live)
            })
            .collect();
        addresses.sort_unstable();
        f.debug_struct("Pool")
            .field("config", &self.inner.config)
            .field("connections", &addresses)
            .finish()
    }
}

impl Pool {
    /// An empty pool whose connections use `config` (its `connect_timeout` is overridden per
    /// [`Pool::get`]).
    pub fn new(config: ExchangeConfig) -> Self {
        Pool {
            inner: Arc::new(Inner {
                config,
                entries: Mutex::new(HashMap::new()),
                sweep_at: AtomicUsize::new(MIN_SWEEP),
                endpoints: SharedByAddress::default(),
            }),
        }
    }

    /// A live connection to `address`: `connections` connections per address (the
    /// provider's `connections=N`; 0 means one shared connection; at most 16), made lazily
    /// and used in turn; a closed one is replaced when its turn comes. Waiting for another caller's
    /// connect and connecting together take at most `connect_timeout`.
    ///
    /// Fails with a retryable transport error when connecting fails or times out, and with a
    /// retryable error that is not an outlier strike when every connection to the address is
    /// readonly (the provider is shutting down: call another instance). A connection readonly
    /// for three heartbeat intervals and idle is replaced (the provider came back online).
    pub async fn get(
        &self,
        address: &str,
        connections: usize,
        connect_timeout: Duration,
    ) -> Result<Connection> {
        self.get_with(address, connections, connect_timeout, None)
            .await
    }

    /// [`Pool::get`], where a connection made now uses `heartbeat` instead of the pool's
    /// interval when it is given (the provider's `heartbeat` parameter, as Java consumers
    /// take it from the provider's URL).
    pub async fn get_with(
        &self,
        address: &str,
        connections: usize,
        connect_timeout: Duration,
        heartbeat: Option<Duration>,
    ) -> Result<Connection> {
        let entry = self.entry(address);
        self.get_on(
            &entry,
            address,
            connections,
            connect_timeout,
            heartbeat,
            None,
        )
        .await
    }

    /// The connection for an endpoint at `address`: the slots the other live endpoints there
    /// share, else new ones. Not in the pool: they live as long as their endpoints.
    pub(crate) fn endpoint_entry(&self, address: &str) -> Arc<Entry> {
        self.inner.endpoints.get(address)
    }

    /// [`Pool::get_with`] on `entry` (a pool entry or an endpoint's); a connection made now
    /// uses TLS when `tls` is given.
    pub(crate) async fn get_on(
        &self,
        entry: &Entry,
        address: &str,
        connections: usize,
        connect_timeout: Duration,
        heartbeat: Option<Duration>,
        tls: Option<&ClientTls>,
    ) -> Result<Connection> {
        let n = connections.clamp(1, MAX_CONNECTIONS);
        let slot = match entry.pick(n, self.readonly_hold()) {
            Pick::Ready(c) => return Ok(c),
            Pick::Draining => return Err(draining(address)),
            Pick::Connect(slot) => slot,
        };
        let deadline = Instant::now() + connect_timeout;
        let timed_out = || {
            Error::transport(format!(
                "connecting to {address} timed out after {} ms",
                connect_timeout.as_millis()
            ))
            .with_unavailable(true)
        };
        let _connecting = tokio::time::timeout_at(deadline, slot.connecting.lock())
            .await
            .map_err(|_| timed_out())?;
        if let Some(c) = slot.current().filter(|c| !c.is_closed()) {
            // Another caller connected meanwhile.
            return if c.is_readonly() {
                Err(draining(address))
            } else {
                Ok(c)
            };
        }
        let config = ExchangeConfig {
            connect_timeout: deadline.saturating_duration_since(Instant::now()),
            heartbeat: heartbeat.unwrap_or(self.inner.config.heartbeat),
            ..self.inner.config.clone()
        };
        // Not connected: nothing was sent, another instance can take the call.
        let conn = match tls {
            None => Connection::connect(address, config).await,
            Some(tls) => Connection::connect_tls(address, config, tls).await,
        }
        .map_err(|e| e.with_unavailable(true))?;
        *lock(&slot.conn) = Some(conn.clone());
        Ok(conn)
    }

    /// Drops the connections of the addresses for which `keep` is false. A dropped
    /// connection closes once the calls using it are done.
    pub fn retain(&self, keep: &dyn Fn(&str) -> bool) {
        lock(&self.inner.entries).retain(|address, _| keep(address));
    }

    /// The number of addresses with an entry (connected, or connected to before).
    pub fn len(&self) -> usize {
        lock(&self.inner.entries).len()
    }

    /// Whether no address has an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn entry(&self, address: &str) -> Arc<Entry> {
        let mut entries = lock(&self.inner.entries);
        if let Some(e) = entries.get(address) {
            return e.clone();
        }
        // Providers come and go (rolling deploys bring new addresses): before the map grows
        // past twice what the last sweep left (at least MIN_SWEEP), drop the entries that no
        // call holds and that have no open connection (their provider went away), so it stays
        // bounded by the live addresses without anyone calling `retain`. Amortized O(1).
        let sweep_at = self.inner.sweep_at.load(Ordering::Relaxed);
        if entries.len() >= sweep_at.max(MIN_SWEEP) {
            entries.retain(|_, e| Arc::strong_count(e) > 1 || e.has_open_connection());
            self.inner
                .sweep_at
                .store((entries.len() * 2).max(MIN_SWEEP), Ordering::Relaxed);
        }
        let e = Arc::new(Entry::default());
        entries.insert(address.to_string(), e.clone());
        e
    }

    /// How long a readonly connection is kept before it is replaced (zero: never).
    fn readonly_hold(&self) -> Duration {
        self.inner.config.heartbeat.saturating_mul(3)
    }

    /// The live connections to `address`, in slot order.
    #[cfg(test)]
    pub(crate) fn connections(&self, address: &str) -> Vec<Connection> {
        let Some(entry) = lock(&self.inner.entries).get(address).cloned() else {
            return Vec::new();
        };
        lock(&entry.slots)
            .iter()
            .filter_map(|s| s.current())
            .filter(|c| !c.is_closed())
            .collect()
    }
}

impl Entry {
    /// The connection whose turn it is; another live one when it is readonly; the slot to
    /// fill when it is empty or closed (unless the provider is draining).
    fn pick(&self, n: usize, readonly_hold: Duration) -> Pick {
        let mut slots = lock(&self.slots);
        if slots.len() != n {
            slots.resize_with(n, Default::default);
        }
        let start = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let mut other = None;
        let mut readonly = false;
        for i in 0..n {
            let slot = &slots[(start + i) % n];
            let mut guard = lock(&slot.conn);
            let Some(c) = guard.as_ref().filter(|c| !c.is_closed()) else {
                continue;
            };
            if !c.is_readonly() {
                if i == 0 {
                    return Pick::Ready(c.clone());
                }
                other.get_or_insert_with(|| c.clone());
            } else if !readonly_hold.is_zero()
                && c.in_flight() == 0
                && c.readonly_for().is_some_and(|d| d >= readonly_hold)
            {
                // Readonly for long after any graceful shutdown: the provider is back.
                *guard = None;
            } else {
                readonly = true;
            }
        }
        if readonly {
            // The provider is draining: use what is still writeable, open nothing new.
            return other.map_or(Pick::Draining, Pick::Ready);
        }
        Pick::Connect(slots[start].clone())
    }
}

fn draining(address: &str) -> Error {
    Error::transport(format!(
        "{address} is shutting down: every connection to it received the provider's readonly event"
    ))
    .with_outlier_strike(false)
    .with_leaving()
}
