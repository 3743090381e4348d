//! Private ZooKeeper servers for tests that stop, pause, kill or restart them (never the shared
//! server of `SWITCHMAN_ZK`): a standalone server or an ensemble on 127.0.0.1 ports from
//! [`crate::ports::allocate`] (client, quorum and election ports of every member),
//! started with `java -cp $SWITCHMAN_ZK_CLASSPATH org.apache.zookeeper.server.quorum.QuorumPeerMain`.
//! Every process is killed and every file removed when the [`ZkServer`] is dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::allocate;

/// A plain ZooKeeper client (10 s session) for a test to read or write nodes itself; panics
/// if it is not connected within `within`.
pub async fn raw_client(connect: &str, within: Duration) -> zookeeper_client::Client {
    tokio::time::timeout(
        within,
        zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .connect(connect),
    )
    .await
    .expect("raw ZooKeeper client connects in time")
    .expect("raw ZooKeeper client connects")
}

/// Writes `data` at `path` (persistent, open ACL), creating it and its parents or replacing
/// what is there: a config-centre rule as dubbo-admin writes it.
pub async fn put_node(client: &zookeeper_client::Client, path: &str, data: &[u8]) {
    let mode =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    if let Some((parent, _)) = path.rsplit_once('/').filter(|(p, _)| !p.is_empty()) {
        let _ = client.mkdir(parent, &mode).await;
    }
    match client.create(path, data, &mode).await {
        Ok(_) => {}
        Err(zookeeper_client::Error::NodeExists) => {
            client
                .set_data(path, data, None)
                .await
                .unwrap_or_else(|e| panic!("set {path}: {e}"));
        }
        Err(e) => panic!("create {path}: {e}"),
    }
}

/// The 127.0.0.1 ports of one ensemble member ([`ZkServer::allocate_ensemble`]).
#[derive(Debug, Clone, Copy)]
pub struct MemberPorts {
    /// The client port.
    pub client: u16,
    /// The port followers connect to when this member leads.
    pub quorum: u16,
    /// The leader-election port.
    pub election: u16,
}

