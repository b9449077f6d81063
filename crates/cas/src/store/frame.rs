//! Small blobs compressed together (format 3).
//!
//! One zstd frame per tiny file compresses nothing: the frame's header and the lack of
//! context eat the gain. So [`Store::write`](crate::Store::write) gathers the batch's small
//! blobs the store lacks, in batch order (a directory's files sit together), into groups of
//! about [`GROUP_BYTES`], compresses each group as one frame (in parallel) and appends it
//! to the blob log; each member's record names the frame and its place in the decoded
//! frame. A [`Reader`](crate::Reader) keeps the last few decoded frames, so reading every
//! member of a frame decompresses it once.
//!
//! A frame is also what a remote holds (`docs/format.md`, "Remote layout, version 2"): a
//! push sends it as stored ([`Reader::frame`](crate::Reader::frame)), a fetch checks it
//! ([`verify_frame`](crate::verify_frame)) and writes it as it came
//! ([`WriteBatch::add_frame`](crate::WriteBatch::add_frame)), so one frame format serves both.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;

use super::blob::{Body, PreparedBlob, compress_frame, decompress};
use super::error::{Damage, ReadError, StorageFailure, ZstdError};
use crate::id::BlobId;
use crate::object::ObjectKind;

/// A group is closed once its members add up to this (decoded): zstd's gain has levelled
/// off by then, and reading one member decompresses at most this plus one small blob.
pub(crate) const GROUP_BYTES: usize = 64 << 10;

/// The largest frame, stored or decoded, a member record may point at: a damaged record
/// or frame header must not make a large allocation. A frame from elsewhere is held to it
/// too.
pub const MAX_FRAME_BYTES: u64 = 1 << 20;

/// Decoded frames a reader keeps.
const CACHED_FRAMES: usize = 8;

/// One member of a frame: its id and its bytes' place in the decoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMember {
    /// The blob.
    pub id: BlobId,
    /// Where its bytes start in the decoded frame.
    pub start: u32,
    /// Its size.
    pub size: u32,
}

/// A group of small blobs compressed together: one zstd frame (recording its decoded size)
/// of its members' concatenated contents, and the members it carries. Only a check against
/// every member's id makes one (or the store's own write), so a batch may take it as it is.
#[derive(Debug, Clone)]
pub struct Frame {
    pub(crate) bytes: Vec<u8>,
    pub(crate) members: Vec<FrameMember>,
}

impl Frame {
    /// The zstd frame, byte for byte as stored.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The members it carries (a frame may hold bytes of others no one asked for).
    pub fn members(&self) -> &[FrameMember] {
        &self.members
    }
}

/// A group frame of this store, as [`Reader::blob_source`](crate::Reader::blob_source)
/// names it: read it once for all its members with [`Reader::frame`](crate::Reader::frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRef {
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

/// True if `members` take at least half of a frame of `decoded` bytes: then the frame
/// travels and is kept whole; else its members go alone (a frame of mostly other blobs
/// would cost more than they do).
pub(crate) fn worth_whole(members: &[FrameMember], decoded: u64) -> bool {
    let wanted: u64 = members.iter().map(|m| u64::from(m.size)).sum();
    !members.is_empty() && wanted.saturating_mul(2) >= decoded
}

/// Groups the small blobs of `blobs` that `is_stored` says the store lacks (each id once,
/// in order) and compresses the groups in parallel. A group of one is left out: such a
/// blob is written alone, as before.
pub(crate) fn frames_for(
    blobs: &[PreparedBlob],
    is_stored: impl Fn(BlobId) -> Result<bool, StorageFailure>,
) -> Result<Vec<Frame>, StorageFailure> {
    let mut seen = HashSet::new();
    // Members by their place in `blobs`: a million small blobs make several groups.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current = Vec::new();
    let mut current_bytes = 0;
    for (i, blob) in blobs.iter().enumerate() {
        let Body::Small { content } = &blob.body else {
            continue;
        };
        if !seen.insert(&blob.id) || is_stored(blob.id)? {
            continue;
        }
        if !current.is_empty() && current_bytes + content.len() > GROUP_BYTES {
            groups.push(std::mem::take(&mut current));
            current_bytes = 0;
        }
        current_bytes += content.len();
        current.push(i);
    }
    groups.push(current);
    drop(seen);
    groups.retain(|g| g.len() > 1);
    Ok(groups
        .par_iter()
        .filter_map(|g| compress_group(blobs, g))
        .collect())
}

