//! Nacos instances ⇄ Switchman [`Instance`]s: parsed once, at the edge.
//!
//! # Weight
//!
//! Nacos weights are `f64` (default `1.0`), Dubbo's are integers (default `100`). Switchman
//! scales by 100: Nacos `1.0` is Dubbo's `100`, `0.5` is `50`, `5.0` is `500`. The product is
//! rounded; a positive weight never rounds to 0 (`0.001` → `1`), `0` (or a negative or NaN
//! weight) stays `0`, which the balancers never pick; very large values saturate at `u32::MAX`.
//!
//! When an instance also carries Dubbo's `weight` metadata key, **the Nacos weight wins unless
//! it is the untouched default `1.0`**. Java Dubbo never writes the Nacos weight field (it keeps
//! its integer weight in the URL parameters, which become metadata), so `1.0` on a Dubbo
//! provider says nothing and the metadata value is the provider's real weight. Any other Nacos
//! weight was set on purpose, in the console, through the open API or by another client, which
//! is how operators tune traffic at run time; it must not be silently overridden by a value
//! frozen at registration. Switchman's own registrar writes both (`weight/100` into the Nacos
//! field and the integer into metadata), so its instances read back unchanged either way.
//!
//! A negative metadata `weight` is 0 and the instance stays (Dubbo's
//! `AbstractLoadBalance.getWeight` is `max(weight, 0)`), as for a provider URL; a value that
//! is no integer, or above `u32::MAX`, is logged and ignored.

use std::collections::HashMap;
use std::time::Duration;

use nacos_sdk::api::naming::ServiceInstance;
use switchman_core::{Instance, Protocol, ServiceKey};
use tracing::warn;

/// Nacos's default cluster name; it is not a zone.
pub(crate) const DEFAULT_CLUSTER: &str = "DEFAULT";

/// Scales a Nacos `f64` weight onto Dubbo's integer scale (see the module docs).
pub(crate) fn scale_weight(nacos: f64) -> u32 {
    if nacos.is_nan() || nacos <= 0.0 {
        return 0;
    }
    let scaled = (nacos * 100.0).round();
    if scaled < 1.0 {
        1
    } else if scaled >= u32::MAX as f64 {
        u32::MAX
    } else {
        scaled as u32
    }
}

/// The effective integer weight of a Nacos instance (see the module docs for the rule).
pub(crate) fn effective_weight(nacos: f64, metadata_weight: Option<u32>) -> u32 {
    match metadata_weight {
        Some(w) if nacos == 1.0 => w,
        _ => scale_weight(nacos),
    }
}

fn parse_meta<T: std::str::FromStr>(
    service: &str,
    address: &str,
    metadata: &HashMap<String, String>,
    key: &str,
) -> Option<T> {
    let raw = metadata.get(key)?;
    match raw.trim().parse::<T>() {
        Ok(v) => Some(v),
        Err(_) => {
            warn!(service, address, key, value = %raw, "ignoring a metadata value that is not an integer in range");
            None
        }
    }
}

/// The metadata `weight` as Dubbo reads a provider's weight: `max(weight, 0)`; `None` (logged)
/// when it is not an integer up to `u32::MAX`.
fn metadata_weight(service: &str, address: &str, md: &HashMap<String, String>) -> Option<u32> {
    let w = parse_meta::<i64>(service, address, md, "weight")?;
    match u32::try_from(w.max(0)) {
        Ok(w) => Some(w),
        Err(_) => {
            warn!(
                service,
                address,
                weight = w,
                "ignoring a metadata weight above {}",
                u32::MAX
            );
            None
        }
    }
}

/// Whether the metadata leave the instance enabled, as `Instance::from_url` reads a provider
/// URL (Dubbo's `RegistryDirectory.toInvokers`): a non-empty `disabled` decides alone
/// (`true`, in any case, disables), else `enabled` (absent or `true` in any case enables).
fn metadata_enabled(md: &HashMap<String, String>) -> bool {
    let flag = |k: &str| md.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    match flag("disabled") {
        Some(d) => !d.eq_ignore_ascii_case("true"),
        None => flag("enabled").is_none_or(|e| e.eq_ignore_ascii_case("true")),
    }
}

