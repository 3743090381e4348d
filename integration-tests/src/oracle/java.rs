//! The Java side: one JVM of the `oracle` peer answers a batch.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::java_peer::peers_dir;

use super::*;

// ---------------------------------------------------------------------------------------------
// the Java side

/// The Java oracle's answers for one batch, by case id.
#[derive(Debug)]
pub struct JavaRun {
    /// `{id: answer}`.
    pub answers: BTreeMap<String, Value>,
    /// Dubbo's version, as `Version.getVersion()` reports it.
    pub dubbo_version: String,
    /// Time the Java side spent on the cases (after start-up).
    pub elapsed_ms: u64,
    /// Wall time of the whole JVM run.
    pub wall: Duration,
}

/// Runs the Java oracle (one JVM) on every case.
///
/// # Errors
/// When java cannot start, the run exceeds [`JAVA_TIMEOUT`], exits with an error or prints no
/// result; the message carries its stderr.
pub fn run_java(cases: &[Case]) -> Result<JavaRun, String> {
    let dir = std::env::temp_dir().join(crate::unique("switchman-oracle"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let input: PathBuf = dir.join("cases.json");
    let output: PathBuf = dir.join("answers.json");
    let doc = json!({"cases": cases.iter().map(|c| &c.input).collect::<Vec<_>>()});
    std::fs::write(&input, doc.to_string()).map_err(|e| format!("{}: {e}", input.display()))?;
    let started = Instant::now();
    let mut child = Command::new("java")
        .args(JVM_FLAGS)
        .arg("-jar")
        .arg(peers_dir().join("switchman-java-peers.jar"))
        .arg("oracle")
        .arg("--cases")
        .arg(&input)
        .arg("--out")
        .arg(&output)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("java does not start: {e}"))?;
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() > JAVA_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let wall = started.elapsed();
    let err = err_reader.join().unwrap_or_default();
    let tail: String = {
        let cut = err.len().saturating_sub(8000);
        let mut c = cut;
        while !err.is_char_boundary(c) {
            c += 1;
        }
        err[c..].to_string()
    };
    match status {
        Some(s) if s.success() => {}
        Some(s) => return Err(format!("java oracle exited {s}; stderr:\n{tail}")),
        None => {
            return Err(format!(
                "java oracle ran longer than {JAVA_TIMEOUT:?} and was killed; stderr:\n{tail}"
            ));
        }
    }
    let text = std::fs::read_to_string(&output)
        .map_err(|e| format!("{}: {e}; stderr:\n{tail}", output.display()))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("the oracle printed bad JSON: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut answers = BTreeMap::new();
    for r in doc["results"].as_array().into_iter().flatten() {
        if let Some(id) = r["id"].as_str() {
            let mut a = r.clone();
            if let Some(o) = a.as_object_mut() {
                o.remove("id");
            }
            answers.insert(id.to_string(), a);
        }
    }
    Ok(JavaRun {
        answers,
        dubbo_version: doc["dubbo_version"].as_str().unwrap_or("?").to_string(),
        elapsed_ms: doc["elapsed_ms"].as_u64().unwrap_or(0),
        wall,
    })
}
