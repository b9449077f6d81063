//! The store's unpacked copies of dependency layers, which checkouts clone their layers'
//! files from (reflinks: `FICLONE`, on btrfs, XFS with reflink, bcachefs).
//!
//! A layer is stored compressed, so there is no file to clone. On the first attach to a
//! folder that can clone from the store's file system, the layer's stored tree is unpacked
//! once into `<store>/deps/KEY/files`: written into a fresh `.unpack-KEY-…` folder, its
//! files made read-only, sealed (`seal`: the tree it holds and the latest ctime of its
//! files), synced and renamed whole to `KEY`. A kill leaves a `.unpack-` folder that no
//! attach reads (gc removes it), never a half copy under a layer's key.
//!
//! An attach clones each regular file whose blob the worktree's tree shares with the
//! stored one (a relocated file holds the worktree's root, so it is written), and only
//! from a source file still as sealed: read-only, its size, no change since the seal (a
//! write or a `chmod` moves the ctime past it). Anything else is copied from the store, and
//! a copy found changed is dropped for the next attach to unpack again. A worktree's own
//! files are never a source: an agent may have changed them.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, Reader, Store, TreeEntry, TreeId};
use path_policy::{RepoPath, RepoPathBuf};
use rayon::prelude::*;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use worktree_scope::build::{TreeDirs, child};
use worktree_scope::file_state::{RACY_MARGIN, Stat, now_ns};

use crate::error::CheckoutError;

/// The folder in the store holding the copies, one folder per layer key.
pub const FOLDER: &str = "deps";
/// A copy's files, in its folder.
const FILES: &str = "files";
/// A copy's seal (JSON [`Seal`]), in its folder, written before the folder is renamed in.
const SEAL: &str = "seal";
/// A small file in [`FOLDER`], cloned into a layer's staging folder to learn whether the
/// worktree can clone from the store.
const PROBE: &str = "probe";
/// What a probe clone is named in the staging folder, for the moment it is there.
const PROBE_CLONE: &str = ".cairn-probe";
/// Folders on their way in (being unpacked) and out (being removed): never read; gc
/// removes those a kill left.
const UNPACKING: &str = ".unpack-";
const DROPPING: &str = ".drop-";

/// The folder of the store at `store_root` holding the copies.
pub fn folder(store_root: &Utf8Path) -> Utf8PathBuf {
    store_root.join(FOLDER)
}

/// What a sealed copy says of itself.
#[derive(Debug, Serialize, Deserialize)]
struct Seal {
    /// The stored tree whose files the copy holds.
    tree: String,
    /// The latest ctime of its files once read-only (ns since the epoch): a file changed
    /// since has a later one.
    sealed_ns: i64,
}

/// Whether `key` can name a folder: a layer key is hex.
fn usable(key: &str) -> bool {
    !key.is_empty() && key.len() <= 128 && key.bytes().all(|b| b.is_ascii_hexdigit())
}

fn io(path: impl Into<std::path::PathBuf>) -> impl FnOnce(std::io::Error) -> CheckoutError {
    let path = path.into();
    move |source| CheckoutError::Io { path, source }
}

/// Whether a file made in the folder `into` can be a clone of one in the store at
/// `store_root`: one small file (made once) cloned there and removed.
pub(crate) fn can_clone(store_root: &Utf8Path, into: &OwnedFd) -> bool {
    let probe = folder(store_root).join(PROBE);
    let source = match std::fs::File::open(&probe) {
        Ok(f) => f,
        Err(_) => match make_probe(store_root) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("{probe}: {e}; dependency layers are copied");
                return false;
            }
        },
    };
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(clone) = rustix::fs::openat(into, PROBE_CLONE, flags, Mode::from_raw_mode(0o600)) else {
        return false;
    };
    let cloned = rustix::fs::ioctl_ficlone(&clone, &source);
    let _ = rustix::fs::unlinkat(into, PROBE_CLONE, AtFlags::empty());
    if let Err(e) = cloned {
        tracing::debug!("no reflink from {probe}: {e}; dependency layers are copied");
    }
    cloned.is_ok()
}

/// Writes the probe whole (a temporary file renamed in) and opens it.
fn make_probe(store_root: &Utf8Path) -> std::io::Result<std::fs::File> {
    let folder = folder(store_root);
    std::fs::create_dir_all(&folder)?;
    let mut temp = tempfile::Builder::new()
        .prefix(UNPACKING)
        .tempfile_in(&folder)?;
    std::io::Write::write_all(&mut temp, b"cairn reflink probe\n")?;
    temp.persist(folder.join(PROBE)).map_err(|e| e.error)?;
    std::fs::File::open(folder.join(PROBE))
}

