//! How blob bytes live in redb: the blob log and chunking.
//!
//! Compressed blobs are appended to one logical byte stream, the *blob log*, stored as
//! fixed-size segments (`SEGMENTS` table). A blob's location is its offset and length in the
//! log, so small blobs pack densely and large values do not suffer redb's power-of-two page
//! rounding. Blobs larger than [`CHUNK_BYTES`] are split into chunks, each a blob of its own;
//! the large blob's entry lists the chunk ids, so memory stays bounded by one chunk.

use std::cell::RefCell;

use integer_encoding::VarInt;
use redb::{ReadableTable, Table};

use super::error::{Damage, ReadError, StorageFailure, StorageResult, ZstdError};
use crate::id::{BlobId, ObjectId};
use crate::object::ObjectKind;

/// Blobs up to this size are written in groups (`frame`). Files this small gain little
/// from zstd alone, and most files of a source tree are this small; larger ones compress
/// well by themselves, and keeping them out bounds what reading one member decompresses.
pub(crate) const SMALL_BLOB_BYTES: usize = 16 << 10;

/// Blobs larger than this are stored as a list of chunks of this size.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The segment size for new stores (format 4): as much as fits one 4 KiB page with its
/// key. redb's compaction moves a page only into a free run of its own size lower in the
/// file, so format 3's 1 MiB segments found none among the small pages other tables free,
/// and stopped there (1M files: 47 MB of free pages kept in a 170 MB file). Single pages
/// always move; a read of a small file also reads one page, not a MiB.
pub(crate) const DEFAULT_SEGMENT_BYTES: u64 = 4080;

/// The segment sizes a store may have; anything else in its meta table is damage.
pub(crate) const MIN_SEGMENT_BYTES: u64 = 1 << 10;
pub(crate) const MAX_SEGMENT_BYTES: u64 = 64 << 20;

const ZSTD_LEVEL: i32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    Raw = 0,
    Zstd = 1,
}

/// Where a blob's bytes are. A record is a tag byte, then the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// `len` bytes at `offset` of the blob log, encoded with `codec`, `size` bytes decoded.
    /// Tag 0: `offset` (8 bytes), `len` (4), `size` (8), the codec byte. Fixed-width as in
    /// format 2: only blobs over [`SMALL_BLOB_BYTES`], and small ones written alone,
    /// have such a record, and with varints redb laid the `blobs` table's pages out
    /// differently enough that a budgeted gc's compaction left the file a page run larger
    /// more often (the CLI's budget test, 3 runs in 20).
    Packed {
        offset: u64,
        len: u32,
        size: u64,
        codec: Codec,
    },
    /// The concatenation of chunk blobs. Tag 1: `size` (8 bytes), then the chunk ids.
    Chunked { size: u64, chunks: Vec<BlobId> },
    /// `size` bytes at `start` of the zstd frame of `frame_len` bytes at `frame_offset` of
    /// the log, decoded: a member of a group of small blobs (see `frame`). Tag 2: the four
    /// as varints.
    Member {
        frame_offset: u64,
        frame_len: u32,
        start: u64,
        size: u64,
    },
}

const TAG_PACKED: u8 = 0;
const TAG_CHUNKED: u8 = 1;
const TAG_MEMBER: u8 = 2;

/// Appends `v` as an unsigned LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 10];
    let n = VarInt::encode_var(v, &mut buf);
    out.extend_from_slice(&buf[..n]);
}

/// Takes one varint off the front of `bytes`; `None` if it is cut short, overflows a `u64`
/// or is longer than it needs to be (so that every value has one encoding).
pub(crate) fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let (v, n) = <u64 as VarInt>::decode_var(bytes)?;
    if n != v.required_space() {
        return None;
    }
    *bytes = &bytes[n..];
    Some(v)
}

