//! `onboard` and `snapshot`: capture a worktree's scope as a snapshot.

use crate::kept::Kept;
use std::collections::{BTreeMap, HashMap};
use worktree_registry::{RegistryRead, RegistryWrite};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{GitSource, SnapshotId, Source, Store, Tree, TreeId};
use worktree_registry::{OpRecord, WorktreeKind, WorktreeRecord};

use crate::error::CaptureError;
use crate::pending::{Pending, PendingCapture, WatchDone};
use crate::records;
use cas::{Progress, Silent};
use worktree_scope::dirstate::Cache;
use worktree_scope::paths::Skipped;
use worktree_scope::rules::OnDisk;
use worktree_scope::scan::{self, ScanOptions};
use worktree_scope::scope::ScopeSettings;
use worktree_scope::watch::Quiet;

/// Knobs shared by every capture.
#[derive(Clone, Copy)]
pub struct CaptureOptions<'a> {
    /// Snapshot message.
    pub message: &'a str,
    /// `key=value` labels.
    pub labels: &'a BTreeMap<String, String>,
    /// Walk threads: 0 picks, 1 walks sequentially.
    pub threads: usize,
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

impl Default for CaptureOptions<'_> {
    fn default() -> Self {
        CaptureOptions {
            message: "",
            labels: &NO_LABELS,
            threads: 0,
            progress: &Silent,
        }
    }
}

/// Options of [`onboard`].
#[derive(Clone, Copy, Default)]
pub struct WorktreeOnboardOptions<'a> {
    /// Message, labels, threads, progress.
    pub capture: CaptureOptions<'a>,
    /// Keep deny-pattern paths (secrets) in scope for this worktree.
    pub include_denied: bool,
    /// Leave files larger than this out of this worktree's captures (and report them);
    /// `None` keeps the worktree's earlier setting (no cap for a new one).
    pub max_file_size: Option<u64>,
    /// Where the directory stands in git, asked of its canonical root (recorded as the
    /// snapshot's source); `None` records no git source.
    pub git: Option<GitProbe<'a>>,
}

/// Tells the git commit a directory's files come from, if any (`merge_back::git_source`):
/// the files are what is captured, so an unreadable repository gives `None`, not an error.
pub type GitProbe<'a> = &'a (dyn Fn(&Utf8Path) -> Option<GitSource> + Sync);

/// What [`onboard`] did.
#[derive(Debug, Clone)]
pub struct WorktreeOnboardOutcome {
    /// The worktree root (canonical).
    pub root: Utf8PathBuf,
    /// The snapshot of it (the head, if nothing changed since an earlier onboard).
    pub snapshot: SnapshotId,
    /// Its root tree.
    pub tree: TreeId,
    /// Whether a new snapshot was written.
    pub changed: bool,
    /// Files in the snapshot.
    pub files: u64,
    /// Bytes in the snapshot.
    pub bytes: u64,
    /// Paths left out, with reasons.
    pub skipped: Vec<Skipped>,
    /// The git state of the directory, if it is a git repository with a commit.
    pub source: Option<GitSource>,
}

/// What [`snapshot`] did.
#[derive(Debug, Clone)]
pub struct CaptureOutcome {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// The new snapshot, or the head if nothing changed.
    pub snapshot: SnapshotId,
    /// Its root tree.
    pub tree: TreeId,
    /// The head before.
    pub parent: Option<SnapshotId>,
    /// Whether a new snapshot was written.
    pub changed: bool,
    /// Files added, modified and removed since the parent.
    pub added: u64,
    /// See `added`.
    pub modified: u64,
    /// See `added`.
    pub removed: u64,
    /// Files in the snapshot.
    pub files: u64,
    /// Bytes in the snapshot.
    pub bytes: u64,
    /// Paths left out, with reasons.
    pub skipped: Vec<Skipped>,
    /// Files whose content was read (the rest came from the stat cache).
    pub read_files: u64,
}

/// How a capture records what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recording {
    /// Store nothing: `status`, `diff`, dry runs.
    DryRun,
    /// Store it before returning.
    Now,
    /// Hand its writes back as [`Captured::pending`], for the caller to commit in one
    /// transaction with its own (rollback's intent journal).
    Deferred,
}