/// Opens the file `name` in the folder `dir` to read, never through a symlink.
fn open_file(dir: &OwnedFd, name: impl rustix::path::Arg) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty())
}

/// The sealed copy of `key` holding `tree`, if there is one: its files' folder and seal.
/// Both are read through one handle of the copy's folder, so a copy removed and unpacked
/// again meanwhile never pairs one copy's seal with another's files.
fn open(store_root: &Utf8Path, key: &str, tree: TreeId) -> Option<(path_policy::Root, i64)> {
    let path = folder(store_root).join(key);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::open(path.as_std_path(), flags, Mode::empty()).ok()?;
    let seal = std::fs::File::from(open_file(&dir, SEAL).ok()?);
    let seal: Seal = serde_json::from_reader(std::io::BufReader::new(seal)).ok()?;
    if seal.tree != tree.to_string() {
        return None;
    }
    let files = path_policy::Root::open_at(&dir, FILES, path.join(FILES).as_std_path()).ok()?;
    Some((files, seal.sealed_ns))
}

/// Writes a tree's files into an empty folder: checkout's writer, passed in so that this
/// module does not use `checkout`, which uses it.
pub(crate) type WriteTree<'a> = &'a dyn Fn(TreeId, &Utf8Path) -> Result<(), CheckoutError>;

