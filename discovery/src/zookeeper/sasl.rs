//! SASL authentication to ZooKeeper (DIGEST-MD5), from the registry URL.
//!
//! What a Java ZooKeeper client takes from a JAAS file's `Client` section and system properties,
//! Switchman takes from URL parameters:
//!
//! | parameter | Java | meaning |
//! |---|---|---|
//! | `sasl` | (the login module) | `digest-md5`, or `none`; implied by `sasl.username` or `sasl.jaas` |
//! | `sasl.username`, `sasl.password` | `DigestLoginModule` `username`, `password` | the SASL user and password |
//! | `sasl.jaas` (`java.security.auth.login.config`) | the same system property | a JAAS file to read the user and password from |
//! | `sasl.jaas.section` (`zookeeper.sasl.clientconfig`) | the same | the JAAS section, `Client` by default |
//! | `zookeeper.sasl.client` | the same | `false` turns SASL off, as in Java |
//! | `zookeeper.sasl.client.username` | the same | the Kerberos service name: accepted and unused (DIGEST-MD5 always uses `zookeeper/zk-sasl-md5`, as the Java client does) |
//!
//! With `sasl=digest-md5` and none of `sasl.username` or `sasl.jaas`, the address's
//! `user:password@` is the SASL user too (it stays the `digest` identity as well).
//!
//! GSSAPI (Kerberos) is not supported: it needs a KDC and a ticket cache, and zookeeper-client's
//! GSSAPI feature links the system's Kerberos libraries; `sasl=gssapi` or a JAAS section with
//! `Krb5LoginModule` is a configuration error that says so.
//!
//! The JAAS file is read once, when the URL is parsed, by a strict parser of the JAAS grammar
//! (`Name { module.Class flag key="value" ...; };`, `//` and `/* */` comments, values quoted with
//! `\"` and `\\` escapes or bare words) of files up to 64 KiB; `${...}` property expansion is
//! refused. Errors name the file, the line and the parameter, never a password.

use std::fmt;
use std::path::{Path, PathBuf};

use switchman_core::Url;
use tracing::debug;
use zookeeper_client as zk;

use crate::tls_relay::{bool_param, param};

const MECHANISM: [&str; 1] = ["sasl"];
const USERNAME: [&str; 1] = ["sasl.username"];
const PASSWORD: [&str; 1] = ["sasl.password"];
const JAAS: [&str; 2] = ["sasl.jaas", "java.security.auth.login.config"];
const SECTION: [&str; 2] = ["sasl.jaas.section", "zookeeper.sasl.clientconfig"];
const CLIENT: [&str; 1] = ["zookeeper.sasl.client"];
/// The Kerberos service name: DIGEST-MD5 does not use it (in Java neither).
const SERVICE: &str = "zookeeper.sasl.client.username";
/// The largest JAAS file read.
const MAX_JAAS: u64 = 64 * 1024;
const DIGEST_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";

/// Where the SASL user and password came from (for logs and errors).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Params,
    Jaas { file: PathBuf, section: String },
    UserInfo,
}

/// DIGEST-MD5 credentials of a registry. `Debug` and `Display` never show the password.
#[derive(Clone)]
pub(crate) struct ZkSasl {
    username: String,
    password: String,
    source: Source,
}

impl fmt::Debug for ZkSasl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkSasl")
            .field("mechanism", &"DIGEST-MD5")
            .field("username", &self.username)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for ZkSasl {
    /// `SASL DIGEST-MD5 as alice (sasl.jaas /etc/jaas.conf, section Client)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SASL DIGEST-MD5 as {:?} ({})",
            self.username,
            self.origin()
        )
    }
}

impl ZkSasl {
    /// Where the user and password came from: `sasl.jaas FILE, section Client`.
    fn origin(&self) -> String {
        match &self.source {
            Source::Params => "sasl.username/sasl.password".into(),
            Source::Jaas { file, section } => {
                format!("sasl.jaas {}, section {section}", file.display())
            }
            Source::UserInfo => "the address's user:password".into(),
        }
    }

