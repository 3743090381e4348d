//! Providers on the official Dubbo Python implementation (PyPI `apache-dubbo` 3.0.0b1), for the
//! Triple tests: `peers/dubbo_hello_provider.py` started on a 127.0.0.1 port from
//! [`crate::ports::allocate`] (the script needs its port up front), registered in
//! the ZooKeeper at `SWITCHMAN_ZK`, killed (SIGKILL) when the [`PythonPeer`] is dropped.
//!
//! The interpreter is `$SWITCHMAN_DUBBO_PYTHON`, else
//! `${SWITCHMAN_CACHE:-$HOME/.cache/switchman}/venv-dubbo/bin/python`, the virtualenv that
//! `scripts/install-python-peers` creates.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a provider may take to start and register.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The provider script.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/dubbo_hello_provider.py")
}

/// The Python interpreter with `apache-dubbo` installed.
///
/// # Panics
/// When it does not exist: run `scripts/install-python-peers` (scripts/test does).
pub fn python() -> PathBuf {
    let path = match std::env::var("SWITCHMAN_DUBBO_PYTHON") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            let cache = match std::env::var("SWITCHMAN_CACHE") {
                Ok(c) if !c.is_empty() => PathBuf::from(c),
                _ => PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
                    .join(".cache/switchman"),
            };
            cache.join("venv-dubbo/bin/python")
        }
    };
    assert!(
        path.exists(),
        "{} does not exist: run scripts/install-python-peers (scripts/test does) or set SWITCHMAN_DUBBO_PYTHON",
        path.display()
    );
    path
}

/// One running apache-dubbo provider. `sayHello(bytes)` answers
/// `b"hello, {request} from {label}"`; `fail(bytes)` raises.
#[derive(Debug)]
pub struct PythonPeer {
    child: Option<Child>,
    port: u16,
    label: String,
    stderr: mpsc::Receiver<String>,
}

impl PythonPeer {
    /// Starts a provider of `service` labelled `label`, registered in ZooKeeper at `zk`
    /// (`host:port`), and waits until it has exported (registered and listening).
    ///
    /// # Panics
    /// When it does not start in time; the message carries its output.
    pub fn start(zk: &str, service: &str, label: &str) -> PythonPeer {
        let port = crate::ports::allocate();
        let mut child = Command::new(python())
            .arg(script())
            .args(["--zk", zk, "--port", &port.to_string(), "--label", label])
            .args(["--service", service])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the Python provider starts");
        let (ready_tx, ready_rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("READY") {
                    let _ = ready_tx.send(());
                }
            }
        });
        let (err_tx, err_rx) = mpsc::channel();
        let mut stderr = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0
                    || err_tx
                        .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        let mut peer = PythonPeer {
            child: Some(child),
            port,
            label: label.to_string(),
            stderr: err_rx,
        };
        if ready_rx.recv_timeout(START_TIMEOUT).is_err() {
            peer.kill();
            panic!(
                "the Python provider {label} did not start on port {port}:\n{}",
                peer.output()
            );
        }
        peer
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:{port}`, the address it registers.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The label its replies carry.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// What it wrote on stderr so far (its logs).
    pub fn output(&self) -> String {
        self.stderr.try_iter().collect()
    }

    /// Kills it with SIGKILL and waits for it to exit. Its ZooKeeper node stays until the
    /// session times out, as after a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PythonPeer {
    fn drop(&mut self) {
        self.kill();
    }
}
