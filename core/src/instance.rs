use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::{Error, ServiceKey, Url};

/// Dubbo's default instance weight.
pub const DEFAULT_WEIGHT: u32 = 100;
/// Dubbo's default warm-up period (10 minutes).
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(600);
/// Largest metadata (URL parameter) value accepted from a registry, in bytes. Dubbo's longest
/// real values (`methods=` of a large interface) are a few KiB.
pub const MAX_PARAM_VALUE_BYTES: usize = 16 * 1024;
/// Most metadata entries (URL parameters) accepted for one instance. Java Dubbo writes ~40.
pub const MAX_PARAMS: usize = 512;

/// `text` cut to 200 characters (with `...`), for messages naming untrusted input.
fn shorten(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(200) {
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// Checks registry metadata against [`MAX_PARAMS`] and [`MAX_PARAM_VALUE_BYTES`]; `what` names
/// the entry in the error. Registry data is untrusted: an entry over a limit is rejected (the
/// adapters log and skip it) instead of being carried into every snapshot.
pub fn check_metadata<'a>(
    what: &str,
    params: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
) -> Result<(), Error> {
    if params.len() > MAX_PARAMS {
        return Err(Error::bad_config(format!(
            "{what}: {} metadata entries; the limit is {MAX_PARAMS}",
            params.len()
        )));
    }
    for (k, v) in params {
        if k.len() + v.len() > MAX_PARAM_VALUE_BYTES {
            let shown: String = k.chars().take(64).collect();
            return Err(Error::bad_config(format!(
                "{what}: metadata `{shown}` is {} bytes; the limit is {MAX_PARAM_VALUE_BYTES}",
                k.len() + v.len()
            )));
        }
    }
    Ok(())
}

/// The protocol an instance speaks. Parsed once from the URL scheme or metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// Dubbo 3 Triple (gRPC framing over HTTP/2).
    Tri,
    /// Plain HTTP with Switchman's JSON unary convention.
    Http,
    /// REST (Spring Cloud style) over HTTP.
    Rest,
    /// Dubbo's default protocol: the Dubbo2 exchange format over TCP with Hessian2 bodies.
    Dubbo,
    /// Anything else, lower-cased.
    Other(String),
}

impl Protocol {
    /// The protocol's name as written in URLs.
    pub fn as_str(&self) -> &str {
        match self {
            Protocol::Tri => "tri",
            Protocol::Http => "http",
            Protocol::Rest => "rest",
            Protocol::Dubbo => "dubbo",
            Protocol::Other(s) => s,
        }
    }
}

impl FromStr for Protocol {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "tri" | "triple" => Protocol::Tri,
            "http" => Protocol::Http,
            "rest" => Protocol::Rest,
            "dubbo" => Protocol::Dubbo,
            other => Protocol::Other(other.to_string()),
        })
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One provider instance, parsed once at the edge into typed fields. Share it as
/// `Arc<Instance>`; nothing downstream re-reads parameters as strings on the call path.
///
/// The fields balancer tables read for every member (weight, warm-up, start time,
/// availability) come first, in declaration order (`repr(C)`): next to the `Arc`'s reference
/// counts, whose cache line copying a snapshot's arrays has just loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[repr(C)]
pub struct Instance {
    weight: u32,
    port: u16,
    enabled: bool,
    healthy: bool,
    timestamp_ms: Option<u64>,
    warmup: Duration,
    protocol: Protocol,
    host: String,
    /// The endpoint's identity: `{address} {protocol} {service key}`, e.g.
    /// `10.0.0.1:20880 dubbo g1/com.foo.Bar:1.0.0`; the first `address_len` bytes are the
    /// address. Derived in [`InstanceBuilder::build`] from the fields it names.
    key: String,
    address_len: usize,
    path: String,
    service: ServiceKey,
    zone: Option<String>,
    application: Option<String>,
    tag: Option<String>,
    params: BTreeMap<String, String>,
}

