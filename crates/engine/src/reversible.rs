//! Reversible work: `checkpoint`, `rewind`, `undo`, `redo`, `op log`, `accept`, `discard`,
//! `recover`.

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use fs_manager::RegistryRead as _;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, registered, resolve_in};
use crate::error::Error;
use crate::path::{PathArg, tree_paths};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::verbs::rollback::RollbackOutcome;
use crate::verbs::snapshot::SnapshotOutcome;
use crate::view::{LogEntry, log_entry};
use crate::worktrees::{SkippedPath, skipped};

/// `checkpoint [DIR] [--name NAME]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointOptions {
    /// The directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub dir: Option<Utf8PathBuf>,
    /// A name for the checkpoint.
    #[serde(default)]
    pub name: Option<String>,
    /// Snapshot message.
    #[serde(default)]
    #[schemars(extend("x-cli-only" = true))]
    pub message: Option<String>,
    /// Leave out files larger than this (when it onboards the directory).
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    #[schemars(extend("x-cli-only" = true))]
    pub max_file_size: Option<u64>,
}

/// What `checkpoint` made.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot it took, with `snapshot`'s fields.
    #[serde(flatten)]
    pub capture: SnapshotOutcome,
    /// Its name.
    pub name: Option<String>,
    /// Whether the directory was onboarded by it.
    pub onboarded: bool,
    /// Whether it started a task.
    pub task_started: bool,
}

/// `rewind [DIR] [--to SNAP] [--dry-run]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindOptions {
    /// The worktree directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub dir: Option<Utf8PathBuf>,
    /// Checkpoint name, ref or snapshot id prefix.
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub to: Option<String>,
    /// Only list what would change.
    #[serde(default)]
    pub dry_run: bool,
}

/// `undo [WORKTREE]` / `redo [WORKTREE]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoOptions {
    /// The worktree directory.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-default-cwd" = true))]
    pub worktree: Option<Utf8PathBuf>,
}

/// A file an undo or redo would not touch, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefusedPath {
    /// The path.
    pub path: RepoPathBuf,
    /// Why.
    pub reason: String,
}

/// An undo or redo that ran (or was refused because files changed since).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UndoDone {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Undo: the files put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted: Option<Vec<RepoPathBuf>>,
    /// Redo: the files changed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reapplied: Option<Vec<RepoPathBuf>>,
    /// Files that changed since, so nothing was done.
    pub refused: Vec<RefusedPath>,
    /// The op undone or redone.
    pub op: u64,
    /// The worktree's head now.
    pub snapshot: Option<SnapshotId>,
    /// The refusal, when `refused` is not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Nothing to undo (or redo): a refusal.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NothingToUndo {
    /// Undo: empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted: Option<Vec<RepoPathBuf>>,
    /// Redo: empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reapplied: Option<Vec<RepoPathBuf>>,
    /// Empty.
    pub refused: Vec<RefusedPath>,
    /// Why (printed as it is).
    pub message: String,
}

/// What `undo` or `redo` did.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum UndoOutcome {
    /// It ran, or was refused file by file.
    Done(UndoDone),
    /// There was nothing to do.
    Nothing(NothingToUndo),
}

/// `op log [DIR]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpLogOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
}

/// `rewind -i`'s list: the states a worktree can be rewound to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
    /// At most this many, the newest (default 500).
    #[serde(default, deserialize_with = "crate::engine::whole_number::deserialize")]
    pub max_count: Option<usize>,
}

/// One state of a worktree: a snapshot as `log --stat` shows it, its checkpoint name, and
/// whether it is the head.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelineEntry {
    /// The snapshot, with its changes against its first parent.
    #[serde(flatten)]
    pub snapshot: LogEntry,
    /// Its checkpoint's name, if it is a named checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Whether the worktree's head is this snapshot.
    pub head: bool,
}

