//! Typed Switchman clients for protobuf (IDL) services, generated from `.proto` files in a
//! `build.rs`: the messages by [`prost_build`], and per service a `XxxClient` whose unary
//! methods go through a [`switchman::Reference`] (routing, load balancing, failover, retries,
//! timeouts, metrics) over Triple, as Dubbo 3's IDL services speak it.
//!
//! ```no_run
//! // build.rs
//! fn main() -> std::io::Result<()> {
//!     switchman_build::compile_protos(&["proto/greeter.proto"], &["proto"])
//! }
//! ```
//!
//! ```ignore
//! // src/main.rs (the crate depends on `switchman` with its `idl` feature)
//! mod greeter {
//!     switchman::include_proto!("example.greeter");
//! }
//! let greeter = greeter::GreeterClient::connect(
//!     greeter::GreeterClient::builder().registry("zookeeper://127.0.0.1:2181"),
//! )
//! .await?;
//! let reply = greeter.say_hello(greeter::HelloRequest { name: "world".into() }).await?;
//! ```
//!
//! The `.proto` files are compiled by [`protox`] (pure Rust): no `protoc` binary is needed.
//! The generated code names only `::switchman` (the messages derive through
//! `switchman::prost`), so the crate needs no `prost` dependency of its own.
//!
//! # What a client is
//!
//! For `service Greeter` in `package example.greeter` (with `option java_package =
//! "org.example"`), `GreeterClient` holds a `switchman::Reference` and has:
//!
//! - `INTERFACE`: the name Dubbo registers the service under, the Java interface its compiler
//!   plugin (`dubbo-compiler`) generates: `java_package` + `.` + service when the file sets
//!   `java_package` (`org.example.Greeter`), else the proto package + service;
//! - `SERVICE`: the proto's `package.Service` (`example.greeter.Greeter`), the first segment
//!   of every request path (`/example.greeter.Greeter/SayHello`), which Dubbo's stubs and gRPC
//!   servers serve;
//! - `builder()` (`Reference::new(INTERFACE)`: add the registry, version, group...),
//!   `connect(builder)`, `new(reference)` and `reference()`, as `#[switchman::interface]`'s
//!   clients;
//! - per unary rpc `SayHello(HelloRequest) returns (HelloReply)`:
//!   `async fn say_hello(&self, request: HelloRequest) -> switchman::Result<HelloReply>` and
//!   `say_hello_with(&self, request, &switchman::CallContext)` (attachments, per-call
//!   `timeout`/`retries`). The invocation's method is the proto name (`SayHello`), as in
//!   Dubbo's Java stubs.
//!
//! - per server-streaming rpc `Count(HelloRequest) returns (stream HelloReply)`:
//!   `async fn count(&self, request) -> switchman::Result<switchman::Streaming<HelloReply>>`
//!   and `count_with`: the cluster chooses the provider (failing over until one accepts the
//!   call), then `Streaming::message` reads its replies in order.
//!
//! Client-streaming and bidirectional rpcs get no method (the client's doc names them).

#![forbid(unsafe_code)]
#![warn(missing_docs, rust_2018_idioms, unreachable_pub)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

pub use prost_build;
use prost_build::{Method, Service, ServiceGenerator};
use prost_types::FileDescriptorSet;
pub use protox;

/// Compiles `protos` (searched for imports in `includes`) into `$OUT_DIR/{package}.rs`:
/// messages and a Switchman client per service. [`Builder::new`]`.compile(..)`.
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> io::Result<()> {
    Builder::new().compile(protos, includes)
}

/// Code generation settings: [`prost_build::Config`] for the messages, and where the output
/// goes.
pub struct Builder {
    config: prost_build::Config,
    emit_rerun: bool,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("emit_rerun", &self.emit_rerun)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// The defaults: output to `$OUT_DIR`, messages deriving through `::switchman::prost`,
    /// `cargo:rerun-if-changed` for every `.proto` compiled.
    pub fn new() -> Self {
        let mut config = prost_build::Config::new();
        config.prost_path("::switchman::prost");
        Builder {
            config,
            emit_rerun: true,
        }
    }

