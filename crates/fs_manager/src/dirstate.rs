//! Per-directory state: the cache that lets a snapshot skip unchanged directories.
//!
//! For every directory in scope the store keeps its stamp (mtime, ctime, inode, device and
//! when that stat was taken), a fingerprint of the ignore files that govern it, and its
//! in-scope listing: subdirectories, skipped entries, and per file the [`FileState`] of the
//! stat cache. Creating, deleting or renaming an entry changes a directory's mtime, so a
//! directory whose stamp still matches (and is not racy) lists the same names, and needs no
//! `readdir` and no ignore matching: only its files are `lstat`ed. A changed ignore file
//! invalidates its directory and everything below it.

use crate::registry::RegistryRead;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use crate::paths::{SkipReason, Special};
use crate::state::{FileState, RACY_MARGIN, Stat};

/// Bumped on any change to the encoding below.
const VERSION: u8 = 6;
/// Bytes of the BLAKE3 checksum that ends every record.
const CHECKSUM_LEN: usize = 8;

fn checksum(body: &[u8]) -> [u8; CHECKSUM_LEN] {
    let mut out = [0u8; CHECKSUM_LEN];
    out.copy_from_slice(&blake3::hash(body).as_bytes()[..CHECKSUM_LEN]);
    out
}
/// Tags of a listing's entries: a file with its blob id; a file whose blob id is its
/// directory tree's under the same name; a subdirectory; a skipped entry.
const TAG_FILE: u8 = 1;
const TAG_DIR: u8 = 2;
const TAG_SKIPPED: u8 = 3;
const TAG_FILE_IN_TREE: u8 = 4;

/// Ignore files read in each directory, in mask-bit order.
pub(crate) const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".git/info/exclude"];

/// `body` followed by its checksum: a whole record.
pub(crate) fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let sum = checksum(&body);
    body.extend_from_slice(&sum);
    body
}

/// A directory's stat, and when it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirStamp {
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub dev: u64,
    pub verified_ns: i64,
}

/// Feeds the identifying stat fields of `meta` to `hasher`.
fn hash_stat(hasher: &mut blake3::Hasher, meta: &std::fs::Metadata) {
    let st = Stat::from_std(meta);
    for v in [st.size, st.ino, st.dev] {
        hasher.update(&v.to_le_bytes());
    }
    for v in [st.mtime_ns, st.ctime_ns] {
        hasher.update(&v.to_le_bytes());
    }
}

fn first_u64(hasher: &blake3::Hasher) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
    u64::from_le_bytes(first)
}

impl DirStamp {
    pub fn of(meta: &std::fs::Metadata, verified_ns: i64) -> DirStamp {
        let st = Stat::from_std(meta);
        DirStamp {
            mtime_ns: st.mtime_ns,
            ctime_ns: st.ctime_ns,
            ino: st.ino,
            dev: st.dev,
            verified_ns,
        }
    }

    /// Same directory, no entry created, deleted or renamed since, and not racy.
    pub fn still_valid(&self, meta: &std::fs::Metadata) -> bool {
        let margin = i64::try_from(RACY_MARGIN.as_nanos()).unwrap_or(i64::MAX);
        let racy = self.mtime_ns.max(self.ctime_ns) >= self.verified_ns.saturating_sub(margin);
        let st = Stat::from_std(meta);
        !racy
            && meta.is_dir()
            && (self.mtime_ns, self.ctime_ns, self.ino, self.dev)
                == (st.mtime_ns, st.ctime_ns, st.ino, st.dev)
    }
}

/// The ignore files present in a directory (bit per [`IGNORE_FILES`] entry) and a hash of
/// their stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct IgnoreStamp {
    pub mask: u8,
    pub hash: u64,
}

impl IgnoreStamp {
    /// Stats the ignore files of `dir` (with `only`, just those bits: the files seen last
    /// time, as a new one would have changed the directory's mtime), and tells whether
    /// `dir` holds a `.git` that is not a directory (a linked worktree's or a submodule's
    /// `.git` file), by the same `lstat`s.
    pub fn with_git_file(dir: &Path, only: Option<u8>) -> (IgnoreStamp, bool) {
        IgnoreStamp::with_git_file_by(|name| dir.join(name).symlink_metadata(), only)
    }

    /// [`IgnoreStamp::with_git_file`] of a directory whose files `lstat` stats by name
    /// (through a handle, for one out of the system's reach by path).
    pub fn with_git_file_by(
        lstat: impl Fn(&str) -> std::io::Result<std::fs::Metadata>,
        only: Option<u8>,
    ) -> (IgnoreStamp, bool) {
        let mut hasher = blake3::Hasher::new();
        let mut mask = 0u8;
        let mut git_file = false;
        for (bit, name) in IGNORE_FILES.iter().enumerate() {
            let bit = 1u8 << bit;
            if only.is_some_and(|m| m & bit == 0) {
                continue;
            }
            match lstat(name) {
                Ok(m) => {
                    mask |= bit;
                    hash_stat(&mut hasher, &m);
                }
                Err(e) => {
                    git_file |= name.starts_with(".git/")
                        && e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error());
                }
            }
        }
        let stamp = IgnoreStamp {
            mask,
            hash: first_u64(&hasher),
        };
        (stamp, git_file)
    }
}

const NAME_ERRORS: [path_policy::NameError; 8] = {
    use path_policy::NameError::*;
    [
        Empty,
        Dots,
        Slash,
        Control,
        TooLong,
        Git,
        PathTooLong,
        TooDeep,
    ]
};
const SPECIALS: [Special; 5] = [
    Special::Fifo,
    Special::Socket,
    Special::BlockDevice,
    Special::CharacterDevice,
    Special::Other,
];

