//! The transport against an in-process fake provider on 127.0.0.1 that speaks the exchange
//! framing with raw bodies.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use switchman_core::ErrorKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::exchange::{FLAG_EVENT, FLAG_REQUEST, FLAG_TWO_WAY, HEADER_LEN, event};
use super::*;

const LONG: Duration = Duration::from_secs(10);

fn config() -> ExchangeConfig {
    ExchangeConfig {
        heartbeat: Duration::from_secs(60),
        payload: DEFAULT_PAYLOAD,
        connect_timeout: Duration::from_secs(3),
        ..ExchangeConfig::default()
    }
}

/// A fake provider: `serve(n, socket)` runs for the n-th accepted connection (from 0).
/// Returns its address and the number of connections accepted so far.
async fn fake<F, Fut>(serve: F) -> (String, Arc<AtomicUsize>)
where
    F: Fn(usize, TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let n = count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(n, socket));
        }
    });
    (address, accepted)
}

async fn read_frame(s: &mut TcpStream) -> Option<(Header, Vec<u8>)> {
    let mut head = [0u8; 16];
    s.read_exact(&mut head).await.ok()?;
    let h = Header::decode(&head).unwrap();
    let mut body = vec![0; h.len as usize];
    s.read_exact(&mut body).await.ok()?;
    Some((h, body))
}

async fn write_frame(s: &mut TcpStream, h: Header, body: &[u8]) {
    let mut v = h.encode().to_vec();
    v.extend_from_slice(body);
    s.write_all(&v).await.unwrap();
}

fn ok(id: i64, body: &[u8]) -> Header {
    Header::response(id, HESSIAN2, status::OK, false, body.len() as i32)
}

/// Answers heartbeats, and every call with its own body.
async fn echo(_: usize, mut s: TcpStream) {
    while let Some((h, body)) = read_frame(&mut s).await {
        if !h.is_two_way() {
            continue;
        }
        if h.is_event() {
            let reply = Header::response(h.id, h.serialization(), status::OK, true, 1);
            write_frame(&mut s, reply, b"N").await;
        } else {
            write_frame(&mut s, ok(h.id, &body), &body).await;
        }
    }
}

/// Waits until `cond` holds, for at most 5 s.
async fn until(mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < give_up, "condition not reached in 5 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn header_round_trip_and_flags() {
    let cases = [
        (Header::request(1, HESSIAN2, true, 10), 0xC2),
        (Header::request(-7, HESSIAN2, false, 0), 0x82),
        (Header::event_request(i64::MAX, HESSIAN2, true, 1), 0xE2),
        (Header::event_request(3, FASTJSON2, false, 2), 0xB7),
        (
            Header::response(i64::MIN, HESSIAN2, status::OK, false, 5),
            0x02,
        ),
        (Header::response(9, HESSIAN2, status::OK, true, 1), 0x22),
        (
            Header::response(9, PROTOBUF, status::SERVICE_ERROR, false, i32::MAX),
            0x16,
        ),
    ];
    for (h, flags) in cases {
        let bytes = h.encode();
        assert_eq!(&bytes[..2], &[0xDA, 0xBB]);
        assert_eq!(bytes[2], flags, "{h:?}");
        assert_eq!(Header::decode(&bytes).unwrap(), h);
    }
    let h = Header::request(0x0102_0304_0506_0708, HESSIAN2, true, 0x0A0B_0C0D);
    assert_eq!(
        h.encode(),
        [
            0xDA, 0xBB, 0xC2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D
        ]
    );
    let r = Header::response(
        5,
        HESSIAN2,
        status::SERVER_THREADPOOL_EXHAUSTED_ERROR,
        false,
        0,
    );
    let d = Header::decode(&r.encode()).unwrap();
    assert!(!d.is_request() && !d.is_event() && !d.is_two_way());
    assert_eq!((d.status, d.serialization(), d.id), (100, HESSIAN2, 5));
    let e = Header::decode(&Header::event_request(1, 23, true, 0).encode()).unwrap();
    assert!(e.is_request() && e.is_event() && e.is_two_way());
    assert_eq!(e.serialization(), FASTJSON2);
    assert_eq!((FLAG_REQUEST, FLAG_TWO_WAY, FLAG_EVENT), (0x80, 0x40, 0x20));

    let mut bad = h.encode();
    bad[1] = 0xBC;
    assert_eq!(Header::decode(&bad), Err(HeaderError::BadMagic(0xDABC)));
    assert!(HeaderError::BadMagic(0xDABC).to_string().contains("0xDABC"));
    let mut negative = h.encode();
    negative[12] = 0x80;
    assert!(matches!(
        Header::decode(&negative),
        Err(HeaderError::BadLength(_))
    ));
}