/// A worktree's states, newest first: its checkpoints, the snapshots its op log went
/// through, and its head's history.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelineOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub head: Option<SnapshotId>,
    /// Its states.
    pub entries: Vec<TimelineEntry>,
}

/// One operation of a worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpItem {
    /// Its number.
    pub seq: u64,
    /// When.
    pub time: jiff::Timestamp,
    /// What (`snapshot`, `rollback`, `undo`, ...).
    pub op: String,
    /// The head before.
    pub before: Option<SnapshotId>,
    /// The head after.
    pub after: Option<SnapshotId>,
    /// The op it undid.
    pub undoes: Option<u64>,
    /// The op it redid.
    pub redoes: Option<u64>,
    /// Whether it is undone (on the redo stack).
    pub undone: bool,
    /// Whether `undo` would revert it (on the undo stack).
    pub undoable: bool,
    /// What it changed beyond the head (a sandbox grant given or taken back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Who did it, where recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A worktree's operation log, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpLogOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its operations.
    pub ops: Vec<OpItem>,
}

/// `accept [DIR] [-- PATH…]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
    /// Only these paths.
    #[serde(default)]
    pub paths: Vec<PathArg>,
}

/// What `accept` kept.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AcceptOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The paths accepted.
    pub accepted: Vec<RepoPathBuf>,
    /// The task's baseline now (none: the task ended).
    pub baseline: Option<SnapshotId>,
    /// Whether the task ended.
    pub task_ended: bool,
}

/// `discard [DIR] [--yes] [-- PATH…]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscardOptions {
    /// The worktree (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
    /// Only these paths.
    #[serde(default)]
    pub paths: Vec<PathArg>,
    /// Discarding every change is confirmed.
    #[serde(default)]
    pub yes: bool,
}

/// What `discard` put back.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiscardOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The paths put back to the baseline.
    pub discarded: Vec<RepoPathBuf>,
    /// The baseline.
    pub snapshot: SnapshotId,
    /// The live state captured first.
    pub captured: SnapshotId,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// Whether the task ended.
    pub task_ended: bool,
}

/// `recover [DIR]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverOptions {
    /// The worktree or repository (default: the caller's directory).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dir: Option<Utf8PathBuf>,
}

