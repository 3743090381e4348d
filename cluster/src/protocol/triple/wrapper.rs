//! Java Dubbo 3's Triple format for plain Java interfaces (no IDL): the "wrapper" format.
//!
//! A Java Dubbo 3.x Triple provider of an interface whose methods take and return plain Java
//! types (not protobuf messages) reads every gRPC request (`application/grpc`, `+proto`,
//! `+json`: the codec is the same, `GrpcCompositeCodec` → `ReflectionPackableMethod`) as a
//! protobuf `TripleRequestWrapper` and answers a `TripleResponseWrapper`
//! (`dubbo-rpc-triple/src/main/proto/triple_wrapper.proto`):
//!
//! ```text
//! message TripleRequestWrapper  { string serializeType = 1; repeated bytes args = 2; repeated string argTypes = 3; }
//! message TripleResponseWrapper { string serializeType = 1; bytes data = 2; string type = 3; }
//! ```
//!
//! Each argument is its own Hessian2 stream (`serializeType` `"hessian4"` stands for Dubbo's
//! `hessian2`), `argTypes` are the parameters' `Class.getName()` (`int`, `java.lang.String`,
//! `[I`, `[Lcom.foo.User;`), `data` is the return value (Hessian null for `void`) and `type`
//! the declared return type. A generic call (`GenericService.$invoke`) is the method `$invoke`
//! with three arguments (method name, `String[]` parameter types or null, `Object[]`
//! arguments; POJOs as maps). An exception thrown by the provider's code comes back with
//! `grpc-status: 0`, the response header `tri-exception-code: 3` (`RpcException.BIZ_EXCEPTION`)
//! and the Throwable Hessian-encoded as `data`; other framework failures on that path carry
//! their gRPC code in `tri-exception-code`.
//!
//! The two messages are prost structs (`#[derive(prost::Message)]`): three length-delimited
//! fields each. Parsing is bounded by the message; unknown fields are skipped, malformed ones
//! are errors.
//!
//! - [`WrapperCodec`]: the [`MessageCodec`] that sends an [`Invocation`] in this format, typed
//!   (with [`Invocation::with_types`]) or generic.
//! - [`JavaCall`]: the server side, a request of a Java consumer decoded to JSON, and its reply.

use std::fmt;

use bytes::{Bytes, BytesMut};
use serde_json::Value as Json;
use switchman_core::{Error, ErrorKind, Instance, Invocation, Result};
use switchman_hessian::{
    List, Value, from_bytes, from_json, generic_from_json, java_exception, to_bytes, to_json,
};

use super::message_codec::{MessageCodec, ReplyContext};
use super::status::{Code, Status};
use crate::protocol::endpoint_params::SharedParams;
use switchman_core::java_types::{class_name, descriptor};

/// `serializeType` of Hessian2 in the wrapper (Dubbo's `TripleConstants.HESSIAN4`).
pub const HESSIAN4: &str = "hessian4";
/// The content-type Java consumers send wrapped requests with.
pub const CONTENT_TYPE: &str = "application/grpc+proto";
/// The response header that says `data` is a Throwable (non-zero).
pub const EXCEPTION_HEADER: &str = "tri-exception-code";
/// `tri-exception-code` of an exception thrown by the provider's own code.
pub const BIZ_EXCEPTION: u32 = 3;
/// The method of generic calls.
pub const GENERIC_METHOD: &str = "$invoke";
/// `argTypes` of `$invoke(String, String[], Object[])`.
pub const GENERIC_ARG_TYPES: [&str; 3] = [
    "java.lang.String",
    "[Ljava.lang.String;",
    "[Ljava.lang.Object;",
];

/// A wrapper message that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrapperError(String);

impl WrapperError {
    fn new(what: impl Into<String>) -> Self {
        WrapperError(what.into())
    }
}

impl fmt::Display for WrapperError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Triple wrapper: {}", self.0)
    }
}

impl std::error::Error for WrapperError {}

/// `TripleRequestWrapper` (prost's derive; the field numbers of `triple_wrapper.proto`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RequestWrapper {
    /// `hessian4` for Hessian2.
    #[prost(string, tag = "1")]
    pub serialize_type: String,
    /// One serialized stream per argument.
    #[prost(bytes = "bytes", repeated, tag = "2")]
    pub args: Vec<Bytes>,
    /// The parameters' Java class names.
    #[prost(string, repeated, tag = "3")]
    pub arg_types: Vec<String>,
}

