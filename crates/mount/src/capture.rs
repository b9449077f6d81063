//! A mount's capture: the directories changed since the last one are built again, every
//! name judged by the worktree's [`worktree_scope::Scope`], the very rules a capture on disk
//! applies (deny list, pattern files, `.git`, the store's folder, names no tree holds, the
//! size cap), with pattern files read from the mount's own tree. What it leaves out and
//! reports stays with each directory, so an unchanged one still reports it.
//!
//! The state's lock is held while building, so nothing large is read under it: a file over
//! [`SMALL_FILE`] bytes, and a pattern file outside the mount (a linked worktree's git
//! directory, say), are read in a second round with the lock let go (a file of the mount
//! read through its own mount point would wait for that lock), and kept only if no write
//! came in between.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use camino::Utf8PathBuf;
use cas::{BlobId, EntryKind, PreparedBlob, Tree, TreeEntry, TreeId};
use fuser::Errno;
use path_policy::{MAX_RULES_FILE, RulesFile, RulesRefusal};
use worktree_scope::{
    DirRules, Leaf, MountCapture, RulesPresent, RulesSource, Scope, ScopeSettings, Skipped, Verdict,
};

use crate::path::MountPath;
use crate::state::{
    Built, Content, FileNode, Ino, Kind, Patterns, ROOT, RulesKey, State, Unsettled,
};

