//! Payload codecs: how an [`Invocation`]'s JSON arguments become one request message, and how
//! the reply message becomes a JSON value.
//!
//! | codec | `content-type` | request message | reply value |
//! |---|---|---|---|
//! | [`RawCodec`] | `application/grpc` | no argument: empty; one JSON string: its UTF-8 bytes; one `{"base64": "..."}`: the decoded bytes | a JSON string when the bytes are UTF-8, else `{"base64": "..."}` |
//! | [`JsonCodec`] | `application/grpc+json` | no argument: `null`; one argument: that value; several: a JSON array | the message parsed as JSON (empty: `null`) |
//! | `ProstCodec<Req, Resp>` (feature `prost`) | `application/grpc+proto` | the one argument deserialized into `Req` (serde), protobuf-encoded | `Resp` decoded, serialized to JSON (serde) |
//! | [`WrapperCodec`](super::wrapper::WrapperCodec) | `application/grpc+proto` | Java Dubbo's `TripleRequestWrapper`: each argument Hessian2-encoded for its Java type (typed), or `$invoke` (generic) | `TripleResponseWrapper`'s value as JSON; a Java exception as a business error |
//!
//! Your own codec is a type implementing [`MessageCodec`].

#[cfg(feature = "prost")]
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;
use switchman_core::{Error, Invocation, Result};

pub use super::message_codec::{MessageCodec, ReplyContext};

fn input_error(codec: &str, inv: &Invocation, what: &str) -> Error {
    Error::bad_config(format!("{codec} payload of {}: {what}", inv.method))
}

/// Bytes in, bytes out: the message is exactly the bytes the caller gives (see the module docs
/// for the JSON convention). What the Python and Go Dubbo samples speak without an IDL.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl RawCodec {
    /// The bytes an argument stands for: a string's UTF-8 bytes or `{"base64": "..."}` decoded.
    pub fn argument_bytes(value: &Value) -> Option<Vec<u8>> {
        match value {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Object(o) if o.len() == 1 => {
                let b64 = o.get("base64")?.as_str()?;
                base64::engine::general_purpose::STANDARD.decode(b64).ok()
            }
            _ => None,
        }
    }

    /// The JSON form of reply bytes: a string when UTF-8, else `{"base64": "..."}`.
    pub fn reply_value(message: &[u8]) -> Value {
        match std::str::from_utf8(message) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => serde_json::json!({
                "base64": base64::engine::general_purpose::STANDARD.encode(message)
            }),
        }
    }
}

impl MessageCodec for RawCodec {
    fn content_type(&self) -> &'static str {
        "application/grpc"
    }

    fn encode(&self, inv: &Invocation) -> Result<Bytes> {
        match inv.arguments.as_slice() {
            [] => Ok(Bytes::new()),
            [one] => RawCodec::argument_bytes(one)
                .map(Bytes::from)
                .ok_or_else(|| {
                    input_error(
                        "raw",
                        inv,
                        "the argument must be a string or {\"base64\": \"...\"}",
                    )
                }),
            more => Err(input_error(
                "raw",
                inv,
                &format!("takes at most one argument, got {}", more.len()),
            )),
        }
    }

    fn decode(&self, _inv: &Invocation, message: Bytes) -> Result<Value> {
        Ok(RawCodec::reply_value(&message))
    }
}

/// JSON messages (`application/grpc+json`), as Dubbo 3's Triple JSON serialization sends.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonCodec;

impl MessageCodec for JsonCodec {
    fn content_type(&self) -> &'static str {
        "application/grpc+json"
    }

    fn encode(&self, inv: &Invocation) -> Result<Bytes> {
        let bytes = match inv.arguments.as_slice() {
            [] => serde_json::to_vec(&Value::Null),
            [one] => serde_json::to_vec(one),
            all => serde_json::to_vec(all),
        };
        bytes
            .map(Bytes::from)
            .map_err(|e| input_error("json", inv, &e.to_string()))
    }

    fn decode(&self, inv: &Invocation, message: Bytes) -> Result<Value> {
        if message.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&message)
            .map_err(|e| Error::business(format!("the reply to {} is not JSON: {e}", inv.method)))
    }
}

/// Protobuf messages through prost types that also implement serde (feature `prost`): the one
/// JSON argument is deserialized into `Req`, the reply decoded as `Resp` and serialized back
/// to JSON. For prost types without serde, call [`super::TripleInvoker::unary`] with
/// `Message::encode_to_vec()` bytes instead.
#[cfg(feature = "prost")]
pub struct ProstCodec<Req, Resp> {
    _types: std::marker::PhantomData<fn(Req) -> Resp>,
}

#[cfg(feature = "prost")]
impl<Req, Resp> ProstCodec<Req, Resp> {
    /// The codec for `Req` → `Resp`.
    pub fn new() -> Self {
        ProstCodec {
            _types: std::marker::PhantomData,
        }
    }
}

#[cfg(feature = "prost")]
impl<Req, Resp> Default for ProstCodec<Req, Resp> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "prost")]
impl<Req, Resp> fmt::Debug for ProstCodec<Req, Resp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProstCodec")
            .field("request", &std::any::type_name::<Req>())
            .field("reply", &std::any::type_name::<Resp>())
            .finish()
    }
}

