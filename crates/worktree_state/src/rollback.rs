//! `rollback`: make a worktree's scope equal a snapshot, touching only what differs.

use crate::kept::Kept;
use std::collections::HashSet;
use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, Source, Store, TreeId};
use worktree_registry::OpRecord;

use crate::capture::{self, CaptureOptions, Captured, Recording};
use crate::error::RollbackError;
use crate::fsops::WriteFailure;
use crate::journal::{self, Plan};
use crate::pending::Pending;
use cas::{Progress, Silent};
use path_policy::{RepoPath, RepoPathBuf};
use worktree_scope::paths::SkipReason;

/// Options of [`rollback`].
#[derive(Clone, Copy)]
pub struct WorktreeRollbackOptions<'a> {
    /// Restore only these paths (the root names everything); all if empty.
    pub paths: &'a [RepoPathBuf],
    /// Report what would change; change nothing.
    pub dry_run: bool,
    /// Walk threads for the capture: 0 picks, 1 walks sequentially.
    pub threads: usize,
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

impl Default for WorktreeRollbackOptions<'_> {
    fn default() -> Self {
        WorktreeRollbackOptions {
            paths: &[],
            dry_run: false,
            threads: 0,
            progress: &Silent,
        }
    }
}

/// What [`rollback`] did (or would do, on a dry run).
#[derive(Debug, Clone)]
pub struct WorktreeRollbackOutcome {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// The worktree's head afterwards: the target, or for a per-path rollback a new
    /// snapshot of the result.
    pub snapshot: SnapshotId,
    /// The live state captured first (the head, if nothing had changed since it).
    pub captured: SnapshotId,
    /// Paths written, in tree order.
    pub written: Vec<RepoPathBuf>,
    /// Paths deleted, in tree order.
    pub deleted: Vec<RepoPathBuf>,
    /// Paths of the target left alone (secrets outside scope), with reasons.
    pub skipped: Vec<worktree_scope::Skipped>,
}

/// The rollback error a failed write is.
pub fn failure(e: WriteFailure) -> RollbackError {
    match e {
        WriteFailure::Io(path, source) => RollbackError::Io { path, source },
        WriteFailure::Store(e) => RollbackError::Store(e.into()),
        WriteFailure::Record(e) => RollbackError::Store(e),
        WriteFailure::Registry(e) => RollbackError::Registry(e),
        WriteFailure::Blocked(path, reason) => RollbackError::Blocked {
            path,
            reason: reason.to_owned(),
        },
    }
}

fn matches(path: &RepoPath, filters: &[RepoPathBuf]) -> bool {
    filters.is_empty() || filters.iter().any(|f| path.starts_with(f))
}

/// True if `path` names a file or directory in the tree.
fn exists(
    source: &dyn diff::TreeSource,
    root: TreeId,
    path: &RepoPath,
) -> Result<bool, cas::ReadError> {
    let mut tree = root;
    let parts: Vec<&[u8]> = path.components().collect();
    for (i, name) in parts.iter().enumerate() {
        let t = source.tree(tree)?;
        match t.get(name) {
            None => return Ok(false),
            Some(e) => match e.tree() {
                Some(sub) => tree = sub,
                None => return Ok(i + 1 == parts.len()),
            },
        }
    }
    Ok(true)
}

/// Makes the scope of the worktree holding `path` equal `target` (or only `options.paths`
/// of it). The live state is captured first, so edits never snapshotted are kept in the
/// store and op log. Only differing files are written or deleted; ignored files, `.git/`
/// and anything outside scope are never touched, and nothing is written through a symlink.
/// Before changing anything it checks that nothing outside scope is in the way, and
/// refuses (changing nothing) if something is.
pub fn rollback(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    target: SnapshotId,
    options: &WorktreeRollbackOptions<'_>,
) -> Result<WorktreeRollbackOutcome, RollbackError> {
    restore(ws, store, path, target, options, "rollback", &|_| {})
}

/// [`rollback`], recorded in the op log as `op`, with `edit` applied to the worktree's
/// registry record in the same step.
pub fn restore(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    target: SnapshotId,
    options: &WorktreeRollbackOptions<'_>,
    op: &str,
    edit: &dyn Fn(&mut worktree_registry::WorktreeRecord),
) -> Result<WorktreeRollbackOutcome, RollbackError> {
    let restored =
        restore_to::<RollbackError>(ws, store, path, Toward::Stored(target), options, op, edit)?;
    Ok(restored.expect("a stored target is always restored to"))
}

