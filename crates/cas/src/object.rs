//! Trees and snapshots, and their canonical encoding (`docs/format.md`).
//!
//! The encoding is the hashed form: an object's id is BLAKE3 in derive-key mode, with a context
//! string per kind, over exactly these bytes. Decoding accepts only canonical input, so every
//! object has one encoding and one id.

use std::collections::{BTreeMap, HashSet};

use camino::Utf8PathBuf;

use crate::id::{BlobId, ObjectId, SnapshotId, TreeId};

/// BLAKE3 key-derivation context for tree ids (format version 1).
pub const TREE_CONTEXT: &str = "cairn 2026-11-22 tree v1";
/// BLAKE3 key-derivation context for snapshot ids (format version 1).
pub const SNAPSHOT_CONTEXT: &str = "cairn 2026-11-22 snapshot v1";

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A regular file with the executable bit.
    Executable,
    /// A symbolic link; its blob holds the target, stored verbatim.
    Symlink,
    /// A directory.
    Tree,
}

impl EntryKind {
    const fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Executable => 2,
            EntryKind::Symlink => 3,
            EntryKind::Tree => 4,
        }
    }

    const fn from_code(code: u8) -> Option<EntryKind> {
        match code {
            1 => Some(EntryKind::File),
            2 => Some(EntryKind::Executable),
            3 => Some(EntryKind::Symlink),
            4 => Some(EntryKind::Tree),
            _ => None,
        }
    }

    /// True for the kinds whose id is a blob (everything but trees).
    pub const fn is_blob(self) -> bool {
        !matches!(self, EntryKind::Tree)
    }
}

/// One named entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// The file name: raw bytes, never containing `/`.
    pub name: Vec<u8>,
    /// What the entry is.
    pub kind: EntryKind,
    /// A [`BlobId`] for files and symlinks, a [`TreeId`] for trees.
    pub id: ObjectId,
    /// Bytes of the file or symlink target; for a tree, the sum over everything below it.
    pub size: u64,
}

impl TreeEntry {
    /// The entry's blob, if it is not a tree.
    pub fn blob(&self) -> Option<BlobId> {
        self.kind.is_blob().then(|| self.id.as_blob())
    }

    /// The entry's subtree, if it is a tree.
    pub fn tree(&self) -> Option<TreeId> {
        (!self.kind.is_blob()).then(|| self.id.as_tree())
    }
}

