//! A private rnacos server for tests that stop and restart Nacos (never the shared one).
//!
//! Started the way `scripts/services.sh` starts the shared server: HTTP on a port `p`, gRPC on
//! `p + 1000`, console on `p + 2000` (all three from [`crate::ports::allocate_with`]),
//! everything on 127.0.0.1, its own data directory,
//! `-e <empty file>` so no `.env` is read, and its working directory in its temp dir. The
//! binary is `$RNACOS_BIN` (exported by `scripts/services.sh`), else the default cache path.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private rnacos process; killed and its directory removed on drop.
#[derive(Debug)]
pub struct NacosServer {
    dir: PathBuf,
    http_port: u16,
    env: Vec<(String, String)>,
    child: Option<Child>,
}

/// A fresh directory path for test scratch data (nacos-sdk caches, snapshot files): under
/// `$SWITCHMAN_SERVICES_DIR` when `scripts/services.sh` set it (removed by `services_stop`, which
/// also catches files nacos-sdk's background tasks write after a test cleaned up), else under
/// the system temp directory.
pub fn scratch_dir(prefix: &str) -> PathBuf {
    let base = match std::env::var("SWITCHMAN_SERVICES_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d).join("scratch"),
        _ => std::env::temp_dir(),
    };
    base.join(crate::unique(prefix))
}

fn rnacos_bin() -> PathBuf {
    match std::env::var("RNACOS_BIN") {
        Ok(b) if !b.is_empty() => PathBuf::from(b),
        _ => {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
            PathBuf::from(home).join(".cache/switchman/rnacos-0.8.8/bin/rnacos")
        }
    }
}

fn http_ok(port: u16) -> bool {
    let Ok(mut s) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))
    else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let req = "GET /nacos/v1/ns/instance/list?serviceName=ready-check HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    // 200, or 403 when the server runs with open-API auth: either way it serves.
    matches!(s.read(&mut buf), Ok(n) if n >= 12 && buf.starts_with(b"HTTP/1.") && (&buf[9..12] == b"200" || &buf[9..12] == b"403"))
}

impl NacosServer {
    /// Starts a server on fresh ports and waits until it answers (at most 20 s).
    ///
    /// # Panics
    /// When the binary is missing or the server does not come up: the caller's test cannot
    /// mean anything without it.
    pub fn start() -> NacosServer {
        Self::start_with(&[])
    }

    /// Like [`NacosServer::start`] with extra `RNACOS_*` settings (for example
    /// `RNACOS_ENABLE_OPEN_API_AUTH=true`).
    pub fn start_with(env: &[(&str, &str)]) -> NacosServer {
        let dir = std::env::temp_dir().join(crate::unique("switchman-rnacos"));
        std::fs::create_dir_all(dir.join("data")).expect("rnacos temp dir");
        std::fs::write(dir.join("empty.env"), b"").expect("empty env file");
        let mut s = NacosServer {
            dir,
            http_port: crate::ports::allocate_with(&[1000, 2000]),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
        };
        s.spawn();
        s
    }

    /// Starts the process and waits until it serves. rnacos 0.8.8 sometimes loses a start-up
    /// race in its raft state machine (a panic in `raftapply.rs` within milliseconds), after
    /// which every raft-backed request (config, login, persistent instances) fails with
    /// "Mailbox has closed"; such a start is detected in the log and retried.
    fn spawn(&mut self) {
        for attempt in 1..=3 {
            let log_start = std::fs::metadata(self.dir.join("rnacos.log"))
                .map(|m| m.len() as usize)
                .unwrap_or(0);
            self.spawn_once();
            // The panic, when it happens, is logged before the server answers.
            let log = std::fs::read(self.dir.join("rnacos.log")).unwrap_or_default();
            let fresh = String::from_utf8_lossy(log.get(log_start..).unwrap_or_default());
            if !fresh.contains("panicked at") {
                return;
            }
            eprintln!("rnacos start {attempt} hit its start-up panic; starting it again");
            self.stop();
        }
        panic!(
            "rnacos on 127.0.0.1:{} kept panicking at start; log: {}",
            self.http_port,
            self.log_tail()
        );
    }

