//! How [`merge_snapshot`](crate::merge_snapshot) and
//! [`recover_checkout`](crate::recover_checkout) fail: one error for both, as the CLI reports
//! them alike.

use std::path::PathBuf;

use camino::Utf8PathBuf;
use cas::SnapshotId;

use crate::export::ExportError;
use crate::git::BoxError;
use crate::merge::MergeError;

/// The merge could not be attempted; the repository's refs, index and files are untouched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeSnapshotError {
    /// The path is not a git repository.
    #[error("{path}: not a git repository ({source})")]
    NotARepository {
        /// The path given.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
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
    #[error("{branch}: not a valid branch name ({source})")]
    InvalidBranch {
        /// The name given.
        branch: String,
        /// The rule it breaks, as gitoxide (or cairn, for a leading `-`) says.
        source: BoxError,
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
    #[error("{path}: {source}")]
    Git {
        /// The repository.
        path: Utf8PathBuf,
        /// What gitoxide said, or what cairn refuses to do there.
        source: BoxError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
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
        "{path}: checking out the merge failed, HEAD left at {head} ({source}); run `cairn recover {path}` to finish it"
    )]
    Checkout {
        /// The repository.
        path: Utf8PathBuf,
        /// Where `HEAD` still points.
        head: String,
        /// What failed.
        source: BoxError,
    },
}

/// What cairn will not do in a repository, where no gitoxide error is behind it: the source
/// of a [`MergeSnapshotError::Git`] or [`MergeSnapshotError::InvalidBranch`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// git would read the branch as an option.
    #[error("a branch name cannot start with '-'")]
    BranchStartsWithDash,
    #[error("a bare repository has no working tree to check out into")]
    BareRepository,
    #[error("a split or sparse index is not supported by merge --checkout")]
    SplitOrSparseIndex,
    /// The store's journal is keyed by UTF-8 paths.
    #[error("{}: work tree path is not valid UTF-8", .0.display())]
    WorkTreeNotUtf8(PathBuf),
    /// Recovery moves `HEAD` only from the commit the interrupted step left it on.
    #[error(
        "HEAD moved to {head} since the interrupted merge --checkout (from {old} to {new}); nothing was changed: move HEAD back to {old} and run `cairn recover` again"
    )]
    HeadMoved {
        head: gix::ObjectId,
        old: gix::ObjectId,
        new: gix::ObjectId,
    },
}
