//! A fixed-size set of instance indexes, used while building a route table.
//!
//! Dense (one bit per index) or sparse (the sorted members), whichever is smaller: a table
//! with a thousand static tag groups holds a thousand small sets, and a small set must not
//! cost a bit per instance. The form is canonical (it depends only on the members and the
//! size), so equal sets compare and hash equal.

/// A set of indexes `0..len`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Bitset {
    repr: Repr,
    len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Repr {
    Dense(Box<[u64]>),
    /// Ascending, no duplicates.
    Sparse(Vec<u32>),
}

/// Whether `count` members of a set over `len` indexes are stored sparse: when the members
/// take less room than the bits.
fn sparse_fits(count: usize, len: usize) -> bool {
    count < 2 * len.div_ceil(64)
}

impl Bitset {
    /// The empty set over `len` indexes.
    pub(crate) fn empty(len: usize) -> Self {
        Bitset {
            repr: if sparse_fits(0, len) {
                Repr::Sparse(Vec::new())
            } else {
                Repr::Dense(Box::new([]))
            },
            len,
        }
    }

    fn dense_zero(len: usize) -> Box<[u64]> {
        vec![0; len.div_ceil(64)].into_boxed_slice()
    }

    /// Brings a set into its canonical form.
    fn canonical(self) -> Self {
        let count = self.count();
        let repr = match self.repr {
            Repr::Dense(words) if sparse_fits(count, self.len) => {
                let b = Bitset {
                    repr: Repr::Dense(words),
                    len: self.len,
                };
                Repr::Sparse(b.iter().map(|i| i as u32).collect())
            }
            Repr::Sparse(members) if !sparse_fits(count, self.len) => {
                let mut words = Self::dense_zero(self.len);
                for &i in &members {
                    words[i as usize / 64] |= 1 << (i % 64);
                }
                Repr::Dense(words)
            }
            r => r,
        };
        Bitset {
            repr,
            len: self.len,
        }
    }

    /// The full set `0..len`.
    pub(crate) fn full(len: usize) -> Self {
        Self::from_fn(len, |_| true)
    }

    /// The set of indexes for which `f` is true.
    pub(crate) fn from_fn(len: usize, mut f: impl FnMut(usize) -> bool) -> Self {
        let mut words = Self::dense_zero(len);
        for i in 0..len {
            if f(i) {
                words[i / 64] |= 1 << (i % 64);
            }
        }
        Bitset {
            repr: Repr::Dense(words),
            len,
        }
        .canonical()
    }

    pub(crate) fn insert(&mut self, i: usize) {
        match &mut self.repr {
            Repr::Dense(words) => words[i / 64] |= 1 << (i % 64),
            Repr::Sparse(members) => {
                let i = i as u32;
                match members.last() {
                    // Ascending inserts (the common case) append.
                    Some(&last) if last < i => members.push(i),
                    None => members.push(i),
                    _ => {
                        if let Err(at) = members.binary_search(&i) {
                            members.insert(at, i);
                        }
                    }
                }
                if !sparse_fits(members.len(), self.len) {
                    *self = std::mem::replace(self, Bitset::empty(0)).canonical();
                }
            }
        }
    }

