//! The kernel compile cache: the PTX of a program specialised for its
//! shapes and architecture, keyed by a hash of everything that affects it
//! (the program's Tile IR, which holds the kernels' code and schedule; the
//! architecture; the bound dimensions; source positions for `.loc`; the
//! compiler's identity).
//!
//! Lookups go to this process's memo, then to entries embedded in an
//! executable, then to `.tessera/cache/` on disk. Disk entries carry their
//! key, length and checksum: a damaged entry is reported as a warning and
//! rebuilt. Writes go to a temporary file renamed into place, so readers
//! never see half an entry and concurrent writers are harmless.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The default cache directory, relative to the working directory.
pub const DEFAULT_DIR: &str = ".tessera/cache";

const HEADER: &str = "tessera-cache 1";

/// The BLAKE3 hash of `bytes` as 64 hex digits: stable across runs and
/// platforms, and collision-resistant, so that two programs never share a
/// key (a collision would hand one program the other's PTX).
pub fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Whether `name` is the file name of a cache entry or of one being
/// written (what [`clean`] may remove).
fn is_entry_name(name: &str) -> bool {
    let key = |k: &str| k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(k) = name.strip_suffix(".ptx") {
        return key(k);
    }
    name.strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.split_once('.'))
        .is_some_and(|(k, _)| key(k))
}

/// Removes the cache entries in `dir` and nothing else (the directory too
/// when that leaves it empty); returns how many entries went. A directory
/// that holds other files keeps them: `TESSERA_CACHE_DIR` may name any
/// directory, and cleaning must never delete what the cache did not write.
pub fn clean(dir: &Path) -> std::io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for e in entries {
        let e = e?;
        let name = e.file_name();
        if !is_entry_name(&name.to_string_lossy()) {
            continue;
        }
        let path = e.path();
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        removed += 1;
    }
    // Only an empty directory goes; anything else in it stays.
    let _ = std::fs::remove_dir(dir);
    Ok(removed)
}

/// How lookups went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Found in this process's memo.
    pub memo_hits: u32,
    /// Found among an executable's embedded kernels.
    pub embedded_hits: u32,
    /// Read back from disk.
    pub disk_hits: u32,
    /// Compiled.
    pub misses: u32,
    /// Damaged disk entries rebuilt.
    pub repaired: u32,
}

/// A compile cache.
#[derive(Debug, Default)]
pub struct KernelCache {
    dir: Option<PathBuf>,
    embedded: HashMap<String, String>,
    memo: Mutex<HashMap<String, String>>,
    stats: Mutex<CacheStats>,
    warnings: Mutex<Vec<String>>,
}

impl KernelCache {
    /// A cache kept in this process only.
    pub fn in_memory() -> KernelCache {
        KernelCache::default()
    }

    /// A cache that also keeps entries in `dir` (created when first
    /// written).
    pub fn on_disk(dir: impl Into<PathBuf>) -> KernelCache {
        KernelCache {
            dir: Some(dir.into()),
            ..KernelCache::default()
        }
    }

    /// Adds entries compiled ahead of time (an executable's kernels).
    pub fn with_embedded(mut self, entries: impl IntoIterator<Item = (String, String)>) -> Self {
        self.embedded.extend(entries);
        self
    }

    /// The disk directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// How lookups went so far.
    pub fn stats(&self) -> CacheStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Warnings about damaged or unwritable entries since the last call.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Every entry this process compiled or found, by key (what an
    /// executable embeds).
    pub fn entries(&self) -> Vec<(String, String)> {
        let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, String)> =
            memo.iter().map(|(k, p)| (k.clone(), p.clone())).collect();
        v.sort();
        v
    }

