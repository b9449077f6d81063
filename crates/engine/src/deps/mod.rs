//! Dependency layers: what a layer is, in one place. A layer is an installed dependency
//! directory (`node_modules`, `.venv`, ...) stored once as a snapshot of its own and named
//! by a key: the directory's path, the ids of the lockfiles it pairs with, the operating
//! system and architecture (and, for a layer that only works where it was made, the
//! worktree's root). Here are the pairs, the keys, relocation of absolute paths, the
//! records (a side table of the store) and planning an attach; the verbs `deps save`,
//! `deps list` and `deps rm`, `checkout` and `mount` call this and re-derive nothing.
//!
//! Installer and runtime versions are not in the key: a layer saved under one version of
//! node or python attaches under another.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{BlobId, EntryKind, PreparedBlob, Reader, SideTable, SnapshotId, Store, Tree, TreeId};
use path_policy::{RepoPath, RepoPathBuf};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error};

pub mod keep;
pub mod travel;

/// Layer records: scope `""`, key the layer's key (hex), value a JSON [`LayerRecord`].
pub const LAYERS: SideTable = SideTable::new("deps.layers");

/// The file at a worktree's root that adds pairs, a `LOCKFILE DIR` a line.
pub const PAIRS_FILE: &str = ".cairn-deps";

/// The largest `.cairn-deps` read from a snapshot (a few lines in practice).
pub const MAX_PAIRS_FILE: u64 = 1 << 20;

/// What a relocated file holds in place of the worktree root it was saved at: attach
/// writes the new root there. Text no installer writes by itself.
pub const ROOT_MARKER: &[u8] = b"/@@cairn-deps-root@@";

/// Built-in pairs, looked for at the worktree root only: lockfile → directory.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("package-lock.json", "node_modules"),
    ("npm-shrinkwrap.json", "node_modules"),
    ("pnpm-lock.yaml", "node_modules"),
    ("yarn.lock", "node_modules"),
    ("bun.lock", "node_modules"),
    ("uv.lock", ".venv"),
    ("poetry.lock", ".venv"),
    ("Pipfile.lock", ".venv"),
    ("Gemfile.lock", "vendor/bundle"),
];

/// A layer cannot be saved, found or attached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DepsError {
    /// A line of `.cairn-deps` is not `LOCKFILE DIR`.
    #[error("{file} line {line}: {reason}")]
    BadLine {
        /// The `.cairn-deps` file.
        file: Utf8PathBuf,
        /// Its line number, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// No layer has this key (or prefix).
    #[error("no dependency layer has key {key}")]
    UnknownKey {
        /// The key asked for.
        key: String,
    },
    /// More than one layer's key starts with this prefix.
    #[error("key prefix {key} names more than one dependency layer")]
    AmbiguousKey {
        /// The prefix asked for.
        key: String,
    },
    /// The path is not inside a registered worktree.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// A dependency directory (or a folder on its way) is not a directory.
    #[error("{path}: not a directory, so it cannot be saved as a dependency layer")]
    NotADirectory {
        /// The path.
        path: Utf8PathBuf,
    },
    /// A dependency directory (or a folder on its way) is a symbolic link.
    #[error("{path}: a symbolic link; a dependency layer is never saved through one")]
    Symlink {
        /// The path.
        path: Utf8PathBuf,
    },
    /// A dependency directory was swapped for another while it was saved.
    #[error("{path}: swapped for another folder while it was saved; nothing saved")]
    Swapped {
        /// The path.
        path: Utf8PathBuf,
    },
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: Utf8PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A stored record cannot be read as one.
    #[error("dependency layer {key}: its record cannot be read: {source}")]
    Record {
        /// The key.
        key: String,
        /// Why.
        source: serde_json::Error,
    },
}

impl DepsError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            DepsError::BadLine { .. } => Code::InvalidConfig,
            DepsError::UnknownKey { .. } => Code::UnknownId,
            DepsError::AmbiguousKey { .. } => Code::AmbiguousId,
            DepsError::NotAWorktree { .. } => Code::NotAWorktree,
            DepsError::NotADirectory { .. }
            | DepsError::Symlink { .. }
            | DepsError::Swapped { .. } => Code::InvalidPath,
            DepsError::Io { .. } => Code::Io,
            DepsError::Record { .. } => Code::Corrupt,
        }
    }
}

crate::error::coded!(DepsError);

/// A lockfile → directory pair, paths from the worktree root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pair {
    /// The lockfile.
    pub lockfile: RepoPathBuf,
    /// The directory installed from it.
    pub dir: RepoPathBuf,
}

