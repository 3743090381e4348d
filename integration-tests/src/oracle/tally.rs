//! Counting outcomes per component.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::*;

// ---------------------------------------------------------------------------------------------
// tally

/// How one case came out.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case id.
    pub id: String,
    /// Its component.
    pub component: &'static str,
    /// Its kind.
    pub kind: String,
    /// Its features.
    pub features: Vec<String>,
    /// `None` when both sides agree; else how they differ.
    pub disagreement: Option<String>,
    /// The deviation entry (index in the file) that covers the disagreement.
    pub deviation: Option<(usize, Deviation)>,
    /// The case input.
    pub input: Value,
    /// Dubbo's answer.
    pub java: Value,
    /// Switchman's answer.
    pub rust: Value,
}

impl Outcome {
    /// A disagreement no deviation entry covers.
    pub fn is_new(&self) -> bool {
        self.disagreement.is_some() && self.deviation.is_none()
    }
}

/// Counts per component.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// `component → [run, agreed, documented, open, new]`.
    pub counts: BTreeMap<&'static str, [usize; 5]>,
    /// Every case's outcome, in batch order.
    pub outcomes: Vec<Outcome>,
}

impl Tally {
    /// Records one outcome.
    pub fn add(&mut self, o: Outcome) {
        let c = self.counts.entry(o.component).or_default();
        c[0] += 1;
        match (&o.disagreement, &o.deviation) {
            (None, _) => c[1] += 1,
            (Some(_), Some((_, d))) if d.is_open() => c[3] += 1,
            (Some(_), Some(_)) => c[2] += 1,
            (Some(_), None) => c[4] += 1,
        }
        self.outcomes.push(o);
    }

    /// New disagreements (not covered by any deviation).
    pub fn new_disagreements(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes.iter().filter(|o| o.is_new())
    }

    /// The counts table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<14}{:>7}{:>8}{:>12}{:>7}{:>7}\n",
            "component", "run", "agreed", "documented", "open", "new"
        );
        let mut total = [0usize; 5];
        for comp in COMPONENTS {
            let c = self.counts.get(comp).copied().unwrap_or_default();
            for (t, x) in total.iter_mut().zip(c) {
                *t += x;
            }
            let _ = writeln!(
                s,
                "{comp:<14}{:>7}{:>8}{:>12}{:>7}{:>7}",
                c[0], c[1], c[2], c[3], c[4]
            );
        }
        let _ = writeln!(
            s,
            "{:<14}{:>7}{:>8}{:>12}{:>7}{:>7}",
            "total", total[0], total[1], total[2], total[3], total[4]
        );
        s
    }

    /// Disagreements grouped by the deviation entry that covers them (documented and open),
    /// with one example each, then every new disagreement with its case.
    pub fn details(&self, deviations: &Deviations) -> String {
        let mut s = String::new();
        let mut by_entry: BTreeMap<usize, Vec<&Outcome>> = BTreeMap::new();
        for o in &self.outcomes {
            if let (Some(_), Some((i, _))) = (&o.disagreement, &o.deviation) {
                by_entry.entry(*i).or_default().push(o);
            }
        }
        for (i, d) in deviations.entries.iter().enumerate() {
            let hits = by_entry.get(&i).map_or(0, Vec::len);
            let _ = writeln!(
                s,
                "deviation #{} [{} {}{}]: {hits} case(s){} — {}",
                i + 1,
                d.component,
                d.kind,
                if d.features.is_empty() {
                    String::new()
                } else {
                    format!(" +{}", d.features.join(","))
                },
                if hits == 0 { " (none this run)" } else { "" },
                d.reason
            );
            if let Some(first) = by_entry.get(&i).and_then(|v| v.first()) {
                let _ = writeln!(
                    s,
                    "    e.g. {} ({}): {}",
                    first.id,
                    first.kind,
                    first.disagreement.as_deref().unwrap_or("")
                );
            }
        }
        for o in self.new_disagreements() {
            let _ = writeln!(
                s,
                "\nNEW {} [{}] features {:?}\n  {}\n  case: {}\n  Dubbo:     {}\n  Switchman: {}",
                o.id,
                o.kind,
                o.features,
                o.disagreement.as_deref().unwrap_or(""),
                o.input,
                o.java,
                o.rust
            );
        }
        s
    }

    /// Every disagreement as JSON (for `SWITCHMAN_ORACLE_REPORT`).
    pub fn report(&self) -> Value {
        let list: Vec<Value> = self
            .outcomes
            .iter()
            .filter(|o| o.disagreement.is_some())
            .map(|o| {
                json!({
                    "id": o.id,
                    "component": o.component,
                    "kind": o.kind,
                    "features": o.features,
                    "disagreement": o.disagreement,
                    "deviation": o.deviation.as_ref().map(|(i, d)| json!({"index": i + 1, "reason": d.reason})),
                    "case": o.input,
                    "dubbo": o.java,
                    "switchman": o.rust,
                })
            })
            .collect();
        json!({"disagreements": list})
    }
}