    /// The SASL settings of `url`; `None` when it asks for no SASL.
    pub(crate) fn from_url(url: &Url) -> Result<Option<ZkSasl>, String> {
        let mechanism = param(url, &MECHANISM)?;
        let enabled = bool_param(url, &CLIENT, true)?;
        let username = param(url, &USERNAME)?;
        let password = param(url, &PASSWORD)?;
        let jaas = param(url, &JAAS)?;
        let section = param(url, &SECTION)?;
        if let Some(s) = param(url, &[SERVICE])? {
            debug!("{SERVICE}={s:?} names a Kerberos service; DIGEST-MD5 does not use it");
        }
        let digest = match mechanism {
            None => None,
            Some(m) if m.eq_ignore_ascii_case("digest-md5") => Some(true),
            Some(m) if m.eq_ignore_ascii_case("none") => Some(false),
            Some(m) if m.eq_ignore_ascii_case("gssapi") || m.eq_ignore_ascii_case("kerberos") => {
                return Err(format!(
                    "sasl={m}: GSSAPI (Kerberos) is not supported, only sasl=digest-md5"
                ));
            }
            Some(m) => return Err(format!("sasl={m:?} is neither digest-md5 nor none")),
        };
        if section.is_some() && jaas.is_none() {
            return Err(
                "sasl.jaas.section (zookeeper.sasl.clientconfig) is given without \
                 sasl.jaas (java.security.auth.login.config)"
                    .into(),
            );
        }
        let given = username.is_some() || password.is_some() || jaas.is_some();
        let on = match (digest, enabled) {
            (Some(true), false) => {
                return Err("sasl=digest-md5 and zookeeper.sasl.client=false disagree".into());
            }
            (Some(false), _) | (None, false) => {
                if given {
                    return Err(format!(
                        "SASL credentials (sasl.username, sasl.password or sasl.jaas) are \
                         given but SASL is off ({})",
                        if enabled {
                            "sasl=none"
                        } else {
                            "zookeeper.sasl.client=false"
                        }
                    ));
                }
                false
            }
            (Some(true), true) => true,
            (None, true) => given,
        };
        if !on {
            return Ok(None);
        }
        if jaas.is_some() && (username.is_some() || password.is_some()) {
            return Err("give sasl.username/sasl.password or sasl.jaas, not both".into());
        }
        let sasl = match (username, password, jaas) {
            (_, _, Some(file)) => {
                let section = section.unwrap_or("Client");
                let (username, password) = read_jaas(Path::new(file), section)
                    .map_err(|e| format!("sasl.jaas {file}: {e}"))?;
                ZkSasl {
                    username,
                    password,
                    source: Source::Jaas {
                        file: PathBuf::from(file),
                        section: section.to_string(),
                    },
                }
            }
            (Some(u), Some(p), None) => ZkSasl {
                username: u.to_string(),
                password: p.to_string(),
                source: Source::Params,
            },
            (Some(_), None, None) => {
                return Err("sasl.username is given without sasl.password".into());
            }
            (None, Some(_), None) => {
                return Err("sasl.password is given without sasl.username".into());
            }
            (None, None, None) => match (url.username(), url.password()) {
                (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => ZkSasl {
                    username: u.to_string(),
                    password: p.to_string(),
                    source: Source::UserInfo,
                },
                _ => {
                    return Err(
                        "sasl=digest-md5 needs a user and password: sasl.username and \
                         sasl.password, sasl.jaas, or user:password@ in the address"
                            .into(),
                    );
                }
            },
        };
        check_credential("user name", &sasl.username)
            .and_then(|()| check_credential("password", &sasl.password))
            .map_err(|e| format!("{}: {e}", sasl.origin()))?;
        Ok(Some(sasl))
    }

    /// The client's SASL options.
    pub(crate) fn options(&self) -> zk::SaslOptions {
        zk::SaslOptions::digest_md5(self.username.clone(), self.password.clone()).into()
    }
}

/// DIGEST-MD5 sends the user name quoted: no control characters, no quote or backslash in it
/// (the client does not escape them); the password is only hashed, but must not be empty.
fn check_credential(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err(format!("the SASL {what} is empty"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("the SASL {what} holds a control character"));
    }
    if what == "user name" && value.contains(['"', '\\']) {
        return Err(format!(
            "the SASL user name {value:?} holds a quote or backslash, which DIGEST-MD5 \
             cannot send here"
        ));
    }
    Ok(())
}

/// The `username` and `password` of the `DigestLoginModule` entry of `section` in the JAAS
/// file at `path`.
fn read_jaas(path: &Path, section: &str) -> Result<(String, String), String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read it: {e}"))?
        .len();
    if len > MAX_JAAS {
        return Err(format!(
            "{len} bytes: larger than a JAAS file can be here ({MAX_JAAS})"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let sections = parse_jaas(&text)?;
    let Some(entries) = sections
        .iter()
        .find(|s| s.name == section)
        .map(|s| &s.entries)
    else {
        let names: Vec<&str> = sections.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "no section {section:?} (the file has {}; sasl.jaas.section names another)",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ));
    };
    let mut found = None;
    for e in entries {
        if e.module == DIGEST_MODULE {
            if found.is_some() {
                return Err(format!(
                    "section {section} has {DIGEST_MODULE} twice (line {})",
                    e.line
                ));
            }
            found = Some(e);
        } else if e.module.ends_with("Krb5LoginModule") {
            return Err(format!(
                "section {section}, line {}: {}: GSSAPI (Kerberos) is not supported, only \
                 {DIGEST_MODULE} (DIGEST-MD5)",
                e.line, e.module
            ));
        } else {
            return Err(format!(
                "section {section}, line {}: login module {} is not supported, only \
                 {DIGEST_MODULE}",
                e.line, e.module
            ));
        }
    }
    let Some(entry) = found else {
        return Err(format!("section {section} has no login module"));
    };
    let get = |key: &str| -> Result<String, String> {
        let mut values = entry.options.iter().filter(|(k, _)| k == key);
        match (values.next(), values.next()) {
            (Some((_, v)), None) => Ok(v.clone()),
            (None, _) => Err(format!(
                "section {section}, line {}: {DIGEST_MODULE} has no {key}",
                entry.line
            )),
            (Some(_), Some(_)) => Err(format!(
                "section {section}, line {}: {key} is given twice",
                entry.line
            )),
        }
    };
    Ok((get("username")?, get("password")?))
}

/// One section of a JAAS file.
#[derive(Debug)]
struct Section {
    name: String,
    entries: Vec<Entry>,
}

/// One login module of a section.
#[derive(Debug)]
struct Entry {
    line: usize,
    module: String,
    options: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Quoted(String),
    Punct(char),
}

/// The tokens of a JAAS file with their lines; errors never quote a value.
fn tokenize(text: &str) -> Result<Vec<(usize, Tok)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let start = line;
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        None => return Err(format!("line {start}: a /* comment is not closed")),
                        Some('/') if prev == '*' => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            prev = c;
                        }
                    }
                }
            }
            '{' | '}' | ';' | '=' => out.push((line, Tok::Punct(c))),
            '"' => {
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("line {start}: a quoted value is not closed")),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => s.push(c),
                            _ => {
                                return Err(format!(
                                    "line {line}: only \\\" and \\\\ escapes are supported in a \
                                     quoted value"
                                ));
                            }
                        },
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            s.push(c);
                        }
                    }
                }
                out.push((start, Tok::Quoted(s)));
            }
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ';' | '=' | '"') {
                        break;
                    }
                    if n == '/' {
                        let mut ahead = chars.clone();
                        ahead.next();
                        if matches!(ahead.peek(), Some('/' | '*')) {
                            break;
                        }
                    }
                    s.push(n);
                    chars.next();
                }
                out.push((line, Tok::Word(s)));
            }
        }
    }
    Ok(out)
}

