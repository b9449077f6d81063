//! Worktrees served by a mount (the `mount` crate): their change set is known without a
//! walk, so a capture asks the mount for its tree instead of scanning the directory.
//! Everything else (rollback, undo, rewind) writes through the mounted directory as it
//! would on disk, which keeps the kernel's caches true.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Store, Tree, TreeId, WriteBatch};

/// What a mount says its worktree holds now.
pub struct MountCapture {
    /// The root tree.
    pub tree: TreeId,
    /// Trees built that the store may lack.
    pub trees: HashMap<TreeId, Tree>,
    /// Files and symlinks in scope.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files read (hashed) for this capture.
    pub read_files: u64,
    /// What the worktree's scope leaves out and reports, in path order.
    pub skipped: Vec<crate::Skipped>,
    /// Names this capture for [`MountedTree::settle`].
    pub token: u64,
}

/// A live mounted worktree.
pub trait MountedTree: Send + Sync {
    /// The worktree's tree as it is now, judged by the scope `scope` gives (reading the
    /// worktree's own pattern files from the mount's tree); blobs the store lacks go into
    /// `batch` (large ones are stored at once, unless `dry_run`: then nothing is).
    fn capture(
        &self,
        store: &Store,
        batch: &mut WriteBatch,
        scope: &crate::ScopeSettings,
        dry_run: bool,
    ) -> Result<MountCapture, cas::BoxError>;

    /// The store holds everything the capture `token` built (its trees and blobs), so the
    /// mount may build on them next time.
    fn settle(&self, token: u64);
}

/// The live mounts of one store's worktrees, by root.
#[derive(Default)]
pub struct Mounts(Mutex<HashMap<Utf8PathBuf, Arc<dyn MountedTree>>>);

impl Mounts {
    /// The live mount of the worktree at `root`, if there is one.
    pub fn get(&self, root: &Utf8Path) -> Option<Arc<dyn MountedTree>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(root)
            .cloned()
    }

    /// `tree` serves the worktree at `root` now (`None`: no mount does).
    pub fn set(&self, root: Utf8PathBuf, tree: Option<Arc<dyn MountedTree>>) {
        let mut mounts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let replaced = match tree {
            Some(t) => mounts.insert(root, t),
            None => mounts.remove(&root),
        };
        drop(mounts);
        // Dropped after the lock: the last handle on a mount unmounts it, which waits for
        // its session.
        drop(replaced);
    }
}
