//! The Prometheus scrape endpoint for the `metrics` facade (feature `prometheus`).

use std::net::SocketAddr;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use switchman_cluster::telemetry::{self, DURATION_BUCKETS};
use switchman_core::{Error, Result};

fn builder() -> Result<PrometheusBuilder> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_duration_seconds".to_string()),
            &DURATION_BUCKETS,
        )
        .map_err(|e| Error::bad_config(format!("Prometheus buckets: {e}")))
}

/// Serves every metric recorded through the `metrics` facade (Switchman's and the
/// application's) in the Prometheus text format at `http://{addr}/metrics` (any path answers),
/// from a task of the current Tokio runtime (or a thread of its own outside one). Installs
/// the process-wide recorder, so call it once, at start-up; the duration histograms get
/// [`DURATION_BUCKETS`] (0.5 ms to 10 s).
///
/// `addr` is bound as given: pass a loopback address (`127.0.0.1:9464`) unless the endpoint
/// must be reachable from other hosts.
///
/// ```no_run
/// # fn main() -> switchman::Result<()> {
/// switchman::serve_metrics("127.0.0.1:9464".parse().unwrap())?;
/// # Ok(()) }
/// ```
///
/// Fails (naming `addr`) when the address cannot be bound or a recorder is installed already.
pub fn serve_metrics(addr: SocketAddr) -> Result<()> {
    builder()?
        .with_http_listener(addr)
        .install()
        .map_err(|e| Error::bad_config(format!("metrics endpoint on {addr}: {e}")))?;
    telemetry::describe();
    Ok(())
}

/// Installs the Prometheus recorder without a listener and returns the handle that renders
/// the scrape text (`handle.render()`), for an HTTP server of your own. Call
/// `handle.run_upkeep()` now and then (every few seconds) when nothing scrapes it often.
pub fn install_metrics_recorder() -> Result<PrometheusHandle> {
    let handle = builder()?
        .install_recorder()
        .map_err(|e| Error::bad_config(format!("metrics recorder: {e}")))?;
    telemetry::describe();
    Ok(handle)
}
