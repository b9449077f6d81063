//! The parallel walk of a worktree's scope: entering directories (by path, or by handle
//! where a path is too long), what is in scope, and what the walker reports.

use super::assemble::child_path;
use super::*;

pub(super) struct Walk {
    pub(super) files: Vec<Walked>,
    pub(super) skipped: Vec<Skipped>,
    /// Directories the walker listed, with the stamp taken just before.
    pub(super) read_dirs: Vec<(RepoPathBuf, DirStamp, IgnoreStamp)>,
    /// Directories it was told to skip.
    pub(super) pruned: Vec<RepoPathBuf>,
}

/// What the walk knows of a directory it entered: the rules in force there and its device.
#[derive(Clone)]
pub(super) struct Entered {
    pub(super) rules: Option<Arc<Rules>>,
    pub(super) dev: u64,
}

/// Directories entered so far, by path from the root: the walker lists a directory only
/// after it passed the filter, so its entry is here before its children's. Keyed by raw
/// bytes: looked up with the walker's paths before the scope has judged their names.
pub(super) type EnteredDirs = RwLock<HashMap<Vec<u8>, Entered>>;

/// What the walk knows of the directory holding `rel`: its own entry or, should it have
/// none (its stat failed), its nearest ancestor's.
pub(super) fn entered_above(dirs: &EnteredDirs, rel: &[u8]) -> Option<Entered> {
    let dirs = dirs.read().ok()?;
    let mut dir = split_parent(rel).0;
    loop {
        if let Some(e) = dirs.get(dir) {
            return Some(e.clone());
        }
        if dir.is_empty() {
            return None;
        }
        dir = split_parent(dir).0;
    }
}

/// Where the walk finds a directory's pattern files: by absolute path, or through a handle
/// of a directory whose names the system may not take from `/` (`abs` is then only shown).
#[derive(Clone, Copy)]
pub(super) struct DirAt<'a> {
    pub(super) abs: &'a Path,
    pub(super) handle: Option<&'a OwnedFd>,
}

impl DirAt<'_> {
    /// The stamp of the pattern files (`only` those bits), and whether `.git` is a file.
    pub(super) fn ignore_stamp(self, only: Option<u8>) -> (IgnoreStamp, bool) {
        match self.handle {
            None => IgnoreStamp::with_git_file(self.abs, only),
            Some(dir) => {
                IgnoreStamp::with_git_file_by(|name| reach::lstat_at(dir, OsStr::new(name)), only)
            }
        }
    }

    /// [`rules::load`] of this directory, `rel` from the root.
    pub(super) fn rules(
        self,
        rel: &[u8],
        stamps: (&IgnoreStamp, bool),
        parent: Option<&Arc<Rules>>,
    ) -> (Option<Arc<Rules>>, Option<Skipped>) {
        match self.handle {
            None => rules::load(&rules::OnDisk, self.abs, rel, stamps, parent),
            Some(dir) => {
                let source = reach::RulesBeneath { dir, abs: self.abs };
                rules::load(&source, self.abs, rel, stamps, parent)
            }
        }
    }

    /// The pseudo file system mounted here (on device `dev`), if it is one.
    pub(super) fn pseudo_filesystem(self, dev: u64) -> Option<&'static str> {
        match self.handle {
            None => rules::pseudo_filesystem(self.abs, dev),
            Some(dir) => path_policy::pseudo_filesystem_of(dir),
        }
    }
}

/// A directory the walk enters.
pub(super) struct Entering {
    /// Its stamp, taken before it is listed: a change made meanwhile shows next time.
    pub(super) stamp: DirStamp,
    pub(super) ignore: IgnoreStamp,
    pub(super) entered: Entered,
    /// A pattern file of it that cannot be read, to report.
    pub(super) problem: Option<Skipped>,
}

/// Enters directory `rel` (in scope; `meta` its stat) below `parent` (`None`: the
/// root's device is `root_dev`): a pseudo file system mounted there is refused; else its
/// stamps and rules. Both walks, by path and by handle, enter a directory here.
pub(super) fn enter_dir(
    at: DirAt<'_>,
    rel: &[u8],
    meta: &Metadata,
    parent: Option<&Entered>,
    root_dev: u64,
) -> Result<Entering, SkipReason> {
    let parent_dev = parent.map_or(root_dev, |p| p.dev);
    if meta.dev() != parent_dev && at.pseudo_filesystem(meta.dev()).is_some() {
        return Err(SkipReason::PseudoFilesystem);
    }
    let stamp = DirStamp::of(meta, now_ns());
    let (ignore, git_file) = at.ignore_stamp(None);
    let (rules, problem) = at.rules(
        rel,
        (&ignore, git_file),
        parent.and_then(|p| p.rules.as_ref()),
    );
    Ok(Entering {
        stamp,
        ignore,
        entered: Entered {
            rules,
            dev: meta.dev(),
        },
        problem,
    })
}

