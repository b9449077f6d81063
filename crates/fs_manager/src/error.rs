//! The errors of the operations this crate adds: `undo`/`redo` and the task's.

use std::path::PathBuf;

use camino::Utf8PathBuf;
use worktree_scope::paths::shown;
use worktree_state::error::{CaptureError, RollbackError};
use worktree_state::held::HoldError;

/// `undo` or `redo` failed. A refusal (files changed since) is not an error: see
/// [`crate::WorktreeUndoOutcome::refused`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UndoError {
    /// The path is not inside a registered worktree.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// Every change set is undone already, or none was recorded.
    #[error("No edits have been applied to any file with this session.")]
    NothingToUndo {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// Nothing was undone since the last change.
    #[error("worktree {root}: nothing to redo")]
    NothingToRedo {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// An earlier operation on the worktree was interrupted.
    #[error(transparent)]
    Interrupted(#[from] worktree_state::journal::Interrupted),
    /// The worktree's root is not the directory registered.
    #[error(transparent)]
    RootChanged(#[from] worktree_state::root::RootChanged),
    /// The worktree is, lies inside or holds the store's folder.
    #[error(transparent)]
    StoreOverlap(#[from] worktree_registry::apart::StoreOverlap),
    /// Reading a file failed.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Writing the files failed; if `interrupted`, `cairn recover` finishes the step.
    #[error("{cause}{}", if *interrupted { "; the worktree is part way: run `cairn recover` to finish" } else { "" })]
    Write {
        /// What failed.
        cause: Box<RollbackError>,
        /// Whether files had started to change.
        interrupted: bool,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] worktree_registry::RegistryError),
}

/// `checkpoint`, `rewind`, `accept` or `discard` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The path is not inside a registered worktree.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// The checkpoint name breaks the naming rules.
    #[error("invalid checkpoint name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// `rewind` without `--to` on a worktree with no checkpoint.
    #[error("worktree {root} has no checkpoint to rewind to (take one with `cairn checkpoint`)")]
    NoCheckpoint {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// `review`, `accept` or `discard` with no task under way.
    #[error("worktree {root} has no task under way (a checkpoint starts one)")]
    NoTask {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// A path given to `accept` has no changes against the baseline.
    #[error("{path}: no changes against the task's baseline in {root}")]
    NoChanges {
        /// The path as given.
        path: String,
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// Capturing failed.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// Restoring files failed.
    #[error(transparent)]
    Rollback(#[from] RollbackError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] worktree_registry::RegistryError),
}

impl From<HoldError> for UndoError {
    fn from(e: HoldError) -> Self {
        use HoldError::*;
        match e {
            NotAWorktree { path } => UndoError::NotAWorktree { path },
            Interrupted(i) => UndoError::Interrupted(i),
            RootChanged(r) => UndoError::RootChanged(r),
            Apart(a) => UndoError::StoreOverlap(a),
            Store(e) => UndoError::Store(e),
            Registry(e) => UndoError::Registry(e),
        }
    }
}

impl From<HoldError> for TaskError {
    fn from(e: HoldError) -> Self {
        match e {
            HoldError::NotAWorktree { path } => TaskError::NotAWorktree { path },
            other => TaskError::Capture(other.into()),
        }
    }
}

worktree_registry::store_errors!(UndoError, TaskError);
