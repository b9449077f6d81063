//! `onboard` and `snapshot`: capture a worktree's scope as a snapshot.

use std::collections::{BTreeMap, HashMap, HashSet};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{
    GitSource, OpRecord, SnapshotId, Source, Store, Tree, TreeId, WorktreeKind, WorktreeRecord,
    WriteBatch,
};

use crate::dirstate::Cache;
use crate::error::CaptureError;
use crate::progress::{Progress, Silent};
use crate::scan::{self, ScanOptions, Skipped};
use crate::worktree;

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
pub struct OnboardOptions<'a> {
    /// Message, labels, threads, progress.
    pub capture: CaptureOptions<'a>,
    /// Keep deny-pattern paths (secrets) in scope for this worktree.
    pub include_denied: bool,
    /// Leave files larger than this out of this worktree's captures (and report them);
    /// `None` keeps the worktree's earlier setting (no cap for a new one).
    pub max_file_size: Option<u64>,
}

/// What [`onboard`] did.
#[derive(Debug, Clone)]
pub struct OnboardOutcome {
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
pub struct SnapshotOutcome {
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

/// A captured state, before or after it is recorded.
pub(crate) struct Captured {
    pub tree: TreeId,
    /// Every tree of the state (for comparing without the store on a dry run).
    pub trees: HashMap<TreeId, Tree>,
    pub snapshot: SnapshotId,
    pub changed: bool,
    pub files: u64,
    pub bytes: u64,
    pub skipped: Vec<Skipped>,
    pub read_files: u64,
    pub record: WorktreeRecord,
}

/// Captures `record`'s worktree. Unless `dry_run`, stores it: a new snapshot (parent: the
/// head) when the tree changed, the refreshed stat cache, the head, and `op` in the op log.
pub(crate) fn capture(
    store: &Store,
    record: WorktreeRecord,
    op: &str,
    source: Option<Source>,
    options: &CaptureOptions<'_>,
    dry_run: bool,
) -> Result<Captured, CaptureError> {
    capture_with(store, record, op, source, options, dry_run, None)
}

/// Edits the registry record in the same transaction as a capture, given the captured head.
pub(crate) type RecordEdit<'a> = &'a dyn Fn(&mut WorktreeRecord, SnapshotId);

/// [`capture`], with `edit` applied to the stored record (which is then always written, and
/// `op` logged even if nothing changed).
pub(crate) fn capture_with(
    store: &Store,
    record: WorktreeRecord,
    op: &str,
    source: Option<Source>,
    options: &CaptureOptions<'_>,
    dry_run: bool,
    edit: Option<RecordEdit<'_>>,
) -> Result<Captured, CaptureError> {
    let once = |use_cache| {
        capture_once(
            store,
            record.clone(),
            op,
            source.clone(),
            options,
            dry_run,
            use_cache,
            edit,
        )
    };
    match once(true) {
        // The cache names a blob or tree that is no longer stored: distrust it, read everything.
        Err(CaptureError::Store(cas::Error::Write(cas::WriteError::Dangling { kind, id }))) => {
            tracing::warn!(worktree = %record.root, "stat cache names a missing {kind} {id}; re-reading every file");
            once(false)
        }
        other => other,
    }
}

#[allow(clippy::too_many_arguments)]
fn capture_once(
    store: &Store,
    record: WorktreeRecord,
    op: &str,
    source: Option<Source>,
    options: &CaptureOptions<'_>,
    dry_run: bool,
    use_cache: bool,
    edit: Option<RecordEdit<'_>>,
) -> Result<Captured, CaptureError> {
    let started = std::time::Instant::now();
    let reader = store.reader()?;
    match crate::journal::ensure_clear(&reader, &record.root) {
        Ok(()) => {}
        Err(crate::journal::JournalCheck::Interrupted(i)) => return Err(i.into()),
        Err(crate::journal::JournalCheck::Store(e)) => return Err(e.into()),
    }
    let cache = if use_cache {
        Cache::load(&reader, &record.root)?
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
    let quiet = if use_cache {
        crate::watch::quiet_dirs(&record.root, cache.dirs.keys())
    } else {
        None
    };
    let mut watching = WatchDone {
        root: &record.root,
        active: quiet.is_some(),
        dirs: None,
        succeeded: false,
    };
    let store_dir = worktree::store_dir(store);
    let deny = deny_list(store, &record)?;
    let scan_options = ScanOptions {
        deny: &deny,
        threads: options.threads,
        store_root: store_dir.as_deref(),
        max_file_size: record.max_file_size,
        quiet: quiet.as_ref(),
        dry_run,
        progress: options.progress,
    };
    let mut scanned = scan::scan(store, &record.root, cache, &scan_options)?;
    tracing::debug!(quiet = quiet.as_ref().map(HashSet::len), "watched");
    tracing::debug!(elapsed = ?started.elapsed(), files = scanned.file_count, read = scanned.read_files, "scanned");
    let created = jiff::Timestamp::now();
    let built = crate::build::build_trees(&scanned.files, &scanned.reuse)?;
    let (tree, trees) = (built.root, built.trees);
    let cache_updates = scanned.cache_updates(&built.dirs);
    tracing::debug!(elapsed = ?started.elapsed(), trees = trees.len(), "trees built");
    let changed = head_tree != Some(tree);
    let new_snapshot = changed.then(|| cas::Snapshot {
        tree,
        parents: record.head.into_iter().collect(),
        created,
        message: options.message.to_owned(),
        labels: options.labels.clone(),
        source,
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
        skipped: scanned.skipped,
        read_files: scanned.read_files,
        record: WorktreeRecord {
            head: new_head,
            ..record.clone()
        },
    };
    if let (Some(edit), Some(head)) = (edit, new_head) {
        edit(&mut captured.record, head);
    }
    let cached_dirs: Vec<Vec<u8>> = if watching.active {
        scanned.dirs.keys().cloned().collect()
    } else {
        Vec::new()
    };
    // Nothing new and the cache still true: no transaction, no fsync.
    if dry_run || (!changed && use_cache && cache_updates.is_empty() && edit.is_none()) {
        if !dry_run {
            watching.dirs = Some(cached_dirs);
        }
        watching.succeeded = true;
        return Ok(captured);
    }

    let mut batch = WriteBatch::new();
    if let Some(snap) = new_snapshot {
        for t in captured.trees.values() {
            batch.add_tree(t.clone());
        }
        batch.add_snapshot(snap);
    }
    if changed || edit.is_some() {
        batch.append_op(&record.root, OpRecord::new(op, record.head, new_head));
    }
    if !use_cache {
        batch.clear_file_states(&record.root);
    }
    for (key, value) in cache_updates {
        batch.set_file_state(&record.root, &key, value);
    }
    batch.put_worktree(captured.record.clone());
    store.write(&batch)?;
    watching.dirs = Some(cached_dirs);
    watching.succeeded = true;
    tracing::debug!(elapsed = ?started.elapsed(), "written");
    Ok(captured)
}

/// Tells the watcher how a capture ended: its cache recorded (`dirs` set), succeeded
/// without recording, or failed.
struct WatchDone<'a> {
    root: &'a Utf8Path,
    active: bool,
    dirs: Option<Vec<Vec<u8>>>,
    succeeded: bool,
}

impl Drop for WatchDone<'_> {
    fn drop(&mut self) {
        if self.active {
            let dirs = self.dirs.take();
            let ended = match (&dirs, self.succeeded) {
                (Some(_), true) => crate::watch::Ended::Committed,
                (None, true) => crate::watch::Ended::Unrecorded,
                _ => crate::watch::Ended::Failed,
            };
            crate::watch::after_capture(self.root, ended, dirs.iter().flatten());
        }
    }
}

/// Snapshots the directory `src` (working files, uncommitted changes included) and
/// registers it as an in-place worktree. If it is registered already, this is a snapshot
/// of it.
pub fn onboard(
    store: &Store,
    src: &Utf8Path,
    options: &OnboardOptions<'_>,
) -> Result<OnboardOutcome, CaptureError> {
    let root = worktree::canonical(src)?;
    // The files are the truth; git's view is provenance. A `.git` that gitoxide cannot read
    // (a stub, a damaged repository) must not stop a capture.
    let git = merge_back::git_state(&root).unwrap_or_else(|e| {
        tracing::warn!("{e}; recording no git source");
        None
    });
    let git_source = git.and_then(|g| {
        g.commit.map(|commit| GitSource {
            commit,
            dirty: g.dirty,
        })
    });
    let _busy = crate::lock::lock(&root);
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
    let c = capture(
        store,
        record,
        "onboard",
        Some(source),
        &options.capture,
        false,
    )?;
    Ok(OnboardOutcome {
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
pub(crate) fn deny_list(
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

/// The registered worktree holding `path`.
pub(crate) fn registered(store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, CaptureError> {
    let reader = store.reader()?;
    match worktree::find(&reader, path)? {
        Some(record) => Ok(record),
        None => {
            match crate::journal::pending_at(&reader, path) {
                Ok(()) => {}
                Err(crate::journal::JournalCheck::Interrupted(i)) => return Err(i.into()),
                Err(crate::journal::JournalCheck::Store(e)) => return Err(e.into()),
            }
            Err(CaptureError::NotAWorktree {
                path: path.to_owned(),
            })
        }
    }
}

/// The registered worktree holding `path`, held for one operation: its record is read
/// again once the lock is ours (another operation may just have changed it).
pub(crate) fn locked(
    store: &Store,
    path: &Utf8Path,
) -> Result<(crate::lock::WorktreeLock, WorktreeRecord), CaptureError> {
    let found = registered(store, path)?;
    let busy = crate::lock::lock(&found.root);
    let record = registered(store, &found.root)?;
    Ok((busy, record))
}

/// Snapshots the worktree that holds `path`: a new snapshot whose parent is the head, or,
/// if nothing in scope changed, nothing new (`changed: false`).
pub fn snapshot(
    store: &Store,
    path: &Utf8Path,
    options: &CaptureOptions<'_>,
) -> Result<SnapshotOutcome, CaptureError> {
    let (_busy, record) = locked(store, path)?;
    snapshot_as(store, record, "snapshot", options, None)
}

/// Records a change made to the worktree holding `path` by something other than cairn
/// (`merge --checkout` into an onboarded repository): a snapshot logged as `op`.
pub fn record_change(
    store: &Store,
    path: &Utf8Path,
    op: &str,
    options: &CaptureOptions<'_>,
) -> Result<SnapshotOutcome, CaptureError> {
    let (_busy, record) = locked(store, path)?;
    snapshot_as(store, record, op, options, None)
}

/// A snapshot of `record`'s worktree logged as `op`, with `edit` applied to the record.
pub(crate) fn snapshot_as(
    store: &Store,
    record: WorktreeRecord,
    op: &str,
    options: &CaptureOptions<'_>,
    edit: Option<RecordEdit<'_>>,
) -> Result<SnapshotOutcome, CaptureError> {
    let parent = record.head;
    let source = Source {
        path: record.root.clone(),
        git: None,
    };
    let c = capture_with(store, record, op, Some(source), options, false, edit)?;
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
    Ok(SnapshotOutcome {
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
    store: &Store,
    path: &Utf8Path,
    options: &CaptureOptions<'_>,
) -> Result<LiveState, CaptureError> {
    // Wait for an operation on it to finish rather than see it half done.
    let (_busy, record) = locked(store, path)?;
    let head = record.head;
    let root = record.root.clone();
    let c = capture(store, record, "status", None, options, true)?;
    Ok(LiveState {
        root,
        head,
        tree: c.tree,
        trees: c.trees,
        skipped: c.skipped,
    })
}
