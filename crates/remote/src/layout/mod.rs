//! The remote layout, version 5 (`docs/format.md` describes it byte by byte; versions 1
//! to 4 are still read). Under the remote's prefix:
//!
//! ```text
//! cairn-remote               {"format": 5}: what is here, written by the first `remote add`
//! packs/<pack id>            payloads, each a whole object, a group frame of small blobs
//!                            (byte for byte the store's) or a large blob's list of chunks
//!                            (each chunk a blob of its own), with the objects it holds
//! index/t<d>/<h>/t<ms>-<pack id>
//!                            the pack's index: where each object is; written after the pack,
//!                            named by the writer's clock (Unix milliseconds, 16 digits) so
//!                            that a listing can start after what a store saw last, in
//!                            folders by its first 8 digits and the next 2 (about a day, and
//!                            17 minutes) so that on a folder remote it reads only those
//!                            (version 4 wrote `index/t<ms>-<pack id>`, versions 1 to 3
//!                            `index/<pack id>`, still read)
//! refs/<name>/<seq>          a ref's history: create-only, the highest <seq> is its value
//!                            (a name's parts of 16 hex digits are written `=<part>`: `refs`)
//! pins/<snapshot id>         a snapshot pushed by id, kept by remote gc until `ref rm ID@REMOTE`
//! gc/<time>-<nonce>          packs remote gc condemned, deleted by a later gc after the grace
//! attestations/<tree id>/…   the checks recorded of a tree, in no pack (`attestations`)
//! ```
//!
//! A pack id is the BLAKE3 of the pack's bytes. Snapshots go in the last pack of a push,
//! after every other pack and index is written: an object is visible only through an
//! index, so a snapshot visible on a remote has everything it reaches there too.

use cas::{BlobId, CHUNK_BYTES, FrameMember, MAX_FRAME_BYTES, ObjectId, ObjectKind};

/// The layout version this build writes (its packs and indexes are version 3's; only
/// the names of indexes changed).
pub const FORMAT: u64 = 5;
/// The older versions it reads (and rewrites the marker of before its first pack there).
pub const FORMAT_1: u64 = 1;
/// See [`FORMAT_1`].
pub const FORMAT_2: u64 = 2;
/// See [`FORMAT_1`].
pub const FORMAT_3: u64 = 3;
/// See [`FORMAT_1`]: indexes named by time, in one folder.
pub const FORMAT_4: u64 = 4;
/// The marker object.
pub const MARKER: &str = "cairn-remote";
/// Packs are cut once they reach this many bytes (restic found tens of MB fast on S3).
pub const PACK_TARGET: usize = 32 << 20;
/// The bytes of a chunk list per chunk: its id.
const CHUNK_ID: u64 = 32;

const PACK_MAGIC: &[u8; 8] = b"CAIRNPK3";
const INDEX_MAGIC: &[u8; 8] = b"CAIRNIX3";
const PACK_MAGIC_2: &[u8; 8] = b"CAIRNPK2";
const INDEX_MAGIC_2: &[u8; 8] = b"CAIRNIX2";
const PACK_MAGIC_1: &[u8; 8] = b"CAIRNPK1";
const INDEX_MAGIC_1: &[u8; 8] = b"CAIRNIX1";
/// Before the entries of an index: magic, pack id, count.
const INDEX_FIXED: usize = 8 + 32 + 4;
/// kind, flags, id, size, offset, len, start.
const INDEX_ENTRY: usize = 1 + 1 + 32 + 8 + 8 + 4 + 4;
/// Version 1: kind, flags, id, size, offset, len.
const INDEX_ENTRY_1: usize = 1 + 1 + 32 + 8 + 8 + 4;
/// Before a payload in a pack: flags, how many objects it holds, its length.
const PAYLOAD_HEADER: usize = 1 + 4 + 4;
/// Then, per object it holds: kind, id, size, start.
const OBJECT_HEADER: usize = 1 + 32 + 8 + 4;
/// Version 1, before a payload: kind, flags, id, size, len.
const PACK_ENTRY_HEADER_1: usize = 1 + 1 + 32 + 8 + 4;
/// The most bytes one pack entry holds (its length is 32 bits).
pub const MAX_PAYLOAD: u64 = u32::MAX as u64;
/// The most objects one group frame carries in a pack (a store's frames hold far fewer:
/// 64 KiB of distinct small files).
pub const MAX_FRAME_MEMBERS: usize = 1 << 16;
/// The largest pack a push writes: cut at [`PACK_TARGET`], so at most one entry past it,
/// a whole object (a frame's entry, members and all, is smaller).
pub const MAX_PACK: u64 =
    PACK_TARGET as u64 + (PAYLOAD_HEADER + OBJECT_HEADER) as u64 + MAX_PAYLOAD + 8;
