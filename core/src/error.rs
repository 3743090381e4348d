//! The one error type of Switchman.
//!
//! Every failure carries an [`ErrorKind`] that callers can ask about, and a retryability flag set
//! where the error is born (the transport knows whether a request reached the provider; the
//! cluster layer must not guess later). Only retryable failures are retried, degraded to a mock
//! or counted against an instance; a [`ErrorKind::Business`] error is the provider's answer and
//! goes straight back to the caller.

use std::fmt;

/// A `Result` whose error is Switchman's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, in terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request could not be delivered or the connection broke (refused, reset, 502/503/504).
    /// Transient: retried by default.
    Transport,
    /// The attempt or the whole call ran out of time. Transient: retried by default.
    Timeout,
    /// No instance is available for the service (empty directory, every instance excluded).
    NoProvider,
    /// Routing rules left no instance for this call (a `false` then-part, a forced empty result).
    Forbidden,
    /// The provider answered with an application error. Never retried.
    Business,
    /// Configuration or input is invalid (a bad URL, rule, weight, or option).
    BadConfig,
    /// A consumer-side limit refused the call (`actives`, retry budget, queue full).
    LimitExceeded,
    /// The instance speaks a protocol Switchman cannot call.
    Unsupported,
}

impl ErrorKind {
    /// Whether errors of this kind are retried unless the origin says otherwise.
    pub fn default_retryable(self) -> bool {
        matches!(self, ErrorKind::Transport | ErrorKind::Timeout)
    }

