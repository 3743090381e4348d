//! The Java provider's command line.

use super::peers::DEMO_SERVICE_V2_JAR;

/// The provider's command line, built up by methods. Only `registry` is required; everything
/// else defaults as in the Java program (dubbo protocol, interface-level registration, ...).
#[derive(Debug, Clone, Default)]
pub struct ProviderOptions {
    /// `dubbo` or `tri` (default `dubbo`).
    pub protocol: Option<String>,
    /// `zookeeper://127.0.0.1:PORT` or `nacos://127.0.0.1:PORT`.
    pub registry: String,
    /// 0 takes one from [`crate::ports::allocate`], and the JVM is told it: Dubbo 3.3 takes no
    /// port the OS chooses (a protocol port of 0 is its default, 20880 for dubbo and 50051 for
    /// tri; -1 a scan up from that default, which races between JVMs that start at once).
    pub port: u16,
    /// The service's weight parameter.
    pub weight: Option<u32>,
    /// The service group.
    pub group: Option<String>,
    /// The service version.
    pub version: Option<String>,
    /// The application name (default `switchman-java-provider`).
    pub application: Option<String>,
    /// `interface`, `instance` or `all` (default `interface`).
    pub register_mode: Option<String>,
    /// `local` or `remote` (default `local`).
    pub metadata_type: Option<String>,
    /// The instance name in replies and `CALL` lines (default `127.0.0.1:<port>`).
    pub name: Option<String>,
    /// The protocol's heartbeat interval.
    pub heartbeat_ms: Option<u64>,
    /// Dubbo's shutdown wait (default 2000 ms).
    pub shutdown_wait_ms: Option<u64>,
    /// Extra service URL parameters, e.g. `("timeout", "500")`.
    pub params: Vec<(String, String)>,
    /// The release of `DemoService` to export: `v1` (default) or `v2` (the upgraded interface,
    /// one more method `greet(String)`, run from [`DEMO_SERVICE_V2_JAR`]).
    pub demo_service: Option<String>,
    /// The service to export: `demo` (default, `io.switchman.peers.DemoService`) or `idl` (the
    /// protobuf service of `peers/java/src/main/proto/greeter.proto`, [`IDL_SERVICE`]).
    ///
    /// [`IDL_SERVICE`]: super::IDL_SERVICE
    pub service: Option<String>,
    /// TLS (Dubbo's `SslConfig`): the server certificate chain and private key PEM files.
    pub tls: Option<(String, String)>,
    /// With `tls`: the CA PEM file client certificates must be signed by (mTLS required).
    pub tls_trust: Option<String>,
    /// With `tls`: whether the provider registers `ssl-enabled=true` (default yes).
    pub tls_advertise: Option<bool>,
}

impl ProviderOptions {
    /// A dubbo:// provider registered at `registry`, on a port from [`crate::ports::allocate`].
    pub fn new(registry: impl Into<String>) -> Self {
        ProviderOptions {
            registry: registry.into(),
            ..Default::default()
        }
    }

    /// A dubbo:// provider registered in the ZooKeeper at `addr` (`host:port`).
    pub fn zookeeper(addr: &str) -> Self {
        Self::new(format!("zookeeper://{addr}"))
    }

    /// A dubbo:// provider registered in the Nacos at `addr` (`host:http-port`).
    pub fn nacos(addr: &str) -> Self {
        Self::new(format!("nacos://{addr}"))
    }

    /// `dubbo` or `tri`.
    pub fn protocol(mut self, p: &str) -> Self {
        self.protocol = Some(p.to_string());
        self
    }

    /// A fixed port (0 = one from [`crate::ports::allocate`]).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The weight parameter.
    pub fn weight(mut self, w: u32) -> Self {
        self.weight = Some(w);
        self
    }

    /// The service group.
    pub fn group(mut self, g: &str) -> Self {
        self.group = Some(g.to_string());
        self
    }

    /// The service version.
    pub fn version(mut self, v: &str) -> Self {
        self.version = Some(v.to_string());
        self
    }

    /// The application name.
    pub fn application(mut self, a: &str) -> Self {
        self.application = Some(a.to_string());
        self
    }

    /// `interface`, `instance` or `all`.
    pub fn register_mode(mut self, m: &str) -> Self {
        self.register_mode = Some(m.to_string());
        self
    }