#[cfg(feature = "prost")]
impl<Req, Resp> MessageCodec for ProstCodec<Req, Resp>
where
    Req: prost::Message + serde::de::DeserializeOwned + 'static,
    Resp: prost::Message + Default + serde::Serialize + 'static,
{
    fn content_type(&self) -> &'static str {
        "application/grpc+proto"
    }

    fn encode(&self, inv: &Invocation) -> Result<Bytes> {
        let arg = match inv.arguments.as_slice() {
            [one] => one.clone(),
            other => {
                return Err(input_error(
                    "protobuf",
                    inv,
                    &format!("takes exactly one argument, got {}", other.len()),
                ));
            }
        };
        let req: Req = serde_json::from_value(arg)
            .map_err(|e| input_error("protobuf", inv, &e.to_string()))?;
        Ok(Bytes::from(req.encode_to_vec()))
    }

    fn decode(&self, inv: &Invocation, message: Bytes) -> Result<Value> {
        let resp = Resp::decode(message).map_err(|e| {
            Error::business(format!(
                "the reply to {} is not a valid {}: {e}",
                inv.method,
                std::any::type_name::<Resp>()
            ))
        })?;
        serde_json::to_value(&resp)
            .map_err(|e| Error::business(format!("the reply to {}: {e}", inv.method)))
    }
}

/// The built-in JSON-friendly codecs by name, for configuration and the CLI's `--payload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Payload {
    /// [`RawCodec`].
    Raw,
    /// [`JsonCodec`].
    #[default]
    Json,
    /// [`WrapperCodec`](super::wrapper::WrapperCodec): Java Dubbo's wrapper format, Hessian2
    /// inside.
    Wrapper,
}

impl Payload {
    /// The codec.
    pub fn codec(self) -> Arc<dyn MessageCodec> {
        match self {
            Payload::Raw => Arc::new(RawCodec),
            Payload::Json => Arc::new(JsonCodec),
            Payload::Wrapper => Arc::new(super::wrapper::WrapperCodec::new()),
        }
    }
}

impl FromStr for Payload {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "raw" | "bytes" => Ok(Payload::Raw),
            "json" => Ok(Payload::Json),
            "wrapper" | "hessian2" => Ok(Payload::Wrapper),
            other => Err(Error::bad_config(format!(
                "unknown payload codec {other:?} (expected raw, json or wrapper)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchman_core::ErrorKind;

    fn inv(args: Vec<Value>) -> Invocation {
        Invocation::new("sayHello").with_args(args)
    }

    #[test]
    fn raw_sends_strings_as_utf8_and_base64_objects_as_bytes() {
        let c = RawCodec;
        assert_eq!(c.encode(&inv(vec![json!("world")])).unwrap(), "world");
        assert_eq!(
            c.encode(&inv(vec![json!({"base64": "AP8="})])).unwrap(),
            &[0u8, 255][..]
        );
        assert!(c.encode(&inv(vec![])).unwrap().is_empty());
        for bad in [
            vec![json!(1)],
            vec![json!({"base64": "!!"})],
            vec![json!("a"), json!("b")],
        ] {
            let e = c.encode(&inv(bad.clone())).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadConfig, "{bad:?}");
            assert!(!e.is_retryable());
        }
    }

    #[test]
    fn raw_replies_are_strings_when_utf8_else_base64() {
        let c = RawCodec;
        let i = inv(vec![]);
        assert_eq!(
            c.decode(&i, Bytes::from_static(b"hi \xE2\x9C\x93"))
                .unwrap(),
            json!("hi ✓")
        );
        assert_eq!(
            c.decode(&i, Bytes::from_static(b"\xff\x00")).unwrap(),
            json!({"base64": "/wA="})
        );
    }

    #[test]
    fn json_sends_one_value_or_an_array_and_parses_replies() {
        let c = JsonCodec;
        assert_eq!(c.encode(&inv(vec![json!({"a": 1})])).unwrap(), r#"{"a":1}"#);
        assert_eq!(
            c.encode(&inv(vec![json!(1), json!("x")])).unwrap(),
            r#"[1,"x"]"#
        );
        assert_eq!(c.encode(&inv(vec![])).unwrap(), "null");
        let i = inv(vec![]);
        assert_eq!(
            c.decode(&i, Bytes::from_static(b"[1]")).unwrap(),
            json!([1])
        );
        assert_eq!(c.decode(&i, Bytes::new()).unwrap(), Value::Null);
        assert!(
            c.decode(&i, Bytes::from_static(b"{"))
                .unwrap_err()
                .is_business()
        );
    }

    #[test]
    fn payload_names_parse() {
        assert_eq!("RAW".parse::<Payload>().unwrap(), Payload::Raw);
        assert_eq!("json".parse::<Payload>().unwrap(), Payload::Json);
        assert_eq!("hessian2".parse::<Payload>().unwrap(), Payload::Wrapper);
        assert_eq!("Wrapper".parse::<Payload>().unwrap(), Payload::Wrapper);
        assert!("protobuf".parse::<Payload>().is_err());
        assert_eq!(Payload::Raw.codec().content_type(), "application/grpc");
    }
}
