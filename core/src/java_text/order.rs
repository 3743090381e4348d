//! The order Java's collections iterate their members in, and the `hashCode`s it depends on.

use std::cmp::Ordering;

/// Java's `String.hashCode` (over UTF-16 code units).
pub(super) fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// Java's `Long.hashCode`.
pub(super) fn long_hash(v: i64) -> i32 {
    (v ^ ((v as u64) >> 32) as i64) as i32
}

/// Java's `Double.hashCode` (NaN canonical).
pub(super) fn double_hash(d: f64) -> i32 {
    let bits = if d.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        d.to_bits()
    };
    (bits ^ (bits >> 32)) as i32
}

/// Java's `Float.hashCode` (NaN canonical).
pub(super) fn float_hash(f: f32) -> i32 {
    (if f.is_nan() { 0x7fc0_0000 } else { f.to_bits() }) as i32
}

/// Java's `BigInteger.hashCode` of `v`.
pub(super) fn big_integer_hash(v: i128) -> i32 {
    let abs = v.unsigned_abs();
    let words = [
        (abs >> 96) as u32,
        (abs >> 64) as u32,
        (abs >> 32) as u32,
        abs as u32,
    ];
    let h = words
        .iter()
        .skip_while(|&&w| w == 0)
        .fold(0i32, |h, &w| h.wrapping_mul(31).wrapping_add(w as i32));
    h.wrapping_mul(v.signum() as i32)
}

/// UTF-16 order (`String.compareTo`).
pub(super) fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The members of a map (or set) of `n` entries put in index order, as `(key, value)` index
/// pairs in iteration order: a key put again keeps its first position and takes the last value
/// (`HashMap.put`, `TreeMap.put`; a set's add keeps the first element).
pub(super) struct Arranged {
    pub(super) pairs: Vec<(usize, usize)>,
    /// False when Java's order may differ (a `HashMap` bucket Java turns into a tree). Only
    /// the tests read it: rendering takes the order either way.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) exact: bool,
}

/// `HashMap` (and `HashSet`) order: default capacity 16, load factor 0.75, bucket index
/// `(h ^ h >>> 16) & (n - 1)`, insertion order within a bucket (kept by resizes, which split
/// each bucket in order), a bucket of 8 growing the table while it has fewer than 64 buckets.
/// `hashes[i]` is key `i`'s `hashCode`; `eq(a, b)` is `equals` of keys with equal hashes.
pub(super) fn hash_order(hashes: &[i32], eq: impl Fn(usize, usize) -> bool) -> Arranged {
    struct Node {
        hash: u32,
        key: usize,
        value: usize,
    }
    let mut nodes: Vec<Node> = Vec::with_capacity(hashes.len());
    let mut cap = 16usize;
    let mut threshold = 12usize;
    let mut table: Vec<Vec<usize>> = (0..cap).map(|_| Vec::new()).collect();
    let mut tree = vec![false; cap];
    let mut exact = true;

    fn resize(table: &mut Vec<Vec<usize>>, tree: &mut Vec<bool>, nodes: &[Node], cap: usize) {
        let mut next: Vec<Vec<usize>> = (0..cap * 2).map(|_| Vec::new()).collect();
        let mut next_tree = vec![false; cap * 2];
        for (j, bin) in table.iter().enumerate() {
            for &n in bin {
                let at = if nodes[n].hash as usize & cap == 0 {
                    j
                } else {
                    j + cap
                };
                next[at].push(n);
            }
            if tree[j] {
                // TreeNode.split: a half of at most 6 becomes a list again.
                next_tree[j] = next[j].len() > 6;
                next_tree[j + cap] = next[j + cap].len() > 6;
            }
        }
        *table = next;
        *tree = next_tree;
    }

    for (i, &raw) in hashes.iter().enumerate() {
        let h = (raw ^ ((raw as u32) >> 16) as i32) as u32;
        let b = h as usize & (cap - 1);
        if let Some(&n) = table[b]
            .iter()
            .find(|&&n| nodes[n].hash == h && eq(nodes[n].key, i))
        {
            nodes[n].value = i;
            continue;
        }
        let before = table[b].len();
        nodes.push(Node {
            hash: h,
            key: i,
            value: i,
        });
        table[b].push(nodes.len() - 1);
        if !tree[b] && before >= 8 {
            // treeifyBin: a small table grows instead.
            if cap < 64 {
                resize(&mut table, &mut tree, &nodes, cap);
                cap *= 2;
                threshold *= 2;
            } else {
                tree[b] = true;
            }
        }
        if nodes.len() > threshold {
            resize(&mut table, &mut tree, &nodes, cap);
            cap *= 2;
            threshold *= 2;
        }
    }
    // Java orders a tree bucket by its red-black tree's insertions (root first): not modelled.
    for (bin, &t) in table.iter().zip(&tree) {
        if t && bin.len() > 1 {
            exact = false;
        }
    }
    Arranged {
        pairs: table
            .iter()
            .flatten()
            .map(|&n| (nodes[n].key, nodes[n].value))
            .collect(),
        exact,
    }
}

