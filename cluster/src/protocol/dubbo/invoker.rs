//! [`DubboInvoker`]: one attempt of a call to a `dubbo://` provider.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use switchman_core::{
    BoxFuture, Error, ErrorKind, Instance, Invocation, Invoker, MakeEndpoint, Result,
};
use tokio::time::Instant;
use tracing::trace;

use super::body::{Reply, decode_call, encode_request, form_of};
use super::params::{
    Consumer, EndpointParams, MethodNames, ProviderParams, check_method, check_method_of,
};
use super::pool::Entry;
use super::token::{EndpointToken, to_add};
use super::{ExchangeConfig, HESSIAN2, Pool};
use crate::protocol::endpoint_params::SharedParams;
use crate::protocol::tls::{ClientTls, choose};

/// Calls `dubbo://` instances: Dubbo's default protocol (the Dubbo2 exchange format over TCP,
/// Hessian2 bodies), as Java Apache Dubbo providers serve it. Cheap to clone; clones share the
/// connections.
///
/// - **Typed calls**: give the Java parameter types with
///   [`Invocation::with_types`](switchman_core::Invocation::with_types) (`int`,
///   `java.lang.String`, `com.foo.User`, `int[]`...); the descriptor is built from them and
///   each JSON argument is converted for its type (see the README's JSON ↔ Hessian table).
/// - **Generic calls** (Dubbo's `GenericService.$invoke`, `generic=true`): what a call without
///   parameter types becomes, what [`DubboInvoker::generic`] makes every call, and what the
///   attachment `generic=true` asks for. POJOs travel as maps; the provider finds a method
///   that is not overloaded by its name alone.
///
/// One multiplexed connection per provider address is shared by every call (Dubbo's default;
/// a provider's `connections=N` parameter makes N, at most 16); heartbeats on an idle
/// connection every 60 s (or the provider's `heartbeat` parameter, 1 s to a day), closed and
/// made again after three missed ones; a provider's readonly event (graceful shutdown) stops
/// new calls to it without counting as an outlier strike; an 8 MiB payload limit both ways (or
/// the provider's `payload` parameter when smaller, at least 1 KiB). Out-of-range provider
/// numbers are logged and replaced (see the README's dubbo:// section); the
/// attempt's timeout travels as the `timeout` attachment, and the provider's `token` parameter
/// (Dubbo's token authorization: `token=true` registers a random UUID) as the `token`
/// attachment, as Java consumers send it. A `token` attachment of the call's own is sent
/// instead (as in Java: the provider's is only added when absent). A token longer than 256
/// bytes or not printable ASCII is logged and not sent.
///
/// ```no_run
/// # async fn demo(instance: switchman_core::Instance) -> switchman_core::Result<()> {
/// use std::time::Duration;
/// use switchman_cluster::dubbo::DubboInvoker;
/// use switchman_core::{Invocation, Invoker};
///
/// let dubbo = DubboInvoker::new();
/// let add = Invocation::new("add")
///     .with_args(vec![2.into(), 3.into()])
///     .with_types(["int", "int"]);
/// let sum = dubbo.invoke(&instance, &add, Duration::from_secs(1)).await?;
/// assert_eq!(sum, 5);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DubboInvoker {
    pool: Arc<Pool>,
    config: ExchangeConfig,
    generic: bool,
    /// The consumer's application, sent as `remote.application` ([`DubboInvoker::application`]).
    application: Option<Arc<str>>,
    /// Whether [`DubboInvoker::heartbeat`] was called: then it beats the provider's
    /// `heartbeat` parameter (a consumer setting wins, as Dubbo merges URLs).
    heartbeat_set: bool,
    /// TLS for the providers that take it ([`DubboInvoker::tls`]).
    tls: Option<ClientTls>,
}

impl Default for DubboInvoker {
    fn default() -> Self {
        Self::new()
    }
}

impl DubboInvoker {
    /// Dubbo's defaults: heartbeat 60 s, payload 8 MiB, connect timeout 3 s.
    pub fn new() -> Self {
        Self::with_config(ExchangeConfig::default())
    }