/// The largest index a push writes: an entry per object of the pack, each taking at least
/// [`OBJECT_HEADER`] bytes of it before the last entry, which may be a frame of
/// [`MAX_FRAME_MEMBERS`]. (Version 1's bound is smaller.)
pub const MAX_INDEX: u64 =
    ((PACK_TARGET / OBJECT_HEADER + 1 + MAX_FRAME_MEMBERS) * INDEX_ENTRY + INDEX_FIXED + 32) as u64;
/// The largest record (a ref entry, a pin, the marker, a gc record) cairn reads.
pub const MAX_RECORD: u64 = 16 << 20;

/// The key of a pack.
pub fn pack_key(pack: &str) -> String {
    format!("packs/{pack}")
}
/// The name under `index/` of the index of `pack`, written at `millis` (Unix
/// milliseconds by the writer's clock): `t<8 digits>/<2 digits>/t<16 digits>-<pack id>`,
/// the folders the time's first digits. They sort by time, and after every name of
/// layouts 1 to 3 (a bare pack id, hex); a name of layout 4 (`t<16 digits>-<pack id>`)
/// sorts after those of its own day folder.
pub fn index_name(millis: u64, pack: &str) -> String {
    format!("{}-{pack}", time_prefix(millis))
}

/// Digits of a name's time that name its day folder (10^8 ms, about 28 hours), and after
/// them its span folder (10^6 ms, about 17 minutes): a listing from a mark reads the day
/// folders' names, those of one day's spans, and the spans since the mark.
const DAY_DIGITS: usize = 8;
const SPAN_DIGITS: usize = 2;

/// What the names written at `millis` start with; a listing from here on meets every
/// name written at or after it.
pub fn time_prefix(millis: u64) -> String {
    let digits = format!("{millis:016}");
    let (day, rest) = digits.split_at(DAY_DIGITS);
    format!("t{day}/{}/t{digits}", &rest[..SPAN_DIGITS])
}

/// The name under `index/` of an index written now.
pub fn index_name_now(pack: &str) -> String {
    index_name(now_millis(), pack)
}

