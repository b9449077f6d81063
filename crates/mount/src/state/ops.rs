//! Changes to a mount's tree: creating, linking, removing and renaming names, and changing
//! a file's mode, owner, times and content; each recorded in the layer's journal.

use super::*;

impl State {
    pub(super) fn insert(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        owner: Caller,
        kind: Kind,
    ) -> Res<Ino> {
        // Read from its base first (a replayed record may be the first to reach it): a name
        // put in before would be lost when it is.
        self.children(parent)?;
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
    fn new_name(&mut self, parent: Ino, name: &[u8]) -> Res<MountPath> {
        self.writable()?;
        Self::check_name(name)?;
        if self.child(parent, name)?.is_some() {
            return Err(Errno::EEXIST);
        }
        self.child_path(parent, name)
    }

    /// Makes `name` in `parent` for `caller`: once the name is free, `made` gives the
    /// record and the node for its path and final permission bits; the record is journaled,
    /// then who owns it (unless the mount's owner does), then the node goes in.
    fn make(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        caller: Caller,
        dir: bool,
        made: impl FnOnce(&mut State, MountPath, u16) -> Res<(Record, Kind)>,
    ) -> Res<Ino> {
        let path = self.new_name(parent, name)?;
        let (owner, perm) = self.made_by(parent, caller, perm, dir)?;
        let (record, kind) = made(self, path.clone(), perm)?;
        self.record(record)?;
        self.record_owner(path, owner)?;
        self.insert(parent, name, perm, owner, kind)
    }

    /// A new empty file.
    pub(crate) fn create(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        caller: Caller,
    ) -> Res<Ino> {
        self.make(parent, name, perm, caller, false, |state, path, perm| {
            let (n, _) = state.new_upper()?;
            let file = FileNode {
                content: Content::Upper { n, hashed: None },
                size: 0,
                version: 0,
            };
            let record = Record::File {
                path,
                upper: n,
                perm,
            };
            Ok((record, Kind::File(file)))
        })
    }

    pub(crate) fn mkdir(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u16,
        caller: Caller,
    ) -> Res<Ino> {
        self.make(parent, name, perm, caller, true, |_, path, perm| {
            let dir = Dir {
                children: Some(BTreeMap::new()),
                changed: true,
                ..Dir::of_base(None)
            };
            Ok((Record::Dir { path, perm }, Kind::Dir(dir)))
        })
    }

    pub(crate) fn symlink(
        &mut self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        caller: Caller,
    ) -> Res<Ino> {
        self.make(parent, name, 0o777, caller, false, |_, path, _| {
            let record = Record::Link {
                path,
                target: target.to_vec(),
            };
            Ok((record, Kind::Link(target.to_vec())))
        })
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
        let perm = (mode & 0o7777) as u16;
        self.make(parent, name, perm, caller, false, |_, path, perm| {
            let record = Record::Special {
                path,
                mode: format | u32::from(perm),
                rdev,
            };
            Ok((record, Kind::Special(SpecialNode { format, rdev })))
        })
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
    pub(super) fn drop_name(&mut self, parent: Ino, name: &[u8], ino: Ino) -> Res<()> {
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
            self.ensure_blob(blob)?;
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

    /// Brings blob `b` into the store from the lazy source if the store lacks it.
    pub(crate) fn ensure_blob(&self, b: cas::BlobId) -> Res<()> {
        let Some(lazy) = &self.lazy else {
            return Ok(());
        };
        if self.reader()?.has_blob(b).map_err(eio)? {
            return Ok(());
        }
        lazy.fetch_whole(b)
            .map_err(|e| eio(format_args!("blob {b}: {e}")))
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
}
