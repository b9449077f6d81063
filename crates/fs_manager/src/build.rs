//! Trees from a sorted list of files.

use std::collections::HashMap;

use cas::{EntryKind, ObjectError, Tree, TreeEntry, TreeId};

use crate::scan::FileRecord;

/// Builds the tree of `files` (sorted in tree order, see `scan::tree_order`); returns the
/// root id and every tree by id.
pub(crate) fn build_trees(
    files: &[FileRecord],
) -> Result<(TreeId, HashMap<TreeId, Tree>), ObjectError> {
    let mut trees = HashMap::new();
    let (root, _) = build(files, 0, &mut trees)?;
    Ok((root, trees))
}

fn build(
    files: &[FileRecord],
    prefix: usize,
    trees: &mut HashMap<TreeId, Tree>,
) -> Result<(TreeId, u64), ObjectError> {
    let mut entries = Vec::new();
    let mut i = 0;
    while i < files.len() {
        let rest = &files[i].path[prefix..];
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
                    let other = &files[j].path[prefix..];
                    if other.len() > k && other[..k] == *name && other[k] == b'/' {
                        j += 1;
                    } else {
                        break;
                    }
                }
                let (id, size) = build(&files[i..j], prefix + k + 1, trees)?;
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
    trees.insert(id, tree);
    Ok((id, size))
}

/// Every file of a stored tree, in tree order.
pub(crate) fn flatten(
    source: &dyn diff::TreeSource,
    root: TreeId,
) -> Result<Vec<FileRecord>, cas::ReadError> {
    let mut out = Vec::new();
    let mut prefix = Vec::new();
    flatten_into(source, root, &mut prefix, &mut out)?;
    Ok(out)
}

fn flatten_into(
    source: &dyn diff::TreeSource,
    id: TreeId,
    prefix: &mut Vec<u8>,
    out: &mut Vec<FileRecord>,
) -> Result<(), cas::ReadError> {
    let tree = source.tree(id)?;
    for e in tree.entries() {
        let len = prefix.len();
        if len > 0 {
            prefix.push(b'/');
        }
        prefix.extend_from_slice(&e.name);
        match e.tree() {
            Some(sub) => flatten_into(source, sub, prefix, out)?,
            None => out.push(FileRecord {
                path: prefix.clone(),
                kind: e.kind,
                blob: e.id.as_blob(),
                size: e.size,
            }),
        }
        prefix.truncate(len);
    }
    Ok(())
}