/// `None` if zstd failed: its members are then written alone.
fn compress_group(blobs: &[PreparedBlob], group: &[usize]) -> Option<Frame> {
    let members_of = || {
        group.iter().filter_map(|&i| match &blobs[i].body {
            Body::Small { content } => Some((blobs[i].id, content.as_slice())),
            _ => None,
        })
    };
    let mut decoded = Vec::with_capacity(members_of().map(|(_, c)| c.len()).sum());
    let mut members = Vec::with_capacity(group.len());
    for (id, content) in members_of() {
        members.push(FrameMember {
            id,
            start: u32::try_from(decoded.len()).ok()?,
            size: u32::try_from(content.len()).ok()?,
        });
        decoded.extend_from_slice(content);
    }
    Some(Frame {
        bytes: compress_frame(&decoded)?,
        members,
    })
}

/// The decoded size a frame's header records, within [`MAX_FRAME_BYTES`].
pub(crate) fn frame_size(stored: &[u8]) -> Result<u64, Damage> {
    match zstd::zstd_safe::get_frame_content_size(stored) {
        Ok(Some(size)) if size <= MAX_FRAME_BYTES => Ok(size),
        Ok(Some(size)) => Err(Damage::FrameTooLarge { size }),
        Ok(None) => Err(Damage::FrameUnsized),
        Err(zstd::zstd_safe::ContentSizeError) => Err(Damage::FrameZstd(ZstdError::Header)),
    }
}

fn decode(stored: &[u8]) -> Result<Vec<u8>, Damage> {
    let size = frame_size(stored)?;
    let decoded = decompress(stored, size as usize).map_err(Damage::FrameZstd)?;
    if decoded.len() as u64 != size {
        return Err(Damage::FrameSize {
            decoded: decoded.len() as u64,
            size,
        });
    }
    Ok(decoded)
}

/// The `size` bytes at `start` of a decoded frame, if they are the content `id` names.
fn member_bytes(id: BlobId, frame: &[u8], start: u64, size: u64) -> Result<&[u8], Damage> {
    let bytes = start
        .checked_add(size)
        .and_then(|end| frame.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?))
        .ok_or(Damage::PastFrame {
            size,
            start,
            frame: frame.len() as u64,
        })?;
    if BlobId::of(bytes) != id {
        return Err(Damage::HashMismatch);
    }
    Ok(bytes)
}

/// Decodes a group's frame as stored in the log, for member `id`'s read.
pub(crate) fn decode_frame(id: BlobId, stored: &[u8]) -> Result<Vec<u8>, ReadError> {
    decode(stored).map_err(|damage| ReadError::damaged(ObjectKind::Blob, id, damage))
}

/// Member `id`'s bytes in its decoded frame, checked against its id.
pub(crate) fn member_content(
    id: BlobId,
    frame: &[u8],
    start: u64,
    size: u64,
) -> Result<Vec<u8>, ReadError> {
    member_bytes(id, frame, start, size)
        .map(<[u8]>::to_vec)
        .map_err(|damage| ReadError::damaged(ObjectKind::Blob, id, damage))
}

/// What a frame received from elsewhere becomes (see [`verify_frame`](crate::verify_frame)).
#[derive(Debug, Clone)]
pub enum ReceivedFrame {
    /// Its members take at least half of it: kept as it came.
    Whole(Frame),
    /// Its members are a small part of it: each is stored on its own terms (grouped again
    /// with the batch's other small blobs).
    Apart(Vec<PreparedBlob>),
}

