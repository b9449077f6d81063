//! The remote layout, format 1 (`docs/format.md` describes it byte by byte). Under the
//! remote's prefix:
//!
//! ```text
//! cairn-remote               {"format": 1}: what is here, written by the first `remote add`
//! packs/<pack id>            objects, each with its kind, id, size and payload
//! index/<pack id>            the pack's index: where each object is; written after the pack
//! refs/<name>/<seq>          a ref's history: create-only, the highest <seq> is its value
//! pins/<snapshot id>         a snapshot pushed by id, kept by remote gc until `ref rm ID@REMOTE`
//! gc/<time>-<nonce>          packs remote gc condemned, deleted by a later gc after the grace
//! ```
//!
//! A pack id is the BLAKE3 of the pack's bytes. Snapshots go in the last pack of a push,
//! after every other pack and index is written: an object is visible only through an
//! index, so a snapshot visible on a remote has everything it reaches there too.

use cas::{ObjectId, ObjectKind};

/// The layout version this build reads and writes.
pub const FORMAT: u64 = 1;
/// The marker object.
pub const MARKER: &str = "cairn-remote";
/// Packs are cut once they reach this many bytes (restic found tens of MB fast on S3).
pub const PACK_TARGET: usize = 32 << 20;

const PACK_MAGIC: &[u8; 8] = b"CAIRNPK1";
const INDEX_MAGIC: &[u8; 8] = b"CAIRNIX1";
/// kind, flags, id, size, offset, len.
const INDEX_ENTRY: usize = 1 + 1 + 32 + 8 + 8 + 4;
/// kind, flags, id, size, len (before the payload, in a pack).
const PACK_ENTRY_HEADER: usize = 1 + 1 + 32 + 8 + 4;
/// The most bytes one pack entry holds (its length is 32 bits).
pub const MAX_PAYLOAD: u64 = u32::MAX as u64;
/// The largest pack a push writes: cut at [`PACK_TARGET`], so at most one entry past it.
pub const MAX_PACK: u64 = PACK_TARGET as u64 + PACK_ENTRY_HEADER as u64 + MAX_PAYLOAD + 8;
/// The largest index a push writes: one entry per object of the largest pack of empty
/// objects.
pub const MAX_INDEX: u64 =
    ((PACK_TARGET / PACK_ENTRY_HEADER + 2) * INDEX_ENTRY + 8 + 32 + 4 + 32) as u64;
/// The largest record (a ref entry, a pin, the marker, a gc record) cairn reads.
pub const MAX_RECORD: u64 = 16 << 20;

/// The key of a pack.
pub fn pack_key(pack: &str) -> String {
    format!("packs/{pack}")
}
/// The key of a pack's index.
pub fn index_key(pack: &str) -> String {
    format!("index/{pack}")
}
/// The key of a pin.
pub fn pin_key(id: &cas::SnapshotId) -> String {
    format!("pins/{id}")
}

/// One object of a pack, as its index records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    /// Blob, tree or snapshot.
    pub kind: ObjectKind,
    /// Its id.
    pub id: ObjectId,
    /// True if the payload is a zstd frame.
    pub zstd: bool,
    /// Decoded size.
    pub size: u64,
    /// Where its payload starts in the pack.
    pub offset: u64,
    /// The payload's length.
    pub len: u32,
}

fn kind_code(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Blob => 0,
        ObjectKind::Tree => 1,
        ObjectKind::Snapshot => 2,
    }
}

fn kind_of(code: u8) -> Option<ObjectKind> {
    match code {
        0 => Some(ObjectKind::Blob),
        1 => Some(ObjectKind::Tree),
        2 => Some(ObjectKind::Snapshot),
        _ => None,
    }
}

/// A pack being filled.
pub struct PackBuilder {
    bytes: Vec<u8>,
    entries: Vec<PackEntry>,
}