/// Maps one Nacos instance onto an [`Instance`] of `key`. `None` (logged) for an instance
/// whose port is not a valid TCP port.
///
/// - `weight`: see the module docs; `enabled`: the Nacos flag and metadata `enabled`/`disabled`;
///   `healthy`: the Nacos flag (a disabled or unhealthy instance is listed, never picked).
/// - zone: metadata `zone`, else the Nacos cluster name unless it is Nacos's `DEFAULT`.
/// - protocol: metadata `protocol` (Dubbo writes it), else `http`; path: metadata `path`, else
///   the interface for Dubbo naming and empty for plain names.
/// - `warmup` (ms), `timestamp` (ms since the epoch), `application`, `dubbo.tag`: from metadata.
///   Every metadata entry is kept as a parameter for routing rules.
pub(crate) fn to_instance(
    key: &ServiceKey,
    dubbo_naming: bool,
    si: &ServiceInstance,
) -> Option<Instance> {
    let service = key.to_string();
    let Ok(port) = u16::try_from(si.port) else {
        warn!(service = %service, ip = %si.ip, port = si.port, "ignoring an instance with an invalid port");
        return None;
    };
    if port == 0 || !switchman_core::is_valid_host(&si.ip) {
        warn!(service = %service, ip = %si.ip, port = si.port, "ignoring an instance without a valid address");
        return None;
    }
    let md = &si.metadata;
    let address = format!("{}:{}", si.ip, port);
    if let Err(e) = switchman_core::check_metadata(
        &format!("nacos instance {address} of {service}"),
        md.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ) {
        warn!(service = %service, address = %address, "ignoring an instance: {e}");
        return None;
    }
    let protocol = md
        .get("protocol")
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().unwrap_or(Protocol::Http))
        .unwrap_or(Protocol::Http);
    let path = match md.get("path").filter(|p| !p.is_empty()) {
        Some(p) => p.as_str(),
        None if dubbo_naming => &key.interface,
        None => "",
    };
    let mut b = Instance::builder(si.ip.clone(), port)
        .protocol(protocol)
        .path(path)
        .service(key.clone());
    let mut params: Vec<(&String, &String)> = md.iter().collect();
    params.sort();
    for (k, v) in params {
        b = b.param(k, v);
    }
    let meta_weight = metadata_weight(&service, &address, md);
    b = b.weight(effective_weight(si.weight, meta_weight));
    if let Some(w) = parse_meta::<u64>(&service, &address, md, "warmup") {
        b = b.warmup(Duration::from_millis(w));
    }
    if let Some(t) = parse_meta::<u64>(&service, &address, md, "timestamp") {
        b = b.timestamp_ms(t);
    }
    let zone = md
        .get("zone")
        .filter(|z| !z.is_empty())
        .map(String::as_str)
        .or_else(|| {
            si.cluster_name
                .as_deref()
                .filter(|c| !c.is_empty() && *c != DEFAULT_CLUSTER)
        });
    if let Some(z) = zone {
        b = b.zone(z);
    }
    b = b
        .enabled(si.enabled && metadata_enabled(md))
        .healthy(si.healthy);
    if let Some(a) = md.get("application").filter(|a| !a.is_empty()) {
        b = b.application(a);
    }
    if let Some(t) = md.get("dubbo.tag").filter(|t| !t.is_empty()) {
        b = b.tag(t);
    }
    Some(b.build())
}

