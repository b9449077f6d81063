//! Per-directory state: the cache that lets a snapshot skip unchanged directories.
//!
//! For every directory in scope the store keeps its stamp (mtime, ctime, inode, device and
//! when that stat was taken), a fingerprint of the ignore files that govern it, and its
//! in-scope listing: subdirectories, skipped entries, and per file the [`FileState`] of the
//! stat cache. Creating, deleting or renaming an entry changes a directory's mtime, so a
//! directory whose stamp still matches (and is not racy) lists the same names, and needs no
//! `readdir` and no ignore matching: only its files are `lstat`ed. A changed ignore file
//! invalidates its directory and everything below it.
//!
//! This module holds one directory's record ([`DirState`]) and its encoding; `cache`
//! the cache of a whole worktree and the caches kept in memory between captures.

use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use worktree_registry::RegistryRead;

use crate::file_state::{FileState, RACY_MARGIN, Stat};
use crate::paths::{SkipReason, Special};

mod cache;
#[cfg(test)]
mod tests;

pub use cache::{
    Cache, GLOBAL_KEY, KeptCaches, dir_key, files_stamp, global_stamp, record_written,
    resolve_dirs, resolve_or_forget,
};

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
pub struct DirStamp {
    /// Modified (ns since the epoch).
    pub mtime_ns: i64,
    /// Changed (ns since the epoch).
    pub ctime_ns: i64,
    /// Inode.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// When the stat was taken (ns since the epoch).
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
    /// The stamp of a directory whose stat `meta` was taken at `verified_ns`.
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

/// The ignore files present in a directory (bit per `IGNORE_FILES` entry) and a hash of
/// their stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IgnoreStamp {
    /// Which of `IGNORE_FILES` are present, a bit each.
    pub mask: u8,
    /// A hash of their stats.
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
pub type Name = smallvec::SmallVec<[u8; 16]>;

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Child {
    /// A file or symlink, with its stat-cache record.
    File(FileState),
    /// A subdirectory in scope.
    Dir,
    /// An entry left out of scope and reported, with why.
    Skipped(SkipReason),
}

/// A directory as the last capture saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirState {
    /// The directory's own stat when it was listed.
    pub stamp: DirStamp,
    /// The ignore files that governed its listing.
    pub ignore: IgnoreStamp,
    /// Sorted by name.
    children: Vec<(Name, Child)>,
    /// The tree this directory's files made last time, and its size; reused while nothing
    /// below it changes.
    pub tree: Option<(cas::TreeId, u64)>,
    /// Some files' blob ids are still in `tree` (read as the record was, not yet taken
    /// from there): their `blob` is `UNRESOLVED` until [`DirState::resolve`].
    pub pending: bool,
    /// Counts of `children`, taken once: walking a million files' listings at every
    /// capture would cost more than the rest of a capture where nothing changed.
    tally: TallyCell,
}

/// What a directory's listing holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    /// Files and symlinks.
    pub files: u64,
    /// Of every file.
    pub bytes: u64,
    /// Subdirectories.
    pub dirs: u64,
    /// Entries left out and reported.
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
pub fn seal_body(body: &[u8]) -> Vec<u8> {
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
