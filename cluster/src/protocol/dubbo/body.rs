//! Request and response bodies of dubbo:// in Hessian2, as Java's `DubboCodec` writes and
//! `DecodeableRpcInvocation`/`DecodeableRpcResult` read them.
//!
//! Request: the Dubbo protocol version (`"2.0.2"`), the service path, the service version, the
//! method name, the parameter descriptor (JVM descriptors concatenated), each argument, then the
//! attachments as a map. A generic call (Dubbo's `GenericService.$invoke`) is the method
//! `$invoke` with three arguments: the real method name, its parameter type names (or null: the
//! provider then finds the method by name when it is not overloaded) and the arguments, with
//! POJOs as maps; the attachment `generic=true` tells the provider's `GenericFilter`.
//!
//! Response with status 20: a flag (0 exception, 1 value, 2 null; 3/4/5 the same followed by
//! an attachments map), then the value or the Throwable. Any other status: one string, the
//! provider's error message.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::Value as Json;
use switchman_core::java_types::{descriptor, erase_generics, full_name};
use switchman_core::{Error, ErrorKind, Instance, Invocation, Result, SignatureMismatch, Typed};
use switchman_hessian::{
    Decoder, Encoder, List, Map, Value, from_json, generic_from_json, java_exception, to_json,
};

use super::params::MethodNames;
use super::token::{TOKEN_KEY, Token};
use super::{Response, status};

/// The Dubbo protocol version Java 3.3 consumers send; 2.0.2 also asks the provider to send
/// its attachments back with the result.
pub(crate) const DUBBO_VERSION: &str = "2.0.2";
/// The descriptor of `$invoke(String, String[], Object[])`.
const GENERIC_DESC: &str = "Ljava/lang/String;[Ljava/lang/String;[Ljava/lang/Object;";

/// How one call is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// Method and descriptor from the invocation's parameter types.
    Typed,
    /// `$invoke(method, types, args)`.
    Generic,
}

/// Decides the form: generic when asked (`generic=true` attachment or the invoker's setting)
/// or when no parameter types were given for a call that has arguments.
pub(crate) fn form_of(inv: &Invocation, generic: bool) -> Form {
    let asked = generic || inv.attachment("generic").is_some_and(|g| g == "true");
    if asked || (inv.parameter_types.is_empty() && !inv.arguments.is_empty()) {
        Form::Generic
    } else {
        Form::Typed
    }
}

/// Attachment keys the invoker sets itself; the invocation's own values for them are not
/// sent (the consumer-side `retries` control would otherwise reach the provider too).
const RESERVED: &[&str] = &[
    "path",
    "interface",
    "version",
    "group",
    "timeout",
    "dubbo",
    "generic",
    "retries",
];

/// The attachment naming the consumer's application (Dubbo's `REMOTE_APPLICATION_KEY`).
pub(crate) const REMOTE_APPLICATION_KEY: &str = "remote.application";

