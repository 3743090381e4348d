//! Request metadata: the `grpc-timeout` header and attachments as headers.

use std::time::Duration;

use base64::Engine as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use tracing::debug;

/// The largest value `grpc-timeout` allows: 8 ASCII digits.
const MAX_TIMEOUT_VALUE: u128 = 99_999_999;

/// Encodes `timeout` as a `grpc-timeout` value: at most 8 digits and a unit, using the finest
/// unit that fits, rounded up so the provider never sees a shorter deadline than the consumer
/// has (`"0n"` for zero, `"99999999H"` at most).
pub fn encode_timeout(timeout: Duration) -> String {
    let nanos = timeout.as_nanos();
    if nanos == 0 {
        return "0n".to_string();
    }
    const UNITS: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    for (per, unit) in UNITS {
        let value = nanos.div_ceil(per);
        if value <= MAX_TIMEOUT_VALUE {
            return format!("{value}{unit}");
        }
    }
    format!("{MAX_TIMEOUT_VALUE}H")
}

/// Decodes a `grpc-timeout` value; `None` when malformed.
pub fn decode_timeout(value: &str) -> Option<Duration> {
    let value = value.trim();
    // ASCII only: the unit is then one byte, and the split below is on a character boundary.
    if !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "n" => Duration::from_nanos(n),
        "u" => Duration::from_micros(n),
        "m" => Duration::from_millis(n),
        "S" => Duration::from_secs(n),
        "M" => Duration::from_secs(n * 60),
        "H" => Duration::from_secs(n * 3600),
        _ => return None,
    })
}

/// Headers an attachment may not set: HTTP/2 and gRPC own them.
fn reserved(name: &str) -> bool {
    name.starts_with(':')
        || name.starts_with("grpc-")
        || matches!(
            name,
            "content-type" | "te" | "content-length" | "connection" | "host" | "transfer-encoding"
        )
}

/// Adds attachments as metadata headers: names lower-cased; values of `-bin` keys
/// base64-encoded as gRPC requires; reserved or invalid names skipped (logged at `debug`).
pub fn add_attachments(headers: &mut HeaderMap, attachments: &[(String, String)]) {
    for (key, value) in attachments {
        let name = key.to_ascii_lowercase();
        if reserved(&name) {
            debug!(key = %key, "attachment uses a reserved header name; not sent");
            continue;
        }
        let value = if name.ends_with("-bin") {
            HeaderValue::try_from(
                base64::engine::general_purpose::STANDARD_NO_PAD.encode(value.as_bytes()),
            )
        } else {
            HeaderValue::try_from(value.as_str())
        };
        match (HeaderName::try_from(name), value) {
            (Ok(n), Ok(v)) => {
                headers.append(n, v);
            }
            _ => debug!(key = %key, "attachment is not a valid header; not sent"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_use_the_finest_unit_that_fits_in_eight_digits() {
        assert_eq!(encode_timeout(Duration::ZERO), "0n");
        assert_eq!(encode_timeout(Duration::from_nanos(1)), "1n");
        assert_eq!(encode_timeout(Duration::from_millis(50)), "50000000n");
        assert_eq!(encode_timeout(Duration::from_millis(100)), "100000u");
        assert_eq!(encode_timeout(Duration::from_secs(1)), "1000000u");
        assert_eq!(encode_timeout(Duration::from_secs(3)), "3000000u");
        assert_eq!(encode_timeout(Duration::from_secs(100)), "100000m");
        assert_eq!(encode_timeout(Duration::from_secs(100_000)), "100000S");
        assert_eq!(encode_timeout(Duration::from_secs(200_000_000)), "3333334M");
        assert_eq!(encode_timeout(Duration::from_secs(u64::MAX)), "99999999H");
    }

    #[test]
    fn timeouts_round_up_never_down() {
        // 100 ms + 1 ns does not fit in nanoseconds: 100001 µs, not 100000.
        assert_eq!(
            encode_timeout(Duration::from_millis(100) + Duration::from_nanos(1)),
            "100001u"
        );
        for d in [
            Duration::from_nanos(123_456_789),
            Duration::from_micros(987_654_321),
            Duration::from_millis(4_000_000_001),
        ] {
            let back = decode_timeout(&encode_timeout(d)).unwrap();
            assert!(back >= d, "{d:?} -> {back:?}");
        }
    }

    #[test]
    fn timeouts_decode_and_reject_garbage() {
        assert_eq!(decode_timeout("3000m"), Some(Duration::from_secs(3)));
        assert_eq!(decode_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(decode_timeout("1M"), Some(Duration::from_secs(60)));
        assert_eq!(decode_timeout("7u"), Some(Duration::from_micros(7)));
        for bad in [
            "",
            "m",
            "123456789m",
            "12x",
            "-1S",
            "1.5S",
            "1é",
            "é",
            "5\u{1F600}",
        ] {
            assert_eq!(decode_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn attachments_become_lower_cased_headers_reserved_ones_are_skipped() {
        let mut h = HeaderMap::new();
        add_attachments(
            &mut h,
            &[
                ("Dubbo.Tag".into(), "gray".into()),
                ("trace-bin".into(), "\u{1}x".into()),
                ("grpc-timeout".into(), "1S".into()),
                ("content-type".into(), "text/plain".into()),
                ("bad name".into(), "x".into()),
                ("newline".into(), "a\nb".into()),
            ],
        );
        assert_eq!(h.len(), 2, "{h:?}");
        assert_eq!(h["dubbo.tag"], "gray");
        assert_eq!(h["trace-bin"], "AXg");
    }
}
