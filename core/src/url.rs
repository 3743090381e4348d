//! Dubbo URLs: parsing, encoding, and the URL-encoded form ZooKeeper node names use.
//!
//! Grammar (Dubbo's `URL.valueOf`):
//! `protocol://[username[:password]@]host[:port][/path][?key=value&key=value...]`.
//!
//! - IPv6 hosts are written in brackets: `tri://[::1]:50051?service=x`.
//! - `tri://host:port?service=...` (no path, the form apache-dubbo Python writes) is accepted.
//! - Parameters keep their order. A repeated key is kept twice; lookups return the last value
//!   (Dubbo's map semantics). `key` without `=` means `key=key` (as Dubbo); `key=` is an empty
//!   value; empty segments (`a=1&&b=2`) are skipped, as Dubbo does. Whitespace around keys and
//!   values is dropped (a value never ends in a space, so the printed URL parses back the same).
//! - Method-scoped parameters (`sayHello.timeout=3000`) are read with [`Url::method_param`].
//! - Parameter values are taken literally (Dubbo does not decode them after the node name was
//!   decoded once).
//!
//! A registry address may list several servers (`zookeeper://h1:2181,h2:2181`,
//! `nacos://a:8848?backup=b:8848`): [`Url::parse_registry`] and [`Url::servers`].
//!
//! Malformed input gives a [`UrlError`] naming the input and the byte position; parsing never
//! panics.

use std::fmt;
use std::str::FromStr;

/// A parse error: which input, at which byte position, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {input:?} at byte {position}: {reason}")]
pub struct UrlError {
    /// The offending input (cut to 256 characters).
    pub input: String,
    /// Byte offset in the input where the problem was found.
    pub position: usize,
    /// What was wrong.
    pub reason: String,
}

impl UrlError {
    fn new(input: &str, position: usize, reason: impl Into<String>) -> Self {
        let scrubbed = scrub(input);
        let input = scrubbed.as_str();
        let input = if input.len() > 256 {
            let mut end = 256;
            while !input.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}...", &input[..end])
        } else {
            input.to_string()
        };
        UrlError {
            input,
            position,
            reason: reason.into(),
        }
    }
}

/// Whether a parameter named `key` holds a secret (masked in logs and errors).
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password") || k.contains("secret") || k.contains("token") || k == "accesskey"
}

/// `input` with the password of `scheme://user:password@` and secret-looking parameter values
/// replaced by `***`, done on the text because the input did not parse.
fn scrub(input: &str) -> String {
    let mut out = input.to_string();
    if let Some(start) = out.find("://").map(|i| i + 3) {
        let end = out[start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@').map(|i| start + i)
            && let Some(colon) = out[start..at].find(':').map(|i| start + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    let Some(q) = out.find('?') else {
        return out;
    };
    let (head, query) = out.split_at(q + 1);
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if is_secret_key(k) => format!("{k}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{head}{}", query.join("&"))
}

/// `input`, a URL as the user wrote it (parsed or not, a server list included), with the
/// password of `scheme://user:password@` and secret-looking parameter values replaced by `***`:
/// for showing an address in the form it was given ([`Url::redacted`] prints a parsed one).
pub fn redacted_text(input: &str) -> String {
    scrub(input)
}

/// A parsed Dubbo URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Url {
    protocol: String,
    username: Option<String>,
    password: Option<String>,
    host: String,
    port: Option<u16>,
    path: String,
    params: Vec<(String, String)>,
}

fn valid_protocol_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.' | '_')
}

/// Whether `host` is what the URL grammar accepts as a host: a name or IPv4 address without
/// separators, whitespace or control characters, or an IPv6 address (with or without its
/// brackets). Registry adapters that get hosts outside a URL (Nacos) check them with this.
pub fn is_valid_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.contains(':') {
        valid_ipv6_literal(bare)
    } else {
        !bare.is_empty() && bare == host && bare.chars().all(valid_host_char)
    }
}

/// The inside of `[...]`: hex digits, `:` and `.` (an embedded IPv4 tail).
fn valid_ipv6_literal(host: &str) -> bool {
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
}

fn valid_host_char(c: char) -> bool {
    !(c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '@' | '#' | '[' | ']' | '&'))
}

