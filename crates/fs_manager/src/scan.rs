//! Walking a worktree's scope and hashing what changed.
//!
//! A scan reuses the per-directory cache ([`crate::dirstate`]): directories whose stamp and
//! ignore files are unchanged (and all their subdirectories too) are not read again; the
//! `ignore` crate's walker lists the rest (by absolute path; where a path may be longer than
//! the system takes, by directory handle: [`crate::reach`]) and [`crate::scope`] says what
//! of it is in scope.
//! Every file is `lstat`ed; only files whose stat differs from the cache are read, and none
//! further than its size says.

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
use path_policy::RepoPathBuf;
use rayon::prelude::*;

use crate::dirstate::{self, Cache, Child, DirStamp, DirState, IgnoreStamp, Name};
use crate::paths::{SkipReason, Skipped, Special, join, shown, split_parent, tree_order};
use crate::progress::Progress;
use crate::reach;
use crate::rules::{self, Rules};
use crate::scope::{DirRules, Leaf, Scope, Verdict};
use crate::state::{FileState, Stat, now_ns};
use crate::watch::Quiet;

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
    Store(#[from] cas::Error),
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

/// Files larger than this are streamed into the store chunk by chunk.
const STREAM_BYTES: u64 = 16 << 20;
/// Memory a group of read files may take before the group's blobs are written: their
/// bytes, and [`FILE_OVERHEAD`] each. Small in unit tests, so their captures go through
/// several groups, as a large tree's do.
const GROUP_BYTES: u64 = if cfg!(test) { 2 << 10 } else { 64 << 20 };
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
    path: Vec<u8>,
    stat: Stat,
    kind: EntryKind,
    /// Boxed: most walked files have none (a first capture walks every file).
    cached: Option<Box<FileState>>,
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
pub(crate) struct ScanOptions<'a> {
    /// 1 walks sequentially; 0 picks a thread count.
    pub threads: usize,
    /// Hash only; store nothing.
    pub dry_run: bool,
    /// What is in scope.
    pub scope: &'a Scope,
    /// Cached directories a watcher saw nothing happen in: their listings are trusted, and
    /// only their suspect files `lstat`'ed.
    pub quiet: Option<&'a Quiet>,
    pub progress: &'a dyn Progress,
}

/// A stat-cache record to write (`Some`) or forget (`None`), by store key.
pub(crate) type CacheUpdate = (Vec<u8>, Option<Vec<u8>>);

