//! Changing many files as one step. Before the first file changes, an intent journal goes
//! into the store: the tree the changed paths must end up as, and the registry record and
//! op-log entry to commit afterwards. New contents are first written into a staging folder
//! at the worktree root (an I/O error there changes nothing), then renamed into place. If
//! the process dies part way, the journal stays; every command on the worktree refuses
//! until [`recover`](crate::recover::recover) finishes the step.

use crate::kept::Kept;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use worktree_registry::{RegistryRead, RegistryWrite};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Reader, Store, TreeId, WriteBatch};
use rayon::prelude::*;
use rustix::fs::AtFlags;
use rustix::io::Errno;
use worktree_registry::{OpRecord, WorktreeRecord};

use crate::fsops::{self, WriteFailure};
use crate::pending::Pending;
use path_policy::{RepoPath, RepoPathBuf};
use worktree_scope::dirstate::{self, DirState};
use worktree_scope::file_state::{FileState, now_ns};

/// What the store holds while a step is under way.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Journal {
    /// The command (`rewind`, `undo`, `checkout`, ...).
    pub op: String,
    /// The process that ran it: its temporary names start `.cairn-<pid>-`.
    pub pid: u32,
    /// The staging folder at the worktree root, if one was made.
    pub staging: Option<String>,
    /// What the paths must end up as.
    pub target: TreeId,
    /// The paths that change; `None`: every file of `target` (a checkout). Raw bytes, as
    /// the stored journal holds them (nothing checked them when read back): `recover`
    /// writes them only beneath the worktree's [`path_policy::Root`].
    pub paths: Option<Vec<Vec<u8>>>,
    /// The registry record once done.
    pub record: WorktreeRecord,
    /// The op-log entry once done.
    pub entry: Option<OpRecord>,
    /// When it started.
    pub started: jiff::Timestamp,
}

impl Journal {
    pub(crate) fn encode(&self) -> Result<Vec<u8>, cas::WriteError> {
        serde_json::to_vec(self).map_err(|e| cas::WriteError::Encode {
            what: format!("intent journal for {}", self.record.root),
            source: e,
        })
    }

    pub(crate) fn decode(
        root: &Utf8Path,
        bytes: &[u8],
    ) -> Result<Journal, worktree_registry::RegistryError> {
        serde_json::from_slice(bytes).map_err(|e| worktree_registry::RegistryError::Corrupt {
            root: root.to_owned(),
            reason: format!("intent journal: {e}"),
            source: Some(e),
        })
    }
}

/// An operation on this worktree was interrupted and must be recovered first.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "worktree {root}: an interrupted {op} (started {started}) left it half done; run `cairn recover {root}` to finish it"
)]
pub struct Interrupted {
    /// The worktree.
    pub root: Utf8PathBuf,
    /// The command that was interrupted.
    pub op: String,
    /// When it started.
    pub started: jiff::Timestamp,
}

/// Refuses if an interrupted step of worktree `root` awaits recovery.
pub(crate) fn ensure_clear(reader: &Reader, root: &Utf8Path) -> Result<(), JournalCheck> {
    match reader.journal(root)? {
        None => Ok(()),
        Some(bytes) => {
            // Any journal stops the worktree, a `merge --checkout`'s too: only what every
            // journal has is read.
            #[derive(serde::Deserialize)]
            struct Header {
                op: String,
                started: jiff::Timestamp,
            }
            let j: Header = serde_json::from_slice(&bytes).map_err(|e| {
                worktree_registry::RegistryError::Corrupt {
                    root: root.to_owned(),
                    reason: format!("intent journal: {e}"),
                    source: Some(e),
                }
            })?;
            Err(JournalCheck::Interrupted(Interrupted {
                root: root.to_owned(),
                op: j.op,
                started: j.started,
            }))
        }
    }
}