    /// `local` or `remote`.
    pub fn metadata_type(mut self, t: &str) -> Self {
        self.metadata_type = Some(t.to_string());
        self
    }

    /// The instance name.
    pub fn name(mut self, n: &str) -> Self {
        self.name = Some(n.to_string());
        self
    }

    /// The heartbeat interval.
    pub fn heartbeat_ms(mut self, ms: u64) -> Self {
        self.heartbeat_ms = Some(ms);
        self
    }

    /// Dubbo's shutdown wait.
    pub fn shutdown_wait_ms(mut self, ms: u64) -> Self {
        self.shutdown_wait_ms = Some(ms);
        self
    }

    /// One extra service URL parameter.
    pub fn param(mut self, k: &str, v: &str) -> Self {
        self.params.push((k.to_string(), v.to_string()));
        self
    }

    /// The release of `DemoService`: `v1` or `v2` (same interface name, plus
    /// `greet(String)` → `"greetings, <name> from <instance> (v2)"`: a provider upgraded in
    /// place with a new method).
    pub fn demo_service(mut self, release: &str) -> Self {
        self.demo_service = Some(release.to_string());
        self
    }

    /// Exports the protobuf (IDL) service of `greeter.proto` instead of `DemoService`
    /// (`--service idl`: Dubbo's compiler plugin's stub; use it with `protocol("tri")`). Its
    /// calls are counted by rpc name (`SayHello`, `Fail`, `Ping`).
    pub fn idl(mut self) -> Self {
        self.service = Some("idl".to_string());
        self
    }

    /// Serves TLS on the provider's port (Dubbo's `SslConfig` with the server certificate
    /// chain and unencrypted PKCS#8 key PEM files) and registers `ssl-enabled=true`.
    pub fn tls(mut self, cert_chain: &str, key: &str) -> Self {
        self.tls = Some((cert_chain.to_string(), key.to_string()));
        self
    }

    /// With [`ProviderOptions::tls`]: requires a client certificate signed by the CA of this
    /// PEM file (mTLS).
    pub fn tls_trust(mut self, ca: &str) -> Self {
        self.tls_trust = Some(ca.to_string());
        self
    }

    /// With [`ProviderOptions::tls`]: whether `ssl-enabled=true` is registered (default yes;
    /// Dubbo registers it only when the protocol config says so).
    pub fn tls_advertise(mut self, advertise: bool) -> Self {
        self.tls_advertise = Some(advertise);
        self
    }

    /// The jar the provider runs from: the v2 jar for `demo_service("v2")` (its classes shadow
    /// the main jar's), else the main one.
    pub(super) fn jar(&self) -> &'static str {
        match self.demo_service.as_deref() {
            Some("v2") => DEMO_SERVICE_V2_JAR,
            _ => "switchman-java-peers.jar",
        }
    }

    pub(super) fn args(&self, port: u16) -> Vec<String> {
        let mut a = vec!["--registry".to_string(), self.registry.clone()];
        a.extend(["--port".to_string(), port.to_string()]);
        let mut opt = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.extend([flag.to_string(), v]);
            }
        };
        opt("--protocol", self.protocol.clone());
        opt("--weight", self.weight.map(|w| w.to_string()));
        opt("--group", self.group.clone());
        opt("--version", self.version.clone());
        opt("--application", self.application.clone());
        opt("--register-mode", self.register_mode.clone());
        opt("--metadata-type", self.metadata_type.clone());
        opt("--name", self.name.clone());
        opt("--demo-service", self.demo_service.clone());
        opt("--service", self.service.clone());
        opt("--heartbeat-ms", self.heartbeat_ms.map(|v| v.to_string()));
        opt(
            "--shutdown-wait-ms",
            self.shutdown_wait_ms.map(|v| v.to_string()),
        );
        opt(
            "--tls-cert-chain",
            self.tls.as_ref().map(|(c, _)| c.clone()),
        );
        opt("--tls-key", self.tls.as_ref().map(|(_, k)| k.clone()));
        opt("--tls-trust", self.tls_trust.clone());
        opt("--tls-advertise", self.tls_advertise.map(|b| b.to_string()));
        for (k, v) in &self.params {
            a.extend(["--param".to_string(), format!("{k}={v}")]);
        }
        a
    }
}
