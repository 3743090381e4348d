//! `--admin ADDR`: the admin endpoint (Dubbo's QOS port, JSON over HTTP) of the commands that
//! run for a while (`call`, `provider`, `watch`, `demo`); see `switchman::admin`.

use std::net::SocketAddr;

use switchman::admin::Admin;

use crate::metrics::MetricsArgs;

/// The `--admin` option, flattened into each command's arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AdminArgs {
    /// Serve the admin endpoint at http://ADDR while the command runs: GET /services,
    /// /snapshot/{service}, /metrics; providers also take POST /offline and /online. `PORT`
    /// alone means 127.0.0.1:PORT; the endpoint is on loopback unless you give another
    /// address, and takes POST commands from loopback only.
    #[arg(long, value_name = "ADDR", value_parser = parse_admin_addr)]
    pub(crate) admin: Option<SocketAddr>,
}

/// `22222`, `127.0.0.1:22222`, `localhost:22222`, `[::1]:22222`, `0.0.0.0:22222` (asked for).
pub(crate) fn parse_admin_addr(s: &str) -> Result<SocketAddr, String> {
    crate::metrics::parse_addr(s).map_err(|_| {
        format!(
            "{:?} is not an address for the admin endpoint: expected PORT, IP:PORT or localhost:PORT (e.g. 127.0.0.1:22222)",
            s.trim()
        )
    })
}

impl AdminArgs {
    /// Starts `--metrics` and `--admin` (inside the command's Tokio runtime). With `--admin`
    /// the process's one Prometheus recorder is installed here and served at the admin
    /// endpoint's `/metrics`, and at `--metrics` too when given. Prints the endpoint's address
    /// on stderr (`switchman COMMAND: admin endpoint on http://ADDR`). Errors name the option.
    pub(crate) async fn start(
        &self,
        metrics: &MetricsArgs,
        command: &str,
    ) -> Result<Option<Admin>, String> {
        let Some(addr) = self.admin else {
            metrics.start()?;
            return Ok(None);
        };
        let handle = switchman::install_metrics_recorder()
            .map_err(|e| format!("--admin {addr}: {}", e.message()))?;
        switchman::admin::set_metrics_handle(handle.clone());
        if let Some(m) = metrics.metrics {
            let bound = switchman::admin::serve_scrape(m, handle)
                .await
                .map_err(|e| format!("--metrics {m}: {}", e.message()))?;
            tracing::info!(%bound, "serving Prometheus metrics at http://{bound}/metrics");
        }
        let admin = Admin::bind(addr)
            .await
            .map_err(|e| format!("--admin {addr}: {}", e.message()))?;
        eprintln!(
            "switchman {command}: admin endpoint on http://{}",
            admin.addr()
        );
        Ok(Some(admin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_and_bad_input_is_named() {
        assert_eq!(
            parse_admin_addr("22222").unwrap(),
            "127.0.0.1:22222".parse().unwrap()
        );
        let e = parse_admin_addr("127.0.0.1:x").unwrap_err();
        assert!(
            e.contains("\"127.0.0.1:x\"") && e.contains("admin endpoint"),
            "{e}"
        );
    }
}
