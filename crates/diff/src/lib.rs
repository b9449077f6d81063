//! `diff`: what changed between two trees.
//!
//! [`tree_changes`] walks two trees side by side and descends only into subtrees whose ids
//! differ, so its cost grows with the change, not with the tree. Trees come from any
//! [`TreeSource`]: the store, or trees held in memory (a live worktree scanned but not
//! stored).
//!
//! It owns comparing trees (changes, renames, line diffs, stats) and rendering paths and
//! patches as git does. It reads trees through [`TreeSource`] and knows nothing of
//! worktrees on disk, git repositories or the command line.
//!
//! ```
//! use cas::{EntryKind, Tree, TreeEntry, TreeId};
//! use std::collections::HashMap;
//!
//! let file = |name: &str, content: &[u8]| TreeEntry {
//!     name: name.as_bytes().to_vec(),
//!     kind: EntryKind::File,
//!     id: cas::BlobId::of(content).into(),
//!     size: content.len() as u64,
//! };
//! let old = Tree::new(vec![file("a", b"1"), file("b", b"2")])?;
//! let new = Tree::new(vec![file("a", b"1"), file("b", b"3"), file("c", b"4")])?;
//! let trees: HashMap<TreeId, Tree> = [(old.id(), old.clone()), (new.id(), new.clone())].into();
//! let changes = diff::tree_changes(&trees, Some(old.id()), Some(new.id()))?;
//! let paths: Vec<&[u8]> = changes.iter().map(|c| c.path.as_bytes()).collect();
//! assert_eq!(paths, [&b"b"[..], b"c"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code, clippy::unwrap_used)]
#![warn(missing_docs)]

pub mod stat;
pub mod text;

use std::collections::HashMap;

use cas::{EntryKind, ObjectId, ObjectKind, ReadError, Reader, Tree, TreeId};
use path_policy::{RepoPath, RepoPathBuf};
// Paths are shown in one place, the path type's.
pub use path_policy::{path_text, quote_path};

/// Where trees are read from.
pub trait TreeSource {
    /// The tree with this id.
    fn tree(&self, id: TreeId) -> Result<Tree, ReadError>;
}

impl TreeSource for Reader {
    fn tree(&self, id: TreeId) -> Result<Tree, ReadError> {
        Reader::tree(self, id)
    }
}

impl TreeSource for HashMap<TreeId, Tree> {
    fn tree(&self, id: TreeId) -> Result<Tree, ReadError> {
        self.get(&id).cloned().ok_or(ReadError::NotFound {
            kind: ObjectKind::Tree,
            id: id.into(),
        })
    }
}

/// Trees held in memory first, then the store.
pub struct Overlay<'a, S: TreeSource + ?Sized> {
    /// Trees not (yet) stored.
    pub memory: &'a HashMap<TreeId, Tree>,
    /// Where everything else is.
    pub store: &'a S,
}

impl<S: TreeSource + ?Sized> TreeSource for Overlay<'_, S> {
    fn tree(&self, id: TreeId) -> Result<Tree, ReadError> {
        match self.memory.get(&id) {
            Some(t) => Ok(t.clone()),
            None => self.store.tree(id),
        }
    }
}

/// A file, executable or symlink at some path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEntry {
    /// File, executable file or symlink (never a tree).
    pub kind: EntryKind,
    /// Its blob.
    pub id: ObjectId,
    /// Bytes.
    pub size: u64,
}

/// One path whose content differs; `None` on a side means the path holds no file there
/// (absent, or a directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    /// Path from the tree root.
    pub path: RepoPathBuf,
    /// What the old tree has there.
    pub old: Option<FileEntry>,
    /// What the new tree has there.
    pub new: Option<FileEntry>,
}

