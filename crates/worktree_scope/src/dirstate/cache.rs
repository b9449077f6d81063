//! The cache of a worktree's directory states: loaded from the store, resolved against the
//! trees it points into, updated for files cairn wrote itself, kept in memory between
//! captures within a limit, and the fingerprints of ignore rules from outside the tree.

use super::*;
use path_policy::{RepoPath, RepoPathBuf};

/// Takes the blob ids that states of `wanted` directories still leave in their trees
/// out of those trees (read in parallel, checked as every read is). `Err` names a
/// directory whose tree the store cannot give or lacks one of them, and that tree.
pub fn resolve_dirs(
    dirs: &mut HashMap<RepoPathBuf, DirState>,
    wanted: &std::collections::HashSet<&RepoPath>,
    reader: &cas::Reader,
) -> Result<(), (RepoPathBuf, cas::TreeId)> {
    let mut pending: Vec<(&RepoPathBuf, &mut DirState)> = dirs
        .iter_mut()
        .filter(|(dir, state)| state.pending && wanted.contains(dir.as_repo_path()))
        .collect();
    pending.par_iter_mut().try_for_each(|(dir, state)| {
        let Some((id, _)) = state.tree else {
            return Err(((*dir).clone(), cas::Tree::default().id()));
        };
        match reader.tree(id) {
            Ok(tree) if state.resolve(&tree) => Ok(()),
            _ => Err(((*dir).clone(), id)),
        }
    })
}

/// [`resolve_dirs`], forgetting the state of any directory whose blob ids cannot be had
/// (it is listed again and its files read at the next capture).
pub fn resolve_or_forget(
    dirs: &mut HashMap<RepoPathBuf, DirState>,
    wanted: &std::collections::HashSet<&RepoPath>,
    reader: &cas::Reader,
) {
    while let Err((dir, _)) = resolve_dirs(dirs, wanted, reader) {
        dirs.remove(&dir);
    }
}

/// The store key of a directory: `d` then its path with `/` as NUL, so keys sort in tree
/// order. The root is `d`.
pub fn dir_key(path: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(path.len() + 1);
    key.push(b'd');
    key.extend(path.iter().map(|&b| if b == b'/' { 0 } else { b }));
    key
}

/// The store key of the fingerprint of ignore rules from outside the tree.
pub const GLOBAL_KEY: &[u8] = b"g";

/// The cache of a worktree as loaded from the store.
#[derive(Default, Debug)]
#[cfg_attr(any(test, feature = "testing"), derive(PartialEq))]
pub struct Cache {
    /// Directory path (`/`-separated, root = empty) → state.
    pub dirs: HashMap<RepoPathBuf, DirState>,
    /// The fingerprint of the rules from outside the tree, when the cache has one.
    pub global: Option<u64>,
}

impl Cache {
    /// The stat cache of the worktree at `root`, as the store holds it.
    pub fn load(
        reader: &cas::Reader,
        root: &camino::Utf8Path,
    ) -> Result<Cache, cas::StorageFailure> {
        let mut cache = Cache::default();
        let records = reader.file_states(root)?;
        // Decompressing and checking the records is most of loading: in parallel.
        let dirs: Vec<(RepoPathBuf, DirState)> = records
            .par_iter()
            .filter_map(|(key, value)| {
                let rest = key.strip_prefix(b"d")?;
                // Nothing checked the stored key: a record under a key `dir_key` does not
                // make (a `/` in it), or under a path no tree holds, is dropped, as one that
                // does not decode is (its directory is listed again).
                if rest.contains(&b'/') {
                    return None;
                }
                let path = RepoPathBuf::new(
                    rest.iter()
                        .map(|&b| if b == 0 { b'/' } else { b })
                        .collect::<Vec<u8>>(),
                )
                .ok()?;
                let state = DirState::decode(value)?;
                Some((path, state))
            })
            .collect();
        cache.dirs.extend(dirs);
        cache.global = records
            .iter()
            .find(|(key, _)| key.as_slice() == GLOBAL_KEY)
            .and_then(|(_, v)| v.as_slice().try_into().ok().map(u64::from_le_bytes));
        Ok(cache)
    }

    fn entries(&self) -> usize {
        self.dirs.values().map(|d| d.children().len() + 1).sum()
    }
}

