//! Finding the store, and holding it: opened once for many calls (a server, a library
//! user), or opened by each call in the mode it needs (one command of a CLI process).

use std::collections::{HashMap, HashSet};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{OpenOptions, Store};

use crate::error::{ArgumentError, Error};
use crate::path::absolute;

/// The store a caller in `cwd` means: `named` (`--store` / `$CAIRN_STORE`), else the
/// nearest `.cairn/` in `cwd` or its ancestors, else `$XDG_DATA_HOME/cairn`
/// (`~/.local/share/cairn`).
pub fn discover_store(named: Option<&Utf8Path>, cwd: &Utf8Path) -> Result<Utf8PathBuf, Error> {
    if let Some(p) = named {
        return Ok(absolute(cwd, p));
    }
    for dir in cwd.ancestors() {
        let candidate = dir.join(".cairn");
        if candidate.is_dir() {
            return Ok(candidate);
        }
    }
    let data = match std::env::var("XDG_DATA_HOME") {
        Ok(d) if !d.is_empty() => Utf8PathBuf::from(d),
        _ => {
            let home = std::env::var("HOME").map_err(|_| ArgumentError::NoStore)?;
            Utf8PathBuf::from(home).join(".local/share")
        }
    };
    Ok(data.join("cairn"))
}

/// How a call needs the store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    /// Only reads: a missing store is an error, other readers may hold it meanwhile.
    Read,
    /// Writes to an existing store.
    Write,
    /// Writes, creating the store if missing.
    Create,
}

pub(crate) enum Holding {
    /// Opened once; gc takes it exclusively. Shared with the mounts this engine serves.
    Open(std::sync::Arc<RwLock<Store>>),
    /// Opened by each call, with these options.
    PerCall(OpenOptions),
}

/// An open store for one call.
pub(crate) enum StoreRef<'a> {
    Owned(Store),
    Shared(RwLockReadGuard<'a, Store>),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            StoreRef::Owned(s) => s,
            StoreRef::Shared(g) => g,
        }
    }
}

/// An open store no other call uses meanwhile (`gc`).
pub(crate) enum StoreMut<'a> {
    Owned(Store),
    Exclusive(RwLockWriteGuard<'a, Store>),
}

impl std::ops::Deref for StoreMut<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        match self {
            StoreMut::Owned(s) => s,
            StoreMut::Exclusive(g) => g,
        }
    }
}

impl std::ops::DerefMut for StoreMut<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        match self {
            StoreMut::Owned(s) => s,
            StoreMut::Exclusive(g) => g,
        }
    }
}

impl Holding {
    /// The store opened once, to share with what outlives a call (a mount).
    pub(crate) fn shared(&self) -> Option<std::sync::Arc<RwLock<Store>>> {
        match self {
            Holding::Open(store) => Some(store.clone()),
            Holding::PerCall(_) => None,
        }
    }

    pub(crate) fn get(&self, path: &Utf8Path, access: Access) -> Result<StoreRef<'_>, Error> {
        match self {
            Holding::Open(store) => {
                reopen_if_write_failed(store, path);
                // A call that panicked holding it changed nothing half way (every write is a
                // transaction), so the store is still good.
                Ok(StoreRef::Shared(
                    store.read().unwrap_or_else(PoisonError::into_inner),
                ))
            }
            Holding::PerCall(options) => {
                let options = OpenOptions {
                    create: access == Access::Create,
                    read_only: access == Access::Read,
                    ..options.clone()
                };
                Ok(StoreRef::Owned(Store::open(path, &options)?))
            }
        }
    }

    pub(crate) fn exclusive(&self, path: &Utf8Path) -> Result<StoreMut<'_>, Error> {
        match self {
            Holding::Open(store) => {
                reopen_if_write_failed(store, path);
                // Polled rather than waited for: a waiting writer would hold back new
                // readers, and a mount's reads serve calls that hold a reader already (a
                // rollback writing through a mount).
                loop {
                    match store.try_write() {
                        Ok(guard) => return Ok(StoreMut::Exclusive(guard)),
                        Err(std::sync::TryLockError::Poisoned(p)) => {
                            return Ok(StoreMut::Exclusive(p.into_inner()));
                        }
                        Err(std::sync::TryLockError::WouldBlock) => {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                        }
                    }
                }
            }
            Holding::PerCall(options) => {
                let options = OpenOptions {
                    create: false,
                    read_only: false,
                    ..options.clone()
                };
                Ok(StoreMut::Owned(Store::open(path, &options)?))
            }
        }
    }
}

/// After a write ran out of space, the database of a store held open refuses every call:
/// open it again (giving that space back) before the next call uses it.
fn reopen_if_write_failed(store: &RwLock<Store>, path: &Utf8Path) {
    let failed = store
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .write_failed_for_space();
    if !failed {
        return;
    }
    let mut store = store.write().unwrap_or_else(PoisonError::into_inner);
    // Another call may have done it while this one waited.
    if store.write_failed_for_space()
        && let Err(e) = store.reopen_after_failed_write()
    {
        tracing::warn!("reopening store {path} after a failed write: {e}");
    }
}