/// One server process of a [`ZkServer`].
#[derive(Debug)]
struct Node {
    client_port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A private ZooKeeper (standalone or ensemble).
#[derive(Debug)]
pub struct ZkServer {
    dir: PathBuf,
    nodes: Vec<Node>,
    /// The TLS client port of a server started by [`ZkServer::standalone_tls`].
    secure_port: Option<u16>,
    /// Extra JVM options of every member (the JAAS file of [`ZkServer::standalone_sasl`]).
    jvm_options: Vec<String>,
}

/// The PEM files of a TLS ZooKeeper ([`ZkServer::standalone_tls`]).
#[derive(Debug, Clone)]
pub struct ZkTlsFiles {
    /// The server's private key and certificate chain in one PEM file.
    pub key_store: PathBuf,
    /// The CA (PEM) the server checks client certificates against.
    pub trust_store: PathBuf,
    /// `ssl.clientAuth`: `need`, `want` or `none`.
    pub client_auth: &'static str,
}

/// The SASL settings of a ZooKeeper started by [`ZkServer::standalone_sasl`]: DIGEST-MD5 users
/// in the JAAS `Server` section (`DigestLoginModule`, `user_NAME="PASSWORD"`).
#[derive(Debug, Clone)]
pub struct ZkSasl {
    /// `(user, password)` pairs the server accepts.
    pub users: Vec<(String, String)>,
    /// `enforce.auth.enabled=true` with `enforce.auth.schemes=sasl` (ZooKeeper 3.7+): the
    /// server closes the session of a client that did not authenticate with SASL.
    pub enforce: bool,
}

fn classpath() -> String {
    std::env::var("SWITCHMAN_ZK_CLASSPATH").unwrap_or_else(|_| {
        panic!("SWITCHMAN_ZK_CLASSPATH is not set: run the tests with scripts/test (or source scripts/services.sh and call services_start)")
    })
}

/// `cp` plus Netty's codec jar where the Debian package keeps it (next to the first entry,
/// `zookeeper.jar`), if there: its manifest lists netty-handler but not netty-codec, which
/// Netty's TLS handler needs (`NoClassDefFoundError: ByteToMessageDecoder` otherwise).
fn with_netty_codec(cp: String) -> String {
    let first = cp.split(':').next().unwrap_or_default();
    let codec = std::path::Path::new(first).with_file_name("netty-codec.jar");
    if codec.is_file() && !cp.contains("netty-codec") {
        format!("{cp}:{}", codec.display())
    } else {
        cp
    }
}

/// Sends a four-letter command and returns the reply (empty on any error).
pub fn four_letter(port: u16, cmd: &str) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}")
            .parse()
            .expect("literal address"),
        Duration::from_millis(500),
    ) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(1000)));
    if s.write_all(cmd.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

impl ZkServer {
    /// Starts a standalone server and waits until it serves.
    pub fn standalone() -> ZkServer {
        Self::start(1)
    }

    /// Starts a standalone server with `extra` lines in its `zoo.cfg` (`maxClientCnxns=0` for
    /// more than 60 sessions from 127.0.0.1) and waits until it serves.
    pub fn standalone_with(extra: &str) -> ZkServer {
        Self::start_with(1, extra)
    }

    /// Starts an ensemble of `n` servers (quorum and election ports on 127.0.0.1) and waits
    /// until every member serves.
    pub fn ensemble(n: usize) -> ZkServer {
        Self::start(n)
    }

    /// Starts a standalone server with a TLS client port (Netty's connection factory, PEM key
    /// and trust stores) besides its plain one, and waits until both listen.
    pub fn standalone_tls(tls: &ZkTlsFiles) -> ZkServer {
        Self::standalone_secure(Some(tls), None)
    }

    /// Starts a standalone server that authenticates clients with SASL DIGEST-MD5 (a JAAS
    /// `Server` section with `sasl`'s users, `SASLAuthenticationProvider`, and, with
    /// `sasl.enforce`, no session for a client that does not authenticate), with a TLS client
    /// port too when `tls` is given, and waits until it serves.
    pub fn standalone_sasl(sasl: &ZkSasl, tls: Option<&ZkTlsFiles>) -> ZkServer {
        Self::standalone_secure(tls, Some(sasl))
    }

    /// Starts a standalone server that authenticates clients with SASL GSSAPI (Kerberos): a
    /// JAAS `Server` section with `Krb5LoginModule`, the service `principal` (such as
    /// `zookeeper/localhost@REALM`) and its `keytab`, `krb5_conf` for the realm, and
    /// `enforce.auth` (no session for a client that does not authenticate with SASL).
    /// Principals are mapped to their first part (`client@REALM` is `sasl:client` in ACLs).
    pub fn standalone_kerberos(principal: &str, keytab: &Path, krb5_conf: &Path) -> ZkServer {
        let extra = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
                     enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n\
                     kerberos.removeHostFromPrincipal=true\nkerberos.removeRealmFromPrincipal=true\n";
        let jaas = format!(
            "Server {{\n    com.sun.security.auth.module.Krb5LoginModule required\n    \
             useKeyTab=true\n    keyTab=\"{}\"\n    storeKey=true\n    useTicketCache=false\n    \
             principal=\"{principal}\";\n}};\n",
            keytab.display()
        );
        let ports = Self::allocate_ensemble(1);
        Self::start_members_jvm(
            &ports,
            &|_, to| (ports[to].quorum, ports[to].election),
            extra,
            Some(&jaas),
            &[format!("-Djava.security.krb5.conf={}", krb5_conf.display())],
        )
    }

    fn standalone_secure(tls: Option<&ZkTlsFiles>, sasl: Option<&ZkSasl>) -> ZkServer {
        let port = tls.map(|_| allocate());
        let mut extra = String::new();
        if let (Some(tls), Some(port)) = (tls, port) {
            extra.push_str(&format!(
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                 secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
                 ssl.keyStore.location={}\nssl.keyStore.type=PEM\n\
                 ssl.trustStore.location={}\nssl.trustStore.type=PEM\nssl.clientAuth={}\n",
                tls.key_store.display(),
                tls.trust_store.display(),
                tls.client_auth
            ));
        }
        let mut jaas = None;
        if let Some(sasl) = sasl {
            extra.push_str(
                "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n",
            );
            if sasl.enforce {
                extra.push_str("enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n");
            }
            let users: String = sasl
                .users
                .iter()
                .map(|(u, p)| format!("\n    user_{u}=\"{p}\""))
                .collect();
            jaas = Some(format!(
                "Server {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n"
            ));
        }
        let ports = Self::allocate_ensemble(1);
        let mut server = Self::start_members_with(
            &ports,
            &|_, to| (ports[to].quorum, ports[to].election),
            &extra,
            jaas.as_deref(),
        );
        server.secure_port = port;
        if let Some(port) = port {
            let deadline = Instant::now() + Duration::from_secs(30);
            let addr = format!("127.0.0.1:{port}")
                .parse()
                .expect("literal address");
            while TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "ZooKeeper's TLS port {port} not listening after 30s"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        server
    }

    /// The TLS client port of a server from [`ZkServer::standalone_tls`].
    pub fn secure_port(&self) -> u16 {
        self.secure_port
            .expect("a server started with standalone_tls")
    }

    fn start(n: usize) -> ZkServer {
        Self::start_with(n, "")
    }

    /// [`ZkServer::start`] with `extra` lines in every member's `zoo.cfg`.
    fn start_with(n: usize, extra: &str) -> ZkServer {
        let ports = Self::allocate_ensemble(n);
        Self::start_members(
            &ports,
            &|_, to| (ports[to].quorum, ports[to].election),
            extra,
        )
    }

    /// Fresh 127.0.0.1 ports for an ensemble of `n` members (nothing started yet), for
    /// [`ZkServer::ensemble_linked`].
    pub fn allocate_ensemble(n: usize) -> Vec<MemberPorts> {
        (0..n)
            .map(|_| MemberPorts {
                client: allocate(),
                quorum: allocate(),
                election: allocate(),
            })
            .collect()
    }

    /// Starts an ensemble on `ports` in which member `from` reaches member `to`'s quorum and
    /// election ports at the 127.0.0.1 ports `peer(from, to)` returns (proxies the test
    /// controls, so it can cut the links between two members), and waits until every member
    /// serves. Each member binds its own ports from `ports`.
    pub fn ensemble_linked(
        ports: &[MemberPorts],
        peer: &dyn Fn(usize, usize) -> (u16, u16),
    ) -> ZkServer {
        Self::start_members(ports, peer, "")
    }

    fn start_members(
        ports: &[MemberPorts],
        peer: &dyn Fn(usize, usize) -> (u16, u16),
        extra: &str,
    ) -> ZkServer {
        Self::start_members_with(ports, peer, extra, None)
    }

    /// [`ZkServer::start_members`] with a JAAS file of this text, if any, for every member
    /// (`-Djava.security.auth.login.config`).
    fn start_members_with(
        ports: &[MemberPorts],
        peer: &dyn Fn(usize, usize) -> (u16, u16),
        extra: &str,
        jaas: Option<&str>,
    ) -> ZkServer {
        Self::start_members_jvm(ports, peer, extra, jaas, &[])
    }

    /// [`ZkServer::start_members_with`] with more JVM options for every member.
    fn start_members_jvm(
        ports: &[MemberPorts],
        peer: &dyn Fn(usize, usize) -> (u16, u16),
        extra: &str,
        jaas: Option<&str>,
        jvm_extra: &[String],
    ) -> ZkServer {
        let n = ports.len();
        let dir = std::env::temp_dir().join(crate::unique("switchman-zk"));
        std::fs::create_dir_all(&dir).expect("create the server directory");
        let mut jvm_options = jvm_extra.to_vec();
        if let Some(text) = jaas {
            let file = dir.join("jaas.conf");
            std::fs::write(&file, text).expect("write the JAAS file");
            jvm_options.push(format!(
                "-Djava.security.auth.login.config={}",
                file.display()
            ));
        }
        let mut nodes = Vec::new();
        for (i, own) in ports.iter().enumerate() {
            let client = own.client;
            let data = dir.join(format!("data{}", i + 1));
            std::fs::create_dir_all(&data).expect("create a data directory");
            let mut cfg = format!(
                "tickTime=500\ninitLimit=10\nsyncLimit=5\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n\
                 dataDir={}\nclientPort={client}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,stat\n",
                data.display()
            );
            if n > 1 {
                std::fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("write myid");
                for j in 0..n {
                    let (q, e) = if j == i {
                        (own.quorum, own.election)
                    } else {
                        peer(i, j)
                    };
                    cfg.push_str(&format!("server.{}=127.0.0.1:{q}:{e}\n", j + 1));
                }
            }
            cfg.push_str(extra);
            let config = dir.join(format!("zoo{}.cfg", i + 1));
            std::fs::write(&config, cfg).expect("write zoo.cfg");
            nodes.push(Node {
                client_port: client,
                config,
                log: dir.join(format!("zk{}.log", i + 1)),
                child: None,
            });
        }
        let mut server = ZkServer {
            dir,
            nodes,
            secure_port: None,
            jvm_options,
        };
        for i in 0..n {
            server.spawn(i);
        }
        for i in 0..n {
            server.wait_serving(i, Duration::from_secs(30));
        }
        server
    }

    fn spawn(&mut self, i: usize) {
        let jvm_options = &self.jvm_options;
        let node = &mut self.nodes[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("open the server log");
        let child = Command::new("java")
            .args([
                "-Xmx128m",
                "-XX:+UseSerialGC",
                "-cp",
                &with_netty_codec(classpath()),
            ])
            .args(jvm_options)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&node.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("start java (ZooKeeper)");
        node.child = Some(child);
    }

    /// Waits until member `i` answers `srvr` with a mode (it serves clients).
    pub fn wait_serving(&self, i: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let port = self.nodes[i].client_port;
        while Instant::now() < deadline {
            if four_letter(port, "srvr").contains("Mode:") {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(&self.nodes[i].log).unwrap_or_default();
        let tail: String = log
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        panic!("ZooKeeper member {i} on port {port} not serving after {timeout:?}; log:\n{tail}");
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...`
    pub fn connect_string(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A `zookeeper://` registry address for every member (Dubbo's `backup` form) plus
    /// `extra` parameters (`session=2000&...`).
    pub fn registry_url(&self, extra: &str) -> String {
        let first = format!("127.0.0.1:{}", self.nodes[0].client_port);
        let backups: Vec<String> = self.nodes[1..]
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port))
            .collect();
        let mut params = Vec::new();
        if !backups.is_empty() {
            params.push(format!("backup={}", backups.join(",")));
        }
        if !extra.is_empty() {
            params.push(extra.to_string());
        }
        if params.is_empty() {
            format!("zookeeper://{first}")
        } else {
            format!("zookeeper://{first}?{}", params.join("&"))
        }
    }

    /// How many members the ensemble has.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the ensemble has no member (never: it is started with at least one).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether member `i` serves clients now (it answers `srvr` with a mode: it leads,
    /// follows or is standalone; a member without quorum answers that it is not serving).
    pub fn serving(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
            && four_letter(self.nodes[i].client_port, "srvr").contains("Mode:")
    }

    /// Member `i`'s client port.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].client_port
    }

    /// The index of the current leader, if any member says it leads.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i].child.is_some()
                && four_letter(self.nodes[i].client_port, "srvr").contains("Mode: leader")
        })
    }

    /// Kills member `i` (SIGKILL) and waits for the process to end.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again with its data and waits until it serves.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        self.wait_serving(i, Duration::from_secs(30));
    }

    /// Freezes (`SIGSTOP`) or resumes (`SIGCONT`) member `i`: a frozen server keeps its TCP
    /// port open but answers nothing, so clients time out and their sessions expire.
    pub fn signal(&self, i: usize, signal: &str) {
        let pid = self.nodes[i]
            .child
            .as_ref()
            .expect("member is running")
            .id();
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            if self.nodes[i].child.is_some() {
                // A frozen process ignores nothing but SIGKILL; resume it anyway for tidiness.
                let _ = Command::new("kill")
                    .args([
                        "-CONT".to_string(),
                        self.nodes[i]
                            .child
                            .as_ref()
                            .map(|c| c.id())
                            .unwrap_or(0)
                            .to_string(),
                    ])
                    .status();
            }
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