/// The clock, in Unix milliseconds (0 before 1970).
pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The pack a name under `index/` indexes, and when it was written (`None` for a name of
/// layouts 1 to 3: a bare pack id); `None` for a name that is none (a layout 5 name in
/// folders other than its time's is none either: listings from a mark would miss it).
pub fn parse_index_name(name: &str) -> Option<(&str, Option<u64>)> {
    if is_pack_id(name) {
        return Some((name, None));
    }
    let file = name.rsplit_once('/').map_or(name, |(_, file)| file);
    let (time, pack) = file.strip_prefix('t')?.split_once('-')?;
    if time.len() != 16 || !time.bytes().all(|b| b.is_ascii_digit()) || !is_pack_id(pack) {
        return None;
    }
    let millis: u64 = time.parse().ok()?;
    if file.len() != name.len() && name != index_name(millis, pack) {
        return None;
    }
    Some((pack, Some(millis)))
}

fn is_pack_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The key of an index named `name` (see [`index_name`]).
pub fn index_key(name: &str) -> String {
    format!("index/{name}")
}
/// The key of a pin.
pub fn pin_key(id: &cas::SnapshotId) -> String {
    format!("pins/{id}")
}

/// Why a pack or index cannot be written or read: what it says, naming the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// An object's payload longer than a pack entry holds.
    #[error("{kind:?} {id} is {len} bytes stored, more than the {MAX_PAYLOAD} a pack entry holds")]
    TooLong {
        /// The object's kind.
        kind: ObjectKind,
        /// Its id.
        id: ObjectId,
        /// Its payload's length.
        len: usize,
    },
    /// A large blob's chunk list longer than a pack entry holds.
    #[error("blob {id} is {len} bytes stored, more than the {MAX_PAYLOAD} a pack entry holds")]
    ChunkListTooLong {
        /// The blob.
        id: BlobId,
        /// Its list's length.
        len: usize,
    },
    /// A payload longer than a pack entry holds.
    #[error("{len} bytes stored, more than the {MAX_PAYLOAD} a pack entry holds")]
    PayloadTooLong {
        /// Its length.
        len: usize,
    },
    /// A group frame with no members or more than [`MAX_FRAME_MEMBERS`].
    #[error("{} carries {count} members", group_frame(.first))]
    FrameMembers {
        /// Its first member.
        first: Option<BlobId>,
        /// How many it has.
        count: usize,
    },
    /// A group frame larger than [`MAX_FRAME_BYTES`].
    #[error("{} is {len} bytes", group_frame(.first))]
    FrameTooLarge {
        /// Its first member.
        first: Option<BlobId>,
        /// Its length.
        len: usize,
    },
    /// A group frame placing a member past [`MAX_FRAME_BYTES`].
    #[error("{} places blob {member} at {start} past any frame", group_frame(.first))]
    MemberPastFrame {
        /// Its first member.
        first: Option<BlobId>,
        /// The member.
        member: BlobId,
        /// Where it places it.
        start: u32,
    },
    /// A large blob's chunks that are not one per [`CHUNK_BYTES`].
    #[error("blob {id}: {chunks} chunks for {size} bytes, not one per {CHUNK_BYTES}")]
    ChunkCount {
        /// The blob.
        id: BlobId,
        /// How many chunks it was given.
        chunks: usize,
        /// Its size.
        size: u64,
    },
    /// A chunk list whose length does not cut its blob's size into chunks.
    #[error(
        "blob {id}'s chunk list of {len} bytes does not cut {size} bytes into chunks of {CHUNK_BYTES}"
    )]
    ChunkList {
        /// The blob.
        id: ObjectId,
        /// The list's length.
        len: usize,
        /// The blob's size.
        size: u64,
    },
    /// An index entry of a chunk list whose length does not cut its blob's size.
    #[error("blob {id}'s chunk list of {len} bytes does not cut {size} bytes into chunks")]
    ChunkListEntry {
        /// The blob.
        id: ObjectId,
        /// The list's length.
        len: u32,
        /// The blob's size.
        size: u64,
    },
    /// A pack or index of a layout version this build does not read.
    #[error("a {what} of remote layout version {version}, which this cairn does not read")]
    Version {
        /// `pack` or `pack index`.
        what: &'static str,
        /// The version its magic names.
        version: String,
    },
    /// Not a pack or index at all.
    #[error("not a cairn {what}")]
    NotLayout {
        /// `pack` or `pack index`.
        what: &'static str,
    },
    /// Encoding flags this layout version does not have.
    #[error("unknown flags {code}")]
    Flags {
        /// The flags.
        code: u8,
    },
    /// An object kind code that names none.
    #[error("unknown object kind {code}")]
    Kind {
        /// The code.
        code: u8,
    },
    /// An entry whose payload lies before the pack's first entry.
    #[error("object {id} lies before the first entry")]
    BeforeFirst {
        /// The object.
        id: ObjectId,
    },
    /// An entry whose payload lies past the end of any pack.
    #[error("object {id} lies past the end of any pack")]
    PastAnyPack {
        /// The object.
        id: ObjectId,
    },
    /// A tree or snapshot stored as a list of chunks.
    #[error("{kind:?} {id} is a list of chunks")]
    NotBlobChunks {
        /// Its kind.
        kind: ObjectKind,
        /// The object.
        id: ObjectId,
    },
    /// A whole object read from past its payload's start.
    #[error("object {id} starts at {start} of a whole object")]
    StartInWhole {
        /// The object.
        id: ObjectId,
        /// Where the entry says it starts.
        start: u32,
    },
    /// A tree or snapshot as a member of a group frame.
    #[error("{kind:?} {id} is a member of a group frame")]
    NotBlobMember {
        /// Its kind.
        kind: ObjectKind,
        /// The object.
        id: ObjectId,
    },
    /// A frame's member, or the frame, larger than any frame.
    #[error("blob {id}'s {size} bytes at {start} of a frame of {len} lie past any frame")]
    PastAnyFrame {
        /// The member.
        id: ObjectId,
        /// Its size.
        size: u64,
        /// Where it starts in the decoded frame.
        start: u32,
        /// The frame's stored length.
        len: u32,
    },
    /// An index whose checksum does not match its bytes.
    #[error("index checksum does not match")]
    IndexChecksum,
    /// An index naming another pack than the one it was read for.
    #[error("index names another pack")]
    IndexOfAnother,
    /// An index whose entry count does not fit its length.
    #[error("{count} entries do not fit its length")]
    EntryCount {
        /// The count it gives.
        count: usize,
    },
    /// A pack whose bytes do not hash to its id.
    #[error("pack bytes do not match its id")]
    PackId,
    /// A pack ending inside an entry's header.
    #[error("truncated entry")]
    Truncated,
    /// A payload holding no object, or several not as a group frame.
    #[error("{count} objects in one {encoding:?} payload")]
    Objects {
        /// How many its header gives.
        count: usize,
        /// Its encoding.
        encoding: Encoding,
    },
    /// A payload running past the pack's end.
    #[error("object {id} runs past the end")]
    PastEnd {
        /// Its first object.
        id: ObjectId,
    },
}

