//! Dubbo 3's consumer migration step: which of a subscription's two lists (interface-level
//! providers, application-level instances) is published, decided in one place for the
//! ZooKeeper and Nacos adapters.
//!
//! Read from Dubbo 3.3's `MigrationRuleListener`, `MigrationRuleHandler`, `MigrationInvoker`,
//! `DefaultMigrationAddressComparator`, `MigrationRule` and `SubMigrationRule`:
//!
//! - **Steps.** `FORCE_INTERFACE` uses the interface-level list only, `FORCE_APPLICATION` the
//!   application-level list only (even when it is empty), `APPLICATION_FIRST` (the default)
//!   the application-level list while it *covers* the interface-level one, else the
//!   interface-level list, decided again at every change of either list.
//! - **Covers** ([`should_migrate`], Dubbo's `DefaultMigrationAddressComparator`): never when
//!   the new list is empty; always when the old one is empty; otherwise when
//!   `new / old >= threshold` (address counts). The threshold is the rule's (per-interface
//!   entry, then per-application entry, then the rule's own), else the registry URL's
//!   `migration.threshold`; a missing or negative one is `0.0` (Dubbo's default), so with no
//!   threshold any non-empty application-level list wins.
//! - **Changing step** ([`MigrationState::choose`]): moving to `APPLICATION_FIRST` always
//!   succeeds; moving to a `FORCE_*` step waits the rule's `delay` (seconds) first, then
//!   succeeds when `force: true` or when the target list covers the current one
//!   (`FORCE_APPLICATION`: application-level covers interface-level; `FORCE_INTERFACE`: the
//!   reverse), else the subscription stays at its current step. The first step of a
//!   subscription is taken without a check, as a fresh Dubbo `MigrationInvoker` has no other
//!   list to compare with.
//! - **The rule.** Config-centre key `{application}.migration`, group
//!   `DUBBO_SERVICEDISCOVERY_MIGRATION` (ZooKeeper node
//!   `/dubbo/config/DUBBO_SERVICEDISCOVERY_MIGRATION/{application}.migration`, Nacos data id
//!   `{application}.migration` in that group), YAML ([`MigrationRule::parse`]). Values are
//!   looked up as Dubbo's `MigrationRule.getValue` does: the `interfaces:` entry whose
//!   `serviceKey` is the consumer's display key (`interface` or `interface:version`, no
//!   group), then the `applications:` entries of the applications mapped to the interface,
//!   then the rule's top level, then the registry URL (`migration.step`,
//!   `migration.threshold`, `migration.force`, `migration.delay`), then Dubbo's defaults. A
//!   removed or blank rule is Dubbo's initial rule (the URL's values and the defaults); a rule
//!   that does not parse is logged and the last good rule stays.
//!
//! - **Per call under `APPLICATION_FIRST`** (Dubbo's `MigrationInvoker.invoke`): while the
//!   application level is in use, the interface-level list stays at hand as the subscription's
//!   [`Fallback`] ([`crate::Update::Fallback`]; the directory keeps a second snapshot of it).
//!   `proportion` (percent, the rule's, else the URL's `migration.promotion`, else 100) is the
//!   share of calls that go to the application level: each call draws, and `100 - proportion`
//!   percent of them go to the interface level. A call whose application-level candidates are
//!   all unavailable (none listed, or every attempt refused before anything was sent: a
//!   provider shutting down, no connection) runs on the interface level instead.
//!
//! Differences from Dubbo, on purpose:
//!
//! - A `FORCE_*` step that fails its check stays *pending* and is checked again whenever either
//!   list changes (Dubbo gives up until the rule is published again). Both lists are read in
//!   every step (Dubbo unsubscribes the unused one), so a switch needs no new subscription.
//! - The per-call fallback is decided from what the call met (every application-level
//!   candidate refused before anything was sent) rather than from the connections' state
//!   before the call (Dubbo's `isAvailable`): Switchman connects on first use. A strategy that
//!   answers failures itself (`failsafe`, `failback`) answers before a fallback is tried.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use switchman_core::yaml::{self, Mapping, Value};
use tokio::time::Instant;
use tracing::{info, warn};

/// Dubbo's config-centre group of migration rules.
pub const MIGRATION_GROUP: &str = "DUBBO_SERVICEDISCOVERY_MIGRATION";

/// Largest rule text accepted (bytes).
const MAX_RULE_BYTES: usize = 256 * 1024;
/// Longest `delay` accepted (seconds): one day.
const MAX_DELAY_SECS: i64 = 86_400;

/// The config-centre key of `application`'s migration rule (`{application}.migration`).
pub fn rule_key(application: &str) -> String {
    format!("{application}.migration")
}

/// A consumer migration step (Dubbo's `MigrationStep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MigrationStep {
    /// Interface-level providers only.
    ForceInterface,
    /// Application-level instances while they cover the interface-level providers (Dubbo's
    /// default).
    ApplicationFirst,
    /// Application-level instances only.
    ForceApplication,
}

impl MigrationStep {
    /// Dubbo's name of the step.
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationStep::ForceInterface => "FORCE_INTERFACE",
            MigrationStep::ApplicationFirst => "APPLICATION_FIRST",
            MigrationStep::ForceApplication => "FORCE_APPLICATION",
        }
    }
}

impl fmt::Display for MigrationStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MigrationStep {
    type Err = String;

    /// Dubbo's exact names (`MigrationStep.valueOf`).
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "FORCE_INTERFACE" => Ok(MigrationStep::ForceInterface),
            "APPLICATION_FIRST" => Ok(MigrationStep::ApplicationFirst),
            "FORCE_APPLICATION" => Ok(MigrationStep::ForceApplication),
            other => Err(format!(
                "{other:?} is not a migration step (FORCE_INTERFACE, APPLICATION_FIRST or FORCE_APPLICATION)"
            )),
        }
    }
}