#[test]
fn status_codes_and_events() {
    use status::*;
    assert_eq!(
        [
            OK,
            CLIENT_TIMEOUT,
            SERVER_TIMEOUT,
            BAD_REQUEST,
            BAD_RESPONSE,
            SERVICE_NOT_FOUND,
            SERVICE_ERROR,
            SERVER_ERROR,
            CLIENT_ERROR,
            SERVER_THREADPOOL_EXHAUSTED_ERROR
        ],
        [20, 30, 31, 40, 50, 60, 70, 80, 90, 100]
    );
    use event::{Event, classify};
    assert_eq!(classify(HESSIAN2, &[0x01, b'R']), Event::Readonly);
    assert_eq!(classify(HESSIAN2, &[0x01, b'W']), Event::Writeable);
    assert_eq!(classify(HESSIAN2, b"N"), Event::Other);
    assert_eq!(
        classify(FASTJSON2, event::FASTJSON2_READONLY),
        Event::Readonly
    );
    assert_eq!(classify(FASTJSON2, event::FASTJSON2_NULL), Event::Other);
    assert_eq!(classify(HESSIAN2, b"R"), Event::Other, "exact for Hessian2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_requests_answered_out_of_order() {
    const N: usize = 200;
    let (address, _) = fake(|_, mut s: TcpStream| async move {
        let mut got = Vec::new();
        while got.len() < N {
            let (h, body) = read_frame(&mut s).await.unwrap();
            assert_eq!(h.flags, 0xC2);
            got.push((h.id, body));
        }
        let mut ids: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), N, "request ids are unique");
        // Reverse order, interleaved halves: nothing like the sending order.
        got.reverse();
        let (a, b) = got.split_at(N / 2);
        for (x, y) in a.iter().zip(b) {
            for (id, body) in [x, y] {
                let mut reply = b"re:".to_vec();
                reply.extend_from_slice(body);
                write_frame(&mut s, ok(*id, &reply), &reply).await;
            }
        }
        echo(0, s).await;
    })
    .await;
    let conn = Connection::connect(&address, config()).await.unwrap();
    let calls = (0..N).map(|i| {
        let conn = conn.clone();
        tokio::spawn(async move {
            let body = Bytes::from(format!("call {i}"));
            let r = conn.request(HESSIAN2, body, LONG).await.unwrap();
            assert_eq!(r.status, status::OK);
            assert_eq!(r.serialization, HESSIAN2);
            assert_eq!(r.body, format!("re:call {i}").as_bytes());
        })
    });
    for c in futures::future::join_all(calls).await {
        c.unwrap();
    }
    assert_eq!(conn.in_flight(), 0);
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn a_timed_out_request_fails_and_its_late_answer_is_dropped() {
    let (address, _) = fake(|_, mut s: TcpStream| async move {
        let (first, _) = read_frame(&mut s).await.unwrap();
        let (cancelled, _) = read_frame(&mut s).await.unwrap();
        let (second, body) = read_frame(&mut s).await.unwrap();
        // The late answers to the first two, then the third's.
        write_frame(&mut s, ok(first.id, b"late"), b"late").await;
        write_frame(&mut s, ok(cancelled.id, b""), b"").await;
        write_frame(&mut s, ok(second.id, &body), &body).await;
        echo(0, s).await;
    })
    .await;
    let conn = Connection::connect(&address, config()).await.unwrap();
    let started = Instant::now();
    let e = conn
        .request(
            HESSIAN2,
            Bytes::from_static(b"one"),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.is_retryable());
    assert!(
        e.message().contains(&address) && e.message().contains("100 ms"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(conn.in_flight(), 0, "the timed-out call left the map");
    let outer = Duration::from_millis(20);
    let dropped = tokio::time::timeout(outer, conn.request(HESSIAN2, Bytes::new(), LONG)).await;
    assert!(dropped.is_err());
    assert_eq!(conn.in_flight(), 0, "a cancelled call leaves the map too");
    let r = conn
        .request(HESSIAN2, Bytes::from_static(b"two"), LONG)
        .await
        .unwrap();
    assert_eq!(r.body, &b"two"[..]);
    assert_eq!(conn.late_responses(), 2);
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn the_provider_closing_fails_in_flight_calls_at_once_and_the_pool_reconnects() {
    let (address, accepted) = fake(|n, mut s: TcpStream| async move {
        if n == 0 {
            for _ in 0..5 {
                read_frame(&mut s).await.unwrap();
            }
            drop(s);
        } else {
            echo(n, s).await;
        }
    })
    .await;
    let pool = Pool::new(config());
    let conn = pool.get(&address, 0, LONG).await.unwrap();
    let started = Instant::now();
    let calls = (0..5).map(|i| {
        let conn = conn.clone();
        async move { conn.request(HESSIAN2, Bytes::from(vec![i; 8]), LONG).await }
    });
    for r in futures::future::join_all(calls).await {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
        assert!(e.is_retryable());
        assert!(e.message().contains(&address), "{e}");
        assert!(e.message().contains("closed the connection"), "{e}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "failed at once, not after the 10 s timeout"
    );
    assert!(conn.is_closed());
    let e = conn
        .request(HESSIAN2, Bytes::from_static(b"x"), LONG)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport);

    let again = pool.get(&address, 0, LONG).await.unwrap();
    assert!(!again.same(&conn));
    let r = again
        .request(HESSIAN2, Bytes::from_static(b"back"), LONG)
        .await
        .unwrap();
    assert_eq!(r.body, &b"back"[..]);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert!(pool.get(&address, 0, LONG).await.unwrap().same(&again));
}

#[tokio::test]
async fn a_bad_magic_closes_the_connection() {
    let (address, _) = fake(|_, mut s: TcpStream| async move {
        read_frame(&mut s).await.unwrap();
        s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            .await
            .unwrap();
        let _ = s.read(&mut [0u8; 1]).await;
    })
    .await;
    let conn = Connection::connect(&address, config()).await.unwrap();
    let started = Instant::now();
    let e = conn
        .request(HESSIAN2, Bytes::from_static(b"x"), LONG)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.message().contains("bad magic"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(conn.is_closed());
}

#[tokio::test]
async fn an_idle_connection_sends_heartbeats_and_stays_open() {
    let (beats_tx, mut beats) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let beats_tx = beats_tx.clone();
        async move {
            while let Some((h, body)) = read_frame(&mut s).await {
                if h.is_event() {
                    let _ = beats_tx.send((h, body));
                    let reply = Header::response(h.id, h.serialization(), status::OK, true, 1);
                    write_frame(&mut s, reply, b"N").await;
                }
            }
        }
    })
    .await;
    let heartbeat = Duration::from_millis(200);
    let conn = Connection::connect(
        &address,
        ExchangeConfig {
            heartbeat,
            ..config()
        },
    )
    .await
    .unwrap();
    // The barrier is the heartbeats themselves: one is sent per idle interval, so after five
    // the connection has been idle (but answered) well past the three intervals that close it.
    let started = Instant::now();
    for _ in 0..5 {
        let (h, body) = tokio::time::timeout(Duration::from_secs(5), beats.recv())
            .await
            .expect("a heartbeat per interval")
            .unwrap();
        assert_eq!(h.flags, 0xE2, "request | two-way | event | hessian2");
        assert_eq!(body, b"N");
    }
    assert!(
        started.elapsed() >= heartbeat * 4,
        "{:?}",
        started.elapsed()
    );
    assert!(
        !conn.is_closed(),
        "answered heartbeats keep it open past 3 intervals"
    );
    let r = conn
        .request(
            HESSIAN2,
            Bytes::from_static(b"x"),
            Duration::from_millis(200),
        )
        .await;
    assert!(
        r.unwrap_err().is_timeout(),
        "calls still go through (unanswered here)"
    );
}

#[tokio::test]
async fn a_silent_provider_is_closed_after_three_heartbeat_intervals() {
    let (eof_tx, mut eof) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let eof_tx = eof_tx.clone();
        async move {
            let mut sink = [0u8; 256];
            while s.read(&mut sink).await.is_ok_and(|n| n > 0) {}
            let _ = eof_tx.send(Instant::now());
        }
    })
    .await;
    let heartbeat = Duration::from_millis(200);
    let started = Instant::now();
    let conn = Connection::connect(
        &address,
        ExchangeConfig {
            heartbeat,
            ..config()
        },
    )
    .await
    .unwrap();
    let pending = conn.request(HESSIAN2, Bytes::from_static(b"x"), LONG);
    let e = pending.await.unwrap_err();
    let after = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.is_retryable());
    assert!(e.message().contains("heartbeat"), "{e}");
    assert!(
        after >= heartbeat * 3 - Duration::from_millis(20) && after < heartbeat * 8,
        "closed after {after:?}"
    );
    assert!(conn.is_closed());
    let closed_at = tokio::time::timeout(Duration::from_secs(2), eof.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(closed_at.duration_since(started) < heartbeat * 8);
}

