//! Blobs a piece at a time: ranged reads that decode only the chunks a range covers, each
//! verified against its own id, and chunked blobs assembled from chunks stored already.
//!
//! A blob over [`CHUNK_BYTES`] is stored as its chunks, every one [`CHUNK_BYTES`] long but
//! the last (`PreparedBlob::new` and `Store::put_blob_stream` cut them so, and always
//! have), so the chunk holding a byte is found by division, without reading the others.

use super::blob::{Body, CHUNK_BYTES, Location, PreparedBlob};
use super::error::{Damage, ReadError};
use super::reader::Reader;
use crate::id::BlobId;
use crate::object::ObjectKind;

/// A blob as ranged reads see it (see [`Reader::blob_chunks`]): its size and the pieces its
/// bytes are cut into, each read and verified on its own with [`Reader::chunk`]. A blob of
/// at most [`CHUNK_BYTES`] is one piece, itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobChunks {
    id: BlobId,
    size: u64,
    chunks: Vec<BlobId>,
}

/// One piece of a blob: its id, and where its bytes lie in the blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Chunk {
    /// The blob it is a piece of.
    pub blob: BlobId,
    /// Its own id (the blob's, for a blob of one piece).
    pub id: BlobId,
    /// Its place among the blob's pieces.
    pub index: usize,
    /// Where its bytes start in the blob.
    pub start: u64,
    /// How many bytes it holds.
    pub len: usize,
}

impl BlobChunks {
    /// `size` bytes cut into `chunks`, checked to be the cut the store makes: one piece
    /// (then `chunks` is `[id]`) up to [`CHUNK_BYTES`], else a chunk per [`CHUNK_BYTES`].
    fn new(id: BlobId, size: u64, chunks: Vec<BlobId>) -> Result<BlobChunks, Damage> {
        let expected = if size <= CHUNK_BYTES as u64 {
            1
        } else {
            size.div_ceil(CHUNK_BYTES as u64)
        };
        if chunks.len() as u64 != expected {
            return Err(Damage::ChunkCount {
                chunks: chunks.len(),
                size,
            });
        }
        Ok(BlobChunks { id, size, chunks })
    }

    /// Blob `id` of `size` bytes cut into `chunks` as another holder says (a remote's chunk
    /// list), checked to be the cut the store makes; each chunk is still verified as read.
    pub fn of_list(id: BlobId, size: u64, chunks: Vec<BlobId>) -> Result<BlobChunks, ReadError> {
        BlobChunks::new(id, size, chunks)
            .map_err(|damage| ReadError::damaged(ObjectKind::Blob, id, damage))
    }

    /// The blob's id.
    pub fn id(&self) -> BlobId {
        self.id
    }

    /// The blob's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The pieces' ids, in order.
    pub fn ids(&self) -> &[BlobId] {
        &self.chunks
    }

    /// Piece `index`, if the blob has one there.
    pub fn chunk(&self, index: usize) -> Option<Chunk> {
        let id = *self.chunks.get(index)?;
        let start = index as u64 * CHUNK_BYTES as u64;
        let len = (self.size - start).min(CHUNK_BYTES as u64) as usize;
        Some(Chunk {
            blob: self.id,
            id,
            index,
            start,
            len,
        })
    }

    /// The pieces holding bytes `offset..offset + len` (those of them within the blob).
    pub fn covering(&self, offset: u64, len: u64) -> impl Iterator<Item = Chunk> + '_ {
        let end = offset.saturating_add(len).min(self.size);
        let chunk = CHUNK_BYTES as u64;
        let (first, last) = if offset >= end {
            (1, 0)
        } else {
            (offset / chunk, (end - 1) / chunk)
        };
        (first..=last).filter_map(|i| self.chunk(i as usize))
    }
}

impl Reader {
    /// How blob `id`'s bytes are cut for ranged reads, without reading them.
    pub fn blob_chunks(&self, id: BlobId) -> Result<BlobChunks, ReadError> {
        let (size, chunks) = match self.location(id)? {
            Location::Chunked { size, chunks } => (size, chunks),
            other => (other.size(), vec![id]),
        };
        BlobChunks::new(id, size, chunks)
            .map_err(|damage| ReadError::damaged(ObjectKind::Blob, id, damage))
    }

