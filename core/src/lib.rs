//! Switchman's shared model.
//!
//! This crate is deliberately small and free of registry clients and transports: every other
//! crate depends on it, so it holds only the types they exchange.
//!
//! - [`Instance`]: one provider as parsed once from a registry entry (a Dubbo URL, a Nacos
//!   instance, a static record). Shared as `Arc<Instance>`.
//! - [`Url`]: Dubbo URL parsing and encoding, including the URL-encoded node names ZooKeeper holds.
//! - [`Invocation`]: one call (method, JSON arguments, attachments).
//! - [`Invoker`]: the transport that performs one attempt against one instance.
//! - [`Error`]: one error type with an [`ErrorKind`] and a retryability decided where it is born.
//! - [`yaml`]: the one bounded YAML reader every registry, config-centre and file parser uses.
//! - [`java_text`]: an argument as Java text (`String.valueOf` of the object its declared Java
//!   type makes of it), what consistent hashing and `arguments[i]` rules read.
//! - [`java_types`]: Java type names made full (`String` → `java.lang.String`), the one table
//!   of short names both transports accept.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod clock;
mod error;
mod instance;
mod invocation;
mod invoker;
pub mod java_text;
pub mod java_types;
pub mod percent;
mod service_key;
pub mod url;
pub mod yaml;

pub use clock::Tick;
pub use error::{Error, ErrorKind, MAX_MESSAGE, Result, SignatureMismatch};
pub use instance::{
    DEFAULT_WARMUP, DEFAULT_WEIGHT, Instance, InstanceBuilder, MAX_PARAM_VALUE_BYTES, MAX_PARAMS,
    Protocol, check_metadata,
};
pub use invocation::{
    Invocation, MessageStream, Protobuf, StreamSink, Typed, TypedBody, method_slot,
};
pub use invoker::{BoxFuture, Invoker, MakeEndpoint};
pub use service_key::ServiceKey;
pub use url::{Url, UrlError, is_valid_host};