    fn spawn_once(&mut self) {
        let p = self.http_port;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("rnacos.log"))
            .expect("rnacos log");
        let child = Command::new(rnacos_bin())
            .arg("-e")
            .arg(self.dir.join("empty.env"))
            .current_dir(&self.dir)
            .env("RNACOS_HTTP_PORT", p.to_string())
            .env("RNACOS_GRPC_PORT", (p + 1000).to_string())
            .env("RNACOS_HTTP_CONSOLE_PORT", (p + 2000).to_string())
            .env("RNACOS_SDK_HOST", "127.0.0.1")
            .env("RNACOS_CONSOLE_HOST", "127.0.0.1")
            .env("RNACOS_DATA_DIR", self.dir.join("data"))
            .env("RNACOS_RAFT_NODE_ADDR", format!("127.0.0.1:{}", p + 1000))
            .env("RNACOS_ENABLE_METRICS", "false")
            .env(
                "RNACOS_NAMING_INSTANCE_METADATA_PERSISTENCE_ENABLE",
                "false",
            )
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", rnacos_bin().display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if http_ok(p) && TcpStream::connect(("127.0.0.1", p + 1000)).is_ok() {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "rnacos (127.0.0.1:{p}, gRPC {}, console {}) exited with {status}; log: {}",
                    p + 1000,
                    p + 2000,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "rnacos did not come up on 127.0.0.1:{p} (gRPC {}) within 20 s; log: {}",
            p + 1000,
            self.log_tail()
        );
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("rnacos.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The server's log so far (stdout and stderr of every start).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("rnacos.log")).unwrap_or_default()
    }

    /// `127.0.0.1:<http port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    /// Stops the server (SIGTERM, then SIGKILL after 5 s) and waits for it to exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts the stopped server again on the same ports and data directory.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Whether the process is running.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for NacosServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// A 3-node rnacos cluster (raft mode)
// ---------------------------------------------------------------------------------------------

/// rnacos's raft state as `GET /nacos/v1/raft/metrics` (on the HTTP port) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftState {
    /// This node's raft id.
    pub id: u64,
    /// `Leader`, `Follower`, `Candidate` or `NonVoter`.
    pub state: String,
    /// The raft term.
    pub term: u64,
    /// The leader this node knows of.
    pub leader: Option<u64>,
    /// The voting members.
    pub members: Vec<u64>,
}