/// What a walked name in scope that is not a directory gives (`meta` its `lstat`, in a
/// directory on `parent_dev`): nothing if it is one after all, a skip if a pseudo file
/// system is mounted over it (`pseudo` tells) or [`Scope::leaf`] leaves it out, else a
/// file to read. Both walks judge every file here.
pub(super) fn leaf_found(
    scope: &Scope,
    rel: Vec<u8>,
    meta: &Metadata,
    parent_dev: Option<u64>,
    pseudo: impl FnOnce() -> bool,
) -> Option<Found> {
    // A file mounted over one of the tree (a bind mount) may be a pseudo file system's.
    if parent_dev.is_some_and(|dev| dev != meta.dev()) && pseudo() {
        return Some(Found::Skip(Skipped {
            path: rel,
            reason: SkipReason::PseudoFilesystem,
        }));
    }
    let stat = Stat::from_std(meta);
    let leaf = match stat.kind() {
        Some(cas::EntryKind::Symlink) => Leaf::Symlink,
        Some(_) => Leaf::File(stat.size),
        None if meta.is_dir() => return None,
        None => Leaf::Special(Special::of(meta)),
    };
    if let Some(reason) = scope.leaf(&rel, leaf) {
        return Some(Found::Skip(Skipped { path: rel, reason }));
    }
    stat.kind().map(|kind| {
        Found::File(Walked {
            path: rel,
            stat,
            kind,
            cached: None,
        })
    })
}