/// The interrupted step pending at `path` or a folder above it, registered or not (an
/// interrupted checkout registers its destination only when finished).
pub(crate) fn pending_at(ws: &Kept, reader: &Reader, path: &Utf8Path) -> Result<(), JournalCheck> {
    let canonical = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok());
    for dir in path
        .ancestors()
        .chain(canonical.iter().flat_map(|c| c.ancestors()))
    {
        // A step this process is running (a checkout under way) is not interrupted.
        if !ws.locks.is_busy(dir) {
            ensure_clear(reader, dir)?;
        }
    }
    Ok(())
}

/// Why [`ensure_clear`] refused.
#[derive(Debug)]
pub(crate) enum JournalCheck {
    Interrupted(Interrupted),
    Registry(worktree_registry::RegistryError),
    Store(cas::StoreError),
}

impl From<cas::StorageFailure> for JournalCheck {
    fn from(e: cas::StorageFailure) -> Self {
        JournalCheck::Store(cas::ReadError::from(e).into())
    }
}

impl From<worktree_registry::RegistryError> for JournalCheck {
    fn from(e: worktree_registry::RegistryError) -> Self {
        JournalCheck::Registry(e)
    }
}

/// The file-level changes of one step.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// Files and symlinks to remove.
    pub deleted: Vec<RepoPathBuf>,
    /// Files and symlinks to write, in tree order.
    pub writes: Vec<(RepoPathBuf, diff::FileEntry)>,
}

impl Plan {
    /// The plan that turns the `old` side of `changes` into the `new` side.
    pub fn from_changes(changes: &[diff::TreeChange]) -> Plan {
        let mut plan = Plan::default();
        for c in changes {
            match c.new {
                Some(n) => plan.writes.push((c.path.clone(), n)),
                None => plan.deleted.push(c.path.clone()),
            }
        }
        plan.writes.sort_by(|a, b| a.0.cmp(&b.0));
        plan
    }

    /// Every path the plan touches, in tree order.
    pub fn paths(&self) -> Vec<RepoPathBuf> {
        let mut all: Vec<RepoPathBuf> = self
            .deleted
            .iter()
            .cloned()
            .chain(self.writes.iter().map(|(p, _)| p.clone()))
            .collect();
        all.sort();
        all
    }
}

/// Applying a step failed. Unless `interrupted` is set, nothing changed on disk.
#[derive(Debug)]
pub struct ApplyFailure {
    /// What failed.
    pub cause: WriteFailure,
    /// Set when files had started to change: the journal stays for `recover`.
    pub interrupted: bool,
}

/// A multi-file step under way in one worktree: its intent journal is stored, so
/// [`recover`](crate::recover::recover) finishes it if this process dies before
/// [`Step::finish`]. Checkout and every rollback-like operation write through one.
pub(crate) struct Step<'s> {
    store: &'s Store,
    root: Utf8PathBuf,
}

impl<'s> Step<'s> {
    /// Stores `journal` for `root`, together with `first` (all or nothing). If the journal
    /// cannot be stored, `first` still is, on its own.
    pub(crate) fn begin(
        store: &'s Store,
        root: &Utf8Path,
        journal: &Journal,
        mut first: Pending<'_>,
    ) -> Result<Step<'s>, WriteFailure> {
        match journal.encode() {
            Ok(encoded) => first.set_journal(root, encoded),
            Err(e) => {
                let _ = first.commit(store);
                return Err(WriteFailure::Record(e.into()));
            }
        }
        first
            .commit(store)
            .map_err(|e| WriteFailure::Record(e.into()))?;
        Ok(Step {
            store,
            root: root.to_owned(),
        })
    }

    /// Drops the journal: nothing of the step is on disk after all. False if even that
    /// failed (the journal stays, and recover finishes the step).
    pub(crate) fn abandon(&self) -> bool {
        let mut batch = WriteBatch::new();
        batch.set_journal(&self.root, None);
        self.store.write(&batch).is_ok()
    }

    /// Records the step's result, `batch` (the worktree's record, its op-log entry, the stat
    /// cache of what was written), and drops the journal, in one transaction.
    pub(crate) fn finish(&self, mut batch: WriteBatch) -> Result<(), cas::WriteError> {
        batch.set_journal(&self.root, None);
        self.store.write(&batch).map(drop)
    }
}

