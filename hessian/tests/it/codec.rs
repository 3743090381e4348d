//! Every compact form at its boundaries, encoded and decoded; chunking; class definitions;
//! type names; back references.

use switchman_hessian::{Decoder, Encoder, Value, from_bytes, to_bytes};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Short text of long things, for assertion messages.
fn short(s: &str) -> String {
    if s.len() > 120 {
        format!("{}...{} ({} chars)", &s[..60], &s[s.len() - 40..], s.len())
    } else {
        s.to_owned()
    }
}

/// `v` encodes to `want` (hex) and `want` decodes to `v`.
fn both_ways(v: Value, want: &str) {
    let bytes = to_bytes(&v);
    let (got, want) = (hex(&bytes), want.replace(' ', ""));
    if got != want {
        let i = got
            .bytes()
            .zip(want.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        panic!(
            "encoding {}: got {}, want {}; first difference at hex digit {i}",
            short(&format!("{v:?}")),
            short(&got),
            short(&want)
        );
    }
    let back = from_bytes(&bytes).unwrap();
    assert!(
        back == v,
        "decoding {} gave {}",
        short(&want),
        short(&format!("{back:?}"))
    );
}

#[test]
fn int_forms_at_their_boundaries() {
    for (i, want) in [
        (0, "90"),
        (-16, "80"),
        (47, "bf"),
        (-17, "c7ef"),
        (48, "c830"),
        (-2048, "c000"),
        (2047, "cfff"),
        (-2049, "d3f7ff"),
        (2048, "d40800"),
        (-262_144, "d00000"),
        (262_143, "d7ffff"),
        (-262_145, "49fffbffff"),
        (262_144, "4900040000"),
        (i32::MAX, "497fffffff"),
        (i32::MIN, "4980000000"),
    ] {
        both_ways(Value::Int(i), want);
    }
}

#[test]
fn long_forms_at_their_boundaries() {
    for (l, want) in [
        (0, "e0"),
        (-8, "d8"),
        (15, "ef"),
        (-9, "f7f7"),
        (16, "f810"),
        (-2048, "f000"),
        (2047, "ffff"),
        (-2049, "3bf7ff"),
        (2048, "3c0800"),
        (-262_144, "380000"),
        (262_143, "3fffff"),
        (-262_145, "59fffbffff"),
        (262_144, "5900040000"),
        (2_147_483_647, "597fffffff"),
        (-2_147_483_648, "5980000000"),
        (2_147_483_648, "4c0000000080000000"),
        (-2_147_483_649, "4cffffffff7fffffff"),
        (i64::MAX, "4c7fffffffffffffff"),
        (i64::MIN, "4c8000000000000000"),
    ] {
        both_ways(Value::Long(l), want);
    }
}

#[test]
fn double_forms_as_hessian_lite_chooses_them() {
    for (d, want) in [
        (0.0, "5b"),
        (1.0, "5c"),
        (2.0, "5d02"),
        (-1.0, "5dff"),
        (-128.0, "5d80"),
        (127.0, "5d7f"),
        (128.0, "5e0080"),
        (-129.0, "5eff7f"),
        (-32768.0, "5e8000"),
        (32767.0, "5e7fff"),
        // Whole but past a short: 32768 * 1000 fits an int and 0.001 * it gives it back.
        (32768.0, "5f01f40000"),
        (0.5, "5f000001f4"),
        (12.25, "5f00002fda"),
        (-0.001, "5fffffffff"),
        (2147483.647, "5f7fffffff"),
        // 2147483.648 * 1000 does not fit an int.
        (2147483.648, "444140624dd2f1a9fc"),
        (0.0001, "443f1a36e2eb1c432d"),
        (std::f64::consts::PI, "44400921fb54442d18"),
        (1e300, "447e37e43c8800759c"),
        (2_147_483_647.0, "4441dfffffffc00000"),
        (f64::INFINITY, "447ff0000000000000"),
        (f64::NEG_INFINITY, "44fff0000000000000"),
    ] {
        both_ways(Value::Double(d), want);
    }
    // -0.0 as Java writes it: an int 0.
    assert_eq!(hex(&to_bytes(&Value::Double(-0.0))), "5b");
    // Every NaN as Double.doubleToLongBits gives it.
    assert_eq!(
        hex(&to_bytes(&Value::Double(f64::from_bits(
            0x7ff0_0000_0000_0001
        )))),
        "447ff8000000000000"
    );
    let Value::Double(nan) = from_bytes(&unhex("447ff8000000000000")).unwrap() else {
        panic!()
    };
    assert!(nan.is_nan());
    // 0x5f decodes as Java's 0.001 * mills.
    assert_eq!(
        from_bytes(&unhex("5f00000003")).unwrap(),
        Value::Double(0.001 * 3.0)
    );
}

#[test]
fn date_forms() {
    both_ways(Value::Date(1_700_000_000_123), "4a0000018bcfe5687b");
    both_ways(Value::Date(1_700_000_040_000), "4b01b05516");
    both_ways(Value::Date(0), "4b00000000");
    both_ways(Value::Date(-60_000), "4bffffffff");
    // Whole minutes past 32 bits: the 64-bit form.
    let m = (i64::from(i32::MAX) + 1) * 60_000;
    both_ways(Value::Date(m), &format!("4a{}", hex(&m.to_be_bytes())));
    both_ways(Value::Date(i64::MIN), "4a8000000000000000");
}

#[test]
fn string_forms_at_their_boundaries() {
    both_ways(Value::string(""), "00");
    both_ways(Value::string("hello"), "0568656c6c6f");
    for (n, header) in [
        (31, "1f"),
        (32, "3020"),
        (255, "30ff"),
        (256, "3100"),
        (1023, "33ff"),
        (1024, "530400"),
        (0x8000, "538000"),
    ] {
        let s = "a".repeat(n);
        both_ways(Value::string(&s), &format!("{header}{}", hex(s.as_bytes())));
    }
    // One unit past a chunk: 'R' 0x8000 units, then a compact final chunk.
    let s = "a".repeat(0x8001);
    both_ways(
        Value::string(&s),
        &format!("528000{}0161", "61".repeat(0x8000)),
    );
    // Lengths count UTF-16 units; two- and three-byte units.
    both_ways(Value::string("é"), "01c3a9");
    both_ways(Value::string("中"), "01e4b8ad");
    both_ways(
        Value::string("\u{7ff}\u{800}\u{ffff}"),
        "03dfbfe0a080efbfbf",
    );
    both_ways(Value::string("\0"), "0100");
}

#[test]
fn non_bmp_characters_are_surrogate_pairs() {
    // U+1F600 is D83D DE00: two units, each in three bytes.
    both_ways(Value::string("😀"), "02eda0bdedb880");
    both_ways(Value::string("𝄞a"), "03eda0b4edb49e61");
    both_ways(Value::string("\u{10ffff}"), "02edafbfedbfbf");
    // Real 4-byte UTF-8 is not Hessian's: Java rejects it, so do we.
    assert!(from_bytes(&unhex("01f09f9880")).is_err());
}

#[test]
fn a_chunk_does_not_end_in_a_high_surrogate() {
    // 32767 'a' then 😀: the pair would straddle the 0x8000 boundary, so the first chunk
    // has 32767 units and the pair goes to the final chunk.
    let s = format!("{}😀b", "a".repeat(0x7fff));
    let want = format!("527fff{}03eda0bdedb88062", "61".repeat(0x7fff));
    both_ways(Value::string(&s), &want);
}

#[test]
fn a_surrogate_pair_split_across_chunks_is_joined() {
    // Another writer may split a pair between chunks: the high unit ends an 'R' chunk.
    let bytes = unhex("520001 eda0bd 01 edb880");
    assert_eq!(from_bytes(&bytes).unwrap(), Value::string("😀"));
}

#[test]
fn every_string_chunk_form_is_read() {
    // 'R' then 'S', 'R' then a short final, 'R' then a compact final, 'R' then 'R' then 'S'.
    for (bytes, want) in [
        ("520001 61 530001 62", "ab"),
        ("520001 61 3001 62", "ab"),
        ("520001 61 00", "a"),
        ("520001 61 520001 62 530000", "ab"),
        ("520000 520000 01 7a", "z"),
    ] {
        assert_eq!(
            from_bytes(&unhex(bytes)).unwrap(),
            Value::string(want),
            "{bytes}"
        );
    }
    assert!(from_bytes(&unhex("520001 61 90")).is_err());
}

#[test]
fn binary_forms_at_their_boundaries() {
    for (n, header) in [
        (0, "20"),
        (3, "23"),
        (15, "2f"),
        (16, "3410"),
        (1023, "37ff"),
        (1024, "420400"),
        (8189, "421ffd"),
    ] {
        let b: Vec<u8> = (0..n).map(|i| i as u8).collect();
        both_ways(Value::Binary(b.clone()), &format!("{header}{}", hex(&b)));
    }
    // More than the 8 KiB buffer holds: a chunk of 8192 - 3 bytes first.
    let b: Vec<u8> = (0..8190).map(|i| (i % 7) as u8).collect();
    both_ways(
        Value::Binary(b.clone()),
        &format!("411ffd{}21{}", hex(&b[..8189]), hex(&b[8189..])),
    );
    // Every chunk form is read.
    for (bytes, want) in [
        ("410001 07 420001 08", vec![7, 8]),
        ("410001 07 21 08", vec![7, 8]),
        ("410001 07 3401 08", vec![7, 8]),
        ("410000 20", vec![]),
    ] {
        assert_eq!(
            from_bytes(&unhex(bytes)).unwrap(),
            Value::Binary(want),
            "{bytes}"
        );
    }
}

#[test]
fn binary_chunks_follow_hessian_lites_buffer() {
    // A binary after 102 bytes of stream: the first chunk fills the buffer's remaining
    // 8192 - 102 - 3 = 8087 bytes.
    let mut enc = Encoder::new();
    enc.write_str(&"x".repeat(100));
    let data: Vec<u8> = (0..10_000).map(|i| (i % 13) as u8).collect();
    enc.write_binary(&data);
    let bytes = enc.into_bytes();
    let want = format!(
        "3064{}411f97{}420779{}",
        "78".repeat(100),
        hex(&data[..8087]),
        hex(&data[8087..])
    );
    assert_eq!(hex(&bytes), want);

    // Fewer than 16 bytes left: hessian-lite flushes, then writes the data as one 'A'
    // chunk and an empty final chunk.
    let mut enc = Encoder::new();
    enc.write_binary(&[0; 8178]); // 3 + 8178 = 8181 bytes in the buffer
    enc.write_binary(&[9; 100]);
    let bytes = enc.into_bytes();
    assert_eq!(hex(&bytes[8181..]), format!("410064{}20", "09".repeat(100)));

    // 16 or more left: that many in the first chunk.
    let mut enc = Encoder::new();
    enc.write_binary(&[0; 8100]); // 8103 in the buffer, 86 fit before the end
    enc.write_binary(&[9; 100]);
    let bytes = enc.into_bytes();
    assert_eq!(
        hex(&bytes[8103..]),
        format!("410056{}2e{}", "09".repeat(86), "09".repeat(14))
    );

    let mut dec = Decoder::new(&bytes);
    assert_eq!(dec.read().unwrap(), Value::Binary(vec![0; 8100]));
    assert_eq!(dec.read().unwrap(), Value::Binary(vec![9; 100]));
    assert!(dec.is_at_end());
}

#[test]
fn null_and_booleans() {
    both_ways(Value::Null, "4e");
    both_ways(Value::Bool(true), "54");
    both_ways(Value::Bool(false), "46");
}

#[test]
fn list_forms() {
    both_ways(Value::list(vec![]), "78");
    let seven: Vec<Value> = (0..7).map(Value::Int).collect();
    both_ways(Value::list(seven.clone()), "7f90919293949596");
    let eight: Vec<Value> = (0..8).map(Value::Int).collect();
    both_ways(Value::list(eight), "5898 9091929394959697");
    both_ways(
        Value::typed_list("[int", vec![Value::Int(1)]),
        "7104 5b696e74 91",
    );
    let eight: Vec<Value> = (0..8).map(Value::Int).collect();
    both_ways(
        Value::typed_list("[int", eight),
        "5604 5b696e74 98 9091929394959697",
    );
    // The variable forms are read (Java writes them for iterators and enumerations).
    assert_eq!(
        from_bytes(&unhex("57 91 92 5a")).unwrap(),
        Value::list(vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(
        from_bytes(&unhex("55 04 5b696e74 91 5a")).unwrap(),
        Value::typed_list("[int", vec![Value::Int(1)])
    );
    assert_eq!(
        from_bytes(&unhex("58 91 93")).unwrap(),
        Value::list(vec![Value::Int(3)])
    );
    // An empty type is no type (Java writes none).
    assert_eq!(
        from_bytes(&unhex("71 00 91")).unwrap(),
        Value::list(vec![Value::Int(1)])
    );
}

#[test]
fn map_forms() {
    both_ways(Value::map(vec![]), "485a");
    both_ways(
        Value::map(vec![(Value::Int(1), Value::string("a"))]),
        "48 91 0161 5a",
    );
    both_ways(
        Value::typed_map("java.util.TreeMap", vec![(Value::string("k"), Value::Null)]),
        "4d 11 6a6176612e7574696c2e547265654d6170 016b 4e 5a",
    );
}

#[test]
fn type_names_are_written_once_per_stream() {
    let ll = || Value::typed_list("java.util.LinkedList", vec![Value::Int(1)]);
    let mut enc = Encoder::new();
    enc.write(&ll());
    enc.write(&Value::typed_map("java.util.LinkedList", vec![]));
    enc.write(&ll());
    let bytes = enc.into_bytes();
    assert_eq!(
        hex(&bytes),
        format!(
            "71 14 {} 91 4d 90 5a 71 90 91",
            hex(b"java.util.LinkedList")
        )
        .replace(' ', "")
    );
    let mut dec = Decoder::new(&bytes);
    assert_eq!(dec.read().unwrap(), ll());
    assert_eq!(
        dec.read().unwrap(),
        Value::typed_map("java.util.LinkedList", vec![])
    );
    assert_eq!(dec.read().unwrap(), ll());
    // A type reference that names nothing.
    assert!(from_bytes(&unhex("7191 91")).is_err());
}

fn point(x: i32, y: i32) -> Value {
    Value::object(
        "com.foo.Point",
        vec![("x", Value::Int(x)), ("y", Value::Int(y))],
    )
}

#[test]
fn a_class_is_defined_once_per_stream() {
    let mut enc = Encoder::new();
    enc.write(&point(1, 2));
    enc.write(&point(3, 4));
    enc.write(&Value::list(vec![point(5, 6)]));
    let bytes = enc.into_bytes();
    assert_eq!(
        hex(&bytes),
        format!(
            "43 0d {} 92 0178 0179 60 91 92 60 93 94 79 60 95 96",
            hex(b"com.foo.Point")
        )
        .replace(' ', "")
    );
    let mut dec = Decoder::new(&bytes);
    assert_eq!(dec.read().unwrap(), point(1, 2));
    assert_eq!(dec.read().unwrap(), point(3, 4));
    assert_eq!(dec.read().unwrap(), Value::list(vec![point(5, 6)]));
    assert!(dec.is_at_end());
}

#[test]
fn the_seventeenth_class_is_named_by_an_int() {
    let mut enc = Encoder::new();
    let objects: Vec<Value> = (0..18)
        .map(|i| Value::object(format!("C{i:02}"), Vec::<(String, Value)>::new()))
        .collect();
    for o in &objects {
        enc.write(o);
    }
    enc.write(&objects[16]);
    let bytes = enc.into_bytes();
    // Class 15 is the last compact reference (0x6f); class 16 is 'O' 0xa0.
    let c15 = format!("4303{}906f", hex(b"C15"));
    let c16 = format!("4303{}904fa0", hex(b"C16"));
    let h = hex(&bytes);
    assert!(h.contains(&c15), "{h}");
    assert!(h.contains(&c16), "{h}");
    assert!(h.ends_with("4fa0"), "{h}");
    let mut dec = Decoder::new(&bytes);
    for o in &objects {
        assert_eq!(&dec.read().unwrap(), o);
    }
    assert_eq!(dec.read().unwrap(), objects[16]);
}

#[test]
fn one_class_name_with_other_fields_is_another_definition() {
    let a = Value::object("X", vec![("a", Value::Int(1))]);
    let b = Value::object("X", vec![("b", Value::Int(2))]);
    let mut enc = Encoder::new();
    enc.write(&a);
    enc.write(&b);
    enc.write(&a);
    let bytes = enc.into_bytes();
    assert_eq!(hex(&bytes), "430158910161609143015891016261926091");
    let mut dec = Decoder::new(&bytes);
    assert_eq!(dec.read().unwrap(), a);
    assert_eq!(dec.read().unwrap(), b);
    assert_eq!(dec.read().unwrap(), a);
}

#[test]
fn an_object_with_no_fields() {
    both_ways(
        Value::object("E", Vec::<(String, Value)>::new()),
        "43 01 45 90 60",
    );
}

#[test]
fn a_back_reference_to_a_complete_value_is_a_copy() {
    // [l, l] with l = ["r"]: the outer list is ref 0, l is ref 1.
    let bytes = unhex("7a 79 0172 5191");
    let l = Value::list(vec![Value::string("r")]);
    assert_eq!(
        from_bytes(&bytes).unwrap(),
        Value::list(vec![l.clone(), l.clone()])
    );
    // Encoding the reference gives Java's bytes back.
    assert_eq!(
        to_bytes(&Value::list(vec![l.clone(), Value::Ref(1)])),
        bytes
    );
    // References reach across the values of one stream.
    let mut dec = Decoder::new(&[0x79, 0x91, 0x51, 0x90]);
    assert_eq!(dec.read().unwrap(), Value::list(vec![Value::Int(1)]));
    assert_eq!(dec.read().unwrap(), Value::list(vec![Value::Int(1)]));
}

#[test]
fn a_self_reference_is_a_ref() {
    // Throwable.cause == this: an object whose field refers to itself.
    let bytes = unhex("43 01 45 91 05 6361757365 60 5190");
    let v = Value::object("E", vec![("cause", Value::Ref(0))]);
    assert_eq!(from_bytes(&bytes).unwrap(), v);
    assert_eq!(to_bytes(&v), bytes);
    // A list holding itself, and a map whose value is the enclosing list.
    both_ways(Value::list(vec![Value::Ref(0)]), "795190");
    both_ways(
        Value::list(vec![Value::map(vec![(Value::Int(1), Value::Ref(0))])]),
        "79 48 91 5190 5a",
    );
    // Once complete, the same ref is a copy, with its inner cycle kept as a Ref.
    let mut dec = Decoder::new(&[0x79, 0x51, 0x90, 0x51, 0x90]);
    assert_eq!(dec.read().unwrap(), Value::list(vec![Value::Ref(0)]));
    assert_eq!(dec.read().unwrap(), Value::list(vec![Value::Ref(0)]));
}

#[test]
fn refs_count_lists_maps_and_objects_but_not_strings_or_binaries() {
    // [ "s", b"", {}, [ ], point ] then refs to each container.
    let mut enc = Encoder::new();
    let p = point(1, 1);
    enc.write(&Value::list(vec![
        Value::string("s"),
        Value::Binary(vec![1]),
        Value::map(vec![]),
        Value::list(vec![]),
        p.clone(),
    ]));
    for n in 1..=3 {
        enc.write_ref(n);
    }
    let bytes = enc.into_bytes();
    let mut dec = Decoder::new(&bytes);
    dec.read().unwrap();
    assert_eq!(dec.read().unwrap(), Value::map(vec![]));
    assert_eq!(dec.read().unwrap(), Value::list(vec![]));
    assert_eq!(dec.read().unwrap(), p);
    assert!(dec.is_at_end());
}

#[test]
fn a_class_definition_may_precede_any_value() {
    // 'C' is a prefix: the value after it need not be an instance.
    let bytes = unhex("43 01 45 90 91 60");
    let mut dec = Decoder::new(&bytes);
    assert_eq!(dec.read().unwrap(), Value::Int(1));
    assert_eq!(
        dec.read().unwrap(),
        Value::object("E", Vec::<(String, Value)>::new())
    );
}

#[test]
fn from_bytes_wants_exactly_one_value() {
    assert!(from_bytes(&[0x90, 0x90]).is_err());
    assert!(from_bytes(&[]).is_err());
}

#[test]
fn helpers() {
    let u = Value::object(
        "U",
        vec![("name", Value::string("n")), ("age", Value::Int(3))],
    );
    assert_eq!(u.field("name").and_then(Value::str), Some("n"));
    assert_eq!(u.field("age").and_then(Value::as_i64), Some(3));
    assert_eq!(u.field("nope"), None);
    assert_eq!(u.class(), Some("U"));
    let m = Value::map(vec![(Value::string("k"), Value::Bool(true))]);
    assert_eq!(m.field("k").and_then(Value::as_bool), Some(true));
    assert_eq!(Value::Long(2).as_f64(), Some(2.0));
    assert!(Value::Null.is_null());
    let mut enc = Encoder::new();
    assert!(enc.is_empty());
    enc.write_str("ab");
    assert_eq!(enc.len(), 3);
    assert_eq!(enc.as_bytes(), &[0x02, b'a', b'b']);
}