    /// The kind's short name, as printed in messages and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Transport => "transport",
            ErrorKind::Timeout => "timeout",
            ErrorKind::NoProvider => "no provider",
            ErrorKind::Forbidden => "forbidden by route",
            ErrorKind::Business => "business",
            ErrorKind::BadConfig => "bad config",
            ErrorKind::LimitExceeded => "limit exceeded",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Switchman's error: a kind, a message, whether it may be retried, and optionally the
/// underlying cause and the addresses tried by the call.
pub struct Error {
    kind: ErrorKind,
    retryable: bool,
    strike: bool,
    message: String,
    source: Option<Source>,
    tried: Vec<String>,
    unavailable: bool,
    leaving: bool,
}

/// The longest message an [`Error`] keeps, in bytes. Messages quote what providers send (a
/// Java exception with its stack trace, an HTTP body, a gRPC message: up to the payload limit,
/// megabytes) and are logged on every failure; longer text is cut at a character boundary and
/// ends with how much was cut.
pub const MAX_MESSAGE: usize = 4096;

fn bounded(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE {
        return message;
    }
    let mut cut = MAX_MESSAGE;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = message.len() - cut;
    message.truncate(cut);
    message.push_str(&format!("… ({more} more bytes)"));
    message
}

impl Error {
    /// A new error of `kind`, retryable as the kind's default says. A message over
    /// [`MAX_MESSAGE`] bytes is cut.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            retryable: kind.default_retryable(),
            strike: kind.default_retryable(),
            message: bounded(message.into()),
            source: None,
            tried: Vec::new(),
            unavailable: false,
            leaving: false,
        }
    }

    /// A transport error (retryable).
    pub fn transport(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transport, message)
    }

    /// A timeout (retryable).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }

    /// No provider is available.
    pub fn no_provider(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NoProvider, message)
    }

    /// The provider answered with an application error (never retried).
    pub fn business(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Business, message)
    }

    /// Invalid configuration or input.
    pub fn bad_config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadConfig, message)
    }

    /// Sets whether this error may be retried, overriding the kind's default. The origin of
    /// the error calls this when it knows better (for example a timeout after the request was
    /// fully sent to a non-idempotent method).
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Sets whether this failure counts against the instance for outlier ejection, overriding
    /// the default (transport and timeout errors count, every other kind does not). The origin
    /// sets `false` when the instance said "retry elsewhere" in an orderly way rather than
    /// failing: an HTTP 503 with `connection: close`, an HTTP/2 GOAWAY or `REFUSED_STREAM`
    /// (the instance is draining or shedding load; ejecting it would punish a graceful exit).
    pub fn with_outlier_strike(mut self, strike: bool) -> Self {
        self.strike = strike;
        self
    }

    /// Marks the error as "this endpoint could not take the call, and nothing ran": it is
    /// shutting down (a dubbo:// provider's readonly event), no connection to it could be
    /// made, or it refused the call before running anything because it does not export the
    /// service (a dubbo:// provider's "Not found exported service"). The
    /// cluster then calls another instance without it counting as an attempt, for every
    /// strategy, as Dubbo's `cluster.availablecheck` skips unavailable invokers.
    pub fn with_unavailable(mut self, unavailable: bool) -> Self {
        self.unavailable = unavailable;
        self
    }

    /// Whether the endpoint could not take the call and nothing ran
    /// ([`Error::with_unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        self.unavailable
    }

    /// Marks the error as "this endpoint announced that it is going away (a graceful
    /// shutdown: a dubbo:// provider's readonly event) and nothing was sent"; implies
    /// [`Error::with_unavailable`]. `broadcast` leaves such an endpoint out instead of failing
    /// the call: it is leaving the fleet, unlike an endpoint that cannot be reached.
    pub fn with_leaving(mut self) -> Self {
        self.leaving = true;
        self.unavailable = true;
        self
    }

    /// Whether the endpoint announced it is going away and nothing was sent
    /// ([`Error::with_leaving`]).
    pub fn is_leaving(&self) -> bool {
        self.leaving
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl Into<Source>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The same error with another message (bounded as [`Error::new`] bounds it): for a layer
    /// that knows more than the one that made the error.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = bounded(message.into());
        self
    }

    /// Records the addresses the call tried, in order.
    pub fn with_tried(mut self, tried: Vec<String>) -> Self {
        self.tried = tried;
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether a retry (on another instance) may succeed. Decided where the error is born.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// Whether this failure counts as a strike against the instance for outlier ejection
    /// (see [`Error::with_outlier_strike`]). A business error never does.
    pub fn counts_as_strike(&self) -> bool {
        self.strike && self.kind != ErrorKind::Business
    }

    /// Whether this is a timeout.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// Whether this is the provider's own application error.
    pub fn is_business(&self) -> bool {
        self.kind == ErrorKind::Business
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying cause as a `T`, when it is one: for a provider's Java exception,
    /// `e.cause::<switchman::JavaException>()` gives its class, message and cause chain, so a
    /// caller can `match` on the class.
    pub fn cause<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.source.as_ref()?.downcast_ref::<T>()
    }

    /// The addresses tried by the call that ended in this error, in order (empty when the
    /// error was not produced by a cluster strategy).
    pub fn tried(&self) -> &[String] {
        &self.tried
    }
}

/// The cause ([`Error::cause`]) of the error of a call whose signature the provider does not
/// have (a Java provider's status 40 "Fail to decode request" to a typed dubbo:// call): where
/// it went and what was sent, so that a layer that can read the provider's published service
/// definition (`switchman::Reference`, from the registry's metadata report) can say which
/// signatures it has instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureMismatch {
    /// The provider's address.
    pub address: String,
    /// The service called.
    pub service: crate::ServiceKey,
    /// The provider's application (its registered `application`), when it has one.
    pub application: Option<String>,
    /// The method called.
    pub method: String,
    /// The signature sent, as Java writes one: `add(long,long)`.
    pub sent: String,
    /// What the provider answered.
    pub answer: String,
}

impl SignatureMismatch {
    /// The error's message, given what the provider has instead (`it has add(int,int)`, or
    /// `its methods are add, count`).
    pub fn message(&self, has: &str) -> String {
        format!(
            "signature mismatch: the provider {} has no {}; {has} (status 40, it could not \
             decode the request: check the parameter types against the provider's interface): \
             {}",
            self.address, self.sent, self.answer
        )
    }
}

