//! `mount` and `unmount`: worktrees this engine serves itself (the `mount` crate), ready
//! at once. Only an engine that holds its store open (`cairn serve`) can serve one; the
//! CLI starts such a server when none runs.

use std::sync::{Arc, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use fs_manager::{OpRecord, RegistryRead, RegistryWrite, WorktreeKind, WorktreeRecord};
use serde::{Deserialize, Serialize};

use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::{Code, Error};
use crate::spec::{VerbSpec, verb, verbs};
use crate::store::{Access, Claim};

/// `cairn mount SNAP DIR [--read-only]` / `cairn mount DIR`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountOptions {
    /// Snapshot id prefix, ref or checkpoint name (leave out to attach a registered mount again).
    #[serde(default)]
    #[schemars(extend("x-snapshot" = true))]
    pub snapshot: Option<String>,
    /// The mount point: a new or empty directory, or a registered mount to attach again.
    #[schemars(with = "String")]
    pub dir: Utf8PathBuf,
    /// Refuse every write.
    #[serde(default)]
    pub read_only: bool,
}

/// A mounted worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MountOutcome {
    /// Its root.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub snapshot: Option<SnapshotId>,
    /// Whether writes are refused.
    pub read_only: bool,
}

/// `cairn unmount DIR [--materialize]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnmountOptions {
    /// The mounted worktree.
    #[schemars(with = "String")]
    pub dir: Utf8PathBuf,
    /// Leave an ordinary directory with the current files.
    #[serde(default)]
    pub materialize: bool,
}

/// An unmounted worktree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UnmountOutcome {
    /// Its root.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// Its head.
    pub snapshot: Option<SnapshotId>,
    /// Whether its files are now an ordinary directory there.
    pub materialized: bool,
}

/// The hidden subcommand of the binary serving mounts (`cairn __materialize-copy FROM
/// TO`) that `unmount --materialize` runs to copy a mount's files out in a process of its
/// own; the binary routes it to [`materialize_copy`].
pub const MATERIALIZE_COPY: &str = mount::COPY_COMMAND;

/// The copy [`MATERIALIZE_COPY`] runs: the tree at `from` into the empty directory `to`.
pub fn materialize_copy(from: &std::path::Path, to: &std::path::Path) -> Result<(), Error> {
    mount::copy_tree(from, to).map_err(|e| MountsError::Copy(e).into())
}

