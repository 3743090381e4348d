//! The provider's `token` (Dubbo's token authorization), sent with every dubbo:// and Triple
//! call as Java consumers send it.
//!
//! A Java provider exported with `token=true` registers a random UUID as its `token` parameter
//! (`token=<fixed>`: that string), in its interface-level URL and in its application-level
//! metadata alike; its `TokenFilter` (dubbo://) and `TokenHeaderFilter` (Triple) refuse every
//! call whose `token` attachment differs ("Invalid token! Forbid invoke remote service ...").
//! Java's `DubboInvoker` and `TripleInvoker` put the URL's `token` into the attachments of
//! every call (`AbstractInvoker`'s invoker attachments, added *if absent*: a `token` the
//! caller attached itself wins); over dubbo:// it travels in the attachments map, over Triple
//! as the `token` header.
//!
//! Here the value is read from the instance's parameters once per endpoint (and again only
//! when the directory hands the endpoint an instance whose `token` changed, such as a provider
//! restarted on the same port with a new UUID). A value that cannot travel as a header
//! (longer than [`MAX_TOKEN_BYTES`], or not printable ASCII) is logged and not sent: the
//! provider then refuses the call as it decides. The value is a credential: it is never
//! logged, and `Debug` hides it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use switchman_core::Instance;
use tracing::{debug, warn};

use crate::protocol::endpoint_params::{Kept, ReadOnce};

/// The parameter and attachment name.
pub(crate) const TOKEN_KEY: &str = "token";

/// The longest token sent (Java's own check allows 200 characters for a configured token).
pub(crate) const MAX_TOKEN_BYTES: usize = 256;

/// A provider token that may be sent: 1 to [`MAX_TOKEN_BYTES`] bytes of printable ASCII
/// (spaces only inside), so it is a valid HTTP/2 header value as it is.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(Arc<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// The value to send.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// `raw` as a token; `Err` says why it cannot be sent. The empty value is no token (Java
    /// sends none either).
    fn parse(raw: &str) -> Result<Option<Token>, &'static str> {
        if raw.is_empty() {
            return Ok(None);
        }
        if raw.len() > MAX_TOKEN_BYTES {
            return Err("longer than 256 bytes");
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err("not printable ASCII");
        }
        if raw.starts_with(' ') || raw.ends_with(' ') {
            return Err("starts or ends with a space");
        }
        Ok(Some(Token(raw.into())))
    }
}

/// `target`'s token, `raw` its `token` parameter; an invalid one is logged (at `warn` when
/// `loud`, else `debug`) and `None`.
fn read(target: &Instance, raw: Option<&str>, loud: bool) -> Option<Token> {
    match Token::parse(raw?) {
        Ok(t) => t,
        Err(why) => {
            let (address, len) = (target.address(), raw.map_or(0, str::len));
            if loud {
                warn!(
                    address,
                    len, why, "the provider's token cannot be sent; calls go without it"
                );
            } else {
                debug!(
                    address,
                    len, why, "the provider's token cannot be sent; calls go without it"
                );
            }
            None
        }
    }
}

/// What one endpoint's client knows of its provider's token.
#[derive(Clone)]
struct Known {
    /// The `token` parameter it was read from (`None`: absent).
    raw: Option<Box<str>>,
    token: Option<Token>,
}

impl ReadOnce for Known {
    type Context = ();

    fn changed(&self, target: &Instance, _: &(), loud: bool) -> Option<Self> {
        let raw = target.param(TOKEN_KEY);
        (raw != self.raw.as_deref()).then(|| Known {
            raw: raw.map(Into::into),
            token: read(target, raw, loud),
        })
    }
}

/// An endpoint's provider token, read when the endpoint's client is made (see [`Kept`]: a
/// call with the endpoint's current instance compares a pointer, the `token` parameter is
/// read again when it changed).
pub(crate) struct EndpointToken {
    kept: Kept<Known>,
    /// Whether a caller's own `token` attachment replacing the provider's was logged at `warn`
    /// (once per endpoint; later ones at `debug`).
    override_logged: AtomicBool,
}

impl fmt::Debug for EndpointToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kept.peek(|k| {
            f.debug_struct("EndpointToken")
                .field("token", &k.token)
                .finish_non_exhaustive()
        })
    }
}

impl EndpointToken {
    /// Reads `instance`'s token.
    pub(crate) fn new(instance: &Arc<Instance>) -> Self {
        let raw = instance.param(TOKEN_KEY);
        let known = Known {
            raw: raw.map(Into::into),
            token: read(instance, raw, true),
        };
        EndpointToken {
            kept: Kept::new(instance, known),
            override_logged: AtomicBool::new(false),
        }
    }

    /// The token of `target`, this endpoint's current instance.
    pub(crate) fn get(&self, target: &Instance) -> Option<Token> {
        self.kept.with(target, &(), |k| k.token.clone())
    }

    /// Takes `instance` as the endpoint's current one ([`Kept::adopt`]).
    pub(crate) fn adopt(&self, instance: &Arc<Instance>) {
        self.kept.adopt(instance, &());
    }
}

