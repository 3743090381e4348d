//! Successive complete lists of one subscription, turned into the [`Update`]s that carry only
//! what changed.
//!
//! ZooKeeper and Nacos hand an adapter the whole provider list after every change. Sent as a
//! [`Update::Reset`], a one-weight change of a 10k-instance service makes the directory compare
//! and replace all 10k entries; sent as an [`Update::Add`] of the one instance that changed,
//! it takes the directory's patch path (see `RegistryDirectory`), which copies the last
//! snapshot with that entry swapped in.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::Arc;

use switchman_core::Instance;
use tracing::warn;

use crate::Update;

/// The list last sent by one subscription.
#[derive(Debug, Default)]
#[cfg_attr(not(any(feature = "zookeeper", feature = "nacos")), allow(dead_code))]
pub(crate) struct Deltas {
    /// `None` before the first list and after [`Deltas::resend`]: the next list goes out whole.
    last: Option<Vec<Arc<Instance>>>,
}

#[cfg_attr(not(any(feature = "zookeeper", feature = "nacos")), allow(dead_code))]
impl Deltas {
    /// The next list is sent whole (a [`Update::Reset`]), as after a reconnect.
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) fn resend(&mut self) {
        self.last = None;
    }

    /// The updates that take a directory holding the list last sent to `list`: the whole list
    /// (`Reset`) the first time and after [`Deltas::resend`], otherwise [`changes`]. Unchanged
    /// instances are recognised by pointer first (adapters that cache what they parsed hand
    /// the same `Arc` again), else by comparison.
    ///
    /// Also returns the list it replaces, for the caller to free after sending the updates and
    /// yielding (see [`free_after_yield`]): freeing 10k instances takes milliseconds.
    #[must_use = "send the updates, then free the replaced list with free_after_yield"]
    pub(crate) fn next(
        &mut self,
        list: Vec<Arc<Instance>>,
    ) -> (Vec<Update>, Option<Vec<Arc<Instance>>>) {
        let updates = match &self.last {
            None => vec![Update::Reset(list.clone())],
            Some(last) => changes(last, &list),
        };
        (updates, self.last.replace(list))
    }
}

/// Frees `retired` after letting the runtime run other tasks first, so that on a busy or
/// single-worker runtime the directory applies the updates just sent before this task spends
/// milliseconds freeing the list they replaced.
pub(crate) async fn free_after_yield<T>(retired: T) {
    tokio::task::yield_now().await;
    drop(retired);
}

/// By endpoint key ([`Instance::key`]); the later of two entries for one key wins, as in a
/// `Reset`.
fn by_key<T: Entry>(list: &[T], warn_twice: bool) -> Keyed<'_, T> {
    let mut map = Keyed::with_capacity_and_hasher(list.len(), Default::default());
    for entry in list {
        let inst = entry.borrow();
        if map.insert(inst.key(), entry).is_some() && warn_twice {
            warn!(endpoint = %inst.key(), "registry listed an endpoint twice; the later entry wins");
        }
    }
    map
}

/// An entry of a whole list: an [`Instance`] (a static registry's list, copied into an `Arc`
/// when sent) or an `Arc<Instance>` (an adapter's parsed instances, sent as they are).
pub(crate) trait Entry: Borrow<Instance> {
    fn to_shared(&self) -> Arc<Instance>;
}

impl Entry for Instance {
    fn to_shared(&self) -> Arc<Instance> {
        Arc::new(self.clone())
    }
}

impl Entry for Arc<Instance> {
    fn to_shared(&self) -> Arc<Instance> {
        self.clone()
    }
}

/// Endpoint key to instance, borrowed from a list. foldhash, seeded per process (keys come
/// from the registry).
type Keyed<'a, T> = HashMap<&'a str, &'a T, foldhash::fast::RandomState>;