/// `TripleResponseWrapper` (prost's derive; the field numbers of `triple_wrapper.proto`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ResponseWrapper {
    /// The serialization of `data` (the request's, echoed).
    #[prost(string, tag = "1")]
    pub serialize_type: String,
    /// The serialized return value (or Throwable).
    #[prost(bytes = "bytes", tag = "2")]
    pub data: Bytes,
    /// The declared return type's class name (`void` for none).
    #[prost(string, tag = "3")]
    pub type_name: String,
}

/// Protobuf-encodes `m` into a buffer of exactly its size.
fn encode_message(m: &impl prost::Message) -> Bytes {
    let mut out = BytesMut::with_capacity(m.encoded_len());
    // Cannot fail: the buffer has room for the whole message.
    let _ = m.encode(&mut out);
    out.freeze()
}

/// Decodes a `M` from `message`; bytes fields are slices of `message` (no copy). Bounded by
/// the message: every length is checked against what is left before anything is allocated,
/// so a message of `n` bytes makes at most `n / 2` elements.
fn decode_message<M: prost::Message + Default>(
    message: &Bytes,
) -> std::result::Result<M, WrapperError> {
    M::decode(message.clone()).map_err(|e| WrapperError::new(e.to_string()))
}

impl RequestWrapper {
    /// The protobuf encoding (fields in Java's order: serializeType, args, argTypes; an empty
    /// `serializeType` is left out, as proto3 does).
    pub fn encode(&self) -> Bytes {
        encode_message(self)
    }

    /// Parses a request message: unknown fields are skipped, malformed ones are errors.
    pub fn decode(message: &Bytes) -> std::result::Result<Self, WrapperError> {
        decode_message(message)
    }
}

impl ResponseWrapper {
    /// The protobuf encoding (empty fields are left out, as proto3 does; Java's parser takes
    /// either).
    pub fn encode(&self) -> Bytes {
        encode_message(self)
    }

    /// Parses a response message: unknown fields are skipped, malformed ones are errors.
    pub fn decode(message: &Bytes) -> std::result::Result<Self, WrapperError> {
        decode_message(message)
    }
}

/// Whether `serialize_type` is Hessian2 (`hessian4` as Java writes it; `hessian2` as its
/// provider echoes it when it could not read the request).
pub fn is_hessian(serialize_type: &str) -> bool {
    serialize_type == HESSIAN4 || serialize_type == "hessian2"
}

/// Whether `target` looks like a Java Dubbo Triple provider of a plain interface, which
/// accepts the wrapper format with Hessian2 inside: it registered `prefer.serialization` or
/// `serialization` naming `hessian2` (Java 3.2+ registers `prefer.serialization=hessian2,
/// fastjson2`), or neither but a Java Dubbo `release` (a version number: hessian2 is then
/// the default). The Python and Go samples register neither.
pub fn speaks_wrapper(target: &Instance) -> bool {
    // The parser endpoints read once (a Triple endpoint keeps its verdict).
    SharedParams::of(target).speaks_wrapper()
}

/// The reply's `tri-exception-code` (headers, else trailers); a value that is not a number
/// counts as `UNKNOWN` (2).
fn exception_code(cx: &ReplyContext<'_>) -> Option<u32> {
    let v = cx.header(EXCEPTION_HEADER)?;
    Some(v.trim().parse().unwrap_or(2))
}

/// Sends calls in the wrapper format with Hessian2 inside (`application/grpc+proto`), what
/// Java Dubbo 3 consumers send to Triple providers of plain interfaces.
///
/// - **Typed** (the invocation has parameter types): `POST /{service}/{method}`, each argument
///   converted for its type as for dubbo:// (see the hessian crate's JSON mapping), `argTypes`
///   the types' `Class.getName()`.
/// - **Generic** (no parameter types but arguments, the attachment `generic=true`, or
///   [`WrapperCodec::generic`]): `POST /{service}/$invoke` with the metadata `generic: true`,
///   POJOs as maps; the provider finds a method that is not overloaded by its name.
///
/// Replies: the value as JSON (POJOs as objects with a `"class"` member); a Throwable
/// (`tri-exception-code: 3`) as a business error `"{address} threw {class}: {message}"`;
/// another `tri-exception-code` as that gRPC status.
#[derive(Debug, Clone, Copy, Default)]
pub struct WrapperCodec {
    generic: bool,
}

