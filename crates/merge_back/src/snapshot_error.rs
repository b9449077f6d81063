//! How [`merge_snapshot`](crate::merge_snapshot) and
//! [`recover_checkout`](crate::recover_checkout) fail: one error for both, as the CLI reports
//! them alike.

use camino::Utf8PathBuf;
use cas::SnapshotId;

use crate::export::ExportError;
use crate::merge::MergeError;

/// The merge could not be attempted; the repository's refs, index and files are untouched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeSnapshotError {
    /// The path is not a git repository.
    #[error("{path}: not a git repository ({message})")]
    NotARepository {
        /// The path given.
        path: Utf8PathBuf,
        /// What gitoxide said.
        message: String,
    },
    /// `HEAD` has no commit yet.
    #[error("{path}: HEAD has no commit to merge into")]
    UnbornHead {
        /// The repository.
        path: Utf8PathBuf,
    },
    /// A merge, rebase, cherry-pick or similar is under way.
    #[error("{path}: a {state} is in progress; finish or abort it first")]
    InProgress {
        /// The repository.
        path: Utf8PathBuf,
        /// What git is in the middle of.
        state: String,
    },
    /// No ancestor of the snapshot was onboarded from this repository.
    #[error(
        "snapshot {snapshot}: no ancestor was onboarded from git repository {path}; pass --base"
    )]
    NoBase {
        /// The snapshot.
        snapshot: SnapshotId,
        /// The repository.
        path: Utf8PathBuf,
    },
    /// The branch name is not a valid git reference name.
    #[error("{branch}: not a valid branch name ({message})")]
    InvalidBranch {
        /// The name given.
        branch: String,
        /// What gitoxide said.
        message: String,
    },
    /// The branch already exists; cairn does not move existing branches.
    #[error("{path}: branch {branch} already exists; pass another --branch")]
    BranchExists {
        /// The repository.
        path: Utf8PathBuf,
        /// The branch.
        branch: String,
    },
    /// A branch exists whose name is a folder of the new one's, or the other way round.
    #[error(
        "{path}: branch {branch} cannot coexist with existing branch {existing}; pass another --branch"
    )]
    BranchConflict {
        /// The repository.
        path: Utf8PathBuf,
        /// The branch asked for.
        branch: String,
        /// The branch in the way.
        existing: String,
    },
    /// Exporting a snapshot into the repository failed.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// The three-way merge failed.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// Reading or writing the repository failed.
    #[error("{path}: {message}")]
    Git {
        /// The repository.
        path: Utf8PathBuf,
        /// What gitoxide said.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::Error),
    /// An earlier `merge --checkout` (or another cairn step) into this work tree was
    /// interrupted; `cairn recover` finishes it.
    #[error("{path}: {what} left it half done; run `cairn recover {path}` to finish it")]
    Interrupted {
        /// The work tree.
        path: Utf8PathBuf,
        /// What was interrupted.
        what: String,
    },
    /// Moving the index and working files failed part way; `HEAD` was not moved. The step
    /// is journaled: `cairn recover` finishes it.
    #[error(
        "{path}: checking out the merge failed, HEAD left at {head} ({message}); run `cairn recover {path}` to finish it"
    )]
    Checkout {
        /// The repository.
        path: Utf8PathBuf,
        /// Where `HEAD` still points.
        head: String,
        /// What failed.
        message: String,
    },
}
