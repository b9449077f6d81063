//! Trees from a sorted list of files.

use std::collections::HashMap;

use cas::{EntryKind, ObjectError, Tree, TreeEntry, TreeId};

use path_policy::{RepoPath, RepoPathBuf};

use crate::dirstate::{Child, DirState};
use crate::scan::FileRecord;

/// Directory path → its tree and size, for subtrees known not to have changed.
pub type Reuse = HashMap<RepoPathBuf, (TreeId, u64)>;

/// The trees of a captured state.
pub struct Built {
    /// The root tree.
    pub root: TreeId,
    /// Every tree built (reused subtrees are not among them: they are stored already).
    pub trees: HashMap<TreeId, Tree>,
    /// Every directory built, with its tree and size.
    pub dirs: Vec<(RepoPathBuf, TreeId, u64)>,
}

/// Builds the tree of `files` (sorted in tree order, `RepoPathBuf`'s `Ord`), taking the
/// trees of unchanged subtrees from `reuse` instead of rebuilding them.
pub fn build_trees(files: &[FileRecord], reuse: &Reuse) -> Result<Built, ObjectError> {
    let mut built = Built {
        root: Tree::default().id(),
        trees: HashMap::new(),
        dirs: Vec::new(),
    };
    if let Some((id, _)) = reuse.get(RepoPath::root()) {
        built.root = *id;
        return Ok(built);
    }
    let (root, size) = build(files, RepoPath::root(), reuse, &mut built)?;
    built.root = root;
    built.dirs.push((RepoPathBuf::root(), root, size));
    Ok(built)
}

/// A directory [`build_from_dirs`] built, children before parents.
pub struct BuiltDir<'a> {
    /// The directory's path from the root (root = empty).
    pub path: &'a RepoPath,
    /// Its state, with the new tree recorded.
    pub state: Option<&'a DirState>,
    /// True if the state had another tree (or none).
    pub changed: bool,
    /// Its tree, unless an empty directory below the root (trees record none).
    pub tree: Option<Tree>,
}

