//! One subscription: a task that watches a service's nodes and sends [`Update`]s.
//!
//! Per session it adds persistent recursive watches on `/dubbo/{interface}` (providers,
//! configurators and the legacy `routers` category), on the config-centre root `/dubbo/config/dubbo`, and, for the
//! application-level layout, on `/dubbo/mapping/{interface}`, `/services` and
//! `/dubbo/metadata`, plus the consumer application's migration rule node
//! `/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/{application}.migration`. Then it lists
//! everything once and re-reads only what events mark dirty. Which of the two lists goes out
//! (interface-level providers or application-level instances) is the migration step's choice
//! (`crate::migration`).
//! After every reconnect (`SyncConnected`) everything is re-listed, since persistent watches
//! can lose events across a reconnect (ZOOKEEPER-4698); after a session ends it waits for the
//! next session and starts over. Every ZooKeeper call has its own timeout; a failed read keeps
//! its part dirty and is retried, with a backoff while re-lists keep failing
//! (`state::Backoff`: 500 ms doubling to 30 s, warnings from the third failure in a row).
//!
//! Files: `session_loop.rs` (one session: its watches and event loop), `paths.rs` (the nodes
//! watched and what an event marks dirty), `relist.rs` (reading what is dirty and sending what
//! changed), `rules.rs` (the migration rule node and the legacy routers), `state.rs` (what
//! must be read again and what was last sent).

mod paths;
mod relist;
mod rules;
mod session_loop;
mod state;

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::Update;
use crate::migration::MigrationState;
use crate::zookeeper::nodes::ProviderFilter;
use crate::zookeeper::session::Session;
use session_loop::{Ended, serve};
use state::Sent;

pub(crate) fn spawn(session: Arc<Session>, filter: ProviderFilter, tx: mpsc::Sender<Update>) {
    tokio::spawn(async move {
        let mut clients = session.clients();
        let mut sent = Sent::default();
        if let Some(app) = &session.config.application {
            sent.apps.insert(app.clone());
        }
        // Application-level discovery maps one interface to its applications: `*` has none.
        if session.config.app_level && filter.key.interface.as_ref() != "*" {
            sent.migration = Some(MigrationState::new(
                MigrationState::display_key(&filter.key),
                session.config.migration.clone(),
            ));
        }
        let mut served = 0u64;
        loop {
            // The next session's client (never the one that just ended).
            let conn = loop {
                if let Some(c) = clients
                    .borrow_and_update()
                    .clone()
                    .filter(|c| c.generation > served)
                {
                    break c;
                }
                tokio::select! {
                    r = clients.changed() => if r.is_err() { return },
                    _ = tx.closed() => return,
                }
            };
            served = conn.generation;
            match serve(&session, conn, &filter, &tx, &mut sent, &mut clients).await {
                Ended::Closed => return,
                Ended::Session => continue,
            }
        }
    });
}