/// What a scan found.
pub(crate) struct Scan {
    /// Files held one by one in memory (those of directories that changed); the rest
    /// stood as cached.
    pub held_files: u64,
    pub skipped: Vec<Skipped>,
    /// Files whose content was read (the rest came from the stat cache).
    pub read_files: u64,
    /// New blobs the files hold that are not stored yet: the capture stores them with
    /// its snapshot, in one transaction.
    pub unstored: WriteBatch,
    /// Files in scope.
    pub file_count: u64,
    pub bytes: u64,
    /// The new per-directory state, by directory path: what the trees are built from.
    pub dirs: HashMap<Vec<u8>, DirState>,
    /// Subtrees where nothing changed, with their trees: not rebuilt.
    pub reuse: HashMap<Vec<u8>, (cas::TreeId, u64)>,
    dirty: HashSet<Vec<u8>>,
    stale: Vec<Vec<u8>>,
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
            reuse: HashMap::from([(Vec::new(), (tree, size))]),
            dirty: HashSet::new(),
            stale: Vec::new(),
            global,
            global_changed: false,
        }
    }

    /// Hands over the directories, for their trees to be built, and what settling the
    /// cache against those trees takes.
    pub fn take_dirs(&mut self) -> (HashMap<Vec<u8>, DirState>, Settle) {
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
pub(crate) struct Settle {
    /// Directories whose records change and are not written yet.
    dirty: HashSet<Vec<u8>>,
    stale: Vec<Vec<u8>>,
    global: u64,
    global_changed: bool,
    updates: Vec<CacheUpdate>,
}

impl Settle {
    /// Directory `path` has its tree built (`tree`, unless empty), `changed` if its state
    /// had another: its record, if it changes, is written now, pointing into that tree.
    pub fn built(
        &mut self,
        path: &[u8],
        state: &DirState,
        changed: bool,
        tree: Option<&cas::Tree>,
    ) {
        let dirty = self.dirty.remove(path);
        if changed || dirty {
            // Blob ids its tree holds are not repeated: the record points into it.
            let record = state.encode_against(tree);
            self.updates.push((dirstate::dir_key(path), record));
        }
    }

    /// The cache's store updates (keys as [`dirstate::dir_key`], `None` to forget), and
    /// the cache `dirs` make once they are written.
    pub fn finish(mut self, dirs: HashMap<Vec<u8>, DirState>) -> (Vec<CacheUpdate>, Cache) {
        for path in &self.dirty {
            if let Some(dir) = dirs.get(path) {
                self.updates
                    .push((dirstate::dir_key(path), dir.encode_against(None)));
            }
        }
        for path in &self.stale {
            self.updates.push((dirstate::dir_key(path), None));
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
fn prunable(root: &Path, cache: &Cache, quiet: Option<&Quiet>) -> HashSet<Vec<u8>> {
    let mut keys: Vec<&Vec<u8>> = cache.dirs.keys().collect();
    keys.sort_by(|a, b| tree_order(a, b));
    let checks: Vec<(bool, bool)> = keys
        .par_iter()
        .map(|k| {
            if quiet.is_some_and(|q| q.contains(k)) {
                return (true, true);
            }
            let state = &cache.dirs[*k];
            let Ok(dir) = CachedDir::open(root, k) else {
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
    let ignore_changed: HashSet<&[u8]> = keys
        .iter()
        .zip(&checks)
        .filter(|(_, (_, ok))| !ok)
        .map(|(k, _)| k.as_slice())
        .collect();
    let under_changed_rules = |k: &[u8]| {
        let mut p = k;
        loop {
            let (parent, _) = split_parent(p);
            if p.is_empty() {
                return false;
            }
            if ignore_changed.contains(parent) {
                return true;
            }
            p = parent;
        }
    };
    let mut out = HashSet::new();
    for (k, (valid, _)) in keys.iter().zip(&checks).rev() {
        let state = &cache.dirs[*k];
        let children_ok = state.tally().dirs == 0
            || state.children().iter().all(|(name, c)| match c {
                Child::Dir => {
                    let mut child = (*k).clone();
                    if !child.is_empty() {
                        child.push(b'/');
                    }
                    child.extend_from_slice(name);
                    out.contains(&child)
                }
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
pub(crate) fn scan(
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
        && let Some((tree, size)) = cache.dirs.get(&Vec::new()).and_then(|d| d.tree)
        && cache.dirs.keys().all(|d| quiet.contains(d))
        && quiet.with_suspects().all(|(dir, names)| {
            cache.dirs.get(dir).is_some_and(|state| {
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
    let pruned: Vec<Vec<u8>> = if skip.contains(&Vec::new()) {
        vec![Vec::new()]
    } else {
        let root_dir = CachedDir::open(root_path, b"").map_err(|source| ScanError::Io {
            path: root_path.to_owned(),
            source,
        })?;
        let root_meta = &root_dir.meta;
        let (root_ignore, root_git_file) = root_dir.at().ignore_stamp(None);
        read_dirs.insert(Vec::new(), (DirStamp::of(root_meta, now_ns()), root_ignore));
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
            let (parent, name) = split_parent(&w.path);
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
    let mut keys: Vec<&Vec<u8>> = cache.dirs.keys().collect();
    keys.sort_by(|a, b| tree_order(a, b));
    let mut unchanged: Vec<&Vec<u8>> = Vec::new();
    for top in &pruned {
        let start = keys.partition_point(|k| tree_order(k, top) == std::cmp::Ordering::Less);
        for k in &keys[start..] {
            let inside = top.is_empty()
                || *k == top
                || (k.starts_with(top) && k.get(top.len()) == Some(&b'/'));
            if !inside {
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
                .filter(|q| q.contains(dir))
                .map(|q| q.suspects(dir));
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
    let unchanged: HashSet<Vec<u8>> = unchanged.into_iter().cloned().collect();
    // Files to compare with entries whose blob ids are still in their directory's tree:
    // those trees are read now (a directory where nothing changed never has its read).
    let pending: HashSet<Vec<u8>> = walked
        .iter()
        .map(|w| split_parent(&w.path).0)
        .filter(|dir| cache.dirs.get(*dir).is_some_and(|d| d.pending))
        .map(<[u8]>::to_vec)
        .collect();
    if !pending.is_empty() {
        let wanted = pending.iter().map(Vec::as_slice).collect();
        // A read view of its own: one held while the groups below are written would keep
        // every page those writes free from being used again, and the file would grow.
        dirstate::resolve_dirs(&mut cache.dirs, &wanted, &store.reader()?)
            .map_err(|(dir, tree)| stale(root_path, &dir, tree))?;
        for w in walked.iter_mut().filter(|w| w.cached.is_none()) {
            let (parent, name) = split_parent(&w.path);
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
                path: join(root_path, &dir),
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
fn totals(dirs: &HashMap<Vec<u8>, DirState>) -> (u64, u64) {
    dirs.values()
        .map(DirState::tally)
        .fold((0, 0), |(files, bytes), t| {
            (files + t.files, bytes + t.bytes)
        })
}

/// Directory paths read whole at the last capture.
type ReadDirs = HashMap<Vec<u8>, (DirStamp, IgnoreStamp)>;

/// The new per-directory state, put together as files are hashed (in any order):
/// `unchanged` directories as cached, with the states of files read again; listed ones
/// afresh. So no list of every file's result is ever held.
struct Assembly<'a> {
    dirs: HashMap<Vec<u8>, DirState>,
    read_dirs: &'a ReadDirs,
    /// Directories whose records changed.
    dirty: HashSet<Vec<u8>>,
    /// Cached directories that are gone.
    stale: Vec<Vec<u8>>,
    /// Directories whose trees are built again: listed afresh, or holding a file read
    /// again or gone, and every directory above them.
    changed: HashSet<Vec<u8>>,
    /// A walked file's directory that has no state (a listing lost on the way).
    lost: Option<Vec<u8>>,
}

/// What [`Assembly::finish`] could not put together.
enum Lost {
    /// A walked file's directory has no state.
    Listing(Vec<u8>),
    /// A directory built again takes blob ids from a tree the store cannot give.
    Tree(Vec<u8>, cas::TreeId),
}

fn stale(root: &Path, dir: &[u8], tree: cas::TreeId) -> ScanError {
    ScanError::StaleCache {
        path: join(root, dir),
        tree,
    }
}

/// What [`Assembly::finish`] gives.
struct Assembled {
    dirs: HashMap<Vec<u8>, DirState>,
    dirty: HashSet<Vec<u8>>,
    stale: Vec<Vec<u8>>,
    /// The trees of unchanged directories that stand as they are.
    reuse: HashMap<Vec<u8>, (cas::TreeId, u64)>,
}

fn mark_changed(changed: &mut HashSet<Vec<u8>>, mut dir: &[u8]) {
    while changed.insert(dir.to_vec()) && !dir.is_empty() {
        dir = split_parent(dir).0;
    }
}

impl<'a> Assembly<'a> {
    fn new(
        cached: HashMap<Vec<u8>, DirState>,
        unchanged: &HashSet<Vec<u8>>,
        read_dirs: &'a ReadDirs,
    ) -> Assembly<'a> {
        let mut dirs = cached;
        let stale: Vec<Vec<u8>> = dirs
            .keys()
            .filter(|k| !unchanged.contains(*k) && !read_dirs.contains_key(*k))
            .cloned()
            .collect();
        for k in &stale {
            dirs.remove(k);
        }
        let mut dirty = HashSet::new();
        let mut changed = HashSet::new();
        for (path, (stamp, ignore)) in read_dirs {
            dirs.insert(path.clone(), DirState::listed(*stamp, *ignore));
            dirty.insert(path.clone());
            mark_changed(&mut changed, path);
        }
        Assembly {
            dirs,
            read_dirs,
            dirty,
            stale,
            changed,
            lost: None,
        }
    }

    /// Records what hashing a walked file gave (`None`: it vanished or changed type).
    fn found(&mut self, w: &Walked, result: Option<Content>) {
        let (parent, name) = split_parent(&w.path);
        let listed_now = self.read_dirs.contains_key(parent);
        let cached = w.cached.as_deref().copied();
        let was_read = result.as_ref().is_none_or(|c| c.state != cached);
        if was_read {
            mark_changed(&mut self.changed, parent);
        }
        if !listed_now && !was_read {
            return;
        }
        // Every walked file's directory was listed or is unchanged: its state is here.
        let Some(dir) = self.dirs.get_mut(parent) else {
            self.lost.get_or_insert_with(|| parent.to_vec());
            return;
        };
        let state = match result {
            // Never held still: what was read, under an entry no later stat matches
            // (verified at the beginning of time, so always racy).
            Some(c) => c.state.unwrap_or_else(|| {
                FileState::from_stat(&w.stat.holding(c.kind, c.size), c.blob, i64::MIN)
            }),
            None => {
                // Gone or changed type while read: look at the directory again next time.
                dir.stamp.verified_ns = 0;
                dir.children_mut().retain(|(n, _)| n.as_slice() != name);
                self.dirty.insert(parent.to_vec());
                return;
            }
        };
        if listed_now {
            dir.children_mut()
                .push((Name::from_slice(name), Child::File(state)));
        } else if let Ok(i) = dir
            .children()
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
        {
            dir.children_mut()[i].1 = Child::File(state);
            self.dirty.insert(parent.to_vec());
        }
    }

    /// Adds files that are gone, listed subdirectories and skipped entries, sorts the
    /// listings, and takes the blob ids of every directory built again out of its tree.
    fn finish(
        mut self,
        unchanged: &HashSet<Vec<u8>>,
        pruned: &[Vec<u8>],
        vanished: &[Vec<u8>],
        skipped: &[Skipped],
        reader: &cas::Reader,
    ) -> Result<Assembled, Lost> {
        if let Some(dir) = self.lost {
            return Err(Lost::Listing(dir));
        }
        let read_dirs = self.read_dirs;
        for path in vanished {
            let (parent, name) = split_parent(path);
            mark_changed(&mut self.changed, parent);
            if let Some(dir) = self.dirs.get_mut(parent) {
                dir.stamp.verified_ns = 0;
                dir.children_mut().retain(|(n, _)| n.as_slice() != name);
                self.dirty.insert(parent.to_vec());
            }
        }
        let subdirs = read_dirs
            .keys()
            .chain(pruned.iter())
            .filter(|k| !k.is_empty());
        let mut additions: Vec<(Vec<u8>, Name, Child)> = subdirs
            .map(|sub| {
                let (parent, name) = split_parent(sub);
                (parent.to_vec(), Name::from_slice(name), Child::Dir)
            })
            .collect();
        for s in skipped {
            let (parent, name) = listing_slot(&s.path);
            if read_dirs.contains_key(parent) {
                additions.push((
                    parent.to_vec(),
                    Name::from_slice(name),
                    Child::Skipped(s.reason.clone()),
                ));
            } else if let Some(dir) = self.dirs.get_mut(parent)
                && let Ok(i) = dir
                    .children()
                    .binary_search_by(|(n, _)| n.as_slice().cmp(name))
                && matches!(dir.children()[i].1, Child::File(_))
            {
                // A cached file now left out (grown past the size cap): out of its tree.
                dir.children_mut()[i].1 = Child::Skipped(s.reason.clone());
                self.dirty.insert(parent.to_vec());
                mark_changed(&mut self.changed, parent);
            }
        }
        for (parent, name, child) in additions {
            if read_dirs.contains_key(&parent)
                && let Some(dir) = self.dirs.get_mut(&parent)
            {
                dir.children_mut().push((name, child));
            }
        }
        for path in read_dirs.keys() {
            if let Some(dir) = self.dirs.get_mut(path) {
                dir.children_mut().sort_by(|a, b| a.0.cmp(&b.0));
                dir.children_mut().dedup_by(|a, b| a.0 == b.0);
            }
        }
        let rebuilt = self
            .changed
            .iter()
            .chain(&self.dirty)
            .map(Vec::as_slice)
            .collect();
        dirstate::resolve_dirs(&mut self.dirs, &rebuilt, reader)
            .map_err(|(dir, tree)| Lost::Tree(dir, tree))?;
        let reuse = unchanged
            .iter()
            .filter(|d| !self.changed.contains(*d))
            .filter_map(|d| {
                self.dirs
                    .get(d)
                    .and_then(|s| s.tree)
                    .map(|t| (d.clone(), t))
            })
            .collect();
        Ok(Assembled {
            dirs: self.dirs,
            dirty: self.dirty,
            stale: self.stale,
            reuse,
        })
    }
}

/// An unchanged directory's files, skipped entries, and files no longer there.
type Listing = (Vec<Walked>, Vec<Skipped>, Vec<Vec<u8>>);

/// What lstat'ing an unchanged directory's files found.
enum Listed {
    /// Every file as its cache entry says, none racy: the listing stands as cached.
    Clean,
    Changed(Listing),
}

fn child_path(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(dir.len() + 1 + name.len());
    path.extend_from_slice(dir);
    if !dir.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// A cache entry to compare a file with, unless its blob id is still in its tree (taken
/// out, if the file is to be compared, before it is: see `scan`).
fn known(cached: &FileState) -> Option<Box<FileState>> {
    (cached.blob != dirstate::UNRESOLVED).then(|| Box::new(*cached))
}

/// The skipped entries of a directory's cached listing.
fn cached_skipped(dir: &[u8], state: &DirState) -> Vec<Skipped> {
    if state.tally().skipped == 0 {
        return Vec::new();
    }
    state
        .children()
        .iter()
        .filter_map(|(name, child)| match child {
            Child::Skipped(reason) => Some(Skipped {
                path: child_path(dir, name),
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// An unchanged directory's racy files as its cache holds them, and its skipped entries.
fn racy_listing(dir: &[u8], state: &DirState) -> Listing {
    let files = state
        .children()
        .iter()
        .filter_map(|(name, child)| match child {
            Child::File(cached) if cached.is_racy() => Some(Walked {
                path: child_path(dir, name),
                stat: cached.stat(),
                kind: cached.stat().kind()?,
                cached: known(cached),
            }),
            _ => None,
        })
        .collect();
    (files, cached_skipped(dir, state), Vec::new())
}

/// The files of an unchanged directory, lstat'ed through one directory descriptor (or,
/// `quiet`, trusted as cached unless one of the suspect files it names moved):
/// [`Listed::Clean`] if every one matches its entry and none is racy, else its files,
/// skipped entries, and the files that are no longer there (or no longer files).
fn stat_listing(
    root: &Path,
    dir: &[u8],
    state: &DirState,
    max_file_size: Option<u64>,
    quiet: Option<&[Vec<u8>]>,
) -> Listed {
    if let Some(suspects) = quiet
        && (suspects.is_empty() || suspects_match(root, dir, state, suspects, max_file_size))
    {
        // Nothing happened here since the cache was verified: it stands as it is, but a
        // racy file is read again (the others stay as cached).
        return match state.tally().racy {
            false => Listed::Clean,
            true => Listed::Changed(racy_listing(dir, state)),
        };
    }
    let fd = path_fd(root, dir);
    let stat_of = |name: &[u8]| fd.as_ref().and_then(|fd| stat_at(fd, name));
    // First only compare: most directories are clean, and need no allocation per file.
    let mut stats = Vec::with_capacity(state.children().len());
    let mut clean = true;
    for (name, child) in state.children() {
        let Child::File(cached) = child else {
            continue;
        };
        let stat = stat_of(name);
        clean &= !cached.is_racy() && same_file(cached, stat.as_ref(), max_file_size);
        stats.push(stat);
    }
    if clean {
        return Listed::Clean;
    }
    let mut files = Vec::with_capacity(stats.len());
    let mut skipped = Vec::new();
    let mut gone = Vec::new();
    let mut stats = stats.into_iter();
    for (name, child) in state.children() {
        let path = child_path(dir, name);
        match child {
            Child::File(cached) => {
                let stat = stats.next().flatten();
                match stat.and_then(|st| st.kind().map(|k| (st, k))) {
                    Some((stat, kind)) => match oversize(&stat, kind, max_file_size) {
                        Some(reason) => skipped.push(Skipped { path, reason }),
                        None => files.push(Walked {
                            path,
                            stat,
                            kind,
                            cached: known(cached),
                        }),
                    },
                    None => gone.push(path),
                }
            }
            Child::Skipped(reason) => skipped.push(Skipped {
                path,
                reason: reason.clone(),
            }),
            Child::Dir => {}
        }
    }
    Listed::Changed((files, skipped, gone))
}

/// True if every suspect file `names` of quiet `dir` still has its cached stat (a racy
/// one is read again all the same; a skipped entry stands: its name or size kept it out,
/// and neither moves without an event).
fn suspects_match(
    root: &Path,
    dir: &[u8],
    state: &DirState,
    names: &[Vec<u8>],
    max_file_size: Option<u64>,
) -> bool {
    let Some(fd) = path_fd(root, dir) else {
        return false;
    };
    names.iter().all(|name| match state.child(name) {
        Some(Child::File(cached)) => same_file(cached, stat_at(&fd, name).as_ref(), max_file_size),
        Some(Child::Skipped(_)) => true,
        Some(Child::Dir) | None => false,
    })
}

/// True if `stat` (None: gone) is the cached file's and in scope.
fn same_file(cached: &FileState, stat: Option<&Stat>, max_file_size: Option<u64>) -> bool {
    stat.is_some_and(|st| {
        cached.matches(st)
            && st
                .kind()
                .is_some_and(|k| oversize(st, k, max_file_size).is_none())
    })
}

/// `dir` opened `O_PATH`: enough for `statat`, and raises no open event for a watcher.
/// (A directory whose names are out of the system's reach by path is opened by handle,
/// and is never watched.)
fn path_fd(root: &Path, dir: &[u8]) -> Option<rustix::fd::OwnedFd> {
    if !reach::listable(root, dir) {
        return reach::open_dir(root, dir).ok();
    }
    rustix::fs::open(
        join(root, dir),
        rustix::fs::OFlags::PATH
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()
}

fn stat_at(dir: &rustix::fd::OwnedFd, name: &[u8]) -> Option<Stat> {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| Stat::from_rustix(&st))
}

struct Walk {
    files: Vec<Walked>,
    skipped: Vec<Skipped>,
    /// Directories the walker listed, with the stamp taken just before.
    read_dirs: Vec<(Vec<u8>, DirStamp, IgnoreStamp)>,
    /// Directories it was told to skip.
    pruned: Vec<Vec<u8>>,
}

/// What the walk knows of a directory it entered: the rules in force there and its device.
#[derive(Clone)]
struct Entered {
    rules: Option<Arc<Rules>>,
    dev: u64,
}

/// Directories entered so far, by path from the root: the walker lists a directory only
/// after it passed the filter, so its entry is here before its children's.
type EnteredDirs = RwLock<HashMap<Vec<u8>, Entered>>;

/// What the walk knows of the directory holding `rel`: its own entry or, should it have
/// none (its stat failed), its nearest ancestor's.
fn entered_above(dirs: &EnteredDirs, rel: &[u8]) -> Option<Entered> {
    let dirs = dirs.read().ok()?;
    let mut dir = split_parent(rel).0;
    loop {
        if let Some(e) = dirs.get(dir) {
            return Some(e.clone());
        }
        if dir.is_empty() {
            return None;
        }
        dir = split_parent(dir).0;
    }
}

/// Where the walk finds a directory's pattern files: by absolute path, or through a handle
/// of a directory whose names the system may not take from `/` (`abs` is then only shown).
#[derive(Clone, Copy)]
struct DirAt<'a> {
    abs: &'a Path,
    handle: Option<&'a OwnedFd>,
}

impl DirAt<'_> {
    /// The stamp of the pattern files (`only` those bits), and whether `.git` is a file.
    fn ignore_stamp(self, only: Option<u8>) -> (IgnoreStamp, bool) {
        match self.handle {
            None => IgnoreStamp::with_git_file(self.abs, only),
            Some(dir) => {
                IgnoreStamp::with_git_file_by(|name| reach::lstat_at(dir, OsStr::new(name)), only)
            }
        }
    }

    /// [`rules::load`] of this directory, `rel` from the root.
    fn rules(
        self,
        rel: &[u8],
        stamps: (&IgnoreStamp, bool),
        parent: Option<&Arc<Rules>>,
    ) -> (Option<Arc<Rules>>, Option<Skipped>) {
        match self.handle {
            None => rules::load(&rules::OnDisk, self.abs, rel, stamps, parent),
            Some(dir) => {
                let source = reach::RulesBeneath { dir, abs: self.abs };
                rules::load(&source, self.abs, rel, stamps, parent)
            }
        }
    }

    /// The pseudo file system mounted here (on device `dev`), if it is one.
    fn pseudo_filesystem(self, dev: u64) -> Option<&'static str> {
        match self.handle {
            None => rules::pseudo_filesystem(self.abs, dev),
            Some(dir) => path_policy::pseudo_filesystem_of(dir),
        }
    }
}

/// A directory the walk enters.
struct Entering {
    /// Its stamp, taken before it is listed: a change made meanwhile shows next time.
    stamp: DirStamp,
    ignore: IgnoreStamp,
    entered: Entered,
    /// A pattern file of it that cannot be read, to report.
    problem: Option<Skipped>,
}

/// Enters directory `rel` (in scope; `meta` its stat) below `parent` (`None`: the
/// root's device is `root_dev`): a pseudo file system mounted there is refused; else its
/// stamps and rules. Both walks, by path and by handle, enter a directory here.
fn enter_dir(
    at: DirAt<'_>,
    rel: &[u8],
    meta: &Metadata,
    parent: Option<&Entered>,
    root_dev: u64,
) -> Result<Entering, SkipReason> {
    let parent_dev = parent.map_or(root_dev, |p| p.dev);
    if meta.dev() != parent_dev && at.pseudo_filesystem(meta.dev()).is_some() {
        return Err(SkipReason::PseudoFilesystem);
    }
    let stamp = DirStamp::of(meta, now_ns());
    let (ignore, git_file) = at.ignore_stamp(None);
    let (rules, problem) = at.rules(
        rel,
        (&ignore, git_file),
        parent.and_then(|p| p.rules.as_ref()),
    );
    Ok(Entering {
        stamp,
        ignore,
        entered: Entered {
            rules,
            dev: meta.dev(),
        },
        problem,
    })
}

/// What a walked name in scope that is not a directory gives (`meta` its `lstat`, in a
/// directory on `parent_dev`): nothing if it is one after all, a skip if a pseudo file
/// system is mounted over it (`pseudo` tells) or [`Scope::leaf`] leaves it out, else a
/// file to read. Both walks judge every file here.
fn leaf_found(
    scope: &Scope,
    rel: Vec<u8>,
    meta: &Metadata,
    parent_dev: Option<u64>,
    pseudo: impl FnOnce() -> bool,
) -> Option<Found> {
    // A file mounted over one of the tree (a bind mount) may be a pseudo file system's.
    if parent_dev.is_some_and(|dev| dev != meta.dev()) && pseudo() {
        return Some(Found::Skip(Skipped {
            path: rel,
            reason: SkipReason::PseudoFilesystem,
        }));
    }
    let stat = Stat::from_std(meta);
    let leaf = match stat.kind() {
        Some(cas::EntryKind::Symlink) => Leaf::Symlink,
        Some(_) => Leaf::File(stat.size),
        None if meta.is_dir() => return None,
        None => Leaf::Special(Special::of(meta)),
    };
    if let Some(reason) = scope.leaf(&rel, leaf) {
        return Some(Found::Skip(Skipped { path: rel, reason }));
    }
    stat.kind().map(|kind| {
        Found::File(Walked {
            path: rel,
            stat,
            kind,
            cached: None,
        })
    })
}

/// Walks the scope of `root`: `.gitignore` and `.ignore` files inside it (git repo or not),
/// `.git/info/exclude`, the global excludes file; never ignore files above the root,
/// never `.git`, never the store's folder, never a pseudo file system. Hidden files are
/// included. Directories in `skip` are not entered (they are reported in `pruned`).
///
/// The `ignore` crate's walker goes by absolute path; a directory whose names may be
/// longer than the system takes from `/` is left to [`walk_beneath`], which goes by handle
/// and judges every name with the same [`Scope`].
fn walk(
    root: &Path,
    root_dev: u64,
    (root_ignore, root_git_file): (IgnoreStamp, bool),
    options: &ScanOptions<'_>,
    skip: &HashSet<Vec<u8>>,
) -> Result<Walk, ScanError> {
    let mut builder = ignore::WalkBuilder::new(root);
    // The walker reads no rules file itself (it would open a FIFO or follow a link to a
    // device): the filter below applies the rules [`rules`] reads.
    builder
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .threads(options.threads);
    let refused = Arc::new(Mutex::new(Vec::new()));
    let read_dirs = Arc::new(Mutex::new(Vec::new()));
    let pruned = Arc::new(Mutex::new(Vec::new()));
    // Directories out of the walker's reach, with what it knew of their parents.
    let beneath: Arc<Mutex<Vec<Beneath>>> = Arc::new(Mutex::new(Vec::new()));
    let (refused_f, read_f, pruned_f) = (refused.clone(), read_dirs.clone(), pruned.clone());
    let beneath_f = beneath.clone();
    let scope = Arc::new(options.scope.clone());
    let entered: Arc<EnteredDirs> = Arc::new(RwLock::new(HashMap::new()));
    // Under a root so long that its own names may be out of reach, everything is walked
    // by handle.
    let root_handle = match reach::listable(root, b"") {
        true => None,
        false => Some(reach::open_dir(root, b"").map_err(|source| ScanError::Io {
            path: root.to_owned(),
            source,
        })?),
    };
    let root_entered = {
        let at = DirAt {
            abs: root,
            handle: root_handle.as_ref(),
        };
        let (rules, problem) = at.rules(b"", (&root_ignore, root_git_file), None);
        if let (Some(p), Ok(mut list)) = (problem, refused.lock()) {
            list.push(p);
        }
        Entered {
            rules,
            dev: root_dev,
        }
    };
    if let Ok(mut dirs) = entered.write() {
        dirs.insert(Vec::new(), root_entered.clone());
    }
    let entered_f = entered.clone();
    let filter_root = root.to_path_buf();
    let skip_f = Arc::new(skip.clone());
    let scope_f = scope.clone();
    builder.filter_entry(move |e| {
        if e.depth() == 0 {
            return true;
        }
        let Ok(rel) = e
            .path()
            .strip_prefix(&filter_root)
            .map(|r| r.as_os_str().as_bytes().to_vec())
        else {
            return false;
        };
        let refuse = |reason: SkipReason| {
            if let Ok(mut list) = refused_f.lock() {
                list.push(Skipped {
                    path: rel.clone(),
                    reason,
                });
            }
            false
        };
        let parent = entered_above(&entered_f, &rel);
        let is_dir = e.file_type().is_some_and(|t| t.is_dir());
        let rules = DirRules(parent.as_ref().and_then(|p| p.rules.clone()));
        match scope_f.name(&rules, &rel, is_dir) {
            Verdict::Out => return false,
            Verdict::Skip(reason) => return refuse(reason),
            Verdict::In => {}
        }
        if !is_dir {
            return true;
        }
        if !reach::listable(&filter_root, &rel) {
            if let Ok(mut list) = beneath_f.lock() {
                list.push(Beneath::Enter(rel, parent));
            }
            return false;
        }
        if skip_f.contains(&rel) {
            if let Ok(mut list) = pruned_f.lock() {
                list.push(rel);
            }
            return false;
        }
        let Ok(meta) = e.path().symlink_metadata() else {
            return true;
        };
        let at = DirAt {
            abs: e.path(),
            handle: None,
        };
        let entering = match enter_dir(at, &rel, &meta, parent.as_ref(), root_dev) {
            Ok(entering) => entering,
            Err(reason) => return refuse(reason),
        };
        if let (Some(p), Ok(mut list)) = (entering.problem, refused_f.lock()) {
            list.push(p);
        }
        if let Ok(mut dirs) = entered_f.write() {
            dirs.insert(rel.clone(), entering.entered);
        }
        if let Ok(mut list) = read_f.lock() {
            list.push((rel, entering.stamp, entering.ignore));
        }
        true
    });
    let root_path = root.to_path_buf();
    let entered_c = entered.clone();
    let scope_c = scope.clone();
    let classify = move |result: Result<ignore::DirEntry, ignore::Error>| -> Option<Found> {
        let entry = match result {
            Ok(e) => e,
            Err(e) => return walk_error(&root_path, e),
        };
        if entry.depth() == 0 || entry.file_type().is_some_and(|t| t.is_dir()) {
            return None;
        }
        let rel = entry
            .path()
            .strip_prefix(&root_path)
            .ok()?
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = match entry.path().symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(source) => {
                return Some(Found::Fail(ScanError::Io {
                    path: entry.path().to_owned(),
                    source,
                }));
            }
        };
        let parent_dev = entered_above(&entered_c, &rel).map(|p| p.dev);
        leaf_found(&scope_c, rel, &meta, parent_dev, || {
            rules::pseudo_filesystem(entry.path(), meta.dev()).is_some()
        })
    };

    let mut out = Walk {
        files: Vec::new(),
        skipped: Vec::new(),
        read_dirs: Vec::new(),
        pruned: Vec::new(),
    };
    let mut failed = None;
    // Sorted out as they come: a million files are held once, not twice.
    let mut sort = |f: Found| match f {
        Found::File(mut w) => {
            // Copied into this thread's memory: a walker thread's path, let go here later
            // during hashing, would be free only to that thread (glibc's per-thread
            // arenas), and a million of them stay in the process's peak.
            w.path = w.path.as_slice().to_vec();
            out.files.push(w)
        }
        Found::Skip(s) => out.skipped.push(s),
        Found::Fail(e) => {
            failed.get_or_insert(e);
        }
    };
    if root_handle.is_none() {
        if options.threads == 1 {
            builder.build().filter_map(classify).for_each(&mut sort);
        } else {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::scope(|scope| {
                scope.spawn(move || {
                    builder.build_parallel().run(|| {
                        let tx = tx.clone();
                        let classify = classify.clone();
                        Box::new(move |result| {
                            if let Some(f) = classify(result) {
                                let _ = tx.send(f);
                            }
                            ignore::WalkState::Continue
                        })
                    });
                });
                rx.into_iter().for_each(&mut sort);
            });
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    out.skipped.extend(take_all(&refused));
    out.read_dirs = take_all(&read_dirs);
    out.pruned = take_all(&pruned);
    let mut starts = take_all(&beneath);
    starts.extend(root_handle.map(|dir| Beneath::List(Vec::new(), dir, root_entered)));
    if !starts.is_empty() {
        walk_beneath(root, root_dev, starts, &scope, skip, &mut out)?;
    }
    Ok(out)
}

/// A step of [`walk_beneath`].
enum Beneath {
    /// Enter directory `rel` (in scope), below a parent the walk knows (or not).
    Enter(Vec<u8>, Option<Entered>),
    /// List directory `rel`, entered, held open.
    List(Vec<u8>, OwnedFd, Entered),
}

/// Walks the subtrees `starts` give through directory handles, as [`walk`]'s filter and
/// classifier would by path: for directories whose names may be longer than the system
/// takes from `/` (a tree holds paths of 4096 bytes from its root, and the root's own
/// path comes on top). Every directory is opened beneath the root with no symlink on the
/// way, every name judged by the same [`Scope`], every file `lstat`ed by its name in its
/// directory's handle. Depth first, one handle per directory at a time.
fn walk_beneath(
    root: &Path,
    root_dev: u64,
    starts: Vec<Beneath>,
    scope: &Scope,
    skip: &HashSet<Vec<u8>>,
    out: &mut Walk,
) -> Result<(), ScanError> {
    let handles = reach::Beneath::open(root).map_err(|source| ScanError::Io {
        path: root.to_owned(),
        source,
    })?;
    let io = |rel: &[u8]| {
        let path = handles.display(rel);
        move |source| ScanError::Io { path, source }
    };
    let mut stack = starts;
    while let Some(step) = stack.pop() {
        let (rel, dir, entered) = match step {
            Beneath::List(rel, dir, entered) => (rel, dir, entered),
            Beneath::Enter(rel, parent) => {
                if skip.contains(&rel) {
                    out.pruned.push(rel);
                    continue;
                }
                let dir = match handles.dir(&rel) {
                    Ok(dir) => File::from(dir),
                    // Gone, or a link swapped in since it was listed: not there to walk.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io(&rel)(e)),
                };
                let meta = dir.metadata().map_err(io(&rel))?;
                let dir = OwnedFd::from(dir);
                let abs = handles.display(&rel);
                let at = DirAt {
                    abs: &abs,
                    handle: Some(&dir),
                };
                match enter_dir(at, &rel, &meta, parent.as_ref(), root_dev) {
                    Ok(entering) => {
                        out.skipped.extend(entering.problem);
                        out.read_dirs
                            .push((rel.clone(), entering.stamp, entering.ignore));
                        (rel, dir, entering.entered)
                    }
                    Err(reason) => {
                        out.skipped.push(Skipped { path: rel, reason });
                        continue;
                    }
                }
            }
        };
        let rules = DirRules(entered.rules.clone());
        for (name, is_dir) in reach::list(&dir).map_err(io(&rel))? {
            let child = child_path(&rel, &name);
            match scope.name(&rules, &child, is_dir) {
                Verdict::Out => continue,
                Verdict::Skip(reason) => {
                    out.skipped.push(Skipped {
                        path: child,
                        reason,
                    });
                    continue;
                }
                Verdict::In => {}
            }
            if is_dir {
                stack.push(Beneath::Enter(child, Some(entered.clone())));
                continue;
            }
            let name = OsStr::from_bytes(&name);
            let meta = match reach::lstat_at(&dir, name) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(&child)(e)),
            };
            let pseudo = || {
                (reach::path_handle(&dir, name).ok())
                    .and_then(path_policy::pseudo_filesystem_of)
                    .is_some()
            };
            match leaf_found(scope, child, &meta, Some(entered.dev), pseudo) {
                Some(Found::File(w)) => out.files.push(w),
                Some(Found::Skip(s)) => out.skipped.push(s),
                Some(Found::Fail(e)) => return Err(e),
                None => {}
            }
        }
    }
    Ok(())
}
fn take_all<T>(list: &Mutex<Vec<T>>) -> Vec<T> {
    list.lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default()
}

fn walk_error(root: &Path, e: ignore::Error) -> Option<Found> {
    // A malformed pattern in an ignore file is reported by `ignore` as a partial error;
    // git ignores such lines too, so only log it.
    if let Some(io) = e.io_error() {
        if io.kind() == std::io::ErrorKind::NotFound {
            return None;
        }
        let path = error_path(&e).unwrap_or_else(|| root.to_path_buf());
        // Whatever the filter let through is short enough; should the system still find a
        // path too long, it is left out like the others, never the end of the capture.
        if io.raw_os_error() == Some(rustix::io::Errno::NAMETOOLONG.raw_os_error())
            && let Ok(rel) = path.strip_prefix(root)
        {
            return Some(Found::Skip(Skipped {
                path: rel.as_os_str().as_bytes().to_vec(),
                reason: SkipReason::PathTooLong,
            }));
        }
        let source = std::io::Error::new(io.kind(), io.to_string());
        return Some(Found::Fail(ScanError::Io { path, source }));
    }
    tracing::warn!("while walking {}: {e}", root.display());
    None
}

fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

struct Content {
    blob: BlobId,
    kind: EntryKind,
    size: u64,
    /// The stat to cache, if the content is known to match it.
    state: Option<FileState>,
}

struct Hashed {
    read_files: u64,
    /// New blobs read but not stored yet.
    unstored: WriteBatch,
}

/// Reads and hashes every file the cache cannot vouch for; unless `dry_run`, stores the
/// new blobs. One group of them is returned unstored, for the capture's own transaction;
/// several are each stored as read. Walked files are let go group by group, as their
/// directories' states take them over.
fn hash_walked(
    store: &Store,
    root: &Path,
    mut walked: Vec<Walked>,
    dry_run: bool,
    progress: &dyn Progress,
    found: &mut dyn FnMut(&Walked, Option<Content>),
) -> Result<Hashed, ScanError> {
    let total: u64 = walked.iter().map(|w| w.stat.size).sum();
    progress.start("hashing", walked.len() as u64, total);
    walked.retain(|w| {
        if let Some(state) = (w.cached.as_deref()).filter(|s| s.matches(&w.stat) && !s.is_racy()) {
            let content = Content {
                blob: state.blob,
                kind: w.kind,
                size: w.stat.size,
                state: Some(*state),
            };
            found(w, Some(content));
            progress.advance(1, w.stat.size);
            return false;
        }
        true
    });
    let large: Vec<Walked> = (walked.extract_if(.., |w| {
        w.kind != EntryKind::Symlink && w.stat.size > STREAM_BYTES
    }))
    .collect();
    let read_files = (walked.len() + large.len()) as u64;

    let mut unstored = WriteBatch::new();
    // Files larger now than the walk saw: streamed after the groups, so a group holds no
    // more than the walk planned.
    let mut grown = Vec::new();
    let mut first = true;
    // Groups are cut from the end, so the list shrinks as they are read.
    while !walked.is_empty() {
        let mut start = walked.len();
        let mut group_bytes = 0u64;
        while start > 0 && group_bytes < GROUP_BYTES {
            start -= 1;
            group_bytes += walked[start].stat.size + FILE_OVERHEAD;
        }
        let group = walked.split_off(start);
        walked.shrink_to_fit();
        let only = first && walked.is_empty();
        first = false;
        let mut batch = WriteBatch::new();
        let mut files = group.into_iter();
        // Read a slice at a time: a read file's result is larger than its stored blob.
        loop {
            let slice: Vec<Walked> = files.by_ref().take(READ_SLICE).collect();
            if slice.is_empty() {
                break;
            }
            let read: Vec<Result<SmallRead, ScanError>> = slice
                .par_iter()
                .map_init(
                    || store.reader().ok(),
                    |reader, w| {
                        let r = read_small(w, root, dry_run, |id| {
                            reader
                                .as_ref()
                                .is_some_and(|r| r.has_blob(id).unwrap_or(false))
                        });
                        progress.advance(1, w.stat.size);
                        r
                    },
                )
                .collect();
            for (w, r) in slice.into_iter().zip(read) {
                match r? {
                    SmallRead::Read(content, prepared) => {
                        if let Some(p) = prepared {
                            batch.add_blob(p);
                        }
                        found(&w, Some(content));
                    }
                    SmallRead::Grown => grown.push(w),
                    SmallRead::Gone => found(&w, None),
                }
            }
        }
        if dry_run || batch.is_empty() {
            continue;
        }
        if only {
            unstored = batch;
        } else {
            store
                .write(&batch)
                .map_err(|e| ScanError::Store(e.into()))?;
        }
    }
    for w in &large {
        found(w, read_large(store, root, &w.path, dry_run)?);
        progress.advance(1, w.stat.size);
    }
    for w in &grown {
        found(w, read_large(store, root, &w.path, dry_run)?);
    }
    progress.finish();
    Ok(Hashed {
        read_files,
        unstored,
    })
}

fn same_stat(a: &Metadata, b: &Metadata) -> bool {
    a.size() == b.size()
        && a.mtime() == b.mtime()
        && a.mtime_nsec() == b.mtime_nsec()
        && a.ctime() == b.ctime()
        && a.ctime_nsec() == b.ctime_nsec()
        && a.ino() == b.ino()
}

/// How reading a small file went.
// Moved once per file read: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum SmallRead {
    /// Vanished or changed type meanwhile.
    Gone,
    /// Its content (to store, unless stored already).
    Read(Content, Option<PreparedBlob>),
    /// Larger than the walk saw: to be streamed.
    Grown,
}

/// Reads at most `limit` bytes of `file` into `buf`; true if the file holds more (it is
/// growing, or lies about its size as a `/proc` file does). Memory never exceeds `limit`.
fn read_at_most(file: &mut std::fs::File, limit: u64, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    buf.clear();
    file.take(limit).read_to_end(buf)?;
    let mut probe = [0u8; 1];
    Ok(file.read(&mut probe)? > 0)
}

/// Reads walked file `w` under `root`. It is opened without following a link and never
/// blocks: a FIFO swapped in since the walk would otherwise hold the capture (and the
/// store) until someone writes to it; what is opened is checked to be a regular file.
fn read_small(
    w: &Walked,
    root: &Path,
    dry_run: bool,
    is_stored: impl FnOnce(BlobId) -> bool,
) -> Result<SmallRead, ScanError> {
    let io = |source| ScanError::Io {
        path: join(root, &w.path),
        source,
    };
    if w.kind == EntryKind::Symlink {
        let target = match reach::read_link(root, &w.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SmallRead::Gone),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Ok(SmallRead::Gone),
            Err(e) => return Err(io(e)),
        };
        // Trust the walk's stat only if the link did not change around the read.
        let after = reach::lstat(root, &w.path).ok();
        let verified = now_ns();
        let bytes = target.as_os_str().as_bytes();
        let (blob, prepared) = prepare(bytes, dry_run, is_stored);
        let state = after
            .filter(|a| Stat::from_std(a) == w.stat)
            .map(|a| FileState::from_metadata(&a, blob, verified));
        let content = Content {
            blob,
            kind: EntryKind::Symlink,
            size: bytes.len() as u64,
            state,
        };
        return Ok(SmallRead::Read(content, prepared));
    }
    let mut buf = Vec::new();
    let mut attempts = 0;
    let (meta, stable) = loop {
        attempts += 1;
        let mut file = match reach::open_read(root, &w.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SmallRead::Gone),
            // Replaced by a symlink since the walk: it is captured next time.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return Ok(SmallRead::Gone);
            }
            Err(e) => return Err(io(e)),
        };
        let before = file.metadata().map_err(io)?;
        if !before.is_file() {
            return Ok(SmallRead::Gone);
        }
        if before.size() > w.stat.size {
            return Ok(SmallRead::Grown);
        }
        let more = read_at_most(&mut file, before.size(), &mut buf).map_err(io)?;
        let after = file.metadata().map_err(io)?;
        let verified = now_ns();
        if !more && same_stat(&before, &after) && after.size() == buf.len() as u64 {
            break (after, Some(verified));
        }
        if attempts == 3 {
            break (after, None);
        }
    };
    let kind = if meta.mode() & 0o100 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    let (blob, prepared) = prepare(&buf, dry_run, is_stored);
    let state = stable.map(|verified| FileState::from_metadata(&meta, blob, verified));
    Ok(SmallRead::Read(
        Content {
            blob,
            kind,
            size: buf.len() as u64,
            state,
        },
        prepared,
    ))
}

fn prepare(
    content: &[u8],
    dry_run: bool,
    is_stored: impl FnOnce(BlobId) -> bool,
) -> (BlobId, Option<PreparedBlob>) {
    if dry_run {
        (BlobId::of(content), None)
    } else {
        PreparedBlob::new_unless(content, is_stored)
    }
}

/// [`read_small`] of a file streamed into the store a chunk at a time.
fn read_large(
    store: &Store,
    root: &Path,
    rel: &[u8],
    dry_run: bool,
) -> Result<Option<Content>, ScanError> {
    let abs = join(root, rel);
    let io = |source| ScanError::Io {
        path: abs.clone(),
        source,
    };
    let file = match reach::open_read(root, rel) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // Replaced by a symlink since the walk: it is captured next time.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Ok(None);
        }
        Err(e) => return Err(io(e)),
    };
    let before = file.metadata().map_err(io)?;
    if !before.is_file() {
        return Ok(None);
    }
    // No further than the size says: a file that keeps growing (or never ends) is read
    // as it was when opened, and not cached.
    let (blob, size) = store
        .blob_of_stream(
            (&file).take(before.size()),
            &abs.display().to_string(),
            !dry_run,
        )
        .map_err(|e| match e {
            cas::WriteError::Input { source, .. } => io(source),
            e => ScanError::Store(e.into()),
        })?;
    let mut probe = [0u8; 1];
    let more = (&file).read(&mut probe).map_err(io)? > 0;
    let after = file.metadata().map_err(io)?;
    let verified = now_ns();
    let kind = if after.mode() & 0o100 != 0 {
        EntryKind::Executable
    } else {
        EntryKind::File
    };
    let stable = !more && same_stat(&before, &after) && after.size() == size;
    let state = stable.then(|| FileState::from_metadata(&after, blob, verified));
    Ok(Some(Content {
        blob,
        kind,
        size,
        state,
    }))
}