/// The request body of `inv` to `target`; `token`: the provider's, to add to the attachments
/// (see [`super::token::to_add`]); `application`: the consumer's, sent as `remote.application`
/// as Java's consumer does (unless the call carries its own).
pub(crate) fn encode_request(
    target: &Instance,
    inv: &Invocation,
    timeout: Duration,
    form: Form,
    token: Option<&Token>,
    application: Option<&str>,
) -> Result<Vec<u8>> {
    let key = target.service();
    let path: &str = if target.path().is_empty() {
        &key.interface
    } else {
        target.path()
    };
    let mut e = Encoder::new();
    e.write_str(DUBBO_VERSION);
    e.write_str(path);
    e.write_str(&key.version);
    match form {
        Form::Typed => {
            if inv.parameter_types.len() != inv.arguments.len() {
                return Err(Error::bad_config(format!(
                    "{}: {} parameter types ({}) for {} arguments",
                    inv.method,
                    inv.parameter_types.len(),
                    inv.parameter_types.join(","),
                    inv.arguments.len()
                )));
            }
            let mut desc = String::new();
            let mut full = Vec::with_capacity(inv.parameter_types.len());
            for t in &inv.parameter_types {
                desc.push_str(&descriptor(t)?);
                full.push(full_name(t)?);
            }
            e.write_str(&inv.method);
            e.write_str(&desc);
            if let Some(typed) = &inv.typed {
                // A typed call's arguments, already Hessian2 (one stream with what precedes:
                // strings define no classes and take no reference numbers).
                let mut out = e.into_bytes();
                typed.0.write_args(&mut out)?;
                let mut rest = Encoder::new();
                write_attachments(
                    &mut rest,
                    target,
                    path,
                    inv,
                    timeout,
                    form,
                    token,
                    application,
                );
                out.extend_from_slice(rest.as_bytes());
                return Ok(out);
            }
            for (i, (arg, ty)) in inv.arguments.iter().zip(&full).enumerate() {
                let v = from_json(arg, Some(ty)).map_err(|err| {
                    Error::bad_config(format!("{} argument {} as {ty}: {err}", inv.method, i + 1))
                })?;
                e.write(&v);
            }
        }
        Form::Generic => {
            let mut full = Vec::with_capacity(inv.parameter_types.len());
            for t in &inv.parameter_types {
                descriptor(t)?;
                full.push(Value::String(full_name(t)?.into_owned()));
            }
            e.write_str("$invoke");
            e.write_str(GENERIC_DESC);
            e.write_str(&inv.method);
            if inv.parameter_types.is_empty() {
                e.write(&Value::Null);
            } else {
                e.write(&Value::List(List {
                    class: Some("[string".into()),
                    items: full,
                }));
            }
            let mut items = Vec::with_capacity(inv.arguments.len());
            for (i, arg) in inv.arguments.iter().enumerate() {
                items.push(generic_from_json(arg).map_err(|err| {
                    Error::bad_config(format!("{} argument {}: {err}", inv.method, i + 1))
                })?);
            }
            e.write(&Value::List(List {
                class: Some("[object".into()),
                items,
            }));
        }
    }
    write_attachments(&mut e, target, path, inv, timeout, form, token, application);
    Ok(e.into_bytes())
}

/// The request's attachments map: the invoker's own keys, then the call's.
#[allow(clippy::too_many_arguments)]
fn write_attachments(
    e: &mut Encoder,
    target: &Instance,
    path: &str,
    inv: &Invocation,
    timeout: Duration,
    form: Form,
    token: Option<&Token>,
    application: Option<&str>,
) {
    let key = target.service();
    let mut entries: Vec<(Value, Value)> = Vec::with_capacity(8 + inv.attachments.len());
    let mut put =
        |k: &str, v: &str| entries.push((Value::String(k.into()), Value::String(v.into())));
    put("path", path);
    put("interface", &key.interface);
    if !key.version.is_empty() {
        put("version", &key.version);
    }
    if !key.group.is_empty() {
        put("group", &key.group);
    }
    put("timeout", &timeout.as_millis().max(1).to_string());
    if form == Form::Generic {
        put("generic", "true");
    }
    if let Some(token) = token {
        put(TOKEN_KEY, token.as_str());
    }
    if let Some(app) = application
        && inv.attachment(REMOTE_APPLICATION_KEY).is_none()
    {
        put(REMOTE_APPLICATION_KEY, app);
    }
    for (k, v) in &inv.attachments {
        if !RESERVED.contains(&k.as_str()) {
            put(k, v);
        }
    }
    e.write(&Value::Map(Map {
        class: None,
        entries,
    }));
}

/// A decoded answer: the result and the attachments the provider sent back with it (flags
/// 3/4/5: Dubbo 2.0.2+ providers send their server-side attachments).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The result as JSON (`null` for void and null answers).
    pub value: Json,
    /// The provider's attachments, strings as they are, other values as their JSON text.
    pub attachments: Vec<(String, String)>,
}

/// Turns a response into the call's result or its error, classified once here; a typed
/// call's result is read by its [`Typed`] reader, not converted to JSON.
pub(crate) fn decode_response(
    target: &Instance,
    resp: &Response,
    typed: Option<&Typed>,
) -> Result<Reply> {
    decode_typed_reply(target.address(), resp.status, &resp.body, typed)
}

/// Turns the status and Hessian2 body of a dubbo:// response from the provider at `addr` into
/// the call's result, or its error classified as Java consumers classify it: a business
/// error for a thrown exception (with the [`JavaException`](switchman_hessian::JavaException)
/// as its cause), a retryable transport error for statuses 60 and 70, and so on. Decoding is
/// bounded by the Hessian decoder's default [`Limits`](switchman_hessian::Limits).
pub fn decode_reply(addr: &str, code: u8, body: &[u8]) -> Result<Reply> {
    decode_typed_reply(addr, code, body, None)
}

