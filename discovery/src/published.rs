//! [`Published`]: a value swapped atomically (arc-swap) whose readers take an owned `Arc` of
//! the current content for one atomic read-modify-write instead of four.
//!
//! `ArcSwap::load_full` pays arc-swap's debt slot (a locked store, a locked compare-and-swap)
//! around the reference-count increment. A call keeps its snapshot (or plan) across `.await`s,
//! so it needs the count; the debt slot is the price of reaching the content safely. Here each
//! thread keeps a [`Weak`] of the content it read last, per published value, and the writer
//! stores the current content's address next to it. A read compares that address with the
//! thread's `Weak` and, when equal, upgrades it: one compare-and-swap on the count.
//!
//! Sound without `unsafe`: the thread's `Weak` keeps its allocation from being freed, so no
//! other value can be published at that address while the `Weak` lives; equal addresses mean
//! the very content. An upgrade that fails (the content was dropped meanwhile) or a different
//! address falls back to `load_full` and remembers the new content. A `Weak` keeps only the
//! allocation's header and the value's inline bytes, not what the value owns.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::LocalKey;

use arc_swap::{ArcSwap, Guard};

/// Values one thread remembers per type: direct-mapped by the value's id (ids are numbered
/// across all types: every directory, and each call plan's cache), so two values whose ids are
/// 128 apart, read in turn on one thread, share a slot and take the slow path (a `load_full`,
/// and a `Weak` replaced). 2 KiB per type per thread.
pub const LOCAL_SLOTS: usize = 128;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A thread's last reads of [`Published`] values of one type: declare one per type with
/// `thread_local!` (`const { RefCell::new(LocalReads::new()) }`) and pass it to
/// [`Published::load_local`].
pub struct LocalReads<T> {
    slots: [(u64, Weak<T>); LOCAL_SLOTS],
}

impl<T> LocalReads<T> {
    /// No read remembered.
    pub const fn new() -> Self {
        LocalReads {
            slots: [const { (0, Weak::new()) }; LOCAL_SLOTS],
        }
    }
}

impl<T> fmt::Debug for LocalReads<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let remembered = self.slots.iter().filter(|(id, _)| *id != 0).count();
        f.debug_struct("LocalReads")
            .field("remembered", &remembered)
            .finish()
    }
}

impl<T> Default for LocalReads<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// An atomically replaced `Arc<T>` (see the module's documentation).
pub struct Published<T> {
    value: ArcSwap<T>,
    /// The address of `value`'s current content, stored after it.
    at: AtomicUsize,
    /// Process-unique: picks the readers' slot and tells published values apart in it.
    id: u64,
    /// One writer at a time, so `at` ends at the content `value` ends with.
    writer: Mutex<()>,
}

impl<T: fmt::Debug> fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.value.load(), f)
    }
}

/// The address of a value behind an `Arc` or a `Weak`.
fn address<T>(value: *const T) -> usize {
    value as *const u8 as usize
}

impl<T> Published<T> {
    /// Publishes `value`.
    pub fn new(value: Arc<T>) -> Self {
        Published {
            at: AtomicUsize::new(address(Arc::as_ptr(&value))),
            value: ArcSwap::new(value),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            writer: Mutex::new(()),
        }
    }

    /// Publishes `value` and gives back the content it replaces.
    pub fn swap(&self, value: Arc<T>) -> Arc<T> {
        let _one = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let at = address(Arc::as_ptr(&value));
        let previous = self.value.swap(value);
        self.at.store(at, Ordering::Release);
        previous
    }

    /// The current content for a moment (arc-swap's guard: no reference count written).
    pub fn guard(&self) -> Guard<Arc<T>> {
        self.value.load()
    }

    /// The current content, to keep (arc-swap's `load_full`).
    pub fn load_full(&self) -> Arc<T> {
        self.value.load_full()
    }

