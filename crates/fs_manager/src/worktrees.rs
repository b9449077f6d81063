//! [`Worktrees`]: the worktree operations on one store, with what they keep between calls.

use worktree_state::Kept;

/// The worktree operations on stores, with what they keep between calls: which worktrees
/// an operation holds now (two operations on one worktree run one after the other), the
/// stat caches of recent operations, and, when watching, an inotify watch per worktree.
///
/// Keep one per open store and share it among every thread working on that store; a
/// second value for the same store would let two operations on one worktree overlap.
#[derive(Default)]
pub struct Worktrees {
    pub(crate) kept: Kept,
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
            kept: Kept::watching(),
        }
    }
}

impl Worktrees {
    /// Captures of the worktree at `root` ask `tree` (a live mount) for its files, until
    /// [`Worktrees::unmounted`].
    pub fn mounted(&self, root: &camino::Utf8Path, tree: std::sync::Arc<dyn crate::MountedTree>) {
        self.kept.mounted(root, tree);
    }

    /// The mount at `root` is gone.
    pub fn unmounted(&self, root: &camino::Utf8Path) {
        self.kept.unmounted(root);
    }
}