impl Default for PackBuilder {
    fn default() -> Self {
        let mut bytes = Vec::with_capacity(PACK_TARGET + (1 << 20));
        bytes.extend_from_slice(PACK_MAGIC);
        PackBuilder {
            bytes,
            entries: Vec::new(),
        }
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

impl PackBuilder {
    /// Appends an object; `payload` is zstd if `zstd`, `size` bytes decoded. Refuses a
    /// payload of more than [`MAX_PAYLOAD`] bytes.
    pub fn add(
        &mut self,
        kind: ObjectKind,
        id: ObjectId,
        zstd: bool,
        size: u64,
        payload: &[u8],
    ) -> Result<(), String> {
        let len = u32::try_from(payload.len()).map_err(|_| {
            format!(
                "{kind:?} {id} is {} bytes stored, more than the {MAX_PAYLOAD} a pack entry holds",
                payload.len()
            )
        })?;
        self.bytes.push(kind_code(kind));
        self.bytes.push(u8::from(zstd));
        self.bytes.extend_from_slice(id.as_bytes());
        self.bytes.extend_from_slice(&size.to_le_bytes());
        self.bytes.extend_from_slice(&len.to_le_bytes());
        let offset = self.bytes.len() as u64;
        self.bytes.extend_from_slice(payload);
        self.entries.push(PackEntry {
            kind,
            id,
            zstd,
            size,
            offset,
            len,
        });
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
        let mut index = Vec::with_capacity(8 + 32 + 4 + self.entries.len() * INDEX_ENTRY + 32);
        index.extend_from_slice(INDEX_MAGIC);
        index.extend_from_slice(hash.as_bytes());
        index.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            index.push(kind_code(e.kind));
            index.push(u8::from(e.zstd));
            index.extend_from_slice(e.id.as_bytes());
            index.extend_from_slice(&e.size.to_le_bytes());
            index.extend_from_slice(&e.offset.to_le_bytes());
            index.extend_from_slice(&e.len.to_le_bytes());
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

/// Reads the index of pack `pack` (hex id), checking its checksum, that it names that pack,
/// and that its entries lie inside a pack after the magic.
pub fn decode_index(bytes: &[u8], pack: &str) -> Result<Vec<PackEntry>, String> {
    let fixed = 8 + 32 + 4;
    if bytes.len() < fixed + 32 || &bytes[..8] != INDEX_MAGIC {
        return Err("not a cairn pack index".to_owned());
    }
    let (body, check) = bytes.split_at(bytes.len() - 32);
    if blake3::hash(body).as_bytes() != check {
        return Err("index checksum does not match".to_owned());
    }
    if blake3::Hash::from_bytes(<[u8; 32]>::try_from(&body[8..40]).unwrap_or_default())
        .to_hex()
        .as_str()
        != pack
    {
        return Err("index names another pack".to_owned());
    }
    let count = u32_at(body, 40) as usize;
    if body.len() != fixed + count * INDEX_ENTRY {
        return Err(format!("{count} entries do not fit its length"));
    }
    let mut out = Vec::with_capacity(count);
    for raw in body[fixed..].chunks_exact(INDEX_ENTRY) {
        let kind = kind_of(raw[0]).ok_or_else(|| format!("unknown object kind {}", raw[0]))?;
        let zstd = match raw[1] {
            0 => false,
            1 => true,
            other => return Err(format!("unknown flags {other}")),
        };
        let id = ObjectId::from_bytes(<[u8; 32]>::try_from(&raw[2..34]).unwrap_or_default());
        let entry = PackEntry {
            kind,
            id,
            zstd,
            size: u64_at(raw, 34),
            offset: u64_at(raw, 42),
            len: u32_at(raw, 50),
        };
        if entry.offset < (PACK_MAGIC.len() + PACK_ENTRY_HEADER) as u64 {
            return Err(format!("object {id} lies before the first entry"));
        }
        if entry.offset.saturating_add(u64::from(entry.len)) > MAX_PACK {
            return Err(format!("object {id} lies past the end of any pack"));
        }
        out.push(entry);
    }
    Ok(out)
}

/// Reads every entry of a whole pack (for `fsck`-like checks and tests), checking its id.
pub fn decode_pack<'a>(bytes: &'a [u8], pack: &str) -> Result<Vec<(PackEntry, &'a [u8])>, String> {
    if blake3::hash(bytes).to_hex().as_str() != pack {
        return Err("pack bytes do not match its id".to_owned());
    }
    if bytes.len() < 8 || &bytes[..8] != PACK_MAGIC {
        return Err("not a cairn pack".to_owned());
    }
    let mut at = 8;
    let mut out = Vec::new();
    while at < bytes.len() {
        if bytes.len() - at < PACK_ENTRY_HEADER {
            return Err("truncated entry".to_owned());
        }
        let raw = &bytes[at..];
        let kind = kind_of(raw[0]).ok_or_else(|| format!("unknown object kind {}", raw[0]))?;
        let id = ObjectId::from_bytes(<[u8; 32]>::try_from(&raw[2..34]).unwrap_or_default());
        let len = u32_at(raw, 42);
        let offset = (at + PACK_ENTRY_HEADER) as u64;
        let end = offset as usize + len as usize;
        if end > bytes.len() {
            return Err(format!("object {id} runs past the end"));
        }
        out.push((
            PackEntry {
                kind,
                id,
                zstd: raw[1] == 1,
                size: u64_at(raw, 34),
                offset,
                len,
            },
            &bytes[offset as usize..end],
        ));
        at = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pack_and_its_index_read_back_and_damage_is_refused() {
        let mut b = PackBuilder::default();
        let a = ObjectId::from_bytes([1; 32]);
        let t = ObjectId::from_bytes([2; 32]);
        b.add(ObjectKind::Blob, a, false, 5, b"hello").unwrap();
        b.add(ObjectKind::Tree, t, true, 100, b"zzz").unwrap();
        let pack = b.finish();
        let entries = decode_index(&pack.index, &pack.id).expect("reads");
        assert_eq!(entries, pack.entries);
        let whole = decode_pack(&pack.bytes, &pack.id).expect("reads");
        assert_eq!(whole[0].1, b"hello");
        assert_eq!(whole[1].0, entries[1]);
        let e = entries[0];
        assert_eq!(&pack.bytes[e.offset as usize..][..e.len as usize], b"hello");

        let mut bad = pack.index.clone();
        bad[50] ^= 1;
        assert!(decode_index(&bad, &pack.id).is_err());
        assert!(decode_index(&pack.index, &"0".repeat(64)).is_err());
        let mut bad = pack.bytes.clone();
        bad[20] ^= 1;
        assert!(decode_pack(&bad, &pack.id).is_err());
    }
}
