//! How blob bytes live in redb: the blob log and chunking.
//!
//! Compressed blobs are appended to one logical byte stream, the *blob log*, stored as
//! fixed-size segments (`SEGMENTS` table). A blob's location is its offset and length in the
//! log, so small blobs pack densely and large values do not suffer redb's power-of-two page
//! rounding. Blobs larger than [`CHUNK_BYTES`] are split into chunks, each a blob of its own;
//! the large blob's entry lists the chunk ids, so memory stays bounded by one chunk.

use std::cell::RefCell;

use redb::{ReadableTable, Table};

use super::error::{ReadError, StorageFailure, StorageResult};
use crate::id::BlobId;
use crate::object::ObjectKind;

/// Blobs larger than this are stored as a list of chunks of this size.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The segment size for new stores. redb rounds a page holding one large value up to a
/// power of two, so a segment stays a little under 1 MiB to fill its page.
pub(crate) const DEFAULT_SEGMENT_BYTES: u64 = (1 << 20) - 256;

/// The segment sizes a store may have; anything else in its meta table is damage.
pub(crate) const MIN_SEGMENT_BYTES: u64 = 4 << 10;
pub(crate) const MAX_SEGMENT_BYTES: u64 = 64 << 20;

const ZSTD_LEVEL: i32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Raw = 0,
    Zstd = 1,
}

/// Where a blob's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// `len` bytes at `offset` of the blob log, encoded with `codec`, `size` bytes decoded.
    Packed {
        offset: u64,
        len: u32,
        size: u64,
        codec: Codec,
    },
    /// The concatenation of chunk blobs.
    Chunked { size: u64, chunks: Vec<BlobId> },
}

impl Location {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Location::Packed {
                offset,
                len,
                size,
                codec,
            } => {
                let mut out = Vec::with_capacity(22);
                out.push(0);
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&size.to_le_bytes());
                out.push(*codec as u8);
                out
            }
            Location::Chunked { size, chunks } => {
                let mut out = Vec::with_capacity(9 + chunks.len() * 32);
                out.push(1);
                out.extend_from_slice(&size.to_le_bytes());
                for c in chunks {
                    out.extend_from_slice(c.as_bytes());
                }
                out
            }
        }
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Location> {
        let (&tag, rest) = bytes.split_first()?;
        match tag {
            0 if rest.len() == 21 => {
                let offset = u64::from_le_bytes(rest[0..8].try_into().ok()?);
                let len = u32::from_le_bytes(rest[8..12].try_into().ok()?);
                let size = u64::from_le_bytes(rest[12..20].try_into().ok()?);
                let codec = match rest[20] {
                    0 => Codec::Raw,
                    1 => Codec::Zstd,
                    _ => return None,
                };
                Some(Location::Packed {
                    offset,
                    len,
                    size,
                    codec,
                })
            }
            1 if rest.len() >= 8 && (rest.len() - 8) % 32 == 0 => {
                let size = u64::from_le_bytes(rest[0..8].try_into().ok()?);
                let chunks = rest[8..]
                    .chunks_exact(32)
                    .map(|c| c.try_into().map(BlobId::from_bytes))
                    .collect::<Result<Vec<_>, _>>()
                    .ok()?;
                Some(Location::Chunked { size, chunks })
            }
            _ => None,
        }
    }

    pub(crate) fn size(&self) -> u64 {
        match self {
            Location::Packed { size, .. } | Location::Chunked { size, .. } => *size,
        }
    }
}

/// A blob hashed and compressed, ready to be written by a [`crate::WriteBatch`].
///
/// Preparing is the CPU-heavy part of storing; do it in parallel, then write in one batch.
#[derive(Debug, Clone)]
pub struct PreparedBlob {
    pub(crate) id: BlobId,
    pub(crate) size: u64,
    pub(crate) body: Body,
}

#[derive(Debug, Clone)]
pub(crate) enum Body {
    Packed {
        codec: Codec,
        payload: Vec<u8>,
    },
    /// `parts` are the chunks to store first; chunks stored earlier are not among them.
    Chunked {
        chunks: Vec<BlobId>,
        parts: Vec<PreparedBlob>,
    },
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

pub(crate) fn compress(content: &[u8]) -> (Codec, Vec<u8>) {
    let compressed = COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        slot.as_mut().and_then(|c| c.compress(content).ok())
    });
    match compressed {
        Some(c) if c.len() < content.len() => (Codec::Zstd, c),
        _ => (Codec::Raw, content.to_vec()),
    }
}

