//! Checkpoints and tasks: `checkpoint`, `rewind`, `accept`, `discard`.
//!
//! A worktree's first checkpoint starts a task; its baseline is that checkpoint, moved
//! forward path by path as changes are accepted. `accept` or `discard` without paths ends
//! the task, and the next checkpoint starts a new one.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, Source, Store, WriteBatch};
use path_policy::RepoPathBuf;
use worktree_registry::{Checkpoint, OpRecord, Task, WorktreeRecord};
use worktree_registry::{RegistryRead, RegistryWrite};
use worktree_state::Kept;

use crate::error::TaskError;
use worktree_state::capture::{self, CaptureOptions, CaptureOutcome, WorktreeOnboardOptions};
use worktree_state::rollback::{WorktreeRollbackOptions, WorktreeRollbackOutcome};

/// Unnamed checkpoints kept per worktree; older ones drop off the stack (their snapshots
/// stay in the op log). Named ones are kept until the name is reused.
pub const UNNAMED_CHECKPOINTS: usize = 256;

/// Options of [`checkpoint`](crate::Worktrees::checkpoint).
#[derive(Clone, Copy, Default)]
pub struct WorktreeCheckpointOptions<'a> {
    /// The checkpoint's name; reusing a name moves it here.
    pub name: Option<&'a str>,
    /// Message, labels, threads, progress.
    pub capture: CaptureOptions<'a>,
    /// Leave files above this size out of the worktree's captures from now on.
    pub max_file_size: Option<u64>,
    /// Where a directory onboarded by this checkpoint stands in git (see
    /// [`WorktreeOnboardOptions::git`]).
    pub git: Option<worktree_state::capture::GitProbe<'a>>,
}

/// What [`checkpoint`](crate::Worktrees::checkpoint) did.
#[derive(Debug, Clone)]
pub struct WorktreeCheckpointOutcome {
    /// The snapshot taken (the head, if nothing changed).
    pub snapshot: CaptureOutcome,
    /// The checkpoint's name.
    pub name: Option<String>,
    /// Whether the directory was onboarded in place by this checkpoint.
    pub onboarded: bool,
    /// Whether this checkpoint started a task.
    pub task_started: bool,
}

/// Snapshots the worktree holding `dir` and pushes the result onto its checkpoint stack;
/// a directory that is not a worktree yet is onboarded in place first (nothing git owns
/// is touched). The first checkpoint of a task is its baseline.
pub(crate) fn checkpoint(
    ws: &Kept,
    store: &Store,
    dir: &Utf8Path,
    options: &WorktreeCheckpointOptions<'_>,
) -> Result<WorktreeCheckpointOutcome, TaskError> {
    if let Some(name) = options.name {
        cas::validate_ref_name(name).map_err(|e| TaskError::InvalidName {
            name: name.to_owned(),
            reason: e.to_string(),
        })?;
    }
    let existing = worktree_state::records::find(&store.reader()?, dir)?;
    let onboarded = existing.is_none();
    let root = match existing {
        Some(r) => r.root,
        None => {
            let onboard = WorktreeOnboardOptions {
                capture: options.capture,
                include_denied: false,
                max_file_size: options.max_file_size,
                git: options.git,
            };
            capture::onboard(ws, store, dir, &onboard)?.root
        }
    };
    let held = worktree_state::held::hold(ws, store, &root)?;
    let mut record = held.record.clone();
    if options.max_file_size.is_some() {
        record.max_file_size = options.max_file_size;
    }
    let task_started = record.task.is_none();
    let name = options.name.map(str::to_owned);
    let created = jiff::Timestamp::now();
    let edit = |r: &mut WorktreeRecord, head: SnapshotId| {
        if let Some(n) = &name {
            r.checkpoints.retain(|c| c.name.as_ref() != Some(n));
        }
        r.checkpoints.push(Checkpoint {
            name: name.clone(),
            snapshot: head,
            created,
        });
        let unnamed = r.checkpoints.iter().filter(|c| c.name.is_none()).count();
        if unnamed > UNNAMED_CHECKPOINTS {
            let mut extra = unnamed - UNNAMED_CHECKPOINTS;
            r.checkpoints.retain(|c| {
                let drop = extra > 0 && c.name.is_none();
                extra -= usize::from(drop);
                !drop
            });
        }
        if r.task.is_none() {
            r.task = Some(Task {
                baseline: head,
                started: created,
            });
        }
    };
    let snapshot = capture::snapshot_as(
        ws,
        store,
        record,
        "checkpoint",
        &options.capture,
        Some(&edit),
    )?;
    Ok(WorktreeCheckpointOutcome {
        snapshot,
        name,
        onboarded,
        task_started,
    })
}

