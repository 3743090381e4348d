//! The instances one call has tried, kept on the stack.

use std::sync::Arc;

use switchman_discovery::Snapshot;

use super::Pick;

use crate::config::MAX_ATTEMPTS;

/// The instances tried by one call, as indexes into the snapshot they were picked from, kept on
/// the stack. Remapped by address when the snapshot changes between attempts.
pub(crate) struct Tried {
    idx: [usize; MAX_ATTEMPTS],
    pub(super) len: usize,
    pub(super) snapshot: Option<Arc<Snapshot>>,
}

impl Tried {
    pub(super) fn new() -> Self {
        Tried {
            idx: [0; MAX_ATTEMPTS],
            len: 0,
            snapshot: None,
        }
    }

    pub(super) fn sync(&mut self, snap: &Arc<Snapshot>) {
        if self
            .snapshot
            .as_ref()
            .is_some_and(|old| Arc::ptr_eq(old, snap))
        {
            return;
        }
        self.remap(snap);
        self.snapshot = Some(snap.clone());
    }

    /// Marks `pick` tried in the tracked snapshot (by key when it was picked in another).
    pub(super) fn push_pick(&mut self, pick: Pick<'_>) {
        let Some(tracked) = &self.snapshot else {
            return;
        };
        if Arc::ptr_eq(tracked, pick.plan.snapshot()) {
            self.push(pick.index);
        } else if let Some(i) = tracked.index_of(pick.instance().key()) {
            self.push(i);
        }
    }

    pub(super) fn remap(&mut self, snap: &Snapshot) {
        if let Some(old) = &self.snapshot {
            if old.id() == snap.id() {
                return;
            }
            let mut n = 0;
            for k in 0..self.len {
                let key = old.endpoints()[self.idx[k]].instance.key();
                if let Some(i) = snap.index_of(key) {
                    self.idx[n] = i;
                    n += 1;
                }
            }
            self.len = n;
        }
    }

    pub(super) fn as_slice(&self) -> &[usize] {
        &self.idx[..self.len]
    }

    pub(super) fn contains(&self, i: usize) -> bool {
        self.as_slice().contains(&i)
    }

    pub(super) fn push(&mut self, i: usize) {
        if self.len < MAX_ATTEMPTS && !self.contains(i) {
            self.idx[self.len] = i;
            self.len += 1;
        }
    }

    pub(super) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}