/// A captured state, before or after it is recorded.
pub(crate) struct Captured<'a> {
    pub tree: TreeId,
    /// The state's trees the store may not hold yet: every one on a dry run or a deferred
    /// recording (for comparing without the store), else those a large capture did not
    /// store ahead.
    pub trees: HashMap<TreeId, Tree>,
    pub snapshot: SnapshotId,
    pub changed: bool,
    pub files: u64,
    pub bytes: u64,
    pub skipped: Vec<Skipped>,
    pub read_files: u64,
    pub record: WorktreeRecord,
    /// With [`Recording::Deferred`]: what is left to store, if anything.
    pub pending: Option<Pending<'a>>,
}

/// What a capture records, and how.
pub(crate) struct Capture<'a> {
    /// The op-log entry's name.
    pub op: &'a str,
    /// Where a new snapshot comes from.
    pub source: Option<Source>,
    /// Message, labels, threads, progress.
    pub options: &'a CaptureOptions<'a>,
    pub recording: Recording,
    /// Applied to the stored record, which is then always written (and `op` logged even if
    /// nothing changed).
    pub edit: Option<RecordEdit<'a>>,
}

/// Edits the registry record in the same transaction as a capture, given the captured head.
pub(crate) type RecordEdit<'a> = &'a dyn Fn(&mut WorktreeRecord, SnapshotId);

/// Captures `record`'s worktree. Unless a dry run, stores it: a new snapshot (parent: the
/// head) when the tree changed, the refreshed stat cache, the head, and `op` in the op log.
pub(crate) fn capture<'a>(
    ws: &'a Kept,
    store: &Store,
    record: WorktreeRecord,
    how: &Capture<'_>,
) -> Result<Captured<'a>, CaptureError> {
    match capture_once(ws, store, record.clone(), how, true) {
        // The cache names a blob or tree that is no longer stored: distrust it, read everything.
        Err(CaptureError::Store(cas::StoreError::Write(cas::WriteError::Dangling {
            kind,
            id,
        }))) => {
            tracing::warn!(worktree = %record.root, "stat cache names a missing {kind} {id}; re-reading every file");
            capture_once(ws, store, record, how, false)
        }
        Err(CaptureError::Scan(worktree_scope::scan::ScanError::StaleCache { path, tree })) => {
            tracing::warn!(worktree = %record.root, "stat cache of {} names tree {tree}, which the store cannot give; re-reading every file", path.display());
            capture_once(ws, store, record, how, false)
        }
        other => other,
    }
}