/// A `weight` value as Dubbo's `AbstractLoadBalance.getWeight` reads it: `max(weight, 0)`, so a
/// negative weight keeps the provider with weight 0. `url_or_source` names the input in the
/// error; it is only built when there is one.
fn parse_weight(url_or_source: impl FnOnce() -> String, w: &str) -> Result<u32, Error> {
    w.trim()
        .parse::<i64>()
        .ok()
        .and_then(|n| u32::try_from(n.max(0)).ok())
        .ok_or_else(|| {
            Error::bad_config(format!(
                "{}: parameter weight={w:?} is not an integer up to {}",
                url_or_source(),
                u32::MAX
            ))
        })
}

fn parse_num<T: FromStr>(url_or_source: &str, key: &str, value: &str) -> Result<T, Error> {
    value.trim().parse::<T>().map_err(|_| {
        Error::bad_config(format!(
            "{url_or_source}: parameter {key}={value:?} is not a valid non-negative integer"
        ))
    })
}

impl Instance {
    /// Starts building an instance at `host:port` (protocol `http`, weight 100, no service).
    pub fn builder(host: impl Into<String>, port: u16) -> InstanceBuilder {
        InstanceBuilder::new(host.into(), port)
    }

    /// Builds an instance from a provider URL. Typed keys read here: `interface` (else
    /// `service`, else the path), `group`, `version`, `weight`, `warmup` (ms), `timestamp` (ms
    /// since the epoch), `zone`, `enabled`, `disabled`, `healthy`, `application`, `dubbo.tag`.
    /// Every parameter is kept in [`Instance::params`] for routing.
    pub fn from_url(url: &Url) -> Result<Instance, Error> {
        let what = || shorten(url.redacted());
        check_metadata(
            &what(),
            url.params().iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )?;
        let port = url
            .port()
            .ok_or_else(|| Error::bad_config(format!("{}: missing port", what())))?;
        if port == 0 {
            return Err(Error::bad_config(format!("{}: port 0", what())));
        }
        let interface = url
            .param("interface")
            .or_else(|| url.param("service"))
            .filter(|s| !s.is_empty())
            .unwrap_or(url.path());
        for (name, value) in [
            ("interface", interface),
            ("group", url.param("group").unwrap_or("")),
            ("version", url.param("version").unwrap_or("")),
        ] {
            // Written back as URL parameters (the cache file, registration): they must not
            // carry the query's separators.
            if let Some(c) = value.chars().find(|&c| {
                matches!(c, '&' | '=' | '?' | '#') || c.is_whitespace() || c.is_control()
            }) {
                return Err(Error::bad_config(format!(
                    "{}: {name} contains {c:?}",
                    what()
                )));
            }
        }
        let mut b = Instance::builder(url.host(), port)
            .protocol(url.protocol().parse().unwrap_or(Protocol::Http))
            .path(url.path())
            .service(ServiceKey::with(
                interface,
                url.param("group").unwrap_or(""),
                url.param("version").unwrap_or(""),
            ));
        for (k, v) in url.params() {
            b = b.param(k, v);
        }
        if let Some(w) = url.param("weight") {
            // Dubbo's `AbstractLoadBalance.getWeight` returns `max(weight, 0)`: a negative
            // weight keeps the provider, with weight 0.
            b = b.weight(parse_weight(what, w)?);
        }
        if let Some(w) = url.param("warmup") {
            b = b.warmup(Duration::from_millis(parse_num(&what(), "warmup", w)?));
        }
        if let Some(t) = url.param("timestamp") {
            b = b.timestamp_ms(parse_num(&what(), "timestamp", t)?);
        }
        if let Some(z) = url.param("zone").filter(|z| !z.is_empty()) {
            b = b.zone(z);
        }
        // As Dubbo's `RegistryDirectory.toInvokers`: a non-empty `disabled` decides alone
        // (`enabled = !disabled`), else `enabled` (default true); both read as Java's
        // `Boolean.parseBoolean` (only `true`, in any case, is true).
        let flag = |k: &str| url.param(k).map(str::trim).filter(|v| !v.is_empty());
        let enabled = match flag("disabled") {
            Some(d) => !d.eq_ignore_ascii_case("true"),
            None => flag("enabled").is_none_or(|e| e.eq_ignore_ascii_case("true")),
        };
        b = b
            .enabled(enabled)
            .healthy(url.param("healthy") != Some("false"));
        if let Some(a) = url.param("application").filter(|a| !a.is_empty()) {
            b = b.application(a);
        }
        if let Some(t) = url.param("dubbo.tag").filter(|t| !t.is_empty()) {
            b = b.tag(t);
        }
        Ok(b.build())
    }