impl WrapperCodec {
    /// Typed calls when the invocation has types, else generic.
    pub fn new() -> Self {
        WrapperCodec { generic: false }
    }

    /// Sends every call as a generic `$invoke` (Dubbo's `generic=true` reference).
    pub fn generic(mut self, generic: bool) -> Self {
        self.generic = generic;
        self
    }

    /// Whether `inv` goes as a generic call.
    pub fn is_generic(&self, inv: &Invocation) -> bool {
        self.generic
            || inv.attachment("generic").is_some_and(|g| g == "true")
            || (inv.parameter_types.is_empty() && !inv.arguments.is_empty())
    }

    fn typed(inv: &Invocation) -> Result<RequestWrapper> {
        if inv.parameter_types.len() != inv.arguments.len() {
            return Err(Error::bad_config(format!(
                "{}: {} parameter types ({}) for {} arguments",
                inv.method,
                inv.parameter_types.len(),
                inv.parameter_types.join(","),
                inv.arguments.len()
            )));
        }
        let mut w = RequestWrapper {
            serialize_type: HESSIAN4.into(),
            args: Vec::with_capacity(inv.arguments.len()),
            arg_types: Vec::with_capacity(inv.arguments.len()),
        };
        if let Some(typed) = &inv.typed {
            // A typed call's arguments, already Hessian2, one stream each.
            for ty in &inv.parameter_types {
                w.arg_types.push(class_name(ty)?);
            }
            w.args = typed.0.each_arg()?.into_iter().map(Bytes::from).collect();
            return Ok(w);
        }
        for (i, (arg, ty)) in inv.arguments.iter().zip(&inv.parameter_types).enumerate() {
            w.arg_types.push(class_name(ty)?);
            let full = switchman_core::java_types::full_name(ty)?;
            let v = from_json(arg, Some(&full)).map_err(|err| {
                Error::bad_config(format!("{} argument {} as {ty}: {err}", inv.method, i + 1))
            })?;
            w.args.push(Bytes::from(to_bytes(&v)));
        }
        Ok(w)
    }

    fn generic_call(inv: &Invocation) -> Result<RequestWrapper> {
        let types = if inv.parameter_types.is_empty() {
            Value::Null
        } else {
            let mut items = Vec::with_capacity(inv.parameter_types.len());
            for t in &inv.parameter_types {
                descriptor(t)?;
                let full = switchman_core::java_types::full_name(t)?;
                items.push(Value::String(full.into_owned()));
            }
            Value::List(List {
                class: Some("[string".into()),
                items,
            })
        };
        let mut items = Vec::with_capacity(inv.arguments.len());
        for (i, arg) in inv.arguments.iter().enumerate() {
            items.push(generic_from_json(arg).map_err(|err| {
                Error::bad_config(format!("{} argument {}: {err}", inv.method, i + 1))
            })?);
        }
        let args = Value::List(List {
            class: Some("[object".into()),
            items,
        });
        Ok(RequestWrapper {
            serialize_type: HESSIAN4.into(),
            args: [Value::String(inv.method.clone()), types, args]
                .iter()
                .map(|v| Bytes::from(to_bytes(v)))
                .collect(),
            arg_types: GENERIC_ARG_TYPES.iter().map(|t| t.to_string()).collect(),
        })
    }

