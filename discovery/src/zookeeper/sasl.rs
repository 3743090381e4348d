//! SASL authentication to ZooKeeper (DIGEST-MD5, and GSSAPI/Kerberos with the
//! `zookeeper-gssapi` feature), from the registry URL.
//!
//! What a Java ZooKeeper client takes from a JAAS file's `Client` section and system properties,
//! Switchman takes from URL parameters:
//!
//! | parameter | Java | meaning |
//! |---|---|---|
//! | `sasl` | (the login module) | `digest-md5`, `gssapi` (or `kerberos`), or `none`; implied by `sasl.username` or `sasl.jaas` |
//! | `sasl.username`, `sasl.password` | `DigestLoginModule` `username`, `password` | the SASL user and password (DIGEST-MD5) |
//! | `sasl.jaas` (`java.security.auth.login.config`) | the same system property | a JAAS file: its `DigestLoginModule` gives the user and password, its `Krb5LoginModule` asks for GSSAPI |
//! | `sasl.jaas.section` (`zookeeper.sasl.clientconfig`) | the same | the JAAS section, `Client` by default |
//! | `zookeeper.sasl.client` | the same | `false` turns SASL off, as in Java |
//! | `sasl.service` (`zookeeper.sasl.client.username`) | the same | GSSAPI: the server principal's first part, `zookeeper` by default (DIGEST-MD5 always uses `zookeeper/zk-sasl-md5`, as Java does) |
//! | `sasl.host` | (the server's host name) | GSSAPI: the server principal's host part; by default the host of each server in the address |
//! | `zookeeper.server.principal` | the same | GSSAPI: the whole server principal `service/host@REALM` (the realm comes from `krb5.conf`) |
//!
//! With `sasl=digest-md5` and none of `sasl.username` or `sasl.jaas`, the address's
//! `user:password@` is the SASL user too (it stays the `digest` identity as well).
//!
//! GSSAPI takes the process's Kerberos credentials as the system's Kerberos library finds
//! them (MIT: the ticket cache `KRB5CCNAME` that `kinit` fills, or the client keytab
//! `KRB5_CLIENT_KTNAME`; `KRB5_CONFIG` for the realm and KDC): no password goes through
//! Switchman. A JAAS `Krb5LoginModule` entry with `useKeyTab=true keyTab="FILE"` is honoured
//! only when `KRB5_CLIENT_KTNAME` names that file (a library cannot hand a keytab to the
//! Kerberos library of a running process), else it is an error that says so. GSSAPI links the
//! system's Kerberos library (`libgssapi_krb5`), so it needs the `zookeeper-gssapi` feature;
//! without it `sasl=gssapi` is a configuration error naming the feature. Behind the TLS relay
//! (`secure=true`) the client sees relay addresses, so the server principal's host is the one
//! server's host, or `sasl.host` with several servers.
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

use super::jaas::{Login, read_jaas};
use crate::tls_relay::{bool_param, param};

const MECHANISM: [&str; 1] = ["sasl"];
const USERNAME: [&str; 1] = ["sasl.username"];
const PASSWORD: [&str; 1] = ["sasl.password"];
const JAAS: [&str; 2] = ["sasl.jaas", "java.security.auth.login.config"];
const SECTION: [&str; 2] = ["sasl.jaas.section", "zookeeper.sasl.clientconfig"];
const CLIENT: [&str; 1] = ["zookeeper.sasl.client"];
/// The Kerberos service name: DIGEST-MD5 does not use it (in Java neither).
const SERVICE: [&str; 2] = ["sasl.service", "zookeeper.sasl.client.username"];
const HOST: [&str; 1] = ["sasl.host"];
const PRINCIPAL: [&str; 1] = ["zookeeper.server.principal"];
/// Where MIT Kerberos reads a client keytab from.
const CLIENT_KTNAME: &str = "KRB5_CLIENT_KTNAME";

/// Where the SASL user and password came from (for logs and errors).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Params,
    Jaas { file: PathBuf, section: String },
    UserInfo,
}

/// The SASL settings of a registry. `Debug` and `Display` never show a password.
#[derive(Clone)]
pub(crate) enum ZkSasl {
    /// DIGEST-MD5 with a user and password.
    Digest(Digest),
    /// GSSAPI (Kerberos) with the process's credentials.
    Gssapi(Gssapi),
}