    pub(crate) fn contains(&self, i: usize) -> bool {
        match &self.repr {
            Repr::Dense(words) => words[i / 64] & (1 << (i % 64)) != 0,
            Repr::Sparse(members) => members.binary_search(&(i as u32)).is_ok(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Dense(words) => words.iter().all(|&w| w == 0),
            Repr::Sparse(members) => members.is_empty(),
        }
    }

    pub(crate) fn count(&self) -> usize {
        match &self.repr {
            Repr::Dense(words) => words.iter().map(|w| w.count_ones() as usize).sum(),
            Repr::Sparse(members) => members.len(),
        }
    }

    /// What the set holds in memory, in bits: one per index dense, 32 per member sparse.
    pub(crate) fn cost_bits(&self) -> usize {
        match &self.repr {
            Repr::Dense(words) => words.len() * 64,
            Repr::Sparse(members) => members.len() * 32,
        }
    }

    fn from_members(len: usize, members: Vec<u32>) -> Bitset {
        Bitset {
            repr: Repr::Sparse(members),
            len,
        }
        .canonical()
    }

    fn zip_words(&self, other: &Bitset, f: impl Fn(u64, u64) -> u64) -> Option<Bitset> {
        match (&self.repr, &other.repr) {
            (Repr::Dense(a), Repr::Dense(b)) => Some(
                Bitset {
                    repr: Repr::Dense(a.iter().zip(b.iter()).map(|(x, y)| f(*x, *y)).collect()),
                    len: self.len,
                }
                .canonical(),
            ),
            _ => None,
        }
    }

    /// `self ∩ other`.
    pub(crate) fn and(&self, other: &Bitset) -> Bitset {
        if let Some(b) = self.zip_words(other, |a, b| a & b) {
            return b;
        }
        // At least one side is sparse: walk the smaller one.
        let (small, big) = if self.count() <= other.count() {
            (self, other)
        } else {
            (other, self)
        };
        let members = small
            .iter()
            .filter(|&i| big.contains(i))
            .map(|i| i as u32)
            .collect();
        Self::from_members(self.len, members)
    }

    /// `self ∪ other`.
    pub(crate) fn or(&self, other: &Bitset) -> Bitset {
        if let Some(b) = self.zip_words(other, |a, b| a | b) {
            return b;
        }
        let mut out = self.clone();
        for i in other.iter() {
            out.insert(i);
        }
        out.canonical()
    }

    /// `self \ other`.
    pub(crate) fn and_not(&self, other: &Bitset) -> Bitset {
        if let Some(b) = self.zip_words(other, |a, b| a & !b) {
            return b;
        }
        let members = self
            .iter()
            .filter(|&i| !other.contains(i))
            .map(|i| i as u32)
            .collect();
        Self::from_members(self.len, members)
    }

    /// The members in ascending order.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match &self.repr {
            Repr::Dense(words) => Box::new(words.iter().enumerate().flat_map(|(wi, &w)| {
                let mut w = w;
                std::iter::from_fn(move || {
                    if w == 0 {
                        return None;
                    }
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    Some(wi * 64 + b)
                })
            })),
            Repr::Sparse(members) => Box::new(members.iter().map(|&i| i as usize)),
        }
    }

    /// The members as `u32` indexes, ascending.
    pub(crate) fn to_indexes(&self) -> std::sync::Arc<[u32]> {
        match &self.repr {
            Repr::Sparse(members) => members.as_slice().into(),
            Repr::Dense(_) => self.iter().map(|i| i as u32).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let a = Bitset::from_fn(130, |i| i % 2 == 0);
        let b = Bitset::from_fn(130, |i| i % 3 == 0);
        assert_eq!(a.and(&b).iter().take(3).collect::<Vec<_>>(), vec![0, 6, 12]);
        assert_eq!(a.or(&b).count(), 65 + 44 - 22);
        assert!(a.and_not(&a).is_empty());
        assert!(Bitset::full(130).contains(129));
        assert_eq!(Bitset::full(130).count(), 130);
        assert_eq!(&*Bitset::from_fn(70, |i| i == 69).to_indexes(), &[69]);
    }

    /// Every operation agrees with a model, in both forms and across them, and equal sets
    /// are equal values (same form) whatever built them.
    #[test]
    fn dense_and_sparse_agree_with_a_model() {
        use std::collections::BTreeSet;
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..500 {
            let len = rng.usize(0..300);
            let density = rng.f64();
            let pick = |rng: &mut fastrand::Rng| -> BTreeSet<usize> {
                let d = density * rng.f64();
                (0..len).filter(|_| rng.f64() < d).collect()
            };
            let (ma, mb) = (pick(&mut rng), pick(&mut rng));
            let a = Bitset::from_fn(len, |i| ma.contains(&i));
            let mut b = Bitset::empty(len);
            let mut order: Vec<usize> = mb.iter().copied().collect();
            rng.shuffle(&mut order);
            for i in order {
                b.insert(i);
            }
            assert_eq!(b, Bitset::from_fn(len, |i| mb.contains(&i)), "insert order");
            let model = |s: &Bitset| s.iter().collect::<BTreeSet<usize>>();
            assert_eq!(model(&a), ma);
            assert_eq!(model(&b), mb);
            assert_eq!(a.count(), ma.len());
            assert_eq!(a.is_empty(), ma.is_empty());
            let and: BTreeSet<usize> = ma.intersection(&mb).copied().collect();
            let or: BTreeSet<usize> = ma.union(&mb).copied().collect();
            let not: BTreeSet<usize> = ma.difference(&mb).copied().collect();
            assert_eq!(model(&a.and(&b)), and);
            assert_eq!(model(&a.or(&b)), or);
            assert_eq!(model(&a.and_not(&b)), not);
            assert_eq!(a.and(&b), Bitset::from_fn(len, |i| and.contains(&i)));
            assert_eq!(a.or(&b), Bitset::from_fn(len, |i| or.contains(&i)));
            assert_eq!(a.and_not(&b), Bitset::from_fn(len, |i| not.contains(&i)));
            for i in 0..len {
                assert_eq!(a.contains(i), ma.contains(&i));
            }
            let idx: Vec<u32> = ma.iter().map(|&i| i as u32).collect();
            assert_eq!(&*a.to_indexes(), idx.as_slice());
        }
    }

    #[test]
    fn small_sets_cost_their_members_not_their_size() {
        let one = Bitset::from_fn(10_000, |i| i == 42);
        assert_eq!(one.cost_bits(), 32);
        assert_eq!(Bitset::full(10_000).cost_bits(), 157 * 64);
    }
}