fn capture_once<'a>(
    ws: &'a Kept,
    store: &Store,
    record: WorktreeRecord,
    how: &Capture<'_>,
    use_cache: bool,
) -> Result<Captured<'a>, CaptureError> {
    let Capture {
        op,
        ref source,
        options,
        recording,
        edit,
    } = *how;
    let started = std::time::Instant::now();
    let mut record = record;
    if record.kind == worktree_registry::WorktreeKind::Mounted {
        return capture_mounted(ws, store, record, how);
    }
    crate::root::verify_root::<CaptureError>(&mut record, store)?;
    // A root that is gone is the caller's to fix (or checkout's to fill), not an I/O failure.
    if let Err(e) = record.root.symlink_metadata()
        && e.kind() == std::io::ErrorKind::NotFound
    {
        return Err(CaptureError::Missing { path: record.root });
    }
    let dry_run = recording == Recording::DryRun;
    // Before the reader: a write landing in between makes the cache read look stale,
    // never the other way round.
    let cache_version = store.side_version(worktree_registry::FILE_STATES, record.root.as_str());
    let reader = store.reader()?;
    match crate::journal::ensure_clear(&reader, &record.root) {
        Ok(()) => {}
        Err(crate::journal::JournalCheck::Interrupted(i)) => return Err(i.into()),
        Err(crate::journal::JournalCheck::Store(e)) => return Err(e.into()),
        Err(crate::journal::JournalCheck::Registry(e)) => return Err(e.into()),
    }
    let cache = if use_cache {
        ws.kept
            .take_or_load(store, &reader, &record.root, cache_version)?
    } else {
        Cache::default()
    };
    let head_tree = match record.head {
        Some(h) => Some(reader.snapshot(h)?.tree),
        None => None,
    };
    drop(reader);
    tracing::debug!(elapsed = ?started.elapsed(), dirs = cache.dirs.len(), "cache loaded");

    // With a watcher (`cairn serve`): directories where nothing happened are not checked.
    let watcher = ws.watcher.as_ref().filter(|_| use_cache);
    let quiet = watcher.and_then(|w| w.quiet_dirs(&record.root, cache.dirs.keys()));
    let watching = WatchDone {
        root: record.root.clone(),
        watcher: watcher.filter(|_| quiet.is_some()),
        ended: worktree_scope::watch::Ended::Failed,
    };
    let scope = ScopeSettings::load(store, &record)?.scope(&OnDisk)?;
    let scan_options = ScanOptions {
        scope: &scope,
        threads: options.threads,
        quiet: quiet.as_ref(),
        dry_run,
        progress: options.progress,
        group_bytes: GROUP_BYTES,
    };
    let mut scanned = scan::scan(store, &record.root, cache, &scan_options)?;
    tracing::debug!(quiet = quiet.as_ref().map(Quiet::len), "watched");
    tracing::debug!(elapsed = ?started.elapsed(), files = scanned.file_count, held = scanned.held_files, read = scanned.read_files, "scanned");
    let created = jiff::Timestamp::now();
    // Trees go to the store ahead of the capture's transaction, a chunk at a time, once
    // every blob is stored (a large capture stores its blobs as read); else they are kept.
    let ahead = (recording == Recording::Now && scanned.unstored.is_empty()).then_some(store);
    let mut trees = HeldTrees::new(ahead);
    let (mut dirs, mut settle) = scanned.take_dirs();
    let tree = worktree_scope::build::build_from_dirs(&mut dirs, &scanned.reuse, &mut |b| {
        if let Some(state) = b.state {
            settle.built(b.path, state, b.changed, b.tree.as_ref());
        }
        match b.tree {
            Some(tree) => trees.add(tree),
            None => Ok(()),
        }
    })?;
    let (cache_updates, cache) = settle.finish(dirs);
    let trees = trees.held;
    tracing::debug!(elapsed = ?started.elapsed(), trees = trees.len(), "trees built");
    let changed = head_tree != Some(tree);
    let new_snapshot = changed.then(|| cas::Snapshot {
        tree,
        parents: record.head.into_iter().collect(),
        created,
        message: options.message.to_owned(),
        labels: options.labels.clone(),
        source: source.clone(),
    });
    let new_head = match &new_snapshot {
        Some(s) => Some(s.id()),
        None => record.head,
    };
    let mut captured = Captured {
        tree,
        trees,
        // An unchanged capture has a head: `changed` is false only when the head's tree matches.
        snapshot: new_head.unwrap_or_else(|| SnapshotId::from_bytes([0; 32])),
        changed,
        files: scanned.file_count,
        bytes: scanned.bytes,
        skipped: std::mem::take(&mut scanned.skipped),
        read_files: scanned.read_files,
        record: WorktreeRecord {
            head: new_head,
            ..record.clone()
        },
        pending: None,
    };
    if let (Some(edit), Some(head)) = (edit, new_head) {
        edit(&mut captured.record, head);
    }
    if dry_run {
        // The cache kept stands only if this capture found nothing to change in it.
        if use_cache && cache_updates.is_empty() {
            ws.kept.keep(cache, store, &record.root);
        }
        watching.unrecorded();
        return Ok(captured);
    }
    // Nothing new and the cache still true: no transaction, no fsync.
    if !changed
        && use_cache
        && cache_updates.is_empty()
        && edit.is_none()
        && scanned.unstored.is_empty()
    {
        watching.committed(&cache);
        ws.kept.keep(cache, store, &record.root);
        return Ok(captured);
    }

    let mut batch = std::mem::take(&mut scanned.unstored);
    if let Some(snap) = new_snapshot {
        if recording == Recording::Deferred {
            // The caller compares against them before the batch is stored.
            for t in captured.trees.values() {
                batch.add_tree(t.clone());
            }
        } else {
            // Moved, not copied: the trees of a million files take some 80 MB, and are
            // the store's once this capture commits.
            for t in std::mem::take(&mut captured.trees).into_values() {
                batch.add_tree(t);
            }
        }
        batch.add_snapshot(snap);
    }
    if changed || edit.is_some() {
        batch.append_op(&record.root, &OpRecord::new(op, record.head, new_head))?;
    }
    if !use_cache {
        batch.clear_file_states(&record.root);
    }
    for (key, value) in cache_updates {
        batch.set_file_state(&record.root, &key, value);
    }
    batch.put_worktree(&captured.record)?;
    let pending = Pending {
        batch,
        capture: Some(PendingCapture {
            kept: &ws.kept,
            root: record.root.clone(),
            cache,
            watching,
        }),
    };
    if recording == Recording::Deferred {
        // Refused now rather than when the caller commits: a cache naming a missing object
        // is retried above without the cache.
        store.reader()?.check_references(&pending.batch)?;
        captured.pending = Some(pending);
    } else {
        pending.commit(store)?;
        tracing::debug!(elapsed = ?started.elapsed(), "written");
    }
    Ok(captured)
}