/// Appends `reason` to a listing record: a tag byte, then what that reason holds.
fn encode_reason(reason: &SkipReason, out: &mut Vec<u8>) {
    let index_of = |found: Option<usize>| u8::try_from(found.unwrap_or(255)).unwrap_or(255);
    match reason {
        SkipReason::Denied { pattern } => {
            out.push(0);
            let bytes = pattern.as_bytes();
            let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&bytes[..usize::from(len)]);
        }
        SkipReason::InvalidName(e) => {
            out.push(1);
            out.push(index_of(NAME_ERRORS.iter().position(|n| n == e)));
        }
        SkipReason::PathTooLong => out.push(2),
        SkipReason::PseudoFilesystem => out.push(3),
        SkipReason::OverSizeCap { size, cap } => {
            out.push(4);
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&cap.to_le_bytes());
        }
        SkipReason::Special(kind) => {
            out.push(5);
            out.push(index_of(SPECIALS.iter().position(|k| k == kind)));
        }
        SkipReason::IgnoreFileNotRegular => out.push(6),
        SkipReason::IgnoreFileTooLarge => out.push(7),
        SkipReason::OutOfScope(inner) => {
            out.push(8);
            encode_reason(inner, out);
        }
    }
}

/// Reads what [`encode_reason`] wrote; `None` for anything it would not write.
fn decode_reason<'a>(
    take: &mut impl FnMut(usize) -> Option<&'a [u8]>,
    depth: u8,
) -> Option<SkipReason> {
    let u64_ = |b: &[u8]| b.try_into().ok().map(u64::from_le_bytes);
    Some(match take(1)?[0] {
        0 => {
            let len = u16::from_le_bytes(take(2)?.try_into().ok()?);
            let pattern = std::str::from_utf8(take(usize::from(len))?).ok()?;
            SkipReason::Denied {
                pattern: pattern.to_owned(),
            }
        }
        1 => SkipReason::InvalidName(*NAME_ERRORS.get(usize::from(take(1)?[0]))?),
        2 => SkipReason::PathTooLong,
        3 => SkipReason::PseudoFilesystem,
        4 => SkipReason::OverSizeCap {
            size: u64_(take(8)?)?,
            cap: u64_(take(8)?)?,
        },
        5 => SkipReason::Special(*SPECIALS.get(usize::from(take(1)?[0]))?),
        6 => SkipReason::IgnoreFileNotRegular,
        7 => SkipReason::IgnoreFileTooLarge,
        8 if depth == 0 => SkipReason::OutOfScope(Box::new(decode_reason(take, 1)?)),
        _ => return None,
    })
}

/// A name in a directory listing: most are short enough to be held inline, so a million
/// files' listings cost no allocation per name.
pub(crate) type Name = smallvec::SmallVec<[u8; 16]>;

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Child {
    File(FileState),
    Dir,
    Skipped(SkipReason),
}

/// A directory as the last capture saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DirState {
    pub stamp: DirStamp,
    pub ignore: IgnoreStamp,
    /// Sorted by name.
    children: Vec<(Name, Child)>,
    /// The tree this directory's files made last time, and its size; reused while nothing
    /// below it changes.
    pub tree: Option<(cas::TreeId, u64)>,
    /// Some files' blob ids are still in `tree` (read as the record was, not yet taken
    /// from there): their `blob` is [`UNRESOLVED`] until [`DirState::resolve`].
    pub pending: bool,
    /// Counts of `children`, taken once: walking a million files' listings at every
    /// capture would cost more than the rest of a capture where nothing changed.
    tally: TallyCell,
}

/// What a directory's listing holds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    pub files: u64,
    /// Of every file.
    pub bytes: u64,
    pub dirs: u64,
    pub skipped: u64,
    /// Some file's stat cannot be trusted (see [`FileState::is_racy`]).
    pub racy: bool,
}

impl Tally {
    fn of(children: &[(Name, Child)]) -> Tally {
        let mut tally = Tally::default();
        for (_, child) in children {
            match child {
                Child::File(f) => {
                    tally.files += 1;
                    tally.bytes += f.size;
                    tally.racy |= f.is_racy();
                }
                Child::Dir => tally.dirs += 1,
                Child::Skipped(_) => tally.skipped += 1,
            }
        }
        tally
    }
}

/// A [`Tally`] taken when first asked for. No part of a state's value: equal listings are
/// equal states.
#[derive(Debug, Clone, Default)]
struct TallyCell(std::sync::OnceLock<Tally>);

impl PartialEq for TallyCell {
    fn eq(&self, _: &TallyCell) -> bool {
        true
    }
}

impl Eq for TallyCell {}

/// The blob id of a file whose id is still in its directory's tree. (No content hashes
/// to it.)
pub(crate) const UNRESOLVED: cas::BlobId = cas::BlobId::from_bytes([0; 32]);

impl DirState {
    /// A directory known by no stat: an empty listing that no stamp matches.
    pub fn unverified() -> DirState {
        DirState {
            stamp: DirStamp {
                mtime_ns: 0,
                ctime_ns: 0,
                ino: 0,
                dev: 0,
                verified_ns: 0,
            },
            ignore: IgnoreStamp::default(),
            children: Vec::new(),
            tree: None,
            pending: false,
            tally: TallyCell::default(),
        }
    }

    /// A directory just listed, with its stamp and ignore fingerprint; its entries are
    /// added after.
    pub fn listed(stamp: DirStamp, ignore: IgnoreStamp) -> DirState {
        DirState {
            stamp,
            ignore,
            ..DirState::unverified()
        }
    }

    /// A directory known by no stat, listing `children` (sorted by name).
    pub fn unverified_with(children: Vec<(Name, Child)>) -> DirState {
        DirState {
            children,
            ..DirState::unverified()
        }
    }

    /// The listing, sorted by name.
    pub fn children(&self) -> &[(Name, Child)] {
        &self.children
    }

    /// The listing, to change (kept sorted by name).
    pub fn children_mut(&mut self) -> &mut Vec<(Name, Child)> {
        self.tally = TallyCell::default();
        &mut self.children
    }

    /// Counts of the listing.
    pub fn tally(&self) -> Tally {
        *self.tally.0.get_or_init(|| Tally::of(&self.children))
    }

