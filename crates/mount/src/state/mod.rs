//! A mount's tree in memory: directories are read from the store when first looked at,
//! and every change is made here, in the layer's upper files and in its journal.
//!
//! This module holds the node model (inodes, directories, files, their attributes and
//! lookups); [`ops`] the changes a file system call makes; [`replay`] the journal on attach
//! (replaying it, and writing the tree again as its difference from the base).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::SystemTime;

use cas::{BlobId, EntryKind, Tree, TreeEntry, TreeId};
use fuser::{Errno, FileAttr, FileType, INodeNo};
use worktree_scope::Skipped;

use crate::layer::{Layer, Record};
use crate::path::MountPath;

mod ops;
mod replay;

/// What a directory's pattern rules were read from: each pattern file there, by where it
/// sits, with its content's id (`None`: something else stands there). A different key means
/// different rules, and every verdict below the directory is taken again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct RulesKey(pub Vec<(&'static str, Option<BlobId>)>);

impl RulesKey {
    /// The key of a snapshot directory: what the capture that stored it read (a tree holds
    /// no `.git`).
    pub(crate) fn of_base(tree: &Tree) -> RulesKey {
        let mut key = Vec::new();
        for name in [".gitignore", ".ignore"] {
            if let Some(e) = tree.entries().iter().find(|e| e.name == name.as_bytes()) {
                let blob = match e.kind {
                    EntryKind::File | EntryKind::Executable => e.blob(),
                    _ => None,
                };
                key.push((name, blob));
            }
        }
        RulesKey(key)
    }
}

/// A directory's own patterns as read, and the exclude file it could not read.
pub(crate) type Patterns = (Option<Arc<worktree_scope::Patterns>>, Option<Skipped>);

/// A directory a capture built.
pub(crate) struct Built {
    pub ino: Ino,
    pub tree: Option<(TreeId, u64)>,
    pub rules: RulesKey,
}

/// What a capture built, to keep once the store holds it ([`State::settle`]).
pub(crate) struct Unsettled {
    pub generation: u64,
    pub dirs: Vec<Built>,
    pub scope_stamp: u64,
}

/// An inode number.
pub(crate) type Ino = u64;
/// The root's.
pub(crate) const ROOT: Ino = 1;

/// Opens a reader of the store (verified reads) for as long as one call needs it.
pub type Readers = Arc<dyn Fn() -> Result<cas::Reader, cas::StorageFailure> + Send + Sync>;

/// Why a [`Lazy`] source could not bring an object: its message names the object, where it
/// was to come from and why.
pub type LazyError = Box<dyn std::error::Error + Send + Sync>;

/// Where a mount reads the blobs its store lacks (a snapshot only a remote holds, its
/// blobs promised), given at mount time: each is fetched when first read, checked, and
/// stored, so the mount then reads it from the store as any other. This crate knows no
/// remotes; the engine gives one.
pub trait Lazy: Send + Sync {
    /// How blob `id`, which the store lacks, is cut into chunks (itself alone if it is at
    /// most a chunk).
    fn cut(&self, id: BlobId) -> Result<cas::BlobChunks, LazyError>;
    /// Brings `chunk` (a blob of at most a chunk, or a piece of a larger one) into the
    /// store. A read of its blob is under way: a source may read ahead.
    fn fetch(&self, chunk: cas::Chunk) -> Result<(), LazyError>;
    /// Brings blob `id` into the store whole (to copy it up, or read it at once).
    fn fetch_whole(&self, id: BlobId) -> Result<(), LazyError>;
}

