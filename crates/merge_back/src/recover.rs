//! Finishing a `merge --checkout` that a killed process left half done, from its journal.

use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use cas::Store;
use gix::refs::transaction::{PreviousValue, RefEdit};

use crate::git::BoxError;
use crate::git::signature;
use crate::journal::CheckoutJournal;
use crate::snapshot_error::{MergeSnapshotError, Refusal};
use crate::worktree;

/// What [`recover_checkout`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredCheckout {
    /// The work tree.
    pub workdir: Utf8PathBuf,
    /// The commit `HEAD` now names.
    pub commit: String,
    /// The paths made equal to the merge.
    pub paths: u64,
}

/// Finishes an interrupted `merge --checkout` of the repository at or above `path`, if
/// there is one: lock and temporary files the dead process left are removed, every path it
/// was changing is made equal to the merge, the index entries are replaced, and `HEAD`'s
/// branch moves to the merge commit (only from the commit it was on). `None` if no such
/// step is pending there.
pub fn recover_checkout(
    store: &Store,
    path: &Utf8Path,
) -> Result<Option<RecoveredCheckout>, MergeSnapshotError> {
    let canonical = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .unwrap_or_else(|| path.to_owned());
    let reader = store
        .reader()
        .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
    let mut found = None;
    for dir in canonical.ancestors().chain(path.ancestors()) {
        let bytes = reader
            .journal(dir)
            .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
        if let Some(bytes) = bytes {
            found = CheckoutJournal::decode(&bytes);
            break;
        }
    }
    drop(reader);
    let Some(journal) = found else {
        return Ok(None);
    };
    let workdir = journal.workdir.clone();
    let fail = |source: BoxError| MergeSnapshotError::Git {
        path: workdir.clone(),
        source,
    };
    let changes = journal.changes().map_err(|e| fail(e.into()))?;
    let repo =
        gix::open(workdir.as_std_path()).map_err(|e| MergeSnapshotError::NotARepository {
            path: workdir.clone(),
            source: e.into(),
        })?;
    let old = gix::ObjectId::from_hex(journal.old.as_bytes()).map_err(|e| fail(e.into()))?;
    let new = gix::ObjectId::from_hex(journal.new.as_bytes()).map_err(|e| fail(e.into()))?;
    let head = repo.head_id().map_err(|e| fail(e.into()))?.detach();
    if head != old && head != new {
        return Err(fail(Refusal::HeadMoved { head, old, new }.into()));
    }
    let started = std::time::SystemTime::from(journal.started);
    // Lock files the dead process held: only those made after it started are its own.
    let git_dir = repo.git_dir().to_owned();
    remove_lock(&git_dir.join("index.lock"), started);
    remove_lock(&git_dir.join("HEAD.lock"), started);
    if journal.head_ref != "HEAD" {
        remove_lock(&git_dir.join(format!("{}.lock", journal.head_ref)), started);
    }
    let root = path_policy::Root::open(workdir.as_std_path()).map_err(|e| fail(e.into()))?;
    worktree::remove_temporaries(&root, &changes);
    drop(root);
    let index = repo.index_or_empty().map_err(|e| fail(e.into()))?;
    let index: gix::index::File = (**index).clone();
    worktree::apply(&repo, workdir.as_std_path(), index, &changes).map_err(fail)?;

    if head == old {
        let name: gix::refs::FullName = "HEAD"
            .try_into()
            .map_err(|e: gix::validate::reference::name::Error| fail(e.into()))?;
        let mut edit = RefEdit::update(
            name,
            new,
            PreviousValue::MustExistAndMatch(gix::refs::Target::Object(old)),
            format!("cairn recover: finish merge --checkout {new}"),
        );
        edit.deref = true;
        let committer = signature(&repo, false);
        let mut time = gix::date::parse::TimeBuf::default();
        repo.edit_references_as([edit], Some(committer.to_ref(&mut time)))
            .map_err(|e| fail(e.into()))?;
    }
    journal.end(store)?;
    Ok(Some(RecoveredCheckout {
        workdir,
        commit: new.to_string(),
        paths: changes.len() as u64,
    }))
}

fn remove_lock(lock: &Path, started: std::time::SystemTime) {
    let ours = lock
        .symlink_metadata()
        .and_then(|m| m.modified())
        .is_ok_and(|t| t >= started - std::time::Duration::from_secs(1));
    if ours {
        let _ = std::fs::remove_file(lock);
    }
}