/// [`decode_response`] for the call `inv` sent in `form`: a provider's status 40 to a typed
/// call (it could not decode the request: a Java provider answers so when it has no method
/// with the descriptor sent) becomes a signature mismatch naming the signature sent
/// (`add(long,long)`) and the provider's methods (`names`: its registered `methods`, when it
/// has them).
pub(crate) fn decode_call(
    target: &Instance,
    resp: &Response,
    inv: &Invocation,
    form: Form,
    names: Option<&MethodNames>,
) -> Result<Reply> {
    if resp.status == status::BAD_REQUEST && form == Form::Typed {
        let message = status_message(&mut Decoder::new(&resp.body));
        if message.contains("Fail to decode request") {
            return Err(signature_mismatch(target, inv, names, message));
        }
    }
    decode_response(target, resp, inv.typed.as_ref())
}

/// The signature `inv` was sent with, as Java writes one: `add(long,long)`,
/// `sayHello(java.lang.String)` (short names expanded, generic arguments erased).
pub(crate) fn signature(inv: &Invocation) -> String {
    let types: Vec<String> = inv
        .parameter_types
        .iter()
        .map(|t| match full_name(t) {
            Ok(full) => erase_generics(&full).map_or_else(|_| full.to_string(), Cow::into_owned),
            Err(_) => t.trim().to_string(),
        })
        .collect();
    format!("{}({})", inv.method, types.join(","))
}

/// The error of a status 40 to a typed call: the provider found no method with the signature
/// sent. Not retryable (every provider of the same release answers the same).
/// Its cause, a [`SignatureMismatch`], lets a layer that reads the provider's published
/// definition name the signatures it has (`switchman::Reference` does).
fn signature_mismatch(
    target: &Instance,
    inv: &Invocation,
    names: Option<&MethodNames>,
    answer: String,
) -> Error {
    let has = match names {
        Some(names) => format!("its methods are {}", names.listed()),
        None => "it registered no `methods` to compare with".to_string(),
    };
    let cause = SignatureMismatch {
        address: target.address().to_string(),
        service: target.service().clone(),
        application: target.application().map(str::to_string),
        method: inv.method.to_string(),
        sent: signature(inv),
        answer,
    };
    Error::bad_config(cause.message(&has))
        .with_retryable(false)
        .with_source(cause)
}

/// The message of a non-OK status: one string.
fn status_message(d: &mut Decoder<'_>) -> String {
    match d.read() {
        Ok(Value::String(s)) => s,
        Ok(Value::Null) | Err(_) => String::new(),
        Ok(other) => to_json(&other).to_string(),
    }
}

fn decode_typed_reply(addr: &str, code: u8, body: &[u8], typed: Option<&Typed>) -> Result<Reply> {
    let mut d = Decoder::new(body);
    if code != status::OK {
        let message = status_message(&mut d);
        return Err(status_error(addr, code, &message));
    }
    let malformed = |what: String| {
        Error::new(
            ErrorKind::Transport,
            format!("{addr} sent a dubbo:// reply that does not decode: {what}"),
        )
        // The provider ran the call: sending it again could repeat its side effects.
        .with_retryable(false)
        .with_outlier_strike(true)
    };
    let flag = match d.read() {
        Ok(Value::Int(f)) => f,
        Ok(other) => return Err(malformed(format!("result flag {other:?}"))),
        Err(e) => return Err(malformed(e.to_string())),
    };
    // Where the attachments start, when the typed reader took the value.
    let mut rest = None;
    let value = match (flag, typed) {
        (1 | 4, Some(typed)) => {
            let at = d.position();
            let (took, token) = typed
                .0
                .read_result(&body[at..])
                .map_err(|e| malformed(e.to_string()))?;
            rest = Some(at + took);
            token
        }
        (2 | 5, Some(typed)) => {
            typed
                .0
                .read_result(&[])
                .map_err(|e| malformed(e.to_string()))?
                .1
        }
        (1 | 4, None) => d
            .read()
            .map(|v| to_json(&v))
            .map_err(|e| malformed(e.to_string()))?,
        (2 | 5, None) => Json::Null,
        (0 | 3, _) => {
            let thrown = d.read().map_err(|e| malformed(e.to_string()))?;
            // The Java exception itself is the error's cause (`Error::cause`): class, message
            // and cause chain, typed.
            return Err(match java_exception(&thrown) {
                Some(ex) => Error::business(format!("{addr} threw {ex}")).with_source(ex),
                None => Error::business(format!("{addr} threw {}", to_json(&thrown))),
            });
        }
        (other, _) => return Err(malformed(format!("unknown result flag {other}"))),
    };
    let mut attachments = Vec::new();
    if let Some(at) = rest {
        d = Decoder::new(body.get(at..).unwrap_or_default());
    }
    if flag >= 3 {
        match d.read() {
            Ok(Value::Map(m)) => {
                for (k, v) in m.entries {
                    let text = |v: &Value| match v {
                        Value::String(s) => s.clone(),
                        other => to_json(other).to_string(),
                    };
                    attachments.push((text(&k), text(&v)));
                }
            }
            Ok(Value::Null) => {}
            Ok(other) => return Err(malformed(format!("attachments {other:?}"))),
            Err(e) => return Err(malformed(format!("attachments: {e}"))),
        }
    }
    Ok(Reply { value, attachments })
}