    /// The instance as a Dubbo provider URL (the form registered in ZooKeeper).
    pub fn to_url(&self) -> Url {
        let path = if self.path.is_empty() {
            self.service.interface.as_ref()
        } else {
            &self.path
        };
        let mut u = Url::new(self.protocol.as_str(), &self.host, Some(self.port), path);
        for (k, v) in &self.params {
            u.set_param(k, v);
        }
        if !self.service.interface.is_empty() {
            u.set_param("interface", &self.service.interface);
        }
        if !self.service.group.is_empty() {
            u.set_param("group", &self.service.group);
        }
        if !self.service.version.is_empty() {
            u.set_param("version", &self.service.version);
        }
        if self.weight != DEFAULT_WEIGHT || self.params.contains_key("weight") {
            u.set_param("weight", &self.weight.to_string());
        }
        if let Some(ts) = self.timestamp_ms {
            u.set_param("timestamp", &ts.to_string());
        }
        u.remove_param("disabled");
        if !self.enabled || self.params.contains_key("enabled") {
            u.set_param("enabled", if self.enabled { "true" } else { "false" });
        }
        if !self.healthy || self.params.contains_key("healthy") {
            u.set_param("healthy", if self.healthy { "true" } else { "false" });
        }
        if self.warmup != DEFAULT_WARMUP || self.params.contains_key("warmup") {
            u.set_param("warmup", &self.warmup.as_millis().to_string());
        }
        if let Some(z) = &self.zone {
            u.set_param("zone", z);
        }
        if let Some(a) = &self.application {
            u.set_param("application", a);
        }
        if let Some(t) = &self.tag {
            u.set_param("dubbo.tag", t);
        }
        u
    }

    /// Whether `self` and `other` differ at most in weight, warm-up and start timestamp (the
    /// typed fields and the `weight`, `warmup` and `timestamp` parameters): what an operator's
    /// weight change leaves untouched, so routing results computed for one hold for the other.
    pub fn same_but_weight(&self, other: &Instance) -> bool {
        const WEIGHTING: [&str; 3] = ["weight", "warmup", "timestamp"];
        fn rest(i: &Instance) -> impl Iterator<Item = (&String, &String)> {
            i.params
                .iter()
                .filter(|(k, _)| !WEIGHTING.contains(&k.as_str()))
        }
        self.port == other.port
            && self.host == other.host
            && self.protocol == other.protocol
            && self.path == other.path
            && self.service == other.service
            && self.zone == other.zone
            && self.enabled == other.enabled
            && self.healthy == other.healthy
            && self.application == other.application
            && self.tag == other.tag
            && rest(self).eq(rest(other))
    }

