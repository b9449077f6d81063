//! Walking a worktree's scope and hashing what changed.
//!
//! A scan reuses the per-directory cache ([`crate::dirstate`]): directories whose stamp and
//! ignore files are unchanged (and all their subdirectories too) are not read again; the
//! `ignore` crate's walker lists the rest (by absolute path; where a path may be longer than
//! the system takes, by directory handle: [`crate::reach`]) and [`crate::scope`] says what
//! of it is in scope.
//! Every file is `lstat`ed; only files whose stat differs from the cache are read, and none
//! further than its size says.
//!
//! This module holds the scan itself, its options and errors and the pruning of unchanged
//! directories; `walk` the parallel walk of the scope; `assemble` the new directory
//! states and listings from the cache; `hash` reading and hashing what changed.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use camino::Utf8Path;
use cas::{BlobId, EntryKind, PreparedBlob, Store, WriteBatch};
use path_policy::{RepoPath, RepoPathBuf};
use rayon::prelude::*;

use crate::dirstate::{self, Cache, Child, DirStamp, DirState, IgnoreStamp, Name};
use crate::file_state::{FileState, Stat, now_ns};
use crate::paths::{SkipReason, Skipped, Special, join, shown, split_parent, tree_order};
use crate::reach;
use crate::rules::{self, Rules};
use crate::scope::{DirRules, Leaf, Scope, Verdict};
use crate::watch::Quiet;
use cas::Progress;

mod assemble;
mod hash;
mod walk;

use assemble::{
    Assembled, Assembly, Listed, Lost, ReadDirs, cached_skipped, stale, stat_listing,
    suspects_match,
};
use hash::hash_walked;
use walk::{DirAt, walk};

/// Reading the worktree failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// A file or directory could not be read.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The directory can never be a worktree (the file-system root, a pseudo file system).
    #[error("{}: {reason}", path.display())]
    Refused {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// The stat cache takes blob ids from a tree the store cannot give (or that lacks
    /// them): a capture then reads every file again.
    #[error("{}: the stat cache names tree {tree}, which the store cannot give", path.display())]
    StaleCache {
        /// The directory.
        path: PathBuf,
        /// Its cached tree.
        tree: cas::TreeId,
    },
}

worktree_registry::store_errors!(ScanError);

/// Files larger than this are streamed into the store chunk by chunk.
const STREAM_BYTES: u64 = 16 << 20;
/// Memory a group of read files may take before the group's blobs are written: their
/// bytes, and `FILE_OVERHEAD` each ([`ScanOptions::group_bytes`]; unit tests take less,
/// so their captures go through several groups, as a large tree's do).
pub const GROUP_BYTES: u64 = 64 << 20;
/// Files of a group read in parallel at once.
const READ_SLICE: usize = 1 << 14;
/// What a read file costs in memory besides its bytes until its group is written (its
/// prepared blob and record): a million tiny files make several groups, not one.
const FILE_OVERHEAD: u64 = 512;

/// A file in the captured state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// Path from the worktree root.
    pub path: RepoPathBuf,
    /// File, executable or symlink.
    pub kind: EntryKind,
    /// Its content.
    pub blob: BlobId,
    /// Bytes.
    pub size: u64,
}

/// One file or symlink in scope, with what the cache knew of it.
struct Walked {
    /// Raw bytes: besides names the walk checked, a cached listing's names, which its
    /// record checks as file names only.
    path: Vec<u8>,
    stat: Stat,
    kind: EntryKind,
    /// Boxed: most walked files have none (a first capture walks every file).
    cached: Option<Box<FileState>>,
}

impl Walked {
    /// The directory holding the file, and its name there. The directory is one the walk
    /// entered or the cache holds (its key checked on load): a repo path.
    fn dir_and_name(&self) -> (&RepoPath, &[u8]) {
        let (dir, name) = split_parent(&self.path);
        (RepoPath::from_bytes_unchecked(dir), name)
    }
}

/// The directory whose listing records a skipped `path`, and its name there: its parent,
/// but for an exclude file, the directory holding its `.git`.
fn listing_slot(path: &[u8]) -> (&[u8], &[u8]) {
    match path.strip_suffix(rules::EXCLUDE) {
        Some(b"") => (b"", path),
        Some(dir) if dir.ends_with(b"/") => (&dir[..dir.len() - 1], rules::EXCLUDE),
        _ => split_parent(path),
    }
}