    /// The listing's entry `name`.
    pub fn child(&self, name: &[u8]) -> Option<&Child> {
        let i = self
            .children
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()?;
        Some(&self.children[i].1)
    }

    /// The cache entry of file `name`, if it has one whose blob id is known.
    pub fn file(&self, name: &[u8]) -> Option<&FileState> {
        match self.child(name)? {
            Child::File(s) if s.blob != UNRESOLVED => Some(s),
            _ => None,
        }
    }

    /// Takes the blob ids still in the tree from `tree`; false if it is not this
    /// directory's tree or lacks one of them (the state is then not to be trusted).
    pub fn resolve(&mut self, tree: &cas::Tree) -> bool {
        if !self.pending {
            return true;
        }
        if self.tree.is_none_or(|(id, _)| id != tree.id()) {
            return false;
        }
        for (name, child) in self.children_mut() {
            if let Child::File(f) = child
                && f.blob == UNRESOLVED
            {
                match tree.get(name).and_then(cas::TreeEntry::blob) {
                    Some(blob) => f.blob = blob,
                    None => return false,
                }
            }
        }
        self.pending = false;
        true
    }

    /// The record, every blob id in it that is not still in its tree. See
    /// [`DirState::encode_against`].
    pub fn encode(&self) -> Option<Vec<u8>> {
        self.encode_against(None)
    }

    /// The record: version, then one zstd frame of the body below, then a checksum.
    /// Integers are LEB128 varints; a file's times, inode and verification time are kept
    /// as differences from the entry before it or from the directory's stamp, which
    /// listings made together keep small. A file whose blob `tree` (this directory's tree,
    /// `self.tree`) holds under its name does not repeat the blob id: it is read from the
    /// tree when the record is.
    ///
    /// A state whose blob ids are still in its tree can only be written against that same
    /// tree (`None` otherwise: a caller changing a listing resolves it first).
    pub fn encode_against(&self, tree: Option<&cas::Tree>) -> Option<Vec<u8>> {
        if self.pending && self.tree.is_none() {
            return None;
        }
        let tree = tree.filter(|t| self.tree.is_some_and(|(id, _)| id == t.id()));
        let mut body = Vec::with_capacity(64 + self.children.len() * 56);
        let stamp = &self.stamp;
        for v in [stamp.mtime_ns, stamp.ctime_ns, stamp.verified_ns] {
            put_i64(&mut body, v);
        }
        put_u64(&mut body, stamp.ino);
        put_u64(&mut body, stamp.dev);
        body.push(self.ignore.mask);
        body.extend_from_slice(&self.ignore.hash.to_le_bytes());
        match &self.tree {
            Some((id, size)) => {
                body.push(1);
                body.extend_from_slice(id.as_bytes());
                put_u64(&mut body, *size);
            }
            None => body.push(0),
        }
        put_u64(&mut body, self.children.len() as u64);
        let mut prev = Neighbour::first(stamp);
        for (name, child) in &self.children {
            // Still in the record's own tree, or found in `tree` (this directory's).
            let in_tree = |f: &FileState| {
                f.blob == UNRESOLVED
                    || tree
                        .and_then(|t| t.get(name))
                        .is_some_and(|e| e.blob() == Some(f.blob))
            };
            let tag = match child {
                Child::File(f) if in_tree(f) => TAG_FILE_IN_TREE,
                Child::File(_) => TAG_FILE,
                Child::Dir => TAG_DIR,
                Child::Skipped(_) => TAG_SKIPPED,
            };
            body.push(tag);
            put_u64(&mut body, name.len() as u64);
            body.extend_from_slice(name);
            match child {
                Child::File(f) => prev.encode(f, stamp, tag == TAG_FILE, &mut body),
                Child::Dir => {}
                Child::Skipped(reason) => encode_reason(reason, &mut body),
            }
        }
        Some(seal_body(&body))
    }

    /// `None` for anything this version does not read, that fails its checksum, or whose
    /// listing no directory gives (names that are not single file names, or not strictly
    /// ascending): the directory is then walked and its files read again. A damaged cache
    /// costs time, never correctness. Blob ids the record leaves in its tree stay there
    /// ([`DirState::pending`]) until a capture needs them: one that changes nothing in a
    /// directory never reads its tree.
    pub fn decode(bytes: &[u8]) -> Option<DirState> {
        let (stored, sum) = bytes.split_at_checked(bytes.len().checked_sub(CHECKSUM_LEN)?)?;
        if checksum(stored) != sum {
            return None;
        }
        let (&version, frame) = stored.split_first()?;
        if version != VERSION {
            return None;
        }
        let body = decompress(frame)?;
        let mut r = Fields(&body);
        let (mtime_ns, ctime_ns, verified_ns) = (r.i64()?, r.i64()?, r.i64()?);
        let stamp = DirStamp {
            mtime_ns,
            ctime_ns,
            ino: r.u64()?,
            dev: r.u64()?,
            verified_ns,
        };
        let ignore = IgnoreStamp {
            mask: r.take(1)?[0],
            hash: u64::from_le_bytes(r.take(8)?.try_into().ok()?),
        };
        let tree = match r.take(1)?[0] {
            0 => None,
            1 => {
                let id = cas::TreeId::from_bytes(r.take(32)?.try_into().ok()?);
                Some((id, r.u64()?))
            }
            _ => return None,
        };
        let count = usize::try_from(r.u64()?).ok()?;
        // Every entry takes at least two bytes: no count beyond that is believed.
        let mut children = Vec::with_capacity(count.min(body.len() / 2));
        let mut prev = Neighbour::first(&stamp);
        let mut pending = false;
        for _ in 0..count {
            let tag = r.take(1)?[0];
            let len = usize::try_from(r.u64()?).ok()?;
            let name = Name::from_slice(r.take(len)?);
            // A listing is what reading a directory gives: single names, each once, in
            // byte order (lookups binary-search it; captures join names to paths).
            let ascending = children
                .last()
                .is_none_or(|(last, _): &(Name, Child)| *last < name);
            if !ascending || !is_file_name(&name) {
                return None;
            }
            let child = match tag {
                TAG_FILE => {
                    let f = prev.decode(&mut r, &stamp, None)?;
                    if f.blob == UNRESOLVED {
                        return None;
                    }
                    Child::File(f)
                }
                TAG_FILE_IN_TREE => {
                    tree?;
                    pending = true;
                    Child::File(prev.decode(&mut r, &stamp, Some(UNRESOLVED))?)
                }
                TAG_DIR => Child::Dir,
                TAG_SKIPPED => Child::Skipped(decode_reason(&mut |n| r.take(n), 0)?),
                _ => return None,
            };
            children.push((name, child));
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(DirState {
            stamp,
            ignore,
            children,
            tree,
            pending,
            tally: TallyCell::default(),
        })
    }
}

/// A record holding `body`: the version, `body` as one zstd frame, the checksum.
pub(crate) fn seal_body(body: &[u8]) -> Vec<u8> {
    // Level 1: records are rewritten at every capture that changes their directory.
    let frame = zstd::bulk::compress(body, 1).unwrap_or_default();
    // Exactly as long as the record: a capture holds every record it writes at once.
    let mut out = Vec::with_capacity(1 + frame.len() + CHECKSUM_LEN);
    out.push(VERSION);
    // An empty frame (compression failed) is unreadable: the directory is listed again.
    out.extend_from_slice(&frame);
    seal(out)
}

/// The largest body a directory record may decode to: a directory of about a million
/// files.
const MAX_BODY: u64 = 256 << 20;

fn decompress(frame: &[u8]) -> Option<Vec<u8>> {
    let size = zstd::zstd_safe::get_frame_content_size(frame).ok()??;
    if size > MAX_BODY {
        return None;
    }
    let body = zstd::bulk::decompress(frame, usize::try_from(size).ok()?).ok()?;
    (body.len() as u64 == size).then_some(body)
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 10];
    let n = integer_encoding::VarInt::encode_var(v, &mut buf);
    out.extend_from_slice(&buf[..n]);
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 10];
    let n = integer_encoding::VarInt::encode_var(v, &mut buf);
    out.extend_from_slice(&buf[..n]);
}

