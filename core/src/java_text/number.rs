//! Numbers as Java prints them: `Double.toString`, `Float.toString`, `BigDecimal.toString`,
//! `BigInteger.toString`.

use std::fmt::{self, Write as _};

/// A fixed buffer for formatting one number without allocating.
pub(super) struct StackBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackBuf<N> {
    pub(super) fn new() -> Self {
        StackBuf {
            buf: [0; N],
            len: 0,
        }
    }

    pub(super) fn as_str(&self) -> &str {
        // Only whole `&str`s are ever copied in, so the bytes are UTF-8.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> fmt::Write for StackBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > N {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Writes `digits` (significant digits, no leading zero) times `10^exp` (the exponent of the
/// first digit) in Java's layout (`FloatingDecimal.toJavaFormatString`): plain with at least one
/// fraction digit for magnitudes in `[10^-3, 10^7)`, else `d.dddE±n` (`1.0E10`, `1.5E-5`).
fn write_layout(
    out: &mut (impl fmt::Write + ?Sized),
    negative: bool,
    digits: &str,
    exp: i32,
) -> fmt::Result {
    if negative {
        out.write_str("-")?;
    }
    let n = digits.len();
    let dec_exp = exp + 1;
    if (1..8).contains(&dec_exp) {
        let k = dec_exp as usize;
        let lead = n.min(k);
        out.write_str(&digits[..lead])?;
        if lead < k {
            for _ in lead..k {
                out.write_str("0")?;
            }
            out.write_str(".0")
        } else {
            out.write_str(".")?;
            out.write_str(if lead < n { &digits[lead..] } else { "0" })
        }
    } else if (-2..=0).contains(&dec_exp) {
        out.write_str("0.")?;
        for _ in dec_exp..0 {
            out.write_str("0")?;
        }
        out.write_str(digits)
    } else {
        out.write_str(&digits[..1])?;
        out.write_str(".")?;
        out.write_str(if n > 1 { &digits[1..] } else { "0" })?;
        write!(out, "E{exp}")
    }
}

/// `(digits, exponent of the first digit)` of Rust's `{:e}` text (`2.5e-7`, `1e23`).
fn split_sci(s: &str) -> Option<(StackBuf<24>, i32)> {
    let (mantissa, exp) = s.split_once('e')?;
    let mut digits = StackBuf::<24>::new();
    for part in mantissa.split('.') {
        digits.write_str(part).ok()?;
    }
    Some((digits, exp.parse().ok()?))
}

/// Whether `m · 2^e == r · 10^q` exactly.
fn exact_eq(m: u64, e: i32, r: u128, q: i32) -> bool {
    // |q| >= 28 cannot match: 5^28 > 2^64 is more than either side's odd part can hold.
    if !(-27..=27).contains(&q) {
        return false;
    }
    let five = 5u128.pow(q.unsigned_abs());
    let (l, r) = if q >= 0 {
        match r.checked_mul(five) {
            Some(r) => (u128::from(m), r),
            None => return false,
        }
    } else {
        (u128::from(m) * five, r)
    };
    // l · 2^(e - q) == r
    let shift = e - q;
    if shift >= 0 {
        l.leading_zeros() >= shift as u32 && l << shift == r
    } else {
        r.leading_zeros() >= shift.unsigned_abs() && r << shift.unsigned_abs() == l
    }
}

/// Writes the positive finite nonzero `a` (exactly `m · 2^e`) in Java's layout with the digits
/// `Double.toString`/`Float.toString` choose since JDK 19: the shortest decimal that reads back
/// as `a` (`sci` is Rust's shortest `{:e}` of it), the closest to `a` of those, the one with an
/// even last digit on a tie (Rust rounds ties up); when one digit is enough, the closest
/// decimal of two digits (`two` is Rust's exactly rounded `{:.1e}`; only subnormals differ).
/// `reads_back` tells whether a decimal text parses back to `a` in the float's own type.
fn write_java_float_digits(
    out: &mut (impl fmt::Write + ?Sized),
    negative: bool,
    (m, e): (u64, i32),
    subnormal: bool,
    sci: fmt::Arguments<'_>,
    two: fmt::Arguments<'_>,
    reads_back: &dyn Fn(&str) -> bool,
) -> fmt::Result {
    let mut text = StackBuf::<40>::new();
    text.write_fmt(sci)?;
    let (digits, exp) = split_sci(text.as_str()).ok_or(fmt::Error)?;
    let n = digits.as_str().len();
    if n == 1 && subnormal {
        let mut t2 = StackBuf::<40>::new();
        t2.write_fmt(two)?;
        if reads_back(t2.as_str())
            && let Some((d2, e2)) = split_sci(t2.as_str())
        {
            let d2s = d2.as_str();
            let trimmed = d2s.trim_end_matches('0');
            return write_layout(
                out,
                negative,
                if trimmed.is_empty() { "0" } else { trimmed },
                e2,
            );
        }
    }
    let d: u64 = digits.as_str().parse().map_err(|_| fmt::Error)?;
    let p = exp - (n as i32 - 1);
    // A tie: `a` is exactly halfway between d and its neighbour d ± 1 (both at p).
    let other = if exact_eq(m, e, u128::from(d) * 10 + 5, p - 1) {
        Some(d + 1)
    } else if d > 0 && exact_eq(m, e, u128::from(d) * 10 - 5, p - 1) {
        Some(d - 1)
    } else {
        None
    };
    if let Some(o) = other
        && d % 2 == 1
    {
        let mut t = StackBuf::<40>::new();
        write!(t, "{o}e{p}")?;
        if reads_back(t.as_str()) {
            let mut od = StackBuf::<24>::new();
            write!(od, "{o}")?;
            let s = od.as_str();
            let trimmed = s.trim_end_matches('0');
            let exp = p + (s.len() as i32 - 1);
            return write_layout(out, negative, trimmed, exp);
        }
    }
    write_layout(out, negative, digits.as_str(), exp)
}

/// `x` (finite) as `m · 2^e`.
fn decompose(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    if exp == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, exp - 1075)
    }
}

