//! Versions of each worktree's file states, for callers that keep a copy of them in memory
//! (a long-running process reusing its directory cache between captures). Every write that
//! touches a worktree's file states gives it new versions; numbers are unique across every
//! store opened in this process, so a copy taken from one store never passes for another's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};

static NEXT: AtomicU64 = AtomicU64::new(1);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub(crate) struct Versions {
    /// The version of every worktree this store has not written file states for.
    opened: u64,
    written: Mutex<HashMap<Utf8PathBuf, u64>>,
}

impl Default for Versions {
    fn default() -> Self {
        Versions {
            opened: next(),
            written: Mutex::new(HashMap::new()),
        }
    }
}

impl Versions {
    pub(crate) fn of(&self, root: &Utf8Path) -> u64 {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        written.get(root).copied().unwrap_or(self.opened)
    }

    /// Gives each of `roots` a new version.
    pub(crate) fn bump<'a>(&self, roots: impl Iterator<Item = &'a Utf8PathBuf>) {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        for root in roots {
            written.insert(root.clone(), next());
        }
    }
}
