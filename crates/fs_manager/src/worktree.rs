//! The worktree registry, as the rest of this crate sees it.

use crate::Worktrees;
use std::path::Path;

use std::os::unix::fs::MetadataExt;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{DirIdentity, OpRecord, Reader, Store, WorktreeRecord, WriteBatch};

use crate::error::{CaptureError, WorktreeError};

/// The absolute, symlink-free form of an existing directory, as UTF-8.
pub(crate) fn canonical(path: &Utf8Path) -> Result<Utf8PathBuf, CaptureError> {
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CaptureError::Missing {
                path: path.to_owned(),
            });
        }
        Err(source) => {
            return Err(crate::error::ScanError::Io {
                path: path.as_std_path().to_owned(),
                source,
            }
            .into());
        }
    };
    if !real.is_dir() {
        return Err(CaptureError::NotADirectory {
            path: path.to_owned(),
        });
    }
    Utf8PathBuf::from_path_buf(real).map_err(|p| CaptureError::NotUtf8 { path: p })
}

/// The registered worktree whose root is `path` or the nearest ancestor of it. `path` is
/// compared as given and in its canonical form, so a deleted worktree folder still matches.
pub fn find(
    reader: &Reader,
    path: &Utf8Path,
) -> Result<Option<WorktreeRecord>, cas::RegistryError> {
    let canonical = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok());
    let mut candidates = vec![path.to_owned()];
    candidates.extend(canonical);
    for candidate in candidates {
        for dir in candidate.ancestors() {
            if let Some(record) = reader.worktree(dir)? {
                return Ok(Some(record));
            }
        }
    }
    Ok(None)
}

/// Every registered worktree.
pub fn list(store: &Store) -> Result<Vec<WorktreeRecord>, WorktreeError> {
    Ok(store.reader()?.worktrees()?)
}

/// The worktree whose root is `path` (as given or canonical; a path inside one is not it).
fn rooted_at(store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
    let reader = store.reader()?;
    reader
        .worktree(path)?
        .or(find(&reader, path)?.filter(|r| r.root == path || same_dir(&r.root, path)))
        .ok_or_else(|| WorktreeError::NotAWorktree {
            path: path.to_owned(),
        })
}

/// Forgets the worktree at `path` and its stat cache; its files are not touched.
pub(crate) fn remove(
    ws: &Worktrees,
    store: &Store,
    path: &Utf8Path,
) -> Result<WorktreeRecord, WorktreeError> {
    let record = rooted_at(store, path)?;
    // Not while an operation on it is under way (it writes the same file states).
    let _busy = ws.locks.lock(&record.root);
    let mut batch = WriteBatch::new();
    batch.remove_worktree(&record.root);
    batch.clear_file_states(&record.root);
    store.write(&batch)?;
    if let Some(w) = &ws.watcher {
        w.forget(&record.root);
    }
    ws.kept.forget(&record.root);
    Ok(record)
}

fn same_dir(a: &Utf8Path, b: &Utf8Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The store folder, canonical, to keep it out of every scope.
pub(crate) fn store_dir(store: &Store) -> Option<std::path::PathBuf> {
    std::fs::canonicalize(Path::new(store.root().as_str())).ok()
}

/// A registered worktree's root is no longer the directory cairn registered: it was swapped
/// for a symlink or another directory behind cairn's back. Nothing is read or recorded.
#[derive(Debug, thiserror::Error)]
#[error("worktree {root} {reason}; nothing was read or recorded: {advice}")]
pub struct RootChanged {
    /// The registered root.
    pub root: Utf8PathBuf,
    /// What it is now.
    pub reason: &'static str,
    /// What the user can do.
    pub advice: String,
}

fn identity(meta: &std::fs::Metadata) -> DirIdentity {
    DirIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

/// The identity of the directory at `root` (not following a symlink), if it is one.
pub(crate) fn identity_of(root: &Utf8Path) -> Option<DirIdentity> {
    root.symlink_metadata()
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| identity(&m))
}

/// Checks that `record`'s root is still the directory it registered. A root that is gone
/// passes (the caller reports it, or `checkout` fills it again); a record from before
/// identities were kept takes the directory's now.
pub(crate) fn verify_root(record: &mut WorktreeRecord) -> Result<(), RootChanged> {
    let root = &record.root;
    let refuse = |reason, advice: String| {
        Err(RootChanged {
            root: root.clone(),
            reason,
            advice,
        })
    };
    let meta = match root.symlink_metadata() {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if meta.file_type().is_symlink() {
        return refuse(
            "is now a symlink (cairn never follows one)",
            format!(
                "put the directory back at {root}, or `cairn worktree remove {root}` and onboard the directory the link points to"
            ),
        );
    }
    if !meta.is_dir() {
        return refuse(
            "is no longer a directory",
            format!("put the directory back at {root}, or `cairn worktree remove {root}`"),
        );
    }
    match record.identity {
        Some(known) if known != identity(&meta) => refuse(
            "is another directory than the one registered (it was replaced or moved)",
            format!("if this directory is the worktree now, run `cairn worktree rebind {root}`"),
        ),
        Some(_) => Ok(()),
        None => {
            record.identity = Some(identity(&meta));
            Ok(())
        }
    }
}

/// `cairn worktree rebind PATH`: accepts that the registered root at `path` is now another
/// directory. Its stat cache is dropped (every file is read afresh next time); its head,
/// checkpoints and op log stay. A symlink is refused.
pub(crate) fn rebind(
    ws: &Worktrees,
    store: &Store,
    path: &Utf8Path,
) -> Result<WorktreeRecord, WorktreeError> {
    let found = rooted_at(store, path)?;
    let _busy = ws.locks.lock(&found.root);
    let mut record = store.reader()?.worktree(&found.root)?.unwrap_or(found);
    let before = record.identity.take();
    verify_root(&mut record)?;
    if record.identity.is_none() {
        return Err(WorktreeError::Missing {
            path: record.root.clone(),
        });
    }
    if record.identity == before {
        return Ok(record);
    }
    let mut batch = WriteBatch::new();
    batch.clear_file_states(&record.root);
    batch.put_worktree(record.clone());
    batch.append_op(
        &record.root,
        OpRecord::new("rebind", record.head, record.head),
    );
    store.write(&batch)?;
    if let Some(w) = &ws.watcher {
        w.forget(&record.root);
    }
    ws.kept.forget(&record.root);
    Ok(record)
}
