//! Nacos username/password login, in place of nacos-sdk 0.8.3's `HttpLoginAuthPlugin`.
//!
//! The SDK's plugin puts the password in the login URL's query string (so every proxy and the
//! server's access log records it), logs that URL and the password at `debug` and the server's
//! answer at `error`, and panics when the answer's body fails mid-read, which ends the SDK's
//! login task for good (the token then expires and every request fails until a restart). This
//! one, given to the SDK through `with_auth_plugin`:
//!
//! - posts `username` and `password` as an `application/x-www-form-urlencoded` body to
//!   `/nacos/v1/auth/login` (Nacos and rnacos read form fields as they read query parameters);
//! - logs neither; a refused login is one `warn` line naming the server and the status, with at
//!   most [`MAX_LOGGED`] bytes of the answer, then `debug` while it keeps failing;
//! - tries the servers in turn from a random one, each within [`LOGIN_TIMEOUT`], reads at most
//!   [`MAX_ANSWER`] bytes of an answer, and never panics: a failed login keeps the last token;
//! - refreshes the token in the last tenth of its `tokenTtl` (as Java's Nacos client does), and
//!   at least [`SDK_LOGIN_PERIOD`] + 5 s before it expires: the SDK asks every 30 s, so a token
//!   of a TTL between 35 s and 350 s would otherwise expire before the next ask; the TTL taken
//!   within 1 s..=1 day. A TTL under 35 s cannot be kept fresh at the SDK's pace (every ask then
//!   logs in; Nacos's default TTL is 18000 s);
//! - when a refresh fails and the token would expire before the SDK's next ask, tries again
//!   within the same ask, after 1 s, 2 s, 4 s, then every 5 s (Java's Nacos client asks every
//!   5 s), for as long as the token lives: one slow or refused login does not let it lapse.
//!
//! The SDK calls [`AuthPlugin::login`] when a client is built and every 30 s after, and puts
//! the token on every gRPC request as `accessToken`. Over TLS (`secure=true`) the server list
//! it hands over names the local TLS relays (`tls.rs`), so the login is encrypted too.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacos_sdk::api::plugin::{AuthContext, AuthPlugin, LoginIdentityContext, RequestResource};
use tracing::{debug, info, warn};

/// One login request's time limit (connect, send, answer).
pub(crate) const LOGIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest login answer read (a Nacos answer is about 200 bytes).
pub(crate) const MAX_ANSWER: usize = 64 * 1024;
/// The most bytes of a refused login's answer that go to the log.
pub(crate) const MAX_LOGGED: usize = 200;
/// The token TTL range: a server's `tokenTtl` (seconds) outside it is clamped.
const TTL_RANGE: (u64, u64) = (1, 24 * 3600);
/// The key under which the SDK sends the token (Nacos's `accessToken`).
const ACCESS_TOKEN: &str = "accessToken";
/// How often nacos-sdk 0.8.3 calls [`AuthPlugin::login`] after the first login.
pub(crate) const SDK_LOGIN_PERIOD: Duration = Duration::from_secs(30);
/// The first pause before a failed refresh is tried again within one ask (doubling after).
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause between two tries within one ask.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// How long before its expiry a token of `ttl` is refreshed: the last tenth of the TTL, and at
/// least one SDK period and 5 s (capped at the TTL: then every ask logs in).
fn refresh_margin(ttl: Duration) -> Duration {
    (ttl / 10)
        .max(SDK_LOGIN_PERIOD + Duration::from_secs(5))
        .min(ttl)
}

/// A Nacos login for one registry's clients (naming and config share one).
pub(crate) struct NacosLogin {
    username: String,
    password: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    token: Option<String>,
    /// When the token is due for a refresh; `None`: log in at the next call.
    refresh_at: Option<Instant>,
    /// When the token expires (its TTL from the answer's arrival).
    expires_at: Option<Instant>,
    /// Consecutive failed logins (the first is a warning, the next ones `debug`).
    failures: u32,
}

/// What one login attempt against one server gave.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// A token and its TTL (clamped).
    Token(String, Duration),
    /// Refused or unusable: why, for the log (no credential in it).
    Failed(String),
}

impl std::fmt::Debug for NacosLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NacosLogin")
            .field("username", &self.username)
            .field("password", &"***")
            .finish()
    }
}