/// The built-in pairs.
pub fn built_in() -> Vec<Pair> {
    BUILT_IN
        .iter()
        .map(|(lock, dir)| Pair {
            lockfile: RepoPathBuf::from_bytes_unchecked(lock.as_bytes().to_vec()),
            dir: RepoPathBuf::from_bytes_unchecked(dir.as_bytes().to_vec()),
        })
        .collect()
}

/// The pairs a `.cairn-deps` file's `text` adds: `LOCKFILE DIR` a line, paths relative to
/// the root; blank lines and `#` comments are skipped. A bad line is an error naming
/// `file` and the line.
pub fn parse_pairs(file: &Utf8Path, text: &[u8]) -> Result<Vec<Pair>, DepsError> {
    let mut out = Vec::new();
    for (n, line) in text.split(|b| *b == b'\n').enumerate() {
        let bad = |reason: &str| DepsError::BadLine {
            file: file.to_owned(),
            line: n + 1,
            reason: reason.to_owned(),
        };
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = std::str::from_utf8(line).map_err(|_| bad("not UTF-8"))?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let [lock, dir] = words[..] else {
            return Err(bad("expected `LOCKFILE DIR` (two paths)"));
        };
        let path = |p: &str, what: &str| {
            let p = p.trim_end_matches('/');
            RepoPathBuf::new(p.as_bytes().to_vec())
                .ok()
                .filter(|p| !p.is_root())
                .ok_or_else(|| bad(&format!("{what} {p:?} is not a path relative to the root")))
        };
        let lockfile = path(lock, "lockfile")?;
        let dir = path(dir, "directory")?;
        if lockfile.as_repo_path().ancestors().any(|a| a == &*dir) {
            return Err(bad("the lockfile lies inside its directory"));
        }
        // One layer never holds another: each is written into a folder of its own.
        let inside = |a: &RepoPath, b: &RepoPath| a != b && a.ancestors().any(|up| up == b);
        let others =
            (built_in().into_iter().map(|p| p.dir)).chain(out.iter().map(|p: &Pair| p.dir.clone()));
        for other in others.collect::<Vec<_>>() {
            if inside(&dir, &other) || inside(&other, &dir) {
                return Err(bad(&format!(
                    "directory {dir} and directory {other} lie one inside the other"
                )));
            }
        }
        out.push(Pair { lockfile, dir });
    }
    Ok(out)
}

/// A layer to look for: a directory and every lockfile present that pairs with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The directory.
    pub dir: RepoPathBuf,
    /// Its lockfiles present, sorted by path, with the ids of their bytes.
    pub lockfiles: Vec<LayerLockfile>,
}

/// The layers `pairs` give, where `blob_of` says which lockfiles are present (and their
/// blob ids): one per directory that has at least one, in path order.
pub fn wanted(
    pairs: &[Pair],
    mut blob_of: impl FnMut(&RepoPath) -> Result<Option<BlobId>, Error>,
) -> Result<Vec<Wanted>, Error> {
    let mut by_dir: BTreeMap<RepoPathBuf, BTreeSet<RepoPathBuf>> = BTreeMap::new();
    for p in pairs {
        by_dir
            .entry(p.dir.clone())
            .or_default()
            .insert(p.lockfile.clone());
    }
    let mut out = Vec::new();
    for (dir, locks) in by_dir {
        let mut lockfiles = Vec::new();
        for lock in locks {
            if let Some(blob) = blob_of(&lock)? {
                lockfiles.push(LayerLockfile {
                    path: shown(&lock),
                    blob,
                });
            }
        }
        if !lockfiles.is_empty() {
            out.push(Wanted { dir, lockfiles });
        }
    }
    Ok(out)
}

fn shown(path: &RepoPath) -> Utf8PathBuf {
    Utf8PathBuf::from(String::from_utf8_lossy(path.as_bytes()).into_owned())
}

/// The key of the layer at `dir` installed from `lockfiles` (sorted by path) on this
/// system; `root` for a layer that holds its root in a binary file and attaches only there.
pub fn key(dir: &RepoPath, lockfiles: &[LayerLockfile], root: Option<&Utf8Path>) -> String {
    let mut text = Vec::new();
    text.extend_from_slice(b"cairn deps 1\n");
    text.extend_from_slice(b"dir ");
    text.extend_from_slice(dir.as_bytes());
    text.push(b'\n');
    for l in lockfiles {
        text.extend_from_slice(format!("lockfile {} {}\n", l.path, l.blob).as_bytes());
    }
    text.extend_from_slice(format!("os {}\n", std::env::consts::OS).as_bytes());
    text.extend_from_slice(format!("arch {}\n", std::env::consts::ARCH).as_bytes());
    if let Some(root) = root {
        text.extend_from_slice(format!("root {root}\n").as_bytes());
    }
    blake3::hash(&text).to_hex().to_string()
}

