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
        /// What the registry has instead, when its first answer listed nothing of the key:
        /// shown (as `watch` says it) while the list stays empty.
        nothing: Option<String>,
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
            Source::Registry {
                directory, nothing, ..
            } => {
                if let Some(nothing) = nothing
                    && directory.load().instances().is_empty()
                {
                    return Err(nothing.clone());
                }
                Ok(Poll {
                    at: Instant::now(),
                    snapshot: switchman::admin::snapshot_json(&**directory, None),
                    metrics: None,
                })
            }
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

/// The longest answer body read from an admin endpoint: a larger one (declared or sent) is an
/// error, not an allocation (hyper bounds the head on its own, to a few hundred KiB).
pub(super) const MAX_ANSWER: usize = 64 << 20;

/// How long one read of the admin endpoint (connect, request, whole answer) may take.
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// `GET path` on the admin endpoint at `addr` (HTTP/1.1 through hyper, one request per
/// connection, straight to `addr` with no proxy, bounded in time and size): (status, body).
pub(super) async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    get_bounded(addr, path, ANSWER_WITHIN, MAX_ANSWER).await
}

/// [`get`] with its bounds as arguments (the tests use small ones).
async fn get_bounded(
    addr: SocketAddr,
    path: &str,
    within: Duration,
    max: usize,
) -> Result<(u16, String), String> {
    use http_body_util::{BodyExt, Empty, Limited};
    use hyper::body::{Body, Bytes};

    let url = format!("http://{addr}{path}");
    let read = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(|e| e.to_string())?;
        // The connection runs beside the request; it ends with this read (answered, failed or
        // timed out), never outliving it.
        let _conn = AbortOnDrop(tokio::spawn(conn));
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::CONNECTION, "close")
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let answer = send.send_request(request).await.map_err(|e| {
            if e.is_parse() {
                format!("not an HTTP answer ({e})")
            } else {
                e.to_string()
            }
        })?;
        let status = answer.status().as_u16();
        let too_big = || format!("the answer is over {max} bytes");
        if answer.body().size_hint().lower() > max as u64 {
            return Err(too_big());
        }
        let body = Limited::new(answer.into_body(), max)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    too_big()
                } else {
                    e.to_string()
                }
            })?
            .to_bytes();
        Ok::<_, String>((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| {
            format!(
                "cannot read {url}: no answer within {} s",
                within.as_secs_f64()
            )
        })?
        .map_err(|e| format!("cannot read {url}: {e}"))
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Percent-encodes what may not stand in a URL path (`/` and `:` may: service keys keep them).
pub(super) fn encode_path(s: &str) -> String {
    switchman_core::percent::encode_path(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// What a fake admin endpoint does after reading the request head.
    enum Answer {
        /// Writes these bytes and closes.
        Raw(&'static [u8]),
        /// Writes a head, then body bytes until the client goes away.
        Endless(&'static [u8]),
        /// Never answers.
        Silent,
    }

    /// A one-connection endpoint on a fresh loopback port; the request head it read comes back
    /// on the receiver.
    async fn endpoint(answer: Answer) -> (SocketAddr, tokio::sync::oneshot::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let head = read_head(&mut s).await;
            let _ = tx.send(head);
            match answer {
                Answer::Raw(raw) => {
                    let _ = s.write_all(raw).await;
                }
                Answer::Endless(head) => {
                    let _ = s.write_all(head).await;
                    let chunk = vec![b'x'; 16 << 10];
                    while s.write_all(&chunk).await.is_ok() {}
                }
                Answer::Silent => std::future::pending::<()>().await,
            }
        });
        (addr, rx)
    }

    async fn read_head(s: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).await.unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        String::from_utf8_lossy(&head).into_owned()
    }

    async fn get_small(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
        get_bounded(addr, path, Duration::from_secs(5), 1024).await
    }

    #[tokio::test]
    async fn answers_are_read_by_length_chunks_or_close() {
        let (addr, head) = endpoint(Answer::Raw(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}trailing",
        ))
        .await;
        assert_eq!(
            get_small(addr, "/snapshot/g1/a.B:1.0").await,
            Ok((200, "{}".to_string()))
        );
        let head = head.await.unwrap().to_ascii_lowercase();
        assert!(
            head.starts_with("get /snapshot/g1/a.b:1.0 http/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("\r\nhost: {addr}\r\n")), "{head}");
        assert!(head.contains("\r\nconnection: close\r\n"), "{head}");

        let (addr, _) = endpoint(Answer::Raw(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        ))
        .await;
        assert_eq!(get_small(addr, "/x").await, Ok((404, "abcde".to_string())));

        let (addr, _) = endpoint(Answer::Raw(b"HTTP/1.1 200 OK\r\n\r\nall of it")).await;
        assert_eq!(
            get_small(addr, "/x").await,
            Ok((200, "all of it".to_string()))
        );
        // Exactly at the limit is still an answer.
        let (addr, _) = endpoint(Answer::Raw(
            b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nfour",
        ))
        .await;
        assert_eq!(
            get_bounded(addr, "/x", Duration::from_secs(5), 4).await,
            Ok((200, "four".to_string()))
        );
    }

    #[tokio::test]
    async fn broken_answers_are_errors_naming_the_url() {
        let (addr, _) = endpoint(Answer::Raw(b"garbage\r\n\r\n")).await;
        let e = get_small(addr, "/metrics").await.unwrap_err();
        assert!(
            e.starts_with(&format!(
                "cannot read http://{addr}/metrics: not an HTTP answer"
            )),
            "{e}"
        );
        // Cut short: fewer bytes than declared.
        let (addr, _) = endpoint(Answer::Raw(
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort",
        ))
        .await;
        let e = get_small(addr, "/x").await.unwrap_err();
        assert!(
            e.starts_with(&format!("cannot read http://{addr}/x: ")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_before_reading() {
        let (addr, _) = endpoint(Answer::Raw(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1025\r\n\r\nx",
        ))
        .await;
        assert_eq!(
            get_small(addr, "/x").await,
            Err(format!(
                "cannot read http://{addr}/x: the answer is over 1024 bytes"
            ))
        );
    }

    #[tokio::test]
    async fn an_endless_answer_stops_at_the_limit() {
        for head in [
            &b"HTTP/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n100000000\r\n",
        ] {
            let (addr, _) = endpoint(Answer::Endless(head)).await;
            assert_eq!(
                get_small(addr, "/x").await,
                Err(format!(
                    "cannot read http://{addr}/x: the answer is over 1024 bytes"
                ))
            );
        }
    }

    #[tokio::test]
    async fn a_silent_endpoint_times_out() {
        let (addr, head) = endpoint(Answer::Silent).await;
        let started = Instant::now();
        let e = get_bounded(addr, "/services", Duration::from_millis(200), 1024)
            .await
            .unwrap_err();
        assert_eq!(
            e,
            format!("cannot read http://{addr}/services: no answer within 0.2 s")
        );
        assert!(started.elapsed() < Duration::from_secs(3));
        // It did get the request: the time went waiting for the answer.
        assert!(head.await.unwrap().starts_with("GET /services "));
    }
}
