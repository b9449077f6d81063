//! Objects as they travel between stores (`cairn`'s remotes): a blob's stored payload, or
//! the group frame holding it, goes out as it is, without compressing it again, and comes
//! back in checked against its id before it can join a batch; and the objects a store
//! lacks but knows where to find.

use super::blob::{Body, Codec, Location, PreparedBlob, decompress};
use super::error::{Damage, ReadError, StorageFailure};
use super::frame::{Frame, FrameMember, FrameRef, MAX_FRAME_BYTES};
use super::reader::Reader;
use super::side::PROMISED;
use crate::id::{BlobId, ObjectId};
use crate::object::ObjectKind;

/// A blob's bytes for transfer: zstd-compressed (`zstd`) or raw, `size` bytes decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobPayload {
    /// The content's size.
    pub size: u64,
    /// True if `bytes` is a zstd frame, false if it is the content itself.
    pub zstd: bool,
    /// The payload.
    pub bytes: Vec<u8>,
}

/// Where a blob's bytes for transfer come from (see [`Reader::blob_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobSource {
    /// Its own payload: [`Reader::blob_payload`]. `size` is the content's.
    Alone {
        /// The content's size.
        size: u64,
    },
    /// Over [`CHUNK_BYTES`](crate::CHUNK_BYTES), cut into chunks, each a blob of its own
    /// stored alone: [`Reader::blob_chunks`].
    Chunked {
        /// The content's size.
        size: u64,
    },
    /// A member of group frame `frame`: read it once for all its members wanted with
    /// [`Reader::frame`].
    Member {
        /// The frame.
        frame: FrameRef,
        /// The blob's place in it.
        member: FrameMember,
    },
}

impl BlobSource {
    /// The content's size.
    pub fn size(&self) -> u64 {
        match self {
            BlobSource::Alone { size } | BlobSource::Chunked { size } => *size,
            BlobSource::Member { member, .. } => member.size.into(),
        }
    }
}

impl Reader {
    /// How blob `id` is stored, without reading it: alone, or a member of a group frame.
    pub fn blob_source(&self, id: BlobId) -> Result<BlobSource, ReadError> {
        match self.location(id)? {
            Location::Member {
                frame_offset,
                frame_len,
                start,
                size,
            } => {
                let fits = |v: u64| {
                    u32::try_from(v)
                        .ok()
                        .filter(|v| u64::from(*v) <= MAX_FRAME_BYTES)
                };
                match (fits(start), fits(size)) {
                    (Some(start), Some(size)) => Ok(BlobSource::Member {
                        frame: FrameRef {
                            offset: frame_offset,
                            len: frame_len,
                        },
                        member: FrameMember { id, start, size },
                    }),
                    _ => Err(ReadError::corrupt(
                        ObjectKind::Blob,
                        id,
                        format!("its {size} bytes at {start} lie past any group's frame"),
                    )),
                }
            }
            Location::Chunked { size, .. } => Ok(BlobSource::Chunked { size }),
            Location::Packed { size, .. } => Ok(BlobSource::Alone { size }),
        }
    }

    /// Group frame `at` as stored, carrying `members` (each checked against its id in the
    /// decoded frame), if they take at least half of its decoded bytes; `None` if they
    /// take less: then each goes alone ([`Reader::blob_payload`]).
    pub fn frame(
        &self,
        at: FrameRef,
        members: Vec<FrameMember>,
    ) -> Result<Option<Frame>, ReadError> {
        let Some(first) = members.first().map(|m| m.id) else {
            return Ok(None);
        };
        let corrupt = |damage| ReadError::damaged(ObjectKind::Blob, first, damage);
        if u64::from(at.len) > MAX_FRAME_BYTES {
            return Err(corrupt(Damage::StoredFrameTooLarge {
                len: u64::from(at.len),
            }));
        }
        let stored = self
            .health
            .run(|| self.read_log(ObjectKind::Blob, first.into(), at.offset, at.len))?;
        let decoded = super::frame::frame_size(&stored).map_err(corrupt)?;
        if !super::frame::worth_whole(&members, decoded) {
            return Ok(None);
        }
        match super::frame::receive(stored, members) {
            Ok(super::frame::ReceivedFrame::Whole(frame)) => Ok(Some(frame)),
            Ok(super::frame::ReceivedFrame::Apart(_)) => Ok(None),
            Err((id, damage)) => Err(ReadError::damaged(ObjectKind::Blob, id, damage)),
        }
    }

    /// The blob's payload for transfer, verified against its id: a blob stored whole goes
    /// out as stored; a member of a group of small blobs, and a chunked one (over
    /// [`CHUNK_BYTES`](crate::CHUNK_BYTES)), are read whole and compressed on their own.
    pub fn blob_payload(&self, id: BlobId) -> Result<BlobPayload, ReadError> {
        match self.location(id)? {
            Location::Packed {
                offset,
                len,
                size,
                codec,
            } => {
                let payload = self
                    .health
                    .run(|| self.read_log(ObjectKind::Blob, id.into(), offset, len))?;
                super::blob::unpack(id, codec, payload.clone(), size)?;
                Ok(BlobPayload {
                    size,
                    zstd: codec == Codec::Zstd,
                    bytes: payload,
                })
            }
            Location::Chunked { size, .. } | Location::Member { size, .. } => {
                let content = self.blob(id)?;
                let (codec, bytes) = super::blob::compress(&content);
                Ok(BlobPayload {
                    size,
                    zstd: codec == Codec::Zstd,
                    bytes,
                })
            }
        }
    }

    /// The remote a missing object is known to be on, if any (see [`PROMISED`]).
    pub fn promised(&self, id: ObjectId) -> Result<Option<String>, StorageFailure> {
        Ok(self
            .side_get(PROMISED, "", id.as_bytes())?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }
}

/// Why a received blob payload is not the blob it claims to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadError {
    /// It does not decode to its recorded size.
    Bad(String),
    /// It decodes to other content.
    Mismatch(BlobId),
}

impl PreparedBlob {
    /// A blob received as `payload`, checked to be the content `claimed` names before it
    /// can be stored: a payload of one chunk is kept as it came, unless it is small (then,
    /// as a larger blob, it is prepared as a local write would, to be compressed with the
    /// batch's other small blobs). (`cas::verify_blob_payload` gives the error
    /// as a [`VerifyError`](crate::VerifyError).)
    pub fn from_payload(
        claimed: BlobId,
        payload: BlobPayload,
    ) -> Result<PreparedBlob, PayloadError> {
        let size = usize::try_from(payload.size).map_err(|_| {
            PayloadError::Bad(format!("size {} does not fit in memory", payload.size))
        })?;
        let content = if payload.zstd {
            decompress(&payload.bytes, size).map_err(|e| PayloadError::Bad(format!("zstd: {e}")))?
        } else {
            payload.bytes.clone()
        };
        if content.len() != size {
            return Err(PayloadError::Bad(format!(
                "{} bytes, its record says {size}",
                content.len()
            )));
        }
        let actual = BlobId::of(&content);
        if actual != claimed {
            return Err(PayloadError::Mismatch(actual));
        }
        if size > super::blob::CHUNK_BYTES || size <= super::blob::SMALL_BLOB_BYTES {
            return Ok(PreparedBlob::with_id(actual, &content));
        }
        let codec = if payload.zstd {
            Codec::Zstd
        } else {
            Codec::Raw
        };
        Ok(PreparedBlob {
            id: actual,
            size: payload.size,
            body: Body::Packed {
                codec,
                payload: payload.bytes,
            },
        })
    }
}
