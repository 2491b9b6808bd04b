//! The tuning database: one human-readable JSON file per (op signature,
//! shapes, dtypes, architecture, compiler version, configuration, method),
//! under `.tessera/cache/tune/` (or `$TESSERA_CACHE_DIR/tune/`).
//!
//! A graph's key is the digest of the compiler's identity, the
//! architecture and the graph's text form at concrete shapes (which names
//! the op, every shape and dtype): `tune/KEY/CONFIG-METHOD.json`. Each
//! entry carries a checksum of its fields; a damaged entry is reported and
//! skipped, never deleted. Writes go to a temporary file renamed into
//! place, so readers and concurrent tuners never see half an entry, and
//! adding a configuration to a space measures only that configuration.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tessera_core::{Arch, Knobs};
use tessera_graph::Graph;
use tessera_schedule::space::Tunings;
use tessera_schedule::{Choice, ConfigSource};

/// The entry format this compiler writes and reads.
pub const FORMAT: u32 = 1;

/// The tuning directory under a cache directory.
pub fn tune_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("tune")
}

/// The key of graph `g` (at concrete shapes) on `arch`: see the module
/// docs. Parameters are named by position (a call from host code names
/// them `arg0`, `arg1`, ...; the op's declaration by their names).
pub fn key(g: &Graph, arch: &Arch) -> String {
    let mut g = g.clone();
    for (i, p) in g.params.iter_mut().enumerate() {
        p.name = format!("arg{i}");
    }
    let text = format!(
        "{}\n{}\n{}",
        tessera_launch::compiler_id(),
        arch.name,
        tessera_graph::print_graph(&g)
    );
    tessera_launch::cache::digest(text.as_bytes())
}

/// How an entry ranked its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Timed on a GPU.
    Measured,
    /// Estimated by the cost model.
    Model,
}

impl Method {
    /// `measured` or `model`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Measured => "measured",
            Method::Model => "model",
        }
    }
}

/// What one configuration gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome {
    /// It ran (or would run, by the model) in this many milliseconds.
    Ok {
        /// Milliseconds: the median of the repetitions, or the model's.
        ms: f64,
    },
    /// It cannot be used: why.
    Rejected {
        /// The reason (`spills 64 bytes`, `wrong results: ...`).
        reason: String,
    },
}

/// One database entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// [`FORMAT`].
    pub format: u32,
    /// [`key`] of the graph.
    pub key: String,
    /// The op or kernel.
    pub op: String,
    /// Its parameters' shapes and dtypes, as written (`a: bf16[64, 64]`).
    pub shapes: String,
    /// The architecture.
    pub arch: String,
    /// The compiler's identity.
    pub compiler: String,
    /// The configuration ([`Knobs::to_text`]).
    pub config: String,
    /// The knobs it sets, for people (`bm = 64, warps = 4`).
    pub point: String,
    /// How it was ranked.
    pub method: Method,
    /// What it gave.
    pub outcome: Outcome,
    /// The cost model's and the assembler's figures (registers, shared
    /// memory, occupancy, waves, what bounds it), for `--show`.
    #[serde(default)]
    pub notes: String,
    /// The digest of every other field.
    #[serde(default)]
    pub checksum: String,
}

impl Entry {
    /// The checksum of the entry's fields but the checksum.
    pub fn compute_checksum(&self) -> String {
        let mut e = self.clone();
        e.checksum = String::new();
        let text = serde_json::to_string(&e).unwrap_or_default();
        tessera_launch::cache::digest(text.as_bytes())
    }

    /// The entry with its checksum set. Its numbers are first taken as
    /// they read back from JSON, so that the checksum of what is read is
    /// the checksum of what was written.
    pub fn sealed(self) -> Entry {
        let mut e = serde_json::to_string(&self)
            .ok()
            .and_then(|t| serde_json::from_str::<Entry>(&t).ok())
            .unwrap_or(self);
        e.checksum = e.compute_checksum();
        e
    }

    /// Why the entry is unusable, if it is: a wrong format or checksum,
    /// or configuration text that does not read back.
    pub fn validate(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!(
                "format {} (this compiler reads {FORMAT})",
                self.format
            ));
        }
        if self.checksum != self.compute_checksum() {
            return Err("its checksum does not match its contents".into());
        }
        Knobs::parse(&self.config).map(|_| ())
    }

    /// Milliseconds, unless rejected.
    pub fn ms(&self) -> Option<f64> {
        match self.outcome {
            Outcome::Ok { ms } => Some(ms),
            Outcome::Rejected { .. } => None,
        }
    }

    /// `measured 0.84 ms on sm_90`, `model 1.20 ms on sm_90`, or
    /// `rejected: why`.
    pub fn result(&self) -> String {
        match &self.outcome {
            Outcome::Ok { ms } => {
                format!("{} {} on {}", self.method.name(), fmt_ms(*ms), self.arch)
            }
            Outcome::Rejected { reason } => format!("rejected: {reason}"),
        }
    }

    /// The configuration as a scheduler choice, named by where it came from.
    pub fn choice(&self) -> Option<Choice> {
        Some(Choice {
            knobs: Knobs::parse(&self.config).ok()?,
            source: ConfigSource::Database {
                point: self.point.clone(),
                result: self.result(),
            },
            tensor_cores_at: None,
        })
    }

    /// The file name within its key's directory.
    fn file_name(&self) -> String {
        let config = tessera_launch::cache::digest(self.config.as_bytes());
        format!("{}-{}.json", &config[..16], self.method.name())
    }
}

