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
    /// Its checkpoints, oldest first; names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<Checkpoint>,
    /// The task under way, if a checkpoint started one that was not yet accepted or
    /// discarded as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    /// Files larger than this many bytes are left out of captures (and reported); no cap if
    /// `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_size: Option<u64>,
    /// The root directory's identity when it was registered (or rebound): a root that is
    /// now another directory, swapped in behind cairn's back, is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<DirIdentity>,
}

/// Which directory a path named: its device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl WorktreeRecord {
    /// A new record with no head, checkpoints or task.
    pub fn new(root: Utf8PathBuf, kind: WorktreeKind) -> WorktreeRecord {
        WorktreeRecord {
            root,
            kind,
            head: None,
            include_denied: false,
            created: jiff::Timestamp::now(),
            checkpoints: Vec::new(),
            task: None,
            max_file_size: None,
            identity: None,
        }
    }

    /// Every snapshot the record keeps alive: head, checkpoints, task baseline.
    pub fn snapshots(&self) -> impl Iterator<Item = SnapshotId> + '_ {
        self.head
            .iter()
            .copied()
            .chain(self.checkpoints.iter().map(|c| c.snapshot))
            .chain(self.task.iter().map(|t| t.baseline))
    }

    /// The checkpoint called `name`.
    pub fn checkpoint(&self, name: &str) -> Option<&Checkpoint> {
        self.checkpoints
            .iter()
            .find(|c| c.name.as_deref() == Some(name))
    }
}

/// One checkpoint of a worktree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// Its name, if it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The snapshot it recorded.
    pub snapshot: SnapshotId,
    /// When it was taken.
    pub created: jiff::Timestamp,
}

/// A task: what `review`, `accept` and `discard` compare against.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The first checkpoint, with accepted paths moved forward.
    pub baseline: SnapshotId,
    /// When its first checkpoint was taken.
    pub started: jiff::Timestamp,
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
    /// For an `undo`: the entry whose change it reverted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<u64>,
    /// For a `redo`: the entry whose change it re-applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redoes: Option<u64>,
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
            undoes: None,
            redoes: None,
        }
    }

    /// True if the entry changed the worktree's recorded state.
    pub fn is_change(&self) -> bool {
        self.before != self.after
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