/// Why a mount's tree could not be set up from its base and its layer's journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The store could not be read.
    #[error(transparent)]
    Storage(#[from] cas::StorageFailure),
    /// The tree the journal applies to could not be read.
    #[error("the tree it applies to: {0}")]
    BaseTree(#[source] cas::ReadError),
    /// The journal of a new layer could not be written.
    #[error("writing its journal: {0}")]
    Journal(#[source] std::io::Error),
    /// The replayed journal's difference from its base could not be taken.
    #[error("compacting its journal: {0:?}")]
    Difference(Errno),
    /// The compacted journal could not be written.
    #[error("compacting its journal: {0}")]
    Compact(#[source] std::io::Error),
}

pub(crate) type Res<T> = Result<T, Errno>;

pub(crate) struct Node {
    /// 0 once unlinked (every name of it).
    pub parent: Ino,
    pub name: Vec<u8>,
    /// Its other names (hard links): a directory and a name in it each.
    pub links: Vec<(Ino, Vec<u8>)>,
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    /// Lookups the kernel holds.
    pub lookups: u64,
    pub kind: Kind,
}

pub(crate) enum Kind {
    Dir(Dir),
    File(FileNode),
    Link(Vec<u8>),
    /// A FIFO, socket or device: a directory on disk keeps it, a tree cannot (a capture
    /// reports it, as a capture on disk does).
    Special(SpecialNode),
}

/// A FIFO, socket or device node.
#[derive(Clone, Copy)]
pub(crate) struct SpecialNode {
    /// Its `S_IFMT` bits.
    pub format: u32,
    pub rdev: u32,
}

impl SpecialNode {
    pub(crate) fn file_type(self) -> FileType {
        match self.format {
            S_IFIFO => FileType::NamedPipe,
            S_IFSOCK => FileType::Socket,
            S_IFBLK => FileType::BlockDevice,
            _ => FileType::CharDevice,
        }
    }

    /// What a capture calls it.
    pub(crate) fn special(self) -> worktree_scope::Special {
        match self.format {
            S_IFIFO => worktree_scope::Special::Fifo,
            S_IFSOCK => worktree_scope::Special::Socket,
            S_IFBLK => worktree_scope::Special::BlockDevice,
            S_IFCHR => worktree_scope::Special::CharacterDevice,
            _ => worktree_scope::Special::Other,
        }
    }
}

pub(crate) const S_IFMT: u32 = 0o170000;
pub(crate) const S_IFREG: u32 = 0o100000;
const S_IFIFO: u32 = 0o010000;
const S_IFSOCK: u32 = 0o140000;
const S_IFBLK: u32 = 0o060000;
const S_IFCHR: u32 = 0o020000;
/// Set on a directory: what is made in it takes its group (and a directory, this bit).
const S_ISGID: u16 = 0o2000;

/// Who asks for a new node: it is theirs (its group is the directory's where that has
/// [`S_ISGID`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub uid: u32,
    pub gid: u32,
}

pub(crate) struct Dir {
    /// The snapshot's tree here, if the snapshot has this directory (and its size).
    pub base: Option<(TreeId, u64)>,
    /// Read from `base` on first use.
    pub children: Option<BTreeMap<Vec<u8>, Ino>>,
    /// Something at or below it differs from `base`.
    pub changed: bool,
    /// What its pattern rules were read from when `base` was built: what its subtrees were
    /// captured under.
    pub rules: RulesKey,
    /// Names here the last capture that built it left out and reported, with why.
    pub skipped: Vec<worktree_scope::Skipped>,
    /// In scope by its parent's last verdict (a directory left out is not built, and what
    /// it reports does not count).
    pub in_scope: bool,
    /// Moved since `base` was built: its subtrees were captured under the rules of where it
    /// was, so they are judged again.
    pub moved: bool,
    /// A graft's top: shown here, never this worktree's (a capture leaves it out, with
    /// whatever was written under it), wherever it is moved.
    pub graft: bool,
}

impl Dir {
    /// A directory of the snapshot (or none: a new one), read from `base` on first use.
    pub(crate) fn of_base(base: Option<(TreeId, u64)>) -> Dir {
        Dir {
            base,
            children: None,
            changed: false,
            rules: RulesKey::default(),
            skipped: Vec::new(),
            in_scope: true,
            moved: false,
            graft: false,
        }
    }
}

/// A tree shown read-only at a path under a mount (a dependency layer, say): read from the
/// store as the snapshot's files are, written to the mount's own layer only (so another
/// mount of the same tree never sees it), never captured. Where the snapshot itself has
/// that name, the snapshot's entry is shown instead; directories above it the snapshot
/// lacks are shown empty but for it (and are not captured unless something is written in
/// them); where something else than a directory stands above it, it is not shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graft {
    /// Where, from the mount's root: plain names, at least one.
    pub path: camino::Utf8PathBuf,
    /// The tree shown there.
    pub tree: TreeId,
}

/// What the grafts show in one directory.
#[derive(Debug, Default)]
pub(crate) struct GraftsHere {
    /// Grafts: name and tree.
    pub grafts: Vec<(Vec<u8>, TreeId)>,
    /// Directories above grafts deeper down, shown if the base lacks them.
    pub dirs: Vec<Vec<u8>>,
}

/// The grafts of a mount, by the path of the directory they show in.
#[derive(Debug, Default)]
pub(crate) struct Grafts(HashMap<MountPath, GraftsHere>);

impl Grafts {
    /// The grafts, each path checked (`Err`: the first that is not plain names).
    pub(crate) fn new(grafts: &[Graft]) -> Result<Grafts, camino::Utf8PathBuf> {
        let mut by_dir: HashMap<MountPath, GraftsHere> = HashMap::new();
        for g in grafts {
            let mut names = Vec::new();
            for c in g.path.components() {
                match c {
                    camino::Utf8Component::Normal(name) => names.push(name.as_bytes()),
                    _ => return Err(g.path.clone()),
                }
            }
            let Some(name) = names.pop() else {
                return Err(g.path.clone());
            };
            let mut at = MountPath::root();
            for dir in names {
                let here = by_dir.entry(at.clone()).or_default();
                if !here.dirs.iter().any(|d| d == dir) {
                    here.dirs.push(dir.to_vec());
                }
                at = at.child(dir);
            }
            let here = by_dir.entry(at).or_default();
            // The first of two grafts at one path is shown.
            if !here.grafts.iter().any(|(n, _)| n == name) {
                here.grafts.push((name.to_vec(), g.tree));
            }
        }
        Ok(Grafts(by_dir))
    }

    /// What the grafts show in the directory at `path`.
    pub(crate) fn at(&self, path: &MountPath) -> Option<&GraftsHere> {
        self.0.get(path)
    }
}

pub(crate) struct FileNode {
    pub content: Content,
    pub size: u64,
    /// Counts writes, so a hash taken outside the state's lock is kept only if no write
    /// came since.
    pub version: u64,
}

pub(crate) enum Content {
    /// The snapshot's blob.
    Base(BlobId),
    /// Upper file `n`; its blob once hashed and unwritten since.
    Upper { n: u64, hashed: Option<BlobId> },
}

/// Where a file's bytes are now.
pub(crate) enum Source {
    /// A blob of the store.
    Base(BlobId),
    /// Upper file `n` of the layer.
    Upper(u64),
}

pub(crate) struct State {
    pub nodes: HashMap<Ino, Node>,
    next_ino: Ino,
    next_upper: u64,
    pub layer: Layer,
    readers: Readers,
    base_time: SystemTime,
    pub read_only: bool,
    /// Replaying the journal: records are not written again.
    replaying: bool,
    pub uid: u32,
    pub gid: u32,
    /// Counts changes, so a capture's result is kept only if nothing changed since.
    pub(crate) generation: u64,
    /// What the last capture built, kept once the store has it ([`State::settle`]).
    pub(crate) built: Option<Unsettled>,
    /// Pattern files read, by directory and what they were read from.
    pub(crate) patterns: HashMap<(MountPath, RulesKey), Patterns>,
    /// The stamp of the scope the directories' bases were last built under.
    pub(crate) scope_stamp: Option<u64>,
    /// Directories whose `skipped` is not empty.
    pub(crate) skipping: HashSet<Ino>,
    /// The mount point (pattern files name paths through it).
    pub(crate) root: std::path::PathBuf,
    /// Where blobs the store lacks come from, if anywhere.
    pub(crate) lazy: Option<Arc<dyn Lazy>>,
    /// Trees shown read-only under the tree, each in its directory when that is first read.
    grafts: Grafts,
}

fn eio(e: impl std::fmt::Display) -> Errno {
    tracing::warn!("mount: {e}");
    Errno::EIO
}

fn perm_of(kind: EntryKind) -> u16 {
    match kind {
        EntryKind::Executable => 0o755,
        EntryKind::Tree => 0o755,
        EntryKind::Symlink => 0o777,
        EntryKind::File => 0o644,
    }
}

impl State {
    /// The tree of `base` (with `grafts` shown in it) with the layer's `records` applied.
    pub(crate) fn new(
        root: std::path::PathBuf,
        layer: Layer,
        records: Vec<Record>,
        readers: Readers,
        (base, grafts): (Option<TreeId>, Grafts),
        base_time: SystemTime,
        read_only: bool,
    ) -> Result<State, StateError> {
        let mut state = State {
            nodes: HashMap::new(),
            next_ino: ROOT + 1,
            next_upper: 1,
            layer,
            readers,
            base_time,
            read_only,
            replaying: true,
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            generation: 0,
            built: None,
            patterns: HashMap::new(),
            scope_stamp: None,
            skipping: HashSet::new(),
            root,
            lazy: None,
            grafts,
        };
        let base = match records.first() {
            Some(Record::Base { tree }) => *tree,
            _ => base,
        };
        let size = match base {
            Some(t) => (state.readers)()?
                .tree(t)
                .map_err(StateError::BaseTree)?
                .size(),
            None => 0,
        };
        state.nodes.insert(
            ROOT,
            Node {
                parent: ROOT,
                name: Vec::new(),
                links: Vec::new(),
                perm: 0o755,
                uid: state.uid,
                gid: state.gid,
                atime: base_time,
                mtime: base_time,
                ctime: base_time,
                lookups: 1,
                kind: Kind::Dir(Dir::of_base(base.map(|t| (t, size)))),
            },
        );
        if records.is_empty() {
            state
                .layer
                .rewrite(&[Record::Base { tree: base }])
                .map_err(StateError::Journal)?;
        }
        for r in records.iter().skip(1) {
            if let Record::File { upper, .. } = r {
                state.next_upper = state.next_upper.max(upper + 1);
            }
            // A record that no longer applies (its upper file lost, say) is skipped.
            if let Err(e) = state.replay(r) {
                tracing::warn!("mount journal: {r:?} not applied: {e:?}");
            }
        }
        if records.len() > 1 {
            // The journal again, as the difference from its base alone.
            let compact = state.difference(base).map_err(StateError::Difference)?;
            state.layer.rewrite(&compact).map_err(StateError::Compact)?;
        }
        // Upper files of no file now (removed while a process held them open, or written
        // by a crash before their record) go.
        let named: HashSet<u64> = state
            .nodes
            .values()
            .filter_map(|n| match &n.kind {
                Kind::File(FileNode {
                    content: Content::Upper { n, .. },
                    ..
                }) => Some(*n),
                _ => None,
            })
            .collect();
        state.layer.remove_unnamed(&named);
        state.replaying = false;
        Ok(state)
    }

    fn reader(&self) -> Res<cas::Reader> {
        (self.readers)().map_err(eio)
    }

    fn record(&mut self, r: Record) -> Res<()> {
        if self.replaying {
            return Ok(());
        }
        self.layer.append(&r).map_err(eio)
    }

    /// Changes may be made: not in a read-only mount, but always while its journal is
    /// replayed (a layer attached read-only still has every change it holds).
    fn writable(&self) -> Res<()> {
        if self.read_only && !self.replaying {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }

    pub(crate) fn node(&self, ino: Ino) -> Res<&Node> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: Ino) -> Res<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    /// The path of `ino` from the root; `None` if it, or a directory above it, was
    /// unlinked: such a node is never reachable by path again, so nothing done to it is
    /// journaled under a path (a process holding it open writes to its upper file alone,
    /// which goes with the node).
    pub(crate) fn path(&self, ino: Ino) -> Option<MountPath> {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let n = self.nodes.get(&at)?;
            if n.parent == 0 {
                return None;
            }
            parts.push(n.name.as_slice());
            at = n.parent;
        }
        parts.reverse();
        Some(MountPath::from(parts.join(&b'/')))
    }

    /// The path of `name` in directory `parent`, which must still be reachable.
    fn child_path(&self, parent: Ino, name: &[u8]) -> Res<MountPath> {
        Ok(self.path(parent).ok_or(Errno::ENOENT)?.child(name))
    }

    fn new_ino(&mut self, node: Node) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, node);
        ino
    }

    /// The children of directory `dir`, read from its base the first time.
    pub(crate) fn children(&mut self, dir: Ino) -> Res<&BTreeMap<Vec<u8>, Ino>> {
        let base = match &self.node(dir)?.kind {
            Kind::Dir(d) if d.children.is_some() => None,
            Kind::Dir(d) => Some(d.base),
            _ => return Err(Errno::ENOTDIR),
        };
        if let Some(base) = base {
            let mut children = BTreeMap::new();
            if let Some((tree, _)) = base {
                let reader = self.reader()?;
                let tree = reader.tree(tree).map_err(eio)?;
                for e in tree.entries() {
                    let kind = match e.kind {
                        EntryKind::Tree => Kind::Dir(Dir::of_base(Some((e.id.as_tree(), e.size)))),
                        EntryKind::Symlink => Kind::Link(reader.blob(e.id.as_blob()).map_err(eio)?),
                        EntryKind::File | EntryKind::Executable => Kind::File(FileNode {
                            content: Content::Base(e.id.as_blob()),
                            size: e.size,
                            version: 0,
                        }),
                    };
                    let ino = self.new_ino(Node {
                        parent: dir,
                        name: e.name.clone(),
                        links: Vec::new(),
                        perm: perm_of(e.kind),
                        uid: self.uid,
                        gid: self.gid,
                        atime: self.base_time,
                        mtime: self.base_time,
                        ctime: self.base_time,
                        lookups: 0,
                        kind,
                    });
                    children.insert(e.name.clone(), ino);
                }
            }
            self.graft_into(dir, &mut children);
            let rules = match base {
                Some((tree, _)) => RulesKey::of_base(&self.reader()?.tree(tree).map_err(eio)?),
                None => RulesKey::default(),
            };
            if let Kind::Dir(d) = &mut self.node_mut(dir)?.kind {
                d.children = Some(children);
                d.rules = rules;
            }
        }
        match &self.node(dir)?.kind {
            Kind::Dir(Dir {
                children: Some(c), ..
            }) => Ok(c),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// Shows in `dir`, whose `children` were just read from its base, the grafts of its
    /// path the base does not hold, then the directories above deeper ones it lacks. A
    /// graft's tree is read for its size; one the store cannot read is shown all the same,
    /// and its listing fails (the log says why).
    fn graft_into(&mut self, dir: Ino, children: &mut BTreeMap<Vec<u8>, Ino>) {
        if self.grafts.0.is_empty() {
            return;
        }
        let Some(here) = self.path(dir).and_then(|p| self.grafts.at(&p)) else {
            return;
        };
        let grafts: Vec<(Vec<u8>, TreeId)> = (here.grafts.iter())
            .filter(|(name, _)| !children.contains_key(name))
            .cloned()
            .collect();
        let dirs = here.dirs.clone();
        for (name, tree) in grafts {
            let size = match self.reader().and_then(|r| r.tree(tree).map_err(eio)) {
                Ok(t) => t.size(),
                Err(_) => 0,
            };
            let kind = Kind::Dir(Dir {
                graft: true,
                ..Dir::of_base(Some((tree, size)))
            });
            let ino = self.new_ino(self.base_node(dir, &name, kind));
            children.insert(name, ino);
        }
        for name in dirs {
            if let std::collections::btree_map::Entry::Vacant(v) = children.entry(name) {
                let node = self.base_node(dir, v.key(), Kind::Dir(Dir::of_base(None)));
                v.insert(self.new_ino(node));
            }
        }
    }

    /// A node as the base shows it, `name` in `parent`.
    fn base_node(&self, parent: Ino, name: &[u8], kind: Kind) -> Node {
        Node {
            parent,
            name: name.to_vec(),
            links: Vec::new(),
            perm: perm_of(EntryKind::Tree),
            uid: self.uid,
            gid: self.gid,
            atime: self.base_time,
            mtime: self.base_time,
            ctime: self.base_time,
            lookups: 0,
            kind,
        }
    }

    /// `parent`/`name`, if there is one; a name longer than any here is `ENAMETOOLONG`, as
    /// on disk (the kernel passes names up to 1,024 bytes).
    fn child(&mut self, parent: Ino, name: &[u8]) -> Res<Option<Ino>> {
        Self::check_name(name)?;
        Ok(self.children(parent)?.get(name).copied())
    }

    /// `parent`/`name`, counted as a lookup the kernel holds.
    pub(crate) fn lookup(&mut self, parent: Ino, name: &[u8]) -> Res<Ino> {
        let ino = self.child(parent, name)?.ok_or(Errno::ENOENT)?;
        self.node_mut(ino)?.lookups += 1;
        Ok(ino)
    }

    /// The kernel dropped `n` lookups of `ino`; an unlinked node nobody holds goes, with
    /// its upper file (whose number is returned).
    pub(crate) fn forget(&mut self, ino: Ino, n: u64) -> Option<u64> {
        let node = self.nodes.get_mut(&ino)?;
        node.lookups = node.lookups.saturating_sub(n);
        if node.parent == 0 && node.lookups == 0 {
            return self.drop_node(ino);
        }
        None
    }

    /// Removes an unlinked node and its upper file.
    fn drop_node(&mut self, ino: Ino) -> Option<u64> {
        let node = self.nodes.remove(&ino)?;
        self.skipping.remove(&ino);
        match node.kind {
            Kind::File(FileNode {
                content: Content::Upper { n, .. },
                ..
            }) => {
                let _ = std::fs::remove_file(self.layer.upper(n));
                Some(n)
            }
            _ => None,
        }
    }

    /// Its attributes; a directory's link count counts its subdirectories, so its children
    /// are read (once: a lookup or listing that follows, as one usually does, reuses them).
    pub(crate) fn attr(&mut self, ino: Ino) -> Res<FileAttr> {
        let subdirs = match self.node(ino)?.kind {
            Kind::Dir(_) => self.subdirs(ino)?,
            _ => 0,
        };
        let n = self.node(ino)?;
        // An unlinked node still open has no name left: no link.
        let names = if n.parent == 0 {
            0
        } else {
            1 + n.links.len() as u32
        };
        let (kind, size, nlink, rdev) = match &n.kind {
            // Its own `.`, its name, and each subdirectory's `..`.
            Kind::Dir(_) => (FileType::Directory, 4096, 2 + subdirs, 0),
            Kind::File(f) => (FileType::RegularFile, f.size, names, 0),
            Kind::Link(t) => (FileType::Symlink, t.len() as u64, names, 0),
            Kind::Special(s) => (s.file_type(), 0, names, s.rdev),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
            crtime: n.ctime,
            kind,
            perm: n.perm,
            nlink,
            uid: n.uid,
            gid: n.gid,
            rdev,
            blksize: 4096,
            flags: 0,
        })
    }

    /// How many directories `dir` holds.
    fn subdirs(&mut self, dir: Ino) -> Res<u32> {
        let children: Vec<Ino> = self.children(dir)?.values().copied().collect();
        let count = children
            .iter()
            .filter(|i| matches!(self.nodes.get(i).map(|n| &n.kind), Some(Kind::Dir(_))))
            .count();
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    /// Marks every directory holding a name of `ino` changed: a change to the file (its
    /// bytes, its mode) changes what each of them holds, not their times.
    fn changed_names(&mut self, ino: Ino) {
        let Some(node) = self.nodes.get(&ino) else {
            return;
        };
        if node.parent == 0 {
            return;
        }
        let (first, others) = (node.parent, node.links.len());
        self.changed(first);
        // Every write comes here: no list is made for the common file with one name.
        for i in 0..others {
            if let Some(&(dir, _)) = self.nodes.get(&ino).and_then(|n| n.links.get(i)) {
                self.changed(dir);
            }
        }
    }

    /// Marks `dir` changed, with its times (a name in it was made, removed or moved).
    fn touch(&mut self, dir: Ino) {
        let now = SystemTime::now();
        if let Some(n) = self.nodes.get_mut(&dir) {
            n.mtime = now;
            n.ctime = now;
        }
        self.changed(dir);
    }

    /// Marks `dir` and everything above it changed.
    fn changed(&mut self, dir: Ino) {
        self.generation += 1;
        let mut at = dir;
        loop {
            let Some(n) = self.nodes.get_mut(&at) else {
                return;
            };
            if let Kind::Dir(d) = &mut n.kind {
                d.changed = true;
            }
            if at == ROOT || n.parent == 0 {
                return;
            }
            at = n.parent;
        }
    }

    /// Any name a directory on disk takes (the kernel refused `/`, NUL, `.` and `..`); what
    /// a tree cannot hold (`.GIT`, say) stays out of captures and is reported, as on disk.
    fn check_name(name: &[u8]) -> Res<()> {
        if name.len() > cas::MAX_NAME_LEN {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(())
    }

    /// Whoever owns the mount: what the snapshot's nodes belong to, and what the journal
    /// replays as.
    pub(crate) fn owner(&self) -> Caller {
        Caller {
            uid: self.uid,
            gid: self.gid,
        }
    }

    /// The owner and permission bits of a node `caller` makes in `parent`: a directory with
    /// [`S_ISGID`] gives it its group (and a new directory, the bit).
    fn made_by(&self, parent: Ino, caller: Caller, perm: u16, dir: bool) -> Res<(Caller, u16)> {
        let p = self.node(parent)?;
        if p.perm & S_ISGID == 0 {
            return Ok((caller, perm));
        }
        let owner = Caller {
            uid: caller.uid,
            gid: p.gid,
        };
        Ok((owner, if dir { perm | S_ISGID } else { perm }))
    }

    /// Journals who owns the node just made at `path`, unless the mount's owner does.
    fn record_owner(&mut self, path: MountPath, owner: Caller) -> Res<()> {
        if owner == self.owner() {
            return Ok(());
        }
        self.record(Record::Owner {
            path,
            uid: owner.uid,
            gid: owner.gid,
        })
    }

    /// Reads `len` bytes at `offset` of an upper file (for a handle).
    pub(crate) fn read_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        let mut done = 0;
        while done < len {
            match file.read_at(&mut buf[done..], offset + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        buf.truncate(done);
        Ok(buf)
    }
}
