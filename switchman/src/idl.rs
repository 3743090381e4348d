//! Protobuf (IDL) services over Triple ([`Reference::call_idl`], feature `idl`): the request
//! is a prost message sent as is (`application/grpc+proto`, no Dubbo wrapper) at
//! `/{package.Service}/{Rpc}`, the reply decoded into the prost type, and the call goes
//! through the whole cluster (routing, balancing, failover, retries, timeouts, metrics) like
//! every other. `switchman-build` generates typed clients that call this.
//!
//! What routing rules and consistent hashing see: the method (the proto's rpc name), the
//! attachments and the provider's parameters; an IDL call exposes no arguments to them
//! (`arguments[0]` matches nothing, consistent hashing hashes no argument).
//!
//! Only Triple (`tri://`) providers carry an IDL call: a dubbo:// provider fails it at once
//! with a bad-config error (not retried), which names the service and method.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use switchman_cluster::Strategy;
use switchman_core::{Error, Invocation, Protobuf, Result, TypedBody};

use crate::{CallContext, Reference};

/// The JSON a Triple call of an IDL service returns in place of the reply it decoded: the
/// index of that reply in the call's [`IdlCall`].
const TOKEN: &str = "$switchman.idl-reply";

/// One IDL call: the encoded request and the replies its attempts decoded.
struct IdlCall<Resp> {
    service: String,
    method: String,
    message: Vec<u8>,
    replies: Mutex<Vec<Option<Resp>>>,
}

impl<Resp> IdlCall<Resp> {
    fn not_hessian(&self) -> Error {
        Error::bad_config(format!(
            "{}/{} is a protobuf (IDL) call: only Triple (tri://) providers carry it, not \
             dubbo:// or Triple's Hessian wrapper",
            self.service, self.method
        ))
    }
}

impl<Resp: prost::Message + Default + Send + 'static> TypedBody for IdlCall<Resp> {
    fn write_args(&self, _out: &mut Vec<u8>) -> Result<()> {
        Err(self.not_hessian())
    }

    fn each_arg(&self) -> Result<Vec<Vec<u8>>> {
        Err(self.not_hessian())
    }

    fn read_result(&self, bytes: &[u8]) -> Result<(usize, Value)> {
        let reply = Resp::decode(bytes).map_err(|e| {
            Error::business(format!(
                "the reply to {}/{} is not a valid {}: {e}",
                self.service,
                self.method,
                std::any::type_name::<Resp>()
            ))
        })?;
        let mut replies = self.replies.lock().unwrap_or_else(|p| p.into_inner());
        replies.push(Some(reply));
        Ok((bytes.len(), serde_json::json!({ TOKEN: replies.len() - 1 })))
    }

    fn protobuf(&self) -> Option<Protobuf<'_>> {
        Some(Protobuf {
            service: &self.service,
            message: &self.message,
        })
    }
}

impl<Resp: Default> IdlCall<Resp> {
    /// The call's reply: the one the transport decoded; failsafe's empty answer (`null`) is the
    /// default message; any other JSON (a mock) is an error.
    fn take(&self, answer: Value) -> Result<Resp> {
        if answer.is_null() {
            return Ok(Resp::default());
        }
        if let Some(i) = answer
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get(TOKEN))
            .and_then(Value::as_u64)
        {
            let mut replies = self.replies.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = replies.get_mut(i as usize).and_then(Option::take) {
                return Ok(r);
            }
        }
        Err(Error::bad_config(format!(
            "{}/{}: the answer is not a {} from a provider (a JSON mock cannot answer an IDL \
             call)",
            self.service,
            self.method,
            std::any::type_name::<Resp>()
        )))
    }
}

impl Reference {
    /// Calls the unary rpc `method` of the protobuf service `service` (the proto's
    /// `package.Service`, the first segment of the request path) with `request`, over Triple,
    /// through the cluster; the reply is decoded as `Resp`. What `switchman-build`'s clients
    /// call. See the module docs (feature `idl`).
    ///
    /// ```no_run
    /// # async fn demo(greeter: switchman::Reference) -> switchman::Result<()> {
    /// use switchman::prost::Message;
    ///
    /// #[derive(Clone, PartialEq, Message)]
    /// #[prost(prost_path = "::switchman::prost")]
    /// struct HelloRequest {
    ///     #[prost(string, tag = "1")]
    ///     name: String,
    /// }
    /// #[derive(Clone, PartialEq, Message)]
    /// #[prost(prost_path = "::switchman::prost")]
    /// struct HelloReply {
    ///     #[prost(string, tag = "1")]
    ///     message: String,
    /// }
    ///
    /// let request = HelloRequest { name: "world".into() };
    /// let context = switchman::CallContext::new();
    /// let reply: HelloReply = greeter
    ///     .call_idl("example.greeter.Greeter", "SayHello", &request, &context)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_idl<Req, Resp>(
        &self,
        service: &str,
        method: &str,
        request: &Req,
        context: &CallContext,
    ) -> Result<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default + Send + 'static,
    {
        if self.cluster().settings(method).strategy == Strategy::Mergeable {
            return Err(Error::bad_config(format!(
                "{service}/{method}: an IDL call takes one provider's reply, and mergeable \
                 merges JSON answers"
            )));
        }
        let call = Arc::new(IdlCall::<Resp> {
            service: service.to_string(),
            method: method.to_string(),
            message: request.encode_to_vec(),
            replies: Mutex::new(Vec::new()),
        });
        let mut inv = Invocation::new(method).with_typed(call.clone());
        for (k, v) in context.attachments() {
            inv.set_attachment(k.clone(), v.clone());
        }
        let answer = self.invoke(&inv).await?;
        call.take(answer)
    }
}

/// Includes the code `switchman-build` generated for a proto package (in a `build.rs`) from
/// `$OUT_DIR/{package}.rs`: `switchman::include_proto!("example.greeter");`.
#[macro_export]
macro_rules! include_proto {
    ($package:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $package, ".rs"));
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Reply {
        #[prost(string, tag = "1")]
        message: String,
    }

    fn call() -> IdlCall<Reply> {
        IdlCall {
            service: "example.Greeter".into(),
            method: "SayHello".into(),
            message: vec![10, 1, b'x'],
            replies: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn hessian_protocols_are_refused_with_the_call_named() {
        let c = call();
        let e = c.write_args(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), switchman_core::ErrorKind::BadConfig);
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("example.Greeter/SayHello"), "{e}");
        assert!(c.each_arg().is_err());
        let p = c.protobuf().unwrap();
        assert_eq!(
            (p.service, p.message),
            ("example.Greeter", &[10, 1, b'x'][..])
        );
    }

    #[test]
    fn replies_come_back_by_their_token_and_bad_bytes_are_a_business_error() {
        let c = call();
        let bytes = prost::Message::encode_to_vec(&Reply {
            message: "hi".into(),
        });
        let (took, token) = c.read_result(&bytes).unwrap();
        assert_eq!(took, bytes.len());
        assert_eq!(c.take(token.clone()).unwrap().message, "hi");
        assert!(c.take(token).is_err(), "a reply is taken once");
        let e = c.read_result(&[0xff, 0xff, 0xff]).unwrap_err();
        assert!(e.is_business(), "{e}");
        assert_eq!(c.take(Value::Null).unwrap(), Reply::default());
        assert!(c.take(serde_json::json!({"message": "mock"})).is_err());
    }
}
