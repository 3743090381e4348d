//! A registry whose instances come from code or from a YAML file.
//!
//! File format: either a list, or a mapping with a `providers:` list. Each entry is a Dubbo URL
//! string or a record:
//!
//! ```yaml
//! providers:
//!   - dubbo://10.0.0.1:20880/com.foo.Bar?weight=100&zone=a
//!   - tri://10.0.0.2:50051?service=com.foo.Bar
//!   - address: 10.0.0.3:8080       # host:port, IPv6 as [::1]:8080
//!     protocol: http               # default http
//!     weight: 50                   # default 100
//!     service: com.foo.Bar         # optional; else any subscriber accepts it
//!     metadata: { zone: b, dubbo.tag: gray }
//! ```
//!
//! A bad entry is logged with its line and skipped; the others load. The file is polled and
//! every edit is pushed as a full reset, so weights can be tuned by editing it. A file that
//! is not valid YAML at all is logged and ignored: the previous list stays in force.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::Deserialize;
use switchman_core::yaml::{self, Limits, Value};
use switchman_core::{BoxFuture, Error, Instance, Result, ServiceKey, Url};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::deltas::{changes, free_after_yield};
use crate::{Registry, Update, UpdateReceiver};

/// Largest static file read (1 MiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// A static registry: a list you set in code or keep in a watched YAML file.
#[derive(Clone)]
pub struct StaticRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    list: watch::Sender<Arc<Vec<Instance>>>,
    source: Option<PathBuf>,
    /// File versions rejected so far (a test waits for one instead of sleeping).
    rejected: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for StaticRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticRegistry")
            .field("instances", &self.inner.list.borrow().len())
            .field("source", &self.inner.source)
            .finish()
    }
}

/// One entry of a static file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// 1-based line of the entry in the file (0 when unknown).
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl StaticRegistry {
    /// A registry holding `instances`.
    pub fn new(instances: Vec<Instance>) -> Self {
        let (tx, _) = watch::channel(Arc::new(instances));
        StaticRegistry {
            inner: Arc::new(Inner {
                rejected: Default::default(),
                list: tx,
                source: None,
            }),
        }
    }

    /// Replaces the whole list; every subscriber receives what changed (see [`Registry`]).
    pub fn set(&self, instances: Vec<Instance>) {
        self.inner.list.send_replace(Arc::new(instances));
    }

    /// Changes the list in place (for example one instance's weight).
    pub fn update(&self, f: impl FnOnce(&mut Vec<Instance>)) {
        self.inner.list.send_modify(|l| f(Arc::make_mut(l)));
    }

    /// The current list.
    pub fn instances(&self) -> Arc<Vec<Instance>> {
        self.inner.list.borrow().clone()
    }

    /// Loads `path` and polls it every `poll` for edits (must be called inside a tokio
    /// runtime). Fails if the file cannot be read or is not YAML at first load; bad entries
    /// are logged and skipped.
    pub fn from_file(path: impl AsRef<Path>, poll: Duration) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let text = read_limited(&path)?;
        let (instances, errors) = parse_yaml(&text, &path.display().to_string())?;
        for e in &errors {
            warn!(file = %path.display(), "skipping static entry: {e}");
        }
        let (tx, _) = watch::channel(Arc::new(instances));
        let inner = Arc::new(Inner {
            rejected: Default::default(),
            list: tx,
            source: Some(path.clone()),
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(poll_file(weak, path, poll, text));
        Ok(StaticRegistry { inner })
    }
}

/// Re-reads the file every `every` and compares its content with the last one read (not its
/// modification time and length: an edit of the same length within one mtime tick, or a copy
/// that keeps the old mtime, is seen too). A read error is logged once until it changes.
async fn poll_file(inner: Weak<Inner>, path: PathBuf, every: Duration, text: String) {
    let mut last_text = Some(text);
    let mut last_error: Option<String> = None;
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else { return };
        let text = match read_limited(&path) {
            Ok(t) => {
                last_error = None;
                t
            }
            Err(e) => {
                let e = e.to_string();
                if last_error.as_ref() != Some(&e) {
                    warn!(file = %path.display(), "cannot read static registry file, keeping the previous list: {e}");
                    last_error = Some(e);
                }
                continue;
            }
        };
        if last_text.as_deref() == Some(text.as_str()) {
            continue;
        }
        last_text = Some(text.clone());
        match parse_yaml(&text, &path.display().to_string()) {
            Ok((list, errors)) => {
                for e in &errors {
                    warn!(file = %path.display(), "skipping static entry: {e}");
                }
                info!(file = %path.display(), instances = list.len(), skipped = errors.len(), "static registry file reloaded");
                inner.list.send_replace(Arc::new(list));
            }
            Err(e) => {
                warn!(file = %path.display(), "static registry file rejected, keeping the previous list: {e}");
                inner
                    .rejected
                    .fetch_add(1, std::sync::atomic::Ordering::Release);
            }
        }
    }
}