/// The live state a [`rebase`] captured, handed to the step that makes its target.
pub struct LiveCapture<'p, 'a> {
    /// The worktree root.
    pub root: &'p Utf8Path,
    /// The head before the capture.
    pub head: Option<SnapshotId>,
    /// The captured state: a new snapshot (parent: the head), stored only with the change
    /// set, or the head itself if nothing changed since it.
    pub snapshot: SnapshotId,
    tree: TreeId,
    pending: &'p mut Pending<'a>,
    store: &'p Store,
}

impl LiveCapture<'_, '_> {
    /// The captured tree, its trees and blobs stored (ahead of the snapshot, head and op
    /// log, which wait for the change set), so that what reads only the store sees it.
    pub fn stored_tree(&mut self) -> Result<TreeId, RollbackError> {
        self.pending
            .store_contents(self.store)
            .map_err(|e| RollbackError::Store(e.into()))?;
        Ok(self.tree)
    }
}

/// Makes the target from the live state: `Some` snapshot, stored by then, to restore to;
/// `None` to record nothing at all (the capture included).
pub type MakeTarget<'f, E> =
    &'f mut dyn FnMut(&mut LiveCapture<'_, '_>) -> Result<Option<SnapshotId>, E>;

/// `rebase`: captures the live state of the worktree holding `path` as [`rollback`] does,
/// hands it to `make`, and makes the worktree equal the snapshot `make` returns, recorded
/// as `op` in one change set (the capture first, as for a rollback), so `undo` brings the
/// live state back. If `make` returns `None` or fails, nothing is recorded: the worktree's
/// files, head and op log are as they were (the capture's trees and blobs may be stored,
/// unreferenced). `onto` is named in the capture's message.
pub fn rebase<E: From<RollbackError>>(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    onto: SnapshotId,
    options: &WorktreeRollbackOptions<'_>,
    op: &str,
    make: MakeTarget<'_, E>,
) -> Result<Option<WorktreeRollbackOutcome>, E> {
    restore_to(
        ws,
        store,
        path,
        Toward::Made { onto, make },
        options,
        op,
        &|_| {},
    )
}

/// Where a restore takes the worktree.
enum Toward<'f, E> {
    /// A stored snapshot.
    Stored(SnapshotId),
    /// A snapshot made from the live state, once captured.
    Made {
        /// What the capture's message names.
        onto: SnapshotId,
        make: MakeTarget<'f, E>,
    },
}