/// Makes the worktree holding `path` equal checkpoint `to` (default: the latest). The live
/// state is captured first, and later checkpoints stay, so a rewind can be undone or
/// rewound forward.
pub(crate) fn rewind(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    to: Option<SnapshotId>,
    options: &WorktreeRollbackOptions<'_>,
) -> Result<WorktreeRollbackOutcome, TaskError> {
    let record = worktree(store, path)?;
    let target = match to {
        Some(t) => t,
        None => {
            record
                .checkpoints
                .last()
                .ok_or_else(|| TaskError::NoCheckpoint {
                    root: record.root.clone(),
                })?
                .snapshot
        }
    };
    Ok(worktree_state::rollback::restore(
        ws,
        store,
        &record.root,
        target,
        options,
        "rewind",
        &|_| {},
    )?)
}

/// What [`accept`](crate::Worktrees::accept) did.
#[derive(Debug, Clone)]
pub struct WorktreeAcceptOutcome {
    /// The worktree root.
    pub root: Utf8PathBuf,
    /// Paths whose changes were kept, in tree order.
    pub accepted: Vec<RepoPathBuf>,
    /// The task's baseline now; `None` once the task ended.
    pub baseline: Option<SnapshotId>,
}

/// Keeps the task's changes: under `paths` (the baseline moves forward for them), or all
/// of them, which ends the task. The live state is captured first.
pub(crate) fn accept(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    paths: &[RepoPathBuf],
    options: &CaptureOptions<'_>,
) -> Result<WorktreeAcceptOutcome, TaskError> {
    let held = worktree_state::held::hold(ws, store, path)?;
    let record = held.record.clone();
    let root = record.root.clone();
    let task = record
        .task
        .clone()
        .ok_or_else(|| TaskError::NoTask { root: root.clone() })?;
    let live = capture::snapshot_as(ws, store, record, "capture", options, None)?;
    let reader = store.reader()?;
    let baseline_tree = reader.snapshot(task.baseline)?.tree;
    let changes: Vec<diff::TreeChange> =
        diff::tree_changes(&reader, Some(baseline_tree), Some(live.tree))?
            .into_iter()
            .filter(|c| paths.is_empty() || paths.iter().any(|f| c.path.starts_with(f)))
            .collect();
    if let Some(p) = paths
        .iter()
        .find(|f| !changes.iter().any(|c| c.path.starts_with(f)))
    {
        return Err(TaskError::NoChanges {
            path: p.to_string(),
            root,
        });
    }
    // As the live capture left it.
    let mut record = reader
        .worktree(&root)?
        .ok_or_else(|| TaskError::NotAWorktree { path: root.clone() })?;
    let mut batch = WriteBatch::new();
    let baseline = if paths.is_empty() {
        record.task = None;
        None
    } else {
        let patched: Vec<(RepoPathBuf, Option<diff::FileEntry>)> =
            changes.iter().map(|c| (c.path.clone(), c.new)).collect();
        let built = worktree_scope::build::patch(&reader, baseline_tree, &patched)?;
        for t in built.trees.into_values() {
            batch.add_tree(t);
        }
        let names: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        let id = batch.add_snapshot(cas::Snapshot {
            tree: built.root,
            parents: vec![task.baseline],
            created: jiff::Timestamp::now(),
            message: format!("baseline with {} accepted", names.join(", ")),
            labels: Default::default(),
            source: Some(Source {
                path: root.clone(),
                git: None,
            }),
        });
        record.task = Some(Task {
            baseline: id,
            ..task
        });
        Some(id)
    };
    drop(reader);
    batch.append_op(&root, &OpRecord::new("accept", record.head, record.head))?;
    batch.put_worktree(&record)?;
    store.write(&batch)?;
    Ok(WorktreeAcceptOutcome {
        root,
        accepted: changes.into_iter().map(|c| c.path).collect(),
        baseline,
    })
}

/// What [`discard`](crate::Worktrees::discard) did.
#[derive(Debug, Clone)]
pub struct WorktreeDiscardOutcome {
    /// The restore that did it.
    pub restored: WorktreeRollbackOutcome,
    /// Paths put back to the baseline, in tree order.
    pub discarded: Vec<RepoPathBuf>,
}

/// Throws away the task's changes: under `options.paths` (restored to the baseline), or
/// all of them, which ends the task. The live state is captured first, so `undo` brings
/// the changes back.
pub(crate) fn discard(
    ws: &Kept,
    store: &Store,
    path: &Utf8Path,
    options: &WorktreeRollbackOptions<'_>,
) -> Result<WorktreeDiscardOutcome, TaskError> {
    let record = worktree(store, path)?;
    let task = record.task.clone().ok_or_else(|| TaskError::NoTask {
        root: record.root.clone(),
    })?;
    let ends = options.paths.is_empty();
    let restored = worktree_state::rollback::restore(
        ws,
        store,
        &record.root,
        task.baseline,
        options,
        "discard",
        &|r| {
            if ends {
                r.task = None;
            }
        },
    )?;
    let mut discarded: Vec<RepoPathBuf> = restored
        .written
        .iter()
        .chain(&restored.deleted)
        .cloned()
        .collect();
    discarded.sort();
    Ok(WorktreeDiscardOutcome {
        restored,
        discarded,
    })
}

fn worktree(store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, TaskError> {
    worktree_state::records::find(&store.reader()?, path)?.ok_or_else(|| TaskError::NotAWorktree {
        path: path.to_owned(),
    })
}
