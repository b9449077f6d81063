//! [`WriteBatch`]: what one transaction writes, and the names it may write.

use super::blob::PreparedBlob;
use super::error::*;
use super::frame::Frame;
use super::side::{SideKey, SideOp, SideTable};
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
    /// Sequence numbers given to the batch's appended side entries, in order.
    pub appended: Vec<u64>,
}

/// Objects, refs and side-table changes written together by
/// [`Store::write`](crate::Store::write), atomically.
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    pub(super) blobs: Vec<PreparedBlob>,
    /// Frames taken as they came, written before the blobs.
    pub(super) frames: Vec<Frame>,
    pub(super) trees: Vec<(TreeId, Tree)>,
    pub(super) snapshots: Vec<(SnapshotId, Snapshot)>,
    pub(super) refs: Vec<(String, Option<SnapshotId>)>,
    /// Applied in order, after the objects and refs.
    pub(super) side: Vec<SideOp>,
    /// Snapshots the side entries name: each must be stored or in the batch.
    pub(super) required: Vec<SnapshotId>,
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

    /// Adds a group frame as it is (checked when it was made: read from a store, or
    /// received through [`verify_frame`](crate::verify_frame)); its members the store has
    /// by then are not recorded again, and a frame holding none it lacks is left out.
    pub fn add_frame(&mut self, frame: Frame) {
        self.frames.push(frame);
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

    /// Sets `key` in `scope` of side table `table` to `value`.
    pub fn put_side(&mut self, table: SideTable, scope: &str, key: &[u8], value: Vec<u8>) {
        self.side
            .push(SideOp::Put(side_key(table, scope, key), value));
    }

    /// Removes `key` from `scope` of side table `table`.
    pub fn remove_side(&mut self, table: SideTable, scope: &str, key: &[u8]) {
        self.side.push(SideOp::Remove(side_key(table, scope, key)));
    }

    /// Removes every entry of `scope` from side table `table`.
    pub fn clear_side_scope(&mut self, table: SideTable, scope: &str) {
        self.side.push(SideOp::ClearScope(table, scope.to_owned()));
    }

    /// Adds `value` to `scope` of side table `table` under the scope's next sequence number
    /// ([`sequence_key`](crate::sequence_key)), reported in [`WriteOutcome::appended`].
    pub fn append_side(&mut self, table: SideTable, scope: &str, value: Vec<u8>) {
        self.side
            .push(SideOp::Append(table, scope.to_owned(), value));
    }

    /// Records that the batch's side entries name `ids`: the write fails with
    /// [`WriteError::Dangling`] unless each is stored or in the batch.
    pub fn require_snapshots(&mut self, ids: impl IntoIterator<Item = SnapshotId>) {
        self.required.extend(ids);
    }

    /// Sets (`Some`) or clears (`None`) the intent journal of directory `dir` (see
    /// [`JOURNALS`](crate::JOURNALS)).
    pub fn set_journal(&mut self, dir: &camino::Utf8Path, journal: Option<Vec<u8>>) {
        let table = super::side::JOURNALS;
        match journal {
            Some(j) => self.put_side(table, dir.as_str(), b"", j),
            None => self.remove_side(table, dir.as_str(), b""),
        }
    }

    /// Records that object `id`, which the batch's objects may name without it being
    /// stored, is on remote `remote` (see [`PROMISED`](crate::PROMISED)).
    pub fn promise(&mut self, id: ObjectId, remote: &str) {
        self.put_side(
            super::side::PROMISED,
            "",
            id.as_bytes(),
            remote.as_bytes().to_vec(),
        );
    }

    /// The ids this batch promises.
    pub(super) fn promised(&self) -> std::collections::HashSet<[u8; 32]> {
        self.side
            .iter()
            .filter_map(|op| match op {
                SideOp::Put(k, _) if k.table == super::side::PROMISED => {
                    k.key.as_slice().try_into().ok()
                }
                _ => None,
            })
            .collect()
    }

    /// The side tables and scopes the batch changes.
    pub(super) fn side_scopes(&self) -> impl Iterator<Item = (SideTable, &str)> {
        self.side.iter().map(SideOp::table_and_scope)
    }

    /// Compressed bytes the batch's blobs would add.
    pub fn stored_bytes(&self) -> u64 {
        let frames: u64 = self.frames.iter().map(|f| f.bytes.len() as u64).sum();
        frames
            + self
                .blobs
                .iter()
                .map(PreparedBlob::stored_bytes)
                .sum::<u64>()
    }

    /// Roughly the bytes a copy of the batch would take: its blobs as stored, its trees'
    /// entries and its side values (a capture of a million files holds some 80 MB of
    /// trees and 15 MB of stat records, and no blob).
    pub(super) fn held_bytes(&self) -> u64 {
        const ENTRY_BYTES: usize = 48;
        let trees: usize = (self.trees.iter())
            .flat_map(|(_, t)| t.entries())
            .map(|e| ENTRY_BYTES + e.name.len())
            .sum();
        let side: usize = (self.side.iter())
            .map(|op| match op {
                SideOp::Put(_, v) | SideOp::Append(_, _, v) => v.len(),
                SideOp::Remove(_) | SideOp::ClearScope(..) => 0,
            })
            .sum();
        self.stored_bytes() + (trees + side) as u64
    }

    /// The batch's blobs, frames and trees, moved into a batch of their own (to be stored
    /// ahead of the rest, which keeps its snapshots, refs and side-table changes).
    pub fn take_contents(&mut self) -> WriteBatch {
        WriteBatch {
            blobs: std::mem::take(&mut self.blobs),
            frames: std::mem::take(&mut self.frames),
            trees: std::mem::take(&mut self.trees),
            ..WriteBatch::default()
        }
    }

    /// True if the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
            && self.frames.is_empty()
            && self.trees.is_empty()
            && self.snapshots.is_empty()
            && self.refs.is_empty()
            && self.side.is_empty()
    }
}

fn side_key(table: SideTable, scope: &str, key: &[u8]) -> SideKey {
    SideKey {
        table,
        scope: scope.to_owned(),
        key: key.to_vec(),
    }
}