    /// prost-build's settings (attributes, `bytes`, `btree_map`, `out_dir`...). Its service
    /// generator is replaced by Switchman's at [`Builder::compile`]; its `prost_path` is
    /// `::switchman::prost` unless set here.
    pub fn prost_config(mut self, f: impl FnOnce(&mut prost_build::Config)) -> Self {
        f(&mut self.config);
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for every `.proto` file read (default yes).
    pub fn emit_rerun_if_changed(mut self, yes: bool) -> Self {
        self.emit_rerun = yes;
        self
    }

    /// Compiles `protos` with [`protox`] (imports searched in `includes`) and writes the
    /// messages and clients.
    pub fn compile(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> io::Result<()> {
        let mut compiler =
            protox::Compiler::new(includes.iter().map(AsRef::as_ref)).map_err(proto_error)?;
        compiler.include_source_info(true).include_imports(true);
        for proto in protos {
            compiler.open_file(proto.as_ref()).map_err(proto_error)?;
        }
        if self.emit_rerun {
            for file in compiler.files() {
                if let Some(path) = file.path() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
        self.compile_fds(compiler.file_descriptor_set())
    }

    /// Writes the messages and clients of an already compiled descriptor set (from `protoc
    /// --include_imports --include_source_info`, or [`protox`]).
    pub fn compile_fds(mut self, fds: FileDescriptorSet) -> io::Result<()> {
        let generator = ClientGenerator::new(&fds);
        self.config.service_generator(Box::new(generator));
        self.config.compile_fds(fds)
    }
}

/// A compile error of protox as an I/O error naming the file (protox's message alone does not).
fn proto_error(e: protox::Error) -> io::Error {
    match e.file() {
        Some(file) => io::Error::other(format!("{file}: {e}")),
        None => io::Error::other(e.to_string()),
    }
}

/// The Java interface name (what Dubbo registers) of every service, by `package.Service`.
fn java_interfaces(fds: &FileDescriptorSet) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for file in &fds.file {
        let package = file.package();
        let java_package = file
            .options
            .as_ref()
            .and_then(|o| o.java_package.as_deref())
            .filter(|p| !p.is_empty())
            .unwrap_or(package);
        for service in &file.service {
            names.insert(
                qualified(package, service.name()),
                qualified(java_package, service.name()),
            );
        }
    }
    names
}

/// `package.name`, or `name` without a package.
fn qualified(package: &str, name: &str) -> String {
    if package.is_empty() {
        name.to_string()
    } else {
        format!("{package}.{name}")
    }
}

/// prost-build's service hook: writes a `XxxClient` per service.
#[derive(Debug, Default)]
struct ClientGenerator {
    interfaces: HashMap<String, String>,
}

impl ClientGenerator {
    fn new(fds: &FileDescriptorSet) -> Self {
        ClientGenerator {
            interfaces: java_interfaces(fds),
        }
    }
}

/// A Rust string literal of `s` (`Debug` of a `str` is one).
fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// `s` as `///` doc lines at `indent` levels of four spaces.
fn doc(buf: &mut String, indent: usize, text: &str) {
    let pad = "    ".repeat(indent);
    for line in text.lines() {
        if line.is_empty() {
            let _ = writeln!(buf, "{pad}///");
        } else {
            let _ = writeln!(buf, "{pad}/// {line}");
        }
    }
}

/// The comments of a proto element (leading, then trailing), as doc text.
fn comments(c: &prost_build::Comments) -> String {
    let mut lines: Vec<String> = Vec::new();
    for block in c.leading.iter().chain(c.trailing.iter()) {
        for line in block.lines() {
            // protoc keeps the space after `//`.
            lines.push(line.strip_prefix(' ').unwrap_or(line).to_string());
        }
    }
    // Brackets and angle brackets in proto comments are not intra-doc links or HTML here.
    lines
        .join("\n")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace('<', "\\<")
}

/// The kind of a streaming rpc the clients do not call (`None`: unary or server streaming).
fn streaming_kind(m: &Method) -> Option<&'static str> {
    match (m.client_streaming, m.server_streaming) {
        (false, false) => None,
        (false, true) => None,
        (true, false) => Some("client streaming"),
        (true, true) => Some("bidirectional streaming"),
    }
}

impl ServiceGenerator for ClientGenerator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        let full = qualified(&service.package, &service.proto_name);
        let interface = self
            .interfaces
            .get(&full)
            .cloned()
            .unwrap_or_else(|| full.clone());
        let client = format!("{}Client", service.name);
        let skipped: Vec<String> = service
            .methods
            .iter()
            .filter_map(|m| streaming_kind(m).map(|k| format!("`{}` ({k})", m.proto_name)))
            .collect();

        let mut text = comments(&service.comments);
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let _ = write!(
            text,
            "The Switchman client of the protobuf service `{full}` (registered by Dubbo as \
             `{interface}`): each unary or server-streaming rpc is a call through a \
             `switchman::Reference` over Triple (written by switchman-build)."
        );
        if !skipped.is_empty() {
            let _ = write!(
                text,
                "\n\nNot generated (Switchman's Triple client does not send streams): {}.",
                skipped.join(", ")
            );
        }
        doc(buf, 0, &text);
        let _ = writeln!(buf, "#[derive(Debug, Clone)]");
        let _ = writeln!(buf, "pub struct {client} {{");
        let _ = writeln!(buf, "    reference: ::switchman::Reference,");
        let _ = writeln!(buf, "}}");
        let _ = writeln!(buf);
        let _ = writeln!(buf, "impl {client} {{");
        let _ = writeln!(
            buf,
            "    /// The interface Dubbo registers the service under (`java_package` + service, \
             else the proto's `package.Service`).\n    pub const INTERFACE: &'static str = {};",
            lit(&interface)
        );
        let _ = writeln!(
            buf,
            "    /// The proto's `package.Service`: the service in every request path.\n    \
             pub const SERVICE: &'static str = {};",
            lit(&full)
        );
        let _ = writeln!(buf);
        buf.push_str(CLIENT_CONSTRUCTORS);
        for method in &service.methods {
            if streaming_kind(method).is_some() {
                continue;
            }
            write_method(buf, method);
        }
        let _ = writeln!(buf, "}}");
    }
}