#[tokio::test]
async fn the_providers_heartbeats_are_answered() {
    let (replies_tx, mut replies) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let replies_tx = replies_tx.clone();
        async move {
            write_frame(&mut s, Header::event_request(77, HESSIAN2, true, 1), b"N").await;
            let beat = event::FASTJSON2_NULL;
            write_frame(
                &mut s,
                Header::event_request(-78, FASTJSON2, true, beat.len() as i32),
                beat,
            )
            .await;
            // A callback (a call from the provider): refused, this consumer exports nothing.
            write_frame(&mut s, Header::request(79, HESSIAN2, true, 3), b"abc").await;
            for _ in 0..3 {
                let _ = replies_tx.send(read_frame(&mut s).await.unwrap());
            }
        }
    })
    .await;
    let _conn = Connection::connect(&address, config()).await.unwrap();
    let (h, body) = replies.recv().await.unwrap();
    assert_eq!(h, Header::response(77, HESSIAN2, status::OK, true, 1));
    assert_eq!(h.encode()[2], 0x22, "event | hessian2");
    assert_eq!(body, b"N");
    let (h, body) = replies.recv().await.unwrap();
    assert_eq!(
        (h.id, h.serialization(), h.is_event(), h.status),
        (-78, FASTJSON2, true, 20)
    );
    assert_eq!(body, event::FASTJSON2_NULL);
    let (h, body) = replies.recv().await.unwrap();
    assert_eq!(
        (h.id, h.is_event(), h.status),
        (79, false, status::SERVICE_NOT_FOUND)
    );
    assert_eq!(
        usize::from(body[0]),
        body.len() - 1,
        "a short Hessian string"
    );
}

/// A fake provider connection whose socket the test can write to at any time (through the
/// sender it receives on `handles`), answering heartbeats and calls meanwhile.
async fn scripted(s: TcpStream, handles: mpsc::UnboundedSender<mpsc::UnboundedSender<Vec<u8>>>) {
    let (mut rd, mut wr) = s.into_split();
    let (out, mut frames) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(f) = frames.recv().await {
            if wr.write_all(&f).await.is_err() {
                return;
            }
        }
    });
    let _ = handles.send(out.clone());
    let mut head = [0u8; 16];
    while rd.read_exact(&mut head).await.is_ok() {
        let h = Header::decode(&head).unwrap();
        let mut body = vec![0; h.len as usize];
        if rd.read_exact(&mut body).await.is_err() {
            return;
        }
        if !h.is_two_way() {
            continue;
        }
        let (reply, body) = if h.is_event() {
            (
                Header::response(h.id, h.serialization(), status::OK, true, 1),
                b"N".to_vec(),
            )
        } else {
            (ok(h.id, &body), body)
        };
        let mut f = reply.encode().to_vec();
        f.extend_from_slice(&body);
        let _ = out.send(f);
    }
}

fn event_frame(body: &[u8]) -> Vec<u8> {
    let mut f = Header::event_request(1000, HESSIAN2, false, body.len() as i32)
        .encode()
        .to_vec();
    f.extend_from_slice(body);
    f
}

