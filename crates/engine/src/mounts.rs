//! What `mount` and `unmount` share: worktrees this engine serves itself (the `mount`
//! crate), their layers, their errors, and the materialize a killed server left. Only an
//! engine that holds its store open (`cairn serve`) can serve one; the CLI starts such a
//! server when none runs.

use camino::{Utf8Path, Utf8PathBuf};
use fs_manager::{RegistryWrite, WorktreeKind, WorktreeRecord};

use crate::engine::Engine;
use crate::error::{Code, Error};
use crate::store::Claim;

/// The hidden subcommand of the binary serving mounts (`cairn __materialize-copy FROM
/// TO`) that `unmount --materialize` runs to copy a mount's files out in a process of its
/// own; the binary routes it to [`materialize_copy`].
pub const MATERIALIZE_COPY: &str = mount::COPY_COMMAND;

/// The copy [`MATERIALIZE_COPY`] runs: the tree at `from` into the empty directory `to`.
pub fn materialize_copy(from: &std::path::Path, to: &std::path::Path) -> Result<(), Error> {
    mount::copy_tree(from, to).map_err(|e| MountsError::Copy(e).into())
}

pub(crate) fn mount_error(e: mount::MountError) -> Error {
    MountsError::Mount(e).into()
}

/// Why a mount or unmount is refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountsError {
    /// An engine that does not hold its store open.
    #[error(
        "a mount is served by the process holding the store: run it through `cairn serve` (the CLI starts one)"
    )]
    NeedsServer,
    /// A `mount` sent to a server that is stopping (it had nothing left to serve).
    #[error(
        "the server of this store is stopping (it had no mount left): `cairn mount` starts another"
    )]
    Stopping,
    /// Mounting a new snapshot on a registered worktree.
    #[error("{root} is a registered {kind:?} worktree already")]
    WorktreeExists {
        /// The worktree.
        root: Utf8PathBuf,
        /// What kind.
        kind: WorktreeKind,
    },
    /// Mounting again what an interrupted `unmount --materialize` has now made files.
    #[error(
        "{root}: an `unmount --materialize` of it was interrupted and is now finished: it is an ordinary worktree with its files"
    )]
    Materialized {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// Mounting again a directory that is no mounted worktree.
    #[error("{root} is not a mounted worktree (cairn mount SNAP {root})")]
    NotAMountToAttach {
        /// The directory.
        root: Utf8PathBuf,
    },
    /// Unmounting a directory that is no mounted worktree.
    #[error("{root} is not a mounted worktree")]
    NotAMount {
        /// The directory.
        root: Utf8PathBuf,
    },
    /// Materializing a mount not served now.
    #[error("{root} is not mounted: `cairn mount {root}` first, then unmount --materialize")]
    NotMounted {
        /// The worktree.
        root: Utf8PathBuf,
    },
    /// Another call on the same directory.
    #[error("{root}: another mount or unmount of it is under way; try again")]
    Busy {
        /// The directory.
        root: Utf8PathBuf,
    },
    /// What the `mount` crate said.
    #[error(transparent)]
    Mount(mount::MountError),
    /// Copying a mount's files out failed.
    #[error(transparent)]
    Copy(mount::CopyError),
}

crate::error::coded!(MountsError);

impl MountsError {
    /// Its code.
    pub fn code(&self) -> Code {
        use MountsError as E;
        match self {
            E::NeedsServer | E::Stopping => Code::NeedsServer,
            E::WorktreeExists { .. } => Code::WorktreeExists,
            E::Materialized { .. } | E::NotAMountToAttach { .. } | E::NotAMount { .. } => {
                Code::NotAMount
            }
            E::NotMounted { .. } => Code::NotMounted,
            E::Busy { .. } => Code::MountBusy,
            E::Mount(mount::MountError::Unavailable { .. }) => Code::FuseUnavailable,
            E::Mount(mount::MountError::NotEmpty { .. }) => Code::NotEmpty,
            E::Mount(mount::MountError::Busy { .. }) => Code::MountBusy,
            E::Mount(_) => Code::Mount,
            E::Copy(_) => Code::Io,
        }
    }
}

impl Engine {
    /// Where the layer of the mount at `root` lives.
    pub(crate) fn layer_dir(&self, root: &Utf8Path) -> Utf8PathBuf {
        let key = blake3::hash(root.as_str().as_bytes()).to_hex();
        self.store_path().join("mounts").join(&key[..32])
    }

    /// Removes the layer of the mount at `root` (and what a materialize kept beside it).
    pub(crate) fn drop_layer(&self, root: &Utf8Path) {
        let layer = self.layer_dir(root);
        let _ = std::fs::remove_dir_all(&layer);
        if let Err(e) = mount::materialized(&layer) {
            tracing::warn!("{layer}: {e}");
        }
    }

    /// Finishes or undoes a materialize of the mounted worktree `record` that a killed
    /// server left; true if finished (the worktree is an ordinary directory now).
    pub(crate) fn recover_materialize(
        &self,
        store: &cas::Store,
        record: &WorktreeRecord,
    ) -> Result<bool, Error> {
        let layer = self.layer_dir(&record.root);
        match mount::recover_materialize(&record.root, &layer).map_err(mount_error)? {
            mount::Recovered::Finished => {
                self.finish_materialize(store, record)?;
                Ok(true)
            }
            mount::Recovered::Nothing | mount::Recovered::RolledBack => Ok(false),
        }
    }

    /// Registers a materialized mount as the ordinary directory it is now, and drops its
    /// layer (its marker last: until then a recovery can finish this again).
    pub(crate) fn finish_materialize(
        &self,
        store: &cas::Store,
        record: &WorktreeRecord,
    ) -> Result<(), Error> {
        let root = &record.root;
        let record = WorktreeRecord {
            kind: WorktreeKind::Isolated,
            identity: None,
            mount_base: None,
            mount_read_only: false,
            mount_remote: None,
            ..record.clone()
        };
        let mut batch = cas::WriteBatch::new();
        batch.put_worktree(&record)?;
        batch.clear_file_states(root);
        store.write(&batch)?;
        self.drop_layer(root);
        Ok(())
    }

    pub(crate) fn forget_mount(&self, root: &Utf8Path) {
        self.lazy.stop_prefetch(root);
        self.worktrees.unmounted(root);
        // Dropped here, not under the map's lock.
        let forgotten = self.mounts.remove(root);
        drop(forgotten);
    }

    /// How many mounts this engine serves.
    pub fn live_mounts(&self) -> usize {
        self.mounts.live_count()
    }

    /// Forgets the mounts whose session ended on its own (unmounted from outside): their
    /// layers are synced, their `/dev/fuse` and files let go of, and `worktree list` shows
    /// them not live. A mount a call is working on is left to that call.
    pub fn forget_ended_mounts(&self) {
        for root in self.mounts.not_live() {
            let Some(_claim) = self.mounts.try_claim(&root) else {
                continue;
            };
            if self.mounts.get(&root).is_some_and(|m| !m.is_live()) {
                self.forget_mount(&root);
            }
        }
    }

    /// Unmounts every mount (a server stopping); their layers stay for the next mount.
    pub fn unmount_all(&self) {
        self.lazy.stop_all();
        for (root, m) in self.mounts.take_all() {
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

/// Claims `root` as well as the name a call gave (when they differ).
pub(crate) fn claim_also(claim: &mut Claim<'_>, root: &Utf8Path) -> Result<(), Error> {
    if claim.also(root) {
        Ok(())
    } else {
        Err(MountsError::Busy {
            root: root.to_owned(),
        }
        .into())
    }
}
