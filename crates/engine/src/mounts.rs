//! `mount` and `unmount`: worktrees this engine serves itself (the `mount` crate), ready
//! at once. Only an engine that holds its store open (`cairn serve`) can serve one; the
//! CLI starts such a server when none runs.

use std::sync::{Arc, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use fs_manager::{OpRecord, RegistryRead, RegistryWrite, WorktreeKind, WorktreeRecord};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::store::Access;

/// `cairn mount SNAP DIR [--read-only]` / `cairn mount DIR`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountOptions {
    /// The snapshot; without it, `dir` is a registered mount to attach again.
    #[serde(default)]
    pub snapshot: Option<String>,
    /// The mount point (an empty or missing directory).
    pub dir: Utf8PathBuf,
    /// Refuse every write.
    #[serde(default)]
    pub read_only: bool,
}

/// A mounted worktree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MountOutcome {
    /// Its root.
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub snapshot: Option<SnapshotId>,
    /// Whether writes are refused.
    pub read_only: bool,
}

/// `cairn unmount DIR [--materialize]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnmountOptions {
    /// The mounted worktree.
    pub dir: Utf8PathBuf,
    /// Leave an ordinary directory with the worktree's current files.
    #[serde(default)]
    pub materialize: bool,
}

/// An unmounted worktree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnmountOutcome {
    /// Its root.
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub snapshot: Option<SnapshotId>,
    /// Whether its files are now an ordinary directory there.
    pub materialized: bool,
}

fn mount_error(e: mount::MountError) -> Error {
    match e {
        mount::MountError::Unavailable { .. } => Error::usage("fuse_unavailable", e.to_string()),
        mount::MountError::NotEmpty { .. } => Error::usage("not_empty", e.to_string()),
        mount::MountError::Busy { .. } => Error::usage("mount_busy", e.to_string()),
        _ => Error::failure("mount", e.to_string()),
    }
}

impl Engine {
    /// Where the layer of the mount at `root` lives.
    pub(crate) fn layer_dir(&self, root: &Utf8Path) -> Utf8PathBuf {
        let key = blake3::hash(root.as_str().as_bytes()).to_hex();
        self.store_path().join("mounts").join(&key[..32])
    }

