//! `merge --checkout` as one step: before the first working file changes, an intent journal
//! goes into the store under the repository's work tree (the commit already written, every
//! path's new entry, the branch and the commit it must move from). A process killed part
//! way leaves the journal; [`recover_checkout`](crate::recover_checkout) finishes the step (files, index, branch, and
//! the lock and temporary files the dead process left), and until then cairn's commands on
//! that directory refuse, naming `cairn recover`.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Store, WriteBatch};
use gix::bstr::BString;
use gix::objs::tree::EntryKind;

use crate::worktree::Change;

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
    pub(crate) started: jiff::Timestamp,
    /// The work tree.
    pub(crate) workdir: Utf8PathBuf,
    /// The reference `HEAD` names (`HEAD` itself when detached).
    pub(crate) head_ref: String,
    /// The commit `HEAD` pointed at, and the merge commit it must point at.
    pub(crate) old: String,
    pub(crate) new: String,
    /// Every path that changes: its bytes and new entry (hex id and mode), none if deleted.
    changes: Vec<JournalChange>,
}

/// A journal entry that does not decode: the store's record was damaged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CorruptJournal {
    #[error("merge journal: {hex}: {source}")]
    Id { hex: String, source: gix::Error },
    #[error("merge journal: mode {mode:o}")]
    Mode { mode: u32 },
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
    pub(crate) fn decode(bytes: &[u8]) -> Option<CheckoutJournal> {
        serde_json::from_slice(bytes).ok()
    }

    pub(crate) fn changes(&self) -> Result<Vec<Change>, CorruptJournal> {
        self.changes
            .iter()
            .map(|c| {
                let new = match &c.new {
                    None => None,
                    Some((hex, mode)) => {
                        let id = gix::ObjectId::from_hex(hex.as_bytes()).map_err(|source| {
                            CorruptJournal::Id {
                                hex: hex.clone(),
                                source,
                            }
                        })?;
                        let kind = kind_of(*mode).ok_or(CorruptJournal::Mode { mode: *mode })?;
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

    /// Writes the journal: from here on, a kill is finished by
    /// [`recover_checkout`](crate::recover_checkout).
    pub(crate) fn begin(&self, store: &Store) -> Result<(), cas::StoreError> {
        let bytes = serde_json::to_vec(self).map_err(|e| {
            cas::StoreError::Write(cas::WriteError::Encode {
                what: format!("merge journal for {}", self.workdir),
                source: e,
            })
        })?;
        let mut batch = WriteBatch::new();
        batch.set_journal(&self.workdir, Some(bytes));
        store.write(&batch)?;
        Ok(())
    }

    /// Drops the journal: the step is complete.
    pub(crate) fn end(&self, store: &Store) -> Result<(), cas::StoreError> {
        let mut batch = WriteBatch::new();
        batch.set_journal(&self.workdir, None);
        store.write(&batch)?;
        Ok(())
    }
}

/// A `merge --checkout` of the work tree at `workdir` was interrupted: it must be recovered
/// before anything else runs there.
pub(crate) fn pending(
    store: &Store,
    workdir: &Utf8Path,
) -> Result<Option<String>, cas::StoreError> {
    let reader = store
        .reader()
        .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
    let found = reader
        .journal(workdir)
        .map_err(|e| cas::StoreError::from(cas::ReadError::from(e)))?;
    Ok(found.map(|bytes| match CheckoutJournal::decode(&bytes) {
        Some(j) => format!("an interrupted {} (started {})", j.op, j.started),
        None => "an interrupted cairn operation".to_owned(),
    }))
}
