//! `mount`: a snapshot served by FUSE (the `fuser` crate) as a writable directory, ready
//! at once. Directories are read from the store when first looked at, files when first
//! read (verified as every read is); every change goes to the mount's *layer* (upper
//! files and a journal of names in the store folder), so nothing is copied
//! until it is written and a mount that was killed is attached again with nothing lost.
//!
//! A mount may show *grafts* ([`Graft`]): stored trees (dependency layers) at paths under
//! its own layer, read as the snapshot is, written to its layer only, never captured.
//!
//! A live mount is a [`worktree_scope::MountedTree`]: a capture asks it for its tree, which it
//! builds from the directories that changed (O(changed), no walk). The layer keeps what a
//! directory keeps (hard links, FIFOs, sockets and devices, owners, both times); a capture
//! reports what a tree cannot hold, as a capture on disk does. What a mount does not support
//! fails with a clean errno: `RENAME_EXCHANGE` (`EINVAL`), extended attributes (`ENOSYS`).
//!
//! Its modules form layers; each uses only those below it:
//!
//! ```text
//! materialize   `unmount --materialize`: the copy, its marker, recovery after a kill
//! fuse          the kernel's requests, answered from the state
//! capture       the tree into the store, judged by the worktree's scope (worktree_scope's)
//! state         the tree in memory: lookups, changes, the journal's replay
//! layer         the layer on disk
//! path          a name's path in the mount, as the journal records it
//! ```

mod capture;
mod fuse;
mod layer;
mod materialize;
mod path;
mod state;

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use camino::{Utf8Path, Utf8PathBuf};
use cas::TreeId;

pub use capture::MountCaptureError;
pub use materialize::CopyError;
pub use materialize::{
    COPY_COMMAND, Recovered, copy_tree, materialized, recover as recover_materialize,
};
pub use state::{Graft, Lazy, LazyError, Readers, StateError};

/// Why a mount could not be made or ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// FUSE is missing or not permitted here.
    #[error(
        "{root}: FUSE is not available here ({source}); `cairn checkout` makes a worktree without it"
    )]
    Unavailable {
        /// The mount point.
        root: Utf8PathBuf,
        /// What the system said.
        #[source]
        source: FuseUnavailable,
    },
    /// The mount point holds files.
    #[error("{root}: not an empty directory")]
    NotEmpty {
        /// The mount point.
        root: Utf8PathBuf,
    },
    /// Something uses the mount (an open file, a working directory inside).
    #[error(
        "{root}: in use (a process has a file open or its working directory there); close it and unmount again"
    )]
    Busy {
        /// The mount point.
        root: Utf8PathBuf,
    },
    /// The layer or the store failed.
    #[error("{root}: {source}")]
    Failed {
        /// The mount point.
        root: Utf8PathBuf,
        /// What failed.
        #[source]
        source: MountFailure,
    },
}