#[tokio::test]
async fn the_readonly_event_stops_new_calls_without_a_strike() {
    let (handles_tx, mut handles) = mpsc::unbounded_channel();
    let (address, accepted) = fake(move |_, s: TcpStream| scripted(s, handles_tx.clone())).await;
    let pool = Pool::new(config());
    let conn = pool.get(&address, 1, LONG).await.unwrap();
    let provider = handles.recv().await.unwrap();
    assert!(!conn.is_readonly());

    provider.send(event_frame(&[0x01, b'R'])).unwrap();
    until(|| conn.is_readonly()).await;
    let e = pool.get(&address, 1, LONG).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.is_retryable(), "{e}");
    assert!(!e.counts_as_strike(), "{e}");
    assert!(
        e.message().contains(&address) && e.message().contains("readonly"),
        "{e}"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "no new connection to a draining provider"
    );
    // Calls already holding the connection still go through.
    let r = conn
        .request(HESSIAN2, Bytes::from_static(b"in flight"), LONG)
        .await
        .unwrap();
    assert_eq!(r.body, &b"in flight"[..]);

    // Dubbo's writeable event undoes it.
    provider.send(event_frame(&[0x01, b'W'])).unwrap();
    until(|| !conn.is_readonly()).await;
    assert!(pool.get(&address, 1, LONG).await.unwrap().same(&conn));
}

#[tokio::test]
async fn a_readonly_connection_is_skipped_while_another_is_writeable() {
    let (handles_tx, mut handles) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, s: TcpStream| scripted(s, handles_tx.clone())).await;
    let pool = Pool::new(config());
    let first = pool.get(&address, 2, LONG).await.unwrap();
    let second = pool.get(&address, 2, LONG).await.unwrap();
    assert!(!first.same(&second));
    let provider = handles.recv().await.unwrap();
    handles.recv().await.unwrap();
    provider.send(event_frame(&[0x01, b'R'])).unwrap();
    until(|| first.is_readonly() || second.is_readonly()).await;
    let (readonly, writeable) = if first.is_readonly() {
        (first, second)
    } else {
        (second, first)
    };
    for _ in 0..4 {
        let c = pool.get(&address, 2, LONG).await.unwrap();
        assert!(c.same(&writeable) && !c.is_readonly());
    }
    assert!(readonly.is_readonly() && !writeable.is_readonly());
}

#[tokio::test]
async fn a_long_readonly_connection_is_replaced() {
    let (address, accepted) = fake(|n, mut s: TcpStream| async move {
        if n == 0 {
            write_frame(
                &mut s,
                Header::event_request(5, HESSIAN2, false, 2),
                &[0x01, b'R'],
            )
            .await;
        }
        echo(n, s).await;
    })
    .await;
    let heartbeat = Duration::from_millis(100);
    let pool = Pool::new(ExchangeConfig {
        heartbeat,
        ..config()
    });
    let first = pool.get(&address, 1, LONG).await.unwrap();
    until(|| first.is_readonly()).await;
    assert!(pool.get(&address, 1, LONG).await.is_err());
    // Refused while readonly; once readonly for three heartbeat intervals it is replaced.
    let give_up = Instant::now() + Duration::from_secs(5);
    let again = loop {
        match pool.get(&address, 1, LONG).await {
            Ok(c) => break c,
            Err(e) => assert!(Instant::now() < give_up, "never replaced: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        first.readonly_for().unwrap() >= heartbeat * 3,
        "not replaced before the hold"
    );
    assert!(!first.is_closed(), "heartbeats answered: still open");
    assert!(!again.same(&first) && !again.is_readonly());
    again
        .request(HESSIAN2, Bytes::from_static(b"x"), LONG)
        .await
        .unwrap();
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    drop(first);
}

#[tokio::test]
async fn a_request_over_the_payload_limit_is_not_sent() {
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let seen_tx = seen_tx.clone();
        async move {
            while let Some((h, body)) = read_frame(&mut s).await {
                let _ = seen_tx.send(body.len());
                write_frame(&mut s, ok(h.id, &body), &body).await;
            }
        }
    })
    .await;
    let conn = Connection::connect(
        &address,
        ExchangeConfig {
            payload: 1024,
            ..config()
        },
    )
    .await
    .unwrap();
    let e = conn
        .request(HESSIAN2, Bytes::from(vec![0u8; 1025]), LONG)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(!e.is_retryable());
    assert!(
        e.message().contains("1025") && e.message().contains("1024"),
        "{e}"
    );
    let r = conn
        .request(HESSIAN2, Bytes::from(vec![7u8; 1024]), LONG)
        .await
        .unwrap();
    assert_eq!(r.body.len(), 1024);
    assert_eq!(
        seen.recv().await,
        Some(1024),
        "the oversized one never reached the provider"
    );
    assert!(seen.try_recv().is_err());

    // 0 means no limit, as in Dubbo.
    let unlimited = Connection::connect(
        &address,
        ExchangeConfig {
            payload: 0,
            ..config()
        },
    )
    .await
    .unwrap();
    let r = unlimited
        .request(HESSIAN2, Bytes::from(vec![1u8; 100_000]), LONG)
        .await
        .unwrap();
    assert_eq!(r.body.len(), 100_000);
}

#[tokio::test]
async fn a_response_over_the_payload_limit_fails_its_call_only() {
    let (address, _) = fake(|_, mut s: TcpStream| async move {
        let (first, _) = read_frame(&mut s).await.unwrap();
        let (second, body) = read_frame(&mut s).await.unwrap();
        // 200 KB announced and sent, in pieces, then the second answer.
        let big = vec![0xABu8; 200_000];
        let h = ok(first.id, &big).encode();
        s.write_all(&h).await.unwrap();
        for piece in big.chunks(7_000) {
            s.write_all(piece).await.unwrap();
            tokio::task::yield_now().await;
        }
        write_frame(&mut s, ok(second.id, &body), &body).await;
        echo(0, s).await;
    })
    .await;
    let conn = Connection::connect(
        &address,
        ExchangeConfig {
            payload: 1024,
            ..config()
        },
    )
    .await
    .unwrap();
    let (big, small) = tokio::join!(
        conn.request(HESSIAN2, Bytes::from_static(b"big"), LONG),
        async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            conn.request(HESSIAN2, Bytes::from_static(b"small"), LONG)
                .await
        }
    );
    let e = big.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    assert!(!e.is_retryable(), "the provider processed it");
    assert!(
        e.message().contains("200000") && e.message().contains("1024"),
        "{e}"
    );
    assert_eq!(small.unwrap().body, &b"small"[..]);
    assert!(!conn.is_closed());
    let r = conn
        .request(HESSIAN2, Bytes::from_static(b"more"), LONG)
        .await
        .unwrap();
    assert_eq!(r.body, &b"more"[..]);
}