/// What a subscription with application-level discovery decides from: the migration step in
/// force, how many providers each level lists, and which list it publishes. The ZooKeeper and
/// Nacos adapters send it ([`crate::Update::Lists`]) whenever it changes;
/// [`crate::RegistryDirectory::lists`] and the admin endpoint show it ("why does this consumer
/// call the interface-level providers?").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lists {
    /// The step in force (`None`: no migration state, the interface level only).
    pub step: Option<MigrationStep>,
    /// Providers listed at the interface level.
    pub interface_level: usize,
    /// Instances listed at the application level (metadata fetched).
    pub app_level: usize,
    /// The list published.
    pub using: Source,
}

/// The interface-level list calls fall back to under `APPLICATION_FIRST` while the
/// application level is in use, and the share of calls that stay on the application level
/// (see the module docs). Sent by the adapters as [`crate::Update::Fallback`].
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// The interface-level providers.
    pub instances: Vec<std::sync::Arc<switchman_core::Instance>>,
    /// Percent of calls that go to the application level (0..=100); the others go to
    /// `instances`.
    pub proportion: u8,
}

impl Fallback {
    /// What a subscription in `state` falls back to after its decision `using`, with
    /// `interface_level` the interface-level list: `None` unless under `APPLICATION_FIRST`
    /// with the application level in use.
    pub fn of(
        state: &MigrationState,
        using: Source,
        interface_level: &[std::sync::Arc<switchman_core::Instance>],
    ) -> Option<Fallback> {
        state.fallback_proportion(using).map(|proportion| Fallback {
            instances: interface_level.to_vec(),
            proportion,
        })
    }
}

impl Source {
    /// `interface` or `application`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Interface => "interface",
            Source::Application => "application",
        }
    }
}

/// Which list a subscription publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The interface-level providers.
    Interface,
    /// The application-level instances.
    Application,
}

/// Dubbo's `DefaultMigrationAddressComparator.shouldMigrate`: whether a list of `new`
/// addresses may replace one of `old` addresses under `threshold` (negative: `0.0`).
pub fn should_migrate(new: usize, old: usize, threshold: f32) -> bool {
    if new == 0 {
        return false;
    }
    if old == 0 {
        return true;
    }
    let threshold = if threshold >= 0.0 { threshold } else { 0.0 };
    new as f32 / old as f32 >= threshold
}

/// The list `step` publishes, given the sizes of both lists (pure; see the module docs).
pub fn choose(
    step: MigrationStep,
    threshold: f32,
    interface_level: usize,
    app_level: usize,
) -> Source {
    match step {
        MigrationStep::ForceInterface => Source::Interface,
        MigrationStep::ForceApplication => Source::Application,
        MigrationStep::ApplicationFirst => {
            if should_migrate(app_level, interface_level, threshold) {
                Source::Application
            } else {
                Source::Interface
            }
        }
    }
}

/// One `interfaces:` or `applications:` entry of a rule (Dubbo's `SubMigrationRule`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubMigrationRule {
    /// The consumer's display key (`interface[:version]`) or a provider application.
    pub service_key: String,
    /// Step for this entry.
    pub step: Option<MigrationStep>,
    /// Threshold for this entry.
    pub threshold: Option<f32>,
    /// Proportion (percent of `APPLICATION_FIRST` calls to the application level) for this
    /// entry.
    pub proportion: Option<i32>,
    /// Delay (seconds) before a `FORCE_*` step is checked.
    pub delay: Option<i32>,
    /// Skip the check of a `FORCE_*` step.
    pub force: Option<bool>,
}

/// Dubbo's `MigrationRule`: the `{application}.migration` YAML.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MigrationRule {
    /// The `key` (the consumer application; informational, as in Dubbo).
    pub key: Option<String>,
    /// The rule's step.
    pub step: Option<MigrationStep>,
    /// The rule's threshold.
    pub threshold: Option<f32>,
    /// The rule's proportion (percent of `APPLICATION_FIRST` calls to the application level).
    pub proportion: Option<i32>,
    /// The rule's delay (seconds).
    pub delay: Option<i32>,
    /// The rule's force flag.
    pub force: Option<bool>,
    /// Per-interface entries (by display key `interface[:version]`).
    pub interfaces: Vec<SubMigrationRule>,
    /// Per-provider-application entries.
    pub applications: Vec<SubMigrationRule>,
}

/// What the registry URL says (`migration.step`, `migration.threshold`, `migration.force`,
/// `migration.delay`): the values a rule does not set.
#[derive(Debug, Clone, PartialEq)]
pub struct MigrationDefaults {
    /// `migration.step`, default `APPLICATION_FIRST`.
    pub step: MigrationStep,
    /// `migration.threshold`; unset: `0.0`.
    pub threshold: Option<f32>,
    /// `migration.force`, default false.
    pub force: bool,
    /// `migration.delay` in seconds, default 0.
    pub delay: u32,
    /// `migration.promotion` (Dubbo's name for the default proportion), 0..=100, default 100.
    pub proportion: u8,
}

impl Default for MigrationDefaults {
    fn default() -> Self {
        MigrationDefaults {
            step: MigrationStep::ApplicationFirst,
            threshold: None,
            force: false,
            delay: 0,
            proportion: 100,
        }
    }
}

impl MigrationDefaults {
    /// Reads the `migration.*` parameters through `param` (a registry URL's); the error names
    /// the parameter and its value.
    pub fn from_params<'a>(param: impl Fn(&str) -> Option<&'a str>) -> Result<Self, String> {
        let mut d = MigrationDefaults::default();
        let get = |k: &str| param(k).map(str::trim).filter(|v| !v.is_empty());
        if let Some(v) = get("migration.step") {
            d.step = v
                .parse()
                .map_err(|e| format!("migration.step={v:?}: {e}"))?;
        }
        if let Some(v) = get("migration.threshold") {
            d.threshold =
                Some(parse_threshold(v).map_err(|e| format!("migration.threshold={v:?}: {e}"))?);
        }
        if let Some(v) = get("migration.force") {
            d.force = parse_bool(v).map_err(|e| format!("migration.force={v:?}: {e}"))?;
        }
        if let Some(v) = get("migration.delay") {
            let secs = parse_int(v).map_err(|e| format!("migration.delay={v:?}: {e}"))?;
            d.delay = delay_secs(secs).map_err(|e| format!("migration.delay={v:?}: {e}"))?;
        }
        if let Some(v) = get("migration.promotion") {
            let p = parse_int(v).map_err(|e| format!("migration.promotion={v:?}: {e}"))?;
            d.proportion = u8::try_from(p)
                .ok()
                .filter(|p| *p <= 100)
                .ok_or_else(|| format!("migration.promotion={v:?}: not a percent (0 to 100)"))?;
        }
        Ok(d)
    }
}