/// How a group frame is named: by its first member, if it has one.
fn group_frame(first: &Option<BlobId>) -> String {
    match first {
        Some(id) => format!("the group frame of blob {id}"),
        None => "a group frame".to_owned(),
    }
}

/// What a payload in a pack is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The object's bytes.
    Raw,
    /// One zstd frame of them.
    Zstd,
    /// A group frame: one zstd frame of small blobs' concatenated contents, as a store
    /// holds it; each object's bytes lie at its `start` in the decoded frame.
    Frame,
    /// A blob over [`CHUNK_BYTES`] as the ids of its chunks, in order (version 3): each a
    /// blob of its own, [`CHUNK_BYTES`] long but the last.
    Chunks,
}

impl Encoding {
    fn code(self) -> u8 {
        match self {
            Encoding::Raw => 0,
            Encoding::Zstd => 1,
            Encoding::Frame => 2,
            Encoding::Chunks => 3,
        }
    }

    fn of(code: u8) -> Result<Encoding, LayoutError> {
        match code {
            0 => Ok(Encoding::Raw),
            1 => Ok(Encoding::Zstd),
            2 => Ok(Encoding::Frame),
            3 => Ok(Encoding::Chunks),
            code => Err(LayoutError::Flags { code }),
        }
    }
}

/// One object of a pack, as its index records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    /// Blob, tree or snapshot.
    pub kind: ObjectKind,
    /// Its id.
    pub id: ObjectId,
    /// What its payload is.
    pub encoding: Encoding,
    /// Its decoded size.
    pub size: u64,
    /// Where its payload starts in the pack.
    pub offset: u64,
    /// The payload's length.
    pub len: u32,
    /// Where its bytes start in the decoded payload (0 unless it is a frame's member).
    pub start: u32,
}

/// Bytes of an entry as [`encode_entry`] writes it, its id apart.
const ENTRY_RECORD: usize = 1 + 1 + 8 + 8 + 4 + 4;

/// An entry, without its id, as the store's table of where objects are keeps it.
pub(crate) fn encode_entry(e: &PackEntry) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENTRY_RECORD);
    out.push(kind_code(e.kind));
    out.push(e.encoding.code());
    out.extend_from_slice(&e.size.to_le_bytes());
    out.extend_from_slice(&e.offset.to_le_bytes());
    out.extend_from_slice(&e.len.to_le_bytes());
    out.extend_from_slice(&e.start.to_le_bytes());
    out
}

