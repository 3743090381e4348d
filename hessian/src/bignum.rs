//! Decimal text ↔ the forms of `java.math.BigDecimal` and `java.math.BigInteger`.

/// The longest `BigInteger` magnitude (in 32-bit words, about 9,900 decimal digits) rendered
/// as decimal text: the conversion is quadratic, and a longer one is not a number anybody
/// reads (it is given in its Java form instead).
pub(crate) const MAX_WORDS: usize = 1024;

/// The most decimal digits parsed into a `BigInteger` magnitude.
const MAX_DIGITS: usize = 40_000;

/// `s` as Java's `new BigDecimal(s).toString()` prints it, or `None` when `BigDecimal` would
/// not parse it.
pub(crate) fn canonical_decimal(s: &str) -> Option<String> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty()) || !digits(int_part) || !digits(frac_part) {
        return None;
    }
    let exp: i64 = match exponent {
        Some(e) => {
            let body = e.strip_prefix(['+', '-']).unwrap_or(e);
            if body.is_empty() || !digits(body) || body.len() > 10 {
                return None;
            }
            e.strip_prefix('+').unwrap_or(e).parse().ok()?
        }
        None => 0,
    };
    let all = format!("{int_part}{frac_part}");
    let coeff = match all.trim_start_matches('0') {
        "" => "0",
        c => c,
    };
    let scale = frac_part.len() as i64 - exp;
    if i32::try_from(scale).is_err() {
        return None;
    }
    let len = coeff.len() as i64;
    let adjusted = -scale + (len - 1);
    let mut out = String::new();
    if negative && coeff != "0" {
        out.push('-');
    }
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            out.push_str(coeff);
        } else if coeff.len() > scale {
            let (a, b) = coeff.split_at(coeff.len() - scale);
            out.push_str(a);
            out.push('.');
            out.push_str(b);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', scale - coeff.len()));
            out.push_str(coeff);
        }
    } else {
        out.push_str(&coeff[..1]);
        if coeff.len() > 1 {
            out.push('.');
            out.push_str(&coeff[1..]);
        }
        if adjusted != 0 {
            out.push('E');
            if adjusted > 0 {
                out.push('+');
            }
            out.push_str(&adjusted.to_string());
        }
    }
    Some(out)
}

/// `[+-]digits` as a sign and a big-endian magnitude of 32-bit words without leading zero
/// words (empty for zero), as `BigInteger.mag`.
pub(crate) fn parse_integer(s: &str) -> Option<(bool, Vec<u32>)> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > MAX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // Little-endian words while accumulating, nine digits at a time.
    let mut words: Vec<u32> = Vec::new();
    for chunk in digits.as_bytes().chunks(9) {
        let mut mul = 1u64;
        let mut add = 0u64;
        for &d in chunk {
            mul *= 10;
            add = add * 10 + u64::from(d - b'0');
        }
        let mut carry = add;
        for w in words.iter_mut() {
            let x = u64::from(*w) * mul + carry;
            *w = x as u32;
            carry = x >> 32;
        }
        if carry > 0 {
            words.push(carry as u32);
        }
    }
    while words.last() == Some(&0) {
        words.pop();
    }
    words.reverse();
    Some((negative, words))
}

/// The decimal digits of a big-endian magnitude.
pub(crate) fn to_decimal(big_endian: &[u32]) -> String {
    let mut words: Vec<u32> = big_endian.iter().copied().skip_while(|&w| w == 0).collect();
    if words.is_empty() {
        return "0".to_owned();
    }
    let mut groups = Vec::new();
    while !words.is_empty() {
        let mut rem = 0u64;
        for w in words.iter_mut() {
            let x = (rem << 32) | u64::from(*w);
            *w = (x / 1_000_000_000) as u32;
            rem = x % 1_000_000_000;
        }
        groups.push(rem as u32);
        let zeros = words.iter().take_while(|&&w| w == 0).count();
        words.drain(..zeros);
    }
    let mut out = groups.pop().map(|g| g.to_string()).unwrap_or_default();
    for g in groups.iter().rev() {
        out.push_str(&format!("{g:09}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_text_is_javas() {
        for (input, java) in [
            ("12345.6789", "12345.6789"),
            ("1e300", "1E+300"),
            ("1E3", "1E+3"),
            ("0.001", "0.001"),
            ("0.0000001", "1E-7"),
            ("0.000001", "0.000001"),
            ("-0", "0"),
            ("0.00", "0.00"),
            ("+007.50", "7.50"),
            ("-1.5e-3", "-0.0015"),
            ("123.456e2", "12345.6"),
            ("1.23e-10", "1.23E-10"),
            (".5", "0.5"),
            ("5.", "5"),
            ("100", "100"),
            ("12e1", "1.2E+2"),
        ] {
            assert_eq!(canonical_decimal(input).as_deref(), Some(java), "{input}");
        }
        for bad in [
            "",
            "-",
            ".",
            "e5",
            "1e",
            "1.2.3",
            "abc",
            "1e+",
            "1 2",
            "0x10",
            "1e99999999999",
        ] {
            assert_eq!(canonical_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn integers_round_trip_through_magnitudes() {
        for s in [
            "0",
            "1",
            "4294967295",
            "4294967296",
            "123456789012345678901234567890",
            "18446744073709551616",
        ] {
            let (neg, mag) = parse_integer(s).unwrap();
            assert!(!neg);
            assert_eq!(to_decimal(&mag), s);
        }
        assert_eq!(parse_integer("0").unwrap().1, Vec::<u32>::new());
        assert_eq!(parse_integer("4294967296").unwrap().1, vec![1, 0]);
        assert_eq!(
            parse_integer("-123456789012345678901234567890").unwrap(),
            (true, vec![0x1, 0x8ee90ff6, 0xc373e0ee, 0x4e3f0ad2])
        );
        assert_eq!(parse_integer("12a"), None);
        assert_eq!(parse_integer(""), None);
    }
}