/// Caches kept between operations, by worktree root: loading one from the store costs
/// about 15 ms for the Linux tree, a good part of a capture that a watcher made cheap.
pub struct KeptCaches {
    set: Mutex<KeptSet>,
}

impl Default for KeptCaches {
    fn default() -> Self {
        KeptCaches {
            set: Mutex::new(KeptSet::new(KEPT_ENTRIES)),
        }
    }
}

impl KeptCaches {
    fn set(&self) -> std::sync::MutexGuard<'_, KeptSet> {
        self.set.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cache of `root` as the store holds it at file-states `version` (read before
    /// `reader` was opened): the copy the last operation on it kept, if it is of that
    /// version, else loaded.
    pub fn take_or_load(
        &self,
        store: &cas::Store,
        reader: &cas::Reader,
        root: &camino::Utf8Path,
        version: u64,
    ) -> Result<Cache, cas::StorageFailure> {
        match self.take(store, root) {
            Some(kept)
                if store.side_version(worktree_registry::FILE_STATES, root.as_str()) == version =>
            {
                Ok(kept)
            }
            _ => Cache::load(reader, root),
        }
    }

    /// The copy of `root`'s cache kept by the last operation on it, if the store has not
    /// written its file states since.
    pub fn take(&self, store: &cas::Store, root: &camino::Utf8Path) -> Option<Cache> {
        let kept = self.set().take(root)?;
        (kept.version == store.side_version(worktree_registry::FILE_STATES, root.as_str()))
            .then_some(kept.cache)
    }

    /// Keeps `cache` in memory for the next operation on `root`. The caller holds the
    /// worktree and has just read it from, or written it to, the store: it is what the
    /// store holds at the version it has now.
    pub fn keep(&self, cache: Cache, store: &cas::Store, root: &camino::Utf8Path) {
        let version = store.side_version(worktree_registry::FILE_STATES, root.as_str());
        let dropped = self.set().insert(root, version, cache);
        // Large caches are freed outside the lock.
        drop(dropped);
    }

    /// Forgets the copy kept for `root` (the worktree is gone).
    pub fn forget(&self, root: &camino::Utf8Path) {
        let dropped = self.set().take(root);
        drop(dropped);
    }
}

/// At most this many directory entries are kept in all (about 130 bytes each: some 13 Linux
/// trees).
const KEPT_ENTRIES: usize = 1 << 20;

struct KeptSet {
    /// Entries kept at most, in all.
    limit: usize,
    by_root: HashMap<camino::Utf8PathBuf, Kept>,
}

struct Kept {
    version: u64,
    entries: usize,
    cache: Cache,
}

impl KeptSet {
    fn new(limit: usize) -> KeptSet {
        KeptSet {
            limit,
            by_root: HashMap::new(),
        }
    }

    fn take(&mut self, root: &camino::Utf8Path) -> Option<Kept> {
        self.by_root.remove(root)
    }

    /// Keeps `cache`, letting go of the least recently written ones while the total is
    /// over the limit (and of `cache` itself if it alone is). Returns what it let go of.
    fn insert(&mut self, root: &camino::Utf8Path, version: u64, cache: Cache) -> Vec<Cache> {
        let mut dropped: Vec<Cache> = self.take(root).map(|k| k.cache).into_iter().collect();
        let entries = cache.entries();
        if entries > self.limit {
            dropped.push(cache);
            return dropped;
        }
        let mut total: usize = self.by_root.values().map(|k| k.entries).sum::<usize>() + entries;
        while total > self.limit {
            let Some(oldest) = self
                .by_root
                .iter()
                .min_by_key(|(_, k)| k.version)
                .map(|(r, _)| r.clone())
            else {
                break;
            };
            if let Some(k) = self.by_root.remove(&oldest) {
                total -= k.entries;
                dropped.push(k.cache);
            }
        }
        self.by_root.insert(
            root.to_owned(),
            Kept {
                version,
                entries,
                cache,
            },
        );
        dropped
    }
}

/// A fingerprint of the scope rules that come from outside the tree: the deny patterns, the
/// repository's `.git/info/exclude`, and `sources`, the git config files consulted for the
/// global excludes file and that file (see `rules::global`), by path and stat. A
/// change re-walks everything.
pub fn global_stamp(root: &Path, deny: &[String], sources: &[std::path::PathBuf]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    for pattern in deny {
        hasher.update(pattern.as_bytes());
        hasher.update(b"\n");
    }
    let exclude = root.join(".git/info/exclude");
    hash_files(
        &mut hasher,
        std::iter::once(exclude.as_path()).chain(sources.iter().map(|s| s.as_path())),
    );
    first_u64(&hasher)
}

/// The paths and stats of `files`, as [`global_stamp`] takes them.
pub fn files_stamp(files: &[std::path::PathBuf]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    hash_files(&mut hasher, files.iter().map(|f| f.as_path()));
    first_u64(&hasher)
}

fn hash_files<'a>(hasher: &mut blake3::Hasher, files: impl Iterator<Item = &'a Path>) {
    for f in files {
        hasher.update(f.as_os_str().as_encoded_bytes());
        hasher.update(b"\0");
        // A stat, never an open: a FIFO here must not block.
        if let Ok(m) = f.metadata() {
            hash_stat(hasher, &m);
        }
    }
}

