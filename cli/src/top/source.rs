//! Reading the sources: an admin endpoint (`GET /snapshot`, `GET /metrics` over plain
//! HTTP/1.1) or a registry subscription.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use switchman_discovery::RegistryDirectory;

use super::*;

// ---- reading the sources ----

/// One read of the source.
#[derive(Debug, Clone)]
pub(super) struct Poll {
    pub(super) at: Instant,
    pub(super) snapshot: Value,
    pub(super) metrics: Option<Scrape>,
}

/// What `/metrics` says about the shown service.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Scrape {
    pub(super) calls: f64,
    pub(super) calls_failed: f64,
    pub(super) retries: f64,
    pub(super) refused: f64,
    /// Cumulative attempt-duration buckets per instance address: (upper bound s, count).
    pub(super) buckets: HashMap<String, Vec<(f64, f64)>>,
}

/// Where the rows come from.
pub(super) enum Source {
    Admin {
        addr: SocketAddr,
        base: String,
        service: Option<String>,
    },
    Registry {
        directory: Arc<RegistryDirectory>,
        registry: String,
    },
}

impl Source {
    pub(super) fn describe(&self) -> String {
        match self {
            Source::Admin { base, .. } => format!("admin {base}"),
            Source::Registry { registry, .. } => format!("registry {registry}"),
        }
    }

    pub(super) fn traffic(&self) -> bool {
        matches!(self, Source::Admin { .. })
    }

    pub(super) async fn poll(&mut self) -> Result<Poll, String> {
        match self {
            Source::Registry { directory, .. } => Ok(Poll {
                at: Instant::now(),
                snapshot: switchman::admin::snapshot_json(&**directory, None),
                metrics: None,
            }),
            Source::Admin {
                addr,
                base,
                service,
            } => {
                let addr = *addr;
                if service.is_none() {
                    let services = get(addr, "/services").await?;
                    let services: Value = serde_json::from_str(&services.1)
                        .map_err(|e| format!("{base}/services is not JSON: {e}"))?;
                    *service = services["consumers"]
                        .as_array()
                        .and_then(|c| c.first())
                        .and_then(|c| c["service"].as_str())
                        .map(str::to_string);
                }
                let Some(name) = service.clone() else {
                    return Err(format!("{base} lists no consumer (yet)"));
                };
                let (status, body) =
                    get(addr, &format!("/snapshot/{}", encode_path(&name))).await?;
                let snapshot: Value = serde_json::from_str(&body)
                    .map_err(|e| format!("{base}/snapshot/{name} is not JSON: {e}"))?;
                if status != 200 {
                    return Err(format!(
                        "{base}/snapshot/{name}: {}{}",
                        snapshot["error"].as_str().unwrap_or("failed"),
                        match snapshot["services"].as_array() {
                            Some(s) if !s.is_empty() => format!(
                                " (listed: {})",
                                s.iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            _ => String::new(),
                        }
                    ));
                }
                let key = snapshot["service"].as_str().unwrap_or(&name).to_string();
                let metrics = match get(addr, "/metrics").await? {
                    (200, text) => Some(scrape_for(&text, &key)),
                    _ => None,
                };
                Ok(Poll {
                    at: Instant::now(),
                    snapshot,
                    metrics,
                })
            }
        }
    }
}

/// The longest answer read from an admin endpoint.
pub(super) const MAX_ANSWER: u64 = 64 << 20;

/// `GET path` on the admin endpoint at `addr` (plain HTTP/1.1, one request per connection,
/// bounded in time and size): (status, body).
pub(super) async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = format!("http://{addr}{path}");
    let read = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut out = Vec::new();
        s.take(MAX_ANSWER).read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let raw = tokio::time::timeout(Duration::from_secs(3), read)
        .await
        .map_err(|_| format!("cannot read {url}: no answer within 3 s"))?
        .map_err(|e| format!("cannot read {url}: {e}"))?;
    parse_answer(&raw).ok_or_else(|| format!("cannot read {url}: not an HTTP answer"))
}

/// Status and body of an HTTP/1.1 answer (`Content-Length`, chunked, or up to the close).
pub(super) fn parse_answer(raw: &[u8]) -> Option<(u16, String)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut chunked = false;
    let mut length = None;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if k == "content-length" {
            length = v.parse::<usize>().ok();
        }
    }
    let body = if chunked {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let eol = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(&rest[..eol]).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        out
    } else {
        match length {
            Some(n) => body.get(..n)?.to_vec(),
            None => body.to_vec(),
        }
    };
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Percent-encodes what may not stand in a URL path (`/` and `:` may: service keys keep them).
pub(super) fn encode_path(s: &str) -> String {
    switchman_core::percent::encode_path(s)
}
