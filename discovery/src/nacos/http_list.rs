//! A service's instance list through Nacos's HTTP open API, for services nacos-sdk cannot
//! list (see "Services too large for nacos-sdk" in the module docs of `sdk.rs`):
//! `GET /nacos/v1/ns/instance/list?serviceName=..&groupName=..&namespaceId=..&healthyOnly=false`,
//! as Java's Nacos client and rnacos serve it.
//!
//! Every byte of the answer is untrusted: the body is read up to `http-list-max-bytes`
//! ([`DEFAULT_MAX_BYTES`]), the JSON must be an object whose `hosts` is an array (and whose
//! `name`, when present, is the service asked for), at most [`MAX_HOSTS`] hosts, and each host
//! is checked (an IP of at most 255 bytes, a port in 1..=65535, a finite weight in
//! 0..=10000, at most [`MAX_METADATA`] string metadata entries): a host that fails is dropped
//! and counted, a document that fails is an error and the caller keeps its last good list.
//!
//! The reader uses the registry's servers (over TLS, the local relays of `tls.rs`), one after
//! the other from the last that answered, each within [`READ_TIMEOUT`], and its own login
//! (`auth.rs`, the same credentials as the SDK's clients): the token goes as the
//! `accessToken` query parameter, as Java's Nacos client sends it on the v1 API; a 401 or 403
//! answer makes the next read log in again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nacos_sdk::api::naming::ServiceInstance;
use nacos_sdk::api::plugin::{AuthContext, AuthPlugin};
use serde::Deserialize;

use super::auth::NacosLogin;

/// The default bound on one answer's body (`http-list-max-bytes`): about 190,000 Dubbo
/// application instances of 350 bytes.
pub(crate) const DEFAULT_MAX_BYTES: usize = 64 * 1024 * 1024;
/// The range `http-list-max-bytes` may take.
pub(crate) const MAX_BYTES_RANGE: (usize, usize) = (64 * 1024, 1024 * 1024 * 1024);
/// Bound on one read (connect, request, the whole body).
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The most hosts one answer may list.
pub(crate) const MAX_HOSTS: usize = 1_000_000;
/// The most metadata entries one host may carry.
pub(crate) const MAX_METADATA: usize = 4096;
/// The largest Nacos weight (Nacos clamps weights to 0..=10000).
const MAX_WEIGHT: f64 = 10_000.0;

/// One instance list read over HTTP.
#[derive(Debug)]
pub(crate) struct HttpList {
    /// The valid hosts, as nacos-sdk would have given them.
    pub(crate) instances: Vec<ServiceInstance>,
    /// Hosts dropped as invalid.
    pub(crate) dropped: usize,
    /// A hash of the valid hosts, to tell a changed list from the same one read again.
    pub(crate) fingerprint: u64,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    name: Option<String>,
    hosts: Vec<MaybeHost>,
}

/// A host, or anything else (counted as dropped) in its place.
#[derive(Deserialize)]
#[serde(untagged)]
enum MaybeHost {
    Host(Host),
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Host {
    #[serde(default)]
    instance_id: Option<String>,
    ip: String,
    port: i64,
    #[serde(default = "one")]
    weight: f64,
    #[serde(default = "yes")]
    healthy: bool,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default = "yes")]
    ephemeral: bool,
    #[serde(default)]
    cluster_name: Option<String>,
    #[serde(default)]
    service_name: Option<String>,
    #[serde(default)]
    metadata: Option<HashMap<String, String>>,
}

fn one() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

impl Host {
    /// The host as nacos-sdk's type, or why it is dropped.
    fn check(self) -> Result<ServiceInstance, &'static str> {
        if self.ip.is_empty() || self.ip.len() > 255 {
            return Err("an empty or overlong ip");
        }
        let port = i32::try_from(self.port)
            .ok()
            .filter(|p| (1..=65535).contains(p))
            .ok_or("a port outside 1..=65535")?;
        if !self.weight.is_finite() || !(0.0..=MAX_WEIGHT).contains(&self.weight) {
            return Err("a weight outside 0..=10000");
        }
        let metadata = self.metadata.unwrap_or_default();
        if metadata.len() > MAX_METADATA {
            return Err("too many metadata entries");
        }
        Ok(ServiceInstance {
            instance_id: self.instance_id,
            ip: self.ip,
            port,
            weight: self.weight,
            healthy: self.healthy,
            enabled: self.enabled,
            ephemeral: self.ephemeral,
            cluster_name: self.cluster_name,
            service_name: self.service_name,
            metadata,
        })
    }
}