/// Why a mount could not say what its tree holds; each names the path it failed on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountCaptureError {
    /// An upper file (a file written in the mount) could not be read.
    #[error("{path}: {source}")]
    Upper {
        /// The upper file, in the layer.
        path: Utf8PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An upper file went while the capture read it.
    #[error("{path}: gone while captured")]
    Gone {
        /// The upper file, in the layer.
        path: Utf8PathBuf,
    },
    /// A node of the mount's tree could not be looked at (the tree path, and the errno).
    #[error("{path}: {errno:?}")]
    Node {
        /// Its path in the tree.
        path: String,
        /// What the tree answered.
        errno: Errno,
    },
    /// A directory of the mount's tree could not be listed.
    #[error("reading {path}: {errno:?}")]
    Listing {
        /// Its path in the tree.
        path: String,
        /// What the tree answered.
        errno: Errno,
    },
    /// A directory marked changed is no longer in the tree.
    #[error("a directory no longer in the tree")]
    DirGone,
    /// A node built as a file is not one.
    #[error("not a file")]
    NotAFile,
    /// A directory's entries make no tree.
    #[error("{path}: {source}")]
    Tree {
        /// The directory's path in the tree.
        path: String,
        /// What the tree rules refuse.
        #[source]
        source: cas::ObjectError,
    },
    /// The rounds allowed ended before the capture did.
    #[error("a capture that did not finish in its last round")]
    Unfinished,
    /// The worktree's deny list could not be read.
    #[error(transparent)]
    Deny(#[from] path_policy::DenyError),
    /// A blob of a lazily mounted snapshot could not be fetched (the log says why).
    #[error("blob {blob}: could not be fetched from its remote (the mount's log says why)")]
    Lazy {
        /// The blob.
        blob: cas::BlobId,
    },
    /// Reading the store failed.
    #[error(transparent)]
    Read(#[from] cas::ReadError),
    /// Storing a file's content failed.
    #[error(transparent)]
    Write(#[from] cas::WriteError),
    /// The store's database failed.
    #[error(transparent)]
    Storage(#[from] cas::StorageFailure),
}

/// Files up to this size are read and hashed under the state's lock; larger ones outside it.
pub(crate) const SMALL_FILE: u64 = cas::CHUNK_BYTES as u64;

/// Links followed in one path before it counts as a loop (as Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// What a round could not read under the state's lock.
#[derive(Default)]
pub(crate) struct Wanted {
    /// Pattern files outside the mount: path, and whether a link there is followed.
    external: Vec<(PathBuf, bool)>,
    /// Large files: upper file number, the file's version, where the upper file is.
    files: Vec<(u64, u64, Utf8PathBuf)>,
}

impl Wanted {
    fn is_empty(&self) -> bool {
        self.external.is_empty() && self.files.is_empty()
    }
}

/// What earlier rounds read with the lock let go.
#[derive(Default)]
pub(crate) struct Fetched {
    /// Shared: each read of a failed one hands out its error again.
    external: HashMap<(PathBuf, bool), Result<RulesFile, std::sync::Arc<std::io::Error>>>,
    /// By upper file: the version read, its blob and size.
    files: HashMap<u64, (u64, BlobId, u64)>,
}

impl Fetched {
    /// Reads what `wanted` names (no lock held): pattern files from disk; large files
    /// hashed, and stored unless `dry_run`, a chunk at a time.
    pub(crate) fn fetch(
        &mut self,
        store: &cas::Store,
        wanted: Wanted,
        dry_run: bool,
    ) -> Result<(), MountCaptureError> {
        for (path, follow) in wanted.external {
            let read = path_policy::read_rules_file(&path, follow).map_err(std::sync::Arc::new);
            self.external.insert((path, follow), read);
        }
        for (n, version, path) in wanted.files {
            match hash_file(store, &path, dry_run) {
                Ok(Some((blob, size))) => {
                    self.files.insert(n, (version, blob, size));
                }
                // Gone with its file meanwhile.
                Ok(None) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The blob of the upper file at `path` and its size, read a chunk at a time (and stored,
/// unless `dry_run`); `None` if it is gone.
fn hash_file(
    store: &cas::Store,
    path: &camino::Utf8Path,
    dry_run: bool,
) -> Result<Option<(BlobId, u64)>, MountCaptureError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MountCaptureError::Upper {
                path: path.to_owned(),
                source,
            });
        }
    };
    Ok(Some(store.blob_of_stream(file, path.as_str(), !dry_run)?))
}

/// What a capture found of one directory: what it leaves out, and which of its child
/// directories are in scope.
type Judged = (Ino, Vec<Skipped>, Vec<(Ino, bool)>);

/// The outcome of one round of a capture.
pub(crate) enum Round {
    /// The tree as it is now.
    Done(MountCapture),
    /// Read these with the lock let go, then go again.
    Again(Wanted),
}

/// What one round works with.
struct Ctx<'a> {
    scope: &'a Scope,
    reader: &'a cas::Reader,
    store: &'a cas::Store,
    batch: &'a mut cas::WriteBatch,
    out: MountCapture,
    built: Vec<Built>,
    /// Each directory built: what it leaves out and reports, and its children's verdicts
    /// (kept only from the round that finishes: an earlier one may have judged by rules it
    /// could not read yet).
    verdicts: Vec<Judged>,
    fetched: &'a Fetched,
    wanted: Wanted,
    /// The last round: everything is read now, under the lock.
    last: bool,
    dry_run: bool,
}

/// Where a path in the tree leads.
enum Resolved {
    Node(Ino),
    Missing,
    /// Out of the mount, at this path.
    Outside(PathBuf),
}

/// Pattern files read from a mount's own tree; those outside it from what an earlier round
/// fetched, or else asked for.
struct TreeSource<'a> {
    state: std::cell::RefCell<&'a mut State>,
    fetched: &'a Fetched,
    wanted: std::cell::RefCell<&'a mut Wanted>,
}

impl RulesSource for TreeSource<'_> {
    fn read(&self, path: &Path, follow: bool) -> std::io::Result<RulesFile> {
        let mut state = self.state.borrow_mut();
        match state.resolve(path, follow) {
            Ok(Resolved::Node(ino)) => state.rules_file(ino),
            Ok(Resolved::Missing) => Ok(RulesFile::Missing),
            Ok(Resolved::Outside(at)) => match self.fetched.external.get(&(at.clone(), follow)) {
                Some(Ok(file)) => Ok(file.clone()),
                Some(Err(e)) => Err(std::io::Error::new(e.kind(), std::sync::Arc::clone(e))),
                None => {
                    self.wanted.borrow_mut().external.push((at, follow));
                    Ok(RulesFile::Missing)
                }
            },
            Err(e) => Err(std::io::Error::from_raw_os_error(e.code())),
        }
    }
}

fn split(path: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    path.split(|&b| b == b'/').map(<[u8]>::to_vec)
}

impl State {
    /// Where the absolute `path` leads (links followed as the kernel follows them: always
    /// before the last component, at the last only if `follow`).
    fn resolve(&mut self, path: &Path, follow: bool) -> Result<Resolved, Errno> {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return Ok(Resolved::Outside(path.to_owned()));
        };
        let mut todo: std::collections::VecDeque<Vec<u8>> =
            split(rel.as_os_str().as_bytes()).collect();
        let mut at = ROOT;
        let mut links = 0;
        while let Some(part) = todo.pop_front() {
            match part.as_slice() {
                b"" | b"." => continue,
                b".." if at == ROOT => {
                    let mut out = self.root.parent().unwrap_or(&self.root).to_owned();
                    for p in todo {
                        out.push(OsStr::from_bytes(&p));
                    }
                    return Ok(Resolved::Outside(out));
                }
                b".." => {
                    at = self.node(at)?.parent;
                    if at == 0 {
                        return Ok(Resolved::Missing);
                    }
                    continue;
                }
                _ => {}
            }
            let child = match self.children(at) {
                Ok(c) => c.get(&part).copied(),
                Err(e) if e.code() == Errno::ENOTDIR.code() => None,
                Err(e) => return Err(e),
            };
            let Some(child) = child else {
                return Ok(Resolved::Missing);
            };
            if let Kind::Link(target) = &self.node(child)?.kind
                && (follow || !todo.is_empty())
            {
                links += 1;
                if links > MAX_LINKS {
                    return Err(Errno::ELOOP);
                }
                let target = target.clone();
                let mut parts: Vec<Vec<u8>> = if target.starts_with(b"/") {
                    let target = Path::new(OsStr::from_bytes(&target));
                    match target.strip_prefix(&self.root) {
                        Ok(inside) => {
                            at = ROOT;
                            split(inside.as_os_str().as_bytes()).collect()
                        }
                        Err(_) => {
                            let mut out = target.to_owned();
                            for p in todo {
                                out.push(OsStr::from_bytes(&p));
                            }
                            return Ok(Resolved::Outside(out));
                        }
                    }
                } else {
                    split(&target).collect()
                };
                parts.extend(todo);
                todo = parts.into();
                continue;
            }
            at = child;
        }
        Ok(Resolved::Node(at))
    }

    /// The pattern file `ino`, as [`path_policy::read_rules_file`] reads one.
    fn rules_file(&self, ino: Ino) -> std::io::Result<RulesFile> {
        let refused = |kind| Ok(RulesFile::Refused(RulesRefusal::NotRegular(kind)));
        match &self
            .node(ino)
            .map_err(|e| std::io::Error::from_raw_os_error(e.code()))?
            .kind
        {
            Kind::Dir(_) => refused("directory"),
            Kind::Link(_) => refused("symlink"),
            Kind::Special(s) => refused(s.special().name()),
            Kind::File(f) if f.size > MAX_RULES_FILE => {
                Ok(RulesFile::Refused(RulesRefusal::TooLarge(f.size)))
            }
            Kind::File(f) => {
                let bytes = self
                    .small_content(f, MAX_RULES_FILE)
                    .map_err(std::io::Error::other)?;
                match bytes {
                    Some(bytes) => Ok(RulesFile::Read(bytes)),
                    None => Ok(RulesFile::Refused(RulesRefusal::TooLarge(f.size))),
                }
            }
        }
    }

    /// The bytes of file `f` if it holds at most `limit` (else `None`).
    fn small_content(
        &self,
        f: &FileNode,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, MountCaptureError> {
        match f.content {
            Content::Base(b) => {
                // A pattern file of a lazily mounted snapshot, not read yet.
                if self.ensure_blob(b).is_err() {
                    return Err(MountCaptureError::Lazy { blob: b });
                }
                let reader = (self.readers())()?;
                if reader.blob_size(b)? > limit {
                    return Ok(None);
                }
                Ok(Some(reader.blob(b)?))
            }
            Content::Upper { n, .. } => {
                let bytes = read_upper(self.layer.upper(n), limit)?;
                Ok((bytes.len() as u64 <= limit).then_some(bytes))
            }
        }
    }

    /// The id of the pattern file `ino` (`None`: not a regular file of at most
    /// [`MAX_RULES_FILE`] bytes), hashing an upper file if need be.
    fn rules_id(&mut self, ino: Ino) -> Result<Option<BlobId>, MountCaptureError> {
        let content = match &self.nodes[&ino].kind {
            Kind::File(f) if f.size <= MAX_RULES_FILE => match f.content {
                Content::Base(b) => return Ok(Some(b)),
                Content::Upper {
                    hashed: Some(b), ..
                } => return Ok(Some(b)),
                Content::Upper { .. } => self.small_content(f, MAX_RULES_FILE)?,
            },
            _ => return Ok(None),
        };
        Ok(content.map(|c| BlobId::of(&c)))
    }

    /// What the rules of directory `dir` (at `path`) are read from, which pattern files it
    /// holds, and whether the key tells every input (not so for files outside the mount).
    fn rules_key(
        &mut self,
        dir: Ino,
        path: &MountPath,
    ) -> Result<(RulesKey, RulesPresent, bool), MountCaptureError> {
        let mut key = Vec::new();
        let mut present = RulesPresent::default();
        let mut complete = true;
        let fail = |errno| MountCaptureError::Node {
            path: path.shown(),
            errno,
        };
        for name in [".gitignore", ".ignore"] {
            if let Some(ino) = self
                .children(dir)
                .map_err(fail)?
                .get(name.as_bytes())
                .copied()
            {
                key.push((name, self.rules_id(ino)?));
                match name {
                    ".ignore" => present.ignore = true,
                    _ => present.gitignore = true,
                }
            }
        }
        let abs = self.root.join(OsStr::from_bytes(path.as_bytes()));
        match self.resolve(&abs.join(".git/info/exclude"), true) {
            Ok(Resolved::Node(ino)) => {
                present.exclude = true;
                key.push((".git/info/exclude", self.rules_id(ino)?));
            }
            Ok(Resolved::Outside(_)) => {
                present.exclude = true;
                complete = false;
                key.push((".git/info/exclude", None));
            }
            Ok(Resolved::Missing) | Err(_) => {}
        }
        // A `.git` that is a file names a git directory elsewhere (a linked worktree's).
        if !present.exclude
            && let Ok(Resolved::Node(ino)) = self.resolve(&abs.join(".git"), true)
            && !matches!(self.nodes[&ino].kind, Kind::Dir(_))
        {
            present.git_file = true;
            complete = false;
            key.push((".git", self.rules_id(ino)?));
        }
        Ok((RulesKey(key), present, complete))
    }
}

impl State {
    /// One round of a capture: the tree as it is now (blobs the store lacks into `batch`,
    /// which starts empty), or what to read with the lock let go first. In the `last`
    /// round everything is read here.
    pub(crate) fn capture(
        &mut self,
        store: &cas::Store,
        batch: &mut cas::WriteBatch,
        settings: &ScopeSettings,
        (fetched, last, dry_run): (&Fetched, bool, bool),
    ) -> Result<Round, MountCaptureError> {
        let mut wanted = Wanted::default();
        let scope = {
            let source = TreeSource {
                state: std::cell::RefCell::new(self),
                fetched,
                wanted: std::cell::RefCell::new(&mut wanted),
            };
            settings.scope(&source)?
        };
        let reader = store.reader()?;
        let mut ctx = Ctx {
            scope: &scope,
            reader: &reader,
            store,
            batch,
            out: MountCapture {
                tree: Tree::default().id(),
                trees: HashMap::new(),
                files: 0,
                bytes: 0,
                read_files: 0,
                skipped: Vec::new(),
                token: 0,
            },
            built: Vec::new(),
            verdicts: Vec::new(),
            fetched,
            wanted,
            last,
            dry_run,
        };
        // Rules from outside the tree changed: every verdict is taken again.
        let force = self.scope_stamp != Some(scope.stamp());
        let root = self.build(ROOT, &DirRules::default(), force, &mut ctx)?;
        if !ctx.wanted.is_empty() && !last {
            return Ok(Round::Again(ctx.wanted));
        }
        for (dir, skipped, children) in std::mem::take(&mut ctx.verdicts) {
            self.judged(dir, skipped, children);
        }
        let mut out = ctx.out;
        if let Some((tree, size)) = root {
            out.tree = tree;
            out.bytes = size;
        }
        out.skipped = self.skipped();
        out.token = self.generation;
        self.built = Some(Unsettled {
            generation: self.generation,
            dirs: ctx.built,
            scope_stamp: scope.stamp(),
        });
        Ok(Round::Done(out))
    }

    /// Keeps what a capture found of directory `dir`: what it leaves out, and which of its
    /// child directories are in scope.
    fn judged(&mut self, dir: Ino, skipped: Vec<Skipped>, children: Vec<(Ino, bool)>) {
        for (child, in_scope) in children {
            if let Some(crate::state::Node {
                kind: Kind::Dir(d), ..
            }) = self.nodes.get_mut(&child)
            {
                d.in_scope = in_scope;
            }
        }
        if skipped.is_empty() {
            self.skipping.remove(&dir);
        } else {
            self.skipping.insert(dir);
        }
        if let Some(crate::state::Node {
            kind: Kind::Dir(d), ..
        }) = self.nodes.get_mut(&dir)
        {
            d.skipped = skipped;
        }
    }

    /// What the directories in scope leave out, in path order.
    fn skipped(&self) -> Vec<Skipped> {
        let mut all: Vec<Skipped> = self
            .skipping
            .iter()
            .filter(|ino| self.in_scope(**ino))
            .filter_map(|ino| match &self.nodes.get(ino)?.kind {
                Kind::Dir(d) => Some(d.skipped.iter().cloned()),
                _ => None,
            })
            .flatten()
            .collect();
        all.sort_by(|a, b| a.path.cmp(&b.path));
        all
    }

    /// Whether directory `ino` and every one above it are in scope (and still there).
    fn in_scope(&self, mut ino: Ino) -> bool {
        while ino != ROOT {
            match self.nodes.get(&ino) {
                Some(n) if n.parent != 0 => {
                    if let Kind::Dir(d) = &n.kind
                        && !d.in_scope
                    {
                        return false;
                    }
                    ino = n.parent;
                }
                _ => return false,
            }
        }
        true
    }

    /// The store now holds what the capture with `token` built: its directories become
    /// their own bases, so the next capture rebuilds only what changes after it (unless
    /// something changed in between).
    pub(crate) fn settle(&mut self, token: u64) {
        let Some(built) = self.built.take() else {
            return;
        };
        if built.generation != token || self.generation != token {
            return;
        }
        for b in built.dirs {
            if let Some(crate::state::Node {
                kind: Kind::Dir(d), ..
            }) = self.nodes.get_mut(&b.ino)
            {
                d.base = b.tree;
                d.changed = false;
                d.moved = false;
                d.rules = b.rules;
            }
        }
        self.scope_stamp = Some(built.scope_stamp);
    }

    /// The own patterns of directory `dir` at `path` whose rules are read from `key`.
    fn own_patterns(
        &mut self,
        path: &MountPath,
        (key, present, complete): (&RulesKey, RulesPresent, bool),
        ctx: &mut Ctx<'_>,
    ) -> Patterns {
        let cache_key = (path.clone(), key.clone());
        if complete && let Some(p) = self.patterns.get(&cache_key) {
            return p.clone();
        }
        let abs = self.root.join(OsStr::from_bytes(path.as_bytes()));
        let read = {
            let source = TreeSource {
                state: std::cell::RefCell::new(self),
                fetched: ctx.fetched,
                wanted: std::cell::RefCell::new(&mut ctx.wanted),
            };
            worktree_scope::read_patterns(&source, &abs, path.as_bytes(), present)
        };
        if complete {
            self.patterns.insert(cache_key, read.clone());
        }
        read
    }

    /// Builds directory `dir` (under `rules`, the rules above it) if it changed or `force`;
    /// its tree, `None` if nothing in it is in scope.
    fn build(
        &mut self,
        dir: Ino,
        rules: &DirRules,
        force: bool,
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<(TreeId, u64)>, MountCaptureError> {
        let (base, changed, moved, recorded) = match &self.nodes[&dir].kind {
            Kind::Dir(d) => (d.base, d.changed, d.moved, d.rules.clone()),
            _ => return Ok(None),
        };
        // A base the store no longer holds (a tree a capture settled here, collected by gc
        // once no snapshot reached it) is built again, with everything below it.
        let stored = |tree: Option<(TreeId, u64)>| {
            tree.is_none_or(|(t, _)| ctx.reader.has_tree(t).unwrap_or(false))
        };
        let gone = !stored(base);
        if !changed && !force && !gone {
            return Ok(base);
        }
        let force = force || gone;
        let dir_path = self.path(dir).ok_or(MountCaptureError::DirGone)?;
        let shown = || dir_path.shown();
        let children: Vec<(Vec<u8>, Ino)> = self
            .children(dir)
            .map_err(|errno| MountCaptureError::Listing {
                path: shown(),
                errno,
            })?
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let (key, present, complete) = self.rules_key(dir, &dir_path)?;
        // Its subtrees were built under other rules: every verdict below is taken again.
        let rules_changed = force || moved || recorded != key;
        let (own, problem) = self.own_patterns(&dir_path, (&key, present, complete), ctx);
        let rules = rules.child(own);
        let mut skipped: Vec<Skipped> = problem.into_iter().collect();
        let mut judged = Vec::new();
        let mut entries = Vec::new();
        for (name, ino) in children {
            // A graft is never this worktree's, nor what was written under it; its path is
            // out of scope too (the scope's rule), but a moved one is left out here.
            if let Kind::Dir(d) = &self.nodes[&ino].kind
                && d.graft
            {
                judged.push((ino, false));
                continue;
            }
            let path = dir_path.join(&name);
            let is_dir = matches!(self.nodes[&ino].kind, Kind::Dir(_));
            let verdict = ctx.scope.name(&rules, path.as_bytes(), is_dir);
            if is_dir {
                judged.push((ino, verdict == Verdict::In));
            }
            match verdict {
                Verdict::In => {}
                Verdict::Out => continue,
                Verdict::Skip(reason) => {
                    skipped.push(Skipped {
                        path: path.into_bytes(),
                        reason,
                    });
                    continue;
                }
            }
            let perm = self.nodes[&ino].perm;
            let leaf = match &self.nodes[&ino].kind {
                Kind::Dir(_) => None,
                Kind::Link(_) => Some(Leaf::Symlink),
                Kind::File(f) => Some(Leaf::File(f.size)),
                Kind::Special(s) => Some(Leaf::Special(s.special())),
            };
            if let Some(reason) = leaf.and_then(|leaf| ctx.scope.leaf(path.as_bytes(), leaf)) {
                skipped.push(Skipped {
                    path: path.into_bytes(),
                    reason,
                });
                continue;
            }
            let entry = match &self.nodes[&ino].kind {
                // Reported above: the scope refuses every one.
                Kind::Special(_) => continue,
                Kind::Dir(_) => match self.build(ino, &rules, rules_changed, ctx)? {
                    Some((id, size)) => TreeEntry {
                        name,
                        kind: EntryKind::Tree,
                        id: id.into(),
                        size,
                    },
                    None => continue,
                },
                Kind::Link(target) => {
                    let (id, prepared) = PreparedBlob::new_unless(target, |id| {
                        ctx.reader.has_blob(id).unwrap_or(false)
                    });
                    if let Some(p) = prepared {
                        ctx.batch.add_blob(p);
                    }
                    ctx.out.files += 1;
                    TreeEntry {
                        name,
                        kind: EntryKind::Symlink,
                        id: id.into(),
                        size: target.len() as u64,
                    }
                }
                Kind::File(_) => {
                    let kind = if perm & 0o100 != 0 {
                        EntryKind::Executable
                    } else {
                        EntryKind::File
                    };
                    let (blob, size) = self.file_blob(ino, ctx)?;
                    ctx.out.files += 1;
                    TreeEntry {
                        name,
                        kind,
                        id: blob.into(),
                        size,
                    }
                }
            };
            entries.push(entry);
        }
        ctx.verdicts.push((dir, skipped, judged));
        if entries.is_empty() {
            ctx.built.push(Built {
                ino: dir,
                tree: None,
                rules: key,
            });
            return Ok(None);
        }
        let tree = Tree::new(entries).map_err(|source| MountCaptureError::Tree {
            path: shown(),
            source,
        })?;
        let (id, size) = (tree.id(), tree.size());
        if base.map(|(b, _)| b) != Some(id) || gone {
            ctx.out.trees.insert(id, tree);
        }
        ctx.built.push(Built {
            ino: dir,
            tree: Some((id, size)),
            rules: key,
        });
        Ok(Some((id, size)))
    }

    /// The blob and size of file `ino` now: its snapshot blob, the hash of its upper file
    /// kept since (if the store has it, or nothing is stored), or the upper file read: here
    /// if small or in the last round, else asked for (with a stand-in id).
    fn file_blob(
        &mut self,
        ino: Ino,
        ctx: &mut Ctx<'_>,
    ) -> Result<(BlobId, u64), MountCaptureError> {
        let Kind::File(f) = &self.nodes[&ino].kind else {
            return Err(MountCaptureError::NotAFile);
        };
        let (n, hashed, size, version) = match f.content {
            Content::Base(b) => return Ok((b, f.size)),
            Content::Upper { n, hashed } => (n, hashed, f.size, f.version),
        };
        // A blob hashed by a capture that stored nothing (a status) is hashed again.
        if let Some(b) = hashed
            && (ctx.dry_run || ctx.reader.has_blob(b).unwrap_or(false))
        {
            return Ok((b, size));
        }
        let found = match ctx.fetched.files.get(&n) {
            Some(&(v, blob, size)) if v == version => Some((blob, size)),
            _ => None,
        };
        let read = match found {
            Some(found) => Some(found),
            None if size <= SMALL_FILE => self.small_blob(n, ctx)?,
            None => None,
        };
        let read = match read {
            Some(read) => Some(read),
            None => self.large_blob(n, version, ctx)?,
        };
        let Some((blob, size)) = read else {
            // Read in the next round: a stand-in, as this round's tree is not kept.
            return Ok((BlobId::of(b""), 0));
        };
        ctx.out.read_files += 1;
        if let Some(crate::state::Node {
            kind: Kind::File(f),
            ..
        }) = self.nodes.get_mut(&ino)
        {
            f.content = Content::Upper {
                n,
                hashed: Some(blob),
            };
            f.size = size;
        }
        Ok((blob, size))
    }

    /// A small upper file's blob, read here (`None` if it has grown past [`SMALL_FILE`]).
    fn small_blob(
        &mut self,
        n: u64,
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<(BlobId, u64)>, MountCaptureError> {
        let content = read_upper(self.layer.upper(n), SMALL_FILE)?;
        if content.len() as u64 > SMALL_FILE {
            return Ok(None);
        }
        let (id, prepared) =
            PreparedBlob::new_unless(&content, |id| ctx.reader.has_blob(id).unwrap_or(false));
        if let Some(p) = prepared {
            ctx.batch.add_blob(p);
        }
        Ok(Some((id, content.len() as u64)))
    }

    /// A large upper file's blob, read a chunk at a time in the last round; else asked for
    /// (`None`).
    fn large_blob(
        &mut self,
        n: u64,
        version: u64,
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<(BlobId, u64)>, MountCaptureError> {
        let path = self.layer.upper(n);
        if !ctx.last {
            ctx.wanted.files.push((n, version, path));
            return Ok(None);
        }
        match hash_file(ctx.store, &path, ctx.dry_run)? {
            Some(found) => Ok(Some(found)),
            None => Err(MountCaptureError::Gone { path }),
        }
    }
}

/// Up to `limit + 1` bytes of the upper file at `path` (one more than `limit` says it is
/// larger).
fn read_upper(path: Utf8PathBuf, limit: u64) -> Result<Vec<u8>, MountCaptureError> {
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .and_then(|file| file.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|source| MountCaptureError::Upper { path, source })?;
    Ok(bytes)
}