/// How many sections a JAAS text has, or why it is refused (for the fuzz targets).
pub(crate) fn jaas_section_count(text: &str) -> Result<usize, String> {
    parse_jaas(text).map(|s| s.len())
}

/// Parses `Name { module flag key=value ...; ... };` sections.
fn parse_jaas(text: &str) -> Result<Vec<Section>, String> {
    let toks = tokenize(text)?;
    let mut it = toks.into_iter().peekable();
    let mut sections: Vec<Section> = Vec::new();
    let last_line = text.lines().count().max(1);
    let mut next = |want: &str| -> Result<(usize, Tok), String> {
        it.next()
            .ok_or_else(|| format!("line {last_line}: the file ends where {want} was expected"))
    };
    loop {
        let (line, name) = match next("a section name") {
            Err(_) => break,
            Ok((line, Tok::Word(w))) => (line, w),
            Ok((line, _)) => return Err(format!("line {line}: a section name was expected")),
        };
        if sections.iter().any(|s| s.name == name) {
            return Err(format!("line {line}: section {name} is given twice"));
        }
        match next("'{'")? {
            (_, Tok::Punct('{')) => {}
            (l, _) => return Err(format!("line {l}: '{{' was expected after {name}")),
        }
        let mut entries = Vec::new();
        loop {
            let (line, module) = match next("a login module or '}'")? {
                (_, Tok::Punct('}')) => break,
                (l, Tok::Word(w)) => (l, w),
                (l, _) => {
                    return Err(format!(
                        "line {l}: a login module class or '}}' was expected in {name}"
                    ));
                }
            };
            match next("a control flag")? {
                (_, Tok::Word(f))
                    if ["required", "requisite", "sufficient", "optional"]
                        .iter()
                        .any(|k| f.eq_ignore_ascii_case(k)) => {}
                (l, _) => {
                    return Err(format!(
                        "line {l}: {module} needs a flag: required, requisite, sufficient or \
                         optional"
                    ));
                }
            }
            let mut options = Vec::new();
            loop {
                let (l, key) = match next("an option or ';'")? {
                    (_, Tok::Punct(';')) => break,
                    (l, Tok::Word(k)) => (l, k),
                    (l, _) => {
                        return Err(format!(
                            "line {l}: an option name or ';' was expected after {module}"
                        ));
                    }
                };
                match next("'='")? {
                    (_, Tok::Punct('=')) => {}
                    (l, _) => return Err(format!("line {l}: '=' was expected after {key}")),
                }
                let value = match next("a value")? {
                    (_, Tok::Word(v) | Tok::Quoted(v)) => v,
                    (l, _) => return Err(format!("line {l}: {key} has no value")),
                };
                if value.contains("${") {
                    return Err(format!(
                        "line {l}: {key}: ${{...}} property expansion is not supported"
                    ));
                }
                options.push((key, value));
            }
            entries.push(Entry {
                line,
                module,
                options,
            });
        }
        match next("';' after a section")? {
            (_, Tok::Punct(';')) => {}
            (l, _) => return Err(format!("line {l}: ';' was expected after section {name}")),
        }
        sections.push(Section { name, entries });
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(address: &str) -> Result<Option<ZkSasl>, String> {
        ZkSasl::from_url(&Url::parse(address).unwrap())
    }

    fn jaas_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "switchman-zk-sasl-unit-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("jaas.conf");
        std::fs::write(&f, text).unwrap();
        f
    }

    #[test]
    fn off_unless_asked() {
        assert!(parse("zookeeper://h:1").unwrap().is_none());
        assert!(
            parse("zookeeper://u:p@h:1").unwrap().is_none(),
            "userinfo is digest, not SASL"
        );
        assert!(parse("zookeeper://h:1?sasl=none").unwrap().is_none());
        assert!(
            parse("zookeeper://h:1?zookeeper.sasl.client=true")
                .unwrap()
                .is_none()
        );
        assert!(
            parse("zookeeper://h:1?zookeeper.sasl.client=false")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn credentials_from_params_or_userinfo() {
        let s = parse("zookeeper://h:1?sasl=DIGEST-MD5&sasl.username=alice&sasl.password=secret")
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.username.as_str(), s.password.as_str()),
            ("alice", "secret")
        );
        assert_eq!(s.source, Source::Params);
        // sasl= implied by the user.
        let s = parse("zookeeper://h:1?sasl.username=alice&sasl.password=secret")
            .unwrap()
            .unwrap();
        assert_eq!(s.username, "alice");
        let s = parse("zookeeper://bob:pw@h:1?sasl=digest-md5")
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.username.as_str(), s.password.as_str(), &s.source),
            ("bob", "pw", &Source::UserInfo)
        );
        // Never the password in Debug or Display.
        for shown in [format!("{s:?}"), s.to_string()] {
            assert!(shown.contains("bob") && !shown.contains("pw"), "{shown}");
        }
    }

    #[test]
    fn bad_settings_are_named() {
        for (address, want) in [
            (
                "zookeeper://h:1?sasl=gssapi",
                "GSSAPI (Kerberos) is not supported",
            ),
            ("zookeeper://h:1?sasl=plain", "sasl=\"plain\" is neither"),
            (
                "zookeeper://h:1?sasl=digest-md5",
                "needs a user and password",
            ),
            (
                "zookeeper://u@h:1?sasl=digest-md5",
                "needs a user and password",
            ),
            ("zookeeper://h:1?sasl.username=a", "without sasl.password"),
            ("zookeeper://h:1?sasl.password=a", "without sasl.username"),
            (
                "zookeeper://h:1?sasl=none&sasl.username=a&sasl.password=b",
                "SASL is off (sasl=none)",
            ),
            (
                "zookeeper://h:1?zookeeper.sasl.client=false&sasl.jaas=/j",
                "zookeeper.sasl.client=false)",
            ),
            (
                "zookeeper://h:1?zookeeper.sasl.client=no",
                "neither true nor false",
            ),
            (
                "zookeeper://h:1?sasl=digest-md5&zookeeper.sasl.client=false",
                "disagree",
            ),
            (
                "zookeeper://h:1?sasl.username=a&sasl.password=b&sasl.jaas=/j",
                "not both",
            ),
            (
                "zookeeper://h:1?sasl.jaas.section=Other",
                "without sasl.jaas",
            ),
            (
                "zookeeper://h:1?sasl.jaas=/nonexistent/jaas.conf",
                "sasl.jaas /nonexistent/jaas.conf: cannot read",
            ),
            (
                "zookeeper://h:1?sasl.jaas=/a&java.security.auth.login.config=/b",
                "disagree",
            ),
        ] {
            let e = parse(address).expect_err(address);
            assert!(e.contains(want), "{address}: {e}");
        }
    }

    #[test]
    fn jaas_client_section_as_java_writes_it() {
        let f = jaas_file(
            "ok",
            "/* ZooKeeper */\nServer {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_alice=\"x\";\n};\n\
             // the client\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=\"alice\"\n  password=\"s e\\\"c\\\\ret\";\n};\n\
             Other { org.apache.zookeeper.server.auth.DigestLoginModule optional username=bob password=pw; };\n",
        );
        let s = parse(&format!("zookeeper://h:1?sasl.jaas={}", f.display()))
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.username.as_str(), s.password.as_str()),
            ("alice", "s e\"c\\ret")
        );
        assert!(s.to_string().contains("section Client"), "{s}");
        let s = parse(&format!(
            "zookeeper://h:1?java.security.auth.login.config={}&zookeeper.sasl.clientconfig=Other",
            f.display()
        ))
        .unwrap()
        .unwrap();
        assert_eq!((s.username.as_str(), s.password.as_str()), ("bob", "pw"));
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }

    #[test]
    fn bad_jaas_files_are_named_without_the_password() {
        for (i, (text, want)) in [
            ("Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"x\"; };", "no section \"Client\" (the file has Server"),
            ("Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };", "GSSAPI (Kerberos) is not supported"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\"; };", "has no password"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"hunter2\" };", "line 1: an option name or ';' was expected"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule username=\"a\" password=\"hunter2\"; };", "needs a flag"),
            ("Client {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n username=\"a\"\n password=\"hunter2;\n};", "line 4: a quoted value is not closed"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"${pw}\"; };", "property expansion"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"hunter2\" password=\"hunter2\"; };", "password is given twice"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"hunter2\"; }; Client { };", "section Client is given twice"),
            ("/* hunter2", "a /* comment is not closed"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\" password=\"hu\\nter2\"; };", "escapes"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"\" password=\"hunter2\"; };", "user name is empty"),
            ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"a\\\\b\" password=\"hunter2\"; };", "quote or backslash"),
        ]
        .into_iter()
        .enumerate()
        {
            let f = jaas_file(&format!("bad{i}"), text);
            let e = parse(&format!("zookeeper://h:1?sasl.jaas={}", f.display())).expect_err(text);
            assert!(e.contains(want) && e.contains(&f.display().to_string()), "{text}: {e}");
            assert!(!e.contains("hunter2"), "the password is never shown: {e}");
            let _ = std::fs::remove_dir_all(f.parent().unwrap());
        }
        let f = jaas_file("big", &" ".repeat(MAX_JAAS as usize + 1));
        let e = parse(&format!("zookeeper://h:1?sasl.jaas={}", f.display())).unwrap_err();
        assert!(e.contains("larger than"), "{e}");
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }

    #[test]
    fn tokenizer_never_panics_on_odd_input() {
        for text in [
            "",
            "{",
            "}",
            "\"",
            "\\",
            "a/",
            "a/b",
            "/",
            "a=b;",
            "Client {",
            "Client { x",
            "é { y required; };",
        ] {
            let _ = parse_jaas(text);
        }
        assert!(parse_jaas("").unwrap().is_empty());
    }
}
