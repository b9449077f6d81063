//! Putting the new per-directory state together as files are hashed, and listing a
//! directory from the cache or by `stat` instead of reading it.

use super::hash::Content;
use super::*;

/// Directory paths read whole at the last capture.
pub(super) type ReadDirs = HashMap<RepoPathBuf, (DirStamp, IgnoreStamp)>;

/// The new per-directory state, put together as files are hashed (in any order):
/// `unchanged` directories as cached, with the states of files read again; listed ones
/// afresh. So no list of every file's result is ever held.
pub(super) struct Assembly<'a> {
    pub(super) dirs: HashMap<RepoPathBuf, DirState>,
    pub(super) read_dirs: &'a ReadDirs,
    /// Directories whose records changed.
    pub(super) dirty: HashSet<RepoPathBuf>,
    /// Cached directories that are gone.
    pub(super) stale: Vec<RepoPathBuf>,
    /// Directories whose trees are built again: listed afresh, or holding a file read
    /// again or gone, and every directory above them.
    pub(super) changed: HashSet<RepoPathBuf>,
    /// A walked file's directory that has no state (a listing lost on the way).
    pub(super) lost: Option<RepoPathBuf>,
}

/// What [`Assembly::finish`] could not put together.
pub(super) enum Lost {
    /// A walked file's directory has no state.
    Listing(RepoPathBuf),
    /// A directory built again takes blob ids from a tree the store cannot give.
    Tree(RepoPathBuf, cas::TreeId),
}

pub(super) fn stale(root: &Path, dir: &RepoPath, tree: cas::TreeId) -> ScanError {
    ScanError::StaleCache {
        path: dir.to_fs_path(root),
        tree,
    }
}

/// What [`Assembly::finish`] gives.
pub(super) struct Assembled {
    pub(super) dirs: HashMap<RepoPathBuf, DirState>,
    pub(super) dirty: HashSet<RepoPathBuf>,
    pub(super) stale: Vec<RepoPathBuf>,
    /// The trees of unchanged directories that stand as they are.
    pub(super) reuse: HashMap<RepoPathBuf, (cas::TreeId, u64)>,
}

/// Marks `dir` and every directory above it, stopping at one marked already (so is
/// everything above it).
pub(super) fn mark_changed(changed: &mut HashSet<RepoPathBuf>, dir: &RepoPath) {
    for up in dir.ancestors() {
        if changed.contains(up) {
            return;
        }
        changed.insert(up.to_owned());
    }
}

