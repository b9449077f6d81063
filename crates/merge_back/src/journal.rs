//! `merge --checkout` as one step: before the first working file changes, an intent journal
//! goes into the store under the repository's work tree (the commit already written, every
//! path's new entry, the branch and the commit it must move from). A process killed part
//! way leaves the journal; [`recover_checkout`] finishes the step (files, index, branch, and
//! the lock and temporary files the dead process left), and until then cairn's commands on
//! that directory refuse, naming `cairn recover`.

use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Store, WriteBatch};
use gix::bstr::BString;
use gix::objs::tree::EntryKind;
use gix::refs::transaction::{PreviousValue, RefEdit};

use crate::merge_snapshot::MergeSnapshotError;
use crate::worktree::{self, Change};

/// The command name the journal shows to other commands.
pub(crate) const OP: &str = "merge --checkout";

/// Tags the journal as this module's (the store's journal table is shared with worktree
/// operations, keyed by directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Kind {
    GitCheckout,
}

/// What the store holds while a `merge --checkout` is under way.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckoutJournal {
    kind: Kind,
    /// As every journal has: the command and when it started.
    op: String,
    started: jiff::Timestamp,
    /// The work tree.
    workdir: Utf8PathBuf,
    /// The reference `HEAD` names (`HEAD` itself when detached).
    head_ref: String,
    /// The commit `HEAD` pointed at, and the merge commit it must point at.
    old: String,
    new: String,
    /// Every path that changes: its bytes and new entry (hex id and mode), none if deleted.
    changes: Vec<JournalChange>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct JournalChange {
    path: Vec<u8>,
    new: Option<(String, u32)>,
}

fn mode_of(kind: EntryKind) -> u32 {
    match kind {
        EntryKind::Tree => 0o040000,
        EntryKind::Blob => 0o100644,
        EntryKind::BlobExecutable => 0o100755,
        EntryKind::Link => 0o120000,
        EntryKind::Commit => 0o160000,
    }
}

fn kind_of(mode: u32) -> Option<EntryKind> {
    Some(match mode {
        0o040000 => EntryKind::Tree,
        0o100644 => EntryKind::Blob,
        0o100755 => EntryKind::BlobExecutable,
        0o120000 => EntryKind::Link,
        0o160000 => EntryKind::Commit,
        _ => return None,
    })
}

impl CheckoutJournal {
    pub(crate) fn new(
        workdir: Utf8PathBuf,
        head_ref: String,
        old: gix::ObjectId,
        new: gix::ObjectId,
        changes: &[Change],
    ) -> CheckoutJournal {
        CheckoutJournal {
            kind: Kind::GitCheckout,
            op: OP.to_owned(),
            started: jiff::Timestamp::now(),
            workdir,
            head_ref,
            old: old.to_string(),
            new: new.to_string(),
            changes: changes
                .iter()
                .map(|c| JournalChange {
                    path: c.path.to_vec(),
                    new: c.new.map(|(id, kind)| (id.to_string(), mode_of(kind))),
                })
                .collect(),
        }
    }

    /// The journal in `bytes`, if it is one of a `merge --checkout`.
    fn decode(bytes: &[u8]) -> Option<CheckoutJournal> {
        serde_json::from_slice(bytes).ok()
    }

    fn changes(&self) -> Result<Vec<Change>, String> {
        self.changes
            .iter()
            .map(|c| {
                let new = match &c.new {
                    None => None,
                    Some((hex, mode)) => {
                        let id = gix::ObjectId::from_hex(hex.as_bytes())
                            .map_err(|e| format!("{hex}: {e}"))?;
                        let kind = kind_of(*mode).ok_or_else(|| format!("mode {mode:o}"))?;
                        Some((id, kind))
                    }
                };
                Ok(Change {
                    path: BString::from(c.path.clone()),
                    old: None,
                    new,
                })
            })
            .collect()
    }