/// The error of a non-OK status (Dubbo's `Response` status codes).
fn status_error(addr: &str, code: u8, message: &str) -> Error {
    let (kind, name, retryable) = match code {
        status::CLIENT_TIMEOUT => (ErrorKind::Timeout, "client timeout", true),
        status::SERVER_TIMEOUT => (ErrorKind::Timeout, "server timeout", true),
        status::BAD_REQUEST => (ErrorKind::BadConfig, "bad request", false),
        // Java's consumer turns every non-OK status but the timeouts into a RemotingException,
        // a network-type RpcException that failover retries and failsafe/failback/mock answer.
        // 70 is what a Java provider sends for a refusal before the method ran (no such
        // exported service, `executes`/`tps`/`actives` limits, a wrong token, access-key
        // auth); a business exception is an OK reply carrying the exception, never a status.
        status::SERVICE_NOT_FOUND => (ErrorKind::Transport, "service not found", true),
        status::SERVICE_ERROR => (ErrorKind::Transport, "service error", true),
        status::SERVER_THREADPOOL_EXHAUSTED_ERROR => {
            (ErrorKind::Transport, "server thread pool exhausted", true)
        }
        status::BAD_RESPONSE => (ErrorKind::Transport, "bad response", true),
        status::SERVER_ERROR => (ErrorKind::Transport, "server error", true),
        status::CLIENT_ERROR => (ErrorKind::Transport, "client error", true),
        _ => (ErrorKind::Transport, "unknown status", true),
    };
    // A Java provider that does not export the service (a group it does not export, or a
    // service it has unexported, as in its shutdown before it closes its port) refuses before
    // running anything, with status 70 and DubboProtocol's "Not found exported service: ...":
    // another instance can take the call.
    let unexported = code == status::SERVICE_ERROR && message.contains(NOT_EXPORTED);
    let text = if message.is_empty() {
        format!("{addr} answered status {code} ({name})")
    } else {
        format!("{addr} answered status {code} ({name}): {message}")
    };
    Error::new(kind, text)
        .with_retryable(retryable)
        .with_unavailable(unexported)
}

/// What Java's `DubboProtocol` says for a service it does not export.
const NOT_EXPORTED: &str = "Not found exported service: ";

#[cfg(test)]
mod tests {
    use super::super::token::{EndpointToken, to_add};
    use super::*;
    use crate::protocol::endpoint_params::SharedParams;
    use std::sync::Arc;
    use switchman_core::ServiceKey;

    #[test]
    fn descriptors_follow_the_jvm() {
        let d = |t| descriptor(t).unwrap();
        assert_eq!(d("int"), "I");
        assert_eq!(d("long"), "J");
        assert_eq!(d("boolean"), "Z");
        assert_eq!(d("java.lang.String"), "Ljava/lang/String;");
        assert_eq!(d("int[]"), "[I");
        assert_eq!(d("com.foo.User[][]"), "[[Lcom/foo/User;");
        assert_eq!(d("[Ljava.lang.String;"), "[Ljava/lang/String;");
        assert_eq!(d("[[J"), "[[J");
        assert_eq!(d("com.foo.Outer$Inner"), "Lcom/foo/Outer$Inner;");
        // Generic arguments are erased, as over Triple (they were refused here before).
        assert_eq!(d("java.util.List<java.lang.Long>"), "Ljava/util/List;");
        assert_eq!(
            d("java.util.Map<java.lang.String, java.util.List<java.lang.Long>>[]"),
            "[Ljava/util/Map;"
        );
        assert_eq!(
            switchman_core::java_types::class_name("java.util.List<java.lang.Long>[]").unwrap(),
            "[Ljava.util.List;"
        );
        for bad in [
            "java.util.List<Long",
            "java.util.List>Long<",
            "",
            "void",
            "java..String",
            "1abc",
            "a b",
            "[Q",
            "[Ljava.lang.String",
        ] {
            let e = descriptor(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig, "{bad:?}");
            assert!(e.message().contains("parameter type"), "{}", e.message());
        }
    }