/// The unread rest of a record's body.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        let (v, n) = <u64 as integer_encoding::VarInt>::decode_var(self.0)?;
        self.0 = &self.0[n..];
        Some(v)
    }

    fn i64(&mut self) -> Option<i64> {
        let (v, n) = <i64 as integer_encoding::VarInt>::decode_var(self.0)?;
        self.0 = &self.0[n..];
        Some(v)
    }
}

/// What a file's entry is encoded against: the file before it in the listing (its mtime
/// and inode) and the directory's stamp (device, verification time).
struct Neighbour {
    mtime_ns: i64,
    ino: u64,
}

impl Neighbour {
    fn first(stamp: &DirStamp) -> Neighbour {
        Neighbour {
            mtime_ns: stamp.mtime_ns,
            ino: stamp.ino,
        }
    }

    fn encode(&mut self, f: &FileState, stamp: &DirStamp, with_blob: bool, out: &mut Vec<u8>) {
        put_u64(out, f.size);
        put_i64(out, f.mtime_ns.wrapping_sub(self.mtime_ns));
        put_i64(out, f.ctime_ns.wrapping_sub(f.mtime_ns));
        put_i64(out, f.ino.wrapping_sub(self.ino) as i64);
        put_u64(out, f.dev ^ stamp.dev);
        put_u64(out, u64::from(f.mode));
        if with_blob {
            out.extend_from_slice(f.blob.as_bytes());
        }
        put_i64(out, f.verified_ns.wrapping_sub(stamp.verified_ns));
        *self = Neighbour {
            mtime_ns: f.mtime_ns,
            ino: f.ino,
        };
    }

    /// A file's entry; its blob id is read from the record unless `blob` gives it.
    fn decode(
        &mut self,
        r: &mut Fields<'_>,
        stamp: &DirStamp,
        blob: Option<cas::BlobId>,
    ) -> Option<FileState> {
        let size = r.u64()?;
        let mtime_ns = self.mtime_ns.wrapping_add(r.i64()?);
        let ctime_ns = mtime_ns.wrapping_add(r.i64()?);
        let ino = self.ino.wrapping_add(r.i64()? as u64);
        let dev = r.u64()? ^ stamp.dev;
        let mode = u32::try_from(r.u64()?).ok()?;
        let blob = match blob {
            Some(b) => b,
            None => cas::BlobId::from_bytes(r.take(32)?.try_into().ok()?),
        };
        let verified_ns = stamp.verified_ns.wrapping_add(r.i64()?);
        *self = Neighbour { mtime_ns, ino };
        Some(FileState {
            size,
            mtime_ns,
            ctime_ns,
            ino,
            dev,
            mode,
            blob,
            verified_ns,
        })
    }
}

/// True for a name a directory entry can have.
fn is_file_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= path_policy::MAX_NAME_LEN
        && name != b"."
        && name != b".."
        && !name.contains(&b'/')
        && !name.contains(&0)
}

/// Takes the blob ids that states of `wanted` directories still leave in their trees
/// out of those trees (read in parallel, checked as every read is). `Err` names a
/// directory whose tree the store cannot give or lacks one of them, and that tree.
pub(crate) fn resolve_dirs(
    dirs: &mut HashMap<Vec<u8>, DirState>,
    wanted: &std::collections::HashSet<&[u8]>,
    reader: &cas::Reader,
) -> Result<(), (Vec<u8>, cas::TreeId)> {
    let mut pending: Vec<(&Vec<u8>, &mut DirState)> = dirs
        .iter_mut()
        .filter(|(dir, state)| state.pending && wanted.contains(dir.as_slice()))
        .collect();
    pending.par_iter_mut().try_for_each(|(dir, state)| {
        let Some((id, _)) = state.tree else {
            return Err(((*dir).clone(), cas::Tree::default().id()));
        };
        match reader.tree(id) {
            Ok(tree) if state.resolve(&tree) => Ok(()),
            _ => Err(((*dir).clone(), id)),
        }
    })
}