impl<'a> Assembly<'a> {
    pub(super) fn new(
        cached: HashMap<RepoPathBuf, DirState>,
        unchanged: &HashSet<RepoPathBuf>,
        read_dirs: &'a ReadDirs,
    ) -> Assembly<'a> {
        let mut dirs = cached;
        let stale: Vec<RepoPathBuf> = dirs
            .keys()
            .filter(|k| !unchanged.contains(*k) && !read_dirs.contains_key(*k))
            .cloned()
            .collect();
        for k in &stale {
            dirs.remove(k);
        }
        let mut dirty = HashSet::new();
        let mut changed = HashSet::new();
        for (path, (stamp, ignore)) in read_dirs {
            dirs.insert(path.clone(), DirState::listed(*stamp, *ignore));
            dirty.insert(path.clone());
            mark_changed(&mut changed, path);
        }
        Assembly {
            dirs,
            read_dirs,
            dirty,
            stale,
            changed,
            lost: None,
        }
    }

    /// Records what hashing a walked file gave (`None`: it vanished or changed type).
    pub(super) fn found(&mut self, w: &Walked, result: Option<Content>) {
        let (parent, name) = w.dir_and_name();
        let listed_now = self.read_dirs.contains_key(parent);
        let cached = w.cached.as_deref().copied();
        let was_read = result.as_ref().is_none_or(|c| c.state != cached);
        if was_read {
            mark_changed(&mut self.changed, parent);
        }
        if !listed_now && !was_read {
            return;
        }
        // Every walked file's directory was listed or is unchanged: its state is here.
        let Some(dir) = self.dirs.get_mut(parent) else {
            self.lost.get_or_insert_with(|| parent.to_owned());
            return;
        };
        let state = match result {
            // Never held still: what was read, under an entry no later stat matches
            // (verified at the beginning of time, so always racy).
            Some(c) => c.state.unwrap_or_else(|| {
                FileState::from_stat(&w.stat.holding(c.kind, c.size), c.blob, i64::MIN)
            }),
            None => {
                // Gone or changed type while read: look at the directory again next time.
                dir.stamp.verified_ns = 0;
                dir.children_mut().retain(|(n, _)| n.as_slice() != name);
                self.dirty.insert(parent.to_owned());
                return;
            }
        };
        if listed_now {
            dir.children_mut()
                .push((Name::from_slice(name), Child::File(state)));
        } else if let Ok(i) = dir
            .children()
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
        {
            dir.children_mut()[i].1 = Child::File(state);
            self.dirty.insert(parent.to_owned());
        }
    }

    /// Adds files that are gone, listed subdirectories and skipped entries, sorts the
    /// listings, and takes the blob ids of every directory built again out of its tree.
    pub(super) fn finish(
        mut self,
        unchanged: &HashSet<RepoPathBuf>,
        pruned: &[RepoPathBuf],
        vanished: &[Vec<u8>],
        skipped: &[Skipped],
        reader: &cas::Reader,
    ) -> Result<Assembled, Lost> {
        if let Some(dir) = self.lost {
            return Err(Lost::Listing(dir));
        }
        let read_dirs = self.read_dirs;
        for path in vanished {
            // A file of an unchanged directory, a cache key (checked on load).
            let (parent, name) = split_parent(path);
            let parent = RepoPath::from_bytes_unchecked(parent);
            mark_changed(&mut self.changed, parent);
            if let Some(dir) = self.dirs.get_mut(parent) {
                dir.stamp.verified_ns = 0;
                dir.children_mut().retain(|(n, _)| n.as_slice() != name);
                self.dirty.insert(parent.to_owned());
            }
        }
        let subdirs = read_dirs
            .keys()
            .chain(pruned.iter())
            .filter(|k| !k.is_root());
        let mut additions: Vec<(&RepoPath, Name, Child)> = subdirs
            .map(|sub| {
                let (parent, name) = sub.split_parent();
                (parent, Name::from_slice(name), Child::Dir)
            })
            .collect();
        for s in skipped {
            // Skipped paths are raw, but the listing holding one is a directory the walk
            // entered or the cache holds: a repo path.
            let (parent, name) = listing_slot(&s.path);
            let parent = RepoPath::from_bytes_unchecked(parent);
            if read_dirs.contains_key(parent) {
                additions.push((
                    parent,
                    Name::from_slice(name),
                    Child::Skipped(s.reason.clone()),
                ));
            } else if let Some(dir) = self.dirs.get_mut(parent)
                && let Ok(i) = dir
                    .children()
                    .binary_search_by(|(n, _)| n.as_slice().cmp(name))
                && matches!(dir.children()[i].1, Child::File(_))
            {
                // A cached file now left out (grown past the size cap): out of its tree.
                dir.children_mut()[i].1 = Child::Skipped(s.reason.clone());
                self.dirty.insert(parent.to_owned());
                mark_changed(&mut self.changed, parent);
            }
        }
        for (parent, name, child) in additions {
            if read_dirs.contains_key(parent)
                && let Some(dir) = self.dirs.get_mut(parent)
            {
                dir.children_mut().push((name, child));
            }
        }
        for path in read_dirs.keys() {
            if let Some(dir) = self.dirs.get_mut(path) {
                dir.children_mut().sort_by(|a, b| a.0.cmp(&b.0));
                dir.children_mut().dedup_by(|a, b| a.0 == b.0);
            }
        }
        let rebuilt = self
            .changed
            .iter()
            .chain(&self.dirty)
            .map(RepoPathBuf::as_repo_path)
            .collect();
        dirstate::resolve_dirs(&mut self.dirs, &rebuilt, reader)
            .map_err(|(dir, tree)| Lost::Tree(dir, tree))?;
        let reuse = unchanged
            .iter()
            .filter(|d| !self.changed.contains(*d))
            .filter_map(|d| {
                self.dirs
                    .get(d)
                    .and_then(|s| s.tree)
                    .map(|t| (d.clone(), t))
            })
            .collect();
        Ok(Assembled {
            dirs: self.dirs,
            dirty: self.dirty,
            stale: self.stale,
            reuse,
        })
    }
}

/// An unchanged directory's files, skipped entries, and files no longer there.
pub(super) type Listing = (Vec<Walked>, Vec<Skipped>, Vec<Vec<u8>>);

/// What lstat'ing an unchanged directory's files found.
pub(super) enum Listed {
    /// Every file as its cache entry says, none racy: the listing stands as cached.
    Clean,
    Changed(Listing),
}

