//! `mount`: a snapshot as a worktree this engine serves itself (the `mount` crate), ready at
//! once. Only an engine that holds its store open (`cairn serve`) can serve one; the CLI
//! starts such a server when none runs.

use std::sync::{Arc, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use fs_manager::{
    AttachedLayer, OpRecord, RegistryRead, RegistryWrite, WorktreeKind, WorktreeRecord,
};
use serde::{Deserialize, Serialize};

use crate::deps::AttachedDeps;
use crate::engine::{Call, Engine, resolve_snapshot};
use crate::error::Error;
use crate::mounts::{MountsError, claim_also, mount_error};
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
    /// For a snapshot read from a remote: fetch the rest of its files in the background
    /// (`worktree list` shows how far it is).
    #[serde(default)]
    pub prefetch: bool,
    /// Leave out the dependency layers the snapshot's lockfiles name (with a snapshot: a
    /// mount attached again shows those it was made with).
    #[serde(default)]
    pub no_deps: bool,
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
    /// The remote its files are fetched from when first read (a snapshot the store
    /// lacked, or whose files it lacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The dependency layers shown in it, each read-only under the worktree's own layer
    /// (what is written there stays in the worktree, never in the layer); never captured.
    #[serde(default)]
    pub deps: Vec<AttachedDeps>,
}

/// How a re-attached mount names a layer its record keeps: numbers from the layer's record
/// if the store still has it (0 if `deps rm` removed it since; the tree stays in the
/// worktree record).
fn shown(reader: &cas::Reader, attached: &AttachedLayer) -> Result<AttachedDeps, Error> {
    let (files, bytes) =
        crate::deps::record(reader, &attached.key)?.map_or((0, 0), |r| (r.files, r.bytes));
    Ok(AttachedDeps {
        path: attached.path.clone(),
        key: attached.key.clone(),
        files,
        bytes,
        cloned: None,
    })
}

impl Engine {
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
        let mut remote = None;
        // The layers of a mount attached again are its record's.
        let mut attached: Vec<AttachedLayer> = Vec::new();
        let (head, fresh, read_only) = match (&options.snapshot, existing) {
            (Some(_), Some(r)) => {
                return Err(MountsError::WorktreeExists { root, kind: r.kind }.into());
            }
            (Some(spec), None) => {
                let head = match resolve_snapshot(&reader, &call.cwd, spec) {
                    Ok(id) => id,
                    // A snapshot the store lacks: its trees now, its files when read.
                    Err(e) if matches!(e.code(), "unknown_id" | "unknown_ref") => {
                        drop(reader);
                        match self.fetch_trees_named(call, store, &shared, spec)? {
                            Some((id, at)) => {
                                remote = Some(at);
                                id
                            }
                            None => return Err(e),
                        }
                    }
                    Err(e) => return Err(e),
                };
                (Some(head), true, options.read_only)
            }
            (None, Some(r)) if r.kind == WorktreeKind::Mounted => {
                if let Some(live) = self.mounts.get(&root).filter(|m| m.is_live()) {
                    let deps = (r.deps.iter())
                        .map(|a| shown(&reader, a))
                        .collect::<Result<_, _>>()?;
                    return Ok(MountOutcome {
                        worktree: root,
                        snapshot: r.head,
                        read_only: live.read_only(),
                        remote: r.mount_remote,
                        deps,
                    });
                }
                attached = r.deps.clone();
                drop(reader);
                if self.recover_materialize(store, &r)? {
                    return Err(MountsError::Materialized { root }.into());
                }
                remote = r.mount_remote.clone();
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
        if remote.is_none() && fresh {
            // A snapshot here whose files another mount left on a remote.
            remote = base
                .map(|t| promised_remote(&reader, t))
                .transpose()?
                .flatten();
        }
        let deps = match head {
            // Found from the snapshot's lockfiles: one tree read, no walk of a layer.
            Some(h) if fresh && !options.no_deps => {
                drop(reader);
                let planned = crate::deps::plan(store, h, &root)?;
                attached = planned.iter().map(crate::deps::Attach::attached).collect();
                planned.iter().map(AttachedDeps::of).collect()
            }
            _ => {
                let kept = (attached.iter())
                    .map(|a| shown(&reader, a))
                    .collect::<Result<_, _>>()?;
                drop(reader);
                kept
            }
        };
        if fresh {
            // Left by a worktree once mounted here and removed.
            self.drop_layer(&root);
        }
        let lazy: Arc<dyn mount::Lazy> = Arc::new(crate::lazy::MountSource {
            shared: shared.clone(),
            remotes: self.lazy.clone(),
            offline: call.offline,
        });
        let held = shared.clone();
        let readers: mount::Readers =
            Arc::new(move || held.read().unwrap_or_else(PoisonError::into_inner).reader());
        let mounted = mount::Mounted::start(
            mount::FuseMountOptions {
                root: root.clone(),
                layer,
                base,
                base_time,
                read_only,
                lazy: Some(lazy),
                grafts: grafts(&attached),
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
                mount_remote: remote.clone(),
                deps: attached,
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
        if options.prefetch
            && !call.offline
            && let (Some(at), Some(tree)) = (&remote, base)
        {
            let source = self.lazy.source(&shared, store, at)?;
            self.lazy.start_prefetch(&root, source, tree);
        }
        Ok(MountOutcome {
            worktree: root,
            snapshot: head,
            read_only,
            remote,
            deps,
        })
    }
}

/// The dependency layers `attached` as a mount shows them: each a read-only lower layer.
pub(crate) fn grafts(attached: &[AttachedLayer]) -> Vec<mount::Graft> {
    (attached.iter())
        .map(|a| mount::Graft {
            path: a.path.clone(),
            tree: a.tree,
        })
        .collect()
}

/// The remote promising a blob of tree `root`, if any: the first met of the first few
/// blobs looked at (a lazily fetched snapshot's blobs are all promised by its remote).
fn promised_remote(reader: &cas::Reader, root: cas::TreeId) -> Result<Option<String>, Error> {
    const LOOKED_AT: usize = 256;
    let mut trees = std::collections::VecDeque::from([root]);
    let mut looked = 0;
    while let Some(t) = trees.pop_front() {
        for entry in reader.tree(t)?.entries() {
            match (entry.blob(), entry.tree()) {
                (Some(b), _) if !reader.has_blob(b)? => {
                    return Ok(reader.promised(b.into())?);
                }
                (_, Some(t)) => trees.push_back(t),
                _ => {}
            }
            looked += 1;
            if looked >= LOOKED_AT {
                return Ok(None);
            }
        }
    }
    Ok(None)
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

// What the verb says of itself beyond its types (see `VerbSpec`).

verb! {
    /// Mount a snapshot as a copy-on-write worktree, ready at once: files are read from the store when first opened and writes stay in the worktree's own layer; snapshot, status, diff and rollback work on it as on any worktree. Without a snapshot, attaches a registered mount again (its layer keeps every change).
    Mount(MountOptions) -> MountOutcome = "mount" via mount [Route, Tool];
}

impl VerbSpec for verbs::Mount {
    fn named_snapshots(options: &Self::Options) -> Vec<&str> {
        options.snapshot.as_deref().into_iter().collect()
    }

    const EXAMPLE: Option<&'static str> = Some(r#"{"snapshot": "base", "dir": "/tmp/agent-1"}"#);
}
