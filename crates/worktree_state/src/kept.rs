//! [`Kept`]: what a process keeps about one store's worktrees between operations.

use crate::lock::Locks;
use worktree_scope::dirstate::KeptCaches;
use worktree_scope::watch::Watcher;

/// What the worktree operations on one store keep between calls: which worktrees an
/// operation holds now (two operations on one worktree run one after the other), the stat
/// caches of recent operations, when watching an inotify watch per worktree, and the live
/// mounts. `fs_manager::Worktrees` holds one; every operation here takes it.
#[derive(Default)]
pub struct Kept {
    pub(crate) locks: Locks,
    pub(crate) kept: KeptCaches,
    pub(crate) watcher: Option<Watcher>,
    pub(crate) mounts: worktree_scope::mounted::Mounts,
}

impl Kept {
    /// Nothing kept yet, without watching.
    pub fn new() -> Kept {
        Kept::default()
    }

    /// Nothing kept yet; each worktree a capture reads is watched (Linux inotify), so that
    /// later captures skip directories where nothing happened.
    pub fn watching() -> Kept {
        Kept {
            watcher: Some(Watcher::new()),
            ..Kept::default()
        }
    }

    /// Captures of the worktree at `root` ask `tree` (a live mount) for its files, until
    /// [`Kept::unmounted`].
    pub fn mounted(
        &self,
        root: &camino::Utf8Path,
        tree: std::sync::Arc<dyn worktree_scope::MountedTree>,
    ) {
        self.mounts.set(root.to_owned(), Some(tree));
    }

    /// The mount at `root` is gone.
    pub fn unmounted(&self, root: &camino::Utf8Path) {
        self.mounts.set(root.to_owned(), None);
    }

    /// The stat caches kept from recent operations.
    pub fn caches(&self) -> &KeptCaches {
        &self.kept
    }
}