    /// `cairn mount SNAP DIR` / `cairn mount DIR`.
    pub fn mount(&self, call: &Call, options: MountOptions) -> Result<MountOutcome, Error> {
        let Some(shared) = self.shared_store() else {
            return Err(Error::usage(
                "needs_server",
                "a mount is served by the process holding the store: run it through `cairn serve` (the CLI starts one)",
            ));
        };
        let dir = call.path(&options.dir);
        mount::clear_stale(&dir);
        let store = self.store(Access::Write)?;
        let reader = store.reader()?;
        // A new mount point is made (and taken away again if the mount fails); so is a
        // registered mount's, gone since (a reboot cleared /tmp, say).
        // Before a mount point is made: never in or around the store.
        fs_manager::check_apart(&store, &dir)?;
        let missing = std::fs::symlink_metadata(&dir).is_err();
        let registered = || {
            reader
                .worktree(&dir)
                .ok()
                .flatten()
                .is_some_and(|r| r.kind == WorktreeKind::Mounted)
        };
        let made = missing && (options.snapshot.is_some() || registered());
        if made {
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::failure("io", format!("{dir}: {e}")))?;
        }
        let result = self.mount_at(call, &options, &store, reader, shared);
        if made && result.is_err() {
            let _ = std::fs::remove_dir(&dir);
        }
        result
    }

    fn mount_at(
        &self,
        call: &Call,
        options: &MountOptions,
        store: &cas::Store,
        reader: cas::Reader,
        shared: Arc<std::sync::RwLock<cas::Store>>,
    ) -> Result<MountOutcome, Error> {
        let dir = call.path(&options.dir);
        let root = crate::path::canonical_dir(&dir)?;
        fs_manager::check_apart(store, &root)?;
        let existing = reader.worktree(&root)?;
        let (head, fresh) = match (&options.snapshot, &existing) {
            (Some(_), Some(r)) => {
                return Err(Error::usage(
                    "worktree_exists",
                    format!("{root} is a registered {:?} worktree already", r.kind),
                ));
            }
            (Some(spec), None) => (Some(resolve_snapshot(&reader, &call.cwd, spec)?), true),
            (None, Some(r)) if r.kind == WorktreeKind::Mounted => {
                if self.mounts.is_live(&root) {
                    return Ok(MountOutcome {
                        worktree: root,
                        snapshot: r.head,
                        read_only: options.read_only,
                    });
                }
                (r.head, false)
            }
            (None, _) => {
                return Err(Error::usage(
                    "not_a_mount",
                    format!("{root} is not a mounted worktree (cairn mount SNAP {root})"),
                ));
            }
        };
        let (base, base_time) = match head {
            Some(h) => {
                let snap = reader.snapshot(h)?;
                let time = std::time::SystemTime::UNIX_EPOCH
                    + std::time::Duration::from_secs(snap.created.as_second().max(0) as u64);
                (Some(snap.tree), time)
            }
            None => (None, std::time::SystemTime::now()),
        };
        drop(reader);
        let layer = self.layer_dir(&root);
        if fresh {
            // Left by a worktree once mounted here and removed.
            let _ = std::fs::remove_dir_all(&layer);
        }
        let readers: mount::Readers = Arc::new(move || {
            shared
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .reader()
                .map_err(|e| e.to_string())
        });
        let mounted = mount::Mounted::start(
            mount::MountOptions {
                root: root.clone(),
                layer,
                base,
                base_time,
                read_only: options.read_only,
            },
            readers,
        )
        .map_err(mount_error)?;
        let mounted = Arc::new(mounted);
        if fresh {
            let record = WorktreeRecord {
                head,
                mount_base: head,
                ..WorktreeRecord::new(root.clone(), WorktreeKind::Mounted)
            };
            let mut batch = cas::WriteBatch::new();
            batch.put_worktree(&record)?;
            batch.append_op(&root, &OpRecord::new("mount", None, head))?;
            if let Err(e) = store.write(&batch) {
                let _ = mounted.unmount(true);
                return Err(e.into());
            }
        }
        self.worktrees.mounted(&root, mounted.clone());
        self.mounts.lock().insert(root.clone(), mounted);
        Ok(MountOutcome {
            worktree: root,
            snapshot: head,
            read_only: options.read_only,
        })
    }

    /// `cairn unmount DIR [--materialize]`.
    pub fn unmount(&self, call: &Call, options: UnmountOptions) -> Result<UnmountOutcome, Error> {
        let dir = call.path(&options.dir);
        let live = {
            let mounts = self.mounts.lock();
            mounts
                .keys()
                .find(|k| **k == dir || crate::path::canonical_dir(&dir).is_ok_and(|c| c == **k))
                .cloned()
        };
        let root = match &live {
            Some(root) => root.clone(),
            None => {
                mount::clear_stale(&dir);
                crate::path::canonical_dir(&dir)?
            }
        };
        let store = self.store(Access::Write)?;
        let record = store
            .reader()?
            .worktree(&root)?
            .filter(|r| r.kind == WorktreeKind::Mounted)
            .ok_or_else(|| {
                Error::usage("not_a_mount", format!("{root} is not a mounted worktree"))
            })?;
        let Some(mounted) = live.and_then(|r| self.mounts.lock().get(&r).cloned()) else {
            if options.materialize {
                return Err(Error::usage(
                    "not_mounted",
                    format!(
                        "{root} is not mounted: `cairn mount {root}` first, then unmount --materialize"
                    ),
                ));
            }
            return Ok(UnmountOutcome {
                worktree: root,
                snapshot: record.head,
                materialized: false,
            });
        };
        if !options.materialize {
            mounted.unmount(false).map_err(mount_error)?;
            self.forget_mount(&root);
            return Ok(UnmountOutcome {
                worktree: root,
                snapshot: record.head,
                materialized: false,
            });
        }
        // Copy what the mount shows next to it, unmount, and put the copy in its place.
        let parent = root.parent().unwrap_or(&root);
        let staging = tempfile::Builder::new()
            .prefix(".cairn-materialize-")
            .tempdir_in(parent)
            .map_err(|e| Error::failure("io", format!("{parent}: {e}")))?;
        copy_tree(root.as_std_path(), staging.path())
            .map_err(|e| Error::failure("io", format!("{root}: copying out: {e}")))?;
        if let Ok(m) = std::fs::metadata(&root) {
            let _ = std::fs::set_permissions(staging.path(), m.permissions());
        }
        mounted.unmount(false).map_err(mount_error)?;
        self.forget_mount(&root);
        let staged = staging.keep();
        std::fs::rename(&staged, &root).map_err(|e| {
            Error::failure(
                "io",
                format!("{root}: {e} (the files are in {})", staged.display()),
            )
        })?;
        let record = WorktreeRecord {
            kind: WorktreeKind::Isolated,
            identity: None,
            mount_base: None,
            ..record
        };
        let mut batch = cas::WriteBatch::new();
        batch.put_worktree(&record)?;
        batch.clear_file_states(&root);
        store.write(&batch)?;
        let _ = std::fs::remove_dir_all(self.layer_dir(&root));
        Ok(UnmountOutcome {
            worktree: root,
            snapshot: record.head,
            materialized: true,
        })
    }

    fn forget_mount(&self, root: &Utf8Path) {
        self.worktrees.unmounted(root);
        self.mounts.lock().remove(root);
    }

    /// How many mounts this engine serves.
    pub fn live_mounts(&self) -> usize {
        self.mounts.lock().values().filter(|m| m.is_live()).count()
    }

    /// Unmounts every mount (a server stopping); their layers stay for the next mount.
    pub fn unmount_all(&self) {
        let all: Vec<_> = self.mounts.lock().drain().collect();
        for (root, m) in all {
            self.worktrees.unmounted(&root);
            if let Err(e) = m.unmount(true) {
                tracing::warn!("{e}");
            }
        }
    }

    /// Whether the worktree at `root` is mounted here now.
    pub(crate) fn is_mounted(&self, root: &Utf8Path) -> bool {
        self.mounts.is_live(root)
    }
}

/// Copies the tree at `from` into the empty directory `to`: files with their permission
/// bits, symlinks as links, directories.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir(&dst)?;
            copy_tree(&src, &dst)?;
            let perm = std::fs::symlink_metadata(&src)?.permissions();
            std::fs::set_permissions(&dst, perm)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}
