//! [`Held`]: one registered worktree, held for one operation.

use camino::{Utf8Path, Utf8PathBuf};
use cas::Store;
use worktree_registry::RegistryRead;
use worktree_registry::WorktreeRecord;

use crate::error::{CaptureError, RollbackError};
use crate::journal::{JournalCheck, ensure_clear, pending_at};
use crate::kept::Kept;
use crate::lock::WorktreeLock;
use crate::root::verify_root;

/// A registered worktree held by this process for one operation (as jj's
/// `LockedWorkingCopy`): found, locked, its record read again once the lock was ours (another
/// operation may just have changed it), its root still the directory registered, and no
/// interrupted step pending in it. Released on drop.
pub struct Held<'a> {
    _lock: WorktreeLock<'a>,
    /// The record as the store holds it now.
    pub record: WorktreeRecord,
}

/// Why [`hold`] refused.
#[derive(Debug)]
pub enum HoldError {
    /// No registered worktree holds the path.
    NotAWorktree {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// An earlier operation on the worktree was interrupted.
    Interrupted(crate::journal::Interrupted),
    /// The worktree's root is not the directory registered.
    RootChanged(crate::root::RootChanged),
    /// The worktree is, lies inside or holds the store's folder.
    Apart(worktree_registry::apart::StoreOverlap),
    /// The store failed.
    Store(cas::StoreError),
    /// A registry record could not be read or written.
    Registry(worktree_registry::RegistryError),
}

impl From<cas::StorageFailure> for HoldError {
    fn from(e: cas::StorageFailure) -> Self {
        HoldError::Store(cas::ReadError::from(e).into())
    }
}

impl From<worktree_registry::RegistryError> for HoldError {
    fn from(e: worktree_registry::RegistryError) -> Self {
        HoldError::Registry(e)
    }
}

impl From<crate::root::RootChanged> for HoldError {
    fn from(e: crate::root::RootChanged) -> Self {
        HoldError::RootChanged(e)
    }
}

impl From<worktree_registry::apart::StoreOverlap> for HoldError {
    fn from(e: worktree_registry::apart::StoreOverlap) -> Self {
        HoldError::Apart(e)
    }
}

impl From<JournalCheck> for HoldError {
    fn from(e: JournalCheck) -> Self {
        match e {
            JournalCheck::Interrupted(i) => HoldError::Interrupted(i),
            JournalCheck::Store(e) => HoldError::Store(e),
            JournalCheck::Registry(e) => HoldError::Registry(e),
        }
    }
}

/// Holds the registered worktree at or above `path` (see [`Held`]). For a path no
/// worktree holds, an interrupted step pending there (a checkout's) is reported first.
pub fn hold<'a>(ws: &'a Kept, store: &Store, path: &Utf8Path) -> Result<Held<'a>, HoldError> {
    let reader = store.reader()?;
    let Some(found) = crate::records::find(&reader, path)? else {
        pending_at(ws, &reader, path)?;
        return Err(HoldError::NotAWorktree {
            path: path.to_owned(),
        });
    };
    drop(reader);
    let lock = ws.locks.lock(&found.root);
    let reader = store.reader()?;
    let mut record = reader.worktree(&found.root)?.unwrap_or(found);
    verify_root::<HoldError>(&mut record, store)?;
    ensure_clear(&reader, &record.root)?;
    Ok(Held {
        _lock: lock,
        record,
    })
}

impl From<HoldError> for CaptureError {
    fn from(e: HoldError) -> Self {
        use HoldError::*;
        match e {
            NotAWorktree { path } => CaptureError::NotAWorktree { path },
            Interrupted(i) => CaptureError::Interrupted(i),
            RootChanged(r) => CaptureError::RootChanged(r),
            Apart(a) => CaptureError::StoreOverlap(a),
            Store(e) => CaptureError::Store(e),
            Registry(e) => CaptureError::Registry(e),
        }
    }
}

impl From<HoldError> for RollbackError {
    fn from(e: HoldError) -> Self {
        match e {
            HoldError::NotAWorktree { path } => RollbackError::NotAWorktree { path },
            other => RollbackError::Capture(other.into()),
        }
    }
}