/// The Nacos instance Switchman registers for `instance`: ephemeral, Nacos weight
/// `weight / 100`, the zone as cluster name (else `DEFAULT`), and the instance's Dubbo URL
/// parameters as metadata (including `protocol`, `path`, `interface`, `weight`), as Java
/// Dubbo writes them.
pub(crate) fn to_service_instance(instance: &Instance) -> ServiceInstance {
    let url = instance.to_url();
    let mut metadata: HashMap<String, String> = url
        .params()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.insert("protocol".into(), instance.protocol().as_str().to_string());
    if !instance.path().is_empty() {
        metadata.insert("path".into(), instance.path().to_string());
    }
    metadata.insert("weight".into(), instance.weight().to_string());
    ServiceInstance {
        instance_id: None,
        ip: instance.host().to_string(),
        port: i32::from(instance.port()),
        weight: f64::from(instance.weight()) / 100.0,
        healthy: instance.healthy(),
        enabled: instance.enabled(),
        ephemeral: true,
        cluster_name: Some(instance.zone().unwrap_or(DEFAULT_CLUSTER).to_string()),
        service_name: None,
        metadata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn si(weight: f64, md: &[(&str, &str)]) -> ServiceInstance {
        ServiceInstance {
            ip: "10.0.0.1".into(),
            port: 8080,
            weight,
            metadata: md
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn weights_scale_by_100_with_documented_rounding() {
        let cases = [
            (1.0, 100),
            (0.5, 50),
            (5.0, 500),
            (2.345, 235),
            (0.001, 1),
            (0.0, 0),
            (-3.0, 0),
            (f64::NAN, 0),
            (1e12, u32::MAX),
        ];
        for (nacos, want) in cases {
            assert_eq!(scale_weight(nacos), want, "nacos weight {nacos}");
        }
    }

    #[test]
    fn metadata_weight_wins_only_over_the_default_nacos_weight() {
        // A Java Dubbo provider: Nacos weight untouched, integer weight in metadata.
        assert_eq!(effective_weight(1.0, Some(40)), 40);
        // An operator changed the Nacos weight: that is the live knob.
        assert_eq!(effective_weight(5.0, Some(40)), 500);
        assert_eq!(effective_weight(0.0, Some(40)), 0);
        assert_eq!(effective_weight(1.0, None), 100);
    }

    #[test]
    fn dubbo_instance_maps_typed_fields_from_metadata() {
        let key = ServiceKey::with("com.foo.Bar", "g", "1.0");
        let mut s = si(
            1.0,
            &[
                ("protocol", "tri"),
                ("interface", "com.foo.Bar"),
                ("weight", "40"),
                ("warmup", "60000"),
                ("timestamp", "1700000000000"),
                ("dubbo.tag", "gray"),
                ("application", "bar-app"),
                ("side", "provider"),
            ],
        );
        s.cluster_name = Some("hz".into());
        let i = to_instance(&key, true, &s).unwrap();
        assert_eq!(i.address(), "10.0.0.1:8080");
        assert_eq!(i.protocol(), &Protocol::Tri);
        assert_eq!(i.path(), "com.foo.Bar");
        assert_eq!(i.service(), &key);
        assert_eq!(i.weight(), 40);
        assert_eq!(i.warmup(), Duration::from_secs(60));
        assert_eq!(i.timestamp_ms(), Some(1_700_000_000_000));
        assert_eq!(i.tag(), Some("gray"));
        assert_eq!(i.application(), Some("bar-app"));
        assert_eq!(i.zone(), Some("hz"), "the cluster name is the zone");
        assert_eq!(i.param("side"), Some("provider"));
        assert!(i.is_available());
    }

    #[test]
    fn plain_instance_uses_nacos_fields() {
        let key = ServiceKey::new("order-service");
        let mut s = si(2.5, &[("zone", "z1")]);
        s.cluster_name = Some("hz".into());
        let i = to_instance(&key, false, &s).unwrap();
        assert_eq!(i.weight(), 250);
        assert_eq!(i.protocol(), &Protocol::Http);
        assert_eq!(i.path(), "");
        assert_eq!(i.zone(), Some("z1"), "metadata zone wins over the cluster");
        let mut s = si(1.0, &[]);
        s.cluster_name = Some(DEFAULT_CLUSTER.into());
        assert_eq!(to_instance(&key, false, &s).unwrap().zone(), None);
    }

    #[test]
    fn disabled_unhealthy_and_bad_metadata() {
        let key = ServiceKey::new("svc");
        let mut s = si(1.0, &[]);
        s.enabled = false;
        assert!(!to_instance(&key, false, &s).unwrap().enabled());
        let mut s = si(1.0, &[]);
        s.healthy = false;
        let i = to_instance(&key, false, &s).unwrap();
        assert!(!i.healthy() && !i.is_available());
        let s = si(1.0, &[("disabled", "true")]);
        assert!(!to_instance(&key, false, &s).unwrap().enabled());
        // A malformed typed value is ignored, not fatal: the Nacos weight applies.
        let s = si(3.0, &[("weight", "heavy"), ("warmup", "-1")]);
        let i = to_instance(&key, false, &s).unwrap();
        assert_eq!(
            (i.weight(), i.warmup()),
            (300, switchman_core::DEFAULT_WARMUP)
        );
        let mut s = si(1.0, &[]);
        s.port = 70000;
        assert!(to_instance(&key, false, &s).is_none());
    }

    /// Dubbo balances with `max(weight, 0)`: a negative metadata weight keeps the provider with
    /// weight 0 (it used to be ignored, giving the Nacos default 100).
    #[test]
    fn a_negative_metadata_weight_is_zero_and_the_instance_stays() {
        let key = ServiceKey::with("com.foo.Bar", "", "1.0");
        for (raw, want) in [("-5", 0), ("-0", 0), ("0", 0), ("7", 7), (" 300 ", 300)] {
            let i = to_instance(&key, true, &si(1.0, &[("weight", raw)]))
                .unwrap_or_else(|| panic!("weight={raw:?} keeps the instance"));
            assert_eq!(i.weight(), want, "weight={raw:?}");
            assert!(i.enabled(), "weight={raw:?}");
        }
        // Above u32::MAX or not a number: ignored, the Nacos weight applies.
        for raw in ["4294967296", "heavy", "1.5"] {
            let i = to_instance(&key, true, &si(1.0, &[("weight", raw)])).unwrap();
            assert_eq!(i.weight(), 100, "weight={raw:?}");
        }
    }

    /// The metadata flags read as a provider URL's: `disabled` wins when present, both
    /// case-insensitive.
    #[test]
    fn enabled_and_disabled_metadata_read_as_dubbo_reads_them() {
        let key = ServiceKey::new("svc");
        let enabled =
            |md: &[(&str, &str)]| to_instance(&key, false, &si(1.0, md)).unwrap().enabled();
        assert!(enabled(&[]));
        assert!(enabled(&[("disabled", "false"), ("enabled", "false")]));
        assert!(!enabled(&[("disabled", "TRUE")]));
        assert!(!enabled(&[("disabled", "True"), ("enabled", "true")]));
        assert!(!enabled(&[("enabled", "False")]));
        assert!(
            !enabled(&[("enabled", "no")]),
            "only `true` is true, as Java reads it"
        );
        assert!(enabled(&[("enabled", "TRUE")]));
        assert!(
            !enabled(&[("disabled", ""), ("enabled", "FALSE")]),
            "an empty disabled is absent"
        );
    }

    #[test]
    fn registered_instances_read_back_unchanged() {
        let key = ServiceKey::with("com.foo.Bar", "", "2.0");
        for w in [0, 1, 37, 100, 250, 100_000] {
            let inst = Instance::builder("10.0.0.2", 9000)
                .protocol(Protocol::Tri)
                .service(key.clone())
                .path("com.foo.Bar")
                .weight(w)
                .zone("z9")
                .application("bar-app")
                .tag("blue")
                .build();
            let si = to_service_instance(&inst);
            assert!(si.ephemeral);
            assert_eq!(si.cluster_name.as_deref(), Some("z9"));
            assert_eq!(si.metadata.get("protocol").map(String::as_str), Some("tri"));
            let back = to_instance(&key, true, &si).unwrap();
            assert_eq!(back.weight(), w, "weight {w}");
            assert_eq!(
                (
                    back.address(),
                    back.protocol(),
                    back.zone(),
                    back.tag(),
                    back.application()
                ),
                (
                    inst.address(),
                    inst.protocol(),
                    Some("z9"),
                    Some("blue"),
                    Some("bar-app")
                )
            );
        }
    }
}