/// Decodes `stored` (a frame and its decoded bytes at most [`MAX_FRAME_BYTES`]) and checks
/// every member against its id; the error names the member and what is wrong.
pub(crate) fn receive(
    stored: Vec<u8>,
    members: Vec<FrameMember>,
) -> Result<ReceivedFrame, (BlobId, Damage)> {
    let first = members.first().map_or(BlobId::of(b""), |m| m.id);
    if stored.len() as u64 > MAX_FRAME_BYTES {
        return Err((
            first,
            Damage::StoredFrameTooLarge {
                len: stored.len() as u64,
            },
        ));
    }
    let decoded = decode(&stored).map_err(|damage| (first, damage))?;
    let mut contents = Vec::with_capacity(members.len());
    for m in &members {
        let bytes = member_bytes(m.id, &decoded, m.start.into(), m.size.into())
            .map_err(|damage| (m.id, damage))?;
        contents.push(bytes);
    }
    if worth_whole(&members, decoded.len() as u64) {
        return Ok(ReceivedFrame::Whole(Frame {
            bytes: stored,
            members,
        }));
    }
    Ok(ReceivedFrame::Apart(
        members
            .iter()
            .zip(contents)
            .map(|(m, bytes)| PreparedBlob::with_id(m.id, bytes))
            .collect(),
    ))
}

/// The last few decoded frames of one reader, by their offset in the log (which a reader's
/// view never changes). Shared by the threads reading through one reader.
#[derive(Default)]
pub(crate) struct FrameCache {
    frames: Mutex<VecDeque<(u64, Arc<Vec<u8>>)>>,
}