/// What saving a file of a layer makes of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relocation {
    /// It does not hold the root: stored as it is.
    Kept,
    /// Text that holds the root: stored with [`ROOT_MARKER`] in its place.
    Text(Vec<u8>),
    /// A binary file (a NUL byte) that holds the root: the layer works only at this root.
    Binary,
}

/// Where `root` occurs in `bytes` as a path (followed by `/`, a byte no path name goes
/// on with, or the end): `/w/a` in `/w/a/bin` but not in `/w/ab`.
fn root_at(bytes: &[u8], root: &[u8]) -> Vec<usize> {
    let continues = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    memchr::memmem::find_iter(bytes, root)
        .filter(|&at| bytes.get(at + root.len()).is_none_or(|b| !continues(*b)))
        .collect()
}

/// `from` replaced by `to` at `places`.
fn replaced(bytes: &[u8], places: &[usize], from: usize, to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + places.len() * to.len());
    let mut last = 0;
    for &at in places {
        out.extend_from_slice(&bytes[last..at]);
        out.extend_from_slice(to);
        last = at + from;
    }
    out.extend_from_slice(&bytes[last..]);
    out
}

/// What saving `bytes`, from a layer saved at `root`, makes of them.
pub fn relocate(bytes: &[u8], root: &Utf8Path) -> Relocation {
    let places = root_at(bytes, root.as_str().as_bytes());
    if places.is_empty() {
        Relocation::Kept
    } else if memchr::memchr(0, bytes).is_some() {
        Relocation::Binary
    } else {
        Relocation::Text(replaced(bytes, &places, root.as_str().len(), ROOT_MARKER))
    }
}

/// A relocated file's `bytes` written for `root`: the marker replaced by it.
pub fn unrelocate(bytes: &[u8], root: &Utf8Path) -> Vec<u8> {
    let places: Vec<usize> = memchr::memmem::find_iter(bytes, ROOT_MARKER).collect();
    replaced(bytes, &places, ROOT_MARKER.len(), root.as_str().as_bytes())
}

/// A lockfile of a layer: its path from the root and the id of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LayerLockfile {
    /// Its path from the worktree root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// The id of its bytes, as the store names a blob.
    #[schemars(with = "String")]
    pub blob: BlobId,
}

/// A stored layer, as its record in [`LAYERS`] says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerRecord {
    /// Its key.
    pub key: String,
    /// Its directory, from the worktree root.
    pub path: Utf8PathBuf,
    /// The lockfiles it was installed from.
    pub lockfiles: Vec<LayerLockfile>,
    /// `std::env::consts::OS` where it was saved.
    pub os: String,
    /// `std::env::consts::ARCH` where it was saved.
    pub arch: String,
    /// For a layer with the root in a binary file: that root, the only one it attaches at.
    pub rooted: Option<Utf8PathBuf>,
    /// The snapshot whose tree is the layer (no parents; message `deps layer KEY`).
    pub snapshot: SnapshotId,
    /// Its files holding [`ROOT_MARKER`] where the root was (paths from the directory).
    pub relocated: Vec<Utf8PathBuf>,
    /// Files and symlinks.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// When it was saved.
    pub saved: jiff::Timestamp,
    /// When it was last saved again or attached.
    pub used: jiff::Timestamp,
}

impl LayerRecord {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a layer record serializes")
    }
}

/// The record stored under `key`, if any.
pub fn record(reader: &Reader, key: &str) -> Result<Option<LayerRecord>, Error> {
    match reader.side_get(LAYERS, "", key.as_bytes())? {
        None => Ok(None),
        Some(bytes) => Ok(Some(decode(key, &bytes)?)),
    }
}

fn decode(key: &str, bytes: &[u8]) -> Result<LayerRecord, DepsError> {
    serde_json::from_slice(bytes).map_err(|source| DepsError::Record {
        key: key.to_owned(),
        source,
    })
}

/// Every stored layer, by key.
pub fn records(reader: &Reader) -> Result<Vec<LayerRecord>, Error> {
    let mut out = Vec::new();
    for (key, value) in reader.side_scope(LAYERS, "")? {
        out.push(decode(&String::from_utf8_lossy(&key), &value)?);
    }
    Ok(out)
}

/// The layer whose key is `key` or starts with it (one only).
pub fn find(reader: &Reader, key: &str) -> Result<LayerRecord, Error> {
    if let Some(r) = record(reader, key)? {
        return Ok(r);
    }
    let found: Vec<LayerRecord> = (records(reader)?.into_iter())
        .filter(|r| !key.is_empty() && r.key.starts_with(key))
        .collect();
    match <[LayerRecord; 1]>::try_from(found) {
        Ok([one]) => Ok(one),
        Err(found) if found.is_empty() => Err(DepsError::UnknownKey {
            key: key.to_owned(),
        }
        .into()),
        Err(_) => Err(DepsError::AmbiguousKey {
            key: key.to_owned(),
        }
        .into()),
    }
}