/// Insertion order with duplicates (equal hashes and `eq`) merged: first position, last value
/// (`LinkedHashMap`, `LinkedHashSet`). Keys without a hash are never merged.
pub(super) fn insertion_order(
    hashes: &[Option<i32>],
    eq: impl Fn(usize, usize) -> bool,
) -> Arranged {
    let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(hashes.len());
    let mut by_hash: std::collections::HashMap<i32, Vec<usize>> = Default::default();
    for (i, h) in hashes.iter().enumerate() {
        if let Some(h) = h {
            let slots = by_hash.entry(*h).or_default();
            if let Some(&p) = slots.iter().find(|&&p| eq(pairs[p].0, i)) {
                pairs[p].1 = i;
                continue;
            }
            slots.push(pairs.len());
        }
        pairs.push((i, i));
    }
    Arranged { pairs, exact: true }
}

/// Natural order (`TreeMap`, `TreeSet`), keys comparing equal merged (first key, last value);
/// `None` when two keys do not compare (Java would throw `ClassCastException`).
pub(super) fn sorted_order(
    n: usize,
    cmp: impl Fn(usize, usize) -> Option<Ordering>,
) -> Option<Arranged> {
    let mut incomparable = false;
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| {
        cmp(a, b).unwrap_or_else(|| {
            incomparable = true;
            Ordering::Equal
        })
    });
    if incomparable {
        return None;
    }
    let mut pairs: Vec<(usize, usize)> = Vec::with_capacity(n);
    for i in idx {
        match pairs.last_mut() {
            Some(last) if cmp(last.0, i) == Some(Ordering::Equal) => last.1 = last.1.max(i),
            _ => pairs.push((i, i)),
        }
    }
    Some(Arranged { pairs, exact: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_codes() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("hello"), 99_162_322);
        // Overflow wraps, as in Java: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(string_hash("polygenelubricants"), i32::MIN);
        // A supplementary character hashes as its two UTF-16 units.
        assert_eq!(string_hash("😀"), 0xD83D * 31 + 0xDE00);
        assert_eq!(long_hash(1), 1);
        assert_eq!(long_hash(-1), 0);
        assert_eq!(long_hash(1 << 32), 1);
        assert_eq!(double_hash(1.0), 1_072_693_248);
        assert_eq!(double_hash(0.0), 0);
        assert_eq!(double_hash(-0.0), i32::MIN);
        assert_eq!(float_hash(1.0), 1_065_353_216);
        assert_eq!(big_integer_hash(0), 0);
        assert_eq!(big_integer_hash(5), 5);
        assert_eq!(big_integer_hash(-5), -5);
        // BigInteger.valueOf(1L << 32).hashCode(): mag [1, 0] → 31.
        assert_eq!(big_integer_hash(1 << 32), 31);
    }

    fn keys(hashes: &[i32]) -> Vec<usize> {
        hash_order(hashes, |_, _| false)
            .pairs
            .into_iter()
            .map(|p| p.0)
            .collect()
    }

    #[test]
    fn hash_order_follows_buckets_and_resizes() {
        // 16 buckets: 17 lands in bucket 1 after 0 and before 2; 16 shares bucket 0 with 0,
        // after it.
        assert_eq!(keys(&[2, 17, 16, 0]), vec![2, 3, 1, 0]);
        // The 13th key resizes to 32 buckets: 16 moves to bucket 16, after 15.
        let hashes: Vec<i32> = vec![16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15];
        assert_eq!(
            keys(&hashes),
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0]
        );
        // With 12 keys it still has 16 buckets: 16 stays in bucket 0 before 0.
        assert_eq!(keys(&hashes[..12])[..2], [0, 1]);
        // The high bits are folded in: 0x10000 spreads to bucket 1.
        assert_eq!(keys(&[0x10000, 0, 2]), vec![1, 0, 2]);
    }

    #[test]
    fn a_crowded_bucket_grows_a_small_table() {
        // Nine keys in bucket 0 of 16: the ninth grows the table to 32 buckets instead of
        // making the bucket a tree; the bucket splits by bit 16.
        let hashes: Vec<i32> = (0..9).map(|k| k * 16).collect();
        let a = hash_order(&hashes, |_, _| false);
        assert!(a.exact);
        let order: Vec<i32> = a.pairs.iter().map(|p| hashes[p.0]).collect();
        assert_eq!(order, vec![0, 32, 64, 96, 128, 16, 48, 80, 112]);
        // Nine keys in one bucket of 64 (after 39 others grew the table): Java makes it a
        // tree, whose order is not modelled.
        let mut hashes: Vec<i32> = (1..=39).collect();
        hashes.extend((0..9).map(|k| k * 64));
        assert!(!hash_order(&hashes, |_, _| false).exact);
    }

    #[test]
    fn duplicates_keep_the_first_key_and_the_last_value() {
        let a = hash_order(&[7, 7, 3], |_, _| true);
        assert_eq!(a.pairs, vec![(2, 2), (0, 1)]);
        let a = insertion_order(&[Some(7), None, Some(7), None], |_, _| true);
        assert_eq!(a.pairs, vec![(0, 2), (1, 1), (3, 3)]);
        let v = [3, 1, 3, 2];
        let a = sorted_order(4, |a, b| Some(v[a].cmp(&v[b]))).unwrap();
        assert_eq!(a.pairs, vec![(1, 1), (3, 3), (0, 2)]);
        assert!(sorted_order(2, |_, _| None).is_none());
    }
}
