//! [`WriteBatch`]: what one transaction writes, and the names it may write.

use camino::{Utf8Path, Utf8PathBuf};

use super::blob::PreparedBlob;
use super::error::*;
use super::registry::{OpRecord, WorktreeRecord};
use crate::id::{BlobId, ObjectId, SnapshotId, TreeId};
use crate::object::{Snapshot, Tree};

/// Checks a ref name: 1 to 255 characters of `A-Z a-z 0-9 . _ - /`, no empty or dot-only
/// path components, not starting with `-`, not 64 hex digits (that reads as an id).
pub fn validate_ref_name(name: &str) -> Result<(), RefError> {
    let invalid = |reason| {
        Err(RefError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 255 {
        return invalid("must be 1 to 255 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
    {
        return invalid("only A-Z, a-z, 0-9, '.', '_', '-' and '/' are allowed");
    }
    if name.starts_with('-') {
        return invalid("must not start with '-'");
    }
    if name
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return invalid("empty, '.' or '..' path component");
    }
    if name.parse::<ObjectId>().is_ok() {
        return invalid("a 64-digit hex name would read as an id");
    }
    Ok(())
}

/// What a [`Store::write`](crate::Store::write) stored (objects already present are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// New blob entries, chunks included.
    pub blobs_written: u64,
    /// Compressed bytes appended to the blob log.
    pub bytes_written: u64,
    /// New trees.
    pub trees_written: u64,
    /// New snapshots.
    pub snapshots_written: u64,
    /// Sequence numbers given to the batch's op-log entries, in order.
    pub op_seqs: Vec<u64>,
}

/// Objects and registry updates written together by [`Store::write`](crate::Store::write), atomically.
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    pub(super) blobs: Vec<PreparedBlob>,
    pub(super) trees: Vec<(TreeId, Tree)>,
    pub(super) snapshots: Vec<(SnapshotId, Snapshot)>,
    pub(super) refs: Vec<(String, Option<SnapshotId>)>,
    pub(super) worktrees: Vec<WorktreeRecord>,
    pub(super) removed_worktrees: Vec<Utf8PathBuf>,
    pub(super) ops: Vec<(Utf8PathBuf, OpRecord)>,
    pub(super) cleared_states: Vec<Utf8PathBuf>,
    pub(super) file_states: Vec<(Utf8PathBuf, Vec<u8>, Option<Vec<u8>>)>,
    pub(super) git_oids: Vec<(ObjectId, Vec<u8>)>,
    pub(super) journals: Vec<(Utf8PathBuf, Option<Vec<u8>>)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a prepared blob.
    pub fn add_blob(&mut self, blob: PreparedBlob) -> BlobId {
        let id = blob.id;
        self.blobs.push(blob);
        id
    }

    /// Adds a tree; its entries must be stored already or come earlier in a batch.
    pub fn add_tree(&mut self, tree: Tree) -> TreeId {
        let id = tree.id();
        self.trees.push((id, tree));
        id
    }

    /// Adds a snapshot; its tree and parents must be stored or in this batch.
    pub fn add_snapshot(&mut self, snapshot: Snapshot) -> SnapshotId {
        let id = snapshot.id();
        self.snapshots.push((id, snapshot));
        id
    }

    /// Points a ref at a snapshot (name checked by the caller, see [`validate_ref_name`]).
    pub fn set_ref(&mut self, name: &str, target: SnapshotId) {
        self.refs.push((name.to_owned(), Some(target)));
    }

    /// Registers or updates a worktree.
    pub fn put_worktree(&mut self, record: WorktreeRecord) {
        self.worktrees.push(record);
    }

    /// Forgets a worktree (its op log stays until `gc --prune-ops`).
    pub fn remove_worktree(&mut self, root: &Utf8Path) {
        self.removed_worktrees.push(root.to_owned());
    }

    /// Appends an entry to a worktree's op log; the store assigns its sequence number.
    pub fn append_op(&mut self, root: &Utf8Path, op: OpRecord) {
        self.ops.push((root.to_owned(), op));
    }

    /// Drops every file state of a worktree (applied before the batch's own file states).
    pub fn clear_file_states(&mut self, root: &Utf8Path) {
        self.cleared_states.push(root.to_owned());
    }

    /// Sets (`Some`) or removes (`None`) the file state of `path` in worktree `root`.
    pub fn set_file_state(&mut self, root: &Utf8Path, path: &[u8], state: Option<Vec<u8>>) {
        self.file_states
            .push((root.to_owned(), path.to_vec(), state));
    }

    /// Sets (`Some`) or clears (`None`) the intent journal of worktree `root`.
    pub fn set_journal(&mut self, root: &Utf8Path, journal: Option<Vec<u8>>) {
        self.journals.push((root.to_owned(), journal));
    }

    /// Records that `id` is `git_oid` in git repositories.
    pub fn map_git_oid(&mut self, id: ObjectId, git_oid: &[u8]) {
        self.git_oids.push((id, git_oid.to_vec()));
    }

    /// The worktrees whose file states the batch changes.
    pub(super) fn file_state_roots(&self) -> impl Iterator<Item = &Utf8PathBuf> {
        self.cleared_states
            .iter()
            .chain(&self.removed_worktrees)
            .chain(self.file_states.iter().map(|(root, _, _)| root))
    }

    /// Compressed bytes the batch's blobs would add.
    pub fn stored_bytes(&self) -> u64 {
        self.blobs.iter().map(PreparedBlob::stored_bytes).sum()
    }

    /// True if the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
            && self.trees.is_empty()
            && self.snapshots.is_empty()
            && self.refs.is_empty()
            && self.worktrees.is_empty()
            && self.removed_worktrees.is_empty()
            && self.ops.is_empty()
            && self.cleared_states.is_empty()
            && self.file_states.is_empty()
            && self.git_oids.is_empty()
            && self.journals.is_empty()
    }
}
