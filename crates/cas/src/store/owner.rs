//! [`SideOwner`]: what `gc` and `fsck` ask of the layers that keep side tables.

use super::error::BoxError;
use super::reader::Reader;
use super::side::SideKey;
use crate::id::SnapshotId;

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
    /// Snapshots to keep, with their ancestry, trees and blobs.
    pub snapshots: Vec<SnapshotId>,
    /// Entries to delete (for example op-log entries past their age).
    pub drop: Vec<SideKey>,
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
}