/// Every file-level difference between `old` and `new` (`None` = the empty tree), in tree
/// order. A path that is a file on one side and a directory on the other shows as the file
/// removed (or added) plus every file below the directory added (or removed). Only subtrees
/// whose ids differ are read. Iterative, so no tree is deep enough to exhaust the stack.
pub fn tree_changes(
    source: &(impl TreeSource + ?Sized),
    old: Option<TreeId>,
    new: Option<TreeId>,
) -> Result<Vec<TreeChange>, ReadError> {
    struct Frame {
        a: Tree,
        b: Tree,
        i: usize,
        j: usize,
        prefix_len: usize,
    }
    let load = |id: Option<TreeId>| match id {
        Some(id) => source.tree(id),
        None => Ok(Tree::default()),
    };
    let mut out = Vec::new();
    if old == new {
        return Ok(out);
    }
    let mut prefix: Vec<u8> = Vec::new();
    let mut stack = vec![Frame {
        a: load(old)?,
        b: load(new)?,
        i: 0,
        j: 0,
        prefix_len: 0,
    }];
    while let Some(frame) = stack.last_mut() {
        let (a, b) = (frame.a.entries(), frame.b.entries());
        if frame.i >= a.len() && frame.j >= b.len() {
            let len = frame.prefix_len;
            stack.pop();
            prefix.truncate(len);
            continue;
        }
        let order = match (a.get(frame.i), b.get(frame.j)) {
            (Some(x), Some(y)) => x.name.cmp(&y.name),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        let (left, right) = match order {
            std::cmp::Ordering::Less => {
                frame.i += 1;
                (a.get(frame.i - 1).cloned(), None)
            }
            std::cmp::Ordering::Greater => {
                frame.j += 1;
                (None, b.get(frame.j - 1).cloned())
            }
            std::cmp::Ordering::Equal => {
                frame.i += 1;
                frame.j += 1;
                (a.get(frame.i - 1).cloned(), b.get(frame.j - 1).cloned())
            }
        };
        let Some(name) = left.as_ref().or(right.as_ref()).map(|e| e.name.clone()) else {
            continue;
        };
        let len = frame.prefix_len;
        prefix.truncate(len);
        if len > 0 {
            prefix.push(b'/');
        }
        prefix.extend_from_slice(&name);
        let file = |e: &cas::TreeEntry| {
            e.kind.is_blob().then_some(FileEntry {
                kind: e.kind,
                id: e.id,
                size: e.size,
            })
        };
        let (old_file, new_file) = (left.as_ref().and_then(file), right.as_ref().and_then(file));
        if (old_file.is_some() || new_file.is_some()) && old_file != new_file {
            out.push(TreeChange {
                // Every name on the way is a `cas::Tree` entry's, checked when the tree
                // was built or decoded.
                path: RepoPathBuf::from_bytes_unchecked(prefix.clone()),
                old: old_file,
                new: new_file,
            });
        }
        let (old_tree, new_tree) = (left.and_then(|e| e.tree()), right.and_then(|e| e.tree()));
        if (old_tree.is_some() || new_tree.is_some()) && old_tree != new_tree {
            let child = Frame {
                a: load(old_tree)?,
                b: load(new_tree)?,
                i: 0,
                j: 0,
                prefix_len: prefix.len(),
            };
            stack.push(child);
        }
    }
    Ok(out)
}

/// How a path changed, as git's `--name-status` letters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// `A`: a file where there was none.
    Added,
    /// `D`: a file gone.
    Deleted,
    /// `M`: other content or executable bit.
    Modified,
    /// `T`: a file became a symlink or the other way round.
    TypeChanged,
    /// `R100`: the same content under another path.
    Renamed,
}

impl Status {
    /// The letter git prints.
    pub fn letter(self) -> &'static str {
        match self {
            Status::Added => "A",
            Status::Deleted => "D",
            Status::Modified => "M",
            Status::TypeChanged => "T",
            Status::Renamed => "R100",
        }
    }
}

/// One changed path, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// What happened.
    pub status: Status,
    /// The path before (absent for additions).
    pub old_path: Option<RepoPathBuf>,
    /// The path after (absent for deletions).
    pub new_path: Option<RepoPathBuf>,
    /// The entry before.
    pub old: Option<FileEntry>,
    /// The entry after.
    pub new: Option<FileEntry>,
}

impl FileDiff {
    /// The path to sort and filter by: the new path, else the old one.
    pub fn path(&self) -> &RepoPath {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or(RepoPath::root())
    }

    /// True if only the executable bit changed.
    pub fn is_mode_only(&self) -> bool {
        matches!((self.old, self.new), (Some(a), Some(b)) if a.id == b.id && a.kind != b.kind
            && a.kind != cas::EntryKind::Symlink && b.kind != cas::EntryKind::Symlink)
    }
}

/// Classifies `changes`: a removed and an added file with the same content and kind are an
/// exact rename (each file pairs at most once); a file that became a symlink or back is a
/// type change. The result is sorted by path, as git prints it.
pub fn classify(changes: Vec<TreeChange>) -> Vec<FileDiff> {
    let mut out = Vec::with_capacity(changes.len());
    let mut removed: HashMap<(ObjectId, EntryKind), Vec<usize>> = HashMap::new();
    let mut added = Vec::new();
    for change in changes {
        match (change.old, change.new) {
            (Some(old), None) => {
                removed
                    .entry((old.id, old.kind))
                    .or_default()
                    .push(out.len());
                out.push(Some(FileDiff {
                    status: Status::Deleted,
                    old_path: Some(change.path),
                    new_path: None,
                    old: Some(old),
                    new: None,
                }));
            }
            (None, Some(new)) => added.push((change.path, new)),
            (Some(old), Some(new)) => {
                let symlink = |k: EntryKind| k == EntryKind::Symlink;
                let status = if symlink(old.kind) != symlink(new.kind) {
                    Status::TypeChanged
                } else {
                    Status::Modified
                };
                out.push(Some(FileDiff {
                    status,
                    old_path: Some(change.path.clone()),
                    new_path: Some(change.path),
                    old: Some(old),
                    new: Some(new),
                }));
            }
            (None, None) => {}
        }
    }
    for (path, new) in added {
        let source = removed.get_mut(&(new.id, new.kind)).and_then(|v| {
            if v.is_empty() {
                None
            } else {
                Some(v.remove(0))
            }
        });
        match source.and_then(|i| out[i].take()) {
            Some(gone) => out.push(Some(FileDiff {
                status: Status::Renamed,
                old_path: gone.old_path,
                new_path: Some(path),
                old: gone.old,
                new: Some(new),
            })),
            None => out.push(Some(FileDiff {
                status: Status::Added,
                old_path: None,
                new_path: Some(path),
                old: None,
                new: Some(new),
            })),
        }
    }
    let mut out: Vec<FileDiff> = out.into_iter().flatten().collect();
    // Byte order, as git prints it (not tree order).
    out.sort_by(|a, b| a.path().as_bytes().cmp(b.path().as_bytes()));
    out
}