/// The entry of object `id` that [`encode_entry`] wrote.
pub(crate) fn decode_entry(id: ObjectId, b: &[u8]) -> Result<PackEntry, LayoutError> {
    if b.len() != ENTRY_RECORD {
        return Err(LayoutError::NotLayout {
            what: "location record",
        });
    }
    Ok(PackEntry {
        kind: kind_of(b[0])?,
        id,
        encoding: Encoding::of(b[1])?,
        size: u64_at(b, 2),
        offset: u64_at(b, 10),
        len: u32_at(b, 18),
        start: u32_at(b, 22),
    })
}

fn kind_code(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Blob => 0,
        ObjectKind::Tree => 1,
        ObjectKind::Snapshot => 2,
    }
}

fn kind_of(code: u8) -> Result<ObjectKind, LayoutError> {
    match code {
        0 => Ok(ObjectKind::Blob),
        1 => Ok(ObjectKind::Tree),
        2 => Ok(ObjectKind::Snapshot),
        code => Err(LayoutError::Kind { code }),
    }
}

/// A pack being filled.
pub struct PackBuilder {
    bytes: Vec<u8>,
    entries: Vec<PackEntry>,
}

impl Default for PackBuilder {
    fn default() -> Self {
        PackBuilder::with_capacity(0)
    }
}

/// A finished pack: its id, bytes and index.
pub struct Pack {
    /// BLAKE3 of `bytes`, hex.
    pub id: String,
    /// The pack.
    pub bytes: Vec<u8>,
    /// Its index.
    pub index: Vec<u8>,
    /// What it holds.
    pub entries: Vec<PackEntry>,
}

/// One object a payload holds: kind, id, decoded size, start in the decoded payload.
type Held = (ObjectKind, ObjectId, u64, u32);

impl PackBuilder {
    /// An empty pack with room for `bytes` bytes (what it is cut at and one more entry), so
    /// that filling it never copies it to a larger buffer.
    pub fn with_capacity(bytes: usize) -> PackBuilder {
        let mut buffer = Vec::with_capacity(bytes.max(PACK_MAGIC.len()));
        buffer.extend_from_slice(PACK_MAGIC);
        PackBuilder {
            bytes: buffer,
            entries: Vec::new(),
        }
    }

    /// Appends an object; `payload` is zstd if `zstd`, `size` bytes decoded. Refuses a
    /// payload of more than [`MAX_PAYLOAD`] bytes.
    pub fn add(
        &mut self,
        kind: ObjectKind,
        id: ObjectId,
        zstd: bool,
        size: u64,
        payload: &[u8],
    ) -> Result<(), LayoutError> {
        let encoding = if zstd { Encoding::Zstd } else { Encoding::Raw };
        self.append(encoding, &[(kind, id, size, 0)], payload)
            .map_err(|len| LayoutError::TooLong { kind, id, len })
    }

    /// Appends a group frame as a store holds it (`bytes`), carrying blobs `members`.
    /// Refuses a frame or member past [`MAX_FRAME_BYTES`], or more than
    /// [`MAX_FRAME_MEMBERS`] members.
    pub fn add_frame(&mut self, bytes: &[u8], members: &[FrameMember]) -> Result<(), LayoutError> {
        let first = members.first().map(|m| m.id);
        if members.is_empty() || members.len() > MAX_FRAME_MEMBERS {
            return Err(LayoutError::FrameMembers {
                first,
                count: members.len(),
            });
        }
        if bytes.len() as u64 > MAX_FRAME_BYTES {
            return Err(LayoutError::FrameTooLarge {
                first,
                len: bytes.len(),
            });
        }
        if let Some(m) = members
            .iter()
            .find(|m| u64::from(m.start) + u64::from(m.size) > MAX_FRAME_BYTES)
        {
            return Err(LayoutError::MemberPastFrame {
                first,
                member: m.id,
                start: m.start,
            });
        }
        let held: Vec<Held> = members
            .iter()
            .map(|m| (ObjectKind::Blob, m.id.into(), u64::from(m.size), m.start))
            .collect();
        self.append(Encoding::Frame, &held, bytes)
            .map_err(|len| LayoutError::PayloadTooLong { len })
    }