impl FrameCache {
    /// The decoded frame at `offset`, from the cache or from `load`.
    pub(crate) fn get_or_load(
        &self,
        offset: u64,
        load: impl FnOnce() -> Result<Vec<u8>, ReadError>,
    ) -> Result<Arc<Vec<u8>>, ReadError> {
        let lock = || self.frames.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, frame)) = lock().iter().find(|(o, _)| *o == offset) {
            return Ok(Arc::clone(frame));
        }
        // Decompressed unlocked: other threads read other frames meanwhile.
        let frame = Arc::new(load()?);
        let mut frames = lock();
        if !frames.iter().any(|(o, _)| *o == offset) {
            if frames.len() >= CACHED_FRAMES {
                frames.pop_front();
            }
            frames.push_back((offset, Arc::clone(&frame)));
        }
        Ok(frame)
    }

    /// How many frames it holds (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.frames
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A member's share of its frame's stored bytes: its part of `members_bytes`, what the
/// frame's recorded members add up to. What `gc` counts for it.
pub(crate) fn member_share(frame_len: u32, size: u64, members_bytes: u64) -> u64 {
    if members_bytes == 0 {
        return u64::from(frame_len);
    }
    (u128::from(frame_len) * u128::from(size.min(members_bytes)))
        .div_ceil(u128::from(members_bytes)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::blob::SMALL_BLOB_BYTES;

    fn small(content: &[u8]) -> PreparedBlob {
        PreparedBlob::new(content)
    }

    #[test]
    fn small_blobs_group_in_order_once_each_and_big_ones_stay_out() {
        let contents: Vec<Vec<u8>> = (0..3000)
            .map(|i| {
                format!(
                    "// generated file {i}\nconst VALUE_{i}: u64 = {};\n",
                    i * 31
                )
                .into_bytes()
            })
            .collect();
        let mut blobs: Vec<PreparedBlob> = contents.iter().map(|c| small(c)).collect();
        blobs.push(small(&contents[5]));
        blobs.push(PreparedBlob::new(&vec![7u8; SMALL_BLOB_BYTES + 1]));
        let stored = BlobId::of(&contents[1]);
        let frames = frames_for(&blobs, |id| Ok(id == stored)).unwrap();
        let members: Vec<BlobId> = frames
            .iter()
            .flat_map(|f| f.members.iter().map(|m| m.id))
            .collect();
        let expected: Vec<BlobId> = contents
            .iter()
            .map(|c| BlobId::of(c))
            .filter(|id| *id != stored)
            .collect();
        assert_eq!(
            members, expected,
            "batch order, each once, stored ones left out"
        );
        assert!(frames.len() > 1, "groups close at GROUP_BYTES");
        for frame in &frames {
            let decoded = decode_frame(frame.members[0].id, &frame.bytes).unwrap();
            assert!(decoded.len() <= GROUP_BYTES);
            for m in &frame.members {
                let bytes = member_content(m.id, &decoded, m.start.into(), m.size.into()).unwrap();
                assert_eq!(BlobId::of(&bytes), m.id);
            }
        }
        let stored_total: usize = frames.iter().map(|f| f.bytes.len()).sum();
        let content_total: usize = expected.len() * contents[100].len();
        assert!(
            stored_total * 4 < content_total,
            "{stored_total} of {content_total}"
        );
    }

    #[test]
    fn a_lone_small_blob_makes_no_frame() {
        let frames = frames_for(&[small(b"one"), small(b"one")], |_| Ok(false)).unwrap();
        assert!(frames.is_empty());
    }

    #[test]
    fn members_past_their_frame_or_of_other_bytes_are_errors_naming_the_blob() {
        let id = BlobId::of(b"abc");
        let frame = b"xxabcxx";
        assert_eq!(member_content(id, frame, 2, 3).unwrap(), b"abc");
        for (start, size) in [(5, 3), (u64::MAX, 2), (0, u64::MAX), (1, 3)] {
            let e = member_content(id, frame, start, size).unwrap_err();
            assert!(e.to_string().contains(&id.to_string()), "{e}");
        }
        let e = decode_frame(id, b"not a zstd frame").unwrap_err();
        assert!(e.to_string().contains(&id.to_string()), "{e}");
        let huge = zstd::bulk::compress(&vec![0u8; 2 << 20], 3).unwrap();
        let e = decode_frame(id, &huge).unwrap_err();
        assert!(e.to_string().contains("claims"), "{e}");
    }

    #[test]
    fn the_cache_keeps_the_last_frames_and_loads_each_once() {
        let cache = FrameCache::default();
        let mut loads = 0;
        for offset in [1u64, 1, 2, 1] {
            cache
                .get_or_load(offset, || {
                    loads += 1;
                    Ok(vec![offset as u8])
                })
                .unwrap();
        }
        assert_eq!(loads, 2);
        for offset in 10..30 {
            cache.get_or_load(offset, || Ok(Vec::new())).unwrap();
        }
        assert_eq!(cache.len(), CACHED_FRAMES);
        let e = cache.get_or_load(99, || {
            Err(ReadError::corrupt(ObjectKind::Blob, BlobId::of(b""), "x"))
        });
        assert!(e.is_err());
        assert_eq!(cache.len(), CACHED_FRAMES);
    }

    #[test]
    fn a_reader_decodes_each_frame_once_for_all_its_members() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = camino::Utf8Path::from_path(dir.path())
            .expect("utf-8")
            .join("store");
        let options = crate::OpenOptions {
            create: true,
            ..crate::OpenOptions::default()
        };
        let store = crate::Store::open(&root, &options).expect("store");
        let mut batch = crate::WriteBatch::new();
        let contents: Vec<Vec<u8>> = (0..200)
            .map(|i| format!("file {i}\n").into_bytes())
            .collect();
        for c in &contents {
            batch.add_blob(small(c));
        }
        store.write(&batch).expect("write");
        let reader = store.reader().expect("reader");
        for c in contents.iter().rev() {
            assert_eq!(&reader.blob(BlobId::of(c)).expect("read"), c);
        }
        assert_eq!(reader.frames.len(), 1, "one frame, decoded once, kept");
    }

    #[test]
    fn shares_add_up_to_the_frame() {
        let sizes = [10u64, 20, 70];
        let total: u64 = sizes.iter().map(|s| member_share(1000, *s, 100)).sum();
        assert!((1000..1003).contains(&total), "{total}");
        assert_eq!(member_share(1000, 5, 0), 1000);
    }
}