    /// Host (IPv6 without brackets).
    #[inline]
    pub fn host(&self) -> &str {
        &self.host
    }
    /// Port.
    #[inline]
    pub fn port(&self) -> u16 {
        self.port
    }
    /// `host:port`, IPv6 in brackets. One process may export a service under several groups,
    /// versions or protocols at one address: the identity of an endpoint is [`Instance::key`].
    #[inline]
    pub fn address(&self) -> &str {
        &self.key[..self.address_len]
    }
    /// The endpoint's identity across snapshots: its address, protocol and service key
    /// (interface, group, version), as `{address} {protocol} {service key}`, e.g.
    /// `10.0.0.1:20880 dubbo g1/com.foo.Bar:1.0.0`. Two groups exported on one port are two
    /// endpoints, each with its own statistics, outlier state and weight. Keys sort by address
    /// first.
    #[inline]
    pub fn key(&self) -> &str {
        &self.key
    }
    /// Protocol.
    #[inline]
    pub fn protocol(&self) -> &Protocol {
        &self.protocol
    }
    /// URL path (context path for REST providers), without leading `/`.
    #[inline]
    pub fn path(&self) -> &str {
        &self.path
    }
    /// Service key.
    #[inline]
    pub fn service(&self) -> &ServiceKey {
        &self.service
    }
    /// Configured weight (before warm-up).
    pub fn weight(&self) -> u32 {
        self.weight
    }
    /// Warm-up period.
    pub fn warmup(&self) -> Duration {
        self.warmup
    }
    /// The provider's start time in ms since the Unix epoch, when it published one.
    pub fn timestamp_ms(&self) -> Option<u64> {
        self.timestamp_ms
    }
    /// Zone, if known.
    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }
    /// Whether the instance is enabled (a disabled one is never picked).
    pub fn enabled(&self) -> bool {
        self.enabled
    }
    /// Whether the registry reports it healthy (an unhealthy one is never picked).
    pub fn healthy(&self) -> bool {
        self.healthy
    }
    /// Whether the instance may receive calls at all.
    pub fn is_available(&self) -> bool {
        self.enabled && self.healthy
    }
    /// The provider's application name.
    pub fn application(&self) -> Option<&str> {
        self.application.as_deref()
    }
    /// The static tag (`dubbo.tag`).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }
    /// A parameter as registered (URL parameter or registry metadata).
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }
    /// All parameters.
    pub fn params(&self) -> &BTreeMap<String, String> {
        &self.params
    }

    /// A copy with another weight (used by configurators).
    pub fn with_weight(&self, weight: u32) -> Instance {
        Instance {
            weight,
            ..self.clone()
        }
    }

    /// A copy enabled or disabled (used by configurators).
    pub fn with_enabled(&self, enabled: bool) -> Instance {
        Instance {
            enabled,
            ..self.clone()
        }
    }

    /// A copy with one parameter set, every typed field re-derived (see
    /// [`Instance::with_params`]). An invalid value (say `weight=abc`) is an error naming it.
    pub fn with_param(&self, key: &str, value: &str) -> Result<Instance, Error> {
        self.with_params([(key, value)])
    }

    /// A copy with `params` set: the one way overrides change an instance. The instance goes
    /// through its provider URL and [`Instance::from_url`] again, so every typed field
    /// (weight, warm-up, timestamp, zone, tag, enabled, healthy, application, group, version,
    /// protocol) follows the new parameters exactly as if the registry had listed them. An
    /// invalid value is an error naming the key and the value; `self` is unchanged.
    pub fn with_params<'a>(
        &self,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Instance, Error> {
        let params: Vec<(&str, &str)> = params.into_iter().collect();
        // The common operator overrides (weight, enabled, disabled) touch only fields of their
        // own: derived here the way `from_url` derives them, without the URL round trip (a
        // service-wide weight rule is applied to every instance of a snapshot).
        if params
            .iter()
            .all(|(k, _)| matches!(*k, "weight" | "enabled" | "disabled"))
        {
            let mut out = self.clone();
            let mut flags = false;
            for (k, v) in &params {
                if *k == "weight" {
                    out.weight = parse_weight(|| format!("override of {}", self.address()), v)?;
                } else if !flags {
                    flags = true;
                    out.params.remove("enabled");
                    out.params.remove("disabled");
                }
                out.params.insert(k.to_string(), v.to_string());
            }
            if flags {
                let flag = |k: &str| {
                    out.params
                        .get(k)
                        .map(|v| v.trim())
                        .filter(|v| !v.is_empty())
                };
                out.enabled = match flag("disabled") {
                    Some(d) => !d.eq_ignore_ascii_case("true"),
                    None => flag("enabled").is_none_or(|e| e.eq_ignore_ascii_case("true")),
                };
            }
            return Ok(out);
        }
        let mut url = self.to_url();
        for (k, v) in params {
            // `enabled` and `disabled` decide together (`disabled` wins when present): an
            // override of either replaces both.
            if k == "enabled" || k == "disabled" {
                url.remove_param("enabled");
                url.remove_param("disabled");
            }
            url.set_param(k, v);
        }
        let out = Instance::from_url(&url)?;
        if out.key != self.key {
            // As Dubbo's configurators, which never apply the keys they match on (interface,
            // group, version, ...): an override cannot turn one endpoint into another.
            return Err(Error::bad_config(format!(
                "override of {}: cannot change the endpoint's interface, group, version or protocol",
                self.key
            )));
        }
        Ok(out)
    }

    /// Recomputes [`Instance::key`] from the address, protocol and service key.
    fn rekey(&mut self) {
        use std::fmt::Write;
        self.key.truncate(self.address_len);
        let _ = write!(self.key, " {}", self.protocol);
        let k = &self.service;
        if !(k.interface.is_empty() && k.group.is_empty() && k.version.is_empty()) {
            let _ = write!(self.key, " {k}");
        }
    }
}

