//! The generator's output for small `.proto` files, read as text (the code compiling and
//! calling is `idl-tests`'s part).

use std::path::PathBuf;

use super::*;

/// A fresh directory under the system's temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "switchman-build-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `s` without whitespace and trailing commas: the output is formatted (prettyplease), the
/// checks are not about line breaks.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<String>().replace(",)", ")")
}

/// Whether `code` has `part`, whitespace aside.
fn has(code: &str, part: &str) -> bool {
    squash(code).contains(&squash(part))
}

/// The generated Rust of `proto` (file `x.proto`), package file `out`.
fn generate(name: &str, proto: &str, out: &str) -> String {
    let dir = Scratch::new(name);
    std::fs::write(dir.0.join("x.proto"), proto).unwrap();
    let out_dir = dir.0.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    Builder::new()
        .emit_rerun_if_changed(false)
        .prost_config(|c| {
            c.out_dir(&out_dir);
        })
        .compile(&[dir.0.join("x.proto")], &[&dir.0])
        .unwrap();
    std::fs::read_to_string(out_dir.join(out)).unwrap()
}

const GREETER: &str = r#"
syntax = "proto3";
package example.greeter;
option java_package = "org.example";

message HelloRequest { string name = 1; }
message HelloReply { string message = 1; }

// Says hello. [Not a link] <b>
service Greeter {
  // One greeting.
  rpc SayHello(HelloRequest) returns (HelloReply);
  rpc Type(HelloRequest) returns (HelloReply);
  rpc Watch(HelloRequest) returns (stream HelloReply);
  rpc Chat(stream HelloRequest) returns (stream HelloReply);
}
"#;

#[test]
fn a_client_per_service_registered_under_the_java_interface_called_by_the_proto_path() {
    let code = generate("greeter", GREETER, "example.greeter.rs");
    assert!(has(&code, "pub struct GreeterClient {"), "{code}");
    assert!(
        has(
            &code,
            r#"pub const INTERFACE: &'static str = "org.example.Greeter";"#
        ),
        "java_package + service: {code}"
    );
    assert!(
        has(
            &code,
            r#"pub const SERVICE: &'static str = "example.greeter.Greeter";"#
        ),
        "{code}"
    );
    assert!(
        has(
            &code,
            r#"#[prost(prost_path = "::switchman::prost")] pub struct HelloRequest"#
        ),
        "messages derive through switchman: {code}"
    );
    assert!(
        has(
            &code,
            "`rpc SayHello(example.greeter.HelloRequest) returns (example.greeter.HelloReply)`"
        ),
        "{code}"
    );
    assert!(
        has(
            &code,
            "pub async fn say_hello(&self, request: HelloRequest) -> ::switchman::Result<HelloReply>"
        ),
        "{code}"
    );
    assert!(
        has(
            &code,
            r#".call_idl(Self::SERVICE, "SayHello", &request, context)"#
        ),
        "the proto name is the method: {code}"
    );
    assert!(has(&code, "/// One greeting."), "rpc comments kept: {code}");
    assert!(
        has(&code, r"Says hello. \[Not a link\] \<b>"),
        "service comments escaped: {code}"
    );
    // A Rust keyword: a raw identifier, its `_with` twin without `r#`.
    assert!(has(&code, "pub async fn r#type(&self"), "{code}");
    assert!(has(&code, "pub async fn type_with("), "{code}");
    // A server-streaming rpc: a method answering a `Streaming` of its replies.
    assert!(
        has(
            &code,
            "pub async fn watch(&self, request: HelloRequest) -> \
             ::switchman::Result<::switchman::Streaming<HelloReply>>"
        ),
        "{code}"
    );
    assert!(
        has(
            &code,
            r#".call_idl_server_stream(Self::SERVICE, "Watch", &request, context)"#
        ),
        "{code}"
    );
    assert!(
        has(&code, "returns (stream example.greeter.HelloReply)`"),
        "{code}"
    );
    // Client and bidirectional streaming: no method, named in the client's docs.
    assert!(!has(&code, "fn chat"), "{code}");
    assert!(
        has(
            &code,
            "does not send streams): `Chat` (bidirectional streaming)."
        ),
        "{code}"
    );
}

#[test]
fn without_java_package_the_interface_is_the_proto_name() {
    let proto = r#"
syntax = "proto3";
package plain;
message M {}
service Echo { rpc Echo(M) returns (M); }
"#;
    let code = generate("plain", proto, "plain.rs");
    assert!(
        has(
            &code,
            r#"pub const INTERFACE: &'static str = "plain.Echo";"#
        ),
        "{code}"
    );
    assert!(
        has(&code, r#"pub const SERVICE: &'static str = "plain.Echo";"#),
        "{code}"
    );
    assert!(has(&code, "pub async fn echo(&self, request: M)"), "{code}");
}

#[test]
fn a_proto_that_does_not_compile_is_an_error_naming_it() {
    let dir = Scratch::new("bad");
    std::fs::write(dir.0.join("bad.proto"), "syntax = \"proto3\"; message {").unwrap();
    let e = Builder::new()
        .emit_rerun_if_changed(false)
        .prost_config(|c| {
            c.out_dir(&dir.0);
        })
        .compile(&[dir.0.join("bad.proto")], &[&dir.0])
        .unwrap_err();
    assert!(e.to_string().contains("bad.proto"), "{e}");
}