/// Removes the record of the layer `key` names, and the store's unpacked copy of it (its
/// objects go with the next `gc`).
pub fn remove(store: &Store, key: &str) -> Result<LayerRecord, Error> {
    let found = find(&store.reader()?, key)?;
    let mut batch = cas::WriteBatch::new();
    batch.remove_side(LAYERS, "", found.key.as_bytes());
    store.write(&batch)?;
    // Gone from the records first: a copy left by a failure here is gc's to remove, and the
    // layer is removed all the same.
    if let Err(e) = fs_manager::layer_copies::remove(store.root(), &found.key) {
        let copy = fs_manager::layer_copies::folder(store.root()).join(&found.key);
        tracing::warn!("{copy}: {e}; the next gc removes it");
    }
    Ok(found)
}

/// Each stored layer's tree as stored, by key (a layer whose snapshot is missing, which
/// fsck reports, has none): the unpacked copies that may stay.
pub fn stored_trees(reader: &Reader) -> Result<HashMap<String, TreeId>, Error> {
    let mut out = HashMap::new();
    for r in records(reader)? {
        if reader.has_snapshot(r.snapshot)? {
            out.insert(r.key, reader.snapshot(r.snapshot)?.tree);
        }
    }
    Ok(out)
}

/// A layer as `deps save`, `deps list` and `deps rm` show it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LayerItem {
    /// Its directory, from the worktree root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its key.
    pub key: String,
    /// The lockfiles it was installed from.
    pub lockfiles: Vec<LayerLockfile>,
    /// Files and symlinks.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `deps save`: whether this save stored it (`false`: stored before, not again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<bool>,
    /// For a layer that holds its root in a binary file: the only root it attaches at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub rooted: Option<Utf8PathBuf>,
    /// Its files written with the worktree's root at each attach.
    pub relocated: u64,
    /// When it was saved.
    pub saved: jiff::Timestamp,
    /// When it was last saved again or attached.
    pub used: jiff::Timestamp,
    /// `deps list`: the worktrees it is attached to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub used_by: Vec<Utf8PathBuf>,
}

impl LayerItem {
    /// `record` as shown.
    pub fn of(record: &LayerRecord) -> LayerItem {
        LayerItem {
            path: record.path.clone(),
            key: record.key.clone(),
            lockfiles: record.lockfiles.clone(),
            files: record.files,
            bytes: record.bytes,
            new: None,
            rooted: record.rooted.clone(),
            relocated: record.relocated.len() as u64,
            saved: record.saved,
            used: record.used,
            used_by: Vec::new(),
        }
    }
}

/// What `deps save`, `deps list` and `deps rm` answer.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DepsOutcome {
    /// The layers saved, stored or removed.
    pub layers: Vec<LayerItem>,
}

/// One layer `save` found, stored now or before.
#[derive(Debug, Clone)]
pub struct Saved {
    /// Its record.
    pub record: LayerRecord,
    /// Whether this save stored it.
    pub new: bool,
}

/// The pairs of the worktree at `root` on disk: the built-in ones and its `.cairn-deps`.
fn pairs_on_disk(root: &Utf8Path) -> Result<Vec<Pair>, Error> {
    let mut pairs = built_in();
    let file = root.join(PAIRS_FILE);
    match std::fs::read(&file) {
        Ok(text) => pairs.extend(parse_pairs(&file, &text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(DepsError::Io { path: file, source }.into()),
    }
    Ok(pairs)
}

/// The blob id of the file or symlink `rel` under `root`, as a capture would store it;
/// `None` if it is missing, a directory, or below something that is not a directory.
fn blob_on_disk(root: &Utf8Path, rel: &RepoPath) -> Result<Option<BlobId>, Error> {
    let path = root.join(shown(rel));
    if !real_dirs(root, rel.parent().unwrap_or(RepoPath::root()))? {
        return Ok(None);
    }
    let io = |source| DepsError::Io {
        path: path.clone(),
        source,
    };
    match path.symlink_metadata() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(e).into()),
        Ok(m) if m.is_symlink() => {
            let target = std::fs::read_link(&path).map_err(io)?;
            Ok(Some(BlobId::of(target.as_os_str().as_bytes())))
        }
        Ok(m) if m.is_file() => Ok(Some(BlobId::of(&std::fs::read(&path).map_err(io)?))),
        Ok(_) => Ok(None),
    }
}