/// A capture's trees, held for its transaction; with a store to write them to, stored
/// ahead of it once they hold [`TREES_AHEAD_ENTRIES`] entries (a million files' trees take
/// some 80 MB).
struct HeldTrees<'s> {
    store: Option<&'s Store>,
    held: HashMap<TreeId, Tree>,
    entries: usize,
}

/// Entries of trees a capture holds before it stores them ahead of its transaction (few in
/// unit tests, so their large captures do).
const TREES_AHEAD_ENTRIES: usize = if cfg!(test) { 4 } else { 1 << 16 };
/// The scan's group of read files ([`worktree_scope::scan::GROUP_BYTES`]); small in unit
/// tests, so their captures go through several groups, as a large tree's do.
const GROUP_BYTES: u64 = if cfg!(test) {
    2 << 10
} else {
    worktree_scope::scan::GROUP_BYTES
};

impl<'s> HeldTrees<'s> {
    fn new(store: Option<&'s Store>) -> HeldTrees<'s> {
        HeldTrees {
            store,
            held: HashMap::new(),
            entries: 0,
        }
    }

    /// Adds a tree whose subtrees were added before it (or are stored).
    fn add(&mut self, tree: Tree) -> Result<(), CaptureError> {
        self.entries += tree.entries().len();
        self.held.insert(tree.id(), tree);
        if let Some(store) = self.store
            && self.entries >= TREES_AHEAD_ENTRIES
        {
            let mut batch = cas::WriteBatch::new();
            for (_, tree) in self.held.drain() {
                batch.add_tree(tree);
            }
            store.write(&batch)?;
            self.entries = 0;
        }
        Ok(())
    }
}

/// [`capture_once`] of a mounted worktree: the mount knows its files, so nothing is walked
/// and no stat cache is kept.
fn capture_mounted<'a>(
    ws: &'a Kept,
    store: &Store,
    record: WorktreeRecord,
    how: &Capture<'_>,
) -> Result<Captured<'a>, CaptureError> {
    let Capture {
        op,
        ref source,
        options,
        recording,
        edit,
    } = *how;
    let Some(mount) = ws.mounts.get(&record.root) else {
        return Err(CaptureError::NotMounted { path: record.root });
    };
    let reader = store.reader()?;
    match crate::journal::ensure_clear(&reader, &record.root) {
        Ok(()) => {}
        Err(crate::journal::JournalCheck::Interrupted(i)) => return Err(i.into()),
        Err(crate::journal::JournalCheck::Store(e)) => return Err(e.into()),
        Err(crate::journal::JournalCheck::Registry(e)) => return Err(e.into()),
    }
    let head_tree = match record.head {
        Some(h) => Some(reader.snapshot(h)?.tree),
        None => None,
    };
    drop(reader);
    let settings = ScopeSettings::load(store, &record)?;
    let mut batch = cas::WriteBatch::new();
    let got = mount
        .capture(store, &mut batch, &settings, recording == Recording::DryRun)
        .map_err(|source| CaptureError::Mount {
            path: record.root.clone(),
            source,
        })?;
    let changed = head_tree != Some(got.tree);
    let new_snapshot = changed.then(|| cas::Snapshot {
        tree: got.tree,
        parents: record.head.into_iter().collect(),
        created: jiff::Timestamp::now(),
        message: options.message.to_owned(),
        labels: options.labels.clone(),
        source: source.clone(),
    });
    let new_head = match &new_snapshot {
        Some(s) => Some(s.id()),
        None => record.head,
    };
    let mut captured = Captured {
        tree: got.tree,
        trees: got.trees,
        snapshot: new_head.unwrap_or_else(|| SnapshotId::from_bytes([0; 32])),
        changed,
        files: got.files,
        bytes: got.bytes,
        skipped: got.skipped,
        read_files: got.read_files,
        record: WorktreeRecord {
            head: new_head,
            ..record.clone()
        },
        pending: None,
    };
    if let (Some(edit), Some(head)) = (edit, new_head) {
        edit(&mut captured.record, head);
    }
    if recording == Recording::DryRun {
        return Ok(captured);
    }
    if !changed && edit.is_none() && batch.is_empty() {
        // The head's tree, stored already.
        mount.settle(got.token);
        return Ok(captured);
    }
    if let Some(snap) = new_snapshot {
        for t in captured.trees.values() {
            batch.add_tree(t.clone());
        }
        batch.add_snapshot(snap);
    }
    if changed || edit.is_some() {
        batch.append_op(&record.root, &OpRecord::new(op, record.head, new_head))?;
    }
    batch.put_worktree(&captured.record)?;
    let pending = Pending {
        batch,
        capture: None,
    };
    if recording == Recording::Deferred {
        store.reader()?.check_references(&pending.batch)?;
        captured.pending = Some(pending);
    } else {
        pending.commit(store)?;
        mount.settle(got.token);
    }
    Ok(captured)
}

