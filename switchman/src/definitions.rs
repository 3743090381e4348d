//! What a provider has when a call's signature is not among its methods: the service
//! definition its application published in the registry's metadata report (Java Dubbo 3's
//! default), read on that rare path only, cached briefly, and worded into the error.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchman_core::{BoxFuture, Error, Result, ServiceKey, SignatureMismatch};
use switchman_discovery::Registry;
use switchman_discovery::metadata::ServiceDefinition;
use tracing::debug;

/// How long a definition read (or its absence) is reused: a burst of failing calls reads it
/// once, and a provider's redeploy is seen within this.
const KEEP: Duration = Duration::from_secs(30);
/// How long the error of a failed call waits for the read.
const READ_WITHIN: Duration = Duration::from_secs(2);
/// Definitions kept at most (one per provider application of the service, in practice).
const MAX_KEPT: usize = 64;

type Kept = (Instant, Option<Arc<ServiceDefinition>>);

/// The definitions of one reference's providers, read from its registry when needed.
pub(crate) struct Definitions {
    registry: Arc<dyn Registry>,
    kept: Mutex<HashMap<(ServiceKey, String), Kept>>,
}

impl fmt::Debug for Definitions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Definitions").finish_non_exhaustive()
    }
}

impl Definitions {
    pub(crate) fn new(registry: Arc<dyn Registry>) -> Self {
        Definitions {
            registry,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// Whether [`Definitions::explain`] may say more about `e`.
    pub(crate) fn explains(e: &Error) -> bool {
        e.cause::<SignatureMismatch>()
            .is_some_and(|m| m.application.is_some())
    }

    /// `e`, and when it is a signature mismatch whose provider published its definition, the
    /// same error saying which signatures the provider has (`it has add(int,int)`).
    pub(crate) async fn explain(&self, e: Error) -> Error {
        let Some(m) = e.cause::<SignatureMismatch>() else {
            return e;
        };
        let Some(app) = m.application.as_deref() else {
            return e;
        };
        let Some(definition) = self.definition(&m.service, app).await else {
            return e;
        };
        let has = format!(
            "it has {} (the definition application {app} published in the registry's metadata report)",
            definition.instead_of(&m.method)
        );
        let message = m.message(&has);
        e.with_message(message)
    }

    async fn definition(&self, service: &ServiceKey, app: &str) -> Option<Arc<ServiceDefinition>> {
        let key = (service.clone(), app.to_string());
        if let Some((at, kept)) = self.lock().get(&key)
            && at.elapsed() < KEEP
        {
            return kept.clone();
        }
        let read = self.registry.service_definition(service, app);
        let found = match tokio::time::timeout(READ_WITHIN, read).await {
            Ok(Ok(found)) => found.map(Arc::new),
            Ok(Err(e)) => {
                debug!(service = %service, application = app, "no service definition: {e}");
                None
            }
            Err(_) => {
                debug!(service = %service, application = app, "no service definition within {READ_WITHIN:?}");
                None
            }
        };
        let mut kept = self.lock();
        if kept.len() >= MAX_KEPT {
            kept.retain(|_, (at, _)| at.elapsed() < KEEP);
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
        }
        kept.insert(key, (Instant::now(), found.clone()));
        found
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(ServiceKey, String), Kept>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The future of a [`Reference`](crate::Reference) called as a `tower::Service`: the call's,
/// and on the rare error the definitions of the service word better, that explanation (no second
/// allocation on any other call).
pub struct ReferenceFuture {
    state: State,
}

enum State {
    Call(BoxFuture<'static, Result<Value>>, Arc<Definitions>),
    Explain(BoxFuture<'static, Error>),
}

impl ReferenceFuture {
    pub(crate) fn new(
        call: BoxFuture<'static, Result<Value>>,
        definitions: Arc<Definitions>,
    ) -> Self {
        ReferenceFuture {
            state: State::Call(call, definitions),
        }
    }
}

impl fmt::Debug for ReferenceFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReferenceFuture").finish_non_exhaustive()
    }
}

impl Future for ReferenceFuture {
    type Output = Result<Value>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.state {
                State::Call(call, definitions) => match call.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) if Definitions::explains(&e) => {
                        let definitions = definitions.clone();
                        self.state =
                            State::Explain(Box::pin(async move { definitions.explain(e).await }));
                    }
                    Poll::Ready(done) => return Poll::Ready(done),
                },
                State::Explain(explain) => return explain.as_mut().poll(cx).map(Err),
            }
        }
    }
}
