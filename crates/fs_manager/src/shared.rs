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
