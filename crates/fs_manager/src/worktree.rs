//! The worktree registry, as the rest of this crate sees it.

use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use cas::{Reader, Store, WorktreeRecord, WriteBatch};

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

/// Forgets the worktree at `path` and its stat cache; its files are not touched.
pub fn remove(store: &Store, path: &Utf8Path) -> Result<WorktreeRecord, WorktreeError> {
    let reader = store.reader()?;
    let record = reader
        .worktree(path)?
        .or(find(&reader, path)?.filter(|r| r.root == path || same_dir(&r.root, path)))
        .ok_or_else(|| WorktreeError::NotAWorktree {
            path: path.to_owned(),
        })?;
    drop(reader);
    // Not while an operation on it is under way (it writes the same file states).
    let _busy = crate::lock::lock(&record.root);
    let mut batch = WriteBatch::new();
    batch.remove_worktree(&record.root);
    batch.clear_file_states(&record.root);
    store.write(&batch)?;
    crate::watch::forget(&record.root);
    crate::dirstate::Cache::forget_kept(&record.root);
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