    #[test]
    fn short_type_names_are_expanded_and_unknown_ones_refused() {
        let d = |t| descriptor(t).unwrap();
        assert_eq!(d("String"), "Ljava/lang/String;");
        assert_eq!(d("List<Long>"), "Ljava/util/List;");
        assert_eq!(d("Date[]"), "[Ljava/util/Date;");
        assert_eq!(d("BigDecimal"), "Ljava/math/BigDecimal;");
        let e = descriptor("User").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
        assert!(
            e.message().starts_with(
                "parameter type `User` is not a full Java class name: write it with its package, e.g. org.example.User"
            ),
            "{}",
            e.message()
        );
        // A typed call sends the full descriptor and converts the argument for the full type;
        // a generic call sends the full names.
        let inv = Invocation::new("count")
            .with_args(vec![serde_json::json!(["a", "b"])])
            .with_types(["List<String>"]);
        let body = encode_request(
            &target(),
            &inv,
            Duration::from_secs(1),
            Form::Typed,
            None,
            None,
        )
        .unwrap();
        let mut d = Decoder::new(&body);
        assert_eq!(strings(&mut d, 5)[3..], ["count", "Ljava/util/List;"]);
        assert!(matches!(d.read().unwrap(), Value::List(_)));
        let body = encode_request(
            &target(),
            &inv,
            Duration::from_secs(1),
            Form::Generic,
            None,
            None,
        )
        .unwrap();
        let mut d = Decoder::new(&body);
        strings(&mut d, 6);
        let Value::List(types) = d.read().unwrap() else {
            panic!("the types are a list")
        };
        assert_eq!(
            types.items,
            [Value::String("java.util.List<java.lang.String>".into())]
        );
        for form in [Form::Typed, Form::Generic] {
            let inv = Invocation::new("save")
                .with_args(vec![serde_json::json!({})])
                .with_types(["User"]);
            let e = encode_request(&target(), &inv, Duration::from_secs(1), form, None, None)
                .unwrap_err();
            assert!(e.message().contains("`User` is not a full Java class name"));
        }
    }

    #[test]
    fn status_40_to_a_typed_call_is_a_signature_mismatch() {
        let t = target();
        let inv = Invocation::new("add")
            .with_args(vec![1.into(), 2.into()])
            .with_types(["long", "Long"]);
        let why =
            "Fail to decode request due to: RpcInvocation [methodName=add, parameterTypes=null]";
        let names = MethodNames::parse("add,count,echo").unwrap();
        let e = decode_call(
            &t,
            &response(40, &[Value::String(why.into())]),
            &inv,
            Form::Typed,
            Some(&names),
        )
        .unwrap_err();
        assert_eq!((e.kind(), e.is_retryable()), (ErrorKind::BadConfig, false));
        assert!(
            e.message().starts_with(
                "signature mismatch: the provider 127.0.0.1:20880 has no add(long,java.lang.Long); its methods are add, count, echo"
            ),
            "{}",
            e.message()
        );
        assert!(e.message().ends_with(why), "{}", e.message());
        let e = decode_call(
            &t,
            &response(40, &[Value::String(why.into())]),
            &inv,
            Form::Typed,
            None,
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("has no add(long,java.lang.Long); it registered no `methods`"),
            "{}",
            e.message()
        );
        // Another status 40, or a generic call's, is the plain bad request.
        let e = decode_call(
            &t,
            &response(40, &[Value::String("why".into())]),
            &inv,
            Form::Typed,
            Some(&names),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "127.0.0.1:20880 answered status 40 (bad request): why"
        );
        let e = decode_call(
            &t,
            &response(40, &[Value::String(why.into())]),
            &inv,
            Form::Generic,
            Some(&names),
        )
        .unwrap_err();
        assert!(e.message().contains("(bad request)"), "{}", e.message());
        assert_eq!(
            signature(&Invocation::new("count").with_types(["java.util.List<String>", "int[]"])),
            "count(java.util.List,int[])"
        );
    }

    fn target() -> Instance {
        Instance::builder("127.0.0.1", 20880)
            .protocol(switchman_core::Protocol::Dubbo)
            .service(ServiceKey::with("com.foo.Greeter", "g1", "1.0.0"))
            .build()
    }

