//! Starting a JVM on the peers' jar, and handling its process: stderr collected, bounded waits.

use std::io::Read;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::flags::{BENCH_JVM_FLAGS, JVM_FLAGS};
use super::peers::peers_dir;

/// Most of a peer's stderr kept for panic messages (the tail is kept).
const STDERR_CAP: usize = 256 * 1024;

/// The system property that makes a peer exit when its stdin reaches end of file (set for
/// providers, whose stdin is a pipe from this process; `Main.java`).
const EXIT_WITH_PARENT: &str = "switchman.peer.exitWithParent";

/// `java <JVM_FLAGS> -jar <peers jar> <program>`, run from the temp directory.
pub(super) fn java(program: &str) -> Command {
    java_with(program, JVM_FLAGS)
}

/// `java <jvm_flags> -jar <peers jar> <program>`, run from the temp directory.
pub(super) fn java_with(program: &str, jvm_flags: &[&str]) -> Command {
    java_jar("switchman-java-peers.jar", program, jvm_flags)
}

/// `java <jvm_flags> -jar <peers dir>/<jar> <program>`, run from the temp directory; with the
/// jar's class data sharing archive (`<jar>.jsa`, made by `scripts/install-java-peers`) when
/// there is one, except for the benchmark's JVMs ([`BENCH_JVM_FLAGS`]: their figures stay
/// comparable). The JVM's own warnings (an archive it cannot use, say) go to stderr, not into
/// the peer's stdout protocol.
pub(super) fn java_jar(jar: &str, program: &str, jvm_flags: &[&str]) -> Command {
    let path = peers_dir().join(jar);
    assert!(
        path.is_file(),
        "{} is missing: SWITCHMAN_JAVA_PEERS is an older build; rerun scripts/install-java-peers",
        path.display()
    );
    let mut cmd = Command::new("java");
    cmd.args(jvm_flags);
    let archive = peers_dir().join(format!("{jar}.jsa"));
    if jvm_flags != BENCH_JVM_FLAGS && archive.is_file() {
        cmd.arg(format!("-XX:SharedArchiveFile={}", archive.display()))
            .args(["-Xlog:disable", "-Xlog:all=warning:stderr"]);
    }
    cmd.arg(format!("-D{EXIT_WITH_PARENT}={}", program == "provider"))
        .arg("-jar")
        .arg(path)
        .arg(program)
        .current_dir(std::env::temp_dir());
    cmd
}

/// Collects a child's stderr into a shared, capped buffer.
pub(super) fn collect_stderr<R: Read + Send + 'static>(
    mut from: R,
    into: Arc<Mutex<String>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut s = into.lock().unwrap_or_else(|e| e.into_inner());
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            if s.len() > STDERR_CAP {
                let mut cut = s.len() - STDERR_CAP;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                s.drain(..cut);
            }
        }
    })
}

/// Waits for `child` up to `timeout`; kills it (SIGKILL) when it is still running then.
pub(super) fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}