/// Builds the trees of a captured state from its directories' states (each listing's
/// files with their blobs, and its subdirectories), taking the trees of unchanged
/// subtrees from `reuse`, records each directory's tree in its state, and hands each
/// directory built to `on_built` as soon as its tree is, so no more trees than the
/// caller keeps are held at once. Directories holding no file, however deep, are left
/// out, as trees record no empty directory. Returns the root tree.
pub fn build_from_dirs<E: From<ObjectError>>(
    dirs: &mut HashMap<RepoPathBuf, DirState>,
    reuse: &Reuse,
    on_built: &mut dyn FnMut(BuiltDir<'_>) -> Result<(), E>,
) -> Result<TreeId, E> {
    let empty = Tree::default().id();
    let (root, _) = build_dir(dirs, RepoPath::root(), reuse, empty, on_built)?;
    Ok(root)
}

/// Every tree of [`build_from_dirs`] of a copy of `dirs`, kept: the root and the trees.
#[cfg(any(test, feature = "testing"))]
pub fn trees_of(
    dirs: &HashMap<RepoPathBuf, DirState>,
    reuse: &Reuse,
) -> Result<(TreeId, HashMap<TreeId, Tree>), ObjectError> {
    let mut trees = HashMap::new();
    let root = build_from_dirs(&mut dirs.clone(), reuse, &mut |b| {
        if let Some(t) = b.tree {
            trees.insert(t.id(), t);
        }
        Ok::<_, ObjectError>(())
    })?;
    Ok((root, trees))
}

fn build_dir<E: From<ObjectError>>(
    dirs: &mut HashMap<RepoPathBuf, DirState>,
    dir: &RepoPath,
    reuse: &Reuse,
    empty: TreeId,
    on_built: &mut dyn FnMut(BuiltDir<'_>) -> Result<(), E>,
) -> Result<(TreeId, u64), E> {
    if let Some(&(id, size)) = reuse.get(dir) {
        return Ok((id, size));
    }
    // Subdirectories get a place now and their trees below, once the listing is let go.
    let mut entries = Vec::new();
    let mut subdirs = Vec::new();
    if let Some(state) = dirs.get(dir) {
        for (name, child) in state.children() {
            let kind = match child {
                Child::File(f) => match f.stat().kind() {
                    Some(kind) => (kind, f.blob.into(), f.size),
                    None => continue,
                },
                Child::Dir => {
                    subdirs.push(entries.len());
                    (EntryKind::Tree, empty.into(), 0)
                }
                Child::Skipped(_) => continue,
            };
            entries.push(TreeEntry {
                name: name.to_vec(),
                kind: kind.0,
                id: kind.1,
                size: kind.2,
            });
        }
    }
    for &i in &subdirs {
        // A stored listing's name is checked as a file name only: refused here as the
        // tree holding it would refuse it.
        cas::validate_name(&entries[i].name)?;
        let mut sub = dir.to_owned();
        sub.push_name_unchecked(&entries[i].name);
        let (id, size) = build_dir(dirs, &sub, reuse, empty, on_built)?;
        entries[i].id = id.into();
        entries[i].size = size;
    }
    entries.retain(|e| e.kind != EntryKind::Tree || e.id != empty.into());
    let tree = Tree::from_sorted(entries)?;
    let (id, size) = (tree.id(), tree.size());
    let state = dirs.get_mut(dir);
    let changed = state.as_ref().is_some_and(|s| s.tree != Some((id, size)));
    let state = state.map(|s| {
        s.tree = Some((id, size));
        &*s
    });
    // The empty root: the one empty tree a state records.
    let tree = (id != empty || dir.is_root()).then_some(tree);
    on_built(BuiltDir {
        path: dir,
        state,
        changed,
        tree,
    })?;
    Ok((id, size))
}

fn build(
    files: &[FileRecord],
    dir: &RepoPath,
    reuse: &Reuse,
    built: &mut Built,
) -> Result<(TreeId, u64), ObjectError> {
    let prefix = if dir.is_root() {
        0
    } else {
        dir.as_bytes().len() + 1
    };
    let mut entries = Vec::new();
    let mut i = 0;
    while i < files.len() {
        let rest = &files[i].path.as_bytes()[prefix..];
        match rest.iter().position(|&b| b == b'/') {
            None => {
                let f = &files[i];
                entries.push(TreeEntry {
                    name: rest.to_vec(),
                    kind: f.kind,
                    id: f.blob.into(),
                    size: f.size,
                });
                i += 1;
            }
            Some(k) => {
                let name = &rest[..k];
                let mut j = i + 1;
                while j < files.len() {
                    let other = &files[j].path.as_bytes()[prefix..];
                    if other.len() > k && other[..k] == *name && other[k] == b'/' {
                        j += 1;
                    } else {
                        break;
                    }
                }
                // A leading part of a repo path, up to a `/`: a repo path.
                let sub = RepoPath::from_bytes_unchecked(&files[i].path.as_bytes()[..prefix + k]);
                let (id, size) = match reuse.get(sub) {
                    Some(&(id, size)) => (id, size),
                    None => {
                        let (id, size) = build(&files[i..j], sub, reuse, built)?;
                        built.dirs.push((sub.to_owned(), id, size));
                        (id, size)
                    }
                };
                entries.push(TreeEntry {
                    name: name.to_vec(),
                    kind: EntryKind::Tree,
                    id: id.into(),
                    size,
                });
                i = j;
            }
        }
    }
    let tree = Tree::from_sorted(entries)?;
    let size = tree.size();
    let id = tree.id();
    built.trees.insert(id, tree);
    Ok((id, size))
}

/// The directories of a stored tree with their trees, parents before children and
/// siblings in name order; each tree is read (and verified) when its turn comes, so a walk
/// holds one tree and the ids of those still to come. Iterative, so no tree is deep enough
/// to exhaust the stack.
pub struct TreeDirs<'a> {
    source: &'a dyn diff::TreeSource,
    stack: Vec<(RepoPathBuf, TreeId)>,
}

impl<'a> TreeDirs<'a> {
    /// The directories of tree `root`, read from `source`.
    pub fn new(source: &'a dyn diff::TreeSource, root: TreeId) -> TreeDirs<'a> {
        TreeDirs {
            source,
            stack: vec![(RepoPathBuf::root(), root)],
        }
    }
}

impl Iterator for TreeDirs<'_> {
    type Item = Result<(RepoPathBuf, Tree), cas::ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (dir, id) = self.stack.pop()?;
        // A snapshot's or a tree's own: missing means damaged.
        let tree = match self.source.tree(id) {
            Ok(tree) => tree,
            Err(e) => {
                self.stack.clear();
                return Some(Err(e.as_referenced()));
            }
        };
        let first = self.stack.len();
        for e in tree.entries() {
            if let Some(sub) = e.tree() {
                self.stack.push((child(&dir, &e.name), sub));
            }
        }
        self.stack[first..].reverse();
        Some(Ok((dir, tree)))
    }
}

/// `dir`'s entry `name`. A `cas::Tree` holds only names `check_name` accepts (checked when
/// built or decoded).
pub fn child(dir: &RepoPathBuf, name: &[u8]) -> RepoPathBuf {
    let mut path = dir.clone();
    path.push_name_unchecked(name);
    path
}

/// Every file of a stored tree, in tree order.
pub fn flatten(
    source: &dyn diff::TreeSource,
    root: TreeId,
) -> Result<Vec<FileRecord>, cas::ReadError> {
    let mut out = Vec::new();
    for dir in TreeDirs::new(source, root) {
        let (dir, tree) = dir?;
        for e in tree.entries().iter().filter(|e| e.tree().is_none()) {
            out.push(FileRecord {
                path: child(&dir, &e.name),
                kind: e.kind,
                blob: e.id.as_blob(),
                size: e.size,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// `base` with the files at the given paths replaced (`Some`) or removed (`None`): the
/// trees of the result, to store.
pub fn patch(
    source: &dyn diff::TreeSource,
    base: TreeId,
    changes: &[(RepoPathBuf, Option<diff::FileEntry>)],
) -> Result<Built, cas::StoreError> {
    // Keyed in tree order (`RepoPathBuf`'s `Ord`), as `build_trees` wants them.
    let mut files: std::collections::BTreeMap<RepoPathBuf, FileRecord> = flatten(source, base)?
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect();
    for (path, entry) in changes {
        match entry {
            Some(e) => {
                files.insert(
                    path.clone(),
                    FileRecord {
                        path: path.clone(),
                        kind: e.kind,
                        blob: e.id.as_blob(),
                        size: e.size,
                    },
                );
            }
            None => {
                files.remove(path);
            }
        }
    }
    let files: Vec<FileRecord> = files.into_values().collect();
    Ok(build_trees(&files, &Reuse::new())?)
}