/// DIGEST-MD5 credentials.
#[derive(Clone)]
pub(crate) struct Digest {
    username: String,
    password: String,
    source: Source,
}

/// What GSSAPI needs besides the process's Kerberos credentials: the server principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gssapi {
    /// The server principal's first part (`zookeeper`).
    service: String,
    /// Its host part; `None`: each server's host in the address.
    host: Option<String>,
    /// Where GSSAPI was asked for (for logs and errors).
    origin: String,
    /// Without the `zookeeper-gssapi` feature there is no GSSAPI to set up: the type cannot
    /// be made ([`gssapi`] refuses it), which the compiler checks.
    #[cfg(not(feature = "zookeeper-gssapi"))]
    never: std::convert::Infallible,
}

impl fmt::Debug for ZkSasl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZkSasl::Digest(d) => f
                .debug_struct("ZkSasl")
                .field("mechanism", &"DIGEST-MD5")
                .field("username", &d.username)
                .field("source", &d.source)
                .finish(),
            ZkSasl::Gssapi(g) => f
                .debug_struct("ZkSasl")
                .field("mechanism", &"GSSAPI")
                .field("service", &g.service)
                .field("host", &g.host)
                .finish(),
        }
    }
}

impl fmt::Display for ZkSasl {
    /// `SASL DIGEST-MD5 as alice (sasl.jaas /etc/jaas.conf, section Client)`, `SASL GSSAPI to
    /// zookeeper/{server host} with this process's Kerberos credentials (sasl=gssapi)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZkSasl::Digest(d) => write!(f, "SASL DIGEST-MD5 as {:?} ({})", d.username, d.origin()),
            ZkSasl::Gssapi(g) => write!(
                f,
                "SASL GSSAPI to {}/{} with this process's Kerberos credentials ({})",
                g.service,
                g.host.as_deref().unwrap_or("{server host}"),
                g.origin
            ),
        }
    }
}

impl Digest {
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
}

/// The mechanism `sasl=` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mech {
    None,
    Digest,
    Gssapi,
}

impl ZkSasl {
    /// Whether a refusal of it is about a user and password (DIGEST-MD5).
    pub(crate) fn is_digest(&self) -> bool {
        matches!(self, ZkSasl::Digest(_))
    }