/// Why the kernel cannot serve a FUSE mount for this process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FuseUnavailable {
    /// `/dev/fuse` is there but not a character device.
    #[error("/dev/fuse is not the FUSE device")]
    NotTheDevice,
    /// `/dev/fuse` cannot be looked at.
    #[error("/dev/fuse: {0}")]
    Device(#[source] std::io::Error),
    /// The kernel refused the mount (not permitted, or no FUSE in it).
    #[error("{0}")]
    Refused(#[source] std::io::Error),
    /// Turned off by the environment.
    #[error("turned off: {NO_FUSE} is set")]
    TurnedOff,
}

/// The environment variable that, set (to anything but empty or `0`), makes FUSE
/// unavailable to cairn: no mount is made, and `verify` checks out its view instead.
pub const NO_FUSE: &str = "CAIRN_NO_FUSE";

/// What failed in making, ending, materializing or recovering a mount (see
/// [`MountError::Failed`], which names the mount point).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountFailure {
    /// The mount point could not be opened or looked at.
    #[error("{0}")]
    Root(#[source] std::io::Error),
    /// The layer could not be opened.
    #[error("layer {layer}: {source}")]
    Layer {
        /// The layer's folder.
        layer: Utf8PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The tree could not be set up from the layer.
    #[error("layer {layer}: {source}")]
    State {
        /// The layer's folder.
        layer: Utf8PathBuf,
        /// What failed.
        #[source]
        source: state::StateError,
    },
    /// The kernel did not mount it.
    #[error("mounting: {0}")]
    Mounting(#[source] std::io::Error),
    /// The kernel did not unmount it.
    #[error("unmounting: {0}")]
    Unmounting(#[source] std::io::Error),
    /// The session serving it did not end cleanly.
    #[error("ending the session: {0}")]
    Session(#[source] std::io::Error),
    /// The layer could not be synced.
    #[error("syncing the layer: {0}")]
    Sync(#[source] std::io::Error),
    /// It is not mounted.
    #[error("not mounted")]
    NotMounted,
    /// A graft's path is not plain names from the mount's root.
    #[error("graft {path}: not a path of plain names from the mount's root")]
    GraftPath {
        /// The path given.
        path: Utf8PathBuf,
    },
    /// The copy of its files could not be made or moved up.
    #[error("materializing: {0}")]
    Materializing(#[source] std::io::Error),
    /// A failed materialize could not be taken back, so the mount stays read-only.
    #[error(
        "{cause}; taking the copy back failed ({source}), so the mount stays read-only: unmount it, and a `cairn mount` or `unmount` of it finishes the materialize"
    )]
    TakeBack {
        /// Why the materialize failed.
        cause: Box<MountError>,
        /// Why taking it back failed.
        #[source]
        source: std::io::Error,
    },
    /// Its mount flags could not be read.
    #[error("reading its mount flags: {0}")]
    MountFlags(#[source] std::io::Error),
    /// It could not be made read-only.
    #[error("making it read-only: {0}")]
    Freezing(#[source] std::io::Error),
    /// A step of finishing or rolling back a materialize a kill interrupted failed.
    #[error("recovering an interrupted materialize ({step}): {source}")]
    Recovering {
        /// What was being done, or to what.
        step: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A materialize a kill interrupted cannot be finished: names of the copy are taken.
    #[error(
        "an interrupted materialize could not be finished: {taken} already there (the rest of the copy is in {staging})"
    )]
    CopyInTheWay {
        /// The names already in the directory.
        taken: String,
        /// Where the rest of the copy is.
        staging: String,
    },
}

/// What the FUSE file system mounts where, the snapshot already resolved to its tree.
pub struct FuseMountOptions {
    /// The mount point: an empty directory.
    pub root: Utf8PathBuf,
    /// The layer's folder (kept across mounts of this worktree).
    pub layer: Utf8PathBuf,
    /// The snapshot tree a new layer starts from (an existing layer keeps its own).
    pub base: Option<TreeId>,
    /// The time files of the snapshot show.
    pub base_time: SystemTime,
    /// Refuse every change (`EROFS`).
    pub read_only: bool,
    /// Where the blobs the store lacks come from (a snapshot only a remote holds), if
    /// anywhere: each is fetched when first read.
    pub lazy: Option<Arc<dyn Lazy>>,
    /// Trees shown read-only under the mount's own layer (see [`Graft`]): given again each
    /// time a layer is attached, as they are not in it.
    pub grafts: Vec<Graft>,
}

/// A live mount.
pub struct Mounted {
    root: Utf8PathBuf,
    fs_state: Arc<Mutex<state::State>>,
    session: Mutex<Option<fuser::BackgroundSession>>,
    /// Whether `session` is still there, readable without waiting for an unmount that
    /// holds it.
    live: AtomicBool,
    /// The directory the mount covers, opened before mounting: a materialize fills it.
    covered: OwnedFd,
    layer: Utf8PathBuf,
    read_only: bool,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted").field("root", &self.root).finish()
    }
}

/// Whether the kernel can serve a FUSE mount for this process (and [`NO_FUSE`] does not
/// turn it off). Whether a mount is permitted shows only when one is made
/// ([`Mounted::start`]).
pub fn fuse_available() -> Result<(), FuseUnavailable> {
    use std::os::unix::fs::FileTypeExt;
    if std::env::var_os(NO_FUSE).is_some_and(|v| !v.is_empty() && v != "0") {
        return Err(FuseUnavailable::TurnedOff);
    }
    match std::fs::metadata("/dev/fuse") {
        Ok(m) if m.file_type().is_char_device() => Ok(()),
        Ok(_) => Err(FuseUnavailable::NotTheDevice),
        Err(e) => Err(FuseUnavailable::Device(e)),
    }
}

/// Detaches whatever is mounted at `root` if it is a mount whose process is gone (its
/// directory answers "not connected"). Asked with `statfs`, which always reaches the
/// mount's server: a `stat` may be answered from the kernel's cache of the root.
pub fn clear_stale(root: &Utf8Path) {
    if let Err(e) = rustix::fs::statfs(root.as_std_path())
        && e == rustix::io::Errno::NOTCONN
    {
        let _ = rustix::mount::unmount(root.as_std_path(), rustix::mount::UnmountFlags::DETACH);
    }
}

/// Mounts a FUSE file system at `root` with mount(2), as `fuser` would (the same source,
/// type, flags and options), and returns its `/dev/fuse`; `None` where this process may
/// not mount (a user's mount: `fusermount3` makes it). Mounted so, no `fuser` handle
/// unmounts `root` once its session is over: fuser 0.17 does that by path even when the
/// mount is gone (its `is_mounted` reads the dead connection's `POLLERR` as mounted,
/// cberner/fuser#703), which logged "Unmount failed: Invalid argument" after every
/// unmount, and would unmount whatever is mounted there by then.
fn mount_here(
    root: &Utf8Path,
    read_only: bool,
    acl: fuser::SessionACL,
) -> std::io::Result<Option<OwnedFd>> {
    use rustix::fs::{Mode, OFlags};
    use rustix::mount::MountFlags;
    let mode = rustix::fs::stat(root.as_std_path())?.st_mode;
    let dev = rustix::fs::open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?;
    let mut data = format!(
        "fd={},rootmode={mode:o},user_id={},group_id={},default_permissions",
        std::os::fd::AsRawFd::as_raw_fd(&dev),
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    if acl != fuser::SessionACL::Owner {
        data.push_str(",allow_other");
    }
    let mut flags = MountFlags::NOSUID | MountFlags::NODEV;
    if read_only {
        flags |= MountFlags::RDONLY;
    }
    let data = std::ffi::CString::new(data).map_err(std::io::Error::other)?;
    match rustix::mount::mount("cairn", root.as_std_path(), "fuse", flags, data.as_c_str()) {
        Ok(()) => Ok(Some(dev)),
        Err(rustix::io::Errno::PERM) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl Mounted {
    /// Mounts `options.base` with its layer at `options.root`; returns once the directory
    /// answers.
    pub fn start(options: FuseMountOptions, readers: Readers) -> Result<Mounted, MountError> {
        let root = options.root.clone();
        let failed = |source| MountError::Failed {
            root: root.clone(),
            source,
        };
        fuse_available().map_err(|source| MountError::Unavailable {
            root: root.clone(),
            source,
        })?;
        clear_stale(&root);
        let covered = materialize::open_path(&root).map_err(|e| failed(MountFailure::Root(e)))?;
        match materialize::entries(covered.as_fd()) {
            Ok(entries) if !entries.is_empty() => return Err(MountError::NotEmpty { root }),
            Ok(_) => {}
            Err(e) => return Err(failed(MountFailure::Root(e))),
        }
        let grafts = state::Grafts::new(&options.grafts)
            .map_err(|path| failed(MountFailure::GraftPath { path }))?;
        let (layer, records) = layer::Layer::open(&options.layer).map_err(|source| {
            failed(MountFailure::Layer {
                layer: options.layer.clone(),
                source,
            })
        })?;
        let state = state::State::new(
            root.as_std_path().to_owned(),
            layer,
            records,
            readers,
            (options.base, grafts),
            options.base_time,
            options.read_only,
        )
        .map_err(|source| {
            failed(MountFailure::State {
                layer: options.layer.clone(),
                source,
            })
        })?;
        let mut state = state;
        state.lazy = options.lazy.clone();
        let fs_state = Arc::new(Mutex::new(state));
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("cairn".to_owned()),
            fuser::MountOption::Subtype("cairn".to_owned()),
            fuser::MountOption::DefaultPermissions,
            if options.read_only {
                fuser::MountOption::RO
            } else {
                fuser::MountOption::RW
            },
        ];
        // Served by root, a mount is open to every user, as a directory root checked out
        // would be (builds and test suites drop privileges): the kernel checks each access
        // against the nodes' owners and modes (`default_permissions`).
        if rustix::process::geteuid().is_root() {
            config.acl = fuser::SessionACL::All;
        }
        config.n_threads = Some(4);
        let refused = |e: std::io::Error| match e.raw_os_error() {
            Some(code)
                if code == rustix::io::Errno::PERM.raw_os_error()
                    || code == rustix::io::Errno::NODEV.raw_os_error()
                    || code == rustix::io::Errno::NOENT.raw_os_error()
                    || code == rustix::io::Errno::ACCESS.raw_os_error() =>
            {
                MountError::Unavailable {
                    root: root.clone(),
                    source: FuseUnavailable::Refused(e),
                }
            }
            _ => failed(MountFailure::Mounting(e)),
        };
        let fs = fuse::Fs::new(fs_state.clone());
        let session = match mount_here(&root, options.read_only, config.acl).map_err(refused)? {
            Some(dev) => fuser::Session::from_fd(fs, dev, config.acl, config)
                .and_then(fuser::Session::spawn)
                .map_err(|e| {
                    // The kernel mounted it, but no session serves it.
                    let _ = rustix::mount::unmount(
                        root.as_std_path(),
                        rustix::mount::UnmountFlags::DETACH,
                    );
                    failed(MountFailure::Mounting(e))
                })?,
            // A user's mount: made by fusermount3, through fuser.
            None => fuser::spawn_mount2(fs, &root, &config).map_err(refused)?,
        };
        Ok(Mounted {
            root,
            fs_state,
            session: Mutex::new(Some(session)),
            live: AtomicBool::new(true),
            covered,
            layer: options.layer,
            read_only: options.read_only,
        })
    }

    /// Whether it refuses every change.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The mount point.
    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// Unmounts (the layer stays: a later mount of the worktree attaches it again). A
    /// mount in use (an open file, a working directory inside) is refused as `umount`
    /// refuses it, and stays; with `force` it is detached and goes once no longer used.
    pub fn unmount(&self, force: bool) -> Result<(), MountError> {
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if session.is_none() {
            return Ok(());
        }
        // A session that ended on its own was unmounted from outside: what is mounted
        // there now (if anything) is not ours to unmount.
        if !ended(&session) {
            self.umount(force)?;
            if force && !self.ends_within(&session, DETACHED_ENDS_WITHIN) {
                return self.leave_detached(&mut session);
            }
        }
        self.end(&mut session)
    }

    /// Whether `session` ends within `wait` (a detached mount's ends once nothing in it
    /// is in use).
    fn ends_within(
        &self,
        session: &Option<fuser::BackgroundSession>,
        wait: std::time::Duration,
    ) -> bool {
        let started = std::time::Instant::now();
        while !ended(session) {
            if started.elapsed() >= wait {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        true
    }

    /// A detached mount still in use (a working directory, an open file): served until
    /// that ends, or this process does, by a thread of its own, so that no caller waits
    /// for another process to let go (a server stopping would wait for ever). Its layer
    /// is synced now, and again when its session ends.
    fn leave_detached(
        &self,
        session: &mut Option<fuser::BackgroundSession>,
    ) -> Result<(), MountError> {
        self.live.store(false, Ordering::Release);
        let Some(running) = session.take() else {
            return Ok(());
        };
        let (fs_state, root) = (self.fs_state.clone(), self.root.clone());
        let joiner = std::thread::Builder::new()
            .name("cairn-detached".into())
            .spawn(move || {
                if let Err(e) = running.join() {
                    tracing::warn!("{root}: ending the session: {e}");
                }
                let state = fs_state.lock().unwrap_or_else(PoisonError::into_inner);
                if let Err(e) = state.layer.sync() {
                    tracing::warn!("{root}: syncing the layer: {e}");
                }
            });
        if let Err(e) = joiner {
            tracing::warn!("{}: no thread to end its session: {e}", self.root);
        }
        let state = self.fs_state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .layer
            .sync()
            .map_err(|e| self.failed(MountFailure::Sync(e)))
    }

    /// unmount(2) of the mount point.
    fn umount(&self, force: bool) -> Result<(), MountError> {
        let flags = if force {
            rustix::mount::UnmountFlags::DETACH
        } else {
            rustix::mount::UnmountFlags::empty()
        };
        match rustix::mount::unmount(self.root.as_std_path(), flags) {
            // Not mounted there any more (unmounted from outside).
            Ok(()) | Err(rustix::io::Errno::INVAL) => Ok(()),
            Err(rustix::io::Errno::BUSY) => Err(MountError::Busy {
                root: self.root.clone(),
            }),
            Err(e) => Err(self.failed(MountFailure::Unmounting(e.into()))),
        }
    }

    /// After unmount(2): the session ends once the kernel says so, and the layer is synced.
    fn end(&self, session: &mut Option<fuser::BackgroundSession>) -> Result<(), MountError> {
        self.live.store(false, Ordering::Release);
        if let Some(s) = session.take() {
            s.join()
                .map_err(|e| self.failed(MountFailure::Session(e)))?;
        }
        let state = self.fs_state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .layer
            .sync()
            .map_err(|e| self.failed(MountFailure::Sync(e)))
    }

    fn failed(&self, source: MountFailure) -> MountError {
        MountError::Failed {
            root: self.root.clone(),
            source,
        }
    }

    /// Unmounts, leaving the directory an ordinary one that holds the mount's files (see
    /// the `materialize` module; the layer stays until the caller drops it, then calls
    /// [`materialized`]). Refused as [`Mounted::unmount`] refuses, with nothing changed,
    /// while the mount is in use; a file open for writing is refused before anything is
    /// copied. While the copy is made, writes fail with `EROFS`.
    pub fn materialize(&self) -> Result<(), MountError> {
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if session.is_none() {
            return Err(self.failed(MountFailure::NotMounted));
        }
        let mode = std::fs::metadata(&self.root)
            .map_err(|e| self.failed(MountFailure::Root(e)))?
            .permissions()
            .mode();
        let frozen = self.freeze()?;
        let marker = materialize::Marker::of(&self.layer);
        let covered = self.covered.as_fd();
        let moved = materialize::stage(covered, &self.root, &marker)
            .map_err(|e| (Vec::new(), e))
            .and_then(|staging| materialize::move_up(covered, staging));
        let moved = match moved {
            Ok(moved) => moved,
            Err((moved, e)) => {
                let cause = self.failed(MountFailure::Materializing(e));
                return Err(self.take_back(&marker, frozen, &moved, cause));
            }
        };
        if let Err(cause) = self.umount(false) {
            return Err(self.take_back(&marker, frozen, &moved, cause));
        }
        // The directory is the copy now; it takes the mount root's permission bits.
        if let Err(e) = rustix::fs::fchmod(covered, rustix::fs::Mode::from_raw_mode(mode & 0o7777))
        {
            tracing::warn!("{}: {e}", self.root);
        }
        self.end(&mut session)
    }

    /// Takes back what a materialize put in the covered directory (the marker last), then
    /// lets writes in again; returns `cause`. If the copy cannot be taken back the mount
    /// stays read-only: its marker may say the copy is whole, and a recovery then
    /// finishes the materialize, which must not lose what was written after.
    fn take_back(
        &self,
        marker: &materialize::Marker,
        frozen: Freeze,
        moved: &[std::ffi::OsString],
        cause: MountError,
    ) -> MountError {
        match materialize::take_back(self.covered.as_fd(), marker, moved) {
            Ok(()) => {
                self.thaw(frozen);
                cause
            }
            Err(source) => self.failed(MountFailure::TakeBack {
                cause: Box::new(cause),
                source,
            }),
        }
    }

    /// Refuses every change to the mount: its mount point is made read-only, which the
    /// kernel refuses while a file is open for writing there (so a writer is told apart
    /// before anything is copied). A process that may not remount (a user's FUSE mount)
    /// gets the mount's own refusal instead.
    fn freeze(&self) -> Result<Freeze, MountError> {
        use rustix::fs::StatVfsMountFlags as Vfs;
        use rustix::mount::MountFlags as Ms;
        if self.read_only {
            return Ok(Freeze::Already);
        }
        let vfs = rustix::fs::statvfs(self.root.as_std_path())
            .map_err(|e| self.failed(MountFailure::MountFlags(e.into())))?
            .f_flag;
        // A bind remount sets every per-mount flag: keep those it has (atime ones stay
        // unless named).
        let mut keep = Ms::empty();
        for (v, m) in [
            (Vfs::NOSUID, Ms::NOSUID),
            (Vfs::NODEV, Ms::NODEV),
            (Vfs::NOEXEC, Ms::NOEXEC),
        ] {
            if vfs.contains(v) {
                keep |= m;
            }
        }
        match rustix::mount::mount_remount(
            self.root.as_std_path(),
            Ms::BIND | Ms::RDONLY | keep,
            "",
        ) {
            Ok(()) => Ok(Freeze::Remounted(keep)),
            Err(rustix::io::Errno::BUSY) => Err(MountError::Busy {
                root: self.root.clone(),
            }),
            Err(rustix::io::Errno::PERM) => {
                self.fs_state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .read_only = true;
                Ok(Freeze::InState)
            }
            Err(e) => Err(self.failed(MountFailure::Freezing(e.into()))),
        }
    }

    fn thaw(&self, frozen: Freeze) {
        match frozen {
            Freeze::Already => {}
            Freeze::Remounted(keep) => {
                if let Err(e) = rustix::mount::mount_remount(
                    self.root.as_std_path(),
                    rustix::mount::MountFlags::BIND | keep,
                    "",
                ) {
                    tracing::warn!("{}: making it writable again: {e}", self.root);
                }
            }
            Freeze::InState => {
                self.fs_state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .read_only = false;
            }
        }
    }

    /// Whether it still serves its directory: not once unmounted here, nor once its
    /// session ended on its own (unmounted from outside, `umount -l`; a lazy unmount's
    /// session ends once nothing in the mount is in use). While an unmount or materialize
    /// of it is under way it counts as live.
    pub fn is_live(&self) -> bool {
        if !self.live.load(Ordering::Acquire) {
            return false;
        }
        match self.session.try_lock() {
            Ok(session) => !ended(&session),
            Err(std::sync::TryLockError::Poisoned(session)) => !ended(&session.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }
}

/// How long a forced unmount waits for the session of the mount it detached to end
/// before leaving it to a thread of its own (an idle mount's ends at once).
const DETACHED_ENDS_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether `session` is over: joined, or its threads gone (the kernel ended the connection).
fn ended(session: &Option<fuser::BackgroundSession>) -> bool {
    session.as_ref().is_none_or(|s| s.guard.is_finished())
}

/// How [`Mounted::freeze`] refused changes, to be undone by [`Mounted::thaw`].
#[derive(Clone, Copy)]
enum Freeze {
    /// A read-only mount.
    Already,
    /// The mount point remounted read-only; these per-mount flags kept.
    Remounted(rustix::mount::MountFlags),
    /// The mount's state refuses changes.
    InState,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.unmount(true);
    }
}

/// Rounds of a capture before everything is read under the state's lock.
const CAPTURE_ROUNDS: usize = 3;

impl worktree_scope::MountedTree for Mounted {
    fn capture(
        &self,
        store: &cas::Store,
        batch: &mut cas::WriteBatch,
        scope: &worktree_scope::ScopeSettings,
        dry_run: bool,
    ) -> Result<worktree_scope::MountCapture, cas::BoxError> {
        let mut fetched = capture::Fetched::default();
        for round in 1..=CAPTURE_ROUNDS {
            *batch = cas::WriteBatch::new();
            let step = self
                .fs_state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .capture(
                    store,
                    batch,
                    scope,
                    (&fetched, round == CAPTURE_ROUNDS, dry_run),
                )?;
            match step {
                capture::Round::Done(captured) => return Ok(captured),
                // Read with the lock let go: the mount goes on answering meanwhile.
                capture::Round::Again(wanted) => fetched.fetch(store, wanted, dry_run)?,
            }
        }
        Err(MountCaptureError::Unfinished.into())
    }

    fn settle(&self, token: u64) {
        self.fs_state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settle(token);
    }
}