/// Milliseconds with three significant digits (`0.842 ms`, `12.4 ms`).
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// The point name of the configuration an op gets untuned.
pub const UNTUNED: &str = "untuned";

/// How two usable entries of one method rank: faster first; on a tie the
/// untuned configuration (a change must earn its place), then the
/// configuration whose text sorts first, so every reader picks the same.
pub fn rank(a: &Entry, b: &Entry) -> std::cmp::Ordering {
    a.ms()
        .partial_cmp(&b.ms())
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| (a.point != UNTUNED).cmp(&(b.point != UNTUNED)))
        .then_with(|| a.config.cmp(&b.config))
}

/// The best of `entries`: the fastest measured one if any was measured,
/// else the fastest by the model (ties: see [`rank`]).
pub fn best<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Option<&'a Entry> {
    let usable: Vec<&Entry> = entries.into_iter().filter(|e| e.ms().is_some()).collect();
    let fastest = |m: Method| {
        usable
            .iter()
            .copied()
            .filter(|e| e.method == m)
            .min_by(|a, b| rank(a, b))
    };
    fastest(Method::Measured).or_else(|| fastest(Method::Model))
}

/// The database in a directory, with what was read of it memoised per key.
pub struct Db {
    dir: PathBuf,
    memo: Mutex<HashMap<String, Vec<Entry>>>,
    warnings: Mutex<Vec<String>>,
}

impl Db {
    /// The database in `dir` (created when first written).
    pub fn open(dir: impl Into<PathBuf>) -> Db {
        Db {
            dir: dir.into(),
            memo: Mutex::new(HashMap::new()),
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The warnings so far (damaged entries skipped), emptied.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn warn(&self, w: String) {
        let mut ws = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if !ws.contains(&w) {
            ws.push(w);
        }
    }

    /// Every valid entry of `key` (damaged ones are warnings).
    pub fn entries(&self, key: &str) -> Vec<Entry> {
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = memo.get(key) {
            return e.clone();
        }
        let entries = self.read_dir(&self.dir.join(key));
        memo.insert(key.to_owned(), entries.clone());
        entries
    }

    /// The valid entries in one key's directory, by file name.
    fn read_dir(&self, dir: &Path) -> Vec<Entry> {
        let Ok(read) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = read
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter(|p| p.file_name().is_none_or(|n| n != BEST))
            .collect();
        files.sort();
        files.iter().filter_map(|p| self.read_entry(p)).collect()
    }

    fn read_entry(&self, path: &Path) -> Option<Entry> {
        let parsed = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Entry>(&b).map_err(|e| e.to_string()))
            .and_then(|e| e.validate().map(|()| e));
        match parsed {
            Ok(e) => Some(e),
            Err(why) => {
                self.warn(format!(
                    "tuning entry `{}` is damaged ({why}); it is ignored (remove it, or tune again to replace it)",
                    path.display()
                ));
                None
            }
        }
    }

    /// The entry of `key` for `config` ranked by `method`, if any.
    pub fn get(&self, key: &str, config: &str, method: Method) -> Option<Entry> {
        self.entries(key)
            .into_iter()
            .find(|e| e.config == config && e.method == method)
    }

    /// The best entry of `key` (see [`best`]): from the entries read in
    /// this process if any, else from the key's [`BEST`] file alone (one
    /// small read at start-up), else from all its entries.
    pub fn best(&self, key: &str) -> Option<Entry> {
        let memoised = self
            .memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(key);
        if !memoised {
            let path = self.dir.join(key).join(BEST);
            if path.is_file() {
                if let Some(e) = self.read_entry(&path).filter(|e| e.key == key) {
                    return Some(e);
                }
            }
        }
        best(&self.entries(key)).cloned()
    }

    /// Rewrites `key`'s [`BEST`] file from every entry on disk now (what
    /// every tuner wrote, not only this one), or removes it when none is
    /// usable.
    pub fn index(&self, key: &str) -> Result<(), String> {
        let dir = self.dir.join(key);
        match best(&self.read_dir(&dir)) {
            Some(b) => write_atomically(&dir, BEST, &b.clone().sealed()),
            None => match std::fs::remove_file(dir.join(BEST)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("cannot remove `{}`: {e}", dir.join(BEST).display()))
                }
                _ => Ok(()),
            },
        }
    }

    /// Writes `e` (sealed) atomically: a temporary file renamed into place.
    pub fn put(&self, e: &Entry) -> Result<(), String> {
        let e = e.clone().sealed();
        write_atomically(&self.dir.join(&e.key), &e.file_name(), &e)?;
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = memo.get_mut(&e.key) {
            list.retain(|x| !(x.config == e.config && x.method == e.method));
            list.push(e);
        }
        Ok(())
    }

    /// Every valid entry of every key.
    pub fn all(&self) -> Vec<Entry> {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut keys: Vec<PathBuf> = read
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        keys.sort();
        keys.iter().flat_map(|k| self.read_dir(k)).collect()
    }

    /// The export file's text: every valid entry.
    pub fn export(&self) -> String {
        let file = Export {
            tessera_tune_export: FORMAT,
            entries: self.all(),
        };
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n"
    }

    /// Imports an export file's text: each valid entry not already here
    /// is written. Returns (written, already present, refused with why).
    pub fn import(&self, text: &str) -> Result<(usize, usize, Vec<String>), String> {
        let file: Export = serde_json::from_str(text)
            .map_err(|e| format!("not a tuning export (tsrc tune --export): {e}"))?;
        if file.tessera_tune_export != FORMAT {
            return Err(format!(
                "a tuning export of format {} (this compiler reads {FORMAT})",
                file.tessera_tune_export
            ));
        }
        let (mut written, mut present, mut refused) = (0, 0, Vec::new());
        let mut keys: Vec<String> = Vec::new();
        for e in file.entries {
            if let Err(why) = e.validate() {
                refused.push(format!("`{}` ({}) for {}: {why}", e.op, e.point, e.arch));
                continue;
            }
            if self.get(&e.key, &e.config, e.method).as_ref() == Some(&e) {
                present += 1;
                continue;
            }
            self.put(&e)?;
            if !keys.contains(&e.key) {
                keys.push(e.key.clone());
            }
            written += 1;
        }
        for k in &keys {
            self.index(k)?;
        }
        Ok((written, present, refused))
    }
}