#[tokio::test]
async fn connections_3_makes_three_connections_all_used() {
    let (used_tx, mut used) = mpsc::unbounded_channel();
    let (address, accepted) = fake(move |n, mut s: TcpStream| {
        let used_tx = used_tx.clone();
        async move {
            while let Some((h, body)) = read_frame(&mut s).await {
                let _ = used_tx.send(n);
                write_frame(&mut s, ok(h.id, &body), &body).await;
            }
        }
    })
    .await;
    let pool = Pool::new(config());
    let mut conns: Vec<Connection> = Vec::new();
    for i in 0..9u8 {
        let c = pool.get(&address, 3, LONG).await.unwrap();
        c.request(HESSIAN2, Bytes::from(vec![i]), LONG)
            .await
            .unwrap();
        if !conns.iter().any(|k| k.same(&c)) {
            conns.push(c);
        }
    }
    assert_eq!(conns.len(), 3);
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    assert_eq!(pool.connections(&address).len(), 3);
    let mut per = [0; 3];
    for _ in 0..9 {
        per[used.recv().await.unwrap()] += 1;
    }
    assert_eq!(per, [3, 3, 3], "used in turn");
    assert_eq!(pool.len(), 1);

    // 0 means one shared connection.
    let (other, accepted) = fake(echo).await;
    for _ in 0..3 {
        let c = pool.get(&other, 0, LONG).await.unwrap();
        c.request(HESSIAN2, Bytes::from_static(b"x"), LONG)
            .await
            .unwrap();
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(pool.len(), 2);
}

#[tokio::test]
async fn retain_drops_connections_of_addresses_that_left() {
    let (eof_tx, mut eof) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let eof_tx = eof_tx.clone();
        async move {
            while read_frame(&mut s).await.is_some() {}
            let _ = eof_tx.send(());
        }
    })
    .await;
    let (kept, _) = fake(echo).await;
    let pool = Pool::new(config());
    let gone = pool.get(&address, 1, LONG).await.unwrap();
    let stays = pool.get(&kept, 1, LONG).await.unwrap();
    assert_eq!(pool.len(), 2);
    pool.retain(&|a| a == kept);
    assert_eq!(pool.len(), 1);
    assert!(!gone.is_closed(), "still used by a caller");
    drop(gone);
    tokio::time::timeout(Duration::from_secs(2), eof.recv())
        .await
        .expect("closed once the last user let go");
    assert!(!stays.is_closed());
    assert!(!pool.is_empty());
}

/// Entries of providers that went away (their connections closed, no caller holding them)
/// are dropped when the map would grow past twice what the last sweep left (at least 64),
/// without anyone calling `retain`: rolling deploys cannot grow the pool without bound.
#[tokio::test]
async fn entries_of_closed_providers_are_swept_as_new_addresses_come() {
    let pool = Pool::new(config());
    for _ in 0..64 {
        // A provider that accepts, then goes away.
        let (address, _) = fake(|_, s: TcpStream| async move { drop(s) }).await;
        let conn = pool.get(&address, 1, LONG).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), async {
            while !conn.is_closed() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the connection sees the provider close it");
    }
    assert_eq!(pool.len(), 64);
    let (live, _) = fake(echo).await;
    let held = pool.get(&live, 1, LONG).await.unwrap();
    assert_eq!(
        pool.len(),
        1,
        "the 64 dead entries went when a new address came"
    );
    assert!(!held.is_closed());
}

#[tokio::test]
async fn connecting_to_nothing_is_a_retryable_transport_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let pool = Pool::new(config());
    let e = pool.get(&address, 1, LONG).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(e.is_retryable() && e.counts_as_strike());
    assert!(e.message().contains(&address), "{e}");

    let (v6, _) = match TcpListener::bind("[::1]:0").await {
        Ok(l) => {
            let a = format!("[::1]:{}", l.local_addr().unwrap().port());
            tokio::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                echo(0, s).await;
            });
            (a, ())
        }
        Err(_) => return, // no IPv6 loopback here
    };
    let c = pool.get(&v6, 1, LONG).await.unwrap();
    assert_eq!(c.address(), v6);
    let r = c
        .request(HESSIAN2, Bytes::from_static(b"v6"), LONG)
        .await
        .unwrap();
    assert_eq!(r.body, &b"v6"[..]);
}

// ---- Hostile providers (#26 items 2 and 3) ----

/// The Hessian2 body of a successful call returning the int 5 (flag 1, then 5).
const FIVE: &[u8] = &[0x91, 0x95];

/// A provider answering every call with [`FIVE`] and every heartbeat with `N`; it sends the
/// time of each heartbeat it receives on `beats` (when given).
async fn answers_five(mut s: TcpStream, beats: Option<mpsc::UnboundedSender<Instant>>) {
    while let Some((h, _)) = read_frame(&mut s).await {
        if h.is_event() {
            if let Some(b) = &beats {
                let _ = b.send(Instant::now());
            }
            if h.is_two_way() {
                let reply = Header::response(h.id, h.serialization(), status::OK, true, 1);
                write_frame(&mut s, reply, b"N").await;
            }
        } else if h.is_two_way() {
            write_frame(&mut s, ok(h.id, FIVE), FIVE).await;
        }
    }
}