/// [`resolve_dirs`], forgetting the state of any directory whose blob ids cannot be had
/// (it is listed again and its files read at the next capture).
pub(crate) fn resolve_or_forget(
    dirs: &mut HashMap<Vec<u8>, DirState>,
    wanted: &std::collections::HashSet<&[u8]>,
    reader: &cas::Reader,
) {
    while let Err((dir, _)) = resolve_dirs(dirs, wanted, reader) {
        dirs.remove(&dir);
    }
}

/// The store key of a directory: `d` then its path with `/` as NUL, so keys sort in tree
/// order. The root is `d`.
pub(crate) fn dir_key(path: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(path.len() + 1);
    key.push(b'd');
    key.extend(path.iter().map(|&b| if b == b'/' { 0 } else { b }));
    key
}

/// The store key of the fingerprint of ignore rules from outside the tree.
pub(crate) const GLOBAL_KEY: &[u8] = b"g";

/// The cache of a worktree as loaded from the store.
#[derive(Default, Debug)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct Cache {
    /// Directory path (`/`-separated, root = empty) → state.
    pub dirs: HashMap<Vec<u8>, DirState>,
    pub global: Option<u64>,
}

impl Cache {
    pub fn load(
        reader: &cas::Reader,
        root: &camino::Utf8Path,
    ) -> Result<Cache, cas::StorageFailure> {
        let mut cache = Cache::default();
        let records = reader.file_states(root)?;
        // Decompressing and checking the records is most of loading: in parallel.
        let dirs: Vec<(Vec<u8>, DirState)> = records
            .par_iter()
            .filter_map(|(key, value)| {
                let rest = key.strip_prefix(b"d")?;
                let state = DirState::decode(value)?;
                let path = rest
                    .iter()
                    .map(|&b| if b == 0 { b'/' } else { b })
                    .collect();
                Some((path, state))
            })
            .collect();
        cache.dirs.extend(dirs);
        cache.global = records
            .iter()
            .find(|(key, _)| key.as_slice() == GLOBAL_KEY)
            .and_then(|(_, v)| v.as_slice().try_into().ok().map(u64::from_le_bytes));
        Ok(cache)
    }

    fn entries(&self) -> usize {
        self.dirs.values().map(|d| d.children().len() + 1).sum()
    }
}

/// Caches kept between operations, by worktree root: loading one from the store costs
/// about 15 ms for the Linux tree, a good part of a capture that a watcher made cheap.
pub(crate) struct KeptCaches {
    set: Mutex<KeptSet>,
}

impl Default for KeptCaches {
    fn default() -> Self {
        KeptCaches {
            set: Mutex::new(KeptSet::new(KEPT_ENTRIES)),
        }
    }
}

impl KeptCaches {
    fn set(&self) -> std::sync::MutexGuard<'_, KeptSet> {
        self.set.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cache of `root` as the store holds it at file-states `version` (read before
    /// `reader` was opened): the copy the last operation on it kept, if it is of that
    /// version, else loaded.
    pub fn take_or_load(
        &self,
        store: &cas::Store,
        reader: &cas::Reader,
        root: &camino::Utf8Path,
        version: u64,
    ) -> Result<Cache, cas::StorageFailure> {
        match self.take(store, root) {
            Some(kept)
                if store.side_version(crate::registry::FILE_STATES, root.as_str()) == version =>
            {
                Ok(kept)
            }
            _ => Cache::load(reader, root),
        }
    }

    /// The copy of `root`'s cache kept by the last operation on it, if the store has not
    /// written its file states since.
    pub fn take(&self, store: &cas::Store, root: &camino::Utf8Path) -> Option<Cache> {
        let kept = self.set().take(root)?;
        (kept.version == store.side_version(crate::registry::FILE_STATES, root.as_str()))
            .then_some(kept.cache)
    }

    /// Keeps `cache` in memory for the next operation on `root`. The caller holds the
    /// worktree and has just read it from, or written it to, the store: it is what the
    /// store holds at the version it has now.
    pub fn keep(&self, cache: Cache, store: &cas::Store, root: &camino::Utf8Path) {
        let version = store.side_version(crate::registry::FILE_STATES, root.as_str());
        let dropped = self.set().insert(root, version, cache);
        // Large caches are freed outside the lock.
        drop(dropped);
    }

    /// Forgets the copy kept for `root` (the worktree is gone).
    pub fn forget(&self, root: &camino::Utf8Path) {
        let dropped = self.set().take(root);
        drop(dropped);
    }
}

/// At most this many directory entries are kept in all (about 130 bytes each: some 13 Linux
/// trees).
const KEPT_ENTRIES: usize = 1 << 20;

struct KeptSet {
    /// Entries kept at most, in all.
    limit: usize,
    by_root: HashMap<camino::Utf8PathBuf, Kept>,
}

struct Kept {
    version: u64,
    entries: usize,
    cache: Cache,
}

impl KeptSet {
    fn new(limit: usize) -> KeptSet {
        KeptSet {
            limit,
            by_root: HashMap::new(),
        }
    }

    fn take(&mut self, root: &camino::Utf8Path) -> Option<Kept> {
        self.by_root.remove(root)
    }

