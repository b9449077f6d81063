//! `mount`: a snapshot served by FUSE (the `fuser` crate) as a writable directory, ready
//! at once. Directories are read from the store when first looked at, files when first
//! read (verified as every read is); every change goes to the mount's *layer* (upper
//! files and a journal of names in the store folder), so nothing is copied
//! until it is written and a mount that was killed is attached again with nothing lost.
//!
//! A live mount is a [`fs_manager::MountedTree`]: a capture asks it for its tree, which it
//! builds from the directories that changed (O(changed), no walk). What a mount does not
//! support fails with a clean errno: hard links, devices, FIFOs and sockets (`EPERM`),
//! `RENAME_EXCHANGE` (`EINVAL`), extended attributes (`ENOSYS`).
//!
//! Its modules form layers; each uses only those below it:
//!
//! ```text
//! fuse          the kernel's requests, answered from the state
//! capture       the tree into the store, judged by the worktree's scope (fs_manager's)
//! state         the tree in memory: lookups, changes, the journal's replay
//! layer         the layer on disk
//! ```

mod capture;
mod fuse;
mod layer;
mod state;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use camino::{Utf8Path, Utf8PathBuf};
use cas::TreeId;

pub use state::Readers;

/// Why a mount could not be made or ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// FUSE is missing or not permitted here.
    #[error(
        "{root}: FUSE is not available here ({reason}); `cairn checkout` makes a worktree without it"
    )]
    Unavailable {
        /// The mount point.
        root: Utf8PathBuf,
        /// What the system said.
        reason: String,
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
    #[error("{root}: {reason}")]
    Failed {
        /// The mount point.
        root: Utf8PathBuf,
        /// Why.
        reason: String,
    },
}

/// What to mount where.
pub struct MountOptions {
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
}

/// A live mount.
pub struct Mounted {
    root: Utf8PathBuf,
    fs_state: Arc<Mutex<state::State>>,
    session: Mutex<Option<fuser::BackgroundSession>>,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted").field("root", &self.root).finish()
    }
}

/// Whether the kernel can serve a FUSE mount for this process.
pub fn fuse_available() -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata("/dev/fuse") {
        Ok(m) if m.file_type().is_char_device() => Ok(()),
        Ok(_) => Err("/dev/fuse is not the FUSE device".to_owned()),
        Err(e) => Err(format!("/dev/fuse: {e}")),
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

impl Mounted {
    /// Mounts `options.base` with its layer at `options.root`; returns once the directory
    /// answers.
    pub fn start(options: MountOptions, readers: Readers) -> Result<Mounted, MountError> {
        let root = options.root.clone();
        let failed = |reason: String| MountError::Failed {
            root: root.clone(),
            reason,
        };
        fuse_available().map_err(|reason| MountError::Unavailable {
            root: root.clone(),
            reason,
        })?;
        clear_stale(&root);
        match std::fs::read_dir(&root) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(MountError::NotEmpty { root });
                }
            }
            Err(e) => return Err(failed(e.to_string())),
        }
        let (layer, records) = layer::Layer::open(&options.layer)
            .map_err(|e| failed(format!("layer {}: {e}", options.layer)))?;
        let state = state::State::new(
            root.as_std_path().to_owned(),
            layer,
            records,
            readers,
            options.base,
            options.base_time,
            options.read_only,
        )
        .map_err(|e| failed(format!("layer {}: {e}", options.layer)))?;
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
        config.n_threads = Some(4);
        let session = fuser::spawn_mount2(fuse::Fs::new(fs_state.clone()), &root, &config)
            .map_err(|e| match e.raw_os_error() {
                Some(code)
                    if code == rustix::io::Errno::PERM.raw_os_error()
                        || code == rustix::io::Errno::NODEV.raw_os_error()
                        || code == rustix::io::Errno::NOENT.raw_os_error()
                        || code == rustix::io::Errno::ACCESS.raw_os_error() =>
                {
                    MountError::Unavailable {
                        root: root.clone(),
                        reason: e.to_string(),
                    }
                }
                _ => failed(format!("mounting: {e}")),
            })?;
        Ok(Mounted {
            root,
            fs_state,
            session: Mutex::new(Some(session)),
        })
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
        let flags = if force {
            rustix::mount::UnmountFlags::DETACH
        } else {
            rustix::mount::UnmountFlags::empty()
        };
        match rustix::mount::unmount(self.root.as_std_path(), flags) {
            // Not mounted there any more (unmounted from outside).
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(rustix::io::Errno::BUSY) => {
                return Err(MountError::Busy {
                    root: self.root.clone(),
                });
            }
            Err(e) => {
                return Err(MountError::Failed {
                    root: self.root.clone(),
                    reason: format!("unmounting: {e}"),
                });
            }
        }
        // Unmounted: the session ends once the kernel says so.
        if let Some(s) = session.take() {
            s.join().map_err(|e| MountError::Failed {
                root: self.root.clone(),
                reason: format!("ending the session: {e}"),
            })?;
        }
        drop(session);
        let state = self.fs_state.lock().unwrap_or_else(PoisonError::into_inner);
        state.layer.sync().map_err(|e| MountError::Failed {
            root: self.root.clone(),
            reason: format!("syncing the layer: {e}"),
        })
    }

    /// Whether it still serves its directory.
    pub fn is_live(&self) -> bool {
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.unmount(true);
    }
}

/// Rounds of a capture before everything is read under the state's lock.
const CAPTURE_ROUNDS: usize = 3;

impl fs_manager::MountedTree for Mounted {
    fn capture(
        &self,
        store: &cas::Store,
        batch: &mut cas::WriteBatch,
        scope: &fs_manager::ScopeSettings,
        dry_run: bool,
    ) -> Result<fs_manager::MountCapture, String> {
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
        Err("a capture that did not finish in its last round".to_owned())
    }

    fn settle(&self, token: u64) {
        self.fs_state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settle(token);
    }
}
