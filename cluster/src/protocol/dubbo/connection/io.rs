//! The tasks of a connection: the reader, the writer and the heartbeat timer.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{trace, warn};

use super::super::exchange::event::MAX_EVENT_BODY;
use super::super::exchange::{self, FrameError, FrameReader, HESSIAN2, Header, event};
use super::config::{INLINE_BODY, WRITE_CHUNK};
use super::shared::{Frame, Shared};

/// Resolves once the connection is closing.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|closed| *closed).await;
}

pub(super) async fn read_loop<R: AsyncRead + Unpin>(
    shared: Arc<Shared>,
    mut rd: R,
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        reason = read_frames(&shared, &mut rd) => shared.close(&reason),
        () = stopped(&mut stop) => {}
    }
}

/// Event requests (heartbeats, readonly and writeable) a provider may send in one second; more
/// is a flood, and the connection closes. Java providers send one heartbeat per interval (60 s
/// by default) and a readonly event per shutdown: answering a flood costs the consumer a CPU.
pub(crate) const MAX_EVENTS_PER_SECOND: u32 = 64;

/// Counts the provider's event requests per second (see [`MAX_EVENTS_PER_SECOND`]).
struct EventRate {
    since: Instant,
    count: u32,
}

impl EventRate {
    /// Counts one more event; `false` when it is over the rate.
    fn allow(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.since) >= Duration::from_secs(1) {
            self.since = now;
            self.count = 0;
        }
        self.count += 1;
        self.count <= MAX_EVENTS_PER_SECOND
    }
}

/// Reads frames until the stream ends or breaks; returns why.
async fn read_frames<R: AsyncRead + Unpin>(s: &Shared, rd: &mut R) -> String {
    use tokio::io::AsyncReadExt;
    let mut frames = FrameReader::new(s.payload);
    let mut events = EventRate {
        since: Instant::now(),
        count: 0,
    };
    loop {
        loop {
            match frames.next_frame() {
                Ok(Some(exchange::Frame::Whole(h, _)))
                    if h.is_request() && h.is_event() && !events.allow() =>
                {
                    warn!(address = %s.address, limit = MAX_EVENTS_PER_SECOND, "the provider sent more events (heartbeats) in a second than the limit: closing the connection");
                    return format!(
                        "protocol error: more than {MAX_EVENTS_PER_SECOND} events (heartbeats) in one second"
                    );
                }
                Ok(Some(exchange::Frame::Whole(h, body))) => s.on_frame(h, body),
                Ok(Some(exchange::Frame::Oversized(h))) => s.oversized(&h),
                Ok(None) => break,
                Err(e) => {
                    if let FrameError::EventTooLong(len) = e {
                        warn!(address = %s.address, len, limit = MAX_EVENT_BODY, "the provider sent an event body over the limit: protocol error, closing the connection");
                    }
                    return e.to_string();
                }
            }
        }
        match rd.read_buf(frames.buffer()).await {
            Ok(0) => return "the provider closed the connection".to_string(),
            Ok(_n) => {
                #[cfg(test)]
                {
                    let p = &s.probe;
                    p.read_bytes.fetch_add(_n, Ordering::SeqCst);
                    p.read_capacity.fetch_max(frames.held().1, Ordering::SeqCst);
                }
                s.touch_read();
            }
            Err(e) => return format!("reading failed: {e}"),
        }
    }
}

pub(super) async fn write_loop<W: AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut wr: W,
    mut queue: mpsc::Receiver<Frame>,
    mut stop: watch::Receiver<bool>,
) {
    let stall = shared.write_timeout;
    let work = async {
        let mut buf = BytesMut::with_capacity(WRITE_CHUNK);
        while let Some(first) = queue.recv().await {
            let mut next = Some(first);
            while let Some(frame) = next.take() {
                buf.extend_from_slice(&frame.header);
                if frame.body.len() > INLINE_BODY {
                    write_all(&mut wr, &buf, stall).await?;
                    buf.clear();
                    write_all(&mut wr, &frame.body, stall).await?;
                } else {
                    buf.extend_from_slice(&frame.body);
                    if buf.len() >= WRITE_CHUNK {
                        write_all(&mut wr, &buf, stall).await?;
                        buf.clear();
                    }
                }
                next = queue.try_recv().ok();
            }
            if !buf.is_empty() {
                write_all(&mut wr, &buf, stall).await?;
                buf.clear();
            }
            wr.flush().await?;
            shared.touch_write();
        }
        Ok::<(), std::io::Error>(())
    };
    tokio::select! {
        result = work => {
            if let Err(e) = result {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    warn!(address = %shared.address, error = %e, "closing a connection whose provider stopped reading");
                }
                shared.close(&format!("writing failed: {e}"));
            }
        }
        () = stopped(&mut stop) => {}
    }
}

/// Writes all of `data`, failing when the peer accepts no byte of it for `stall` (zero: no
/// limit): a peer that stops reading fills the socket buffers and then every write waits.
async fn write_all<W: AsyncWrite + Unpin>(
    wr: &mut W,
    mut data: &[u8],
    stall: Duration,
) -> std::io::Result<()> {
    if stall.is_zero() {
        return wr.write_all(data).await;
    }
    while !data.is_empty() {
        match tokio::time::timeout(stall, wr.write(data)).await {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => data = &data[n..],
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the provider accepted no byte for {} ms (it stopped reading)",
                        stall.as_millis()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Dubbo's client timers: a heartbeat after one idle interval (nothing read, or nothing
/// written), closing after three intervals with nothing read. Checks every third of the
/// interval, as Dubbo's `HEARTBEAT_CHECK_TICK` does.
pub(super) async fn heartbeat_loop(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let every = shared.heartbeat;
    let beat = every.as_millis().max(1) as u64;
    let tick = (every / 3).max(Duration::from_millis(1));
    let mut ticks = tokio::time::interval_at(Instant::now() + tick, tick);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_beat = 0u64;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stopped(&mut stop) => return,
        }
        let now = shared.now_ms();
        let read_idle = now.saturating_sub(shared.last_read.load(Ordering::Relaxed));
        let write_idle = now.saturating_sub(shared.last_write.load(Ordering::Relaxed));
        if read_idle >= beat.saturating_mul(3) {
            shared.close(&format!(
                "nothing read for {read_idle} ms (three heartbeat intervals of {beat} ms)"
            ));
            return;
        }
        if (read_idle >= beat || write_idle >= beat) && now.saturating_sub(last_beat) >= beat {
            last_beat = now;
            let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
            trace!(address = %shared.address, id, read_idle, write_idle, "sending a heartbeat");
            shared.send_control(
                Header::event_request(id, HESSIAN2, true, event::HESSIAN2_NULL.len() as i32),
                event::HESSIAN2_NULL,
            );
        }
    }
}