/// Records files just written by cairn itself (checkout, rollback) in `dirs`: each file's
/// state goes into its directory's listing, and the directory is marked unverified, so the
/// next scan lists it again (keeping scope exactly the walker's) but reads none of these
/// files. Returns the directories changed.
pub fn record_written<'a>(
    dirs: &mut HashMap<RepoPathBuf, DirState>,
    written: impl IntoIterator<Item = (&'a RepoPath, Option<FileState>)>,
) -> Vec<RepoPathBuf> {
    // In tree order: each record is written on its own, so any order would do.
    let mut touched = std::collections::BTreeSet::new();
    for (path, state) in written {
        let (parent, name) = path.split_parent();
        let dir = dirs
            .entry(parent.to_owned())
            .or_insert_with(DirState::unverified);
        dir.stamp.verified_ns = 0;
        dir.tree = None;
        let at = dir
            .children()
            .binary_search_by(|(n, _)| n.as_slice().cmp(name));
        match (at, state) {
            (Ok(i), Some(s)) => dir.children_mut()[i].1 = Child::File(s),
            (Err(i), Some(s)) => dir
                .children_mut()
                .insert(i, (Name::from_slice(name), Child::File(s))),
            (Ok(i), None) => {
                dir.children_mut().remove(i);
            }
            (Err(_), None) => {}
        }
        touched.insert(parent.to_owned());
        // Every directory above holds a different tree now.
        for up in parent.ancestors().skip(1) {
            if let Some(d) = dirs.get_mut(up) {
                d.tree = None;
                touched.insert(up.to_owned());
            }
        }
    }
    touched.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_caches_stay_within_their_limit() {
        let cache = |files: usize| Cache {
            dirs: HashMap::from([(
                RepoPathBuf::root(),
                DirState {
                    children: (0..files)
                        .map(|i| (Name::from_vec(i.to_string().into_bytes()), Child::Dir))
                        .collect(),
                    ..DirState::unverified()
                },
            )]),
            global: None,
        };
        let root = |name: &str| camino::Utf8PathBuf::from(format!("/w/{name}"));
        let mut kept = KeptSet::new(10);
        assert!(kept.insert(&root("a"), 1, cache(3)).is_empty()); // 4 entries
        assert!(kept.insert(&root("b"), 2, cache(3)).is_empty());
        // Replaces a's: 4 + 5.
        assert_eq!(kept.insert(&root("a"), 3, cache(4)).len(), 1);
        assert_eq!(kept.by_root.len(), 2);
        assert!(kept.insert(&root("c"), 4, cache(0)).is_empty()); // 10 in all: fits
        assert_eq!(kept.by_root.len(), 3);
        // b, the least recently written, goes.
        assert_eq!(kept.insert(&root("d"), 5, cache(1)).len(), 1);
        assert!(kept.take(&root("b")).is_none());
        assert_eq!(kept.take(&root("a")).map(|k| k.version), Some(3));
        // Larger than the limit alone: not kept.
        assert_eq!(kept.insert(&root("e"), 6, cache(20)).len(), 1);
        assert!(kept.take(&root("e")).is_none());
        assert!(kept.take(&root("c")).is_some());
        assert!(kept.take(&root("d")).is_some());
    }
}
