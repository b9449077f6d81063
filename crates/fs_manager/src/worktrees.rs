//! [`Worktrees`]: what a process keeps about one store's worktrees between operations.

use camino::Utf8Path;
use cas::{SnapshotId, Store, WorktreeRecord};

use crate::dirstate::KeptCaches;
use crate::lock::Locks;
use crate::watch::Watcher;
use crate::{
    AcceptOutcome, CaptureError, CaptureOptions, CheckoutError, CheckoutOptions, CheckoutOutcome,
    CheckpointOptions, CheckpointOutcome, DiscardOutcome, LiveState, OnboardOptions,
    OnboardOutcome, RecoverError, RecoverOutcome, RollbackError, RollbackOptions, RollbackOutcome,
    SnapshotOutcome, TaskError, UndoError, UndoOutcome, WorktreeError,
};

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

    /// Snapshots directory `src` in place and registers it as a worktree (see
    /// [`OnboardOptions`]).
    pub fn onboard(
        &self,
        store: &Store,
        src: &Utf8Path,
        options: &OnboardOptions<'_>,
    ) -> Result<OnboardOutcome, CaptureError> {
        crate::capture::onboard(self, store, src, options)
    }

    /// A new snapshot of the worktree holding `path`, parent = its head.
    pub fn snapshot(
        &self,
        store: &Store,
        path: &Utf8Path,
        options: &CaptureOptions<'_>,
    ) -> Result<SnapshotOutcome, CaptureError> {
        crate::capture::snapshot(self, store, path, options)
    }

    /// Records what a command did to the worktree as operation `op` of its op log.
    pub fn record_change(
        &self,
        store: &Store,
        path: &Utf8Path,
        op: &str,
        options: &CaptureOptions<'_>,
    ) -> Result<SnapshotOutcome, CaptureError> {
        crate::capture::record_change(self, store, path, op, options)
    }

    /// The worktree's live files as a tree, recording nothing but its stat cache.
    pub fn live_state(
        &self,
        store: &Store,
        path: &Utf8Path,
        options: &CaptureOptions<'_>,
    ) -> Result<LiveState, CaptureError> {
        crate::capture::live_state(self, store, path, options)
    }

    /// Hydrates `snapshot` into `dest` and registers it as a worktree.
    pub fn checkout(
        &self,
        store: &Store,
        snapshot: SnapshotId,
        dest: &Utf8Path,
        options: &CheckoutOptions<'_>,
    ) -> Result<CheckoutOutcome, CheckoutError> {
        crate::checkout::checkout(self, store, snapshot, dest, options)
    }

    /// Finishes or rolls back an interrupted operation on the worktree holding `path`.
    pub fn recover(&self, store: &Store, path: &Utf8Path) -> Result<RecoverOutcome, RecoverError> {
        crate::journal::recover(self, store, path)
    }

    /// Makes the worktree's scope equal `target` (see [`RollbackOptions`]).
    pub fn rollback(
        &self,
        store: &Store,
        path: &Utf8Path,
        target: SnapshotId,
        options: &RollbackOptions<'_>,
    ) -> Result<RollbackOutcome, RollbackError> {
        crate::rollback::rollback(self, store, path, target, options)
    }

    /// A named snapshot on the worktree's checkpoint stack (onboarding `dir` if needed).
    pub fn checkpoint(
        &self,
        store: &Store,
        dir: &Utf8Path,
        options: &CheckpointOptions<'_>,
    ) -> Result<CheckpointOutcome, TaskError> {
        crate::task::checkpoint(self, store, dir, options)
    }

    /// Rolls the worktree back to checkpoint `to` (default: the latest).
    pub fn rewind(
        &self,
        store: &Store,
        path: &Utf8Path,
        to: Option<SnapshotId>,
        options: &RollbackOptions<'_>,
    ) -> Result<RollbackOutcome, TaskError> {
        crate::task::rewind(self, store, path, to, options)
    }

    /// Keeps the task's changes (under `paths` only, if any).
    pub fn accept(
        &self,
        store: &Store,
        path: &Utf8Path,
        paths: &[Vec<u8>],
        options: &CaptureOptions<'_>,
    ) -> Result<AcceptOutcome, TaskError> {
        crate::task::accept(self, store, path, paths, options)
    }

    /// Puts the task's changes back to its baseline (see [`RollbackOptions::paths`]).
    pub fn discard(
        &self,
        store: &Store,
        path: &Utf8Path,
        options: &RollbackOptions<'_>,
    ) -> Result<DiscardOutcome, TaskError> {
        crate::task::discard(self, store, path, options)
    }

    /// Reverts the newest change set not yet undone.
    pub fn undo(&self, store: &Store, path: &Utf8Path) -> Result<UndoOutcome, UndoError> {
        crate::undo::undo(self, store, path)
    }

    /// Re-applies the newest undone change set.
    pub fn redo(&self, store: &Store, path: &Utf8Path) -> Result<UndoOutcome, UndoError> {
        crate::undo::redo(self, store, path)
    }

    /// Removes the worktree rooted at `path` from the registry (its files stay).
    pub fn remove(&self, store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
        crate::worktree::remove(self, store, path)
    }

    /// Accepts that the registered root `path` is now another directory.
    pub fn rebind(&self, store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
        crate::worktree::rebind(self, store, path)
    }
}
