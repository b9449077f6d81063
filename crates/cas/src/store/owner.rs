//! [`SideOwner`]: what `gc` and `fsck` ask of the layers that keep side tables.

use super::error::BoxError;
use super::reader::Reader;
use super::side::{Rewrite, SideKey};
use crate::id::{SnapshotId, TreeId};

/// One thing `fsck` found wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// What it is about: `blob`, `tree`, `snapshot`, `ref`, a kind of record of a side-table
    /// owner (`worktree`, `op`), or `store` for a part of the database that could not be read.
    pub kind: &'static str,
    /// The id, ref name, worktree path, or for `store` the table.
    pub name: String,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// A problem of `kind` about `name`.
    pub fn new(kind: &'static str, name: impl ToString, message: impl ToString) -> Problem {
        Problem {
            kind,
            name: name.to_string(),
            message: message.to_string(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.name, self.message)
    }
}

/// What an owner's check of its records found.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// Records checked.
    pub references: u64,
    /// What is wrong with them.
    pub problems: Vec<Problem>,
}

/// What the owners of side tables keep alive, and which of their entries `gc` drops in the
/// same transaction as the objects it removes.
#[derive(Debug, Clone, Default)]
pub struct Roots {
    /// Snapshots to keep, with their ancestry, trees and blobs; under a size budget they
    /// count as kept by the owner itself (its [`SideOwner::name`]).
    pub snapshots: Vec<SnapshotId>,
    /// Snapshots to keep whatever a size budget says, each with what keeps it.
    pub kept: Vec<(SnapshotId, Keeper)>,
    /// Entries that keep their snapshots unless a size budget drops them, oldest first.
    pub history: Vec<HistoryEntry>,
    /// Entries kept like [`Roots::history`] without a size budget; under one, dropped
    /// before any history, least recent first (the dependency layers no worktree uses).
    pub spare: Vec<HistoryEntry>,
    /// Trees to keep, with what they reach, whatever a size budget says (a worktree's
    /// dependency layers as written for its root). `retained` does not list them.
    pub trees: Vec<TreeId>,
    /// Entries to delete (for example op-log entries past their age).
    pub drop: Vec<SideKey>,
}

impl Roots {
    /// Keeps `snapshot` whatever a size budget says, because of `keeper`.
    pub fn keep(&mut self, snapshot: SnapshotId, keeper: Keeper) {
        self.kept.push((snapshot, keeper));
    }
}

/// What keeps a snapshot that a size budget may not drop: a ref, a worktree's head, a named
/// checkpoint, a task baseline, the change `undo` would revert, a recent op-log entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Keeper {
    /// `ref`, `remote ref`, `worktree head`, `named checkpoint`, `checkpoint` (unnamed,
    /// recent), `task baseline`, `mount base`, `undo` (the op-log entry `undo` would revert),
    /// `recent op`, or an owner's name.
    pub reason: &'static str,
    /// The ref, remote ref or checkpoint name, or the op-log entry (`#SEQ`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The worktree it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
}

impl Keeper {
    /// A keeper with only a reason.
    pub fn new(reason: &'static str) -> Keeper {
        Keeper {
            reason,
            name: None,
            worktree: None,
        }
    }

    /// With `name`.
    pub fn named(mut self, name: impl Into<String>) -> Keeper {
        self.name = Some(name.into());
        self
    }

    /// Of `worktree`.
    pub fn of(mut self, worktree: impl Into<String>) -> Keeper {
        self.worktree = Some(worktree.into());
        self
    }
}

/// A side entry, or a part of one, that keeps snapshots alive as history: without a size
/// budget it keeps them (with their ancestry) like [`Roots::snapshots`]; under one, `gc`
/// keeps entries newest first while what they add fits. Of each one it drops, it deletes
/// the entry (`key`), or for a part (`part`) writes what the owner's
/// [`SideOwner::forget`] makes of the entry without it.
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    /// When it was made; the budget drops the oldest first.
    pub time: jiff::Timestamp,
    /// The snapshots it names.
    pub snapshots: Vec<SnapshotId>,
    /// The entry, or the entry it is a part of.
    pub key: SideKey,
    /// Which part of the entry it is, in the owner's words; `None`: the whole entry.
    pub part: Option<String>,
}

/// A layer that keeps records in side tables. `gc` and `fsck` ask every owner they are
/// given; a record of an owner not asked keeps nothing alive.
pub trait SideOwner {
    /// Adds to `roots` what its records keep alive as of `reader`, and what `gc` should
    /// drop. An error stops `gc` before anything is removed.
    fn roots(&self, reader: &Reader, roots: &mut Roots) -> Result<(), BoxError>;

    /// Checks its records as `fsck` does: counts them, and says what is wrong with them.
    /// An error is reported as a problem of the owner.
    fn check(&self, reader: &Reader) -> Result<Checked, BoxError>;

    /// Its name, for reports.
    fn name(&self) -> &'static str;

    /// What its entries become without the `parts` (history entries with a
    /// [`HistoryEntry::part`]) a size budget dropped: each entry's new value, or `None` to
    /// delete it. Written in `gc`'s transaction. Owners that give no parts need not say.
    fn forget(&self, reader: &Reader, parts: &[HistoryEntry]) -> Result<Vec<Rewrite>, BoxError> {
        let _ = (reader, parts);
        Ok(Vec::new())
    }
}
