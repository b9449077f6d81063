//! Writes a capture leaves to its caller, to commit together with the caller's own.

use camino::{Utf8Path, Utf8PathBuf};
use cas::{SnapshotId, Store, Tree, TreeId, WriteBatch};

use worktree_scope::dirstate::{Cache, KeptCaches};
use worktree_scope::watch::{Ended, Watcher};

/// Writes to commit together: a capture's, not committed yet, and whatever its caller adds.
/// Dropping it stores nothing.
#[derive(Default)]
pub struct Pending<'a> {
    pub(crate) batch: WriteBatch,
    pub(crate) capture: Option<PendingCapture<'a>>,
}

/// What a deferred capture does once its writes are committed.
pub(crate) struct PendingCapture<'a> {
    pub(crate) kept: &'a KeptCaches,
    pub(crate) root: Utf8PathBuf,
    /// The stat cache as the store holds it then.
    pub(crate) cache: Cache,
    pub(crate) watching: WatchDone<'a>,
}

impl Pending<'_> {
    /// Adds a tree to store with the rest.
    pub fn add_tree(&mut self, tree: Tree) -> TreeId {
        self.batch.add_tree(tree)
    }

    /// Adds a snapshot to store with the rest.
    pub fn add_snapshot(&mut self, snapshot: cas::Snapshot) -> SnapshotId {
        self.batch.add_snapshot(snapshot)
    }

    /// Sets worktree `root`'s intent journal with the rest.
    pub fn set_journal(&mut self, root: &Utf8Path, journal: Vec<u8>) {
        self.batch.set_journal(root, Some(journal));
    }

    /// Stores its blobs and trees now, ahead of the rest (which refers to them): so that
    /// what reads only the store sees the captured files, while the snapshot, head and op
    /// log wait for [`commit`](Pending::commit). Unreferenced until then; gc drops them if
    /// the rest is never committed.
    pub fn store_contents(&mut self, store: &Store) -> Result<(), cas::WriteError> {
        let contents = self.batch.take_contents();
        if !contents.is_empty() {
            store.write(&contents)?;
        }
        Ok(())
    }

    /// Stores everything (if there is anything) in one transaction: every id in it
    /// survives a crash once this returns.
    pub fn commit(self, store: &Store) -> Result<(), cas::WriteError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        store.write(&self.batch)?;
        if let Some(c) = self.capture {
            c.watching.committed(&c.cache);
            c.kept.keep(c.cache, store, &c.root);
        }
        Ok(())
    }
}

/// Tells the watcher how a capture ended (failed, unless told otherwise).
pub(crate) struct WatchDone<'a> {
    pub(crate) root: Utf8PathBuf,
    /// The watcher of a watched worktree; `None` once told.
    pub(crate) watcher: Option<&'a Watcher>,
    pub(crate) ended: Ended,
}

// Both consume the guard: its `Drop` then reports nothing more (`committed`) or the
// outcome set here (`unrecorded`).
impl WatchDone<'_> {
    /// The capture's cache is what the store holds now.
    pub(crate) fn committed(mut self, cache: &Cache) {
        if let Some(watcher) = self.watcher.take() {
            let dirs = cache.dirs.keys();
            watcher.after_capture(&self.root, Ended::Committed, dirs);
        }
    }

    /// The capture succeeded without recording anything.
    pub(crate) fn unrecorded(mut self) {
        self.ended = Ended::Unrecorded;
    }
}

impl Drop for WatchDone<'_> {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher {
            watcher.after_capture(&self.root, self.ended, std::iter::empty());
        }
    }
}
