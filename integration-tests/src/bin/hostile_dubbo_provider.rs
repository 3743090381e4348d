//! A dubbo:// provider PROCESS for the hostile-peer scenarios of the chaos suite
//! (`tests/chaos.rs`, scenarios 9a–9e): it answers calls as a well-behaved provider does, or
//! misbehaves as a hostile or broken one would. A process of its own, so the consumer's peak
//! memory and CPU time are the test process's alone.
//!
//! Speaks the exchange protocol directly (16-byte header, Hessian2 body): every two-way call
//! is answered `OK` with the provider's name as the value, unless `--misbehave` says
//! otherwise. Prints the bound port of `127.0.0.1:0` on stdout (one line) and serves until it
//! is killed or its stdin closes.
//!
//! ```text
//! hostile_dubbo_provider [--name NAME] [--misbehave none|heartbeat-flood|hessian-bomb|never-reads|huge-length|trickle]
//! ```
//!
//! * `heartbeat-flood`: answers calls, and writes two-way heartbeat requests without pause
//!   (the consumer must answer or drop them without queueing without bound).
//! * `hessian-bomb`: answers every call with about 9 KB of Hessian2 whose back references to
//!   one shared 1000-int list are 4 million values if copied.
//! * `never-reads`: accepts connections and never reads from them nor answers.
//! * `huge-length`: answers every call with a header announcing a 2 GiB body, and no body.
//! * `trickle`: answers every call one byte every 20 ms.

use std::io::Write;
use std::time::Duration;

use switchman_cluster::dubbo::exchange::{Frame, FrameReader, HESSIAN2, Header, status};
use switchman_hessian::{Encoder, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Misbehaviour {
    None,
    HeartbeatFlood,
    HessianBomb,
    NeverReads,
    HugeLength,
    Trickle,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<(String, Misbehaviour), String> {
    let mut name = "provider".to_string();
    let mut how = Misbehaviour::None;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--name" => name = value()?,
            "--misbehave" => {
                how = match value()?.as_str() {
                    "none" => Misbehaviour::None,
                    "heartbeat-flood" => Misbehaviour::HeartbeatFlood,
                    "hessian-bomb" => Misbehaviour::HessianBomb,
                    "never-reads" => Misbehaviour::NeverReads,
                    "huge-length" => Misbehaviour::HugeLength,
                    "trickle" => Misbehaviour::Trickle,
                    other => return Err(format!("unknown misbehaviour {other:?}")),
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((name, how))
}

/// The body of an OK answer: flag 1 (a value), then `value`'s Hessian2.
fn value_body(value: &Value) -> Vec<u8> {
    let mut e = Encoder::new();
    e.write_int(1);
    e.write(value);
    e.into_bytes()
}

/// Flag 1, then one list holding a 1000-int list L and 4000 back references to L.
fn bomb_body() -> Vec<u8> {
    let mut e = Encoder::new();
    e.write_int(1);
    let mut body = e.into_bytes();
    body.push(0x58); // a fixed-length untyped list (ref 0), its length next
    let mut e = Encoder::new();
    e.write_int(4001);
    e.write(&Value::list(
        (0..1000).map(|i| Value::Int(i % 40)).collect(),
    )); // ref 1
    body.extend(e.into_bytes());
    for _ in 0..4000 {
        body.extend([0x51, 0x91]); // ref 1
    }
    body
}

/// The frame answering call `id`.
fn answer(id: i64, how: Misbehaviour, name: &str) -> Vec<u8> {
    let body = match how {
        Misbehaviour::HessianBomb => bomb_body(),
        Misbehaviour::HugeLength => {
            return Header::response(id, HESSIAN2, status::OK, false, i32::MAX)
                .encode()
                .to_vec();
        }
        _ => value_body(&Value::string(name)),
    };
    let mut frame = Header::response(id, HESSIAN2, status::OK, false, body.len() as i32)
        .encode()
        .to_vec();
    frame.extend(body);
    frame
}

async fn serve(stream: TcpStream, how: Misbehaviour, name: String) {
    if how == Misbehaviour::NeverReads {
        // Hold the connection open; read nothing, write nothing.
        let _held = stream;
        std::future::pending::<()>().await;
        return;
    }
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = async move {
        let mut beats = Vec::new();
        for i in 0..64 {
            beats.extend(Header::event_request(-1 - i, HESSIAN2, true, 1).encode());
            beats.push(b'N');
        }
        loop {
            if how == Misbehaviour::HeartbeatFlood {
                while let Ok(frame) = rx.try_recv() {
                    wr.write_all(&frame).await?;
                }
                wr.write_all(&beats).await?;
                tokio::task::yield_now().await;
                continue;
            }
            let Some(frame) = rx.recv().await else {
                return Ok::<(), std::io::Error>(());
            };
            if how == Misbehaviour::Trickle {
                for b in frame {
                    wr.write_all(&[b]).await?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } else {
                wr.write_all(&frame).await?;
            }
        }
    };
    let reader = async move {
        let mut frames = FrameReader::new(0);
        loop {
            match rd.read_buf(frames.buffer()).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            while let Ok(Some(frame)) = frames.next_frame() {
                if let Frame::Whole(h, _) = frame
                    && h.is_request()
                    && !h.is_event()
                    && h.is_two_way()
                    && tx.send(answer(h.id, how, &name)).is_err()
                {
                    return;
                }
            }
        }
    };
    tokio::select! {
        _ = writer => {}
        () = reader => {}
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (name, how) = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hostile_dubbo_provider: {e}");
            std::process::exit(2);
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| {
        eprintln!("hostile_dubbo_provider: cannot bind 127.0.0.1:0: {e}");
        std::process::exit(1);
    });
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{port}").and_then(|()| out.flush()).is_err() {
        std::process::exit(1);
    }
    drop(out);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, how, name.clone()));
        }
    });
    // Serve until stdin reaches end of file (the parent closed it or died).
    switchman_integration_tests::chaos::stdin_closed().await;
}
