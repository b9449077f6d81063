//! `cas`: the content-addressed store under cairn.
//!
//! It knows three kinds of object, each named by a 32-byte BLAKE3 id:
//! blobs (file bytes, id = plain BLAKE3 so `b3sum` agrees), trees (sorted directory listings)
//! and snapshots (commit objects). Trees and snapshots have one canonical encoding each,
//! written down with test vectors in `docs/format.md`; so do [`Attestation`]s, the records
//! of checks run against a tree, which it files by tree beside the objects
//! ([`ATTESTATIONS`]) and keeps while a snapshot has that tree. Objects live in a redb database in the
//! store folder, blobs zstd-compressed in a packed log (`docs/design.md`), next to refs and
//! the side tables that layers above own ([`SideTable`]): records they commit in the same
//! transaction as the objects those records name.
//!
//! Every read verifies the hash of what it returns; every [`Store::write`] is one durable
//! transaction, so an id handed out survives a crash.
//!
//! It owns the database file and its format, object encodings and integrity, refs, and
//! the durability and group commit of writes. The rule of which names a tree may hold
//! ([`check_name`], [`check_path`]) is its own, a rule of the tree format: a tree is checked
//! when built and when decoded, so a received tree with a bad name is refused whole;
//! `path_policy` builds its repo paths on it. It must not know worktrees on disk, deny
//! lists, sandboxes, git, the command line or HTTP, and it depends on no crate of cairn's:
//! side tables hold their owners' bytes, and `gc` and `fsck` ask the owners
//! ([`SideOwner`]) what their records keep alive. The [`Progress`] trait every long
//! operation above reports through is here, the one crate they all share.
//!
//! ```
//! use cas::{EntryKind, OpenOptions, PreparedBlob, Snapshot, Store, Tree, TreeEntry, WriteBatch};
//! # let dir = tempfile::tempdir().unwrap();
//! # let root = camino::Utf8Path::from_path(dir.path()).unwrap().join("store");
//! let store = Store::open(&root, &OpenOptions { create: true, ..OpenOptions::default() })?;
//!
//! let mut batch = WriteBatch::new();
//! let blob = batch.add_blob(PreparedBlob::new(b"hello\n"));
//! let tree = Tree::new(vec![TreeEntry {
//!     name: b"hello.txt".to_vec(),
//!     kind: EntryKind::File,
//!     id: blob.into(),
//!     size: 6,
//! }])?;
//! let tree_id = batch.add_tree(tree);
//! let snap = batch.add_snapshot(Snapshot {
//!     tree: tree_id,
//!     parents: vec![],
//!     created: jiff::Timestamp::now(),
//!     message: "first".into(),
//!     labels: Default::default(),
//!     source: None,
//! });
//! store.write(&batch)?;
//!
//! let reader = store.reader()?;
//! assert_eq!(reader.blob(blob)?, b"hello\n");
//! assert_eq!(reader.snapshot(snap)?.tree, tree_id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

mod attestation;
mod id;
mod name;
mod object;
mod progress;
mod store;
mod verify;

pub use attestation::{
    ATTESTATION_CONTEXT, Attestation, CheckOutput, Exit, MAX_CHECK_OUTPUT, decode_attestation,
    validate_env_name,
};
pub use id::{
    AttestationId, BlobId, HEX_LEN, ID_LEN, IdPrefix, ObjectId, ParseIdError, SnapshotId, TreeId,
};
pub use name::{MAX_DEPTH, MAX_NAME_LEN, MAX_PATH_LEN, NameError, check_name, check_path};
pub use object::{
    EntryKind, GitSource, ObjectError, ObjectKind, SNAPSHOT_CONTEXT, Snapshot, Source,
    TREE_CONTEXT, Tree, TreeEntry, parse_label, validate_label_key, validate_name,
};
pub use progress::{Progress, Silent};
pub use store::{
    ATTESTATION_SIGNATURES, ATTESTATIONS, AttestationReadError, BlobChunks, BlobPayload,
    BlobSource, BoxError, CHUNK_BYTES, Checked, Chunk, DATABASE_FILE, Damage, FORMAT_VERSION,
    Format1Keys, Format1Table, Frame, FrameMember, FrameRef, HistoryEntry, InvalidLockTimeout,
    JOURNALS, Keeper, KeyValue, LOCK_TIMEOUT_VAR, MAX_FRAME_BYTES, MaintenanceError, OpenError,
    OpenOptions, PROMISED, PRUNED, PayloadError, PreparedBlob, Problem, ReadError, Reader,
    ReceivedFrame, RefError, ResolveError, Retained, Rewrite, Roots, ScopedEntry, SideKey,
    SideOwner, SideTable, StorageFailure, Store, StoreError, StoreFsckOptions, StoreFsckOutcome,
    StoreGcOptions, StoreGcOutcome, WriteBatch, WriteError, WriteOutcome, ZstdError, sequence_key,
    sequence_of, store_bytes, validate_ref_name,
};
pub use verify::{VerifiedObject, VerifyError, verify_blob_payload, verify_frame, verify_object};

/// The store's record decoders for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub use store::fuzzing;

#[cfg(test)]
mod sync_check {
    fn is_sync<T: Sync + Send>() {}
    #[test]
    fn reader_is_shareable() {
        is_sync::<crate::Reader>();
    }
}