    /// The SASL settings of `url`; `None` when it asks for no SASL.
    pub(crate) fn from_url(url: &Url) -> Result<Option<ZkSasl>, String> {
        let mechanism = param(url, &MECHANISM)?;
        let enabled = bool_param(url, &CLIENT, true)?;
        let username = param(url, &USERNAME)?;
        let password = param(url, &PASSWORD)?;
        let jaas = param(url, &JAAS)?;
        let section = param(url, &SECTION)?;
        let mech = match mechanism {
            None => None,
            Some(m) if m.eq_ignore_ascii_case("digest-md5") => Some(Mech::Digest),
            Some(m) if m.eq_ignore_ascii_case("none") => Some(Mech::None),
            Some(m) if m.eq_ignore_ascii_case("gssapi") || m.eq_ignore_ascii_case("kerberos") => {
                Some(Mech::Gssapi)
            }
            Some(m) => {
                return Err(format!("sasl={m:?} is neither digest-md5, gssapi nor none"));
            }
        };
        if section.is_some() && jaas.is_none() {
            return Err(
                "sasl.jaas.section (zookeeper.sasl.clientconfig) is given without \
                 sasl.jaas (java.security.auth.login.config)"
                    .into(),
            );
        }
        let given = username.is_some() || password.is_some() || jaas.is_some();
        let on = match (mech, enabled) {
            (Some(m @ (Mech::Digest | Mech::Gssapi)), false) => {
                let name = if m == Mech::Digest {
                    "digest-md5"
                } else {
                    "gssapi"
                };
                return Err(format!(
                    "sasl={name} and zookeeper.sasl.client=false disagree"
                ));
            }
            (Some(Mech::None), _) | (None, false) => {
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
            (Some(_), true) => true,
            (None, true) => given,
        };
        if !on {
            return Ok(None);
        }
        if jaas.is_some() && (username.is_some() || password.is_some()) {
            return Err("give sasl.username/sasl.password or sasl.jaas, not both".into());
        }
        let login = match jaas {
            Some(file) => {
                let section = section.unwrap_or("Client");
                let login = read_jaas(Path::new(file), section)
                    .map_err(|e| format!("sasl.jaas {file}: {e}"))?;
                Some((file, section, login))
            }
            None => None,
        };
        // The JAAS section's login: DIGEST-MD5's user and password, or Kerberos (its keytab).
        let (jaas_digest, jaas_krb5) = match login {
            Some((file, section, Login::Digest { username, password })) => {
                (Some((file, section, username, password)), None)
            }
            Some((file, section, Login::Krb5 { keytab })) => (None, Some((file, section, keytab))),
            None => (None, None),
        };
        if mech == Some(Mech::Gssapi) && jaas_digest.is_some() {
            return Err(
                "sasl=gssapi, but the JAAS section has a DigestLoginModule (DIGEST-MD5)".into(),
            );
        }
        if mech == Some(Mech::Digest) && jaas_krb5.is_some() {
            return Err(
                "sasl=digest-md5, but the JAAS section has a Krb5LoginModule (GSSAPI)".into(),
            );
        }
        if mech == Some(Mech::Gssapi) || jaas_krb5.is_some() {
            if username.is_some() || password.is_some() {
                return Err(
                    "GSSAPI (Kerberos) takes no sasl.username or sasl.password: it uses this \
                     process's Kerberos credentials"
                        .into(),
                );
            }
            let origin = match jaas_krb5 {
                Some((file, section, keytab)) => {
                    check_keytab(keytab.as_deref())
                        .map_err(|e| format!("sasl.jaas {file}, section {section}: {e}"))?;
                    format!("sasl.jaas {file}, section {section}")
                }
                None => "sasl=gssapi".to_string(),
            };
            return gssapi(url, origin).map(|g| Some(ZkSasl::Gssapi(g)));
        }
        for p in SERVICE.iter().chain(&HOST).chain(&PRINCIPAL) {
            if let Some(v) = url.param(p) {
                debug!("{p}={v:?} names a Kerberos principal; DIGEST-MD5 does not use it");
            }
        }
        let digest = match (username, password, jaas_digest) {
            (_, _, Some((file, section, username, password))) => Digest {
                username,
                password,
                source: Source::Jaas {
                    file: PathBuf::from(file),
                    section: section.to_string(),
                },
            },
            (Some(u), Some(p), None) => Digest {
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
                (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => Digest {
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
        check_credential("user name", &digest.username)
            .and_then(|()| check_credential("password", &digest.password))
            .map_err(|e| format!("{}: {e}", digest.origin()))?;
        Ok(Some(ZkSasl::Digest(digest)))
    }

    /// The client's SASL options; `relayed_host`: the one server's host when the client
    /// talks to it through the TLS relay (its connect string then names 127.0.0.1).
    pub(crate) fn options(&self, relayed_host: Option<&str>) -> zk::SaslOptions {
        match self {
            ZkSasl::Digest(d) => {
                zk::SaslOptions::digest_md5(d.username.clone(), d.password.clone()).into()
            }
            ZkSasl::Gssapi(g) => gssapi_options(g, relayed_host),
        }
    }

    /// GSSAPI behind the TLS relay with several servers and no `sasl.host`: the client would
    /// ask for a ticket to `zookeeper/127.0.0.1`.
    pub(crate) fn check_relayed(&self, servers: usize) -> Result<(), String> {
        match self {
            ZkSasl::Gssapi(g) if g.host.is_none() && servers > 1 => Err(
                "sasl=gssapi with secure=true and several servers needs sasl.host (the \
                 server principal's host part): the client connects through local TLS relays"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(feature = "zookeeper-gssapi")]
fn gssapi_options(g: &Gssapi, relayed_host: Option<&str>) -> zk::SaslOptions {
    let mut o = zk::SaslOptions::gssapi().with_username(g.service.clone());
    if let Some(h) = g.host.as_deref().or(relayed_host) {
        o = o.with_hostname(h.to_string());
    }
    o.into()
}

#[cfg(not(feature = "zookeeper-gssapi"))]
fn gssapi_options(g: &Gssapi, _: Option<&str>) -> zk::SaslOptions {
    match g.never {}
}

/// The server principal of a GSSAPI registry, from `sasl.service`/`sasl.host` or
/// `zookeeper.server.principal`; an error without the `zookeeper-gssapi` feature.
fn gssapi(url: &Url, origin: String) -> Result<Gssapi, String> {
    let service = param(url, &SERVICE)?;
    let host = param(url, &HOST)?;
    let (service, host) = match param(url, &PRINCIPAL)? {
        Some(p) => {
            let name = p.split('@').next().unwrap_or_default();
            let (svc, h) = name.split_once('/').ok_or_else(|| {
                format!("zookeeper.server.principal={p:?} is not service/host[@REALM]")
            })?;
            if svc.is_empty() || h.is_empty() {
                return Err(format!(
                    "zookeeper.server.principal={p:?} is not service/host[@REALM]"
                ));
            }
            if service.is_some_and(|s| s != svc) || host.is_some_and(|x| x != h) {
                return Err(format!(
                    "zookeeper.server.principal={p:?} and sasl.service/sasl.host disagree"
                ));
            }
            (svc.to_string(), Some(h.to_string()))
        }
        None => (
            service.unwrap_or("zookeeper").to_string(),
            host.map(str::to_string),
        ),
    };
    for (what, v) in [
        ("service", Some(service.as_str())),
        ("host", host.as_deref()),
    ] {
        if let Some(v) = v
            && (v.is_empty() || v.contains(['/', '@']) || v.chars().any(char::is_control))
        {
            return Err(format!(
                "the GSSAPI server principal's {what} {v:?} is empty or holds '/', '@' or a \
                 control character"
            ));
        }
    }
    #[cfg(not(feature = "zookeeper-gssapi"))]
    {
        let _ = (service, host);
        Err(format!(
            "{origin} asks for GSSAPI (Kerberos), which this build lacks: build Switchman \
             with the `zookeeper-gssapi` feature (it links the system's Kerberos library, \
             libgssapi_krb5)"
        ))
    }
    #[cfg(feature = "zookeeper-gssapi")]
    Ok(Gssapi {
        service,
        host,
        origin,
    })
}

/// A JAAS entry's `keyTab` is honoured through `KRB5_CLIENT_KTNAME` only.
fn check_keytab(keytab: Option<&str>) -> Result<(), String> {
    let Some(keytab) = keytab else {
        return Ok(());
    };
    let env = std::env::var(CLIENT_KTNAME).ok();
    let named = env.as_deref().map(|e| e.strip_prefix("FILE:").unwrap_or(e));
    if named == Some(keytab) {
        return Ok(());
    }
    Err(format!(
        "Krb5LoginModule keyTab={keytab:?}: the Kerberos library reads a client keytab from \
         the environment, so run with {CLIENT_KTNAME}={keytab} ({})",
        match env {
            Some(e) => format!("it is {e:?}"),
            None => "it is not set".to_string(),
        }
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zookeeper::jaas::MAX_JAAS;

    fn parse(address: &str) -> Result<Option<ZkSasl>, String> {
        ZkSasl::from_url(&Url::parse(address).unwrap())
    }

    fn d(s: &ZkSasl) -> &Digest {
        match s {
            ZkSasl::Digest(d) => d,
            other => panic!("not DIGEST-MD5: {other:?}"),
        }
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
            (d(&s).username.as_str(), d(&s).password.as_str()),
            ("alice", "secret")
        );
        assert_eq!(d(&s).source, Source::Params);
        // sasl= implied by the user.
        let s = parse("zookeeper://h:1?sasl.username=alice&sasl.password=secret")
            .unwrap()
            .unwrap();
        assert_eq!(d(&s).username, "alice");
        let s = parse("zookeeper://bob:pw@h:1?sasl=digest-md5")
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                d(&s).username.as_str(),
                d(&s).password.as_str(),
                &d(&s).source
            ),
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
            (d(&s).username.as_str(), d(&s).password.as_str()),
            ("alice", "s e\"c\\ret")
        );
        assert!(s.to_string().contains("section Client"), "{s}");
        let s = parse(&format!(
            "zookeeper://h:1?java.security.auth.login.config={}&zookeeper.sasl.clientconfig=Other",
            f.display()
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            (d(&s).username.as_str(), d(&s).password.as_str()),
            ("bob", "pw")
        );
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }

    #[test]
    fn bad_jaas_files_are_named_without_the_password() {
        for (i, (text, want)) in [
            ("Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"x\"; };", "no section \"Client\" (the file has Server"),
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
    fn gssapi_principal_and_mistakes() {
        // Mistakes named whether or not this build has GSSAPI.
        for (address, want) in [
            (
                "zookeeper://h:1?sasl=gssapi&sasl.username=a&sasl.password=b",
                "takes no sasl.username",
            ),
            (
                "zookeeper://h:1?sasl=gssapi&zookeeper.server.principal=zookeeper",
                "is not service/host",
            ),
            (
                "zookeeper://h:1?sasl=gssapi&zookeeper.server.principal=zookeeper/a&sasl.host=b",
                "disagree",
            ),
            (
                "zookeeper://h:1?sasl=gssapi&zookeeper.sasl.client=false",
                "disagree",
            ),
            ("zookeeper://h:1?sasl=kerberos&sasl.host=a/b", "holds '/'"),
            ("zookeeper://h:1?sasl=gssapi&sasl.service=zk@X", "holds '/'"),
        ] {
            let e = parse(address).expect_err(address);
            assert!(e.contains(want), "{address}: {e}");
        }
        let digest_jaas = jaas_file(
            "gss-digest",
            "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=a password=b; };",
        );
        let e = parse(&format!(
            "zookeeper://h:1?sasl=gssapi&sasl.jaas={}",
            digest_jaas.display()
        ))
        .unwrap_err();
        assert!(e.contains("has a DigestLoginModule"), "{e}");
        let krb = jaas_file(
            "gss-krb",
            "Client {\n  com.sun.security.auth.module.Krb5LoginModule required\n  useTicketCache=true;\n};",
        );
        let e = parse(&format!(
            "zookeeper://h:1?sasl=digest-md5&sasl.jaas={}",
            krb.display()
        ))
        .unwrap_err();
        assert!(e.contains("has a Krb5LoginModule"), "{e}");
        if std::env::var_os(CLIENT_KTNAME).is_none() {
            let keytab = jaas_file(
                "gss-keytab",
                "Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab=\"/etc/zk-client.keytab\" principal=\"client@EXAMPLE.COM\"; };",
            );
            let e = parse(&format!("zookeeper://h:1?sasl.jaas={}", keytab.display())).unwrap_err();
            assert!(
                e.contains("KRB5_CLIENT_KTNAME=/etc/zk-client.keytab") && e.contains("not set"),
                "{e}"
            );
            let _ = std::fs::remove_dir_all(keytab.parent().unwrap());
        }

        let from_jaas = parse(&format!("zookeeper://h:1?sasl.jaas={}", krb.display()));
        let plain = parse("zookeeper://h:1?sasl=gssapi");
        if cfg!(feature = "zookeeper-gssapi") {
            let principal = |s: &ZkSasl| match s {
                ZkSasl::Gssapi(g) => (g.service.clone(), g.host.clone()),
                other => panic!("not GSSAPI: {other:?}"),
            };
            let s = plain.unwrap().unwrap();
            assert_eq!(principal(&s), ("zookeeper".to_string(), None));
            assert!(
                s.to_string()
                    .contains("SASL GSSAPI to zookeeper/{server host}"),
                "{s}"
            );
            assert!(!s.is_digest());
            assert!(s.check_relayed(1).is_ok());
            assert!(s.check_relayed(2).unwrap_err().contains("needs sasl.host"));
            let s = parse("zookeeper://h:1?sasl=Kerberos&sasl.service=zk&sasl.host=zk1.example")
                .unwrap()
                .unwrap();
            assert_eq!(principal(&s), ("zk".into(), Some("zk1.example".into())));
            assert!(s.check_relayed(2).is_ok());
            let s = parse(
                "zookeeper://h:1?sasl=GSSAPI&zookeeper.server.principal=zookeeper/zk1@EXAMPLE.COM",
            )
            .unwrap()
            .unwrap();
            assert_eq!(principal(&s), ("zookeeper".into(), Some("zk1".into())));
            let s = from_jaas.unwrap().unwrap();
            assert!(s.to_string().contains("section Client"), "{s}");
        } else {
            for r in [plain, from_jaas] {
                let e = r.unwrap_err();
                assert!(e.contains("`zookeeper-gssapi` feature"), "{e}");
            }
        }
        for f in [digest_jaas, krb] {
            let _ = std::fs::remove_dir_all(f.parent().unwrap());
        }
    }
}
