//! A fixed-size set of instance indexes, used while building a route table.

/// A set of indexes `0..len`, one bit each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Bitset {
    words: Box<[u64]>,
    len: usize,
}

impl Bitset {
    /// The empty set over `len` indexes.
    pub(crate) fn empty(len: usize) -> Self {
        Bitset {
            words: vec![0; len.div_ceil(64)].into_boxed_slice(),
            len,
        }
    }

    /// The full set `0..len`.
    pub(crate) fn full(len: usize) -> Self {
        let mut b = Self::empty(len);
        for i in 0..len {
            b.insert(i);
        }
        b
    }

    /// The set of indexes for which `f` is true.
    pub(crate) fn from_fn(len: usize, mut f: impl FnMut(usize) -> bool) -> Self {
        let mut b = Self::empty(len);
        for i in 0..len {
            if f(i) {
                b.insert(i);
            }
        }
        b
    }

    pub(crate) fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub(crate) fn contains(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    pub(crate) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// `self ∩ other`.
    pub(crate) fn and(&self, other: &Bitset) -> Bitset {
        let words = self
            .words
            .iter()
            .zip(other.words.iter())
            .map(|(a, b)| a & b)
            .collect();
        Bitset {
            words,
            len: self.len,
        }
    }

    /// `self ∪ other`.
    pub(crate) fn or(&self, other: &Bitset) -> Bitset {
        let words = self
            .words
            .iter()
            .zip(other.words.iter())
            .map(|(a, b)| a | b)
            .collect();
        Bitset {
            words,
            len: self.len,
        }
    }

    /// `self \ other`.
    pub(crate) fn and_not(&self, other: &Bitset) -> Bitset {
        let words = self
            .words
            .iter()
            .zip(other.words.iter())
            .map(|(a, b)| a & !b)
            .collect();
        Bitset {
            words,
            len: self.len,
        }
    }

    /// The members in ascending order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + b)
            })
        })
    }

    /// The members as `u32` indexes, ascending.
    pub(crate) fn to_indexes(&self) -> std::sync::Arc<[u32]> {
        self.iter().map(|i| i as u32).collect()
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
}