/// Why a file is left out under the size cap, if it is.
fn oversize(stat: &Stat, kind: cas::EntryKind, cap: Option<u64>) -> Option<SkipReason> {
    if kind == cas::EntryKind::Symlink {
        return None;
    }
    crate::scope::over_cap(stat.size, cap)
}

/// Knobs of a scan.
pub struct ScanOptions<'a> {
    /// 1 walks sequentially; 0 picks a thread count.
    pub threads: usize,
    /// Hash only; store nothing.
    pub dry_run: bool,
    /// What is in scope.
    pub scope: &'a Scope,
    /// Cached directories a watcher saw nothing happen in: their listings are trusted, and
    /// only their suspect files `lstat`'ed.
    pub quiet: Option<&'a Quiet>,
    /// Told how the hashing goes.
    pub progress: &'a dyn Progress,
    /// Memory a group of read files may take before its blobs are written
    /// ([`GROUP_BYTES`]).
    pub group_bytes: u64,
}

/// A stat-cache record to write (`Some`) or forget (`None`), by store key.
pub type CacheUpdate = (Vec<u8>, Option<Vec<u8>>);

/// What a scan found.
pub struct Scan {
    /// Files held one by one in memory (those of directories that changed); the rest
    /// stood as cached.
    pub held_files: u64,
    /// What the scope left out and reports, in path order.
    pub skipped: Vec<Skipped>,
    /// Files whose content was read (the rest came from the stat cache).
    pub read_files: u64,
    /// New blobs the files hold that are not stored yet: the capture stores them with
    /// its snapshot, in one transaction.
    pub unstored: WriteBatch,
    /// Files in scope.
    pub file_count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The new per-directory state, by directory path: what the trees are built from.
    pub dirs: HashMap<RepoPathBuf, DirState>,
    /// Subtrees where nothing changed, with their trees: not rebuilt.
    pub reuse: HashMap<RepoPathBuf, (cas::TreeId, u64)>,
    dirty: HashSet<RepoPathBuf>,
    stale: Vec<RepoPathBuf>,
    /// The fingerprint of the rules from outside the tree, and whether the cache had
    /// another one.
    global: u64,
    global_changed: bool,
}

impl Scan {
    /// The state the cache describes, unchanged: its root tree whole, nothing read.
    fn as_cached(cache: Cache, global: u64, tree: cas::TreeId, size: u64) -> Scan {
        let (file_count, bytes) = totals(&cache.dirs);
        let mut skipped: Vec<Skipped> = (cache.dirs.iter())
            .flat_map(|(dir, state)| cached_skipped(dir, state))
            .collect();
        skipped.sort_by(|a, b| tree_order(&a.path, &b.path));
        Scan {
            held_files: 0,
            skipped,
            read_files: 0,
            unstored: WriteBatch::new(),
            file_count,
            bytes,
            dirs: cache.dirs,
            reuse: HashMap::from([(RepoPathBuf::root(), (tree, size))]),
            dirty: HashSet::new(),
            stale: Vec::new(),
            global,
            global_changed: false,
        }
    }

    /// Hands over the directories, for their trees to be built, and what settling the
    /// cache against those trees takes.
    pub fn take_dirs(&mut self) -> (HashMap<RepoPathBuf, DirState>, Settle) {
        let settle = Settle {
            dirty: std::mem::take(&mut self.dirty),
            stale: std::mem::take(&mut self.stale),
            global: self.global,
            global_changed: self.global_changed,
            updates: Vec::new(),
        };
        (std::mem::take(&mut self.dirs), settle)
    }
}

/// The stat cache's updates, made as a capture's trees are built.
pub struct Settle {
    /// Directories whose records change and are not written yet.
    dirty: HashSet<RepoPathBuf>,
    stale: Vec<RepoPathBuf>,
    global: u64,
    global_changed: bool,
    updates: Vec<CacheUpdate>,
}

impl Settle {
    /// Directory `path` has its tree built (`tree`, unless empty), `changed` if its state
    /// had another: its record, if it changes, is written now, pointing into that tree.
    pub fn built(
        &mut self,
        path: &RepoPath,
        state: &DirState,
        changed: bool,
        tree: Option<&cas::Tree>,
    ) {
        let dirty = self.dirty.remove(path);
        if changed || dirty {
            // Blob ids its tree holds are not repeated: the record points into it.
            let record = state.encode_against(tree);
            self.updates
                .push((dirstate::dir_key(path.as_bytes()), record));
        }
    }