    /// Writes the journal: from here on, a kill is finished by [`recover_checkout`].
    pub(crate) fn begin(&self, store: &Store) -> Result<(), cas::Error> {
        let bytes = serde_json::to_vec(self).map_err(|e| {
            cas::Error::Write(cas::WriteError::Encode {
                what: format!("merge journal for {}", self.workdir),
                reason: e.to_string(),
            })
        })?;
        let mut batch = WriteBatch::new();
        batch.set_journal(&self.workdir, Some(bytes));
        store.write(&batch)?;
        Ok(())
    }

    /// Drops the journal: the step is complete.
    pub(crate) fn end(&self, store: &Store) -> Result<(), cas::Error> {
        let mut batch = WriteBatch::new();
        batch.set_journal(&self.workdir, None);
        store.write(&batch)?;
        Ok(())
    }
}

/// A `merge --checkout` of the work tree at `workdir` was interrupted: it must be recovered
/// before anything else runs there.
pub(crate) fn pending(store: &Store, workdir: &Utf8Path) -> Result<Option<String>, cas::Error> {
    let reader = store
        .reader()
        .map_err(|e| cas::Error::from(cas::ReadError::from(e)))?;
    let found = reader
        .journal(workdir)
        .map_err(|e| cas::Error::from(cas::ReadError::from(e)))?;
    Ok(found.map(|bytes| match CheckoutJournal::decode(&bytes) {
        Some(j) => format!("an interrupted {} (started {})", j.op, j.started),
        None => "an interrupted cairn operation".to_owned(),
    }))
}

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
        .map_err(|e| cas::Error::from(cas::ReadError::from(e)))?;
    let mut found = None;
    for dir in canonical.ancestors().chain(path.ancestors()) {
        let bytes = reader
            .journal(dir)
            .map_err(|e| cas::Error::from(cas::ReadError::from(e)))?;
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
    let fail = |message: String| MergeSnapshotError::Git {
        path: workdir.clone(),
        message,
    };
    let changes = journal
        .changes()
        .map_err(|e| fail(format!("merge journal: {e}")))?;
    let repo =
        gix::open(workdir.as_std_path()).map_err(|e| MergeSnapshotError::NotARepository {
            path: workdir.clone(),
            message: e.to_string(),
        })?;
    let old = gix::ObjectId::from_hex(journal.old.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let new = gix::ObjectId::from_hex(journal.new.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let head = repo.head_id().map_err(|e| fail(e.to_string()))?.detach();
    if head != old && head != new {
        return Err(fail(format!(
            "HEAD moved to {head} since the interrupted merge --checkout (from {old} to {new}); nothing was changed: move HEAD back to {old} and run `cairn recover` again"
        )));
    }
    let started = std::time::SystemTime::from(journal.started);
    // Lock files the dead process held: only those made after it started are its own.
    let git_dir = repo.git_dir().to_owned();
    remove_lock(&git_dir.join("index.lock"), started);
    remove_lock(&git_dir.join("HEAD.lock"), started);
    if journal.head_ref != "HEAD" {
        remove_lock(&git_dir.join(format!("{}.lock", journal.head_ref)), started);
    }
    let root = path_policy::Root::open(workdir.as_std_path()).map_err(|e| fail(e.to_string()))?;
    worktree::remove_temporaries(&root, &changes);
    drop(root);
    let index = repo.index_or_empty().map_err(|e| fail(e.to_string()))?;
    let index: gix::index::File = (**index).clone();
    worktree::apply(&repo, workdir.as_std_path(), index, &changes)
        .map_err(|e| fail(e.to_string()))?;

    if head == old {
        let name: gix::refs::FullName = "HEAD"
            .try_into()
            .map_err(|e: gix::validate::reference::name::Error| fail(e.to_string()))?;
        let mut edit = RefEdit::update(
            name,
            new,
            PreviousValue::MustExistAndMatch(gix::refs::Target::Object(old)),
            format!("cairn recover: finish merge --checkout {new}"),
        );
        edit.deref = true;
        let committer = crate::merge_snapshot::signature(&repo, false);
        let mut time = gix::date::parse::TimeBuf::default();
        repo.edit_references_as([edit], Some(committer.to_ref(&mut time)))
            .map_err(|e| fail(e.to_string()))?;
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
