//! Reads for a subscription, with or without one-shot watches.
//!
//! With persistent recursive watches (ZooKeeper 3.6+) reads are plain. Against older servers
//! (or with `watch=oneshot`) every read leaves a one-shot watch on what it read (a child
//! watch, a data watch, or an exists watch on a node that is not there yet); its event marks
//! that part dirty and the next read re-arms it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use zookeeper_client as zk;

use super::session::{CallError, call};

/// Pending one-shot watches by path (one per path and kind).
pub(crate) type Arms = HashMap<String, Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>>;

/// Where a subscription's events come from.
pub(crate) enum Watches {
    /// Persistent recursive watches.
    Persistent(Vec<zk::PersistentWatcher>),
    /// One-shot watches, re-armed by reads, and the session's state (one-shot watches do not
    /// report reconnects).
    Oneshot {
        arms: Arms,
        states: zk::StateWatcher,
    },
}

impl Watches {
    /// The next event: a node event or a session state change.
    pub(crate) async fn next(&mut self) -> zk::WatchedEvent {
        match self {
            Watches::Persistent(watchers) => {
                std::future::poll_fn(|cx| {
                    for w in watchers.iter_mut() {
                        let fut = std::pin::pin!(w.changed());
                        if let Poll::Ready(ev) = fut.poll(cx) {
                            return Poll::Ready(ev);
                        }
                    }
                    Poll::Pending
                })
                .await
            }
            Watches::Oneshot { arms, states } => {
                let node = std::future::poll_fn(|cx| {
                    let mut done = None;
                    for (k, f) in arms.iter_mut() {
                        if let Poll::Ready(ev) = f.as_mut().poll(cx) {
                            done = Some((k.clone(), ev));
                            break;
                        }
                    }
                    match done {
                        Some((k, ev)) => {
                            arms.remove(&k);
                            Poll::Ready(ev)
                        }
                        None => Poll::Pending,
                    }
                });
                tokio::select! {
                    biased;
                    s = states.changed() => zk::WatchedEvent::new_session(s),
                    ev = node => ev,
                }
            }
        }
    }

    /// The arms to re-arm in reads (one-shot mode only).
    pub(crate) fn arms(&mut self) -> Option<&mut Arms> {
        match self {
            Watches::Persistent(_) => None,
            Watches::Oneshot { arms, .. } => Some(arms),
        }
    }
}

/// Reads through one client, arming one-shot watches when `arms` is set.
pub(crate) struct Reader<'a> {
    pub(crate) client: &'a zk::Client,
    pub(crate) timeout: Duration,
    pub(crate) arms: Option<&'a mut Arms>,
}

impl Reader<'_> {
    fn arm(&mut self, key: String, watcher: zk::OneshotWatcher) {
        if let Some(arms) = self.arms.as_deref_mut() {
            // The new watcher exists before the old one (if any) is dropped.
            arms.insert(key, Box::pin(watcher.changed()));
        }
    }

    /// Watches for `path` to appear; `Ok(true)` if it exists after all.
    async fn watch_exists(&mut self, path: &str) -> Result<bool, CallError> {
        let (stat, w) = call(self.timeout, self.client.check_and_watch_stat(path)).await?;
        self.arm(format!("e:{path}"), w);
        Ok(stat.is_some())
    }

    /// The children of `path`; `None` when it does not exist.
    pub(crate) async fn children(&mut self, path: &str) -> Result<Option<Vec<String>>, CallError> {
        if self.arms.is_none() {
            return match call(self.timeout, self.client.list_children(path)).await {
                Ok(c) => Ok(Some(c)),
                Err(CallError::Zk(zk::Error::NoNode)) => Ok(None),
                Err(e) => Err(e),
            };
        }
        for _ in 0..3 {
            match call(self.timeout, self.client.get_and_watch_children(path)).await {
                Ok((c, _, w)) => {
                    self.arm(format!("c:{path}"), w);
                    return Ok(Some(c));
                }
                Err(CallError::Zk(zk::Error::NoNode)) => {
                    if !self.watch_exists(path).await? {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(CallError::Zk(zk::Error::NoNode))
    }

    /// The data of `path`; `None` when it does not exist.
    pub(crate) async fn data(&mut self, path: &str) -> Result<Option<Vec<u8>>, CallError> {
        if self.arms.is_none() {
            return match call(self.timeout, self.client.get_data(path)).await {
                Ok((d, _)) => Ok(Some(d)),
                Err(CallError::Zk(zk::Error::NoNode)) => Ok(None),
                Err(e) => Err(e),
            };
        }
        for _ in 0..3 {
            match call(self.timeout, self.client.get_and_watch_data(path)).await {
                Ok((d, _, w)) => {
                    self.arm(format!("d:{path}"), w);
                    return Ok(Some(d));
                }
                Err(CallError::Zk(zk::Error::NoNode)) => {
                    if !self.watch_exists(path).await? {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(CallError::Zk(zk::Error::NoNode))
    }
}