fn mount_error(e: mount::MountError) -> Error {
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
            E::NeedsServer => Code::NeedsServer,
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

    /// `cairn mount SNAP DIR` / `cairn mount DIR`. Calls for one directory run one after
    /// the other.
    pub fn mount(&self, call: &Call, options: MountOptions) -> Result<MountOutcome, Error> {
        let Some(shared) = self.shared_store() else {
            return Err(MountsError::NeedsServer.into());
        };
        let dir = call.path(&options.dir);
        let mut claim = self.mounts.claim(&dir);
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
        let made = if missing && (options.snapshot.is_some() || registered()) {
            MadeDirs::create(&dir)?
        } else {
            MadeDirs::default()
        };
        let result = self.mount_at(call, &options, &store, reader, shared, &mut claim);
        if result.is_err() {
            made.remove();
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
        claim: &mut Claim<'_>,
    ) -> Result<MountOutcome, Error> {
        let dir = call.path(&options.dir);
        let root = crate::path::canonical_dir(&dir)?;
        claim_also(claim, &root)?;
        fs_manager::check_apart(store, &root)?;
        let existing = reader.worktree(&root)?;
        let layer = self.layer_dir(&root);
        let (head, fresh, read_only) = match (&options.snapshot, existing) {
            (Some(_), Some(r)) => {
                return Err(MountsError::WorktreeExists { root, kind: r.kind }.into());
            }
            (Some(spec), None) => (
                Some(resolve_snapshot(&reader, &call.cwd, spec)?),
                true,
                options.read_only,
            ),
            (None, Some(r)) if r.kind == WorktreeKind::Mounted => {
                if let Some(live) = self.mounts.get(&root).filter(|m| m.is_live()) {
                    return Ok(MountOutcome {
                        worktree: root,
                        snapshot: r.head,
                        read_only: live.read_only(),
                    });
                }
                drop(reader);
                if self.recover_materialize(store, &r)? {
                    return Err(MountsError::Materialized { root }.into());
                }
                (r.head, false, r.mount_read_only || options.read_only)
            }
            (None, _) => {
                return Err(MountsError::NotAMountToAttach { root }.into());
            }
        };
        let reader = store.reader()?;
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
        if fresh {
            // Left by a worktree once mounted here and removed.
            self.drop_layer(&root);
        }
        let readers: mount::Readers = Arc::new(move || {
            shared
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .reader()
        });
        let mounted = mount::Mounted::start(
            mount::FuseMountOptions {
                root: root.clone(),
                layer,
                base,
                base_time,
                read_only,
            },
            readers,
        )
        .map_err(mount_error)?;
        let mounted = Arc::new(mounted);
        if fresh {
            let record = WorktreeRecord {
                head,
                mount_base: head,
                mount_read_only: read_only,
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
        self.mounts.insert(root.clone(), mounted);
        Ok(MountOutcome {
            worktree: root,
            snapshot: head,
            read_only,
        })
    }

    /// `cairn unmount DIR [--materialize]`. Calls for one directory run one after the
    /// other, and after any `mount` of it.
    pub fn unmount(&self, call: &Call, options: UnmountOptions) -> Result<UnmountOutcome, Error> {
        let dir = call.path(&options.dir);
        let mut claim = self.mounts.claim(&dir);
        self.unmount_claimed(&dir, options.materialize, &mut claim)
    }

    /// [`Engine::unmount`] of `dir`, claimed by the caller.
    pub(crate) fn unmount_claimed(
        &self,
        dir: &Utf8Path,
        materialize: bool,
        claim: &mut Claim<'_>,
    ) -> Result<UnmountOutcome, Error> {
        let dir = dir.to_owned();
        let root = if self.mounts.get(&dir).is_some() {
            dir.clone()
        } else {
            mount::clear_stale(&dir);
            crate::path::canonical_dir(&dir)?
        };
        claim_also(claim, &root)?;
        let store = self.store(Access::Write)?;
        let record = store
            .reader()?
            .worktree(&root)?
            .filter(|r| r.kind == WorktreeKind::Mounted)
            .ok_or_else(|| MountsError::NotAMount { root: root.clone() })?;
        let mounted = match self.mounts.get(&root) {
            Some(m) if m.is_live() => m,
            stale => {
                if stale.is_some() {
                    self.forget_mount(&root);
                }
                // What a server killed during a materialize left is finished or undone.
                if self.recover_materialize(&store, &record)? {
                    return Ok(UnmountOutcome {
                        worktree: root,
                        snapshot: record.head,
                        materialized: true,
                    });
                }
                if materialize {
                    return Err(MountsError::NotMounted { root }.into());
                }
                return Ok(UnmountOutcome {
                    worktree: root,
                    snapshot: record.head,
                    materialized: false,
                });
            }
        };
        if !materialize {
            mounted.unmount(false).map_err(mount_error)?;
            self.forget_mount(&root);
            return Ok(UnmountOutcome {
                worktree: root,
                snapshot: record.head,
                materialized: false,
            });
        }
        // The mount's files are copied into the directory it covers; unmounting shows them.
        mounted.materialize().map_err(mount_error)?;
        self.forget_mount(&root);
        self.finish_materialize(&store, &record)?;
        Ok(UnmountOutcome {
            worktree: root,
            snapshot: record.head,
            materialized: true,
        })
    }

    /// Finishes or undoes a materialize of the mounted worktree `record` that a killed
    /// server left; true if finished (the worktree is an ordinary directory now).
    fn recover_materialize(
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
    fn finish_materialize(&self, store: &cas::Store, record: &WorktreeRecord) -> Result<(), Error> {
        let root = &record.root;
        let record = WorktreeRecord {
            kind: WorktreeKind::Isolated,
            identity: None,
            mount_base: None,
            mount_read_only: false,
            ..record.clone()
        };
        let mut batch = cas::WriteBatch::new();
        batch.put_worktree(&record)?;
        batch.clear_file_states(root);
        store.write(&batch)?;
        self.drop_layer(root);
        Ok(())
    }

    fn forget_mount(&self, root: &Utf8Path) {
        self.worktrees.unmounted(root);
        // Dropped here, not under the map's lock.
        let forgotten = self.mounts.remove(root);
        drop(forgotten);
    }

    /// How many mounts this engine serves.
    pub fn live_mounts(&self) -> usize {
        self.mounts.live_count()
    }

    /// Unmounts every mount (a server stopping); their layers stay for the next mount.
    pub fn unmount_all(&self) {
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
fn claim_also(claim: &mut Claim<'_>, root: &Utf8Path) -> Result<(), Error> {
    if claim.also(root) {
        Ok(())
    } else {
        Err(MountsError::Busy {
            root: root.to_owned(),
        }
        .into())
    }
}

/// The directories a `mount` made for its mount point (the point and the parents it
/// lacked), each with its identity, to take away again if the mount fails.
#[derive(Default)]
struct MadeDirs(Vec<(Utf8PathBuf, fs_manager::DirIdentity)>);

impl MadeDirs {
    /// Makes `dir` and its missing parents, outermost first.
    fn create(dir: &Utf8Path) -> Result<MadeDirs, Error> {
        let missing: Vec<&Utf8Path> = dir
            .ancestors()
            .take_while(|d| std::fs::symlink_metadata(d).is_err())
            .collect();
        let mut made = MadeDirs::default();
        for d in missing.into_iter().rev() {
            match std::fs::create_dir(d) {
                Ok(()) => {
                    if let Some(id) = identity(d) {
                        made.0.push((d.to_owned(), id));
                    }
                }
                // Made by someone else meanwhile: theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    made.remove();
                    return Err(crate::error::io_failure(d, e));
                }
            }
        }
        Ok(made)
    }

    /// Removes what [`MadeDirs::create`] made, innermost first: only directories that are
    /// still the ones it made and are empty.
    fn remove(self) {
        for (d, id) in self.0.into_iter().rev() {
            if identity(&d) == Some(id) {
                let _ = std::fs::remove_dir(&d);
            }
        }
    }
}

/// The directory at `path` (not through a symlink at its end).
fn identity(path: &Utf8Path) -> Option<fs_manager::DirIdentity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    m.is_dir().then(|| fs_manager::DirIdentity {
        dev: m.dev(),
        ino: m.ino(),
    })
}

// What each verb of this module says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Mount a snapshot as a copy-on-write worktree, ready at once: files are read from the store when first opened and writes stay in the worktree's own layer; snapshot, status, diff and rollback work on it as on any worktree. Without a snapshot, attaches a registered mount again (its layer keeps every change).
    Mount(MountOptions) -> MountOutcome = "mount" via mount [Route, Tool];
    /// Unmount a mounted worktree; its layer stays, so a later mount brings every change back. With materialize: leave an ordinary directory with the worktree's current files instead.
    Unmount(UnmountOptions) -> UnmountOutcome = "unmount" via unmount [Route, Tool];
}

impl VerbSpec for verbs::Mount {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options.snapshot.as_deref().into_iter().collect()
    }

    const EXAMPLE: Option<&'static str> = Some(r#"{"snapshot": "base", "dir": "/tmp/agent-1"}"#);
}

impl VerbSpec for verbs::Unmount {
    const EXAMPLE: Option<&'static str> = Some(r#"{"dir": "/tmp/agent-1", "materialize": false}"#);
}