    fn reply(&self, inv: &Invocation, message: Bytes, cx: &ReplyContext<'_>) -> Result<Json> {
        let address = cx.address;
        let malformed = |what: String| {
            Error::new(
                ErrorKind::Transport,
                format!(
                    "{address} answered {} with a Triple wrapper that does not decode: {what}",
                    inv.method
                ),
            )
            // The provider ran the call: sending it again could repeat its side effects.
            .with_retryable(false)
            .with_outlier_strike(true)
        };
        let w = ResponseWrapper::decode(&message).map_err(|e| malformed(e.to_string()))?;
        if !is_hessian(&w.serialize_type) {
            return Err(malformed(format!(
                "serialization {:?}; Switchman reads hessian2 only",
                w.serialize_type
            )));
        }
        let code = exception_code(cx);
        if let (Some(typed), None | Some(0)) = (&inv.typed, code) {
            return typed
                .0
                .read_result(&w.data)
                .map(|(_, token)| token)
                .map_err(|e| malformed(e.to_string()));
        }
        let value = if w.data.is_empty() {
            Value::Null
        } else {
            from_bytes(&w.data).map_err(|e| malformed(e.to_string()))?
        };
        match code {
            None | Some(0) => Ok(to_json(&value)),
            Some(code) => {
                let ex = java_exception(&value);
                let text = match &ex {
                    Some(ex) => ex.to_string(),
                    None => to_json(&value).to_string(),
                };
                if code == BIZ_EXCEPTION {
                    let e = Error::business(format!("{address} threw {text}"));
                    // The Java exception, typed, as the error's cause (`Error::cause`).
                    Err(match ex {
                        Some(ex) => e.with_source(ex),
                        None => e,
                    })
                } else {
                    Err(Status::new(Code::from_u32(code), text).into_error(address, &inv.method))
                }
            }
        }
    }
}

impl MessageCodec for WrapperCodec {
    fn content_type(&self) -> &'static str {
        CONTENT_TYPE
    }

    fn path_method<'a>(&self, inv: &'a Invocation) -> &'a str {
        if self.is_generic(inv) {
            GENERIC_METHOD
        } else {
            &inv.method
        }
    }

    fn metadata(&self, inv: &Invocation) -> &'static [(&'static str, &'static str)] {
        if self.is_generic(inv) {
            &[("generic", "true")]
        } else {
            &[]
        }
    }

    fn encode(&self, inv: &Invocation) -> Result<Bytes> {
        let w = if self.is_generic(inv) {
            Self::generic_call(inv)?
        } else {
            Self::typed(inv)?
        };
        Ok(w.encode())
    }

    fn decode(&self, inv: &Invocation, message: Bytes) -> Result<Json> {
        self.reply(inv, message, &ReplyContext::default())
    }

    fn decode_reply(
        &self,
        inv: &Invocation,
        message: Bytes,
        cx: &ReplyContext<'_>,
    ) -> Result<Json> {
        self.reply(inv, message, cx)
    }
}

/// One call of a plain Java interface as a Java Dubbo 3 consumer sends it over Triple,
/// decoded to JSON: what [`TripleServer::serve_java`](super::TripleServer::serve_java)
/// handlers see.
#[derive(Debug, Clone, PartialEq)]
pub struct JavaCall {
    /// The interface (first path segment).
    pub service: String,
    /// The method called (for a generic call, the one named in `$invoke`'s first argument).
    pub method: String,
    /// The parameter types: `argTypes` of a typed call, the types of a generic call (empty
    /// when it sent none).
    pub types: Vec<String>,
    /// The arguments as JSON (the hessian crate's mapping: POJOs as objects with `"class"`).
    pub args: Vec<Json>,
    /// Whether it came as `$invoke`.
    pub generic: bool,
    /// The request's `serializeType`, echoed in the reply.
    pub serialize_type: String,
}