/// Writes `x` as Java's `Double.toString` does: `NaN`, `Infinity`, `-0.0`, `1.0`, `0.001`,
/// `1.0E-4`, `9999999.0`, `1.0E7`, `1.234E10`, `4.9E-324`.
///
/// The digits are those of JDK 19 and later (JDK-4511638): the shortest decimal that reads
/// back as `x`, the closest of those, an even last digit on a tie. JDK 8 to 18 print one or
/// two digits more for a small share of doubles, nearly all of them of 10^15 and more
/// (`1.0E23` prints as `9.999999999999999E22`, `4.030184897929827E17` as
/// `4.0301848979298272E17`): checked against JDK 17 on 700,000 doubles, every one below
/// 10^15 (subnormals aside) prints the same.
pub fn write_java_double(out: &mut (impl fmt::Write + ?Sized), x: f64) -> fmt::Result {
    if x.is_nan() {
        return out.write_str("NaN");
    }
    if x.is_infinite() {
        return out.write_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
    }
    if x == 0.0 {
        return out.write_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
    }
    let a = x.abs();
    write_java_float_digits(
        out,
        x < 0.0,
        decompose(a),
        a.is_subnormal(),
        format_args!("{a:e}"),
        format_args!("{a:.1e}"),
        &|s| s.parse::<f64>() == Ok(a),
    )
}

/// Writes `x` as Java's `Float.toString` does: the layout of [`write_java_double`] with the
/// float's own digits (`0.1f` is `0.1`, not the double's `0.10000000149011612`;
/// `16777217` as a float is `1.6777216E7`; `2417552.25f` is `2417552.2`).
///
/// As for doubles, these are JDK 19+'s digits. JDK 8 to 18 print more digits for many floats
/// of 10^7 and more (`3.0E10f` as `3.0000001E10`, `1.23456792E8`; 43% of random floats of
/// that size on JDK 17; every float below 10^7 prints the same): a `float` argument past 10^7
/// has another text on those JDKs, whatever Switchman does.
pub fn write_java_float(out: &mut (impl fmt::Write + ?Sized), x: f32) -> fmt::Result {
    if x.is_nan() {
        return out.write_str("NaN");
    }
    if x.is_infinite() {
        return out.write_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
    }
    if x == 0.0 {
        return out.write_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
    }
    let a = x.abs();
    write_java_float_digits(
        out,
        x < 0.0,
        decompose(f64::from(a)),
        a.is_subnormal(),
        format_args!("{a:e}"),
        format_args!("{a:.1e}"),
        &|s| s.parse::<f32>() == Ok(a),
    )
}

