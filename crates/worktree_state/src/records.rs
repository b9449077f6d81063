//! The worktree registry, as the rest of this crate sees it.

use crate::kept::Kept;
use worktree_registry::{RegistryRead, RegistryWrite};

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Reader, Store, WriteBatch};
use worktree_registry::{OpRecord, WorktreeRecord};

use crate::error::{CaptureError, WorktreeError};
use crate::root::verify_root;

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
            return Err(worktree_scope::ScanError::Io {
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
) -> Result<Option<WorktreeRecord>, worktree_registry::RegistryError> {
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
pub fn remove(ws: &Kept, store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
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

/// `cairn worktree rebind PATH`: accepts that the registered root at `path` is now another
/// directory. Its stat cache is dropped (every file is read afresh next time); its head,
/// checkpoints and op log stay. A symlink is refused.
pub fn rebind(ws: &Kept, store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
    let found = rooted_at(store, path)?;
    let _busy = ws.locks.lock(&found.root);
    let mut record = store.reader()?.worktree(&found.root)?.unwrap_or(found);
    let before = record.identity.take();
    verify_root::<WorktreeError>(&mut record, store)?;
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
    batch.put_worktree(&record)?;
    batch.append_op(
        &record.root,
        &OpRecord::new("rebind", record.head, record.head),
    )?;
    store.write(&batch)?;
    if let Some(w) = &ws.watcher {
        w.forget(&record.root);
    }
    ws.kept.forget(&record.root);
    Ok(record)
}

/// Changes the sandbox grants and grant requests of the worktree rooted at `root` under its
/// lock, in one transaction: `change` edits them and returns the op-log entry to record, or
/// `None` if nothing changed.
pub fn change_grants<E: From<WorktreeError>>(
    ws: &Kept,
    store: &Store,
    root: &Utf8Path,
    change: impl FnOnce(
        &mut worktree_registry::SandboxGrants,
        &mut worktree_registry::GrantRequests,
    ) -> Result<Option<OpRecord>, E>,
) -> Result<WorktreeRecord, E> {
    let found = rooted_at(store, root)?;
    let _busy = ws.locks.lock(&found.root);
    let reader = store.reader().map_err(WorktreeError::from)?;
    let mut record = reader
        .worktree(&found.root)
        .map_err(WorktreeError::from)?
        .unwrap_or(found);
    drop(reader);
    let Some(entry) = change(&mut record.grants, &mut record.requests)? else {
        return Ok(record);
    };
    let mut batch = WriteBatch::new();
    batch.put_worktree(&record).map_err(WorktreeError::from)?;
    batch
        .append_op(&record.root, &entry)
        .map_err(WorktreeError::from)?;
    store.write(&batch).map_err(WorktreeError::from)?;
    Ok(record)
}
