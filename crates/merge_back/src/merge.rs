//! The three-way merge of git trees, with conflicts reported by kind.

use camino::{Utf8Path, Utf8PathBuf};

use crate::git::BoxError;

/// How a path conflicts, as `cairn merge` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum ConflictKind {
    /// Both sides changed the same lines of a text file.
    #[serde(rename = "content")]
    Content,
    /// Both sides added the path with different content.
    #[serde(rename = "add/add")]
    AddAdd,
    /// One side changed the path, the other deleted it.
    #[serde(rename = "modify/delete")]
    ModifyDelete,
    /// Renames that cannot both hold.
    #[serde(rename = "rename")]
    Rename,
    /// The path is a different kind of thing on each side (file, directory, link, submodule).
    #[serde(rename = "type")]
    Type,
    /// Both sides changed a binary file.
    #[serde(rename = "binary")]
    Binary,
}

/// One conflicting path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflict {
    /// The path, as git names it.
    pub path: Vec<u8>,
    /// What kind of conflict.
    pub kind: ConflictKind,
}

/// The merge of three trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeMerge {
    /// The merged tree, written to the repository, if nothing is left unresolved.
    pub tree: Option<String>,
    /// Every unresolved conflict, sorted by path.
    pub conflicts: Vec<MergeConflict>,
}

/// Merging failed (as opposed to producing conflicts).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// The path is not a git repository.
    #[error("{path}: not a git repository ({source})")]
    NotARepository {
        /// The path given.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
    },
    /// Reading or writing the repository failed.
    #[error("{path}: {source}")]
    Git {
        /// The repository.
        path: Utf8PathBuf,
        /// What gitoxide said.
        source: BoxError,
    },
}

/// Git's rule for binary content: a NUL in the first 8000 bytes.
fn is_binary(repo: &gix::Repository, id: Option<gix::ObjectId>) -> bool {
    id.and_then(|id| repo.find_object(id).ok())
        .is_some_and(|o| o.data[..o.data.len().min(8000)].contains(&0))
}

/// Merges `theirs` into `ours` with `base` as the common ancestor (git tree ids, hex), in the
/// repository at `repo_path`, with git's rename detection and its notion of what is
/// unresolved. A clean merge writes the merged tree (only objects: no ref, index or file of
/// the repository changes either way).
pub fn merge_trees(
    repo_path: &Utf8Path,
    base: &str,
    ours: &str,
    theirs: &str,
) -> Result<TreeMerge, MergeError> {
    let repo = gix::open(repo_path.as_std_path()).map_err(|e| MergeError::NotARepository {
        path: repo_path.to_owned(),
        source: e.into(),
    })?;
    merge_trees_in(&repo, repo_path, base, ours, theirs)
}

/// [`merge_trees`] in an open repository (`repo_path` names it in errors).
pub(crate) fn merge_trees_in(
    repo: &gix::Repository,
    repo_path: &Utf8Path,
    base: &str,
    ours: &str,
    theirs: &str,
) -> Result<TreeMerge, MergeError> {
    let git_err = |source: BoxError| MergeError::Git {
        path: repo_path.to_owned(),
        source,
    };
    let id = |hex: &str| gix::ObjectId::from_hex(hex.as_bytes()).map_err(|e| git_err(e.into()));
    let (base, ours, theirs) = (id(base)?, id(ours)?, id(theirs)?);
    let options = repo.tree_merge_options().map_err(|e| git_err(e.into()))?;
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: Some("base".into()),
        current: Some("ours".into()),
        other: Some("theirs".into()),
    };
    let mut outcome = repo
        .merge_trees(base, ours, theirs, labels, options)
        .map_err(|e| git_err(e.into()))?;
    let how = gix::merge::tree::TreatAsUnresolved::git();
    use gix::merge::tree::{Resolution as R, ResolutionFailure as F};
    let mut conflicts = Vec::new();
    for c in outcome.conflicts.iter().filter(|c| c.is_unresolved(how)) {
        let [base_entry, ours_entry, theirs_entry] = c.entries();
        let kind = match &c.resolution {
            Err(F::OursModifiedTheirsDeleted | F::OursDeletedTheirsRenamed) => {
                ConflictKind::ModifyDelete
            }
            Err(
                F::OursAddedTheirsAddedTypeMismatch { .. }
                | F::OursModifiedTheirsRenamedTypeMismatch
                | F::OursModifiedTheirsDirectoryThenOursRenamed { .. }
                | F::OursDirectoryTheirsNonDirectoryTheirsRenamed { .. }
                | F::SubmoduleMerge
                | F::SubmoduleAddAdd,
            ) => ConflictKind::Type,
            Err(
                F::OursRenamedTheirsRenamedToSameLocation
                | F::OursRenamedTheirsRenamedDifferently { .. },
            ) => ConflictKind::Rename,
            Ok(
                R::SourceLocationAffectedByRename { .. }
                | R::OursModifiedTheirsRenamedAndChangedThenRename { .. },
            ) => ConflictKind::Rename,
            _ if is_binary(repo, ours_entry.map(|e| e.id))
                || is_binary(repo, theirs_entry.map(|e| e.id)) =>
            {
                ConflictKind::Binary
            }
            _ if base_entry.is_none() => ConflictKind::AddAdd,
            _ => ConflictKind::Content,
        };
        let (ours_change, _) = c.changes_in_resolution();
        conflicts.push(MergeConflict {
            path: ours_change.location().to_vec(),
            kind,
        });
    }
    conflicts.sort_by(|a, b| a.path.cmp(&b.path));
    conflicts.dedup();
    if !conflicts.is_empty() {
        return Ok(TreeMerge {
            tree: None,
            conflicts,
        });
    }
    let tree = outcome
        .tree
        .write()
        .map_err(|e| git_err(e.into()))?
        .detach();
    Ok(TreeMerge {
        tree: Some(tree.to_string()),
        conflicts,
    })
}
