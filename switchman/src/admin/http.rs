//! The HTTP side: axum routes, answers, the `POST` command checks.

use std::net::SocketAddr;
use std::sync::Weak;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::*;

// ---- HTTP ----

pub(super) type AdminState = Weak<Shared>;

pub(super) fn router(state: AdminState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/services", get(services))
        .route("/snapshot", get(snapshot_without_service))
        .route("/snapshot/", get(snapshot_without_service))
        .route("/snapshot/{*service}", get(snapshot))
        .route("/metrics", get(metrics))
        .route("/offline", post(offline))
        .route("/online", post(online))
        .fallback(not_found)
        .with_state(state)
}

pub(super) fn answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

pub(super) fn gone() -> Response {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": "the admin endpoint is shutting down"}),
    )
}

pub(super) const ENDPOINTS: [&str; 6] = [
    "GET /services",
    "GET /snapshot/{service}",
    "GET /metrics",
    "POST /offline[?service=PATTERN]",
    "POST /online[?service=PATTERN]",
    "GET /",
];

pub(super) async fn index() -> Response {
    answer(
        StatusCode::OK,
        json!({"switchman": env!("CARGO_PKG_VERSION"), "endpoints": ENDPOINTS}),
    )
}

pub(super) async fn not_found(uri: axum::http::Uri) -> Response {
    answer(
        StatusCode::NOT_FOUND,
        json!({"error": format!("no admin endpoint at {}", uri.path()), "endpoints": ENDPOINTS}),
    )
}

pub(super) async fn services(State(state): State<AdminState>) -> Response {
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    let (consumers, providers) = {
        let e = shared.lock();
        let consumers: Vec<Value> = e
            .consumers
            .values()
            .map(|c| {
                let snap = c.directory.load();
                let routable = snap
                    .endpoints()
                    .iter()
                    .filter(|ep| !ep.stats.outlier().is_ejected())
                    .count();
                let ejected = snap.endpoints().len() - routable;
                json!({
                    "service": snap.service().to_string(),
                    "interface": snap.service().interface.as_ref(),
                    "group": snap.service().group.as_ref(),
                    "version": snap.service().version.as_ref(),
                    "registry": c.registry,
                    "epoch": snap.epoch(),
                    "instances": snap.instances().len(),
                    "routable": routable,
                    "ejected": ejected,
                    "calls": c.cluster.is_some(),
                })
            })
            .collect();
        let providers: Vec<Value> = e.providers.values().map(Exported::describe).collect();
        (consumers, providers)
    };
    answer(
        StatusCode::OK,
        json!({"consumers": consumers, "providers": providers}),
    )
}

pub(super) async fn snapshot_without_service(State(state): State<AdminState>) -> Response {
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    let listed = listed_services(&shared);
    answer(
        StatusCode::NOT_FOUND,
        json!({"error": "GET /snapshot/{service}: name a service", "services": listed}),
    )
}

pub(super) fn listed_services(shared: &Shared) -> Vec<String> {
    shared
        .lock()
        .consumers
        .values()
        .map(|c| c.directory.load().service().to_string())
        .collect()
}

pub(super) async fn snapshot(
    State(state): State<AdminState>,
    Path(service): Path<String>,
) -> Response {
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    let service = percent_decode(service.trim_matches('/'));
    let found = {
        let e = shared.lock();
        let all: Vec<&Consumer> = e.consumers.values().collect();
        let exact: Vec<&Consumer> = all
            .iter()
            .copied()
            .filter(|c| c.directory.load().service().to_string() == service)
            .collect();
        let matching = if exact.is_empty() {
            all.iter()
                .copied()
                .filter(|c| *c.directory.load().service().interface == *service)
                .collect()
        } else {
            exact
        };
        match matching.as_slice() {
            [one] => Ok((
                one.directory.clone(),
                one.cluster.clone(),
                one.departed.clone(),
            )),
            [] => Err(None),
            many => Err(Some(
                many.iter()
                    .map(|c| c.directory.load().service().to_string())
                    .collect::<Vec<_>>(),
            )),
        }
    };
    match found {
        Ok((dir, cluster, departed)) => {
            let departed = departed.lock().unwrap_or_else(|p| p.into_inner()).clone();
            answer(
                StatusCode::OK,
                describe_snapshot(&dir.load(), dir.lists(), cluster.as_ref(), &departed),
            )
        }
        Err(None) => answer(
            StatusCode::NOT_FOUND,
            json!({
                "error": format!("no consumer of {service} is listed here"),
                "services": listed_services(&shared),
            }),
        ),
        Err(Some(many)) => answer(
            StatusCode::CONFLICT,
            json!({
                "error": format!("{service} names several services here: ask for one by its key"),
                "services": many,
            }),
        ),
    }
}