/// Why bytes are not a canonical object, or an object cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The encoding ended early.
    #[error("truncated encoding")]
    Truncated,
    /// Bytes were left after the object.
    #[error("{0} trailing bytes after the object")]
    TrailingBytes(usize),
    /// An entry kind code that does not exist.
    #[error("unknown entry kind code {0}")]
    UnknownKind(u8),
    /// A name that no tree may hold.
    #[error("invalid entry name {name:?}: {reason}")]
    InvalidName {
        /// The name, lossily decoded.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// Entries not in strictly ascending name order.
    #[error("entries out of order at {name:?}")]
    Unsorted {
        /// The first name out of order.
        name: String,
    },
    /// Two entries with one name.
    #[error("duplicate entry {name:?}")]
    Duplicate {
        /// The repeated name.
        name: String,
    },
    /// A text field that is not UTF-8.
    #[error("{field} is not valid UTF-8")]
    NotUtf8 {
        /// Which field.
        field: &'static str,
    },
    /// A label that is not `key=value` with a valid key.
    #[error("invalid label {label:?}: {reason}")]
    InvalidLabel {
        /// The label as given.
        label: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A field value outside its range.
    #[error("invalid {field}")]
    InvalidField {
        /// Which field.
        field: &'static str,
    },
}

/// Checks an entry name against the tree-name rules of [`check_name`](crate::check_name): not
/// empty, `.` or `..`, no `/`, NUL or control byte, at most 255 bytes, and no spelling of
/// `.git`. Every tree is checked when built and again when decoded, so a stored or received
/// tree can never name a path cairn would refuse.
pub fn validate_name(name: &[u8]) -> Result<(), ObjectError> {
    crate::name::check_name(name).map_err(|e| ObjectError::InvalidName {
        name: lossy(name),
        reason: e.reason(),
    })
}

fn lossy(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// A directory listing: entries sorted by name bytes, names unique and valid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    entries: Vec<TreeEntry>,
}

impl Tree {
    /// Builds a tree, sorting the entries; fails on an invalid or duplicate name, or
    /// entry sizes whose sum overflows.
    pub fn new(mut entries: Vec<TreeEntry>) -> Result<Tree, ObjectError> {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Self::from_sorted(entries)
    }

    /// Builds a tree from entries that must already be in strictly ascending name order.
    /// Fails on an invalid or duplicate name, or entry sizes whose sum [`Tree::size`] would
    /// not hold.
    pub fn from_sorted(entries: Vec<TreeEntry>) -> Result<Tree, ObjectError> {
        let mut total = 0u64;
        for (i, e) in entries.iter().enumerate() {
            validate_name(&e.name)?;
            total = total.checked_add(e.size).ok_or(ObjectError::InvalidField {
                field: "entry sizes (their sum exceeds 2^64 - 1)",
            })?;
            if i > 0 {
                match entries[i - 1].name.cmp(&e.name) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal => {
                        return Err(ObjectError::Duplicate {
                            name: lossy(&e.name),
                        });
                    }
                    std::cmp::Ordering::Greater => {
                        return Err(ObjectError::Unsorted {
                            name: lossy(&e.name),
                        });
                    }
                }
            }
        }
        Ok(Tree { entries })
    }

    /// The entries, in name order.
    pub fn entries(&self) -> &[TreeEntry] {
        &self.entries
    }

    /// The entry called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Total bytes of everything in the tree (the sum of entry sizes, which every tree
    /// keeps within a `u64`).
    pub fn size(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.entries.len() * 56);
        put_u32(&mut out, len_u32(self.entries.len()));
        for e in &self.entries {
            out.push(e.kind.code());
            put_bytes(&mut out, &e.name);
            out.extend_from_slice(e.id.as_bytes());
            out.extend_from_slice(&e.size.to_le_bytes());
        }
        out
    }

    /// Decodes canonical bytes, checking every invariant.
    pub fn decode(bytes: &[u8]) -> Result<Tree, ObjectError> {
        let mut r = Decoder(bytes);
        let count = r.u32()? as usize;
        // Each entry takes at least 46 bytes; refuse counts the input cannot hold.
        if count > bytes.len() / 46 {
            return Err(ObjectError::Truncated);
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let code = r.u8()?;
            let kind = EntryKind::from_code(code).ok_or(ObjectError::UnknownKind(code))?;
            let name = r.bytes()?.to_vec();
            let id = ObjectId::from_bytes(r.id()?);
            let size = r.u64()?;
            entries.push(TreeEntry {
                name,
                kind,
                id,
                size,
            });
        }
        r.finish()?;
        Tree::from_sorted(entries)
    }

    /// The id of this tree.
    pub fn id(&self) -> TreeId {
        TreeId::from_bytes(hash_with(TREE_CONTEXT, &self.encode()))
    }
}

/// Where a snapshot came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Source {
    /// The directory (or git repository) it was captured from.
    pub path: Utf8PathBuf,
    /// The git commit checked out there, if the directory is a git repository.
    pub git: Option<GitSource>,
}

/// The git state of a snapshot's source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GitSource {
    /// The commit id, as git prints it.
    pub commit: String,
    /// Whether the working files differed from that commit.
    pub dirty: bool,
}

/// An immutable commit object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The root tree.
    pub tree: TreeId,
    /// Parent snapshots, first parent first.
    pub parents: Vec<SnapshotId>,
    /// When it was made.
    pub created: jiff::Timestamp,
    /// Free-form message.
    pub message: String,
    /// `key=value` labels, one value per key.
    pub labels: BTreeMap<String, String>,
    /// Where it was captured from.
    pub source: Option<Source>,
}

/// Checks a label key: 1 to 128 characters of `A-Z a-z 0-9 _ . -`.
pub fn validate_label_key(key: &str) -> Result<(), ObjectError> {
    let ok = !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ObjectError::InvalidLabel {
            label: key.to_owned(),
            reason: "keys are 1 to 128 characters of A-Z, a-z, 0-9, '_', '.', '-'",
        })
    }
}

/// Parses `key=value`.
pub fn parse_label(label: &str) -> Result<(String, String), ObjectError> {
    let Some((key, value)) = label.split_once('=') else {
        return Err(ObjectError::InvalidLabel {
            label: label.to_owned(),
            reason: "expected key=value",
        });
    };
    validate_label_key(key).map_err(|_| ObjectError::InvalidLabel {
        label: label.to_owned(),
        reason: "keys are 1 to 128 characters of A-Z, a-z, 0-9, '_', '.', '-'",
    })?;
    Ok((key.to_owned(), value.to_owned()))
}