fn parse_threshold(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if t.is_finite() => Ok(t),
        _ => Err("not a number".into()),
    }
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("neither true nor false".into()),
    }
}

fn parse_int(s: &str) -> Result<i64, String> {
    s.trim()
        .parse::<i64>()
        .map_err(|_| "not an integer".to_string())
}

/// Dubbo waits only for a positive delay; more than a day is refused.
fn delay_secs(secs: i64) -> Result<u32, String> {
    if secs > MAX_DELAY_SECS {
        return Err(format!("more than {MAX_DELAY_SECS} seconds"));
    }
    Ok(u32::try_from(secs.max(0)).unwrap_or(0))
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The fields a rule and its entries share.
#[derive(Default)]
struct Common {
    step: Option<MigrationStep>,
    threshold: Option<f32>,
    proportion: Option<i32>,
    delay: Option<i32>,
    force: Option<bool>,
}

fn common(map: &Mapping, at: &str) -> Result<Common, String> {
    let field = |k: &str| -> Result<Option<String>, String> {
        match map.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => scalar(v)
                .map(Some)
                .ok_or_else(|| format!("{at}{k} is not a single value")),
        }
    };
    let mut c = Common::default();
    if let Some(v) = field("step")? {
        c.step = Some(v.parse().map_err(|e| format!("{at}step: {e}"))?);
    }
    if let Some(v) = field("threshold")? {
        c.threshold = Some(parse_threshold(&v).map_err(|e| format!("{at}threshold {v:?}: {e}"))?);
    }
    if let Some(v) = field("proportion")? {
        let p = parse_int(&v).map_err(|e| format!("{at}proportion {v:?}: {e}"))?;
        c.proportion =
            Some(i32::try_from(p).map_err(|_| format!("{at}proportion {v:?}: out of range"))?);
    }
    if let Some(v) = field("delay")? {
        let d = parse_int(&v).map_err(|e| format!("{at}delay {v:?}: {e}"))?;
        delay_secs(d).map_err(|e| format!("{at}delay {v:?}: {e}"))?;
        c.delay = Some(i32::try_from(d).unwrap_or(0));
    }
    if let Some(v) = field("force")? {
        c.force = Some(parse_bool(&v).map_err(|e| format!("{at}force {v:?}: {e}"))?);
    }
    Ok(c)
}

fn entries(map: &Mapping, name: &str) -> Result<Vec<SubMigrationRule>, String> {
    let Some(v) = map.get(name) else {
        return Ok(Vec::new());
    };
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(items) => items,
        _ => return Err(format!("{name} is not a list")),
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Mapping(m) = item else {
            return Err(format!("{name}[{i}] is not a mapping"));
        };
        let at = format!("{name}[{i}].");
        let service_key = m
            .get("serviceKey")
            .and_then(scalar)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{at}serviceKey is missing"))?;
        let c = common(m, &at)?;
        out.push(SubMigrationRule {
            service_key,
            step: c.step,
            threshold: c.threshold,
            proportion: c.proportion,
            delay: c.delay,
            force: c.force,
        });
    }
    Ok(out)
}

impl MigrationRule {
    /// Parses Dubbo's migration rule YAML. Unknown keys are ignored (as in Dubbo); a value of
    /// the wrong kind (a step that is not one, a threshold that is not a number, an entry
    /// without `serviceKey`) fails the whole rule, with what and where in the message. Blank
    /// text is `Ok(None)`: no rule.
    pub fn parse(text: &str) -> Result<Option<MigrationRule>, String> {
        if text.len() > MAX_RULE_BYTES {
            return Err(format!(
                "{} bytes is over the {MAX_RULE_BYTES}-byte limit",
                text.len()
            ));
        }
        if text.trim().is_empty() {
            return Ok(None);
        }
        // Bounded (switchman_core::yaml): an alias bomb is refused at the node limit.
        let doc: Value = yaml::from_str(text, "migration rule").map_err(|e| match e.limit() {
            Some(_) => e.detail(),
            None => format!("not YAML: {}", e.detail()),
        })?;
        let Value::Mapping(map) = &doc else {
            return Err("not a mapping (expected key, step, threshold, interfaces, ...)".into());
        };
        let key = match map.get("key") {
            None | Some(Value::Null) => None,
            Some(v) => Some(scalar(v).ok_or("key is not a single value")?),
        };
        let c = common(map, "")?;
        Ok(Some(MigrationRule {
            key,
            step: c.step,
            threshold: c.threshold,
            proportion: c.proportion,
            delay: c.delay,
            force: c.force,
            interfaces: entries(map, "interfaces")?,
            applications: entries(map, "applications")?,
        }))
    }

    /// Dubbo's `getValue`: the `interfaces:` entry for `display_key` (the last one, as
    /// Dubbo's map keeps the last), then the `applications:` entries of `apps` in order.
    fn sub_value<T>(
        &self,
        display_key: &str,
        apps: &BTreeSet<String>,
        f: impl Fn(&SubMigrationRule) -> Option<T>,
    ) -> Option<T> {
        if let Some(v) = self
            .interfaces
            .iter()
            .rev()
            .find(|s| s.service_key == display_key)
            .and_then(&f)
        {
            return Some(v);
        }
        apps.iter().find_map(|app| {
            self.applications
                .iter()
                .rev()
                .find(|s| s.service_key == *app)
                .and_then(&f)
        })
    }