    /// The cache's store updates (keys as [`dirstate::dir_key`], `None` to forget), and
    /// the cache `dirs` make once they are written.
    pub fn finish(mut self, dirs: HashMap<RepoPathBuf, DirState>) -> (Vec<CacheUpdate>, Cache) {
        for path in &self.dirty {
            if let Some(dir) = dirs.get(path) {
                self.updates
                    .push((dirstate::dir_key(path.as_bytes()), dir.encode_against(None)));
            }
        }
        for path in &self.stale {
            self.updates
                .push((dirstate::dir_key(path.as_bytes()), None));
        }
        if self.global_changed {
            self.updates.push((
                dirstate::GLOBAL_KEY.to_vec(),
                Some(self.global.to_le_bytes().to_vec()),
            ));
        }
        let cache = Cache {
            dirs,
            global: Some(self.global),
        };
        (self.updates, cache)
    }
}

enum Found {
    File(Walked),
    Skip(Skipped),
    Fail(ScanError),
}

/// Decides which cached directories can be skipped: stamp and ignore files unchanged, no
/// ignore file above them changed, and the same holds for every directory below.
fn prunable(root: &Path, cache: &Cache, quiet: Option<&Quiet>) -> HashSet<RepoPathBuf> {
    // In tree order (`RepoPath`'s `Ord`), so each directory comes before those below it.
    let mut keys: Vec<&RepoPathBuf> = cache.dirs.keys().collect();
    keys.sort_unstable();
    let checks: Vec<(bool, bool)> = keys
        .par_iter()
        .map(|k| {
            if quiet.is_some_and(|q| q.contains(k.as_bytes())) {
                return (true, true);
            }
            let state = &cache.dirs[*k];
            let Ok(dir) = CachedDir::open(root, k.as_bytes()) else {
                return (false, false);
            };
            // An unchanged directory cannot have gained an ignore file, so only the ones it
            // had are checked; a changed one is checked in full.
            let stamp_ok = state.stamp.still_valid(&dir.meta);
            let only = stamp_ok.then_some(state.ignore.mask);
            let ignore_ok = dir.at().ignore_stamp(only).0 == state.ignore;
            (stamp_ok && ignore_ok, ignore_ok)
        })
        .collect();
    let ignore_changed: HashSet<&RepoPath> = keys
        .iter()
        .zip(&checks)
        .filter(|(_, (_, ok))| !ok)
        .map(|(k, _)| k.as_repo_path())
        .collect();
    let under_changed_rules =
        |k: &RepoPath| (k.ancestors().skip(1)).any(|up| ignore_changed.contains(up));
    let mut out = HashSet::new();
    for (k, (valid, _)) in keys.iter().zip(&checks).rev() {
        let state = &cache.dirs[*k];
        let children_ok = state.tally().dirs == 0
            || state.children().iter().all(|(name, c)| match c {
                // The name comes from a stored listing, which holds file names only:
                // checked, so a name no tree holds is no pruned directory.
                Child::Dir => k.join(name).is_ok_and(|child| out.contains(&child)),
                _ => true,
            });
        if *valid && children_ok && !under_changed_rules(k) {
            out.insert((*k).clone());
        }
    }
    out
}

/// A directory as it is now: its stat, and where its pattern files are found (by path, or
/// through a handle where its names are out of the system's reach by path).
struct CachedDir {
    path: PathBuf,
    handle: Option<OwnedFd>,
    meta: Metadata,
}

impl CachedDir {
    fn open(root: &Path, rel: &[u8]) -> std::io::Result<CachedDir> {
        let path = join(root, rel);
        if reach::listable(root, rel) {
            let meta = path.symlink_metadata()?;
            return Ok(CachedDir {
                path,
                handle: None,
                meta,
            });
        }
        let dir = File::from(reach::open_dir(root, rel)?);
        let meta = dir.metadata()?;
        Ok(CachedDir {
            path,
            handle: Some(dir.into()),
            meta,
        })
    }

    fn at(&self) -> DirAt<'_> {
        DirAt {
            abs: &self.path,
            handle: self.handle.as_ref(),
        }
    }
}