/// The token to add to one call to `target`, or `None` when there is none to add: the
/// provider has none (or an invalid one), or `attachments` carry their own `token` (Java's
/// invoker adds the URL's only if absent), which is then sent instead and logged when it
/// differs. `ignore_case`: Triple, where attachment names become header names.
pub(crate) fn to_add(
    endpoint: Option<&EndpointToken>,
    target: &Instance,
    attachments: &[(String, String)],
    ignore_case: bool,
) -> Option<Token> {
    let token = match endpoint {
        Some(e) => e.get(target),
        None => read(target, target.param(TOKEN_KEY), false),
    }?;
    let own = attachments.iter().find(|(k, _)| {
        if ignore_case {
            k.eq_ignore_ascii_case(TOKEN_KEY)
        } else {
            k == TOKEN_KEY
        }
    });
    let Some((_, own)) = own else {
        return Some(token);
    };
    if own != token.as_str() {
        let first = endpoint.is_some_and(|e| !e.override_logged.swap(true, Ordering::Relaxed));
        let address = target.address();
        if first {
            warn!(
                address,
                "the call's own `token` attachment replaces the provider's registered token (as in Java Dubbo); the provider may refuse it"
            );
        } else {
            debug!(
                address,
                "the call's own `token` attachment replaces the provider's registered token"
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_token(token: Option<&str>) -> Arc<Instance> {
        let mut b = Instance::builder("127.0.0.1", 20880).param("weight", "100");
        if let Some(t) = token {
            b = b.param(TOKEN_KEY, t);
        }
        Arc::new(b.build())
    }

    fn own(v: &str) -> Vec<(String, String)> {
        vec![("trace".into(), "t1".into()), (TOKEN_KEY.into(), v.into())]
    }

    #[test]
    fn valid_tokens_are_bounded_printable_ascii() {
        let uuid = "3f1d5c8e-2b7a-4c3e-9f1a-0d2b4c6e8a1f";
        assert_eq!(Token::parse(uuid).unwrap().unwrap().as_str(), uuid);
        assert_eq!(Token::parse("a b").unwrap().unwrap().as_str(), "a b");
        let longest = "x".repeat(MAX_TOKEN_BYTES);
        assert!(Token::parse(&longest).unwrap().is_some());
        assert_eq!(Token::parse("").unwrap(), None, "empty: no token");
        for bad in [
            "x".repeat(MAX_TOKEN_BYTES + 1),
            "a\nb".into(),
            "a\rb".into(),
            "tab\t".into(),
            "nul\0".into(),
            "é".into(),
            " lead".into(),
            "trail ".into(),
            "\u{7f}".into(),
        ] {
            assert!(Token::parse(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            format!("{:?}", Token::parse(uuid).unwrap()),
            "Some(Token(***))"
        );
    }

    #[test]
    fn the_provider_token_is_added_unless_the_call_has_its_own() {
        let t = with_token(Some("s3cret"));
        let e = EndpointToken::new(&t);
        for endpoint in [Some(&e), None] {
            let got = to_add(endpoint, &t, &[], false);
            assert_eq!(got.as_ref().map(Token::as_str), Some("s3cret"));
            // The caller's own wins, as Java's `addObjectAttachmentsIfAbsent` lets it.
            assert_eq!(to_add(endpoint, &t, &own("other"), false), None);
            assert_eq!(to_add(endpoint, &t, &own("s3cret"), false), None);
            // dubbo:// attachment names are case-sensitive; Triple's become header names.
            let upper = vec![("Token".to_string(), "other".to_string())];
            assert!(to_add(endpoint, &t, &upper, false).is_some());
            assert_eq!(to_add(endpoint, &t, &upper, true), None);
        }
        let none = with_token(None);
        assert_eq!(
            to_add(Some(&EndpointToken::new(&none)), &none, &[], false),
            None
        );
        assert_eq!(to_add(None, &none, &[], true), None);
        let bad = with_token(Some("bad\nvalue"));
        assert_eq!(
            to_add(Some(&EndpointToken::new(&bad)), &bad, &[], true),
            None
        );
        assert_eq!(to_add(None, &bad, &[], true), None);
    }

    #[test]
    fn an_endpoint_reads_its_token_again_only_when_it_changed() {
        let first = with_token(Some("uuid-1"));
        let e = EndpointToken::new(&first);
        let get = |i: &Instance| e.get(i).map(|t| t.as_str().to_string());
        assert_eq!(get(&first).as_deref(), Some("uuid-1"));
        // Another instance of the endpoint with the same token (an override changed weight).
        let same = with_token(Some("uuid-1"));
        assert_eq!(get(&same).as_deref(), Some("uuid-1"));
        // The provider restarted on the same port with a new random token.
        let restarted = with_token(Some("uuid-2"));
        assert_eq!(get(&restarted).as_deref(), Some("uuid-2"));
        assert_eq!(get(&restarted).as_deref(), Some("uuid-2"));
        // The first instance is no longer trusted by address: its own value is read.
        assert_eq!(get(&first).as_deref(), Some("uuid-1"));
        assert_eq!(get(&with_token(None)), None);
        assert_eq!(get(&with_token(Some("bad\u{1}"))), None);
        assert_eq!(get(&with_token(Some("uuid-3"))).as_deref(), Some("uuid-3"));
        assert!(!format!("{e:?}").contains("uuid"), "{e:?}");
    }
}
