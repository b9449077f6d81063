//! `rebase WORKTREE --onto SNAP`: a worktree's changes since its base (live edits included)
//! moved onto another snapshot, as one undoable change set.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::ancestry::{Named, base_of};
use crate::engine::{Call, Engine, registered, resolve_in};
use crate::error::{Code, Error};
use crate::git::GitCombine;
use crate::path::RawPath;
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::Access;
use crate::verbs::merge::MergeConflictOut;
use crate::worktrees::{SkippedPath, skipped};

/// `rebase WORKTREE --onto SNAP`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RebaseOptions {
    /// The worktree directory.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The snapshot to move the worktree's changes onto: checkpoint name, ref or id prefix.
    #[schemars(extend("x-snapshot" = true))]
    pub onto: String,
}

impl RebaseOptions {
    /// Move the changes of `worktree` onto `onto`.
    pub fn new(worktree: impl Into<Utf8PathBuf>, onto: impl Into<String>) -> RebaseOptions {
        RebaseOptions {
            worktree: worktree.into(),
            onto: onto.into(),
        }
    }
}

/// What `rebase` did: the worktree moved onto the snapshot, or nothing (already on it, or
/// conflicts: a refusal).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RebaseOutcome {
    /// The worktree.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Whether the worktree now holds its changes on `onto` (false: nothing changed).
    pub rebased: bool,
    /// The worktree's head afterwards: a new snapshot whose parent is `onto`, or the head
    /// it kept.
    pub snapshot: SnapshotId,
    /// The snapshot the changes were moved onto.
    pub onto: SnapshotId,
    /// The live state captured first (`undo` brings it back); none when nothing changed.
    pub captured: Option<SnapshotId>,
    /// Files written.
    pub written: Vec<RepoPathBuf>,
    /// Files deleted.
    pub deleted: Vec<RepoPathBuf>,
    /// Paths left out.
    pub skipped: Vec<SkippedPath>,
    /// Paths where the worktree's changes and `onto`'s conflict (none when rebased).
    pub conflicts: Vec<MergeConflictOut>,
    /// The refusal, when conflicts stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a worktree cannot be rebased at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RebaseError {
    /// The worktree has no head snapshot to take its changes from.
    #[error("rebase: worktree {worktree} has no head snapshot; snapshot it first")]
    NoHead {
        /// The worktree.
        worktree: Utf8PathBuf,
    },
    /// An engine opened without a git backend, whose merge rebase uses.
    #[error("rebase: this engine has no git support (it was opened without a git backend)")]
    NoGit,
}

crate::error::coded!(RebaseError);

impl RebaseError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            RebaseError::NoHead { .. } => Code::NoBase,
            RebaseError::NoGit => Code::NoGit,
        }
    }
}

/// What the step that makes the target found, when it made none.
enum Unmade {
    /// The head already descends from `onto`.
    AlreadyOn { head: SnapshotId },
    /// The changes conflict.
    Conflicts {
        head: SnapshotId,
        conflicts: Vec<MergeConflictOut>,
    },
}

