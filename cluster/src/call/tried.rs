//! The instances one call has tried, kept on the stack.

use std::sync::Arc;

use switchman_discovery::Snapshot;

use super::Pick;

use crate::config::MAX_ATTEMPTS;

/// The instances tried by one call, as indexes into the snapshot they were picked from, kept on
/// the stack. Remapped by address when the snapshot changes between attempts.
///
/// The indexes refer to the call's own snapshot (`home`, borrowed for the whole call: no
/// reference count taken) unless a strategy re-listed onto another one, which is then held.
pub(crate) struct Tried<'c> {
    idx: [usize; MAX_ATTEMPTS],
    pub(super) len: usize,
    /// The snapshot of the plan the call started with.
    home: &'c Arc<Snapshot>,
    /// Whether anything is tracked yet (the first sync starts it).
    tracking: bool,
    /// The snapshot the indexes refer to when it is not `home`.
    other: Option<Arc<Snapshot>>,
}

impl<'c> Tried<'c> {
    pub(super) fn new(home: &'c Arc<Snapshot>) -> Self {
        Tried {
            idx: [0; MAX_ATTEMPTS],
            len: 0,
            home,
            tracking: false,
            other: None,
        }
    }

    /// The snapshot the indexes refer to, once tracking.
    fn tracked(&self) -> Option<&Arc<Snapshot>> {
        self.tracking
            .then(|| self.other.as_ref().unwrap_or(self.home))
    }

    /// Whether nothing is tracked yet.
    pub(super) fn is_unset(&self) -> bool {
        !self.tracking
    }

    pub(super) fn sync(&mut self, snap: &Arc<Snapshot>) {
        if self.tracked().is_some_and(|t| Arc::ptr_eq(t, snap)) {
            return;
        }
        self.remap(snap);
        self.other = (!Arc::ptr_eq(snap, self.home)).then(|| snap.clone());
        self.tracking = true;
    }

    /// Marks `pick` tried in the tracked snapshot (by key when it was picked in another).
    pub(super) fn push_pick(&mut self, pick: Pick<'_>) {
        let Some(tracked) = self.tracked() else {
            return;
        };
        if Arc::ptr_eq(tracked, pick.plan.snapshot()) {
            self.push(pick.index);
        } else if let Some(i) = tracked.index_of(pick.instance().key()) {
            self.push(i);
        }
    }

    fn remap(&mut self, snap: &Snapshot) {
        let Some(old) = self.tracked() else {
            return;
        };
        if old.id() == snap.id() {
            return;
        }
        let mut idx = [0; MAX_ATTEMPTS];
        let mut n = 0;
        for &i in self.as_slice() {
            if let Some(j) = snap.index_of(old.endpoints()[i].instance.key()) {
                idx[n] = j;
                n += 1;
            }
        }
        self.idx = idx;
        self.len = n;
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