    /// Appends blob `id` of `size` bytes (over [`CHUNK_BYTES`]) as the list of its
    /// `chunks`, which must go in packs of their own or this one, as blobs.
    pub fn add_chunks(
        &mut self,
        id: BlobId,
        size: u64,
        chunks: &[BlobId],
    ) -> Result<(), LayoutError> {
        if chunk_list_len(size) != Some(chunks.len() as u64 * CHUNK_ID) {
            return Err(LayoutError::ChunkCount {
                id,
                chunks: chunks.len(),
                size,
            });
        }
        let list: Vec<u8> = chunks.iter().flat_map(|c| *c.as_bytes()).collect();
        self.append(
            Encoding::Chunks,
            &[(ObjectKind::Blob, id.into(), size, 0)],
            &list,
        )
        .map_err(|len| LayoutError::ChunkListTooLong { id, len })
    }

    /// Appends a payload of another pack as it is, with the objects it holds (`entries`,
    /// all of that payload, as that pack's index or [`decode_pack`] gives them): what
    /// remote gc's repacking copies.
    pub fn copy_payload(
        &mut self,
        entries: &[PackEntry],
        payload: &[u8],
    ) -> Result<(), LayoutError> {
        let Some(first) = entries.first() else {
            return Ok(());
        };
        let held: Vec<Held> = entries
            .iter()
            .map(|e| (e.kind, e.id, e.size, e.start))
            .collect();
        self.append(first.encoding, &held, payload)
            .map_err(|len| LayoutError::PayloadTooLong { len })
    }

