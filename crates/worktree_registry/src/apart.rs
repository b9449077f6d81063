//! A worktree lies apart from the store's folder: it is not that folder, does not lie
//! inside it and does not hold it. A worktree there would snapshot the live database into
//! itself, and a rollback would write an old copy over it. Every operation that registers,
//! captures or writes a worktree checks it here ([`check`], through `root::verify_root`,
//! `checkout` and the engine's `mount` and `merge --checkout`), and `fsck` reports a
//! registration that breaks it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};

/// How a directory and the store's folder overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Overlap {
    /// It is the store's folder (by this path or another one to it, a bind mount).
    IsTheStore,
    /// It lies inside the store's folder.
    InsideTheStore,
    /// It holds the store's folder.
    HoldsTheStore,
}

impl Overlap {
    /// How the directory stands to the store, in words.
    pub(crate) fn relation(self) -> &'static str {
        match self {
            Overlap::IsTheStore => "is the folder of the store",
            Overlap::InsideTheStore => "lies inside the store",
            Overlap::HoldsTheStore => "holds the store",
        }
    }

    fn advice(self) -> &'static str {
        match self {
            Overlap::HoldsTheStore => {
                "name a directory that does not hold it, or keep the store elsewhere (--store or $CAIRN_STORE)"
            }
            _ => "use a directory outside the store",
        }
    }
}

/// A worktree root that is, lies inside or holds the store's folder: refused before
/// anything is read or written.
#[derive(Debug, thiserror::Error)]
#[error(
    "{root}: {} {store}; a worktree may not be the store's folder, lie inside it or hold it: {}",
    .overlap.relation(),
    .overlap.advice()
)]
pub struct StoreOverlap {
    /// The worktree root (or destination).
    pub root: Utf8PathBuf,
    /// The store's folder.
    pub store: Utf8PathBuf,
    /// How they overlap.
    pub overlap: Overlap,
}

/// The store's folder with every link and `..` resolved, if it can be.
pub fn store_dir(store: &cas::Store) -> Option<PathBuf> {
    resolved_store(store.root())
}

fn resolved_store(store: &Utf8Path) -> Option<PathBuf> {
    std::fs::canonicalize(store.as_std_path()).ok()
}

/// Refuses `root` (an existing directory, or one a command is about to make) if it is,
/// lies inside or holds the folder of `store`.
pub fn check(store: &cas::Store, root: &Utf8Path) -> Result<(), StoreOverlap> {
    check_at(store, root, true)
}

/// [`check`]; with `look_at_root` false the root itself is never looked at, only the
/// directories above it (a live mount's root is served by this process: a look could wait
/// on the very lock the caller holds).
pub fn check_at(
    store: &cas::Store,
    root: &Utf8Path,
    look_at_root: bool,
) -> Result<(), StoreOverlap> {
    match overlap_with(store.root(), root, look_at_root) {
        None => Ok(()),
        Some(overlap) => Err(StoreOverlap {
            root: root.to_owned(),
            store: store.root().to_owned(),
            overlap,
        }),
    }
}

/// How `root` overlaps the store folder `store` (see [`check_at`]).
pub fn overlap_with(store: &Utf8Path, root: &Utf8Path, look_at_root: bool) -> Option<Overlap> {
    let store_dir = resolved_store(store).unwrap_or_else(|| store.as_std_path().to_owned());
    overlap(&store_dir, root.as_std_path(), look_at_root)
}

/// A directory's device and inode, not following a link.
fn identity(path: &Path) -> Option<(u64, u64)> {
    path.symlink_metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// `path` with its links and `..` resolved as far as it exists; the rest, not made yet, as
/// written. Without `look_at_root`, `path` itself is not resolved, only its parent.
fn resolved(path: &Path, look_at_root: bool) -> PathBuf {
    let mut rest = Vec::new();
    let mut dir = path;
    if !look_at_root && let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
        rest.push(name);
        dir = parent;
    }
    loop {
        if let Ok(mut real) = std::fs::canonicalize(dir) {
            real.extend(rest.iter().rev());
            return real;
        }
        match (dir.parent(), dir.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                dir = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

/// How `root` overlaps `store_dir` (canonical): by their resolved paths, then by device and
/// inode, which another path to the same directory (a bind mount) shares.
fn overlap(store_dir: &Path, root: &Path, look_at_root: bool) -> Option<Overlap> {
    let root = resolved(root, look_at_root);
    if root == store_dir {
        return Some(Overlap::IsTheStore);
    }
    if root.starts_with(store_dir) {
        return Some(Overlap::InsideTheStore);
    }
    if store_dir.starts_with(&root) {
        return Some(Overlap::HoldsTheStore);
    }
    let store_id = identity(store_dir)?;
    let skip = usize::from(!look_at_root);
    for (depth, dir) in root.ancestors().enumerate().skip(skip) {
        if identity(dir) == Some(store_id) {
            return Some(if depth == 0 {
                Overlap::IsTheStore
            } else {
                Overlap::InsideTheStore
            });
        }
    }
    if !look_at_root {
        return None;
    }
    let root_id = identity(&root)?;
    store_dir
        .ancestors()
        .skip(1)
        .any(|dir| identity(dir) == Some(root_id))
        .then_some(Overlap::HoldsTheStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir_all(base.join("home/store/mounts")).expect("mkdir");
        std::fs::create_dir_all(base.join("elsewhere")).expect("mkdir");
        (dir, base)
    }

    #[test]
    fn the_store_inside_and_around_it_overlap_and_nothing_else_does() {
        let (_dir, base) = dirs();
        let store = base.join("home/store");
        let cases = [
            (base.join("home/store"), Some(Overlap::IsTheStore)),
            (
                base.join("home/store/mounts"),
                Some(Overlap::InsideTheStore),
            ),
            // Not made yet: judged by where it would be.
            (base.join("home/store/a/b"), Some(Overlap::InsideTheStore)),
            (base.join("home"), Some(Overlap::HoldsTheStore)),
            (base.clone(), Some(Overlap::HoldsTheStore)),
            (PathBuf::from("/"), Some(Overlap::HoldsTheStore)),
            (base.join("home/store/../store"), Some(Overlap::IsTheStore)),
            (base.join("home/storefront"), None),
            (base.join("elsewhere"), None),
            (base.join("elsewhere/new"), None),
        ];
        for (root, expected) in cases {
            assert_eq!(overlap(&store, &root, true), expected, "{}", root.display());
        }
        // A path through a symlink is judged by where it leads.
        std::os::unix::fs::symlink(base.join("home/store"), base.join("elsewhere/link"))
            .expect("symlink");
        assert_eq!(
            overlap(&store, &base.join("elsewhere/link/x"), true),
            Some(Overlap::InsideTheStore)
        );
        assert_eq!(
            overlap(&store, &base.join("elsewhere/link"), true),
            Some(Overlap::IsTheStore)
        );
        // Without looking at the root itself, its parent still counts.
        assert_eq!(
            overlap(&store, &base.join("elsewhere/link/x"), false),
            Some(Overlap::InsideTheStore)
        );
    }
}
