//! Several snapshots' changes merged into one tree, inside the store: `cairn combine`.

use cas::{Store, TreeId, WriteBatch};

use crate::export::{ExportError, Exported, export_objects};
use crate::git::BoxError;
use crate::import::{TreeImport, TreeImportError, store_tree};
use crate::merge::{ConflictKind, MergeError, merge_trees_in};

/// One conflicting path of a combination, and which inputs it is between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputConflict {
    /// The path, as git names it.
    pub path: Vec<u8>,
    /// What kind of conflict, as `merge` reports it.
    pub kind: ConflictKind,
    /// The inputs (their positions in the list given) that changed the path against the
    /// base, among those merged when it conflicted; always at least the one being merged.
    pub inputs: Vec<usize>,
}

/// What [`combine_trees`] made.
#[derive(Debug)]
pub struct CombinedTrees {
    /// The merged tree, when nothing conflicts; its new trees and blobs are in `objects`.
    pub tree: Option<TreeId>,
    /// The objects the merged tree needs that the store lacks (nothing when conflicting),
    /// for the caller to write with what refers to them. Past 64 MiB some were written
    /// already, unreferenced until then (gc collects them if the caller writes nothing).
    pub objects: WriteBatch,
    /// Every conflict, sorted by path.
    pub conflicts: Vec<InputConflict>,
}

/// Combining failed (as opposed to producing conflicts); nothing was recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CombineTreesError {
    /// The private object database the merge runs in could not be made.
    #[error("combine: making the scratch object database in the temporary folder: {source}")]
    Scratch {
        /// Why.
        source: BoxError,
    },
    /// Handing a snapshot's tree to git failed.
    #[error("combine: {0}")]
    Export(#[from] ExportError),
    /// The merge itself failed.
    #[error("combine: {0}")]
    Merge(#[from] MergeError),
    /// Reading the merged tree back failed.
    #[error("combine: reading the merged tree: {source}")]
    Git {
        /// What gitoxide said.
        source: BoxError,
    },
    /// The merged tree holds a name cairn refuses (no input held it).
    #[error("combine: the merged tree has a path cairn refuses: {name}: {reason}")]
    Refused {
        /// The offending path.
        name: String,
        /// The rule.
        #[source]
        reason: cas::ObjectError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cas::StoreError),
}

/// Three-way merges the changes of every tree of `inputs` against `base` into one tree, with
/// git's rules (gitoxide's tree and blob merge, its rename detection and its notion of what
/// is unresolved), one input after the other onto the running result, each against `base`:
/// with three inputs, `inputs[2]` is merged into the merge of `inputs[0]` and `inputs[1]`.
/// An input that conflicts is left out of the running result and the later ones are still
/// merged, so every conflict is reported at once. Equal changes on two sides agree.
///
/// The merge runs in a scratch object database held in memory: its repository folder holds
/// only git's skeleton (no object), in the temporary folder (`$TMPDIR`), removed afterwards;
/// a skeleton a killed process left (`cairn-combine-PID-*`) is removed by the next
/// combination ([`scratch_dir`]). No git repository, worktree or store record changes. A clean result comes back as objects to
/// write, reusing every tree and blob of the inputs as it is, so modes, symlinks and empty
/// files survive.
pub fn combine_trees(
    store: &Store,
    base: TreeId,
    inputs: &[TreeId],
) -> Result<CombinedTrees, CombineTreesError> {
    let scratch = scratch_dir().map_err(|e| CombineTreesError::Scratch { source: e.into() })?;
    let path = camino::Utf8PathBuf::from_path_buf(scratch.path().to_owned()).map_err(|p| {
        CombineTreesError::Scratch {
            source: format!("{}: not UTF-8", p.display()).into(),
        }
    })?;
    let repo = gix::init_bare(&path)
        .map_err(|e| CombineTreesError::Scratch { source: e.into() })?
        .with_object_memory();

    let mut memo = Exported::default();
    let mut export = |tree: TreeId| -> Result<gix::ObjectId, CombineTreesError> {
        // The git ids learned are not kept: they name objects of this scratch database.
        let (out, _git_ids) = export_objects(store, &repo, &path, tree, &mut memo)?;
        gix::ObjectId::from_hex(out.tree.as_bytes())
            .map_err(|e| CombineTreesError::Git { source: e.into() })
    };
    let base_git = export(base)?;
    let input_git = inputs
        .iter()
        .map(|&t| export(t))
        .collect::<Result<Vec<_>, _>>()?;

    let mut conflicts: Vec<InputConflict> = Vec::new();
    let (mut merged, mut running) = (Vec::new(), None);
    for (i, &theirs) in input_git.iter().enumerate() {
        let Some(ours) = running else {
            (running, merged) = (Some(theirs), vec![i]);
            continue;
        };
        let out = merge_trees_in(
            &repo,
            &path,
            &base_git.to_string(),
            &ours.to_string(),
            &theirs.to_string(),
        )?;
        match out.tree {
            Some(tree) => {
                let tree = gix::ObjectId::from_hex(tree.as_bytes())
                    .map_err(|e| CombineTreesError::Git { source: e.into() })?;
                running = Some(tree);
                merged.push(i);
            }
            None => {
                for c in out.conflicts {
                    let mut who = Vec::new();
                    for &j in merged.iter().chain([&i]) {
                        if changes(&repo, base_git, input_git[j], &c.path)? {
                            who.push(j);
                        }
                    }
                    if !who.contains(&i) {
                        who.push(i);
                    }
                    match conflicts
                        .iter_mut()
                        .find(|k| k.path == c.path && k.kind == c.kind)
                    {
                        Some(known) => {
                            known.inputs.extend(who);
                            known.inputs.sort_unstable();
                            known.inputs.dedup();
                        }
                        None => conflicts.push(InputConflict {
                            path: c.path,
                            kind: c.kind,
                            inputs: who,
                        }),
                    }
                }
            }
        }
    }
    conflicts.sort_by(|a, b| (&a.path, a.kind).cmp(&(&b.path, b.kind)));
    let mut objects = WriteBatch::new();
    let Some(result) = running.filter(|_| conflicts.is_empty()) else {
        return Ok(CombinedTrees {
            tree: None,
            objects,
            conflicts,
        });
    };
    let nothing_denied = path_policy::DenyList::nothing();
    let how = TreeImport {
        deny: &nothing_denied,
        known: &|oid| memo.stored_as(oid),
    };
    let stored = store_tree(store, &repo, result, &how, &mut objects).map_err(|e| match e {
        TreeImportError::Git(source) => CombineTreesError::Git { source },
        TreeImportError::Refused { name, reason } => CombineTreesError::Refused {
            name: String::from_utf8_lossy(&name).into_owned(),
            reason,
        },
        TreeImportError::Store(e) => CombineTreesError::Store(e),
    })?;
    Ok(CombinedTrees {
        tree: Some(stored.root),
        objects,
        conflicts,
    })
}

/// What the scratch folders' names start with, before the process id.
const SCRATCH_PREFIX: &str = "cairn-combine-";

/// A new scratch folder in `$TMPDIR`, `cairn-combine-PID-…`, after removing those of this
/// user's processes that are gone: gix needs a repository folder (even for objects held in
/// memory), and a process killed while merging cannot remove its own.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let made = tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
        .tempdir()?;
    remove_stale_scratch(made.path());
    Ok(made)
}

