//! Every redb table of the store, in one place. The layout is described in `docs/design.md`.

use redb::TableDefinition;

/// Store-wide settings: `format_version`, `segment_bytes`, `log_end`.
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Blob id → location of its bytes (see `blob::Location`).
pub(crate) const BLOBS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("blobs");
/// Segment number → a slice of the blob log, `segment_bytes` long except the last.
pub(crate) const SEGMENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("segments");
/// Tree id → codec byte + canonical encoding.
pub(crate) const TREES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("trees");
/// Snapshot id → canonical encoding.
pub(crate) const SNAPSHOTS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("snapshots");
/// Ref name → snapshot id.
pub(crate) const REFS: TableDefinition<&str, [u8; 32]> = TableDefinition::new("refs");
/// Worktree root → JSON `WorktreeRecord`.
pub(crate) const WORKTREES: TableDefinition<&str, &[u8]> = TableDefinition::new("worktrees");
/// (worktree root, sequence number) → JSON `OpRecord`.
pub(crate) const OPLOG: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("oplog");

/// (worktree root, path) → an opaque per-file record owned by the worktree manager (the stat
/// cache).
pub(crate) const FILE_STATES: TableDefinition<(&str, &[u8]), &[u8]> =
    TableDefinition::new("file_states");

/// Object id → the id of the same object in a git (SHA-1) repository, so exports skip what
/// was exported before. Stores created before this table existed gain it on their next write.
pub(crate) const GIT_OIDS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("git_oids");

/// Worktree root → the intent journal of an operation on its files that has not finished
/// (opaque to the store, owned by the worktree manager). Created on first use.
pub(crate) const JOURNALS: TableDefinition<&str, &[u8]> = TableDefinition::new("journals");

pub(crate) const FORMAT_VERSION_KEY: &str = "format_version";
pub(crate) const SEGMENT_BYTES_KEY: &str = "segment_bytes";
pub(crate) const LOG_END_KEY: &str = "log_end";

/// The on-disk format this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// The database file inside the store folder.
pub const DATABASE_FILE: &str = "store.redb";