    /// Keeps `cache`, letting go of the least recently written ones while the total is
    /// over the limit (and of `cache` itself if it alone is). Returns what it let go of.
    fn insert(&mut self, root: &camino::Utf8Path, version: u64, cache: Cache) -> Vec<Cache> {
        let mut dropped: Vec<Cache> = self.take(root).map(|k| k.cache).into_iter().collect();
        let entries = cache.entries();
        if entries > self.limit {
            dropped.push(cache);
            return dropped;
        }
        let mut total: usize = self.by_root.values().map(|k| k.entries).sum::<usize>() + entries;
        while total > self.limit {
            let Some(oldest) = self
                .by_root
                .iter()
                .min_by_key(|(_, k)| k.version)
                .map(|(r, _)| r.clone())
            else {
                break;
            };
            if let Some(k) = self.by_root.remove(&oldest) {
                total -= k.entries;
                dropped.push(k.cache);
            }
        }
        self.by_root.insert(
            root.to_owned(),
            Kept {
                version,
                entries,
                cache,
            },
        );
        dropped
    }
}

/// A fingerprint of the scope rules that come from outside the tree: the deny patterns, the
/// repository's `.git/info/exclude`, and `sources`, the git config files consulted for the
/// global excludes file and that file (see [`crate::rules::global`]), by path and stat. A
/// change re-walks everything.
pub(crate) fn global_stamp(root: &Path, deny: &[String], sources: &[std::path::PathBuf]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    for pattern in deny {
        hasher.update(pattern.as_bytes());
        hasher.update(b"\n");
    }
    let exclude = root.join(".git/info/exclude");
    hash_files(
        &mut hasher,
        std::iter::once(exclude.as_path()).chain(sources.iter().map(|s| s.as_path())),
    );
    first_u64(&hasher)
}

/// The paths and stats of `files`, as [`global_stamp`] takes them.
pub(crate) fn files_stamp(files: &[std::path::PathBuf]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hash_files(&mut hasher, files.iter().map(|f| f.as_path()));
    first_u64(&hasher)
}

fn hash_files<'a>(hasher: &mut blake3::Hasher, files: impl Iterator<Item = &'a Path>) {
    for f in files {
        hasher.update(f.as_os_str().as_encoded_bytes());
        hasher.update(b"\0");
        // A stat, never an open: a FIFO here must not block.
        if let Ok(m) = f.metadata() {
            hash_stat(hasher, &m);
        }
    }
}