    fn count(&self, f: impl FnOnce(&mut CacheStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn warn(&self, w: String) {
        self.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w);
    }

    /// The entry for `key`, compiled with `make` on a miss.
    pub fn get_or_compile(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<String, String>,
    ) -> Result<String, String> {
        if let Some(v) = self.memo.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
            self.count(|s| s.memo_hits += 1);
            return Ok(v.clone());
        }
        let found = if let Some(v) = self.embedded.get(key) {
            self.count(|s| s.embedded_hits += 1);
            Some(v.clone())
        } else {
            self.read(key)
        };
        let value = match found {
            Some(v) => v,
            None => {
                let v = make()?;
                self.count(|s| s.misses += 1);
                self.write(key, &v);
                v
            }
        };
        self.memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned(), value.clone());
        Ok(value)
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{key}.ptx")))
    }

    /// A valid disk entry; a damaged one is reported and treated as absent.
    fn read(&self, key: &str) -> Option<String> {
        let path = self.path(key)?;
        // Not a regular file (a directory, a FIFO that would block the
        // read): damaged, and replaced when the entry is written.
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Ok(m) if !m.file_type().is_file() => {
                self.count(|s| s.repaired += 1);
                self.warn(format!(
                    "cache entry `{}` is not a regular file; rebuilding it",
                    path.display()
                ));
                return None;
            }
            _ => {}
        }
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                self.warn(format!(
                    "cannot read cache entry `{}`: {e}; rebuilding it",
                    path.display()
                ));
                return None;
            }
        };
        match parse(&bytes, key) {
            Ok(v) => {
                self.count(|s| s.disk_hits += 1);
                Some(v)
            }
            Err(why) => {
                self.count(|s| s.repaired += 1);
                self.warn(format!(
                    "cache entry `{}` is damaged ({why}); rebuilding it",
                    path.display()
                ));
                None
            }
        }
    }

    fn write(&self, key: &str, value: &str) {
        let Some(path) = self.path(key) else { return };
        let result = (|| -> std::io::Result<()> {
            let dir = path.parent().expect("entries live in the cache directory");
            std::fs::create_dir_all(dir)?;
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let tmp = dir.join(format!(".{key}.{}-{nanos}.tmp", std::process::id()));
            std::fs::write(&tmp, entry(key, value))?;
            // A directory in the entry's place would refuse the rename.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_dir()) {
                let _ = std::fs::remove_dir_all(&path);
            }
            std::fs::rename(&tmp, &path).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
        })();
        if let Err(e) = result {
            self.warn(format!(
                "cannot write cache entry `{}`: {e}",
                path.display()
            ));
        }
    }
}

/// The bytes of a disk entry.
fn entry(key: &str, value: &str) -> Vec<u8> {
    format!(
        "{HEADER}\nkey {key}\nlength {}\nchecksum {}\n\n{value}",
        value.len(),
        digest(value.as_bytes())
    )
    .into_bytes()
}