/// Builder for [`Instance`].
#[derive(Debug, Clone)]
pub struct InstanceBuilder {
    inner: Instance,
}

impl InstanceBuilder {
    fn new(host: String, port: u16) -> Self {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let address = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        InstanceBuilder {
            inner: Instance {
                host,
                port,
                address_len: address.len(),
                key: address,
                protocol: Protocol::Http,
                path: String::new(),
                service: ServiceKey::new(""),
                weight: DEFAULT_WEIGHT,
                warmup: DEFAULT_WARMUP,
                timestamp_ms: None,
                zone: None,
                enabled: true,
                healthy: true,
                application: None,
                tag: None,
                params: BTreeMap::new(),
            },
        }
    }
    /// Protocol (default `http`).
    pub fn protocol(mut self, p: Protocol) -> Self {
        self.inner.protocol = p;
        self
    }
    /// Path / context path.
    pub fn path(mut self, p: &str) -> Self {
        self.inner.path = p.trim_start_matches('/').to_string();
        self
    }
    /// Service key.
    pub fn service(mut self, s: ServiceKey) -> Self {
        self.inner.service = s;
        self
    }
    /// Weight (default 100).
    pub fn weight(mut self, w: u32) -> Self {
        self.inner.weight = w;
        self
    }
    /// Warm-up (default 10 min).
    pub fn warmup(mut self, w: Duration) -> Self {
        self.inner.warmup = w;
        self
    }
    /// Provider start timestamp, ms since the epoch.
    pub fn timestamp_ms(mut self, t: u64) -> Self {
        self.inner.timestamp_ms = Some(t);
        self
    }
    /// Zone.
    pub fn zone(mut self, z: &str) -> Self {
        self.inner.zone = Some(z.to_string());
        self
    }
    /// Enabled flag.
    pub fn enabled(mut self, e: bool) -> Self {
        self.inner.enabled = e;
        self
    }
    /// Healthy flag.
    pub fn healthy(mut self, h: bool) -> Self {
        self.inner.healthy = h;
        self
    }
    /// Application name.
    pub fn application(mut self, a: &str) -> Self {
        self.inner.application = Some(a.to_string());
        self
    }
    /// Static tag (`dubbo.tag`).
    pub fn tag(mut self, t: &str) -> Self {
        self.inner.tag = Some(t.to_string());
        self.inner.params.insert("dubbo.tag".into(), t.to_string());
        self
    }
    /// Adds a parameter (kept for routing; typed fields are set by their own methods).
    pub fn param(mut self, k: &str, v: &str) -> Self {
        self.inner.params.insert(k.to_string(), v.to_string());
        self
    }
    /// Finishes the instance.
    pub fn build(self) -> Instance {
        let mut inner = self.inner;
        inner.rekey();
        inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_dubbo_url_reads_typed_fields_once() {
        let u = Url::parse(
            "dubbo://10.0.0.1:20880/com.foo.Bar?interface=com.foo.Bar&group=g&version=1.0&weight=50&warmup=60000&timestamp=1700000000000&zone=z1&application=app&dubbo.tag=gray&side=provider",
        )
        .unwrap();
        let i = Instance::from_url(&u).unwrap();
        assert_eq!(i.address(), "10.0.0.1:20880");
        assert_eq!(i.protocol(), &Protocol::Dubbo);
        assert_eq!(i.service(), &ServiceKey::with("com.foo.Bar", "g", "1.0"));
        assert_eq!(i.weight(), 50);
        assert_eq!(i.warmup(), Duration::from_secs(60));
        assert_eq!(i.timestamp_ms(), Some(1_700_000_000_000));
        assert_eq!(i.zone(), Some("z1"));
        assert_eq!(i.application(), Some("app"));
        assert_eq!(i.tag(), Some("gray"));
        assert_eq!(i.param("side"), Some("provider"));
        assert!(i.is_available());
    }

    #[test]
    fn provider_urls_that_could_not_be_written_back_are_rejected() {
        for (url, why) in [
            ("http://h:0/S", "port 0"),
            ("http://h:1/a&b=c", "interface contains '&'"),
            ("http://h:1/S?group=a%20b c", "group contains ' '"),
            ("http://h:1/S?version=1#2", "invalid character"),
        ] {
            let e = Url::parse(url)
                .map_err(|e| e.to_string())
                .and_then(|u| Instance::from_url(&u).map_err(|e| e.to_string()))
                .unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn same_but_weight_ignores_only_the_weighting_fields() {
        let base = || {
            Instance::builder("10.0.0.1", 80)
                .param("zone", "z")
                .tag("gray")
        };
        let a = base().weight(100).param("weight", "100").build();
        let b = base()
            .weight(7)
            .param("weight", "7")
            .warmup(Duration::ZERO)
            .timestamp_ms(5)
            .build();
        assert!(a.same_but_weight(&b) && b.same_but_weight(&a));
        assert!(!a.same_but_weight(&base().param("zone", "y").build()));
        assert!(!a.same_but_weight(&base().tag("blue").build()));
        assert!(!a.same_but_weight(&base().enabled(false).build()));
        assert!(!a.same_but_weight(&Instance::builder("10.0.0.1", 81).build()));
    }

    #[test]
    fn metadata_over_the_limits_is_rejected_with_a_short_message() {
        let long = "x".repeat(MAX_PARAM_VALUE_BYTES + 1);
        let u = Url::parse(&format!(
            "tri://10.0.0.1:1/S?methods={long}&password=s3cret"
        ))
        .unwrap();
        let e = Instance::from_url(&u).unwrap_err().to_string();
        assert!(e.contains("metadata `methods`"), "{e}");
        assert!(
            e.contains(&format!("limit is {MAX_PARAM_VALUE_BYTES}")),
            "{e}"
        );
        assert!(
            e.len() < 400,
            "the message quotes a shortened URL: {} bytes",
            e.len()
        );
        let many: Vec<String> = (0..=MAX_PARAMS).map(|k| format!("k{k}=v")).collect();
        let u = Url::parse(&format!("tri://10.0.0.1:1/S?{}", many.join("&"))).unwrap();
        let e = Instance::from_url(&u).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{} metadata entries", MAX_PARAMS + 1)),
            "{e}"
        );
        // At the limits: accepted.
        let ok = "x".repeat(MAX_PARAM_VALUE_BYTES - "methods".len());
        let u = Url::parse(&format!("tri://10.0.0.1:1/S?methods={ok}")).unwrap();
        assert!(Instance::from_url(&u).is_ok());
    }

    #[test]
    fn python_triple_form_takes_service_parameter() {
        let u = Url::parse("tri://127.0.0.1:50051?service=org.apache.dubbo.samples.HelloWorld")
            .unwrap();
        let i = Instance::from_url(&u).unwrap();
        assert_eq!(i.protocol(), &Protocol::Tri);
        assert_eq!(
            &*i.service().interface,
            "org.apache.dubbo.samples.HelloWorld"
        );
        assert_eq!(i.weight(), DEFAULT_WEIGHT);
    }

    #[test]
    fn bad_numbers_are_errors_naming_the_key() {
        let u = Url::parse("dubbo://h:1/x?weight=heavy").unwrap();
        let e = Instance::from_url(&u).unwrap_err();
        assert!(e.to_string().contains("weight=\"heavy\""), "{e}");
        let u = Url::parse("dubbo://h/x").unwrap();
        assert!(
            Instance::from_url(&u)
                .unwrap_err()
                .to_string()
                .contains("missing port")
        );
    }

    /// Dubbo keeps a provider with a negative weight and balances it with weight 0.
    #[test]
    fn negative_weight_is_zero_and_keeps_the_provider() {
        let u = Url::parse("dubbo://h:1/x?weight=-5").unwrap();
        let i = Instance::from_url(&u).unwrap();
        assert_eq!(i.weight(), 0);
        assert!(i.is_available());
    }

    /// `disabled` decides when it is present and non-empty; both flags are case-insensitive.
    #[test]
    fn disabled_wins_over_enabled_and_flags_ignore_case() {
        let enabled = |q: &str| {
            Instance::from_url(&Url::parse(&format!("dubbo://h:1/x?{q}")).unwrap())
                .unwrap()
                .enabled()
        };
        assert!(enabled("disabled=false&enabled=false"));
        assert!(!enabled("disabled=TRUE"));
        assert!(!enabled("disabled=True&enabled=true"));
        assert!(!enabled("enabled=FALSE"));
        assert!(
            !enabled("disabled=&enabled=False"),
            "an empty disabled is absent"
        );
        assert!(enabled("enabled=TRUE"));
        assert!(enabled("x=1"));
    }

    #[test]
    fn disabled_and_unhealthy() {
        let i = Instance::from_url(&Url::parse("dubbo://h:1/x?enabled=false").unwrap()).unwrap();
        assert!(!i.is_available());
        let i = Instance::from_url(&Url::parse("dubbo://h:1/x?disabled=true").unwrap()).unwrap();
        assert!(!i.enabled());
    }

    #[test]
    fn every_typed_field_survives_to_url_and_back() {
        let i = Instance::builder("10.1.1.1", 80)
            .protocol(Protocol::Rest)
            .service(ServiceKey::with("a.B", "g", "2"))
            .weight(3)
            .warmup(Duration::from_secs(30))
            .timestamp_ms(42)
            .zone("z")
            .enabled(false)
            .healthy(false)
            .application("app")
            .tag("gray")
            .build();
        let b = Instance::from_url(&i.to_url()).unwrap();
        assert_eq!(
            (
                b.protocol(),
                b.weight(),
                b.warmup(),
                b.timestamp_ms(),
                b.zone(),
                b.enabled(),
                b.healthy()
            ),
            (
                i.protocol(),
                3,
                i.warmup(),
                Some(42),
                Some("z"),
                false,
                false
            )
        );
        assert_eq!(
            (b.application(), b.tag(), b.service()),
            (Some("app"), Some("gray"), i.service())
        );
        // Overridden values win over the parameters they came from.
        let over = b.with_weight(9).with_enabled(true);
        let c = Instance::from_url(&over.to_url()).unwrap();
        assert_eq!((c.weight(), c.enabled()), (9, true));
    }

    #[test]
    fn the_key_is_address_protocol_and_service_key() {
        let at = |group: &str, version: &str, p: Protocol| {
            Instance::builder("10.0.0.1", 20880)
                .protocol(p)
                .service(ServiceKey::with("com.foo.Bar", group, version))
                .build()
        };
        let g1 = at("g1", "1.0.0", Protocol::Dubbo);
        assert_eq!(g1.key(), "10.0.0.1:20880 dubbo g1/com.foo.Bar:1.0.0");
        assert_eq!(g1.address(), "10.0.0.1:20880");
        let keys = [
            g1.key().to_string(),
            at("g2", "1.0.0", Protocol::Dubbo).key().to_string(),
            at("g1", "2.0.0", Protocol::Dubbo).key().to_string(),
            at("g1", "1.0.0", Protocol::Tri).key().to_string(),
        ];
        let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), 4, "{keys:?}");
        // Through the URL form and back: the same key.
        assert_eq!(Instance::from_url(&g1.to_url()).unwrap().key(), g1.key());
        // Keys sort by address first (`h:1` before `h:12` as the addresses do).
        let a = Instance::builder("h", 1).build();
        let b = Instance::builder("h", 12).build();
        assert!(a.key() < b.key() && a.address() < b.address());
        assert_eq!(Instance::builder("h", 1).build().key(), "h:1 http");
    }