pub(super) async fn metrics() -> Response {
    match METRICS.get() {
        Some(h) => scrape(h),
        None => (
            StatusCode::NOT_FOUND,
            "no metrics recorder here: install one with switchman::install_metrics_recorder() and \
             pass its handle to switchman::admin::set_metrics_handle (the CLI does both with --admin)\n",
        )
            .into_response(),
    }
}

pub(super) async fn offline(
    State(state): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    command(state, peer, &headers, query, false).await
}

pub(super) async fn online(
    State(state): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    command(state, peer, &headers, query, true).await
}

/// Why a command must be refused as a browser's, if it must: a web page the operator opens can
/// make the browser POST to a port on 127.0.0.1 (cross-site request forgery, answered by an
/// `Origin` header: browsers send it with every cross-origin POST and curl never does) or, through
/// a domain of its own that resolves to 127.0.0.1, as if it were that host (DNS rebinding,
/// answered by requiring a `Host` that is an IP address or `localhost` while commands are taken
/// from loopback only).
pub(super) fn browser_refusal(headers: &HeaderMap, accept_foreign: bool) -> Option<String> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        return Some(format!(
            "a request with an Origin header ({}) is a browser's: commands are taken from clients such as curl only",
            String::from_utf8_lossy(origin.as_bytes())
        ));
    }
    if accept_foreign {
        return None;
    }
    let host = headers
        .get(header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .unwrap_or_default();
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h),
    };
    let ok = name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok();
    (!ok).then(|| {
        format!(
            "Host {host:?} is neither an IP address nor localhost (a DNS name pointing at 127.0.0.1 is how a web page reaches this port)"
        )
    })
}

pub(super) async fn command(
    state: AdminState,
    peer: SocketAddr,
    headers: &HeaderMap,
    query: Option<String>,
    up: bool,
) -> Response {
    let name = if up { "online" } else { "offline" };
    let Some(shared) = state.upgrade() else {
        return gone();
    };
    if let Some(why) = browser_refusal(headers, shared.accept_foreign.load(Ordering::Relaxed)) {
        return answer(
            StatusCode::FORBIDDEN,
            json!({"error": format!("POST /{name} refused: {why}")}),
        );
    }
    if !peer.ip().to_canonical().is_loopback() && !shared.accept_foreign.load(Ordering::Relaxed) {
        return answer(
            StatusCode::FORBIDDEN,
            json!({"error": format!(
                "POST /{name} from {} refused: commands are taken from loopback only unless the admin endpoint accepts foreign IPs (Dubbo's qos.accept.foreign.ip)",
                peer.ip()
            )}),
        );
    }
    let pattern = query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "service")
        .map(|(_, v)| percent_decode(v))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| ".*".to_string());
    let re = match regex::Regex::new(&format!("^(?:{pattern})$")) {
        Ok(r) => r,
        Err(e) => {
            return answer(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("service pattern {pattern:?} is not a regular expression: {e}")}),
            );
        }
    };
    let matched: Vec<Exported> = shared
        .lock()
        .providers
        .values()
        .filter(|p| {
            let key = p.instance().service();
            re.is_match(&key.to_string()) || re.is_match(&key.interface)
        })
        .cloned()
        .collect();
    drop(shared);
    if matched.is_empty() {
        // Dubbo's answer when nothing matches.
        return answer(
            StatusCode::NOT_FOUND,
            json!({"result": "service not found", "error": format!("no exported provider matches {pattern:?}")}),
        );
    }
    let mut errors = Vec::new();
    for p in &matched {
        let errs = if up {
            p.online().await
        } else {
            p.offline().await
        };
        errors.extend(errs.into_iter().map(|e| e.to_string()));
    }
    answer(
        StatusCode::OK,
        json!({
            "result": "OK",
            "providers": matched.iter().map(Exported::describe).collect::<Vec<_>>(),
            "errors": errors,
        }),
    )
}

/// `%XX` and `+` decoded (a malformed escape is kept as it is).
pub(super) fn percent_decode(s: &str) -> String {
    switchman_core::percent::decode_lenient(s.as_bytes(), true)
}
