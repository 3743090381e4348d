//! Log lines captured on this thread: the TLS and SASL tests read what an operator would.

use switchman_integration_tests::logs::CapturedLog;
use tracing_subscriber::util::SubscriberInitExt;

/// The log lines (debug and up) written on this thread while the returned guard lives. A
/// current-thread runtime runs the registry's tasks here too.
pub fn debug_logs_on_this_thread() -> (CapturedLog, impl Drop) {
    let logs = CapturedLog::default();
    let writer = logs.clone();
    let guard = tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish()
        .set_default();
    (logs, guard)
}
