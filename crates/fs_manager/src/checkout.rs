//! `checkout`: hydrate a snapshot into a new or empty directory, in parallel.

use crate::registry::{OpRecord, WorktreeKind, WorktreeRecord};
use crate::registry::{RegistryRead, RegistryWrite};
use crate::shared::Worktrees;
use camino::{Utf8Path, Utf8PathBuf};
use cas::{EntryKind, SnapshotId, Store, WriteBatch};
use rayon::prelude::*;
use std::os::unix::ffi::OsStrExt;

use crate::dirstate;
use crate::error::CheckoutError;
use crate::fsops::{self, WriteFailure};
use crate::journal::Step;
use crate::pending::Pending;
use crate::progress::{Progress, Silent};
use crate::state::{FileState, now_ns};

/// Options of [`checkout`](crate::Worktrees::checkout).
#[derive(Clone, Copy)]
pub struct CheckoutOptions<'a> {
    /// Where progress goes.
    pub progress: &'a dyn Progress,
}

impl Default for CheckoutOptions<'_> {
    fn default() -> Self {
        CheckoutOptions { progress: &Silent }
    }
}

/// What [`checkout`](crate::Worktrees::checkout) did.
#[derive(Debug, Clone)]
pub struct CheckoutOutcome {
    /// The new worktree's root (canonical).
    pub worktree: Utf8PathBuf,
    /// The snapshot checked out.
    pub snapshot: SnapshotId,
    /// Files and symlinks written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

fn failure(e: WriteFailure) -> CheckoutError {
    match e {
        WriteFailure::Io(path, source) => CheckoutError::Io { path, source },
        WriteFailure::Store(e) => CheckoutError::Store(e.into()),
        WriteFailure::Record(e) => CheckoutError::Store(e),
        WriteFailure::Registry(e) => CheckoutError::Registry(e),
        WriteFailure::Blocked(path, reason) => CheckoutError::Io {
            path,
            source: std::io::Error::other(reason),
        },
    }
}

/// Hydrates `snapshot` into `dest`, which must be missing, an empty directory, or the
/// missing or empty folder of a registered worktree; registers it as an isolated worktree
/// with a filled stat cache, so its next snapshot reads no file. A refused destination is
/// left untouched; if writing fails half way, what was written is removed again.
pub(crate) fn checkout(
    ws: &Worktrees,
    store: &Store,
    snapshot: SnapshotId,
    dest: &Utf8Path,
    options: &CheckoutOptions<'_>,
) -> Result<CheckoutOutcome, CheckoutError> {
    let reader = store.reader()?;
    let snap = reader.snapshot(snapshot)?;
    let files = crate::build::flatten(&reader, snap.tree)?;
    // Names were checked when the trees were decoded; whole paths are checked here, before
    // anything is written.
    for f in &files {
        if let Err(e) = path_policy::check_path(f.path.as_bytes()) {
            let path = f.path.to_fs_path(dest.as_std_path());
            return Err(CheckoutError::Refused {
                path,
                reason: e.reason(),
            });
        }
    }
    // One checkout into a folder at a time: the emptiness check below must still hold when
    // writing starts.
    let _dest_busy = ws.locks.lock(dest);
    let previous = reader.worktree(dest)?;
    for path in [
        Some(dest.to_owned()),
        std::fs::canonicalize(dest)
            .ok()
            .and_then(|p| Utf8PathBuf::from_path_buf(p).ok()),
    ]
    .into_iter()
    .flatten()
    {
        match crate::journal::ensure_clear(&reader, &path) {
            Ok(()) => {}
            Err(crate::journal::JournalCheck::Interrupted(i)) => return Err(i.into()),
            Err(crate::journal::JournalCheck::Store(e)) => return Err(e.into()),
            Err(crate::journal::JournalCheck::Registry(e)) => return Err(e.into()),
        }
    }

    let created = match dest.symlink_metadata() {
        Ok(m) if !m.is_dir() => {
            return Err(CheckoutError::NotADirectory {
                path: dest.to_owned(),
            });
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(dest).map_err(|source| CheckoutError::Io {
                path: dest.into(),
                source,
            })?;
            if entries.next().is_some() {
                return Err(CheckoutError::NotEmpty {
                    path: dest.to_owned(),
                });
            }
            false
        }
        Err(_) => {
            // A file above it is bad input, not an I/O failure: say which.
            if let Some(file) = dest
                .ancestors()
                .skip(1)
                .find(|a| std::fs::metadata(a).is_ok_and(|m| !m.is_dir()))
            {
                return Err(CheckoutError::UnderAFile {
                    path: dest.to_owned(),
                    file: file.to_owned(),
                });
            }
            std::fs::create_dir_all(dest).map_err(|source| CheckoutError::Io {
                path: dest.into(),
                source,
            })?;
            true
        }
    };
    let root = std::fs::canonicalize(dest)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .ok_or_else(|| CheckoutError::NotADirectory {
            path: dest.to_owned(),
        })?;
    // A path the system cannot take from `/` under this root would be written, and then
    // out of every capture's reach.
    if let Some(f) = files
        .iter()
        .find(|f| crate::rules::beyond_reach(root.as_std_path(), f.path.as_bytes()))
    {
        if created {
            let _ = std::fs::remove_dir(&root);
        }
        return Err(CheckoutError::Refused {
            path: f.path.to_fs_path(dest.as_std_path()),
            reason: "path-too-long: longer than the system takes from / under this destination",
        });
    }
    let _busy = (root != dest).then(|| ws.locks.lock(&root));
    if let Some(store_dir) = crate::worktree::store_dir(store)
        && (root.as_std_path().starts_with(&store_dir) || store_dir.starts_with(root.as_std_path()))
    {
        if created {
            let _ = std::fs::remove_dir(&root);
        }
        return Err(CheckoutError::InsideStore {
            path: dest.to_owned(),
            store: store.root().to_owned(),
        });
    }

    let time = jiff::Timestamp::now();
    let record = WorktreeRecord {
        head: Some(snapshot),
        include_denied: previous.as_ref().is_some_and(|p| p.include_denied),
        max_file_size: previous.as_ref().and_then(|p| p.max_file_size),
        created: time,
        identity: crate::root::identity_of(&root),
        ..WorktreeRecord::new(root.clone(), WorktreeKind::Isolated)
    };
    let entry = OpRecord::new("checkout", previous.and_then(|p| p.head), Some(snapshot));
    // A crash from here on leaves the journal: `recover` finishes the hydration.
    let journal = crate::journal::Journal {
        op: "checkout".into(),
        pid: std::process::id(),
        staging: None,
        target: snap.tree,
        paths: None,
        record: record.clone(),
        entry: Some(entry.clone()),
        started: time,
    };
    let step = match Step::begin(store, &root, &journal, Pending::default()) {
        Ok(step) => step,
        Err(e) => {
            clean_up(&root, created);
            return Err(failure(e));
        }
    };
    let forget = |e: CheckoutError| {
        clean_up(&root, created);
        step.abandon();
        e
    };

    let mut states = hydrate(store, &root, &files, options.progress).map_err(forget)?;
    // Nothing else writes into a worktree while it is checked out, so every entry is as good
    // as verified now; files written within the racy margin of now are read once more.
    let verified = now_ns();
    for (_, state) in &mut states {
        state.verified_ns = verified;
    }
    let mut batch = WriteBatch::new();
    batch.clear_file_states(&root);
    let mut dirs = std::collections::HashMap::new();
    let touched = dirstate::record_written(
        &mut dirs,
        states.iter().map(|(p, s)| (p.as_slice(), Some(*s))),
    );
    for dir in touched {
        if let Some(state) = dirs.get(&dir) {
            batch.set_file_state(&root, &dirstate::dir_key(&dir), state.encode());
        }
    }
    batch.put_worktree(&record).map_err(|e| forget(e.into()))?;
    batch
        .append_op(&root, &entry)
        .map_err(|e| forget(e.into()))?;
    drop(reader);
    step.finish(batch).map_err(|e| forget(e.into()))?;
    Ok(CheckoutOutcome {
        worktree: root,
        snapshot,
        files: files.len() as u64,
        bytes: files.iter().map(|f| f.size).sum(),
    })
}

fn hydrate(
    store: &Store,
    root: &Utf8Path,
    files: &[crate::scan::FileRecord],
    progress: &dyn Progress,
) -> Result<Vec<(Vec<u8>, FileState)>, CheckoutError> {
    let root = path_policy::Root::open(root.as_std_path()).map_err(|e| failure(e.into()))?;
    let root = &root;
    progress.start(
        "checkout",
        files.len() as u64,
        files.iter().map(|f| f.size).sum(),
    );
    // Directories first, parents before children (files are in tree order).
    let mut last_dir: &[u8] = &[];
    for f in files {
        let dir = f.path.split_parent().0.as_bytes();
        if dir != last_dir {
            fsops::ensure_dir(root, dir).map_err(failure)?;
            last_dir = dir;
        }
    }
    // Regular files in parallel, one directory handle per directory; symlinks last.
    let mut by_dir: std::collections::BTreeMap<&[u8], Vec<&crate::scan::FileRecord>> =
        Default::default();
    for f in files.iter().filter(|f| f.kind != EntryKind::Symlink) {
        by_dir
            .entry(f.path.split_parent().0.as_bytes())
            .or_default()
            .push(f);
    }
    let reader = store.reader()?;
    let groups: Vec<(&[u8], Vec<&crate::scan::FileRecord>)> = by_dir.into_iter().collect();
    let mut states: Vec<(Vec<u8>, FileState)> = groups
        .par_iter()
        .map(|(dir_rel, group)| {
            let dir = root.open_dir(dir_rel).map_err(|e| failure(e.into()))?;
            group
                .par_iter()
                .map(|f| {
                    let st = fsops::create(root, &dir, f.path.as_bytes(), f.kind, f.blob, &reader)
                        .map_err(failure)?;
                    progress.advance(1, f.size);
                    // Stat-cache keys stay the path's bytes.
                    Ok((
                        f.path.as_bytes().to_vec(),
                        FileState::from_stat(&st, f.blob, 0),
                    ))
                })
                .collect::<Result<Vec<_>, CheckoutError>>()
        })
        .collect::<Result<Vec<Vec<_>>, CheckoutError>>()?
        .into_iter()
        .flatten()
        .collect();
    for f in files.iter().filter(|f| f.kind == EntryKind::Symlink) {
        let dir = root
            .open_dir(f.path.split_parent().0.as_bytes())
            .map_err(|e| failure(e.into()))?;
        let st = fsops::create(root, &dir, f.path.as_bytes(), f.kind, f.blob, &reader)
            .map_err(failure)?;
        progress.advance(1, f.size);
        states.push((
            f.path.as_bytes().to_vec(),
            FileState::from_stat(&st, f.blob, 0),
        ));
    }
    progress.finish();
    Ok(states)
}

/// Empties the root of a failed checkout through its handle (nothing beneath a symlink
/// is touched), and removes it if checkout made it.
fn clean_up(root: &Utf8Path, created: bool) {
    let Ok(handle) = path_policy::Root::open(root.as_std_path()) else {
        return;
    };
    for name in handle.names().unwrap_or_default() {
        let _ = handle.remove_all(name.as_bytes());
    }
    if created {
        let _ = std::fs::remove_dir(root);
    }
}
