//! Worktree registry and op-log records. Stored as JSON so later fields can be added with
//! defaults without a format change.

use camino::{Utf8Path, Utf8PathBuf};

use super::error::RegistryError;
use crate::id::SnapshotId;

/// How a worktree came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeKind {
    /// A user's directory, onboarded where it is.
    InPlace,
    /// A directory hydrated by `checkout`.
    Isolated,
}

/// A registered worktree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorktreeRecord {
    /// Absolute path of the worktree root.
    pub root: Utf8PathBuf,
    /// How it was created.
    pub kind: WorktreeKind,
    /// Its current snapshot.
    pub head: Option<SnapshotId>,
    /// Whether deny-pattern paths (secrets) are in scope for it.
    #[serde(default)]
    pub include_denied: bool,
    /// When it was registered.
    pub created: jiff::Timestamp,
}

/// One entry of a worktree's op log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpRecord {
    /// Position in the worktree's log, from 1; assigned by the store.
    #[serde(default)]
    pub seq: u64,
    /// When it ran.
    pub time: jiff::Timestamp,
    /// The command (`snapshot`, `checkout`, `rollback`, ...).
    pub op: String,
    /// The worktree's recorded state before.
    pub before: Option<SnapshotId>,
    /// The worktree's recorded state after.
    pub after: Option<SnapshotId>,
}

impl OpRecord {
    /// A new entry for `op`, timed now.
    pub fn new(op: &str, before: Option<SnapshotId>, after: Option<SnapshotId>) -> OpRecord {
        OpRecord {
            seq: 0,
            time: jiff::Timestamp::now(),
            op: op.to_owned(),
            before,
            after,
        }
    }

    /// Every snapshot the entry references.
    pub fn snapshots(&self) -> impl Iterator<Item = SnapshotId> + '_ {
        self.before.iter().chain(self.after.iter()).copied()
    }
}

pub(crate) fn decode_worktree(
    root: &Utf8Path,
    bytes: &[u8],
) -> Result<WorktreeRecord, RegistryError> {
    serde_json::from_slice(bytes).map_err(|e| RegistryError::Corrupt {
        root: root.to_owned(),
        reason: e.to_string(),
    })
}

pub(crate) fn decode_op(root: &Utf8Path, bytes: &[u8]) -> Result<OpRecord, RegistryError> {
    serde_json::from_slice(bytes).map_err(|e| RegistryError::Corrupt {
        root: root.to_owned(),
        reason: format!("op-log entry: {e}"),
    })
}
