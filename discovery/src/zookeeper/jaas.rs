//! JAAS login files, as a Java ZooKeeper client reads its `Client` section: a strict parser of
//! the JAAS grammar (`Name { module.Class flag key="value" ...; };`, `//` and `/* */` comments,
//! values quoted with `\"` and `\\` escapes or bare words) for files up to 64 KiB; `${...}`
//! property expansion is refused. Errors name the line, never a value. [`super::sasl`] reads
//! the login from it when a registry URL names a JAAS file.

use std::path::Path;

/// The largest JAAS file read.
pub(crate) const MAX_JAAS: u64 = 64 * 1024;
const DIGEST_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";

/// What a JAAS section's login module asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Login {
    /// `DigestLoginModule`: its `username` and `password`.
    Digest { username: String, password: String },
    /// `Krb5LoginModule`: GSSAPI; its `keyTab` when `useKeyTab=true`.
    Krb5 { keytab: Option<String> },
}

/// The login of `section` in the JAAS file at `path`: the `username` and `password` of its
/// `DigestLoginModule` entry, or its `Krb5LoginModule`.
pub(crate) fn read_jaas(path: &Path, section: &str) -> Result<Login, String> {
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
            if entries.len() > 1 {
                return Err(format!(
                    "section {section}, line {}: a Krb5LoginModule must be the section's only \
                     login module",
                    e.line
                ));
            }
            let opt = |key: &str| {
                e.options
                    .iter()
                    .rev()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.clone())
            };
            let keytab = match opt("useKeyTab").as_deref() {
                Some(v) if v.eq_ignore_ascii_case("true") => opt("keyTab"),
                _ => None,
            };
            return Ok(Login::Krb5 { keytab });
        } else {
            return Err(format!(
                "section {section}, line {}: login module {} is not supported, only \
                 {DIGEST_MODULE} or Krb5LoginModule",
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
    Ok(Login::Digest {
        username: get("username")?,
        password: get("password")?,
    })
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
