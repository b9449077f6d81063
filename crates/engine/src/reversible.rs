//! What `undo` and `redo` share: their options, outcome, refusal and the one walk of the
//! op log both make.

use camino::Utf8PathBuf;
use cas::SnapshotId;
use path_policy::RepoPathBuf;
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine};
use crate::error::Error;
use crate::store::Access;

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

impl Engine {
    pub(crate) fn undo_or_redo(
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
}

/// An undo's or redo's refusal: files changed since, or nothing to undo or redo.
pub(crate) fn undo_refusal(outcome: &UndoOutcome) -> Option<&str> {
    match outcome {
        UndoOutcome::Done(d) => d.message.as_deref(),
        UndoOutcome::Nothing(n) => Some(&n.message),
    }
}