impl Snapshot {
    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.message.len());
        out.extend_from_slice(self.tree.as_bytes());
        put_u32(&mut out, len_u32(self.parents.len()));
        for p in &self.parents {
            out.extend_from_slice(p.as_bytes());
        }
        let ns = self.created.as_nanosecond();
        let secs = i64::try_from(ns.div_euclid(1_000_000_000)).unwrap_or(i64::MAX);
        let nanos = u32::try_from(ns.rem_euclid(1_000_000_000)).unwrap_or(0);
        out.extend_from_slice(&secs.to_le_bytes());
        out.extend_from_slice(&nanos.to_le_bytes());
        put_bytes(&mut out, self.message.as_bytes());
        put_u32(&mut out, len_u32(self.labels.len()));
        for (k, v) in &self.labels {
            put_bytes(&mut out, k.as_bytes());
            put_bytes(&mut out, v.as_bytes());
        }
        match &self.source {
            None => out.push(0),
            Some(src) => {
                out.push(1);
                put_bytes(&mut out, src.path.as_str().as_bytes());
                match &src.git {
                    None => out.push(0),
                    Some(git) => {
                        out.push(1);
                        put_bytes(&mut out, git.commit.as_bytes());
                        out.push(u8::from(git.dirty));
                    }
                }
            }
        }
        out
    }

    /// Decodes canonical bytes.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, ObjectError> {
        let mut r = Decoder(bytes);
        let tree = TreeId::from_bytes(r.id()?);
        let count = r.u32()? as usize;
        if count > bytes.len() / 32 {
            return Err(ObjectError::Truncated);
        }
        let mut parents = Vec::with_capacity(count);
        // A set, not a scan of `parents`: an upload may hold a million of them.
        let mut seen = HashSet::with_capacity(count);
        for _ in 0..count {
            let p = SnapshotId::from_bytes(r.id()?);
            if !seen.insert(p) {
                return Err(ObjectError::InvalidField {
                    field: "parents (duplicate)",
                });
            }
            parents.push(p);
        }
        let secs = i64::from_le_bytes(r.array()?);
        let nanos = u32::from_le_bytes(r.array()?);
        if nanos >= 1_000_000_000 {
            return Err(ObjectError::InvalidField {
                field: "creation time",
            });
        }
        let created =
            jiff::Timestamp::from_nanosecond(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
                .map_err(|_| ObjectError::InvalidField {
                    field: "creation time",
                })?;
        let message = r.string("message")?;
        let count = r.u32()? as usize;
        let mut labels = BTreeMap::new();
        let mut last: Option<String> = None;
        for _ in 0..count {
            let key = r.string("label key")?;
            let value = r.string("label value")?;
            validate_label_key(&key)?;
            if last.as_ref().is_some_and(|l| *l >= key) {
                return Err(ObjectError::InvalidLabel {
                    label: key,
                    reason: "labels out of order or repeated",
                });
            }
            last = Some(key.clone());
            labels.insert(key, value);
        }
        let source = match r.u8()? {
            0 => None,
            1 => {
                let path = Utf8PathBuf::from(r.string("source path")?);
                let git = match r.u8()? {
                    0 => None,
                    1 => {
                        let commit = r.string("source commit")?;
                        let dirty = match r.u8()? {
                            0 => false,
                            1 => true,
                            _ => {
                                return Err(ObjectError::InvalidField {
                                    field: "dirty flag",
                                });
                            }
                        };
                        Some(GitSource { commit, dirty })
                    }
                    _ => {
                        return Err(ObjectError::InvalidField {
                            field: "source git flag",
                        });
                    }
                };
                Some(Source { path, git })
            }
            _ => {
                return Err(ObjectError::InvalidField {
                    field: "source flag",
                });
            }
        };
        r.finish()?;
        Ok(Snapshot {
            tree,
            parents,
            created,
            message,
            labels,
            source,
        })
    }

    /// The id of this snapshot.
    pub fn id(&self) -> SnapshotId {
        SnapshotId::from_bytes(hash_with(SNAPSHOT_CONTEXT, &self.encode()))
    }
}

pub(crate) fn hash_with(context: &str, bytes: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key(context);
    h.update(bytes);
    *h.finalize().as_bytes()
}

fn len_u32(n: usize) -> u32 {
    // Lengths are bounded far below 4 GiB by the callers (names, messages, entry counts).
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, len_u32(b.len()));
    out.extend_from_slice(b);
}

pub(crate) struct Decoder<'a>(pub(crate) &'a [u8]);

impl<'a> Decoder<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], ObjectError> {
        if self.0.len() < n {
            return Err(ObjectError::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], ObjectError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, ObjectError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, ObjectError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, ObjectError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn id(&mut self) -> Result<[u8; 32], ObjectError> {
        self.array()
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ObjectError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, ObjectError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| ObjectError::NotUtf8 { field })
    }
    pub(crate) fn finish(self) -> Result<(), ObjectError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ObjectError::TrailingBytes(self.0.len()))
        }
    }
}

/// The three kinds of stored object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    /// File content or a symlink target.
    Blob,
    /// A directory listing.
    Tree,
    /// A commit object.
    Snapshot,
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ObjectKind::Blob => "blob",
            ObjectKind::Tree => "tree",
            ObjectKind::Snapshot => "snapshot",
        })
    }
}
