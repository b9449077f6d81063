//! One error enum per operation, each naming the path or id it failed on.

use std::path::PathBuf;

use camino::Utf8PathBuf;

use crate::paths::shown;
pub use crate::scan::ScanError;

/// `onboard` or `snapshot` failed; nothing was recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The source directory does not exist.
    #[error("{path}: no such directory")]
    Missing {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// The source is not a directory.
    #[error("{path}: not a directory")]
    NotADirectory {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// The path is not inside a registered worktree.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// A path that is not valid UTF-8 where cairn needs one (worktree roots).
    #[error("{}: path is not valid UTF-8", shown(path))]
    NotUtf8 {
        /// The path.
        path: PathBuf,
    },
    /// A mounted worktree whose mount is not live.
    #[error("{path}: mounted worktree is not mounted (`cairn mount {path}` attaches it again)")]
    NotMounted {
        /// The worktree.
        path: Utf8PathBuf,
    },
    /// A live mount could not say what it holds.
    #[error("{path}: mount: {source}")]
    Mount {
        /// The worktree.
        path: Utf8PathBuf,
        /// The mount's own error (the `mount` crate's, which this crate cannot name).
        #[source]
        source: cas::BoxError,
    },
    /// Reading the files failed.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// The deny-pattern configuration is unreadable or invalid.
    #[error(transparent)]
    Deny(#[from] path_policy::DenyError),
    /// An earlier operation on the worktree was interrupted.
    #[error(transparent)]
    Interrupted(#[from] crate::journal::Interrupted),
    /// The worktree's root is not the directory registered.
    #[error(transparent)]
    RootChanged(#[from] crate::root::RootChanged),
    /// The worktree is, lies inside or holds the store's folder.
    #[error(transparent)]
    StoreOverlap(#[from] crate::apart::StoreOverlap),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] crate::RegistryError),
}

/// `checkout` failed. A refused destination is left untouched; a checkout that fails half
/// way removes what it wrote.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckoutError {
    /// The destination holds files.
    #[error("{path}: destination is not empty")]
    NotEmpty {
        /// The destination.
        path: Utf8PathBuf,
    },
    /// The destination exists and is not a directory.
    #[error("{path}: destination is not a directory")]
    NotADirectory {
        /// The destination.
        path: Utf8PathBuf,
    },
    /// Something above the destination is a file (or a link to one), not a directory.
    #[error("{path}: {file} is not a directory")]
    UnderAFile {
        /// The destination.
        path: Utf8PathBuf,
        /// The file above it.
        file: Utf8PathBuf,
    },
    /// A path of the snapshot breaks the path rules (too long, too deep).
    #[error("{}: refused: {reason}", shown(path))]
    Refused {
        /// The path, under the destination.
        path: PathBuf,
        /// The rule.
        reason: &'static str,
    },
    /// An earlier checkout into the destination was interrupted.
    #[error(transparent)]
    Interrupted(#[from] crate::journal::Interrupted),
    /// The destination is, lies inside or holds the store's folder.
    #[error(transparent)]
    StoreOverlap(#[from] crate::apart::StoreOverlap),
    /// Writing failed.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The store failed, or an object is missing or corrupt.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] crate::RegistryError),
}

/// `rollback` failed; the worktree was not changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RollbackError {
    /// The path is not inside a registered worktree.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// A path filter names nothing in either state.
    #[error("{path}: no such path in the worktree or in snapshot {snapshot}")]
    NoSuchPath {
        /// The path as given.
        path: String,
        /// The target snapshot.
        snapshot: cas::SnapshotId,
    },
    /// Something outside cairn's scope stands where a file must go.
    #[error("{}: {reason}", shown(path))]
    Blocked {
        /// The obstacle.
        path: PathBuf,
        /// What it is.
        reason: String,
    },
    /// Capturing the live state first failed.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// Files had started to change when this failed; `cairn recover` finishes the step.
    #[error("{cause}; the worktree is part way: run `cairn recover` to finish")]
    Unfinished {
        /// What failed.
        cause: Box<RollbackError>,
    },
    /// The deny-pattern configuration is unreadable or invalid.
    #[error(transparent)]
    Deny(#[from] path_policy::DenyError),
    /// Writing failed.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] crate::RegistryError),
}

/// `recover` failed; the journal stays, so it can run again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoverError {
    /// The path does not exist or is not a directory.
    #[error("{path}: no such directory")]
    Missing {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// Writing failed.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Something outside cairn's scope stands where a file must go.
    #[error("{}: {reason}", shown(path))]
    Blocked {
        /// The obstacle.
        path: std::path::PathBuf,
        /// What it is.
        reason: String,
    },
    /// The worktree's root is not the directory registered.
    #[error(transparent)]
    RootChanged(#[from] crate::root::RootChanged),
    /// The worktree is, lies inside or holds the store's folder.
    #[error(transparent)]
    StoreOverlap(#[from] crate::apart::StoreOverlap),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] crate::RegistryError),
}

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
    Interrupted(#[from] crate::journal::Interrupted),
    /// The worktree's root is not the directory registered.
    #[error(transparent)]
    RootChanged(#[from] crate::root::RootChanged),
    /// The worktree is, lies inside or holds the store's folder.
    #[error(transparent)]
    StoreOverlap(#[from] crate::apart::StoreOverlap),
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
    Registry(#[from] crate::RegistryError),
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
    Registry(#[from] crate::RegistryError),
}

/// A worktree registry operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorktreeError {
    /// The path is not a registered worktree.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// The worktree's root directory does not exist.
    #[error("{path}: no such directory")]
    Missing {
        /// The root.
        path: Utf8PathBuf,
    },
    /// The worktree's root is a symlink or not a directory.
    #[error(transparent)]
    RootChanged(#[from] crate::root::RootChanged),
    /// The worktree is, lies inside or holds the store's folder.
    #[error(transparent)]
    StoreOverlap(#[from] crate::apart::StoreOverlap),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] crate::RegistryError),
}

macro_rules! store_errors {
    ($($ty:ty),*) => {$(
        impl From<cas::ReadError> for $ty { fn from(e: cas::ReadError) -> Self { cas::StoreError::from(e).into() } }
        impl From<cas::WriteError> for $ty { fn from(e: cas::WriteError) -> Self { cas::StoreError::from(e).into() } }
        impl From<cas::StorageFailure> for $ty { fn from(e: cas::StorageFailure) -> Self { cas::StoreError::from(cas::ReadError::from(e)).into() } }
        impl From<cas::ObjectError> for $ty { fn from(e: cas::ObjectError) -> Self { cas::StoreError::from(e).into() } }
    )*};
}
store_errors!(
    CaptureError,
    CheckoutError,
    RollbackError,
    WorktreeError,
    ScanError,
    RecoverError,
    UndoError,
    TaskError
);
