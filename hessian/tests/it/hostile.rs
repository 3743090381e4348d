//! Hostile inputs: huge lengths, deep nesting, reference bombs, bad text, bad indexes. Each
//! gives a `DecodeError`, never a panic, a stack overflow or an allocation the input does not
//! pay for (measured by a global allocator wrapper).
//!
//! This test crate needs `unsafe` for `GlobalAlloc` (the library itself forbids it). The
//! measurement is per thread, so tests running in parallel threads do not disturb each other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use switchman_hessian::{DecodeError, Decoder, Encoder, Limits, Value, from_bytes};

struct Largest;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the thread-local is a
// const-initialised `Cell`, which does not allocate.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.with(|c| c.set(c.get().max(layout.size())));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.with(|c| c.set(c.get().max(new_size)));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Largest = Largest;

/// Decodes every value of `bytes` with `limits`; the first error, and the largest single
/// allocation made meanwhile.
fn decode_all(bytes: &[u8], limits: Limits) -> (Result<Vec<Value>, DecodeError>, usize) {
    LARGEST.with(|c| c.set(0));
    let mut dec = Decoder::with_limits(bytes, limits);
    let mut out = Vec::new();
    let r = loop {
        if dec.is_at_end() {
            break Ok(out);
        }
        match dec.read() {
            Ok(v) => out.push(v),
            Err(e) => break Err(e),
        }
    };
    (r, LARGEST.with(Cell::get))
}

/// `bytes` fail to decode, with an error mentioning `what`, allocating at most `max_alloc`.
fn rejects(bytes: &[u8], what: &str, max_alloc: usize) -> DecodeError {
    rejects_with(bytes, Limits::default(), what, max_alloc)
}

fn rejects_with(bytes: &[u8], limits: Limits, what: &str, max_alloc: usize) -> DecodeError {
    let (r, largest) = decode_all(bytes, limits);
    let e = match r {
        Ok(v) => panic!("accepted {} bytes as {} values", bytes.len(), v.len()),
        Err(e) => e,
    };
    assert!(
        e.to_string().contains(what),
        "error {e:?} does not mention {what:?}"
    );
    assert!(
        largest <= max_alloc,
        "allocated {largest} bytes at once for {} bytes of input ({e})",
        bytes.len()
    );
    e
}

const SMALL: usize = 64 << 10;

#[test]
fn the_error_says_what_and_where() {
    let e = rejects(&[0x90, 0x40], "unknown tag 0x40", SMALL);
    assert_eq!(e.offset(), 1);
    assert_eq!(e.to_string(), "hessian: unknown tag 0x40 at byte 1");
    let e = rejects(&[0x49, 0x00], "unexpected end of input", SMALL);
    assert_eq!(e.offset(), 2);
    let _: &dyn std::error::Error = &e;
}

#[test]
fn unknown_tags_and_stray_ends() {
    for tag in [0x40u8, 0x45, 0x47, 0x50] {
        rejects(&[tag], "unknown tag", SMALL);
    }
    rejects(b"Z", "end marker", SMALL);
    rejects(b"\x79Z", "end marker", SMALL);
}

#[test]
fn truncated_values() {
    for bytes in [
        &b"I\x00\x00"[..],
        b"L\x00",
        b"D\x00\x00\x00",
        b"\x4a\x00",
        b"\x4b\x00",
        b"\x5f\x00",
        b"\x5d",
        b"\x5e\x00",
        b"\xc8",
        b"\xd4\x00",
        b"\xf8",
        b"\x3c\x00",
        b"\x59\x00",
        b"\x05abc",
        b"\x30",
        b"S\x00",
        b"R\x00\x01a",
        b"\x23\x01",
        b"B\x00\x05\x01",
        b"A\x00\x01\x01",
        b"\x7a\x90",
        b"\x57\x90",
        b"H\x90\x90",
        b"M",
        b"\x71",
        b"C\x01X",
        b"C\x01X\x91",
        b"C\x01X\x91\x01a\x60",
        b"O",
        b"\x51",
        b"\x01\xc3",
        b"\x01\xe4\xb8",
    ] {
        let (r, largest) = decode_all(bytes, Limits::default());
        let e = r.expect_err("truncated input accepted").to_string();
        assert!(
            e.contains("unexpected end of input") || e.contains("bytes left"),
            "{bytes:?}: {e}"
        );
        assert!(largest <= SMALL);
    }
}

