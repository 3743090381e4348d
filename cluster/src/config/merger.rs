//! `merger`: how the `mergeable` strategy combines the answers of several groups.

use std::str::FromStr;
use std::sync::Arc;

use serde_json::Value;
use switchman_core::{Error, Result};

/// A user merger for the `mergeable` strategy (`ClusterInvoker::with_merger`).
pub type MergerFn = Arc<dyn Fn(Vec<Value>) -> Result<Value> + Send + Sync>;

/// `merger`: how the `mergeable` strategy combines the answers of several groups (Dubbo's
/// `MergeableClusterInvoker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Merger {
    /// Not merging (`false`, `0`, `null`, `N/A` or empty, Dubbo's `ConfigUtils.isEmpty`): only
    /// the first group with an available provider is called.
    Off,
    /// `true` or `default`: by the answers' kind, as Dubbo's `MergerFactory` does by the
    /// return type: arrays concatenated, objects merged (a later group wins on a key);
    /// anything else (numbers, strings, booleans) has no merger and is an error. A merger set
    /// with `ClusterInvoker::with_merger` takes this place.
    Default,
    /// `list`, `array` or an array-element name (`int`, `long`, `string`, ...): arrays
    /// concatenated.
    List,
    /// `set`: arrays concatenated without repeated elements.
    Set,
    /// `map`: objects merged.
    Map,
}

impl FromStr for Merger {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        Ok(match lower.as_str() {
            "" | "false" | "0" | "null" | "n/a" => Merger::Off,
            "true" | "default" => Merger::Default,
            "list" | "array" | "boolean" | "byte" | "char" | "short" | "int" | "long" | "float"
            | "double" | "string" => Merger::List,
            "set" => Merger::Set,
            "map" => Merger::Map,
            _ if t.starts_with('.') => {
                return Err(Error::bad_config(format!(
                    "merger={t:?} calls a method of the Java result type, which JSON answers do not \
                     have; set a merger in code with ClusterInvoker::with_merger"
                )));
            }
            _ => {
                return Err(Error::bad_config(format!(
                    "merger={t:?} is not a merger (known: true, default, list, array, set, map, \
                     false)"
                )));
            }
        })
    }
}