/// Refuses a root whose walk would take in every file system there is (`/`), or that is
/// itself a pseudo file system.
fn refuse_root(root: &Path) -> Result<(), ScanError> {
    let refused = |reason: String| ScanError::Refused {
        path: root.to_path_buf(),
        reason,
    };
    if root.parent().is_none() {
        return Err(refused(
            "the file-system root cannot be a worktree (name a project directory)".to_owned(),
        ));
    }
    let dev = root
        .symlink_metadata()
        .map_err(|source| ScanError::Io {
            path: root.to_path_buf(),
            source,
        })?
        .dev();
    if let Some(fs) = rules::pseudo_filesystem(root, dev) {
        return Err(refused(format!(
            "on a pseudo file system ({fs}), which is never captured"
        )));
    }
    Ok(())
}

/// Scans the scope of `root` against `cache`, reading what the cache cannot vouch for and,
/// unless `dry_run`, storing it (the last group of new blobs is left in [`Scan::unstored`]
/// for the capture's own transaction). Files that vanish meanwhile are left out; files that change
/// while read are re-read and, if they never hold still, captured as read but not cached.
pub fn scan(
    store: &Store,
    root: &Utf8Path,
    mut cache: Cache,
    options: &ScanOptions<'_>,
) -> Result<Scan, ScanError> {
    let root_path = root.as_std_path();
    refuse_root(root_path)?;
    let scope = options.scope;
    let mut patterns = scope.deny().patterns().to_vec();
    patterns.extend(scope.max_file_size().map(|n| format!("max-file-size {n}")));
    let global = dirstate::global_stamp(root_path, &patterns, scope.global_sources());
    let reuse = cache.global == Some(global);
    // A watcher saw nothing happen anywhere since the cache was verified, and no suspect
    // file moved: it is the state.
    if reuse
        && let Some(quiet) = options.quiet
        && let Some((tree, size)) = cache.dirs.get(RepoPath::root()).and_then(|d| d.tree)
        && cache.dirs.keys().all(|d| quiet.contains(d.as_bytes()))
        && quiet.with_suspects().all(|(dir, names)| {
            // The watcher's paths are bytes (see `watch`): checked before a lookup.
            let state = RepoPath::new(dir).ok().and_then(|dir| cache.dirs.get(dir));
            state.is_some_and(|state| {
                !state.tally().racy
                    && suspects_match(root_path, dir, state, names, scope.max_file_size())
            })
        })
    {
        return Ok(Scan::as_cached(cache, global, tree, size));
    }
    let t = std::time::Instant::now();
    let skip = if reuse {
        prunable(root_path, &cache, options.quiet)
    } else {
        HashSet::new()
    };
    tracing::debug!(elapsed = ?t.elapsed(), reuse, prunable = skip.len(), "validated cache");

    let mut read_dirs: ReadDirs = HashMap::new();
    let mut walked = Vec::new();
    let mut skipped = Vec::new();
    let pruned: Vec<RepoPathBuf> = if skip.contains(RepoPath::root()) {
        vec![RepoPathBuf::root()]
    } else {
        let root_dir = CachedDir::open(root_path, b"").map_err(|source| ScanError::Io {
            path: root_path.to_owned(),
            source,
        })?;
        let root_meta = &root_dir.meta;
        let (root_ignore, root_git_file) = root_dir.at().ignore_stamp(None);
        read_dirs.insert(
            RepoPathBuf::root(),
            (DirStamp::of(root_meta, now_ns()), root_ignore),
        );
        let found = walk(
            root_path,
            root_meta.dev(),
            (root_ignore, root_git_file),
            options,
            &skip,
        )?;
        walked = found.files;
        skipped = found.skipped;
        for (path, stamp, ignore) in found.read_dirs {
            read_dirs.insert(path, (stamp, ignore));
        }
        for w in &mut walked {
            let (parent, name) = w.dir_and_name();
            w.cached = cache
                .dirs
                .get(parent)
                .and_then(|d| d.file(name))
                .map(|f| Box::new(*f));
        }
        found.pruned
    };

    // Unchanged subtrees: their cached listings stand; every file is lstat'ed afresh,
    // relative to its directory's descriptor.
    // In tree order (`RepoPath`'s `Ord`): a directory's subtree follows it unbroken.
    let mut keys: Vec<&RepoPathBuf> = cache.dirs.keys().collect();
    keys.sort_unstable();
    let mut unchanged: Vec<&RepoPathBuf> = Vec::new();
    for top in &pruned {
        let start = keys.partition_point(|k| *k < top);
        for k in &keys[start..] {
            if !k.starts_with(top) {
                break;
            }
            unchanged.push(k);
        }
    }
    // Every unchanged directory's files are lstat'ed (or, quiet under a watcher, trusted);
    // a directory where all of them still match their cache entries is *clean* and
    // yields nothing yet.
    let listed: Vec<Listed> = unchanged
        .par_iter()
        .map(|dir| {
            let quiet = options
                .quiet
                .filter(|q| q.contains(dir.as_bytes()))
                .map(|q| q.suspects(dir.as_bytes()));
            stat_listing(
                root_path,
                dir,
                &cache.dirs[*dir],
                scope.max_file_size(),
                quiet,
            )
        })
        .collect();
    // A clean directory's state stands in `cache.dirs` as it is (its trees are built from
    // there), so a capture holds in memory, file by file, only the files of directories
    // that changed.
    let mut vanished: Vec<Vec<u8>> = Vec::new();
    for (dir, listing) in unchanged.iter().zip(listed) {
        match listing {
            Listed::Changed((files, skips, gone)) => {
                walked.extend(files);
                skipped.extend(skips);
                vanished.extend(gone);
            }
            Listed::Clean => skipped.extend(cached_skipped(dir, &cache.dirs[*dir])),
        }
    }
    let unchanged: HashSet<RepoPathBuf> = unchanged.into_iter().cloned().collect();
    // Files to compare with entries whose blob ids are still in their directory's tree:
    // those trees are read now (a directory where nothing changed never has its read).
    let pending: HashSet<RepoPathBuf> = walked
        .iter()
        .map(|w| w.dir_and_name().0)
        .filter(|dir| cache.dirs.get(*dir).is_some_and(|d| d.pending))
        .map(RepoPath::to_owned)
        .collect();
    if !pending.is_empty() {
        let wanted = pending.iter().map(RepoPathBuf::as_repo_path).collect();
        // A read view of its own: one held while the groups below are written would keep
        // every page those writes free from being used again, and the file would grow.
        dirstate::resolve_dirs(&mut cache.dirs, &wanted, &store.reader()?)
            .map_err(|(dir, tree)| stale(root_path, &dir, tree))?;
        for w in walked.iter_mut().filter(|w| w.cached.is_none()) {
            let (parent, name) = w.dir_and_name();
            if pending.contains(parent) {
                w.cached = cache
                    .dirs
                    .get(parent)
                    .and_then(|d| d.file(name))
                    .map(|f| Box::new(*f));
            }
        }
    }
    tracing::debug!(elapsed = ?t.elapsed(), pruned = pruned.len(), files = walked.len(), "listed and stat'ed");
    // Paths are unique; compared in place, as a key per file would be a second copy of them.
    walked.par_sort_unstable_by(|a, b| tree_order(&a.path, &b.path));
    skipped.sort_by(|a, b| tree_order(&a.path, &b.path));

    let mut assembly = Assembly::new(cache.dirs, &unchanged, &read_dirs);
    let held_files = walked.len() as u64;
    let hashed = hash_walked(
        store,
        root_path,
        walked,
        options.dry_run,
        options.group_bytes,
        options.progress,
        &mut |w, result| assembly.found(w, result),
    )?;
    tracing::debug!(elapsed = ?t.elapsed(), "hashed");
    let Assembled {
        dirs,
        dirty,
        stale,
        reuse: reuse_trees,
    } = assembly
        .finish(&unchanged, &pruned, &vanished, &skipped, &store.reader()?)
        .map_err(|lost| match lost {
            Lost::Listing(dir) => ScanError::Io {
                path: dir.to_fs_path(root_path),
                source: std::io::Error::other(
                    "its listing was lost during the capture; snapshot again",
                ),
            },
            Lost::Tree(dir, tree) => stale(root_path, &dir, tree),
        })?;
    tracing::debug!(elapsed = ?t.elapsed(), dirty = dirty.len(), reused = reuse_trees.len(), "state assembled");

    let (file_count, bytes) = totals(&dirs);
    Ok(Scan {
        held_files,
        file_count,
        skipped,
        read_files: hashed.read_files,
        unstored: hashed.unstored,
        bytes,
        dirs,
        reuse: reuse_trees,
        dirty,
        stale,
        global,
        global_changed: !reuse,
    })
}

/// Files in `dirs`, and their bytes.
fn totals(dirs: &HashMap<RepoPathBuf, DirState>) -> (u64, u64) {
    dirs.values()
        .map(DirState::tally)
        .fold((0, 0), |(files, bytes), t| {
            (files + t.files, bytes + t.bytes)
        })
}