impl NacosLogin {
    pub(crate) fn new(username: &str, password: &str) -> Self {
        NacosLogin {
            username: username.to_string(),
            password: password.to_string(),
            state: Mutex::new(State::default()),
        }
    }

    /// The current token, if a login succeeded (for the HTTP reads of `http_list.rs`).
    pub(crate) fn token(&self) -> Option<String> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.token.clone()
    }

    /// Makes the next [`AuthPlugin::login`] log in again (the server refused the token).
    pub(crate) fn expire(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.refresh_at = None;
    }

    fn due(&self) -> bool {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.refresh_at.is_none_or(|at| Instant::now() >= at)
    }

    /// After a failed refresh: whether to try again within this ask after `pause`, that is,
    /// whether the token (`expires_at` is set with it) would expire before the SDK's next ask
    /// and lives longer than the pause.
    fn retries_after(&self, pause: Duration) -> bool {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.expires_at
            .and_then(|at| at.checked_duration_since(Instant::now()))
            .is_some_and(|left| left < SDK_LOGIN_PERIOD && pause < left)
    }

    /// One round: each server in turn from a random one, until one gives a token (`true`).
    async fn login_round(&self, servers: &[String]) -> bool {
        let start = fastrand::usize(..servers.len());
        let mut last = None;
        for k in 0..servers.len() {
            let server = &servers[(start + k) % servers.len()];
            match self.login_once(server).await {
                Outcome::Token(token, ttl) => {
                    self.record(server, Outcome::Token(token, ttl));
                    return true;
                }
                Outcome::Failed(why) => last = Some((server.clone(), why)),
            }
        }
        if let Some((server, why)) = last {
            self.record(&server, Outcome::Failed(why));
        }
        false
    }

    fn record(&self, server: &str, outcome: Outcome) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Outcome::Token(token, ttl) => {
                if s.failures > 0 {
                    info!(server, after_failures = s.failures, "nacos login succeeded");
                }
                let now = Instant::now();
                s.token = Some(token);
                s.refresh_at = Some(now + ttl - refresh_margin(ttl));
                s.expires_at = Some(now + ttl);
                s.failures = 0;
            }
            Outcome::Failed(why) => {
                if s.failures == 0 {
                    warn!(
                        server,
                        "nacos login failed (the last token, if any, stays in use): {why}"
                    );
                } else {
                    debug!(
                        server,
                        failures = s.failures,
                        "nacos login still failing: {why}"
                    );
                }
                s.failures = s.failures.saturating_add(1);
            }
        }
    }

    /// The form body: `username=..&password=..`, percent-encoded.
    fn form(&self) -> String {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("username", &self.username)
            .append_pair("password", &self.password)
            .finish()
    }

    /// One login against `server` (`host:port`, the HTTP port), within [`LOGIN_TIMEOUT`].
    pub(crate) async fn login_once(&self, server: &str) -> Outcome {
        match tokio::time::timeout(LOGIN_TIMEOUT, self.post(server)).await {
            Ok(Ok((status, body))) if status.is_success() => parse_answer(&body),
            Ok(Ok((status, body))) => Outcome::Failed(format!("HTTP {status}: {}", excerpt(&body))),
            Ok(Err(why)) => Outcome::Failed(why),
            Err(_) => Outcome::Failed(format!("no answer within {LOGIN_TIMEOUT:?}")),
        }
    }

    /// The login request on a fresh connection (logins are rare; the SDK calls this from its
    /// own runtime and from the caller's, and no connection should outlive either): the
    /// status and at most [`MAX_ANSWER`] bytes of body.
    async fn post(&self, server: &str) -> Result<(hyper::StatusCode, Vec<u8>), String> {
        use http_body_util::BodyExt;
        use hyper::body::Bytes;

        let tcp = tokio::net::TcpStream::connect(server)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(|e| format!("HTTP handshake failed: {e}"))?;
        let conn = tokio::spawn(conn);
        let request = hyper::Request::post("/nacos/v1/auth/login")
            .header(hyper::header::HOST, server)
            .header(
                hyper::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(http_body_util::Full::new(Bytes::from(self.form())))
            .map_err(|e| format!("bad request: {e}"))?;
        let result = async {
            let resp = sender
                .send_request(request)
                .await
                .map_err(|e| format!("request failed: {e}"))?;
            let status = resp.status();
            let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        format!("HTTP {status}: an answer over {MAX_ANSWER} bytes")
                    } else {
                        format!("HTTP {status}: the answer broke off: {e}")
                    }
                })?
                .to_bytes();
            Ok((status, body.to_vec()))
        }
        .await;
        conn.abort();
        result
    }
}

