//! The FUSE face of a mount's [`State`]: each request takes the state's lock only for its
//! bookkeeping; file data is read and written outside it.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::state::{Caller, Ino, Kind, Lazy, S_IFMT, S_IFREG, Source, State};

/// How long the kernel may keep names and attributes: everything that changes them goes
/// through the kernel, which updates its caches itself.
const TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Upper files kept open, by number (each written and read by `pwrite`/`pread`).
const OPEN_UPPERS: usize = 256;
/// Bytes of decoded chunks kept for reads: a sequential read of a large file decodes each
/// chunk once, not once per kernel request; the kernel's page cache keeps what was read.
const CHUNK_CACHE_BYTES: usize = 8 << 20;
/// Large blobs whose chunk lists are kept, by number.
const CUTS_KEPT: usize = 64;

/// Decoded chunks (a small blob is one chunk, itself), and how recently read large blobs
/// are cut, each kept up to its bound, the oldest dropped first.
#[derive(Default)]
struct ChunkCache {
    chunks: HashMap<cas::BlobId, Arc<Vec<u8>>>,
    order: VecDeque<cas::BlobId>,
    bytes: usize,
    cuts: HashMap<cas::BlobId, Arc<cas::BlobChunks>>,
    cut_order: VecDeque<cas::BlobId>,
}

impl ChunkCache {
    fn insert(&mut self, id: cas::BlobId, bytes: Arc<Vec<u8>>) {
        let len = bytes.len();
        if len > CHUNK_CACHE_BYTES {
            return;
        }
        match self.chunks.insert(id, bytes) {
            Some(old) => self.bytes -= old.len(),
            None => self.order.push_back(id),
        }
        self.bytes += len;
        while self.bytes > CHUNK_CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.chunks.remove(&old) {
                self.bytes -= gone.len();
            }
        }
    }

    fn insert_cut(&mut self, cut: Arc<cas::BlobChunks>) {
        if self.cuts.insert(cut.id(), cut.clone()).is_none() {
            self.cut_order.push_back(cut.id());
        }
        while self.cut_order.len() > CUTS_KEPT {
            if let Some(old) = self.cut_order.pop_front() {
                self.cuts.remove(&old);
            }
        }
    }
}

/// The kernel opens and releases files without asking (`open` answers `ENOSYS`, the
/// kernel's zero-message open, with the page cache kept), so reads and writes come by
/// inode: a file's bytes are its blob (read a chunk at a time, the chunks a read covers)
/// or its upper file.
pub(crate) struct Fs {
    pub(crate) state: Arc<Mutex<State>>,
    uppers: Mutex<HashMap<u64, Arc<File>>>,
    chunks: Mutex<ChunkCache>,
    /// Where blobs the store lacks come from (a lazily mounted snapshot's), if anywhere.
    lazy: Option<Arc<dyn Lazy>>,
}