fn add() -> switchman_core::Invocation {
    switchman_core::Invocation::new("add")
        .with_args(vec![2.into(), 3.into()])
        .with_types(["int", "int"])
}

/// An instance at the fake provider's `address` with the provider parameters `params`.
fn provider(address: &str, params: &[(&str, &str)]) -> Arc<switchman_core::Instance> {
    let (host, port) = address.rsplit_once(':').unwrap();
    let mut b = switchman_core::Instance::builder(host, port.parse().unwrap());
    for (k, v) in params {
        b = b.param(k, v);
    }
    Arc::new(b.build())
}

#[tokio::test]
async fn a_huge_connections_parameter_opens_at_most_16_connections() {
    use switchman_core::{Invoker, MakeEndpoint};
    for value in ["18446744073709551615", "20000"] {
        // Through an endpoint (as the directory calls), and through the invoker's own pool.
        for through_endpoint in [true, false] {
            let (address, accepted) = fake(|_, s| answers_five(s, None)).await;
            let target = provider(&address, &[("connections", value)]);
            let invoker = DubboInvoker::new();
            let endpoint = invoker.make(&target);
            for _ in 0..40 {
                let got = if through_endpoint {
                    endpoint.invoke(&target, &add(), LONG).await
                } else {
                    invoker.invoke(&target, &add(), LONG).await
                };
                assert_eq!(got.unwrap(), 5, "connections={value}");
            }
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                16,
                "connections={value} (endpoint: {through_endpoint})"
            );
        }
    }
    // Not a number, negative: Dubbo's default, one shared connection.
    for value in ["-3", "many", ""] {
        let (address, accepted) = fake(|_, s| answers_five(s, None)).await;
        let target = provider(&address, &[("connections", value)]);
        let endpoint = DubboInvoker::new().make(&target);
        for _ in 0..5 {
            assert_eq!(endpoint.invoke(&target, &add(), LONG).await.unwrap(), 5);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "connections={value:?}");
    }
}

#[tokio::test]
async fn a_heartbeat_parameter_of_1_ms_is_raised_to_one_second() {
    use switchman_core::{Invoker, MakeEndpoint};
    let (beats_tx, mut beats) = mpsc::unbounded_channel();
    let (address, accepted) = fake(move |_, s| answers_five(s, Some(beats_tx.clone()))).await;
    let target = provider(&address, &[("heartbeat", "1")]);
    let endpoint = DubboInvoker::new().make(&target);
    // Calls across two heartbeat intervals of the raised value: each interval ends with the
    // provider receiving a heartbeat (the barrier), never sooner than one second after the
    // last call, and every call goes over the one connection.
    for _ in 0..2 {
        assert_eq!(endpoint.invoke(&target, &add(), LONG).await.unwrap(), 5);
        let called = Instant::now();
        let beat = tokio::time::timeout(LONG, beats.recv())
            .await
            .expect("a heartbeat within 10 s")
            .unwrap();
        let idle = beat.duration_since(called);
        assert!(
            idle >= Duration::from_millis(950),
            "heartbeat after {idle:?} of idleness: the 1 ms interval was not raised"
        );
    }
    assert_eq!(endpoint.invoke(&target, &add(), LONG).await.unwrap(), 5);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection, never closed"
    );
}

/// A provider whose first frame is the header of a response of `len` bytes (to request 0),
/// followed by 1 MiB of it; then it reads (and drops) what comes until the end.
async fn announces(len: i32, mut s: TcpStream) {
    s.write_all(&Header::response(0, HESSIAN2, status::OK, false, len).encode())
        .await
        .unwrap();
    let _ = s.write_all(&vec![0u8; 1 << 20]).await;
    let mut sink = [0u8; 1024];
    while s.read(&mut sink).await.is_ok_and(|n| n > 0) {}
}

#[tokio::test]
async fn a_2_gib_header_reserves_a_bounded_buffer() {
    // The consumer's own `payload` 0 (Dubbo's "no limit"): the announced body is read as it
    // comes, without reserving its 2 GiB at once.
    let (address, _) = fake(|_, s| announces(i32::MAX, s)).await;
    let conn = Connection::connect(
        &address,
        ExchangeConfig {
            payload: 0,
            ..config()
        },
    )
    .await
    .unwrap();
    until(|| conn.read_probe().1 >= 16 + (1 << 20)).await;
    let (capacity, _) = conn.read_probe();
    assert!(
        capacity <= DEFAULT_PAYLOAD + (1 << 20),
        "the read buffer grew to {capacity} bytes"
    );
    assert!(!conn.is_closed(), "waiting for the rest of the body");

    // The provider's `payload=0` (registry data): the consumer's 8 MiB limit applies, a
    // 2 GiB answer fails its call and is skipped, nothing reserved for it.
    let (address, _) = fake(|_, mut s: TcpStream| async move {
        let (h, _) = read_frame(&mut s).await.unwrap();
        s.write_all(&Header::response(h.id, HESSIAN2, status::OK, false, i32::MAX).encode())
            .await
            .unwrap();
        let _ = s.write_all(&vec![0u8; 1 << 20]).await;
        let mut sink = [0u8; 1024];
        while s.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    })
    .await;
    let target = provider(&address, &[("payload", "0")]);
    let invoker = DubboInvoker::new();
    let e = switchman_core::Invoker::invoke(&invoker, &target, &add(), LONG)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
    let conn = invoker.pool().connections(&address).pop().unwrap();
    until(|| conn.read_probe().1 >= 16 + (1 << 20)).await;
    assert!(conn.read_probe().0 <= 1 << 20, "{:?}", conn.read_probe());
}