impl JavaCall {
    /// Decodes a wrapped request to `service`/`path_method`. Errors are the statuses to
    /// answer: `INVALID_ARGUMENT` for a message that does not parse, `UNIMPLEMENTED` for a
    /// serialization other than Hessian2.
    pub fn decode(
        service: &str,
        path_method: &str,
        message: &Bytes,
    ) -> std::result::Result<JavaCall, Status> {
        let bad = |what: String| Status::new(Code::InvalidArgument, what);
        let w = RequestWrapper::decode(message).map_err(|e| bad(e.to_string()))?;
        let serialize_type = if w.serialize_type.is_empty() {
            HESSIAN4.to_string()
        } else {
            w.serialize_type
        };
        if !is_hessian(&serialize_type) {
            return Err(Status::new(
                Code::Unimplemented,
                format!("serialization {serialize_type:?} is not supported (hessian2 only)"),
            ));
        }
        let mut values = Vec::with_capacity(w.args.len());
        for (i, a) in w.args.iter().enumerate() {
            values.push(from_bytes(a).map_err(|e| bad(format!("argument {}: {e}", i + 1)))?);
        }
        let generic =
            (path_method == GENERIC_METHOD || path_method == "$invokeAsync") && values.len() == 3;
        if !generic {
            return Ok(JavaCall {
                service: service.to_string(),
                method: path_method.to_string(),
                types: w.arg_types,
                args: values.iter().map(to_json).collect(),
                generic: false,
                serialize_type,
            });
        }
        let mut it = values.into_iter();
        let (name, types, args) = match (it.next(), it.next(), it.next()) {
            (Some(n), Some(t), Some(a)) => (n, t, a),
            _ => return Err(bad("a generic call has three arguments".into())),
        };
        let method = match name {
            Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
            other => {
                return Err(bad(format!(
                    "the method of a generic call is not a string: {}",
                    to_json(&other)
                )));
            }
        };
        let types = match types {
            Value::Null => Vec::new(),
            Value::List(l) => l
                .items
                .iter()
                .map(|t| match t {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(bad(format!(
                        "a parameter type of {method} is not a string: {}",
                        to_json(other)
                    ))),
                })
                .collect::<std::result::Result<_, _>>()?,
            other => {
                return Err(bad(format!(
                    "the parameter types of {method} are not a list: {}",
                    to_json(&other)
                )));
            }
        };
        let args = match args {
            Value::Null => Vec::new(),
            Value::List(l) => l.items.iter().map(to_json).collect(),
            other => {
                return Err(bad(format!(
                    "the arguments of {method} are not a list: {}",
                    to_json(&other)
                )));
            }
        };
        Ok(JavaCall {
            service: service.to_string(),
            method,
            types,
            args,
            generic: true,
            serialize_type,
        })
    }

    /// The reply message carrying `value`: [`reply_message`] with this call's serialization.
    pub fn reply(&self, value: &Json) -> std::result::Result<Bytes, Status> {
        reply_message(&self.serialize_type, value)
    }
}

