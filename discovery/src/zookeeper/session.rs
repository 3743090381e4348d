//! One ZooKeeper session shared by a registry's subscriptions and registrations, kept alive by a
//! background task: connect (with retries and backoff), re-create the registered ephemeral
//! nodes, publish the client, and on a terminal state (expiry, auth failure, close) start
//! over with a new session.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::ZkConfig;

/// A live client and the number of the session it belongs to (1 for the first, +1 after each
/// new session). Subscriptions re-list when the number changes.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) client: zk::Client,
    pub(crate) generation: u64,
}

/// Why a ZooKeeper call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// The server's (or client's) error.
    Zk(zk::Error),
    /// No answer within the call's timeout (typically while disconnected).
    Timeout(Duration),
    /// No session: the server refused to authenticate it (SASL, or a server that requires
    /// authentication); why, for the caller's error.
    Refused(Arc<str>),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Zk(e) => write!(f, "{e}"),
            CallError::Timeout(t) => write!(f, "no answer within {t:?}"),
            CallError::Refused(why) => f.write_str(why),
        }
    }
}

/// Runs one ZooKeeper call with its own timeout.
pub(crate) async fn call<T>(
    timeout: Duration,
    fut: impl Future<Output = Result<T, zk::Error>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(CallError::Zk(e)),
        Err(_) => Err(CallError::Timeout(timeout)),
    }
}

/// The shared session of one registry.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) config: Arc<ZkConfig>,
    clients: Arc<watch::Sender<Option<Conn>>>,
    /// Why the last connect failed, while the server refuses to authenticate the session:
    /// callers waiting for a client get that at once instead of a timeout.
    refused: Arc<watch::Sender<Option<Arc<str>>>>,
    /// Ephemeral nodes to keep: path → data. Re-created on every new session.
    registered: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    started: Mutex<bool>,
    /// Set when the server turned out to have no persistent watches.
    oneshot: std::sync::atomic::AtomicBool,
    /// Dropped with the session: the background task then ends and drops its client, which
    /// closes the ZooKeeper session (and removes its ephemeral nodes at once).
    stop: watch::Sender<()>,
}

impl Session {
    pub(crate) fn new(config: ZkConfig) -> Self {
        let (clients, _) = watch::channel(None);
        let (refused, _) = watch::channel(None);
        let (stop, _) = watch::channel(());
        Session {
            config: Arc::new(config),
            clients: Arc::new(clients),
            refused: Arc::new(refused),
            registered: Arc::new(Mutex::new(BTreeMap::new())),
            started: Mutex::new(false),
            oneshot: std::sync::atomic::AtomicBool::new(false),
            stop,
        }
    }

    /// Starts the background task on first use (inside a tokio runtime).
    pub(crate) fn ensure_started(&self) {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        if *started {
            return;
        }
        *started = true;
        tokio::spawn(run(
            self.config.clone(),
            self.clients.clone(),
            self.refused.clone(),
            self.registered.clone(),
            self.stop.subscribe(),
        ));
    }

    /// Observes the current client (`None` while there is no session).
    pub(crate) fn clients(&self) -> watch::Receiver<Option<Conn>> {
        self.clients.subscribe()
    }

    /// The current client, waiting up to `wait` for a session; at once the reason when the
    /// server refuses to authenticate one ([`CallError::Refused`]).
    pub(crate) async fn client(&self, wait: Duration) -> Result<Conn, CallError> {
        self.ensure_started();
        let mut rx = self.clients.subscribe();
        let mut refused = self.refused.subscribe();
        let fut = async {
            loop {
                if let Some(c) = rx.borrow_and_update().clone() {
                    return Ok(c);
                }
                if let Some(why) = refused.borrow_and_update().clone() {
                    return Err(CallError::Refused(why));
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() {
                        return Err(CallError::Zk(zk::Error::ClientClosed));
                    },
                    r = refused.changed() => if r.is_err() {
                        return Err(CallError::Zk(zk::Error::ClientClosed));
                    },
                }
            }
        };
        match tokio::time::timeout(wait, fut).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout(wait)),
        }
    }

    /// Whether subscriptions fall back to one-shot watches (an old server).
    pub(crate) fn oneshot_fallback(&self) -> bool {
        self.oneshot.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that the server has no persistent watches.
    pub(crate) fn set_oneshot_fallback(&self) {
        self.oneshot
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Remembers an ephemeral node so every new session re-creates it.
    pub(crate) fn keep(&self, path: &str, data: &[u8]) {
        self.registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_string(), data.to_vec());
    }

    /// Whether `path` is still to be kept.
    pub(crate) fn is_kept(&self, path: &str) -> bool {
        self.registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(path)
    }

    /// Forgets an ephemeral node; whether it was kept.
    pub(crate) fn forget(&self, path: &str) -> bool {
        self.registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(path)
            .is_some()
    }
}