impl Fs {
    pub(crate) fn new(state: Arc<Mutex<State>>) -> Fs {
        let lazy = state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lazy
            .clone();
        Fs {
            state,
            uppers: Mutex::new(HashMap::new()),
            chunks: Mutex::new(ChunkCache::default()),
            lazy,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Upper file `n`, opened for reading and writing.
    fn upper(
        &self,
        n: u64,
        path: impl FnOnce() -> camino::Utf8PathBuf,
    ) -> Result<Arc<File>, Errno> {
        let mut uppers = self.uppers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = uppers.get(&n) {
            return Ok(f.clone());
        }
        let file = File::options()
            .read(true)
            .write(true)
            .open(path())
            .map(Arc::new)
            .map_err(io)?;
        if uppers.len() >= OPEN_UPPERS {
            uppers.clear();
        }
        uppers.insert(n, file.clone());
        Ok(file)
    }

    fn forget_upper(&self, n: u64) {
        self.uppers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&n);
    }

    fn cache(&self) -> MutexGuard<'_, ChunkCache> {
        self.chunks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Up to `len` bytes of blob `b` from `offset`, read outside every lock: only the
    /// chunks they lie in are decoded, each verified against its id. A blob or chunk the
    /// store lacks comes from the lazy source first (this read waits for it alone).
    fn read_blob(&self, b: cas::BlobId, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        // A small blob is one chunk, cached under its own id.
        if let Some(whole) = self.cache().chunks.get(&b).cloned() {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(whole.len());
            let end = start.saturating_add(len).min(whole.len());
            return Ok(whole[start..end].to_vec());
        }
        let mut reader = None;
        let failed = |e: &dyn std::fmt::Display| {
            tracing::warn!("mount: blob {b}: {e}");
            Errno::EIO
        };
        let open = |reader: &mut Option<cas::Reader>| -> Result<(), Errno> {
            if reader.is_none() {
                let readers = self.state().readers();
                *reader = Some(readers().map_err(|e| failed(&e))?);
            }
            Ok(())
        };
        let cached_cut = self.cache().cuts.get(&b).cloned();
        let cut = match cached_cut {
            Some(cut) => cut,
            None => {
                open(&mut reader)?;
                let r = reader.as_ref().expect("opened above");
                let cut = match (&self.lazy, r.blob_chunks(b)) {
                    (Some(lazy), Err(cas::ReadError::NotFound { .. })) => {
                        lazy.cut(b).map_err(|e| failed(&e))?
                    }
                    (_, cut) => cut.map_err(|e| failed(&e))?,
                };
                let cut = Arc::new(cut);
                if cut.ids().len() > 1 {
                    self.cache().insert_cut(cut.clone());
                }
                cut
            }
        };
        let mut out = Vec::with_capacity(len.min(cas::CHUNK_BYTES));
        let covering: Vec<cas::Chunk> = if cut.size() == 0 {
            // No bytes, but the blob is still read, so it is checked against its id.
            cut.chunk(0).into_iter().collect()
        } else {
            cut.covering(offset, len as u64).collect()
        };
        for chunk in covering {
            let cached = self.cache().chunks.get(&chunk.id).cloned();
            let bytes = match cached {
                Some(bytes) => bytes,
                None => {
                    open(&mut reader)?;
                    if let Some(lazy) = &self.lazy {
                        let r = reader.as_ref().expect("opened above");
                        let here = r.has_blob(chunk.id).map_err(|e| failed(&e))?;
                        // A large blob's every chunk is told, so its source reads ahead.
                        if !here || cut.ids().len() > 1 {
                            lazy.fetch(chunk).map_err(|e| failed(&e))?;
                        }
                        if !here {
                            // A reader sees the store as it was when opened.
                            reader = None;
                            open(&mut reader)?;
                        }
                    }
                    let r = reader.as_ref().expect("opened above");
                    let bytes = Arc::new(r.chunk(chunk).map_err(|e| failed(&e))?);
                    self.cache().insert(chunk.id, bytes.clone());
                    bytes
                }
            };
            let from = offset.saturating_sub(chunk.start) as usize;
            let to = (offset.saturating_add(len as u64) - chunk.start).min(chunk.len as u64);
            out.extend_from_slice(&bytes[from.min(bytes.len())..(to as usize).min(bytes.len())]);
        }
        Ok(out)
    }

    /// The file's upper file (copied up from its blob first), for a write.
    fn writable(&self, ino: Ino) -> Result<Arc<File>, Errno> {
        // A lazily mounted file's bytes are fetched before the state's lock is taken, so
        // the copy-up holds up no other call on the mount.
        if let Some(lazy) = &self.lazy {
            let (source, readers) = {
                let state = self.state();
                (state.source(ino), state.readers())
            };
            if let Ok(Source::Base(b)) = source {
                let reader = readers().map_err(|e| {
                    tracing::warn!("mount: blob {b}: {e}");
                    Errno::EIO
                })?;
                if !reader.has_blob(b).unwrap_or(true) {
                    drop(reader);
                    lazy.fetch_whole(b).map_err(|e| {
                        tracing::warn!("mount: blob {b}: {e}");
                        Errno::EIO
                    })?;
                }
            }
        }
        let (n, path) = {
            let mut state = self.state();
            let n = state.upper_of(ino, false)?;
            (n, state.layer.upper(n))
        };
        self.upper(n, || path)
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

/// Who sent `req`: what it makes is theirs.
fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
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
        let gone = self.state().forget(ino.0, nlookup);
        if let Some(n) = gone {
            self.forget_upper(n);
        }
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
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The kernel checked that the caller may (`default_permissions`); a change of owner
        // comes with the mode that clears the set-user/group-ID bits.
        let result = (|| {
            let mut state = self.state();
            if uid.is_some() || gid.is_some() {
                state.set_owner(ino.0, uid, gid)?;
            }
            if let Some(mode) = mode {
                state.set_perm(ino.0, (mode & 0o7777) as u16)?;
            }
            if let Some(size) = size {
                state.truncate(ino.0, size)?;
            }
            let time = |t: Option<TimeOrNow>| {
                t.map(|t| match t {
                    TimeOrNow::SpecificTime(t) => t,
                    TimeOrNow::Now => SystemTime::now(),
                })
            };
            if atime.is_some() || mtime.is_some() {
                state.set_times(ino.0, time(atime), time(mtime))?;
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
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        // FIFOs, sockets and devices stay in the layer, as on disk; a capture reports them
        // (a tree holds none). The kernel let only a privileged caller make a device.
        let mut state = self.state();
        let perm = mode_perm(mode, umask);
        let made = if mode & S_IFMT == S_IFREG || mode & S_IFMT == 0 {
            state.create(parent.0, name.as_bytes(), perm, caller(req))
        } else {
            let mode = (mode & S_IFMT) | u32::from(perm);
            state.mknod(parent.0, name.as_bytes(), mode, rdev, caller(req))
        };
        self.entry(reply, made, &mut state);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.state();
        let made = state.mkdir(
            parent.0,
            name.as_bytes(),
            mode_perm(mode, umask),
            caller(req),
        );
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
        req: &Request,
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
            caller(req),
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
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        // Hard links stay in the layer, as on disk; a capture stores each name as a file of
        // its own (a tree has no hard links).
        let mut state = self.state();
        let made = state
            .link(ino.0, newparent.0, newname.as_bytes())
            .and_then(|()| {
                // The kernel takes one more reference to the node for the new name.
                state.lookup(newparent.0, newname.as_bytes())
            });
        match made.and_then(|ino| state.attr(ino)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // The kernel's zero-message open: it opens and releases on its own from now on,
        // keeping the page cache, and reads and writes come by inode.
        reply.error(Errno::ENOSYS);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.state();
        let made = state
            .create(
                parent.0,
                name.as_bytes(),
                mode_perm(mode, umask),
                caller(req),
            )
            .and_then(|ino| {
                if let Some(n) = state.nodes.get_mut(&ino) {
                    n.lookups = 1;
                }
                state.attr(ino)
            });
        match made {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let source = {
            let state = self.state();
            state.source(ino.0).map(|s| match s {
                Source::Upper(n) => (Source::Upper(n), Some(state.layer.upper(n))),
                base => (base, None),
            })
        };
        match source {
            Ok((Source::Base(b), _)) => match self.read_blob(b, offset, size as usize) {
                Ok(bytes) => reply.data(&bytes),
                Err(e) => reply.error(e),
            },
            Ok((Source::Upper(n), Some(path))) => {
                match self
                    .upper(n, || path)
                    .and_then(|f| State::read_at(&f, offset, size as usize).map_err(io))
                {
                    Ok(data) => reply.data(&data),
                    Err(e) => reply.error(e),
                }
            }
            Ok(_) => reply.error(Errno::EIO),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self
            .writable(ino.0)
            .and_then(|file| file.write_all_at(data, offset).map_err(io))
        {
            Ok(()) => {
                self.state().wrote(ino.0, offset + data.len() as u64, None);
                reply.written(data.len() as u32);
            }
            Err(e) => reply.error(e),
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
        // Nothing to do at close: `ENOSYS` once, and the kernel stops asking.
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let upper = {
            let state = self.state();
            match state.source(ino.0) {
                Ok(Source::Upper(n)) => Some((n, state.layer.upper(n))),
                _ => None,
            }
        };
        if let Some((n, path)) = upper
            && let Err(e) = self
                .upper(n, || path)
                .and_then(|f| f.sync_all().map_err(io))
        {
            reply.error(e);
            return;
        }
        match self.state().layer.sync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(io(e)),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Zero-message opens for directories too: the kernel keeps their listings
        // (`FOPEN_CACHE_DIR`), and drops one when a change goes through it.
        reply.error(Errno::ENOSYS);
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
            Ok(Kind::Special(s)) => s.file_type(),
            _ => FileType::RegularFile,
        };
        out.push((name, ino, kind));
    }
    Ok(out)
}