/// A log extent (`offset`, `len`) as two varints, with nothing after them.
pub(crate) fn decode_extent(mut bytes: &[u8]) -> Option<(u64, u32)> {
    let offset = take_varint(&mut bytes)?;
    let len = u32::try_from(take_varint(&mut bytes)?).ok()?;
    bytes.is_empty().then_some((offset, len))
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
                out.push(TAG_PACKED);
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&size.to_le_bytes());
                out.push(*codec as u8);
                out
            }
            Location::Chunked { size, chunks } => {
                let mut out = Vec::with_capacity(9 + chunks.len() * 32);
                out.push(TAG_CHUNKED);
                out.extend_from_slice(&size.to_le_bytes());
                for c in chunks {
                    out.extend_from_slice(c.as_bytes());
                }
                out
            }
            Location::Member {
                frame_offset,
                frame_len,
                start,
                size,
            } => {
                let mut out = Vec::with_capacity(16);
                out.push(TAG_MEMBER);
                for v in [*frame_offset, u64::from(*frame_len), *start, *size] {
                    put_varint(&mut out, v);
                }
                out
            }
        }
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Location> {
        let (&tag, mut rest) = bytes.split_first()?;
        let codec = |b: u8| match b {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            _ => None,
        };
        match tag {
            TAG_PACKED if rest.len() == 21 => Some(Location::Packed {
                offset: u64::from_le_bytes(rest[0..8].try_into().ok()?),
                len: u32::from_le_bytes(rest[8..12].try_into().ok()?),
                size: u64::from_le_bytes(rest[12..20].try_into().ok()?),
                codec: codec(rest[20])?,
            }),
            TAG_CHUNKED if rest.len() >= 8 && (rest.len() - 8) % 32 == 0 => {
                let size = u64::from_le_bytes(rest[0..8].try_into().ok()?);
                let chunks = rest[8..]
                    .chunks_exact(32)
                    .map(|c| c.try_into().map(BlobId::from_bytes))
                    .collect::<Result<Vec<_>, _>>()
                    .ok()?;
                Some(Location::Chunked { size, chunks })
            }
            TAG_MEMBER => {
                let frame_offset = take_varint(&mut rest)?;
                let frame_len = u32::try_from(take_varint(&mut rest)?).ok()?;
                let start = take_varint(&mut rest)?;
                let size = take_varint(&mut rest)?;
                rest.is_empty().then_some(Location::Member {
                    frame_offset,
                    frame_len,
                    start,
                    size,
                })
            }
            _ => None,
        }
    }

    pub(crate) fn size(&self) -> u64 {
        match self {
            Location::Packed { size, .. }
            | Location::Chunked { size, .. }
            | Location::Member { size, .. } => *size,
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
    /// Up to [`SMALL_BLOB_BYTES`], compressed by the write, with the batch's other
    /// small blobs.
    Small {
        content: Vec<u8>,
    },
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

/// One zstd frame of `content` (recording its size), with this thread's compressor.
pub(crate) fn compress_frame(content: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        slot.as_mut().and_then(|c| c.compress(content).ok())
    })
}

pub(crate) fn compress(content: &[u8]) -> (Codec, Vec<u8>) {
    match compress_frame(content) {
        Some(c) if c.len() < content.len() => (Codec::Zstd, c),
        _ => (Codec::Raw, content.to_vec()),
    }
}

pub(crate) fn decompress(payload: &[u8], size: usize) -> Result<Vec<u8>, ZstdError> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let decompressor = match slot.take() {
            Some(d) => d,
            None => zstd::bulk::Decompressor::new().map_err(ZstdError::Decode)?,
        };
        slot.insert(decompressor)
            .decompress(payload, size)
            .map_err(ZstdError::Decode)
    })
}

/// The largest tree a frame without its size may decode to.
const MAX_UNSIZED_FRAME: usize = 256 << 20;

/// Decompresses one zstd frame whose decoded size it records (as every frame cairn
/// writes does), with this thread's decompressor.
pub(crate) fn decompress_frame(payload: &[u8]) -> Result<Vec<u8>, ZstdError> {
    match zstd::zstd_safe::get_frame_content_size(payload) {
        Ok(Some(size)) if size <= MAX_UNSIZED_FRAME as u64 => decompress(payload, size as usize),
        Ok(Some(size)) => Err(ZstdError::TooLarge { size }),
        Ok(None) => zstd::stream::decode_all(payload).map_err(ZstdError::Decode),
        Err(zstd::zstd_safe::ContentSizeError) => Err(ZstdError::Header),
    }
}