    /// An invoker whose connections use `config`.
    pub fn with_config(config: ExchangeConfig) -> Self {
        DubboInvoker {
            pool: Arc::new(Pool::new(config.clone())),
            config,
            generic: false,
            application: None,
            heartbeat_set: false,
            tls: None,
        }
    }

    /// TLS settings: a provider whose URL says `ssl-enabled=true` (Dubbo's
    /// `<dubbo:protocol ssl-enabled="true">`) is dialled over TLS with them, the others in
    /// cleartext, or every provider over TLS with [`ClientTls::every_provider`]. Without
    /// them, calls to a provider that says `ssl-enabled=true` fail at once with a
    /// [`ErrorKind::BadConfig`] error naming it. Set it before the first call: connections
    /// already made keep what they were made with.
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The consumer's application, sent with every call as the `remote.application`
    /// attachment, as a Java consumer sends it (providers read it as
    /// `RpcContext.getRemoteApplicationName()`, for access logs and per-consumer decisions); a
    /// call's own `remote.application` attachment wins. Unset: none is sent.
    pub fn application(mut self, name: &str) -> Self {
        self.application = (!name.is_empty()).then(|| Arc::from(name));
        self
    }

    /// Sets the heartbeat interval of new connections (Dubbo's `heartbeat`; zero: none).
    /// Unset, a connection uses the provider's `heartbeat` parameter, else 60 s.
    pub fn heartbeat(self, every: Duration) -> Self {
        let config = ExchangeConfig {
            heartbeat: every,
            ..self.config.clone()
        };
        Self {
            generic: self.generic,
            heartbeat_set: true,
            tls: self.tls.clone(),
            application: self.application.clone(),
            ..Self::with_config(config)
        }
    }

    /// Sets the payload limit of both directions (Dubbo's `payload`, default 8 MiB).
    pub fn payload(self, bytes: usize) -> Self {
        let config = ExchangeConfig {
            payload: bytes,
            ..self.config.clone()
        };
        Self {
            generic: self.generic,
            heartbeat_set: self.heartbeat_set,
            tls: self.tls.clone(),
            application: self.application.clone(),
            ..Self::with_config(config)
        }
    }

    /// Sends every call as a generic `$invoke` (Dubbo's `generic=true` reference).
    pub fn generic(mut self, generic: bool) -> Self {
        self.generic = generic;
        self
    }

    /// The consumer's own settings, for reading the provider's parameters.
    fn consumer(&self) -> Consumer {
        Consumer::new(&self.config, self.heartbeat_set)
    }

    /// The connection pool (to [`Pool::retain`] addresses, or count connections).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// One attempt, like [`Invoker::invoke`], that also returns the attachments the provider
    /// sent back with the result (the cluster layer passes only the value on).
    pub async fn call(
        &self,
        target: &Instance,
        inv: &Invocation,
        timeout: Duration,
    ) -> Result<Reply> {
        self.call_on(None, target, inv, timeout).await
    }

