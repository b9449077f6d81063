//! One operation at a time per worktree within this process. A CLI run does one operation,
//! so this only matters when one process serves many callers (`cairn serve`): two requests
//! on the same worktree run one after the other, requests on different worktrees at once.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};

/// The worktree roots an operation of this process holds now.
#[derive(Default)]
pub(crate) struct Locks {
    busy: Mutex<HashSet<Utf8PathBuf>>,
    freed: Condvar,
}

/// Held for the length of one operation on a worktree; released on drop.
pub(crate) struct WorktreeLock<'a> {
    locks: &'a Locks,
    root: Utf8PathBuf,
}

impl Locks {
    /// Waits until no other operation of this process works on `root`, then holds it.
    pub(crate) fn lock(&self, root: &Utf8Path) -> WorktreeLock<'_> {
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        while busy.contains(root) {
            busy = self
                .freed
                .wait(busy)
                .unwrap_or_else(PoisonError::into_inner);
        }
        busy.insert(root.to_owned());
        WorktreeLock {
            locks: self,
            root: root.to_owned(),
        }
    }

    /// Whether an operation of this process holds `root` now (its journal, if any, belongs
    /// to a step under way, not an interrupted one).
    pub(crate) fn is_busy(&self, root: &Utf8Path) -> bool {
        self.busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(root)
    }
}

impl Drop for WorktreeLock<'_> {
    fn drop(&mut self) {
        let mut busy = self
            .locks
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        busy.remove(&self.root);
        self.locks.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_worktree_waits_and_another_does_not() {
        let locks = std::sync::Arc::new(Locks::default());
        let a = locks.lock(Utf8Path::new("/w/a"));
        let _b = locks.lock(Utf8Path::new("/w/b"));
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = locks.clone();
        let waiter = std::thread::spawn(move || {
            let _again = shared.lock(Utf8Path::new("/w/a"));
            tx.send(()).ok();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(100))
                .is_err(),
            "a second lock on /w/a waits"
        );
        drop(a);
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
        waiter.join().ok();
    }

    #[test]
    fn separate_lock_sets_do_not_share_roots() {
        let (one, two) = (Locks::default(), Locks::default());
        let _held = one.lock(Utf8Path::new("/w/a"));
        assert!(one.is_busy(Utf8Path::new("/w/a")));
        assert!(!two.is_busy(Utf8Path::new("/w/a")));
        let _also = two.lock(Utf8Path::new("/w/a"));
    }
}
