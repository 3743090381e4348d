//! The Rust client of the Java peers' IDL service, from the very `.proto` their Maven build
//! compiles.
fn main() -> std::io::Result<()> {
    let dir = "../integration-tests/peers/java/src/main/proto";
    switchman_build::compile_protos(&[format!("{dir}/greeter.proto")], &[dir])
}