    /// The values that apply to the consumer of `display_key` (`interface[:version]`) whose
    /// interface maps to `apps`.
    pub fn resolve(
        &self,
        display_key: &str,
        apps: &BTreeSet<String>,
        defaults: &MigrationDefaults,
    ) -> Resolved {
        let step = self
            .sub_value(display_key, apps, |s| s.step)
            .or(self.step)
            .unwrap_or(defaults.step);
        let threshold = self
            .sub_value(display_key, apps, |s| s.threshold)
            .or(self.threshold)
            .or(defaults.threshold)
            .unwrap_or(-1.0);
        let proportion = self
            .sub_value(display_key, apps, |s| s.proportion)
            .or(self.proportion)
            .unwrap_or(i32::from(defaults.proportion));
        let delay = self
            .sub_value(display_key, apps, |s| s.delay)
            .or(self.delay)
            .map(|d| u32::try_from(d.max(0)).unwrap_or(0))
            .unwrap_or(defaults.delay);
        let force = self
            .sub_value(display_key, apps, |s| s.force)
            .or(self.force)
            .unwrap_or(defaults.force);
        Resolved {
            step,
            threshold,
            proportion,
            delay: Duration::from_secs(u64::from(delay)),
            force,
        }
    }
}

/// The migration settings that apply to one subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The step wanted.
    pub step: MigrationStep,
    /// The threshold as configured (negative: unset, compared as `0.0`).
    pub threshold: f32,
    /// Percent of `APPLICATION_FIRST` calls sent to the application level (as Dubbo, any
    /// integer: at most 0 sends every call to the interface level, 100 or more none).
    pub proportion: i32,
    /// How long a `FORCE_*` step waits before its check.
    pub delay: Duration,
    /// Skip the check of a `FORCE_*` step.
    pub force: bool,
}

/// A step change waiting for its delay or for its check to pass.
#[derive(Debug, Clone)]
struct Pending {
    step: MigrationStep,
    threshold: f32,
    due: Instant,
    refused_logged: bool,
}

/// One subscription's migration: the last good rule, the step in force, a step change still
/// pending. Fed with rule texts ([`MigrationState::set_rule_text`]) and asked, at every list
/// change, which list to publish ([`MigrationState::choose`]).
#[derive(Debug)]
pub struct MigrationState {
    service: String,
    defaults: MigrationDefaults,
    rule: MigrationRule,
    /// The last text seen (good or bad), so a poll does not log the same text again.
    last_text: Option<String>,
    /// Step and configured threshold in force; `None` before the first decision.
    current: Option<(MigrationStep, f32)>,
    pending: Option<Pending>,
    /// The proportion of the last decision, clamped to 0..=100.
    proportion: u8,
}

impl MigrationState {
    /// The state of the subscription of `display_key` (`interface[:version]`, for rule
    /// lookups and logs), with the registry URL's `defaults`.
    pub fn new(display_key: impl Into<String>, defaults: MigrationDefaults) -> Self {
        MigrationState {
            service: display_key.into(),
            defaults,
            rule: MigrationRule::default(),
            last_text: None,
            current: None,
            pending: None,
            proportion: 100,
        }
    }

    /// The display key of a service key: `interface` or `interface:version` (Dubbo's
    /// `getDisplayServiceKey`, no group).
    pub fn display_key(key: &switchman_core::ServiceKey) -> String {
        if key.version.is_empty() {
            key.interface.to_string()
        } else {
            format!("{}:{}", key.interface, key.version)
        }
    }

    /// Takes the rule text now at `source` (a ZooKeeper path or Nacos data id; `None` or
    /// blank: no rule). Returns whether the rule in use changed. A text that does not parse
    /// is logged (once) with `source` and the reason; the last good rule stays.
    pub fn set_rule_text(&mut self, text: Option<&str>, source: &str) -> bool {
        let text = text.filter(|t| !t.trim().is_empty());
        if self.last_text.as_deref() == text {
            return false;
        }
        self.last_text = text.map(str::to_string);
        let rule = match text.map(MigrationRule::parse) {
            None | Some(Ok(None)) => MigrationRule::default(),
            Some(Ok(Some(rule))) => rule,
            Some(Err(e)) => {
                warn!(source, service = %self.service, step = ?self.step(), "bad migration rule ignored, the last good rule stays: {e}");
                return false;
            }
        };
        if rule == self.rule {
            return false;
        }
        info!(source, service = %self.service, present = text.is_some(), "migration rule changed");
        self.rule = rule;
        true
    }

    /// The step in force (`None` before the first decision).
    pub fn step(&self) -> Option<MigrationStep> {
        self.current.map(|c| c.0)
    }

    /// Whether calls may fall back to the interface level when the last
    /// [`MigrationState::choose`] gave `using`, and with which proportion: under
    /// `APPLICATION_FIRST` with the application level in use (see the module docs).
    pub fn fallback_proportion(&self, using: Source) -> Option<u8> {
        (self.step() == Some(MigrationStep::ApplicationFirst) && using == Source::Application)
            .then_some(self.proportion)
    }

    /// Whether a subscription's first list should wait (bounded, see the adapters'
    /// `hold_first_list`) for application-level metadata still being fetched: the step in
    /// force, or the one the rule asks for before the first decision, would use the
    /// application level, which has nothing yet. Dubbo's application-level directory has the
    /// metadata of its instances when its first list arrives; without the wait a consumer would
    /// start on the interface level and move a moment later. Never for `FORCE_INTERFACE`.
    pub fn first_list_waits(&self, apps: &BTreeSet<String>, app_level: usize) -> bool {
        let step = match self.current {
            Some((step, _)) => step,
            None => self.rule.resolve(&self.service, apps, &self.defaults).step,
        };
        step != MigrationStep::ForceInterface && app_level == 0
    }

