//! Where a directory's git repository stands: the commit `HEAD` names, and whether tracked
//! files moved on from it.

use camino::{Utf8Path, Utf8PathBuf};

use crate::git::BoxError;

/// Where a repository's `HEAD` stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadState {
    /// The commit `HEAD` resolves to, as hex; `None` on an unborn branch.
    pub commit: Option<String>,
    /// Whether tracked files differ from `HEAD`, staged or not (untracked files do not
    /// count, as with `git describe --dirty`).
    pub dirty: bool,
}

/// Reading a repository's state failed.
#[derive(Debug, thiserror::Error)]
#[error("git repository {path}: {source}")]
pub struct GitStateError {
    /// The repository.
    pub path: Utf8PathBuf,
    /// What gitoxide reported.
    pub source: BoxError,
}

/// The commit `dir`'s files come from, for a snapshot's source: `None` when `dir` is not
/// the top of a git work tree, its HEAD is unborn, or gitoxide cannot read it (a stub, a
/// damaged repository: the files are the truth, git's view is provenance, so this never
/// stops a capture).
pub fn git_source(dir: &Utf8Path) -> Option<cas::GitSource> {
    let state = git_state(dir).unwrap_or_else(|e| {
        tracing::warn!("{e}; recording no git source");
        None
    })?;
    Some(cas::GitSource {
        commit: state.commit?,
        dirty: state.dirty,
    })
}

/// The git state of `dir` if it is the top of a git work tree (holds `.git`), else `None`.
pub fn git_state(dir: &Utf8Path) -> Result<Option<HeadState>, GitStateError> {
    if !dir.join(".git").exists() {
        return Ok(None);
    }
    let fail = |source: BoxError| GitStateError {
        path: dir.to_owned(),
        source,
    };
    let repo = gix::open(dir.as_std_path()).map_err(|e| fail(e.into()))?;
    let commit = repo.head_id().ok().map(|id| id.to_string());
    let dirty = repo.is_dirty().map_err(|e| fail(e.into()))?;
    Ok(Some(HeadState { commit, dirty }))
}
