//! Percent-encoding, one place for the four forms this workspace speaks, on the
//! `percent-encoding` crate (already in the tree through reqwest's `url`):
//!
//! - Java's `URLEncoder`/`URLDecoder` (registry URLs, ZooKeeper node names): [`encode_java`],
//!   [`decode_java`] (strict: a malformed escape is an error);
//! - gRPC's `grpc-message`: [`encode_grpc_message`], and [`decode_lenient`] (a malformed escape
//!   is kept as it is, invalid UTF-8 replaced: never fail a call because of its message);
//! - HTTP query values (the admin endpoint): [`decode_lenient`] with `+` as a space;
//! - URL paths that keep `/` and `:` (service keys): [`encode_path`].

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, percent_decode, utf8_percent_encode};

/// What Java's `URLEncoder` escapes: everything but `A-Z a-z 0-9 . - * _` (and the space, which
/// it writes as `+`).
const JAVA: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'-')
    .remove(b'*')
    .remove(b'_');

/// What a `grpc-message` escapes: everything outside printable ASCII, and `%`.
const GRPC_MESSAGE: &AsciiSet = &CONTROLS.add(b'%');

/// What a URL path escapes here: everything but unreserved characters, `/` and `:`.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/')
    .remove(b':');

/// Like Java's `URLEncoder.encode(s, "UTF-8")`: `A-Z a-z 0-9 . - * _` stay, space becomes `+`,
/// every other byte `%XX` (upper-case hex).
pub fn encode_java(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for (i, part) in s.split(' ').enumerate() {
        if i > 0 {
            out.push('+');
        }
        out.extend(utf8_percent_encode(part, JAVA));
    }
    out
}

/// Like Java's `URLDecoder.decode(s, "UTF-8")`: `+` is a space, `%XX` a byte. `Err` with the
/// byte offset of a `%` not followed by two hex digits, or of the first byte of decoded text
/// that is not UTF-8.
pub fn decode_java(s: &str) -> Result<String, (usize, &'static str)> {
    let b = s.as_bytes();
    if let Some(i) = (0..b.len()).find(|&i| {
        b[i] == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    }) {
        return Err((i, "'%' not followed by two hex digits"));
    }
    let spaced = s.replace('+', " ");
    percent_decode(spaced.as_bytes())
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|e| (e.valid_up_to(), "decoded bytes are not UTF-8"))
}

/// A `grpc-message` value: printable ASCII but `%` as it is, every other byte `%XX`.
pub fn encode_grpc_message(message: &str) -> String {
    utf8_percent_encode(message, GRPC_MESSAGE).to_string()
}

/// Decodes `%XX` escapes, keeping a malformed one as it is and replacing invalid UTF-8; with
/// `plus_is_space`, `+` is a space (HTML form and query encoding).
pub fn decode_lenient(raw: &[u8], plus_is_space: bool) -> String {
    if plus_is_space && raw.contains(&b'+') {
        let spaced: Vec<u8> = raw
            .iter()
            .map(|&b| if b == b'+' { b' ' } else { b })
            .collect();
        return percent_decode(&spaced).decode_utf8_lossy().into_owned();
    }
    percent_decode(raw).decode_utf8_lossy().into_owned()
}

/// A URL path segment list: unreserved characters, `/` and `:` stay, every other byte `%XX`.
pub fn encode_path(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_forms() {
        assert_eq!(
            encode_java("a b*c.d-e_f/g:h=i&j"),
            "a+b*c.d-e_f%2Fg%3Ah%3Di%26j"
        );
        assert_eq!(encode_java("é"), "%C3%A9");
        assert_eq!(encode_java(" "), "+");
        assert_eq!(decode_java("a+b%2Fc%C3%A9").unwrap(), "a b/cé");
        assert_eq!(decode_java("%2B").unwrap(), "+");
        assert_eq!(decode_java("a%2").unwrap_err().0, 1);
        assert_eq!(decode_java("ab%zz").unwrap_err().0, 2);
        assert_eq!(
            decode_java("%FF").unwrap_err().1,
            "decoded bytes are not UTF-8"
        );
        for s in ["", "plain", "a b", "100%", "κόσμε", "x=1&y=2", "+*~"] {
            assert_eq!(decode_java(&encode_java(s)).unwrap(), s, "{s:?}");
        }
    }

    #[test]
    fn grpc_message_and_lenient_forms() {
        assert_eq!(encode_grpc_message("50% off\n"), "50%25 off%0A");
        assert_eq!(encode_grpc_message("é~"), "%C3%A9~");
        assert_eq!(decode_lenient(b"50%25 off%0A", false), "50% off\n");
        assert_eq!(
            decode_lenient(b"%zz%4", false),
            "%zz%4",
            "malformed escapes kept"
        );
        assert_eq!(decode_lenient(b"%FF", false), "\u{FFFD}");
        assert_eq!(decode_lenient(b"a+b%2B", true), "a b+");
        assert_eq!(decode_lenient(b"a+b", false), "a+b");
    }

    #[test]
    fn path_form() {
        assert_eq!(
            encode_path("com.foo.Bar:1.0/x y~"),
            "com.foo.Bar:1.0/x%20y~"
        );
        assert_eq!(encode_path("a?b#c"), "a%3Fb%23c");
    }
}