    /// The current content, to keep: one compare-and-swap on its count when this thread read
    /// the same content last time (through `reads`), else [`Published::load_full`].
    #[inline]
    pub fn load_local(&self, reads: &'static LocalKey<RefCell<LocalReads<T>>>) -> Arc<T>
    where
        T: 'static,
    {
        let at = self.at.load(Ordering::Acquire);
        let slot = (self.id % LOCAL_SLOTS as u64) as usize;
        let hit = reads.try_with(|r| {
            let r = r.try_borrow().ok()?;
            let (id, weak) = &r.slots[slot];
            if *id == self.id && address(weak.as_ptr()) == at {
                weak.upgrade()
            } else {
                None
            }
        });
        if let Ok(Some(value)) = hit {
            return value;
        }
        self.load_and_remember(reads, slot)
    }

    #[cold]
    fn load_and_remember(
        &self,
        reads: &'static LocalKey<RefCell<LocalReads<T>>>,
        slot: usize,
    ) -> Arc<T>
    where
        T: 'static,
    {
        let value = self.value.load_full();
        let weak = Arc::downgrade(&value);
        let _ = reads.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                // Dropping the `Weak` replaced frees at most an allocation whose value is
                // gone already: nothing that could read this thread's slots again.
                r.slots[slot] = (self.id, weak);
            }
        });
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static READS: RefCell<LocalReads<Vec<u32>>> = const { RefCell::new(LocalReads::new()) };
    }

    #[test]
    fn reads_follow_every_swap_and_keep_their_content() {
        let p = Published::new(Arc::new(vec![1]));
        let first = p.load_local(&READS);
        assert_eq!(*first, [1]);
        // The second read is the remembered one.
        assert!(Arc::ptr_eq(&first, &p.load_local(&READS)));
        let old = p.swap(Arc::new(vec![2]));
        assert!(Arc::ptr_eq(&old, &first));
        assert_eq!(*p.load_local(&READS), [2]);
        assert_eq!(*p.load_local(&READS), [2]);
        // What a reader took stays whole after its swap.
        assert_eq!(*first, [1]);
        drop((first, old));
        // Swapping back an earlier content (or a new one at a freed address) is seen too.
        let again = Arc::new(vec![3]);
        p.swap(again.clone());
        assert!(Arc::ptr_eq(&p.load_local(&READS), &again));
    }

    #[test]
    fn values_sharing_a_slot_each_read_their_own() {
        let ps: Vec<Published<Vec<u32>>> = (0..LOCAL_SLOTS as u32 + 3)
            .map(|i| Published::new(Arc::new(vec![i])))
            .collect();
        for _ in 0..3 {
            for (i, p) in ps.iter().enumerate() {
                assert_eq!(*p.load_local(&READS), [i as u32]);
            }
        }
    }

    #[test]
    fn a_remembered_read_keeps_no_content_alive() {
        let p = Published::new(Arc::new(vec![1]));
        let first = p.load_local(&READS);
        let weak = Arc::downgrade(&first);
        drop(first);
        p.swap(Arc::new(vec![2]));
        // Only this thread's `Weak` (and ours) is left: the content is dropped.
        assert!(weak.upgrade().is_none());
        assert_eq!(*p.load_local(&READS), [2]);
    }

    #[test]
    fn threads_reading_while_one_swaps_see_only_published_contents() {
        let p = Arc::new(Published::new(Arc::new(vec![0u32; 4])));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (p, stop) = (p.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut last = 0;
                    let mut reads = 0u64;
                    while !stop.load(Ordering::Relaxed) || reads < 1000 {
                        let v = p.load_local(&READS);
                        // Every content is four equal numbers, and they only grow.
                        assert!(v.iter().all(|&x| x == v[0]), "a torn content: {v:?}");
                        assert!(v[0] >= last, "went back from {last} to {}", v[0]);
                        last = v[0];
                        reads += 1;
                    }
                    last
                })
            })
            .collect();
        for i in 1..=2000u32 {
            p.swap(Arc::new(vec![i; 4]));
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            let last = r.join().unwrap();
            assert!(last <= 2000);
        }
        assert_eq!(*p.load_local(&READS), [2000; 4]);
    }
}