/// Feeds what a [`ServiceInstance`] says into `h` (metadata in key order).
fn hash_instance(si: &ServiceInstance, h: &mut impl Hasher) {
    si.instance_id.hash(h);
    si.ip.hash(h);
    si.port.hash(h);
    si.weight.to_bits().hash(h);
    (si.healthy, si.enabled, si.ephemeral).hash(h);
    si.cluster_name.hash(h);
    si.service_name.hash(h);
    let mut md: Vec<(&String, &String)> = si.metadata.iter().collect();
    md.sort();
    md.hash(h);
}

/// Parses an `instance/list` answer for `service` in `group` (see the module docs).
pub(crate) fn parse_list(body: &[u8], service: &str, group: &str) -> Result<HttpList, String> {
    let answer: Answer =
        serde_json::from_slice(body).map_err(|e| format!("not an instance list: {e}"))?;
    if let Some(name) = answer.name.as_deref()
        && name != service
        && name.strip_prefix(group).and_then(|n| n.strip_prefix("@@")) != Some(service)
    {
        return Err(format!(
            "the answer lists service {:?}, not {group}@@{service}",
            excerpt(name)
        ));
    }
    if answer.hosts.len() > MAX_HOSTS {
        return Err(format!(
            "{} hosts, over the limit of {MAX_HOSTS}",
            answer.hosts.len()
        ));
    }
    let mut instances = Vec::with_capacity(answer.hosts.len());
    let mut dropped = 0;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for host in answer.hosts {
        match host {
            MaybeHost::Host(host) => match host.check() {
                Ok(si) => {
                    hash_instance(&si, &mut h);
                    instances.push(si);
                }
                Err(_) => dropped += 1,
            },
            MaybeHost::Other(_) => dropped += 1,
        }
    }
    Ok(HttpList {
        instances,
        dropped,
        fingerprint: h.finish(),
    })
}

/// At most 100 characters of `s`, control characters replaced (for messages).
fn excerpt(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(100)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().nth(100).is_some() {
        out.push('…');
    }
    out
}

/// Why one read failed, and whether the login should be renewed.
struct Failure {
    why: String,
    auth: bool,
}

/// Reads instance lists over HTTP from a registry's servers (see the module docs).
pub(crate) struct HttpReader {
    /// `host:port` HTTP addresses (over TLS: the relays).
    servers: Vec<String>,
    namespace: String,
    login: Option<NacosLogin>,
    max_bytes: usize,
    /// The server to try first (the last that answered).
    next: AtomicUsize,
}