/// Splits `host[:port]` (an IPv6 host in brackets) found at byte `start` of the input; on
/// error, the input's byte position and the reason.
fn split_host_port(
    hostport: &str,
    start: usize,
) -> Result<(&str, Option<u16>), (usize, &'static str)> {
    let (host, port_str, port_pos) = if let Some(stripped) = hostport.strip_prefix('[') {
        let Some(close) = stripped.find(']') else {
            return Err((start, "unclosed '[' in IPv6 host"));
        };
        let host = &stripped[..close];
        if !valid_ipv6_literal(host) {
            return Err((start + 1, "invalid IPv6 address"));
        }
        let after = &stripped[close + 1..];
        let after_pos = start + close + 2;
        if after.is_empty() {
            (host, None, after_pos)
        } else if let Some(p) = after.strip_prefix(':') {
            (host, Some(p), after_pos + 1)
        } else {
            return Err((after_pos, "expected ':' or end after IPv6 host"));
        }
    } else {
        match hostport.find(':') {
            Some(c) => {
                if hostport[c + 1..].contains(':') {
                    return Err((start + c, "IPv6 host must be written in brackets"));
                }
                (&hostport[..c], Some(&hostport[c + 1..]), start + c + 1)
            }
            None => (hostport, None, start + hostport.len()),
        }
    };
    if host.is_empty() {
        return Err((start, "missing host"));
    }
    if let Some((i, _)) = host.char_indices().find(|&(_, c)| !valid_host_char(c)) {
        return Err((start + i, "invalid character in host"));
    }
    let port = match port_str {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if !p.starts_with('+') => Some(n),
            _ => return Err((port_pos, "port is not a number from 0 to 65535")),
        },
    };
    Ok((host, port))
}

/// The most servers one registry address may list ([`Url::parse_registry`], [`Url::servers`]).
pub const MAX_SERVERS: usize = 64;