/// Records files just written by cairn itself (checkout, rollback) in `dirs`: each file's
/// state goes into its directory's listing, and the directory is marked unverified, so the
/// next scan lists it again (keeping scope exactly the walker's) but reads none of these
/// files. Returns the directories changed.
pub(crate) fn record_written<'a>(
    dirs: &mut HashMap<Vec<u8>, DirState>,
    written: impl IntoIterator<Item = (&'a [u8], Option<FileState>)>,
) -> Vec<Vec<u8>> {
    let mut touched = std::collections::BTreeSet::new();
    for (path, state) in written {
        let (parent, name) = crate::paths::split_parent(path);
        let dir = dirs
            .entry(parent.to_vec())
            .or_insert_with(DirState::unverified);
        dir.stamp.verified_ns = 0;
        dir.tree = None;
        let at = dir
            .children()
            .binary_search_by(|(n, _)| n.as_slice().cmp(name));
        match (at, state) {
            (Ok(i), Some(s)) => dir.children_mut()[i].1 = Child::File(s),
            (Err(i), Some(s)) => dir
                .children_mut()
                .insert(i, (Name::from_slice(name), Child::File(s))),
            (Ok(i), None) => {
                dir.children_mut().remove(i);
            }
            (Err(_), None) => {}
        }
        touched.insert(parent.to_vec());
        // Every directory above holds a different tree now.
        let mut up = parent;
        while !up.is_empty() {
            up = crate::paths::split_parent(up).0;
            if let Some(d) = dirs.get_mut(up) {
                d.tree = None;
                touched.insert(up.to_vec());
            }
        }
    }
    touched.into_iter().collect()
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn kept_caches_stay_within_their_limit() {
        let cache = |files: usize| Cache {
            dirs: HashMap::from([(
                Vec::new(),
                DirState {
                    children: (0..files)
                        .map(|i| (Name::from_vec(i.to_string().into_bytes()), Child::Dir))
                        .collect(),
                    ..DirState::unverified()
                },
            )]),
            global: None,
        };
        let root = |name: &str| camino::Utf8PathBuf::from(format!("/w/{name}"));
        let mut kept = KeptSet::new(10);
        assert!(kept.insert(&root("a"), 1, cache(3)).is_empty()); // 4 entries
        assert!(kept.insert(&root("b"), 2, cache(3)).is_empty());
        // Replaces a's: 4 + 5.
        assert_eq!(kept.insert(&root("a"), 3, cache(4)).len(), 1);
        assert_eq!(kept.by_root.len(), 2);
        assert!(kept.insert(&root("c"), 4, cache(0)).is_empty()); // 10 in all: fits
        assert_eq!(kept.by_root.len(), 3);
        // b, the least recently written, goes.
        assert_eq!(kept.insert(&root("d"), 5, cache(1)).len(), 1);
        assert!(kept.take(&root("b")).is_none());
        assert_eq!(kept.take(&root("a")).map(|k| k.version), Some(3));
        // Larger than the limit alone: not kept.
        assert_eq!(kept.insert(&root("e"), 6, cache(20)).len(), 1);
        assert!(kept.take(&root("e")).is_none());
        assert!(kept.take(&root("c")).is_some());
        assert!(kept.take(&root("d")).is_some());
    }

    /// The counts follow every change made to the listing.
    #[test]
    fn a_tally_follows_its_listing() {
        let file = |size: u64, changed_ns: i64| {
            Child::File(FileState {
                size,
                mtime_ns: changed_ns,
                ctime_ns: changed_ns,
                ino: 1,
                dev: 1,
                mode: 0o100644,
                blob: cas::BlobId::of(b"x"),
                verified_ns: 1_000_000_000_000,
            })
        };
        let mut state = DirState::unverified_with(vec![
            (Name::from_slice(b"a"), file(3, 0)),
            (Name::from_slice(b"d"), Child::Dir),
        ]);
        let t = state.tally();
        assert_eq!(
            (t.files, t.bytes, t.dirs, t.skipped, t.racy),
            (1, 3, 1, 0, false)
        );
        state
            .children_mut()
            .push((Name::from_slice(b"e"), file(4, 1_000_000_000_000)));
        let t = state.tally();
        assert_eq!((t.files, t.bytes, t.racy), (2, 7, true));
        state.children_mut()[1].1 = Child::Skipped(SkipReason::PathTooLong);
        let t = state.tally();
        assert_eq!((t.dirs, t.skipped), (0, 1));
    }

    /// Found by the `stat_cache` fuzz target: a record (checksum intact) whose listing
    /// held a name with NUL and '/' bytes decoded, and a capture would join it to a path
    /// (`stat`ing through it). A listing no directory gives is not trusted.
    #[test]
    fn a_listing_no_directory_gives_is_not_trusted() {
        #[rustfmt::skip]
        let crash: &[u8] = &[
            0x03, 0x83, 0xcf, 0x40, 0xbd, 0x02, 0xbc, 0xea, 0x18, 0x83, 0xcf, 0x40, 0xbd, 0x02,
            0xbc, 0xea, 0x18, 0x88, 0x0b, 0xae, 0xd9, 0xd3, 0x6b, 0x4f, 0x71, 0xdf, 0x00, 0x57,
            0x41, 0x7e, 0x78, 0xa2, 0xb6, 0xc8, 0xa0, 0xa9, 0x30, 0x43, 0xac, 0x38, 0xa2, 0xdd,
            0xbc, 0x34, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02,
            0x04, 0x00, 0x64, 0x65, 0x65, 0x70, 0x01, 0x0e, 0x00, 0x6c, 0x69, 0x62, 0x2e, 0x72,
            0x73, 0x30, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x83, 0xcf, 0x40, 0xbd, 0x02,
            0xbc, 0xea, 0x18, 0x83, 0xcf, 0x40, 0xbd, 0x02, 0xbc, 0xea, 0x18, 0x06, 0xe0, 0x9b,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa4,
            0x81, 0x00, 0x00, 0xae, 0xb9, 0x09, 0xcd, 0x10, 0x94, 0xfa, 0x7c, 0x91, 0x4f, 0xf1,
            0x43, 0x4b, 0x36, 0x08, 0xa1, 0xbe, 0x9f, 0xfe, 0x8f, 0x92, 0xf0, 0xf8, 0x87, 0x9c,
            0x37, 0x0c, 0x44, 0x46, 0x83, 0x17, 0xcd, 0x05, 0x6d, 0x4d, 0xc0, 0x02, 0xbc, 0xea,
            0x18, 0x92, 0x5a, 0x92, 0xf8, 0x37, 0x01, 0x0f, 0x61,
        ];
        assert_eq!(DirState::decode(&seal(crash.to_vec())), None);

        let listing = |names: &[&[u8]]| DirState {
            children: names
                .iter()
                .map(|n| (Name::from_slice(n), Child::Dir))
                .collect(),
            ..DirState::unverified()
        };
        assert!(DirState::decode(&listing(&[b"a", b"b"]).encode().unwrap()).is_some());
        for bad in [
            &[&b"b"[..], b"a"][..],
            &[b"a", b"a"],
            &[b"../etc"],
            &[b".."],
            &[b"."],
            &[b""],
            &[b"a\0b"],
            &[&[b'x'; 256][..]],
        ] {
            assert_eq!(
                DirState::decode(&listing(bad).encode().unwrap()),
                None,
                "{bad:?}"
            );
        }
    }

    /// Every skip reason a listing can hold comes back as it went in, and reads as the
    /// `reason` text SPEC's `skipped` lists have always shown.
    #[test]
    fn skip_reasons_round_trip_with_their_texts() {
        let reasons = [
            (
                SkipReason::Denied {
                    pattern: "*.pem".into(),
                },
                "denied by pattern *.pem",
            ),
            (
                SkipReason::InvalidName(path_policy::NameError::Git),
                "invalid name: a spelling of .git",
            ),
            (SkipReason::PathTooLong, "path-too-long"),
            (SkipReason::PseudoFilesystem, "pseudo-filesystem"),
            (
                SkipReason::OverSizeCap { size: 10, cap: 4 },
                "larger than the size cap (10 bytes > 4 bytes)",
            ),
            (
                SkipReason::Special(Special::Socket),
                "socket (not a file, directory or symlink)",
            ),
            (SkipReason::IgnoreFileNotRegular, "ignore-file-not-regular"),
            (SkipReason::IgnoreFileTooLarge, "ignore-file-too-large"),
            (
                SkipReason::OutOfScope(Box::new(SkipReason::PathTooLong)),
                "out of scope: path-too-long",
            ),
        ];
        let mut state = DirState::unverified();
        for (i, (reason, text)) in reasons.iter().enumerate() {
            assert_eq!(reason.to_string(), *text);
            state.children_mut().push((
                Name::from_vec(format!("n{i}").into_bytes()),
                Child::Skipped(reason.clone()),
            ));
        }
        assert_eq!(DirState::decode(&state.encode().unwrap()), Some(state));
    }

    #[test]
    fn dir_states_round_trip() {
        let file = FileState {
            size: 3,
            mtime_ns: 1,
            ctime_ns: 2,
            ino: 3,
            dev: 4,
            mode: 0o100644,
            blob: cas::BlobId::of(b"abc"),
            verified_ns: 5,
        };
        let state = DirState {
            stamp: DirStamp {
                mtime_ns: 1,
                ctime_ns: 2,
                ino: 3,
                dev: 4,
                verified_ns: 5,
            },
            ignore: IgnoreStamp {
                mask: 0b101,
                hash: 42,
            },
            tree: Some((cas::TreeId::from_bytes([7; 32]), 9)),
            children: vec![
                (b"a".as_slice().into(), Child::File(file)),
                (b"d".as_slice().into(), Child::Dir),
                (
                    b"p".as_slice().into(),
                    Child::Skipped(SkipReason::Special(Special::Fifo)),
                ),
            ],
            pending: false,
            tally: TallyCell::default(),
        };
        assert_eq!(
            DirState::decode(&state.encode().unwrap()),
            Some(state.clone())
        );
        assert_eq!(DirState::decode(&state.encode().unwrap()[..20]), None);
        let mut flipped = state.encode().unwrap();
        flipped[30] ^= 1;
        assert_eq!(
            DirState::decode(&flipped),
            None,
            "a damaged record is not trusted"
        );
        let mut longer = state.encode().unwrap();
        longer.push(0);
        assert_eq!(DirState::decode(&longer), None);
        assert_eq!(dir_key(b"a/b"), b"da\0b");
        assert!(dir_key(b"a/b") < dir_key(b"a-b"), "keys sort in tree order");
    }

    /// Files are stored as differences from their neighbours: any values, however far
    /// apart or out of order, come back exactly.
    #[test]
    fn file_entries_round_trip_whatever_their_values() {
        let file = |mtime_ns, ctime_ns, ino, dev, verified_ns| {
            Child::File(FileState {
                size: u64::MAX,
                mtime_ns,
                ctime_ns,
                ino,
                dev,
                mode: u32::MAX,
                blob: cas::BlobId::of(b"x"),
                verified_ns,
            })
        };
        let state = DirState {
            children: vec![
                (
                    b"a".as_slice().into(),
                    file(i64::MAX, i64::MIN, u64::MAX, 9, i64::MIN),
                ),
                (
                    b"b".as_slice().into(),
                    file(i64::MIN, i64::MAX, 0, u64::MAX, i64::MAX),
                ),
                (b"c".as_slice().into(), file(-5, 7, 1 << 63, 0, 0)),
                (
                    b"d".as_slice().into(),
                    file(
                        1_700_000_000_123_456_789,
                        1_700_000_000_123_456_790,
                        4242,
                        9,
                        1_700_000_001_000_000_000,
                    ),
                ),
            ],
            ..DirState::unverified()
        };
        assert_eq!(DirState::decode(&state.encode().unwrap()), Some(state));
    }

    /// A listing of `n` files written together, as one capture records them.
    fn similar_listing(n: u64) -> DirState {
        let stamp = DirStamp {
            mtime_ns: 1_700_000_000_000_000_000,
            ctime_ns: 1_700_000_000_000_000_000,
            ino: 1_000_000,
            dev: 64769,
            verified_ns: 1_700_000_100_000_000_000,
        };
        let mut children: Vec<_> = (0..n)
            .map(|i| {
                let at = stamp.mtime_ns + i64::try_from(i).unwrap() * 10_417;
                let f = FileState {
                    size: 50 + i % 10,
                    mtime_ns: at,
                    ctime_ns: at,
                    ino: stamp.ino + 1 + i,
                    dev: stamp.dev,
                    mode: 0o100644,
                    blob: cas::BlobId::of(&i.to_le_bytes()),
                    verified_ns: stamp.verified_ns,
                };
                (
                    Name::from_vec(format!("f{}.rs", 100_000 + i).into_bytes()),
                    Child::File(f),
                )
            })
            .collect();
        children.sort_by(|a, b| a.0.cmp(&b.0));
        DirState {
            stamp,
            children,
            ..DirState::unverified()
        }
    }

    /// The tree a listing's files make.
    fn tree_of(state: &DirState) -> cas::Tree {
        let entries = state
            .children()
            .iter()
            .filter_map(|(name, child)| match child {
                Child::File(f) => Some(cas::TreeEntry {
                    name: name.to_vec(),
                    kind: cas::EntryKind::File,
                    id: f.blob.into(),
                    size: f.size,
                }),
                _ => None,
            })
            .collect();
        cas::Tree::new(entries).unwrap()
    }

    /// A thousand files written together take a few bytes each besides their blob ids:
    /// the record keeps differences, and zstd shares the names' common parts.
    #[test]
    fn a_listing_of_similar_files_is_compact() {
        let state = similar_listing(1000);
        let encoded = state.encode().unwrap();
        let per_file = encoded.len() / 1000;
        assert!(
            per_file <= 32 + 12,
            "{per_file} bytes per file: the blob id and 12 more at most"
        );
        assert_eq!(DirState::decode(&encoded), Some(state));
    }

    /// A record written against its directory's tree leaves out the blob ids the tree
    /// holds; read back, they stay in the tree until resolved from it, and the state is
    /// then the one written. A tree lacking a name, or another tree, resolves nothing. A
    /// file whose blob the tree does not hold keeps its id.
    #[test]
    fn a_record_points_into_its_tree() {
        let mut state = similar_listing(1000);
        let tree = tree_of(&state);
        state.tree = Some((tree.id(), tree.size()));
        let with_ids = state.encode().unwrap();
        let against = state.encode_against(Some(&tree)).unwrap();
        assert!(
            against.len() <= 12 * 1000,
            "{} bytes for 1000 files",
            against.len()
        );
        assert!(against.len() + 30 * 1000 <= with_ids.len());

        let read = DirState::decode(&against).unwrap();
        assert!(read.pending);
        assert_eq!(
            read.file(b"f100007.rs"),
            None,
            "no entry without its blob id"
        );
        let mut short = tree.entries().to_vec();
        short.remove(500);
        let short = cas::Tree::new(short).unwrap();
        assert!(!read.clone().resolve(&short));
        assert!(!read.clone().resolve(&cas::Tree::default()));
        // Written again unchanged, it still points into its tree.
        assert_eq!(read.encode().unwrap().len(), against.len());
        let mut resolved = read;
        assert!(resolved.resolve(&tree));
        assert_eq!(resolved, state);
        // Any other tree is not the record's: nothing is left out against it.
        assert_eq!(state.encode_against(Some(&short)).unwrap(), with_ids);

        let mut edited = state.clone();
        if let Child::File(f) = &mut edited.children_mut()[7].1 {
            f.blob = cas::BlobId::of(b"edited since the tree");
        }
        let mut read = DirState::decode(&edited.encode_against(Some(&tree)).unwrap()).unwrap();
        assert!(read.resolve(&tree));
        assert_eq!(read, edited);

        // Still in a tree it no longer names: not written at all.
        let mut orphan = DirState::decode(&against).unwrap();
        orphan.tree = None;
        assert_eq!(orphan.encode(), None);
    }
}
