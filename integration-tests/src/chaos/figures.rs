//! The one line of figures every scenario prints (and the file CI shows).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

// ---------------------------------------------------------------------------------------------
// Figures
// ---------------------------------------------------------------------------------------------

/// The one line of figures a scenario prints: calls, failed, success %, attempts per call,
/// max recovery time (defined per scenario, in the line's note), the longest caller-visible
/// gap between two successful calls, and scenario-specific figures.
#[derive(Debug, Clone)]
pub struct Figures {
    id: String,
    title: String,
    calls: u64,
    failed: u64,
    attempts: u64,
    recovery: Option<Duration>,
    max_gap: Option<Duration>,
    extra: Vec<(String, String)>,
    note: String,
}

impl Figures {
    /// Figures `id` (`"1"`, `"5a"`...) titled `title` for `calls`, with `attempts` counted on
    /// the consumer side.
    pub fn new(id: &str, title: &str, calls: &Calls, attempts: u64) -> Figures {
        Figures {
            id: id.to_string(),
            title: title.to_string(),
            calls: calls.count(),
            failed: calls.failed(),
            attempts,
            recovery: None,
            max_gap: Some(calls.max_success_gap()),
            extra: Vec::new(),
            note: String::new(),
        }
    }

    /// Sets the recovery time (`None` prints `n/a`).
    pub fn recovery(mut self, d: Option<Duration>) -> Self {
        self.recovery = d;
        self
    }

    /// Drops the max-gap figure (for scenarios where calls are meant to fail).
    pub fn without_gap(mut self) -> Self {
        self.max_gap = None;
        self
    }

    /// Adds a scenario-specific `key=value` figure.
    pub fn with(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.extra.push((key.to_string(), value.to_string()));
        self
    }

    /// Sets the note (what "recovery" means here, what was done).
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// Successful calls in percent.
    pub fn success_pct(&self) -> f64 {
        success_pct(self.calls, self.failed)
    }

    /// Attempts per call.
    pub fn attempts_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.attempts as f64 / self.calls as f64
        }
    }

    /// The line: `chaos 1 kill -9 provider: calls=2400 failed=0 success=100.000%
    /// attempts/call=1.004 recovery=12ms max-gap=15ms ... (note)`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "chaos {} {}: calls={} failed={} success={:.3}% attempts/call={:.3} recovery={}",
            self.id,
            self.title,
            self.calls,
            self.failed,
            self.success_pct(),
            self.attempts_per_call(),
            self.recovery.map_or_else(|| "n/a".to_string(), ms),
        );
        if let Some(gap) = self.max_gap {
            line.push_str(&format!(" max-gap={}", ms(gap)));
        }
        for (k, v) in &self.extra {
            line.push_str(&format!(" {k}={v}"));
        }
        if !self.note.is_empty() {
            line.push_str(&format!(" ({})", self.note));
        }
        line
    }

    /// Prints the line on stderr and writes it to `dir/chaos-<id>.txt` (replacing the previous
    /// run's), then rewrites `dir/chaos-figures.txt` as every `chaos-<id>.txt` there in
    /// scenario order.
    ///
    /// # Panics
    /// When the files cannot be written.
    pub fn emit(&self, dir: &Path) {
        let line = self.line();
        eprintln!("{line}");
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| panic!("create the figures directory {}: {e}", dir.display()));
        write_atomically(&dir.join(format!("chaos-{}.txt", self.id)), &(line + "\n"));
        let mut parts: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("chaos-") && n.ends_with(".txt"))
                    && p.file_name().and_then(|n| n.to_str()) != Some(FIGURES_FILE)
            })
            .collect();
        // Scenario order: `chaos-2` before `chaos-10`, `chaos-5a` before `chaos-5b`.
        parts.sort_by_key(|p| scenario_order(p));
        let all: String = parts
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        write_atomically(&dir.join(FIGURES_FILE), &all);
    }
}

/// The sort key of `dir/chaos-<id>.txt`: the id's number, then its letters.
fn scenario_order(path: &Path) -> (u64, String) {
    let id = path
        .file_stem()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("chaos-"))
        .unwrap_or_default();
    let digits = id.chars().take_while(char::is_ascii_digit).count();
    (
        id[..digits].parse().unwrap_or(u64::MAX),
        id[digits..].to_string(),
    )
}

/// The file holding every scenario's line.
pub const FIGURES_FILE: &str = "chaos-figures.txt";

pub(super) fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_files_sort_in_scenario_order() {
        let mut files: Vec<PathBuf> = ["10", "2", "5b", "9e", "5a", "1", "9a"]
            .iter()
            .map(|id| PathBuf::from(format!("/tmp/chaos-{id}.txt")))
            .collect();
        files.sort_by_key(|p| scenario_order(p));
        let ids: Vec<String> = files
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            ids,
            [
                "chaos-1", "chaos-2", "chaos-5a", "chaos-5b", "chaos-9a", "chaos-9e", "chaos-10"
            ]
        );
    }
}