/// Walks the scope of `root`: `.gitignore` and `.ignore` files inside it (git repo or not),
/// `.git/info/exclude`, the global excludes file; never ignore files above the root,
/// never `.git`, never the store's folder, never a pseudo file system. Hidden files are
/// included. Directories in `skip` are not entered (they are reported in `pruned`).
///
/// The `ignore` crate's walker goes by absolute path; a directory whose names may be
/// longer than the system takes from `/` is left to [`walk_beneath`], which goes by handle
/// and judges every name with the same [`Scope`].
pub(super) fn walk(
    root: &Path,
    root_dev: u64,
    (root_ignore, root_git_file): (IgnoreStamp, bool),
    options: &ScanOptions<'_>,
    skip: &HashSet<RepoPathBuf>,
) -> Result<Walk, ScanError> {
    let mut builder = ignore::WalkBuilder::new(root);
    // The walker reads no rules file itself (it would open a FIFO or follow a link to a
    // device): the filter below applies the rules [`rules`] reads.
    builder
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .threads(options.threads);
    let refused = Arc::new(Mutex::new(Vec::new()));
    let read_dirs = Arc::new(Mutex::new(Vec::new()));
    let pruned = Arc::new(Mutex::new(Vec::new()));
    // Directories out of the walker's reach, with what it knew of their parents.
    let beneath: Arc<Mutex<Vec<Beneath>>> = Arc::new(Mutex::new(Vec::new()));
    let (refused_f, read_f, pruned_f) = (refused.clone(), read_dirs.clone(), pruned.clone());
    let beneath_f = beneath.clone();
    let scope = Arc::new(options.scope.clone());
    let entered: Arc<EnteredDirs> = Arc::new(RwLock::new(HashMap::new()));
    // Under a root so long that its own names may be out of reach, everything is walked
    // by handle.
    let root_handle = match reach::listable(root, b"") {
        true => None,
        false => Some(reach::open_dir(root, b"").map_err(|source| ScanError::Io {
            path: root.to_owned(),
            source,
        })?),
    };
    let root_entered = {
        let at = DirAt {
            abs: root,
            handle: root_handle.as_ref(),
        };
        let (rules, problem) = at.rules(b"", (&root_ignore, root_git_file), None);
        if let (Some(p), Ok(mut list)) = (problem, refused.lock()) {
            list.push(p);
        }
        Entered {
            rules,
            dev: root_dev,
        }
    };
    if let Ok(mut dirs) = entered.write() {
        dirs.insert(Vec::new(), root_entered.clone());
    }
    let entered_f = entered.clone();
    let filter_root = root.to_path_buf();
    let skip_f = Arc::new(skip.clone());
    let scope_f = scope.clone();
    builder.filter_entry(move |e| {
        if e.depth() == 0 {
            return true;
        }
        let Ok(rel) = e
            .path()
            .strip_prefix(&filter_root)
            .map(|r| r.as_os_str().as_bytes().to_vec())
        else {
            return false;
        };
        let refuse = |reason: SkipReason| {
            if let Ok(mut list) = refused_f.lock() {
                list.push(Skipped {
                    path: rel.clone(),
                    reason,
                });
            }
            false
        };
        let parent = entered_above(&entered_f, &rel);
        let is_dir = e.file_type().is_some_and(|t| t.is_dir());
        let rules = DirRules(parent.as_ref().and_then(|p| p.rules.clone()));
        match scope_f.name(&rules, &rel, is_dir) {
            Verdict::Out => return false,
            Verdict::Skip(reason) => return refuse(reason),
            Verdict::In => {}
        }
        if !is_dir {
            return true;
        }
        if !reach::listable(&filter_root, &rel) {
            if let Ok(mut list) = beneath_f.lock() {
                list.push(Beneath::Enter(rel, parent));
            }
            return false;
        }
        // In scope, every name checked: a repo path from here on.
        if skip_f.contains(RepoPath::from_bytes_unchecked(&rel)) {
            if let Ok(mut list) = pruned_f.lock() {
                list.push(RepoPathBuf::from_bytes_unchecked(rel));
            }
            return false;
        }
        let Ok(meta) = e.path().symlink_metadata() else {
            return true;
        };
        let at = DirAt {
            abs: e.path(),
            handle: None,
        };
        let entering = match enter_dir(at, &rel, &meta, parent.as_ref(), root_dev) {
            Ok(entering) => entering,
            Err(reason) => return refuse(reason),
        };
        if let (Some(p), Ok(mut list)) = (entering.problem, refused_f.lock()) {
            list.push(p);
        }
        if let Ok(mut dirs) = entered_f.write() {
            dirs.insert(rel.clone(), entering.entered);
        }
        if let Ok(mut list) = read_f.lock() {
            let rel = RepoPathBuf::from_bytes_unchecked(rel);
            list.push((rel, entering.stamp, entering.ignore));
        }
        true
    });
    let root_path = root.to_path_buf();
    let entered_c = entered.clone();
    let scope_c = scope.clone();
    let classify = move |result: Result<ignore::DirEntry, ignore::Error>| -> Option<Found> {
        let entry = match result {
            Ok(e) => e,
            Err(e) => return walk_error(&root_path, e),
        };
        if entry.depth() == 0 || entry.file_type().is_some_and(|t| t.is_dir()) {
            return None;
        }
        let rel = entry
            .path()
            .strip_prefix(&root_path)
            .ok()?
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = match entry.path().symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(source) => {
                return Some(Found::Fail(ScanError::Io {
                    path: entry.path().to_owned(),
                    source,
                }));
            }
        };
        let parent_dev = entered_above(&entered_c, &rel).map(|p| p.dev);
        leaf_found(&scope_c, rel, &meta, parent_dev, || {
            rules::pseudo_filesystem(entry.path(), meta.dev()).is_some()
        })
    };

    let mut out = Walk {
        files: Vec::new(),
        skipped: Vec::new(),
        read_dirs: Vec::new(),
        pruned: Vec::new(),
    };
    let mut failed = None;
    // Sorted out as they come: a million files are held once, not twice.
    let mut sort = |f: Found| match f {
        Found::File(mut w) => {
            // Copied into this thread's memory: a walker thread's path, let go here later
            // during hashing, would be free only to that thread (glibc's per-thread
            // arenas), and a million of them stay in the process's peak.
            w.path = w.path.as_slice().to_vec();
            out.files.push(w)
        }
        Found::Skip(s) => out.skipped.push(s),
        Found::Fail(e) => {
            failed.get_or_insert(e);
        }
    };
    if root_handle.is_none() {
        if options.threads == 1 {
            builder.build().filter_map(classify).for_each(&mut sort);
        } else {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::scope(|scope| {
                scope.spawn(move || {
                    builder.build_parallel().run(|| {
                        let tx = tx.clone();
                        let classify = classify.clone();
                        Box::new(move |result| {
                            if let Some(f) = classify(result) {
                                let _ = tx.send(f);
                            }
                            ignore::WalkState::Continue
                        })
                    });
                });
                rx.into_iter().for_each(&mut sort);
            });
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    out.skipped.extend(take_all(&refused));
    out.read_dirs = take_all(&read_dirs);
    out.pruned = take_all(&pruned);
    let mut starts = take_all(&beneath);
    starts.extend(root_handle.map(|dir| Beneath::List(Vec::new(), dir, root_entered)));
    if !starts.is_empty() {
        walk_beneath(root, root_dev, starts, &scope, skip, &mut out)?;
    }
    Ok(out)
}

/// A step of [`walk_beneath`].
pub(super) enum Beneath {
    /// Enter directory `rel` (in scope), below a parent the walk knows (or not).
    Enter(Vec<u8>, Option<Entered>),
    /// List directory `rel`, entered, held open.
    List(Vec<u8>, OwnedFd, Entered),
}

/// Walks the subtrees `starts` give through directory handles, as [`walk`]'s filter and
/// classifier would by path: for directories whose names may be longer than the system
/// takes from `/` (a tree holds paths of 4096 bytes from its root, and the root's own
/// path comes on top). Every directory is opened beneath the root with no symlink on the
/// way, every name judged by the same [`Scope`], every file `lstat`ed by its name in its
/// directory's handle. Depth first, one handle per directory at a time.
pub(super) fn walk_beneath(
    root: &Path,
    root_dev: u64,
    starts: Vec<Beneath>,
    scope: &Scope,
    skip: &HashSet<RepoPathBuf>,
    out: &mut Walk,
) -> Result<(), ScanError> {
    let handles = reach::Beneath::open(root).map_err(|source| ScanError::Io {
        path: root.to_owned(),
        source,
    })?;
    let io = |rel: &[u8]| {
        let path = handles.display(rel);
        move |source| ScanError::Io { path, source }
    };
    let mut stack = starts;
    while let Some(step) = stack.pop() {
        let (rel, dir, entered) = match step {
            Beneath::List(rel, dir, entered) => (rel, dir, entered),
            Beneath::Enter(rel, parent) => {
                // Entered only once in scope, every name checked: a repo path.
                if skip.contains(RepoPath::from_bytes_unchecked(&rel)) {
                    out.pruned.push(RepoPathBuf::from_bytes_unchecked(rel));
                    continue;
                }
                let dir = match handles.dir(&rel) {
                    Ok(dir) => File::from(dir),
                    // Gone, or a link swapped in since it was listed: not there to walk.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io(&rel)(e)),
                };
                let meta = dir.metadata().map_err(io(&rel))?;
                let dir = OwnedFd::from(dir);
                let abs = handles.display(&rel);
                let at = DirAt {
                    abs: &abs,
                    handle: Some(&dir),
                };
                match enter_dir(at, &rel, &meta, parent.as_ref(), root_dev) {
                    Ok(entering) => {
                        out.skipped.extend(entering.problem);
                        let path = RepoPathBuf::from_bytes_unchecked(rel.clone());
                        out.read_dirs.push((path, entering.stamp, entering.ignore));
                        (rel, dir, entering.entered)
                    }
                    Err(reason) => {
                        out.skipped.push(Skipped { path: rel, reason });
                        continue;
                    }
                }
            }
        };
        let rules = DirRules(entered.rules.clone());
        for (name, is_dir) in reach::list(&dir).map_err(io(&rel))? {
            let child = child_path(&rel, &name);
            match scope.name(&rules, &child, is_dir) {
                Verdict::Out => continue,
                Verdict::Skip(reason) => {
                    out.skipped.push(Skipped {
                        path: child,
                        reason,
                    });
                    continue;
                }
                Verdict::In => {}
            }
            if is_dir {
                stack.push(Beneath::Enter(child, Some(entered.clone())));
                continue;
            }
            let name = OsStr::from_bytes(&name);
            let meta = match reach::lstat_at(&dir, name) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(&child)(e)),
            };
            let pseudo = || {
                (reach::path_handle(&dir, name).ok())
                    .and_then(path_policy::pseudo_filesystem_of)
                    .is_some()
            };
            match leaf_found(scope, child, &meta, Some(entered.dev), pseudo) {
                Some(Found::File(w)) => out.files.push(w),
                Some(Found::Skip(s)) => out.skipped.push(s),
                Some(Found::Fail(e)) => return Err(e),
                None => {}
            }
        }
    }
    Ok(())
}
pub(super) fn take_all<T>(list: &Mutex<Vec<T>>) -> Vec<T> {
    list.lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default()
}

pub(super) fn walk_error(root: &Path, e: ignore::Error) -> Option<Found> {
    // A malformed pattern in an ignore file is reported by `ignore` as a partial error;
    // git ignores such lines too, so only log it.
    if let Some(io) = e.io_error() {
        if io.kind() == std::io::ErrorKind::NotFound {
            return None;
        }
        let path = error_path(&e).unwrap_or_else(|| root.to_path_buf());
        // Whatever the filter let through is short enough; should the system still find a
        // path too long, it is left out like the others, never the end of the capture.
        if io.raw_os_error() == Some(rustix::io::Errno::NAMETOOLONG.raw_os_error())
            && let Ok(rel) = path.strip_prefix(root)
        {
            return Some(Found::Skip(Skipped {
                path: rel.as_os_str().as_bytes().to_vec(),
                reason: SkipReason::PathTooLong,
            }));
        }
        let source = std::io::Error::new(io.kind(), io.to_string());
        return Some(Found::Fail(ScanError::Io { path, source }));
    }
    tracing::warn!("while walking {}: {e}", root.display());
    None
}

pub(super) fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}