fn restore_to<E: From<RollbackError>>(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    toward: Toward<'_, E>,
    options: &WorktreeRollbackOptions<'_>,
    op: &str,
    edit: &dyn Fn(&mut worktree_registry::WorktreeRecord),
) -> Result<Option<WorktreeRollbackOutcome>, E> {
    let held = crate::held::hold(ws, store, path).map_err(RollbackError::from)?;
    let record = held.record.clone();
    let (named, known_tree) = match &toward {
        Toward::Stored(target) => (*target, Some(tree_of(store, *target)?)),
        Toward::Made { onto, .. } => (*onto, None),
    };
    let root = record.root.clone();
    let head = record.head;

    let message = format!("live state before {op} to {}", named.short(12));
    let capture_options = CaptureOptions {
        message: &message,
        threads: options.threads,
        progress: options.progress,
        ..CaptureOptions::default()
    };
    let source = Some(Source {
        path: root.clone(),
        git: None,
    });
    // The live state is stored with the intent journal, in one transaction.
    let recording = if options.dry_run {
        Recording::DryRun
    } else {
        Recording::Deferred
    };
    let how = capture::Capture {
        op: "capture",
        source,
        options: &capture_options,
        recording,
        edit: None,
    };
    let mut captured = capture::capture(ws, store, record, &how).map_err(RollbackError::from)?;
    let mut first = captured.pending.take().unwrap_or_default();
    let (target, target_tree) = match toward {
        Toward::Stored(target) => (
            target,
            known_tree.map_or_else(|| tree_of(store, target), Ok)?,
        ),
        Toward::Made { make, .. } => {
            let mut live = LiveCapture {
                root: &root,
                head,
                snapshot: captured.snapshot,
                tree: captured.tree,
                pending: &mut first,
                store,
            };
            // Nothing made: `first` is dropped, so nothing of the capture is recorded.
            let Some(target) = make(&mut live)? else {
                return Ok(None);
            };
            (target, tree_of(store, target)?)
        }
    };
    let planned = match plan(
        store,
        &captured,
        target,
        target_tree,
        options,
        op,
        &mut first,
    ) {
        Ok(planned) => planned,
        Err(e) => {
            // Refused before anything changed: the live state is still worth keeping.
            if let Err(stored) = first.commit(store) {
                tracing::warn!("{op} refused ({e}); the live state was not stored either");
                return Err(RollbackError::from(stored).into());
            }
            return Err(e.into());
        }
    };
    let written: Vec<RepoPathBuf> = planned.plan.writes.iter().map(|(p, _)| p.clone()).collect();
    let mut deleted = planned.plan.deleted.clone();
    deleted.sort();
    let outcome = WorktreeRollbackOutcome {
        root,
        snapshot: planned.head,
        captured: captured.snapshot,
        written,
        deleted,
        skipped: planned.skipped,
    };
    if options.dry_run {
        return Ok(Some(outcome));
    }
    let mut record = captured.record;
    edit(&mut record);
    record.head = Some(planned.head);
    let entry = OpRecord::new(op, Some(captured.snapshot), Some(planned.head));
    journal::apply(
        ws,
        store,
        op,
        target_tree,
        &planned.plan,
        record,
        Some(entry),
        first,
    )
    .map_err(applied)?;
    Ok(Some(outcome))
}

fn tree_of(store: &Store, snapshot: SnapshotId) -> Result<TreeId, RollbackError> {
    Ok(store.reader()?.snapshot(snapshot)?.tree)
}

/// What a restore changes, once checked.
struct Planned {
    plan: Plan,
    /// Paths of the target left alone, with reasons.
    skipped: Vec<worktree_scope::Skipped>,
    /// The worktree's head afterwards.
    head: SnapshotId,
}

/// The file changes that make `captured` equal `target` (in `options.paths`), checked:
/// every named path exists on one side, no name is refused, nothing out of scope is in the
/// way. Unless a dry run, a head that mixes both states goes into `first`.
fn plan(
    store: &Store,
    captured: &Captured,
    target: SnapshotId,
    target_tree: TreeId,
    options: &WorktreeRollbackOptions<'_>,
    op: &str,
    first: &mut Pending,
) -> Result<Planned, RollbackError> {
    let reader = store.reader()?;
    let trees = diff::Overlay {
        memory: &captured.trees,
        store: &reader,
    };
    for p in options.paths {
        if !exists(&trees, captured.tree, p)? && !exists(&trees, target_tree, p)? {
            return Err(RollbackError::NoSuchPath {
                path: p.to_string(),
                snapshot: target,
            });
        }
    }
    // Secrets are outside scope: a target that holds one does not bring it back here.
    let deny = crate::capture::deny_list(store, &captured.record)?;
    let mut skipped = Vec::new();
    // What the capture left out (over the size cap, special files) is out of scope too.
    let out_of_scope: std::collections::HashMap<&[u8], &SkipReason> = captured
        .skipped
        .iter()
        .map(|s| (s.path.as_slice(), &s.reason))
        .collect();
    let changes: Vec<diff::TreeChange> =
        diff::tree_changes(&trees, Some(captured.tree), Some(target_tree))?
            .into_iter()
            .filter(|c| matches(&c.path, options.paths))
            .filter(|c| {
                let reason = match (
                    deny.denied(c.path.as_bytes(), false),
                    out_of_scope.get(c.path.as_bytes()),
                ) {
                    (Some(pattern), _) => SkipReason::Denied {
                        pattern: pattern.to_owned(),
                    },
                    (None, Some(&reason)) => SkipReason::OutOfScope(Box::new(reason.clone())),
                    (None, None) => return true,
                };
                skipped.push(worktree_scope::Skipped {
                    path: c.path.as_bytes().to_vec(),
                    reason,
                });
                false
            })
            .collect();
    let plan = Plan::from_changes(&changes);
    let root = &captured.record.root;
    for (p, _) in &plan.writes {
        // Built from a tree's names, so possibly longer or deeper than a path may be.
        if let Err(e) = path_policy::check_path(p.as_bytes()) {
            return Err(RollbackError::Blocked {
                path: p.to_fs_path(root.as_std_path()),
                reason: e.reason().to_owned(),
            });
        }
    }
    check_obstacles(root.as_std_path(), &plan.deleted, &plan.writes)?;

    let head = if (options.paths.is_empty() && skipped.is_empty()) || options.dry_run {
        target
    } else {
        // The result mixes both states (some paths, or all but those out of scope): record
        // it as a snapshot of its own, so undo compares against what is really there.
        let patched: Vec<(RepoPathBuf, Option<diff::FileEntry>)> =
            changes.iter().map(|c| (c.path.clone(), c.new)).collect();
        let built = worktree_scope::build::patch(&trees, captured.tree, &patched)?;
        let names: Vec<String> = if options.paths.is_empty() {
            vec!["everything in scope".to_owned()]
        } else {
            options.paths.iter().map(|p| p.to_string()).collect()
        };
        for t in built.trees.into_values() {
            first.add_tree(t);
        }
        first.add_snapshot(cas::Snapshot {
            tree: built.root,
            parents: vec![captured.snapshot],
            created: jiff::Timestamp::now(),
            message: format!("{op} of {} to {}", names.join(", "), target.short(12)),
            labels: Default::default(),
            source: Some(Source {
                path: root.clone(),
                git: None,
            }),
        })
    };
    Ok(Planned {
        plan,
        skipped,
        head,
    })
}