    fn strings(d: &mut Decoder<'_>, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| match d.read().unwrap() {
                Value::String(s) => s,
                other => panic!("expected a string, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_typed_request_has_dubbo_codecs_layout() {
        let inv = Invocation::new("add")
            .with_args(vec![2.into(), 3.into()])
            .with_types(["int", "int"])
            .with_attachment("dubbo.tag", "gray")
            .with_attachment("retries", "5");
        let body = encode_request(
            &target(),
            &inv,
            Duration::from_millis(800),
            Form::Typed,
            None,
            None,
        )
        .unwrap();
        let mut d = Decoder::new(&body);
        assert_eq!(
            strings(&mut d, 5),
            ["2.0.2", "com.foo.Greeter", "1.0.0", "add", "II"]
        );
        assert_eq!(d.read().unwrap(), Value::Int(2));
        assert_eq!(d.read().unwrap(), Value::Int(3));
        let Value::Map(att) = d.read().unwrap() else {
            panic!("attachments are a map")
        };
        let get = |k: &str| {
            att.entries.iter().find_map(|(key, v)| match (key, v) {
                (Value::String(key), Value::String(v)) if key == k => Some(v.clone()),
                _ => None,
            })
        };
        assert_eq!(get("path").as_deref(), Some("com.foo.Greeter"));
        assert_eq!(get("group").as_deref(), Some("g1"));
        assert_eq!(get("version").as_deref(), Some("1.0.0"));
        assert_eq!(get("timeout").as_deref(), Some("800"));
        assert_eq!(get("dubbo.tag").as_deref(), Some("gray"));
        assert_eq!(get("retries"), None, "consumer-side controls stay home");
        assert!(d.is_at_end());
    }

    /// The attachments map of a request body.
    fn attachments_of(body: &[u8]) -> Vec<(String, String)> {
        let mut d = Decoder::new(body);
        loop {
            match d.read().unwrap() {
                Value::Map(m) if d.is_at_end() => {
                    return m
                        .entries
                        .into_iter()
                        .map(|(k, v)| match (k, v) {
                            (Value::String(k), Value::String(v)) => (k, v),
                            other => panic!("a string attachment, got {other:?}"),
                        })
                        .collect();
                }
                _ => {}
            }
        }
    }

    #[test]
    fn the_providers_token_travels_in_the_attachments_unless_the_call_has_its_own() {
        let target = Arc::new(
            Instance::builder("127.0.0.1", 20880)
                .service(ServiceKey::with("com.foo.Greeter", "", ""))
                .param("token", "3f1d5c8e-2b7a-4c3e-9f1a-0d2b4c6e8a1f")
                .build(),
        );
        let endpoint = EndpointToken::new(&target);
        let tokens = |inv: &Invocation| {
            let token = to_add(Some(&endpoint), &target, &inv.attachments, false);
            let body = encode_request(
                &target,
                inv,
                Duration::from_secs(1),
                form_of(inv, false),
                token.as_ref(),
                None,
            )
            .unwrap();
            attachments_of(&body)
                .into_iter()
                .filter(|(k, _)| k == "token")
                .map(|(_, v)| v)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            tokens(&Invocation::new("ping")),
            ["3f1d5c8e-2b7a-4c3e-9f1a-0d2b4c6e8a1f"]
        );
        assert_eq!(
            tokens(&Invocation::new("add").with_args(vec![1.into()])),
            ["3f1d5c8e-2b7a-4c3e-9f1a-0d2b4c6e8a1f"],
            "generic calls too"
        );
        assert_eq!(
            tokens(&Invocation::new("ping").with_attachment("token", "mine")),
            ["mine"],
            "the call's own token is sent instead, once"
        );
        let none = Instance::builder("127.0.0.1", 20880).build();
        let body = encode_request(
            &none,
            &Invocation::new("ping"),
            Duration::from_secs(1),
            Form::Typed,
            to_add(None, &none, &[], false).as_ref(),
            None,
        )
        .unwrap();
        assert!(attachments_of(&body).iter().all(|(k, _)| k != "token"));
    }

    #[test]
    fn a_call_without_types_goes_generic_with_null_types() {
        let inv = Invocation::new("save").with_args(vec![serde_json::json!({"name": "Ann"})]);
        assert_eq!(form_of(&inv, false), Form::Generic);
        assert_eq!(form_of(&Invocation::new("ping"), false), Form::Typed);
        let body = encode_request(
            &target(),
            &inv,
            Duration::from_secs(1),
            Form::Generic,
            None,
            None,
        )
        .unwrap();
        let mut d = Decoder::new(&body);
        assert_eq!(
            strings(&mut d, 6),
            [
                "2.0.2",
                "com.foo.Greeter",
                "1.0.0",
                "$invoke",
                GENERIC_DESC,
                "save"
            ]
        );
        assert_eq!(d.read().unwrap(), Value::Null);
        let Value::List(args) = d.read().unwrap() else {
            panic!("arguments are a list")
        };
        assert_eq!(args.items.len(), 1);
        assert!(
            matches!(&args.items[0], Value::Map(_)),
            "POJOs travel as maps"
        );
    }

    #[test]
    fn arity_and_argument_errors_name_the_method() {
        let inv = Invocation::new("add")
            .with_args(vec![2.into()])
            .with_types(["int", "int"]);
        let e = encode_request(
            &target(),
            &inv,
            Duration::from_secs(1),
            Form::Typed,
            None,
            None,
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
        assert!(
            e.message().contains("add: 2 parameter types"),
            "{}",
            e.message()
        );
        let inv = Invocation::new("add")
            .with_args(vec!["x".into()])
            .with_types(["int"]);
        let e = encode_request(
            &target(),
            &inv,
            Duration::from_secs(1),
            Form::Typed,
            None,
            None,
        )
        .unwrap_err();
        assert!(
            e.message().starts_with("add argument 1 as int"),
            "{}",
            e.message()
        );
    }

    fn response(status: u8, values: &[Value]) -> Response {
        let mut e = Encoder::new();
        for v in values {
            e.write(v);
        }
        Response {
            status,
            serialization: super::super::HESSIAN2,
            body: e.into_bytes().into(),
        }
    }

    #[test]
    fn a_typed_call_sends_its_bytes_and_its_reader_takes_the_reply_value() {
        /// Sends `add(2, 3)`'s arguments as bytes of its own and keeps the value's bytes.
        struct Body(std::sync::Mutex<Vec<u8>>);
        impl switchman_core::TypedBody for Body {
            fn write_args(&self, out: &mut Vec<u8>) -> Result<()> {
                out.extend_from_slice(&[0x92, 0x93]); // int 2, int 3
                Ok(())
            }
            fn each_arg(&self) -> Result<Vec<Vec<u8>>> {
                Ok(vec![vec![0x92], vec![0x93]])
            }
            fn read_result(&self, bytes: &[u8]) -> Result<(usize, Json)> {
                // One compact int.
                *self.0.lock().unwrap() = bytes[..1].to_vec();
                Ok((1, serde_json::json!("token")))
            }
        }
        let t = target();
        let body = std::sync::Arc::new(Body(std::sync::Mutex::new(Vec::new())));
        let inv = Invocation::new("add")
            // Its JSON arguments are not what goes out.
            .with_args(vec![serde_json::json!("x"), serde_json::json!("y")])
            .with_types(["int", "int"])
            .with_typed(body.clone());
        let bytes =
            encode_request(&t, &inv, Duration::from_secs(1), Form::Typed, None, None).unwrap();
        let mut d = Decoder::new(&bytes);
        assert_eq!(
            strings(&mut d, 5)[3..],
            ["add".to_string(), "II".to_string()]
        );
        assert_eq!(
            (d.read().unwrap(), d.read().unwrap()),
            (Value::Int(2), Value::Int(3))
        );
        assert!(
            matches!(d.read().unwrap(), Value::Map(_)),
            "then the attachments"
        );
        assert!(d.is_at_end());
        // The reply's value goes to the reader; the attachments after it are still read.
        let typed = inv.typed.clone();
        let reply = response(
            20,
            &[
                Value::Int(4),
                Value::Int(5),
                Value::Map(Map {
                    class: None,
                    entries: vec![(Value::String("trace".into()), Value::String("t1".into()))],
                }),
            ],
        );
        let r = decode_response(&t, &reply, typed.as_ref()).unwrap();
        assert_eq!(r.value, serde_json::json!("token"));
        assert_eq!(*body.0.lock().unwrap(), [0x95]);
        assert_eq!(r.attachments, [("trace".into(), "t1".into())]);
    }

    #[test]
    fn responses_map_to_values_and_error_kinds() {
        let t = target();
        let ok = decode_response(&t, &response(20, &[Value::Int(1), Value::Int(5)]), None).unwrap();
        assert_eq!(ok.value, serde_json::json!(5));
        assert!(ok.attachments.is_empty());
        let with_att = response(
            20,
            &[
                Value::Int(4),
                Value::String("x".into()),
                Value::Map(Map {
                    class: None,
                    entries: vec![
                        (Value::String("trace".into()), Value::String("t1".into())),
                        (Value::String("n".into()), Value::Int(3)),
                    ],
                }),
            ],
        );
        let reply = decode_response(&t, &with_att, None).unwrap();
        assert_eq!(reply.value, serde_json::json!("x"));
        assert_eq!(
            reply.attachments,
            [("trace".into(), "t1".into()), ("n".into(), "3".into())]
        );
        let null = decode_response(&t, &response(20, &[Value::Int(5), Value::Null]), None).unwrap();
        assert_eq!(null.value, Json::Null);
        assert_eq!(
            decode_response(&t, &response(20, &[Value::Int(2)]), None)
                .unwrap()
                .value,
            Json::Null
        );
        let cases = [
            (30, ErrorKind::Timeout, true),
            (31, ErrorKind::Timeout, true),
            (40, ErrorKind::BadConfig, false),
            (60, ErrorKind::Transport, true),
            (70, ErrorKind::Transport, true),
            (80, ErrorKind::Transport, true),
            (100, ErrorKind::Transport, true),
        ];
        for (code, kind, retryable) in cases {
            let e = decode_response(&t, &response(code, &[Value::String("why".into())]), None)
                .unwrap_err();
            assert_eq!(
                (e.kind(), e.is_retryable()),
                (kind, retryable),
                "status {code}"
            );
            assert!(e.message().ends_with(": why"), "{}", e.message());
        }
        // Only the refusal of a service the provider does not export lets another instance
        // take the call without a retry; other refusals (`executes`, a token) are retries.
        let unexported = "org.apache.dubbo.remoting.RemotingException: Not found exported \
            service: g/demo.Greeter:20880 in [], may be version or group mismatch";
        let executes = "org.apache.dubbo.rpc.RpcException: Failed to invoke method slow in \
            provider ..., cause: The service using threads greater than <dubbo:service \
            executes=\"1\" /> limited.";
        for (code, message, unavailable) in [
            (70, unexported, true),
            (70, executes, false),
            (80, unexported, false),
        ] {
            let e = decode_response(&t, &response(code, &[Value::String(message.into())]), None)
                .unwrap_err();
            assert_eq!(
                (e.is_unavailable(), e.is_retryable(), e.is_leaving()),
                (unavailable, true, false),
                "status {code}: {message}"
            );
        }
        let e = decode_response(&t, &response(20, &[Value::Int(1)]), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport);
        assert!(
            !e.is_retryable(),
            "a reply that does not decode is not retried"
        );
        assert!(
            e.message().starts_with("127.0.0.1:20880 sent"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn serialization_is_checked_against_the_provider() {
        let with = |prefer: &str| {
            Instance::builder("127.0.0.1", 20880)
                .param("prefer.serialization", prefer)
                .build()
        };
        let check_serialization = |t: &Instance| SharedParams::of(t).check_hessian2(t.address());
        assert!(check_serialization(&target()).is_ok());
        assert!(check_serialization(&with("fastjson2,hessian2")).is_ok());
        let e = check_serialization(&with("fastjson2,protobuf")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(
            e.message(),
            "127.0.0.1:20880 accepts serialization fastjson2,protobuf over dubbo://; Switchman speaks hessian2 only"
        );
    }

    /// The consumer's application goes as `remote.application`, once; a call's own wins.
    #[test]
    fn the_consumers_application_is_sent_as_remote_application() {
        let sent = |inv: &Invocation, app: Option<&str>| {
            let body = encode_request(
                &target(),
                inv,
                Duration::from_secs(1),
                Form::Generic,
                None,
                app,
            )
            .unwrap();
            attachments_of(&body)
                .into_iter()
                .filter(|(k, _)| k == REMOTE_APPLICATION_KEY)
                .map(|(_, v)| v)
                .collect::<Vec<_>>()
        };
        let plain = Invocation::new("m");
        assert_eq!(sent(&plain, Some("shop")), ["shop"]);
        assert!(sent(&plain, None).is_empty());
        let own = Invocation::new("m").with_attachment(REMOTE_APPLICATION_KEY, "mine");
        assert_eq!(sent(&own, Some("shop")), ["mine"]);
    }
}
