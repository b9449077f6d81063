//! One operation at a time per worktree within this process. A CLI run does one operation,
//! so this only matters when one process serves many callers (`cairn serve`): two requests
//! on the same worktree run one after the other, requests on different worktrees at once.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};

static BUSY: Mutex<Option<HashSet<Utf8PathBuf>>> = Mutex::new(None);
static FREED: Condvar = Condvar::new();

/// Held for the length of one operation on a worktree; released on drop.
pub(crate) struct WorktreeLock {
    root: Utf8PathBuf,
}

/// Waits until no other operation of this process works on `root`, then holds it.
pub(crate) fn lock(root: &Utf8Path) -> WorktreeLock {
    let mut busy = BUSY.lock().unwrap_or_else(PoisonError::into_inner);
    while busy.get_or_insert_with(HashSet::new).contains(root) {
        busy = FREED.wait(busy).unwrap_or_else(PoisonError::into_inner);
    }
    busy.get_or_insert_with(HashSet::new)
        .insert(root.to_owned());
    WorktreeLock {
        root: root.to_owned(),
    }
}

/// Whether an operation of this process holds `root` now (its journal, if any, belongs to
/// a step under way, not an interrupted one).
pub(crate) fn is_busy(root: &Utf8Path) -> bool {
    BUSY.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|set| set.contains(root))
}

impl Drop for WorktreeLock {
    fn drop(&mut self) {
        let mut busy = BUSY.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(set) = busy.as_mut() {
            set.remove(&self.root);
        }
        FREED.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_worktree_waits_and_another_does_not() {
        let a = lock(Utf8Path::new("/w/a"));
        let _b = lock(Utf8Path::new("/w/b"));
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _again = lock(Utf8Path::new("/w/a"));
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
}
