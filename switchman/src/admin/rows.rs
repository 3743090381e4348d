//! The JSON rows of `GET /snapshot/{service}`: one per instance, with its state and counters.

use std::collections::{BTreeMap, HashSet};
use std::time::{Instant, SystemTime};

use serde_json::{Value, json};
use switchman_cluster::ClusterInvoker;
use switchman_core::Instance;
use switchman_discovery::migration::Lists;
use switchman_discovery::{Directory, Snapshot};
use switchman_loadbalance::{Endpoint, InstanceStats, effective_weight};

use super::*;

/// The JSON `GET /snapshot/{service}` answers for `directory` (and its cluster invoker, when
/// there is one): every instance the registry lists, with its state and counters. For tools
/// that read a directory themselves (`switchman top REGISTRY SERVICE`); endpoints that left
/// are not known here, so none is `draining`.
pub fn snapshot_json(directory: &dyn Directory, cluster: Option<&ClusterInvoker>) -> Value {
    describe_snapshot(&directory.load(), directory.lists(), cluster, &[])
}

pub(super) fn describe_snapshot(
    snap: &Snapshot,
    lists: Option<Lists>,
    cluster: Option<&ClusterInvoker>,
    departed: &[Departed],
) -> Value {
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut rows: Vec<Value> = Vec::with_capacity(snap.instances().len());
    let mut seen: HashSet<&str> = HashSet::new();
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for inst in snap.instances() {
        seen.insert(inst.key());
        let row = match snap.index_of(inst.key()) {
            Some(i) if snap.endpoints()[i].instance.key() == inst.key() => {
                endpoint_row(&snap.endpoints()[i], now, wall)
            }
            _ => match departed
                .iter()
                .find(|d| d.endpoint.instance.key() == inst.key())
            {
                Some(d) => draining_row(d, inst, true, now, wall),
                None => disabled_row(inst),
            },
        };
        *counts.entry(state_name(&row)).or_default() += 1;
        rows.push(row);
    }
    for d in departed {
        if seen.insert(d.endpoint.instance.key()) {
            let row = draining_row(d, &d.endpoint.instance, false, now, wall);
            *counts.entry("draining").or_default() += 1;
            rows.push(row);
        }
    }
    let mut out = json!({
        "service": snap.service().to_string(),
        "interface": snap.service().interface.as_ref(),
        "group": snap.service().group.as_ref(),
        "version": snap.service().version.as_ref(),
        "epoch": snap.epoch(),
        "loadbalance": snap.balancer().name(),
        "protected": snap.is_protected(),
        "states": counts,
        "instances": rows,
    });
    if let Some(l) = lists {
        // Which level's list is in use, and why (the migration step and both sizes).
        out["discovery"] = json!({
            "step": l.step.map(|s| s.as_str()),
            "interface_level": l.interface_level,
            "app_level": l.app_level,
            "using": l.using.as_str(),
        });
    }
    if let Some(c) = cluster {
        out["cluster"] = json!({
            "strategy": c.settings("").strategy.to_string(),
            "budget_refused": c.budget_refused(),
            "failback_pending": c.failback_pending(),
        });
    }
    out
}

pub(super) fn state_name(row: &Value) -> &'static str {
    match row["state"].as_str() {
        Some("routable") => "routable",
        Some("warming") => "warming",
        Some("ejected") => "ejected",
        Some("draining") => "draining",
        _ => "disabled",
    }
}

pub(super) fn base_row(inst: &Instance, current_weight: u32) -> Value {
    json!({
        "key": inst.key(),
        "address": inst.address(),
        "protocol": inst.protocol().as_str(),
        "group": inst.service().group.as_ref(),
        "version": inst.service().version.as_ref(),
        "application": inst.application(),
        "weight": inst.weight(),
        "current_weight": current_weight,
        "warmup_ms": inst.warmup().as_millis() as u64,
        "zone": inst.zone(),
        "tag": inst.tag(),
    })
}

pub(super) fn counters(row: &mut Value, stats: &InstanceStats, now: Instant) {
    row["active"] = json!(stats.active());
    row["succeeded"] = json!(stats.succeeded());
    row["failed"] = json!(stats.failed());
    row["consecutive_failures"] = json!(stats.consecutive_failures());
    row["ejections"] = json!(stats.outlier().ejections());
    row["response_avg_us"] = json!(stats.window_average_us(now));
}

pub(super) fn endpoint_row(ep: &Endpoint, now: Instant, wall: SystemTime) -> Value {
    let inst = &ep.instance;
    let current = effective_weight(ep, wall);
    let mut row = base_row(inst, current);
    let outlier = ep.stats.outlier();
    let state = if outlier.is_ejected() {
        let left = outlier
            .ejected_until()
            .map(|u| u.saturating_duration_since(now))
            .unwrap_or_default();
        row["ejected"] = json!({
            "left_ms": left.as_millis() as u64,
            // The penalty is over: the next pick that reaches it makes the probe call.
            "probe_due": left.is_zero(),
            "ejections": outlier.ejections(),
        });
        "ejected"
    } else if current < inst.weight() {
        row["warming"] = json!({
            "current_weight": current,
            "weight": inst.weight(),
            "uptime_ms": uptime_ms(inst, &ep.stats, wall),
        });
        "warming"
    } else {
        "routable"
    };
    row["state"] = json!(state);
    row["routable"] = json!(true);
    counters(&mut row, &ep.stats, now);
    row
}

/// `inst` is the registry's current entry when it still lists the endpoint (`listed`), or the
/// endpoint's last one.
pub(super) fn draining_row(
    d: &Departed,
    inst: &Instance,
    listed: bool,
    now: Instant,
    wall: SystemTime,
) -> Value {
    let stats = &d.endpoint.stats;
    let mut row = base_row(inst, effective_weight(&d.endpoint, wall));
    let ago = now.saturating_duration_since(d.left);
    row["state"] = json!("draining");
    row["routable"] = json!(false);
    row["draining"] = json!({
        "in_flight": stats.active(),
        "left_ms_ago": ago.as_millis() as u64,
        "grace_left_ms": DRAIN_GRACE.saturating_sub(ago).as_millis() as u64,
        "listed": listed,
    });
    counters(&mut row, stats, now);
    row
}

pub(super) fn disabled_row(inst: &Instance) -> Value {
    let mut row = base_row(inst, 0);
    let reason = if !inst.enabled() {
        "disabled by the provider or an override (enabled=false)".to_string()
    } else if !inst.healthy() {
        "reported unhealthy by the registry".to_string()
    } else {
        format!("protocol {} is not callable here", inst.protocol().as_str())
    };
    row["state"] = json!("disabled");
    row["routable"] = json!(false);
    row["disabled"] = json!({ "reason": reason });
    row
}

pub(super) fn uptime_ms(inst: &Instance, stats: &InstanceStats, wall: SystemTime) -> u64 {
    let now_ms = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    now_ms.saturating_sub(inst.timestamp_ms().unwrap_or_else(|| stats.first_seen_ms()))
}
