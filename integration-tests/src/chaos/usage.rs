//! This process's memory and CPU time, from `/proc/self` (Linux): the consumer-side figures of
//! the hostile-peer scenarios.

use std::time::Duration;

/// Resident memory and CPU time of this process at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Resident set size now, in bytes (`VmRSS`).
    pub rss: u64,
    /// The largest resident set size since the last [`reset_peak`] (`VmHWM`), in bytes.
    pub peak: u64,
    /// User and system CPU time used so far.
    pub cpu: Duration,
}

/// Resets the peak resident set size to the current one (`echo 5 > /proc/self/clear_refs`).
///
/// # Panics
/// When the kernel refuses it: the peak figure would mean nothing.
pub fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5")
        .unwrap_or_else(|e| panic!("reset the peak RSS (/proc/self/clear_refs): {e}"));
}

/// This process's usage now.
///
/// # Panics
/// When `/proc/self` cannot be read.
pub fn usage() -> Usage {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/self/status"))
            * 1024
    };
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // Fields after the command name (which is in parentheses and may hold spaces): utime and
    // stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let after = &stat[stat.rfind(')').expect("a command name in /proc/self/stat") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // USER_HZ is 100 on every Linux configuration Rust supports.
    Usage {
        rss: kib("VmRSS:"),
        peak: kib("VmHWM:"),
        cpu: Duration::from_millis(ticks * 10),
    }
}

/// `bytes` as whole MiB, for the figures line.
pub fn mib(bytes: u64) -> String {
    format!("{}MiB", bytes.div_ceil(1 << 20))
}
