//! The Nacos v1 open API as an operator or a non-SDK client uses it (plain HTTP/1.0 over a
//! `TcpStream`, no client library): register, update and deregister instances, publish configs.
//!
//! rnacos quirk: HTTP-registered ephemeral instances without beats vanish after about 33 s, so
//! [`OpenApiInstance`] registers persistent ones (`ephemeral=false`); do not mix them with
//! SDK-registered (ephemeral) instances in one service.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use switchman_core::url::encode_component;

/// A persistent instance as the open API takes it.
#[derive(Debug, Clone)]
pub struct OpenApiInstance {
    /// Nacos service name.
    pub service: String,
    /// Nacos group (`DEFAULT_GROUP` when empty).
    pub group: String,
    /// IP.
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Nacos weight.
    pub weight: f64,
    /// Enabled flag.
    pub enabled: bool,
    /// Cluster name (`DEFAULT` when empty).
    pub cluster: String,
    /// Metadata as a JSON object text (`{}` when empty).
    pub metadata_json: String,
}

impl OpenApiInstance {
    /// An enabled instance with weight 1 in the default group and cluster.
    pub fn new(service: &str, ip: &str, port: u16) -> Self {
        OpenApiInstance {
            service: service.to_string(),
            group: String::new(),
            ip: ip.to_string(),
            port,
            weight: 1.0,
            enabled: true,
            cluster: String::new(),
            metadata_json: String::new(),
        }
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        let mut p = vec![
            ("serviceName", self.service.clone()),
            ("ip", self.ip.clone()),
            ("port", self.port.to_string()),
            ("weight", self.weight.to_string()),
            ("enabled", self.enabled.to_string()),
            ("healthy", "true".into()),
            ("ephemeral", "false".into()),
        ];
        if !self.group.is_empty() {
            p.push(("groupName", self.group.clone()));
        }
        if !self.cluster.is_empty() {
            p.push(("clusterName", self.cluster.clone()));
        }
        if !self.metadata_json.is_empty() {
            p.push(("metadata", self.metadata_json.clone()));
        }
        p
    }

    /// `POST /nacos/v1/ns/instance`.
    pub fn register(&self, nacos: &str) -> Result<String, String> {
        request(nacos, "POST", "/nacos/v1/ns/instance", &self.params())
    }

    /// `PUT /nacos/v1/ns/instance` with the current fields (weight, enabled, metadata).
    pub fn update(&self, nacos: &str) -> Result<String, String> {
        request(nacos, "PUT", "/nacos/v1/ns/instance", &self.params())
    }

    /// `DELETE /nacos/v1/ns/instance`.
    pub fn deregister(&self, nacos: &str) -> Result<String, String> {
        request(nacos, "DELETE", "/nacos/v1/ns/instance", &self.params())
    }
}

/// `POST /nacos/v1/cs/configs`: publishes `content` as `data_id` in `group`.
pub fn publish_config(
    nacos: &str,
    data_id: &str,
    group: &str,
    content: &str,
) -> Result<String, String> {
    request(
        nacos,
        "POST",
        "/nacos/v1/cs/configs",
        &[
            ("dataId", data_id.to_string()),
            ("group", group.to_string()),
            ("content", content.to_string()),
            ("type", "yaml".to_string()),
        ],
    )
}

/// One form-encoded request; `Ok(body)` on a 2xx status.
pub fn request(
    nacos: &str,
    method: &str,
    path: &str,
    params: &[(&str, String)],
) -> Result<String, String> {
    let form = params
        .iter()
        .map(|(k, v)| format!("{k}={}", encode_component(v)))
        .collect::<Vec<_>>()
        .join("&");
    let (target, body) = if method == "POST" {
        (path.to_string(), form)
    } else {
        (format!("{path}?{form}"), String::new())
    };
    let addr: std::net::SocketAddr = nacos.parse().map_err(|e| format!("{nacos}: {e}"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("{method} {path}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let req = format!(
        "{method} {target} HTTP/1.0\r\nHost: {nacos}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let status = resp.get(9..12).unwrap_or("");
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or("")
        .to_string();
    if status.starts_with('2') {
        Ok(body)
    } else {
        Err(format!("{method} {path}: HTTP {status}: {body}"))
    }
}