/// What changed from `last` to `next`, both whole lists: an `Add` of the instances that are new
/// or differ, then a `Remove` of the endpoint keys that left. Adds go first, so a provider that
/// moves never leaves a moment without it. Empty when nothing changed. Only changed instances
/// are sent (the `Arc`s of `next`, or copies of its instances); an instance that is the same
/// object in both lists is not even compared.
pub(crate) fn changes<A: Entry, B: Entry>(last: &[A], next: &[B]) -> Vec<Update> {
    let before = by_key(last, false);
    let after = by_key(next, true);
    let added: Vec<Arc<Instance>> = after
        .iter()
        .filter(|(address, entry)| {
            let inst: &Instance = (**entry).borrow();
            match before.get(*address) {
                Some(old) => {
                    let old: &Instance = (**old).borrow();
                    !std::ptr::eq(old, inst) && old != inst
                }
                None => true,
            }
        })
        .map(|(_, entry)| entry.to_shared())
        .collect();
    let removed: Vec<String> = before
        .keys()
        .filter(|address| !after.contains_key(*address))
        .map(|address| address.to_string())
        .collect();
    let mut updates = Vec::new();
    if !added.is_empty() {
        updates.push(Update::Add(added));
    }
    if !removed.is_empty() {
        updates.push(Update::Remove(removed));
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(port: u16, weight: u32) -> Arc<Instance> {
        Arc::new(Instance::builder("10.0.0.1", port).weight(weight).build())
    }

    fn ports(list: &[Arc<Instance>]) -> Vec<(u16, u32)> {
        let mut p: Vec<(u16, u32)> = list.iter().map(|i| (i.port(), i.weight())).collect();
        p.sort();
        p
    }

    #[test]
    fn first_list_whole_then_only_changes_adds_before_removes() {
        let mut d = Deltas::default();
        let a = inst(1, 100);
        let b = inst(2, 100);
        match &d.next(vec![a.clone(), b.clone()]).0[..] {
            [Update::Reset(l)] => assert_eq!(ports(l), [(1, 100), (2, 100)]),
            other => panic!("{other:?}"),
        }
        // Same Arcs, or equal new ones: nothing to send.
        assert!(d.next(vec![a.clone(), b.clone()]).0.is_empty());
        assert!(d.next(vec![inst(1, 100), inst(2, 100)]).0.is_empty());
        // A weight change, an arrival and a departure.
        match &d.next(vec![inst(1, 5), inst(3, 100)]).0[..] {
            [Update::Add(added), Update::Remove(gone)] => {
                assert_eq!(ports(added), [(1, 5), (3, 100)]);
                assert_eq!(gone, &[inst(2, 100).key().to_string()]);
            }
            other => panic!("{other:?}"),
        }
        // Everything gone: one Remove.
        match &d.next(vec![]).0[..] {
            [Update::Remove(gone)] => assert_eq!(gone.len(), 2),
            other => panic!("{other:?}"),
        }
        d.resend();
        assert!(matches!(&d.next(vec![a]).0[..], [Update::Reset(l)] if l.len() == 1));
    }

    #[test]
    fn the_later_entry_for_an_address_wins_as_in_a_reset() {
        let mut d = Deltas::default();
        let _ = d.next(vec![inst(1, 2)]);
        // The first entry differs from what was sent, the later one does not: nothing changed.
        assert!(d.next(vec![inst(1, 1), inst(1, 2)]).0.is_empty());
        match &d.next(vec![inst(1, 2), inst(1, 3)]).0[..] {
            [Update::Add(added)] => assert_eq!(ports(added), [(1, 3)]),
            other => panic!("{other:?}"),
        }
    }

    /// Feeding a directory model the updates gives the same state as feeding it the lists.
    #[test]
    fn applied_updates_reproduce_every_list() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut d = Deltas::default();
        let mut model: std::collections::BTreeMap<String, Arc<Instance>> = Default::default();
        for round in 0..500 {
            let list: Vec<Arc<Instance>> = (0..rng.usize(0..12))
                .map(|_| inst(rng.u16(1..10), rng.u32(0..3)))
                .collect();
            for u in d.next(list.clone()).0 {
                match u {
                    Update::Reset(l) => {
                        model = l.into_iter().map(|i| (i.key().to_string(), i)).collect()
                    }
                    Update::Add(l) => {
                        for i in l {
                            model.insert(i.key().to_string(), i);
                        }
                    }
                    Update::Remove(l) => {
                        for a in l {
                            model.remove(&a);
                        }
                    }
                    other => panic!("{other:?}"),
                }
            }
            let want: std::collections::BTreeMap<String, Arc<Instance>> = list
                .iter()
                .map(|i| (i.key().to_string(), i.clone()))
                .collect();
            assert_eq!(model, want, "round {round}");
        }
    }
}