/// `host:port`, an IPv6 host in brackets.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl Url {
    /// A URL with no parameters. `path` is without its leading `/` and may be empty.
    pub fn new(protocol: &str, host: &str, port: Option<u16>, path: &str) -> Self {
        Url {
            protocol: protocol.to_string(),
            username: None,
            password: None,
            host: host.to_string(),
            port,
            path: path.trim_start_matches('/').to_string(),
            params: Vec::new(),
        }
    }

    /// Parses a decoded URL string.
    pub fn parse(input: &str) -> Result<Url, UrlError> {
        let err = |pos: usize, reason: &str| UrlError::new(input, pos, reason);
        if input.trim().len() != input.len() {
            return Err(err(0, "leading or trailing whitespace"));
        }
        let Some(scheme_end) = input.find("://") else {
            return Err(err(0, "missing '://' after the protocol"));
        };
        let protocol = &input[..scheme_end];
        if protocol.is_empty() {
            return Err(err(0, "empty protocol"));
        }
        if let Some((i, _)) = protocol
            .char_indices()
            .find(|&(_, c)| !valid_protocol_char(c))
        {
            return Err(err(i, "invalid character in protocol"));
        }
        let rest_start = scheme_end + 3;
        let rest = &input[rest_start..];
        let (before_query, query, query_start) = match rest.find('?') {
            Some(q) => (&rest[..q], Some(&rest[q + 1..]), rest_start + q + 1),
            None => (rest, None, input.len()),
        };
        let (authority, path) = match before_query.find('/') {
            Some(s) => (&before_query[..s], &before_query[s + 1..]),
            None => (before_query, ""),
        };
        if let Some(i) = path.find(|c: char| c.is_whitespace() || c.is_control() || c == '#') {
            return Err(err(
                rest_start + authority.len() + 1 + i,
                "invalid character in path",
            ));
        }

        // userinfo
        let (userinfo, hostport, hostport_start) = match authority.rfind('@') {
            Some(at) => (
                Some(&authority[..at]),
                &authority[at + 1..],
                rest_start + at + 1,
            ),
            None => (None, authority, rest_start),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(ui) => match ui.split_once(':') {
                Some((u, p)) => (Some(u.to_string()), Some(p.to_string())),
                None => (Some(ui.to_string()), None),
            },
        };

        let (host, port) = split_host_port(hostport, hostport_start).map_err(|(p, r)| err(p, r))?;

        let mut params = Vec::new();
        if let Some(query) = query {
            let mut pos = query_start;
            for segment in query.split('&') {
                let seg_pos = pos;
                pos += segment.len() + 1;
                if segment.trim().is_empty() {
                    continue;
                }
                if let Some(i) = segment.find(|c: char| c.is_control() || c == '#') {
                    return Err(err(seg_pos + i, "invalid character in parameter"));
                }
                let (k, v) = match segment.split_once('=') {
                    Some((k, v)) => (k.trim(), v.trim()),
                    None => (segment.trim(), segment.trim()),
                };
                if k.is_empty() {
                    return Err(err(seg_pos, "empty parameter name"));
                }
                params.push((k.to_string(), v.to_string()));
            }
        }

        Ok(Url {
            protocol: protocol.to_string(),
            username,
            password,
            host: host.to_string(),
            port,
            path: path.to_string(),
            params,
        })
    }

    /// Parses a registry address whose authority may list several servers separated by commas
    /// (`zookeeper://h1:2181,h2:2181/chroot`, `nacos://a:8848,b:8848?namespace=dev`), Dubbo's
    /// form of a cluster address (`UrlUtils.parseURL`): the first server becomes the URL's host
    /// and port, the others go in front of its `backup` parameter, Dubbo's own way of naming
    /// further servers. [`Url::servers`] reads them all back. An address with one server parses
    /// exactly as [`Url::parse`].
    ///
    /// Every listed server must be `host[:port]` (an IPv6 host in brackets); an empty entry
    /// (`a:1,,b:2`, `a:1,`) is an error naming its position.
    pub fn parse_registry(input: &str) -> Result<Url, UrlError> {
        let Some(scheme_end) = input.find("://") else {
            return Url::parse(input);
        };
        let rest_start = scheme_end + 3;
        let rest = &input[rest_start..];
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        let hosts_offset = authority.rfind('@').map_or(0, |at| at + 1);
        let hosts = &authority[hosts_offset..];
        let Some(first_len) = hosts.find(',') else {
            return Url::parse(input);
        };
        let list_start = rest_start + hosts_offset;
        if first_len == 0 {
            return Err(UrlError::new(
                input,
                list_start,
                "empty server in the host list",
            ));
        }
        let mut others = Vec::new();
        let mut pos = list_start + first_len + 1;
        for entry in hosts[first_len + 1..].split(',') {
            if entry.is_empty() {
                return Err(UrlError::new(input, pos, "empty server in the host list"));
            }
            if others.len() + 1 == MAX_SERVERS {
                return Err(UrlError::new(
                    input,
                    pos,
                    format!("more than {MAX_SERVERS} servers"),
                ));
            }
            split_host_port(entry, pos).map_err(|(p, r)| UrlError::new(input, p, r))?;
            others.push(entry);
            pos += entry.len() + 1;
        }
        // The URL with the first server only; positions of its errors are the input's.
        let cut = list_start + first_len;
        let removed = hosts.len() - first_len;
        let single = format!("{}{}", &input[..cut], &input[cut + removed..]);
        let mut url = Url::parse(&single).map_err(|e| {
            let position = if e.position >= cut {
                e.position + removed
            } else {
                e.position
            };
            UrlError::new(input, position, e.reason)
        })?;
        let mut backup = others.join(",");
        if let Some(more) = url.param("backup").filter(|b| !b.is_empty()) {
            backup = format!("{backup},{more}");
        }
        url.set_param("backup", &backup);
        Ok(url)
    }

    /// The servers of a registry URL as `host:port` (an IPv6 host in brackets): the URL's own
    /// host and port, then every entry of its `backup` parameter (comma-separated
    /// `host[:port]`, Dubbo's list of further servers, also what [`Url::parse_registry`] makes
    /// of `a:1,b:2`), with `default_port` where a port is missing. A repeated server is kept
    /// once.
    ///
    /// A `BadConfig` error naming the URL (redacted) and the entry for an empty entry, a bad
    /// host or port, port 0, or more than [`MAX_SERVERS`] servers.
    pub fn servers(&self, default_port: u16) -> crate::Result<Vec<String>> {
        let bad =
            |why: String| crate::Error::bad_config(format!("registry {}: {why}", self.redacted()));
        let port = self.port.unwrap_or(default_port);
        if port == 0 {
            return Err(bad(format!("server {}: port 0", self.address())));
        }
        let mut servers = vec![host_port(&self.host, port)];
        let backup = self.param("backup").unwrap_or("");
        if !backup.is_empty() {
            for entry in backup.split(',').map(str::trim) {
                if entry.is_empty() {
                    return Err(bad(format!("backup={backup:?} has an empty server")));
                }
                let (host, port) = split_host_port(entry, 0)
                    .map_err(|(_, why)| bad(format!("backup server {entry:?}: {why}")))?;
                let port = port.unwrap_or(default_port);
                if port == 0 {
                    return Err(bad(format!("backup server {entry:?}: port 0")));
                }
                let server = host_port(host, port);
                if !servers.contains(&server) {
                    if servers.len() == MAX_SERVERS {
                        return Err(bad(format!("more than {MAX_SERVERS} servers")));
                    }
                    servers.push(server);
                }
            }
        }
        Ok(servers)
    }

    /// Parses a ZooKeeper node name: a URL encoded once with Java's `URLEncoder`.
    pub fn from_encoded(node_name: &str) -> Result<Url, UrlError> {
        let decoded = decode_component(node_name)?;
        Url::parse(&decoded)
    }

    /// Encodes the URL the way Java Dubbo names ZooKeeper nodes (`URLEncoder.encode(url)`).
    pub fn to_encoded(&self) -> String {
        encode_component(&self.to_string())
    }

    /// The protocol (`dubbo`, `tri`, `http`, `override`, ...).
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// The user name, if any.
    pub fn username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// The password, if any.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Sets user name and password.
    pub fn set_credentials(&mut self, username: Option<&str>, password: Option<&str>) {
        self.username = username.map(str::to_string);
        self.password = password.map(str::to_string);
    }

    /// The host, without brackets for IPv6.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, if given.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// `host:port` (IPv6 in brackets), or the host alone without a port.
    pub fn address(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => format!("{host}:{p}"),
            None => host,
        }
    }

    /// The path without its leading `/` (empty when absent).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The value of `key`; the last one when repeated.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// All values of `key`, in order.
    pub fn param_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.params
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A method-scoped parameter: `{method}.{key}`, else `{key}`.
    pub fn method_param(&self, method: &str, key: &str) -> Option<&str> {
        let scoped = self.params.iter().rev().find(|(k, _)| {
            k.len() == method.len() + 1 + key.len()
                && k.starts_with(method)
                && k.as_bytes()[method.len()] == b'.'
                && k.ends_with(key)
        });
        scoped.map(|(_, v)| v.as_str()).or_else(|| self.param(key))
    }

    /// All parameters in order, repeated keys included.
    pub fn params(&self) -> &[(String, String)] {
        &self.params
    }

    /// Appends a parameter (after removing earlier values of the key).
    pub fn set_param(&mut self, key: &str, value: &str) {
        self.params.retain(|(k, _)| k != key);
        self.params.push((key.to_string(), value.to_string()));
    }

    /// Builder form of [`Url::set_param`].
    pub fn with_param(mut self, key: &str, value: &str) -> Self {
        self.set_param(key, value);
        self
    }

    /// Removes every value of `key`.
    pub fn remove_param(&mut self, key: &str) {
        self.params.retain(|(k, _)| k != key);
    }

    /// The URL as text with the password and secret-looking parameters masked, for logs.
    pub fn redacted(&self) -> String {
        let mut copy = self.clone();
        if copy.password.is_some() {
            copy.password = Some("***".into());
        }
        for (k, v) in &mut copy.params {
            if is_secret_key(k) {
                *v = "***".into();
            }
        }
        copy.to_string()
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.protocol)?;
        if let Some(u) = &self.username {
            f.write_str(u)?;
            if let Some(p) = &self.password {
                write!(f, ":{p}")?;
            }
            f.write_str("@")?;
        }
        f.write_str(&self.address())?;
        if !self.path.is_empty() {
            write!(f, "/{}", self.path)?;
        }
        for (i, (k, v)) in self.params.iter().enumerate() {
            f.write_str(if i == 0 { "?" } else { "&" })?;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl FromStr for Url {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Url::parse(s)
    }
}