    /// Appends `payload` holding `held`; `Err` is its length, if longer than an entry holds.
    fn append(&mut self, encoding: Encoding, held: &[Held], payload: &[u8]) -> Result<(), usize> {
        let len = u32::try_from(payload.len()).map_err(|_| payload.len())?;
        self.bytes.push(encoding.code());
        self.bytes
            .extend_from_slice(&(held.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&len.to_le_bytes());
        for (kind, id, size, start) in held {
            self.bytes.push(kind_code(*kind));
            self.bytes.extend_from_slice(id.as_bytes());
            self.bytes.extend_from_slice(&size.to_le_bytes());
            self.bytes.extend_from_slice(&start.to_le_bytes());
        }
        let offset = self.bytes.len() as u64;
        self.bytes.extend_from_slice(payload);
        for &(kind, id, size, start) in held {
            self.entries.push(PackEntry {
                kind,
                id,
                encoding,
                size,
                offset,
                len,
                start,
            });
        }
        Ok(())
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True if no object was added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The pack and its index.
    pub fn finish(self) -> Pack {
        let hash = blake3::hash(&self.bytes);
        let mut index = Vec::with_capacity(INDEX_FIXED + self.entries.len() * INDEX_ENTRY + 32);
        index.extend_from_slice(INDEX_MAGIC);
        index.extend_from_slice(hash.as_bytes());
        index.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            index.push(kind_code(e.kind));
            index.push(e.encoding.code());
            index.extend_from_slice(e.id.as_bytes());
            index.extend_from_slice(&e.size.to_le_bytes());
            index.extend_from_slice(&e.offset.to_le_bytes());
            index.extend_from_slice(&e.len.to_le_bytes());
            index.extend_from_slice(&e.start.to_le_bytes());
        }
        let check = blake3::hash(&index);
        index.extend_from_slice(check.as_bytes());
        Pack {
            id: hash.to_hex().to_string(),
            bytes: self.bytes,
            index,
            entries: self.entries,
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn id_at(b: &[u8], at: usize) -> ObjectId {
    ObjectId::from_bytes(<[u8; 32]>::try_from(&b[at..at + 32]).unwrap_or_default())
}

/// The bytes of the chunk list of a blob of `size` bytes, if such a blob travels as one
/// (it is over [`CHUNK_BYTES`]).
pub fn chunk_list_len(size: u64) -> Option<u64> {
    (size > CHUNK_BYTES as u64).then(|| size.div_ceil(CHUNK_BYTES as u64) * CHUNK_ID)
}

/// The chunk ids of a chunk list (see [`Encoding::Chunks`]) of blob `id` of `size` bytes,
/// checked to be as many as the blob has chunks.
pub fn decode_chunk_list(id: ObjectId, size: u64, list: &[u8]) -> Result<Vec<BlobId>, LayoutError> {
    if chunk_list_len(size) != Some(list.len() as u64) {
        return Err(LayoutError::ChunkList {
            id,
            len: list.len(),
            size,
        });
    }
    Ok(list
        .chunks_exact(CHUNK_ID as usize)
        .map(|c| BlobId::from_bytes(<[u8; 32]>::try_from(c).unwrap_or_default()))
        .collect())
}

/// The layout version a pack or index's magic names (`magics` are versions 1, 2 and 3's).
fn version(bytes: &[u8], magics: [&[u8; 8]; 3], what: &'static str) -> Result<u64, LayoutError> {
    let [v1, v2, v3] = magics;
    match bytes.get(..8) {
        Some(m) if m == v3 => Ok(FORMAT_3),
        Some(m) if m == v2 => Ok(FORMAT_2),
        Some(m) if m == v1 => Ok(FORMAT_1),
        Some(m) if m[..7] == v3[..7] => Err(LayoutError::Version {
            what,
            version: String::from_utf8_lossy(&m[7..]).into_owned(),
        }),
        _ => Err(LayoutError::NotLayout { what }),
    }
}

/// Checks what an entry says against what any pack a push writes can hold: its payload
/// lies after the first entry's header and inside [`MAX_PACK`]; a frame's member lies
/// inside [`MAX_FRAME_BYTES`] of a frame no larger, and only blobs are members.
fn check_entry(e: &PackEntry, first_offset: u64) -> Result<(), LayoutError> {
    let (id, kind) = (e.id, e.kind);
    if e.offset < first_offset {
        return Err(LayoutError::BeforeFirst { id });
    }
    if e.offset.saturating_add(u64::from(e.len)) > MAX_PACK {
        return Err(LayoutError::PastAnyPack { id });
    }
    if e.encoding == Encoding::Chunks {
        if kind != ObjectKind::Blob {
            return Err(LayoutError::NotBlobChunks { kind, id });
        }
        if chunk_list_len(e.size) != Some(u64::from(e.len)) {
            return Err(LayoutError::ChunkListEntry {
                id,
                len: e.len,
                size: e.size,
            });
        }
    }
    if e.encoding != Encoding::Frame {
        return match e.start {
            0 => Ok(()),
            start => Err(LayoutError::StartInWhole { id, start }),
        };
    }
    if kind != ObjectKind::Blob {
        return Err(LayoutError::NotBlobMember { kind, id });
    }
    if u64::from(e.len) > MAX_FRAME_BYTES
        || u64::from(e.start).saturating_add(e.size) > MAX_FRAME_BYTES
    {
        return Err(LayoutError::PastAnyFrame {
            id,
            size: e.size,
            start: e.start,
            len: e.len,
        });
    }
    Ok(())
}

/// The encoding flags `code` name in a pack or index of layout `version`: version 1 has
/// no frames, and only version 3 has chunk lists.
fn encoding_in(version: u64, code: u8) -> Result<Encoding, LayoutError> {
    match (version, Encoding::of(code)?) {
        (FORMAT_1, Encoding::Frame | Encoding::Chunks) | (FORMAT_2, Encoding::Chunks) => {
            Err(LayoutError::Flags { code })
        }
        (_, encoding) => Ok(encoding),
    }
}

thread_local! {
    static INDEXES_DECODED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many indexes [`decode_index`] read on this thread: what tests count to show a sync
/// or a lookup does not read every index the store caches.
pub fn indexes_decoded_here() -> u64 {
    INDEXES_DECODED.with(std::cell::Cell::get)
}

/// Reads the index of pack `pack` (hex id), version 1, 2 or 3, checking its checksum, that
/// it names that pack, and that its entries lie inside a pack after the magic (and a
/// frame's members inside a frame: [`check_entry`]).
pub fn decode_index(bytes: &[u8], pack: &str) -> Result<Vec<PackEntry>, LayoutError> {
    INDEXES_DECODED.with(|n| n.set(n.get() + 1));
    let version = version(
        bytes,
        [INDEX_MAGIC_1, INDEX_MAGIC_2, INDEX_MAGIC],
        "pack index",
    )?;
    if bytes.len() < INDEX_FIXED + 32 {
        return Err(LayoutError::NotLayout { what: "pack index" });
    }
    let (body, check) = bytes.split_at(bytes.len() - 32);
    if blake3::hash(body).as_bytes() != check {
        return Err(LayoutError::IndexChecksum);
    }
    if blake3::Hash::from_bytes(*id_at(body, 8).as_bytes())
        .to_hex()
        .as_str()
        != pack
    {
        return Err(LayoutError::IndexOfAnother);
    }
    let (entry_len, first_offset) = match version {
        FORMAT_1 => (INDEX_ENTRY_1, 8 + PACK_ENTRY_HEADER_1),
        _ => (INDEX_ENTRY, 8 + PAYLOAD_HEADER + OBJECT_HEADER),
    };
    let count = u32_at(body, 40) as usize;
    if body.len() != INDEX_FIXED + count * entry_len {
        return Err(LayoutError::EntryCount { count });
    }
    let mut out = Vec::with_capacity(count);
    for raw in body[INDEX_FIXED..].chunks_exact(entry_len) {
        let encoding = encoding_in(version, raw[1])?;
        let entry = PackEntry {
            kind: kind_of(raw[0])?,
            id: id_at(raw, 2),
            encoding,
            size: u64_at(raw, 34),
            offset: u64_at(raw, 42),
            len: u32_at(raw, 50),
            start: if version == FORMAT_1 {
                0
            } else {
                u32_at(raw, 54)
            },
        };
        check_entry(&entry, first_offset as u64)?;
        out.push(entry);
    }
    Ok(out)
}

/// Reads every entry of a whole pack, version 1, 2 or 3 (for `fsck`-like checks, the fuzz
/// target and tests), checking its id; each entry comes with its payload (a frame's
/// members share theirs).
pub fn decode_pack<'a>(
    bytes: &'a [u8],
    pack: &str,
) -> Result<Vec<(PackEntry, &'a [u8])>, LayoutError> {
    if blake3::hash(bytes).to_hex().as_str() != pack {
        return Err(LayoutError::PackId);
    }
    let version = version(bytes, [PACK_MAGIC_1, PACK_MAGIC_2, PACK_MAGIC], "pack")?;
    let mut at = 8;
    let mut out = Vec::new();
    while at < bytes.len() {
        let raw = &bytes[at..];
        // What the payload holds: (kind, id, size, start) each, from its header.
        let (encoding, held, header, len) = if version == FORMAT_1 {
            if raw.len() < PACK_ENTRY_HEADER_1 {
                return Err(LayoutError::Truncated);
            }
            let encoding = match raw[1] {
                1 => Encoding::Zstd,
                _ => Encoding::Raw,
            };
            let held = vec![(kind_of(raw[0])?, id_at(raw, 2), u64_at(raw, 34), 0)];
            (encoding, held, PACK_ENTRY_HEADER_1, u32_at(raw, 42))
        } else {
            if raw.len() < PAYLOAD_HEADER {
                return Err(LayoutError::Truncated);
            }
            let encoding = encoding_in(version, raw[0])?;
            let count = u32_at(raw, 1) as usize;
            if count == 0 || (count > 1 && encoding != Encoding::Frame) {
                return Err(LayoutError::Objects { count, encoding });
            }
            let header = count
                .checked_mul(OBJECT_HEADER)
                .and_then(|n| n.checked_add(PAYLOAD_HEADER))
                .filter(|n| *n <= raw.len())
                .ok_or(LayoutError::Truncated)?;
            let held = raw[PAYLOAD_HEADER..header]
                .chunks_exact(OBJECT_HEADER)
                .map(|o| Ok((kind_of(o[0])?, id_at(o, 1), u64_at(o, 33), u32_at(o, 41))))
                .collect::<Result<Vec<Held>, LayoutError>>()?;
            (encoding, held, header, u32_at(raw, 5))
        };
        let offset = at + header;
        let end = offset + len as usize;
        if end > bytes.len() {
            return Err(LayoutError::PastEnd { id: held[0].1 });
        }
        for (kind, id, size, start) in held {
            let entry = PackEntry {
                kind,
                id,
                encoding,
                size,
                offset: offset as u64,
                len,
                start,
            };
            check_entry(&entry, 0)?;
            out.push((entry, &bytes[offset..end]));
        }
        at = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
