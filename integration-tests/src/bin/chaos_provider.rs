//! A provider PROCESS for the chaos suite (`tests/chaos.rs`), so a scenario can `kill -9` it.
//!
//! Serves Switchman's default HTTP mapping (`POST /{service}/{method}`) through
//! [`HttpProvider`] on `127.0.0.1:0`, prints the bound port on stdout (one line), and serves
//! until it is killed or its stdin closes (the test process that spawned it is gone: no
//! orphan outlives a crashed test run).
//!
//! ```text
//! chaos_provider [--name NAME] [--delay-ms N] [--jitter-ms N] [--status CODE]
//! ```
//!
//! * `--delay-ms N`, `--jitter-ms J`: every answer waits `N + uniform(0..=J)` ms.
//! * `--status CODE`: answer every request with this HTTP status (for example 503) instead of
//!   `200 {"from": NAME}`.

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use switchman_cluster::provider::{HttpProvider, ProviderReply};

#[derive(Debug, Clone)]
struct Options {
    name: String,
    delay_ms: u64,
    jitter_ms: u64,
    status: Option<u16>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        name: "provider".into(),
        delay_ms: 0,
        jitter_ms: 0,
        status: None,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--name" => o.name = value()?,
            "--delay-ms" => o.delay_ms = number(&flag, &value()?)?,
            "--jitter-ms" => o.jitter_ms = number(&flag, &value()?)?,
            "--status" => {
                let code = number(&flag, &value()?)?;
                if !(100..=599).contains(&code) {
                    return Err(format!("--status {code} is not an HTTP status"));
                }
                o.status = Some(code as u16);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn number(flag: &str, text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{flag} expects a whole number, got {text:?}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let opts = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("chaos_provider: {e}");
            std::process::exit(2);
        }
    };
    let handler_opts = opts.clone();
    let provider = HttpProvider::serve(([127, 0, 0, 1], 0).into(), move |_req| {
        let o = handler_opts.clone();
        Box::pin(async move {
            let wait = o.delay_ms
                + if o.jitter_ms > 0 {
                    fastrand::u64(0..=o.jitter_ms)
                } else {
                    0
                };
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            match o.status {
                Some(code) => ProviderReply::Status(code, format!("{} answers {code}", o.name)),
                None => ProviderReply::Ok(json!({ "from": o.name })),
            }
        })
    })
    .await
    .unwrap_or_else(|e| {
        eprintln!("chaos_provider: cannot bind 127.0.0.1:0: {e}");
        std::process::exit(1);
    });
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", provider.addr().port())
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(1);
    }
    drop(out);
    // Serve until stdin reaches end of file (the parent closed it or died).
    switchman_integration_tests::chaos::stdin_closed().await;
    drop(provider);
}