/// What every client has besides its methods (the conventions of `#[switchman::interface]`).
const CLIENT_CONSTRUCTORS: &str = "    \
    /// A reference builder for [`Self::INTERFACE`]: add the registry (and version, group, ...)\n    \
    /// and [`Self::connect`] it.\n    \
    pub fn builder() -> ::switchman::ReferenceBuilder {\n        \
        ::switchman::Reference::new(Self::INTERFACE)\n    \
    }\n\n    \
    /// Connects `builder` (from [`Self::builder`]) and wraps the reference.\n    \
    pub async fn connect(builder: ::switchman::ReferenceBuilder) -> ::switchman::Result<Self> {\n        \
        ::core::result::Result::Ok(Self::new(builder.connect().await?))\n    \
    }\n\n    \
    /// Wraps a connected reference to the service.\n    \
    pub fn new(reference: ::switchman::Reference) -> Self {\n        \
        Self { reference }\n    \
    }\n\n    \
    /// The reference the client calls through.\n    \
    pub fn reference(&self) -> &::switchman::Reference {\n        \
        &self.reference\n    \
    }\n";

fn write_method(buf: &mut String, m: &Method) {
    let name = &m.name;
    let with = with_name(name);
    let (input, output) = (&m.input_type, &m.output_type);
    let mut text = comments(&m.comments);
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    let (returns, output, call) = if m.server_streaming {
        (
            "stream ",
            format!("::switchman::Streaming<{output}>"),
            "call_idl_server_stream",
        )
    } else {
        ("", output.clone(), "call_idl")
    };
    let _ = write!(
        text,
        "`rpc {}({}) returns ({returns}{})`.",
        m.proto_name,
        m.input_proto_type.trim_start_matches('.'),
        m.output_proto_type.trim_start_matches('.')
    );
    let _ = writeln!(buf);
    doc(buf, 1, &text);
    let _ = writeln!(
        buf,
        "    pub async fn {name}(&self, request: {input}) -> ::switchman::Result<{output}> {{\n        \
         self.{with}(request, &::switchman::CallContext::new()).await\n    }}"
    );
    let _ = writeln!(buf);
    let _ = writeln!(
        buf,
        "    /// [`Self::{name}`] with per-call attachments (`timeout`, `retries`, implicit \
         parameters).\n    \
         pub async fn {with}(\n        &self,\n        request: {input},\n        \
         context: &::switchman::CallContext,\n    ) -> ::switchman::Result<{output}> {{\n        \
         self.reference\n            .{call}(Self::SERVICE, {}, &request, context)\n            \
         .await\n    }}",
        lit(&m.proto_name)
    );
}

/// `name_with`, for a raw identifier `r#type` too (`type_with`).
fn with_name(name: &str) -> String {
    format!("{}_with", name.strip_prefix("r#").unwrap_or(name))
}

#[cfg(test)]
mod tests;
