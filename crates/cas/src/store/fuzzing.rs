//! The store's record decoders, reachable from the fuzz targets in `fuzz/` (a fuzz target
//! is another crate). Not an API: each function is exactly what a read of that table does.

use super::blob::{self, Codec, Location};
use super::error::ReadError;
use crate::id::{BlobId, SnapshotId, TreeId};
use crate::object::{ObjectKind, Snapshot, Tree};

/// A decoded `blobs` table value: where a blob's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobLocation(Location);

impl BlobLocation {
    /// Decodes a record as every blob read does; `None` is the "unreadable location record"
    /// corruption.
    pub fn decode(bytes: &[u8]) -> Option<BlobLocation> {
        Location::decode(bytes).map(BlobLocation)
    }

    /// The record as the store writes it.
    pub fn encode(&self) -> Vec<u8> {
        self.0.encode()
    }

    /// The blob's size in bytes, as recorded.
    pub fn size(&self) -> u64 {
        self.0.size()
    }

    /// The chunk ids of a chunked blob; `None` for another.
    pub fn chunks(&self) -> Option<&[BlobId]> {
        match &self.0 {
            Location::Chunked { chunks, .. } => Some(chunks),
            _ => None,
        }
    }

    /// For a packed blob, whether its payload is zstd-compressed; `None` for another.
    pub fn is_zstd(&self) -> Option<bool> {
        match &self.0 {
            Location::Packed { codec, .. } => Some(*codec == Codec::Zstd),
            _ => None,
        }
    }

    /// For a member of a group of small blobs: its frame's offset and length in the log,
    /// and its bytes' start in the decoded frame; `None` for another.
    pub fn member(&self) -> Option<(u64, u32, u64)> {
        match &self.0 {
            Location::Member {
                frame_offset,
                frame_len,
                start,
                ..
            } => Some((*frame_offset, *frame_len, *start)),
            _ => None,
        }
    }
}

/// Turns a packed blob's payload back into its content and checks it against `id`, as a
/// blob read does once it has the payload from the log.
pub fn unpack_blob(
    id: BlobId,
    zstd: bool,
    payload: Vec<u8>,
    size: u64,
) -> Result<Vec<u8>, ReadError> {
    let codec = if zstd { Codec::Zstd } else { Codec::Raw };
    blob::unpack(id, codec, payload, size)
}

/// Turns the stored frame of a group of small blobs into member `id`'s content (`size`
/// bytes at `start` of the decoded frame) and checks it against `id`, as a read of a
/// member does once it has the frame from the log.
pub fn unpack_member(
    id: BlobId,
    frame: &[u8],
    start: u64,
    size: u64,
) -> Result<Vec<u8>, ReadError> {
    let decoded = super::frame::decode_frame(id, frame)?;
    super::frame::member_content(id, &decoded, start, size)
}

/// Decodes a `trees` table value (codec byte, then the encoding, maybe compressed, or where
/// in the blob log it is) and checks it against `id`, as [`crate::Reader::tree`] does;
/// `log` stands for the blob log.
pub fn decode_tree_record(id: TreeId, value: &[u8], log: &[u8]) -> Result<Tree, ReadError> {
    super::reader::decode_tree_value(id, value, |offset, len| {
        usize::try_from(offset)
            .ok()
            .and_then(|start| log.get(start..start.checked_add(len as usize)?))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| ReadError::corrupt(ObjectKind::Tree, id, "past the end of the log"))
    })
}

/// A `trees` table value as the store writes it.
pub fn encode_tree_record(tree: &Tree) -> Vec<u8> {
    super::handle::encode_tree_value(tree)
}

/// Decodes a `snapshots` table value and checks it against `id`, as
/// [`crate::Reader::snapshot`] does.
pub fn decode_snapshot_record(id: SnapshotId, value: &[u8]) -> Result<Snapshot, ReadError> {
    super::reader::decode_snapshot_value(id, value)
}