/// Whether every folder of `rel` under `root` is a real directory (none a symlink):
/// `false` if one is missing, an error naming the first that is a symlink or a file.
fn real_dirs(root: &Utf8Path, rel: &RepoPath) -> Result<bool, DepsError> {
    let mut path = root.to_owned();
    for name in rel.components() {
        path.push(String::from_utf8_lossy(name).as_ref());
        match path.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(DepsError::Io { path, source }),
            Ok(m) if m.is_symlink() => return Err(DepsError::Symlink { path }),
            Ok(m) if !m.is_dir() => return Err(DepsError::NotADirectory { path }),
            Ok(_) => {}
        }
    }
    Ok(true)
}

/// Saves each dependency directory of `worktree` that has a lockfile
/// beside it and no layer yet; a layer stored already has its `used` time bumped. Each new
/// layer's objects and record are written in one transaction, the record last.
pub fn save(
    store: &Store,
    worktree: &fs_manager::WorktreeRecord,
    progress: &dyn cas::Progress,
) -> Result<Vec<Saved>, Error> {
    let root = &worktree.root;
    let pairs = pairs_on_disk(root)?;
    let wanted = wanted(&pairs, |lock| blob_on_disk(root, lock))?;
    let mut out = Vec::new();
    for want in wanted {
        if !real_dirs(root, &want.dir)? {
            continue;
        }
        let plain = key(&want.dir, &want.lockfiles, None);
        let here = key(&want.dir, &want.lockfiles, Some(root));
        let reader = store.reader()?;
        let stored = match record(&reader, &plain)? {
            Some(r) => Some(r),
            None => record(&reader, &here)?,
        };
        drop(reader);
        if let Some(mut stored) = stored {
            stored.used = jiff::Timestamp::now();
            let mut batch = cas::WriteBatch::new();
            batch.put_side(LAYERS, "", stored.key.as_bytes(), stored.encode());
            store.write(&batch)?;
            out.push(Saved {
                record: stored,
                new: false,
            });
            continue;
        }
        out.push(Saved {
            record: save_one(store, root, &want, progress)?,
            new: true,
        });
    }
    Ok(out)
}

/// Saves the directory `want` names under `root` as a new layer.
fn save_one(
    store: &Store,
    root: &Utf8Path,
    want: &Wanted,
    progress: &dyn cas::Progress,
) -> Result<LayerRecord, Error> {
    let dir = root.join(shown(&want.dir));
    // The folder read must be the one checked (no symlink): the same before and after.
    let identity = || -> Result<(u64, u64), DepsError> {
        use std::os::unix::fs::MetadataExt;
        let m = dir.symlink_metadata().map_err(|source| DepsError::Io {
            path: dir.clone(),
            source,
        })?;
        if m.is_symlink() {
            return Err(DepsError::Symlink { path: dir.clone() });
        }
        Ok((m.dev(), m.ino()))
    };
    let before = identity()?;
    let captured = fs_manager::capture_dir(store, &dir, progress)?;
    if identity()? != before {
        return Err(DepsError::Swapped { path: dir }.into());
    }
    for s in &captured.skipped {
        tracing::warn!(layer = %dir, "left out of the dependency layer: {s:?}");
    }
    // Read again to find the root (the page cache holds what the scan just read), through
    // handles opened beneath the folder: a file swapped for a link meanwhile is not followed.
    let beneath = |e: path_policy::BeneathError| DepsError::Io {
        path: dir.clone(),
        source: std::io::Error::other(e),
    };
    let folder = path_policy::Root::open(dir.as_std_path()).map_err(beneath)?;
    let mut handles: HashMap<&[u8], OwnedFd> = HashMap::new();
    for f in &captured.files {
        let parent = f.path.split_parent().0.as_bytes();
        if !handles.contains_key(parent) {
            handles.insert(parent, folder.open_dir(parent).map_err(beneath)?);
        }
    }
    let found: Vec<(usize, Relocation)> = (captured.files.par_iter().enumerate())
        .map(|(i, f)| {
            let (parent, name) = f.path.split_parent();
            let at = &handles[parent.as_bytes()];
            let name = std::ffi::OsStr::from_bytes(name);
            let bytes = read_beneath(at, name, f.kind).map_err(|source| DepsError::Io {
                path: dir.join(shown(&f.path)),
                source,
            })?;
            Ok((i, relocate(&bytes, root)))
        })
        .filter(|r| !matches!(r, Ok((_, Relocation::Kept))))
        .collect::<Result<_, DepsError>>()?;
    let rooted = found.iter().any(|(_, r)| *r == Relocation::Binary);
    let mut batch = captured.unstored;
    let mut changes = BTreeMap::new();
    let mut relocated = Vec::new();
    if !rooted {
        for (i, r) in found {
            let Relocation::Text(bytes) = r else { continue };
            let f = &captured.files[i];
            let blob = PreparedBlob::new(&bytes);
            changes.insert(f.path.clone(), (f.kind, blob.id(), blob.size()));
            batch.add_blob(blob);
            relocated.push(shown(&f.path));
        }
    }
    let mut trees = captured.trees;
    let tree = if changes.is_empty() {
        captured.tree
    } else {
        let mut made = Vec::new();
        let tree = replace_files(&trees, captured.tree, RepoPath::root(), &changes, &mut made)?;
        trees.extend(made.into_iter().map(|t| (t.id(), t)));
        tree
    };
    for t in trees.into_values() {
        batch.add_tree(t);
    }
    let key = key(&want.dir, &want.lockfiles, rooted.then_some(root));
    let snapshot = cas::Snapshot {
        tree,
        parents: Vec::new(),
        created: jiff::Timestamp::now(),
        message: format!("deps layer {key}"),
        labels: BTreeMap::new(),
        source: None,
    };
    let now = jiff::Timestamp::now();
    let record = LayerRecord {
        key: key.clone(),
        path: shown(&want.dir),
        lockfiles: want.lockfiles.clone(),
        os: std::env::consts::OS.to_owned(),
        arch: std::env::consts::ARCH.to_owned(),
        rooted: rooted.then(|| root.to_owned()),
        snapshot: batch.add_snapshot(snapshot),
        relocated,
        files: captured.files.len() as u64,
        bytes: captured.bytes,
        saved: now,
        used: now,
    };
    // Objects and record in one transaction: a layer lists whole or not at all.
    batch.put_side(LAYERS, "", key.as_bytes(), record.encode());
    store.write(&batch)?;
    Ok(record)
}