    /// The bytes of `chunk`, verified against its id and checked to be as long as its
    /// place in the blob says.
    pub fn chunk(&self, chunk: Chunk) -> Result<Vec<u8>, ReadError> {
        let blob = chunk.blob;
        let bytes = self.packed(chunk.id).map_err(|e| match e {
            ReadError::NotFound { id, .. } if chunk.id != blob => {
                ReadError::corrupt(ObjectKind::Blob, blob, format!("chunk {id} is missing"))
            }
            other => other,
        })?;
        if bytes.len() != chunk.len {
            return Err(ReadError::corrupt(
                ObjectKind::Blob,
                blob,
                format!(
                    "chunk {} ({}) is {} bytes, not {}",
                    chunk.index,
                    chunk.id,
                    bytes.len(),
                    chunk.len
                ),
            ));
        }
        Ok(bytes)
    }

    /// Up to `len` bytes of blob `id` from `offset` (fewer at its end, none past it),
    /// decoding only the chunks they lie in, each verified against its id.
    pub fn read_blob_at(&self, id: BlobId, offset: u64, len: usize) -> Result<Vec<u8>, ReadError> {
        let chunks = self.blob_chunks(id)?;
        if chunks.size() == 0 {
            // No bytes to cover, but the blob is still checked against its id.
            return self.chunk(chunks.chunk(0).expect("a blob has one piece at least"));
        }
        let mut out = Vec::with_capacity(len.min(CHUNK_BYTES));
        for chunk in chunks.covering(offset, len as u64) {
            let bytes = self.chunk(chunk)?;
            let from = offset.saturating_sub(chunk.start) as usize;
            let to =
                (offset.saturating_add(len as u64) - chunk.start).min(chunk.len as u64) as usize;
            out.extend_from_slice(&bytes[from..to]);
        }
        Ok(out)
    }

    /// Blob `id` of `size` bytes as the concatenation of `chunks`, which must be stored
    /// already: each is read and checked (its id, and its length by its place), and the
    /// whole against `id`, one chunk in memory at a time. What it gives can join a batch
    /// ([`WriteBatch::add_blob`](crate::WriteBatch::add_blob)), which records the blob.
    pub fn chunked_blob(
        &self,
        id: BlobId,
        size: u64,
        chunks: Vec<BlobId>,
    ) -> Result<PreparedBlob, ReadError> {
        let cut = BlobChunks::new(id, size, chunks)
            .map_err(|damage| ReadError::damaged(ObjectKind::Blob, id, damage))?;
        if cut.chunks.len() < 2 {
            return Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                format!("{size} bytes fit one chunk; such a blob is not chunked"),
            ));
        }
        let mut hasher = blake3::Hasher::new();
        for index in 0..cut.chunks.len() {
            if let Some(chunk) = cut.chunk(index) {
                hasher.update(&self.chunk(chunk)?);
            }
        }
        let actual = BlobId::from_bytes(*hasher.finalize().as_bytes());
        if actual != id {
            return Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                format!("its chunks make blob {actual}"),
            ));
        }
        Ok(PreparedBlob {
            id,
            size,
            body: Body::Chunked {
                chunks: cut.chunks,
                parts: Vec::new(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_finds_the_chunks_of_a_range() {
        let c = CHUNK_BYTES as u64;
        let ids: Vec<BlobId> = (0..3u8).map(|i| BlobId::of(&[i])).collect();
        let blob = BlobChunks::new(BlobId::of(b"x"), 2 * c + 5, ids.clone()).unwrap();
        let at = |offset, len| {
            blob.covering(offset, len)
                .map(|c| (c.index, c.start, c.len))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(0, 1), [(0, 0, CHUNK_BYTES)]);
        assert_eq!(at(c - 1, 2), [(0, 0, CHUNK_BYTES), (1, c, CHUNK_BYTES)]);
        assert_eq!(at(2 * c, 100), [(2, 2 * c, 5)]);
        assert_eq!(at(2 * c + 5, 1), []);
        assert_eq!(at(3 * c, 1), []);
        assert_eq!(at(u64::MAX, u64::MAX), []);
        assert_eq!(at(0, 0), []);
        // Anything but the store's cut is refused.
        assert!(BlobChunks::new(BlobId::of(b"x"), 2 * c, ids.clone()).is_err());
        assert!(BlobChunks::new(BlobId::of(b"x"), 5, ids).is_err());
        // A 5 GiB blob: offsets past 4 GiB are not cut to 32 bits.
        let many: Vec<BlobId> = vec![BlobId::of(b"c"); 5 * 1024];
        let big = BlobChunks::new(BlobId::of(b"y"), 5 << 30, many).unwrap();
        let last = big.covering((5 << 30) - 1, 10).collect::<Vec<_>>();
        assert_eq!(last.len(), 1);
        assert_eq!(
            (last[0].index, last[0].start),
            (5 * 1024 - 1, (5 << 30) - c)
        );
    }
}