/// A node's raft state, `None` when it does not answer.
pub fn raft_state(http_port: u16) -> Option<RaftState> {
    let body = crate::nacos_api::request(
        &format!("127.0.0.1:{http_port}"),
        "GET",
        "/nacos/v1/raft/metrics",
        &[],
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let mut members: Vec<u64> = v["membership_config"]["members"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    members.sort_unstable();
    Some(RaftState {
        id: v["id"].as_u64()?,
        state: v["state"].as_str()?.to_string(),
        term: v["current_term"].as_u64()?,
        leader: v["current_leader"].as_u64(),
        members,
    })
}

impl NacosServer {
    /// A server set up on fresh ports, not started.
    fn stopped(env: Vec<(String, String)>) -> NacosServer {
        let dir = std::env::temp_dir().join(crate::unique("switchman-rnacos"));
        std::fs::create_dir_all(dir.join("data")).expect("rnacos temp dir");
        std::fs::write(dir.join("empty.env"), b"").expect("empty env file");
        NacosServer {
            dir,
            http_port: crate::ports::allocate_with(&[1000, 2000]),
            env,
            child: None,
        }
    }

    /// Starts a node with an empty data directory. When rnacos hits its start-up panic (see
    /// [`NacosServer::spawn`]) the node's raft state is half-written (a node that panicked
    /// while initialising the cluster comes back as a non-voter without members), so the data
    /// directory is emptied before the next try.
    fn spawn_fresh(&mut self) {
        for attempt in 1..=3 {
            self.spawn_once();
            // The panic, when it happens, comes within milliseconds of the raft set-up, which
            // may follow the first answers: look again a moment later.
            std::thread::sleep(Duration::from_millis(300));
            if !self.log().contains("panicked at") {
                return;
            }
            eprintln!("rnacos node start {attempt} hit its start-up panic; wiping and retrying");
            self.kill();
            let _ = std::fs::remove_dir_all(self.dir.join("data"));
            std::fs::create_dir_all(self.dir.join("data")).expect("rnacos data dir");
            let _ = std::fs::rename(
                self.dir.join("rnacos.log"),
                self.dir.join(format!("rnacos.panic{attempt}.log")),
            );
        }
        panic!(
            "rnacos on 127.0.0.1:{} kept panicking at start; log: {}",
            self.http_port,
            self.log_tail()
        );
    }

    /// `kill -9` (no shutdown of any kind); waits for the process to end.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The HTTP (open API) port.
    pub fn http_port(&self) -> u16 {
        self.http_port
    }

    /// The gRPC (SDK) port: HTTP + 1000, as nacos-sdk derives it.
    pub fn grpc_port(&self) -> u16 {
        self.http_port + 1000
    }

    /// This node's raft state (`None` when it does not answer or is not running).
    pub fn raft(&self) -> Option<RaftState> {
        self.child.as_ref()?;
        raft_state(self.http_port)
    }
}

/// A 3-node rnacos cluster in raft mode on 127.0.0.1, each node a [`NacosServer`] (HTTP `p`,
/// gRPC `p + 1000`, which is also its raft address, console `p + 2000`). Node 1
/// (`RNACOS_RAFT_NODE_ID=1`) initialises the cluster (`RNACOS_RAFT_AUTO_INIT=true`), nodes 2
/// and 3 join it through node 1's gRPC port (`RNACOS_RAFT_JOIN_ADDR`); a node restarted with
/// its data directory rejoins as the member it was.
///
/// What rnacos replicates (0.8.8): config through raft; naming (ephemeral and persistent
/// instances) through its Distro-like cluster sync, each service owned by one node (a hash of
/// the service key over the valid nodes), writes to another node routed to the owner, every
/// node holding and serving the whole view.
#[derive(Debug)]
pub struct NacosCluster {
    nodes: Vec<NacosServer>,
}

impl NacosCluster {
    /// Starts the three nodes and waits (at most 30 s) until all of them are voting members
    /// agreeing on one leader.
    ///
    /// # Panics
    /// When a node does not start or the cluster does not form.
    pub fn start() -> NacosCluster {
        let mut nodes: Vec<NacosServer> = Vec::new();
        for id in 1..=3u64 {
            let mut env = vec![
                ("RNACOS_RAFT_NODE_ID".to_string(), id.to_string()),
                ("RNACOS_RAFT_AUTO_INIT".to_string(), (id == 1).to_string()),
            ];
            if let Some(first) = nodes.first() {
                env.push((
                    "RNACOS_RAFT_JOIN_ADDR".to_string(),
                    format!("127.0.0.1:{}", first.grpc_port()),
                ));
            }
            let mut node = NacosServer::stopped(env);
            node.spawn_fresh();
            if id == 1 {
                // The others join through it: it must lead its one-member cluster first.
                let deadline = Instant::now() + Duration::from_secs(10);
                while node.raft().is_none_or(|r| r.state != "Leader") {
                    assert!(
                        Instant::now() < deadline,
                        "rnacos node 1 does not lead within 10 s: {:?}; log: {}",
                        node.raft(),
                        node.log_tail()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            nodes.push(node);
        }
        let mut cluster = NacosCluster { nodes };
        cluster.wait_formed(Duration::from_secs(30));
        cluster
    }

    /// Waits until every running node is a voting member of the full cluster and all agree
    /// on a leader; a node that did not join within 5 s of starting (rnacos sends its join
    /// request once) is wiped and started again.
    fn wait_formed(&mut self, within: Duration) {
        let start = Instant::now();
        let mut rejoin_at = Instant::now() + Duration::from_secs(5);
        loop {
            if self.leader().is_some()
                && self.nodes.iter().all(|n| {
                    n.raft()
                        .is_some_and(|r| r.members == [1, 2, 3] && r.state != "NonVoter")
                })
            {
                return;
            }
            assert!(
                start.elapsed() < within,
                "the rnacos cluster does not form within {within:?}: {:?}",
                self.nodes.iter().map(NacosServer::raft).collect::<Vec<_>>()
            );
            if Instant::now() > rejoin_at {
                for i in 1..self.nodes.len() {
                    if self.nodes[i].raft().is_some_and(|r| r.members.is_empty()) {
                        eprintln!("rnacos node {} did not join; starting it again", i + 1);
                        let node = &mut self.nodes[i];
                        node.kill();
                        let _ = std::fs::remove_dir_all(node.dir.join("data"));
                        std::fs::create_dir_all(node.dir.join("data")).expect("rnacos data dir");
                        node.spawn_fresh();
                    }
                }
                rejoin_at = Instant::now() + Duration::from_secs(5);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The nodes (index 0 is raft node 1).
    pub fn nodes(&self) -> &[NacosServer] {
        &self.nodes
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &NacosServer {
        &self.nodes[i]
    }

    /// The index of the node leading now: one that says it is the leader and that every
    /// other running node names as its leader.
    pub fn leader(&self) -> Option<usize> {
        let states: Vec<Option<RaftState>> = self.nodes.iter().map(NacosServer::raft).collect();
        let i = states
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.state == "Leader"))?;
        let id = states[i].as_ref()?.id;
        let agreed = self
            .nodes
            .iter()
            .zip(&states)
            .filter(|(n, _)| n.is_running())
            .all(|(_, s)| s.as_ref().is_some_and(|s| s.leader == Some(id)));
        agreed.then_some(i)
    }

    /// `kill -9` of node `i`.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Starts node `i` again with its data directory (it rejoins as the member it was) and
    /// waits until it serves.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }

    /// `127.0.0.1:<http port>` of `nodes`.
    pub fn addrs(&self, nodes: &[usize]) -> Vec<String> {
        nodes.iter().map(|&i| self.nodes[i].addr()).collect()
    }
}
