//! Where rules come from: a static file, and the config-centre keys Dubbo uses (which the
//! ZooKeeper and Nacos adapters read and feed to [`RouterChain::with_rule`]).

use std::path::{Path, PathBuf};

use switchman_core::yaml::{self, Value};

use crate::RouterChain;
use crate::error::RuleError;
use crate::rule::{MAX_RULE_BYTES, looks_like_yaml};

/// The config-centre names of rules (group [`keys::GROUP`]).
pub mod keys {
    use switchman_core::ServiceKey;

    /// The config-centre group Dubbo stores rules under.
    pub const GROUP: &str = "dubbo";
    /// Suffix of condition-rule keys.
    pub const CONDITION_SUFFIX: &str = ".condition-router";
    /// Suffix of tag-rule keys.
    pub const TAG_SUFFIX: &str = ".tag-router";

    /// `{interface}:{version}:{group}.condition-router` (blank parts empty, as Dubbo's
    /// `URL.getColonSeparatedKey`: `com.foo.Bar::.condition-router`).
    pub fn service_condition(service: &ServiceKey) -> String {
        format!(
            "{}:{}:{}{CONDITION_SUFFIX}",
            service.interface, service.version, service.group
        )
    }

    /// `{app}.condition-router` (application scope; Dubbo reads the consumer's and the
    /// provider's application).
    pub fn app_condition(app: &str) -> String {
        format!("{app}{CONDITION_SUFFIX}")
    }

    /// `{app}.tag-router` (the provider application's tag rule).
    pub fn tag(app: &str) -> String {
        format!("{app}{TAG_SUFFIX}")
    }
}

/// Largest rules file [`FileRuleSource`] reads (several rules of up to
/// [`MAX_RULE_BYTES`] each).
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// Something that yields a whole [`RouterChain`]. Config-centre adapters instead apply
/// per-key updates with [`RouterChain::with_rule`] and [`RouterChain::without_rule`].
pub trait RuleSource {
    /// Loads the rules. An error leaves the caller's chain in force.
    fn load(&self) -> Result<RouterChain, RuleError>;
}

/// Rules from a file, re-read by the caller when it changes (the directory polls it).
///
/// The file holds one or more documents separated by lines of `---`. A YAML document names
/// its key with `key:` (a condition rule becomes `{key}.condition-router`, a tag rule
/// `{key}.tag-router`); a document without `key:`, or v2 text, gets the file's name as key.
#[derive(Debug, Clone)]
pub struct FileRuleSource {
    path: PathBuf,
}

impl FileRuleSource {
    /// A source reading `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileRuleSource { path: path.into() }
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl RuleSource for FileRuleSource {
    fn load(&self) -> Result<RouterChain, RuleError> {
        load(&self.path)
    }
}

/// Loads a rules file into a new chain (see [`FileRuleSource`]).
pub fn load(path: &Path) -> Result<RouterChain, RuleError> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| RuleError::new(&name, format!("cannot read rules file: {e}")))?;
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Err(RuleError::new(
            &name,
            format!(
                "rules file is {} bytes; the limit is {MAX_FILE_BYTES}",
                meta.len()
            ),
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| RuleError::new(&name, format!("cannot read rules file: {e}")))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.clone());
    chain_from_text(&text, &stem)
}

/// Builds a chain from text holding one or more rule documents (see [`FileRuleSource`]);
/// documents without a key get `default_key`.
pub fn chain_from_text(text: &str, default_key: &str) -> Result<RouterChain, RuleError> {
    let mut chain = RouterChain::new();
    for (line0, doc) in documents(text) {
        if doc.trim().is_empty() {
            continue;
        }
        let key = doc_key(doc).unwrap_or_else(|| default_key.to_string());
        if chain.keys().any(|k| k == key) {
            return Err(
                RuleError::new(&key, "two documents with the same rule key").at(Some(line0), None)
            );
        }
        chain = chain.with_rule(&key, doc).map_err(|mut e| {
            e.line = e.line.map(|l| l + line0 - 1);
            e
        })?;
    }
    if chain.is_empty() {
        return Err(RuleError::new(default_key, "no rule in text"));
    }
    Ok(chain)
}

/// Splits at lines that are exactly `---`: (1-based first line, text).
fn documents(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_end() == "---" {
            out.push((start_line, &text[start..offset]));
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    out.push((start_line, &text[start..]));
    out
}

fn doc_key(doc: &str) -> Option<String> {
    if doc.len() > MAX_RULE_BYTES || !looks_like_yaml(doc) {
        return None;
    }
    let v: Value = yaml::from_str(doc, "rules file document").ok()?;
    let m = v.as_mapping()?;
    let key = m.get("key").and_then(crate::condition::yaml_text)?;
    let suffix = if m.contains_key("tags") {
        keys::TAG_SUFFIX
    } else {
        keys::CONDITION_SUFFIX
    };
    Some(format!("{key}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchman_core::ServiceKey;

    #[test]
    fn key_names() {
        assert_eq!(
            keys::service_condition(&ServiceKey::new("com.foo.Bar")),
            "com.foo.Bar::.condition-router"
        );
        assert_eq!(
            keys::service_condition(&ServiceKey::with("com.foo.Bar", "g", "1.0")),
            "com.foo.Bar:1.0:g.condition-router"
        );
        assert_eq!(keys::app_condition("shop"), "shop.condition-router");
        assert_eq!(keys::tag("shop"), "shop.tag-router");
    }

    #[test]
    fn a_file_with_an_alias_bomb_is_refused_naming_the_limit() {
        let good =
            "scope: service\nkey: \"com.foo.Bar::\"\nconditions:\n  - method = a => port = 1\n";
        let bomb = crate::rule::tests::alias_bomb(
            "scope: service\nkey: demo.Greeter\nconditions:\n  - => port = 2\n",
            MAX_RULE_BYTES,
        );
        // The bomb's `key:` is not read either: the document keeps the default key.
        assert_eq!(doc_key(&bomb), None);
        let e = chain_from_text(&format!("{good}---\n{bomb}"), "rules.yaml").unwrap_err();
        assert_eq!(e.key, "rules.yaml");
        assert!(e.message.contains("YAML node limit"), "{e}");
        assert!(e.line.is_some_and(|l| l > 5), "the line is the file's: {e}");
    }

    #[test]
    fn multi_document_file() {
        let dir = std::env::temp_dir().join(format!("switchman-router-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rules.yaml");
        std::fs::write(
            &path,
            "scope: service\nkey: \"com.foo.Bar::\"\nconditions:\n  - method = a => port = 1\n---\nkey: shop\ntags:\n  - name: gray\n    addresses: [\"10.0.0.1\"]\n---\nscope: application\nkey: shop\nconditions:\n  - => port = 2\n",
        )
        .unwrap();
        let chain = FileRuleSource::new(&path).load().unwrap();
        let keys: Vec<_> = chain.keys().collect();
        assert_eq!(
            keys,
            vec![
                "com.foo.Bar::.condition-router",
                "shop.tag-router",
                "shop.condition-router"
            ]
        );
        std::fs::write(
            &path,
            "key: a\nconditions:\n  - => port = 1\n---\nkey: b\nconditions:\n  - => port = 1 && x\n",
        )
        .unwrap();
        let e = load(&path).unwrap_err();
        assert_eq!(e.key, "b.condition-router");
        assert_eq!(e.line, Some(7), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn v2_text_takes_default_key() {
        let chain = chain_from_text("method = a => port = 1\n", "svc").unwrap();
        assert_eq!(chain.keys().collect::<Vec<_>>(), vec!["svc"]);
        assert!(chain_from_text("", "svc").is_err());
    }
}