/// Percent-encodes like Java's `URLEncoder.encode(s, "UTF-8")`: `A-Z a-z 0-9 . - * _` stay,
/// space becomes `+`, every other byte becomes `%XX` (upper-case hex).
pub fn encode_component(s: &str) -> String {
    crate::percent::encode_java(s)
}

/// Decodes like Java's `URLDecoder.decode(s, "UTF-8")`: `+` is a space, `%XX` a byte; the
/// bytes must form UTF-8.
pub fn decode_component(s: &str) -> Result<String, UrlError> {
    crate::percent::decode_java(s).map_err(|(at, why)| UrlError::new(s, at, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Inputs `scripts/fuzz` found failing, kept (fixed) as regressions.
    const FUZZ_REGRESSIONS: &[&str] = &[
        // A parameter value ending in a space before a trailing '&': its printed form ended in
        // whitespace and no longer parsed (values are trimmed now).
        "w://r=/tmk@n&?`k:///?/.wr=/t]/= &",
    ];

    #[test]
    fn fuzz_regressions_print_back_the_same() {
        for input in FUZZ_REGRESSIONS {
            let u = Url::parse(input).unwrap();
            assert_eq!(Url::parse(&u.to_string()), Ok(u), "{input:?}");
        }
    }

    #[test]
    fn host_validation_matches_the_grammar() {
        for ok in ["10.0.0.1", "svc-a.local", "::1", "[::1]", "fe80::1:2"] {
            assert!(is_valid_host(ok), "{ok}");
        }
        for bad in [
            "",
            "]",
            "[",
            "[]",
            "a b",
            "a/b",
            "h@x",
            "[10.0.0.1]",
            "::g",
            "a\n",
        ] {
            assert!(!is_valid_host(bad), "{bad:?}");
        }
    }

    #[test]
    fn errors_do_not_quote_credentials() {
        for bad in [
            "zookeeper://admin:s3cret@h:99999",
            "nacos://u:s3cret@h:x1?password=s3cret",
            "nacos://h:99999?accessKey=ak&secretKey=s3cret",
            "http://h:port/p?token=s3cret",
        ] {
            let e = Url::parse(bad).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{bad}: {e}");
            assert!(e.contains("***"), "{bad}: {e}");
        }
        assert_eq!(
            scrub("zk://a:b@h:1/p@q?user=x&Password=y"),
            "zk://a:***@h:1/p@q?user=x&Password=***"
        );
        assert_eq!(scrub("no scheme at all"), "no scheme at all");
        assert_eq!(
            redacted_text("nacos://u:pw@a:8848,b:8848?backup=c&password=pw"),
            "nacos://u:***@a:8848,b:8848?backup=c&password=***"
        );
    }

    #[test]
    fn parses_a_full_dubbo_url() {
        let u = Url::parse(
            "dubbo://10.0.0.1:20880/com.foo.BarService?anyhost=true&application=demo&interface=com.foo.BarService&methods=a,b&sayHello.timeout=3000&timeout=1000",
        )
        .unwrap();
        assert_eq!(u.protocol(), "dubbo");
        assert_eq!(u.host(), "10.0.0.1");
        assert_eq!(u.port(), Some(20880));
        assert_eq!(u.path(), "com.foo.BarService");
        assert_eq!(u.param("methods"), Some("a,b"));
        assert_eq!(u.method_param("sayHello", "timeout"), Some("3000"));
        assert_eq!(u.method_param("other", "timeout"), Some("1000"));
        assert_eq!(u.address(), "10.0.0.1:20880");
    }

    #[test]
    fn parses_python_triple_form_without_path() {
        let u = Url::from_encoded(
            "tri%3A%2F%2F127.0.0.1%3A50051%3Fservice%3Dorg.apache.dubbo.samples.HelloWorld",
        )
        .unwrap();
        assert_eq!(u.protocol(), "tri");
        assert_eq!(u.path(), "");
        assert_eq!(u.port(), Some(50051));
        assert_eq!(
            u.param("service"),
            Some("org.apache.dubbo.samples.HelloWorld")
        );
        assert_eq!(
            u.to_string(),
            "tri://127.0.0.1:50051?service=org.apache.dubbo.samples.HelloWorld"
        );
    }

    #[test]
    fn ipv6_credentials_repeated_and_empty_params() {
        let u =
            Url::parse("tri://admin:s3cret@[fe80::1]:50051/svc?a=1&a=2&empty=&flag&&b=x").unwrap();
        assert_eq!(u.host(), "fe80::1");
        assert_eq!(u.address(), "[fe80::1]:50051");
        assert_eq!(u.username(), Some("admin"));
        assert_eq!(u.password(), Some("s3cret"));
        assert_eq!(u.param("a"), Some("2"));
        assert_eq!(u.param_all("a").collect::<Vec<_>>(), vec!["1", "2"]);
        assert_eq!(u.param("empty"), Some(""));
        assert_eq!(u.param("flag"), Some("flag"));
        assert_eq!(u.param("b"), Some("x"));
        assert!(!u.redacted().contains("s3cret"));
        assert_eq!(Url::parse(&u.to_string()).unwrap(), u);
    }

    #[test]
    fn java_urlencoder_form() {
        let raw = "dubbo://10.0.0.1:20880/com.foo.Bar?application=my app&methods=a,b&weight=100";
        let enc = encode_component(raw);
        assert_eq!(
            enc,
            "dubbo%3A%2F%2F10.0.0.1%3A20880%2Fcom.foo.Bar%3Fapplication%3Dmy+app%26methods%3Da%2Cb%26weight%3D100"
        );
        assert_eq!(decode_component(&enc).unwrap(), raw);
        assert_eq!(
            Url::from_encoded(&enc).unwrap().param("application"),
            Some("my app")
        );
        assert_eq!(encode_component("a*b-c_d.e~"), "a*b-c_d.e%7E");
        assert_eq!(encode_component("é"), "%C3%A9");
    }

    #[test]
    fn malformed_inputs_name_the_position() {
        let cases: &[(&str, usize, &str)] = &[
            ("10.0.0.1:20880", 0, "missing '://'"),
            ("://h:1", 0, "empty protocol"),
            ("du bbo://h:1", 2, "invalid character in protocol"),
            ("dubbo://:20880/x", 8, "missing host"),
            ("dubbo://h:99999/x", 10, "port"),
            ("dubbo://h:12ab/x", 10, "port"),
            ("dubbo://fe80::1:80/x", 12, "brackets"),
            ("dubbo://[fe80::1/x", 8, "unclosed"),
            ("dubbo://[fe80::1]x/x", 17, "expected ':'"),
            ("dubbo://h:1/x?=v", 14, "empty parameter name"),
            (" dubbo://h:1", 0, "whitespace"),
        ];
        for (input, pos, reason) in cases {
            let e = Url::parse(input).unwrap_err();
            assert_eq!(e.position, *pos, "{input}: {e}");
            assert!(e.reason.contains(reason), "{input}: {e}");
            assert!(e.to_string().contains(input.trim()), "{e}");
        }
        let e = decode_component("abc%4").unwrap_err();
        assert_eq!(e.position, 3);
        assert!(decode_component("%C3%28").is_err());
    }

    #[test]
    fn registry_addresses_list_servers_in_the_authority_or_in_backup() {
        let u = Url::parse_registry("nacos://a:8848,b:8848,c:8848").unwrap();
        assert_eq!((u.host(), u.port()), ("a", Some(8848)));
        assert_eq!(u.param("backup"), Some("b:8848,c:8848"));
        assert_eq!(
            u.servers(8848).unwrap(),
            ["a:8848", "b:8848", "c:8848"],
            "the order is kept"
        );
        // The authority's list comes before an explicit backup; default ports; IPv6.
        let u = Url::parse_registry("nacos://a,b:9,[::1]/p?backup=d:1,[fe80::2]:7&namespace=x")
            .unwrap();
        assert_eq!(u.path(), "p");
        assert_eq!(u.param("namespace"), Some("x"));
        assert_eq!(
            u.servers(8848).unwrap(),
            ["a:8848", "b:9", "[::1]:8848", "d:1", "[fe80::2]:7"]
        );
        // The backup form alone, as Java Dubbo writes it.
        let u = Url::parse_registry("nacos://a:8848?backup=b:8848,c").unwrap();
        assert_eq!(u, Url::parse("nacos://a:8848?backup=b:8848,c").unwrap());
        assert_eq!(u.servers(8848).unwrap(), ["a:8848", "b:8848", "c:8848"]);
        // Credentials (a comma in a password is no server list), a chroot, ZooKeeper's port.
        let u = Url::parse_registry("zookeeper://u:p,w@h1:2181,h2/chroot?x=1").unwrap();
        assert_eq!((u.username(), u.password()), (Some("u"), Some("p,w")));
        assert_eq!(u.path(), "chroot");
        assert_eq!(u.servers(2181).unwrap(), ["h1:2181", "h2:2181"]);
        let u = Url::parse_registry("zookeeper://u:p,w@h1:2181").unwrap();
        assert_eq!(u.servers(2181).unwrap(), ["h1:2181"]);
        // One server: exactly Url::parse.
        for one in [
            "nacos://h:1?a=b",
            "nacos://h",
            "zk://[::1]:2/x",
            "nacos://h:1?backup=",
        ] {
            assert_eq!(Url::parse_registry(one), Url::parse(one), "{one}");
        }
        assert_eq!(
            Url::parse("nacos://h?backup=")
                .unwrap()
                .servers(8848)
                .unwrap(),
            ["h:8848"]
        );
        // A repeated server is kept once.
        let u = Url::parse_registry("nacos://a:1,a:1?backup=a:1,b:2").unwrap();
        assert_eq!(u.servers(8848).unwrap(), ["a:1", "b:2"]);
        // What parse_registry makes prints back to a URL that parses the same.
        assert_eq!(Url::parse(&u.to_string()), Ok(u));
    }

    #[test]
    fn bad_server_lists_name_the_input_and_position() {
        let cases: &[(&str, usize, &str)] = &[
            ("nacos://,a:1", 8, "empty server"),
            ("nacos://a:1,,b:2", 12, "empty server"),
            ("nacos://a:1,", 12, "empty server"),
            ("nacos://a:1,?x=1", 12, "empty server"),
            ("nacos://a:1,b:x", 14, "port"),
            ("nacos://a:1,b:99999", 14, "port"),
            ("nacos://a:1,b:", 14, "port"),
            ("nacos://a:x,b:1", 10, "port"),
            ("nacos://a:1,b c:2", 13, "invalid character in host"),
            ("nacos://a:1,fe80::1", 16, "brackets"),
            ("nacos://a:1,[::1", 12, "unclosed"),
            ("nacos://a:1,:2", 12, "missing host"),
            ("nacos://a:1,b:2/x y", 17, "invalid character in path"),
            ("nacos://u@,b:2", 10, "empty server"),
        ];
        for (input, pos, reason) in cases {
            let e = Url::parse_registry(input).unwrap_err();
            assert_eq!(e.position, *pos, "{input}: {e}");
            assert!(e.reason.contains(reason), "{input}: {e}");
            assert!(e.to_string().contains(input), "{e}");
        }
        let e = Url::parse_registry("nacos://u:s3cret@a:1,b:x").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        // At most MAX_SERVERS, in the authority or with backup.
        let list = |n: usize| {
            (0..n)
                .map(|i| format!("10.0.0.{}:{}", i % 250, 1000 + i))
                .collect::<Vec<_>>()
                .join(",")
        };
        let u = Url::parse_registry(&format!("nacos://{}", list(MAX_SERVERS))).unwrap();
        assert_eq!(u.servers(8848).unwrap().len(), MAX_SERVERS);
        let e = Url::parse_registry(&format!("nacos://{}", list(MAX_SERVERS + 1))).unwrap_err();
        assert!(e.reason.contains("more than 64 servers"), "{e}");
        let e = Url::parse_registry(&format!("nacos://h:1,h:2?backup={}", list(MAX_SERVERS - 1)))
            .unwrap()
            .servers(8848)
            .unwrap_err();
        assert!(e.to_string().contains("more than 64 servers"), "{e}");
    }

    #[test]
    fn bad_backup_servers_are_bad_config_naming_the_url() {
        for (url, want) in [
            ("nacos://a:1?backup=b:1,,c", "empty server"),
            ("nacos://a:1?backup=b:1,", "empty server"),
            ("nacos://a:1?backup=b:x", "backup server \"b:x\": port"),
            (
                "nacos://a:1?backup=b/c",
                "backup server \"b/c\": invalid character",
            ),
            (
                "nacos://a:1?backup=u@b",
                "backup server \"u@b\": invalid character",
            ),
            ("nacos://a:1?backup=fe80::1", "brackets"),
            ("nacos://a:1?backup=b:0", "backup server \"b:0\": port 0"),
            ("nacos://a:0", "server a:0: port 0"),
            ("nacos://u:s3cret@a:1?backup=:1", "missing host"),
        ] {
            let e = Url::parse(url).unwrap().servers(8848).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::BadConfig, "{url}");
            assert!(e.to_string().contains(want), "{url}: {e}");
            assert!(e.to_string().contains("registry nacos://"), "{url}: {e}");
            assert!(!e.to_string().contains("s3cret"), "{url}: {e}");
        }
    }

    fn arb_token() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_.\\-]{1,12}"
    }

    fn arb_value() -> impl Strategy<Value = String> {
        // Anything but the separators of the query grammar and control characters, without
        // surrounding whitespace (the parser drops it).
        "([^&#\\s\\p{Cc}]([^&#\\p{Cc}]{0,14}[^&#\\s\\p{Cc}])?)?"
    }

    fn arb_url() -> impl Strategy<Value = Url> {
        let host = prop_oneof![
            "[a-z][a-z0-9\\-]{0,10}(\\.[a-z0-9]{1,5}){0,2}",
            (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>())
                .prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
            any::<[u16; 8]>().prop_map(|s| std::net::Ipv6Addr::from(s).to_string()),
        ];
        (
            "[a-z][a-z0-9+]{0,7}",
            proptest::option::of((arb_token(), proptest::option::of(arb_token()))),
            host,
            proptest::option::of(any::<u16>()),
            proptest::option::of("[A-Za-z0-9_.\\-/]{0,20}"),
            proptest::collection::vec((arb_token(), arb_value()), 0..6),
        )
            .prop_map(|(protocol, creds, host, port, path, params)| {
                let mut u = Url::new(&protocol, &host, port, &path.unwrap_or_default());
                if let Some((user, pass)) = creds {
                    u.set_credentials(Some(&user), pass.as_deref());
                }
                for (k, v) in params {
                    u.params.push((k, v));
                }
                u
            })
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(u in arb_url()) {
            let text = u.to_string();
            let back = Url::parse(&text).unwrap();
            // A path made only of slashes collapses: compare the normalised forms.
            prop_assert_eq!(back.to_string(), text);
            prop_assert_eq!(back.params(), u.params());
            prop_assert_eq!(back.host(), u.host());
            prop_assert_eq!(back.port(), u.port());
        }

        #[test]
        fn encoded_form_round_trips(u in arb_url()) {
            let enc = u.to_encoded();
            prop_assert!(enc.bytes().all(|b| b.is_ascii_alphanumeric() || b".-*_%+".contains(&b)));
            prop_assert_eq!(Url::from_encoded(&enc).unwrap().to_string(), u.to_string());
        }

        #[test]
        fn component_codec_round_trips(s in any::<String>()) {
            prop_assert_eq!(decode_component(&encode_component(&s)).unwrap(), s);
        }

        #[test]
        fn parser_never_panics(s in any::<String>()) {
            let _ = Url::parse(&s);
            let _ = Url::from_encoded(&s);
            if let Ok(u) = Url::parse_registry(&s) {
                let _ = u.servers(8848);
            }
        }

        /// A registry address with a server list parses to a URL that prints back to text
        /// [`Url::parse`] reads the same; its servers never exceed the cap.
        #[test]
        fn server_lists_print_back_the_same(
            s in "[a-z]{1,3}://([a-z]{1,2}@)?[a-z0-9:,\\[\\]]{0,30}(/[a-z]{0,3})?(\\?backup=[a-z0-9:,]{0,12})?"
        ) {
            if let Ok(u) = Url::parse_registry(&s) {
                let printed = u.to_string();
                prop_assert_eq!(Url::parse(&printed), Ok(u.clone()), "{:?} printed as {:?}", s, printed);
                if let Ok(servers) = u.servers(8848) {
                    prop_assert!(!servers.is_empty() && servers.len() <= MAX_SERVERS);
                }
            }
        }

        /// The fuzz target's property (`fuzz/fuzz_targets/url.rs`) on URL-shaped text: what
        /// parses prints back to text that parses to the same URL.
        #[test]
        fn whatever_parses_prints_back_the_same(
            s in "[a-z]{1,3}://[ -~]{0,40}|[a-z]{1,3}://[a-z:@\\[\\]/?=& ]{0,30}"
        ) {
            if let Ok(u) = Url::parse(&s) {
                let printed = u.to_string();
                prop_assert_eq!(Url::parse(&printed), Ok(u), "{:?} printed as {:?}", s, printed);
            }
        }
    }
}
