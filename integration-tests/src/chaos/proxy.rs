//! A TCP proxy a scenario can cut: open connections closed, new ones black-holed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};

// ---------------------------------------------------------------------------------------------
// A TCP proxy that can cut the line
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line {
    Open,
    Cut,
    /// New connections are closed at once (a port nothing answers on): a client moves on to
    /// its next server without waiting for a timeout.
    Refuse,
}

/// Forwards 127.0.0.1:`addr()` to an upstream address; [`TcpProxy::cut`] closes every
/// connection and black-holes new ones (accepted, read and discarded, never answered or
/// forwarded) until [`TcpProxy::restore`]: what a client sees when its network partitions.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    line: Arc<watch::Sender<Line>>,
    conns: Arc<Mutex<Vec<AbortHandle>>>,
    accepted: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a fresh 127.0.0.1 port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<TcpProxy> {
        Self::start_at(0, upstream).await
    }

    /// Like [`TcpProxy::start`] on 127.0.0.1:`port` (for a client that derives one port from
    /// another, as nacos-sdk derives the gRPC port as the HTTP port + 1000).
    pub async fn start_at(port: u16, upstream: SocketAddr) -> std::io::Result<TcpProxy> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let (line, _) = watch::channel(Line::Open);
        let line = Arc::new(line);
        let conns: Arc<Mutex<Vec<AbortHandle>>> = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            line.clone(),
            conns.clone(),
            accepted.clone(),
        ));
        Ok(TcpProxy {
            addr,
            line,
            conns,
            accepted,
            accept,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn switch(&self, to: Line) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        self.line.send_replace(to);
        for c in conns.drain(..) {
            c.abort();
        }
    }

    /// Cuts the line: open connections are closed, new ones are black-holed.
    pub fn cut(&self) {
        self.switch(Line::Cut);
    }

    /// Restores the line: black-holed connections are closed, new ones are forwarded.
    pub fn restore(&self) {
        self.switch(Line::Open);
    }

    /// Refuses: open connections are closed, new ones are closed as soon as they are accepted
    /// (what a client sees from a port nothing listens on), until [`TcpProxy::restore`].
    pub fn refuse(&self) {
        self.switch(Line::Refuse);
    }

    /// Connections forwarded now (open on both sides; none while cut or refusing).
    pub fn forwarding(&self) -> usize {
        if *self.line.borrow() != Line::Open {
            return 0;
        }
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|c| !c.is_finished())
            .count()
    }

    /// Connections accepted so far (forwarded, black-holed or refused).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            c.abort();
        }
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    line: Arc<watch::Sender<Line>>,
    conns: Arc<Mutex<Vec<AbortHandle>>>,
    accepted: Arc<AtomicU64>,
) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        accepted.fetch_add(1, Ordering::Relaxed);
        let _ = client.set_nodelay(true);
        // Decided and registered under the lock `switch` takes: a connection accepted while
        // the line changes is either aborted by the switch or sees the new state.
        let mut open = conns.lock().unwrap_or_else(|p| p.into_inner());
        let state = *line.borrow();
        if state == Line::Refuse {
            drop(client);
            continue;
        }
        let task = if state == Line::Open {
            tokio::spawn(async move {
                let mut client = client;
                if let Ok(mut server) = TcpStream::connect(upstream).await {
                    let _ = server.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            })
        } else {
            tokio::spawn(async move {
                let mut client = client;
                let mut buf = [0u8; 1024];
                while matches!(client.read(&mut buf).await, Ok(n) if n > 0) {}
            })
        };
        open.retain(|c| !c.is_finished());
        open.push(task.abort_handle());
    }
}

// ---------------------------------------------------------------------------------------------
// Scratch files
// ---------------------------------------------------------------------------------------------

/// A fresh scratch directory (see [`crate::nacos_server::scratch_dir`]), removed when dropped.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Creates it.
    ///
    /// # Panics
    /// When it cannot be created.
    pub fn new(prefix: &str) -> ScratchDir {
        let p = crate::nacos_server::scratch_dir(prefix);
        std::fs::create_dir_all(&p)
            .unwrap_or_else(|e| panic!("create scratch directory {}: {e}", p.display()));
        ScratchDir(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