/// The token and TTL of a login answer (`{"accessToken":"..","tokenTtl":18000,..}`).
pub(crate) fn parse_answer(body: &[u8]) -> Outcome {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        access_token: String,
        token_ttl: u64,
    }
    match serde_json::from_slice::<Answer>(body) {
        Ok(a) if !a.access_token.is_empty() && a.access_token.len() <= 8 * 1024 => {
            let ttl = a.token_ttl.clamp(TTL_RANGE.0, TTL_RANGE.1);
            Outcome::Token(a.access_token, Duration::from_secs(ttl))
        }
        Ok(_) => Outcome::Failed("an empty or oversized accessToken".to_string()),
        Err(e) => Outcome::Failed(format!("not a login answer ({e}): {}", excerpt(body))),
    }
}

/// At most [`MAX_LOGGED`] bytes of `body`, control characters replaced.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX_LOGGED)]);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if body.len() > MAX_LOGGED {
        out.push('…');
    }
    out
}

impl AuthPlugin for NacosLogin {
    fn login<'a, 'b>(
        &'a self,
        server_list: Arc<Vec<String>>,
        _auth_context: Arc<AuthContext>,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            if !self.due() || server_list.is_empty() {
                return;
            }
            // A failed refresh of a token that would lapse before the next ask: again, while
            // it lives (bounded by its expiry, under 30 s away).
            let mut pause = RETRY_FIRST;
            while !self.login_round(&server_list).await && self.retries_after(pause) {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        })
    }

    fn get_login_identity(&self, _: RequestResource) -> LoginIdentityContext {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &s.token {
            Some(t) => LoginIdentityContext::default().add_context(ACCESS_TOKEN, t.clone()),
            None => LoginIdentityContext::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-connection-at-a-time HTTP server answering every request with `answer`; the
    /// requests it read come back on the channel.
    async fn server(
        answer: &'static [u8],
    ) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        server_answers(vec![answer]).await
    }

    /// The same, answering the k-th request with `answers[k]` (the last one after that).
    async fn server_answers(
        answers: Vec<&'static [u8]>,
    ) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut k = 0;
            while let Ok((mut s, _)) = l.accept().await {
                let answer = answers[k.min(answers.len() - 1)];
                k += 1;
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read the head and the announced body.
                loop {
                    let n = s.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let len = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= head_end + 4 + len {
                            break;
                        }
                    }
                }
                let _ = tx.send(String::from_utf8_lossy(&buf).to_string());
                let _ = s.write_all(answer).await;
                let _ = s.shutdown().await;
            }
        });
        (addr, rx)
    }

    #[test]
    fn a_token_is_refreshed_before_it_expires_at_the_sdk_pace() {
        let s = Duration::from_secs;
        // The last tenth of a long TTL.
        assert_eq!(refresh_margin(s(18_000)), s(1_800));
        // At least one SDK period (30 s) and 5 s: asked at 0 s and 30 s, a 40 s token is
        // renewed at 30 s, not at 60 s (20 s after it expired).
        assert_eq!(refresh_margin(s(40)), s(35));
        assert_eq!(refresh_margin(s(300)), s(35));
        // Shorter than that: every ask logs in.
        assert_eq!(refresh_margin(s(10)), s(10));
    }

    #[tokio::test]
    async fn credentials_travel_in_the_body_never_the_url() {
        let (addr, mut requests) = server(
            b"HTTP/1.1 200 OK\r\nContent-Length: 51\r\n\r\n{\"accessToken\":\"tok-1\",\"tokenTtl\":18000,\"x\":true}  ",
        )
        .await;
        let login = NacosLogin::new("ops user", "p&ss=w?rd#1");
        login
            .login(Arc::new(vec![addr]), Arc::new(AuthContext::default()))
            .await;
        let req = requests.recv().await.unwrap();
        let head = req.lines().next().unwrap();
        assert_eq!(head, "POST /nacos/v1/auth/login HTTP/1.1", "{req}");
        assert!(!head.contains("p&ss") && !head.contains("p%26ss"), "{req}");
        assert!(
            req.ends_with("username=ops+user&password=p%26ss%3Dw%3Frd%231"),
            "{req}"
        );
        let s = login.state.lock().unwrap();
        assert_eq!(s.token.as_deref(), Some("tok-1"));
        // Refreshed at 90% of 18000 s.
        let left = s.refresh_at.unwrap() - Instant::now();
        assert!(left > Duration::from_secs(16_100) && left <= Duration::from_secs(16_200));
    }

    #[tokio::test]
    async fn an_answer_that_breaks_off_or_is_refused_keeps_the_last_token_and_never_panics() {
        let login = NacosLogin::new("u", "secret-pw");
        login.record("x", Outcome::Token("old".into(), Duration::from_secs(1)));
        login.state.lock().unwrap().refresh_at = None;
        // Announces 100 bytes, sends 10, closes: the SDK's plugin panicked here.
        let (cut, _r1) = server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"accessTo").await;
        let (refused, _r2) =
            server(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 13\r\n\r\nunknown user!").await;
        for addr in [cut, refused] {
            match login.login_once(&addr).await {
                Outcome::Failed(why) => assert!(!why.contains("secret-pw"), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        login
            .login(
                Arc::new(vec![
                    server(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
                        .await
                        .0,
                ]),
                Arc::new(AuthContext::default()),
            )
            .await;
        let s = login.state.lock().unwrap();
        assert_eq!(s.token.as_deref(), Some("old"));
        assert_eq!(s.failures, 1);
    }

    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy";
    const NEW_TOKEN: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Length: 35\r\n\r\n{\"accessToken\":\"new\",\"tokenTtl\":40}";

    /// One ask of a login holding `old`, expiring in `ttl` and due for a refresh, against a
    /// server giving `answers`: the token and failure count after it, and the logins it made
    /// (each request reaches the channel before its answer is written, so all are there).
    async fn one_ask(ttl: Duration, answers: Vec<&'static [u8]>) -> (Option<String>, u32, usize) {
        let (addr, mut requests) = server_answers(answers).await;
        let login = NacosLogin::new("u", "p");
        login.record("x", Outcome::Token("old".into(), ttl));
        login.state.lock().unwrap().refresh_at = None;
        login
            .login(Arc::new(vec![addr]), Arc::new(AuthContext::default()))
            .await;
        let mut logins = 0;
        while requests.try_recv().is_ok() {
            logins += 1;
        }
        let s = login.state.lock().unwrap();
        (s.token.clone(), s.failures, logins)
    }

    #[tokio::test]
    async fn a_failed_refresh_is_tried_again_before_the_token_lapses() {
        // Expiring before the SDK's next ask (30 s): refused twice, then a new token, all
        // within the one ask (after pauses of 1 s and 2 s), and no login after the token.
        assert_eq!(
            one_ask(Duration::from_secs(20), vec![BUSY, BUSY, NEW_TOKEN]).await,
            (Some("new".into()), 0, 3)
        );
    }

    #[tokio::test]
    async fn a_failed_refresh_of_a_token_outliving_the_next_ask_waits_for_it() {
        // Expiring after the SDK's next ask: that ask tries again, not this one.
        assert_eq!(
            one_ask(Duration::from_secs(100), vec![BUSY, NEW_TOKEN]).await,
            (Some("old".into()), 1, 1)
        );
    }

    #[tokio::test]
    async fn an_oversized_answer_is_refused() {
        let mut big = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'x', MAX_ANSWER + 10));
        let big: &'static [u8] = Box::leak(big.into_boxed_slice());
        let (addr, _r) = server(big).await;
        match NacosLogin::new("u", "p").login_once(&addr).await {
            Outcome::Failed(why) => assert!(why.contains("an answer over"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn answers_are_checked() {
        assert_eq!(
            parse_answer(br#"{"accessToken":"t","tokenTtl":0}"#),
            Outcome::Token("t".into(), Duration::from_secs(1))
        );
        assert_eq!(
            parse_answer(br#"{"accessToken":"t","tokenTtl":99999999999}"#),
            Outcome::Token("t".into(), Duration::from_secs(24 * 3600))
        );
        assert!(matches!(
            parse_answer(br#"{"accessToken":"","tokenTtl":5}"#),
            Outcome::Failed(_)
        ));
        assert!(
            matches!(parse_answer(b"<html>\x1b[31m"), Outcome::Failed(w) if !w.contains('\x1b'))
        );
        let f = format!("{:?}", NacosLogin::new("u", "hunter2"));
        assert!(!f.contains("hunter2"), "{f}");
    }
}