pub(super) fn child_path(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(dir.len() + 1 + name.len());
    path.extend_from_slice(dir);
    if !dir.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// A cache entry to compare a file with, unless its blob id is still in its tree (taken
/// out, if the file is to be compared, before it is: see `scan`).
pub(super) fn known(cached: &FileState) -> Option<Box<FileState>> {
    (cached.blob != dirstate::UNRESOLVED).then(|| Box::new(*cached))
}

/// The skipped entries of a directory's cached listing.
pub(super) fn cached_skipped(dir: &RepoPath, state: &DirState) -> Vec<Skipped> {
    let dir = dir.as_bytes();
    if state.tally().skipped == 0 {
        return Vec::new();
    }
    state
        .children()
        .iter()
        .filter_map(|(name, child)| match child {
            Child::Skipped(reason) => Some(Skipped {
                path: child_path(dir, name),
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// An unchanged directory's racy files as its cache holds them, and its skipped entries.
pub(super) fn racy_listing(dir: &RepoPath, state: &DirState) -> Listing {
    let files = state
        .children()
        .iter()
        .filter_map(|(name, child)| match child {
            Child::File(cached) if cached.is_racy() => Some(Walked {
                path: child_path(dir.as_bytes(), name),
                stat: cached.stat(),
                kind: cached.stat().kind()?,
                cached: known(cached),
            }),
            _ => None,
        })
        .collect();
    (files, cached_skipped(dir, state), Vec::new())
}

/// The files of an unchanged directory, lstat'ed through one directory descriptor (or,
/// `quiet`, trusted as cached unless one of the suspect files it names moved):
/// [`Listed::Clean`] if every one matches its entry and none is racy, else its files,
/// skipped entries, and the files that are no longer there (or no longer files).
pub(super) fn stat_listing(
    root: &Path,
    dir: &RepoPath,
    state: &DirState,
    max_file_size: Option<u64>,
    quiet: Option<&[Vec<u8>]>,
) -> Listed {
    if let Some(suspects) = quiet
        && (suspects.is_empty()
            || suspects_match(root, dir.as_bytes(), state, suspects, max_file_size))
    {
        // Nothing happened here since the cache was verified: it stands as it is, but a
        // racy file is read again (the others stay as cached).
        return match state.tally().racy {
            false => Listed::Clean,
            true => Listed::Changed(racy_listing(dir, state)),
        };
    }
    let fd = path_fd(root, dir.as_bytes());
    let stat_of = |name: &[u8]| fd.as_ref().and_then(|fd| stat_at(fd, name));
    // First only compare: most directories are clean, and need no allocation per file.
    let mut stats = Vec::with_capacity(state.children().len());
    let mut clean = true;
    for (name, child) in state.children() {
        let Child::File(cached) = child else {
            continue;
        };
        let stat = stat_of(name);
        clean &= !cached.is_racy() && same_file(cached, stat.as_ref(), max_file_size);
        stats.push(stat);
    }
    if clean {
        return Listed::Clean;
    }
    let mut files = Vec::with_capacity(stats.len());
    let mut skipped = Vec::new();
    let mut gone = Vec::new();
    let mut stats = stats.into_iter();
    for (name, child) in state.children() {
        let path = child_path(dir.as_bytes(), name);
        match child {
            Child::File(cached) => {
                let stat = stats.next().flatten();
                match stat.and_then(|st| st.kind().map(|k| (st, k))) {
                    Some((stat, kind)) => match oversize(&stat, kind, max_file_size) {
                        Some(reason) => skipped.push(Skipped { path, reason }),
                        None => files.push(Walked {
                            path,
                            stat,
                            kind,
                            cached: known(cached),
                        }),
                    },
                    None => gone.push(path),
                }
            }
            Child::Skipped(reason) => skipped.push(Skipped {
                path,
                reason: reason.clone(),
            }),
            Child::Dir => {}
        }
    }
    Listed::Changed((files, skipped, gone))
}

/// True if every suspect file `names` of quiet `dir` still has its cached stat (a racy
/// one is read again all the same; a skipped entry stands: its name or size kept it out,
/// and neither moves without an event).
pub(super) fn suspects_match(
    root: &Path,
    dir: &[u8],
    state: &DirState,
    names: &[Vec<u8>],
    max_file_size: Option<u64>,
) -> bool {
    let Some(fd) = path_fd(root, dir) else {
        return false;
    };
    names.iter().all(|name| match state.child(name) {
        Some(Child::File(cached)) => same_file(cached, stat_at(&fd, name).as_ref(), max_file_size),
        Some(Child::Skipped(_)) => true,
        Some(Child::Dir) | None => false,
    })
}

/// True if `stat` (None: gone) is the cached file's and in scope.
pub(super) fn same_file(
    cached: &FileState,
    stat: Option<&Stat>,
    max_file_size: Option<u64>,
) -> bool {
    stat.is_some_and(|st| {
        cached.matches(st)
            && st
                .kind()
                .is_some_and(|k| oversize(st, k, max_file_size).is_none())
    })
}

/// `dir` opened `O_PATH`: enough for `statat`, and raises no open event for a watcher.
/// (A directory whose names are out of the system's reach by path is opened by handle,
/// and is never watched.)
pub(super) fn path_fd(root: &Path, dir: &[u8]) -> Option<rustix::fd::OwnedFd> {
    if !reach::listable(root, dir) {
        return reach::open_dir(root, dir).ok();
    }
    rustix::fs::open(
        join(root, dir),
        rustix::fs::OFlags::PATH
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()
}

pub(super) fn stat_at(dir: &rustix::fd::OwnedFd, name: &[u8]) -> Option<Stat> {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| Stat::from_rustix(&st))
}
