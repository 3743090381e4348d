//! `--metrics ADDR`: a Prometheus scrape endpoint for the commands that run for a while
//! (`call`, `provider`, `watch`, `demo`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The `--metrics` option, flattened into each command's arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct MetricsArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics while the command runs. `PORT` alone
    /// means 127.0.0.1:PORT; the endpoint is on loopback unless you give another address.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub(crate) metrics: Option<SocketAddr>,
}

/// `9464`, `127.0.0.1:9464`, `localhost:9464`, `[::1]:9464`, `0.0.0.0:9464` (asked for).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(port) = s.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    Err(format!(
        "{s:?} is not an address to serve metrics on: expected PORT, IP:PORT or localhost:PORT (e.g. 127.0.0.1:9464)"
    ))
}

impl MetricsArgs {
    /// Starts the endpoint when asked for (inside the command's Tokio runtime). The error
    /// names the address.
    pub(crate) fn start(&self) -> Result<(), String> {
        let Some(addr) = self.metrics else {
            return Ok(());
        };
        switchman::serve_metrics(addr).map_err(|e| format!("--metrics {addr}: {}", e.message()))?;
        tracing::info!(%addr, "serving Prometheus metrics at http://{addr}/metrics");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_and_bad_input_is_named() {
        assert_eq!(
            parse_addr("9464").unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            parse_addr("localhost:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(parse_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        assert_eq!(
            parse_addr("0.0.0.0:9464").unwrap(),
            "0.0.0.0:9464".parse().unwrap(),
            "another address when given"
        );
        for bad in ["", "x:1", "127.0.0.1", "127.0.0.1:99999", "localhost"] {
            let e = parse_addr(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
