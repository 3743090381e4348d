//! The code `switchman-build` generates for the Java peers' protobuf service
//! (`integration-tests/peers/java/src/main/proto/greeter.proto`), compiled by this crate's
//! `build.rs` as a user's would be; `tests/` call it against Java Dubbo providers.

/// Package `switchman.idl`: the messages and `GreeterClient`.
pub mod greeter {
    switchman::include_proto!("switchman.idl");
}