pub(crate) fn decompress(payload: &[u8], size: usize) -> Result<Vec<u8>, String> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
        }
        match slot.as_mut() {
            Some(d) => d.decompress(payload, size).map_err(|e| e.to_string()),
            None => Err("no zstd decompressor".to_owned()),
        }
    })
}

/// The largest tree a frame without its size may decode to.
const MAX_UNSIZED_FRAME: usize = 256 << 20;

/// Decompresses one zstd frame whose decoded size it records (as every frame cairn
/// writes does), with this thread's decompressor.
pub(crate) fn decompress_frame(payload: &[u8]) -> Result<Vec<u8>, String> {
    match zstd::zstd_safe::get_frame_content_size(payload) {
        Ok(Some(size)) if size <= MAX_UNSIZED_FRAME as u64 => decompress(payload, size as usize),
        Ok(Some(size)) => Err(format!("a frame of {size} bytes")),
        Ok(None) => zstd::stream::decode_all(payload).map_err(|e| e.to_string()),
        Err(e) => Err(format!("{e:?}")),
    }
}

impl PreparedBlob {
    /// Hashes and compresses `content`; content over [`CHUNK_BYTES`] is chunked.
    pub fn new(content: &[u8]) -> PreparedBlob {
        Self::with_id(BlobId::of(content), content)
    }

    /// Hashes `content` and prepares it only if `is_stored` says the store lacks it, so
    /// content already stored is never compressed again.
    pub fn new_unless(
        content: &[u8],
        is_stored: impl FnOnce(BlobId) -> bool,
    ) -> (BlobId, Option<PreparedBlob>) {
        let id = BlobId::of(content);
        if is_stored(id) {
            (id, None)
        } else {
            (id, Some(Self::with_id(id, content)))
        }
    }

    /// Like [`PreparedBlob::new`] when the caller already hashed the content.
    pub(crate) fn with_id(id: BlobId, content: &[u8]) -> PreparedBlob {
        let size = content.len() as u64;
        if content.len() <= CHUNK_BYTES {
            let (codec, payload) = compress(content);
            PreparedBlob {
                id,
                size,
                body: Body::Packed { codec, payload },
            }
        } else {
            let parts: Vec<_> = content.chunks(CHUNK_BYTES).map(Self::chunk).collect();
            let chunks = parts.iter().map(|p| p.id).collect();
            PreparedBlob {
                id,
                size,
                body: Body::Chunked { chunks, parts },
            }
        }
    }

    pub(crate) fn chunk(content: &[u8]) -> PreparedBlob {
        let (codec, payload) = compress(content);
        PreparedBlob {
            id: BlobId::of(content),
            size: content.len() as u64,
            body: Body::Packed { codec, payload },
        }
    }

    /// The blob's id.
    pub fn id(&self) -> BlobId {
        self.id
    }

    /// The content's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes this blob adds to the log if none of it is stored yet.
    pub fn stored_bytes(&self) -> u64 {
        match &self.body {
            Body::Packed { payload, .. } => payload.len() as u64,
            Body::Chunked { parts, .. } => parts.iter().map(PreparedBlob::stored_bytes).sum(),
        }
    }
}

/// Appends to the blob log inside one write transaction.
pub(crate) struct LogWriter {
    segment_bytes: u64,
    end: u64,
    tail: Vec<u8>,
    dirty: bool,
}