/// Snapshots the directory `src` (working files, uncommitted changes included) and
/// registers it as an in-place worktree. If it is registered already, this is a snapshot
/// of it.
pub fn onboard(
    ws: &Kept,
    store: &Store,
    src: &Utf8Path,
    options: &WorktreeOnboardOptions<'_>,
) -> Result<WorktreeOnboardOutcome, CaptureError> {
    let root = records::canonical(src)?;
    let git_source = options.git.and_then(|probe| probe(&root));
    let _busy = ws.locks.lock(&root);
    let existing = store.reader()?.worktree(&root)?;
    // The latest onboard decides whether secrets are in scope.
    let existing = existing.map(|r| WorktreeRecord {
        include_denied: options.include_denied,
        max_file_size: options.max_file_size.or(r.max_file_size),
        ..r
    });
    let record = existing.unwrap_or_else(|| WorktreeRecord {
        include_denied: options.include_denied,
        max_file_size: options.max_file_size,
        ..WorktreeRecord::new(root.clone(), WorktreeKind::InPlace)
    });
    let source = Source {
        path: root.clone(),
        git: git_source.clone(),
    };
    let how = Capture {
        op: "onboard",
        source: Some(source),
        options: &options.capture,
        recording: Recording::Now,
        edit: None,
    };
    let c = capture(ws, store, record, &how)?;
    Ok(WorktreeOnboardOutcome {
        root,
        snapshot: c.snapshot,
        tree: c.tree,
        changed: c.changed,
        files: c.files,
        bytes: c.bytes,
        skipped: c.skipped,
        source: git_source,
    })
}

/// The deny list in force for a worktree: none if it was onboarded with
/// `--include-denied`, else the built-in patterns, the store's `deny` file and the
/// worktree's `.cairndeny`.
pub fn deny_list(
    store: &Store,
    record: &WorktreeRecord,
) -> Result<path_policy::DenyList, CaptureError> {
    if record.include_denied {
        return Ok(path_policy::DenyList::nothing());
    }
    Ok(path_policy::DenyList::load(
        store.root().as_std_path(),
        record.root.as_std_path(),
    )?)
}

/// Snapshots the worktree that holds `path`: a new snapshot whose parent is the head, or,
/// if nothing in scope changed, nothing new (`changed: false`).
pub fn snapshot(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    options: &CaptureOptions<'_>,
) -> Result<CaptureOutcome, CaptureError> {
    let held = crate::held::hold(ws, store, path)?;
    snapshot_as(ws, store, held.record.clone(), "snapshot", options, None)
}