/// A provider that writes `frames` event requests (two-way, serialization id 7, which this
/// side does not know) of `body` bytes without reading anything; then reads until the end of
/// the stream and reports it on `eof`.
async fn floods_events(
    mut s: TcpStream,
    frames: usize,
    body: usize,
    eof: mpsc::UnboundedSender<()>,
) {
    let mut frame = Header::event_request(1, 7, true, body as i32)
        .encode()
        .to_vec();
    frame.resize(HEADER_LEN + body, b'x');
    for _ in 0..frames {
        if s.write_all(&frame).await.is_err() {
            break;
        }
    }
    let mut sink = [0u8; 64 * 1024];
    while s.read(&mut sink).await.is_ok_and(|n| n > 0) {}
    let _ = eof.send(());
}

/// Connects to a provider flooding `frames` event requests of `body` bytes ([`floods_events`])
/// and makes a call: the consumer must close the connection, failing the call with a
/// transport error. Returns the provider's address, the closed connection and the error, once
/// the provider has seen the end of the stream.
async fn closed_by_event_flood(
    frames: usize,
    body: usize,
) -> (String, Connection, switchman_core::Error) {
    let (eof_tx, mut eof) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, s| floods_events(s, frames, body, eof_tx.clone())).await;
    let conn = Connection::connect(&address, config()).await.unwrap();
    let e = conn
        .request(HESSIAN2, Bytes::from_static(b"x"), LONG)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
    assert!(conn.is_closed());
    tokio::time::timeout(LONG, eof.recv())
        .await
        .expect("the consumer closed the socket")
        .unwrap();
    (address, conn, e)
}

#[tokio::test]
async fn event_bodies_over_15_bytes_close_the_connection() {
    // 64 heartbeat requests of 1 MiB each, from a provider that reads nothing meanwhile.
    let (address, conn, e) = closed_by_event_flood(64, 1 << 20).await;
    assert!(
        e.message().contains(&address) && e.message().contains("event"),
        "{e}"
    );
    assert!(
        conn.queued_high_water() < 1024,
        "nothing of the provider's bodies was queued: {}",
        conn.queued_high_water()
    );
}

#[tokio::test]
async fn a_heartbeat_flood_closes_the_connection() {
    // Heartbeats (one-byte bodies) without pause: more than the rate allows.
    let flood = super::connection::MAX_EVENTS_PER_SECOND as usize * 4;
    let (_, _, e) = closed_by_event_flood(flood, 1).await;
    assert!(e.message().contains("events (heartbeats)"), "{e}");
}

#[tokio::test]
async fn heartbeats_within_the_rate_are_answered_and_keep_the_connection() {
    let (replies_tx, mut replies) = mpsc::unbounded_channel();
    let within = super::connection::MAX_EVENTS_PER_SECOND as i64;
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let replies_tx = replies_tx.clone();
        async move {
            for id in 0..within {
                write_frame(&mut s, Header::event_request(id, HESSIAN2, true, 1), b"N").await;
            }
            for _ in 0..within {
                let _ = replies_tx.send(read_frame(&mut s).await);
            }
            std::future::pending::<()>().await;
        }
    })
    .await;
    let conn = Connection::connect(&address, config()).await.unwrap();
    for id in 0..within {
        let (h, _) = replies.recv().await.unwrap().expect("an answer");
        assert_eq!(h.id, id);
    }
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn a_heartbeat_of_an_unknown_serialization_is_answered_with_our_own_body() {
    let (replies_tx, mut replies) = mpsc::unbounded_channel();
    let (address, _) = fake(move |_, mut s: TcpStream| {
        let replies_tx = replies_tx.clone();
        async move {
            // 15 bytes: the largest event body accepted (Java's `deserialization.event.size`).
            let body = b"0123456789abcde";
            write_frame(&mut s, Header::event_request(77, 7, true, 15), body).await;
            let _ = replies_tx.send(read_frame(&mut s).await);
            // 16 bytes: a protocol error, the connection closes.
            write_frame(
                &mut s,
                Header::event_request(78, 7, true, 16),
                b"0123456789abcdef",
            )
            .await;
            let _ = replies_tx.send(read_frame(&mut s).await);
        }
    })
    .await;
    let conn = Connection::connect(&address, config()).await.unwrap();
    let (h, body) = replies.recv().await.unwrap().unwrap();
    assert_eq!(h, Header::response(77, HESSIAN2, status::OK, true, 1));
    assert_eq!(body, b"N", "Hessian2 null, not the provider's bytes");
    assert!(
        replies.recv().await.unwrap().is_none(),
        "no answer to the 16-byte event: the consumer closed the connection"
    );
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_provider_that_stops_reading_is_closed_and_the_write_queue_stays_bounded() {
    let (done_tx, done) = tokio::sync::watch::channel(false);
    let (address, _) = fake(move |_, s: TcpStream| {
        let mut done = done.clone();
        async move {
            // Holds the socket open, reading nothing.
            let _ = done.wait_for(|d| *d).await;
            drop(s);
        }
    })
    .await;
    let write_timeout = Duration::from_millis(500);
    let conn = Connection::connect(
        &address,
        ExchangeConfig {
            write_timeout,
            ..config()
        },
    )
    .await
    .unwrap();
    let started = Instant::now();
    // 48 MiB of requests: more than the socket buffers and the queue's byte bound together.
    let calls = (0..48).map(|_| conn.request(HESSIAN2, Bytes::from(vec![1u8; 1 << 20]), LONG));
    let results = futures::future::join_all(calls).await;
    let took = started.elapsed();
    for r in results {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "{e}");
        assert!(e.is_retryable(), "{e}");
    }
    assert!(conn.is_closed());
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    assert!(
        conn.queued_high_water() <= super::connection::QUEUE_BYTES,
        "{} bytes queued at once",
        conn.queued_high_water()
    );
    done_tx.send_replace(true);
}