fn staging_name() -> String {
    format!(".cairn-staging-{}-{}", std::process::id(), now_ns())
}

/// Makes `plan` happen in worktree `record.root` and records `record` and `entry`, as one
/// step that [`recover`](crate::recover::recover) finishes if the process dies part way. `target` is the tree the
/// changed paths end up as. `first` is committed with the intent journal; every object the
/// record and entry name must be stored already or be in it.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    ws: &Kept,
    store: &Store,
    op: &str,
    target: TreeId,
    plan: &Plan,
    record: WorktreeRecord,
    entry: Option<OpRecord>,
    first: Pending<'_>,
) -> Result<(), ApplyFailure> {
    let root = record.root.clone();
    let fail = |cause: WriteFailure| ApplyFailure {
        cause,
        interrupted: false,
    };
    let store_failure = WriteFailure::Record;
    // Refused before the journal: whatever came first (a live capture) is still kept.
    let refuse = |first: Pending<'_>, cause: WriteFailure| {
        let _ = first.commit(store);
        fail(cause)
    };
    let handle = match path_policy::Root::open(root.as_std_path()) {
        Ok(handle) => handle,
        Err(e) => return Err(refuse(first, WriteFailure::from(e))),
    };
    let staging = (!plan.writes.is_empty()).then(staging_name);
    let journal = Journal {
        op: op.to_owned(),
        pid: std::process::id(),
        staging: staging.clone(),
        target,
        // Bytes on disk, as before the path type.
        paths: Some(
            plan.paths()
                .into_iter()
                .map(RepoPathBuf::into_bytes)
                .collect(),
        ),
        record: record.clone(),
        entry: entry.clone(),
        started: jiff::Timestamp::now(),
    };
    let step = Step::begin(store, &root, &journal, first).map_err(fail)?;
    // Nothing changed on disk: drop the journal, or, if even that fails, leave it and say
    // so (recover then finishes the step).
    let forget_journal = |cause: WriteFailure| ApplyFailure {
        cause,
        interrupted: !step.abandon(),
    };

    // 1. Stage every new content. Nothing visible has changed yet.
    let reader = store
        .reader()
        .map_err(|e| fail(store_failure(cas::ReadError::from(e).into())))?;
    let staged = match &staging {
        None => Ok(None),
        Some(name) => stage(&handle, name, &plan.writes, &reader).map(Some),
    };
    let staged = match staged {
        Ok(s) => s,
        Err(cause) => {
            if let Some(name) = &staging {
                remove_staging(&handle, name);
            }
            return Err(forget_journal(cause));
        }
    };

    // 2. Swap: deletions deepest first, then renames in tree order.
    let interrupted = |cause| ApplyFailure {
        cause,
        interrupted: true,
    };
    let mut order = plan.deleted.clone();
    order.sort_by(|a, b| b.cmp(a));
    for p in &order {
        fsops::remove(&handle, p.as_bytes()).map_err(interrupted)?;
    }
    let mut states = Vec::with_capacity(plan.writes.len());
    if let (Some(staging_fd), Some(name)) = (&staged, &staging) {
        for (i, (path, e)) in plan.writes.iter().enumerate() {
            let (dir_rel, leaf) = path.split_parent();
            let dir_rel = dir_rel.as_bytes();
            let p = path.as_bytes();
            fsops::ensure_dir(&handle, dir_rel).map_err(interrupted)?;
            fsops::remove_empty_dir(&handle, p).map_err(interrupted)?;
            let dir = handle
                .open_dir(dir_rel)
                .map_err(|e| interrupted(e.into()))?;
            let staged_name = i.to_string();
            let leaf = OsStr::from_bytes(leaf);
            fsops::fault(&handle, p).map_err(interrupted)?;
            let stat = match rustix::fs::renameat(staging_fd, staged_name.as_str(), &dir, leaf) {
                Ok(()) => rustix::fs::statat(&dir, leaf, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| worktree_scope::file_state::Stat::from_rustix(&st))
                    .map_err(|e| interrupted(WriteFailure::Io(handle.display(p), e.into())))?,
                // Another file system below the root: write it in place instead.
                Err(Errno::XDEV) => fsops::replace(&handle, p, e.kind, e.id.as_blob(), &reader)
                    .map_err(interrupted)?,
                Err(e) => {
                    return Err(interrupted(WriteFailure::Io(handle.display(p), e.into())));
                }
            };
            states.push((
                path.as_repo_path(),
                FileState::from_stat(&stat, e.id.as_blob(), 0),
            ));
        }
        remove_staging(&handle, name);
    }

    // 3. Record the result, the stat cache of what was written, and drop the journal.
    let mut batch = WriteBatch::new();
    let verified = now_ns();
    for (_, s) in &mut states {
        s.verified_ns = verified;
    }
    let changes = states
        .iter()
        .map(|(p, s)| (*p, Some(*s)))
        .chain(plan.deleted.iter().map(|p| (p.as_repo_path(), None)));
    // The whole cache if this process kept it (and keeps it again), else what changes.
    let mut kept = ws.kept.take(store, &root);
    let mut dirs = match kept.as_mut() {
        Some(cache) => std::mem::take(&mut cache.dirs),
        None => load_dirs(&reader, &root, &plan.paths())
            .map_err(|e| interrupted(store_failure(cas::ReadError::from(e).into())))?,
    };
    // The listings changed here no longer name their trees: their blob ids come out first.
    let paths = plan.paths();
    let wanted = paths.iter().flat_map(|p| p.ancestors().skip(1)).collect();
    dirstate::resolve_or_forget(&mut dirs, &wanted, &reader);
    for dir in dirstate::record_written(&mut dirs, changes) {
        if let Some(state) = dirs.get(&dir) {
            batch.set_file_state(&root, &dirstate::dir_key(dir.as_bytes()), state.encode());
        }
    }
    drop(reader);
    batch
        .put_worktree(&record)
        .map_err(|e| interrupted(WriteFailure::Registry(e)))?;
    if let Some(entry) = entry {
        batch
            .append_op(&root, &entry)
            .map_err(|e| interrupted(WriteFailure::Registry(e)))?;
    }
    step.finish(batch)
        .map_err(|e| interrupted(store_failure(e.into())))?;
    if let Some(mut cache) = kept {
        cache.dirs = dirs;
        ws.kept.keep(cache, store, &root);
    }
    Ok(())
}

