//! One error enum per operation, each naming the path or id it failed on.

use std::path::PathBuf;

use camino::Utf8PathBuf;

use worktree_scope::paths::shown;
use worktree_scope::scan::ScanError;

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
    StoreOverlap(#[from] worktree_registry::apart::StoreOverlap),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] worktree_registry::RegistryError),
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
    StoreOverlap(#[from] worktree_registry::apart::StoreOverlap),
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
    Registry(#[from] worktree_registry::RegistryError),
    /// Dependency layers go to a registered worktree only.
    #[error("{path} is not a registered worktree")]
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
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
    Registry(#[from] worktree_registry::RegistryError),
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
    StoreOverlap(#[from] worktree_registry::apart::StoreOverlap),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] worktree_registry::RegistryError),
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
    StoreOverlap(#[from] worktree_registry::apart::StoreOverlap),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
    /// A registry record could not be read or written.
    #[error(transparent)]
    Registry(#[from] worktree_registry::RegistryError),
}

worktree_registry::store_errors!(
    CaptureError,
    CheckoutError,
    RollbackError,
    WorktreeError,
    RecoverError
);