impl Engine {
    /// `cairn rebase WORKTREE --onto SNAP`: the worktree's live state is captured first (as
    /// `rollback` captures it); its changes since the nearest common ancestor of its head
    /// and SNAP are merged onto SNAP by `combine`'s merge; the worktree is made equal to
    /// the result, a new snapshot whose parent is SNAP, in one change set of its op log
    /// (so `undo` brings back the live state, unsnapshotted edits included). Conflicts
    /// change nothing: files, head and op log stay as they were and nothing of the capture
    /// is recorded. A head that already descends from SNAP is left as it is.
    pub fn rebase(&self, call: &Call, options: RebaseOptions) -> Result<RebaseOutcome, Error> {
        let git = self.git().ok_or(RebaseError::NoGit)?;
        let store = self.store(Access::Write)?;
        let worktree = call.path(&options.worktree);
        let reader = store.reader()?;
        let record = registered(&reader, &worktree)?;
        let onto = resolve_in(&reader, &record, &options.onto)?;
        drop(reader);

        let mut unmade = None;
        let mut make = |live: &mut fs_manager::LiveCapture<'_, '_>| {
            let head = live.head.ok_or_else(|| RebaseError::NoHead {
                worktree: live.root.to_owned(),
            })?;
            let reader = store.reader()?;
            // The head is SNAP: already on it (and not a snapshot named twice).
            let base = if head == onto {
                onto
            } else {
                let head_name = format!("the head of {}", live.root);
                let named = Named {
                    verb: "rebase",
                    snapshots: &[(head_name.as_str(), head), (options.onto.as_str(), onto)],
                    advice: "",
                };
                base_of(&reader, &named, None)?
            };
            if base == onto {
                unmade = Some(Unmade::AlreadyOn { head });
                return Ok(None);
            }
            let base_tree = reader.snapshot(base)?.tree;
            let onto_tree = reader.snapshot(onto)?.tree;
            drop(reader);
            let live_tree = live.stored_tree()?;
            let combined = git.combine(
                &store,
                &GitCombine {
                    base: base_tree,
                    inputs: &[onto_tree, live_tree],
                },
            )?;
            let Some(tree) = combined.tree else {
                let conflicts = combined
                    .conflicts
                    .into_iter()
                    .map(|(path, kind, _)| MergeConflictOut {
                        path: RawPath::from(path),
                        kind,
                    })
                    .collect();
                unmade = Some(Unmade::Conflicts { head, conflicts });
                return Ok(None);
            };
            // Stored now, unreferenced until the change set that makes it the head.
            let mut batch = combined.objects;
            let rebased = batch.add_snapshot(cas::Snapshot {
                tree,
                parents: vec![onto],
                created: jiff::Timestamp::now(),
                message: format!("rebase of {} onto {}", live.root, onto.short(12)),
                labels: Default::default(),
                source: Some(cas::Source {
                    path: live.root.to_owned(),
                    git: None,
                }),
            });
            store.write(&batch)?;
            Ok::<_, Error>(Some(rebased))
        };
        let rollback = fs_manager::WorktreeRollbackOptions {
            progress: call.progress,
            ..fs_manager::WorktreeRollbackOptions::default()
        };
        let done = self
            .worktrees
            .rebase(&store, &record.root, onto, &mut make, &rollback)?;
        let mut outcome = RebaseOutcome {
            worktree: record.root.clone(),
            rebased: false,
            snapshot: onto,
            onto,
            captured: None,
            written: Vec::new(),
            deleted: Vec::new(),
            skipped: Vec::new(),
            conflicts: Vec::new(),
            message: None,
        };
        match done {
            Some(out) => {
                outcome.rebased = true;
                outcome.worktree = out.root;
                outcome.snapshot = out.snapshot;
                outcome.captured = Some(out.captured);
                outcome.written = out.written;
                outcome.deleted = out.deleted;
                outcome.skipped = skipped(&out.skipped);
            }
            None => match unmade.expect("the step that made no target said why") {
                Unmade::AlreadyOn { head } => outcome.snapshot = head,
                Unmade::Conflicts { head, conflicts } => {
                    outcome.message = Some(format!(
                        "rebasing {} onto {} conflicts in {} path(s); nothing was changed",
                        record.root,
                        onto.short(12),
                        conflicts.len()
                    ));
                    outcome.snapshot = head;
                    outcome.conflicts = conflicts;
                }
            },
        }
        Ok(outcome)
    }
}

// What the verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Move a worktree's changes since its base (the nearest common ancestor of its head and SNAP; live edits included, captured first as `rollback` captures them) onto SNAP by the three-way merge `combine` uses; the worktree then holds the result and its head is a new snapshot whose parent is SNAP, one change set that `undo` reverts. Any conflict (kinds as `merge` reports them) is a refusal listing each path, and nothing changes: files, head and op log. A head that already descends from SNAP is left as it is (`rebased: false`, no conflicts).
    Rebase(RebaseOptions) -> RebaseOutcome = "rebase" via rebase [Route, Tool];
}

impl VerbSpec for verbs::Rebase {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        vec![&options.onto]
    }

    fn refusal(outcome: &Self::Outcome) -> Option<&str> {
        outcome.message.as_deref()
    }

    const REFUSED: Option<&'static str> = Some(
        "A negative answer, nothing changed: the worktree's changes and the snapshot's conflict (`conflicts`); the worktree's files, head and op log are as they were; `message` says so.",
    );

    const EXAMPLE: Option<&'static str> =
        Some(r#"{"worktree": "wt", "onto": "main", "cwd": "/home/agent/project"}"#);
}