/// The bytes of the file (its target, for a symlink) `name` in the directory `at`, never
/// through a symlink.
fn read_beneath(at: &OwnedFd, name: &std::ffi::OsStr, kind: EntryKind) -> std::io::Result<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    if kind == EntryKind::Symlink {
        return Ok(rustix::fs::readlinkat(at, name, Vec::new())?.into_bytes());
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = std::fs::File::from(rustix::fs::openat(at, name, flags, Mode::empty())?);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes)?;
    Ok(bytes)
}

/// `tree` (the directory `at`) with the files `changes` names replaced by (kind, blob,
/// size); the trees made go to `made`. Only the trees above a change are rebuilt.
fn replace_files(
    source: &dyn diff::TreeSource,
    tree: TreeId,
    at: &RepoPath,
    changes: &BTreeMap<RepoPathBuf, (EntryKind, BlobId, u64)>,
    made: &mut Vec<Tree>,
) -> Result<TreeId, Error> {
    let mut entries = source.tree(tree)?.entries().to_vec();
    for e in &mut entries {
        let Ok(path) = at.join(&e.name) else {
            continue;
        };
        if let Some(&(kind, blob, size)) = changes.get(&path) {
            e.kind = kind;
            e.id = blob.into();
            e.size = size;
        } else if let Some(sub) = e.tree()
            && changes
                .keys()
                .any(|c| c.as_repo_path().ancestors().any(|a| a == &*path))
        {
            let new = replace_files(source, sub, &path, changes, made)?;
            e.id = new.into();
            e.size = made.last().map_or(e.size, Tree::size);
        }
    }
    let new = Tree::from_sorted(entries).map_err(cas::StoreError::from)?;
    let id = new.id();
    made.push(new);
    Ok(id)
}

/// A layer to attach at a worktree: `tree` is its tree for that worktree's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    /// Its directory, from the worktree root.
    pub path: Utf8PathBuf,
    /// Its key.
    pub key: String,
    /// Its tree written for the root (stored).
    pub tree: TreeId,
    /// Its tree as stored, the same at every root.
    pub stored: TreeId,
    /// Files and symlinks.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Attach {
    /// As the worktree record keeps it.
    pub fn attached(&self) -> fs_manager::AttachedLayer {
        fs_manager::AttachedLayer {
            path: self.path.clone(),
            key: self.key.clone(),
            tree: self.tree,
        }
    }

    /// As a checkout writes it.
    pub fn to_write(&self) -> fs_manager::LayerToWrite {
        fs_manager::LayerToWrite {
            attached: self.attached(),
            stored: self.stored,
        }
    }
}

/// A dependency layer attached to a new worktree, as `checkout` and `mount` name it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttachedDeps {
    /// Its directory, from the worktree root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its key (`deps list`).
    pub key: String,
    /// Its files and symlinks.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `checkout`: how many of its files were written as reflinks of the store's unpacked
    /// copy of the layer, sharing its disk blocks (on a file system with reflinks, such
    /// as btrfs or XFS, holding the store too); the others were copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloned: Option<u64>,
}

impl AttachedDeps {
    /// As an outcome names `attach`.
    pub fn of(attach: &Attach) -> AttachedDeps {
        AttachedDeps {
            path: attach.path.clone(),
            key: attach.key.clone(),
            files: attach.files,
            bytes: attach.bytes,
            cloned: None,
        }
    }
}