/// Records a change made to the worktree holding `path` by something other than cairn
/// (`merge --checkout` into an onboarded repository): a snapshot logged as `op`.
pub fn record_change(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    op: &str,
    options: &CaptureOptions<'_>,
) -> Result<CaptureOutcome, CaptureError> {
    let held = crate::held::hold(ws, store, path)?;
    snapshot_as(ws, store, held.record.clone(), op, options, None)
}

/// A snapshot of `record`'s worktree logged as `op`, with `edit` applied to the record.
pub fn snapshot_as(
    ws: &Kept,
    store: &Store,
    record: WorktreeRecord,
    op: &str,
    options: &CaptureOptions<'_>,
    edit: Option<RecordEdit<'_>>,
) -> Result<CaptureOutcome, CaptureError> {
    let parent = record.head;
    let source = Source {
        path: record.root.clone(),
        git: None,
    };
    let how = Capture {
        op,
        source: Some(source),
        options,
        recording: Recording::Now,
        edit,
    };
    let c = capture(ws, store, record, &how)?;
    let (mut added, mut modified, mut removed) = (0, 0, 0);
    if c.changed {
        let reader = store.reader()?;
        let old = match parent {
            Some(p) => Some(reader.snapshot(p)?.tree),
            None => None,
        };
        for change in diff::tree_changes(&reader, old, Some(c.tree))? {
            match (change.old, change.new) {
                (None, Some(_)) => added += 1,
                (Some(_), None) => removed += 1,
                _ => modified += 1,
            }
        }
    }
    Ok(CaptureOutcome {
        root: c.record.root.clone(),
        snapshot: c.snapshot,
        tree: c.tree,
        parent,
        changed: c.changed,
        added,
        modified,
        removed,
        files: c.files,
        bytes: c.bytes,
        skipped: c.skipped,
        read_files: c.read_files,
    })
}

/// A worktree's live state, captured without writing anything to the store.
#[derive(Debug, Clone)]
pub struct LiveState {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// Its head snapshot.
    pub head: Option<SnapshotId>,
    /// The tree of its files now.
    pub tree: TreeId,
    /// Trees of that state the store may not hold (look here first, then in the store).
    pub trees: HashMap<TreeId, Tree>,
    /// Paths left out, with reasons.
    pub skipped: Vec<Skipped>,
}

/// Captures the worktree holding `path` as it is now, storing nothing: for `diff` and
/// `status`. File contents not in the store are to be read from the worktree itself.
pub fn live_state(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    options: &CaptureOptions<'_>,
) -> Result<LiveState, CaptureError> {
    // Wait for an operation on it to finish rather than see it half done.
    let held = crate::held::hold(ws, store, path)?;
    let record = held.record.clone();
    let head = record.head;
    let root = record.root.clone();
    let how = Capture {
        op: "status",
        source: None,
        options,
        recording: Recording::DryRun,
        edit: None,
    };
    let c = capture(ws, store, record, &how)?;
    Ok(LiveState {
        root,
        head,
        tree: c.tree,
        trees: c.trees,
        skipped: c.skipped,
    })
}

/// What [`capture_dir`] found: a directory's whole tree, not stored yet.
pub struct DirCaptured {
    /// Its root tree.
    pub tree: TreeId,
    /// Every tree of it, to store (children before parents do not matter: one batch).
    pub trees: HashMap<TreeId, Tree>,
    /// What is left to store of its blobs (the scan stored the rest ahead, as any large
    /// capture does): the caller commits it with the trees, in its own transaction.
    pub unstored: cas::WriteBatch,
    /// Every file and symlink: path from the directory, kind, blob, size.
    pub files: Vec<worktree_scope::FileRecord>,
    /// Their bytes.
    pub bytes: u64,
    /// Names no tree can hold, special files: left out, with reasons.
    pub skipped: Vec<Skipped>,
}

