//! Every redb table of the store, in one place. The layout is described in `docs/design.md`.

use redb::TableDefinition;

/// Store-wide settings: `format_version`, `segment_bytes`, `log_end`.
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Blob id → location of its bytes (see `blob::Location`).
pub(crate) const BLOBS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("blobs");
/// Segment number → a slice of the blob log, `segment_bytes` long except the last.
pub(crate) const SEGMENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("segments");
/// Tree id → codec byte + canonical encoding (or, for a large one, where in the blob log
/// its compressed encoding is).
pub(crate) const TREES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("trees");
/// Snapshot id → canonical encoding.
pub(crate) const SNAPSHOTS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("snapshots");
/// Ref name → snapshot id.
pub(crate) const REFS: TableDefinition<&str, [u8; 32]> = TableDefinition::new("refs");
// Side tables (`side/NAME`, `side-by-object/NAME`) are declared by their owners; see `side`.

pub(crate) const FORMAT_VERSION_KEY: &str = "format_version";
pub(crate) const SEGMENT_BYTES_KEY: &str = "segment_bytes";
pub(crate) const LOG_END_KEY: &str = "log_end";

/// The on-disk format of new stores: format 3's records in a blob log of page-sized
/// segments. Format 3 stores are read and written as they are (their segments stay 1 MiB);
/// format 2 stores are read as they are and marked format 3 when opened for writing;
/// format 1 stores are upgraded to 2 first (see `upgrade`).
pub const FORMAT_VERSION: u64 = 4;

/// Small blobs in frames, large tree records in the blob log: what a write to a format 2
/// store marks it.
pub(crate) const FORMAT_FRAMES: u64 = 3;

/// The database file inside the store folder.
pub const DATABASE_FILE: &str = "store.redb";