/// The entry at `path` in `tree`, if any.
fn entry_at(
    reader: &Reader,
    tree: TreeId,
    path: &RepoPath,
) -> Result<Option<cas::TreeEntry>, Error> {
    let mut tree = tree;
    let mut names = path.components().peekable();
    while let Some(name) = names.next() {
        let t = reader.tree(tree)?;
        let Some(e) = t.get(name) else {
            return Ok(None);
        };
        if names.peek().is_none() {
            return Ok(Some(e.clone()));
        }
        match e.tree() {
            Some(sub) => tree = sub,
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// The layers a worktree of the tree `tree` wants: its built-in pairs at its root and
/// those its `.cairn-deps` (named `shown` in messages) adds, for the lockfiles it holds.
/// A checkout, mount or push stands whatever that file says: a bad one gives what the
/// built-in pairs give, and a warning saying why (`deps save` refuses it, naming the line).
pub fn wanted_in(reader: &Reader, tree: TreeId, shown: &Utf8Path) -> Result<Vec<Wanted>, Error> {
    let mut pairs = built_in();
    if let Some(e) = entry_at(
        reader,
        tree,
        RepoPath::new(PAIRS_FILE.as_bytes()).expect("a path"),
    )? && let Some(blob) = e.blob()
        && e.kind != EntryKind::Symlink
    {
        if e.size > MAX_PAIRS_FILE {
            tracing::warn!("{shown}: over {MAX_PAIRS_FILE} bytes; its pairs are not read");
        } else {
            match parse_pairs(shown, &reader.blob(blob)?) {
                Ok(more) => pairs.extend(more),
                Err(e) => tracing::warn!("{e}; only the built-in pairs are used"),
            }
        }
    }
    wanted(&pairs, |lock| {
        Ok(entry_at(reader, tree, lock)?.and_then(|e| e.blob()))
    })
}

/// The layers to attach to a worktree of `snapshot` at `root`: for each pair whose
/// lockfile the snapshot holds (built-in pairs at its root, `.cairn-deps` in it), the layer
/// stored under its key, written for `root` (its relocated files with `root` in place of
/// the marker; those blobs and trees stored). A directory the snapshot holds itself is not
/// attached. Each layer attached has its `used` time bumped.
pub fn plan(store: &Store, snapshot: SnapshotId, root: &Utf8Path) -> Result<Vec<Attach>, Error> {
    let reader = store.reader()?;
    let tree = reader.snapshot(snapshot)?.tree;
    let wanted = wanted_in(&reader, tree, &root.join(PAIRS_FILE))?;
    let mut batch = cas::WriteBatch::new();
    let mut out = Vec::new();
    for want in wanted {
        let plain = key(&want.dir, &want.lockfiles, None);
        let stored = match record(&reader, &plain)? {
            Some(r) => Some(r),
            None => record(&reader, &key(&want.dir, &want.lockfiles, Some(root)))?,
        };
        let Some(mut stored) = stored else { continue };
        // The folder itself, or a file or link on its way: the snapshot's own, kept.
        let mut taken = None;
        for a in want.dir.as_repo_path().ancestors().filter(|a| !a.is_root()) {
            if let Some(e) = entry_at(&reader, tree, a)?
                && (a == &*want.dir || e.tree().is_none())
            {
                taken = Some(a.to_owned());
                break;
            }
        }
        if let Some(taken) = taken {
            tracing::info!(
                "{taken}: the snapshot holds it; dependency layer {} for {} is not attached",
                stored.key,
                want.dir
            );
            continue;
        }
        let layer = reader.snapshot(stored.snapshot)?.tree;
        let mut changes = BTreeMap::new();
        for rel in &stored.relocated {
            let Ok(path) = RepoPathBuf::new(rel.as_str().as_bytes().to_vec()) else {
                continue;
            };
            let Some(e) = entry_at(&reader, layer, &path)? else {
                continue;
            };
            let Some(blob) = e.blob() else { continue };
            let bytes = unrelocate(&reader.blob(blob)?, root);
            let blob = PreparedBlob::new(&bytes);
            changes.insert(path, (e.kind, blob.id(), blob.size()));
            batch.add_blob(blob);
        }
        let tree = if changes.is_empty() {
            layer
        } else {
            let mut made = Vec::new();
            let tree = replace_files(&reader, layer, RepoPath::root(), &changes, &mut made)?;
            for t in made {
                batch.add_tree(t);
            }
            tree
        };
        stored.used = jiff::Timestamp::now();
        batch.put_side(LAYERS, "", stored.key.as_bytes(), stored.encode());
        out.push(Attach {
            path: stored.path.clone(),
            key: stored.key.clone(),
            tree,
            stored: layer,
            files: stored.files,
            bytes: stored.bytes,
        });
    }
    drop(reader);
    if !batch.is_empty() {
        store.write(&batch)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(path: &str, bytes: &[u8]) -> LayerLockfile {
        LayerLockfile {
            path: path.into(),
            blob: BlobId::of(bytes),
        }
    }

    fn rp(s: &str) -> RepoPathBuf {
        RepoPathBuf::new(s.as_bytes().to_vec()).expect("a path")
    }

    #[test]
    fn a_pairs_file_adds_pairs_and_names_a_bad_line() {
        let text = b"# extra\n\ntools/uv.lock tools/.venv\r\nweb/yarn.lock web/node_modules/\n";
        let pairs = parse_pairs(Utf8Path::new("/w/.cairn-deps"), text).expect("parses");
        assert_eq!(
            pairs,
            vec![
                Pair {
                    lockfile: rp("tools/uv.lock"),
                    dir: rp("tools/.venv")
                },
                Pair {
                    lockfile: rp("web/yarn.lock"),
                    dir: rp("web/node_modules")
                },
            ]
        );
        for (bad, why) in [
            ("a.lock\n", "two paths"),
            ("a.lock b c\n", "two paths"),
            ("/abs.lock dir\n", "relative"),
            ("a.lock ../up\n", "relative"),
            ("dir/a.lock dir\n", "inside"),
            ("a.lock node_modules/.cache\n", "one inside the other"),
            ("a.lock vendor\n", "one inside the other"),
            ("a.lock x\nb.lock x/y\n", "one inside the other"),
        ] {
            let text = format!("# ok\n{bad}");
            let err = parse_pairs(Utf8Path::new("/w/.cairn-deps"), text.as_bytes())
                .expect_err(bad)
                .to_string();
            let line = text.lines().count();
            assert!(
                err.starts_with(&format!("/w/.cairn-deps line {line}: ")),
                "{err}"
            );
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn a_directory_is_wanted_with_every_lockfile_present_sorted() {
        let mut pairs = built_in();
        pairs.push(Pair {
            lockfile: rp("extra.lock"),
            dir: rp("node_modules"),
        });
        let present = ["yarn.lock", "package-lock.json", "extra.lock"];
        let got = wanted(&pairs, |p| {
            let name = std::str::from_utf8(p.as_bytes()).expect("utf-8");
            Ok(present.contains(&name).then(|| BlobId::of(name.as_bytes())))
        })
        .expect("no error");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].dir, rp("node_modules"));
        let paths: Vec<&str> = got[0].lockfiles.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["extra.lock", "package-lock.json", "yarn.lock"]);
    }

    #[test]
    fn a_key_changes_with_each_thing_it_covers() {
        let a = [lock("package-lock.json", b"one")];
        let base = key(&rp("node_modules"), &a, None);
        assert_eq!(base, key(&rp("node_modules"), &a, None));
        assert_eq!(base.len(), 64);
        assert_ne!(base, key(&rp("web/node_modules"), &a, None));
        assert_ne!(
            base,
            key(
                &rp("node_modules"),
                &[lock("package-lock.json", b"two")],
                None
            )
        );
        assert_ne!(
            base,
            key(&rp("node_modules"), &[lock("yarn.lock", b"one")], None)
        );
        assert_ne!(
            base,
            key(&rp("node_modules"), &a, Some(Utf8Path::new("/w")))
        );
        assert_ne!(
            key(&rp("node_modules"), &a, Some(Utf8Path::new("/w"))),
            key(&rp("node_modules"), &a, Some(Utf8Path::new("/v")))
        );
    }

    #[test]
    fn text_holding_the_root_is_relocated_and_written_back_for_another() {
        let root = Utf8Path::new("/work/a");
        let script = b"#!/work/a/.venv/bin/python\nhome = /work/a/.venv\nother /work/ab /work/a\n";
        let Relocation::Text(stored) = relocate(script, root) else {
            panic!("not relocated")
        };
        assert!(memchr::memmem::find(&stored, b"/work/a/").is_none());
        assert!(
            memchr::memmem::find(&stored, b"/work/ab").is_some(),
            "a longer name is kept"
        );
        assert_eq!(unrelocate(&stored, root), script);
        assert_eq!(
            unrelocate(&stored, Utf8Path::new("/tmp/b")),
            b"#!/tmp/b/.venv/bin/python\nhome = /tmp/b/.venv\nother /work/ab /tmp/b\n"
        );
        assert_eq!(relocate(b"nothing here /work/abc", root), Relocation::Kept);
        assert_eq!(relocate(b"\0ELF /work/a/lib", root), Relocation::Binary);
    }
}
