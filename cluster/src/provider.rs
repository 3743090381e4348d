//! An in-process HTTP provider for tests, the demo and docker-compose (feature `provider`).
//!
//! It serves Switchman's default HTTP mapping, `POST /{service}/{method}` with a JSON array of
//! arguments, and answers with whatever the handler returns.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use switchman_core::BoxFuture;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One request as the handler sees it.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    /// Service (first path segment).
    pub service: String,
    /// Method (second path segment).
    pub method: String,
    /// The JSON arguments (`null` when the body was empty or not JSON).
    pub arguments: Value,
    /// Request headers (attachments arrive here).
    pub headers: HeaderMap,
}

/// What the handler answers.
#[derive(Debug, Clone)]
pub enum ProviderReply {
    /// 200 with this JSON body.
    Ok(Value),
    /// This status with a text body.
    Status(u16, String),
}

type Handler = Arc<dyn Fn(ProviderRequest) -> BoxFuture<'static, ProviderReply> + Send + Sync>;

#[derive(Clone)]
struct AppState {
    handler: Handler,
    hits: Arc<AtomicU64>,
}

/// A running provider; stops when dropped.
#[derive(Debug)]
pub struct HttpProvider {
    addr: SocketAddr,
    hits: Arc<AtomicU64>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl HttpProvider {
    /// Serves `handler` on `bind` (use `127.0.0.1:0` for an ephemeral port).
    pub async fn serve<F>(bind: SocketAddr, handler: F) -> std::io::Result<HttpProvider>
    where
        F: Fn(ProviderRequest) -> BoxFuture<'static, ProviderReply> + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let hits = Arc::new(AtomicU64::new(0));
        let state = AppState {
            handler: Arc::new(handler),
            hits: hits.clone(),
        };
        let app = Router::new()
            .route("/{service}/{method}", axum::routing::any(handle))
            .with_state(state);
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(HttpProvider {
            addr,
            hits,
            shutdown: Some(tx),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests served so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Stops accepting connections (in-flight requests finish).
    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for HttpProvider {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn handle(
    State(state): State<AppState>,
    Path((service, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.hits.fetch_add(1, Ordering::Relaxed);
    let arguments = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = (state.handler)(ProviderRequest {
        service,
        method,
        arguments,
        headers,
    })
    .await;
    match reply {
        ProviderReply::Ok(v) => axum::Json(v).into_response(),
        ProviderReply::Status(code, text) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            text,
        )
            .into_response(),
    }
}
