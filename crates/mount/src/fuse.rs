//! The FUSE face of a mount's [`State`]: each request takes the state's lock only for its
//! bookkeeping; file data is read and written outside it, through the handle.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::state::{Ino, Kind, Opened, State};

/// How long the kernel may keep names and attributes: everything that changes them goes
/// through the kernel, which updates its caches itself.
const TTL: Duration = Duration::from_secs(24 * 60 * 60);

struct Handle {
    ino: Ino,
    opened: Opened,
}

pub(crate) struct Fs {
    pub(crate) state: Arc<Mutex<State>>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
}

impl Fs {
    pub(crate) fn new(state: Arc<Mutex<State>>) -> Fs {
        Fs {
            state,
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn handles(&self) -> MutexGuard<'_, HashMap<u64, Handle>> {
        self.handles.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add_handle(&self, ino: Ino, opened: Opened) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles().insert(fh, Handle { ino, opened });
        fh
    }

    fn upper_handle(&self, fh: FileHandle) -> Result<(Ino, Arc<File>), Errno> {
        match self.handles().get(&fh.0) {
            Some(Handle {
                ino,
                opened: Opened::Upper(f),
            }) => Ok((*ino, f.clone())),
            Some(_) => Err(Errno::EBADF),
            None => Err(Errno::EBADF),
        }
    }

    /// The bytes of blob `b`, verified, shared with the handles holding them.
    fn load(&self, b: cas::BlobId) -> Result<Arc<Vec<u8>>, Errno> {
        let readers = {
            let state = self.state();
            if let Some(bytes) = state.cached_blob(b) {
                return Ok(bytes);
            }
            state.readers()
        };
        let bytes = readers()
            .and_then(|r| r.blob(b).map_err(|e| e.to_string()))
            .map(Arc::new)
            .map_err(|e| {
                tracing::warn!("mount: blob {b}: {e}");
                Errno::EIO
            })?;
        self.state().remember_blob(b, &bytes);
        Ok(bytes)
    }

    fn entry(&self, reply: ReplyEntry, made: Result<Ino, Errno>, state: &mut State) {
        match made.and_then(|ino| {
            if let Some(n) = state.nodes.get_mut(&ino)
                && n.lookups == 0
            {
                // Made by this call: the kernel's reference starts now.
                n.lookups = 1;
            }
            state.attr(ino)
        }) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }
}

fn mode_perm(mode: u32, umask: u32) -> u16 {
    ((mode & !umask) & 0o7777) as u16
}

fn io(e: std::io::Error) -> Errno {
    Errno::from(e)
}

impl Filesystem for Fs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut state = self.state();
        match state
            .lookup(parent.0, name.as_bytes())
            .and_then(|ino| state.attr(ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.state().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().attr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = (|| {
            let mut state = self.state();
            if uid.is_some_and(|u| u != state.uid) || gid.is_some_and(|g| g != state.gid) {
                return Err(Errno::EPERM);
            }
            if let Some(mode) = mode {
                state.set_perm(ino.0, (mode & 0o7777) as u16)?;
            }
            if let Some(size) = size {
                // Through the caller's handle when it gave one: its upper file is the file.
                match fh.map(|fh| self.upper_handle(fh)) {
                    Some(Ok((_, file))) => {
                        file.set_len(size).map_err(io)?;
                        state.wrote(ino.0, size, Some(size));
                    }
                    _ => state.truncate(ino.0, size)?,
                }
            }
            let _ = atime;
            if let Some(t) = mtime {
                let t = match t {
                    TimeOrNow::SpecificTime(t) => t,
                    TimeOrNow::Now => SystemTime::now(),
                };
                state.set_mtime(ino.0, t)?;
            }
            state.attr(ino.0)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let state = self.state();
        match state.node(ino.0).map(|n| &n.kind) {
            Ok(Kind::Link(target)) => reply.data(target),
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files only: a tree holds no devices, FIFOs or sockets.
        if mode & libc_s_ifmt() != libc_s_ifreg() {
            reply.error(Errno::EPERM);
            return;
        }
        let mut state = self.state();
        let made = state.create(parent.0, name.as_bytes(), mode_perm(mode, umask));
        self.entry(reply, made, &mut state);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.state();
        let made = state.mkdir(parent.0, name.as_bytes(), mode_perm(mode, umask));
        self.entry(reply, made, &mut state);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.state().unlink(parent.0, name.as_bytes(), false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.state().unlink(parent.0, name.as_bytes(), true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut state = self.state();
        let made = state.symlink(
            parent.0,
            link_name.as_bytes(),
            target.as_os_str().as_bytes(),
        );
        self.entry(reply, made, &mut state);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            reply.error(Errno::EINVAL);
            return;
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        match self.state().rename(
            parent.0,
            name.as_bytes(),
            newparent.0,
            newname.as_bytes(),
            no_replace,
        ) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        // A tree has no hard links.
        reply.error(Errno::EPERM);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let truncate = flags.0 & libc_o_trunc() != 0;
        let opened = self.state().open(ino.0, write, truncate);
        match opened {
            Ok(opened) => {
                let fh = self.add_handle(ino.0, opened);
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE);
            }
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.state();
        let made = state
            .create(parent.0, name.as_bytes(), mode_perm(mode, umask))
            .and_then(|ino| state.open(ino, true, false).map(|o| (ino, o)));
        match made {
            Ok((ino, opened)) => {
                if let Some(n) = state.nodes.get_mut(&ino) {
                    n.lookups = 1;
                }
                match state.attr(ino) {
                    Ok(attr) => {
                        drop(state);
                        let fh = self.add_handle(ino, opened);
                        reply.created(
                            &TTL,
                            &attr,
                            Generation(0),
                            FileHandle(fh),
                            FopenFlags::empty(),
                        );
                    }
                    Err(e) => reply.error(e),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let opened = match self.handles().get(&fh.0) {
            Some(Handle {
                opened: Opened::Base(b),
                ..
            }) => Opened::Base(*b),
            Some(Handle {
                opened: Opened::Blob(b),
                ..
            }) => Opened::Blob(b.clone()),
            Some(Handle {
                opened: Opened::Upper(f),
                ..
            }) => Opened::Upper(f.clone()),
            None => {
                reply.error(Errno::EBADF);
                return;
            }
        };
        // A file written through another handle since this one opened it reads as it is
        // now, as on disk.
        let opened = match opened {
            Opened::Upper(f) => Opened::Upper(f),
            stale => match self.state().content_now(ino.0) {
                Ok(Opened::Base(b)) => match stale {
                    Opened::Blob(bytes) => Opened::Blob(bytes),
                    _ => Opened::Base(b),
                },
                Ok(now) => {
                    if let (Opened::Upper(f), Some(h)) = (&now, self.handles().get_mut(&fh.0)) {
                        h.opened = Opened::Upper(f.clone());
                    }
                    now
                }
                Err(e) => {
                    reply.error(e);
                    return;
                }
            },
        };
        let opened = match opened {
            // First read through this handle: the blob, read outside the state's lock.
            Opened::Base(b) => match self.load(b) {
                Ok(bytes) => {
                    if let Some(h) = self.handles().get_mut(&fh.0) {
                        h.opened = Opened::Blob(bytes.clone());
                    }
                    Opened::Blob(bytes)
                }
                Err(e) => {
                    reply.error(e);
                    return;
                }
            },
            other => other,
        };
        match opened {
            Opened::Base(_) => reply.error(Errno::EIO),
            Opened::Blob(bytes) => {
                let start = (offset as usize).min(bytes.len());
                let end = start.saturating_add(size as usize).min(bytes.len());
                reply.data(&bytes[start..end]);
            }
            Opened::Upper(file) => match State::read_at(&file, offset, size as usize) {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(io(e)),
            },
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let (ino, file) = match self.upper_handle(fh) {
            Ok(h) => h,
            Err(e) => {
                reply.error(e);
                return;
            }
        };
        match file.write_all_at(data, offset) {
            Ok(()) => {
                self.state().wrote(ino, offset + data.len() as u64, None);
                reply.written(data.len() as u32);
            }
            Err(e) => reply.error(io(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles().remove(&fh.0);
        self.state().release(ino.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        if let Ok((_, file)) = self.upper_handle(fh)
            && let Err(e) = file.sync_all()
        {
            reply.error(io(e));
            return;
        }
        match self.state().layer.sync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(io(e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.state().children(ino.0) {
            // The kernel keeps listings: every change of one goes through it.
            Ok(_) => reply.opened(
                FileHandle(0),
                FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut state = self.state();
        let listing = match listing(&mut state, ino.0) {
            Ok(l) => l,
            Err(e) => {
                reply.error(e);
                return;
            }
        };
        for (i, (name, child, kind)) in listing.into_iter().enumerate().skip(offset as usize) {
            if reply.add(
                INodeNo(child),
                (i + 1) as u64,
                kind,
                OsStr::from_bytes(&name),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let mut state = self.state();
        let listing = match listing(&mut state, ino.0) {
            Ok(l) => l,
            Err(e) => {
                reply.error(e);
                return;
            }
        };
        for (i, (name, child, _)) in listing.into_iter().enumerate().skip(offset as usize) {
            let Ok(attr) = state.attr(child) else {
                continue;
            };
            if reply.add(
                INodeNo(child),
                (i + 1) as u64,
                OsStr::from_bytes(&name),
                &TTL,
                &attr,
                Generation(0),
            ) {
                break;
            }
            // An entry given with its attributes counts as a lookup, but `.` and `..`.
            if name != b"."
                && name != b".."
                && let Some(n) = state.nodes.get_mut(&child)
            {
                n.lookups += 1;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.state().layer.sync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(io(e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let upper = self.state().layer.upper(0);
        let dir = upper.parent().map(|p| p.to_owned()).unwrap_or(upper);
        match rustix::fs::statvfs(dir.as_std_path()) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                cas::MAX_NAME_LEN as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error())),
        }
    }

    // No extended attributes: `ENOSYS` once, and the kernel stops asking.
    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        match self.state().node(ino.0) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// `.`, `..` and the children of `dir`, with their types.
fn listing(state: &mut State, dir: Ino) -> Result<Vec<(Vec<u8>, Ino, FileType)>, Errno> {
    let parent = state.node(dir)?.parent;
    let children: Vec<(Vec<u8>, Ino)> = state
        .children(dir)?
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let mut out = Vec::with_capacity(children.len() + 2);
    out.push((b".".to_vec(), dir, FileType::Directory));
    out.push((
        b"..".to_vec(),
        if parent == 0 { dir } else { parent },
        FileType::Directory,
    ));
    for (name, ino) in children {
        let kind = match state.node(ino).map(|n| &n.kind) {
            Ok(Kind::Dir(_)) => FileType::Directory,
            Ok(Kind::Link(_)) => FileType::Symlink,
            _ => FileType::RegularFile,
        };
        out.push((name, ino, kind));
    }
    Ok(out)
}

const fn libc_s_ifmt() -> u32 {
    0o170000
}
const fn libc_s_ifreg() -> u32 {
    0o100000
}
const fn libc_o_trunc() -> i32 {
    0o1000
}