/// The value of a disk entry, or why it is damaged.
fn parse(bytes: &[u8], key: &str) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let (head, value) = text.split_once("\n\n").ok_or("no header")?;
    let mut lines = head.lines();
    if lines.next() != Some(HEADER) {
        return Err("unknown header".into());
    }
    let mut field = |name: &str| -> Result<String, String> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|l| l.strip_prefix(' '))
            .map(str::to_owned)
            .ok_or_else(|| format!("no `{name}` line"))
    };
    if field("key")? != key {
        return Err("it holds another key".into());
    }
    let len: usize = field("length")?.parse().map_err(|_| "bad length")?;
    let sum = field("checksum")?;
    if value.len() != len {
        return Err(format!("{} bytes where {len} were written", value.len()));
    }
    if digest(value.as_bytes()) != sum {
        return Err("checksum mismatch".into());
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn miss_then_hit_in_memory_and_on_disk() {
        let dir = scratch("hit");
        let c = KernelCache::on_disk(&dir);
        let mut calls = 0;
        let mut make = || {
            calls += 1;
            Ok("ptx".to_owned())
        };
        assert_eq!(c.get_or_compile("k1", &mut make).unwrap(), "ptx");
        assert_eq!(c.get_or_compile("k1", &mut make).unwrap(), "ptx");
        assert_eq!(calls, 1);
        assert_eq!(c.stats().misses, 1);
        assert_eq!(c.stats().memo_hits, 1);
        // A new process (a new cache on the same directory) reads it back.
        let again = KernelCache::on_disk(&dir);
        let v = again
            .get_or_compile("k1", || Err("must not compile".into()))
            .unwrap();
        assert_eq!(v, "ptx");
        assert_eq!(again.stats().disk_hits, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn damaged_entries_are_rebuilt_with_a_warning() {
        let dir = scratch("damaged");
        let c = KernelCache::on_disk(&dir);
        c.get_or_compile("k", || Ok("a".repeat(100))).unwrap();
        let path = dir.join("k.ptx");
        let whole = std::fs::read(&path).unwrap();
        for damaged in [
            whole[..whole.len() - 10].to_vec(),
            whole
                .iter()
                .map(|b| if *b == b'a' { b'b' } else { *b })
                .collect(),
            b"garbage".to_vec(),
            Vec::new(),
        ] {
            std::fs::write(&path, &damaged).unwrap();
            let fresh = KernelCache::on_disk(&dir);
            let v = fresh.get_or_compile("k", || Ok("a".repeat(100))).unwrap();
            assert_eq!(v, "a".repeat(100));
            assert_eq!(fresh.stats().repaired, 1);
            let w = fresh.take_warnings();
            assert!(w.len() == 1 && w[0].contains("damaged"), "{w:?}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                whole,
                "the entry is rewritten"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_are_blake3() {
        // The BLAKE3 test vector of the empty input.
        assert_eq!(
            digest(b""),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_ne!(digest(b"a"), digest(b"b"));
    }

    #[test]
    fn clean_removes_entries_and_nothing_else() {
        let dir = scratch("clean");
        let c = KernelCache::on_disk(&dir);
        for i in 0..3 {
            c.get_or_compile(&digest(&[i]), || Ok("ptx".into()))
                .unwrap();
        }
        // Somebody else's file in a directory TESSERA_CACHE_DIR names.
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        std::fs::write(dir.join(format!(".{}.1-2.tmp", digest(b"t"))), "").unwrap();
        assert_eq!(clean(&dir).unwrap(), 4);
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, vec!["notes.txt".to_owned()]);
        // With only entries in it, the directory goes too.
        std::fs::remove_file(dir.join("notes.txt")).unwrap();
        c.get_or_compile(&digest(b"again"), || Ok("ptx".into()))
            .unwrap();
        let fresh = KernelCache::on_disk(&dir);
        fresh
            .get_or_compile(&digest(b"fresh"), || Ok("ptx".into()))
            .unwrap();
        assert_eq!(clean(&dir).unwrap(), 2);
        assert!(!dir.exists());
        assert_eq!(clean(&dir).unwrap(), 0);
    }

    #[test]
    fn entries_that_are_not_files_are_replaced() {
        let dir = scratch("not-files");
        std::fs::create_dir_all(dir.join("k.ptx/inner")).unwrap();
        let c = KernelCache::on_disk(&dir);
        assert_eq!(c.get_or_compile("k", || Ok("ptx".into())).unwrap(), "ptx");
        assert_eq!(c.stats().repaired, 1);
        assert!(dir.join("k.ptx").is_file(), "the directory is replaced");
        // A FIFO in an entry's place must not block the read.
        let fifo = dir.join("f.ptx");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let c = KernelCache::on_disk(&dir);
            assert_eq!(c.get_or_compile("f", || Ok("ptx".into())).unwrap(), "ptx");
            assert!(fifo.is_file(), "the FIFO is replaced");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_writers_leave_a_valid_entry() {
        let dir = scratch("race");
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let c = KernelCache::on_disk(&dir);
                    for i in 0..20 {
                        let v = c.get_or_compile(&format!("k{i}"), || {
                            Ok(format!("value {i}").repeat(1000))
                        });
                        assert_eq!(v.unwrap(), format!("value {i}").repeat(1000));
                    }
                });
            }
        });
        let c = KernelCache::on_disk(&dir);
        for i in 0..20 {
            let v = c.get_or_compile(&format!("k{i}"), || Err("must not compile".into()));
            assert_eq!(v.unwrap(), format!("value {i}").repeat(1000));
        }
        let leftovers = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(leftovers, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
