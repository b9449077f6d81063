//! Versions of each scope of each side table, for owners that keep a copy of one in memory
//! (a long-running process reusing a worktree's directory cache between captures). Every
//! write that touches a scope gives it new versions; numbers are unique across every store
//! opened in this process, so a copy taken from one store never passes for another's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use super::side::SideTable;

static NEXT: AtomicU64 = AtomicU64::new(1);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub(crate) struct Versions {
    /// The version of every scope this store has not written.
    opened: u64,
    written: Mutex<HashMap<(SideTable, String), u64>>,
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
    pub(crate) fn of(&self, table: SideTable, scope: &str) -> u64 {
        let written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        written
            .get(&(table, scope.to_owned()))
            .copied()
            .unwrap_or(self.opened)
    }

    /// Gives each of `scopes` a new version.
    pub(crate) fn bump<'a>(&self, scopes: impl Iterator<Item = (SideTable, &'a str)>) {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        for (table, scope) in scopes {
            written.insert((table, scope.to_owned()), next());
        }
    }
}