/// Removes the scratch folders beside `ours` whose process is gone, if this user's.
fn remove_stale_scratch(ours: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let (Some(tmp), Ok(own)) = (ours.parent(), ours.symlink_metadata()) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        // Not a link, and not another user's.
        let mine = path
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == own.uid());
        if mine && let Err(e) = std::fs::remove_dir_all(&path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a stale combine scratch folder");
        }
    }
}

/// Whether the git tree `side` holds something else at `path` than `base` does (a deletion
/// or an addition included).
fn changes(
    repo: &gix::Repository,
    base: gix::ObjectId,
    side: gix::ObjectId,
    path: &[u8],
) -> Result<bool, CombineTreesError> {
    use std::os::unix::ffi::OsStrExt;
    let at = |tree: gix::ObjectId| -> Result<Option<(gix::objs::tree::EntryMode, gix::ObjectId)>, CombineTreesError> {
        let git_err = |e: BoxError| CombineTreesError::Git { source: e };
        let tree = repo.find_tree(tree).map_err(|e| git_err(e.into()))?;
        let entry = tree
            .lookup_entry_by_path(std::ffi::OsStr::from_bytes(path))
            .map_err(|e| git_err(e.into()))?;
        Ok(entry.map(|e| (e.mode(), e.object_id())))
    };
    Ok(at(base)? != at(side)?)
}
