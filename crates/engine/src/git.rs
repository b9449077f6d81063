//! [`Git`]: what the engine asks of git, injected by the embedder (`cairn_git::Gitoxide`)
//! so that the engine itself never links a git implementation.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, TreeId};

use crate::error::{Error, GitError};

/// A git backend: the engine's `onboard` (its git source), `onboard --git`, `merge`,
/// `combine`, `rebase` and the `recover` of an interrupted `merge --checkout` go through it. An engine
/// without one records no git source and refuses those calls.
pub trait Git: Send + Sync {
    /// The commit `dir`'s files come from: `None` when `dir` is not the top of a git work
    /// tree, its HEAD is unborn, or it cannot be read (git's view is provenance only, so
    /// this never stops a capture).
    fn source(&self, dir: &Utf8Path) -> Option<cas::GitSource>;

    /// Imports the tree of a commit as a snapshot whose source is that commit.
    fn import(&self, store: &cas::Store, import: &GitImport<'_>) -> Result<GitImported, GitError>;

    /// Brings a snapshot back into a repository as a commit.
    fn merge(&self, store: &cas::Store, merge: &GitMerge<'_>) -> Result<GitMerged, GitError>;

    /// Three-way merges several trees' changes against a base into one tree, with git's
    /// rules, inside the store: no repository, worktree or record changes.
    fn combine(
        &self,
        store: &cas::Store,
        combine: &GitCombine<'_>,
    ) -> Result<GitCombined, GitError>;

    /// Finishes an interrupted `merge --checkout` of the repository at or above `dir`;
    /// `None` if none is pending there.
    fn recover_merge(
        &self,
        store: &cas::Store,
        dir: &Utf8Path,
    ) -> Result<Option<GitRecovered>, GitError>;
}

/// What to import.
pub struct GitImport<'a> {
    /// The repository (canonical).
    pub repo: &'a Utf8Path,
    /// The revision naming the commit.
    pub rev: &'a str,
    /// The snapshot's message.
    pub message: &'a str,
    /// The snapshot's labels.
    pub labels: &'a BTreeMap<String, String>,
    /// Paths left out (secrets).
    pub deny: &'a path_policy::DenyList,
    /// Adds the caller's records about the new snapshot to the batch that stores it.
    pub records: &'a dyn Fn(&mut cas::WriteBatch, SnapshotId) -> Result<(), cas::BoxError>,
}

/// What an import recorded.
#[derive(Debug, Clone)]
pub struct GitImported {
    /// The new snapshot.
    pub snapshot: SnapshotId,
    /// Its tree.
    pub tree: TreeId,
    /// The commit, as hex.
    pub commit: String,
    /// Files and symlinks imported.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Entries left out, with reasons.
    pub skipped: Vec<(Vec<u8>, String)>,
}

/// What to merge.
#[derive(Debug)]
pub struct GitMerge<'a> {
    /// The repository (canonical).
    pub repo: &'a Utf8Path,
    /// The snapshot to bring in.
    pub snapshot: SnapshotId,
    /// The common ancestor; default: the nearest ancestor onboarded from `repo`.
    pub base: Option<SnapshotId>,
    /// The branch to create; default `cairn/<first 12 hex of snapshot>`.
    pub branch: Option<&'a str>,
    /// The commit message; default the snapshot's.
    pub message: Option<&'a str>,
    /// Commit to the current branch and move index and working files with it.
    pub checkout: bool,
    /// Trailers (key, value) the commit message carries after `Cairn-Snapshot`, in order.
    pub trailers: &'a [(String, String)],
}

/// What a merge did.
#[derive(Debug, Clone)]
pub struct GitMerged {
    /// The base snapshot used.
    pub base: SnapshotId,
    /// The new commit and its branch; `None` when conflicts or dirty paths stopped it and
    /// nothing in the repository changed.
    pub commit: Option<(String, String)>,
    /// The conflicting paths and how (`content`, `add/add`, `modify/delete`, ...).
    pub conflicts: Vec<(Vec<u8>, String)>,
    /// With `checkout`: the paths it must change that have uncommitted changes.
    pub dirty: Vec<Vec<u8>>,
}

/// What to combine.
#[derive(Debug)]
pub struct GitCombine<'a> {
    /// The common ancestor's tree.
    pub base: TreeId,
    /// The trees whose changes against `base` are merged, in this order.
    pub inputs: &'a [TreeId],
}

/// What a combination made.
#[derive(Debug)]
pub struct GitCombined {
    /// The merged tree, when nothing conflicts; its new objects are in `objects`.
    pub tree: Option<TreeId>,
    /// The objects the merged tree needs that the store lacks, unwritten (nothing when
    /// conflicting): the caller writes them with what refers to them.
    pub objects: cas::WriteBatch,
    /// The conflicting paths, how (`content`, `add/add`, `modify/delete`, ...) and between
    /// which inputs (positions in `inputs`).
    pub conflicts: Vec<(Vec<u8>, String, Vec<usize>)>,
}

/// An interrupted `merge --checkout`, finished.
#[derive(Debug, Clone)]
pub struct GitRecovered {
    /// The work tree.
    pub workdir: Utf8PathBuf,
    /// The commit `HEAD` now names.
    pub commit: String,
    /// The paths made equal to the merge.
    pub paths: u64,
}

/// The refusal of an engine without a git backend, naming the repository.
pub(crate) fn no_git(repo: &Utf8Path) -> Error {
    NoGit {
        repo: repo.to_owned(),
    }
    .into()
}

/// The refusal of an engine opened without a git backend (code `no_git`).
#[derive(Debug, thiserror::Error)]
#[error("{repo}: this engine has no git support (it was opened without a git backend)")]
pub struct NoGit {
    /// The repository.
    pub repo: Utf8PathBuf,
}

crate::error::coded!(NoGit);

impl NoGit {
    /// Its code.
    pub fn code(&self) -> crate::error::Code {
        crate::error::Code::NoGit
    }
}

/// The operation name every intent journal carries, as `merge --checkout` writes it.
const MERGE_CHECKOUT: &str = "merge --checkout";

/// Without a backend: the directory at or above `dir` whose interrupted `merge --checkout`
/// awaits recovery, if any (only the header all journals share is read).
pub(crate) fn pending_merge(
    store: &cas::Store,
    dir: &Utf8Path,
) -> Result<Option<Utf8PathBuf>, Error> {
    #[derive(serde::Deserialize)]
    struct Header {
        op: String,
    }
    let canonical = std::fs::canonicalize(dir)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .unwrap_or_else(|| dir.to_owned());
    let reader = store.reader()?;
    for d in canonical.ancestors().chain(dir.ancestors()) {
        if let Some(bytes) = reader.journal(d)? {
            let merge =
                serde_json::from_slice::<Header>(&bytes).is_ok_and(|h| h.op == MERGE_CHECKOUT);
            return Ok(merge.then(|| d.to_owned()));
        }
    }
    Ok(None)
}
