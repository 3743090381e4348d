//! A log sink the tests read back: what a `tracing_subscriber::fmt()` layer writes (through
//! `.with_writer(move || log.clone())`), kept in memory, searched by line.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The captured output; clones share it.
#[derive(Debug, Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// The lines containing `needle`.
    pub fn lines(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// How often `needle` occurs.
    pub fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }

    /// Waits until `needle` was logged, for at most `within`.
    ///
    /// # Panics
    /// When it was not, naming `what` and showing the whole log.
    pub async fn until(&self, what: &str, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.count(needle) == 0 {
            assert!(
                Instant::now() < deadline,
                "{what}: no {needle:?} within {within:?} in the log:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// How many lines contain every one of `needles`.
    pub fn count_lines(&self, needles: &[&str]) -> usize {
        self.text()
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    /// Waits until at least `n` lines contain every one of `needles`, for at most `within`: a
    /// barrier on events the code logs (a check done, a retry made), so a test can assert what
    /// did NOT happen meanwhile without sleeping.
    ///
    /// # Panics
    /// When there are fewer, naming `what` and showing the whole log.
    pub async fn until_lines(&self, what: &str, needles: &[&str], n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let seen = self.count_lines(needles);
            if seen >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {seen} of {n} lines with {needles:?} within {within:?} in the log:\n{}",
                self.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until a line holds every one of `parts`, for at most `within`: that line, or the
    /// whole log when none did in time.
    pub async fn line_with(&self, parts: &[&str], within: Duration) -> Result<String, String> {
        let deadline = Instant::now() + within;
        loop {
            let text = self.text();
            if let Some(line) = text.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
                return Ok(line.to_string());
            }
            if Instant::now() > deadline {
                return Err(text);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
