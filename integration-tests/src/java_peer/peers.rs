//! Where the built Java peers are: `$SWITCHMAN_JAVA_PEERS`, else what
//! `scripts/install-java-peers` builds; whether the Java tests skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The interface every Java peer serves.
pub const DEMO_SERVICE: &str = "io.switchman.peers.DemoService";

/// The protobuf (IDL) service of `peers/java/src/main/proto/greeter.proto` as Dubbo registers
/// it (`java_package` + service; `--service idl`). Its request paths name
/// [`IDL_PROTO_SERVICE`].
pub const IDL_SERVICE: &str = "io.switchman.peers.idl.Greeter";

/// The proto's `package.Service` of [`IDL_SERVICE`]: the service in its request paths.
pub const IDL_PROTO_SERVICE: &str = "switchman.idl.Greeter";

/// The jar (beside `switchman-java-peers.jar`) holding the upgraded `DemoService` and
/// `DemoServiceImpl` (`peers/java/src/v2/java`); its manifest puts the main jar after it.
pub const DEMO_SERVICE_V2_JAR: &str = "switchman-java-peers-v2.jar";

/// Whether the tests that start a JVM must skip: only when `scripts/test` found no JDK or Maven
/// and said so (`SWITCHMAN_NO_JAVA=1`). Anywhere else a missing peer fails the test.
pub fn skipped(test: &str) -> bool {
    let skip = std::env::var_os("SWITCHMAN_NO_JAVA").is_some_and(|v| v == "1");
    if skip {
        eprintln!("{test}: skipped, no JDK or Maven on this machine (SWITCHMAN_NO_JAVA=1)");
    }
    skip
}

/// The directory with `switchman-java-peers.jar` and `lib/`.
///
/// # Panics
/// When `$SWITCHMAN_JAVA_PEERS` is not set and `scripts/install-java-peers` fails (no Java or
/// Maven, or the build failed); the message says which.
pub fn peers_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = match std::env::var("SWITCHMAN_JAVA_PEERS") {
            Ok(d) if !d.is_empty() => PathBuf::from(d),
            _ => install(),
        };
        assert!(
            dir.join("switchman-java-peers.jar").is_file(),
            "{} has no switchman-java-peers.jar: run scripts/install-java-peers (scripts/test does) \
             or set SWITCHMAN_JAVA_PEERS to the directory it prints",
            dir.display()
        );
        dir
    })
}

/// Runs `scripts/install-java-peers` and returns the directory it prints.
fn install() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-java-peers");
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    match out.status.code() {
        Some(0) => {}
        Some(3) => panic!(
            "the Java peers need java and mvn on PATH (install-java-peers exited 3); \
             SWITCHMAN_JAVA_PEERS is not set either"
        ),
        _ => panic!(
            "{} failed ({}): see its log above; SWITCHMAN_JAVA_PEERS is not set",
            script.display(),
            out.status
        ),
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!dir.is_empty(), "install-java-peers printed no directory");
    PathBuf::from(dir)
}