/// The file in a key's directory holding a copy of its best entry.
pub const BEST: &str = "best.json";

/// Writes `e` as `dir/name` through a temporary file renamed into place.
fn write_atomically(dir: &Path, name: &str, e: &Entry) -> Result<(), String> {
    let path = dir.join(name);
    let fail =
        |what: &str, err: std::io::Error| format!("cannot {what} `{}`: {err}", path.display());
    std::fs::create_dir_all(dir).map_err(|err| fail("create the directory of", err))?;
    let text = serde_json::to_string_pretty(e).map_err(|err| err.to_string())? + "\n";
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|err| fail("write", err))?;
    std::fs::rename(&tmp, &path).map_err(|err| {
        let _ = std::fs::remove_file(&tmp);
        fail("write", err)
    })
}

/// The export file.
#[derive(Serialize, Deserialize)]
struct Export {
    tessera_tune_export: u32,
    entries: Vec<Entry>,
}

impl Tunings for Db {
    fn lookup(&self, g: &Graph, arch: &Arch) -> Option<Choice> {
        self.best(&key(g, arch))?.choice()
    }
}

/// Tuned choices carried by value: what an executable embeds, by key.
#[derive(Clone, Debug, Default)]
pub struct Embedded {
    /// Key and best entry.
    pub entries: Vec<(String, Entry)>,
}

impl Tunings for Embedded {
    fn lookup(&self, g: &Graph, arch: &Arch) -> Option<Choice> {
        let k = key(g, arch);
        self.entries.iter().find(|(key, _)| *key == k)?.1.choice()
    }
}

/// A database lookup that remembers what it found, for an executable to
/// embed the configurations its kernels were compiled with.
pub struct Recording<'d> {
    /// The database.
    pub db: &'d Db,
    /// The entries found, by key.
    pub found: Mutex<Vec<(String, Entry)>>,
}