impl fmt::Display for SignatureMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the provider {} has no {}", self.address, self.sent)
    }
}

impl std::error::Error for SignatureMismatch {}

/// `{:?}` reads like the message (what `main` returning `Result<(), Error>` prints), with the
/// retryability and the cause; `{:#?}` shows the struct.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !f.alternate() {
            fmt::Display::fmt(self, f)?;
            let retry = if self.retryable {
                "retryable"
            } else {
                "not retryable"
            };
            write!(f, " [{retry}]")?;
            if let Some(s) = &self.source {
                write!(f, "\ncaused by: {s}")?;
            }
            return Ok(());
        }
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind)
            .field("retryable", &self.retryable)
            .field("strike", &self.strike)
            .field("message", &self.message);
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        if !self.tried.is_empty() {
            d.field("tried", &self.tried);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if !self.tried.is_empty() {
            write!(f, " (tried {})", self.tried.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_read_back_by_its_type() {
        let io = std::io::Error::other("disk");
        let e = Error::business("threw").with_source(io);
        assert_eq!(e.cause::<std::io::Error>().unwrap().to_string(), "disk");
        assert!(e.cause::<std::fmt::Error>().is_none(), "another type");
        assert!(Error::business("x").cause::<std::io::Error>().is_none());
    }

    #[test]
    fn a_provider_sized_message_is_cut_at_a_character_boundary() {
        let huge = "é".repeat(1 << 20); // 2 MiB, two bytes a character
        let e = Error::business(format!("10.0.0.1:20880 threw {huge}"));
        let m = e.message();
        assert!(m.len() <= MAX_MESSAGE + 40, "{}", m.len());
        assert!(m.starts_with("10.0.0.1:20880 threw éé"));
        let cut = "10.0.0.1:20880 threw ".len() + 2 * (1 << 20) - m.find('…').unwrap();
        assert!(
            m.ends_with(&format!("… ({cut} more bytes)")),
            "{}",
            &m[m.len() - 40..]
        );
        let short = Error::transport("refused");
        assert_eq!(short.message(), "refused");
    }

    #[test]
    fn retryability_follows_kind_unless_overridden() {
        assert!(Error::transport("reset").is_retryable());
        assert!(Error::timeout("slow").is_retryable());
        assert!(!Error::business("boom").is_retryable());
        assert!(!Error::no_provider("none").is_retryable());
        assert!(!Error::timeout("sent").with_retryable(false).is_retryable());
    }

    #[test]
    fn debug_reads_like_the_message_and_alternate_shows_the_struct() {
        let e = Error::timeout("10.0.0.1:20880 did not answer in 800 ms")
            .with_tried(vec!["10.0.0.1:20880".into()]);
        assert_eq!(
            format!("{e:?}"),
            "timeout: 10.0.0.1:20880 did not answer in 800 ms (tried 10.0.0.1:20880) [retryable]"
        );
        assert!(format!("{e:#?}").starts_with("Error {"), "{e:#?}");
    }

    #[test]
    fn outlier_strikes_default_to_transport_and_timeout() {
        assert!(Error::transport("reset").counts_as_strike());
        assert!(Error::timeout("slow").counts_as_strike());
        assert!(!Error::business("boom").counts_as_strike());
        assert!(
            !Error::business("boom")
                .with_outlier_strike(true)
                .counts_as_strike()
        );
        assert!(!Error::bad_config("x").counts_as_strike());
        let draining = Error::transport("503, connection: close").with_outlier_strike(false);
        assert!(!draining.counts_as_strike());
        assert!(draining.is_retryable(), "still retried elsewhere");
    }

    #[test]
    fn display_names_kind_and_tried_addresses() {
        let e = Error::transport("connection refused")
            .with_tried(vec!["10.0.0.1:80".into(), "10.0.0.2:80".into()]);
        assert_eq!(
            e.to_string(),
            "transport: connection refused (tried 10.0.0.1:80, 10.0.0.2:80)"
        );
    }
}