impl LogWriter {
    pub(crate) fn open(
        segments: &Table<u64, &[u8]>,
        segment_bytes: u64,
        end: u64,
    ) -> Result<LogWriter, StorageFailure> {
        let within = end % segment_bytes;
        let mut tail = Vec::with_capacity(segment_bytes as usize);
        if within != 0 {
            if let Some(seg) = segments.get(end / segment_bytes).storage()? {
                let bytes = seg.value();
                tail.extend_from_slice(&bytes[..(within as usize).min(bytes.len())]);
            }
            // gc may have dropped a dead tail segment: keep offsets aligned with filler.
            tail.resize(within as usize, 0);
        }
        Ok(LogWriter {
            segment_bytes,
            end,
            tail,
            dirty: false,
        })
    }

    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Appends `data` and returns its offset in the log.
    pub(crate) fn append(
        &mut self,
        segments: &mut Table<u64, &[u8]>,
        mut data: &[u8],
    ) -> Result<u64, StorageFailure> {
        let offset = self.end;
        while !data.is_empty() {
            let room = (self.segment_bytes as usize) - self.tail.len();
            let n = room.min(data.len());
            self.tail.extend_from_slice(&data[..n]);
            data = &data[n..];
            self.end += n as u64;
            self.dirty = true;
            if self.tail.len() as u64 == self.segment_bytes {
                let index = (self.end - 1) / self.segment_bytes;
                segments.insert(index, self.tail.as_slice()).storage()?;
                self.tail.clear();
                self.dirty = false;
            }
        }
        Ok(offset)
    }

    /// Writes the partial last segment; returns the new log end.
    pub(crate) fn finish(self, segments: &mut Table<u64, &[u8]>) -> Result<u64, StorageFailure> {
        if self.dirty && !self.tail.is_empty() {
            segments
                .insert(self.end / self.segment_bytes, self.tail.as_slice())
                .storage()?;
        }
        Ok(self.end)
    }
}

/// Reads `len` bytes at `offset` of the blob log.
pub(crate) fn read_log(
    segments: &impl ReadableTable<u64, &'static [u8]>,
    segment_bytes: u64,
    id: BlobId,
    offset: u64,
    len: u32,
) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::with_capacity(len as usize);
    let end = offset + u64::from(len);
    let mut pos = offset;
    while pos < end {
        let index = pos / segment_bytes;
        let within = (pos % segment_bytes) as usize;
        let Some(seg) = segments.get(index).storage()? else {
            return Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                format!("log segment {index} is missing"),
            ));
        };
        let bytes = seg.value();
        if within >= bytes.len() {
            return Err(ReadError::corrupt(
                ObjectKind::Blob,
                id,
                format!("log segment {index} is shorter than expected"),
            ));
        }
        let n = (bytes.len() - within).min((end - pos) as usize);
        out.extend_from_slice(&bytes[within..within + n]);
        pos += n as u64;
    }
    Ok(out)
}

/// Decodes a packed payload and checks it against `id`.
pub(crate) fn unpack(
    id: BlobId,
    codec: Codec,
    payload: Vec<u8>,
    size: u64,
) -> Result<Vec<u8>, ReadError> {
    if size > CHUNK_BYTES as u64 {
        return Err(ReadError::corrupt(
            ObjectKind::Blob,
            id,
            "packed blob larger than a chunk",
        ));
    }
    let content = match codec {
        Codec::Raw => payload,
        Codec::Zstd => decompress(&payload, size as usize)
            .map_err(|e| ReadError::corrupt(ObjectKind::Blob, id, format!("zstd: {e}")))?,
    };
    if content.len() as u64 != size {
        return Err(ReadError::corrupt(
            ObjectKind::Blob,
            id,
            format!("{} bytes, expected {size}", content.len()),
        ));
    }
    if BlobId::of(&content) != id {
        return Err(ReadError::corrupt(
            ObjectKind::Blob,
            id,
            "content does not match its hash",
        ));
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_round_trip() {
        let packed = Location::Packed {
            offset: 7,
            len: 9,
            size: 11,
            codec: Codec::Zstd,
        };
        assert_eq!(Location::decode(&packed.encode()), Some(packed));
        let chunked = Location::Chunked {
            size: 5,
            chunks: vec![BlobId::of(b"a"), BlobId::of(b"b")],
        };
        assert_eq!(Location::decode(&chunked.encode()), Some(chunked));
        assert_eq!(Location::decode(&[0, 1, 2]), None);
        assert_eq!(Location::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 5]), None);
    }

    #[test]
    fn incompressible_content_is_stored_raw() {
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let p = PreparedBlob::new(&noise);
        assert!(p.stored_bytes() <= noise.len() as u64);
        let text = b"abcabcabc".repeat(500);
        let p = PreparedBlob::new(&text);
        assert!(p.stored_bytes() < 200, "repetitive text compresses");
    }
}