/// Thread pools for calls that must not queue behind each other's parallel work (a
/// checkout's hydration would otherwise hold up a snapshot of another worktree on one
/// shared pool). A call takes a free pool, or builds one when all are busy; pools are kept
/// for later calls, up to [`Pools::KEEP`].
#[derive(Default)]
pub(crate) struct Pools {
    free: Mutex<Vec<rayon::ThreadPool>>,
}

impl Pools {
    /// Idle pools kept; more concurrent calls build pools that end with them.
    const KEEP: usize = 8;

    pub(crate) fn install<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let taken = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let pool = match taken {
            Some(pool) => pool,
            None => match rayon::ThreadPoolBuilder::new().build() {
                Ok(pool) => pool,
                // No threads to spare: share the global pool.
                Err(_) => return f(),
            },
        };
        let out = pool.install(f);
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if free.len() < Self::KEEP {
            free.push(pool);
        }
        out
    }
}

/// The live mounts of an engine, by root, and the directories a `mount` or `unmount` is
/// working on. A mount is never dropped while its map is locked: the last handle on a
/// mount unmounts it, which waits for its session.
#[derive(Default)]
pub(crate) struct Live {
    mounts: Mutex<MountMap>,
    claims: Mutex<HashSet<Utf8PathBuf>>,
    released: Condvar,
}

type MountMap = HashMap<Utf8PathBuf, Arc<mount::Mounted>>;

/// Directories claimed by one `mount` or `unmount` until dropped: another one of them
/// waits (or is refused, see [`Claim::also`]).
pub(crate) struct Claim<'a> {
    live: &'a Live,
    dirs: Vec<Utf8PathBuf>,
}

impl Live {
    fn map(&self) -> MutexGuard<'_, MountMap> {
        self.mounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn claims(&self) -> MutexGuard<'_, HashSet<Utf8PathBuf>> {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The mount at `root`, live or not.
    pub(crate) fn get(&self, root: &Utf8Path) -> Option<Arc<mount::Mounted>> {
        self.map().get(root).cloned()
    }

    pub(crate) fn is_live(&self, root: &Utf8Path) -> bool {
        self.get(root).is_some_and(|m| m.is_live())
    }

    pub(crate) fn insert(&self, root: Utf8PathBuf, mounted: Arc<mount::Mounted>) {
        let replaced = self.map().insert(root, mounted);
        drop(replaced);
    }

    pub(crate) fn remove(&self, root: &Utf8Path) -> Option<Arc<mount::Mounted>> {
        self.map().remove(root)
    }

    /// Every mount, the map left empty.
    pub(crate) fn take_all(&self) -> Vec<(Utf8PathBuf, Arc<mount::Mounted>)> {
        let all: Vec<_> = self.map().drain().collect();
        all
    }

    pub(crate) fn live_count(&self) -> usize {
        let all: Vec<_> = self.map().values().cloned().collect();
        all.iter().filter(|m| m.is_live()).count()
    }

    /// The mounts that no longer serve their directory (see [`mount::Mounted::is_live`]).
    pub(crate) fn not_live(&self) -> Vec<Utf8PathBuf> {
        let all: Vec<_> = self
            .map()
            .iter()
            .map(|(root, m)| (root.clone(), m.clone()))
            .collect();
        all.into_iter()
            .filter(|(_, m)| !m.is_live())
            .map(|(root, _)| root)
            .collect()
    }

    /// Claims `dir` if no other call holds it.
    pub(crate) fn try_claim(&self, dir: &Utf8Path) -> Option<Claim<'_>> {
        if !self.claims().insert(dir.to_owned()) {
            return None;
        }
        Some(Claim {
            live: self,
            dirs: vec![dir.to_owned()],
        })
    }

    /// Claims `dir`, waiting while another call holds it.
    pub(crate) fn claim(&self, dir: &Utf8Path) -> Claim<'_> {
        let mut claims = self.claims();
        while claims.contains(dir) {
            claims = self
                .released
                .wait(claims)
                .unwrap_or_else(PoisonError::into_inner);
        }
        claims.insert(dir.to_owned());
        Claim {
            live: self,
            dirs: vec![dir.to_owned()],
        }
    }
}

impl Claim<'_> {
    /// Claims `dir` too (the same directory by another name), without waiting: a call
    /// holding one name never waits for another, so two calls cannot wait for each other.
    /// False if another call holds it.
    pub(crate) fn also(&mut self, dir: &Utf8Path) -> bool {
        if self.dirs.iter().any(|d| d == dir) {
            return true;
        }
        let mut claims = self.live.claims();
        if !claims.insert(dir.to_owned()) {
            return false;
        }
        self.dirs.push(dir.to_owned());
        true
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut claims = self.live.claims();
        for d in &self.dirs {
            claims.remove(d);
        }
        drop(claims);
        self.live.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_runs_on_a_pool_no_running_call_uses_and_pools_are_kept() {
        let pools = Pools::default();
        let (outer, inner) = pools.install(|| {
            let outer = std::thread::current().id();
            // Another call while this one runs: a pool of its own, on its own threads.
            let inner = pools.install(|| std::thread::current().id());
            (outer, inner)
        });
        assert_ne!(outer, inner);
        let kept = |p: &Pools| p.free.lock().unwrap_or_else(PoisonError::into_inner).len();
        assert_eq!(kept(&pools), 2);
        // Later calls take a kept pool instead of building one.
        pools.install(|| ());
        assert_eq!(kept(&pools), 2);
    }
}