impl Tunings for Recording<'_> {
    fn lookup(&self, g: &Graph, arch: &Arch) -> Option<Choice> {
        let k = key(g, arch);
        let e = self.db.best(&k)?;
        let mut found = self.found.lock().unwrap_or_else(|e| e.into_inner());
        if !found.iter().any(|(x, _)| *x == k) {
            found.push((k, e.clone()));
        }
        e.choice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-tune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn entry(config: &Knobs, method: Method, outcome: Outcome) -> Entry {
        Entry {
            format: FORMAT,
            key: "k".repeat(64),
            op: "mm".into(),
            shapes: "a: bf16[64, 64]".into(),
            arch: "sm_90".into(),
            compiler: "tessera test".into(),
            config: config.to_text(),
            point: format!("warps = {}", config.warps),
            method,
            outcome,
            notes: String::new(),
            checksum: String::new(),
        }
    }

    fn knobs(warps: u64) -> Knobs {
        Knobs {
            warps,
            ..Knobs::unset(true)
        }
    }

    #[test]
    fn entries_round_trip_and_the_best_prefers_measurements() {
        let dir = scratch("round-trip");
        let db = Db::open(&dir);
        let model_fast = entry(&knobs(4), Method::Model, Outcome::Ok { ms: 0.5 });
        let measured = entry(&knobs(8), Method::Measured, Outcome::Ok { ms: 0.9 });
        let rejected = entry(
            &knobs(2),
            Method::Measured,
            Outcome::Rejected {
                reason: "spills 64 bytes".into(),
            },
        );
        for e in [&model_fast, &measured, &rejected] {
            db.put(e).unwrap();
        }
        let again = Db::open(&dir);
        let key = "k".repeat(64);
        assert_eq!(again.entries(&key).len(), 3);
        let best = again.best(&key).unwrap();
        assert_eq!(best.config, knobs(8).to_text());
        assert_eq!(best.result(), "measured 0.900 ms on sm_90");
        assert!(matches!(
            best.choice().unwrap().source,
            ConfigSource::Database { .. }
        ));
        // The best is kept alone too: a lookup in a fresh process reads
        // that file only.
        again.index(&key).unwrap();
        for f in std::fs::read_dir(dir.join(&key)).unwrap().flatten() {
            if f.file_name() != BEST {
                std::fs::remove_file(f.path()).unwrap();
            }
        }
        assert_eq!(
            Db::open(&dir).best(&key).unwrap().config,
            knobs(8).to_text()
        );
        // With no usable entry the file goes.
        Db::open(&dir).index(&key).unwrap();
        assert!(!dir.join(&key).join(BEST).exists());
        // A tie goes to the untuned configuration.
        let mut tied = entry(&knobs(16), Method::Model, Outcome::Ok { ms: 0.5 });
        tied.point = UNTUNED.into();
        let pair = [model_fast.clone(), tied.clone()];
        assert_eq!(super::best(&pair), Some(&tied));
        // Only model entries: the fastest by the model.
        let only_model = [model_fast.clone()];
        assert_eq!(super::best(&only_model), Some(&model_fast));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn damaged_entries_are_warnings_and_stay_on_disk() {
        let dir = scratch("damaged");
        let db = Db::open(&dir);
        let e = entry(&knobs(4), Method::Model, Outcome::Ok { ms: 1.0 });
        db.put(&e).unwrap();
        let key = "k".repeat(64);
        let file = std::fs::read_dir(dir.join(&key))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("1.0", "0.001");
        std::fs::write(&file, text).unwrap();
        std::fs::write(dir.join(&key).join("junk.json"), "{").unwrap();
        let again = Db::open(&dir);
        assert!(again.entries(&key).is_empty());
        let w = again.take_warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().any(|w| w.contains("checksum")));
        assert!(file.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn export_then_import_elsewhere_and_refuse_tampering() {
        let (a, b) = (scratch("export-a"), scratch("export-b"));
        let db = Db::open(&a);
        db.put(&entry(&knobs(4), Method::Model, Outcome::Ok { ms: 1.0 }))
            .unwrap();
        db.put(&entry(&knobs(8), Method::Model, Outcome::Ok { ms: 2.0 }))
            .unwrap();
        let text = db.export();
        let other = Db::open(&b);
        assert_eq!(other.import(&text).unwrap(), (2, 0, Vec::new()));
        assert_eq!(other.import(&text).unwrap(), (0, 2, Vec::new()));
        let tampered = text.replacen("\"ms\": 1.0", "\"ms\": 0.1", 1);
        let (w, p, refused) = Db::open(scratch("export-c")).import(&tampered).unwrap();
        assert_eq!((w, p, refused.len()), (1, 0, 1));
        assert!(Db::open(&b)
            .import("[1, 2]")
            .unwrap_err()
            .contains("not a tuning export"));
        for d in [a, b, scratch("export-c")] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn an_unwritable_directory_is_an_error_not_a_panic() {
        let dir = scratch("unwritable");
        std::fs::write(&dir, "a file where the directory should be").unwrap();
        let db = Db::open(&dir);
        let err = db
            .put(&entry(&knobs(4), Method::Model, Outcome::Ok { ms: 1.0 }))
            .unwrap_err();
        assert!(err.contains("cannot create"), "{err}");
        assert!(db.entries(&"k".repeat(64)).is_empty());
        let _ = std::fs::remove_file(&dir);
    }
}