/// The ACLs of every node we create: creator-all when the session authenticates (digest),
/// anyone-all otherwise (what Dubbo's Curator client does).
pub(crate) fn acls(config: &ZkConfig) -> zk::Acls<'static> {
    if config.auth.is_some() {
        zk::Acls::creator_all()
    } else {
        zk::Acls::anyone_all()
    }
}

/// Creates (or takes over) the ephemeral node `path` with persistent parents.
pub(crate) async fn ensure_ephemeral(
    client: &zk::Client,
    config: &ZkConfig,
    path: &str,
    data: &[u8],
) -> Result<(), CallError> {
    let t = config.timeout;
    let acls = acls(config);
    if let Some((parent, _)) = path.rsplit_once('/')
        && !parent.is_empty()
    {
        call(
            t,
            client.mkdir(parent, &zk::CreateMode::Persistent.with_acls(acls)),
        )
        .await?;
    }
    let mode = zk::CreateMode::Ephemeral.with_acls(acls);
    for _ in 0..3 {
        match call(t, client.create(path, data, &mode)).await {
            Ok(_) => return Ok(()),
            Err(CallError::Zk(zk::Error::NodeExists)) => {
                // Ours already (a retried create), or a node left by an older session of this
                // provider that the server has not expired yet: delete and re-create, as Dubbo
                // does.
                match call(t, client.check_stat(path)).await? {
                    Some(stat) if stat.ephemeral_owner == client.session_id().0 => return Ok(()),
                    Some(_) => match call(t, client.delete(path, None)).await {
                        Ok(()) | Err(CallError::Zk(zk::Error::NoNode)) => {}
                        Err(e) => return Err(e),
                    },
                    None => {}
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(CallError::Zk(zk::Error::NodeExists))
}

/// Why a connect failed.
struct ConnectError {
    why: String,
    /// The server refused to authenticate the session (SASL failed, or it requires SASL).
    refused: bool,
}

impl From<String> for ConnectError {
    fn from(why: String) -> Self {
        ConnectError {
            why,
            refused: false,
        }
    }
}

/// The reason of an authentication failure: with SASL, who was refused; without, that the
/// server wants SASL.
fn refusal(config: &ZkConfig) -> String {
    match &config.sasl {
        Some(sasl) if sasl.is_digest() => format!(
            "{sasl} was refused by ZooKeeper (authentication failed): the user or password \
             is not the server's (its JAAS Server section)"
        ),
        Some(sasl) => format!(
            "{sasl} was refused by ZooKeeper (authentication failed): no valid ticket for \
             the server principal (kinit, or KRB5_CLIENT_KTNAME), or the server does not \
             accept this client's principal"
        ),
        None => "ZooKeeper refused the session (authentication failed): a server that \
             requires SASL (enforce.auth.enabled, enforce.auth.schemes=sasl) needs \
             sasl=digest-md5 with sasl.username and sasl.password, or sasl.jaas"
            .to_string(),
    }
}

/// Connects a new session. With `secure=true` the client talks to the TLS relays of `relay`
/// (started on first use, kept by the session task), and a failure says why TLS failed.
async fn connect(
    config: &ZkConfig,
    relay: &mut Option<super::tls::Relay>,
) -> Result<zk::Client, ConnectError> {
    let mut connector = zk::Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_fail_eagerly();
    if let Some(auth) = &config.auth {
        connector = connector.with_auth("digest", auth.as_bytes());
    }
    if let Some(sasl) = &config.sasl {
        // Behind the TLS relay the client sees 127.0.0.1: name the one server's host.
        let relayed_host = config
            .tls
            .as_ref()
            .and_then(|_| config.servers.split(',').next())
            .map(crate::address::host_of);
        connector = connector.with_sasl(sasl.options(relayed_host));
    }
    if let Some(tls) = &config.tls
        && relay.is_none()
    {
        *relay = Some(tls.relay(config.timeout).await?);
    }
    let servers = match relay.as_ref() {
        Some(r) => {
            let _ = r.take_error();
            r.connect_string()
        }
        None => config.servers.as_str(),
    };
    // The TLS failure behind a failed connect, if any.
    let why = |e: String| match relay.as_ref().and_then(|r| r.take_error()) {
        Some(tls) => format!("{e}: {tls}"),
        None => e,
    };
    let client = match tokio::time::timeout(config.timeout, connector.connect(servers)).await {
        Ok(Ok(c)) => c,
        Ok(Err(zk::Error::AuthFailed)) => {
            return Err(ConnectError {
                why: refusal(config),
                refused: true,
            });
        }
        Ok(Err(e)) => {
            let mut e = why(e.to_string());
            if let Some(sasl) = config.sasl.as_ref().filter(|s| !s.is_digest()) {
                // zookeeper-client logs the Kerberos reason (a warning) and answers "no
                // available hosts": say which handshake it was.
                e = format!(
                    "{e} ({sasl}: with the servers up, the Kerberos handshake failed; \
                     zookeeper_client's warning gives the reason, such as an unknown server \
                     principal or no ticket)"
                );
            }
            return Err(e.into());
        }
        Err(_) => return Err(why(format!("no session within {:?}", config.timeout)).into()),
    };
    match &config.chroot {
        None => Ok(client),
        Some(root) => {
            let opts = zk::CreateMode::Persistent.with_acls(acls(config));
            call(config.timeout, client.mkdir(root, &opts))
                .await
                .map_err(|e| format!("cannot create chroot {root}: {e}"))?;
            client
                .chroot(root.clone())
                .map_err(|_| format!("invalid chroot {root:?}").into())
        }
    }
}

async fn run(
    config: Arc<ZkConfig>,
    clients: Arc<watch::Sender<Option<Conn>>>,
    refused: Arc<watch::Sender<Option<Arc<str>>>>,
    registered: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    mut stop: watch::Receiver<()>,
) {
    let mut backoff = Duration::from_millis(100);
    let mut generation = 0u64;
    let mut failing = false;
    // Since when ZooKeeper was out of reach (connect failing, or the session ended): the next
    // session's log line says how long that took.
    let mut down_since: Option<std::time::Instant> = None;
    // The TLS relays (`secure=true`), for as long as this task runs.
    let mut relay = None;
    let stopped = |config: &ZkConfig| {
        debug!(registry = %config.redacted, "ZooKeeper session task stopped: the registry was dropped");
    };
    loop {
        let connected = tokio::select! {
            r = connect(&config, &mut relay) => r,
            _ = stop.changed() => return stopped(&config),
        };
        let client = match connected {
            Ok(c) => {
                refused.send_replace(None);
                c
            }
            Err(ConnectError { why: e, refused: r }) => {
                refused.send_replace(r.then(|| Arc::from(e.as_str())));
                if failing {
                    debug!(registry = %config.redacted, "still cannot reach ZooKeeper: {e}");
                } else {
                    warn!(registry = %config.redacted, "cannot reach ZooKeeper, retrying in the background: {e}");
                }
                failing = true;
                down_since.get_or_insert_with(std::time::Instant::now);
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return stopped(&config),
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        failing = false;
        backoff = Duration::from_millis(100);
        generation += 1;
        let session = client.session_id();
        match down_since.take().map(|t| t.elapsed().as_millis() as u64) {
            Some(down_ms) if generation > 1 => {
                info!(registry = %config.redacted, %session, generation, down_ms, "ZooKeeper session re-established (a new session)")
            }
            Some(after_ms) => {
                info!(registry = %config.redacted, %session, after_ms, "ZooKeeper session established after retries")
            }
            None => {
                info!(registry = %config.redacted, %session, generation, "ZooKeeper session established")
            }
        }
        let nodes: Vec<(String, Vec<u8>)> = registered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let registering = std::time::Instant::now();
        let (mut created, mut failed) = (0usize, 0usize);
        for (path, data) in nodes {
            match ensure_ephemeral(&client, &config, &path, &data).await {
                Ok(()) => {
                    created += 1;
                    debug!(path, "provider node (re-)created")
                }
                Err(e) => {
                    failed += 1;
                    warn!(path, "cannot re-create provider node: {e}")
                }
            }
        }
        if created + failed > 0 && generation > 1 {
            info!(registry = %config.redacted, %session, nodes = created, failed,
                took_ms = registering.elapsed().as_millis() as u64,
                "provider nodes re-registered in the new session");
        }
        let mut states = client.state_watcher();
        clients.send_replace(Some(Conn {
            client: client.clone(),
            generation,
        }));
        let mut state = client.state();
        // When the connection was lost (same session): logged once at warn, and the
        // reconnection once at info with how long it took; never per call.
        let mut lost_at: Option<std::time::Instant> = None;
        while !state.is_terminated() {
            tokio::select! {
                s = states.changed() => {
                    state = s;
                    debug!(registry = %config.redacted, state = %s, "ZooKeeper session state");
                    match s {
                        zk::SessionState::Disconnected if lost_at.is_none() => {
                            lost_at = Some(std::time::Instant::now());
                            warn!(registry = %config.redacted, "ZooKeeper connection lost; the last lists stay in use while the client reconnects");
                        }
                        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                            if let Some(t) = lost_at.take() {
                                info!(registry = %config.redacted, after_ms = t.elapsed().as_millis() as u64, "ZooKeeper reconnected (same session)");
                            }
                        }
                        _ => {}
                    }
                }
                _ = stop.changed() => {
                    clients.send_replace(None);
                    return stopped(&config);
                }
            }
        }
        // Expired (or closed, or refused auth): ephemeral provider nodes are gone until the
        // next session re-registers them.
        let lost_ms = lost_at.map(|t| t.elapsed().as_millis() as u64);
        warn!(registry = %config.redacted, %session, state = %state, lost_ms,
            "ZooKeeper session ended; starting a new one");
        down_since = Some(lost_at.unwrap_or_else(std::time::Instant::now));
        clients.send_replace(None);
    }
}