/// A decimal number's text split as `BigDecimal(String)` reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Decimal<'a> {
    negative: bool,
    /// The coefficient's digits, leading zeros removed, as two pieces (integer and fraction
    /// digits of the text); both empty for zero.
    head: &'a str,
    tail: &'a str,
    scale: i64,
}

impl<'a> Decimal<'a> {
    /// `s` as `new BigDecimal(s)` reads it (`-1.50`, `1e10`, `.5`, `+3E-2`), or `None` when it
    /// would throw.
    pub(super) fn parse(s: &'a str) -> Option<Decimal<'a>> {
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
        if (int_part.is_empty() && frac_part.is_empty()) || !digits(int_part) || !digits(frac_part)
        {
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
        let scale = frac_part.len() as i64 - exp;
        if i32::try_from(scale).is_err() {
            return None;
        }
        let int_trim = int_part.trim_start_matches('0');
        let (head, tail) = if int_trim.is_empty() {
            ("", frac_part.trim_start_matches('0'))
        } else {
            (int_trim, frac_part)
        };
        Some(Decimal {
            negative,
            head,
            tail,
            scale,
        })
    }

    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Writes digits `from..to` of the coefficient.
    fn write_digits(
        &self,
        out: &mut (impl fmt::Write + ?Sized),
        from: usize,
        to: usize,
    ) -> fmt::Result {
        let h = self.head.len();
        if from < h {
            out.write_str(&self.head[from..to.min(h)])?;
        }
        if to > h {
            out.write_str(&self.tail[from.max(h) - h..to - h])?;
        }
        Ok(())
    }

    /// Writes `BigDecimal.toString()`: plain when the scale is not negative and the adjusted
    /// exponent is at least -6, else scientific with a signed exponent (`1E+10`, `1.5E-7`).
    pub(super) fn write(&self, out: &mut (impl fmt::Write + ?Sized)) -> fmt::Result {
        let len = self.len();
        if len == 0 {
            // Zero keeps its scale: `0`, `0.00`, `0E+3`, `0E-7`.
            return if self.scale == 0 {
                out.write_str("0")
            } else if self.scale > 0 && -self.scale >= -6 {
                out.write_str("0.")?;
                for _ in 0..self.scale {
                    out.write_str("0")?;
                }
                Ok(())
            } else {
                write!(
                    out,
                    "0E{}{}",
                    if self.scale < 0 { "+" } else { "" },
                    -self.scale
                )
            };
        }
        if self.negative {
            out.write_str("-")?;
        }
        let adjusted = -self.scale + (len as i64 - 1);
        if self.scale >= 0 && adjusted >= -6 {
            let scale = self.scale as usize;
            if scale == 0 {
                self.write_digits(out, 0, len)
            } else if len > scale {
                self.write_digits(out, 0, len - scale)?;
                out.write_str(".")?;
                self.write_digits(out, len - scale, len)
            } else {
                out.write_str("0.")?;
                for _ in 0..scale - len {
                    out.write_str("0")?;
                }
                self.write_digits(out, 0, len)
            }
        } else {
            self.write_digits(out, 0, 1)?;
            if len > 1 {
                out.write_str(".")?;
                self.write_digits(out, 1, len)?;
            }
            if adjusted != 0 {
                write!(out, "E{}{adjusted}", if adjusted > 0 { "+" } else { "" })?;
            }
            Ok(())
        }
    }
}

/// A whole number's text as `new BigInteger(s)` reads it: `(negative, digits without leading
/// zeros)`, or `None` when it would throw.
pub(super) fn parse_integer(s: &str) -> Option<(bool, &str)> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    Some(if trimmed.is_empty() {
        (false, "0")
    } else {
        (negative, trimmed)
    })
}