#[test]
fn every_truncation_of_a_real_stream_is_an_error() {
    let mut enc = Encoder::new();
    enc.write(&Value::object(
        "com.foo.User",
        vec![
            ("name", Value::string("😀 héllo")),
            (
                "tags",
                Value::typed_list("java.util.LinkedList", vec![Value::Long(1 << 40)]),
            ),
            (
                "attrs",
                Value::typed_map("java.util.TreeMap", vec![(Value::Int(1), Value::Date(5))]),
            ),
            ("blob", Value::Binary(vec![1, 2, 3])),
            ("score", Value::Double(12.25)),
            ("me", Value::Ref(0)),
        ],
    ));
    let bytes = enc.into_bytes();
    assert!(from_bytes(&bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn huge_lengths_allocate_nothing_up_front() {
    // Fixed lists claiming 2^31 - 1 elements.
    rejects(b"\x58\x49\x7f\xff\xff\xff\x90", "length", SMALL);
    rejects(b"V\x04[int\x49\x7f\xff\xff\xff\x90", "length", SMALL);
    // A length within max_len but past the input.
    rejects(b"\x58\xd4\x10\x00\x90\x90", "bytes left", SMALL);
    // Negative lengths.
    rejects(b"\x58\x8f", "negative length", SMALL);
    rejects(b"C\x01X\x8f", "negative length", SMALL);
    // Strings and binaries claiming 64 Ki units / bytes with three left.
    rejects(b"S\xff\xffabc", "bytes left", SMALL);
    rejects(b"R\xff\xffabc", "bytes left", SMALL);
    rejects(b"B\xff\xffabc", "bytes left", SMALL);
    rejects(b"A\xff\xffabc", "bytes left", SMALL);
    // A class of 2^31 - 1 fields.
    rejects(b"C\x01X\x49\x7f\xff\xff\xff", "length", SMALL);
    // A fixed list longer than max_nodes allows, though the input would have the bytes.
    let limits = Limits {
        max_nodes: 10,
        ..Limits::default()
    };
    let mut bytes = vec![0x58, 0x9e];
    bytes.extend([0x90; 14]);
    rejects_with(&bytes, limits, "max_nodes", SMALL);
}

#[test]
fn chunk_after_chunk_stays_within_max_len() {
    // 'R' chunks of 0xffff units each: each is paid for by input, but the total is bounded.
    let limits = Limits {
        max_len: 100_000,
        ..Limits::default()
    };
    let mut bytes = Vec::new();
    for _ in 0..3 {
        bytes.extend([b'R', 0xff, 0xff]);
        bytes.extend(std::iter::repeat_n(b'a', 0xffff));
    }
    bytes.extend([0x00]);
    rejects_with(&bytes, limits, "max_len", 1 << 20);
    let mut bytes = Vec::new();
    for _ in 0..3 {
        bytes.extend([b'A', 0xff, 0xff]);
        bytes.extend(std::iter::repeat_n(7u8, 0xffff));
    }
    bytes.extend([0x20]);
    rejects_with(&bytes, limits, "max_len", 1 << 20);
    // A variable list with more elements than max_len.
    let limits = Limits {
        max_len: 5,
        ..Limits::default()
    };
    rejects_with(b"\x57\x90\x90\x90\x90\x90\x90Z", limits, "max_len", SMALL);
    rejects_with(
        b"H\x90\x90\x90\x90\x90\x90\x90\x90\x90\x90\x90\x90Z",
        limits,
        "max_len",
        SMALL,
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for open in [0x57u8, 0x79, b'H'] {
        let bytes = vec![open; 1_000_000];
        rejects(&bytes, "max_depth", SMALL);
    }
    // Objects whose first field is another object.
    let mut bytes = b"C\x01X\x91\x01a".to_vec();
    bytes.extend(std::iter::repeat_n(0x60, 1_000_000));
    rejects(&bytes, "max_depth", SMALL);
    // Exactly max_depth levels decode.
    let mut bytes = vec![0x79; 64];
    bytes.push(0x90);
    assert!(from_bytes(&bytes).is_ok());
    bytes.insert(0, 0x79);
    assert!(from_bytes(&bytes).is_err());
}

/// `[L0, L1, ..., Ln]` where L0 = [0] and each L(k+1) = [Lk, Lk] by two back references:
/// L(k) materialises as 2^(k+1) - 1 values.
fn ref_bomb(levels: usize) -> Vec<u8> {
    let mut bytes = vec![0x57, 0x79, 0x90]; // outer list = ref 0, L0 = ref 1
    for k in 0..levels {
        let target = (k + 1) as i32; // Lk is ref k + 1
        bytes.push(0x7a);
        for _ in 0..2 {
            bytes.push(0x51);
            let mut e = Encoder::new();
            e.write_int(target);
            bytes.extend(e.into_bytes());
        }
    }
    bytes.push(b'Z');
    bytes
}

#[test]
fn a_ref_bomb_hits_max_nodes() {
    // 60 levels: 2^61 values if copied naively.
    let bytes = ref_bomb(60);
    assert!(bytes.len() < 400);
    rejects(&bytes, "max_nodes", SMALL);
    // A few levels are fine, and are copies.
    let v = from_bytes(&ref_bomb(3)).unwrap();
    let Value::List(outer) = &v else { panic!() };
    assert_eq!(outer.items.len(), 4);
    let l1 = Value::list(vec![Value::list(vec![Value::Int(0)]); 2]);
    assert_eq!(outer.items[1], l1);
    assert_eq!(outer.items[2], Value::list(vec![l1.clone(), l1]));
}

/// `L` (a list of `n` small ints) then a list of `refs` back references to it.
fn shared_list_referenced(n: usize, refs: usize) -> Vec<u8> {
    let mut enc = Encoder::new();
    enc.write(&Value::list(
        (0..n).map(|i| Value::Int((i % 40) as i32)).collect(),
    ));
    let mut bytes = enc.into_bytes();
    bytes.push(0x58); // an untyped fixed-length list, its length next
    let mut e = Encoder::new();
    e.write_int(refs as i32);
    bytes.extend(e.into_bytes());
    for _ in 0..refs {
        bytes.extend([0x51, 0x90]); // ref 0: L
    }
    bytes
}

#[test]
fn references_amplify_only_in_proportion_to_the_input() {
    // 10 KB: 4000 copies of a 1000-int list are 4 million values (hundreds of MB as values
    // and again as JSON). Within Limits::default(), refused for its size by Decoder::new.
    let bytes = shared_list_referenced(1000, 4000);
    assert!(bytes.len() < 10_000, "{}", bytes.len());
    assert!(4001 * 1001 < Limits::default().max_nodes);
    let mut dec = Decoder::new(&bytes);
    assert!(dec.read().is_ok(), "L itself is fine");
    assert!(dec.read().unwrap_err().to_string().contains("max_nodes"));
    rejects_with(&bytes, Limits::for_input(bytes.len()), "max_nodes", SMALL);
    // A few copies, as Java sends a shared object, are fine.
    let few = shared_list_referenced(1000, 20);
    let mut dec = Decoder::new(&few);
    dec.read().unwrap();
    let Value::List(copies) = dec.read().unwrap() else {
        panic!("a list")
    };
    assert_eq!(copies.items.len(), 20);
}

#[test]
fn large_legitimate_values_fit_the_budget_for_their_size() {
    // A million small ints: a million bytes, a million values.
    let ints = Value::list((0..1_000_000).map(|i| Value::Int(i % 40)).collect());
    assert_eq!(
        from_bytes(&switchman_hessian::to_bytes(&ints)).unwrap(),
        ints
    );
    // 100,000 instances of one class with long names and three short fields.
    let orders = Value::list(
        (0..100_000)
            .map(|i| {
                Value::object(
                    "com.example.shop.orders.OrderLineItem",
                    vec![
                        ("orderIdentifier".to_string(), Value::Int(i % 40)),
                        ("productCategory".to_string(), Value::Null),
                        ("quantityOrdered".to_string(), Value::Bool(true)),
                    ],
                )
            })
            .collect(),
    );
    assert_eq!(
        from_bytes(&switchman_hessian::to_bytes(&orders)).unwrap(),
        orders
    );
}

#[test]
fn copies_of_deep_values_count_their_depth() {
    // A 40-deep list, then a list of two copies of it nested 30 deep: 70 levels.
    let mut bytes = vec![0x57];
    bytes.extend(vec![0x79; 40]);
    bytes.push(0x90);
    bytes.extend(vec![0x79; 30]);
    bytes.extend([0x7a, 0x51, 0x91, 0x51, 0x91]);
    bytes.push(b'Z');
    rejects(&bytes, "max_depth", SMALL);
}

#[test]
fn copies_of_large_text_hit_max_bytes() {
    let limits = Limits {
        max_bytes: 1 << 20,
        ..Limits::default()
    };
    // L = [50000 'x'], then 100 references to it.
    let mut enc = Encoder::new();
    enc.write(&Value::list(vec![Value::string("x".repeat(50_000))]));
    let mut bytes = enc.into_bytes();
    bytes.extend([0x58, 0xc8, 100]);
    for _ in 0..100 {
        bytes.extend([0x51, 0x90]);
    }
    rejects_with(&bytes, limits, "max_bytes", 1 << 20);
}

#[test]
fn names_repeated_per_instance_hit_max_bytes() {
    let limits = Limits {
        max_bytes: 1 << 20,
        ..Limits::default()
    };
    // A class whose one field has a 60000-byte name, then 100 instances of 2 bytes each.
    let mut enc = Encoder::new();
    enc.write(&Value::object("X", vec![("f".repeat(60_000), Value::Null)]));
    let mut bytes = enc.into_bytes();
    for _ in 0..100 {
        bytes.extend([0x60, b'N']);
    }
    rejects_with(&bytes, limits, "max_bytes", 1 << 20);
    // A 60000-byte type name, then 100 lists naming it by reference.
    let mut enc = Encoder::new();
    enc.write(&Value::typed_list("t".repeat(60_000), vec![]));
    let mut bytes = enc.into_bytes();
    for _ in 0..100 {
        bytes.extend([0x70, 0x90]);
    }
    rejects_with(&bytes, limits, "max_bytes", 1 << 20);
}

#[test]
fn too_many_classes_types_and_refs() {
    let limits = Limits {
        max_classes: 3,
        max_refs: 3,
        ..Limits::default()
    };
    let mut bytes = Vec::new();
    for _ in 0..4 {
        bytes.extend(b"C\x01X\x90");
    }
    bytes.push(0x90);
    rejects_with(&bytes, limits, "max_classes", SMALL);
    let mut bytes = Vec::new();
    for name in [b'a', b'b', b'c', b'd'] {
        bytes.extend([0x70, 0x01, name]);
    }
    rejects_with(&bytes, limits, "max_classes", SMALL);
    rejects_with(b"\x78\x78\x78\x78", limits, "max_refs", SMALL);
}

#[test]
fn bad_indexes() {
    rejects(b"\x60", "class reference 0 out of range", SMALL);
    rejects(b"O\x91", "class reference 1 out of range", SMALL);
    rejects(b"O\x8f", "negative class index", SMALL);
    rejects(b"\x51\x90", "ref 0 out of range", SMALL);
    rejects(b"\x79\x51\x91", "ref 1 out of range", SMALL);
    rejects(b"\x51\x8f", "out of range", SMALL);
    rejects(b"\x71\x90\x90", "type reference 0 out of range", SMALL);
    rejects(b"\x71\x54\x90", "expected a type name", SMALL);
    rejects(b"O\x01", "expected an int", SMALL);
    rejects(b"C\x90", "expected a string", SMALL);
}

#[test]
fn bad_text() {
    rejects(b"\x01\xff", "bad UTF-8 lead byte", SMALL);
    rejects(b"\x01\x80", "bad UTF-8 lead byte", SMALL);
    rejects(b"\x01\xc3\x41", "continuation", SMALL);
    rejects(b"\x01\xe4\x41\x80", "continuation", SMALL);
    // Four-byte UTF-8 (Java writes surrogate pairs instead).
    rejects(b"\x01\xf0\x9f\x98\x80", "bad UTF-8 lead byte", SMALL);
    // Unpaired surrogates: a high one alone, at the end, followed by a non-low; a low alone.
    rejects(b"\x01\xed\xa0\xbd", "unpaired high surrogate", SMALL);
    rejects(b"\x02\xed\xa0\xbd\x41", "unpaired high surrogate", SMALL);
    rejects(b"\x01\xed\xb8\x80", "unpaired low surrogate", SMALL);
    rejects(
        b"\x02\xed\xa0\xbd\xed\xa0\xbd",
        "unpaired high surrogate",
        SMALL,
    );
    // A bad chunk tag after 'R'.
    rejects(b"R\x00\x01a\x90", "expected a string chunk", SMALL);
    rejects(b"A\x00\x01a\x90", "expected a binary chunk", SMALL);
}