impl std::fmt::Debug for HttpReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpReader")
            .field("servers", &self.servers)
            .field("namespace", &self.namespace)
            .field("login", &self.login.is_some())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl HttpReader {
    pub(crate) fn new(
        servers: Vec<String>,
        namespace: String,
        credentials: Option<(&str, &str)>,
        max_bytes: usize,
    ) -> Self {
        HttpReader {
            servers,
            namespace,
            login: credentials.map(|(u, p)| NacosLogin::new(u, p)),
            max_bytes,
            next: AtomicUsize::new(0),
        }
    }

    /// The servers, for messages.
    pub(crate) fn servers(&self) -> String {
        self.servers.join(",")
    }

    /// The full list of `service` in `group`, from the first server that gives a valid one.
    pub(crate) async fn list(&self, service: &str, group: &str) -> Result<HttpList, String> {
        let body = self.body(service, group).await?;
        parse_list(&body, service, group)
    }

    /// The raw answer listing `service` in `group` (a 2xx answer of at most
    /// `http-list-max-bytes`), from the first server that gives one.
    pub(crate) async fn body(
        &self,
        service: &str,
        group: &str,
    ) -> Result<hyper::body::Bytes, String> {
        if self.servers.is_empty() {
            return Err("no server to read from".into());
        }
        let start = self.next.load(Ordering::Relaxed) % self.servers.len();
        let mut errors = Vec::new();
        for k in 0..self.servers.len() {
            let i = (start + k) % self.servers.len();
            let server = &self.servers[i];
            // One more try on the same server after a refused token (expired, or the server
            // restarted and forgot it).
            for attempt in 0..2 {
                let token = match &self.login {
                    Some(login) => {
                        login
                            .login(
                                Arc::new(self.servers.clone()),
                                Arc::new(AuthContext::default()),
                            )
                            .await;
                        login.token()
                    }
                    None => None,
                };
                match tokio::time::timeout(
                    READ_TIMEOUT,
                    self.read(server, service, group, token.as_deref()),
                )
                .await
                {
                    Ok(Ok(list)) => {
                        self.next.store(i, Ordering::Relaxed);
                        return Ok(list);
                    }
                    Ok(Err(f)) => {
                        if f.auth
                            && let Some(login) = &self.login
                        {
                            login.expire();
                            if attempt == 0 {
                                continue;
                            }
                        }
                        errors.push(format!("{server}: {}", f.why));
                    }
                    Err(_) => errors.push(format!("{server}: no answer within {READ_TIMEOUT:?}")),
                }
                break;
            }
        }
        Err(errors.join("; "))
    }

    /// One request to one server.
    async fn read(
        &self,
        server: &str,
        service: &str,
        group: &str,
        token: Option<&str>,
    ) -> Result<hyper::body::Bytes, Failure> {
        use http_body_util::BodyExt;

        let fail = |why: String| Failure { why, auth: false };
        let query = {
            let mut q = form_urlencoded::Serializer::new(String::new());
            q.append_pair("serviceName", service)
                .append_pair("groupName", group)
                .append_pair("namespaceId", &self.namespace)
                .append_pair("healthyOnly", "false");
            if let Some(t) = token {
                q.append_pair("accessToken", t);
            }
            q.finish()
        };
        let target = format!("/nacos/v1/ns/instance/list?{query}");
        let tcp = tokio::net::TcpStream::connect(server)
            .await
            .map_err(|e| fail(format!("cannot connect: {e}")))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(|e| fail(format!("HTTP handshake failed: {e}")))?;
        let conn = tokio::spawn(conn);
        let request = hyper::Request::get(target)
            .header(hyper::header::HOST, server)
            .body(http_body_util::Empty::<hyper::body::Bytes>::new())
            .map_err(|e| fail(format!("bad request: {e}")))?;
        let result = async {
            let resp = sender
                .send_request(request)
                .await
                .map_err(|e| fail(format!("request failed: {e}")))?;
            let status = resp.status();
            let announced = resp
                .headers()
                .get(hyper::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let max = self.max_bytes;
            if let Some(n) = announced
                && n > max as u64
            {
                return Err(fail(format!(
                    "HTTP {status}: an answer of {n} bytes, over http-list-max-bytes={max}"
                )));
            }
            let body = http_body_util::Limited::new(resp.into_body(), max)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        fail(format!(
                            "HTTP {status}: an answer over http-list-max-bytes={max}"
                        ))
                    } else {
                        fail(format!("HTTP {status}: the answer broke off: {e}"))
                    }
                })?
                .to_bytes();
            if !status.is_success() {
                let text = String::from_utf8_lossy(&body[..body.len().min(200)]).to_string();
                return Err(Failure {
                    why: format!("HTTP {status}: {}", excerpt(&text)),
                    auth: status == hyper::StatusCode::UNAUTHORIZED
                        || status == hyper::StatusCode::FORBIDDEN,
                });
            }
            Ok(body)
        }
        .await;
        conn.abort();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn host(ip: &str, port: i64) -> serde_json::Value {
        serde_json::json!({
            "instanceId": format!("{ip}#{port}"), "ip": ip, "port": port, "weight": 2.5,
            "healthy": true, "enabled": true, "ephemeral": false, "clusterName": "DEFAULT",
            "serviceName": "DEFAULT_GROUP@@app", "metadata": {"dubbo.metadata.revision": "r1"}
        })
    }

    fn answer(hosts: Vec<serde_json::Value>) -> Vec<u8> {
        serde_json::json!({
            "name": "DEFAULT_GROUP@@app", "groupName": "DEFAULT_GROUP", "clusters": "",
            "cacheMillis": 10000, "hosts": hosts, "lastRefTime": 1, "checksum": "",
            "allIPs": false, "reachProtectionThreshold": false, "valid": true
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_nacos_answer_becomes_sdk_instances() {
        let list = parse_list(
            &answer(vec![host("10.0.0.1", 20880), host("10.0.0.2", 20881)]),
            "app",
            "DEFAULT_GROUP",
        )
        .unwrap();
        assert_eq!(list.dropped, 0);
        let si = &list.instances[1];
        assert_eq!(
            (si.ip.as_str(), si.port, si.weight),
            ("10.0.0.2", 20881, 2.5)
        );
        assert!(si.healthy && si.enabled && !si.ephemeral);
        assert_eq!(si.cluster_name.as_deref(), Some("DEFAULT"));
        assert_eq!(si.metadata["dubbo.metadata.revision"], "r1");
        // The bare service name is accepted too, and missing fields take Nacos's defaults.
        let bare = br#"{"name":"app","hosts":[{"ip":"10.0.0.3","port":1}]}"#;
        let si = &parse_list(bare, "app", "DEFAULT_GROUP").unwrap().instances[0];
        assert!(si.weight == 1.0 && si.healthy && si.enabled && si.metadata.is_empty());
    }

    #[test]
    fn bad_hosts_are_dropped_and_counted_numbers_range_checked() {
        let mut bad_weight = host("10.0.0.9", 9);
        bad_weight["weight"] = serde_json::json!(1e300);
        let mut negative = host("10.0.0.8", 8);
        negative["weight"] = serde_json::json!(-1);
        let mut many = host("10.0.0.7", 7);
        many["metadata"] = serde_json::Value::Object(
            (0..=MAX_METADATA)
                .map(|i| (format!("k{i}"), serde_json::json!("v")))
                .collect(),
        );
        let mut not_string = host("10.0.0.6", 6);
        not_string["metadata"] = serde_json::json!({"k": 1});
        let list = parse_list(
            &answer(vec![
                host("10.0.0.1", 1),
                host("10.0.0.2", 0),
                host("10.0.0.3", 65536),
                host("10.0.0.4", -20880),
                host("10.0.0.5", i64::MAX),
                serde_json::json!({"ip": "10.0.0.5", "port": 1.5}),
                serde_json::json!("a string"),
                serde_json::json!({"port": 1}),
                host(&"1".repeat(256), 1),
                bad_weight,
                negative,
                many,
                not_string,
                host("10.0.0.10", 65535),
            ]),
            "app",
            "DEFAULT_GROUP",
        )
        .unwrap();
        let kept: Vec<i32> = list.instances.iter().map(|s| s.port).collect();
        assert_eq!(kept, [1, 65535]);
        assert_eq!(list.dropped, 12);
    }

    #[test]
    fn documents_that_are_not_instance_lists_are_errors() {
        for bad in [
            &b""[..],
            b"<html>",
            b"[]",
            b"{}",
            br#"{"hosts":{}}"#,
            br#"{"hosts":[1,2"#,
            br#"{"name":"DEFAULT_GROUP@@other","hosts":[]}"#,
            br#"{"name":"G2@@app","hosts":[]}"#,
        ] {
            assert!(
                parse_list(bad, "app", "DEFAULT_GROUP").is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Nesting deeper than serde_json's recursion limit is an error, not a stack overflow.
        let deep = format!(r#"{{"hosts":[{}]}}"#, "[".repeat(100_000));
        assert!(parse_list(deep.as_bytes(), "app", "DEFAULT_GROUP").is_err());
        let deep = format!(
            r#"{{"hosts":[{{"ip":"1.1.1.1","port":1,"metadata":{}}}]}}"#,
            "{\"a\":".repeat(100_000)
        );
        assert!(parse_list(deep.as_bytes(), "app", "DEFAULT_GROUP").is_err());
        // An empty list is a list.
        let empty = parse_list(br#"{"hosts":[]}"#, "app", "DEFAULT_GROUP").unwrap();
        assert!(empty.instances.is_empty());
    }

    #[test]
    fn the_fingerprint_follows_the_content() {
        let fp = |hosts| {
            parse_list(&answer(hosts), "app", "DEFAULT_GROUP")
                .unwrap()
                .fingerprint
        };
        let a = fp(vec![host("10.0.0.1", 1)]);
        assert_eq!(a, fp(vec![host("10.0.0.1", 1)]));
        let mut heavier = host("10.0.0.1", 1);
        heavier["weight"] = serde_json::json!(3);
        assert_ne!(a, fp(vec![heavier]));
        let mut md = host("10.0.0.1", 1);
        md["metadata"]["x"] = serde_json::json!("y");
        assert_ne!(a, fp(vec![md]));
        assert_ne!(a, fp(vec![host("10.0.0.1", 1), host("10.0.0.2", 1)]));
    }

    /// A server answering every request with `answer`; each request line comes back on the
    /// channel.
    async fn server(answer: Vec<u8>) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&buf).to_string();
                let _ = tx.send(text.lines().next().unwrap_or("").to_string());
                let _ = s.write_all(&answer).await;
                let _ = s.shutdown().await;
            }
        });
        (addr, rx)
    }

    fn http(status: &str, body: &[u8]) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        out
    }

    #[tokio::test]
    async fn reads_from_the_first_server_that_answers_with_a_list() {
        let (dead, mut dead_requests) = server(http("500 Internal Server Error", b"boom")).await;
        let (good, mut requests) = server(http("200 OK", &answer(vec![host("10.0.0.1", 1)]))).await;
        let reader = HttpReader::new(
            vec![dead.clone(), good.clone()],
            "ns 1".into(),
            None,
            DEFAULT_MAX_BYTES,
        );
        let list = reader.list("app", "DEFAULT_GROUP").await.unwrap();
        assert_eq!(list.instances.len(), 1);
        let line = requests.recv().await.unwrap();
        assert_eq!(
            line,
            "GET /nacos/v1/ns/instance/list?serviceName=app&groupName=DEFAULT_GROUP&namespaceId=ns+1&healthyOnly=false HTTP/1.1"
        );
        assert!(
            dead_requests.try_recv().is_ok(),
            "the first server was asked first"
        );
        // The server that answered is tried first next time: the dead one is not asked (it
        // would have been, and have answered, before the good one).
        reader.list("app", "DEFAULT_GROUP").await.unwrap();
        assert!(requests.recv().await.is_some());
        assert!(dead_requests.try_recv().is_err());
    }

    #[tokio::test]
    async fn oversized_broken_and_refused_answers_are_errors_naming_the_limit() {
        // Announced over the limit.
        let big = answer((0..2000).map(|i| host("10.0.0.1", i + 1)).collect());
        let (announced, _r1) = server(http("200 OK", &big)).await;
        let reader = HttpReader::new(vec![announced], String::new(), None, 64 * 1024);
        let e = reader.list("app", "DEFAULT_GROUP").await.unwrap_err();
        assert!(e.contains("over http-list-max-bytes=65536"), "{e}");
        // Not announced (read to the end of the connection), over the limit.
        let mut unannounced = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        unannounced.extend_from_slice(&big);
        let (streamed, _r2) = server(unannounced).await;
        let reader = HttpReader::new(vec![streamed], String::new(), None, 64 * 1024);
        let e = reader.list("app", "DEFAULT_GROUP").await.unwrap_err();
        assert!(e.contains("over http-list-max-bytes=65536"), "{e}");
        // Broken off.
        let (cut, _r3) =
            server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"hosts\"".to_vec()).await;
        let reader = HttpReader::new(vec![cut], String::new(), None, DEFAULT_MAX_BYTES);
        let e = reader.list("app", "DEFAULT_GROUP").await.unwrap_err();
        assert!(e.contains("broke off"), "{e}");
        // Refused, with control characters in the answer.
        let (refused, _r4) = server(http("403 Forbidden", b"no\x1b[31m")).await;
        let reader = HttpReader::new(vec![refused], String::new(), None, DEFAULT_MAX_BYTES);
        let e = reader.list("app", "DEFAULT_GROUP").await.unwrap_err();
        assert!(e.contains("HTTP 403") && !e.contains('\x1b'), "{e}");
        // Nobody listening.
        let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = gone.local_addr().unwrap().to_string();
        drop(gone);
        let reader = HttpReader::new(vec![addr], String::new(), None, DEFAULT_MAX_BYTES);
        let e = reader.list("app", "DEFAULT_GROUP").await.unwrap_err();
        assert!(e.contains("cannot connect"), "{e}");
    }
}
