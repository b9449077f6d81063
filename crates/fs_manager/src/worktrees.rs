//! [`Worktrees`]: what a process keeps about one store's worktrees between operations.

use crate::dirstate::KeptCaches;
use crate::lock::Locks;
use crate::watch::Watcher;

/// The worktree operations on stores, with what they keep between calls: which worktrees
/// an operation holds now (two operations on one worktree run one after the other), the
/// stat caches of recent operations, and, when watching, an inotify watch per worktree.
///
/// Keep one per open store and share it among every thread working on that store; a
/// second value for the same store would let two operations on one worktree overlap.
#[derive(Default)]
pub struct Worktrees {
    pub(crate) locks: Locks,
    pub(crate) kept: KeptCaches,
    pub(crate) watcher: Option<Watcher>,
    pub(crate) mounts: crate::mounted::Mounts,
}

impl Worktrees {
    /// Worktree operations without watching: for one command, or a short-lived process.
    pub fn new() -> Worktrees {
        Worktrees::default()
    }

    /// Worktree operations that watch each worktree they capture (Linux inotify), so that
    /// later captures skip directories where nothing happened: for a long-lived process.
    pub fn watching() -> Worktrees {
        Worktrees {
            watcher: Some(Watcher::new()),
            ..Worktrees::default()
        }
    }
}

impl Worktrees {
    /// Captures of the worktree at `root` ask `tree` (a live mount) for its files, until
    /// [`Worktrees::unmounted`].
    pub fn mounted(&self, root: &camino::Utf8Path, tree: std::sync::Arc<dyn crate::MountedTree>) {
        self.mounts.set(root.to_owned(), Some(tree));
    }

    /// The mount at `root` is gone.
    pub fn unmounted(&self, root: &camino::Utf8Path) {
        self.mounts.set(root.to_owned(), None);
    }
}
