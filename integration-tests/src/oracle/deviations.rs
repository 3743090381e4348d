//! The documented deviations (`oracle-deviations.yaml`).

use serde_json::Value;

use super::*;

// ---------------------------------------------------------------------------------------------
// deviations

/// One entry of `oracle-deviations.yaml`.
#[derive(Debug, Clone)]
pub struct Deviation {
    /// The component it is about.
    pub component: String,
    /// Glob on the case kind (`*` is any run of characters).
    pub kind: String,
    /// Features the case must all have (none: any case of the kind).
    pub features: Vec<String>,
    /// Why the answers differ; `open: ...` for a difference not resolved yet.
    pub reason: String,
}

impl Deviation {
    /// Whether the reason marks it as not resolved yet (`open: ...`).
    pub fn is_open(&self) -> bool {
        self.reason.trim_start().starts_with("open:")
    }

    /// Whether the entry covers `case`.
    pub fn matches(&self, case: &Case) -> bool {
        self.component == case.component
            && glob(&self.kind, &case.kind)
            && self.features.iter().all(|f| case.features.contains(f))
    }
}

/// The documented deviations.
#[derive(Debug, Clone, Default)]
pub struct Deviations {
    /// In file order; the first match counts.
    pub entries: Vec<Deviation>,
}

impl Deviations {
    /// From the parsed YAML document: `{"deviations": [{component, kind, features?, reason}]}`.
    ///
    /// # Errors
    /// When an entry lacks `component`, `kind` or `reason`, or names an unknown component.
    pub fn from_value(doc: &Value) -> Result<Deviations, String> {
        let mut entries = Vec::new();
        for (i, e) in doc["deviations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let field = |k: &str| {
                e[k].as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("deviation #{}: missing {k}", i + 1))
            };
            let component = field("component")?;
            if !COMPONENTS.contains(&component.as_str()) {
                return Err(format!(
                    "deviation #{}: unknown component {component:?} (one of {COMPONENTS:?})",
                    i + 1
                ));
            }
            let features = e["features"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            entries.push(Deviation {
                component,
                kind: field("kind")?,
                features,
                reason: field("reason")?,
            });
        }
        Ok(Deviations { entries })
    }

    /// The first entry covering `case`.
    pub fn matching(&self, case: &Case) -> Option<(usize, &Deviation)> {
        self.entries
            .iter()
            .enumerate()
            .find(|(_, d)| d.matches(case))
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}