/// An endpoint reads `prefer.serialization` when it is made: every call with that instance
/// gets its verdict (nothing sent) without parsing it again; an override (a new instance
/// with hessian2) is read once, and then calls go through.
#[tokio::test]
async fn an_endpoint_reads_the_serialization_once_and_again_when_it_changes() {
    use crate::protocol::endpoint_params::reads;
    use switchman_core::{Invoker, MakeEndpoint};
    let (address, accepted) = fake(|_, s| answers_five(s, None)).await;
    let invoker = DubboInvoker::new();
    let json = provider(&address, &[("prefer.serialization", "fastjson2")]);
    let before = reads();
    let endpoint = invoker.make(&json);
    for _ in 0..3 {
        let e = endpoint.invoke(&json, &add(), LONG).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(
            e.message(),
            format!(
                "{address} accepts serialization fastjson2 over dubbo://; Switchman speaks \
                 hessian2 only"
            )
        );
    }
    assert_eq!(reads() - before, 1, "parsed when made, not per call");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing sent");
    // The directory hands the endpoint an overridden instance.
    let hessian = provider(
        &address,
        &[
            ("prefer.serialization", "hessian2,fastjson2"),
            ("weight", "5"),
        ],
    );
    for _ in 0..3 {
        assert_eq!(endpoint.invoke(&hessian, &add(), LONG).await.unwrap(), 5);
    }
    assert_eq!(reads() - before, 2, "the change parsed once");
    let back = endpoint.invoke(&json, &add(), LONG).await.unwrap_err();
    assert_eq!(
        back.kind(),
        ErrorKind::Unsupported,
        "the first one's own values"
    );
    // A direct call reads the same verdict from the instance, per call.
    let direct = invoker.invoke(&json, &add(), LONG).await.unwrap_err();
    assert_eq!(direct.message(), back.message());
}

/// An endpoint reads `ssl-enabled` when it is made: without TLS settings, every call with
/// that instance fails at once naming it; an override dropping it is read, and calls go
/// through in cleartext.
#[tokio::test]
async fn an_endpoint_reads_ssl_enabled_once_and_again_when_it_changes() {
    use crate::protocol::endpoint_params::reads;
    use switchman_core::{Invoker, MakeEndpoint};
    let (address, accepted) = fake(|_, s| answers_five(s, None)).await;
    let invoker = DubboInvoker::new();
    let tls = provider(&address, &[("ssl-enabled", "true")]);
    let before = reads();
    let endpoint = invoker.make(&tls);
    for _ in 0..3 {
        let e = endpoint.invoke(&tls, &add(), LONG).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadConfig);
        assert!(
            e.message()
                .starts_with(&format!("dubbo://{address} registered ssl-enabled=true")),
            "{e}"
        );
    }
    assert_eq!(reads() - before, 1, "parsed when made, not per call");
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "never dialled");
    let plain = provider(&address, &[("ssl-enabled", "false")]);
    assert_eq!(endpoint.invoke(&plain, &add(), LONG).await.unwrap(), 5);
    assert_eq!(endpoint.invoke(&plain, &add(), LONG).await.unwrap(), 5);
    assert_eq!(reads() - before, 2, "the change parsed once");
    let direct = invoker.invoke(&tls, &add(), LONG).await.unwrap_err();
    assert_eq!(
        direct.kind(),
        ErrorKind::BadConfig,
        "a direct call reads it too"
    );
}

/// The directory hands the endpoint its new instance (an override): calls with it compare a
/// pointer and read no parameter; a call still in flight with the one before gets that one's
/// values for itself and leaves the new one in place.
#[tokio::test]
async fn an_endpoint_handed_its_new_instance_reads_nothing_per_call() {
    use crate::protocol::endpoint_params::{compares, reads};
    use switchman_core::{Invoker, MakeEndpoint};
    let (address, _) = fake(|_, s| answers_five(s, None)).await;
    let invoker = DubboInvoker::new();
    let first = provider(&address, &[("prefer.serialization", "hessian2")]);
    let endpoint = invoker.make(&first);
    let weighted = provider(
        &address,
        &[("prefer.serialization", "hessian2"), ("weight", "5")],
    );
    endpoint.instance_changed(&weighted);
    let (r, c) = (reads(), compares());
    for _ in 0..3 {
        assert_eq!(endpoint.invoke(&weighted, &add(), LONG).await.unwrap(), 5);
    }
    assert_eq!(
        (reads() - r, compares() - c),
        (0, 0),
        "a pointer compared, nothing read"
    );
    // Handed one whose values changed: read once, then its verdict on every call.
    let json = provider(&address, &[("prefer.serialization", "fastjson2")]);
    let r = reads();
    endpoint.instance_changed(&json);
    assert_eq!(reads() - r, 1, "read when handed over");
    let (r, c) = (reads(), compares());
    let e = endpoint.invoke(&json, &add(), LONG).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert_eq!((reads() - r, compares() - c), (0, 0));
    // A straggler with the instance before: its own values, for itself.
    assert_eq!(endpoint.invoke(&weighted, &add(), LONG).await.unwrap(), 5);
    let (r, c) = (reads(), compares());
    let e = endpoint.invoke(&json, &add(), LONG).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert_eq!(
        (reads() - r, compares() - c),
        (0, 0),
        "the straggler left the current instance in place"
    );
}