/// Captures every file under `dir` (a dependency layer's directory) as a capture reads a
/// worktree, in parallel, but with no scope rule: pattern files, the deny list and the size
/// cap do not apply; `.git` and the store's folder stay out. No stat cache is read or kept.
/// Blobs go to the store as read (a large directory's would not fit in memory); its trees
/// and the last blobs are handed back for the caller's transaction.
pub fn capture_dir(
    store: &Store,
    dir: &Utf8Path,
    progress: &dyn Progress,
) -> Result<DirCaptured, CaptureError> {
    let scope = worktree_scope::Scope::whole(dir.as_std_path(), store);
    let options = ScanOptions {
        scope: &scope,
        threads: 0,
        quiet: None,
        dry_run: false,
        progress,
        group_bytes: GROUP_BYTES,
    };
    let mut scanned = scan::scan(store, dir, Cache::default(), &options)?;
    let (mut dirs, _) = scanned.take_dirs();
    let mut files = Vec::new();
    for (path, state) in &dirs {
        for (name, child) in state.children() {
            if let worktree_scope::dirstate::Child::File(f) = child
                && let Some(kind) = f.stat().kind()
            {
                files.push(worktree_scope::FileRecord {
                    path: worktree_scope::build::child(path, name),
                    kind,
                    blob: f.blob,
                    size: f.size,
                });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let mut trees = HashMap::new();
    let tree = worktree_scope::build::build_from_dirs(&mut dirs, &scanned.reuse, &mut |b| {
        if let Some(t) = b.tree {
            trees.insert(t.id(), t);
        }
        Ok::<_, CaptureError>(())
    })?;
    // An empty directory has the empty tree, which no directory hands over.
    if !trees.contains_key(&tree) {
        let empty = Tree::default();
        trees.insert(empty.id(), empty);
    }
    Ok(DirCaptured {
        tree,
        trees,
        unstored: std::mem::take(&mut scanned.unstored),
        files,
        bytes: scanned.bytes,
        skipped: std::mem::take(&mut scanned.skipped),
    })
}

#[cfg(test)]
mod tests {
    /// A store and a worktree of `files` onboarded into it: (temp dir, store, its first
    /// snapshot).
    fn onboarded(files: &[(&str, &str)]) -> (tempfile::TempDir, cas::Store, cas::SnapshotId) {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = camino::Utf8Path::from_path(dir.path()).expect("utf8");
        let store = cas::Store::open(
            &base.join("store"),
            &cas::OpenOptions {
                create: true,
                ..cas::OpenOptions::default()
            },
        )
        .expect("store");
        let wt = base.join("wt");
        for (path, body) in files {
            let p = wt.join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, body).expect("write");
        }
        let ws = crate::Kept::new();
        let onboarded = super::onboard(&ws, &store, &wt, &Default::default()).expect("onboard");
        (dir, store, onboarded.snapshot)
    }

    /// A capture of many files stores its blobs group by group and its trees a chunk at a
    /// time ahead of its transaction (unit tests make both small): the snapshot holds the
    /// tree a sorted list of those files makes, and every tree and blob of it is stored.
    #[test]
    fn a_large_capture_stores_ahead_what_its_snapshot_needs() {
        let bodies: Vec<(String, String)> = (0..60)
            .map(|i| {
                (
                    format!("d{}/e{}/f{i}.txt", i % 4, i % 3),
                    format!("file {i}\n"),
                )
            })
            .collect();
        let files: Vec<(&str, &str)> = bodies
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect();
        let (_dir, store, snapshot) = onboarded(&files);
        // 60 files make 15 groups here, and 17 trees several chunks; else one transaction.
        let transactions = store.group_transactions();
        assert!(
            transactions > 15,
            "stored ahead: {transactions} transactions"
        );
        let reader = store.reader().expect("reader");
        let tree = reader.snapshot(snapshot).expect("snapshot").tree;
        let stored = worktree_scope::build::flatten(&reader, tree).expect("every tree is stored");
        let mut expected: Vec<worktree_scope::FileRecord> = files
            .iter()
            .map(|(path, body)| worktree_scope::FileRecord {
                path: path_policy::RepoPathBuf::new(path.as_bytes()).expect("path"),
                kind: cas::EntryKind::File,
                blob: cas::BlobId::of(body.as_bytes()),
                size: body.len() as u64,
            })
            .collect();
        expected.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(stored, expected);
        let built =
            worktree_scope::build::build_trees(&expected, &worktree_scope::build::Reuse::new())
                .expect("build");
        assert_eq!(
            built.root, tree,
            "the same tree as built from the sorted list"
        );
        for f in &stored {
            assert_eq!(
                reader.blob(f.blob).expect("every blob is stored").len() as u64,
                f.size
            );
        }
    }
}