    #[test]
    fn overrides_re_derive_every_typed_field() {
        let i = Instance::builder("10.0.0.1", 1)
            .protocol(Protocol::Dubbo)
            .service(ServiceKey::with("a.B", "g", "1"))
            .zone("z1")
            .tag("blue")
            .build();
        let o = i
            .with_params([
                ("dubbo.tag", "gray"),
                ("zone", "z2"),
                ("warmup", "5000"),
                ("timestamp", "77"),
                ("application", "shop"),
            ])
            .unwrap();
        assert_eq!(
            (
                o.tag(),
                o.zone(),
                o.warmup(),
                o.timestamp_ms(),
                o.application()
            ),
            (
                Some("gray"),
                Some("z2"),
                Duration::from_secs(5),
                Some(77),
                Some("shop")
            )
        );
        assert_eq!(
            (o.param("dubbo.tag"), o.param("zone")),
            (Some("gray"), Some("z2"))
        );
        assert_eq!(o.key(), i.key());
        // The cheap path (weight, enabled, disabled) agrees with the URL path.
        let w = i
            .with_params([("weight", "-5"), ("disabled", "TRUE")])
            .unwrap();
        assert_eq!(
            (w.weight(), w.enabled(), w.param("weight")),
            (0, false, Some("-5"))
        );
        let e = w.with_param("enabled", "true").unwrap();
        assert!(
            e.enabled(),
            "an override of enabled replaces an earlier disabled"
        );
        assert!(!i.with_param("enabled", "False").unwrap().enabled());
        // Bad values and identity changes are errors naming them; the instance is unchanged.
        let bad = i.with_param("weight", "abc").unwrap_err().to_string();
        assert!(bad.contains("weight") && bad.contains("abc"), "{bad}");
        let bad = i.with_param("warmup", "soon").unwrap_err().to_string();
        assert!(bad.contains("warmup"), "{bad}");
        let moved = i.with_param("group", "other").unwrap_err().to_string();
        assert!(moved.contains("group"), "{moved}");
        assert_eq!(i.tag(), Some("blue"));
    }

    #[test]
    fn to_url_round_trips_through_from_url() {
        let i = Instance::builder("::1", 8080)
            .protocol(Protocol::Tri)
            .service(ServiceKey::with("a.B", "g", "2"))
            .weight(7)
            .param("side", "provider")
            .build();
        assert_eq!(i.address(), "[::1]:8080");
        let back = Instance::from_url(&i.to_url()).unwrap();
        assert_eq!(back.address(), i.address());
        assert_eq!(back.service(), i.service());
        assert_eq!(back.weight(), 7);
        assert_eq!(back.protocol(), &Protocol::Tri);
    }
}
