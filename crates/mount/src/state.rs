//! A mount's tree in memory: directories are read from the store when first looked at,
//! and every change is made here, in the layer's upper files and in its journal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::SystemTime;

use cas::{BlobId, EntryKind, Tree, TreeEntry, TreeId};
use fs_manager::Skipped;
use fuser::{Errno, FileAttr, FileType, INodeNo};

use crate::layer::{Layer, Record};

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
pub(crate) type Patterns = (Option<Arc<fs_manager::Patterns>>, Option<Skipped>);

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
pub type Readers = Arc<dyn Fn() -> Result<cas::Reader, String> + Send + Sync>;

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
    pub(crate) fn special(self) -> fs_manager::Special {
        match self.format {
            S_IFIFO => fs_manager::Special::Fifo,
            S_IFSOCK => fs_manager::Special::Socket,
            S_IFBLK => fs_manager::Special::BlockDevice,
            S_IFCHR => fs_manager::Special::CharacterDevice,
            _ => fs_manager::Special::Other,
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
    pub skipped: Vec<fs_manager::Skipped>,
    /// In scope by its parent's last verdict (a directory left out is not built, and what
    /// it reports does not count).
    pub in_scope: bool,
    /// Moved since `base` was built: its subtrees were captured under the rules of where it
    /// was, so they are judged again.
    pub moved: bool,
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
        }
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
    pub(crate) patterns: HashMap<(Vec<u8>, RulesKey), Patterns>,
    /// The stamp of the scope the directories' bases were last built under.
    pub(crate) scope_stamp: Option<u64>,
    /// Directories whose `skipped` is not empty.
    pub(crate) skipping: HashSet<Ino>,
    /// The mount point (pattern files name paths through it).
    pub(crate) root: std::path::PathBuf,
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
    /// The tree of `base` with the layer's `records` applied.
    pub(crate) fn new(
        root: std::path::PathBuf,
        layer: Layer,
        records: Vec<Record>,
        readers: Readers,
        base: Option<TreeId>,
        base_time: SystemTime,
        read_only: bool,
    ) -> Result<State, String> {
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
        };
        let base = match records.first() {
            Some(Record::Base { tree }) => *tree,
            _ => base,
        };
        let size = match base {
            Some(t) => (state.readers)()?
                .tree(t)
                .map_err(|e| format!("the tree it applies to: {e}"))?
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
                .map_err(|e| format!("writing its journal: {e}"))?;
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
            let compact = state
                .difference(base)
                .map_err(|e| format!("compacting its journal: {e:?}"))?;
            state
                .layer
                .rewrite(&compact)
                .map_err(|e| format!("compacting its journal: {e}"))?;
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
    pub(crate) fn path(&self, ino: Ino) -> Option<Vec<u8>> {
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
        Some(parts.join(&b'/'))
    }

    /// The path of `name` in directory `parent`, which must still be reachable.
    fn child_path(&self, parent: Ino, name: &[u8]) -> Res<Vec<u8>> {
        let mut p = self.path(parent).ok_or(Errno::ENOENT)?;
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        Ok(p)
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
        let mut dirs = vec![node.parent];
        dirs.extend(node.links.iter().map(|(dir, _)| *dir));
        for dir in dirs {
            self.changed(dir);
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
    fn record_owner(&mut self, path: Vec<u8>, owner: Caller) -> Res<()> {
        if owner == self.owner() {
            return Ok(());
        }
        self.record(Record::Owner {
            path,
            uid: owner.uid,
            gid: owner.gid,
        })
    }

    fn insert(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        owner: Caller,
        kind: Kind,
    ) -> Res<Ino> {
        let now = SystemTime::now();
        let ino = self.new_ino(Node {
            parent,
            name: name.to_vec(),
            links: Vec::new(),
            perm,
            uid: owner.uid,
            gid: owner.gid,
            atime: now,
            mtime: now,
            ctime: now,
            lookups: 0,
            kind,
        });
        if let Kind::Dir(d) = &mut self.node_mut(parent)?.kind
            && let Some(c) = &mut d.children
        {
            c.insert(name.to_vec(), ino);
        }
        self.touch(parent);
        Ok(ino)
    }

    fn new_upper(&mut self) -> Res<(u64, File)> {
        let n = self.next_upper;
        self.next_upper += 1;
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.layer.upper(n))
            .map_err(eio)?;
        Ok((n, file))
    }

    /// The path `name` in `parent` will have, once checked that nothing has that name.
    fn new_name(&mut self, parent: Ino, name: &[u8]) -> Res<Vec<u8>> {
        self.writable()?;
        Self::check_name(name)?;
        if self.child(parent, name)?.is_some() {
            return Err(Errno::EEXIST);
        }
        self.child_path(parent, name)
    }

    /// A new empty file.
    pub(crate) fn create(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        caller: Caller,
    ) -> Res<Ino> {
        let path = self.new_name(parent, name)?;
        let (owner, perm) = self.made_by(parent, caller, perm, false)?;
        let (n, _) = self.new_upper()?;
        self.record(Record::File {
            path: path.clone(),
            upper: n,
            perm,
        })?;
        self.record_owner(path, owner)?;
        self.insert(
            parent,
            name,
            perm,
            owner,
            Kind::File(FileNode {
                content: Content::Upper { n, hashed: None },
                size: 0,
                version: 0,
            }),
        )
    }

    pub(crate) fn mkdir(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        caller: Caller,
    ) -> Res<Ino> {
        let path = self.new_name(parent, name)?;
        let (owner, perm) = self.made_by(parent, caller, perm, true)?;
        self.record(Record::Dir {
            path: path.clone(),
            perm,
        })?;
        self.record_owner(path, owner)?;
        self.insert(
            parent,
            name,
            perm,
            owner,
            Kind::Dir(Dir {
                children: Some(BTreeMap::new()),
                changed: true,
                ..Dir::of_base(None)
            }),
        )
    }

    pub(crate) fn symlink(
        &mut self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        caller: Caller,
    ) -> Res<Ino> {
        let path = self.new_name(parent, name)?;
        let (owner, _) = self.made_by(parent, caller, 0o777, false)?;
        self.record(Record::Link {
            path: path.clone(),
            target: target.to_vec(),
        })?;
        self.record_owner(path, owner)?;
        self.insert(parent, name, 0o777, owner, Kind::Link(target.to_vec()))
    }

    /// A new FIFO, socket or device node (`mode`: its type and permission bits).
    pub(crate) fn mknod(
        &mut self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        caller: Caller,
    ) -> Res<Ino> {
        let format = mode & S_IFMT;
        if !matches!(format, S_IFIFO | S_IFSOCK | S_IFBLK | S_IFCHR) {
            return Err(Errno::EINVAL);
        }
        let path = self.new_name(parent, name)?;
        let (owner, perm) = self.made_by(parent, caller, (mode & 0o7777) as u16, false)?;
        self.record(Record::Special {
            path: path.clone(),
            mode: format | u32::from(perm),
            rdev,
        })?;
        self.record_owner(path, owner)?;
        self.insert(
            parent,
            name,
            perm,
            owner,
            Kind::Special(SpecialNode { format, rdev }),
        )
    }

    /// Another name, `name` in `parent`, for `ino` (not a directory).
    pub(crate) fn link(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Res<()> {
        let path = self.new_name(parent, name)?;
        let node = self.node(ino)?;
        if matches!(node.kind, Kind::Dir(_)) {
            return Err(Errno::EPERM);
        }
        // A file unlinked while open takes no name again, as on disk.
        let to = self.path(ino).ok_or(Errno::ENOENT)?;
        if !matches!(self.node(parent)?.kind, Kind::Dir(_)) {
            return Err(Errno::ENOTDIR);
        }
        self.record(Record::HardLink { path, to })?;
        if let Kind::Dir(d) = &mut self.node_mut(parent)?.kind
            && let Some(c) = &mut d.children
        {
            c.insert(name.to_vec(), ino);
        }
        let node = self.node_mut(ino)?;
        node.links.push((parent, name.to_vec()));
        node.ctime = SystemTime::now();
        self.touch(parent);
        Ok(())
    }

    /// Takes `ino` out of the tree; it goes (with its upper file) once the kernel holds
    /// it no more, so a process with the file open keeps reading it, as on disk.
    fn detach(&mut self, ino: Ino) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.parent = 0;
        if node.lookups == 0 {
            self.drop_node(ino);
        }
    }

    /// Takes the name `name` in `parent`, one of `ino`'s, out of the tree; the node goes
    /// once no name is left and the kernel holds it no more.
    fn drop_name(&mut self, parent: Ino, name: &[u8], ino: Ino) -> Res<()> {
        if let Kind::Dir(Dir {
            children: Some(c), ..
        }) = &mut self.node_mut(parent)?.kind
        {
            c.remove(name);
        }
        let node = self.node_mut(ino)?;
        node.ctime = SystemTime::now();
        if node.parent != parent || node.name != name {
            node.links.retain(|(p, n)| *p != parent || n != name);
        } else if node.links.is_empty() {
            self.detach(ino);
        } else {
            (node.parent, node.name) = node.links.remove(0);
        }
        Ok(())
    }

    pub(crate) fn unlink(&mut self, parent: Ino, name: &[u8], dir: bool) -> Res<()> {
        self.writable()?;
        let ino = self.child(parent, name)?.ok_or(Errno::ENOENT)?;
        let is_dir = matches!(self.node(ino)?.kind, Kind::Dir(_));
        if dir && !is_dir {
            return Err(Errno::ENOTDIR);
        }
        if !dir && is_dir {
            return Err(Errno::EISDIR);
        }
        if is_dir && !self.children(ino)?.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        let path = self.child_path(parent, name)?;
        self.record(Record::Remove { path })?;
        self.drop_name(parent, name, ino)?;
        self.touch(parent);
        Ok(())
    }

    pub(crate) fn rename(
        &mut self,
        parent: Ino,
        name: &[u8],
        to_parent: Ino,
        to_name: &[u8],
        no_replace: bool,
    ) -> Res<()> {
        self.writable()?;
        Self::check_name(to_name)?;
        let ino = self.child(parent, name)?.ok_or(Errno::ENOENT)?;
        if !matches!(self.node(to_parent)?.kind, Kind::Dir(_)) {
            return Err(Errno::ENOTDIR);
        }
        let moving_dir = matches!(self.node(ino)?.kind, Kind::Dir(_));
        // Not into itself.
        let mut at = to_parent;
        loop {
            if at == ino {
                return Err(Errno::EINVAL);
            }
            if at == ROOT || at == 0 {
                break;
            }
            at = self.node(at)?.parent;
        }
        if let Some(old) = self.child(to_parent, to_name)? {
            if old == ino {
                return Ok(());
            }
            if no_replace {
                return Err(Errno::EEXIST);
            }
            let old_dir = matches!(self.node(old)?.kind, Kind::Dir(_));
            match (moving_dir, old_dir) {
                (true, false) => return Err(Errno::ENOTDIR),
                (false, true) => return Err(Errno::EISDIR),
                (true, true) if !self.children(old)?.is_empty() => {
                    return Err(Errno::ENOTEMPTY);
                }
                _ => {}
            }
        }
        let from = self.child_path(parent, name)?;
        let to = self.child_path(to_parent, to_name)?;
        self.record(Record::Rename { from, to })?;
        if let Some(old) = self.child(to_parent, to_name)? {
            self.drop_name(to_parent, to_name, old)?;
        }
        if let Kind::Dir(Dir {
            children: Some(c), ..
        }) = &mut self.node_mut(parent)?.kind
        {
            c.remove(name);
        }
        if let Kind::Dir(Dir {
            children: Some(c), ..
        }) = &mut self.node_mut(to_parent)?.kind
        {
            c.insert(to_name.to_vec(), ino);
        }
        let node = self.node_mut(ino)?;
        let moved = (to_parent, to_name.to_vec());
        if node.parent == parent && node.name == name {
            (node.parent, node.name) = moved;
        } else if let Some(link) = node
            .links
            .iter_mut()
            .find(|(p, n)| *p == parent && n == name)
        {
            *link = moved;
        }
        node.ctime = SystemTime::now();
        if let Kind::Dir(d) = &mut node.kind {
            d.changed = true;
            d.moved = true;
        }
        self.touch(parent);
        self.touch(to_parent);
        Ok(())
    }

    pub(crate) fn set_perm(&mut self, ino: Ino, perm: u16) -> Res<()> {
        self.writable()?;
        if let Some(path) = self.path(ino) {
            self.record(Record::Perm { path, perm })?;
        }
        let node = self.node_mut(ino)?;
        node.perm = perm & 0o7777;
        node.ctime = SystemTime::now();
        self.changed_names(ino);
        Ok(())
    }

    /// A new owner and group (the kernel checked that the caller may: the mount has
    /// `default_permissions`; it also sends the mode with set-user/group-ID cleared).
    pub(crate) fn set_owner(&mut self, ino: Ino, uid: Option<u32>, gid: Option<u32>) -> Res<()> {
        self.writable()?;
        let node = self.node(ino)?;
        let (uid, gid) = (uid.unwrap_or(node.uid), gid.unwrap_or(node.gid));
        if let Some(path) = self.path(ino) {
            self.record(Record::Owner { path, uid, gid })?;
        }
        let node = self.node_mut(ino)?;
        (node.uid, node.gid) = (uid, gid);
        node.ctime = SystemTime::now();
        self.generation += 1;
        Ok(())
    }

    /// New access and modification times (`None`: as they are).
    pub(crate) fn set_times(
        &mut self,
        ino: Ino,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> Res<()> {
        self.writable()?;
        let node = self.node(ino)?;
        let (atime, mtime) = (atime.unwrap_or(node.atime), mtime.unwrap_or(node.mtime));
        if let Some(path) = self.path(ino) {
            self.record(Record::Times {
                path,
                atime: atime.into(),
                mtime: mtime.into(),
            })?;
        }
        let node = self.node_mut(ino)?;
        (node.atime, node.mtime) = (atime, mtime);
        node.ctime = SystemTime::now();
        Ok(())
    }

    /// The number of the file's upper file, made from its blob first if it has none
    /// (`empty`: nothing of the blob is wanted, as for a truncation to 0).
    pub(crate) fn upper_of(&mut self, ino: Ino, empty: bool) -> Res<u64> {
        self.writable()?;
        let blob = match &self.node(ino)?.kind {
            Kind::File(FileNode {
                content: Content::Upper { n, .. },
                ..
            }) => return Ok(*n),
            Kind::File(FileNode {
                content: Content::Base(b),
                ..
            }) => *b,
            Kind::Dir(_) => return Err(Errno::EISDIR),
            Kind::Link(_) | Kind::Special(_) => return Err(Errno::EINVAL),
        };
        let (n, mut file) = self.new_upper()?;
        if !empty {
            self.reader()?.write_blob_to(blob, &mut file).map_err(eio)?;
        }
        // An unlinked file's copy is its alone: no record names it, so re-attaching the
        // layer drops it as it drops the node.
        if let Some(path) = self.path(ino) {
            let perm = self.node(ino)?.perm;
            self.record(Record::File {
                path,
                upper: n,
                perm,
            })?;
        }
        let node = self.node_mut(ino)?;
        if let Kind::File(f) = &mut node.kind {
            f.content = Content::Upper { n, hashed: None };
            if empty {
                f.size = 0;
            }
        }
        self.changed_names(ino);
        Ok(n)
    }

    /// Where the bytes of file `ino` are now.
    pub(crate) fn source(&self, ino: Ino) -> Res<Source> {
        match &self.node(ino)?.kind {
            Kind::File(FileNode {
                content: Content::Base(b),
                ..
            }) => Ok(Source::Base(*b)),
            Kind::File(FileNode {
                content: Content::Upper { n, .. },
                ..
            }) => Ok(Source::Upper(*n)),
            Kind::Dir(_) => Err(Errno::EISDIR),
            Kind::Link(_) | Kind::Special(_) => Err(Errno::EINVAL),
        }
    }

    /// Opens readers of the store (to read outside the state's lock).
    pub(crate) fn readers(&self) -> Readers {
        self.readers.clone()
    }

    /// A write reached `end` (or the file was cut to `size`).
    pub(crate) fn wrote(&mut self, ino: Ino, end: u64, size: Option<u64>) {
        self.generation += 1;
        let now = SystemTime::now();
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.mtime = now;
        node.ctime = now;
        if let Kind::File(f) = &mut node.kind {
            f.size = size.unwrap_or(f.size.max(end));
            f.version += 1;
            if let Content::Upper { hashed, .. } = &mut f.content {
                *hashed = None;
            }
        }
        self.changed_names(ino);
    }

    pub(crate) fn truncate(&mut self, ino: Ino, size: u64) -> Res<()> {
        let n = self.upper_of(ino, size == 0)?;
        File::options()
            .write(true)
            .open(self.layer.upper(n))
            .and_then(|f| f.set_len(size))
            .map_err(eio)?;
        self.wrote(ino, size, Some(size));
        Ok(())
    }

    /// Applies a journal record (on attach).
    fn replay(&mut self, r: &Record) -> Res<()> {
        let (parent, name) = match r {
            Record::Base { .. } => return Ok(()),
            Record::File { path, .. }
            | Record::Dir { path, .. }
            | Record::Tree { path, .. }
            | Record::Blob { path, .. }
            | Record::Link { path, .. }
            | Record::Remove { path }
            | Record::Perm { path, .. }
            | Record::Special { path, .. }
            | Record::HardLink { path, .. }
            | Record::Owner { path, .. }
            | Record::Times { path, .. } => self.parent_of(path)?,
            Record::Rename { from, to } => {
                let (p, n) = self.parent_of(from)?;
                let (tp, tn) = self.parent_of(to)?;
                return self.rename(p, &n, tp, &tn, false);
            }
        };
        match r {
            Record::File { upper, perm, .. } => {
                let size = std::fs::metadata(self.layer.upper(*upper))
                    .map_err(eio)?
                    .len();
                let file = FileNode {
                    content: Content::Upper {
                        n: *upper,
                        hashed: None,
                    },
                    size,
                    version: 0,
                };
                match self.child(parent, &name)? {
                    Some(ino) => {
                        let node = self.node_mut(ino)?;
                        node.kind = Kind::File(file);
                        node.perm = *perm;
                        self.touch(parent);
                    }
                    None => {
                        let owner = self.owner();
                        self.insert(parent, &name, *perm, owner, Kind::File(file))?;
                    }
                }
                Ok(())
            }
            Record::Dir { perm, .. } => {
                let owner = self.owner();
                self.mkdir(parent, &name, *perm, owner).map(|_| ())
            }
            Record::Link { target, .. } => {
                let owner = self.owner();
                self.symlink(parent, &name, target, owner).map(|_| ())
            }
            Record::Special { mode, rdev, .. } => {
                let owner = self.owner();
                self.mknod(parent, &name, *mode, *rdev, owner).map(|_| ())
            }
            Record::HardLink { to, .. } => {
                let (to_parent, to_name) = self.parent_of(to)?;
                let ino = self.child(to_parent, &to_name)?.ok_or(Errno::ENOENT)?;
                self.link(ino, parent, &name)
            }
            Record::Owner { uid, gid, .. } => {
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.set_owner(ino, Some(*uid), Some(*gid))
            }
            Record::Times { atime, mtime, .. } => {
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.set_times(ino, Some((*atime).into()), Some((*mtime).into()))
            }
            Record::Tree {
                tree, size, perm, ..
            } => {
                let dir = Dir {
                    changed: true,
                    moved: true,
                    ..Dir::of_base(Some((*tree, *size)))
                };
                let owner = self.owner();
                self.insert(parent, &name, *perm, owner, Kind::Dir(dir))
                    .map(|_| ())
            }
            Record::Blob {
                blob, size, perm, ..
            } => {
                let file = FileNode {
                    content: Content::Base(*blob),
                    size: *size,
                    version: 0,
                };
                let owner = self.owner();
                self.insert(parent, &name, *perm, owner, Kind::File(file))
                    .map(|_| ())
            }
            Record::Remove { .. } => {
                // Whatever is there goes (a removal was checked when it was made).
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.drop_name(parent, &name, ino)?;
                self.touch(parent);
                Ok(())
            }
            Record::Perm { perm, .. } => {
                let ino = self.child(parent, &name)?.ok_or(Errno::ENOENT)?;
                self.set_perm(ino, *perm)
            }
            Record::Base { .. } | Record::Rename { .. } => Ok(()),
        }
    }

    /// Records that rebuild the tree as it is now from `base` (just after a replay, while
    /// every directory's base is still what it was loaded with).
    fn difference(&mut self, base: Option<TreeId>) -> Res<Vec<Record>> {
        let mut out = vec![Record::Base { tree: base }];
        let mut named = HashMap::new();
        self.difference_below(ROOT, Vec::new(), &mut out, &mut named)?;
        self.difference_of_metadata(ROOT, Vec::new(), &mut out);
        Ok(out)
    }

    /// The records that give the node at `path` its owner and times, where they are not
    /// what a node the snapshot has would get (after every name below a directory: making
    /// them sets its times).
    fn difference_of_metadata(&self, ino: Ino, path: Vec<u8>, out: &mut Vec<Record>) {
        let Some(node) = self.nodes.get(&ino) else {
            return;
        };
        if ino != ROOT && (node.uid, node.gid) != (self.uid, self.gid) {
            out.push(Record::Owner {
                path: path.clone(),
                uid: node.uid,
                gid: node.gid,
            });
        }
        if ino != ROOT && (node.atime != self.base_time || node.mtime != self.base_time) {
            out.push(Record::Times {
                path,
                atime: node.atime.into(),
                mtime: node.mtime.into(),
            });
        }
    }

    /// `named`: the first path written of each node met so far (its other names are hard
    /// links to it).
    fn difference_below(
        &mut self,
        dir: Ino,
        path: Vec<u8>,
        out: &mut Vec<Record>,
        named: &mut HashMap<Ino, Vec<u8>>,
    ) -> Res<()> {
        let (base, loaded) = match &self.node(dir)?.kind {
            Kind::Dir(d) => (d.base, d.children.is_some()),
            _ => return Ok(()),
        };
        if !loaded {
            return Ok(());
        }
        let base_entries: BTreeMap<Vec<u8>, TreeEntry> = match base {
            Some((t, _)) => self
                .reader()?
                .tree(t)
                .map_err(eio)?
                .entries()
                .iter()
                .map(|e| (e.name.clone(), e.clone()))
                .collect(),
            None => BTreeMap::new(),
        };
        let children: Vec<(Vec<u8>, Ino)> = self
            .children(dir)?
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let join = |name: &[u8]| {
            if path.is_empty() {
                name.to_vec()
            } else {
                [path.as_slice(), b"/", name].concat()
            }
        };
        for name in base_entries.keys() {
            if !children.iter().any(|(n, _)| n == name) {
                out.push(Record::Remove { path: join(name) });
            }
        }
        for (name, ino) in children {
            let at = join(&name);
            let be = base_entries.get(&name);
            if let Some(first) = named.get(&ino) {
                if be.is_some() {
                    out.push(Record::Remove { path: at.clone() });
                }
                out.push(Record::HardLink {
                    path: at,
                    to: first.clone(),
                });
                continue;
            }
            named.insert(ino, at.clone());
            let node = self.node(ino)?;
            let perm = node.perm;
            let default_perm = be.map(|e| perm_of(e.kind));
            // A record for what is there, unless the base has it; what differs from the
            // base's entry replaces it (the entry is removed first).
            let (record, same) = match &node.kind {
                Kind::Dir(d) => {
                    let same =
                        d.base.is_some() && be.and_then(TreeEntry::tree) == d.base.map(|(t, _)| t);
                    let record = match d.base {
                        Some((tree, size)) => Record::Tree {
                            path: at.clone(),
                            tree,
                            size,
                            perm,
                        },
                        None => Record::Dir {
                            path: at.clone(),
                            perm,
                        },
                    };
                    (record, same)
                }
                Kind::File(FileNode {
                    content: Content::Base(b),
                    size,
                    ..
                }) => {
                    let same = be.is_some_and(|e| {
                        matches!(e.kind, EntryKind::File | EntryKind::Executable)
                            && e.blob() == Some(*b)
                    });
                    let record = Record::Blob {
                        path: at.clone(),
                        blob: *b,
                        size: *size,
                        perm,
                    };
                    (record, same)
                }
                Kind::File(FileNode {
                    content: Content::Upper { n, .. },
                    ..
                }) => {
                    let record = Record::File {
                        path: at.clone(),
                        upper: *n,
                        perm,
                    };
                    (record, false)
                }
                Kind::Link(target) => {
                    let same = be.is_some_and(|e| {
                        e.kind == EntryKind::Symlink && e.blob() == Some(BlobId::of(target))
                    });
                    let record = Record::Link {
                        path: at.clone(),
                        target: target.clone(),
                    };
                    (record, same)
                }
                Kind::Special(s) => {
                    let record = Record::Special {
                        path: at.clone(),
                        mode: s.format | u32::from(perm),
                        rdev: s.rdev,
                    };
                    (record, false)
                }
            };
            let is_dir = matches!(node.kind, Kind::Dir(_));
            let is_link = matches!(node.kind, Kind::Link(_));
            if !same {
                if be.is_some() {
                    out.push(Record::Remove { path: at.clone() });
                }
                out.push(record);
            } else if !is_link && Some(perm) != default_perm {
                out.push(Record::Perm {
                    path: at.clone(),
                    perm,
                });
            }
            if is_dir {
                self.difference_below(ino, at.clone(), out, named)?;
            }
            self.difference_of_metadata(ino, at, out);
        }
        Ok(())
    }

    fn parent_of(&mut self, path: &[u8]) -> Res<(Ino, Vec<u8>)> {
        let mut parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let name = parts.pop().ok_or(Errno::EINVAL)?.to_vec();
        let mut at = ROOT;
        for p in parts {
            at = self.child(at, p)?.ok_or(Errno::ENOENT)?;
        }
        Ok((at, name))
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