impl PreparedBlob {
    /// Hashes and compresses `content`; content over [`CHUNK_BYTES`] is chunked, and small
    /// content is compressed later, by the write, together with the batch's other small
    /// blobs.
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
        if content.len() <= SMALL_BLOB_BYTES {
            PreparedBlob {
                id,
                size,
                body: Body::Small {
                    content: content.to_vec(),
                },
            }
        } else if content.len() <= CHUNK_BYTES {
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

    /// Bytes this blob adds to the log if none of it is stored yet, at most (small blobs
    /// count their content: they are compressed with others when written).
    pub fn stored_bytes(&self) -> u64 {
        match &self.body {
            Body::Small { content } => content.len() as u64,
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

    pub(crate) fn segment_bytes(&self) -> u64 {
        self.segment_bytes
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

/// Reads `len` bytes at `offset` of the blob log, for object `id` of `kind`.
pub(crate) fn read_log(
    segments: &impl ReadableTable<u64, &'static [u8]>,
    segment_bytes: u64,
    (kind, id): (ObjectKind, ObjectId),
    offset: u64,
    len: u32,
) -> Result<Vec<u8>, ReadError> {
    // Grown as segments are found: a damaged length must not allocate up front.
    let mut out = Vec::with_capacity((len as usize).min(CHUNK_BYTES));
    if len == 0 {
        return Ok(out);
    }
    let Some(end) = offset.checked_add(u64::from(len)) else {
        return Err(ReadError::corrupt(
            kind,
            id,
            "its place in the log is past any end",
        ));
    };
    let mut pos = offset;
    let missing =
        |index: u64| ReadError::corrupt(kind, id, format!("log segment {index} is missing"));
    // One walk along the table's leaves, not a lookup per segment.
    for entry in segments
        .range(pos / segment_bytes..=(end - 1) / segment_bytes)
        .storage()?
    {
        let (key, seg) = entry.storage()?;
        let index = pos / segment_bytes;
        if key.value() != index {
            return Err(missing(index));
        }
        let within = (pos % segment_bytes) as usize;
        let bytes = seg.value();
        // Only the log's last segment is partial; what is read ends within it.
        let needed = segment_bytes.min(end - index * segment_bytes);
        if (bytes.len() as u64) < needed || bytes.len() as u64 > segment_bytes {
            return Err(ReadError::corrupt(
                kind,
                id,
                format!("log segment {index} is not the size it should be"),
            ));
        }
        let n = (bytes.len() - within).min((end - pos) as usize);
        out.extend_from_slice(&bytes[within..within + n]);
        pos += n as u64;
        if pos == end {
            return Ok(out);
        }
    }
    Err(missing(pos / segment_bytes))
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
            .map_err(|e| ReadError::damaged(ObjectKind::Blob, id, Damage::Zstd(e)))?,
    };
    if content.len() as u64 != size {
        return Err(ReadError::corrupt(
            ObjectKind::Blob,
            id,
            format!("{} bytes, expected {size}", content.len()),
        ));
    }
    if BlobId::of(&content) != id {
        return Err(ReadError::damaged(
            ObjectKind::Blob,
            id,
            Damage::HashMismatch,
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
        assert_eq!(Location::decode(&packed.encode()), Some(packed.clone()));
        assert_eq!(packed.encode().len(), 22);
        let chunked = Location::Chunked {
            size: 5,
            chunks: vec![BlobId::of(b"a"), BlobId::of(b"b")],
        };
        assert_eq!(Location::decode(&chunked.encode()), Some(chunked));
        let member = Location::Member {
            frame_offset: 1 << 40,
            frame_len: 70_000,
            start: 300,
            size: 60,
        };
        assert_eq!(Location::decode(&member.encode()), Some(member.clone()));
        assert!(member.encode().len() < 14, "{:?}", member.encode());
        // Format 2's record is the same.
        let mut fixed = vec![0];
        fixed.extend_from_slice(&7u64.to_le_bytes());
        fixed.extend_from_slice(&9u32.to_le_bytes());
        fixed.extend_from_slice(&11u64.to_le_bytes());
        fixed.push(1);
        assert_eq!(fixed, packed.encode());
        assert_eq!(
            Location::decode(&member.encode()[..member.encode().len() - 1]),
            None
        );
        // Overlong varints, trailing bytes and cut records are not records.
        assert_eq!(Location::decode(&[2, 0x80, 0, 1, 1, 1]), None);
        assert_eq!(Location::decode(&[2, 1, 1, 1, 1, 0]), None);
        assert_eq!(Location::decode(&[2, 1, 1, 1]), None);
        assert_eq!(Location::decode(&[3, 1, 1, 1, 1]), None);
        assert_eq!(Location::decode(&[0, 1, 2]), None);
        assert_eq!(Location::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 5]), None);
    }

    #[test]
    fn varints_round_trip_with_one_encoding_each() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut slice = out.as_slice();
            assert_eq!(take_varint(&mut slice), Some(v));
            assert!(slice.is_empty());
        }
        assert_eq!(take_varint(&mut &[0xff; 10][..]), None);
        assert_eq!(take_varint(&mut &[0x80, 0x80][..]), None);
    }

    #[test]
    fn incompressible_content_is_stored_raw() {
        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let p = PreparedBlob::new(&noise);
        assert!(p.stored_bytes() <= noise.len() as u64);
        let text = b"abcabcabc".repeat(5000);
        let p = PreparedBlob::new(&text);
        assert!(p.stored_bytes() < 200, "repetitive text compresses");
        let small = PreparedBlob::new(&text[..4500]);
        assert_eq!(
            small.stored_bytes(),
            4500,
            "small blobs are compressed by the write"
        );
    }
}