    /// [`DubboInvoker::call`] on an endpoint's own connections and with its token and
    /// parameters read once (`None`: the pool's, both read from `target`).
    async fn call_on(
        &self,
        endpoint: Option<&DubboEndpoint>,
        target: &Instance,
        inv: &Invocation,
        timeout: Duration,
    ) -> Result<Reply> {
        let started = Instant::now();
        // An endpoint's values, read when it was made; a direct call's, read now.
        let current = endpoint.map(|e| e.params.current(target));
        let shared = match &current {
            Some(c) => Cow::Borrowed(&c.shared),
            None => Cow::Owned(SharedParams::of(target)),
        };
        shared.check_hessian2(target.address())?;
        let tls = choose(
            self.tls.as_ref(),
            shared.ssl_enabled,
            target.address(),
            "dubbo",
        )?;
        let form = form_of(inv, self.generic);
        // The provider's registered method names: a method it does not have fails here, not
        // on the wire (a generic call's real method name is `inv.method` too).
        let (params, names) = match current {
            Some(current) => {
                check_method(target.address(), current.methods.as_deref(), &inv.method)?;
                (current.params, current.methods)
            }
            None => {
                check_method_of(target, &inv.method)?;
                (ProviderParams::for_call(target, &self.consumer()), None)
            }
        };
        let token = to_add(endpoint.map(|e| &e.token), target, &inv.attachments, false);
        let body = encode_request(
            target,
            inv,
            timeout,
            form,
            token.as_ref(),
            self.application.as_deref(),
        )?;
        if let Some(limit) = params.payload.filter(|&limit| body.len() > limit) {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                format!(
                    "{}: the request to {} is {} bytes, over the payload limit of {limit}",
                    inv.method,
                    target.address(),
                    body.len()
                ),
            ));
        }
        let ProviderParams {
            connections,
            heartbeat,
            ..
        } = params;
        let connect_timeout = self.config.connect_timeout.min(timeout);
        let conn = match endpoint {
            Some(e) => {
                self.pool
                    .get_on(
                        &e.entry,
                        target.address(),
                        connections,
                        connect_timeout,
                        heartbeat,
                        tls,
                    )
                    .await?
            }
            None => {
                let entry = self.pool.entry(target.address());
                self.pool
                    .get_on(
                        &entry,
                        target.address(),
                        connections,
                        connect_timeout,
                        heartbeat,
                        tls,
                    )
                    .await?
            }
        };
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(Error::timeout(format!(
                "{}: no time left for {} after connecting ({} ms)",
                inv.method,
                target.address(),
                timeout.as_millis()
            )));
        }
        trace!(address = target.address(), method = %inv.method, ?form, "dubbo request");
        let resp = conn.request(HESSIAN2, Bytes::from(body), left).await?;
        if resp.status == super::status::BAD_REQUEST && names.is_none() && endpoint.is_none() {
            // A direct call: the names only for the error's message.
            let names = target.param("methods").and_then(MethodNames::parse);
            return decode_call(target, &resp, inv, form, names.as_ref());
        }
        decode_call(target, &resp, inv, form, names.as_deref())
    }
}

impl Invoker for DubboInvoker {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            self.call(target, invocation, timeout)
                .await
                .map(|reply| reply.value)
        })
    }

    /// Connecting (within `connect_timeout`), queueing and the reply are bounded by the
    /// call's timeout.
    fn bounds_timeout(&self) -> bool {
        true
    }
}

/// The dubbo:// client of one endpoint, made by [`DubboInvoker`] as a [`MakeEndpoint`]: it
/// owns the connections to its address (shared with the other endpoints there, such as
/// another group on the same port), which close when the last endpoint at the address is
/// dropped and its calls have ended. It reads the provider's `token`, `connections`,
/// `heartbeat`, `payload`, `methods`, `prefer.serialization`, `serialization` and
/// `ssl-enabled` once, when it is made: a call with that instance compares a pointer and
/// reads no parameter string. When the directory hands it the
/// endpoint's new instance (an override, a re-registration: `Invoker::instance_changed`), it
/// reads again what changed, and calls with that one compare a pointer again; a call with
/// another instance compares its values with those kept and parses only what differs.
pub struct DubboEndpoint {
    invoker: DubboInvoker,
    entry: Arc<Entry>,
    token: EndpointToken,
    params: EndpointParams,
}

impl std::fmt::Debug for DubboEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DubboEndpoint").finish_non_exhaustive()
    }
}

impl MakeEndpoint for DubboInvoker {
    fn make(&self, instance: &Arc<Instance>) -> Arc<dyn Invoker> {
        Arc::new(DubboEndpoint {
            invoker: self.clone(),
            entry: self.pool.endpoint_entry(instance.address()),
            token: EndpointToken::new(instance),
            params: EndpointParams::new(instance, self.consumer()),
        })
    }
}

impl Invoker for DubboEndpoint {
    fn invoke<'a>(
        &'a self,
        target: &'a Instance,
        invocation: &'a Invocation,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            self.invoker
                .call_on(Some(self), target, invocation, timeout)
                .await
                .map(|reply| reply.value)
        })
    }

    fn instance_changed(&self, instance: &Arc<Instance>) {
        self.params.adopt(instance);
        self.token.adopt(instance);
    }

    fn bounds_timeout(&self) -> bool {
        true
    }
}