    /// When a delayed step change is due to be checked, if one is waiting for its delay.
    pub fn next_check(&self, now: Instant) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.due).filter(|d| *d > now)
    }

    /// Which list to publish now, given the applications mapped to the interface and the
    /// sizes of both lists; takes a pending step change when it may (see the module docs).
    pub fn choose(
        &mut self,
        apps: &BTreeSet<String>,
        interface_level: usize,
        app_level: usize,
        now: Instant,
    ) -> Source {
        let r = self.rule.resolve(&self.service, apps, &self.defaults);
        let proportion = r.proportion.clamp(0, 100) as u8;
        if proportion != self.proportion {
            info!(service = %self.service, proportion, "migration proportion: percent of APPLICATION_FIRST calls sent to the application level");
            self.proportion = proportion;
        }
        let target = (r.step, r.threshold);
        match self.current {
            None => self.enter(target, None),
            Some(cur) if cur == target => self.pending = None,
            // The same step with another threshold, or APPLICATION_FIRST: no check in Dubbo.
            Some(cur) if cur.0 == r.step || r.step == MigrationStep::ApplicationFirst => {
                self.enter(target, Some(cur.0))
            }
            Some(cur) => {
                let due = match &self.pending {
                    Some(p) if p.step == r.step && p.threshold == r.threshold => p.due,
                    _ => now + r.delay,
                };
                if now < due {
                    if self.pending.as_ref().is_none_or(|p| p.due != due) {
                        info!(service = %self.service, from = %cur.0, to = %r.step, delay_s = r.delay.as_secs(), "migration step change waits for its delay");
                    }
                    self.pending = Some(Pending {
                        step: r.step,
                        threshold: r.threshold,
                        due,
                        refused_logged: false,
                    });
                } else {
                    let covers = match r.step {
                        MigrationStep::ForceApplication => {
                            should_migrate(app_level, interface_level, r.threshold)
                        }
                        _ => should_migrate(interface_level, app_level, r.threshold),
                    };
                    if r.force || covers {
                        self.enter(target, Some(cur.0));
                    } else {
                        let logged = self.pending.as_ref().is_some_and(|p| {
                            p.step == r.step && p.threshold == r.threshold && p.refused_logged
                        });
                        if !logged {
                            warn!(service = %self.service, from = %cur.0, to = %r.step, interface_level, app_level, threshold = r.threshold,
                                "migration step change refused: the target list does not cover the current one (threshold); staying, checked again at the next change");
                        }
                        self.pending = Some(Pending {
                            step: r.step,
                            threshold: r.threshold,
                            due,
                            refused_logged: true,
                        });
                    }
                }
            }
        }
        let (step, threshold) = self.current.unwrap_or(target);
        choose(step, threshold, interface_level, app_level)
    }

    fn enter(&mut self, target: (MigrationStep, f32), from: Option<MigrationStep>) {
        if from != Some(target.0) {
            info!(service = %self.service, from = ?from.map(MigrationStep::as_str), to = %target.0, "migration step");
        }
        self.current = Some(target);
        self.pending = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MigrationStep::*;

    fn apps(a: &[&str]) -> BTreeSet<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn steps_parse_by_dubbo_name_only() {
        assert_eq!("FORCE_INTERFACE".parse(), Ok(ForceInterface));
        assert_eq!(" APPLICATION_FIRST ".parse(), Ok(ApplicationFirst));
        assert_eq!("FORCE_APPLICATION".parse(), Ok(ForceApplication));
        let e = "force_application".parse::<MigrationStep>().unwrap_err();
        assert!(
            e.contains("\"force_application\"") && e.contains("FORCE_INTERFACE"),
            "{e}"
        );
        assert_eq!(ForceApplication.to_string(), "FORCE_APPLICATION");
    }

    #[test]
    fn the_comparator_as_dubbo_decides() {
        // An empty new side never wins, an empty old side always loses (when new has any).
        assert!(!should_migrate(0, 0, 0.0));
        assert!(!should_migrate(0, 5, 0.0));
        assert!(should_migrate(1, 0, 10.0));
        // Otherwise new / old >= threshold; a negative threshold is 0.0.
        assert!(should_migrate(1, 100, 0.0));
        assert!(should_migrate(1, 100, -1.0));
        assert!(should_migrate(5, 10, 0.5));
        assert!(!should_migrate(4, 10, 0.5));
        assert!(should_migrate(10, 10, 1.0));
        assert!(!should_migrate(9, 10, 1.0));
        assert!(should_migrate(20, 10, 2.0));
    }

    #[test]
    fn each_step_picks_its_list() {
        for (i, a) in [(0, 0), (3, 0), (0, 3), (3, 3)] {
            assert_eq!(choose(ForceInterface, 0.0, i, a), Source::Interface);
            assert_eq!(choose(ForceApplication, 0.0, i, a), Source::Application);
        }
        assert_eq!(choose(ApplicationFirst, -1.0, 3, 1), Source::Application);
        assert_eq!(choose(ApplicationFirst, -1.0, 3, 0), Source::Interface);
        assert_eq!(choose(ApplicationFirst, -1.0, 0, 2), Source::Application);
        assert_eq!(choose(ApplicationFirst, -1.0, 0, 0), Source::Interface);
        assert_eq!(choose(ApplicationFirst, 0.8, 10, 7), Source::Interface);
        assert_eq!(choose(ApplicationFirst, 0.8, 10, 8), Source::Application);
    }

    const FULL: &str = "\
key: demo-consumer
step: APPLICATION_FIRST
threshold: 1.0
proportion: 60
delay: 60
force: false
interfaces:
  - serviceKey: DemoService:1.0.0
    threshold: 0.5
    proportion: 30
    delay: 30
    force: true
    step: APPLICATION_FIRST
  - serviceKey: GreetingService:1.0.0
    step: FORCE_APPLICATION
applications:
  - serviceKey: TestApplication
    threshold: 0.3
    proportion: 20
    delay: 10
    force: false
    step: FORCE_INTERFACE
";

    #[test]
    fn dubbo_s_documented_rule_parses() {
        let r = MigrationRule::parse(FULL).unwrap().unwrap();
        assert_eq!(r.key.as_deref(), Some("demo-consumer"));
        assert_eq!(
            (r.step, r.threshold, r.proportion, r.delay, r.force),
            (
                Some(ApplicationFirst),
                Some(1.0),
                Some(60),
                Some(60),
                Some(false)
            )
        );
        assert_eq!(r.interfaces.len(), 2);
        assert_eq!(r.interfaces[0].service_key, "DemoService:1.0.0");
        assert_eq!(r.interfaces[0].force, Some(true));
        assert_eq!(r.interfaces[1].step, Some(ForceApplication));
        assert_eq!(r.interfaces[1].threshold, None);
        assert_eq!(r.applications[0].service_key, "TestApplication");
        assert_eq!(r.applications[0].step, Some(ForceInterface));
        // Values as strings, as Dubbo's toString-then-valueOf reads them.
        let s = MigrationRule::parse(
            "step: FORCE_INTERFACE\nthreshold: '0.5'\ndelay: '3'\nforce: 'TRUE'\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.threshold, s.delay, s.force),
            (Some(0.5), Some(3), Some(true))
        );
        assert_eq!(MigrationRule::parse("  \n").unwrap(), None);
        assert_eq!(
            MigrationRule::parse("step: FORCE_APPLICATION\nunknown: 1\n")
                .unwrap()
                .unwrap()
                .step,
            Some(ForceApplication),
            "unknown keys are ignored"
        );
    }

    #[test]
    fn bad_rules_say_what_and_where() {
        for (text, want) in [
            ("step: [unclosed", "not YAML"),
            ("- a\n- b\n", "not a mapping"),
            ("just text", "not a mapping"),
            ("step: FORCE_APP\n", "\"FORCE_APP\" is not a migration step"),
            ("threshold: high\n", "threshold \"high\": not a number"),
            ("threshold: .nan\n", "threshold"),
            ("delay: 1.5\n", "delay \"1.5\": not an integer"),
            ("delay: 100000000\n", "delay"),
            ("force: yes\n", "force \"yes\": neither true nor false"),
            ("proportion: lots\n", "proportion"),
            ("step: {a: 1}\n", "step is not a single value"),
            ("interfaces: DemoService\n", "interfaces is not a list"),
            (
                "interfaces:\n  - DemoService\n",
                "interfaces[0] is not a mapping",
            ),
            (
                "interfaces:\n  - step: FORCE_INTERFACE\n",
                "interfaces[0].serviceKey is missing",
            ),
            (
                "applications:\n  - serviceKey: a\n    step: NOPE\n",
                "applications[0].step",
            ),
        ] {
            let e = MigrationRule::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let huge = format!("key: {}\n", "x".repeat(MAX_RULE_BYTES));
        assert!(MigrationRule::parse(&huge).unwrap_err().contains("limit"));
    }

    #[test]
    fn lookups_go_interface_entry_then_applications_then_rule_then_url() {
        let r = MigrationRule::parse(FULL).unwrap().unwrap();
        let d = MigrationDefaults::default();
        // The interface entry wins for what it sets; the rest comes from the top level.
        let v = r.resolve("DemoService:1.0.0", &apps(&["TestApplication"]), &d);
        assert_eq!(
            (
                v.step,
                v.threshold,
                v.proportion,
                v.delay.as_secs(),
                v.force
            ),
            (ApplicationFirst, 0.5, 30, 30, true)
        );
        let v = r.resolve("GreetingService:1.0.0", &apps(&["TestApplication"]), &d);
        assert_eq!(
            (v.step, v.threshold),
            (ForceApplication, 0.3),
            "threshold from the application entry"
        );
        // No interface entry: the application entry of a mapped application.
        let v = r.resolve("Other", &apps(&["Elsewhere", "TestApplication"]), &d);
        assert_eq!(
            (
                v.step,
                v.threshold,
                v.proportion,
                v.delay.as_secs(),
                v.force
            ),
            (ForceInterface, 0.3, 20, 10, false)
        );
        // Neither: the rule's own values.
        let v = r.resolve("Other", &apps(&["Elsewhere"]), &d);
        assert_eq!(
            (v.step, v.threshold, v.delay.as_secs()),
            (ApplicationFirst, 1.0, 60)
        );
        // The display key has no group and needs the version.
        assert_eq!(
            r.resolve("GreetingService", &apps(&[]), &d).step,
            ApplicationFirst
        );
        // An empty rule: the registry URL's values, then Dubbo's defaults.
        let empty = MigrationRule::default();
        let v = empty.resolve("X", &apps(&[]), &d);
        assert_eq!(
            (v.step, v.threshold, v.proportion, v.force),
            (ApplicationFirst, -1.0, 100, false)
        );
        let url = MigrationDefaults {
            step: ForceInterface,
            threshold: Some(0.7),
            force: true,
            delay: 5,
            proportion: 100,
        };
        let v = empty.resolve("X", &apps(&[]), &url);
        assert_eq!(
            (v.step, v.threshold, v.delay.as_secs(), v.force),
            (ForceInterface, 0.7, 5, true)
        );
        // The last of two entries for one key wins (Dubbo's map keeps the last).
        let twice = MigrationRule::parse("interfaces:\n  - {serviceKey: X, step: FORCE_INTERFACE}\n  - {serviceKey: X, step: FORCE_APPLICATION}\n")
            .unwrap()
            .unwrap();
        assert_eq!(twice.resolve("X", &apps(&[]), &d).step, ForceApplication);
    }

    #[test]
    fn registry_url_parameters_with_errors_naming_the_value() {
        let params = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v)
        };
        assert_eq!(
            MigrationDefaults::from_params(params(&[])).unwrap(),
            MigrationDefaults::default()
        );
        let d = MigrationDefaults::from_params(params(&[
            ("migration.step", "FORCE_APPLICATION"),
            ("migration.threshold", "0.25"),
            ("migration.force", "true"),
            ("migration.delay", "7"),
            ("migration.promotion", "40"),
        ]))
        .unwrap();
        assert_eq!(
            d,
            MigrationDefaults {
                step: ForceApplication,
                threshold: Some(0.25),
                force: true,
                delay: 7,
                proportion: 40,
            }
        );
        for (pairs, want) in [
            (
                &[("migration.step", "SOMETIMES")][..],
                "migration.step=\"SOMETIMES\"",
            ),
            (
                &[("migration.threshold", "x")][..],
                "migration.threshold=\"x\"",
            ),
            (&[("migration.force", "2")][..], "migration.force=\"2\""),
            (&[("migration.delay", "-")][..], "migration.delay=\"-\""),
            (
                &[("migration.promotion", "101")][..],
                "migration.promotion=\"101\": not a percent",
            ),
        ] {
            let pairs: &'static [(&'static str, &'static str)] = pairs;
            let e = MigrationDefaults::from_params(params(pairs)).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }

    /// Calls fall back only under APPLICATION_FIRST with the application level in use, with
    /// the rule's proportion (clamped to 0..=100), else the URL's `migration.promotion`.
    #[test]
    fn the_fallback_and_its_proportion() {
        use std::sync::Arc;
        let now = Instant::now();
        let none = apps(&[]);
        let iface: Vec<Arc<switchman_core::Instance>> = vec![Arc::new(
            switchman_core::Instance::builder("10.0.0.1", 1).build(),
        )];
        let mut s = state(MigrationDefaults {
            proportion: 80,
            ..MigrationDefaults::default()
        });
        let used = s.choose(&none, 1, 1, now);
        assert_eq!(used, Source::Application);
        let f = Fallback::of(&s, used, &iface).unwrap();
        assert_eq!((f.proportion, f.instances.len()), (80, 1));
        s.set_rule_text(Some("step: APPLICATION_FIRST\nproportion: 30\n"), "n");
        let used = s.choose(&none, 1, 1, now);
        assert_eq!(s.fallback_proportion(used), Some(30));
        s.set_rule_text(Some("proportion: -5\n"), "n");
        let used = s.choose(&none, 1, 1, now);
        assert_eq!(s.fallback_proportion(used), Some(0));
        s.set_rule_text(Some("proportion: 250\n"), "n");
        let used = s.choose(&none, 1, 1, now);
        assert_eq!(s.fallback_proportion(used), Some(100));
        // The interface level in use (threshold not reached): nothing to fall back to.
        s.set_rule_text(Some("threshold: 2.0\n"), "n");
        let used = s.choose(&none, 1, 1, now);
        assert_eq!(used, Source::Interface);
        assert_eq!(Fallback::of(&s, used, &iface), None);
        // FORCE_APPLICATION: never.
        s.set_rule_text(Some("step: FORCE_APPLICATION\nforce: true\n"), "n");
        let used = s.choose(&none, 1, 1, now);
        assert_eq!(
            (s.step(), used),
            (Some(ForceApplication), Source::Application)
        );
        assert_eq!(s.fallback_proportion(used), None);
    }

    fn state(defaults: MigrationDefaults) -> MigrationState {
        MigrationState::new("DemoService", defaults)
    }

    /// `x: &a [0,0,…]` and `y: [*a,*a,…]` after `rule`: n×m nodes from `size` bytes.
    fn alias_bomb(rule: &str, size: usize) -> String {
        let room = size.saturating_sub(rule.len() + 20);
        format!(
            "{rule}x: &a [{}]\ny: [{}]\n",
            vec!["0"; room / 4].join(","),
            vec!["*a"; room / 6].join(",")
        )
    }

    #[test]
    fn alias_bombs_are_refused_and_the_last_good_rule_stays() {
        for size in [5 * 1024, 64 * 1024] {
            let e = MigrationRule::parse(&alias_bomb("step: FORCE_INTERFACE\n", size)).unwrap_err();
            assert!(
                e.starts_with("over the YAML node limit: more than 100000 nodes"),
                "{size}: {e}"
            );
        }
        let mut s = state(MigrationDefaults::default());
        assert!(s.set_rule_text(Some("step: FORCE_APPLICATION\n"), "node"));
        let bomb = alias_bomb("step: FORCE_INTERFACE\n", 5 * 1024);
        assert!(!s.set_rule_text(Some(&bomb), "node"), "refused");
        assert_eq!(s.rule.step, Some(ForceApplication), "the good rule stays");
    }

    #[test]
    fn no_rule_is_application_first_and_follows_the_lists() {
        let mut s = state(MigrationDefaults::default());
        let now = Instant::now();
        let none = apps(&[]);
        assert_eq!(
            s.choose(&none, 2, 0, now),
            Source::Interface,
            "no application level yet"
        );
        assert_eq!(s.step(), Some(ApplicationFirst));
        assert_eq!(
            s.choose(&none, 2, 1, now),
            Source::Application,
            "threshold 0.0"
        );
        assert_eq!(s.choose(&none, 0, 0, now), Source::Interface);
        assert_eq!(s.choose(&none, 0, 3, now), Source::Application);
    }

    #[tokio::test(start_paused = true)]
    async fn rule_switches_force_interface_to_force_application_and_back() {
        let mut s = state(MigrationDefaults::default());
        let none = apps(&[]);
        assert!(s.set_rule_text(Some("step: FORCE_INTERFACE\n"), "node"));
        assert!(
            !s.set_rule_text(Some("step: FORCE_INTERFACE\n"), "node"),
            "same text"
        );
        let now = Instant::now();
        assert_eq!(s.choose(&none, 1, 1, now), Source::Interface);
        assert_eq!(s.step(), Some(ForceInterface));
        // Forced steps hold even when their list empties.
        assert_eq!(s.choose(&none, 0, 1, now), Source::Interface);
        assert!(s.set_rule_text(Some("key: c\nstep: FORCE_APPLICATION\n"), "node"));
        assert_eq!(s.choose(&none, 1, 1, now), Source::Application);
        assert_eq!(s.step(), Some(ForceApplication));
        assert_eq!(s.choose(&none, 1, 0, now), Source::Application);
        // Back to FORCE_INTERFACE: refused while the interface level is empty...
        assert!(s.set_rule_text(Some("step: FORCE_INTERFACE\n"), "node"));
        assert_eq!(s.choose(&none, 0, 2, now), Source::Application);
        assert_eq!(s.step(), Some(ForceApplication));
        // ...and taken at the next change that satisfies the check.
        assert_eq!(s.choose(&none, 1, 2, now), Source::Interface);
        assert_eq!(s.step(), Some(ForceInterface));
    }

    #[tokio::test(start_paused = true)]
    async fn thresholds_and_force_decide_a_forced_step_change() {
        let mut s = state(MigrationDefaults {
            step: ForceInterface,
            ..MigrationDefaults::default()
        });
        let none = apps(&[]);
        let now = Instant::now();
        assert_eq!(s.choose(&none, 10, 4, now), Source::Interface);
        s.set_rule_text(Some("step: FORCE_APPLICATION\nthreshold: 0.5\n"), "n");
        assert_eq!(s.choose(&none, 10, 4, now), Source::Interface, "4/10 < 0.5");
        assert_eq!(s.step(), Some(ForceInterface));
        assert_eq!(
            s.choose(&none, 10, 5, now),
            Source::Application,
            "5/10 >= 0.5"
        );
        // An empty target never passes the check, whatever the threshold...
        let mut t = state(MigrationDefaults {
            step: ForceInterface,
            ..MigrationDefaults::default()
        });
        t.choose(&none, 3, 0, now);
        t.set_rule_text(Some("step: FORCE_APPLICATION\n"), "n");
        assert_eq!(t.choose(&none, 3, 0, now), Source::Interface);
        // ...unless forced.
        t.set_rule_text(Some("step: FORCE_APPLICATION\nforce: true\n"), "n");
        assert_eq!(t.choose(&none, 3, 0, now), Source::Application);
        assert_eq!(t.step(), Some(ForceApplication));
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_step_needs_no_check_and_a_delay_defers_later_ones() {
        let mut s = state(MigrationDefaults {
            step: ForceApplication,
            delay: 3,
            ..MigrationDefaults::default()
        });
        let none = apps(&[]);
        let t0 = Instant::now();
        // The subscription's first step: taken at once, empty list and delay notwithstanding.
        assert_eq!(s.choose(&none, 2, 0, t0), Source::Application);
        s.set_rule_text(Some("step: FORCE_INTERFACE\n"), "n");
        assert_eq!(s.choose(&none, 2, 0, t0), Source::Application, "waits 3 s");
        assert_eq!(s.next_check(t0), Some(t0 + Duration::from_secs(3)));
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(s.choose(&none, 2, 0, t1), Source::Application);
        assert_eq!(
            s.next_check(t1),
            Some(t0 + Duration::from_secs(3)),
            "the same deadline"
        );
        let t2 = t0 + Duration::from_secs(3);
        assert_eq!(s.choose(&none, 2, 0, t2), Source::Interface);
        assert_eq!(s.next_check(t2), None);
        // APPLICATION_FIRST is entered at once.
        s.set_rule_text(Some("step: APPLICATION_FIRST\ndelay: 100\n"), "n");
        assert_eq!(s.choose(&none, 2, 1, t2), Source::Application);
        assert_eq!(s.step(), Some(ApplicationFirst));
    }

    #[test]
    fn per_interface_and_per_application_entries_override_the_rule() {
        let rule = "\
step: FORCE_INTERFACE
interfaces:
  - serviceKey: DemoService
    step: FORCE_APPLICATION
applications:
  - serviceKey: shop
    step: APPLICATION_FIRST
";
        let now = Instant::now();
        let mut demo = state(MigrationDefaults::default());
        demo.set_rule_text(Some(rule), "n");
        assert_eq!(
            demo.choose(&apps(&["shop"]), 1, 1, now),
            Source::Application
        );
        assert_eq!(demo.step(), Some(ForceApplication));
        let mut other = MigrationState::new("Other", MigrationDefaults::default());
        other.set_rule_text(Some(rule), "n");
        other.choose(&apps(&["shop"]), 1, 1, now);
        assert_eq!(
            other.step(),
            Some(ApplicationFirst),
            "from the application entry"
        );
        let mut third = MigrationState::new("Other", MigrationDefaults::default());
        third.set_rule_text(Some(rule), "n");
        third.choose(&apps(&["cart"]), 1, 1, now);
        assert_eq!(third.step(), Some(ForceInterface), "the rule's own step");
    }

    #[test]
    fn a_bad_rule_keeps_the_last_good_one_and_removal_goes_back_to_the_default() {
        let now = Instant::now();
        let none = apps(&[]);
        let mut s = state(MigrationDefaults {
            step: ForceInterface,
            ..MigrationDefaults::default()
        });
        assert!(s.set_rule_text(Some("step: FORCE_APPLICATION\nforce: true\n"), "n"));
        s.choose(&none, 1, 1, now);
        assert_eq!(s.step(), Some(ForceApplication));
        assert!(
            !s.set_rule_text(Some("step: FORCE_APLICATION\n"), "n"),
            "bad: ignored"
        );
        assert_eq!(s.choose(&none, 1, 1, now), Source::Application);
        assert_eq!(s.step(), Some(ForceApplication), "the last good rule stays");
        assert!(!s.set_rule_text(Some("{{{"), "n"));
        assert_eq!(s.choose(&none, 1, 1, now), Source::Application);
        // Removed: Dubbo's initial rule, the registry URL's step (checked as any change).
        assert!(s.set_rule_text(None, "n"));
        assert_eq!(s.choose(&none, 1, 1, now), Source::Interface);
        assert_eq!(s.step(), Some(ForceInterface));
    }

    #[test]
    fn only_steps_that_would_use_the_application_level_wait_for_it() {
        let none = apps(&[]);
        let af = state(MigrationDefaults::default());
        assert!(af.first_list_waits(&none, 0));
        assert!(!af.first_list_waits(&none, 1));
        let mut fi = state(MigrationDefaults::default());
        fi.set_rule_text(Some("step: FORCE_INTERFACE\n"), "n");
        assert!(
            !fi.first_list_waits(&none, 0),
            "the rule's step, before any decision"
        );
        let mut fa = state(MigrationDefaults {
            step: ForceInterface,
            ..MigrationDefaults::default()
        });
        fa.set_rule_text(Some("step: FORCE_APPLICATION\n"), "n");
        assert!(fa.first_list_waits(&none, 0));
    }

    #[test]
    fn display_keys_have_no_group() {
        use switchman_core::ServiceKey;
        assert_eq!(
            MigrationState::display_key(&ServiceKey::with("a.B", "g", "1.0")),
            "a.B:1.0"
        );
        assert_eq!(
            MigrationState::display_key(&ServiceKey::with("a.B", "g", "")),
            "a.B"
        );
        assert_eq!(rule_key("shop"), "shop.migration");
    }
}