/// What `recover` finished.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoverOutcome {
    /// The worktree (or repository).
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The operation finished (none: nothing to do).
    pub recovered: Option<String>,
    /// Paths it wrote.
    pub paths: u64,
    /// For a `merge --checkout`: the commit HEAD is at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Engine {
    /// `cairn checkpoint [DIR] [--name NAME]`.
    pub fn checkpoint(
        &self,
        call: &Call,
        options: CheckpointOptions,
    ) -> Result<CheckpointOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Create)?;
        let name = options.name.as_deref();
        let source = |dir: &Utf8Path| self.git().and_then(|g| g.source(dir));
        let message = options.message.clone().unwrap_or_else(|| {
            format!(
                "checkpoint{}",
                name.map(|n| format!(" {n}")).unwrap_or_default()
            )
        });
        let checkpoint = fs_manager::WorktreeCheckpointOptions {
            name,
            capture: fs_manager::CaptureOptions {
                message: &message,
                progress: call.progress,
                ..fs_manager::CaptureOptions::default()
            },
            max_file_size: options.max_file_size,
            git: self
                .git()
                .is_some()
                .then_some(&source as fs_manager::GitProbe),
        };
        let out = self.worktrees.checkpoint(&store, &dir, &checkpoint)?;
        Ok(CheckpointOutcome {
            capture: SnapshotOutcome::of(&out.snapshot),
            worktree: out.snapshot.root,
            name: out.name,
            onboarded: out.onboarded,
            task_started: out.task_started,
        })
    }

    /// `cairn rewind [DIR] [--to SNAP] [--dry-run]`.
    pub fn rewind(&self, call: &Call, options: RewindOptions) -> Result<RollbackOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        let target = {
            let reader = store.reader()?;
            let record = registered(&reader, &dir)?;
            options
                .to
                .as_deref()
                .map(|spec| resolve_in(&reader, &record, spec))
                .transpose()?
        };
        let rollback = fs_manager::WorktreeRollbackOptions {
            dry_run: options.dry_run,
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let out = self.worktrees.rewind(&store, &dir, target, &rollback)?;
        Ok(RollbackOutcome::of(&out, options.dry_run))
    }

    /// `cairn undo [WORKTREE]`.
    pub fn undo(&self, call: &Call, options: UndoOptions) -> Result<UndoOutcome, Error> {
        self.undo_or_redo(call, options, false)
    }

    /// `cairn redo [WORKTREE]`.
    pub fn redo(&self, call: &Call, options: UndoOptions) -> Result<UndoOutcome, Error> {
        self.undo_or_redo(call, options, true)
    }

    fn undo_or_redo(
        &self,
        call: &Call,
        options: UndoOptions,
        redo: bool,
    ) -> Result<UndoOutcome, Error> {
        let dir = call.dir(options.worktree.as_deref());
        let store = self.store(Access::Write)?;
        let result = if redo {
            self.worktrees.redo(&store, &dir)
        } else {
            self.worktrees.undo(&store, &dir)
        };
        let split = |paths: Vec<RepoPathBuf>| {
            if redo {
                (None, Some(paths))
            } else {
                (Some(paths), None)
            }
        };
        let out = match result {
            Ok(out) => out,
            Err(
                e @ (fs_manager::UndoError::NothingToUndo { .. }
                | fs_manager::UndoError::NothingToRedo { .. }),
            ) => {
                let (reverted, reapplied) = split(Vec::new());
                return Ok(UndoOutcome::Nothing(NothingToUndo {
                    reverted,
                    reapplied,
                    refused: Vec::new(),
                    message: e.to_string(),
                }));
            }
            Err(e) => return Err(e.into()),
        };
        let verb = if redo { "redo" } else { "undo" };
        let message = (!out.refused.is_empty()).then(|| {
            let n = out.refused.len();
            format!(
                "{verb} of op {} refused: {n} file{} changed since; nothing was changed in {}",
                out.change,
                if n == 1 { "" } else { "s" },
                out.root
            )
        });
        let (reverted, reapplied) = split(out.paths.clone());
        Ok(UndoOutcome::Done(UndoDone {
            worktree: out.root,
            reverted,
            reapplied,
            refused: out
                .refused
                .iter()
                .map(|r| RefusedPath {
                    path: r.path.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
            op: out.change,
            snapshot: out.snapshot,
            message,
        }))
    }

    /// `cairn op log [DIR]`.
    pub fn op_log(&self, call: &Call, options: OpLogOptions) -> Result<OpLogOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let record = registered(&reader, &dir)?;
        let ops = reader.ops(&record.root)?;
        let stacks = fs_manager::undo_stacks(&ops);
        let ops = ops
            .iter()
            .rev()
            .map(|op| OpItem {
                seq: op.seq,
                time: op.time,
                op: op.op.clone(),
                before: op.before,
                after: op.after,
                undoes: op.undoes,
                redoes: op.redoes,
                undone: stacks.redo.contains(&op.seq),
                undoable: stacks.undo.contains(&op.seq),
                detail: op.detail.clone(),
                by: op.by.clone(),
            })
            .collect();
        Ok(OpLogOutcome {
            worktree: record.root,
            ops,
        })
    }

    /// The states `rewind -i` offers: checkpoints (named or not), the heads the op log
    /// recorded, and the head's history, each once, newest first.
    pub fn timeline(
        &self,
        call: &Call,
        options: TimelineOptions,
    ) -> Result<TimelineOutcome, Error> {
        const DEFAULT_COUNT: usize = 500;
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Read)?;
        let reader = store.reader()?;
        let record = registered(&reader, &dir)?;
        let most = options.max_count.unwrap_or(DEFAULT_COUNT);
        let mut ids: Vec<SnapshotId> = record.checkpoints.iter().map(|c| c.snapshot).collect();
        for op in reader.ops(&record.root)? {
            ids.extend(op.before.into_iter().chain(op.after));
        }
        let mut seen = std::collections::HashSet::new();
        let mut states = Vec::new();
        let mut keep = |id: SnapshotId| -> Result<Option<cas::Snapshot>, Error> {
            if !seen.insert(id) {
                return Ok(None);
            }
            match reader.snapshot(id) {
                Ok(snap) => {
                    states.push((id, snap.clone()));
                    Ok(Some(snap))
                }
                // A state gc has since collected, or a parent left on a remote, is not offered.
                Err(cas::ReadError::NotFound { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        };
        for id in ids {
            keep(id)?;
        }
        // The head's first-parent history.
        let mut next = record.head;
        for _ in 0..most {
            let Some(id) = next else { break };
            next = match reader.snapshot(id) {
                Ok(snap) => snap.parents.first().copied(),
                Err(cas::ReadError::NotFound { .. }) => None,
                Err(e) => return Err(e.into()),
            };
            keep(id)?;
        }
        states.sort_by(|a, b| b.1.created.cmp(&a.1.created).then(b.0.cmp(&a.0)));
        states.truncate(most);
        let entries = states
            .into_iter()
            .map(|(id, snap)| {
                // A parent left on a remote or pruned by gc leaves no change summary (and
                // is not fetched for one).
                let parent_absent = match snap.parents.first() {
                    Some(p) => reader.absent_by_design(*p)?,
                    None => false,
                };
                Ok(TimelineEntry {
                    snapshot: log_entry(&reader, id, snap, !parent_absent)?,
                    // The newest checkpoint of that snapshot with a name names it.
                    checkpoint: record
                        .checkpoints
                        .iter()
                        .rev()
                        .find(|c| c.snapshot == id)
                        .and_then(|c| c.name.clone()),
                    head: record.head == Some(id),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(TimelineOutcome {
            worktree: record.root,
            head: record.head,
            entries,
        })
    }

    /// `cairn accept [DIR] [-- PATH…]`.
    pub fn accept(&self, call: &Call, options: AcceptOptions) -> Result<AcceptOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        let record = registered(&store.reader()?, &dir)?;
        let paths = tree_paths(Some(&record.root), &options.paths)?;
        let out = self.worktrees.accept(
            &store,
            &record.root,
            &paths,
            &fs_manager::CaptureOptions::default(),
        )?;
        Ok(AcceptOutcome {
            worktree: out.root,
            accepted: out.accepted.clone(),
            baseline: out.baseline,
            task_ended: out.baseline.is_none(),
        })
    }

    /// `cairn discard [DIR] [-- PATH…]`: discarding everything needs `yes`, else the call
    /// fails with [`DiscardError::ConfirmationNeeded`](crate::DiscardError) before changing anything.
    pub fn discard(&self, call: &Call, options: DiscardOptions) -> Result<DiscardOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        let record = registered(&store.reader()?, &dir)?;
        let paths = tree_paths(Some(&record.root), &options.paths)?;
        if paths.is_empty() && !options.yes {
            return Err(
                crate::error::DiscardError::ConfirmationNeeded { root: record.root }.into(),
            );
        }
        let rollback = fs_manager::WorktreeRollbackOptions {
            paths: &paths,
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let out = self.worktrees.discard(&store, &record.root, &rollback)?;
        Ok(DiscardOutcome {
            worktree: out.restored.root,
            discarded: out.discarded.clone(),
            snapshot: out.restored.snapshot,
            captured: out.restored.captured,
            skipped: skipped(&out.restored.skipped),
            task_ended: paths.is_empty(),
        })
    }

    /// `cairn recover [DIR]`.
    pub fn recover(&self, call: &Call, options: RecoverOptions) -> Result<RecoverOutcome, Error> {
        let dir = call.dir(options.dir.as_deref());
        let store = self.store(Access::Write)?;
        // A repository left half way by `merge --checkout` (registered as a worktree or not).
        let recovered = match self.git() {
            Some(git) => git.recover_merge(&store, &dir)?,
            None => match crate::git::pending_merge(&store, &dir)? {
                Some(repo) => return Err(crate::git::no_git(&repo)),
                None => None,
            },
        };
        if let Some(done) = recovered {
            let onboarded = fs_manager::find_worktree(&store.reader()?, &done.workdir)?
                .is_some_and(|r| r.root == done.workdir);
            if onboarded {
                let capture = fs_manager::CaptureOptions {
                    message: "merge, finished by recover",
                    ..fs_manager::CaptureOptions::default()
                };
                self.worktrees
                    .record_change(&store, &done.workdir, "merge", &capture)?;
            }
            return Ok(RecoverOutcome {
                worktree: done.workdir,
                recovered: Some("merge --checkout".to_owned()),
                paths: done.paths,
                commit: Some(done.commit),
            });
        }
        let out = self.worktrees.recover(&store, &dir)?;
        Ok(RecoverOutcome {
            worktree: out.root,
            recovered: out.op,
            paths: out.paths,
            commit: None,
        })
    }
}

/// An undo's or redo's refusal: files changed since, or nothing to undo or redo.
fn undo_refusal(outcome: &UndoOutcome) -> Option<&str> {
    match outcome {
        UndoOutcome::Done(d) => d.message.as_deref(),
        UndoOutcome::Nothing(n) => Some(&n.message),
    }
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Snapshot a directory onto its checkpoint stack, optionally named (onboards it in place if new; nothing git owns is touched). The first checkpoint starts a task.
    Checkpoint(CheckpointOptions) -> CheckpointOutcome = "checkpoint" via checkpoint [Route, Tool];
    /// Roll the worktree back to a checkpoint (default: the latest); later checkpoints stay reachable.
    Rewind(RewindOptions) -> RollbackOutcome = "rewind" via rewind [Route, Tool];
    /// Revert the newest change set of the worktree that is not undone yet. Refuses, changing nothing, if any file it would touch changed since; each such file is listed with the reason.
    Undo(UndoOptions) -> UndoOutcome = "undo" via undo [Route, Tool];
    /// Re-apply the newest undone change set of the worktree.
    Redo(UndoOptions) -> UndoOutcome = "redo" via redo [Route, Tool];
    /// The worktree's op log: every recorded change, oldest first.
    OpLog(OpLogOptions) -> OpLogOutcome = "op_log" via op_log [];
    /// The worktree's snapshots and checkpoints, newest first.
    Timeline(TimelineOptions) -> TimelineOutcome = "timeline" via timeline [];
    /// Accept the task's changes (or only the given paths): the baseline moves forward to them.
    Accept(AcceptOptions) -> AcceptOutcome = "accept" via accept [];
    /// Discard the task's changes (or only the given paths): the worktree goes back to the baseline.
    Discard(DiscardOptions) -> DiscardOutcome = "discard" via discard [];
    /// Finish or roll back an operation a crash interrupted.
    Recover(RecoverOptions) -> RecoverOutcome = "recover" via recover [];
}

impl VerbSpec for verbs::Checkpoint {
    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "name": "green", "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::Rewind {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options.to.as_deref().into_iter().collect()
    }

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"dir": "wt", "to": "base", "dry_run": true, "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::Undo {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        undo_refusal(outcome)
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: undo refused, or nothing to undo (`No edits have been applied to any file with this session.`); `message` says why.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::Redo {
    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        undo_refusal(outcome)
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: redo refused (`refused`), or nothing to redo; `message` says why.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "cwd": "/home/agent/project"}"#);
}

impl VerbSpec for verbs::OpLog {}

impl VerbSpec for verbs::Timeline {}

impl VerbSpec for verbs::Accept {}

impl VerbSpec for verbs::Discard {}

impl VerbSpec for verbs::Recover {}