pub(crate) fn applied(e: journal::ApplyFailure) -> RollbackError {
    let interrupted = e.interrupted;
    let error = failure(e.cause);
    if interrupted {
        RollbackError::Unfinished {
            cause: Box::new(error),
        }
    } else {
        error
    }
}

/// Refuses, before anything changes, if something outside scope stands in the way: a
/// symlink or file (ignored, so not captured) where a directory must be, or a directory
/// that must become a file but holds files outside scope. Paths longer than the system
/// takes from `/` are looked at through handles ([`worktree_scope::reach`]).
pub fn check_obstacles(
    root: &Path,
    deleted: &[RepoPathBuf],
    writes: &[(RepoPathBuf, diff::FileEntry)],
) -> Result<(), RollbackError> {
    let deleted: HashSet<&[u8]> = deleted.iter().map(|p| p.as_bytes()).collect();
    let mut checked_dirs: HashSet<&[u8]> = HashSet::new();
    let io = |rel: &[u8]| {
        let path = worktree_scope::paths::join(root, rel);
        move |source| RollbackError::Io { path, source }
    };
    for (p, _) in writes {
        let p = p.as_bytes();
        let mut end = 0;
        while let Some(i) = p[end..].iter().position(|&b| b == b'/') {
            let dir = &p[..end + i];
            end += i + 1;
            if !checked_dirs.insert(dir) {
                continue;
            }
            match worktree_scope::reach::lstat(root, dir) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if !deleted.contains(dir) => {
                    let what = if m.file_type().is_symlink() {
                        "a symlink"
                    } else {
                        "a file"
                    };
                    return Err(RollbackError::Blocked {
                        path: worktree_scope::paths::join(root, dir),
                        reason: format!(
                            "{what} outside cairn's scope stands where a directory must be"
                        ),
                    });
                }
                _ => {}
            }
        }
        if worktree_scope::reach::lstat(root, p).is_ok_and(|m| m.is_dir()) {
            let mut stack = vec![p.to_vec()];
            while let Some(dir) = stack.pop() {
                let fd = worktree_scope::reach::open_dir(root, &dir).map_err(io(&dir))?;
                for (name, is_dir) in worktree_scope::reach::list(&fd).map_err(io(&dir))? {
                    let rel = [&dir[..], b"/", &name[..]].concat();
                    if is_dir {
                        stack.push(rel);
                    } else if !deleted.contains(rel.as_slice()) {
                        return Err(RollbackError::Blocked {
                            path: worktree_scope::paths::join(root, p),
                            reason: format!(
                                "directory holds {}, outside cairn's scope",
                                worktree_scope::paths::shown(&worktree_scope::paths::join(
                                    root, &rel
                                ))
                            ),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}