/// The cached states of every directory holding or above one of `paths`.
fn load_dirs(
    reader: &Reader,
    root: &Utf8Path,
    paths: &[RepoPathBuf],
) -> Result<HashMap<RepoPathBuf, DirState>, cas::StorageFailure> {
    let mut wanted: BTreeSet<&RepoPath> = BTreeSet::new();
    for p in paths {
        for up in p.ancestors().skip(1) {
            if !wanted.insert(up) {
                break;
            }
        }
    }
    wanted.insert(RepoPath::root());
    let mut dirs = HashMap::new();
    for dir in wanted {
        if let Some(bytes) = reader.file_state(root, &dirstate::dir_key(dir.as_bytes()))?
            && let Some(state) = DirState::decode(&bytes)
        {
            dirs.insert(dir.to_owned(), state);
        }
    }
    Ok(dirs)
}

/// Writes each new content into the staging folder `name` as `0`, `1`, ...
fn stage(
    root: &path_policy::Root,
    name: &str,
    writes: &[(RepoPathBuf, diff::FileEntry)],
    reader: &Reader,
) -> Result<std::os::fd::OwnedFd, WriteFailure> {
    let fd = root.create_dir_all(name.as_bytes())?;
    writes.par_iter().enumerate().try_for_each(|(i, (_, e))| {
        let rel = format!("{name}/{i}");
        fsops::create(
            root,
            &fd,
            rel.as_bytes(),
            e.kind,
            e.id.as_blob(),
            reader,
            &|_| false,
        )
        .map(|_| ())
    })?;
    Ok(fd)
}

pub(crate) fn remove_staging(root: &path_policy::Root, name: &str) {
    let _ = root.remove_all(name.as_bytes());
}