fn read_limited(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::bad_config(format!("{}: {e}", path.display())))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(Error::bad_config(format!(
            "{}: {} bytes is larger than the {MAX_FILE_BYTES}-byte limit",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| Error::bad_config(format!("{}: {e}", path.display())))
}

/// A static registry file is read within these: a whole [`MAX_FILE_BYTES`] file, and the
/// nodes of that many bytes of short records (`- {address: 10.0.0.1:80}` is 4 nodes in 25
/// bytes); depth as [`Limits::DEFAULT`].
const YAML_LIMITS: Limits = Limits {
    max_bytes: MAX_FILE_BYTES as usize,
    max_nodes: 400_000,
    ..Limits::DEFAULT
};

#[derive(Deserialize)]
#[serde(untagged)]
enum FileShape {
    List(Vec<Value>),
    Doc { providers: Vec<Value> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    address: String,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    weight: Option<Value>,
    #[serde(default, alias = "interface")]
    service: Option<String>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    metadata: std::collections::BTreeMap<String, Value>,
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn record_to_instance(r: Record) -> std::result::Result<Instance, String> {
    let protocol = r.protocol.unwrap_or_else(|| "http".into());
    let base = Url::parse(&format!("{protocol}://{}", r.address))
        .map_err(|e| format!("bad address {:?}: {}", r.address, e.reason))?;
    if base.port().is_none() || !base.path().is_empty() || !base.params().is_empty() {
        return Err(format!("bad address {:?}: expected host:port", r.address));
    }
    let mut url = Url::new(
        &protocol,
        base.host(),
        base.port(),
        r.path.as_deref().unwrap_or(""),
    );
    for (k, v) in &r.metadata {
        let text = scalar_text(v)
            .ok_or_else(|| format!("metadata {k:?} must be a string, number or boolean"))?;
        url.set_param(k, &text);
    }
    if let Some(w) = &r.weight {
        url.set_param("weight", &scalar_text(w).ok_or("weight must be a number")?);
    }
    if let Some(s) = r.service {
        url.set_param("interface", &s);
    }
    if let Some(g) = r.group {
        url.set_param("group", &g);
    }
    if let Some(v) = r.version {
        url.set_param("version", &v);
    }
    Instance::from_url(&url).map_err(|e| e.message().to_string())
}

/// Line numbers of the items of the first block list at the top level or under `providers:`.
fn item_lines(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_start().starts_with("providers:"))
        .map(|p| p + 1)
        .unwrap_or(0);
    let is_item = |l: &str| {
        let t = l.trim_start();
        t == "-" || t.starts_with("- ")
    };
    let Some(first) = (start..lines.len()).find(|&i| is_item(lines[i])) else {
        return Vec::new();
    };
    let indent = lines[first].len() - lines[first].trim_start().len();
    (first..lines.len())
        .filter(|&i| is_item(lines[i]) && lines[i].len() - lines[i].trim_start().len() == indent)
        .map(|i| i + 1)
        .collect()
}

/// Parses a static registry document. Returns the good instances and one error per bad entry;
/// fails only when the text is not a YAML list of entries at all.
pub fn parse_yaml(text: &str, source: &str) -> Result<(Vec<Instance>, Vec<EntryError>)> {
    if text.trim().is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    // Bounded (switchman_core::yaml), with room for a whole file of records.
    let shape: FileShape =
        yaml::from_str_with(text, source, &YAML_LIMITS).map_err(|e| match e.limit() {
            Some(_) => Error::from(e),
            None => Error::bad_config(format!(
                "{source}: not a list of providers (or a `providers:` list): {}",
                e.detail()
            )),
        })?;
    let items = match shape {
        FileShape::List(l) | FileShape::Doc { providers: l } => l,
    };
    let lines = item_lines(text);
    let count = items.len();
    let line_of = |k: usize| {
        if lines.len() == count { lines[k] } else { 0 }
    };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (k, item) in items.into_iter().enumerate() {
        let res = match &item {
            Value::String(s) => Url::parse(s.trim())
                .map_err(|e| e.to_string())
                .and_then(|u| Instance::from_url(&u).map_err(|e| e.message().to_string())),
            Value::Mapping(_) => yaml::from_value::<Record>(item)
                .map_err(|e| format!("bad record: {e}"))
                .and_then(record_to_instance),
            _ => Err("an entry must be a URL string or a record with `address`".to_string()),
        };
        match res {
            Ok(i) => out.push(i),
            Err(message) => errors.push(EntryError {
                line: line_of(k),
                message,
            }),
        }
    }
    Ok((out, errors))
}

impl Registry for StaticRegistry {
    fn subscribe<'a>(&'a self, service: &'a ServiceKey) -> BoxFuture<'a, Result<UpdateReceiver>> {
        let mut rx = self.inner.list.subscribe();
        let service = service.clone();
        Box::pin(async move {
            let (tx, out) = mpsc::channel(16);
            let accepts = move |i: &Instance| {
                i.service().interface.is_empty() || service.accepts(i.service())
            };
            // The whole list first, then only what changed against the list last sent.
            // The registry's own list when every entry is for this service (no copy).
            let current = move |rx: &mut watch::Receiver<Arc<Vec<Instance>>>| {
                let list = rx.borrow_and_update().clone();
                if list.iter().all(&accepts) {
                    list
                } else {
                    Arc::new(list.iter().filter(|i| accepts(i)).cloned().collect())
                }
            };
            let mut last = current(&mut rx);
            tx.send(Update::reset(last.iter().cloned())).await.ok();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        changed = rx.changed() => {
                            if changed.is_err() {
                                return;
                            }
                            let now = current(&mut rx);
                            for update in changes(&last, &now) {
                                if tx.send(update).await.is_err() {
                                    return;
                                }
                            }
                            free_after_yield(std::mem::replace(&mut last, now)).await;
                        }
                        _ = tx.closed() => return,
                    }
                }
            });
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls_and_records_and_reports_bad_lines() {
        let text = "\
providers:
  - dubbo://10.0.0.1:20880/com.foo.Bar?weight=30
  - address: 10.0.0.2:8080
    weight: 50
    metadata: { zone: b, dubbo.tag: gray }
  - not a url
  - address: '[::1]:9000'
    protocol: tri
  - address: 10.0.0.9
  - dubbo://10.0.0.3:20880/com.foo.Bar?weight=heavy
";
        let (ok, errs) = parse_yaml(text, "t.yaml").unwrap();
        assert_eq!(
            ok.iter().map(|i| i.address()).collect::<Vec<_>>(),
            vec!["10.0.0.1:20880", "10.0.0.2:8080", "[::1]:9000"]
        );
        assert_eq!(ok[0].weight(), 30);
        assert_eq!(ok[1].weight(), 50);
        assert_eq!(ok[1].zone(), Some("b"));
        assert_eq!(ok[1].tag(), Some("gray"));
        assert_eq!(
            errs.iter().map(|e| e.line).collect::<Vec<_>>(),
            vec![6, 9, 10]
        );
        assert!(errs[0].message.contains("missing '://'"), "{}", errs[0]);
        assert!(
            errs[1].message.contains("expected host:port"),
            "{}",
            errs[1]
        );
        assert!(errs[2].message.contains("weight=\"heavy\""), "{}", errs[2]);
    }

    #[test]
    fn bare_list_and_garbage() {
        let (ok, errs) = parse_yaml("- http://a:1\n- http://b:2\n", "t").unwrap();
        assert_eq!(ok.len(), 2);
        assert!(errs.is_empty());
        let e = parse_yaml("providers: 7\n", "t.yaml").unwrap_err();
        assert!(e.to_string().contains("t.yaml"), "{e}");
    }

    #[tokio::test]
    async fn subscribers_get_the_whole_list_then_its_changes() {
        let key = ServiceKey::new("com.foo.Bar");
        let reg = StaticRegistry::new(vec![Instance::builder("h", 1).build()]);
        let mut rx = reg.subscribe(&key).await.unwrap();
        assert!(matches!(rx.recv().await, Some(Update::Reset(l)) if l.len() == 1));
        reg.update(|l| l.push(Instance::builder("h", 2).weight(5).build()));
        match rx.recv().await {
            Some(Update::Add(l)) => assert_eq!((l.len(), l[0].weight()), (1, 5)),
            other => panic!("{other:?}"),
        }
        reg.update(|l| l.retain(|i| i.port() == 2));
        match rx.recv().await {
            Some(Update::Remove(gone)) => {
                assert_eq!(gone, [Instance::builder("h", 1).build().key().to_string()])
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn file_edits_apply_and_bad_edits_keep_the_previous_list() {
        let dir = std::env::temp_dir().join(format!("switchman-static-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("providers.yaml");
        std::fs::write(&path, "- http://10.0.0.1:1?weight=10\n").unwrap();
        let reg = StaticRegistry::from_file(&path, Duration::from_millis(20)).unwrap();
        let mut rx = reg.subscribe(&ServiceKey::new("x")).await.unwrap();
        assert!(matches!(rx.recv().await, Some(Update::Reset(l)) if l[0].weight() == 10));
        std::fs::write(
            &path,
            "- http://10.0.0.1:1?weight=90\n- http://10.0.0.2:1\n",
        )
        .unwrap();
        match tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
        {
            Some(Update::Add(mut l)) => {
                l.sort_by_key(|i| i.address().to_string());
                assert_eq!((l.len(), l[0].weight()), (2, 90))
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(&path, "providers: [unclosed\n").unwrap();
        // Barrier: the poller read the broken version and rejected it.
        tokio::time::timeout(Duration::from_secs(5), async {
            while reg
                .inner
                .rejected
                .load(std::sync::atomic::Ordering::Acquire)
                == 0
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the broken file is read and rejected");
        assert_eq!(
            reg.instances().len(),
            2,
            "a broken file must not replace the list"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[tokio::test]
    async fn a_same_length_edit_that_keeps_the_mtime_is_seen() {
        let dir =
            std::env::temp_dir().join(format!("switchman-static-mtime-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("providers.yaml");
        std::fs::write(&path, "- http://10.0.0.1:1?weight=10\n").unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let reg = StaticRegistry::from_file(&path, Duration::from_millis(20)).unwrap();
        let mut rx = reg.subscribe(&ServiceKey::new("x")).await.unwrap();
        assert!(matches!(rx.recv().await, Some(Update::Reset(l)) if l[0].weight() == 10));
        // Same length, and the modification time put back: only the content tells.
        std::fs::write(&path, "- http://10.0.0.1:1?weight=20\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        match tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("the edit is seen")
        {
            Some(Update::Add(l)) => assert_eq!(l[0].weight(), 20),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
