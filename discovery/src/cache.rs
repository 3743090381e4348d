//! The snapshot cache file: the last registry list of a service, saved on every change, so a
//! consumer can start and serve calls while its registry is down.
//!
//! Format: JSON `{"service": "...", "saved_at_ms": ..., "instances": ["<provider URL>", ...]}`.
//! The file is untrusted input when read back: size-limited, every entry parsed strictly, a bad
//! entry skipped with a log line, a bad file ignored (the directory then starts empty).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use switchman_core::{Error, Instance, Result, ServiceKey, Url};
use tracing::warn;

/// Largest cache file read back (16 MiB).
pub const MAX_CACHE_BYTES: u64 = 16 << 20;

#[derive(Debug, Serialize, Deserialize)]
struct CacheDoc {
    service: String,
    saved_at_ms: u64,
    instances: Vec<String>,
}

/// Loads the instances saved for `service` in `path`. `Ok(None)` when there is no file.
pub fn load(path: &Path, service: &ServiceKey) -> Result<Option<Vec<Instance>>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::bad_config(format!(
                "snapshot cache {}: {e}",
                path.display()
            )));
        }
    };
    if meta.len() > MAX_CACHE_BYTES {
        return Err(Error::bad_config(format!(
            "snapshot cache {}: {} bytes is over the {MAX_CACHE_BYTES}-byte limit",
            path.display(),
            meta.len()
        )));
    }
    let text = std::fs::read(path)
        .map_err(|e| Error::bad_config(format!("snapshot cache {}: {e}", path.display())))?;
    parse(&text, &path.display().to_string(), service).map(Some)
}

/// Parses the bytes of a cache file named `source` (for messages) holding `service`'s list.
/// Strict: a document that is not a cache file, or one saved for another service, is an error;
/// an entry that is not a valid provider URL is skipped with a log line. Never panics, whatever
/// the bytes (fuzzed: `fuzz/fuzz_targets/snapshot_file.rs`).
pub fn parse(bytes: &[u8], source: &str, service: &ServiceKey) -> Result<Vec<Instance>> {
    if bytes.len() as u64 > MAX_CACHE_BYTES {
        return Err(Error::bad_config(format!(
            "snapshot cache {source}: {} bytes is over the {MAX_CACHE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let doc: CacheDoc = serde_json::from_slice(bytes).map_err(|e| {
        Error::bad_config(format!(
            "snapshot cache {source}: not a snapshot cache file: {e}"
        ))
    })?;
    if doc.service != service.to_string() {
        return Err(Error::bad_config(format!(
            "snapshot cache {source} holds service {:?}, not {service}",
            doc.service
        )));
    }
    let mut out = Vec::with_capacity(doc.instances.len());
    for (k, entry) in doc.instances.iter().enumerate() {
        match Url::parse(entry)
            .map_err(|e| e.to_string())
            .and_then(|u| Instance::from_url(&u).map_err(|e| e.to_string()))
        {
            Ok(i) => out.push(i),
            Err(e) => warn!(file = source, entry = k, "skipping cached instance: {e}"),
        }
    }
    Ok(out)
}

/// The bytes of a cache file for `instances` (written by [`store`]).
pub fn encode<'a>(
    service: &ServiceKey,
    instances: impl IntoIterator<Item = &'a Instance>,
) -> Vec<u8> {
    let doc = CacheDoc {
        service: service.to_string(),
        saved_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        instances: instances
            .into_iter()
            .map(|i| i.to_url().to_string())
            .collect(),
    };
    serde_json::to_vec_pretty(&doc).unwrap_or_default()
}

/// Writes `bytes` to `path` atomically: a new temporary file beside it, renamed over it. The
/// file holds provider parameters, `token`s among them, so on Unix it is created readable and
/// writable by the owner only (0600), under a name no other user can predict, and never
/// through an existing file or link (`create_new`).
pub fn store(path: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let (tmp, mut file) = loop {
        let tmp = path.with_extension(format!("tmp-{:016x}", fastrand::u64(..)));
        match opts.open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let dir = std::env::temp_dir().join(format!("switchman-cache-test-{}", std::process::id()));
        let path = dir.join("svc.json");
        let key = ServiceKey::with("com.foo.Bar", "g", "1");
        let a = Instance::builder("10.0.0.1", 80)
            .service(key.clone())
            .weight(7)
            .zone("z")
            .build();
        store(&path, &encode(&key, [&a])).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "the cache holds tokens: owner only");
        }
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "svc.json")
            .collect();
        assert!(left.is_empty(), "no temporary file left: {left:?}");
        let back = load(&path, &key).unwrap().unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(
            (back[0].address(), back[0].weight(), back[0].zone()),
            ("10.0.0.1:80", 7, Some("z"))
        );
        assert!(
            load(&path, &ServiceKey::new("other"))
                .unwrap_err()
                .to_string()
                .contains("holds service")
        );
        std::fs::write(&path, "{not json").unwrap();
        assert!(
            load(&path, &key)
                .unwrap_err()
                .to_string()
                .contains("not a snapshot cache file")
        );
        std::fs::write(
            &path,
            r#"{"service":"g/com.foo.Bar:1","saved_at_ms":0,"instances":["bogus","http://h:1/x"]}"#,
        )
        .unwrap();
        assert_eq!(
            load(&path, &key).unwrap().unwrap().len(),
            1,
            "the bad entry is skipped"
        );
        assert!(load(&dir.join("missing.json"), &key).unwrap().is_none());
        std::fs::remove_dir_all(&dir).ok();
    }
}