/// The `TripleResponseWrapper` carrying `value` in `serialize_type` (Hessian2; the request's
/// value echoed, as Java does), converted by the hessian crate's mapping: objects with a
/// `"class"` member become objects of that class, other objects `HashMap`s. Its `type` is
/// `java.lang.Object`, which Java consumers do not read.
pub fn reply_message(serialize_type: &str, value: &Json) -> std::result::Result<Bytes, Status> {
    let v = from_json(value, None).map_err(|e| {
        Status::new(
            Code::Internal,
            format!("the reply does not map to Hessian: {e}"),
        )
    })?;
    Ok(ResponseWrapper {
        serialize_type: serialize_type.to_string(),
        data: Bytes::from(to_bytes(&v)),
        type_name: "java.lang.Object".into(),
    }
    .encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use http::HeaderMap;
    use serde_json::json;
    use switchman_core::{Protocol, ServiceKey};

    #[test]
    fn request_encoding_matches_javas_layout() {
        let w = RequestWrapper {
            serialize_type: HESSIAN4.into(),
            args: vec![Bytes::from_static(&[0x92]), Bytes::from_static(&[0x93])],
            arg_types: vec!["int".into(), "int".into()],
        };
        let bytes = w.encode();
        // Java's TripleRequestWrapper.toByteArray for add(2, 3).
        let want: &[u8] = b"\x0a\x08hessian4\x12\x01\x92\x12\x01\x93\x1a\x03int\x1a\x03int";
        assert_eq!(&bytes[..], want);
        assert_eq!(RequestWrapper::decode(&bytes).unwrap(), w);
    }

    #[test]
    fn response_decoding_reads_what_java_sent() {
        // The bytes a Java 3.3.6 provider answered add(2, 3) with.
        let java = Bytes::from_static(b"\x0a\x08hessian4\x12\x01\x95\x1a\x03int");
        let w = ResponseWrapper::decode(&java).unwrap();
        assert_eq!(w.serialize_type, "hessian4");
        assert_eq!(&w.data[..], &[0x95]);
        assert_eq!(w.type_name, "int");
        assert_eq!(w.encode(), java);
        // Long fields: multi-byte varint lengths.
        let big = ResponseWrapper {
            serialize_type: HESSIAN4.into(),
            data: Bytes::from(vec![b'x'; 300]),
            type_name: "java.lang.String".into(),
        };
        assert_eq!(ResponseWrapper::decode(&big.encode()).unwrap(), big);
    }

    fn put_varint(out: &mut BytesMut, mut v: u64) {
        while v >= 0x80 {
            out.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        out.put_u8(v as u8);
    }

    fn put_field(out: &mut BytesMut, field: u32, data: &[u8]) {
        put_varint(out, u64::from(field << 3 | 2));
        put_varint(out, data.len() as u64);
        out.put_slice(data);
    }

    #[test]
    fn unknown_fields_are_skipped_and_malformed_messages_are_errors() {
        // Field 9 varint, field 10 fixed64, field 11 fixed32, field 12 bytes, field 13 a group
        // (with a varint inside), then serializeType.
        let mut m = BytesMut::new();
        m.put_slice(&[9 << 3, 0x96, 0x01]);
        m.put_u8(10 << 3 | 1);
        m.put_slice(&[0; 8]);
        m.put_u8(11 << 3 | 5);
        m.put_slice(&[0; 4]);
        put_field(&mut m, 12, b"zz");
        m.put_slice(&[13 << 3 | 3, 1 << 3, 0x01, 13 << 3 | 4]);
        put_field(&mut m, 1, b"hessian4");
        let w = RequestWrapper::decode(&m.freeze()).unwrap();
        assert_eq!(w.serialize_type, "hessian4");
        assert!(w.args.is_empty());
        // Fields repeated past any real call: bounded by the message (two bytes each), and
        // the arguments are slices of it.
        let mut many = BytesMut::new();
        for _ in 0..10_000 {
            put_field(&mut many, 2, b"");
        }
        put_field(&mut many, 2, b"\x92");
        let many = many.freeze();
        let w = RequestWrapper::decode(&many).unwrap();
        assert_eq!(w.args.len(), 10_001);
        assert_eq!(w.args[10_000].as_ptr(), many[many.len() - 1..].as_ptr());
        for bad in [
            &b"\x0a"[..],                                    // truncated length
            b"\x0a\x05abc",                                  // overrun
            b"\x08\x01",                                     // known field with wire type 0
            b"\x0b",                                         // group
            b"\x00\x01",                                     // field 0
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // varint too long
            b"\x0a\x02\xff\xfe",                             // not UTF-8
            b"\x12\xff\xff\xff\xff\x0f",                     // 4 GiB declared, none there
            b"\x0a\x00\x63\x08\x01",                         // unknown group, no end
            b"\x0a\x00\x6c",                                 // end of a group never started
        ] {
            let b = Bytes::copy_from_slice(bad);
            assert!(RequestWrapper::decode(&b).is_err(), "{bad:?}");
            assert!(ResponseWrapper::decode(&b).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn class_names_follow_class_get_name() {
        let c = |t| class_name(t).unwrap();
        assert_eq!(c("int"), "int");
        assert_eq!(c("java.lang.String"), "java.lang.String");
        assert_eq!(c("java.util.List<java.lang.Long>"), "java.util.List");
        assert_eq!(c("int[]"), "[I");
        assert_eq!(c("com.foo.User[][]"), "[[Lcom.foo.User;");
        assert_eq!(c("[Ljava.lang.String;"), "[Ljava.lang.String;");
        assert_eq!(
            c("java.util.Map<java.lang.String, java.lang.Long>[]"),
            "[Ljava.util.Map;"
        );
        // Short names are made full; one that is not Java's own is refused.
        assert_eq!(c("String"), "java.lang.String");
        assert_eq!(c("List<Long>"), "java.util.List");
        assert_eq!(c("BigDecimal[]"), "[Ljava.math.BigDecimal;");
        let e = class_name("User").unwrap_err();
        assert!(
            e.message()
                .contains("`User` is not a full Java class name: write it with its package"),
            "{}",
            e.message()
        );
        assert!(class_name("java.util.List<").is_err());
        assert!(class_name("void").is_err());
    }

    fn inst(params: &[(&str, &str)]) -> Instance {
        let mut b = Instance::builder("127.0.0.1", 50051)
            .protocol(Protocol::Tri)
            .service(ServiceKey::new("com.foo.Greeter"));
        for (k, v) in params {
            b = b.param(k, v);
        }
        b.build()
    }

    #[test]
    fn java_providers_are_recognised_by_their_registration() {
        assert!(speaks_wrapper(&inst(&[(
            "prefer.serialization",
            "hessian2,fastjson2"
        )])));
        assert!(speaks_wrapper(&inst(&[(
            "prefer.serialization",
            "fastjson2,hessian2"
        )])));
        assert!(speaks_wrapper(&inst(&[("serialization", "hessian2")])));
        assert!(speaks_wrapper(&inst(&[("release", "3.1.0")])));
        assert!(!speaks_wrapper(&inst(&[(
            "prefer.serialization",
            "protobuf"
        )])));
        assert!(!speaks_wrapper(&inst(&[
            ("release", "3.3.6"),
            ("serialization", "fastjson2")
        ])));
        // The Python sample registers only `service`.
        assert!(!speaks_wrapper(&inst(&[("service", "com.foo.Greeter")])));
        assert!(!speaks_wrapper(&inst(&[("release", "dubbo-golang-3.0")])));
    }

    #[test]
    fn typed_calls_carry_class_names_and_one_stream_per_argument() {
        let c = WrapperCodec::new();
        let inv = Invocation::new("save")
            .with_args(vec![json!({"id": 1, "name": "Ann"}), json!([1, 2])])
            .with_types(["com.foo.User", "int[]"]);
        assert!(!c.is_generic(&inv));
        assert_eq!(c.path_method(&inv), "save");
        assert!(c.metadata(&inv).is_empty());
        let w = RequestWrapper::decode(&c.encode(&inv).unwrap()).unwrap();
        assert_eq!(w.serialize_type, "hessian4");
        assert_eq!(w.arg_types, ["com.foo.User", "[I"]);
        let user = from_bytes(&w.args[0]).unwrap();
        assert_eq!(user.class(), Some("com.foo.User"));
        let ints = from_bytes(&w.args[1]).unwrap();
        assert_eq!(ints.class(), Some("[int"));
        // No arguments, no types: typed, nothing inside.
        let ping = Invocation::new("ping");
        assert!(!c.is_generic(&ping));
        let w = RequestWrapper::decode(&c.encode(&ping).unwrap()).unwrap();
        assert!(w.args.is_empty() && w.arg_types.is_empty());
        let e = c
            .encode(
                &Invocation::new("add")
                    .with_args(vec![json!(1)])
                    .with_types(["int", "int"]),
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
    }

    #[test]
    fn generic_calls_go_to_invoke_with_maps() {
        let c = WrapperCodec::new();
        let inv =
            Invocation::new("save").with_args(vec![json!({"class": "com.foo.User", "id": 1})]);
        assert!(c.is_generic(&inv));
        assert_eq!(c.path_method(&inv), "$invoke");
        assert_eq!(c.metadata(&inv), &[("generic", "true")]);
        let w = RequestWrapper::decode(&c.encode(&inv).unwrap()).unwrap();
        assert_eq!(w.arg_types, GENERIC_ARG_TYPES);
        assert_eq!(from_bytes(&w.args[0]).unwrap(), Value::string("save"));
        assert_eq!(from_bytes(&w.args[1]).unwrap(), Value::Null);
        let args = from_bytes(&w.args[2]).unwrap();
        assert_eq!(args.class(), Some("[object"));
        assert!(matches!(&args.items().unwrap()[0], Value::Map(_)));
        // And the server side reads it back.
        let call =
            JavaCall::decode("com.foo.Greeter", "$invoke", &c.encode(&inv).unwrap()).unwrap();
        assert!(call.generic);
        assert_eq!(call.method, "save");
        assert!(call.types.is_empty());
        assert_eq!(call.args, vec![json!({"class": "com.foo.User", "id": 1})]);
        let typed = Invocation::new("add")
            .with_args(vec![json!(1), json!(2)])
            .with_types(["int", "int"])
            .with_attachment("generic", "true");
        let call = JavaCall::decode("s", "$invoke", &c.encode(&typed).unwrap()).unwrap();
        assert_eq!(
            (call.method.as_str(), call.types.clone()),
            ("add", vec!["int".to_string(), "int".to_string()])
        );
        assert_eq!(call.args, vec![json!(1), json!(2)]);
    }

    fn response(data: &Value) -> Bytes {
        ResponseWrapper {
            serialize_type: HESSIAN4.into(),
            data: Bytes::from(to_bytes(data)),
            type_name: "java.lang.Object".into(),
        }
        .encode()
    }

    fn exception() -> Value {
        Value::object(
            "com.foo.BoomException",
            vec![
                ("detailMessage", Value::string("boom")),
                ("cause", Value::Ref(0)),
                (
                    "stackTrace",
                    Value::typed_list("[java.lang.StackTraceElement", vec![]),
                ),
            ],
        )
    }

    #[test]
    fn replies_values_and_exceptions() {
        let c = WrapperCodec::new();
        let inv = Invocation::new("x");
        let ok = c.decode(&inv, response(&Value::Int(5))).unwrap();
        assert_eq!(ok, json!(5));
        assert_eq!(c.decode(&inv, response(&Value::Null)).unwrap(), Json::Null);
        let mut headers = HeaderMap::new();
        headers.insert(EXCEPTION_HEADER, "3".parse().unwrap());
        let cx = ReplyContext {
            address: "10.0.0.1:50051",
            headers: Some(&headers),
            trailers: None,
        };
        let e = c
            .decode_reply(&inv, response(&exception()), &cx)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Business);
        assert_eq!(
            e.message(),
            "10.0.0.1:50051 threw com.foo.BoomException: boom"
        );
        let mut unavailable = HeaderMap::new();
        unavailable.insert(EXCEPTION_HEADER, "14".parse().unwrap());
        let cx = ReplyContext {
            address: "10.0.0.1:50051",
            headers: None,
            trailers: Some(&unavailable),
        };
        let e = c
            .decode_reply(&inv, response(&exception()), &cx)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport);
        // Without the header, a Throwable is just a value.
        let v = c.decode(&inv, response(&exception())).unwrap();
        assert_eq!(v["class"], json!("com.foo.BoomException"));
        // Malformed: not retried.
        let e = c
            .decode(&inv, Bytes::from_static(b"\x0a\x05ab"))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport);
        assert!(!e.is_retryable());
        let other = ResponseWrapper {
            serialize_type: "fastjson2".into(),
            data: Bytes::from_static(b"\x01"),
            type_name: "int".into(),
        };
        let e = c.decode(&inv, other.encode()).unwrap_err();
        assert!(e.message().contains("fastjson2"), "{e}");
        let junk = ResponseWrapper {
            serialize_type: HESSIAN4.into(),
            data: Bytes::from_static(b"\x59"),
            type_name: "int".into(),
        };
        assert!(!c.decode(&inv, junk.encode()).unwrap_err().is_retryable());
    }

    #[test]
    fn java_calls_reject_bad_input_with_statuses() {
        let bad = JavaCall::decode("s", "m", &Bytes::from_static(b"{\"a\":1}")).unwrap_err();
        assert_eq!(bad.code, Code::InvalidArgument);
        let json = RequestWrapper {
            serialize_type: "fastjson2".into(),
            ..Default::default()
        };
        assert_eq!(
            JavaCall::decode("s", "m", &json.encode()).unwrap_err().code,
            Code::Unimplemented
        );
        let junk = RequestWrapper {
            serialize_type: HESSIAN4.into(),
            args: vec![Bytes::from_static(b"\x59\x00")],
            arg_types: vec!["long".into()],
        };
        assert_eq!(
            JavaCall::decode("s", "m", &junk.encode()).unwrap_err().code,
            Code::InvalidArgument
        );
        let call = JavaCall::decode(
            "s",
            "add",
            &WrapperCodec::new()
                .encode(
                    &Invocation::new("add")
                        .with_args(vec![json!(2), json!(3)])
                        .with_types(["int", "int"]),
                )
                .unwrap(),
        )
        .unwrap();
        assert!(!call.generic);
        assert_eq!(call.types, ["int", "int"]);
        let reply = call.reply(&json!({"sum": 5})).unwrap();
        let w = ResponseWrapper::decode(&reply).unwrap();
        assert_eq!(w.serialize_type, "hessian4");
        assert_eq!(to_json(&from_bytes(&w.data).unwrap()), json!({"sum": 5}));
    }
}