/// Unpacks `tree` as the copy of `key` (see the module's text) with `write`; if another
/// attach renamed its copy in first, that one stays.
fn unpack(
    reader: &Reader,
    store_root: &Utf8Path,
    key: &str,
    tree: TreeId,
    write: WriteTree<'_>,
) -> Result<(), CheckoutError> {
    let folder = folder(store_root);
    std::fs::create_dir_all(&folder).map_err(io(&folder))?;
    // Removed with everything in it if this returns early; a kill leaves it to gc.
    let temp = tempfile::Builder::new()
        .prefix(&format!("{UNPACKING}{key}-"))
        .tempdir_in(&folder)
        .map_err(io(&folder))?;
    let at = Utf8Path::from_path(temp.path())
        .ok_or_else(|| io(temp.path())(std::io::Error::other("not UTF-8")))?
        .to_owned();
    let files = at.join(FILES);
    std::fs::create_dir(&files).map_err(io(&files))?;
    write(tree, &files)?;
    let sealed_ns = make_read_only(reader, tree, &files)?;
    // Past the seal by more than the clock's grain: a change from now on has a later ctime.
    // (Bounded: a file system whose clock runs ahead of this one's is not waited for.)
    let margin = i64::try_from(RACY_MARGIN.as_nanos()).unwrap_or(i64::MAX);
    let give_up = std::time::Instant::now() + RACY_MARGIN * 20;
    while now_ns() <= sealed_ns.saturating_add(margin) && std::time::Instant::now() < give_up {
        std::thread::sleep(RACY_MARGIN / 5);
    }
    let seal = Seal {
        tree: tree.to_string(),
        sealed_ns,
    };
    let seal_path = at.join(SEAL);
    let text = serde_json::to_vec(&seal).expect("a seal serializes");
    std::fs::write(&seal_path, text).map_err(io(&seal_path))?;
    // On disk before it has its name: a power cut never leaves a copy with empty files.
    let dir = rustix::fs::open(
        at.as_std_path(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(&at)(e.into()))?;
    rustix::fs::syncfs(&dir).map_err(|e| io(&at)(e.into()))?;
    let parent = rustix::fs::open(
        folder.as_std_path(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(&folder)(e.into()))?;
    let name = temp
        .path()
        .file_name()
        .ok_or_else(|| io(&at)(std::io::Error::other("no name")))?
        .to_owned();
    let rename = || {
        rustix::fs::renameat_with(
            &parent,
            &name,
            &parent,
            key,
            rustix::fs::RenameFlags::NOREPLACE,
        )
    };
    let renamed = match rename() {
        // Another attach's copy of this tree came first: it stays. One of another tree (the
        // layer removed and saved again) or with no seal goes.
        Err(Errno::EXIST | Errno::NOTEMPTY) if open(store_root, key, tree).is_some() => {
            return Ok(());
        }
        Err(Errno::EXIST | Errno::NOTEMPTY) => {
            remove(store_root, key).map_err(io(folder.join(key)))?;
            rename()
        }
        other => other,
    };
    match renamed {
        Ok(()) => {
            // Renamed away: nothing left for the temporary folder to remove.
            let _ = temp.keep();
            rustix::fs::fsync(&parent).map_err(|e| io(&folder)(e.into()))
        }
        Err(Errno::EXIST | Errno::NOTEMPTY) => Ok(()),
        Err(e) => Err(io(folder.join(key))(e.into())),
    }
}

/// Takes the write bits off every regular file of `tree` written at `files`; returns the
/// latest ctime among them after.
fn make_read_only(reader: &Reader, tree: TreeId, files: &Utf8Path) -> Result<i64, CheckoutError> {
    let root = path_policy::Root::open(files.as_std_path())
        .map_err(|e| io(files)(std::io::Error::other(e)))?;
    let mut dirs = Vec::new();
    for dir in TreeDirs::new(reader, tree) {
        let (dir, tree) = dir?;
        let regular: Vec<TreeEntry> = (tree.entries().iter())
            .filter(|e| matches!(e.kind, EntryKind::File | EntryKind::Executable))
            .cloned()
            .collect();
        if !regular.is_empty() {
            dirs.push((dir, regular));
        }
    }
    dirs.par_iter()
        .map(|(dir, entries)| {
            let handle = root
                .open_dir(dir.as_bytes())
                .map_err(|e| io(root.display(dir.as_bytes()))(std::io::Error::other(e)))?;
            let mut latest = i64::MIN;
            for e in entries {
                let shown = root.display(child(dir, &e.name).as_bytes());
                let failed = |errno: Errno| io(shown.clone())(errno.into());
                let file =
                    open_file(&handle, std::ffi::OsStr::from_bytes(&e.name)).map_err(failed)?;
                let mode = if e.kind == EntryKind::Executable {
                    0o555
                } else {
                    0o444
                };
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(failed)?;
                let st = rustix::fs::fstat(&file).map_err(failed)?;
                latest = latest.max(Stat::from_rustix(&st).ctime_ns);
            }
            Ok(latest)
        })
        .try_reduce(|| i64::MIN, |a, b| Ok(a.max(b)))
}

/// Where one layer's files are cloned from while it is written into a worktree.
pub(crate) struct CloneSource {
    files: path_policy::Root,
    sealed_ns: i64,
    /// Paths whose blob in the worktree's tree is not the stored one's (relocated files).
    differs: HashSet<RepoPathBuf>,
    cloned: AtomicU64,
    /// A source file was not as sealed: the copy is dropped after this attach.
    damaged: AtomicBool,
    /// The file system refused a clone (another device, no reflinks): stop asking.
    refused: AtomicBool,
}

/// The source to clone `tree` (the layer `key` written for a worktree's root) from: the
/// sealed copy of `stored` (the layer's tree as stored), unpacked now with `write` if there
/// is none.
pub(crate) fn source(
    reader: &Reader,
    store_root: &Utf8Path,
    key: &str,
    stored: TreeId,
    tree: TreeId,
    write: WriteTree<'_>,
) -> Result<Option<CloneSource>, CheckoutError> {
    if !usable(key) {
        return Ok(None);
    }
    let opened = match open(store_root, key, stored) {
        Some(found) => found,
        None => {
            unpack(reader, store_root, key, stored, write)?;
            match open(store_root, key, stored) {
                Some(found) => found,
                None => return Ok(None),
            }
        }
    };
    let differs = diff::tree_changes(reader, Some(stored), Some(tree))?
        .into_iter()
        .map(|c| c.path)
        .collect();
    Ok(Some(CloneSource {
        files: opened.0,
        sealed_ns: opened.1,
        differs,
        cloned: AtomicU64::new(0),
        damaged: AtomicBool::new(false),
        refused: AtomicBool::new(false),
    }))
}

impl CloneSource {
    /// The copy's folder `dir` (from the layer's root), if it is there.
    pub(crate) fn dir(&self, dir: &RepoPath) -> Option<OwnedFd> {
        self.files.open_dir(dir.as_bytes()).ok()
    }

    /// Fills `dest`, the new empty file for `entry` at `path` (from the layer's root), with
    /// a clone of the copy's file in `dir` (its folder, from [`CloneSource::dir`]); says
    /// whether it did. `dest` is left empty if not.
    pub(crate) fn fill(
        &self,
        dir: Option<&OwnedFd>,
        path: &RepoPath,
        entry: &TreeEntry,
        dest: &OwnedFd,
    ) -> bool {
        if entry.kind == EntryKind::Symlink
            || self.refused.load(Ordering::Relaxed)
            || self.differs.contains(path)
        {
            return false;
        }
        let opened = (dir.ok_or(Errno::NOENT))
            .and_then(|dir| open_file(dir, std::ffi::OsStr::from_bytes(&entry.name)));
        let as_sealed = |src: &OwnedFd| {
            rustix::fs::fstat(src).is_ok_and(|st| {
                let st = Stat::from_rustix(&st);
                st.mode & 0o170000 == 0o100000
                    && st.mode & 0o222 == 0
                    && st.size == entry.size
                    && st.ctime_ns <= self.sealed_ns
            })
        };
        let src = match opened {
            Ok(src) if as_sealed(&src) => src,
            // Out of descriptors, say: this file is copied; the store's copy is not judged.
            Err(e) if !matches!(e, Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return false,
            _ => {
                if !self.damaged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "{}: not as unpacked; copied, and the layer is unpacked again next time",
                        self.files.display(path.as_bytes()).display()
                    );
                }
                return false;
            }
        };
        match rustix::fs::ioctl_ficlone(dest, &src) {
            Ok(()) => {
                self.cloned.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                let _ = rustix::fs::ftruncate(dest, 0);
                if matches!(e, Errno::XDEV | Errno::OPNOTSUPP) {
                    self.refused.store(true, Ordering::Relaxed);
                }
                tracing::debug!(
                    "{}: not cloned ({e}); copied",
                    path.as_bytes().escape_ascii()
                );
                false
            }
        }
    }

    /// How many files it filled.
    pub(crate) fn cloned(&self) -> u64 {
        self.cloned.load(Ordering::Relaxed)
    }

    /// Whether a source file was found changed since the seal.
    pub(crate) fn damaged(&self) -> bool {
        self.damaged.load(Ordering::Relaxed)
    }
}

/// Removes the copy of `key`, if any: renamed out of the way first, so no attach ever
/// reads half of it (a kill leaves the renamed folder to gc).
pub fn remove(store_root: &Utf8Path, key: &str) -> std::io::Result<()> {
    if !usable(key) {
        return Ok(());
    }
    let folder = folder(store_root);
    let away = folder.join(format!(
        "{DROPPING}{key}-{}-{}",
        std::process::id(),
        now_ns()
    ));
    match std::fs::rename(folder.join(key), &away) {
        Ok(()) => std::fs::remove_dir_all(&away),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes every copy but those of the layers in `keep` (key → stored tree) holding that
/// tree, and whatever a kill left on its way in or out; the probe stays. Returns the
/// folders removed. For `gc`, which holds the store alone: no attach is unpacking now.
pub fn sweep(
    store_root: &Utf8Path,
    keep: &HashMap<String, TreeId>,
) -> std::io::Result<Vec<Utf8PathBuf>> {
    let folder = folder(store_root);
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == PROBE {
            continue;
        }
        let kept = keep
            .get(&name)
            .is_some_and(|tree| open(store_root, &name, *tree).is_some());
        if kept {
            continue;
        }
        let path = folder.join(&name);
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        removed.push(path);
    }
    Ok(removed)
}

/// A copy whose files are not its layer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyProblem {
    /// The layer's key.
    pub key: String,
    /// What is wrong, naming the file.
    pub message: String,
}

/// Reads every file of the copies of the layers in `keep` (key → stored tree) and
/// compares it with its blob: what `fsck` says of them. Copies of no layer, or of another
/// tree, are gc's to remove, not problems.
pub fn check(
    store: &Store,
    keep: &HashMap<String, TreeId>,
) -> Result<Vec<CopyProblem>, CheckoutError> {
    let reader = store.reader()?;
    let mut problems = Vec::new();
    'copies: for (key, tree) in keep {
        let Some((files, _)) = open(store.root(), key, *tree) else {
            continue;
        };
        for dir in TreeDirs::new(&reader, *tree) {
            let (dir, t) = dir?;
            let opened = files.open_dir(dir.as_bytes()).map_err(|e| e.to_string());
            for e in t
                .entries()
                .iter()
                .filter(|e| matches!(e.kind, EntryKind::File | EntryKind::Executable))
            {
                let path = child(&dir, &e.name);
                let shown = files.display(path.as_bytes());
                let found = opened
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|d| {
                        open_file(d, std::ffi::OsStr::from_bytes(&e.name))
                            .map_err(|e| e.to_string())
                    })
                    .and_then(|fd| {
                        store
                            .blob_of_stream(
                                std::fs::File::from(fd),
                                &shown.to_string_lossy(),
                                false,
                            )
                            .map_err(|e| e.to_string())
                    });
                let wrong = match found {
                    Ok((blob, size)) if blob == e.id.as_blob() && size == e.size => continue,
                    Ok(_) => "its bytes differ from the layer's".to_owned(),
                    Err(why) => why,
                };
                problems.push(CopyProblem {
                    key: key.clone(),
                    message: format!(
                        "{}: {wrong}; remove {} (the next checkout unpacks it again)",
                        shown.display(),
                        folder(store.root()).join(key)
                    ),
                });
                continue 'copies;
            }
        }
    }
    Ok(problems)
}
